"""tools/record_gpu.py as it runs on the GPU machine, rehearsed here without a GPU.

The machine is lent for about 15 minutes in all, its start included, 10 a command: the
recorder plans one call, must keep every GPU-only cell that finished if it is killed (even in
the middle of a lesson), stop starting lessons when its budget runs out, skip lessons that
one GPU cannot run, keep a failed cell's outputs, warn about a GPU outside the datasheet
table, and let a later call finish the rest. The fast tests drive its parts directly
(fixture lessons and cells, no kernel); the slow ones run it with --rehearse (GPU-only cells
take their fallback, recorded in their place, and the recording says it is a rehearsal) on
small fixture lessons, kernels included.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

import nbformat
import psutil
import pytest
from conftest import ROOT, slow

import record_gpu

LESSON = ["import time\ntime.sleep({sleep})\nprint('lesson {n}')",
          "# NBVAL_IGNORE_OUTPUT\nimport torch\nif torch.cuda.is_available():\n    print('gpu')\n"
          "else:\n    print('fallback')  # d2l.show_recording('{n}-cell', gpus=1)"]
# A cell that a rehearsal records (it "needs" 0 GPUs) and that checks two expectations of
# its own, registered here: one it meets and one it misses.
CHECKED = ("# NBVAL_IGNORE_OUTPUT\nfrom d2l_utils.expectations import check_expected, expectation\n"
           "@expectation('{n}-checked', how='source')\ndef _(e, gpu):\n"
           "    e.text('word', 'a word it prints', 'lesson', why='the fixture prints it')\n"
           "    e.text('other', 'a word it does not print', 'absent', why='a miss, on purpose')\n"
           "check_expected('{n}-checked', word='lesson {n}', other='present')"
           "  # d2l.show_recording('{n}-checked', gpus=0)")
# A cell that stays until it is stopped, with a child in a session of its own, and says
# where both are.
STAYS = ("import os, subprocess, sys, time\n"
         "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], start_new_session=True)\n"
         "open({pids!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\ntime.sleep(300)")


def lessons(tmp_path, sleeps=(0, 0), extra=(), extra_in=None):
    """Fixture lessons 01, 02, ... in tmp_path/notebooks: LESSON's cells, then ``extra``'s
    (in the lessons numbered in ``extra_in``; None: in all)."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for n, sleep in enumerate(sleeps, 1):
        more = extra if extra_in is None or n in extra_in else ()
        cells = [nbformat.v4.new_code_cell(c.format(n=f"{n:02d}", sleep=sleep, pids=str(tmp_path / "pids")))
                 for c in (*LESSON, *more)]
        nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}),
            folder / f"{n:02d}_lesson.ipynb")
    return folder


def estimates(tmp_path, **seconds):
    """An --estimates file: {"01_lesson.ipynb": seconds, ...} from lesson01=..., lesson02=..."""
    path = tmp_path / "estimates.json"
    path.write_text(json.dumps({f"{k[-2:]}_lesson.ipynb": v for k, v in seconds.items()}))
    return str(path)


def recorder(out, notebooks, *extra):
    return [sys.executable, str(ROOT / "tools" / "record_gpu.py"), str(out), "--rehearse",
            "--notebooks", str(notebooks), "--suite-min", "1e9", *extra]


def finished(out):
    return sorted(json.loads((out / "gpu-recording.json").read_text())["lessons"])


def recorded(out):
    return sorted(json.loads((out / "gpu-recording.json").read_text())["cells"])


@slow("starts three kernels: about 15 s")
def test_a_lesson_whose_estimate_does_not_fit_waits_and_a_resume_runs_it(tmp_path):
    notebooks = lessons(tmp_path)
    first = subprocess.run(recorder(tmp_path / "one", notebooks, "--budget", "60", "--partial-min", "1e9",
                                    "--estimates", estimates(tmp_path, lesson01=5, lesson02=300)),
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == 1, first.stdout + first.stderr          # not everything ran
    assert finished(tmp_path / "one") == ["01_lesson.ipynb"]
    assert "02_lesson.ipynb: not started: its estimate is 300 s" in (tmp_path / "one" / "lessons.log").read_text()
    summary = json.loads((tmp_path / "one" / "summary.json").read_text())
    assert summary["steps"]["lessons"]["missing"] == ["02_lesson.ipynb"]
    assert summary["estimates_s"] == {"01_lesson.ipynb": 5, "02_lesson.ipynb": 300}
    assert "PYTORCH_CUDA_ALLOC_CONF" not in summary["environment"]["variables"]
    assert {p.name for p in (tmp_path / "one").iterdir()} <= set(record_gpu.FILES)

    second = subprocess.run(recorder(tmp_path / "two", notebooks, "--resume", str(tmp_path / "one")),
                            capture_output=True, text=True, timeout=120)
    assert finished(tmp_path / "two") == ["01_lesson.ipynb", "02_lesson.ipynb"], second.stdout + second.stderr
    log = (tmp_path / "two" / "lessons.log").read_text()
    assert "01_lesson.ipynb" not in log and "02_lesson.ipynb" in log     # only the missing one ran
    rec = json.loads((tmp_path / "two" / "gpu-recording.json").read_text())
    # A rehearsal is one of the lent machine (one GPU): each one-GPU cell's fallback is recorded.
    assert rec["machine"]["rehearsal"] and rec["machine"]["gpu_count"] == 1
    assert sorted(rec["cells"]) == ["01-cell", "02-cell"] and rec["needs_more_gpus"] == {}
    assert "fallback" in rec["cells"]["02-cell"]["outputs"][0]["text"]


@slow("starts two kernels and waits for the budget: about 45 s")
def test_the_budget_stops_a_running_lesson_and_its_processes_and_keeps_its_finished_cells(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    gpu = LESSON[1].format(n="02")
    for name, cells in (("01_quick.ipynb", ["print('lesson 01')", LESSON[1].format(n="01")]),
                        ("02_stays.ipynb", ["print('lesson 02')", gpu, STAYS.format(pids=str(tmp_path / "pids"))])):
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), notebooks / name)
    (tmp_path / "estimates.json").write_text(json.dumps({"01_quick.ipynb": 1, "02_stays.ipynb": 1}))
    out, began = tmp_path / "out", time.monotonic()
    done = subprocess.run(recorder(out, notebooks, "--budget", "40", "--estimates", str(tmp_path / "estimates.json")),
                          capture_output=True, text=True, timeout=120)
    assert time.monotonic() - began < 65, "the lesson ran on past the budget"
    assert done.returncode == 1 and finished(out) == ["01_quick.ipynb"], done.stdout + done.stderr
    lessons_step = json.loads((out / "summary.json").read_text())["steps"]["lessons"]
    assert list(lessons_step["cut_off"]) == ["02_stays.ipynb"] and lessons_step["missing"] == ["02_stays.ipynb"]
    cut = lessons_step["cut_off"]["02_stays.ipynb"]
    assert "cut off at the budget, in code cell 3 of 3" in cut["where"] and cut["recorded"] == ["02-cell"]
    assert "02-cell" in json.loads((out / "gpu-recording.json").read_text())["cells"]   # kept, though cut off
    kernel, child = map(int, (tmp_path / "pids").read_text().split())
    deadline = time.monotonic() + 10
    alive = [kernel, child]
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.2)
    assert not alive, f"still running after the cut: {alive}"


@slow("starts three kernels and kills one run: about 20 s (60 s on a loaded machine)")
def test_a_run_killed_in_the_middle_of_a_lesson_keeps_the_cells_it_finished(tmp_path):
    """As the device tool kills a command at its limit: everything in the process group, at once."""
    go_on = tmp_path / "go-on"
    wait = f"import os, time\nfor _ in range(600):\n    if os.path.exists({str(go_on)!r}):\n        break\n    time.sleep(0.2)"
    notebooks = lessons(tmp_path, extra=[wait, LESSON[1].replace("{n}-cell", "{n}-later")], extra_in={2})
    out = tmp_path / "out"
    run = subprocess.Popen(recorder(out, notebooks), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    deadline = time.monotonic() + 60
    # The folder comes before its first recording: wait for the file, not the folder.
    while time.monotonic() < deadline and not ((out / "gpu-recording.json").exists() and "02-cell" in recorded(out)):
        time.sleep(0.2)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    assert finished(out) == ["01_lesson.ipynb"]     # whole files: lesson 01, and 02's first GPU cell
    assert recorded(out) == ["01-cell", "02-cell"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"]["lessons"]["running"] == {"02_lesson.ipynb": {"recorded so far": ["02-cell"]}}
    go_on.write_text("")
    redo = subprocess.run(recorder(tmp_path / "again", notebooks, "--resume", str(out)),
                          capture_output=True, text=True, timeout=120)
    log = (tmp_path / "again" / "lessons.log").read_text()
    assert "01_lesson.ipynb" not in log and "02_lesson.ipynb: " in log, redo.stdout + redo.stderr
    assert finished(tmp_path / "again") == ["01_lesson.ipynb", "02_lesson.ipynb"]
    assert recorded(tmp_path / "again") == ["01-cell", "02-cell", "02-later"]


@slow("starts one kernel: about 8 s")
def test_each_cells_expectation_checks_are_stored_and_a_miss_fails_the_run(tmp_path):
    notebooks = lessons(tmp_path, sleeps=(0,), extra=[CHECKED])
    out = tmp_path / "out"
    done = subprocess.run(recorder(out, notebooks, "--budget", "120"), capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, COURSE_CHECKS=str(tmp_path / "not-this-one.jsonl")))
    assert done.returncode == 1, done.stdout + done.stderr
    entry = json.loads((out / "gpu-recording.json").read_text())["cells"]["01-checked"]
    assert [(c["item"], c["measured"], c["ok"]) for c in entry["checks"]] == [
        ("word", "lesson 01", True), ("other", "present", False)]
    lessons_step = json.loads((out / "summary.json").read_text())["steps"]["lessons"]
    assert lessons_step["problems"] == [] and len(lessons_step["misses"]) == 1, lessons_step
    assert "cell 01-checked, other (a word it does not print)" in lessons_step["misses"][0]
    assert "expectations: 1 missed" in done.stdout
    assert not (tmp_path / "not-this-one.jsonl").exists()        # each kernel gets a file of its own
    assert {p.name for p in out.iterdir()} <= set(record_gpu.FILES)


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
    monkeypatch.setenv("COURSE_CHECKS", "/tmp/a-file-every-kernel-would-share")
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.setenv("PYTORCH_ALLOC_CONF", "expandable_segments:True")
    env = record_gpu.child_env()
    assert "PYTORCH_CUDA_ALLOC_CONF" not in env and "PYTORCH_ALLOC_CONF" not in env
    assert "COURSE_CHECKS" not in env
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
    assert seen["args"].budget + record_gpu.WHEELS_S + record_gpu.FINISH_S <= record_gpu.COMMAND_S, \
        "one command is cut at 600 s: leave room for the wheels and to write the files"
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


def test_lessons_to_record_again_are_named_with_or_without_the_leading_zero(tmp_path):
    assert record_gpu.lesson_numbers("8,11") == record_gpu.lesson_numbers("08,11") == {"08", "11"}
    for bad in ("8;11", "eight", "0", "-1"):
        with pytest.raises(ValueError, match="lesson numbers"):
            record_gpu.lesson_numbers(bad)
    previous = earlier_call(tmp_path)
    rec, _ = record_gpu.resume(previous, MACHINE, record_gpu.lesson_numbers("8"))
    assert sorted(rec["lessons"]) == ["11_b.ipynb"]
    assert sorted(rec["cells"]) == ["08-x", "11-y", "12-z"]     # replaced as lesson 08 runs again


MACHINE = {"gpu": "NVIDIA H200", "gpu_count": 1, "driver": "1", "cuda": "13.0", "torch": "2.11.0"}


def earlier_call(tmp_path, suite_exit=0):
    """The files of an earlier call: lessons 08 and 11 finished, 12 cut off with a cell
    recorded; measure_gpu and the suite passed."""
    previous = tmp_path / "previous"
    previous.mkdir()
    cell = {"gpus": 1, "source_sha256": "0", "outputs": [{"type": "text", "name": "stdout", "text": "x\n"}]}
    rec = {"note": "", "machine": MACHINE, "needs_more_gpus": {"12-two": {"lesson": "12_c.ipynb", "gpus": 2}},
           "cells": {"08-x": dict(cell, lesson="08_a.ipynb"), "11-y": dict(cell, lesson="11_b.ipynb"),
                     "12-z": dict(cell, lesson="12_c.ipynb")},
           "lessons": {"08_a.ipynb": {"seconds": 30.0, "problems": []},
                       "11_b.ipynb": {"seconds": 50.0, "problems": []}}}
    (previous / "gpu-recording.json").write_text(json.dumps(rec))
    (previous / "summary.json").write_text(json.dumps({"steps": {
        "lessons": {}, "preflight": {"ok": True}, "measure_gpu": {"exit": 0}, "suite": {"exit": suite_exit}}}))
    return previous


def test_a_resume_keeps_a_passed_suite_only_when_no_lesson_is_recorded_again(tmp_path):
    previous = earlier_call(tmp_path)
    rec, steps = record_gpu.resume(previous, MACHINE, set())
    assert set(steps) == {"preflight", "measure_gpu", "suite"}
    assert sorted(rec["cells"]) == ["08-x", "11-y", "12-z"]  # the cut-off lesson 12 runs again; 12-z stays
    assert sorted(rec["lessons"]) == ["08_a.ipynb", "11_b.ipynb"]
    assert list(rec["needs_more_gpus"]) == ["12-two"]
    rec, steps = record_gpu.resume(previous, MACHINE, {"11"})
    assert set(steps) == {"preflight", "measure_gpu"}, "the suite ran the lesson as it was"
    assert sorted(rec["lessons"]) == ["08_a.ipynb"]


def gpu_lesson(folder, name, cells):
    """A fixture lesson of code cells (sources), written to folder/name; returns its path."""
    path = folder / name
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), path)
    return path


GPU = "# NBVAL_IGNORE_OUTPUT\nif gpu:\n    print('{id}')\nelse:\n    d2l.show_recording('{id}', gpus={gpus})"


def executed(path, index, *outputs):
    """Cell ``index`` of the lesson at ``path``, as a kernel leaves it: with ``outputs``."""
    cell = nbformat.read(path, 4).cells[index]
    cell.outputs = list(outputs)
    return cell


def stdout(text):
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def saver(out, rec):
    """The recorder's save: the recording, written whole, after each GPU-only cell."""
    return lambda: record_gpu.write_json(out / "gpu-recording.json", rec)


def test_each_gpu_only_cell_is_saved_as_it_finishes_and_kept_when_the_call_is_killed(tmp_path):
    """Killed in the middle of a lesson (the device tool kills the command at its limit), the
    call leaves a whole recording with every GPU-only cell that had finished; a resume runs
    the lesson again from the top and keeps those cells until they are recorded again."""
    path = gpu_lesson(tmp_path, "05_x.ipynb", [GPU.format(id="05-a", gpus=1), "x = 1", GPU.format(id="05-b", gpus=1),
                                               GPU.format(id="05-two", gpus=2)])
    out, checks = tmp_path / "out", tmp_path / "checks.jsonl"
    out.mkdir()
    rec, _ = record_gpu.resume(None, MACHINE, set())
    rec["cells"]["05-gone"] = {"lesson": "05_x.ipynb", "gpus": 1, "source_sha256": "0", "outputs": []}
    lesson = record_gpu.LessonRecorder(rec, path, 1, checks, saver(out, rec))
    assert rec["needs_more_gpus"] == {"05-two": {"lesson": "05_x.ipynb", "gpus": 2,
                                                 "why": "needs 2 GPUs; this machine has 1"}}
    checks.write_text(json.dumps({"cell": "05-a", "item": "n", "ok": True}) + "\n")
    lesson.cell_done(executed(path, 0, stdout("05-a\n"), stdout("more\n")), 0)
    lesson.cell_done(executed(path, 1), 1)                      # not a GPU-only cell: nothing saved
    # ... and here the call is killed: what is on disk is a whole file with cell 05-a.
    saved = json.loads((out / "gpu-recording.json").read_text())
    assert saved["cells"]["05-a"]["outputs"] == [{"type": "text", "name": "stdout", "text": "05-a\nmore\n"}]
    assert saved["cells"]["05-a"]["checks"] == [{"cell": "05-a", "item": "n", "ok": True}]
    assert "05_x.ipynb" not in saved["lessons"] and not list(out.glob("*.tmp"))
    (out / "summary.json").write_text(json.dumps({"steps": {"preflight": {"ok": True}}}))

    rec, _ = record_gpu.resume(out, MACHINE, set())          # the next call
    assert sorted(rec["cells"]) == ["05-a", "05-gone"]
    again = record_gpu.LessonRecorder(rec, path, 1, tmp_path / "none.jsonl", saver(out, rec))
    again.cell_done(executed(path, 0, stdout("05-a again\n")), 0)
    assert rec["cells"]["05-a"]["outputs"][0]["text"] == "05-a again\n" and rec["cells"]["05-a"]["checks"] == []
    assert again.finish(cut="cut off at the budget") == [] and "05-gone" in rec["cells"], \
        "a lesson cut off again keeps what earlier calls recorded"
    again.cell_done(executed(path, 2, stdout("05-b\n")), 2)
    assert again.finish(cut=None, ended=False) == [] and "05-gone" in rec["cells"], \
        "a lesson whose kernel died before its last cell keeps them too"
    assert again.finish(cut=None) == []
    assert sorted(rec["cells"]) == ["05-a", "05-b"], "run to its end, the lesson drops cells it no longer records"


def test_a_failed_cell_keeps_its_outputs_its_traceback_and_its_checks(tmp_path, monkeypatch, capsys):
    path = gpu_lesson(tmp_path, "07_x.ipynb", [GPU.format(id="07-crash", gpus=1)])
    out, checks = tmp_path / "out", tmp_path / "checks.jsonl"
    out.mkdir()
    rec, _ = record_gpu.resume(None, MACHINE, set())
    lesson = record_gpu.LessonRecorder(rec, path, 1, checks, saver(out, rec))
    checks.write_text(json.dumps({"cell": "07-crash", "item": "copies", "ok": True}) + "\n")
    error = nbformat.v4.new_output("error", ename="KeyError", evalue="'module.net.0.weight'", traceback=[
        "\x1b[0;31mKeyError\x1b[0m  Traceback (most recent call last)", "\x1b[0;31mKeyError\x1b[0m: 'module.net.0.weight'"])
    lesson.cell_done(executed(path, 0, stdout("one process: done\n"), error), 0)
    entry = json.loads((out / "gpu-recording.json").read_text())["cells"]["07-crash"]
    assert entry["error"] == "KeyError: 'module.net.0.weight'"
    assert entry["outputs"][0] == {"type": "text", "name": "stdout", "text": "one process: done\n"}
    assert entry["outputs"][1]["name"] == "stderr" and "\x1b" not in entry["outputs"][1]["text"]
    assert "Traceback (most recent call last)" in entry["outputs"][1]["text"]
    assert entry["checks"] == [{"cell": "07-crash", "item": "copies", "ok": True}]
    rec["lessons"]["07_x.ipynb"] = {"seconds": 1.0, "problems": lesson.finish(cut=None)}
    step = record_gpu.lessons_step(rec, tmp_path)
    assert step["failed"] == {"07-crash": {"lesson": "07_x.ipynb", "error": "KeyError: 'module.net.0.weight'"}}
    assert step["problems"] == []                               # listed once: as failed
    # --accept refuses it: readers would be shown the traceback as what the GPU printed.
    monkeypatch.setattr(record_gpu, "NOTEBOOKS", tmp_path)
    assert record_gpu.main(["--accept", str(out)]) == 1
    assert "cell 07-crash: raised KeyError" in capsys.readouterr().err


def test_lessons_with_no_gpu_only_cell_the_machine_can_run_are_skipped(tmp_path):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    gpu_lesson(folder, "01_one.ipynb", [GPU.format(id="01-one", gpus=1), GPU.format(id="01-two", gpus=2)])
    gpu_lesson(folder, "02_two.ipynb", ["x = 1", GPU.format(id="02-two", gpus=2), GPU.format(id="02-four", gpus=4)])
    gpu_lesson(folder, "03_none.ipynb", ["x = 1"])
    assert list(record_gpu.skipped_lessons(folder, 1)) == ["02_two.ipynb", "03_none.ipynb"]
    assert "need 2 GPUs or more; this machine has 1" in record_gpu.skipped_lessons(folder, 1)["02_two.ipynb"]
    assert list(record_gpu.skipped_lessons(folder, 2)) == ["03_none.ipynb"]
    names = [p.name for p in record_gpu.lesson_paths(folder)]
    est = record_gpu.estimates_for(names, skipped=record_gpu.skipped_lessons(folder, 1))
    assert est["02_two.ipynb"][0] == 0 and est["02_two.ipynb"][1].startswith("skipped: ")
    # The course's lessons on the lent machine (one GPU): the plan runs no skipped lesson.
    skipped = record_gpu.skipped_lessons(record_gpu.NOTEBOOKS, record_gpu.LENT_GPUS)
    for name in skipped:
        assert all(g > 1 for _, _, g, _ in record_gpu.gpu_marks(record_gpu.NOTEBOOKS / name)), name


def rehearse(tmp_path, folder, *args):
    """The recorder, in this process, rehearsing on the fixture lessons in ``folder``."""
    return record_gpu.main([str(tmp_path / "out"), "--rehearse", "--notebooks", str(folder),
                            "--suite-min", "1e9", *args])


def test_a_rehearsal_of_skipped_lessons_lists_them_and_their_cells(tmp_path, capsys):
    """No kernel starts: both lessons are skipped on the rehearsed one-GPU machine."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    gpu_lesson(folder, "01_two.ipynb", [GPU.format(id="01-two", gpus=2)])
    gpu_lesson(folder, "02_none.ipynb", ["x = 1"])
    assert rehearse(tmp_path, folder) == 1                      # a rehearsal measures nothing: never 0
    rec = json.loads((tmp_path / "out" / "gpu-recording.json").read_text())
    assert rec["lessons"]["01_two.ipynb"]["skipped"].startswith("its GPU-only cell(s) 01-two need 2 GPUs")
    assert list(rec["needs_more_gpus"]) == ["01-two"] and rec["cells"] == {}
    step = json.loads((tmp_path / "out" / "summary.json").read_text())["steps"]["lessons"]
    assert list(step["skipped"]) == ["01_two.ipynb", "02_none.ipynb"] and step["missing"] == []
    assert step["problems"] == [] and step["finished"] == 0
    out = capsys.readouterr().out
    assert "lessons: 0 of 2 finished, 2 skipped" in out and "01_two.ipynb: skipped: " in out


def test_a_gpu_outside_the_datasheet_table_is_warned_about_at_the_start_and_in_the_summary(tmp_path, capsys):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    gpu_lesson(folder, "01_none.ipynb", ["x = 1"])
    rehearse(tmp_path, folder, "--rehearse-as", "NVIDIA Imaginary X1")
    captured = capsys.readouterr()
    assert captured.err.startswith("WARNING: NVIDIA Imaginary X1 is not in the datasheet table")
    assert "its numbers are shown, not judged" in captured.err
    judged = json.loads((tmp_path / "out" / "summary.json").read_text())["judged"]
    assert judged["in_table"] is False and "shown, not judged" in judged["line"]
    assert judged["line"] in captured.out and judged["line"] in (tmp_path / "out" / "lessons.log").read_text()
    assert record_gpu.judging("NVIDIA H200")["in_table"]


def test_the_lent_gpus_are_in_the_datasheet_table():
    """The recording machine's GPU, by the name torch gives it there (KINDS.md: nvidia-smi shows
    'NVIDIA H100 80GB HBM3'; the H200 is 'NVIDIA H200'), is judged, not only shown."""
    for name, key in ((record_gpu.LENT_GPU, "H100"), ("NVIDIA H200", "H200")):
        judged = record_gpu.judging(name)
        assert judged["in_table"] and judged["table_key"] == key, judged["line"]


def test_the_outputs_stored_join_a_streams_pieces():
    cell = nbformat.v4.new_code_cell("print(1)")
    cell.outputs = [stdout("a\n"), stdout("b\n"), nbformat.v4.new_output("stream", name="stderr", text="w\n"),
                    stdout("c\n")]
    outputs, error = record_gpu.outputs_of(cell)
    assert [o["text"] for o in outputs] == ["a\nb\n", "w\n", "c\n"] and error is None


def test_one_call_of_the_default_budget_runs_every_lesson_it_can_and_measure_gpu():
    """The plan for the lent machine: one command of at most 600 s inside a session of 900 s of
    device time, the machine's start and warm-down included."""
    names = [p.name for p in record_gpu.lesson_paths(record_gpu.NOTEBOOKS)]
    skipped = record_gpu.skipped_lessons(record_gpu.NOTEBOOKS, record_gpu.LENT_GPUS)
    est = {n: s for n, (s, _) in record_gpu.estimates_for(names, skipped=skipped).items() if n not in skipped}
    calls, unrun = record_gpu.plan([record_gpu.BUDGET_S], est, measure_s=60, suite_min=150)
    (budget, steps, spare), = calls
    planned = [name for name, _, whole in steps if whole]
    assert set(est) | {"preflight", "measure_gpu"} <= set(planned) and unrun == ["suite"], unrun
    assert spare >= 30, f"the call has {spare} s spare: less than 30 s for estimates that were never measured"
    command = record_gpu.WHEELS_S + budget + record_gpu.FINISH_S
    assert command <= record_gpu.COMMAND_S, "the device tool kills a command at 600 s"
    assert record_gpu.session_seconds(command) <= record_gpu.DEVICE_S
    # A lesson whose estimate does not fit waits while a later, shorter one goes ahead; after
    # measure_gpu it starts anyway with what is left (cut at the budget, its finished cells kept),
    # and a later call runs it whole.
    calls, unrun = record_gpu.plan([130, 300], {"01_a": 40, "02_b": 60, "03_c": 10}, measure_s=60, suite_min=150)
    assert [[(n, whole) for n, _, whole in steps] for _, steps, _ in calls] == [
        [("start", True), ("preflight", True), ("01_a", True), ("03_c", True), ("02_b", False)],
        [("start", True), ("02_b", True), ("measure_gpu", True), ("suite", True)]]
    assert unrun == [] and calls[0][1][-1] == ("02_b", 45, False) and calls[1][1][-1] == ("suite", 140, True)


def test_every_lesson_has_an_estimate_made_of_its_cpu_budget_and_a_gpu_allowance():
    budgets = json.loads((ROOT / "measurements" / "budgets-cpu.json").read_text())["lessons"]
    names = [p.name for p in record_gpu.lesson_paths(record_gpu.NOTEBOOKS)]
    assert sorted(record_gpu.GPU_ALLOWANCE_S) == [n[:2] for n in names]
    for name, (seconds, why) in record_gpu.estimates_for(names).items():
        gpu, reason = record_gpu.GPU_ALLOWANCE_S[name[:2]]
        assert seconds == round(budgets[name]["seconds"] + gpu, 1) and reason in why, name
    with_earlier = record_gpu.estimates_for(names[:1], measured={names[0]: 7.5})
    assert with_earlier[names[0]] == (7.5, "measured by the earlier call")
    unknown, = record_gpu.estimates_for(["99_new.ipynb"]).values()
    assert unknown[0] == 30 + record_gpu.DEFAULT_ALLOWANCE_S


def test_the_plan_is_printed_for_the_budgets_asked(capsys):
    assert record_gpu.main(["--plan"]) == 0
    out = capsys.readouterr().out
    names = [p.name for p in record_gpu.lesson_paths(record_gpu.NOTEBOOKS)]
    skipped = record_gpu.skipped_lessons(record_gpu.NOTEBOOKS, 1)
    run = record_gpu.lesson_list([n for n in names if n not in skipped])
    assert f"call 1 (--budget {record_gpu.BUDGET_S}): preflight, lessons {run}, measure_gpu:" in out, out
    assert "call 2" not in out and f"of the {record_gpu.DEVICE_S} s there are" in out
    if skipped:
        assert f"skipped on 1 GPU: lesson(s) {record_gpu.lesson_list(list(skipped))}" in out
    assert record_gpu.main(["--plan", "570,200"]) == 0
    assert "call 2 (--budget 200):" in capsys.readouterr().out
    assert record_gpu.lesson_list(["01_a", "02_b", "03_c", "05_e", "07_g", "08_h"]) == "01-03, 05, 07, 08"


def test_the_preflight_names_what_triton_lacks(tmp_path, monkeypatch):
    here = record_gpu.preflight(rehearse=True, timeout=10)
    assert here["ok"] == bool(here["compiler"] and here["python_h"]) and here["compile"].startswith("not run")
    nothing = tmp_path / "bin"
    nothing.mkdir()
    monkeypatch.setattr(record_gpu, "python_include", lambda: str(tmp_path))
    bare = record_gpu.preflight(rehearse=True, timeout=10, env={"PATH": str(nothing)})
    assert not bare["ok"] and bare["compiler"] is None and bare["python_h"] is None
    assert [m.split(":")[0] for m in bare["missing"]] == ["a C compiler", "Python's headers"]
    assert "Triton cannot compile here" in record_gpu.preflight_lines(bare)[0]
    # On a GPU the compile runs in a child; its failure is reported with its error line.
    monkeypatch.setattr(record_gpu, "PREFLIGHT_CODE", "raise RuntimeError('Failed to find C compiler.')")
    failed = record_gpu.preflight(rehearse=False, timeout=60, env=dict(os.environ))
    assert failed["compile"]["exit"] == 1 and "Failed to find C compiler" in failed["compile"]["error"]
    assert not failed["ok"] and failed["missing"][-1].startswith("torch.compile on cuda failed")


def test_accept_takes_a_recording_with_missed_expectations_and_says_so(tmp_path, monkeypatch, capsys):
    notebooks = lessons(tmp_path, sleeps=(0,), extra=[CHECKED])
    monkeypatch.setattr(record_gpu, "NOTEBOOKS", notebooks)
    monkeypatch.setattr(record_gpu, "ROOT", tmp_path)
    (tmp_path / "measurements").mkdir()
    nb = nbformat.read(notebooks / "01_lesson.ipynb", 4)
    for cell in nb.cells[1:]:                                   # as its two GPU-only cells ran on a GPU
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
    cells, needs_more, problems = record_gpu.record_notebook(nb, "01_lesson.ipynb", gpu_count=1)
    line = {"cell": "01-checked", "item": "other", "label": "a word", "kind": "text", "gpu": "H200",
            "expected": ["absent"], "low": None, "high": None, "unit": "", "how": "source",
            "measured": "present", "ok": False}
    assert record_gpu.attach_checks(cells, [line], "01_lesson.ipynb") == [] and not problems
    assert record_gpu.attach_checks({}, [line], "01_lesson.ipynb")          # a check of no recorded cell
    rec = {"note": "", "machine": MACHINE, "cells": cells, "needs_more_gpus": {}, "lessons": {}}
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "gpu-recording.json").write_text(json.dumps(rec))
    assert record_gpu.main(["--accept", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "Accepted with 1 missed expectation(s)" in out and "cell 01-checked, other" in out
    assert json.loads((tmp_path / "measurements" / "gpu-recording.json").read_text()) == rec


def test_the_docstring_and_contributing_name_the_files_the_recorder_writes():
    doc = record_gpu.__doc__
    section = (ROOT / "CONTRIBUTING.md").read_text().split("### Recording on a GPU machine")[1].split("\n## ")[0]
    words = {6: "six", 7: "seven", 8: "eight", 12: "twelve", 13: "thirteen", 14: "fourteen"}
    for text in (doc, section):
        assert f"at most {words[len(record_gpu.FILES)]} files" in " ".join(text.split())
        assert all(f"``{f}``" in text or f"`{f}`" in text for f in record_gpu.FILES)
    count = words[len(record_gpu.lesson_paths(record_gpu.NOTEBOOKS))]
    assert re.search(rf"for (all|the) {count} lessons", section), f"the section should count {count} lessons"
