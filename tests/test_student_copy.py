"""tools/student_copy.py: the students' copy has no solutions and no outputs, and still runs."""
import ast
import json
import re

import nbformat
import pytest
from conftest import NOTEBOOKS, ROOT, cells, slow, source

import student_copy


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    return student_copy.build(tmp_path_factory.mktemp("students") / "course")


def _solution_lines(path):
    """The lines that only a lesson's solutions have (not blank, not comments, not short)."""
    def lines(keep):
        return {line.strip() for c in cells(path) if keep(c) for line in source(c).splitlines()
                if len(line.strip()) > 30 and not line.strip().startswith("#")}
    return lines(student_copy.is_solution) - lines(lambda c: not student_copy.is_solution(c))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_solution_and_no_output_survives(copy, path):
    student = copy / "notebooks" / path.name
    nb = json.loads(student.read_text())
    assert not any(student_copy.is_solution(c) for c in nb["cells"])
    assert all(not c.get("outputs") and c.get("execution_count") is None
               for c in nb["cells"] if c["cell_type"] == "code")
    lines = {line.strip() for c in nb["cells"] for line in source(c).splitlines()}
    survivors = sorted(_solution_lines(path) & lines)
    assert not survivors, f"solution text in the students' copy: {survivors[:3]}"
    kept = [(c["id"], source(c)) for c in cells(path) if not student_copy.is_solution(c)]
    assert [(c["id"], source(c)) for c in nb["cells"]] == kept, "everything else stays the same"
    exercises = next(source(c) for c in nb["cells"] if "## Exercises" in source(c)).split("## Exercises")[1]
    numbered = set(re.findall(r"^(\d+)\. ", exercises, re.M))
    solved = {re.match(r"\s*#@title Solution (\d+)", source(c))[1] for c in cells(path) if student_copy.is_solution(c)}
    assert numbered == solved and len(numbered) >= 2, f"{path.name}: exercises {numbered}, solutions {solved}"


def test_the_copy_has_what_students_need_and_not_the_answers(copy):
    for name in student_copy.KEEP:
        assert (copy / name).exists(), name
    for name in ("teaching", "tests", "tools", "CONTRIBUTING.md"):
        assert not (copy / name).exists(), name
    assert (copy / "README.md").read_text().startswith("> **The students' copy.**")
    css = sorted(p.name for p in (ROOT / "notebooks").glob("*.css"))
    assert "rise.css" in css and css == sorted(p.name for p in (copy / "notebooks").glob("*.css"))


def _names(tree):
    """(names bound at the top level, names read) by a cell's code."""
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else read).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return bound, read


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_cell_students_keep_needs_a_solution(path):
    """The copy runs top to bottom where the lesson does: no kept cell reads a name that only
    a solution cell defines (IPython's % lines are left out of the parse)."""
    only_in_solutions, before = set(), set()
    for cell in cells(path):
        if cell["cell_type"] != "code":
            continue
        code = "\n".join(l[:len(l) - len(l.lstrip())] + "pass" if l.lstrip().startswith(("%", "!")) else l
                         for l in source(cell).splitlines())
        bound, read = _names(ast.parse(code))
        if student_copy.is_solution(cell):
            only_in_solutions |= bound - before
        else:
            assert not (read & only_in_solutions), f"{path.name}: needs {read & only_in_solutions}"
            before |= bound
            only_in_solutions -= bound


@slow("executes two lessons of the students' copy: about 25 s")
@pytest.mark.parametrize("name", ["02_tensors_on_devices.ipynb", "03_copies_between_devices.ipynb"])
def test_a_students_lesson_runs_top_to_bottom(copy, name):
    from nbclient import NotebookClient
    nb = nbformat.read(copy / "notebooks" / name, as_version=4)
    NotebookClient(nb, timeout=240, kernel_name="python3",
                   resources={"metadata": {"path": str(copy / "notebooks")}}).execute()
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code" and c.source.strip())
