"""The generated helper module must match the notebooks' #@save cells."""
import json

import pytest

from d2l_utils import build


def test_lessons_module_matches_notebooks():
    current = build.TARGET.read_text(encoding="utf-8")
    assert build.render() == current, (
        "d2l_utils/lessons.py disagrees with the #@save cells: run `python -m d2l_utils.build`")


def _notebook(tmp_path, name, *sources):
    cells = [{"cell_type": "code", "source": s, "metadata": {}, "outputs": [],
              "execution_count": None} for s in sources]
    (tmp_path / name).write_text(json.dumps({"cells": cells}))


def test_render_orders_lessons_hoists_imports_and_names_the_lesson(tmp_path):
    _notebook(tmp_path, "02_b.ipynb", "#@save\nimport torch\ndef g():\n    '''G.'''\n    return 2")
    _notebook(tmp_path, "01_a.ipynb", "x = 1  # not saved",
              '#@save\nimport torch\nimport os\n\ndef f():\n    """F."""\n    return 1')
    text = build.render(tmp_path)
    assert text.startswith("# GENERATED FILE")
    assert text.count("import torch") == 1 and text.index("import os") < text.index("__all__")
    assert text.index("def f") < text.index("def g")            # lesson order, not file order
    assert "Defined in notebooks/01_a.ipynb." in text and "Defined in notebooks/02_b.ipynb." in text
    assert "x = 1" not in text
    namespace = {}
    exec(compile(text, "lessons.py", "exec"), namespace)
    assert namespace["__all__"] == ["f", "g"] and namespace["g"]() == 2
    assert "Defined in notebooks/01_a.ipynb." in namespace["f"].__doc__


@pytest.mark.parametrize("source, message", [
    ("#@save\ndef f():\n    return 1", "`f` needs a docstring"),
    ("#@save\ndef f():\n    'F.'\n    return 1", "must be triple-quoted"),
    ("#@save\ndef f(:\n    pass", "not valid Python"),
])
def test_render_rejects_cells_it_cannot_document(tmp_path, source, message):
    _notebook(tmp_path, "01_a.ipynb", source)
    with pytest.raises(build.BuildError, match=message):
        build.render(tmp_path)


def test_check_mode_fails_when_out_of_date(tmp_path, monkeypatch):
    stale = tmp_path / "lessons.py"
    stale.write_text("# stale\n")
    monkeypatch.setattr(build, "TARGET", stale)
    monkeypatch.setattr(build, "ROOT", tmp_path)
    with pytest.raises(SystemExit, match="out of date"):
        build.main(["--check"])
    build.main([])
    build.main(["--check"])     # now up to date: returns normally


# ---- helpers that read like the idea they teach ----
import ast  # noqa: E402
import re  # noqa: E402

import helpers_report  # noqa: E402  (tools/ is on sys.path: conftest.py)
from conftest import NOTEBOOKS, code_cells, source  # noqa: E402


def test_no_helper_is_mostly_checks():
    """In every saved function the lines that check arguments are fewer than the lines of its
    idea (tools/helpers_report.py counts both)."""
    mostly = [f"{name}: {checks} lines of checks, {idea} of idea"
              for name, checks, idea in helpers_report.helpers() if checks > idea]
    assert not mostly, "shorten the checks (one line each, d2l_utils.checks):\n  " + "\n  ".join(mostly)


def test_the_report_sees_checks():
    """The count above can fail: a function made of checks is reported as such."""
    text = ("def f(x, n):\n    '''F.'''\n    if x is None:\n        raise TypeError('x')\n"
            "    n = checks.integer(n, 'n', low=1)\n    return x * n\n")
    import pathlib, tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "m.py"
        path.write_text(text)
        assert list(helpers_report.helpers(path)) == [("f", 3, 1)]


PRIVATE = re.compile(r"\b(?:d2l|d2l_utils)(?:\.\w+)*\._\w+|from\s+d2l_utils(?:\.\w+)*\s+import\s+[^\n]*\b_\w+")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_lesson_uses_a_private_name_of_the_helpers(path):
    """Lessons use the helpers' public names (d2l.x, d2l_utils.checks), never d2l._x."""
    for cell in code_cells(path):
        found = PRIVATE.findall(source(cell))
        assert not found, f"{path.name}: a private name of the helpers: {found}"


def test_classes_grow_by_one_mechanism():
    """A class that grows across cells does so with d2l's add_to_class, not with methods
    assigned to it by hand (Class.method = function)."""
    tree = ast.parse(build.TARGET.read_text(encoding="utf-8"))
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    assigned = [ast.unparse(a) for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                for a in ([*t.elts] if isinstance(t, ast.Tuple) else [t])
                if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) and a.value.id in classes]
    assert not assigned, f"methods assigned by hand: {assigned}; use @add_to_class(Class)"
