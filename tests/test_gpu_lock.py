"""On a machine with CUDA GPUs the lessons take turns (the top-level conftest.py).

Two small notebooks, each of which sleeps in its cells and notes when its kernel started
and when its last cell ended, run under nbval with two xdist workers; with the lock
forced on (COURSE_GPU_LOCK=1, as on a GPU machine) the two spans do not overlap.
"""
import json
import shutil
import subprocess
import sys

import nbformat
from conftest import ROOT, slow

CELLS = ["import json, time\nstart = time.time()\ntime.sleep(1.5)",
         "time.sleep(1.5)\nopen({out!r}, 'w').write(json.dumps([start, time.time()]))"]


@slow("two notebooks, one after the other: about 10 s")
def test_lessons_take_turns_where_gpus_are(tmp_path):
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    for name in ("a", "b"):
        cells = [nbformat.v4.new_code_cell(c.format(out=str(tmp_path / f"{name}.json"))) for c in CELLS]
        nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}),
            tmp_path / f"{name}.ipynb")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                           "-n", "2", "--dist", "loadscope", "a.ipynb", "b.ipynb"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=180,
                          env={**__import__("os").environ, "COURSE_GPU_LOCK": "1"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (a0, a1), (b0, b1) = (json.loads((tmp_path / f"{n}.json").read_text()) for n in "ab")
    assert a1 <= b0 or b1 <= a0, f"the two notebooks ran side by side: {a0, a1} and {b0, b1}"
