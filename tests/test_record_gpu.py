"""tools/record_gpu.py as it runs on the GPU machine, rehearsed here without a GPU.

The machine is lent for about 15 minutes in all, 10 a command: the recorder must keep what
it did if it is killed, stop starting lessons when its budget runs out, and let a second
call finish the rest. These tests run it with --rehearse (GPU-only cells take their
fallback, and the recording says it is a rehearsal) on two small fixture lessons.
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


@slow("starts three kernels: about 15 s")
def test_a_lesson_whose_estimate_does_not_fit_waits_and_a_resume_runs_it(tmp_path):
    notebooks = lessons(tmp_path)
    first = subprocess.run(recorder(tmp_path / "one", notebooks, "--budget", "60",
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
    assert rec["machine"]["rehearsal"] and set(rec["needs_more_gpus"]) == {"01-cell", "02-cell"}


@slow("starts two kernels and waits for the budget: about 25 s")
def test_the_budget_stops_a_running_lesson_and_its_processes(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for name, cells in (("01_quick.ipynb", ["print('lesson 01')"]),
                        ("02_stays.ipynb", ["print('lesson 02')", STAYS.format(pids=str(tmp_path / "pids"))])):
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), notebooks / name)
    (tmp_path / "estimates.json").write_text(json.dumps({"01_quick.ipynb": 1, "02_stays.ipynb": 1}))
    out, began = tmp_path / "out", time.monotonic()
    done = subprocess.run(recorder(out, notebooks, "--budget", "20", "--estimates", str(tmp_path / "estimates.json")),
                          capture_output=True, text=True, timeout=120)
    assert time.monotonic() - began < 40, "the lesson ran on past the budget"
    assert done.returncode == 1 and finished(out) == ["01_quick.ipynb"], done.stdout + done.stderr
    lessons_step = json.loads((out / "summary.json").read_text())["steps"]["lessons"]
    assert list(lessons_step["cut_off"]) == ["02_stays.ipynb"] and lessons_step["missing"] == ["02_stays.ipynb"]
    assert "cut off at the budget, in code cell 2 of 2" in lessons_step["cut_off"]["02_stays.ipynb"]["where"]
    kernel, child = map(int, (tmp_path / "pids").read_text().split())
    deadline = time.monotonic() + 10
    alive = [kernel, child]
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.2)
    assert not alive, f"still running after the cut: {alive}"


@slow("starts two kernels and kills one run: about 15 s")
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
    redo = subprocess.run(recorder(tmp_path / "again", notebooks, "--resume", str(out), "--lessons", "1",
                                   "--budget", "60", "--estimates", estimates(tmp_path, lesson01=5, lesson02=300)),
                          capture_output=True, text=True, timeout=120)
    log = (tmp_path / "again" / "lessons.log").read_text()
    assert "01_lesson.ipynb: " in log and "02_lesson.ipynb: not started" in log, redo.stdout + redo.stderr


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


def test_lessons_to_record_again_are_named_with_or_without_the_leading_zero(tmp_path):
    assert record_gpu.lesson_numbers("8,11") == record_gpu.lesson_numbers("08,11") == {"08", "11"}
    for bad in ("8;11", "eight", "0", "-1"):
        with pytest.raises(ValueError, match="lesson numbers"):
            record_gpu.lesson_numbers(bad)
    previous = earlier_call(tmp_path)
    rec, _ = record_gpu.resume(previous, MACHINE, record_gpu.lesson_numbers("8"))
    assert sorted(rec["lessons"]) == ["11_b.ipynb"] and sorted(rec["cells"]) == ["11-y"]


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
    assert sorted(rec["cells"]) == ["08-x", "11-y"]          # the cut-off lesson 12 runs again, whole
    assert list(rec["needs_more_gpus"]) == ["12-two"]
    rec, steps = record_gpu.resume(previous, MACHINE, {"11"})
    assert set(steps) == {"preflight", "measure_gpu"}, "the suite ran the lesson as it was"
    assert sorted(rec["lessons"]) == ["08_a.ipynb"]


def test_the_plan_puts_every_lesson_and_measure_gpu_into_two_calls():
    names = [p.name for p in record_gpu.lesson_paths(record_gpu.NOTEBOOKS)]
    est = {n: s for n, (s, _) in record_gpu.estimates_for(names).items()}
    calls, unrun = record_gpu.plan([540, 540], est, measure_s=60, suite_min=150)
    planned = [name for _, steps, _ in calls for name, _, whole in steps if whole]
    assert set(names) | {"preflight", "measure_gpu"} <= set(planned), unrun
    assert calls[0][2] >= 30, f"call 1 has {calls[0][2]} s spare: less than 30 s"
    # A lesson whose estimate does not fit in what is left waits for the next call; a later,
    # shorter one goes ahead.
    calls, unrun = record_gpu.plan([100, 300], {"01_a": 40, "02_b": 60, "03_c": 10}, measure_s=60, suite_min=150)
    assert [[n for n, _, _ in steps] for _, steps, _ in calls] == [
        ["start", "preflight", "01_a", "03_c"], ["start", "02_b", "measure_gpu", "suite"]]
    assert unrun == [] and calls[1][1][-1] == ("suite", 140, True)


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
    assert record_gpu.main(["--plan", "540,200"]) == 0
    out = capsys.readouterr().out
    assert "call 1 (--budget 540): preflight, lessons 01-13, " in out or \
        "call 1 (--budget 540): preflight, lessons 01-13:" in out, out
    assert "call 2 (--budget 200):" in out and "device time:" in out


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
