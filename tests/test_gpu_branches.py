"""Every lesson runs as on a GPU machine, on a stand-in for CUDA (tests/cuda_standin.py), and
no cell may raise an error other than a value check.

No GPU runs the course's tests, so a GPU branch that would crash (a NameError, a KeyError, a
wrong keyword, a device mismatch) is otherwise found by reading only. Here each lesson runs
in a fresh kernel (as nbval runs it, from notebooks/) with the stand-in active from its first
cell, so that the cells before a GPU-only cell take their GPU paths too, as on a GPU. Each
code cell runs through a wrapper that turns its ``assert`` statements into recorded value
checks (a GPU number cannot be checked on the stand-in; the cell goes on, so that the code
after a failed check still runs) and records what the cell raised:

- ``ok``: it ran; ``value``: it ran, but some value checks failed, or it stopped on an
  AssertionError raised by code it called (``raise AssertionError``, ``assert_close``);
- ``limit``: it stopped on something the stand-in cannot do (``cuda_standin.StandinLimit``,
  the stand-in card's small memory, or GPU-sized work past ``COURSE_STANDIN_CELL_S``, 20 s);
  the reason is shown. A later cell's error that uses a name such a cell binds (a NameError,
  a half-filled table) follows from it and is not counted; the test warns with the cells
  not run to their end, which only a GPU run checks (lesson 13's timed GPU versions);
- ``error``: any other exception: a crash that a GPU would show too. The test fails, naming
  the lesson, the cell (its GPU id, or its cell id and number) and the line.

A slow check (about 8 s to 1.5 minutes a lesson, 6.5 minutes in all, on 2 cores): it runs in CI (.ci/run) and with
COURSE_SLOW=1. ``COURSE_STANDIN_REPORT=path.json`` writes every cell's record there.
"""
import json
import os
import pathlib
import re
import sys
import tempfile
import time
import warnings

import pytest

from conftest import NOTEBOOKS, ROOT, cells, slow, source

sys.path.insert(0, str(ROOT))
from d2l_utils.recordings import MARK  # noqa: E402

TESTS = pathlib.Path(__file__).resolve().parent
LESSONS = [p for p in NOTEBOOKS if MARK.search(p.read_text(encoding='utf-8'))]

# Run in the kernel before the lesson's first cell: the stand-in, and the wrapper of each cell.
SETUP = """\
import sys as _sys
_sys.path.insert(0, {tests!r})
import cuda_standin as _cuda_standin
_cuda_standin.activate({gpus})
"""

RUN_CELL = "_cuda_standin.run_cell({index}, {cell_id!r}, {gpu!r}, {source!r}, {results!r})"


def lesson_cells(path):
    """(index, id, GPU id or None, source) of each code cell that holds code, in order."""
    out = []
    for n, cell in enumerate(c for c in cells(path) if c['cell_type'] == 'code' and source(c).strip()):
        src = source(cell)
        marks = MARK.findall(src)
        out.append((n + 1, cell.get('id', f'cell-{n + 1}'), marks[0][0] if marks else None, src))
    return out


def run_lesson(path, timeout=600):
    """Run lesson `path` on the stand-in; return the records of its cells (dicts)."""
    import nbformat
    from nbclient import NotebookClient

    text = path.read_text(encoding='utf-8')
    gpus = max([int(g) for _, g in MARK.findall(text)] or [1])
    with tempfile.TemporaryDirectory(prefix='gpu-branches-') as tmp:
        results = pathlib.Path(tmp) / 'results.jsonl'
        nb = nbformat.v4.new_notebook()
        nb.cells.append(nbformat.v4.new_code_cell(SETUP.format(tests=str(TESTS), gpus=gpus)))
        listed = lesson_cells(path)
        for index, cell_id, gpu, src in listed:
            nb.cells.append(nbformat.v4.new_code_cell(RUN_CELL.format(
                index=index, cell_id=cell_id, gpu=gpu, source=src, results=str(results))))
        client = NotebookClient(nb, timeout=timeout, kernel_name='python3', allow_errors=False,
                                resources={'metadata': {'path': str(path.parent)}})
        problem = None
        try:
            client.execute()
        except Exception as e:        # noqa: BLE001 -- a dead kernel, a timeout: reported as the cell's error
            problem = f'{type(e).__name__}: {str(e)[-2000:]}'
        records = [json.loads(line) for line in results.read_text(encoding='utf-8').splitlines()] \
            if results.exists() else []
    if problem:
        done = {r['index'] for r in records}
        missing = [c for c in listed if c[0] not in done]
        where = missing[0] if missing else (0, 'setup', None, '')
        records.append({'index': where[0], 'cell': where[2] or where[1], 'gpu': where[2] is not None,
                        'status': 'error', 'seconds': None, 'failed_checks': [],
                        'error': {'type': 'KernelProblem', 'message': problem, 'line': None, 'traceback': problem}})
    return records


def assigned_names(src):
    """The names a cell's code binds or changes in place (``x = ...``, ``x[k] = ...``, ``for x in``)."""
    import ast
    try:
        tree = ast.parse(src)
    except SyntaxError:                  # IPython's magics: no names to find
        return set()
    names = set()
    for node in ast.walk(tree):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)) else
                   [item.optional_vars for item in node.items if item.optional_vars is not None]
                   if isinstance(node, ast.With) else [])
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name):
                    names.add(leaf.id)
    return names


def after_a_limit(record, records, sources):
    """Whether ``record``'s error follows from an earlier cell the stand-in could not finish (status
    ``limit``): the failing cell uses a name that cell binds or fills (a NameError, or a StopIteration
    over a table it left half full). Such a cell is reported as not checked, not as a crash.
    ``sources``: the code of each cell by its index."""
    used = set(re.findall(r"[A-Za-z_]\w*", sources[record['index']]))
    return any(r['status'] == 'limit' and r['index'] < record['index']
               and used & assigned_names(sources[r['index']]) for r in records)


def describe(record):
    e = record['error']
    kind = 'GPU-only cell' if record['gpu'] else 'cell'
    after = (f" (after failed value checks at lines {', '.join(str(c[0]) for c in record['failed_checks'])})"
             if record['failed_checks'] else '')
    return (f"{kind} {record['cell']} (code cell {record['index']}), line {e['line']}: "
            f"{e['type']}: {e['message'][:300]}{after}\n{e['traceback'][-2500:]}")


# Lessons 1-7 here, 8-14 in tests/test_gpu_branches_later.py: pytest-xdist gives a test module to
# one worker (--dist loadscope), and all fourteen in one module made that worker the last to finish.
FIRST_HALF = [p for p in LESSONS if int(p.name[:2]) <= 7]


@slow('re-executes every lesson on the CUDA stand-in, 8 s to 1.5 min a lesson')
@pytest.mark.parametrize('path', FIRST_HALF, ids=[p.stem for p in FIRST_HALF])
def test_gpu_branches_run_on_the_standin(path):
    check_lesson(path)


def check_lesson(path):
    """Run one lesson on the CUDA stand-in: no cell crashes, and every GPU-only cell runs."""
    start = time.perf_counter()
    records = run_lesson(path)
    seconds = time.perf_counter() - start
    report = os.environ.get('COURSE_STANDIN_REPORT')
    if report:
        with open(report, 'a', encoding='utf-8') as f:
            f.write(json.dumps({'lesson': path.name, 'seconds': round(seconds, 1), 'cells': records}) + '\n')
    gpu_ids = {c for c, _ in MARK.findall(path.read_text(encoding="utf-8"))}
    ran = {r['cell'] for r in records if r['gpu']}
    sources = {index: src for index, _, _, src in lesson_cells(path)}
    crashes = [r for r in records if r['status'] == 'error' and not after_a_limit(r, records, sources)]
    unchecked = [r['cell'] for r in records if r['status'] == 'limit' or r['status'] == 'error' and r not in crashes]
    if unchecked:                         # shown with -rw: what a GPU run still has to check
        warnings.warn(f'{path.name}: not run to their end on the stand-in: {", ".join(unchecked)}')
    assert not crashes, (f'{path.name}: {len(crashes)} cell(s) raised on the CUDA stand-in (tests/cuda_standin.py):\n\n'
                         + '\n\n'.join(describe(r) for r in crashes))
    assert gpu_ids <= ran, f'{path.name}: GPU-only cells not run: {sorted(gpu_ids - ran)}'


@slow('starts a kernel with the CUDA stand-in')
def test_the_check_catches_a_crash_after_a_failed_value_check(tmp_path):
    """The wrapper itself: a failed assert is a value check and the cell goes on; the KeyError
    after it is a crash, reported with its cell and line; a CUDA-only name works; a tensor on
    'cuda' says so; a device mismatch raises as on a GPU."""
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (
        "import torch\nmodel = {'module.w': 1}",
        "# NBVAL_IGNORE_OUTPUT\nif torch.cuda.is_available():\n"
        "    x = torch.ones(2, device='cuda')\n"
        "    assert x.device.type == 'cuda' and torch.cuda.get_device_name() == 'NVIDIA H100 80GB HBM3'\n"
        "    assert torch.cuda.memory_stats()['allocated_bytes.all.current'] > 0\n"
        "    assert 1 == 2, 'a GPU number'\n"
        "    grads = {'w': 1}\n"
        "    same = [grads[n] for n in model]\n"
        "else:\n    d2l.show_recording('99-crash', gpus=1)",
        "# NBVAL_IGNORE_OUTPUT\nif torch.cuda.is_available():\n"
        "    torch.ones(2, device='cuda') + torch.ones(2)\n"
        "else:\n    d2l.show_recording('99-mismatch', gpus=1)",
        "# NBVAL_IGNORE_OUTPUT\nif torch.cuda.is_available():\n"
        "    e = torch.cuda.Event(enable_timing=True); e.record(); torch.cuda.synchronize()\n"
        "    print(torch.ones(1, device='cuda:0').cpu().numpy())\n"
        "else:\n    d2l.show_recording('99-fine', gpus=1)")]
    path = tmp_path / '99_check.ipynb'
    nbformat.write(nb, path)
    records = {r['cell']: r for r in run_lesson(path, timeout=300)}
    crash = records['99-crash']
    assert crash['status'] == 'error' and crash['error']['type'] == 'KeyError', crash
    assert crash['error']['line'] == 8 and [c[0] for c in crash['failed_checks']] == [6], crash
    assert records['99-mismatch']['status'] == 'error', records['99-mismatch']
    assert 'same device' in records['99-mismatch']['error']['message']
    assert records['99-fine']['status'] == 'ok', records['99-fine']
