"""tools/student_copy.py: the students' copy has no solutions and no outputs, still runs, and
nothing in it leads back to the teacher's repository (the answers): built without --repo (no
badges, the helpers in d2l-utils.zip for Colab) and with --repo (every link opens the copy)."""
import ast
import json
import re
import subprocess
import sys
import tomllib
import zipfile

import nbformat
import pytest
from conftest import NOTEBOOKS, ROOT, cells, slow, source

import student_copy

REPO = "teach-example/gpu-course-students"          # where a teacher would publish the copy
TEACHER = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    return student_copy.build(tmp_path_factory.mktemp("students") / "course")


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    return student_copy.build(tmp_path_factory.mktemp("published") / "course", repo=REPO)


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
    def unbadged(text):          # the title cell loses its Colab badge (there is no copy to open)
        text = text.replace("https://github.com/d2l-gpu/gpu-course/blob/main/GLOSSARY.md", "../GLOSSARY.md")
        if "colab-badge.svg" not in text:
            return text
        return re.sub(r"\n{3,}", "\n\n", "\n".join(l for l in text.split("\n") if "colab-badge.svg" not in l))
    kept = [(c["id"], source(c) if student_copy.is_setup(c) else unbadged(source(c)))
            for c in cells(path) if not student_copy.is_solution(c)]
    assert [c["id"] for c in nb["cells"]] == [cid for cid, _ in kept], "the same cells, in order"
    for (cid, text), cell in zip(kept, nb["cells"]):
        if student_copy.is_setup(cell):
            assert "d2l-utils.zip" in source(cell) and "git+" not in source(cell), f"{path.name}: setup cell"
        else:
            assert source(cell) == text, f"{path.name}, cell {cid}: everything else stays the same"
    exercises = next(source(c) for c in nb["cells"] if "## Exercises" in source(c)).split("## Exercises")[1]
    numbered = set(re.findall(r"^(\d+)\. ", exercises, re.M))
    solved = {re.match(r"\s*#@title Solution (\d+)", source(c))[1] for c in cells(path) if student_copy.is_solution(c)}
    assert numbered == solved and len(numbered) >= 2, f"{path.name}: exercises {numbered}, solutions {solved}"


def test_the_copy_has_what_students_need_and_not_the_answers(copy):
    for name in student_copy.KEEP + ["README.md", "d2l-utils.zip"]:
        assert (copy / name).exists(), name
    for name in ("teaching", "tests", "tools", "CONTRIBUTING.md", "binder/README.md"):
        assert not (copy / name).exists(), name
    assert (copy / "README.md").read_text().startswith("> **The students' copy.**")
    css = sorted(p.name for p in (ROOT / "notebooks").glob("*.css"))
    assert "rise.css" in css and css == sorted(p.name for p in (copy / "notebooks").glob("*.css"))


def _names(tree):
    """(names bound by a cell's code, at the top level or as a parameter; names read)."""
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else read).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):                 # a function's own parameter
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return bound, read


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_cell_students_keep_needs_a_solution(path):
    """The copy runs top to bottom where the lesson does: no kept cell reads a name that only
    a solution cell defines (IPython's % lines are left out of the parse). A lesson's depth
    follows its solutions, so this is where a depth cell would lean on one."""
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
            needed = (read - bound) & only_in_solutions       # a name the cell binds itself it does not need
            assert not needed, f"{path.name}: {cell['id']} needs {needed}"
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


# --- nothing leads back to the teacher's repository ------------------------------------------

def _texts(folder):
    """{name: text} of every text file of a copy, and of the files inside its d2l-utils.zip."""
    found = {str(p.relative_to(folder)): p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*"))
             if p.is_file() and p.suffix in {".ipynb", ".md", ".py", ".toml", ".txt", ".json", ".css", ""}}
    if (folder / "d2l-utils.zip").exists():
        with zipfile.ZipFile(folder / "d2l-utils.zip") as z:
            found.update({f"d2l-utils.zip:{n}": z.read(n).decode("utf-8") for n in z.namelist()
                          if not n.endswith((".pyc", "/"))})
    return found


def _links(text):
    """The targets of markdown links and of href/src attributes in ``text``."""
    return re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r"""(?:href|src)=["']([^"']+)""", text)


@pytest.mark.parametrize("which", ["copy", "published"])
def test_nothing_in_the_copy_leads_to_the_teachers_repository(which, request):
    folder = request.getfixturevalue(which)
    teacher = TEACHER.removeprefix("https://github.com/").lower()
    texts = _texts(folder)
    assert len(texts) > 30 and any(k.startswith("d2l_utils/") for k in texts)
    assert not [name for name, text in texts.items() if teacher in text.lower()], \
        f"the teacher's repository ({TEACHER}) is named in the copy"
    assert not [name for name, text in texts.items() if "CONTRIBUTING" in text], "the copy has no CONTRIBUTING.md"
    for name, text in texts.items():
        if not name.endswith((".md", ".ipynb")):
            continue
        for link in _links(text):
            assert not re.search(r"(^|/)(teaching/|tests/|tools/|CONTRIBUTING\.md)", link), f"{name}: links {link}"
            if not re.match(r"[a-z]+:", link) and name == "README.md":
                assert (folder / link.split("#")[0]).exists(), f"README.md links {link}, which the copy lacks"


@pytest.mark.parametrize("which", ["copy", "published"])
def test_the_copys_readme_is_its_own(which, request):
    folder = request.getfixturevalue(which)
    text = (folder / "README.md").read_text(encoding="utf-8")
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    assert not re.search(r"pytest|teaching/|CONTRIBUTING|tools/|teacher's guide", text), "the teacher's repository's README"
    for needed in ("setup_check", "requirements.txt", "requirements-cpu.txt", "Binder", "Colab", "jupyter lab"):
        assert needed in text, f"the copy's README does not say {needed!r}"
    # every path it names (`inline code` that looks like a file or folder) is in the copy
    for name in re.findall(r"`([\w.-]+(?:/[\w.-]*)*)`", prose):
        if "/" in name or re.search(r"\.(txt|zip|toml|md|ipynb)$", name):
            assert (folder / name).exists(), f"the copy's README names {name}, which the copy lacks"
    for path in sorted((folder / "notebooks").glob("*.ipynb")):
        assert f"(notebooks/{path.name})" in text, f"the README's table lacks {path.name}"


def test_published_copy_opens_itself_everywhere(published):
    readme = (published / "README.md").read_text(encoding="utf-8")
    assert f"https://mybinder.org/v2/gh/{REPO}/main?urlpath=lab/tree/notebooks" in readme
    for path in sorted((published / "notebooks").glob("*.ipynb")):
        colab = f"https://colab.research.google.com/github/{REPO}/blob/main/notebooks/{path.name}"
        nb = json.loads(path.read_text(encoding="utf-8"))
        assert f"]({colab})" in source(nb["cells"][0]), f"{path.name}: its badge must open the copy"
        assert f"]({colab})" in readme, f"README: {path.name}'s Colab badge"
        setup = next(c for c in nb["cells"] if student_copy.is_setup(c))
        assert f"git+https://github.com/{REPO}'" in source(setup), f"{path.name}: Colab installs the copy's helpers"
    data = tomllib.loads((published / "pyproject.toml").read_text())
    assert data["project"]["urls"]["Repository"] == f"https://github.com/{REPO}" and "pytest" not in data["tool"]
    assert not (published / "d2l-utils.zip").exists()


def test_unpublished_copy_has_no_badges_and_says_how_to_open_it(copy):
    readme = (copy / "README.md").read_text(encoding="utf-8")
    assert "colab-badge" not in readme and "badge_logo" not in readme
    assert "File > Upload notebook" in readme and "no Colab badges" in readme and "d2l-utils.zip" in readme
    for path in sorted((copy / "notebooks").glob("*.ipynb")):
        assert "colab-badge" not in path.read_text(encoding="utf-8"), path.name
    data = tomllib.loads((copy / "pyproject.toml").read_text())
    assert "urls" not in data["project"] and "pytest" not in data["tool"]
    with zipfile.ZipFile(copy / "d2l-utils.zip") as z:     # a source tree pip installs (checked by hand on Colab's pip)
        names = set(z.namelist())
    assert {"d2l-utils/pyproject.toml", "d2l-utils/README.md", "d2l-utils/d2l_utils/__init__.py",
            "d2l-utils/d2l_utils/expectations/__init__.py"} <= names
    assert not any("__pycache__" in n for n in names)


@pytest.mark.parametrize("which,want", [("copy", "File > Upload notebook"),
                                        ("published", f"https://colab.research.google.com/github/{REPO}/")])
def test_the_copys_helpers_give_the_copys_colab_link(which, want, request):
    """The helpers print a lesson's Colab link under a GPU-only cell: the copy's rewritten one imports."""
    folder = request.getfixturevalue(which)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import d2l_utils.expectations as e; "
            "assert e.__file__.startswith(sys.argv[1]), e.__file__; print(e.colab_url('03-x'))")
    out = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert want in out.stdout and "03_copies_between_devices.ipynb" in out.stdout


def test_the_copy_refuses_the_teachers_repository(tmp_path):
    with pytest.raises(SystemExit, match="teacher's repository"):
        student_copy.build(tmp_path / "a", repo=TEACHER.removeprefix("https://github.com/"))
    with pytest.raises(SystemExit, match="OWNER/NAME"):
        student_copy.build(tmp_path / "b", repo="https://github.com/x/y")


def test_the_glossary_comes_along_and_the_lessons_links_to_it_arrive(copy):
    anchors = {re.sub(r"[^\w\- ]", "", t.lower()).replace(" ", "-")
               for t in re.findall(r"^### (.+)$", (copy / "GLOSSARY.md").read_text(encoding="utf-8"), re.M)}
    found = [a for path in sorted((copy / "notebooks").glob("*.ipynb"))
             for a in re.findall(r"\]\(\.\./GLOSSARY\.md#([\w-]+)\)", path.read_text(encoding="utf-8"))]
    assert len(found) >= 50 and set(found) <= anchors
