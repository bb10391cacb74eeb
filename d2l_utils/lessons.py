# GENERATED FILE, do not edit: it is rebuilt from the #@save cells of
# notebooks/*.ipynb by `python -m d2l_utils.build`, and a test fails when the two
# disagree. Change a helper in the lesson that teaches it, then rebuild.
"""Helpers that the lessons define in their ``#@save`` cells, in lesson order."""

import operator
import torch
import re
import contextlib
import os
import numbers
import timeit
import torch.utils.benchmark as benchmark
import itertools
from torch import nn
import pathlib
import subprocess
import sys


__all__ = [
    'num_gpus',
    'try_gpu',
    'try_all_gpus',
    'least_busy_gpus',
    'synchronize',
    'time_op',
    'copy_bandwidth',
    'fit_latency_bandwidth',
    'synthetic_data',
    'train_epoch',
    'split_batch',
    'torchrun',
]


# ---- from notebooks/01_devices.ipynb ----
def num_gpus():
    """Return the number of accelerators PyTorch can use (CUDA/ROCm, MPS, XPU); 0 if none.

    On CUDA this starts the CUDA driver in the process (``torch.cuda.is_available`` calls
    ``cudaGetDeviceCount``), so set ``CUDA_VISIBLE_DEVICES`` before asking, never after.

    Defined in notebooks/01_devices.ipynb.
    """
    return torch.accelerator.device_count() if torch.accelerator.is_available() else 0


def _device_index(i):
    """Check that ``i`` is a device index (an int >= 0) and return it.

    Defined in notebooks/01_devices.ipynb.
    """
    if isinstance(i, bool) or not hasattr(type(i), '__index__'):
        raise TypeError(f'a device index must be an int, not {type(i).__name__} {i!r}; '
                        "to name a device use torch.device('cuda:0')")
    i = operator.index(i)
    if i < 0:
        raise ValueError(f'a device index must be >= 0, got {i}')
    return i


# ---- from notebooks/01_devices.ipynb ----
def try_gpu(i=0):
    """Return accelerator ``i`` if it exists, otherwise the CPU (as d2l's ``try_gpu``).

    Defined in notebooks/01_devices.ipynb.
    """
    i = _device_index(i)
    if i < num_gpus():
        return torch.device(torch.accelerator.current_accelerator().type, i)
    return torch.device('cpu')


def try_all_gpus():
    """Return all accelerators, or ``[device('cpu')]`` if there is none (as d2l's).

    Defined in notebooks/01_devices.ipynb.
    """
    return [try_gpu(i) for i in range(num_gpus())] or [torch.device('cpu')]


# ---- from notebooks/01_devices.ipynb ----
def _visible_nvml_indices(value, uuids):
    """Return the NVML indices of the GPUs that ``CUDA_VISIBLE_DEVICES=value`` leaves visible.

    ``uuids`` are the machine's GPU UUIDs in NVML order; ``value`` None (unset) leaves all.
    Entries are NVML indices, UUIDs or unique UUID prefixes. As in CUDA, the first entry
    that names no GPU ends the list, and a GPU listed twice hides them all (the reading of
    ``_parse_visible_devices`` in torch/cuda/__init__.py). Returns None for MIG instances.

    Defined in notebooks/01_devices.ipynb.
    """
    if value is None:
        return list(range(len(uuids)))
    if not isinstance(value, str):
        raise TypeError(f'CUDA_VISIBLE_DEVICES is a string, not {type(value).__name__}')
    visible = []
    for entry in (e.strip() for e in value.split(',')):
        if entry.startswith('MIG-'):
            return None
        if re.fullmatch(r'[0-9]+', entry):
            i = int(entry)
        else:
            matches = [j for j, u in enumerate(uuids) if entry and u.startswith(entry)]
            i = matches[0] if len(matches) == 1 else len(uuids)
        if i >= len(uuids):
            break
        if i in visible:
            return []
        visible.append(i)
    return visible


# ---- from notebooks/01_devices.ipynb ----
def least_busy_gpus(k=1):
    """Return the UUIDs of up to ``k`` GPUs with the most free memory, the freest first.

    Asks NVML (``nvidia-ml-py``), which starts no CUDA. The answer is for a new process:
    put ``','.join(uuids)`` in its ``CUDA_VISIBLE_DEVICES``; a UUID names one card whatever
    ``CUDA_DEVICE_ORDER`` says. If ``CUDA_VISIBLE_DEVICES`` is already set (by a job
    scheduler, say), only the GPUs it lists are candidates, and ties keep its order. Its
    indices are taken as NVML's, as PyTorch's own NVML code takes them; CUDA agrees when
    its order is NVML's (with CUDA_DEVICE_ORDER=PCI_BUS_ID, in practice), and UUIDs
    leave no doubt. Returns [] when there is nothing to choose from: no ``nvidia-ml-py``, no
    NVIDIA driver, any NVML error (a permission error too), MIG instances listed, no GPU
    visible. Then leave ``CUDA_VISIBLE_DEVICES`` as it is.

    Defined in notebooks/01_devices.ipynb.
    """
    k = _device_index(k)
    if k == 0:
        raise ValueError('ask for at least one GPU (k >= 1)')
    try:
        import pynvml
    except ImportError:
        return []                          # nvidia-ml-py is not installed
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return []                          # no NVIDIA driver (or no NVIDIA GPU)
    try:
        gpus = []                          # (free bytes, UUID) in NVML order
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
            gpus.append((pynvml.nvmlDeviceGetMemoryInfo(handle).free, uuid))
    except pynvml.NVMLError:
        return []                          # e.g. no permission to query a GPU
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
    visible = _visible_nvml_indices(os.environ.get('CUDA_VISIBLE_DEVICES'), [u for _, u in gpus])
    if visible is None:
        return []                          # MIG instances: not chosen by the card's memory
    ranked = sorted((gpus[i] for i in visible), key=lambda g: -g[0])   # stable: ties keep order
    return [uuid for _, uuid in ranked[:k]]


# ---- from notebooks/03_copies_between_devices.ipynb ----
def _as_devices(device):
    """Return ``device`` (a device or a list/tuple of them) as a list of present devices.

    Defined in notebooks/03_copies_between_devices.ipynb.
    """
    items = list(device) if isinstance(device, (list, tuple)) else [device]
    if not items:
        raise ValueError('give at least one device')
    present = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    devices = []
    for d in items:
        if not isinstance(d, (str, torch.device)):
            raise TypeError(f'a device must be a str or torch.device, not {type(d).__name__} {d!r}')
        d = torch.device(d)
        if d.type != 'cpu' and (present is None or d.type != present.type
                                or (d.index or 0) >= torch.accelerator.device_count()):
            raise ValueError(f'device {d} is not present on this machine')
        devices.append(d)
    return devices


def synchronize(device='cpu'):
    """Wait until the work queued on ``device`` (or on each of a list of devices) is done.

    The CPU runs its work inside each call, so for it there is nothing to wait for.

    Defined in notebooks/03_copies_between_devices.ipynb.
    """
    for d in _as_devices(device):
        if d.type != 'cpu':
            torch.accelerator.synchronize(d)


# ---- from notebooks/03_copies_between_devices.ipynb ----
def time_op(fn, device='cpu', min_run_time=0.1, num_threads=1):
    """Return the median time, in seconds, of one call ``fn()`` whose work runs on ``device``.

    Built on ``torch.utils.benchmark.Timer.blocked_autorange``; the clock synchronizes
    ``device`` (one device or a list) before every reading, so queued work is counted.
    ``num_threads`` is the number of CPU threads PyTorch may use meanwhile, as in Timer.

    Defined in notebooks/03_copies_between_devices.ipynb.
    """
    if not callable(fn):
        raise TypeError(f'fn must be callable (e.g. a lambda), not {type(fn).__name__}')
    if isinstance(min_run_time, bool) or not isinstance(min_run_time, numbers.Real):
        raise TypeError(f'min_run_time must be a number of seconds, not {min_run_time!r}')
    if not min_run_time > 0:
        raise ValueError(f'min_run_time must be > 0 seconds, got {min_run_time}')
    if isinstance(num_threads, bool) or not isinstance(num_threads, numbers.Integral) or num_threads < 1:
        raise ValueError(f'num_threads must be an int >= 1, got {num_threads!r}')
    waits = [d for d in _as_devices(device) if d.type != 'cpu']

    def clock():
        for d in waits:
            torch.accelerator.synchronize(d)
        return timeit.default_timer()

    timer = benchmark.Timer(stmt='fn()', globals={'fn': fn}, timer=clock, num_threads=int(num_threads))
    return timer.blocked_autorange(min_run_time=min_run_time).median


# ---- from notebooks/03_copies_between_devices.ipynb ----
def copy_bandwidth(nbytes, src='cpu', dst='cpu', pinned=False, min_run_time=0.05):
    """Time copying ``nbytes`` bytes from device ``src`` to ``dst``; return (seconds, bytes_per_s).

    Both buffers are allocated before timing; ``time_op`` times ``dst_buf.copy_(src_buf)``
    and waits for both devices. ``pinned=True`` page-locks the host side (this needs an
    accelerator) and copies with ``non_blocking=True``.

    Defined in notebooks/03_copies_between_devices.ipynb.
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Integral):
        raise TypeError(f'nbytes must be an int, not {type(nbytes).__name__} {nbytes!r}')
    if nbytes < 1:
        raise ValueError(f'nbytes must be >= 1, got {nbytes}')
    if not isinstance(pinned, bool):
        raise TypeError(f'pinned must be True or False, not {pinned!r}')
    src, dst = _as_devices([src, dst])
    if pinned and not torch.accelerator.is_available():
        raise ValueError('pinned=True needs an accelerator: pinned memory is host memory a GPU reads directly')
    a = torch.ones(int(nbytes), dtype=torch.uint8, device=src)
    b = torch.empty(int(nbytes), dtype=torch.uint8, device=dst)
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
    if not all(isinstance(v, (list, tuple)) for v in (nbytes, seconds)):
        raise TypeError('nbytes and seconds must be lists (or tuples) of numbers')
    if len(nbytes) != len(seconds) or len(nbytes) < 2:
        raise ValueError('give at least two sizes and as many times')
    n = torch.tensor([float(v) for v in nbytes], dtype=torch.float64)
    t = torch.tensor([float(v) for v in seconds], dtype=torch.float64)
    if not (bool((n > 0).all()) and bool((t > 0).all())):
        raise ValueError('sizes and times must be positive')
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
    if not isinstance(w, torch.Tensor):
        raise TypeError(f'w must be a tensor, not {type(w).__name__}')
    if w.dim() != 1 or not w.is_floating_point():
        raise ValueError(f'w must be a 1-D floating-point tensor, got shape '
                         f'{tuple(w.shape)} and dtype {w.dtype}')
    if isinstance(b, bool) or not isinstance(b, numbers.Real):
        raise TypeError(f'b must be a real number, not {type(b).__name__}')
    if isinstance(num_examples, bool) or not isinstance(num_examples, numbers.Integral):
        raise TypeError(f'num_examples must be an int, not {type(num_examples).__name__}')
    if num_examples < 1:
        raise ValueError(f'num_examples must be at least 1, got {num_examples}')
    X = torch.normal(0.0, 1.0, (int(num_examples), len(w)), device=w.device, dtype=w.dtype)
    y = X @ w + b
    y += torch.normal(0.0, 0.01, y.shape, device=w.device, dtype=w.dtype)
    return X, y.reshape((-1, 1))


# ---- from notebooks/05_module_placement.ipynb ----
def train_epoch(net, data_iter, loss_fn, optimizer, device):
    """Train ``net`` for one pass over ``data_iter``; return the mean loss per example.

    ``net`` must already be on ``device``; each batch ``(X, y)`` from ``data_iter`` is
    moved there. ``loss_fn(net(X), y)`` must return the mean loss of the batch. The
    loss is accumulated on the device and read once, at the end of the epoch.

    Defined in notebooks/05_module_placement.ipynb.
    """
    if not isinstance(net, nn.Module):
        raise TypeError(f'net must be an nn.Module, not {type(net).__name__}')
    if not callable(loss_fn):
        raise TypeError(f'loss_fn must be callable, not {type(loss_fn).__name__}')
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f'optimizer must be a torch.optim.Optimizer, not {type(optimizer).__name__}')
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f'device must be a str or torch.device, not {type(device).__name__}')
    try:
        device = torch.device(device)
    except RuntimeError as e:
        raise ValueError(f'not a device: {device!r}') from e
    for name, t in itertools.chain(net.named_parameters(), net.named_buffers()):
        if t.device.type != device.type or device.index not in (None, t.device.index):
            raise ValueError(f'{name} is on {t.device}, not {device}: call net.to(device) first')
    net.train()
    total, count = torch.zeros((), device=device), 0
    for X, y in data_iter:
        X, y = X.to(device), y.to(device)
        loss = loss_fn(net(X), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.detach() * len(X)
        count += len(X)
    if count == 0:
        raise ValueError('data_iter yielded no batches')
    return (total / count).item()


# ---- from notebooks/06_data_parallel.ipynb ----
def split_batch(X, y, devices):
    """Split ``X`` and its labels ``y`` along dimension 0, one chunk per device (as d2l's).

    Chunk ``i`` goes to ``devices[i]``. Chunks have ``ceil(len(X) / len(devices))`` rows,
    the last one fewer, as with ``nn.parallel.scatter``; so a small batch can give fewer
    chunks than devices. Any devices work, the CPU included, and repeats are allowed.

    Defined in notebooks/06_data_parallel.ipynb.
    """
    if not isinstance(X, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError(f'X and y must be tensors, not {type(X).__name__} and {type(y).__name__}')
    if not isinstance(devices, (list, tuple)) or not all(
            isinstance(d, (str, torch.device)) for d in devices):
        raise TypeError(f'devices must be a list of devices such as d2l.try_all_gpus(), not {devices!r}')
    if not devices:
        raise ValueError('devices is empty: give at least one device')
    if X.dim() == 0 or y.dim() == 0 or len(X) != len(y) or len(X) == 0:
        raise ValueError(f'X and y need the same number (>= 1) of rows, got shapes '
                         f'{tuple(X.shape)} and {tuple(y.shape)}')
    try:
        devices = [torch.device(d) for d in devices]
    except RuntimeError as e:
        raise ValueError(f'not a device name in {devices!r}: {e}') from None
    return ([x.to(d) for x, d in zip(X.chunk(len(devices)), devices)],
            [t.to(d) for t, d in zip(y.chunk(len(devices)), devices)])


# ---- from notebooks/07_distributed_data_parallel.ipynb ----
def torchrun(script, nproc_per_node, *script_args, timeout=300, env=None):
    """Run ``script`` with ``torchrun --standalone --nproc-per-node=N`` and wait for it.

    Returns the finished ``subprocess.CompletedProcess``, with stdout and stderr as text;
    a failed run has a non-zero ``returncode``. ``env`` adds variables to the children's
    environment only. After ``timeout`` seconds torchrun is told to stop (it then stops
    its workers) and ``subprocess.TimeoutExpired`` is raised.

    Defined in notebooks/07_distributed_data_parallel.ipynb.
    """
    if not isinstance(script, (str, os.PathLike)):
        raise TypeError(f'script must be a path, not {type(script).__name__}')
    if not pathlib.Path(script).is_file():
        raise ValueError(f'no such script: {script}')
    if isinstance(nproc_per_node, bool) or not isinstance(nproc_per_node, int):
        raise TypeError(f'nproc_per_node must be an int, not {type(nproc_per_node).__name__}')
    if nproc_per_node < 1:
        raise ValueError(f'nproc_per_node must be >= 1, got {nproc_per_node}')
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f'timeout must be a number of seconds, not {type(timeout).__name__}')
    if timeout <= 0:
        raise ValueError(f'timeout must be > 0 seconds, got {timeout}')
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone',
           '--nproc-per-node', str(nproc_per_node), os.fspath(script), *map(str, script_args)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()                 # SIGTERM: torchrun stops its workers, then exits
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()                  # last resort, if torchrun itself does not stop
            proc.wait()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
