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
    lesson_cells = [c for c in nb["cells"] if not student_copy.is_starter(c)]
    assert [c["id"] for c in lesson_cells] == [cid for cid, _ in kept], "the same cells, in order, and the starters"
    for (cid, text), cell in zip(kept, lesson_cells):
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
    for name in ("requirements.txt", "requirements-cpu.txt", "binder/requirements.txt"):
        text = (copy / name).read_text()
        assert not any(t in text for t in student_copy.TEACHER_ONLY) and "autograde" not in text, name
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


# --- the starters: a prediction cell and a skeleton where each solution was ---------------------

@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_exercise_gets_a_starter_where_its_solution_was(copy, path):
    nb = json.loads((copy / "notebooks" / path.name).read_text())
    lesson = int(path.name[:2])
    solved = [student_copy.solution_number(c) for c in cells(path) if student_copy.solution_number(c) is not None]
    first = list(dict.fromkeys(solved))                  # each exercise once, where its first solution was
    starters = [c for c in nb["cells"] if student_copy.is_starter(c)]
    assert [c["id"] for c in starters] == [f"starter-{lesson:02d}-{n}-{part}" for n in first
                                           for part in ("prediction", "code")]
    teacher = [c["id"] for c in cells(path)]
    for k, n in enumerate(first):
        prediction, code = starters[2 * k], starters[2 * k + 1]
        assert prediction["cell_type"] == "markdown" and "Prediction: " + student_copy.PLACEHOLDER in source(prediction)
        assert code["cell_type"] == "code" and not code["outputs"]
        assert prediction["metadata"]["slideshow"]["slide_type"] == "skip"
        # in the solution's place: after the cell that came before it in the teacher's lesson
        where = next(i for i, c in enumerate(cells(path)) if student_copy.solution_number(c) == n)
        at = [c["id"] for c in nb["cells"]].index(prediction["id"])
        assert nb["cells"][at - 1]["id"] in teacher[:where] + [s["id"] for s in starters]
        compile(source(code), f"{path.name} starter {n}", "exec")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_skeletons_names_break_no_later_cell(copy, path):
    """A skeleton sets its result names to None and makes its setup's names: no later cell of the
    lesson may read one of them before binding it (the depth runs after the starters), and none is
    a name the lesson bound before (they would shadow the lesson's objects)."""
    nb = json.loads((copy / "notebooks" / path.name).read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for i, cell in enumerate(code):
        if not student_copy.is_starter(cell):
            continue
        nones = set(re.findall(r"^(\w+) = None\b", source(cell), re.M))
        lesson_before = set().union(*(set().union(*student_copy._bound(student_copy._parse(source(c))))
                                      for c in code[:i] if not student_copy.is_starter(c)))
        assert not nones & lesson_before, f"{cell['id']} sets the lesson's {nones & lesson_before} to None"
        pending = nones
        for later in code[i + 1:]:
            if student_copy.is_starter(later):
                continue
            bound, read = _names(student_copy._parse(source(later)))
            assert not (read - bound) & pending, f"{later['id']} reads {(read - bound) & pending}, which {cell['id']} sets"
            pending -= bound


def test_a_skeleton_checks_what_the_solution_asserts():
    """The skeleton's names are those the solution's asserts read, and the checks are its asserts."""
    code = ("import math\nx = 2\nfor k in (1, 2):\n    predicted = k * x\n    assert predicted > 0\n"
            "if flag:\n    y = math.sqrt(x)\n    assert y < x, 'smaller'\ndef f():\n    assert False\n")
    checks = student_copy.solution_checks(code)
    assert checks == [("assert predicted > 0", ["predicted"]),
                      ("if flag:\n    assert y < x, 'smaller'", ["x", "y"])]
    assert student_copy.result_names(checks, lesson_names={"x"}) == ["predicted", "y"]
    cells_ = student_copy.starter_cells(3, 2, checks, {"x"})
    assert cells_[1]["source"].splitlines()[-2:] == ["predicted = None", "y = None"]


@slow("executes two lessons of the students' copy, and every starter again after Run all: about 30 s")
@pytest.mark.parametrize("name", ["04_synchronization.ipynb", "13_make_a_training_job_fast.ipynb"])
def test_a_students_lesson_runs_top_to_bottom(copy, name):
    """Two lessons no lab uses (tests/test_autograde.py runs the labs' lessons of the copy the same
    way): top to bottom, then every starter again, as a student runs one after "Run all"."""
    from nbclient import NotebookClient
    nb = nbformat.read(copy / "notebooks" / name, as_version=4)
    starters = [c.source for c in nb.cells if c.cell_type == "code" and student_copy.is_starter(c)]
    nb.cells.append(nbformat.v4.new_code_cell(f"for _src in {starters!r}:\n    exec(_src, globals())"))
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


# --- the Chinese copy (--zh) ---------------------------------------------------------------

@pytest.fixture(scope="module")
def chinese_copy(tmp_path_factory):
    return student_copy.build(tmp_path_factory.mktemp("students-zh") / "course", language="zh")


def test_the_chinese_copy_is_the_chinese_lessons_without_solutions_or_outputs(chinese_copy):
    """Its lessons are notebooks/zh/'s, with Chinese starters and a Chinese setup cell that still
    installs the helpers from d2l-utils.zip on Colab and switches the expectation blocks to Chinese."""
    zh_lessons = sorted((ROOT / "notebooks" / "zh").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(p.name for p in (chinese_copy / "notebooks").glob("*.ipynb")) == [p.name for p in zh_lessons]
    for path in zh_lessons:
        nb = json.loads((chinese_copy / "notebooks" / path.name).read_text(encoding="utf-8"))
        assert re.search(r"[\u4e00-\u9fff]", source(nb["cells"][0])), path.name
        assert not any(student_copy.is_solution(c) for c in nb["cells"]), path.name
        assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), path.name
        setup = next(c for c in nb["cells"] if student_copy.is_setup(c))
        assert "%pip install -q --no-deps d2l-utils.zip" in source(setup)
        assert "use_language('zh')" in source(setup) and "# Setup." not in source(setup)
        starters = [c for c in nb["cells"] if student_copy.is_starter(c)]
        assert starters and all(re.search(r"[\u4e00-\u9fff]", source(c)) for c in starters), path.name
        assert not any("Exercise" in source(c) or "Leave your results" in source(c) for c in starters)
        for c in starters:
            assert not [line for line in source(c).splitlines()
                        if line.lstrip().startswith("#") and not re.search(r"[\u4e00-\u9fff]", line)], c["id"]
    readme = (chinese_copy / "README.md").read_text(encoding="utf-8")
    assert "学生副本" in readme and "d2l-utils.zip" in readme and (chinese_copy / "d2l-utils.zip").exists()
    # The helpers it installs on Colab carry the Chinese expectation blocks' catalog.
    assert "d2l-utils/d2l_utils/expectations/zh.json" in zipfile.ZipFile(chinese_copy / "d2l-utils.zip").namelist()


def test_the_autograder_sees_a_chinese_prediction(chinese_copy):
    import autograde
    nb = json.loads((chinese_copy / "notebooks" / "02_tensors_on_devices.ipynb").read_text(encoding="utf-8"))
    k = next(i for i, c in enumerate(nb["cells"]) if c["id"] == "starter-02-1-prediction")
    assert not autograde.predicted(nb, (k, k))
    nb["cells"][k]["source"] = "**练习 1。** 预测：两种情况下它都不再是叶子张量，因为 to 返回了新张量。"
    assert autograde.predicted(nb, (k, k))
