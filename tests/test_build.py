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
