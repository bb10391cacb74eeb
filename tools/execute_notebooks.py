"""Regenerate the stored outputs of the lessons: run each notebook top to bottom
in a fresh kernel, from the notebooks/ folder (as nbval does), and save it.

    python tools/execute_notebooks.py                      # every lesson
    python tools/execute_notebooks.py notebooks/01_devices.ipynb
    python tools/execute_notebooks.py --pages              # only the teacher's pages' stamps

Run it on a machine without a GPU: the stored outputs are the CPU ones, and the
cells whose output depends on the machine are marked # NBVAL_IGNORE_OUTPUT.

It stamps each notebook with the run that made its outputs, asked of the kernel that ran
it (never typed): `metadata.course.last_run` = {"torch", "python", "date", "accelerator"}.
`python -m d2l_utils.setup_check` compares it with what a machine has installed, and
`--lessons` lists it per lesson. A reader sees it twice: the lesson's first output
(`d2l_utils.this_run()` in the setup cell prints the same run), and the line under the title
of the lesson's teacher's page (teaching/NN_*.md), which this tool rewrites after each run
(`stamp_line`; tests/test_teaching.py checks both against the metadata).
"""
import re
import datetime
import json
import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Run in the kernel after the lesson's last cell, in a cell that is then removed: the
# versions the lesson's outputs came from. The date is the kernel's, in UTC.
ASK_KERNEL = """\
import datetime as _dt, json as _json, platform as _platform, torch as _torch
print(_json.dumps({'torch': _torch.__version__, 'python': _platform.python_version(),
                   'date': _dt.datetime.now(_dt.timezone.utc).date().isoformat(),
                   'accelerator': _torch.accelerator.current_accelerator().type
                                  if _torch.accelerator.is_available() else None}))
"""


STAMP = re.compile(r"^\*Stored outputs: .*\*\n\n", re.M)


def stamp_line(last_run):
    """The line under a teacher's page's title: the run the lesson's stored outputs came from."""
    gpu = 'no GPU' if last_run.get('accelerator') is None else f"on {last_run['accelerator']}"
    return (f"*Stored outputs: PyTorch {last_run['torch']}, Python {last_run['python']}, "
            f"{last_run['date']} (UTC), {gpu}.*")


def stamp_page(notebook_path, last_run):
    """Write ``stamp_line(last_run)`` under the title of the lesson's teacher's page."""
    page = notebook_path.parent.parent / "teaching" / f"{notebook_path.stem}.md"
    if not page.exists():
        return
    text = page.read_text(encoding="utf-8")
    line = stamp_line(last_run)
    title, rest = STAMP.sub("", text).split("\n", 1)          # any stamp goes, then one under the title
    text = f"{title}\n\n{line}\n{rest}"
    page.write_text(text, encoding="utf-8")


def execute(path):
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    nb.cells.append(nbformat.v4.new_code_cell(ASK_KERNEL))
    NotebookClient(nb, timeout=300, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    asked = nb.cells.pop()
    printed = "".join(out.get("text", "") for out in asked.outputs if out.get("name") == "stdout")
    last_run = json.loads(printed.strip().splitlines()[-1])
    nb.metadata.setdefault("course", {})["last_run"] = last_run
    for cell in nb.cells:            # keep the files free of per-run noise
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)
    stamp_page(path, last_run)
    return time.perf_counter() - start, last_run


def main(args):
    if args == ["--pages"]:          # only the teacher's pages, from the stored metadata
        for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
            stamp_page(path, nbformat.read(path, as_version=4).metadata["course"]["last_run"])
        return
    paths = [pathlib.Path(a).resolve() for a in args] or sorted(
        (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for path in paths:
        seconds, run = execute(path)
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"{shown}: {seconds:.1f} s (PyTorch {run['torch']}, Python {run['python']}, "
              f"{run['date']})", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
