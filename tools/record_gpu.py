"""On a GPU machine: run every lesson and record what its GPU-only cells print; then
tools/measure_gpu.py, then the strict test suite, as far as a time budget allows.

    python3 tools/record_gpu.py OUTDIR                      # on the GPU machine (needs CUDA)
    python3 tools/record_gpu.py OUTDIR --resume PREVIOUS    # a second call: what is missing
    python3 tools/record_gpu.py OUTDIR --resume PREVIOUS --lessons 08,11   # record these again
    python3 tools/record_gpu.py --accept OUTDIR             # back here: check, copy into measurements/
    python3 tools/record_gpu.py OUTDIR --rehearse           # here, without a GPU: the whole run, dry

The GPU machine is lent rarely and briefly (CONTRIBUTING.md, "Recording on a GPU machine"),
so the run is planned around ``--budget`` seconds (default 540: one 9-minute command) and
keeps everything it has done if it is killed:

1. The lessons, in order, each in a fresh kernel. After each lesson the files below are
   rewritten (atomically), so a kill loses at most the lesson that was running. A lesson is
   not started when the time left is under ``--lesson-reserve`` seconds.
2. ``tools/measure_gpu.py`` (lesson 3's copy curves), if ``--measure-s`` seconds are left.
3. The strict suite (``python -m pytest``, nbval comparing outputs), only with
   ``--suite-min`` seconds left, and stopped at the budget: the lessons step has already
   failed any GPU-only cell that took its fallback.

``--resume DIR`` reads a recording written by an earlier call (the files come back from the
GPU machine; carry them to the next call) and runs only what it lacks: the lessons it has
not finished, then the steps not yet run. Lessons named with ``--lessons`` are recorded
again and replace what the earlier call recorded for them. Only a recording of the same
machine (GPU, driver, CUDA, PyTorch) is resumed.

It writes into OUTDIR, at most 8 files, so that the device tool brings all of them back:

* ``gpu-recording.json``: for every GPU-only cell (a cell whose fallback calls
  ``d2l.show_recording('<id>', gpus=N)``), the text and figures its GPU branch printed, with
  a fingerprint of the cell's source; cells that need more GPUs than the machine has, under
  ``needs_more_gpus``; and under ``lessons`` each finished lesson's time and problems.
* ``gpu.json``: the figures of ``tools/measure_gpu.py`` (lesson 3 plots them).
* ``summary.json``: the machine, the environment the children ran in, and each step's
  result and seconds. The exit status is 0 only when every step ran and passed.
* ``lessons.log``, ``measure.log``, ``suite.log``: what each step printed.

Every child (kernel, measure_gpu.py, pytest) runs with the repository on PYTHONPATH and
without ``PYTORCH_CUDA_ALLOC_CONF`` / ``PYTORCH_ALLOC_CONF`` (lesson 8's allocator numbers
assume the default settings). The GPU machine may lack the Jupyter packages and have no
network: ``tools/fetch_gpu_wheels.sh`` downloads them here beforehand (see its header).

``--rehearse`` runs the same steps on a machine without a GPU, with a machine description
that says so: GPU-only cells then take their fallback, and ``--accept`` refuses the result.
It tries everything but the GPU: the wheels, the kernels, the budget, a kill and a resume.
"""
import argparse
import base64
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from d2l_utils.recordings import (MARK, RECORDING, check_recording,  # noqa: E402
                                  machine_info, source_hash)

NOTEBOOKS = ROOT / "notebooks"
NOTE = ("Written by tools/record_gpu.py on the machine described here: what each GPU-only "
        "cell printed there. Do not edit; record again instead.")
DROPPED = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")     # lesson 8 assumes the defaults
SHOWN = ("CUDA_", "PYTORCH_", "TORCH_", "NCCL_", "OMP_", "NVIDIA_", "PYTHONPATH")
SAME_MACHINE = ("gpu", "gpu_count", "driver", "cuda", "torch")


def child_env():
    """The environment of every process started here: the repository importable as
    d2l_utils, output unbuffered, the allocator at its defaults."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def environment_record():
    """What the summary says of the environment: the variables that change what the
    lessons measure, as the children get them, and those taken out."""
    env = child_env()
    return {"variables": {k: v for k, v in sorted(env.items()) if k.startswith(SHOWN)},
            "removed": [k for k in DROPPED if k in os.environ]}


def rehearsal_machine():
    """The machine description of a rehearsal: it says that no GPU was there."""
    import datetime
    import platform

    import torch
    return {"gpu": "NONE (rehearsal without a GPU: not a recording)", "gpu_count": 0,
            "capability": "none", "driver": "none", "cuda": str(torch.version.cuda), "torch": torch.__version__,
            "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(), "rehearsal": True}


def write_json(path, data):
    """Write ``data`` to ``path`` whole or not at all (a kill never leaves half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def outputs_of(cell):
    """A cell's outputs as the recording stores them: text (stdout, stderr, values) and PNG figures.

    Returns ``(outputs, error)``; ``error`` is the error's name and message, or None.
    """
    outputs, error = [], None
    for out in cell.get("outputs", []):
        kind = out["output_type"]
        if kind == "stream":
            text = out["text"] if isinstance(out["text"], str) else "".join(out["text"])
            outputs.append({"type": "text", "name": out["name"], "text": text})
        elif kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            if "image/png" in data:
                png = data["image/png"]
                png = (png if isinstance(png, str) else "".join(png)).replace("\n", "")
                base64.b64decode(png, validate=True)
                outputs.append({"type": "png", "data": png})
            elif "text/plain" in data:
                text = data["text/plain"]
                outputs.append({"type": "text", "name": "stdout",
                                "text": text if isinstance(text, str) else "".join(text)})
        elif kind == "error":
            error = f"{out['ename']}: {out['evalue']}"
    return outputs, error


def record_notebook(nb, lesson, gpu_count):
    """From an executed notebook, the recording of its GPU-only cells.

    Returns ``(cells, needs_more, problems)``: recorded cells by id, the ids that need
    more GPUs than ``gpu_count`` (with why), and what went wrong (a GPU-only cell that
    raised, or that printed nothing).
    """
    cells, needs_more, problems = {}, {}, []
    for cell in nb["cells"]:
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        if cell["cell_type"] != "code":
            continue
        for cell_id, gpus in MARK.findall(src):
            gpus = int(gpus)
            if gpus > gpu_count:
                needs_more[cell_id] = {"lesson": lesson, "gpus": gpus,
                                       "why": f"needs {gpus} GPUs; this machine has {gpu_count}"}
                continue
            outputs, error = outputs_of(cell)
            if error:
                problems.append(f"{lesson}, cell {cell_id}: raised {error}")
            elif not outputs:
                problems.append(f"{lesson}, cell {cell_id}: printed nothing")
            else:
                cells[cell_id] = {"lesson": lesson, "gpus": gpus,
                                  "source_sha256": source_hash(src), "outputs": outputs}
    return cells, needs_more, problems


def run_lesson(path, timeout):
    """Execute one lesson in a fresh kernel; return (executed notebook, problems)."""
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    problems = []
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(path.parent)}}).execute(env=child_env())
    except Exception as e:                          # a cell timed out, or the kernel died
        problems.append(f"{path.name}: did not finish: {type(e).__name__}: {str(e)[:300]}")
    problems += [f"{path.name}: cell {c.get('execution_count')} failed: {o['ename']}: {str(o['evalue'])[:300]}"
                 for c in nb.cells if c.cell_type == "code"
                 for o in c.get("outputs", []) if o["output_type"] == "error"]
    return nb, problems


class Run:
    """One call of the recorder: its budget, its files, and what earlier calls left."""

    def __init__(self, outdir, budget, notebooks=NOTEBOOKS):
        self.outdir, self.notebooks = outdir, notebooks
        self.start, self.budget = time.monotonic(), budget
        outdir.mkdir(parents=True, exist_ok=True)

    def left(self):
        return self.budget - (time.monotonic() - self.start)

    def log(self, name, line):
        print(line, flush=True)
        with open(self.outdir / name, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def resume(previous, machine, redo):
    """The recording and summary steps of an earlier call, without the lessons in ``redo``."""
    if previous is None:
        return {"note": NOTE, "machine": machine, "cells": {}, "needs_more_gpus": {}, "lessons": {}}, {}
    rec = json.loads((previous / RECORDING).read_text(encoding="utf-8"))
    differs = {k: (rec["machine"].get(k), machine.get(k)) for k in SAME_MACHINE
               if rec["machine"].get(k) != machine.get(k)}
    if differs:
        raise SystemExit(f"--resume: {previous / RECORDING} was made on another machine: {differs}")
    rec["machine"] = machine                        # today's date
    for part in ("cells", "needs_more_gpus"):
        rec[part] = {k: v for k, v in rec[part].items() if v["lesson"][:2] not in redo}
    rec["lessons"] = {k: v for k, v in rec.get("lessons", {}).items() if k[:2] not in redo}
    steps = {}
    if (previous / "summary.json").exists():
        steps = json.loads((previous / "summary.json").read_text())["steps"]
        steps.pop("lessons", None)
    return rec, steps


def record_lessons(run, rec, summary, cell_timeout, reserve):
    """Run each lesson that ``rec`` has not finished; save everything after each one."""
    for path in sorted(run.notebooks.glob("[0-9][0-9]_*.ipynb")):
        if path.name in rec["lessons"]:
            continue
        if run.left() < reserve:
            run.log("lessons.log", f"{path.name}: not started, {run.left():.0f} s left (resume to run it)")
            continue
        began = time.monotonic()
        nb, problems = run_lesson(path, timeout=cell_timeout)
        cells, needs_more, found = record_notebook(nb, path.name, rec["machine"]["gpu_count"])
        problems += found
        rec["cells"].update(cells)
        rec["needs_more_gpus"].update(needs_more)
        rec["lessons"][path.name] = {"seconds": round(time.monotonic() - began, 1), "problems": problems}
        write_json(run.outdir / RECORDING, rec)
        summary["steps"]["lessons"] = lessons_step(rec, run.notebooks)
        write_json(run.outdir / "summary.json", summary)
        run.log("lessons.log", f"{path.name}: {rec['lessons'][path.name]['seconds']} s, "
                               f"{len(cells)} GPU cell(s) recorded, {len(problems)} problem(s)")
        for problem in problems:
            run.log("lessons.log", f"  {problem}")


def lessons_step(rec, notebooks):
    """The lessons step as the summary reports it."""
    all_lessons = [p.name for p in sorted(notebooks.glob("[0-9][0-9]_*.ipynb"))]
    done = rec["lessons"]
    problems = [p for v in done.values() for p in v["problems"]]
    missing = [name for name in all_lessons if name not in done]
    if not missing:
        problems += check_recording(rec, notebooks)
    return {"finished": len(done), "of": len(all_lessons), "missing": missing, "problems": problems,
            "seconds": round(sum(v["seconds"] for v in done.values()), 1)}


def run_step(cmd, log, timeout):
    """Run ``cmd`` with its output in ``log``; return a summary step (exit status, seconds)."""
    start = time.monotonic()
    with open(log, "w") as f:
        try:
            rc = subprocess.run(cmd, cwd=ROOT, env=child_env(), stdout=f, stderr=subprocess.STDOUT,
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write(f"\n[record_gpu.py: stopped after {timeout:.0f} s, at the end of the time budget]\n")
            rc = 124
    return {"exit": rc, "seconds": round(time.monotonic() - start, 1)}


def record(args):
    import torch
    if not args.rehearse and not torch.cuda.is_available():
        print("record_gpu.py records what GPU-only cells print on a GPU: this machine has no CUDA GPU "
              "(--rehearse tries the run without one).", file=sys.stderr)
        return 2
    run = Run(args.outdir, args.budget, args.notebooks)
    machine = rehearsal_machine() if args.rehearse else machine_info()
    redo = set(filter(None, (args.lessons or "").split(",")))
    rec, steps = resume(args.resume, machine, redo)
    if args.resume:
        for name in ("gpu.json", "measure.log", "suite.log"):    # carry an earlier step's files over
            if (args.resume / name).exists() and not (run.outdir / name).exists():
                shutil.copy(args.resume / name, run.outdir / name)
    summary = {"machine": machine, "environment": environment_record(), "budget_s": args.budget,
               "steps": steps}
    write_json(run.outdir / RECORDING, rec)
    write_json(run.outdir / "summary.json", summary)
    run.log("lessons.log", f"machine: {machine}\nbudget: {args.budget} s")

    record_lessons(run, rec, summary, args.cell_timeout, args.lesson_reserve)
    summary["steps"]["lessons"] = lessons_step(rec, run.notebooks)
    write_json(run.outdir / "summary.json", summary)

    if "measure_gpu" not in summary["steps"] or summary["steps"]["measure_gpu"]["exit"] != 0:
        if run.left() >= args.measure_s and not args.rehearse:
            summary["steps"]["measure_gpu"] = run_step(
                [sys.executable, "tools/measure_gpu.py", "--out", str(run.outdir / "gpu.json")],
                run.outdir / "measure.log", timeout=max(1, run.left() - 10))
            write_json(run.outdir / "summary.json", summary)
        else:
            run.log("lessons.log", "measure_gpu.py: not run (" +
                    ("a rehearsal has no GPU to measure)" if args.rehearse else f"{run.left():.0f} s left)"))

    if "suite" not in summary["steps"] or summary["steps"]["suite"]["exit"] != 0:
        if run.left() >= args.suite_min:
            summary["steps"]["suite"] = run_step(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", str(args.workers),
                 "--dist", "loadscope", "-rfEs", "-v"], run.outdir / "suite.log",
                timeout=max(1, run.left() - 10))
            tail = (run.outdir / "suite.log").read_text().strip().splitlines()[-1:]
            summary["steps"]["suite"]["last_line"] = tail
            write_json(run.outdir / "summary.json", summary)
        else:
            run.log("lessons.log", f"suite: not run ({run.left():.0f} s left; resume to run it)")

    lessons = summary["steps"]["lessons"]
    print(f"lessons: {lessons['finished']} of {lessons['of']} finished, {len(lessons['problems'])} problem(s)",
          *lessons["problems"], sep="\n  ", flush=True)
    for name in ("measure_gpu", "suite"):
        print(f"{name}: {summary['steps'].get(name, 'not run')}", flush=True)
    ok = (not lessons["missing"] and not lessons["problems"]
          and all(summary["steps"].get(s, {}).get("exit") == 0 for s in ("measure_gpu", "suite")))
    return 0 if ok else 1


def accept(outdir):
    """Check a recording brought back from a GPU machine and copy it into measurements/."""
    rec = json.loads((outdir / RECORDING).read_text())
    if rec["machine"].get("rehearsal"):
        print(f"{outdir / RECORDING} comes from a rehearsal without a GPU: not a recording.", file=sys.stderr)
        return 1
    problems = check_recording(rec, NOTEBOOKS)
    if problems:
        print("The recording does not match the lessons:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    for name in (RECORDING, "gpu.json"):
        if (outdir / name).exists():
            shutil.copy(outdir / name, ROOT / "measurements" / name)
            print(f"copied {name} into measurements/")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("outdir", type=pathlib.Path, help="folder for the results (created)")
    p.add_argument("--accept", action="store_true",
                   help="check OUTDIR's recording against the lessons and copy it into measurements/")
    p.add_argument("--resume", type=pathlib.Path, help="a folder with an earlier call's files")
    p.add_argument("--lessons", help="lesson numbers to record again, e.g. 08,11 (with --resume)")
    p.add_argument("--budget", type=float, default=540, help="seconds this call may take (default 540)")
    p.add_argument("--lesson-reserve", type=float, default=45,
                   help="start no lesson with fewer seconds left (default 45)")
    p.add_argument("--measure-s", type=float, default=90, help="run measure_gpu.py with this many seconds left")
    p.add_argument("--suite-min", type=float, default=150, help="run the suite with this many seconds left")
    p.add_argument("--cell-timeout", type=int, default=240, help="seconds per cell")
    p.add_argument("--workers", type=int, default=4, help="pytest-xdist workers for the suite")
    p.add_argument("--rehearse", action="store_true", help="run without a GPU, to try the run itself")
    p.add_argument("--notebooks", type=pathlib.Path, default=NOTEBOOKS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.accept:
        return accept(args.outdir)
    if args.lessons and not args.resume:
        p.error("--lessons records lessons again: give the earlier call's files with --resume")
    return record(args)


if __name__ == "__main__":
    sys.exit(main())
