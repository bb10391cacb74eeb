# GENERATED FILE, do not edit: it is rebuilt from the #@save cells of
# notebooks/*.ipynb by `python -m d2l_utils.build`, and a test fails when the two
# disagree. Change a helper in the lesson that teaches it, then rebuild.
"""Helpers that the lessons define in their ``#@save`` cells, in lesson order."""

import torch
from d2l_utils import checks
import re
import contextlib
import os
import timeit
import itertools
from torch import nn
import ctypes
import signal
import subprocess
import time
import sys
import tempfile
import uuid
import pathlib
import gc
import json
import collections.abc


__all__ = [
    'num_gpus',
    'try_gpu',
    'try_all_gpus',
    'rank_by_load',
    'least_busy_gpus',
    'synchronize',
    'time_op',
    'copy_bandwidth',
    'fit_latency_bandwidth',
    'synthetic_data',
    'train_epoch',
    'split_batch',
    'run_processes',
    'torchrun',
    'training_memory',
    'saved_tensor_bytes',
    'peak_memory',
    'cpu_memory_timeline',
    'round_mantissa',
    'tf32_matmuls_enabled',
    'tf32_matmuls',
    'roofline_bound',
    'SlowDataset',
    'busy_fraction',
    'add_to_class',
    'Prefetcher',
    'pipeline_schedule',
    'ring_allreduce_bytes',
    'bus_bandwidth',
    'read_rank_results',
    'bubble_fraction',
    'replay_pipeline',
    'parallel_plans',
]


# ---- from notebooks/01_devices.ipynb ----
def num_gpus():
    """Return the number of accelerators PyTorch can use (CUDA/ROCm, MPS, XPU); 0 if none.

    On CUDA this starts the CUDA driver in the process (``torch.cuda.is_available`` calls
    ``cudaGetDeviceCount``), so set ``CUDA_VISIBLE_DEVICES`` before asking, never after.

    Defined in notebooks/01_devices.ipynb.
    """
    return torch.accelerator.device_count() if torch.accelerator.is_available() else 0


# ---- from notebooks/01_devices.ipynb ----
def try_gpu(i=0):
    """Return accelerator ``i`` if it exists, otherwise the CPU (as d2l's ``try_gpu``).

    Defined in notebooks/01_devices.ipynb.
    """
    i = checks.integer(i, 'i', low=0)          # try_gpu(-1) or try_gpu('cuda:0') is a mistake
    if i < num_gpus():
        return torch.device(torch.accelerator.current_accelerator().type, i)
    return torch.device('cpu')


def try_all_gpus():
    """Return all accelerators, or ``[device('cpu')]`` if there is none (as d2l's).

    Defined in notebooks/01_devices.ipynb.
    """
    return [try_gpu(i) for i in range(num_gpus())] or [torch.device('cpu')]


# ---- from notebooks/01_devices.ipynb ----
def _visible_entries(value):
    """Return the entries of ``CUDA_VISIBLE_DEVICES=value`` as PyTorch reads them
    (``_parse_visible_devices`` in torch/cuda/__init__.py), up to the first malformed one:
    strings for a value that starts with ``GPU-`` (UUIDs or their prefixes) or ``MIG-``,
    else indices read from their leading digits, as C's ``strtoul`` does (' +1gpu' is 1).

    Defined in notebooks/01_devices.ipynb.
    """
    checks.instance(value, 'CUDA_VISIBLE_DEVICES', str, 'a string')
    prefix = value[:4] if value[:4] in ('GPU-', 'MIG-') else None
    entries = []
    for text in value.split(','):
        if prefix:                              # UUIDs (or unique prefixes), or MIG instances
            entry = text if text.startswith(prefix) else None
        else:                                   # indices: a sign and digits, after spaces
            number = re.match(r'\s*[+-]?\d+', text)
            entry = int(number[0]) if number and int(number[0]) >= 0 else None
        if entry is None:
            break                               # the first malformed entry ends the list
        if entry in entries:
            return []                           # an entry listed twice hides every GPU
        entries.append(entry)
    return entries


# ---- from notebooks/01_devices.ipynb ----
def _visible_nvml_indices(value, uuids):
    """Return the NVML indices of the GPUs that ``CUDA_VISIBLE_DEVICES=value`` leaves visible,
    in its order, as PyTorch reads it; None for MIG instances. ``uuids``: the machine's GPU
    UUIDs in NVML order; ``value`` None (the variable unset) leaves every GPU visible.

    Defined in notebooks/01_devices.ipynb.
    """
    if value is None:
        return list(range(len(uuids)))
    entries = _visible_entries(value)
    if entries and str(entries[0]).startswith('MIG-'):
        return None                             # MIG instances, not whole GPUs
    visible = []
    for entry in entries:                       # the first entry naming no GPU ends the list
        if isinstance(entry, str):              # a UUID, or a prefix of exactly one
            found = [i for i, uuid in enumerate(uuids) if uuid.startswith(entry)]
        else:
            found = [entry] if entry < len(uuids) else []
        if len(found) != 1:
            break
        if found[0] in visible:
            return []                           # two prefixes of one UUID hide every GPU too
        visible.append(found[0])
    return visible


# ---- from notebooks/01_devices.ipynb ----
def rank_by_load(cards):
    """Return the UUIDs of ``cards``, ``(uuid, utilisation %, free bytes)`` tuples, the least
    busy first: the lowest utilisation, then the most free memory; ties keep their order.

    Defined in notebooks/01_devices.ipynb.
    """
    cards = [checks.instance(card, 'a card', tuple, 'a (uuid, utilisation, free) tuple') for card in cards]
    ranked = sorted(cards, key=lambda card: (card[1], -card[2]))     # stable: ties keep their order
    return [uuid for uuid, _, _ in ranked]


def least_busy_gpus(k=1):
    """Return the UUIDs of up to ``k`` GPUs, the least busy first (``rank_by_load``: NVML's
    utilisation, the share of the last sample period in which a kernel ran, then free memory).

    Asks NVML (``nvidia-ml-py``), which starts no CUDA. The answer is for a new process:
    put ``','.join(uuids)`` in its ``CUDA_VISIBLE_DEVICES``; a UUID names one card whatever
    ``CUDA_DEVICE_ORDER`` says. If ``CUDA_VISIBLE_DEVICES`` is already set (by a job
    scheduler, say), only the GPUs it lists are candidates, and ties keep its order. Its
    indices are taken as NVML's, as PyTorch's own NVML code takes them; CUDA agrees when
    its order is NVML's (with CUDA_DEVICE_ORDER=PCI_BUS_ID, in practice), and UUIDs
    leave no doubt. Returns [] when there is nothing to choose from: no ``nvidia-ml-py``, no
    NVIDIA driver, any NVML error (a permission error too, or a card that reports no
    utilisation), MIG instances listed, no GPU visible. Then leave ``CUDA_VISIBLE_DEVICES``
    as it is.

    Defined in notebooks/01_devices.ipynb.
    """
    k = checks.integer(k, 'k', low=1)
    try:
        import pynvml
    except ImportError:
        return []                          # nvidia-ml-py is not installed
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return []                          # no NVIDIA driver (or no NVIDIA GPU)
    try:
        gpus = []                          # (UUID, utilisation %, free bytes) in NVML order
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            gpus.append((uuid.decode() if isinstance(uuid, bytes) else uuid,
                         pynvml.nvmlDeviceGetUtilizationRates(handle).gpu,
                         pynvml.nvmlDeviceGetMemoryInfo(handle).free))
    except pynvml.NVMLError:
        return []                          # e.g. no permission to query a GPU
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
    visible = _visible_nvml_indices(os.environ.get('CUDA_VISIBLE_DEVICES'), [g[0] for g in gpus])
    if visible is None:
        return []                          # MIG instances: not chosen by the card's load
    return rank_by_load([gpus[i] for i in visible])[:k]


# ---- from notebooks/03_copies_between_devices.ipynb ----
def synchronize(device='cpu'):
    """Wait until the work queued on ``device`` (or on each of a list of devices) is done.

    The CPU runs its work inside each call, so for it there is nothing to wait for.

    Defined in notebooks/03_copies_between_devices.ipynb.
    """
    for d in checks.devices(device):
        if d.type != 'cpu':
            torch.accelerator.synchronize(d)


def time_op(fn, device='cpu', min_run_time=0.1, num_threads=1):
    """Return the median time, in seconds, of one call ``fn()`` whose work runs on ``device``.

    Built on ``torch.utils.benchmark.Timer.blocked_autorange``; the clock synchronizes
    ``device`` (one device or a list) before every reading, so queued work is counted.
    ``num_threads`` is the number of CPU threads PyTorch may use meanwhile, as in Timer.
    The first call imports ``torch.utils.benchmark``, which on a CUDA build of PyTorch can
    start the CUDA driver (lesson 1 says when); importing the package does not, so
    ``CUDA_VISIBLE_DEVICES`` can still be set after ``import d2l_utils``.

    Defined in notebooks/03_copies_between_devices.ipynb.
    """
    fn = checks.function(fn, 'fn')
    waits = [d for d in checks.devices(device) if d.type != 'cpu']     # the accelerators to wait for
    min_run_time = checks.number(min_run_time, 'min_run_time', above=0)
    num_threads = checks.integer(num_threads, 'num_threads', low=1)
    import torch.utils.benchmark as benchmark    # here, not with the package: see the docstring

    def clock():
        for d in waits:
            torch.accelerator.synchronize(d)
        return timeit.default_timer()

    timer = benchmark.Timer(stmt='fn()', globals={'fn': fn}, timer=clock, num_threads=num_threads)
    return timer.blocked_autorange(min_run_time=min_run_time).median


# ---- from notebooks/03_copies_between_devices.ipynb ----
def copy_bandwidth(nbytes, src='cpu', dst='cpu', pinned=False, min_run_time=0.05):
    """Time copying ``nbytes`` bytes from device ``src`` to ``dst``; return (seconds, bytes_per_s).

    Both buffers are allocated before timing; ``time_op`` times ``dst_buf.copy_(src_buf)``
    and waits for both devices. ``pinned=True`` page-locks the host side (this needs an
    accelerator) and copies with ``non_blocking=True``.

    Defined in notebooks/03_copies_between_devices.ipynb.
    """
    nbytes = checks.integer(nbytes, 'nbytes', low=1)
    src, dst = checks.devices([src, dst])
    if checks.flag(pinned, 'pinned') and not torch.accelerator.is_available():
        raise ValueError('pinned=True needs an accelerator: pinned memory is host memory a GPU reads directly')
    a = torch.ones(nbytes, dtype=torch.uint8, device=src)
    b = torch.empty(nbytes, dtype=torch.uint8, device=dst)
    if pinned:
        a, b = [t.pin_memory() if t.device.type == 'cpu' else t for t in (a, b)]
    seconds = time_op(lambda: b.copy_(a, non_blocking=pinned), [src, dst], min_run_time)
    return seconds, nbytes / seconds


# ---- from notebooks/03_copies_between_devices.ipynb ----
def fit_latency_bandwidth(nbytes, seconds):
    """Fit ``seconds = latency + nbytes / bandwidth``; return (latency_s, bytes_per_s).

    Least squares on the relative error, so that small and large copies weigh alike.

    Defined in notebooks/03_copies_between_devices.ipynb.
    """
    n = torch.tensor(checks.instance(nbytes, 'nbytes', (list, tuple), 'a list of sizes'), dtype=torch.float64)
    t = torch.tensor(checks.instance(seconds, 'seconds', (list, tuple), 'a list of times'), dtype=torch.float64)
    if len(n) < 2 or len(n) != len(t) or not bool((n > 0).all() and (t > 0).all()):
        raise ValueError('give at least two positive sizes, and as many positive times')
    rows = torch.stack([torch.ones_like(n), n], dim=1) / t[:, None]
    latency, per_byte = torch.linalg.lstsq(rows, torch.ones_like(t)[:, None]).solution[:, 0].tolist()
    return latency, (1 / per_byte if per_byte > 0 else float('inf'))


# ---- from notebooks/05_module_placement.ipynb ----
def synthetic_data(w, b, num_examples):
    """Return ``X, y`` with ``y = X @ w + b + noise`` (as d2l's ``synthetic_data``).

    ``X`` holds ``num_examples`` rows of standard normal features and ``y`` is a column
    vector; the noise has standard deviation 0.01. Both are made on the device and with
    the dtype of ``w`` (a 1-D floating-point tensor); ``b`` is a number.

    Defined in notebooks/05_module_placement.ipynb.
    """
    if checks.tensor(w, 'w').dim() != 1 or not w.is_floating_point():
        raise ValueError(f'w must be a 1-D floating-point tensor, not {w.dtype} of shape {tuple(w.shape)}')
    n, b = checks.integer(num_examples, 'num_examples', low=1), checks.number(b, 'b')
    X = torch.normal(0.0, 1.0, (n, len(w)), device=w.device, dtype=w.dtype)
    y = X @ w + b
    y += torch.normal(0.0, 0.01, y.shape, device=w.device, dtype=w.dtype)
    return X, y.reshape((-1, 1))


# ---- from notebooks/05_module_placement.ipynb ----
def train_epoch(net, data_iter, loss_fn, optimizer, device):
    """Train ``net`` for one pass over ``data_iter``; return the mean loss per example.

    ``net`` must already be on ``device``; each batch ``(X, y)`` from ``data_iter`` is
    moved there, to a CUDA device with ``non_blocking=True`` (so that the host waits only
    where the batch must be staged: give it pinned batches, or data already on the device).
    ``loss_fn(net(X), y)`` must return the mean loss of the batch. The loss is accumulated
    on the device and read once, at the end of the epoch.

    Defined in notebooks/05_module_placement.ipynb.
    """
    checks.instance(net, 'net', nn.Module, 'an nn.Module')
    checks.function(loss_fn, 'loss_fn')
    checks.instance(optimizer, 'optimizer', torch.optim.Optimizer, 'a torch.optim.Optimizer')
    device, = checks.devices(device)
    for name, t in itertools.chain(net.named_parameters(), net.named_buffers()):
        if t.device.type != device.type or device.index not in (None, t.device.index):
            raise ValueError(f'{name} is on {t.device}, not {device}: call net.to(device) first')
    net.train()
    queue = device.type == 'cuda'        # a blocking copy to a GPU waits for all queued work
    total, count = torch.zeros((), device=device), 0
    for X, y in data_iter:
        X, y = X.to(device, non_blocking=queue), y.to(device, non_blocking=queue)
        loss = loss_fn(net(X), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.detach() * len(X)
        count += len(X)
    if count == 0:
        raise ValueError('data_iter yielded no batches: the mean loss of nothing is undefined')
    return (total / count).item()


# ---- from notebooks/06_data_parallel.ipynb ----
def split_batch(X, y, devices):
    """Split ``X`` and its labels ``y`` along dimension 0, one chunk per device (as d2l's).

    Chunk ``i`` goes to ``devices[i]``. Chunks have ``ceil(len(X) / len(devices))`` rows,
    the last one fewer, as with ``nn.parallel.scatter``; so a small batch can give fewer
    chunks than devices. Any devices work, the CPU included, and repeats are allowed.

    Defined in notebooks/06_data_parallel.ipynb.
    """
    X, y = checks.tensor(X, 'X'), checks.tensor(y, 'y')
    if X.dim() == 0 or y.dim() == 0 or not len(X) == len(y) > 0:
        raise ValueError(f'X and y need the same number (>= 1) of rows, not {tuple(X.shape)}, {tuple(y.shape)}')
    devices = checks.devices(checks.instance(devices, 'devices', (list, tuple), 'a list of devices'))
    Xs, ys = [], []
    for x, t, d in zip(X.chunk(len(devices)), y.chunk(len(devices)), devices):
        Xs.append(x.to(d))         # chunk i of the inputs and of the labels go to devices[i]
        ys.append(t.to(d))
    return Xs, ys


# ---- from notebooks/07_distributed_data_parallel.ipynb ----
def _die_with_parent(sig=signal.SIGTERM):
    """A ``preexec_fn`` for ``subprocess.Popen`` on Linux: the child gets ``sig`` when we die.

    prctl(PR_SET_PDEATHSIG) ties the child to the thread that started it, so that thread
    must outlive the child (``run_processes`` waits for its children).

    Defined in notebooks/07_distributed_data_parallel.ipynb.
    """
    prctl = ctypes.CDLL(None, use_errno=True).prctl     # looked up now, not in the child
    parent = os.getpid()

    def in_child():
        prctl(1, int(sig))                               # 1 is PR_SET_PDEATHSIG
        if os.getppid() != parent:                       # we died before that call
            os.kill(os.getpid(), sig)
    return in_child


def _process_table(marker):
    """Every process, as ``{pid: (parent pid, process group, whether its environment has marker)}``.

    On Linux from /proc (the environment a process started with); elsewhere from ``ps``,
    which does not show environments.

    Defined in notebooks/07_distributed_data_parallel.ipynb.
    """
    if not os.path.isdir('/proc/self'):
        out = subprocess.run(['ps', '-A', '-o', 'pid=,ppid=,pgid='], capture_output=True, text=True)
        return {int(p): (int(pp), int(g), False) for p, pp, g in map(str.split, out.stdout.splitlines())}
    table, needle = {}, marker.encode() + b'\0'
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{pid}/stat', 'rb') as f:   # "pid (name) state ppid pgrp ..."
                ppid, group = f.read().rsplit(b')', 1)[1].split()[1:3]
        except OSError:                                  # it ended while we looked
            continue
        try:
            with open(f'/proc/{pid}/environ', 'rb') as f:
                marked = needle in f.read()
        except OSError:                                  # not ours to read
            marked = False
        table[int(pid)] = int(ppid), int(group), marked
    return table


# ---- from notebooks/07_distributed_data_parallel.ipynb ----
def _signal(send, target, sig):
    """``send(target, sig)``, ignoring a target that is gone or not ours.

    Defined in notebooks/07_distributed_data_parallel.ipynb.
    """
    try:
        send(target, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_all(roots, marker):
    """SIGKILL the processes ``roots``, their descendants and process groups, and (on Linux)
    every process whose environment holds ``marker``, wherever it now hangs in the tree.

    Each process is stopped (SIGSTOP) as soon as it is found: stopped, it starts no new
    process, and its children cannot be orphaned, and lost, while we look.

    Defined in notebooks/07_distributed_data_parallel.ipynb.
    """
    groups = {}                                          # pid -> its process group
    try:
        while True:
            table = _process_table(marker)
            found = [*roots, *(p for p, (_, _, marked) in table.items() if marked)]
            for p in found:                              # the list grows as we walk it
                found += [c for c, (parent, _, _) in table.items() if parent == p and c not in found]
            new = [p for p in found if p not in groups and p != os.getpid()]
            if not new:
                break
            for p in new:
                groups[p] = table.get(p, (0, p, False))[1]
                _signal(os.kill, p, signal.SIGSTOP)
    finally:                                             # even if interrupted: none stays stopped
        for group in set(groups.values()) - {os.getpgrp()}:   # never our own group
            _signal(os.killpg, group, signal.SIGKILL)
        for p in groups:
            _signal(os.kill, p, signal.SIGKILL)


# ---- from notebooks/07_distributed_data_parallel.ipynb ----
def _stop(procs, marker, grace=5):
    """Leave none of ``procs``, nor anything they started, running: SIGTERM, then SIGKILL.

    Defined in notebooks/07_distributed_data_parallel.ipynb.
    """
    try:
        for p in procs:
            if p.poll() is None:
                p.terminate()            # torchrun, on SIGTERM, stops its workers and exits
        end = time.monotonic() + grace
        for p in procs:
            try:
                p.wait(max(end - time.monotonic(), 0))
            except subprocess.TimeoutExpired:
                pass
    finally:                             # also if interrupted again while waiting
        if os.name == 'posix':           # a pid not reaped yet is still its process's
            _kill_all([p.pid for p in procs if p.returncode is None], marker)
        else:
            for p in procs:
                if p.returncode is None:
                    p.kill()
        for p in procs:
            p.wait()


# ---- from notebooks/07_distributed_data_parallel.ipynb ----
def _text(file):
    """The whole content of a binary temporary file, as text.

    Defined in notebooks/07_distributed_data_parallel.ipynb.
    """
    file.seek(0)
    return file.read().decode(errors='replace')


def run_processes(commands, timeout=300, env=None):
    """Start ``commands`` together, wait for all of them, and leave no process behind.

    ``commands`` is a list of commands, each a list of strings. Returns one
    ``subprocess.CompletedProcess`` per command, stdout and stderr as text. ``env`` adds
    variables to the children's environment only; ``PYTHON_COLORS=0`` is set there unless
    ``env`` says otherwise, so that Python (3.13 and later) writes plain tracebacks, without
    colour codes. After ``timeout`` seconds ``subprocess.TimeoutExpired`` is raised, with
    one output text per command.

    However the call ends (the commands end, the time limit, KeyboardInterrupt), the
    commands still running get SIGTERM, 5 s later SIGKILL with all they started; on Linux,
    any process they started that is still alive is then killed too. If this process dies,
    on Linux each command gets SIGTERM (torchrun then stops its workers); on macOS and
    Windows nothing stops them, and on Windows SIGKILL reaches the commands only.

    Defined in notebooks/07_distributed_data_parallel.ipynb.
    """
    if not all(isinstance(c, (list, tuple)) and c and all(isinstance(a, (str, os.PathLike)) for a in c)
               for c in commands):
        raise TypeError(f'commands must be a list of commands, each a non-empty list of strings: {commands!r}')
    if not commands:
        raise ValueError('commands is empty: nothing to run')
    timeout, env = checks.number(timeout, 'timeout', above=0), checks.environment(env)
    key, value = 'D2L_RUN_PROCESSES', uuid.uuid4().hex   # a marker that all they start inherit
    marker, env = f'{key}={value}', {**os.environ, 'PYTHON_COLORS': '0', **(env or {}), key: value}
    linux, procs, timed_out = sys.platform.startswith('linux'), [], False
    with contextlib.ExitStack() as files:
        logs = [[files.enter_context(tempfile.TemporaryFile()) for _ in 'oe'] for _ in commands]
        try:
            for cmd, (out, err) in zip(commands, logs):
                procs.append(subprocess.Popen(cmd, stdout=out, stderr=err, env=env, start_new_session=True,
                                              preexec_fn=_die_with_parent() if linux else None))
            deadline = time.monotonic() + timeout
            for p in procs:
                p.wait(max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:                         # every way out, KeyboardInterrupt included
            _stop(procs, marker)
        texts = [(_text(out), _text(err)) for out, err in logs]
    if timed_out:
        raise subprocess.TimeoutExpired(commands, timeout, [o for o, _ in texts], [e for _, e in texts])
    return [subprocess.CompletedProcess(c, p.returncode, o, e) for c, p, (o, e) in zip(commands, procs, texts)]


# ---- from notebooks/07_distributed_data_parallel.ipynb ----
def torchrun(script, nproc_per_node, *script_args, timeout=300, env=None):
    """Run ``script`` with ``torchrun --standalone --nproc-per-node=N`` and wait for it.

    Returns the finished ``subprocess.CompletedProcess``, with stdout and stderr as text;
    a failed run has a non-zero ``returncode``. ``env`` adds variables to the children's
    environment only. It runs through ``run_processes``: after ``timeout`` seconds
    (``subprocess.TimeoutExpired``), on an interrupt, and on Linux if this process dies,
    torchrun and its workers are stopped.

    Defined in notebooks/07_distributed_data_parallel.ipynb.
    """
    if not pathlib.Path(checks.instance(script, 'script', (str, os.PathLike), 'a path')).is_file():
        raise ValueError(f'no such script: {script}')       # found now, not after torchrun has started
    n = checks.integer(nproc_per_node, 'nproc_per_node', low=1)
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone',
           '--nproc-per-node', str(n), os.fspath(script), *map(str, script_args)]
    try:
        return run_processes([cmd], timeout=timeout, env=env)[0]
    except subprocess.TimeoutExpired as e:           # one command: its texts, not lists of them
        raise subprocess.TimeoutExpired(cmd, timeout, e.output[0], e.stderr[0]) from None


# ---- from notebooks/08_gpu_memory.ipynb ----
_STATE_TENSORS = {'sgd': 0, 'momentum': 1, 'adam': 2, 'adamw': 2}   # per parameter


def training_memory(model, optimizer='adam', master_weights=False):
    """Return the bytes that training ``model`` keeps from step to step, by kind.

    A dict with 'parameters' (parameters and buffers), 'gradients' (one per trainable
    parameter, in its dtype), 'optimizer state' and 'master weights'. ``optimizer`` is
    'sgd' (no state), 'momentum' (one buffer per parameter) or 'adam'/'adamw' (two);
    Adam's step counters (a number per tensor) are left out. With
    ``master_weights=True`` the optimizer keeps a float32 copy of lower-precision
    parameters and its state in float32 (mixed precision). Works on the ``meta`` device.
    Activations depend on the input and are not included (see ``saved_tensor_bytes``).

    Defined in notebooks/08_gpu_memory.ipynb.
    """
    checks.instance(model, 'model', nn.Module, 'an nn.Module')
    states = _STATE_TENSORS[checks.one_of(optimizer, 'optimizer', _STATE_TENSORS)]
    trainable = [p for p in model.parameters() if p.requires_grad]
    if checks.flag(master_weights, 'master_weights') and any(p.dtype == torch.float32 for p in trainable):
        raise ValueError('master_weights=True is for lower-precision parameters; '
                         'float32 parameters are their own master copy')
    count = sum(p.numel() for p in trainable)
    nbytes = sum(p.numel() * p.element_size() for p in trainable)
    state = 4 * count if master_weights else nbytes             # bytes of one state tensor
    return {'parameters': sum(t.numel() * t.element_size()
                              for t in [*model.parameters(), *model.buffers()]),
            'gradients': nbytes,
            'optimizer state': states * state,
            'master weights': 4 * count if master_weights else 0}


# ---- from notebooks/08_gpu_memory.ipynb ----
def saved_tensor_bytes(fn, exclude=(), by_dtype=False):
    """Run ``fn()`` and return the bytes of the tensors autograd saves for the backward pass.

    These are the activations, which stay in memory until ``backward()``. Views of one
    storage are counted once, by the whole storage; the storages of the tensors in
    ``exclude`` (say the parameters and the input batch, which exist anyway) are not
    counted. Works on the ``meta`` device, so a model too large for this machine can be
    measured without memory. ``by_dtype=True`` returns ``{dtype: bytes}`` instead (lesson 9).

    Defined in notebooks/08_gpu_memory.ipynb.
    """
    checks.function(fn, 'fn')
    skip = {id(t.untyped_storage())                       # a storage keeps one Python object
            for t in checks.tensors(exclude, 'exclude')}
    saved = {}

    def pack(t):
        storage = t.untyped_storage()
        if id(storage) not in skip:
            saved[id(storage)] = (t.dtype, storage)
        return t.detach()              # t itself would make a reference cycle (see the docs)

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    if not by_dtype:
        return sum(s.nbytes() for _, s in saved.values())
    split = {}
    for dtype, s in saved.values():
        split[dtype] = split.get(dtype, 0) + s.nbytes()
    return split


# ---- from notebooks/08_gpu_memory.ipynb ----
def peak_memory(fn, device='cpu'):
    """Run ``fn()`` and return its peak memory on ``device``, in bytes above the level before.

    On a CUDA GPU: ``torch.cuda.max_memory_allocated`` after resetting it, less the memory
    allocated before. On the CPU: the highest level of ``cpu_memory_timeline(fn)``.

    Defined in notebooks/08_gpu_memory.ipynb.
    """
    checks.function(fn, 'fn')
    device, = checks.devices(device)
    checks.one_of(device.type, 'device.type', {'cpu', 'cuda'})       # what this function can measure
    if device.type == 'cpu':
        return max(cpu_memory_timeline(fn)['bytes'], default=0)
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - start


# ---- from notebooks/08_gpu_memory.ipynb ----
def cpu_memory_timeline(fn):
    """Run ``fn()`` under PyTorch's profiler; return the CPU memory it held over time.

    A dict: 'seconds' and 'bytes', the memory allocated by ``fn`` and still held after
    each allocation or release (from the profiler's memory events), and 'regions', the
    ``torch.profiler.record_function`` ranges as name -> (start, end) in seconds. Memory
    allocated before the call is not seen, nor is its release (the profiler then logs a
    warning). Python's garbage collector is paused meanwhile, so that it cannot free
    older tensors. Sets ``KINETO_LOG_LEVEL=6`` unless it is set, which silences the
    profiler's C++ log on stderr.

    Defined in notebooks/08_gpu_memory.ipynb.
    """
    checks.function(fn, 'fn')
    os.environ.setdefault('KINETO_LOG_LEVEL', '6')   # else the profiler logs its start and stop to stderr
    collecting = gc.isenabled()
    gc.disable()
    try:    # torch.profiler.profile's backend: the front end loads the compiler first (seconds)
        with torch.autograd.profiler.profile(profile_memory=True) as prof:
            fn()
    finally:
        if collecting:
            gc.enable()
    with tempfile.TemporaryDirectory() as tmp:
        prof.export_chrome_trace(os.path.join(tmp, 'trace.json'))
        with open(os.path.join(tmp, 'trace.json')) as f:
            events = json.load(f)['traceEvents']
    memory = sorted((e['ts'], e['args']['Bytes']) for e in events
                    if e.get('name') == '[memory]' and e['args'].get('Device Type') == 0)
    regions = [e for e in events if e.get('cat') == 'user_annotation']
    start = min([t for t, _ in memory] + [e['ts'] for e in regions], default=0)
    return {'seconds': [(t - start) / 1e6 for t, _ in memory],
            'bytes': list(itertools.accumulate(b for _, b in memory)),
            'regions': {e['name']: ((e['ts'] - start) / 1e6, (e['ts'] + e['dur'] - start) / 1e6)
                        for e in regions}}


# ---- from notebooks/09_mixed_precision.ipynb ----
def round_mantissa(x, bits):
    """Round a float32 tensor to ``bits`` explicit mantissa bits; return a float32 tensor.

    Rounds to nearest, ties to even, as PyTorch converts float32 to bfloat16, and keeps
    float32's 8-bit exponent: ``bits=7`` gives bfloat16's values, ``bits=10`` TF32's.
    Values too large for the shorter mantissa round to infinity; NaN stays NaN.

    Defined in notebooks/09_mixed_precision.ipynb.
    """
    x = checks.tensor(x, 'x', torch.float32)
    drop = 23 - checks.integer(bits, 'bits', low=0, high=23)
    if drop == 0:
        return x.clone()
    u = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF        # the 32 bits, as an unsigned number
    u = u + (1 << (drop - 1)) - 1 + ((u >> drop) & 1)            # round to nearest, ties to even
    u = (u >> drop << drop) & 0xFFFFFFFF                         # clear the dropped bits
    rounded = torch.where(u >= 2**31, u - 2**32, u).to(torch.int32).view(torch.float32)
    return torch.where(torch.isnan(x), x, rounded)


# ---- from notebooks/09_mixed_precision.ipynb ----
def _tf32_new_api():
    """True where ``torch.backends.cuda.matmul.fp32_precision`` takes 'ieee'/'tf32' (PyTorch 2.9+).

    Defined in notebooks/09_mixed_precision.ipynb.
    """
    return torch.__version__ >= (2, 9)


def tf32_matmuls_enabled():
    """Return True if float32 matrix products on CUDA may use TF32 now (whatever the GPU).

    Defined in notebooks/09_mixed_precision.ipynb.
    """
    matmul = torch.backends.cuda.matmul
    # The newer switch reads the setting in effect: its own, else all of CUDA's, else all backends'.
    return matmul.fp32_precision == 'tf32' if _tf32_new_api() else matmul.allow_tf32


# ---- from notebooks/09_mixed_precision.ipynb ----
@contextlib.contextmanager
def tf32_matmuls(enabled=True):
    """Within the ``with`` block, allow (or forbid) TF32 in float32 matrix products on CUDA.

    Uses ``torch.backends.cuda.matmul.fp32_precision`` from PyTorch 2.9 on (no deprecation
    warning) and ``allow_tf32`` before; on exit, the setting in effect before is restored.

    Defined in notebooks/09_mixed_precision.ipynb.
    """
    checks.flag(enabled, 'enabled')
    matmul = torch.backends.cuda.matmul
    name = 'fp32_precision' if _tf32_new_api() else 'allow_tf32'
    old = getattr(matmul, name)
    setattr(matmul, name, ('tf32' if enabled else 'ieee') if name == 'fp32_precision' else enabled)
    try:
        yield
    finally:
        setattr(matmul, name, old)


# ---- from notebooks/10_profiling.ipynb ----
def roofline_bound(flops, nbytes, seconds, peak_flops, bytes_per_s, overhead_factor=10):
    """Return 'compute', 'memory' or 'overhead or uncounted work': what bounds an operation
    that did ``flops`` FLOPs and moved ``nbytes`` bytes (read plus written) in ``seconds``.

    The roofline predicts ``max(flops / peak_flops, nbytes / bytes_per_s)`` seconds. A time
    over ``overhead_factor`` times that is 'overhead or uncounted work': fixed costs per call
    dominate, or the operation does work that ``flops`` and ``nbytes`` leave out (the model
    cannot tell which); otherwise the larger of the two predicted times names the bound.

    Defined in notebooks/10_profiling.ipynb.
    """
    flops, nbytes = checks.number(flops, 'flops', low=0), checks.number(nbytes, 'nbytes', low=0)
    if flops == nbytes == 0:
        raise ValueError('an operation with no FLOPs and no bytes has no place on a roofline')
    peak, bandwidth = checks.number(peak_flops, 'peak_flops', above=0), checks.number(bytes_per_s, 'bytes_per_s', above=0)
    seconds, factor = checks.number(seconds, 'seconds', above=0), checks.number(overhead_factor, 'overhead_factor', low=1)
    t_compute = flops / peak                        # the time if arithmetic were the only cost
    t_memory = nbytes / bandwidth                   # the time if memory traffic were
    predicted = max(t_compute, t_memory)            # the roofline's time
    if seconds > factor * predicted:
        return 'overhead or uncounted work'         # far slower than both ceilings allow
    return 'compute' if t_compute >= t_memory else 'memory'


# ---- from notebooks/10_profiling.ipynb ----
class SlowDataset(torch.utils.data.Dataset):
    """``n`` samples of ``features`` float32 values and a label in 0..9; each takes ``seconds`` to load.

    The samples are made once, from a fixed seed, so that every process holding the data set
    (a DataLoader's workers too) has the same ones. ``__getitem__`` sleeps first: that stands
    for I/O (reading a file, waiting for the network), which leaves the CPU free.

    Defined in notebooks/10_profiling.ipynb.
    """

    def __init__(self, n, features, seconds):
        self.seconds = checks.number(seconds, 'seconds', low=0)
        shape = checks.integer(n, 'n', low=1), checks.integer(features, 'features', low=1)
        self.x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
        self.labels = [i % 10 for i in range(shape[0])]

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(self):
            raise IndexError(f'sample index must be an int in [0, {len(self)}), got {i!r}')
        time.sleep(self.seconds)
        return self.x[i], self.labels[i]


# ---- from notebooks/10_profiling.ipynb ----
def busy_fraction(spans, start, end):
    """Return the fraction of the window [``start``, ``end``] covered by at least one of ``spans``.

    ``spans`` are (begin, end) pairs, such as a trace's kernels; overlapping spans count
    once and parts outside the window are cut off.

    Defined in notebooks/10_profiling.ipynb.
    """
    start, end = checks.number(start, 'start'), checks.number(end, 'end')
    if not end > start:
        raise ValueError(f'the window must have end > start, got [{start}, {end}]')
    covered, reach = 0.0, start                  # time counted so far; where the counted part ends
    for b, e in sorted((checks.number(b, 'begin'), checks.number(e, 'end')) for b, e in spans):
        if e < b:
            raise ValueError(f'a span must have end >= begin, got ({b}, {e})')
        b, e = max(b, reach), min(e, end)        # the part not counted yet, inside the window
        if e > b:
            covered, reach = covered + e - b, e
    return covered / (end - start)


# ---- from notebooks/11_overlap_and_launch_overhead.ipynb ----
def add_to_class(Class):
    """A decorator that stores the decorated function on ``Class`` under its own name (a method
    written in a later cell), and returns the function; d2l's helper of the same name.

    Defined in notebooks/11_overlap_and_launch_overhead.ipynb.
    """
    def register(fn):
        setattr(Class, fn.__name__, fn)
        return fn
    return register


# ---- from notebooks/11_overlap_and_launch_overhead.ipynb ----
_PREFETCH_END = object()


def _move_batch(batch, device, non_blocking=False):
    """Return ``batch`` with every tensor in it moved to ``device``; tuples, lists and dicts are walked.

    Defined in notebooks/11_overlap_and_launch_overhead.ipynb.
    """
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: _move_batch(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        items = [_move_batch(b, device, non_blocking) for b in batch]
        return type(batch)(*items) if hasattr(batch, '_fields') else type(batch)(items)
    return batch


def _batch_tensors(batch):
    """Yield every tensor in ``batch`` (a tensor, or tuples, lists and dicts of them).

    Defined in notebooks/11_overlap_and_launch_overhead.ipynb.
    """
    if isinstance(batch, torch.Tensor):
        yield batch
    elif isinstance(batch, (tuple, list, dict)):
        for b in (batch.values() if isinstance(batch, dict) else batch):
            yield from _batch_tensors(b)


# ---- from notebooks/11_overlap_and_launch_overhead.ipynb ----
class Prefetcher:
    """Iterate over ``loader``'s batches moved to ``device``, copying batch i+1 while batch i is used.

    On a CUDA device the copies run on a side stream; the consumer's stream waits for each
    copy and ``record_stream`` marks the batch as used there. Elsewhere each batch is
    moved with ``.to(device)``. A batch is a tensor or tuples, lists and dicts of them.

    Defined in notebooks/11_overlap_and_launch_overhead.ipynb.
    """
    def __init__(self, loader, device):
        checks.instance(loader, 'loader', collections.abc.Iterable, 'an iterable of batches (a DataLoader, not a Dataset)')
        [device] = checks.devices(device)                  # one device, present on this machine
        self.loader, self.device = loader, device
        self.stream = torch.cuda.Stream(device) if device.type == 'cuda' else None   # where the copies run


# ---- from notebooks/11_overlap_and_launch_overhead.ipynb ----
@add_to_class(Prefetcher)
def __len__(self):
    """The number of batches, as ``len(loader)``.

    Defined in notebooks/11_overlap_and_launch_overhead.ipynb.
    """
    return len(self.loader)


@add_to_class(Prefetcher)
def _copy_next(self, batches):
    """Start copying the next batch of ``batches`` on the side stream; ``_PREFETCH_END`` at the end.

    Defined in notebooks/11_overlap_and_launch_overhead.ipynb.
    """
    batch = next(batches, _PREFETCH_END)
    if batch is _PREFETCH_END:
        return batch
    with torch.cuda.stream(self.stream):
        return _move_batch(batch, self.device, non_blocking=True)


# ---- from notebooks/11_overlap_and_launch_overhead.ipynb ----
@add_to_class(Prefetcher)
def __iter__(self):
    """Yield the batches on the device, the next one's copy already queued.

    Defined in notebooks/11_overlap_and_launch_overhead.ipynb.
    """
    if self.stream is None:
        yield from (_move_batch(batch, self.device) for batch in self.loader)
        return
    batches = iter(self.loader)
    upcoming = self._copy_next(batches)
    while upcoming is not _PREFETCH_END:
        consumer = torch.cuda.current_stream(self.device)
        consumer.wait_stream(self.stream)             # the copy is done before the batch is used
        for t in _batch_tensors(upcoming):
            t.record_stream(consumer)                 # allocated on the side stream, used on the consumer's
        batch, upcoming = upcoming, self._copy_next(batches)   # queue the next copy, then hand out
        yield batch


# ---- from notebooks/11_overlap_and_launch_overhead.ipynb ----
def pipeline_schedule(copy_s, compute_s):
    """The overlapped schedule of a prefetching loop, from the durations of its steps.

    Copies run back to back on their own stream; compute i starts once copy i and
    compute i-1 are done. Returns two lists of (start, end) spans: copies, computes.

    Defined in notebooks/11_overlap_and_launch_overhead.ipynb.
    """
    copy_s = [checks.number(d, 'a copy duration', low=0) for d in copy_s]
    compute_s = [checks.number(d, 'a compute duration', low=0) for d in compute_s]
    if not copy_s or len(copy_s) != len(compute_s):
        raise ValueError(f'need as many copies as computes, at least one: {len(copy_s)} and {len(compute_s)}')
    copies, computes, t_copy, t_compute = [], [], 0.0, 0.0
    for c, k in zip(copy_s, compute_s):
        copies.append((t_copy, t_copy + c))
        t_copy += c
        start = max(t_copy, t_compute)
        computes.append((start, start + k))
        t_compute = start + k
    return copies, computes


# ---- from notebooks/12_collectives_and_sharding.ipynb ----
def ring_allreduce_bytes(nbytes, n):
    """Bytes each of ``n`` ranks sends (and receives) in a ring all-reduce of ``nbytes``.

    ``2 (n - 1) / n * nbytes``: n - 1 steps of a reduce-scatter, then n - 1 of an
    all-gather, each sending one chunk of ``nbytes / n``. Zero for a single rank.

    Defined in notebooks/12_collectives_and_sharding.ipynb.
    """
    nbytes, n = checks.integer(nbytes, 'nbytes', low=0), checks.integer(n, 'n', low=1)
    return 2 * (n - 1) * nbytes / n


def bus_bandwidth(nbytes, seconds, n):
    """nccl-tests' bus bandwidth of an all-reduce: ``nbytes / seconds * 2 (n - 1) / n``, bytes/s.

    Defined in notebooks/12_collectives_and_sharding.ipynb.
    """
    return ring_allreduce_bytes(nbytes, n) / checks.number(seconds, 'seconds', above=0)


# ---- from notebooks/12_collectives_and_sharding.ipynb ----
def read_rank_results(folder, part, world_size):
    """Read what each of ``world_size`` ranks wrote for ``part``: a list of dicts, in rank order.

    Rank r's result is the JSON file ``<folder>/<part>-rank<r>.json``, a dict whose 'rank'
    is r. Raises ValueError naming the ranks without a file, or a file holding another rank.

    Defined in notebooks/12_collectives_and_sharding.ipynb.
    """
    if not (isinstance(part, str) and part):
        raise TypeError(f'part must be a non-empty string such as "timing", not {part!r}')
    world_size = checks.integer(world_size, 'world_size', low=1)
    paths = [os.path.join(folder, f'{part}-rank{r}.json') for r in range(world_size)]
    missing = [r for r, path in enumerate(paths) if not os.path.isfile(path)]
    if missing:
        raise ValueError(f'{part!r}: no result from rank(s) {missing} of {world_size} in {folder}')
    results = []
    for r, path in enumerate(paths):
        with open(path) as f:
            results.append(json.load(f))
        if not isinstance(results[-1], dict) or results[-1].get('rank') != r:
            raise ValueError(f'{path} should hold a dict with rank {r}')
    return results


# ---- from notebooks/14_beyond_data_parallelism.ipynb ----
def bubble_fraction(p, m):
    """The share of a pipeline's time its ``p`` stages sit idle with ``m`` micro-batches: (p - 1) / (m + p - 1).

    With every stage equally fast, the last stage starts p - 1 slots after the first (the fill) and
    the first finishes p - 1 slots after the last (the drain), around m slots of work.

    Defined in notebooks/14_beyond_data_parallelism.ipynb.
    """
    p, m = checks.integer(p, 'p', low=1), checks.integer(m, 'm', low=1)
    return (p - 1) / (m + p - 1)


def replay_pipeline(orders, forward=1.0, backward=2.0):
    """Replay the order in which each stage ran its micro-batches: ``(time of the step, idle share, spans)``.

    ``orders[s]`` lists stage s's actions, ``('F', i)`` or ``('B', i)`` for micro-batch i, each taking
    ``forward`` or ``backward`` units of time, or the time a third element gives. A forward waits for
    the previous stage's forward of its micro-batch, a backward for the next stage's backward.
    ``spans[s]`` lists stage s's (kind, i, start, end).

    Defined in notebooks/14_beyond_data_parallelism.ipynb.
    """
    p = len(orders)
    done, spans, free, nxt = {}, [[] for _ in orders], [0.0] * p, [0] * p
    while any(nxt[s] < len(orders[s]) for s in range(p)):
        moved = False
        for s in range(p):
            while nxt[s] < len(orders[s]):
                kind, i, *took = orders[s][nxt[s]]
                need = (s - 1, 'F', i) if kind == 'F' else (s + 1, 'B', i)
                if 0 <= need[0] < p and need not in done:
                    break                                   # waits for its neighbour
                start = max(free[s], done.get(need, 0.0))
                free[s] = done[s, kind, i] = start + (took[0] if took else forward if kind == 'F' else backward)
                spans[s].append((kind, i, start, free[s]))
                nxt[s], moved = nxt[s] + 1, True
        if not moved:
            raise ValueError(f'the orders wait on each other: stage s stops at action {nxt}')
    total = max(free)
    busy = sum(end - start for stage in spans for _, _, start, end in stage)
    return total, 1 - busy / (p * total), spans


# ---- from notebooks/14_beyond_data_parallelism.ipynb ----
def parallel_plans(width, layers, gpu='H100', gpus=2, tokens=64, micro=4, per_node=8, value_bytes=4):
    """Every way to split a GPT of ``layers`` blocks of ``width`` over ``gpus`` GPUs of the datasheet
    table: tensor parallel ``tp`` (inside a node), pipeline ``pp``, FSDP over the rest (``dp``).

    Per GPU and training step of ``tokens``: lesson 8's 16 bytes a parameter for weights, gradients
    and Adam, sharded tp x pp x dp ways; the activations of the micro-batches 1F1B keeps on the
    first stage, 34 bytes a token per unit of width and block, cut tp ways by sequence parallelism
    (16-bit values, attention's scores not kept: Korthikanti et al., 2022, arXiv:2205.05198);
    tensor parallelism's 4 all-reduces a block of tokens x width values; FSDP's two all-gathers and
    a reduce-scatter of the weights; the bubble; the matrix products. Links: NVLink inside a node
    (PCIe without it), across nodes the PCIe slot of a network card (an upper bound for the
    network). Times by lesson 12's ring model, nothing overlapped. The defaults are lesson 14's
    run: 2 GPUs, 64 tokens of float32 values, 4 micro-batches.

    Defined in notebooks/14_beyond_data_parallelism.ipynb.
    """
    from d2l_utils import gpu_models as gm, ring_allreduce_bytes       # bubble_fraction: above
    spec = gm.DATASHEET[gpu]
    width, layers, gpus, tokens, micro, per_node = (checks.integer(v, n, low=1) for v, n in (
        (width, 'width'), (layers, 'layers'), (gpus, 'gpus'), (tokens, 'tokens'), (micro, 'micro'), (per_node, 'per_node')))
    params = layers * (12 * width**2 + 13 * width)              # lesson 8's count of a block
    a = gm.ASSUMPTIONS
    if spec.nvlink_bytes_per_s:                                  # inside a node: NVLink, one way, at NCCL's share
        node = (a['nccl_nvlink_share'][0] * spec.nvlink_bytes_per_s / 2, a['nccl_latency_nvlink_s'][0])
    else:                                                        # or the GPU's own PCIe link
        node = (a['nccl_pcie_share'][0] * gm.pcie_bytes_per_s(*spec.pcie), a['nccl_latency_pcie_s'][0])
    network = (a['nccl_pcie_share'][0] * gm.pcie_bytes_per_s(5, 16), a['nccl_latency_pcie_s'][0])
    dtype = 'bfloat16' if 'bfloat16' in spec.peak_flops else 'float16'
    flops = a['matmul_share'][0] * spec.sustained_flops(dtype)
    plans = []
    for tp in (t for t in (1, 2, 4, 8) if t <= min(per_node, gpus) and gpus % t == 0):
        for pp in (q for q in range(1, layers + 1) if layers % q == 0 and gpus % (tp * q) == 0):
            dp = gpus // (tp * pp)
            dp_rate, dp_latency = node if gpus <= per_node else network
            block_bytes = tokens // dp * width * value_bytes           # one all-reduce of tensor parallelism
            tp_s = 4 * layers // pp * (node[1] + ring_allreduce_bytes(block_bytes, tp) / node[0]) if tp > 1 else 0.0
            weights = value_bytes * params // (tp * pp)                # what FSDP gathers, per rank of a dp group
            dp_s = 3 * (dp_latency + (dp - 1) / dp * weights / dp_rate) if dp > 1 else 0.0
            compute_s = 6 * params * tokens / (gpus * flops)
            bubble = bubble_fraction(pp, micro)
            activations = layers // pp * min(pp, micro) * tokens / (dp * micro) * 34 * width / tp
            memory = 16 * params / gpus + activations
            plans.append({'tp': tp, 'pp': pp, 'dp': dp, 'memory_bytes': memory, 'activation_bytes': activations,
                          'fits': memory <= spec.memory_bytes,
                          'tp_allreduce_bytes': block_bytes if tp > 1 else 0, 'bubble': bubble,
                          'compute_s': compute_s, 'tp_s': tp_s, 'dp_s': dp_s,
                          'step_s': compute_s / (1 - bubble) + tp_s + dp_s})
    return plans
