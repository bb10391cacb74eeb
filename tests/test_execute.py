"""tools/execute_notebooks.py stamps each lesson with the run that made its stored outputs
(metadata.course.last_run: the kernel's PyTorch and Python, the date, the accelerator),
and every lesson carries that stamp from the lab's pinned environment. The teacher's guide
says which versions CI checks, from the files CI uses."""
import datetime
import json
import platform
import re

import nbformat
import pytest
from conftest import NOTEBOOKS, ROOT

import execute_notebooks


def pinned_torch(requirements):
    """The torch==X.Y.Z pin of a requirements file, without a local part (+cpu)."""
    pin, = re.findall(r"^torch==([\d.]+)", (ROOT / requirements).read_text(encoding="utf-8"), flags=re.M)
    return pin


def test_executing_a_notebook_stamps_the_kernels_versions_and_leaves_no_trace(tmp_path):
    import torch
    path = tmp_path / "01_tiny.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 6 * 7\nprint(x)"), nbformat.v4.new_markdown_cell("# prose"),
                nbformat.v4.new_code_cell("x + 1")]
    nb.cells[0].metadata["tags"] = ["kept"]
    nbformat.write(nb, path)
    seconds, run = execute_notebooks.execute(path)
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert stored["metadata"]["course"]["last_run"] == run
    # The kernel that ran the cells is this Python with this torch (the python3 kernel of this environment).
    assert run["torch"] == torch.__version__ and run["python"] == platform.python_version(), run
    assert run["python"] == stored["metadata"]["language_info"]["version"]
    today = datetime.datetime.now(datetime.timezone.utc).date()
    assert datetime.date.fromisoformat(run["date"]) in (today, today - datetime.timedelta(days=1)), run
    expected = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else None
    assert run["accelerator"] == expected
    # The asking cell is gone: the lesson's cells, numbered 1, 2 as one run, without per-run noise.
    cells = stored["cells"]
    assert len(cells) == 3 and [c.get("execution_count") for c in cells if c["cell_type"] == "code"] == [1, 2]
    assert "".join(cells[0]["outputs"][0]["text"]) == "42\n"
    assert "".join(cells[2]["outputs"][0]["data"]["text/plain"]) == "43"
    assert cells[0]["metadata"] == {"tags": ["kept"]} and "execution" not in cells[2]["metadata"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_lesson_records_the_run_its_outputs_came_from(path):
    meta = json.loads(path.read_text(encoding="utf-8"))["metadata"]
    run = meta.get("course", {}).get("last_run")
    assert run, f"{path.name}: no metadata.course.last_run: re-run it with tools/execute_notebooks.py"
    assert set(run) == {"torch", "python", "date", "accelerator"}, run
    # Stored outputs come from the lab's pinned environment (requirements.txt, Python 3.11) ...
    assert run["torch"].split("+")[0] == pinned_torch("requirements.txt"), (
        f"{path.name}: its outputs came from PyTorch {run['torch']}, not requirements.txt's pin: re-run it")
    assert run["python"].startswith("3.11.") and run["python"] == meta["language_info"]["version"], run
    # ... on a machine without a GPU, on a real date.
    assert run["accelerator"] is None, f"{path.name}: stored outputs must come from a machine without a GPU"
    made = datetime.date.fromisoformat(run["date"])
    assert datetime.date(2026, 1, 1) <= made <= datetime.datetime.now(datetime.timezone.utc).date(), run


def test_the_teachers_guide_names_the_versions_ci_checks():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install -q -r requirements.txt" in ci and "python3.12" in ci
    assert "pip install -q -r .ci/requirements-2.11.txt" in ci
    guide = (ROOT / "teaching" / "README.md").read_text(encoding="utf-8")
    paragraph = " ".join(guide[guide.index("**Versions.**"):].split("\n\n")[0].split())
    assert f"Python 3.11 with `requirements.txt`'s PyTorch {pinned_torch('requirements.txt')}" in paragraph
    assert f"Python 3.12 with PyTorch {pinned_torch('.ci/requirements-2.11.txt')}" in paragraph
    assert "setup_check --lessons" in paragraph and "tools/execute_notebooks.py" in paragraph


def test_the_readme_says_where_to_see_a_lessons_versions():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "`course.last_run`" in readme and "`python -m d2l_utils.setup_check --lessons`" in readme
