"""The quiz and the rubric of the workshop kit (teaching/kit/): fair, and fitting the labs.

- The quiz (quiz.md) cannot be passed by its form: every question has four options, one
  right; the right answers are spread over A-D (each letter 15-35% of the questions, never
  the same letter more than three questions running); the right answer is the strictly
  longest option in at most 30% of the questions and the strictly shortest in at most 30%,
  and its mean length rank (0 = shortest, 3 = longest) lies in the middle, 1.0 to 2.0. The
  quiz this replaced (right answer longest in 38 of 39, B in 27) fails every one of these;
  the checks are also run on quizzes made bad on purpose, so that they cannot pass
  anything. The answer key at its end matches the marked answers.
- The rubric (rubric.md) has a section per lab of the workshop, its rows naming exactly
  the exercises the agenda gives that lab, 3 or 4 rows, one marked for a quick marking;
  every output a row quotes from "the lesson's run" is in that lesson's stored outputs;
  the hand-in's marking time adds up from its rows.
Nothing is executed: the files are read as text.
"""
import re
from statistics import mean

import pytest
from conftest import NOTEBOOKS, ROOT, cells

KIT = ROOT / "teaching" / "kit"
QUIZ, RUBRIC, WORKSHOP = KIT / "quiz.md", KIT / "rubric.md", KIT / "workshop.md"
LETTERS = "ABCD"
# The limits: a quiz whose form gives an answer away fails at least one.
SHARE = (0.15, 0.35)        # each letter's share of the right answers
LONGEST_RUN = 3             # the same letter at most this many questions in a row
LONGEST_SHARE = 0.30        # right answer strictly the longest option
SHORTEST_SHARE = 0.30       # right answer strictly the shortest option
MEAN_RANK = (1.0, 2.0)      # right answer's mean length rank, 0 (shortest) to 3 (longest)
PAIRS = 15                  # the room the rubric's marking time is planned for


def parse_quiz(text):
    """[(number, question, [(right?, option)])] of a quiz in quiz.md's format."""
    found = []
    for line in text.splitlines():
        if m := re.match(r"### (\d+\.\d) (.*)", line):
            found.append((m[1], m[2], []))
        elif (m := re.match(r"- \[([ x])\] (.*)", line)) and found:
            found[-1][2].append((m[1] == "x", m[2]))
    return found


def right_index(options):
    return [right for right, _ in options].index(True)


def length_rank(options):
    """How many other options are shorter than the right one (ties count half): 0 to 3."""
    lengths = [len(text) for _, text in options]
    own = lengths.pop(right_index(options))
    return sum(n < own for n in lengths) + 0.5 * sum(n == own for n in lengths)


def form_problems(quiz):
    """What, in the quiz's form alone, points at the right answers (empty: nothing)."""
    problems, n = [], len(quiz)
    letters = "".join(LETTERS[right_index(options)] for _, _, options in quiz)
    for letter in LETTERS:
        share = letters.count(letter) / n
        if not SHARE[0] <= share <= SHARE[1]:
            problems.append(f"{letter} is right in {letters.count(letter)} of {n} questions "
                            f"({share:.0%}; {SHARE[0]:.0%} to {SHARE[1]:.0%} allowed)")
    for run in re.finditer(r"(.)\1{%d,}" % LONGEST_RUN, letters):
        problems.append(f"{run[1]} is right {len(run[0])} times running, from question "
                        f"{quiz[run.start()][0]}")
    ranks = [length_rank(options) for _, _, options in quiz]
    longest, shortest = sum(r == 3 for r in ranks), sum(r == 0 for r in ranks)
    if longest > LONGEST_SHARE * n:
        problems.append(f"the right answer is the longest option in {longest} of {n} questions")
    if shortest > SHORTEST_SHARE * n:
        problems.append(f"the right answer is the shortest option in {shortest} of {n} questions")
    if not MEAN_RANK[0] <= mean(ranks) <= MEAN_RANK[1]:
        problems.append(f"the right answer's mean length rank is {mean(ranks):.2f} "
                        f"(0 shortest, 3 longest; {MEAN_RANK[0]} to {MEAN_RANK[1]} allowed)")
    return problems


@pytest.fixture(scope="module")
def quiz():
    return parse_quiz(QUIZ.read_text(encoding="utf-8"))


# --- the quiz ---------------------------------------------------------------------------

def test_every_question_has_four_options_and_one_right_answer(quiz):
    assert len(quiz) >= 30, f"quiz.md: {len(quiz)} questions found; is the format still '### N.M' and '- [x]'?"
    for number, _, options in quiz:
        assert len(options) == 4, f"quiz {number}: {len(options)} options, four wanted (A-D)"
        assert sum(right for right, _ in options) == 1, f"quiz {number}: exactly one right answer"


def test_the_quizs_form_gives_no_answer_away(quiz):
    assert not form_problems(quiz), "quiz.md: " + "; ".join(form_problems(quiz))


def _pointed(quiz, *, move_to=None, lengthen=0):
    """The quiz with every right answer moved to one letter and/or made longer or shorter."""
    out = []
    for number, question, options in quiz:
        options = list(options)
        right = options.pop(right_index(options))
        text = right[1] + " because" * lengthen if lengthen >= 0 else right[1][:12]
        at = LETTERS.index(move_to) if move_to else right_index(quiz[len(out)][2])
        options.insert(at, (True, text))
        out.append((number, question, options))
    return out


def test_the_checks_catch_a_quiz_whose_form_points_at_the_answers(quiz):
    # What the replaced quiz did: the right answer the longest, nearly always B.
    old = form_problems(_pointed(quiz, move_to="B", lengthen=40))
    assert any("B is right" in p for p in old) and any("times running" in p for p in old)
    assert any("longest option" in p for p in old) and any("mean length rank" in p for p in old)
    # Letters balanced but the right answer always the longest, or always the shortest.
    assert any("longest option" in p for p in form_problems(_pointed(quiz, lengthen=40)))
    assert any("shortest option" in p for p in form_problems(_pointed(quiz, lengthen=-1)))
    # A run of four of one letter in an otherwise fair quiz.
    runs = list(quiz)
    for k in range(4):
        runs[k] = _pointed([quiz[k]], move_to="A" if LETTERS[right_index(quiz[4][2])] != "A" else "B")[0]
    assert [p for p in form_problems(runs) if "4 times running, from question 1.1" in p]


def test_the_answer_key_matches_the_marked_answers(quiz):
    text = QUIZ.read_text(encoding="utf-8")
    key = {f"{m[1]}.{k}": letter for m in re.finditer(r"^\| (\d+) \| ([A-D]) \| ([A-D]) \| ([A-D]) \|$", text, re.M)
           for k, letter in enumerate(m.groups()[1:], 1)}
    marked = {number: LETTERS[right_index(options)] for number, _, options in quiz}
    assert key == marked, "quiz.md: the answer key at the end does not match the [x] marks: " + ", ".join(
        f"{n} key {key.get(n)} marked {marked.get(n)}" for n in sorted(set(key) | set(marked))
        if key.get(n) != marked.get(n))


def test_the_answers_the_issue_corrected_stay_corrected(quiz):
    by_number = {number: options for number, _, options in quiz}
    # 13.1: lesson 4 shows a read every 50-100 steps costs little, so not "every wait must go".
    right = next(text for r, text in by_number["13.1"] if r)
    assert not re.search(r"every wait|all must go|one left", right), right
    # 3.1: no wrong answer may restate the lesson's own caveat about fitting across cache sizes.
    assert not any("sizes measured" in text or "cache-resident" in text for _, text in by_number["3.1"])


# --- the rubric -------------------------------------------------------------------------

def _labs_in_agenda():
    text = WORKSHOP.read_text(encoding="utf-8")
    return {int(m[1]): _exercises(m[2]) for m in re.finditer(r"\| \*\*Lab (\d)\*\*: ([^|]+)\|", text)}


def _exercises(text):
    """{(lesson, exercise)} named as 'lesson N exercise E' or 'lesson N exercises E and F'."""
    return {(int(lesson), int(n)) for lesson, *numbers in
            re.findall(r"lesson (\d+) exercises? (\d+)(?: and (\d+))?", text) for n in numbers if n}


def _rubric_labs():
    """{lab: [(row name, [2, 1, 0 texts])]} of rubric.md's per-lab tables."""
    labs, lab = {}, None
    for line in RUBRIC.read_text(encoding="utf-8").splitlines():
        if m := re.match(r"## Lab (\d+):", line):
            lab = labs.setdefault(int(m[1]), [])
        elif line.startswith("## "):
            lab = None
        elif lab is not None and line.startswith("| **"):
            name, *marks = [c.strip() for c in line.strip().strip("|").split("|")]
            lab.append((name, marks))
    return labs


def test_the_rubric_has_a_table_per_lab_naming_that_labs_exercises():
    agenda, rubric = _labs_in_agenda(), _rubric_labs()
    assert sorted(agenda) == [1, 2, 3, 4], f"workshop.md: labs {sorted(agenda)}"
    assert sorted(rubric) == sorted(agenda), f"rubric.md has sections for labs {sorted(rubric)}, the agenda {sorted(agenda)}"
    for lab, rows in rubric.items():
        assert 3 <= len(rows) <= 4, f"rubric.md, lab {lab}: {len(rows)} rows, 3 or 4 wanted"
        for name, marks in rows:
            assert len(marks) == 3 and all(marks), f"rubric.md, lab {lab}, {name}: a text for 2, 1 and 0 points"
        named = set().union(*(_exercises(name) for name, _ in rows))
        assert named == agenda[lab], (f"rubric.md, lab {lab}: its rows name exercises {sorted(named)}, "
                                      f"the agenda gives the lab {sorted(agenda[lab])}")
        assert sum("★" in name for name, _ in rows) == 1, f"rubric.md, lab {lab}: mark one row ★ for quick marking"


def _outputs(lesson):
    notebook = next(nb for nb in NOTEBOOKS if nb.name.startswith(f"{lesson:02d}_"))
    return "\n".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                     for c in cells(notebook) for o in c.get("outputs", []))


def test_what_the_rubric_quotes_from_a_lessons_run_is_in_its_stored_outputs():
    quoted = 0
    for lab, rows in _rubric_labs().items():
        for name, marks in rows:
            lessons = {lesson for lesson, _ in _exercises(name)}
            for text in marks:
                for clause in re.findall(r"lesson's run(.*?)(?:;|$)", text):
                    for quote in re.findall(r"`([^`]+)`", clause):
                        quoted += 1
                        assert any(quote in _outputs(lesson) for lesson in lessons), (
                            f"rubric.md, lab {lab}, {name}: `{quote}` is not in the stored outputs of "
                            f"lesson {sorted(lessons)}; the lesson was run again: quote its new output")
    assert quoted >= 5, "the rubric's reference values from the lessons' runs were not found"


def test_the_hand_in_and_its_marking_time_add_up():
    text = " ".join(RUBRIC.read_text(encoding="utf-8").split())
    assert "## Handing in" in RUBRIC.read_text(encoding="utf-8")
    seconds = int(re.search(r"about (\d+) seconds a row", text)[1])
    total = int(re.search(r"about (\d+) minutes for the four labs", text)[1])
    quick = int(re.search(r"about (\d+) minutes a lab for (\d+) pairs\)", text)[1])
    assert f"{PAIRS} pairs" in text
    rows = sum(len(r) for r in _rubric_labs().values())
    assert abs(rows * PAIRS * seconds / 60 - total) <= 0.1 * total, (
        f"rubric.md: {rows} rows x {PAIRS} pairs x {seconds} s is {rows * PAIRS * seconds / 60:.0f} minutes, "
        f"not the {total} it states")
    assert abs(PAIRS * seconds / 60 - quick) <= 1, "rubric.md: the quick marking's time (one row a lab)"


def test_the_rubric_does_not_fault_an_exact_comparison_where_the_lessons_use_one():
    text = RUBRIC.read_text(encoding="utf-8")
    assert "compares floats with `==`" not in text
    assert "torch.equal" in text
