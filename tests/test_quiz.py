"""The quiz and the rubric of the workshop kit (teaching/kit/): fair, and fitting the labs.

- The quiz (quiz.md) cannot be passed by its form: every question has four options, one
  right. No rule that ignores the questions scores above 35% (chance: 25%): neither picking
  one letter every time (A, B, C or D) nor picking by length (the longest option, the
  second longest, the second shortest or the shortest; ties shared), on the workshop's part
  (lessons 1-13), on the optional part and on the whole quiz. Each letter is right in at
  least 15% of the questions, never more than three questions running; the right answer is
  the longest option in at most 30% of them and the shortest in at most 30%, and its mean
  length rank (0 = shortest, 3 = longest) lies in the middle, 1.0 to 2.0. Lengths are those a
  student reads: without the backticks. The quiz before issue 41 (the second longest option
  right in 50% of the questions) fails, and so do quizzes made bad on purpose, so that the
  checks cannot pass anything. The answer key at its end matches the marked answers.
- What the quiz asks on a workshop day was taught that day: each question names the
  sections it asks about (*From* § "..."), which include every section of the lesson's core
  that its teacher's page's answer cites (by § or by a GPU cell's id). A workshop question
  names no section that the agenda cuts (§ "What each lecture cuts" of workshop.md, with
  the sections under it) and no section of the depth, and at least one its slides show; a
  question in the optional part has a reason to be there (a section the day does not show,
  or a lesson without a slot). A number the quiz attributes to "the lesson" is in its stored outputs.
- The students' copy (tools/quiz.py) has every question and option and no answer mark.
- The rubric (rubric.md) has a section per lab of the workshop, its rows naming exactly
  the exercises the agenda gives that lab, 3 or 4 rows, one marked for a quick marking;
  every output a row quotes from "the lesson's run" is in that lesson's stored outputs;
  the hand-in's marking time adds up from its rows.
Nothing is executed: the files are read as text.
"""
import re
import sys
from statistics import mean

import nbformat
import pytest
from conftest import NOTEBOOKS, ROOT, cells

import agenda  # tools/ is put on sys.path by conftest.py
import handouts
import quiz as quiz_tool
import sitting
import slides

KIT = ROOT / "teaching" / "kit"
QUIZ, RUBRIC, WORKSHOP = KIT / "quiz.md", KIT / "rubric.md", KIT / "workshop.md"
LETTERS = "ABCD"
# The limits: a quiz whose form gives an answer away fails at least one.
RULE_SCORE = 0.35           # the most any answer-picking rule (a letter, a length rank) may score
SHARE_LOW = 0.15            # each letter's least share of the right answers
LONGEST_RUN = 3             # the same letter at most this many questions in a row
LONGEST_SHARE = 0.30        # right answer strictly the longest option
SHORTEST_SHARE = 0.30       # right answer strictly the shortest option
MEAN_RANK = (1.0, 2.0)      # right answer's mean length rank, 0 (shortest) to 3 (longest)
PAIRS = 15                  # the room the rubric's marking time is planned for
OPTIONAL = "## Optional questions"
# The two questions worded more tightly than on their teacher's pages (issue 41).
REWORDED = {"1.2", "8.3"}
RANK_NAMES = ("the longest", "the second longest", "the second shortest", "the shortest")


def parse_quiz(text):
    """[(number, question, [(right?, option)])] of a quiz in quiz.md's format."""
    found = []
    for line in text.split("## Answer key")[0].splitlines():
        if m := re.match(r"### (\d+\.\d) (.*)", line):
            found.append((m[1], m[2], []))
        elif (m := re.match(r"- \[([ x])\] (.*)", line)) and found:
            found[-1][2].append((m[1] == "x", m[2]))
    return found


def parts(text):
    """{'workshop': [...], 'optional': [...], 'whole': [...]}: the quiz's parts, parsed."""
    day, _, optional = text.split("## Answer key")[0].partition(OPTIONAL)
    return {"workshop": parse_quiz(day), "optional": parse_quiz(optional), "whole": parse_quiz(text)}


def right_index(options):
    return [right for right, _ in options].index(True)


def shown_length(text):
    """The option's length as a student reads it: markdown's backticks are not printed."""
    return len(text.replace("`", ""))


def length_rank(options):
    """How many other options are shorter than the right one (ties count half): 0 to 3."""
    lengths = [shown_length(text) for _, text in options]
    own = lengths.pop(right_index(options))
    return sum(n < own for n in lengths) + 0.5 * sum(n == own for n in lengths)


def rule_scores(quiz):
    """{rule: share of the questions it answers right}, for every rule that reads only the
    form: 'always A' ... 'always D', and 'the longest' ... 'the shortest' option (an option
    tied in length with others is picked with their share of the chance)."""
    n, scores = len(quiz), {}
    for k, letter in enumerate(LETTERS):
        scores[f"always {letter}"] = sum(right_index(options) == k for _, _, options in quiz) / n
    for k, name in enumerate(RANK_NAMES):
        got = 0.0
        for _, _, options in quiz:
            lengths = [shown_length(text) for _, text in options]
            picked = sorted(lengths, reverse=True)[k]
            tied = [i for i, length in enumerate(lengths) if length == picked]
            got += (right_index(options) in tied) / len(tied)
        scores[f"{name} option"] = got / n
    return scores


def form_problems(quiz, name="quiz"):
    """What, in the quiz's form alone, points at the right answers (empty: nothing)."""
    problems, n = [], len(quiz)
    for rule, score in rule_scores(quiz).items():
        if score > RULE_SCORE:
            problems.append(f"{name}: '{rule}' scores {score:.0%} ({RULE_SCORE:.0%} allowed)")
    letters = "".join(LETTERS[right_index(options)] for _, _, options in quiz)
    for letter in LETTERS:
        if letters.count(letter) < SHARE_LOW * n:
            problems.append(f"{name}: {letter} is right in {letters.count(letter)} of {n} questions "
                            f"(at least {SHARE_LOW:.0%} wanted)")
    for run in re.finditer(r"(.)\1{%d,}" % LONGEST_RUN, letters):
        problems.append(f"{name}: {run[1]} is right {len(run[0])} times running, from question "
                        f"{quiz[run.start()][0]}")
    ranks = [length_rank(options) for _, _, options in quiz]
    longest, shortest = sum(r == 3 for r in ranks), sum(r == 0 for r in ranks)
    if longest > LONGEST_SHARE * n:
        problems.append(f"{name}: the right answer is the longest option in {longest} of {n} questions")
    if shortest > SHORTEST_SHARE * n:
        problems.append(f"{name}: the right answer is the shortest option in {shortest} of {n} questions")
    if not MEAN_RANK[0] <= mean(ranks) <= MEAN_RANK[1]:
        problems.append(f"{name}: the right answer's mean length rank is {mean(ranks):.2f} "
                        f"(0 shortest, 3 longest; {MEAN_RANK[0]} to {MEAN_RANK[1]} allowed)")
    return problems


@pytest.fixture(scope="module")
def quiz():
    return parse_quiz(QUIZ.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def quiz_parts():
    return parts(QUIZ.read_text(encoding="utf-8"))


# --- the quiz ---------------------------------------------------------------------------

def test_every_question_has_four_options_and_one_right_answer(quiz):
    assert len(quiz) >= 30, f"quiz.md: {len(quiz)} questions found; is the format still '### N.M' and '- [x]'?"
    for number, _, options in quiz:
        assert len(options) == 4, f"quiz {number}: {len(options)} options, four wanted (A-D)"
        assert sum(right for right, _ in options) == 1, f"quiz {number}: exactly one right answer"


@pytest.mark.parametrize("part", ["workshop", "optional", "whole"])
def test_the_quizs_form_gives_no_answer_away(quiz_parts, part):
    found = quiz_parts[part]
    assert len(found) >= (30 if part != "optional" else 8), f"quiz.md, {part}: {len(found)} questions"
    problems = form_problems(found, part)
    assert not problems, "quiz.md: " + "; ".join(problems)


def test_every_answer_picking_rule_is_scored(quiz):
    scores = rule_scores(quiz)
    assert len(scores) == 8 and all(0 <= s <= 1 for s in scores.values())
    # The letters' rules add up to 1, and so do the length ranks' (ties shared).
    assert abs(sum(scores[f"always {x}"] for x in LETTERS) - 1) < 1e-9
    assert abs(sum(scores[f"{r} option"] for r in RANK_NAMES) - 1) < 1e-9


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


def _ranked(quiz, rank):
    """The quiz with every right answer made the option of length rank `rank` (0: the
    longest), by giving the options lengths 400, 300, 200, 100 in a fixed order."""
    out = []
    for number, question, options in quiz:
        want = [400, 300, 200, 100]
        lengths = want[:rank] + want[rank + 1:]
        made = [(False, "w" * n) for n in lengths]
        made.insert(right_index(options), (True, "r" * want[rank]))
        out.append((number, question, made))
    return out


def test_the_checks_catch_a_quiz_whose_form_points_at_the_answers(quiz):
    # What the quiz of 2025 did: the right answer the longest, nearly always B.
    old = form_problems(_pointed(quiz, move_to="B", lengthen=40))
    assert any("'always B' scores" in p for p in old) and any("times running" in p for p in old)
    assert any("longest option" in p for p in old) and any("mean length rank" in p for p in old)
    # Letters balanced but the right answer always the longest, or always the shortest.
    assert any("'the longest option' scores" in p for p in form_problems(_pointed(quiz, lengthen=40)))
    assert any("'the shortest option' scores" in p for p in form_problems(_pointed(quiz, lengthen=-1)))
    # Every length rank, the middle ones too (issue 41: the second longest scored 50%).
    for rank, name in enumerate(RANK_NAMES):
        problems = form_problems(_ranked(quiz, rank))
        assert any(f"'{name} option' scores 100%" in p for p in problems), (name, problems)
    # Every letter.
    for letter in LETTERS:
        assert any(f"'always {letter}' scores 100%" in p for p in form_problems(_pointed(quiz, move_to=letter)))
    # A run of four of one letter in an otherwise fair quiz.
    runs = list(quiz)
    for k in range(4):
        runs[k] = _pointed([quiz[k]], move_to="A" if LETTERS[right_index(quiz[4][2])] != "A" else "B")[0]
    assert [p for p in form_problems(runs) if "4 times running, from question 1.1" in p]


def test_the_quiz_before_issue_41_fails_the_checks():
    """Its second-longest option was right in half of its questions: made again from the
    lengths of its options as printed (* marks the right one), question 1.1 to 14.3."""
    old = []
    for k, question in enumerate(OLD_QUIZ.split()):
        options = [(o.startswith("*"), "x" * int(o.strip("*"))) for o in question.split("/")]
        old.append((f"{k // 3 + 1}.{k % 3 + 1}", "", options))
    assert rule_scores(old)["the second longest option"] == 0.5
    assert form_problems(old) == ["quiz: 'the second longest option' scores 50% (35% allowed)"]


OLD_QUIZ = """
84/112/*104/97 *110/132/89/104 98/94/90/*82 92/*102/105/93 147/121/115/*132 97/105/115/*89
*135/130/123/141 90/109/*113/116 101/*90/113/98 *105/97/84/130 113/102/*119/121 112/95/*106/111
103/99/101/*91 *92/111/101/117 104/*157/125/108 98/102/*107/105 106/120/102/*106 109/*106/91/79
112/*120/120/91 *120/117/120/109 88/78/83/*61 119/130/*115/114 *100/101/116/116 136/87/98/*129
75/*96/82/99 119/125/*133/133 *118/135/120/111 102/106/101/*104 116/*114/125/120 *110/86/91/118
130/102/*122/96 136/140/106/*132 *130/94/135/116 109/*116/133/106 121/111/*123/95 *123/114/106/118
107/101/129/*117 129/*137/93/108 111/98/*109/107 *143/129/126/133 104/102/96/*111 125/*124/120/115
"""


def test_the_answer_key_matches_the_marked_answers(quiz):
    text = QUIZ.read_text(encoding="utf-8")
    key = dict(re.findall(r"(\d+\.\d) ([A-D])\b", text.split("## Answer key", 1)[1]))
    marked = {number: LETTERS[right_index(options)] for number, _, options in quiz}
    assert key == marked, "quiz.md: the answer key at the end does not match the [x] marks " \
        "(python tools/quiz.py --key rewrites it): " + ", ".join(
        f"{n} key {key.get(n)} marked {marked.get(n)}" for n in sorted(set(key) | set(marked))
        if key.get(n) != marked.get(n))
    assert quiz_tool.with_key(text) == text, "quiz.md: run python tools/quiz.py --key"


def test_the_answers_the_issues_corrected_stay_corrected(quiz):
    by_number = {number: (question, options) for number, question, options in quiz}
    right = {n: next(text for r, text in options if r) for n, (_, options) in by_number.items()}
    # 13.1: lesson 4 shows a read every 50-100 steps costs little, so not "every wait must go".
    assert not re.search(r"every wait|all must go|one left", right["13.1"]), right["13.1"]
    # 3.1: no wrong answer may restate the lesson's own caveat about fitting across cache sizes.
    assert not any("sizes measured" in text or "cache-resident" in text for _, text in by_number["3.1"][1])
    # 1.2 (issue 41): a machine with four GPUs, and where tensors can go, not which GPUs are "used".
    assert "four GPUs" in by_number["1.2"][0] and "create tensors" in by_number["1.2"][0]
    assert right["1.2"].startswith("All four")
    # 8.3 (issue 41): "exactly the same gradient" holds up to rounding, and not with batch norm.
    assert "up to rounding" in by_number["8.3"][0] and "do not interact" in by_number["8.3"][0]
    assert "exactly" not in by_number["8.3"][0] and "1/4" in right["8.3"] and "checkpointing" in right["8.3"]


# --- what a workshop day's quiz asks --------------------------------------------------------

def _lesson_sections(n):
    """(order [(level, heading)], depth headings, {cell id: heading}, own slides) of lesson n."""
    notebook = next(nb for nb in NOTEBOOKS if nb.name.startswith(f"{n:02d}_"))
    nb = nbformat.read(notebook, as_version=4)
    order, own = agenda._marks(nb)
    depth, in_depth, current, where = set(), False, None, {}
    for cell in nb.cells:
        in_depth = in_depth or sitting.is_depth_start(cell)
        for _, text in slides.headings(cell):
            current = agenda.norm(text)
            if in_depth:
                depth.add(current)
        for name in re.findall(r"(?:check_expected|show_recording)\('([\w-]+)'", cell.source):
            where[name] = current
    return order, depth, where, own


@pytest.fixture(scope="module")
def days():
    """{lesson: {'cut', 'shown', 'order', 'depth', 'where'}} as the workshop teaches it."""
    text = WORKSHOP.read_text(encoding="utf-8")
    lectures, cut_keys = agenda.expected(text), agenda.cuts(text)
    found = {}
    for n, info in lectures.items():
        order, depth, where, own = _lesson_sections(n)
        cut = set()
        for (_, part, what), key in info["rows"]:
            if key in cut_keys.get(n, ()):
                cut |= agenda.row_sections(part, order, what)
        for k, (level, heading) in enumerate(order):          # and the sections under a cut one
            if heading in cut:
                for deeper, h in order[k + 1:]:
                    if deeper <= level:
                        break
                    cut.add(h)
        shown = {h for h, numbers in own.items() if numbers and numbers <= info["show"] and h not in depth}
        found[n] = {"cut": cut, "shown": shown, "order": [h for _, h in order], "depth": depth, "where": where}
    return found


def _sources():
    """{number: [section]} of the quiz's *From* lines."""
    return {q["number"]: q["sources"] for q in quiz_tool.parse(QUIZ.read_text(encoding="utf-8"))}


def _page_citations(n, k, lesson):
    """The sections of lesson n's core that its page's answer to question k cites."""
    page = ROOT / "teaching" / f"{next(nb for nb in NOTEBOOKS if nb.name.startswith(f'{n:02d}_')).stem}.md"
    answer = handouts.questions(page.read_text(encoding="utf-8"))[k - 1][1]
    cited = [agenda.norm(s) for s in re.findall(r'§ "([^"]+)"', answer)]
    cited += [lesson["where"][c] for c in re.findall(r"`(\d\d-[\w-]+)`", answer) if c in lesson["where"]]
    return {s for s in cited if s not in lesson["depth"]}


def test_each_question_names_the_sections_it_asks_about(quiz_parts, days):
    sources = _sources()
    for number, _, _ in quiz_parts["whole"]:
        n, k = map(int, number.split("."))
        assert sources.get(number), f"quiz {number}: name its sections, *From § \"...\".*"
        lesson = days[n]
        missing = [s for s in sources[number] if s not in lesson["order"]]
        assert not missing, f"quiz {number}: lesson {n} has no section {missing}"
        if n in days and k <= 3:                          # a teacher's page's question
            left_out = _page_citations(n, k, days[n]) - set(sources[number])
            assert not left_out, (f"quiz {number}: its page's answer cites {sorted(left_out)}; "
                                  "name them in its From line")


def test_no_workshop_question_comes_from_a_cut_section(quiz_parts, days):
    sources = _sources()
    problems = []
    for number, _, _ in quiz_parts["workshop"]:
        n = int(number.split(".")[0])
        assert n in days, f"quiz {number}: lesson {n} has no slot in the workshop; move it to {OPTIONAL!r}"
        named = set(sources[number])
        if named & days[n]["cut"]:
            problems.append(f"{number}: § {sorted(named & days[n]['cut'])} is cut from the lecture")
        if named & days[n]["depth"]:
            problems.append(f"{number}: § {sorted(named & days[n]['depth'])} is in the lesson's depth")
        if not named & days[n]["shown"]:
            problems.append(f"{number}: none of {sorted(named)} is on the slides the lecture shows")
    assert not problems, ("quiz.md: workshop questions on what the workshop does not teach; move them "
                          f"to {OPTIONAL!r} or ask another question:\n" + "\n".join(problems))
    lessons = {int(number.split(".")[0]) for number, _, _ in quiz_parts["workshop"]}
    taught = {n for n in days if f"**Lesson {n}**" in WORKSHOP.read_text(encoding="utf-8")}
    assert taught <= lessons, f"quiz.md: no workshop question for lessons {sorted(taught - lessons)}"


def test_the_optional_part_holds_only_what_the_day_does_not_teach(quiz_parts, days):
    sources = _sources()
    workshop = WORKSHOP.read_text(encoding="utf-8")
    for number, _, _ in quiz_parts["optional"]:
        n = int(number.split(".")[0])
        if f"**Lesson {n}**" not in workshop:
            continue                                  # a lesson without a slot: all its questions
        named = set(sources[number])
        assert named - days[n]["shown"], (
            f"quiz {number} is optional, but its sections {sorted(named)} are taught on the day: "
            "move it to its lesson")


def test_the_seven_questions_issue_41_found_are_optional(quiz_parts):
    optional = {number for number, _, _ in quiz_parts["optional"]}
    assert {"3.2", "4.2", "6.3", "8.1", "10.3", "11.3", "12.3"} <= optional


def test_numbers_the_quiz_takes_from_a_lesson_are_in_its_stored_outputs(quiz):
    checked = 0
    for number, question, options in quiz:
        n = int(number.split(".")[0])
        for text in [question] + [t for _, t in options]:
            for clause in re.split(r"(?<=[.;?])\s+", text):
                if re.search(r"\bin the lesson\b|\bstored run\b|\blesson's run\b", clause):
                    for figure in re.findall(r"\d[\d,.]*%?", re.sub(r"`[^`]*`", "", clause)):
                        figure = figure.rstrip(".,")
                        checked += 1
                        assert figure in _outputs(n), (
                            f"quiz {number}: {figure} is attributed to lesson {n}'s run, whose stored "
                            "outputs do not hold it")
    assert checked >= 3


# --- the students' copy -------------------------------------------------------------------

def test_the_students_copy_has_every_question_and_no_answer(tmp_path, quiz):
    written = quiz_tool.build(tmp_path)
    assert sorted(p.name for p in written) == ["quiz.html", "quiz.md"]
    md = (tmp_path / "quiz.md").read_text(encoding="utf-8")
    page = (tmp_path / "quiz.html").read_text(encoding="utf-8")
    visible = re.sub(r"<style>.*?</style>|<[^>]+>", "", page, flags=re.S)
    for leak in ("[x]", "[X]", "[ ]", "☑", "☒", "✓", "✔", "Answer key", "From §", "*From", "answer key"):
        assert leak not in md and leak not in page, f"the students' quiz shows {leak!r}"
    for number, question, options in quiz:
        assert f"**{number}** {question}" in md, f"the students' quiz lacks question {number}"
        lines = [f"- ☐ {letter}. {text}" for letter, (_, text) in zip(LETTERS, options)]
        assert all(line in md for line in lines), f"the students' quiz lacks an option of {number}"
        items = re.findall(r"<li>(.*?)</li>", page.split(f"<strong>{number}</strong>", 1)[1].split("</ol>", 1)[0])
        assert len(items) == 4 and all(item.startswith(f"☐ {letter}. ") for letter, item in zip(LETTERS, items)), (
            f"the students' quiz marks the options of {number} differently")
    # Nothing but the options' own words tells them apart: the right one's text is printed
    # with exactly the markup of the others (no class, no bold, no mark).
    assert 'class="right"' not in page and "<strong>☐" not in page and visible.count("☐") == 4 * len(quiz)
    assert page.index("Optional questions") > page.index("<strong>13.1</strong>")


def test_the_answer_key_tool_rewrites_only_the_key(tmp_path):
    text = QUIZ.read_text(encoding="utf-8")
    swapped = text.replace("- [x] ", "- [?] ", 1).replace("- [ ] ", "- [x] ", 1).replace("- [?] ", "- [ ] ", 1)
    rewritten = quiz_tool.with_key(swapped)
    assert rewritten.split("## Answer key")[0] == swapped.split("## Answer key")[0]
    assert rewritten != swapped


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


# --- the Chinese quiz (translations/zh/kit/quiz.md) ------------------------------------------

QUIZ_ZH = quiz_tool.QUIZ_ZH


def _zh_parts():
    text = QUIZ_ZH.read_text(encoding="utf-8").split(quiz_tool.ZH[quiz_tool.KEY])[0]
    day, _, optional = text.partition(quiz_tool.ZH[OPTIONAL])
    return {"workshop": parse_quiz(day), "optional": parse_quiz(optional), "whole": parse_quiz(text)}


def test_the_chinese_quiz_is_the_english_one_question_for_question():
    """Same numbers, same parts, same right answer, as many sources; its words are Chinese."""
    en, zh = (quiz_tool.parse(p.read_text(encoding="utf-8")) for p in (QUIZ, QUIZ_ZH))
    shape = lambda qs: [(q["number"], q["optional"], [r for r, _ in q["options"]], len(q["sources"]))  # noqa: E731
                        for q in qs]
    assert shape(zh) == shape(en)
    for q in zh:
        assert re.search(r"[\u4e00-\u9fff]", q["question"] + "".join(t for _, t in q["options"])), q["number"]


@pytest.mark.parametrize("part", ["workshop", "optional", "whole"])
def test_the_chinese_quizs_form_gives_no_answer_away(part):
    problems = form_problems(_zh_parts()[part], f"Chinese quiz, {part}")
    assert not problems, "; ".join(problems)


def test_the_chinese_quiz_names_sections_of_the_chinese_lessons():
    """Its *出处* lines name headings of the Chinese lessons (a later lesson's English depth keeps its English)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import translate
    for q in quiz_tool.parse(QUIZ_ZH.read_text(encoding="utf-8")):
        lesson = next(p for p in translate.LESSONS if sitting.number(p) == q["lesson"])
        zh = nbformat.read(translate.zh_path(lesson), as_version=4)
        titles = {re.sub(r"\s+", " ", t).strip() for t in sitting.headings(zh.cells).values()}
        missing = [s for s in q["sources"] if s not in titles]
        assert not missing, f"Chinese quiz {q['number']}: lesson {q['lesson']} has no heading {missing}"


def test_the_chinese_students_copy_has_every_question_and_no_answer(tmp_path):
    quiz_tool.main(["--zh", str(tmp_path)])
    md = (tmp_path / "quiz.md").read_text(encoding="utf-8")
    page = (tmp_path / "quiz.html").read_text(encoding="utf-8")
    for leak in ("[x]", "[ ]", "出处", "## 答案", "From §"):
        assert leak not in md and leak not in page, f"the Chinese students' quiz shows {leak!r}"
    questions = quiz_tool.parse(QUIZ_ZH.read_text(encoding="utf-8"))
    assert md.count("- ☐ ") == 4 * len(questions) and 'lang="zh-CN"' in page
    assert all(f"**{q['number']}** {q['question']}" in md for q in questions)
