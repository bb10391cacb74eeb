"""The setup check students run before the first day (python -m d2l_utils.setup_check)."""
import subprocess
import sys

from conftest import ROOT

from d2l_utils import setup_check


def test_it_says_ready_here_and_exits_0():
    done = subprocess.run([sys.executable, "-m", "d2l_utils.setup_check"], capture_output=True, text=True,
                          timeout=180, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split("]")[0] + "]" for line in lines[:-1]] and lines[-1].startswith("READY")
    assert len(lines) == len(setup_check.CHECKS) + 1 and done.stderr == ""


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
