"""Regenerate the stored outputs of the lessons: run each notebook top to bottom
in a fresh kernel, from the notebooks/ folder (as nbval does), and save it.

    python tools/execute_notebooks.py                      # every lesson
    python tools/execute_notebooks.py notebooks/01_devices.ipynb

Run it on a machine without a GPU: the stored outputs are the CPU ones, and the
cells whose output depends on the machine are marked # NBVAL_IGNORE_OUTPUT.

It stamps each notebook with the run that made its outputs, asked of the kernel that ran
it (never typed): `metadata.course.last_run` = {"torch", "python", "date", "accelerator"}.
`python -m d2l_utils.setup_check` compares it with what a machine has installed, and
`--lessons` lists it per lesson.
"""
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
    return time.perf_counter() - start, last_run


def main(args):
    paths = [pathlib.Path(a).resolve() for a in args] or sorted(
        (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for path in paths:
        seconds, run = execute(path)
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"{shown}: {seconds:.1f} s (PyTorch {run['torch']}, Python {run['python']}, "
              f"{run['date']})", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
