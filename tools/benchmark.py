"""Check the course's budgets (COURSE.md) by measuring them; not a test, a benchmark.

    python tools/benchmark.py                 # each lesson: run time and peak memory
    python tools/benchmark.py --pytest        # ... and the whole test command
    python tools/benchmark.py --install       # ... and a fresh install from requirements.txt
    python tools/benchmark.py --save measurements/budgets-cpu.json

Each lesson runs top to bottom in a fresh kernel, in memory and from a scratch
folder (the repository is not touched). Peak memory is the largest total memory of the
kernel and every process it started (the torchrun workers of lesson 7, the DataLoader
workers of lesson 10), sampled every 200 ms (reading PSS costs CPU time: sampling every
50 ms slowed lesson 7 by 4 s on the 2-core machine). Where Linux reports it, a process counts its
proportional set size (PSS: a page shared by n processes counts 1/n in each), so that a
forked worker does not count again the pages it shares with the kernel; the sum is then
the physical memory of the tree, what Binder's memory limit sees. Elsewhere each process
counts its resident memory (RSS), which overcounts shared pages. Exits 1 when a budget
is exceeded.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import threading
import time

import nbformat
import psutil
import torch
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUDGET = {"lesson_s": 30, "lesson_peak_mb": 1536, "pytest_s": 180, "install_s": 120}


PSS = os.path.exists(f"/proc/{os.getpid()}/smaps_rollup")   # psutil reads PSS from it


def _tree_memory(proc):
    """Bytes of memory of ``proc``'s descendants: PSS where Linux has it, else RSS."""
    total = 0
    for p in proc.children(recursive=True):
        try:
            total += p.memory_full_info().pss if PSS else p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_lesson(path):
    """Run one notebook in a fresh kernel; return (seconds, peak MB of the kernel's tree)."""
    me, peak, done = psutil.Process(), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _tree_memory(me))
            time.sleep(0.2)

    nb = nbformat.read(path, as_version=4)      # executed in memory: the file is not written
    with tempfile.TemporaryDirectory() as tmp:
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        start = time.perf_counter()
        NotebookClient(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": tmp}}).execute()
        seconds = time.perf_counter() - start
        done.set()
        sampler.join()
    return seconds, peak[0] / 2**20


def timed(cmd, **kw):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, **kw)
    return time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("lessons", nargs="*", help="notebooks (default: all)")
    ap.add_argument("--pytest", action="store_true", help="also time the whole test command")
    ap.add_argument("--install", action="store_true", help="also time a fresh install")
    ap.add_argument("--save", help="write the results as JSON to this file")
    args = ap.parse_args()
    paths = [pathlib.Path(p).resolve() for p in args.lessons] or sorted(
        (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

    results = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                          f"{psutil.virtual_memory().total / 2**30:.0f} GiB, no GPU"
                          if not torch.cuda.is_available() else torch.cuda.get_device_name(0),
               "torch": torch.__version__, "python": platform.python_version(),
               "date": datetime.date.today().isoformat(), "budget": BUDGET,
               "memory": "PSS (proportional set size)" if PSS else "RSS (resident set size)", "lessons": {}}
    over = []
    for path in paths:
        seconds, peak_mb = run_lesson(path)
        results["lessons"][path.name] = {"seconds": round(seconds, 1), "peak_mb": round(peak_mb)}
        flag = "" if seconds < BUDGET["lesson_s"] and peak_mb < BUDGET["lesson_peak_mb"] else "  OVER"
        over += [path.name] if flag else []
        print(f"{path.name:40s} {seconds:6.1f} s  {peak_mb:6.0f} MB{flag}", flush=True)
    if args.pytest:
        s = timed([sys.executable, "-m", "pytest", "-q"], cwd=ROOT, stdout=subprocess.DEVNULL)
        results["pytest_s"] = round(s, 1)
        over += ["pytest"] if s > BUDGET["pytest_s"] else []
        print(f"{'whole test command':40s} {s:6.1f} s")
    if args.install:
        with tempfile.TemporaryDirectory() as tmp:
            s = timed([sys.executable, "-m", "venv", f"{tmp}/venv"])
            s += timed([f"{tmp}/venv/bin/pip", "install", "-q", "-r", "requirements.txt"],
                       cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        results["install_s"] = round(s, 1)
        over += ["install"] if s > BUDGET["install_s"] else []
        print(f"{'fresh install':40s} {s:6.1f} s")
    if args.save:
        pathlib.Path(args.save).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.save).write_text(json.dumps(results, indent=1) + "\n")
    if over:
        sys.exit(f"over budget: {', '.join(over)}")


if __name__ == "__main__":
    main()
