"""The setup check students run before the first day (python -m d2l_utils.setup_check)."""
import importlib.util
import subprocess
import sys

from conftest import ROOT

from d2l_utils import setup_check


def test_its_verdict_here_matches_what_is_installed():
    """READY (exit 0) in the lab's environment; in CI's second environment, which has no
    JupyterLab, NOT READY (exit 1) naming JupyterLab."""
    has_lab = importlib.util.find_spec("jupyterlab") is not None
    done = subprocess.run([sys.executable, "-m", "d2l_utils.setup_check"], capture_output=True, text=True,
                          timeout=180, cwd=ROOT)
    lines = done.stdout.splitlines()
    assert len(lines) == len(setup_check.CHECKS) + 1 and done.stderr == "", done.stdout + done.stderr
    if has_lab:
        assert done.returncode == 0 and lines[-1].startswith("READY"), done.stdout
    else:
        assert done.returncode == 1 and lines[-1].startswith("NOT READY: fix JupyterLab"), done.stdout


def test_a_failed_check_makes_it_not_ready_and_says_what_to_fix():
    printed = []
    checks = [("Python", lambda: (setup_check.OK, "fine")),
              ("JupyterLab", lambda: (setup_check.FAIL, "JupyterLab is not installed here: pip install ...")),
              ("recordings", lambda: (setup_check.NOTE, "none"))]
    assert setup_check.run(checks, out=printed.append) == 1
    assert printed[-1].startswith("NOT READY: fix JupyterLab")


def test_notes_do_not_stop_the_course_and_a_broken_check_is_a_failure():
    printed = []
    assert setup_check.run([("accelerator", lambda: (setup_check.NOTE, "no GPU"))], out=printed.append) == 0
    assert printed[-1].startswith("READY (with notes: accelerator)")
    def broken():
        raise OSError("disk")
    assert setup_check.run([("helpers", broken)], out=printed.append) == 1
    assert "the check itself failed: OSError: disk" in printed[-2]


def test_an_old_python_or_pytorch_is_named(monkeypatch):
    monkeypatch.setattr(setup_check.sys, "version_info", (3, 10, 0))
    assert setup_check.check_python()[0] == setup_check.FAIL
    assert setup_check._release("2.9.1+cu128") < setup_check.LOWEST_TORCH <= setup_check._release("2.11.0")
