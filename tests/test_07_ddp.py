"""Unit tests of the helpers of lesson 7 (notebooks/07_distributed_data_parallel.ipynb), and of its deck.

The torchrun tests start real processes (a few seconds each: torchrun imports torch; the
workers here do not). The four slowest (10-15 s each: they start a "kernel" that imports
torch, then torchrun, then wait out time limits and grace periods) run in CI and with
COURSE_SLOW=1 only, which keeps the README's test command within its budget.

The tests of "no process left behind" give every process they start a tag in its command
line (the test's temporary folder) and then look, with psutil, for any process that still
carries it: a process whose parent died is no longer anyone's descendant, but it keeps
its command line.
"""
import os
import signal
import subprocess
import sys
import textwrap
import time

import nbformat
import psutil
import pytest

import d2l_utils as d2l
import slides  # tools/ is put on sys.path by conftest.py
from conftest import ROOT, slow

LINUX = sys.platform.startswith('linux')

# One os.write per rank: a single write to a pipe is atomic, while print() may split a
# line into several writes (unbuffered stdout) that the two ranks then interleave.
WHO_AM_I = """
import os
line = f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} {os.environ.get('COURSE_TEST_VAR')}\\n"
os.write(1, line.encode())
"""

# A torchrun worker that starts a child of its own (in its process group, as a DataLoader
# worker would be), says it is ready, then fails if it is the failing rank, else waits.
# Arguments: folder for the ready files, failing rank (-1: none), tag.
WORKER = """
import os, subprocess, sys, time
out, fail_rank, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rank = int(os.environ.get('RANK', os.getpid()))
subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', tag])
open(os.path.join(out, f'{rank}.tmp'), 'w').close()
os.replace(os.path.join(out, f'{rank}.tmp'), os.path.join(out, f'{rank}.ready'))
if rank == fail_rank:
    sys.exit(f'rank {rank} fails on purpose')
time.sleep(600)
"""


def _script(tmp_path, text, name='job.py'):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _wait_ready(folder, n, timeout=90):
    """Wait until ``n`` workers wrote their ready file into ``folder``."""
    deadline = time.monotonic() + timeout
    while len(list(folder.glob('*.ready'))) < n:
        assert time.monotonic() < deadline, f'only {len(list(folder.glob("*.ready")))} of {n} workers started'
        time.sleep(0.05)


def _survivors(tag, wait):
    """The live processes whose command line holds ``tag``, once none is left or after ``wait`` s."""
    deadline = time.monotonic() + wait
    while True:
        alive = []
        for p in psutil.process_iter(['cmdline', 'status']):
            if (p.pid != os.getpid() and p.info['status'] != psutil.STATUS_ZOMBIE
                    and tag in ' '.join(p.info['cmdline'] or [])):
                alive.append(f"{p.pid} {p.info['status']}: {' '.join(p.info['cmdline'])}")
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


@pytest.fixture
def job(tmp_path):
    """A worker script, its folder for ready files, and the tag its processes carry."""
    out = tmp_path / 'ready'
    out.mkdir()
    tag = f'{tmp_path}{os.sep}'                  # with the separator: no other folder's prefix
    yield _script(tmp_path, WORKER), out, tag
    leftovers = _survivors(tag, 0)
    for line in leftovers:                       # do not let a failed test leak processes
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_torchrun_starts_one_process_per_rank_with_its_environment(tmp_path):
    script = _script(tmp_path, WHO_AM_I)
    run = d2l.torchrun(script, 2, timeout=120, env={'COURSE_TEST_VAR': 'seen'})
    assert run.returncode == 0, run.stderr
    assert sorted(run.stdout.splitlines()) == ['rank 0 of 2 seen', 'rank 1 of 2 seen']
    assert 'COURSE_TEST_VAR' not in os.environ          # set in the children only
    assert run.args[1:6] == ['-m', 'torch.distributed.run', '--standalone', '--nproc-per-node', '2']


def test_torchrun_failing_worker_reports_and_leaves_no_process(job):
    script, out, tag = job
    run = d2l.torchrun(str(script), 2, out, 1, tag, timeout=120)
    assert run.returncode != 0 and run.args[-4:] == [str(script), str(out), '1', tag]
    assert 'FAILED' in run.stderr and 'rank 1 fails on purpose' in run.stderr
    # torchrun stopped rank 0 and its child; on Linux run_processes also killed the child
    # that the failed rank 1 left behind (torchrun signals only the workers still running)
    survivors = _survivors(tag, wait=5)
    if not LINUX:
        survivors = [s for s in survivors if 'time.sleep(600)' not in s]
    assert survivors == []


@slow("10-15 s of processes starting and stopping")
def test_torchrun_timeout_stops_launcher_workers_and_their_children(job):
    script, out, tag = job
    start = time.perf_counter()
    with pytest.raises(subprocess.TimeoutExpired) as info:
        d2l.torchrun(script, 2, out, -1, tag, timeout=10)
    assert time.perf_counter() - start < 10 + 5 + 10     # the time limit, the 5 s grace, slack
    assert info.value.cmd[-4:] == [str(script), str(out), '-1', tag]
    assert isinstance(info.value.stderr, str)
    assert _survivors(tag, wait=5) == []


def _kernel_in_child(call, out, tag):
    """A Python process that, like a Jupyter kernel, runs ``call`` (code that calls a helper)
    and outlives a KeyboardInterrupt: it then writes ``out/interrupted`` and waits for its stdin."""
    code = textwrap.dedent(f"""
        import sys, d2l_utils as d2l
        try:
            {call}
        except KeyboardInterrupt:
            open({str(out / 'interrupted')!r}, 'w').close()
            sys.stdin.read()
        """)
    return subprocess.Popen([sys.executable, '-c', code, tag], stdin=subprocess.PIPE)


def _interrupt_and_list_survivors(child, out, tag):
    """SIGINT to the child "kernel" once it has caught it, the processes carrying ``tag``."""
    try:
        child.send_signal(signal.SIGINT)        # what Jupyter's Interrupt does to the kernel
        deadline = time.monotonic() + 60
        while not (out / 'interrupted').exists():
            assert child.poll() is None and time.monotonic() < deadline, 'no KeyboardInterrupt'
            time.sleep(0.05)
        # the helper has raised KeyboardInterrupt and the "kernel" lives on: nothing else may
        return [s for s in _survivors(tag, wait=5) if not s.startswith(f'{child.pid} ')]
    finally:
        child.kill()
        child.communicate()


def _torchrun_call(script, out, tag):
    return f'd2l.torchrun({str(script)!r}, 2, {str(out)!r}, -1, {tag!r})'


@slow("10-15 s of processes starting and stopping")
def test_torchrun_interrupted_stops_everything_before_it_returns(job):
    script, out, tag = job
    child = _kernel_in_child(_torchrun_call(script, out, tag), out, tag)
    _wait_ready(out, 2)                         # both workers and their children are running
    assert _interrupt_and_list_survivors(child, out, tag) == []


@slow("10-15 s of processes starting and stopping")
@pytest.mark.skipif(not LINUX, reason='the parent-death signal (prctl) exists on Linux only')
def test_torchrun_workers_die_with_a_killed_parent(job):
    script, out, tag = job
    child = _kernel_in_child(_torchrun_call(script, out, tag), out, tag)
    try:
        _wait_ready(out, 2)
    finally:
        child.kill()                            # SIGKILL: what a kernel restart may do
        child.communicate()
    assert _survivors(tag, wait=20) == []       # torchrun got SIGTERM and stopped its workers


LAUNCHER = """
import os, signal, subprocess, sys, time
worker, out, tag = sys.argv[1:]
signal.signal(signal.SIGTERM, signal.SIG_IGN)          # deaf to SIGTERM: only SIGKILL stops it
for rank in range(2):                                   # workers in sessions of their own, like torchrun's
    subprocess.Popen([sys.executable, worker, out, '-1', tag], start_new_session=True,
                     env={**os.environ, 'RANK': str(rank)})
time.sleep(600)
"""


@slow("10-15 s of processes starting and stopping")
def test_run_processes_kills_the_whole_tree_of_a_launcher_deaf_to_sigterm(job, tmp_path):
    worker, out, tag = job
    launcher = _script(tmp_path, LAUNCHER, 'launcher.py')
    command = [sys.executable, str(launcher), str(worker), str(out), tag]
    child = _kernel_in_child(f'd2l.run_processes([{command!r}])', out, tag)
    _wait_ready(out, 2)                         # the launcher's workers and their children run
    start = time.perf_counter()
    assert _interrupt_and_list_survivors(child, out, tag) == []
    assert time.perf_counter() - start < 5 + 20         # the 5 s grace, then SIGKILL at once


@pytest.mark.skipif(not LINUX, reason='finding orphans by their environment needs /proc')
def test_run_processes_kills_what_a_finished_command_left_behind(tmp_path):
    tag = f'{tmp_path}{os.sep}'
    orphan = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
              "'import time; time.sleep(600)', sys.argv[1]], start_new_session=True)")
    run, = d2l.run_processes([[sys.executable, '-c', orphan, tag]], timeout=60)
    assert run.returncode == 0
    assert _survivors(tag, wait=5) == []


def test_run_processes_runs_commands_together_and_captures_each(tmp_path):
    # each command waits for the other's file: only commands running at the same time finish
    meet = ("import os, sys, time; a, b = sys.argv[1:]; open(a, 'w').close()\n"
            "while not os.path.exists(b): time.sleep(0.01)\n"
            "print('met', os.environ['COURSE_TEST_VAR']); sys.exit(int(a.endswith('b')) * 3)")
    a, b = str(tmp_path / 'a'), str(tmp_path / 'b')
    runs = d2l.run_processes([[sys.executable, '-c', meet, a, b], [sys.executable, '-c', meet, b, a]],
                             timeout=60, env={'COURSE_TEST_VAR': 'x'})
    assert [(r.returncode, r.stdout, r.stderr) for r in runs] == [(0, 'met x\n', ''), (3, 'met x\n', '')]
    assert runs[1].args[-2:] == [b, a]
    assert 'COURSE_TEST_VAR' not in os.environ and 'D2L_RUN_PROCESSES' not in os.environ


# A child that fails, and says which PYTHON_COLORS it got.
FAILING_CHILD = "import os; print(os.environ.get('PYTHON_COLORS')); raise RuntimeError('plain')"


def test_run_processes_children_write_plain_tracebacks(monkeypatch):
    """Jupyter's kernel sets FORCE_COLOR=1, which Python 3.13+ obeys by colouring tracebacks."""
    monkeypatch.setenv('FORCE_COLOR', '1')
    monkeypatch.setenv('PYTHON_COLORS', '1')          # the parent's own choice does not reach it
    run, = d2l.run_processes([[sys.executable, '-c', FAILING_CHILD]], timeout=60)
    assert (run.returncode, run.stdout) == (1, '0\n')
    assert run.stderr.endswith('\nRuntimeError: plain\n') and '\x1b[' not in run.stderr


def test_run_processes_env_can_ask_for_colours():
    run, = d2l.run_processes([[sys.executable, '-c', FAILING_CHILD]], timeout=60, env={'PYTHON_COLORS': '1'})
    assert run.stdout == '1\n'


PYTHON_313 = '~/.pyenv/versions/3.1[3-9]*/bin/python3.1[3-9]'


def python_313():
    """A Python 3.13 or later to start children with (Python colours its tracebacks from 3.13
    on): this one, else pyenv's (PYTHON_313), else one on PATH; None where there is none."""
    import glob
    import shutil
    if sys.version_info >= (3, 13):
        return sys.executable
    for exe in [*sorted(glob.glob(os.path.expanduser(PYTHON_313))),
                *filter(None, (shutil.which(f'python3.{m}') for m in range(13, 20)))]:
        done = subprocess.run([exe, '-c', 'import sys; print(sys.version_info >= (3, 13))'],
                              capture_output=True, text=True, timeout=60)
        if done.stdout.strip() == 'True':
            return exe
    return None


def test_without_the_helper_a_child_colours_its_traceback(monkeypatch):
    """The control, in a real Python 3.13 child: without run_processes it colours its
    traceback under FORCE_COLOR, as a kernel's children would; through it, it does not."""
    exe = python_313()
    if exe is None:
        pytest.skip(f'no Python 3.13 or later here (this is {sys.version.split()[0]}; looked for '
                    f'{PYTHON_313} and python3.13+ on PATH): the control needs one')
    monkeypatch.setenv('FORCE_COLOR', '1')
    monkeypatch.delenv('PYTHON_COLORS', raising=False)
    monkeypatch.delenv('NO_COLOR', raising=False)
    run = subprocess.run([exe, '-c', FAILING_CHILD], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and '\x1b[' in run.stderr, run.stderr
    helped, = d2l.run_processes([[exe, '-c', FAILING_CHILD]], timeout=60)
    assert helped.returncode == 1 and helped.stdout == '0\n' and '\x1b[' not in helped.stderr, helped.stderr


@pytest.mark.parametrize('args, kwargs, error, message', [
    ((123, 2), {}, TypeError, 'script must be a path'),
    (('no/such/script.py', 2), {}, ValueError, 'no such script'),
    ((__file__, '2'), {}, TypeError, 'nproc_per_node must be an int'),
    ((__file__, True), {}, TypeError, 'nproc_per_node must be an int'),
    ((__file__, 2.0), {}, TypeError, 'nproc_per_node must be an int'),
    ((__file__, 0), {}, ValueError, 'must be >= 1'),
    ((__file__, 1), {'timeout': '10'}, TypeError, 'timeout must be a number'),
    ((__file__, 1), {'timeout': 0}, ValueError, 'timeout must be > 0'),
    ((__file__, 1), {'env': {'A': 1}}, TypeError, 'env must be a dict of strings'),
])
def test_torchrun_rejects_bad_input(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        d2l.torchrun(*args, **kwargs)


@pytest.mark.parametrize('commands, kwargs, error, message', [
    ([], {}, ValueError, 'commands is empty'),
    ('ls', {}, TypeError, 'commands must be a list of commands'),
    (['ls', '-l'], {}, TypeError, 'each a non-empty list of strings'),
    ([[]], {}, TypeError, 'each a non-empty list of strings'),
    ([['ls', 1]], {}, TypeError, 'each a non-empty list of strings'),
    ([['ls']], {'timeout': None}, TypeError, 'timeout must be a number'),
    ([['ls']], {'timeout': -1}, ValueError, 'timeout must be > 0'),
    ([['ls']], {'env': ['A=1']}, TypeError, 'env must be a dict of strings'),
])
def test_run_processes_rejects_bad_input(commands, kwargs, error, message):
    with pytest.raises(error, match=message):
        d2l.run_processes(commands, **kwargs)


def test_the_deck_shows_the_key_ideas_and_the_scripts_ddp_lines():
    """The slideshow (issue 21): a lecture's length; DDP's average, rank 0's save and
    LOCAL_RANK stated on slides; the training script's distributed lines on its slide."""
    nb = nbformat.read(ROOT / 'notebooks' / '07_distributed_data_parallel.ipynb', as_version=4)
    types = slides.slide_types(nb)
    assert 15 <= len(slides.deck(nb, types)) <= 25
    shown = [c for c in nb.cells if types[c.id] not in ('notes', 'skip')]
    for idea in ("**DDP averages the ranks' gradients.**", '`model.module.state_dict()`**',
                 '**`LOCAL_RANK` picks the GPU'):
        assert any(idea in ' '.join(c.source.split()) for c in shown), f'not on a slide: {idea}'
    lines = next(c for c in shown if c.id == 'c009c-07ddplines')
    printed = ''.join(o.get('text', '') for o in lines.outputs)
    for call in ('init_process_group', 'DistributedSampler(', 'DDP(', 'set_epoch', 'rank == 0'):
        assert call in printed, call


# ---- what the GPU-only cell is expected to show (d2l_utils/expectations/lesson07.py) ----
import torch  # noqa: E402
from torch.utils.data import DistributedSampler  # noqa: E402

from d2l_utils import gpu_models  # noqa: E402
from d2l_utils.expectations import expected_for, fmt  # noqa: E402


@pytest.mark.parametrize('world', [1, 2, 4, 8])
def test_any_number_of_ranks_shares_out_the_same_first_32_samples(world):
    """Why the GPU run's first gradient equals one process's on the same 32 samples."""
    per_rank = 32 // world
    first = [i for r in range(world)
             for i in list(DistributedSampler(range(256), num_replicas=world, rank=r, seed=0))[:per_rank]]
    one = list(DistributedSampler(range(256), num_replicas=1, rank=0, seed=0))[:32]
    assert sorted(first) == sorted(one)


def test_the_expected_step_is_the_hosts_and_the_page_quotes_it():
    steps = {gpu.key: {i['name']: i for i in expected_for('07-nccl-run', gpu).items}['ms_per_step']
             for gpu in gpu_models.DATASHEET.values()}
    assert steps['H100'] == steps['H200'] == steps['H100-PCIe']   # one kind of host; the GPU idles
    assert steps['T4']['value'] > steps['H100']['value']          # Colab's VM launches more slowly
    assert all(step['not_judged'] for step in steps.values())     # 35-70 launches of 3-8 µs: over 3x
    text = ' '.join((ROOT / 'teaching' / '07_distributed_data_parallel.md').read_text(encoding='utf-8').split())
    step = steps['H100']
    assert f"{fmt(step['value'])} ms per step (model, {fmt(step['low'])} to {fmt(step['high'])})" in text


def test_the_gpu_cell_uses_at_most_two_gpus_and_every_rank_is_compared():
    """Issue 37: with every GPU of an 8-GPU server (or 3) the cell modelled one GPU, and 3 ranks
    would split a step's 32 samples unevenly, so its gradient could not equal one process's."""
    nb = nbformat.read(ROOT / 'notebooks' / '07_distributed_data_parallel.ipynb', as_version=4)
    code = next(c.source for c in nb.cells if c.id == 'c023b-07ncclrun')
    assert 'world = min(torch.cuda.device_count(), 2)' in code
    assert "torchrun('train_ddp.py', world," in code and 'for rep in gpu_reports' in code
    judged = {i['name'] for i in expected_for('07-nccl-run', gpu_models.DATASHEET['H100']).items
              if not i.get('not_judged')}
    assert judged == {'backend', 'same_gradient', 'same_weights'}


# ---- no cell depends on a global that another cell rebinds (issue 37) ----
import builtins  # noqa: E402
import symtable  # noqa: E402


def global_names(nb):
    """For each code cell (``%%`` cell magics aside): its id, the names it assigns at the top
    level, and the globals it reads without binding them itself (in functions too)."""
    cells = []
    for c in nb.cells:
        if c.cell_type != 'code' or c.source.startswith('%%'):
            continue
        code = '\n'.join(l.split('%')[0] + 'pass' if l.lstrip().startswith('%') else l
                         for l in c.source.splitlines())                    # IPython line magics
        top = symtable.symtable(code, c.id, 'exec')
        bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
        reads, tables = set(), [top]
        while tables:
            t = tables.pop()
            reads |= {s.get_name() for s in t.get_symbols()
                      if s.is_referenced() and (t is top or s.is_global())}
            tables += t.get_children()
        assigned = {s.get_name() for s in top.get_symbols() if s.is_assigned()}
        cells.append((c.id, assigned, reads - bound - set(dir(builtins))))
    return cells


def test_no_cell_reads_a_global_that_two_cells_assign():
    """A GPU branch or an exercise that reads a global which another cell rebinds breaks after
    "Run all" (issue 37: ``model = DDP(WithSpare())`` made the GPU cell raise KeyError and a
    student's exercise 2 raise AttributeError). So every global a cell reads without binding
    it is assigned by one cell only (importing the same module twice is harmless)."""
    nb = nbformat.read(ROOT / 'notebooks' / '07_distributed_data_parallel.ipynb', as_version=4)
    cells = global_names(nb)
    assigners = {}
    for cell_id, assigned, _ in cells:
        for name in assigned:
            assigners.setdefault(name, []).append(cell_id)
    shared = {(cell_id, name): assigners[name] for cell_id, _, reads in cells for name in reads
              if len(assigners.get(name, [])) > 1}
    assert not shared, f'read by a cell, assigned by several: {shared}'
    gpu = next(reads for cell_id, _, reads in cells if cell_id == 'c023b-07ncclrun')
    assert {'grads_1', 'weights_1'} <= gpu and 'model' not in gpu     # the one-process run, by its own names


def test_the_rebinding_check_sees_a_rebound_model():
    """The check above fails on the notebook as it was before issue 37's fix."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('model = make()', id='a'),
        nbformat.v4.new_code_cell('model = DDP(WithSpare())', id='b'),
        nbformat.v4.new_code_cell('def f():\n    return [p for p in model.parameters()]', id='c')])
    cells = global_names(nb)
    assert cells[2][2] == {'model'} and [c[1] for c in cells[:2]] == [{'model'}, {'model'}]
