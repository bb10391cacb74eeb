"""Static checks of the stored notebooks (nbval itself executes them and compares outputs)."""
import re

import pytest
from conftest import NOTEBOOKS, code_cells, source

MARKERS = {"NBVAL_IGNORE_OUTPUT", "NBVAL_CHECK_OUTPUT", "NBVAL_RAISES_EXCEPTION", "NBVAL_SKIP"}


def test_lessons_are_numbered_in_reading_order():
    names = [p.name for p in NOTEBOOKS]
    assert names, "no notebooks found"
    assert all(re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", n) for n in names), names
    assert [int(n[:2]) for n in names] == list(range(1, len(names) + 1)), names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_outputs_come_from_one_top_to_bottom_run(path):
    counts = [c["execution_count"] for c in code_cells(path)]
    assert counts == list(range(1, len(counts) + 1)), (
        f"{path.name}: re-run it with tools/execute_notebooks.py")
    for cell in code_cells(path):
        for out in cell["outputs"]:
            assert out["output_type"] != "error" or "NBVAL_RAISES_EXCEPTION" in source(cell), \
                f"{path.name}: stored error in cell {cell['execution_count']}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_nbval_markers_are_spelled_so_that_nbval_sees_them(path):
    # nbval only honours a marker that is the whole comment: '# NBVAL_IGNORE_OUTPUT (x)' is ignored.
    for cell in code_cells(path):
        for line in source(cell).splitlines():
            if "NBVAL_" in line and line.strip().startswith("#"):
                assert line.strip().lstrip("#").strip() in MARKERS, f"{path.name}: {line!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_stderr_in_compared_cells(path):
    for cell in code_cells(path):
        if "NBVAL_IGNORE_OUTPUT" in source(cell):
            continue
        for out in cell["outputs"]:
            assert out.get("name") != "stderr", (
                f"{path.name}, cell {cell['execution_count']}: stderr varies between runs")
