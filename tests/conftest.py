"""Shared helpers of the tests.

`tools/` is not a package: it is put on sys.path here so that tests can import
`nbtemplate` (the one place that derives the Colab addresses from pyproject.toml).

Some checks need things a newcomer's laptop may lack (Debian's chromium, the local
CPU wheel of torch). They skip there, saying why; CI (.ci/run) sets COURSE_CI=1,
and then a missing prerequisite is a failure, so that the check cannot quietly
stop running.

On a machine with CUDA GPUs the lessons never share them: the repository's top-level
conftest.py makes them take turns.
"""
import json
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def cells(path):
    """The cells of a stored notebook, as JSON."""
    return json.loads(pathlib.Path(path).read_text(encoding="utf-8"))["cells"]


def source(cell):
    """A cell's source as one string."""
    return "".join(cell["source"])


def code_cells(path):
    """The code cells that hold code: the ones a run numbers 1, 2, 3, ..."""
    return [c for c in cells(path) if c["cell_type"] == "code" and source(c).strip()]


def cuda_cells(path):
    """The GPU-only cells of a lesson, {id: gpus}, each checked to be written the way a
    one-condition cell is: `# NBVAL_IGNORE_OUTPUT` first, the GPU code under
    `if torch.cuda.is_available():`, the recording's mark last."""
    from d2l_utils.recordings import MARK
    found = {}
    for cell in code_cells(path):
        src = source(cell)
        for cell_id, gpus in MARK.findall(src):
            found[cell_id] = int(gpus)
            assert src.startswith("# NBVAL_IGNORE_OUTPUT\n"), cell_id
            assert "\nif torch.cuda.is_available():\n" in src, cell_id
            assert src.rstrip().endswith(f"d2l.show_recording('{cell_id}', gpus={gpus})"), cell_id
    return found


def in_ci():
    """True when the run is CI's (.ci/run sets COURSE_CI=1)."""
    return os.environ.get("COURSE_CI", "") not in ("", "0")


def run_slow():
    """True when slow checks run too: in CI, or when COURSE_SLOW=1 asks for them."""
    return in_ci() or os.environ.get("COURSE_SLOW", "") not in ("", "0")


def slow(reason):
    """Mark a test that runs in CI and with COURSE_SLOW=1 only, so that the README's test
    command stays within its 3-minute budget; ``reason`` says what it costs."""
    return pytest.mark.skipif(not run_slow(), reason=f"slow ({reason}): runs in CI (.ci/run); "
                                                      "set COURSE_SLOW=1 to run it here")


def require(condition, reason):
    """Skip with `reason` when `condition` is false; in CI, fail instead."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"{reason} (COURSE_CI is set, so this check is mandatory)", pytrace=False)
    pytest.skip(reason)


def _untracked():
    """Files git neither tracks nor ignores, or None outside a git checkout."""
    import subprocess
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                             cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return {line[3:] for line in out.stdout.splitlines() if line.startswith("??")}


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):      # the controller, not an xdist worker
        session.config._untracked_before = _untracked()


def pytest_sessionfinish(session, exitstatus):
    """Running the lessons must leave the work tree clean: scratch files go to a temp dir."""
    before = getattr(session.config, "_untracked_before", None)
    after = _untracked() if before is not None else None
    if before is None or after is None:
        return
    left = sorted(after - before)
    if left:
        print("\nThe test run left files in the repository (use a temporary directory):\n  "
              + "\n  ".join(left))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED



@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """The handouts of the current lessons (tools/handouts.py), built once per test process."""
    import handouts
    out = tmp_path_factory.mktemp("handouts")
    handouts.build(out)
    return out
