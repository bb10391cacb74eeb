"""Regenerate the stored outputs of the lessons: run each notebook top to bottom
in a fresh kernel, from the notebooks/ folder (as nbval does), and save it.

    python tools/execute_notebooks.py                      # every lesson
    python tools/execute_notebooks.py notebooks/01_devices.ipynb

Run it on a machine without a GPU: the stored outputs are the CPU ones, and the
cells whose output depends on the machine are marked # NBVAL_IGNORE_OUTPUT.
"""
import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parent.parent


def execute(path):
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    for cell in nb.cells:            # keep the files free of per-run noise
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)
    return time.perf_counter() - start


def main(args):
    paths = [pathlib.Path(a).resolve() for a in args] or sorted(
        (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for path in paths:
        print(f"{path.relative_to(ROOT)}: {execute(path):.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
