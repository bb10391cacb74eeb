"""tools/autograde.py: each lab's items are the workshop's, each is checked by its solution's own
asserts, and the grader marks a solved submission (the teacher's lessons) and an unsolved one (the
students' copy with its empty starters) as they are."""
import json
import re

import pytest
from conftest import ROOT, cells, slow, source

import autograde
import student_copy


def test_the_labs_are_the_workshops():
    """LABS says what the agenda's lab rows say (teaching/kit/workshop.md)."""
    text = (ROOT / "teaching" / "kit" / "workshop.md").read_text(encoding="utf-8")
    for lab, items in autograde.LABS.items():
        row = re.search(rf"\*\*Lab {lab}\*\*: ([^|]+)\|", text)[1]
        found = []
        for lesson, numbers in re.findall(r"lesson (\d+) exercises? ([\d a-z()]+?)(?=;|$)", row.strip()):
            alternatives = re.findall(r"\d+", numbers)
            if "(or" in numbers:
                found.append(tuple((int(lesson), int(n)) for n in alternatives))
            else:
                found += [(int(lesson), int(n)) for n in alternatives]
        assert found == items, f"lab {lab}: the agenda says {found}"


@pytest.mark.parametrize("lab", sorted(autograde.LABS))
def test_every_item_has_checks_and_a_starter_naming_their_results(lab):
    for lesson, n in autograde.exercises(lab):
        checks = autograde.checks(lesson)[n]
        assert checks, f"lesson {lesson} exercise {n}: nothing to check"
        nb = student_copy.student_notebook(json.loads(autograde.lesson_path(lesson).read_text()))
        code = next(c for c in nb["cells"] if c.get("id") == f"starter-{lesson:02d}-{n}-code")
        nones = set(re.findall(r"^(\w+) = None\b", source(code), re.M))
        assert nones, f"lesson {lesson} exercise {n}: the skeleton names no result"
        assert nones <= {name for _, names in checks for name in names}


def test_test_files_are_otters_and_compile(tmp_path):
    autograde.write_tests(tmp_path, 3, [1, 3])
    for name in ("L03E1", "L03E3"):
        text = (tmp_path / f"{name}.py").read_text()
        compile(text, name, "exec")
        assert "from otter.test_files import test_case" in text and "@test_case(points=1" in text


def test_checks_run_right_after_the_exercises_cells():
    path = autograde.lesson_path(3)
    students = student_copy.student_notebook(json.loads(path.read_text()))
    mine = {"cell_type": "markdown", "id": "pair-notes", "metadata": {}, "source": "Why: latency."}
    at = [c.get("id") for c in students["cells"]].index("starter-03-1-code")
    students["cells"].insert(at + 1, mine)                      # a cell the pair added
    students["cells"][at - 1]["source"] = "**Exercise 1.** Prediction: 6 us, from the fit."
    known = {c["id"] for c in cells(path)}
    spans = autograde.regions(students, 3, [1, 3], known)
    ids = [c.get("id") for c in students["cells"]]
    assert ids[spans[1][1]] == "pair-notes" and ids[spans[3][1]] == "starter-03-3-code"
    assert autograde.predicted(students, spans[1]) and not autograde.predicted(students, spans[3])
    teacher = json.loads(path.read_text())
    spans = autograde.regions(teacher, 3, [1, 3], known)
    assert all(autograde.predicted(teacher, spans[n]) for n in (1, 3))


def _solution_predicts(lesson, n):
    code = "\n".join(source(c) for c in cells(autograde.lesson_path(lesson)) if student_copy.solution_number(c) == n)
    return bool(autograde.PREDICTED.search(code))


# Labs 1 and 2 here, 3 and 4 in tests/test_autograde_later.py: pytest-xdist gives a test module to one
# worker (--dist loadscope), and the four labs in one module made that worker the last to finish.
FIRST_LABS = [lab for lab in sorted(autograde.LABS) if lab <= 2]


@slow("runs the labs' lessons twice under otter: the teacher's and the students' copy (about a minute a lab)")
@pytest.mark.parametrize("lab", FIRST_LABS)
def test_the_grader_marks_solved_and_unsolved_submissions(lab, tmp_path):
    check_grading(lab, tmp_path)


def check_grading(lab, tmp_path):
    """The teacher's lessons hold every item's solution: each of its asserts holds (mark 2 where the
    solution writes a prediction, 1 where it writes none); they run as far as the exercises only, to
    save time. The students' copy, untouched, runs top to bottom, and its starters again after it
    (as after "Run all"), and scores 0 on every item: nothing computed, nothing predicted."""
    import nbformat
    solved = ROOT / "notebooks"
    unsolved = tmp_path / "unsolved"
    copy = student_copy.build(tmp_path / "copy")
    unsolved.mkdir()
    for lesson in {les for les, _ in autograde.exercises(lab)}:
        path = autograde.lesson_path(lesson, copy)
        nb = nbformat.read(path, as_version=4)
        starters = [c.source for c in nb.cells if c.cell_type == "code" and student_copy.is_starter(c)]
        nb.cells.append(nbformat.v4.new_code_cell(f"for _src in {starters!r}:\n    exec(_src, globals())"))
        nbformat.write(nb, unsolved / path.name)
    rows = autograde.grade(lab, [solved, unsolved], jobs=2, timeout=240, to_exercises=[solved])
    by = {(r["pair"], r["item"]): r for r in rows}
    for r in rows:
        assert not r["item"].endswith("runs") or r["mark"] == 2, f"{r['pair']}: {r['item']}: {r['feedback']}"
    for item in autograde.LABS[lab]:
        options = item if isinstance(item[0], tuple) else (item,)
        name = " or ".join(f"L{les:02d} E{n}" for les, n in options)
        solved_row = next(r for (pair, it), r in by.items() if pair == "notebooks" and it.startswith(name))
        held, total = map(int, solved_row["checks"].split("/"))
        asserts = autograde.checks(*options[0][:1], extra=False)[options[0][1]]
        assert held == total == len(asserts), f"solved {name}: {solved_row}"
        assert solved_row["mark"] == (2 if _solution_predicts(*options[0]) else 1), solved_row
        unsolved_row = next(r for (pair, it), r in by.items() if pair == "unsolved" and it.startswith(name))
        assert unsolved_row["mark"] == 0 and unsolved_row["checks"].startswith("0/"), unsolved_row
        assert not unsolved_row["prediction"] and "no prediction written" in unsolved_row["feedback"]
    print(autograde.table(rows))


# --- the lab sheets (teaching/kit/labs/): what students read --------------------------------

LABS_DIR = ROOT / "teaching" / "kit" / "labs"


@pytest.mark.parametrize("lab", sorted(autograde.LABS))
def test_a_lab_sheet_says_what_to_do_without_the_answers(lab):
    sheet = LABS_DIR / f"lab{lab}.md"
    text = sheet.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings == ["The items", "What to hand in", "How it is marked", "The GPU version"], headings
    assert "](../workshop.md#sharing-gpus)" in text, "the GPU version links the sharing plan"
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        path = target.partition("#")[0]
        if path and not re.match(r"[a-z]+:", target):
            assert (sheet.parent / path).exists(), f"lab{lab}.md: broken link {target}"
    for lesson, n in autograde.exercises(lab):
        assert re.search(rf"Lesson {lesson}, exercise {n}|[Ll]esson {lesson} exercise {n}|Exercise {n}, ", text), \
            f"lab{lab}.md does not name lesson {lesson} exercise {n}"
        nb = student_copy.student_notebook(json.loads(autograde.lesson_path(lesson).read_text()))
        code = next(c for c in nb["cells"] if c.get("id") == f"starter-{lesson:02d}-{n}-code")
        for name in re.findall(r"^(\w+) = None\b", source(code), re.M):
            assert f"`{name}`" in text, f"lab{lab}.md does not name {name}, which the autograder reads"
    # the rubric quotes the lessons' printed answers; a sheet quotes none of them
    rubric = (ROOT / "teaching" / "kit" / "rubric.md").read_text(encoding="utf-8")
    answers = {q for q in re.findall(r"`([^`]+)`", rubric) if re.search(r"\d|equal:|refused|Config\(", q)}
    quoted = sorted(a for a in answers if a in text and len(a) > 6)
    assert not quoted, f"lab{lab}.md quotes the rubric's answers: {quoted}"
