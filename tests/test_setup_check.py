"""The setup check students run before the first day (python -m d2l_utils.setup_check)."""
import importlib.util
import json
import pathlib
import re
import shutil
import subprocess
import sys
import time

from conftest import NOTEBOOKS, ROOT, code_cells, require, slow, source

from d2l_utils import setup_check


def test_its_verdict_here_matches_what_is_installed():
    """READY (exit 0) in the lab's environment; in CI's second environment, which has no
    JupyterLab, NOT READY (exit 1) naming JupyterLab."""
    has_lab = importlib.util.find_spec("jupyterlab") is not None
    done = subprocess.run([sys.executable, "-m", "d2l_utils.setup_check"], capture_output=True, text=True,
                          timeout=180, cwd=ROOT)
    lines = done.stdout.splitlines()
    assert len(lines) == len(setup_check.CHECKS) + 2 and done.stderr == "", done.stdout + done.stderr   # + the verdict, in Chinese and English
    if has_lab:
        assert done.returncode == 0 and lines[-1].startswith("READY"), done.stdout
    else:
        assert done.returncode == 1 and lines[-1].startswith("NOT READY: fix JupyterLab"), done.stdout


def test_a_bare_python_is_told_to_install_pytorch_not_shown_a_traceback():
    """The README's command on a Python with nothing installed (``-S``: no site-packages, so no
    PyTorch and no helpers): NOT READY naming PyTorch, the first steps' lines, no traceback."""
    for command in (["-m", "d2l_utils.setup_check"], [str(ROOT / "d2l_utils" / "setup_check.py")]):
        done = subprocess.run([sys.executable, "-S", *command], capture_output=True, text=True, timeout=120,
                              cwd=ROOT)
        assert done.returncode == 1 and "Traceback" not in done.stderr, (command, done.stdout + done.stderr)
        assert "[FAIL] PyTorch      PyTorch is not installed" in done.stdout, (command, done.stdout)
        assert done.stdout.splitlines()[-1].startswith("NOT READY: fix PyTorch"), (command, done.stdout)


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
    assert "the check itself failed: OSError: disk" in printed[-3]


def test_the_verdict_is_also_said_in_chinese_just_before_the_english_one():
    printed = []
    setup_check.run([("accelerator", lambda: (setup_check.NOTE, "no GPU"))], out=printed.append)
    assert printed[-2].startswith("就绪（有提示：accelerator）") and "notebooks/zh/" in printed[-2]
    printed.clear()
    setup_check.run([("JupyterLab", lambda: (setup_check.FAIL, "missing"))], out=printed.append)
    assert printed[-2].startswith("未就绪：请先解决 JupyterLab")


def test_a_copy_without_the_chinese_edition_is_not_sent_to_it(monkeypatch, tmp_path):
    """The students' copy of the workshop has no notebooks/zh/: the verdict names notebooks/."""
    (tmp_path / "01_devices.ipynb").write_text("{}")
    monkeypatch.setattr(setup_check, "LESSONS", tmp_path)
    printed = []
    setup_check.run([("accelerator", lambda: (setup_check.NOTE, "no GPU"))], out=printed.append)
    assert "notebooks/zh/" not in printed[-2] and "`jupyter lab notebooks/`" in printed[-2]


def torch_lower_bound():
    """The ``torch>=`` bound of pyproject.toml's dependencies, as (major, minor)."""
    import re
    import tomllib
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    bound, = [m.group(1) for d in deps if (m := re.fullmatch(r"torch\s*>=\s*([\d.]+)", d.strip()))]
    return tuple(int(part) for part in bound.split(".")[:2])


def test_an_old_python_or_pytorch_is_named(monkeypatch):
    monkeypatch.setattr(setup_check.sys, "version_info", (3, 10, 0))
    assert setup_check.check_python()[0] == setup_check.FAIL
    # The lowest PyTorch is the package's own lower bound: one release below it fails, naming it.
    import torch
    low = torch_lower_bound()
    assert setup_check.LOWEST_TORCH == low
    monkeypatch.setattr(torch, "__version__", f"{low[0]}.{low[1] - 1}.9+cu128")
    status, text = setup_check.check_torch()
    assert status == setup_check.FAIL and f"PyTorch {low[0]}.{low[1]} or later" in text, text
    monkeypatch.setattr(torch, "__version__", f"{low[0]}.{low[1]}.0+cu128")
    assert setup_check.check_torch()[0] != setup_check.FAIL


# The compiler check: what torch.compile's CPU backend needs, tested without running torch.compile.
def fake_compiler(tmp_path, body):
    """An executable shell script standing in for a C++ compiler."""
    path = tmp_path / "fake-c++"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def says_what_is_missing(status, text):
    assert status == setup_check.NOTE, text            # a note: the course runs without a compiler
    assert "lab 4" in text and "lesson 11" in text, text
    assert "build-essential" in text or "xcode-select" in text, text


def test_the_compiler_check_passes_where_a_compiler_and_headers_are():
    require(shutil.which(setup_check._inductor_cxx()), f"no {setup_check._inductor_cxx()} here")
    status, text = setup_check.check_compiler()
    assert status == setup_check.OK and "torch.compile can make CPU kernels" in text, text


def test_a_missing_compiler_is_a_note_that_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", "no-such-c++")
    status, text = setup_check.check_compiler()
    says_what_is_missing(status, text)
    assert "no C++ compiler (no-such-c++)" in text, text
    # No $CXX and nothing on PATH: the default, g++ (clang++ on macOS), is named.
    monkeypatch.delenv("CXX")
    monkeypatch.setenv("PATH", str(tmp_path))
    status, text = setup_check.check_compiler()
    says_what_is_missing(status, text)
    assert f"no C++ compiler ({'clang++' if sys.platform == 'darwin' else 'g++'})" in text, text
    assert setup_check.run([("compiler", setup_check.check_compiler)], out=lambda line: None) == 0


def test_missing_python_headers_are_named(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", fake_compiler(tmp_path, "exit 0"))
    monkeypatch.setattr(setup_check.sysconfig, "get_paths", lambda: {"include": str(tmp_path)})
    status, text = setup_check.check_compiler()
    says_what_is_missing(status, text)
    assert "no Python.h" in text and "python3-dev" in text, text


def test_a_compiler_that_cannot_build_the_library_is_quoted(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", fake_compiler(tmp_path, 'echo "check.cpp:2:10: fatal error: omp.h: No such file" >&2; '
                                                      "exit 1"))
    status, text = setup_check.check_compiler()
    says_what_is_missing(status, text)
    assert "fatal error: omp.h: No such file" in text, text


def running(pid):
    """True while process ``pid`` runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        return "\nState:\tZ" not in open(f"/proc/{pid}/status", encoding="utf-8").read()
    except FileNotFoundError:
        return False


def test_a_compiler_that_hangs_is_stopped_by_the_timeout_with_its_children(monkeypatch, tmp_path):
    # The fake compiler's own child stands for g++'s cc1plus: the timeout stops both.
    require(pathlib.Path("/proc/self/status").exists(), "no /proc here to see the child's child")
    pidfile = tmp_path / "child.pid"
    monkeypatch.setenv("CXX", fake_compiler(tmp_path, f"sleep 20 &\necho $! > {pidfile}\nwait"))
    start = time.perf_counter()
    status, text = setup_check.check_compiler(timeout=1)
    assert status == setup_check.NOTE and "took over 1 s" in text, text
    assert time.perf_counter() - start < 10
    pid = int(pidfile.read_text())
    for _ in range(50):
        if not running(pid):
            break
        time.sleep(0.1)
    assert not running(pid), "the compiler's child outlived the timeout"


def test_the_check_asks_the_compiler_that_inductor_calls():
    import torch._inductor.config as inductor
    assert inductor.cpp.cxx[-1] == setup_check._inductor_cxx()


def test_the_full_compile_is_stopped_by_its_timeout():
    status, text = setup_check.check_full_compile(timeout=0.5)
    assert status == setup_check.NOTE and "did not finish within 0.5 s" in text, text


@slow("a real first torch.compile: 20 s to a minute")
def test_the_full_compile_works_here(monkeypatch, tmp_path):
    """--compile's success path; its failure paths (no compiler, no headers, a hang) are the fast
    library build's, tested above."""
    require(shutil.which(setup_check._inductor_cxx()), f"no {setup_check._inductor_cxx()} here")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))   # no kernel from an earlier run
    status, text = setup_check.check_full_compile()
    assert status == setup_check.OK, text


# Macs.

def as_mac(monkeypatch, machine, rosetta=False, torch_version=None):
    monkeypatch.setattr(setup_check.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(setup_check.platform, "machine", lambda: machine)
    monkeypatch.setattr(setup_check, "_rosetta", lambda: rosetta)
    monkeypatch.setattr(setup_check, "_version", lambda name: torch_version if name == "torch" else None)


def test_an_intel_mac_is_sent_to_binder_or_colab(monkeypatch):
    as_mac(monkeypatch, "x86_64")
    status, text = setup_check.check_machine()
    assert status == setup_check.FAIL, text
    assert text.startswith("an Intel Mac:") and "no wheels for Intel Macs since 2.3" in text, text
    assert "Binder or Colab" in text, text
    printed = []
    assert setup_check.run([("machine", setup_check.check_machine)], out=printed.append) == 1
    assert printed[-1].startswith("NOT READY: fix machine")


def test_an_intel_python_under_rosetta_is_told_to_use_an_arm64_one(monkeypatch):
    as_mac(monkeypatch, "x86_64", rosetta=True)
    status, text = setup_check.check_machine()
    assert status == setup_check.FAIL and "Rosetta" in text and "arm64 Python" in text, text


def test_an_intel_mac_with_a_pytorch_of_its_own_is_a_note(monkeypatch):
    as_mac(monkeypatch, "x86_64", torch_version="2.13.0")
    assert setup_check.check_machine()[0] == setup_check.NOTE
    as_mac(monkeypatch, "x86_64", torch_version="2.2.2")            # PyPI's last Intel Mac wheel
    assert setup_check.check_machine()[0] == setup_check.FAIL


def test_apple_silicon_is_told_which_lessons_use_mps(monkeypatch):
    as_mac(monkeypatch, "arm64")
    status, text = setup_check.check_machine()
    assert status == setup_check.OK and "lessons 1-6 and 11" in text and "mps" in text, text


def test_linux_is_fine_and_windows_is_a_note(monkeypatch):
    monkeypatch.setattr(setup_check.platform, "system", lambda: "Linux")
    assert setup_check.check_machine()[0] == setup_check.OK
    monkeypatch.setattr(setup_check.platform, "system", lambda: "Windows")
    status, text = setup_check.check_machine()
    assert status == setup_check.NOTE and "WSL 2" in text, text


def lessons_on_the_accelerator():
    """The lessons whose code calls try_gpu() or try_all_gpus(): torch.accelerator's device."""
    found = set()
    for path in NOTEBOOKS:
        code = "\n".join(source(c) for c in code_cells(path))
        if re.search(r"(?<!def )\btry_(?:gpu|all_gpus)\(", code):
            found.add(int(path.name[:2]))
    return found


def test_the_mps_lessons_are_the_ones_that_use_the_accelerator():
    assert set(setup_check.MPS_LESSONS) == lessons_on_the_accelerator()
    assert setup_check._lesson_list(setup_check.MPS_LESSONS) == "lessons 1-6 and 11"
    assert setup_check._lesson_list([1, 2, 4, 5, 6, 9]) == "lessons 1, 2, 4-6 and 9"
    assert setup_check._lesson_list([3]) == "lesson 3"


def test_the_readme_tells_mac_users_what_runs_and_what_fails():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    mac = readme[readme.index("**Macs.**"):readme.index("## The lessons")]
    flat = " ".join(mac.split())
    numbers = setup_check._lesson_list(setup_check.MPS_LESSONS)      # 'lessons 1-6 and 11'
    assert numbers.capitalize() in flat and "torch.accelerator" in flat and "mps" in flat, flat
    others = sorted(set(range(1, len(NOTEBOOKS) + 1)) - set(setup_check.MPS_LESSONS))
    assert setup_check._lesson_list(others) in flat, (others, flat)        # 'lessons 7-10, 12 and 13'
    assert "Intel Mac" in flat and "since release 2.3" in flat and "Binder or Colab" in flat, flat
    assert readme.index("**Windows**") < readme.index("**Macs.**")
    # The pinned PyTorch is one that has no Intel Mac wheel (2.3 or later), as the paragraph says.
    pin, = re.findall(r"^torch==(\d+)\.(\d+)", (ROOT / "requirements.txt").read_text(), flags=re.M)
    assert tuple(map(int, pin)) >= (2, 3)


# Which PyTorch each lesson's stored outputs came from.

def lesson(folder, name, run):
    meta = {"kernelspec": {"name": "python3"}}
    if run:
        meta["course"] = {"last_run": run}
    (folder / name).write_text(json.dumps({"cells": [], "metadata": meta, "nbformat": 4, "nbformat_minor": 5}))



def test_the_lessons_line_compares_the_stored_runs_with_what_is_installed(tmp_path):
    import torch
    here = {"torch": torch.__version__, "python": "3.11.7", "date": "2026-12-01", "accelerator": None}
    lesson(tmp_path, "01_a.ipynb", here)
    lesson(tmp_path, "02_b.ipynb", {**here, "date": "2026-12-02"})
    status, text = setup_check.check_lessons(tmp_path)
    assert status == setup_check.OK, text
    assert f"every lesson last run with PyTorch {torch.__version__}, Python 3.11.7 (2026-12-01 to 2026-12-02)" \
        in text, text
    lesson(tmp_path, "03_c.ipynb", {**here, "torch": "2.9.1"})
    lesson(tmp_path, "04_d.ipynb", None)
    status, text = setup_check.check_lessons(tmp_path)
    assert status == setup_check.NOTE, text
    assert "lessons 1 and 2 last run with PyTorch" in text and "lesson 3 last run with PyTorch 2.9.1" in text, text
    assert "lesson 4: no record of its last run" in text and "may print other details" in text, text
    printed = []
    setup_check.print_lessons(tmp_path, out=printed.append)
    assert len(printed) == 5 and "PyTorch 2.9.1" in printed[3] and "no record" in printed[4], printed
    empty = tmp_path / "none"
    empty.mkdir()
    assert setup_check.check_lessons(empty)[0] == setup_check.OK


def test_the_lessons_option_lists_every_lesson(capsys):
    assert setup_check.main(["--lessons"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("here: PyTorch"), lines
    assert [line.split()[0] for line in lines[1:]] == [p.name for p in NOTEBOOKS], lines
