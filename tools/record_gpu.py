"""On a GPU machine: run the strict suite, every lesson and measure_gpu.py; record what they printed.

    python3 tools/record_gpu.py OUTDIR          # on the GPU machine (needs CUDA)
    python3 tools/record_gpu.py --accept OUTDIR # back here: check the recording, copy it
                                                # into measurements/, then commit it

It writes into OUTDIR (at most 8 files, so that the device tool brings all of them back):

* ``gpu-recording.json``: for every GPU-only cell (a cell whose fallback calls
  ``d2l.show_recording('<id>', gpus=N)``), the text and figures its GPU branch printed,
  with a fingerprint of the cell's source; cells that need more GPUs than the machine
  has are listed under ``needs_more_gpus``. The lessons show it to readers without a GPU.
* ``gpu.json``: the figures of ``tools/measure_gpu.py`` (lesson 3 plots them).
* ``suite.log``: the output of the strict test suite (``python -m pytest``, nbval
  comparing outputs), in which a GPU-only cell that took its fallback fails.
* ``lessons.log``: each lesson's run time and any cell that failed.
* ``summary.json``: the machine (GPU, count, driver, CUDA, PyTorch, date) and each
  step's result. The exit status is 0 only when every step passed.

The GPU machine may lack the Jupyter packages and have no network: run
``tools/fetch_gpu_wheels.sh`` beforehand on a machine with the package index, carry the
``.whl/`` folder, and install it there first (the script's docstring shows how). The
helpers are not installed there: this script puts the repository on PYTHONPATH.
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
from d2l_utils.recordings import (RECORDING, check_recording, gpu_cells,  # noqa: E402
                                  machine_info, source_hash)

NOTEBOOKS = ROOT / "notebooks"
NOTE = ("Written by tools/record_gpu.py on the machine described here: what each GPU-only "
        "cell printed there. Do not edit; record again instead.")


def child_env():
    """The environment of every process started here: the repository importable as d2l_utils."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


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
    from d2l_utils.recordings import MARK
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


def run_lessons(outdir, machine, timeout):
    """Execute every lesson in a fresh kernel (cell errors recorded, not fatal); write the recording."""
    import nbformat
    from nbclient import NotebookClient
    recording = {"note": NOTE, "machine": machine, "cells": {}, "needs_more_gpus": {}}
    problems, log = [], []
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        try:
            NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                           resources={"metadata": {"path": str(NOTEBOOKS)}}).execute(env=child_env())
        except Exception as e:                      # a cell timed out, or the kernel died
            problems.append(f"{path.name}: did not finish: {type(e).__name__}: {e}")
        seconds = time.perf_counter() - start
        errors = [f"  cell {c.get('execution_count')}: {o['ename']}: {o['evalue']}"
                  for c in nb.cells if c.cell_type == "code"
                  for o in c.get("outputs", []) if o["output_type"] == "error"]
        log.append(f"{path.name}: {seconds:.1f} s, {len(errors)} cell(s) failed")
        log.extend(errors)
        problems += [f"{path.name}: a cell failed:{e}" for e in errors]
        cells, needs_more, found = record_notebook(nb, path.name, machine["gpu_count"])
        recording["cells"].update(cells)
        recording["needs_more_gpus"].update(needs_more)
        problems += found
        print(log[-1 - len(errors)], flush=True)
    problems += check_recording(recording, NOTEBOOKS)
    (outdir / RECORDING).write_text(json.dumps(recording, indent=1, ensure_ascii=False) + "\n")
    (outdir / "lessons.log").write_text("\n".join(log + ["", "problems:"] + problems) + "\n")
    return problems


def run_step(cmd, log, timeout):
    """Run ``cmd`` with its output in ``log``; return (exit status, seconds)."""
    start = time.perf_counter()
    with open(log, "w") as f:
        try:
            rc = subprocess.run(cmd, cwd=ROOT, env=child_env(), stdout=f, stderr=subprocess.STDOUT,
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write(f"\n[record_gpu.py: stopped after {timeout} s]\n")
            rc = 124
    return rc, round(time.perf_counter() - start, 1)


def record(outdir, workers, lesson_timeout, suite_timeout):
    import torch
    if not torch.cuda.is_available():
        print("record_gpu.py records what GPU-only cells print on a GPU: this machine has no CUDA GPU.",
              file=sys.stderr)
        return 2
    outdir.mkdir(parents=True, exist_ok=True)
    summary = {"machine": machine_info(), "steps": {}}
    print("machine:", summary["machine"], flush=True)

    rc, sec = run_step([sys.executable, "tools/measure_gpu.py", "--out", str(outdir / "gpu.json")],
                       outdir / "measure.log", timeout=240)
    summary["steps"]["measure_gpu"] = {"exit": rc, "seconds": sec}
    print(f"measure_gpu.py: exit {rc} in {sec} s", flush=True)

    start = time.perf_counter()
    problems = run_lessons(outdir, summary["machine"], lesson_timeout)
    summary["steps"]["lessons"] = {"problems": problems,
                                   "seconds": round(time.perf_counter() - start, 1)}
    print(f"lessons: {len(problems)} problem(s)", *problems, sep="\n  ", flush=True)

    rc, sec = run_step([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", str(workers),
                        "-q", "-rfEs"], outdir / "suite.log", timeout=suite_timeout)
    summary["steps"]["suite"] = {"exit": rc, "seconds": sec,
                                 "last_line": (outdir / "suite.log").read_text().strip().splitlines()[-1:]}
    print(f"suite: exit {rc} in {sec} s", flush=True)

    (outdir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    ok = not problems and all(s.get("exit", 0) == 0 for s in summary["steps"].values())
    return 0 if ok else 1


def accept(outdir):
    """Check a recording brought back from a GPU machine and copy it into measurements/."""
    rec = json.loads((outdir / RECORDING).read_text())
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
    p.add_argument("--workers", type=int, default=4, help="pytest-xdist workers for the suite")
    p.add_argument("--lesson-timeout", type=int, default=120, help="seconds per cell")
    p.add_argument("--suite-timeout", type=int, default=300, help="seconds for the whole suite")
    args = p.parse_args(argv)
    if args.accept:
        return accept(args.outdir)
    return record(args.outdir, args.workers, args.lesson_timeout, args.suite_timeout)


if __name__ == "__main__":
    sys.exit(main())
