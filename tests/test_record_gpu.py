"""tools/record_gpu.py as it runs on the GPU machine, rehearsed here without a GPU.

The machine is lent for about 15 minutes in all, 10 a command: the recorder must keep what
it did if it is killed, stop starting lessons when its budget runs out, and let a second
call finish the rest. These tests run it with --rehearse (GPU-only cells take their
fallback, and the recording says it is a rehearsal) on two small fixture lessons.
"""
import json
import os
import signal
import subprocess
import sys
import time

import nbformat
import pytest
from conftest import ROOT, slow

import record_gpu

LESSON = ["import time\ntime.sleep({sleep})\nprint('lesson {n}')",
          "# NBVAL_IGNORE_OUTPUT\nimport torch\nif torch.cuda.is_available():\n    print('gpu')\n"
          "else:\n    print('fallback')  # d2l.show_recording('{n}-cell', gpus=1)"]


def lessons(tmp_path, sleeps=(0, 0)):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for n, sleep in enumerate(sleeps, 1):
        cells = [nbformat.v4.new_code_cell(c.format(n=f"{n:02d}", sleep=sleep)) for c in LESSON]
        nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}),
            folder / f"{n:02d}_lesson.ipynb")
    return folder


def recorder(out, notebooks, *extra):
    return [sys.executable, str(ROOT / "tools" / "record_gpu.py"), str(out), "--rehearse",
            "--notebooks", str(notebooks), "--suite-min", "1e9", *extra]


def finished(out):
    return sorted(json.loads((out / "gpu-recording.json").read_text())["lessons"])


@slow("starts four kernels: about 20 s")
def test_a_short_budget_stops_starting_lessons_and_a_resume_finishes_them(tmp_path):
    notebooks = lessons(tmp_path)
    first = subprocess.run(recorder(tmp_path / "one", notebooks, "--budget", "12", "--lesson-reserve", "11"),
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == 1, first.stdout + first.stderr          # not everything ran
    assert finished(tmp_path / "one") == ["01_lesson.ipynb"]
    assert "02_lesson.ipynb: not started" in (tmp_path / "one" / "lessons.log").read_text()
    summary = json.loads((tmp_path / "one" / "summary.json").read_text())
    assert summary["steps"]["lessons"]["missing"] == ["02_lesson.ipynb"]
    assert "PYTORCH_CUDA_ALLOC_CONF" not in summary["environment"]["variables"]

    second = subprocess.run(recorder(tmp_path / "two", notebooks, "--resume", str(tmp_path / "one")),
                            capture_output=True, text=True, timeout=120)
    assert finished(tmp_path / "two") == ["01_lesson.ipynb", "02_lesson.ipynb"], second.stdout + second.stderr
    log = (tmp_path / "two" / "lessons.log").read_text()
    assert "01_lesson.ipynb" not in log and "02_lesson.ipynb" in log     # only the missing one ran
    rec = json.loads((tmp_path / "two" / "gpu-recording.json").read_text())
    assert rec["machine"]["rehearsal"] and set(rec["needs_more_gpus"]) == {"01-cell", "02-cell"}


@slow("starts three kernels and kills one run: about 20 s")
def test_a_killed_run_keeps_the_lessons_it_finished(tmp_path):
    notebooks = lessons(tmp_path, sleeps=(0, 60))
    out = tmp_path / "out"
    run = subprocess.Popen(recorder(out, notebooks), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out.exists() and "01_lesson.ipynb" in finished(out)):
        time.sleep(0.5)
    os.killpg(run.pid, signal.SIGKILL)              # as the device tool stops a command at its limit
    run.wait()
    assert finished(out) == ["01_lesson.ipynb"]     # a whole file, with the lesson that finished
    redo = subprocess.run(recorder(tmp_path / "again", notebooks, "--resume", str(out), "--lessons", "01",
                                   "--budget", "12", "--lesson-reserve", "11"),
                          capture_output=True, text=True, timeout=120)
    log = (tmp_path / "again" / "lessons.log").read_text()
    assert "01_lesson.ipynb: " in log and "02_lesson.ipynb: not started" in log, redo.stdout + redo.stderr


def test_resume_refuses_a_recording_of_another_machine(tmp_path):
    earlier = {"note": "", "machine": {"gpu": "NVIDIA H200", "gpu_count": 1, "driver": "1", "cuda": "13.0",
                                       "torch": "2.11.0"}, "cells": {}, "needs_more_gpus": {}, "lessons": {}}
    (tmp_path / "gpu-recording.json").write_text(json.dumps(earlier))
    today = dict(earlier["machine"], gpu="NVIDIA H100 80GB HBM3")
    with pytest.raises(SystemExit, match="another machine"):
        record_gpu.resume(tmp_path, today, set())
    rec, _ = record_gpu.resume(tmp_path, dict(earlier["machine"], date="2026-12-02"), set())
    assert rec["machine"]["date"] == "2026-12-02"


def test_accept_refuses_a_rehearsal(tmp_path, capsys):
    (tmp_path / "gpu-recording.json").write_text(json.dumps({"machine": record_gpu.rehearsal_machine(),
                                                             "cells": {}, "needs_more_gpus": {}}))
    assert record_gpu.main(["--accept", str(tmp_path)]) == 1
    assert "rehearsal" in capsys.readouterr().err


def test_children_run_with_the_allocator_at_its_defaults(monkeypatch):
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.setenv("PYTORCH_ALLOC_CONF", "expandable_segments:True")
    env = record_gpu.child_env()
    assert "PYTORCH_CUDA_ALLOC_CONF" not in env and "PYTORCH_ALLOC_CONF" not in env
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)
    assert record_gpu.environment_record()["removed"] == ["PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"]


def test_the_command_in_contributing_is_one_the_recorder_takes(monkeypatch):
    """CONTRIBUTING.md writes the GPU machine's command once; the recorder must accept it."""
    import re
    text = (ROOT / "CONTRIBUTING.md").read_text()
    line = next(l for l in text.splitlines() if 'tools/record_gpu.py "$OUT"' in l)
    assert "--target /tmp/site .whl/*.whl" in line and "export PYTHONPATH=/tmp/site" in line
    args = line.split('tools/record_gpu.py "$OUT"', 1)[1].split()
    seen = {}
    monkeypatch.setattr(record_gpu, "record", lambda parsed: seen.setdefault("args", parsed) and 0)
    record_gpu.main(["/tmp/out", *args])
    assert seen["args"].budget <= 570, "one command is cut at 600 s: leave room to write the files"
    assert re.search(r"carry: \[\"\.whl\"\]", text) and "timeout_s: 600" in text


def test_measure_gpu_runs_without_an_installed_package(tmp_path):
    """`python tools/measure_gpu.py` finds the helpers of its checkout itself: run with -S
    (no site module, so no .pth file adds the editable install), torch on PYTHONPATH."""
    import torch
    site = os.path.dirname(os.path.dirname(torch.__file__))
    done = subprocess.run([sys.executable, "-S", str(ROOT / "tools" / "measure_gpu.py"), "--out",
                           str(tmp_path / "gpu.json")], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={"PYTHONPATH": site, "PATH": os.environ["PATH"]})
    assert done.returncode == 2 and "no CUDA GPU here" in done.stderr, done.stderr[-2000:]
