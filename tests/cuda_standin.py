"""A stand-in for CUDA on a machine without a GPU, so that the GPU branches of the lessons
run in CI and crash where they would crash on a GPU (tests/test_gpu_branches.py).

    import cuda_standin
    with cuda_standin.active(gpus=1):
        ...          # torch.cuda.is_available() is True; 'cuda' tensors live in host memory

What it does. While it is active, ``torch.cuda`` answers as a machine with ``gpus`` H100s
would (``is_available()``, ``device_count()``, ``get_device_name()`` 'NVIDIA H100 80GB HBM3',
capability (9, 0), device properties with the attribute names of
``torch._C._CudaDeviceProperties``, ``mem_get_info``, the memory counters and
``memory_stats()`` with the caching allocator's key set, ``memory_summary``, events, streams,
``set_device``/``device``, ``set_sync_debug_mode``, ``CUDAGraph``/``graph``/
``make_graphed_callables``, the memory-history snapshot, nvtx, ``torch.version.cuda``,
``torch.backends.cudnn.version()``), and a ``TorchFunctionMode`` puts every tensor asked
for on ``'cuda'``/``'cuda:i'`` (factories, ``.to``, ``.cuda()``, modules' ``.to``) in host
memory, tagged with its device: the tag travels through every operation, so that
``x.device``, ``x.is_cuda`` and printing say ``cuda:i``, ``.cpu()`` copies, ``.numpy()``
of a CUDA tensor raises as it does on a GPU, and an operation that mixes a CUDA tensor
with a CPU tensor (other than a 0-dim one, an index or a copy) or two CUDA devices raises
the RuntimeError PyTorch raises there. ``pin_memory()`` and ``is_pinned()`` work.
``torch.autocast('cuda', ...)`` runs CPU autocast with the dtype asked for, and
DataParallel's scatter/gather/broadcast run on the host. Child processes started while it
is active (``subprocess``, ``torchrun``) get it too, through a ``sitecustomize`` on
PYTHONPATH, with the ``nccl`` backend run as ``gloo`` (reported as ``nccl``).

The stand-in card: ``TOTAL_MEMORY`` (4 GiB, not an H100's 80 GiB, so that no cell can
exhaust the machine that runs the tests). A factory or a copy to 'cuda' that does not fit
beside the tensors alive there raises ``torch.OutOfMemoryError`` (its size is computed on
the 'meta' device first); products too large for the host to finish in a moment (more
than ``CHEAP_FLOPS``) are computed over a slice of their inner dimension, scaled up: right
in shape, dtype, device and autograd, wrong in value.

What it cannot show (any GPU run tests these; none of them fails here):
- no asynchrony: every operation is done when it returns, so "the host did not wait",
  "the copy was not finished yet", a buffer reused too early, or record_stream's
  protection never appear; events time the host's clock;
- no GPU timings, rates, bandwidths or speed-ups: the numbers are the host's;
- no real memory numbers: allocated bytes are the live CUDA-tagged tensors' storages, not
  the caching allocator's 512-byte blocks and 2/20 MiB segments; reserved memory, segments,
  retries, fragmentation and the snapshot's contents are a crude model;
- no kernels, cuBLAS/cuDNN algorithms, TF32 or tensor-core rounding, CUDA autocast's own
  op lists (CPU autocast's are used), determinism errors of CUDA kernels, device-side
  assertions, CUDA_LAUNCH_BLOCKING, sync-debug warnings of ops it does not know;
- no NCCL (gloo runs instead), no peer access, no CUDA graph capture or replay (a graph's
  body runs once, eagerly; replay does nothing; torch.compile runs Inductor's CPU code);
- no profiler kernel events (the trace has CPU events only).
So a value check (an ``assert``) that fails under the stand-in says nothing about a GPU;
an error of another kind (NameError, KeyError, TypeError, AttributeError, a device
mismatch...) is one a GPU would raise too, unless it is listed as a stand-in limit.
"""
import contextlib
import functools
import os
import pathlib
import sys
import tempfile
import threading
import time
import types as _types
import warnings
import weakref

import torch
import torch.utils._pytree as pytree
from torch.overrides import TorchFunctionMode

GPU_NAME = 'NVIDIA H100 80GB HBM3'
CAPABILITY = (9, 0)
TOTAL_MEMORY = 4 * 2**30          # the stand-in card's memory (an H100 has 80 GiB)
CHEAP_FLOPS = 2**25               # products above this (about a millisecond on a core) are computed over a slice of k
CUDA_VERSION = '12.8'
CUDNN_VERSION = 91002
ENV = 'COURSE_CUDA_STANDIN'       # set while active: children activate it too (its value: gpus)
MiB = 2**20


class StandinLimit(RuntimeError):
    """Raised where the stand-in cannot do what CUDA would (the message says what)."""


class StandinTimeout(KeyboardInterrupt):
    """A cell ran past CELL_SECONDS: GPU-sized work done on the host (an interrupt, so that the
    lessons' process helpers stop their children and no `except Exception` swallows it)."""


CELL_SECONDS = float(os.environ.get('COURSE_STANDIN_CELL_S', 20))


# ---------------------------------------------------------------- the state of the stand-in

class _State:
    def __init__(self, gpus):
        self.gpus = gpus
        self.current = 0
        self.live = [dict() for _ in range(gpus)]        # data_ptr -> [refs, nbytes]
        self.allocated = [0] * gpus
        self.peak = [0] * gpus
        self.reserved = [0] * gpus
        self.peak_reserved = [0] * gpus
        self.counts = [dict(num_ooms=0, num_alloc_retries=0, segments=0, allocs=0, frees=0,
                            alloc_bytes=0, freed_bytes=0) for _ in range(gpus)]
        self.sync_debug = 0
        self.history = None                              # list of trace events while recording
        self.streams = [None] * gpus
        self.stream_stack = []
        self.default = None                              # set_default_device('cuda...')


_state = None
_saved = []                  # (object, attribute, original value) to put back
_mode = None


def _round_up(n, to):
    return -(-n // to) * to


def _index(device=None, optional=True):
    """The CUDA device index that `device` names (CUDA's own argument rules)."""
    if device is None:
        return _state.current
    if isinstance(device, torch.device) and device.type == 'cuda' and device.index is None:
        return _state.current
    if isinstance(device, str) and device == 'cuda':
        return _state.current
    if isinstance(device, (torch.device, str)):
        device = torch.device(device)
        if device.type != 'cuda':
            raise ValueError(f'Expected a cuda device, but got: {device}')
        i = device.index
    elif isinstance(device, int):
        i = device
    elif isinstance(device, torch.cuda.device):
        i = device.idx
    else:
        raise ValueError(f'Expected a torch.device with a specified index or an integer, but got:{device}')
    if not 0 <= i < _state.gpus and i != -1:
        raise RuntimeError('CUDA error: invalid device ordinal\nCUDA kernel errors might be asynchronously '
                           'reported at some other API call, so the stacktrace below might be incorrect.')
    return _state.current if i == -1 else i


# ---------------------------------------------------------------- tags: which tensor is on which GPU

_tags = None          # tensor -> {'dev': index, 'pinned', 'host', 'fin'}: beside the tensor, never in its
                      # __dict__ (which torch.save and deepcopy would carry)


def _tags_of(t):
    try:
        return _tags.get(t, _EMPTY) if _tags is not None else _EMPTY
    except TypeError:
        return _EMPTY


def _tags_for(t):
    d = _tags.get(t)
    if d is None:
        d = _tags[t] = {}
    return d


_EMPTY = {}


class _TagTable:
    """tensor -> its tags, by the tensor's identity, dropped when the tensor dies (torch.utils.weak's
    WeakIdKeyDictionary does the same, several times slower: this runs at every operation)."""

    def __init__(self):
        self._d = {}                                   # id(tensor) -> (weak reference, tags)

    def _forget(self, key):
        def callback(ref):
            entry = self._d.get(key)
            if entry is not None and entry[0] is ref:  # not a newer tensor at the same address
                del self._d[key]
        return callback

    def get(self, t, default=None):
        entry = self._d.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else default

    def __setitem__(self, t, tags):
        self._d[id(t)] = (weakref.ref(t, self._forget(id(t))), tags)

    def pop(self, t, default=None):
        entry = self._d.get(id(t))
        if entry is None or entry[0]() is not t:
            return default
        del self._d[id(t)]
        return entry[1]


def _dev(t):
    """The CUDA index a tensor is tagged with, or None (a host tensor)."""
    return _tags_of(t).get('dev') if isinstance(t, torch.Tensor) else None


def _release(i, ptr):
    if _state is None or i >= len(_state.live):
        return
    entry = _state.live[i].get(ptr)
    if entry is None:
        return
    entry[0] -= 1
    if entry[0] == 0:
        del _state.live[i][ptr]
        _state.allocated[i] -= entry[1]
        _state.counts[i]['frees'] += 1
        _state.counts[i]['freed_bytes'] += entry[1]
        if _state.history is not None:
            _state.history[i].append({'action': 'free_completed', 'addr': ptr, 'size': entry[1],
                                      'stream': 0, 'time_us': int(time.time() * 1e6), 'frames': []})


def _tag(t, i):
    """Tag tensor `t` as living on cuda:i, counting its storage as allocated there."""
    if not isinstance(t, torch.Tensor) or _state is None:
        return t
    with torch._C.DisableTorchFunction():
        if t.device.type != 'cpu':
            return t
        old = _dev(t)
        if old == i:
            return t
        try:
            _tags_for(t)['dev'] = i
        except (AttributeError, RuntimeError):
            return t
        if old is not None and _tags_of(t).get('fin') is not None:
            _tags_of(t)['fin']()              # no longer counted where it was
        try:
            storage = t.untyped_storage()
            ptr, nbytes = storage.data_ptr(), storage.nbytes()
        except (RuntimeError, NotImplementedError):
            return t
    if nbytes == 0:
        return t
    live = _state.live[i]
    if ptr in live:
        live[ptr][0] += 1
    else:
        block = _round_up(nbytes, 512)
        live[ptr] = [1, block]
        _state.allocated[i] += block
        _state.counts[i]['allocs'] += 1
        _state.counts[i]['alloc_bytes'] += block
        _state.peak[i] = max(_state.peak[i], _state.allocated[i])
        if _state.allocated[i] > _state.reserved[i]:
            _state.reserved[i] = _round_up(_state.allocated[i], 2 * MiB)
            _state.counts[i]['segments'] += 1
            _state.peak_reserved[i] = max(_state.peak_reserved[i], _state.reserved[i])
        if _state.history is not None:
            _state.history[i].append({'action': 'alloc', 'addr': ptr, 'size': block, 'stream': 0,
                                      'time_us': int(time.time() * 1e6), 'frames': []})
    _tags_for(t)['fin'] = weakref.finalize(t, _release, i, ptr)
    return t


def _fits(nbytes, i):
    """Raise torch.OutOfMemoryError where `nbytes` more does not fit on the stand-in cuda:i."""
    free = TOTAL_MEMORY - _state.allocated[i]
    if nbytes > free:
        _state.counts[i]['num_ooms'] += 1
        raise torch.OutOfMemoryError(
            f'CUDA out of memory. Tried to allocate {nbytes / 2**30:.2f} GiB. GPU {i} has a total capacity of '
            f'{TOTAL_MEMORY / 2**30:.2f} GiB of which {max(free, 0) / 2**30:.2f} GiB is free. (The CUDA stand-in '
            f'of tests/cuda_standin.py: its card has {TOTAL_MEMORY // 2**30} GiB.) Of the allocated memory '
            f'{_state.allocated[i] / 2**30:.2f} GiB is allocated by PyTorch, and '
            f'{(_state.reserved[i] - _state.allocated[i]) / MiB:.2f} MiB is reserved by PyTorch but unallocated.')


def _cuda_index_of(device):
    """The index a `device=` argument names if it is a CUDA device, else None."""
    if device is None:
        return None
    if isinstance(device, int):
        return None
    if isinstance(device, str) and not device.startswith('cuda'):
        return None
    if isinstance(device, torch.device) and device.type != 'cuda':
        return None
    if isinstance(device, (str, torch.device)):
        return _index(torch.device(device))
    return None


def _is_pinned(t):
    return bool(_tags_of(t).get('pinned'))


def _sync_point(what):
    if _state.sync_debug == 1:
        warnings.warn(f'called a synchronizing CUDA operation ({what}; the CUDA stand-in)', UserWarning, stacklevel=3)
    elif _state.sync_debug == 2:
        raise RuntimeError('called a synchronizing CUDA operation')


_PROPS = {}                      # func -> name, for the property getters and setters
_MIXING_OK = {'copy_', 'to', '__getitem__', '__setitem__', 'index_put_', 'index_put', '_index_put_impl_',
              'set_', 'equal', '__repr__', '__format__', '__str__', 'clone', 'detach', 'requires_grad_',
              '__reduce_ex__', '__deepcopy__', 'new_tensor', 'new_empty', 'new_zeros', 'new_ones', 'new_full',
              'empty_like', 'zeros_like', 'ones_like', 'full_like', 'rand_like', 'randn_like', 'randint_like',
              'numel', 'size', 'dim', 'is_pinned', 'pin_memory', 'cpu', 'cuda', 'tolist', 'item', 'numpy',
              'data_ptr', 'untyped_storage', 'element_size', 'storage_offset', 'stride', 'is_contiguous',
              'record_stream', 'get_device', 'is_floating_point', 'is_complex', '__len__', '__iter__',
              'backward', 'register_hook', 'retain_grad', 'type', 'assert_close', '_has_compatible_shallow_copy_type',
              'broadcast_tensors', 'result_type', 'can_cast', 'promote_types', 'is_same_size',
              '__bool__', '__index__', '__int__', '__float__', 'share_memory_', '_is_view', 'is_set_to'}
_MATMULS = {'matmul', '__matmul__', 'mm', 'bmm', 'linear', 'addmm', 'baddbmm'}


def _func_name(func):
    return getattr(func, '__name__', '') or ''


def _leaves(obj):
    """The tensors in ``obj`` (nested tuples, lists and dicts): pytree.tree_leaves' answer for
    what operations take and return, at a fraction of its cost (it runs at every operation)."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [x for item in obj for x in _leaves(item)] if obj else []
    if isinstance(obj, dict):
        return [x for item in obj.values() for x in _leaves(item)] if obj else []
    return []


def _tensors_in(args, kwargs):
    return _leaves((args, kwargs))


def _check_devices(name, args, kwargs):
    """The RuntimeError CUDA raises where an operation mixes devices."""
    tensors = _tensors_in(args, kwargs)
    cuda = {_dev(t) for t in tensors if _dev(t) is not None}
    if not cuda or name in _MIXING_OK:
        return (min(cuda) if cuda else None)
    if len(cuda) > 1:
        a, b = sorted(cuda)[:2]
        raise RuntimeError('Expected all tensors to be on the same device, but found at least two devices, '
                           f'cuda:{a} and cuda:{b}!')
    i = next(iter(cuda))
    if name in ('index_select', 'gather', 'scatter', 'scatter_', 'scatter_add', 'scatter_add_', 'index_add_',
                'index_add', 'take', 'index_copy_', 'index_fill_'):
        for t in tensors:
            if _dev(t) is None and t.dim() > 0 and True:
                raise RuntimeError(f'Expected all tensors to be on the same device, but found at least two '
                                   f'devices, cuda:{i} and cpu! (when checking argument for argument index in '
                                   f'method wrapper_CUDA__{name})')
    for t in tensors:
        if _dev(t) is None and t.dim() > 0 and True \
                and t.device.type == 'cpu' and _is_host(t):
            raise RuntimeError('Expected all tensors to be on the same device, but found at least two devices, '
                               f'cuda:{i} and cpu!')
    return i


def _is_host(t):
    """True for a tensor known to be a host tensor (made while active, not on cuda)."""
    return bool(_tags_of(t).get('host'))


def _mark_host(out):
    for x in _leaves(out):
        if isinstance(x, torch.Tensor) and _dev(x) is None:
            try:
                _tags_for(x)['host'] = True
            except (AttributeError, RuntimeError):
                pass


def _cheap_matmul(name, func, args, kwargs):
    """A product too large for the host: computed over a slice of k, scaled; None if cheap."""
    if name not in _MATMULS:
        return None
    ts = [a for a in args if isinstance(a, torch.Tensor)]
    if name in ('addmm', 'baddbmm'):
        if len(ts) < 3:
            return None
        bias, a, b = ts[:3]
    elif name == 'linear':
        a, b = args[0], args[1]
        bias = args[2] if len(args) > 2 else kwargs.get('bias')
        b = b.transpose(-1, -2) if isinstance(b, torch.Tensor) else b
    else:
        if len(ts) < 2:
            return None
        a, b = ts[0], ts[1]
        bias = None
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dim() < 2 or b.dim() < 1:
        return None
    k = a.shape[-1]
    flops = 2 * (a.numel() // max(k, 1)) * k * (b.shape[-1] if b.dim() >= 2 else 1)
    if flops <= CHEAP_FLOPS or k < 64 or kwargs.get('out') is not None:
        return None
    keep = max(1, int(k * CHEAP_FLOPS // flops))
    scale = k / keep
    out = torch.matmul(a[..., :keep], b[..., :keep, :] if b.dim() >= 2 else b[:keep]).mul_(scale)
    if bias is not None:
        out = out + bias
    return out


class _Mode(TorchFunctionMode):
    """Host tensors for CUDA ones, tagged with their device (see the module's docstring)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        prop = getattr(func, '__self__', None)
        if type(prop).__name__ == 'getset_descriptor':
            return self._property(func, prop.__name__, args)
        if func is torch.device:
            if len(args) == 1 and isinstance(args[0], int) and not kwargs:
                return torch.device('cuda', args[0])        # an index names the accelerator: CUDA here
            return func(*args, **kwargs)
        if isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            # an aten call from below autograd (a dispatch mode, a decomposition): no checks, the
            # tag follows the inputs
            out = func(*args, **kwargs)
            devices = [_dev(t) for t in _tensors_in(args, kwargs) if _dev(t) is not None]
            if devices:
                for x in _leaves(out):
                    if isinstance(x, torch.Tensor) and _dev(x) is None:
                        _tag(x, devices[0])
            return out
        name = _func_name(func)
        if name == '__get__' or name == '__set__':
            return func(*args, **kwargs)
        handler = getattr(self, '_m_' + name.strip('_'), None) if name in _METHODS else None
        if handler is not None:
            return handler(func, args, kwargs)
        # a factory (or any function) asked for a CUDA device
        i = _cuda_index_of(kwargs.get('device'))
        if i is None and kwargs.get('device') is None and _state.default is not None and name in _FACTORIES \
                and not name.endswith('_like'):
            i = _index(_state.default)
        if i is not None:
            kwargs['device'] = 'cpu'
            pinned = kwargs.pop('pin_memory', False)
            if name in _FACTORIES:
                try:
                    meta = func(*args, **{**kwargs, 'device': 'meta'})
                    _fits(sum(x.nbytes for x in pytree.tree_leaves(meta) if isinstance(x, torch.Tensor)), i)
                except (TypeError, NotImplementedError, RuntimeError) as e:
                    if isinstance(e, torch.OutOfMemoryError):
                        raise
            out = func(*args, **kwargs)
            for x in _leaves(out):
                _tag(x, i)
            return out
        if kwargs.get('pin_memory'):
            kwargs.pop('pin_memory')
            out = func(*args, **kwargs)
            if isinstance(out, torch.Tensor):
                _tags_for(out)['pinned'] = True
            return out
        i = _check_devices(name, args, kwargs)
        out = _cheap_matmul(name, func, args, kwargs) if i is not None else None
        if out is None:
            if isinstance(func, (_types.FunctionType, _types.MethodType)):
                with self:             # the mode stays on inside Python-level functions (autograd.Function, F.*)
                    out = torch.overrides.redispatch_function(func, types, args, kwargs)
            else:
                out = func(*args, **kwargs)
        if i is not None:
            if name in _SYNCING:
                _sync_point(name)
            if name not in ('cpu', 'numpy', 'tolist', 'item'):
                for x in _leaves(out):
                    if isinstance(x, torch.Tensor) and _dev(x) is None:
                        _tag(x, i)
        else:
            _mark_host(out)
        return out

    # ---- properties
    def _property(self, func, attr, args):
        t = args[0]
        if func.__name__ == '__set__':
            func(*args)
            if attr == 'data' and isinstance(t, torch.Tensor):
                i = _dev(args[1])
                if i is not None:
                    _tag(t, i)
                elif _dev(t) is not None:
                    _tags_of(t).pop('dev', None)
            return None
        i = _dev(t)
        if attr == 'device' and i is not None:
            return torch.device('cuda', i)
        if attr == 'is_cuda':
            return i is not None
        out = func(*args)
        if attr in ('grad', 'data', 'real', 'imag', 'T', 'mT', 'H', 'mH') and i is not None \
                and isinstance(out, torch.Tensor) and _dev(out) is None:
            _tag(out, i)
        return out

    # ---- methods that move tensors
    def _m_to(self, func, args, kwargs):
        t = args[0]
        if not isinstance(t, torch.Tensor):
            return func(*args, **kwargs)
        copy = kwargs.pop('copy', False)
        device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args[1:], **kwargs)
        src = _dev(t)
        rest = {k: v for k, v in (('dtype', dtype), ('memory_format', memory_format)) if v is not None}
        i = _cuda_index_of(device)
        if i is not None:
            if src == i:
                out = t.to(copy=copy, **rest) if rest or copy else t
            else:
                _fits(t.numel() * (dtype or t.dtype).itemsize, i)
                if src is None and not non_blocking:
                    _sync_point('copy to the GPU')
                out = t.to(copy=True, **rest)
            return _tag(out, i)
        if device is not None and device.type == 'cpu' and src is not None:
            if not non_blocking:
                _sync_point('copy to the host')
            out = t.to(copy=True, **rest)
            if non_blocking:
                _tags_for(out)['pinned'] = True
            _mark_host(out)
            return out
        if device is not None:
            out = t.to(device, non_blocking=non_blocking, copy=copy, **rest)
        else:
            out = t.to(copy=copy, **rest) if (rest or copy) else t
        if src is not None and out is not t and out.device.type == 'cpu':
            _tag(out, src)
        return out

    def _m_cuda(self, func, args, kwargs):
        t = args[0]
        device = args[1] if len(args) > 1 else kwargs.get('device')
        i = _state.current if device is None else _index(device)
        return self._m_to(func, (t, torch.device('cuda', i)), {'non_blocking': kwargs.get('non_blocking', False)})

    def _m_cpu(self, func, args, kwargs):
        t = args[0]
        if _dev(t) is None:
            return t
        return self._m_to(func, (t, 'cpu'), {})

    def _m_numpy(self, func, args, kwargs):
        t = args[0]
        i = _dev(t)
        if i is not None:
            if not kwargs.get('force', False):
                raise TypeError(f"can't convert cuda:{i} device type tensor to numpy. Use Tensor.cpu() to copy "
                                'the tensor to host memory first.')
            _sync_point('numpy')
            return t.detach().clone().numpy()
        return func(*args, **kwargs)

    def _m_pin_memory(self, func, args, kwargs):
        t = args[0]
        if _dev(t) is not None:
            raise RuntimeError(f'cannot pin \'torch.cuda.FloatTensor\' only dense CPU tensors can be pinned')
        if _is_pinned(t):
            return t
        out = t.clone()
        _tags_for(out)['pinned'] = True
        return out

    def _m_is_pinned(self, func, args, kwargs):
        return _is_pinned(args[0])

    def _m_record_stream(self, func, args, kwargs):
        if _dev(args[0]) is None:
            raise RuntimeError('record_stream: the tensor is not on a CUDA device')
        return None

    def _m_get_device(self, func, args, kwargs):
        i = _dev(args[0])
        return -1 if i is None else i

    def _m_item(self, func, args, kwargs):
        if _dev(args[0]) is not None:
            _sync_point('item')
        return func(*args, **kwargs)

    _m_tolist = _m_item

    def _m_bool(self, func, args, kwargs):
        if _dev(args[0]) is not None:
            _sync_point('bool')
        return func(*args, **kwargs)

    def _m_share_memory(self, func, args, kwargs):
        return func(*args, **kwargs)

    def _m_new_tensor(self, func, args, kwargs):
        return self._new(func, args, kwargs)

    def _new(self, func, args, kwargs):
        t = args[0]
        device = kwargs.get('device')
        i = _cuda_index_of(device) if device is not None else _dev(t)
        if device is not None:
            kwargs['device'] = 'cpu' if i is not None else device
        out = func(*args, **kwargs)
        if i is not None:
            _tag(out, i)
        return out

    _m_new_empty = _m_new_zeros = _m_new_ones = _m_new_full = _m_new_tensor


_METHODS = {'to', 'cuda', 'cpu', 'numpy', 'pin_memory', 'is_pinned', 'record_stream', 'get_device',
            'item', 'tolist', '__bool__', 'new_tensor', 'new_empty', 'new_zeros', 'new_ones', 'new_full'}
_SYNCING = {'nonzero', 'masked_select', 'unique', '__bool__', 'argwhere', 'repeat_interleave'}
_FACTORIES = {'empty', 'zeros', 'ones', 'full', 'rand', 'randn', 'randint', 'randperm', 'arange', 'linspace',
              'logspace', 'eye', 'tensor', 'as_tensor', 'empty_strided', 'zeros_like', 'ones_like', 'empty_like',
              'full_like', 'rand_like', 'randn_like', 'randint_like', 'normal', 'tril_indices', 'triu_indices'}


# ---------------------------------------------------------------- torch.cuda's functions

class _DeviceProperties:
    """torch._C._CudaDeviceProperties' attributes, an H100 SXM's values (slots: a typo raises)."""
    __slots__ = ('name', 'major', 'minor', 'multi_processor_count', 'total_memory', 'is_integrated',
                 'is_multi_gpu_board', 'max_threads_per_multi_processor', 'gcnArchName', 'warp_size', 'uuid',
                 'L2_cache_size', 'clock_rate', 'memory_clock_rate', 'memory_bus_width',
                 'shared_memory_per_block', 'shared_memory_per_multiprocessor', 'shared_memory_per_block_optin',
                 'regs_per_multiprocessor', 'max_threads_per_block', 'pci_bus_id', 'pci_device_id',
                 'pci_domain_id')

    def __init__(self, i):
        values = dict(name=GPU_NAME, major=CAPABILITY[0], minor=CAPABILITY[1], multi_processor_count=132,
                      total_memory=TOTAL_MEMORY, is_integrated=0, is_multi_gpu_board=0,
                      max_threads_per_multi_processor=2048, gcnArchName='NVIDIA does not have GCN', warp_size=32,
                      uuid=f'00000000-0000-0000-0000-00000000000{i}', L2_cache_size=50 * MiB, clock_rate=1980000,
                      memory_clock_rate=2619000, memory_bus_width=5120, shared_memory_per_block=48 * 1024,
                      shared_memory_per_multiprocessor=228 * 1024, shared_memory_per_block_optin=227 * 1024,
                      regs_per_multiprocessor=65536, max_threads_per_block=1024, pci_bus_id=0x18 + i,
                      pci_device_id=0, pci_domain_id=0)
        for k, v in values.items():
            setattr(self, k, v)

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // MiB}MB, multi_processor_count={self.multi_processor_count}, "
                f"uuid={self.uuid}, pci_bus_id={self.pci_bus_id}, pci_device_id={self.pci_device_id}, "
                f"pci_domain_id={self.pci_domain_id}, L2_cache_size={self.L2_cache_size // MiB}MB)")


class Event:
    """torch.cuda.Event on the host's clock: work is done when it is queued."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False, external=False):
        self.enable_timing, self._time, self.device = enable_timing, None, None

    def record(self, stream=None):
        self._time = time.perf_counter()
        self.device = torch.device('cuda', _state.current)

    def query(self):
        return True

    def synchronize(self):
        _sync_point('Event.synchronize') if False else None

    def wait(self, stream=None):
        pass

    def elapsed_time(self, end_event):
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError('Both events must be created with argument \'enable_timing=True\'.')
        if self._time is None or end_event._time is None:
            raise RuntimeError('Both events must be recorded before calculating elapsed time.')
        return (end_event._time - self._time) * 1e3

    def ipc_handle(self):
        raise StandinLimit('the CUDA stand-in has no interprocess events')

    @property
    def cuda_event(self):
        return id(self)

    @property
    def event_id(self):
        return id(self)


class Stream(torch.Stream):
    """torch.cuda.Stream: a name for a queue; the host runs everything at once."""

    def __new__(cls, device=None, priority=0, **kwargs):
        return super().__new__(cls, device='cpu')

    def __init__(self, device=None, priority=0, **kwargs):
        self._device = torch.device('cuda', _index(device))
        self.priority = priority
        self._id = id(self)

    device = property(lambda self: self._device)
    device_index = property(lambda self: self._device.index)
    device_type = property(lambda self: 1)
    stream_id = property(lambda self: self._id)

    def wait_event(self, event):
        pass

    def wait_stream(self, stream):
        if not isinstance(stream, Stream):
            raise TypeError(f'wait_stream expects a Stream, got {type(stream).__name__}')

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def query(self):
        return True

    def synchronize(self):
        pass

    def is_capturing(self):
        return False

    def __eq__(self, other):
        return isinstance(other, Stream) and other._id == self._id

    def __hash__(self):
        return hash(self.stream_id)

    def __enter__(self):
        _state.stream_stack.append(self)
        return self

    def __exit__(self, *exc):
        _state.stream_stack.pop()

    @property
    def cuda_stream(self):
        return self.stream_id

    def __repr__(self):
        return f'<torch.cuda.Stream device={self.device} cuda_stream={hex(self.stream_id)}>'


def _default_stream(i):
    if _state.streams[i] is None:
        s = Stream(i)
        s._id = 0
        _state.streams[i] = s
    return _state.streams[i]


def current_stream(device=None):
    i = _index(device)
    for s in reversed(_state.stream_stack):
        if s.device.index == i:
            return s
    return _default_stream(i)


def default_stream(device=None):
    return _default_stream(_index(device))


class _StreamContext:
    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        if self.stream is not None:
            if not isinstance(self.stream, Stream):
                raise TypeError(f'expected a torch.cuda.Stream, got {type(self.stream).__name__}')
            _state.stream_stack.append(self.stream)
            self._device = _state.current
            _state.current = self.stream.device.index
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            _state.stream_stack.pop()
            _state.current = self._device


def stream(s):
    return _StreamContext(s)


class device:
    """torch.cuda.device: the current device inside the block."""

    def __init__(self, device):
        self.idx = -1 if device is None else _index(device)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = _state.current
        if self.idx != -1:
            _state.current = self.idx

    def __exit__(self, *exc):
        _state.current = self.prev_idx
        return False


class device_of(device):
    def __init__(self, obj):
        super().__init__(_dev(obj) if _dev(obj) is not None else -1)


def set_device(device):
    i = _index(device)
    if i >= 0:
        _state.current = i


def set_sync_debug_mode(debug_mode):
    if isinstance(debug_mode, str):
        modes = {'default': 0, 'warn': 1, 'error': 2}
        if debug_mode not in modes:
            raise RuntimeError('invalid value of debug_mode, expected one of `default`, `warn`, `error`')
        debug_mode = modes[debug_mode]
    _state.sync_debug = int(debug_mode)


def _stat_block(current, peak, allocated, freed):
    return {pool: {'current': current if pool != 'small_pool' else 0, 'peak': peak if pool != 'small_pool' else 0,
                   'allocated': allocated if pool != 'small_pool' else 0,
                   'freed': freed if pool != 'small_pool' else 0}
            for pool in ('all', 'large_pool', 'small_pool')}


def memory_stats_as_nested_dict(device=None):
    """memory_stats()'s keys (c10/cuda/CUDACachingAllocator's), from the stand-in's counts."""
    i = _index(device)
    c, a, r = _state.counts[i], _state.allocated[i], _state.reserved[i]
    n = len(_state.live[i])
    return {
        'num_alloc_retries': c['num_alloc_retries'], 'num_ooms': c['num_ooms'], 'num_sync_all_streams': 0,
        'num_device_alloc': c['segments'], 'num_device_free': 0, 'max_split_size': -1,
        'allocation': _stat_block(n, n, c['allocs'], c['frees']),
        'segment': _stat_block(c['segments'], c['segments'], c['segments'], 0),
        'active': _stat_block(n, n, c['allocs'], c['frees']),
        'inactive_split': _stat_block(0, 0, 0, 0),
        'allocated_bytes': _stat_block(a, _state.peak[i], c['alloc_bytes'], c['freed_bytes']),
        'reserved_bytes': _stat_block(r, _state.peak_reserved[i], r, 0),
        'active_bytes': _stat_block(a, _state.peak[i], c['alloc_bytes'], c['freed_bytes']),
        'inactive_split_bytes': _stat_block(0, 0, 0, 0),
        'requested_bytes': _stat_block(a, _state.peak[i], c['alloc_bytes'], c['freed_bytes']),
        'oversize_allocations': {'current': 0, 'peak': 0, 'allocated': 0, 'freed': 0},
        'oversize_segments': {'current': 0, 'peak': 0, 'allocated': 0, 'freed': 0},
    }


def reset_peak_memory_stats(device=None):
    i = _index(device)
    _state.peak[i], _state.peak_reserved[i] = _state.allocated[i], _state.reserved[i]


def reset_accumulated_memory_stats(device=None):
    i = _index(device)
    _state.counts[i].update(num_ooms=0, num_alloc_retries=0, allocs=0, frees=0, alloc_bytes=0, freed_bytes=0)


def empty_cache():
    for i in range(_state.gpus):
        _state.reserved[i] = _round_up(_state.allocated[i], 2 * MiB)


def mem_get_info(device=None):
    i = _index(device)
    return TOTAL_MEMORY - _state.reserved[i] - 500 * MiB * 0, TOTAL_MEMORY


def synchronize(device=None):
    _index(device)


def _record_memory_history(enabled='all', *args, **kwargs):
    if enabled in (None, False):
        _state.history = None
    elif _state.history is None:
        _state.history = [[] for _ in range(_state.gpus)]


def _snapshot(device=None, augment_with_fx_traces=False):
    history = _state.history or [[] for _ in range(_state.gpus)]
    segments = []
    for i in range(_state.gpus):
        if _state.reserved[i]:
            segments.append({'device': i, 'address': 0, 'total_size': _state.reserved[i],
                             'allocated_size': _state.allocated[i], 'active_size': _state.allocated[i],
                             'requested_size': _state.allocated[i], 'stream': 0, 'segment_type': 'large',
                             'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': [], 'blocks': []})
    return {'segments': segments, 'device_traces': [list(h) for h in history],
            'allocator_settings': {}}


def _dump_snapshot(filename='dump_snapshot.pickle', augment_with_fx_traces=False):
    import pickle
    with open(filename, 'wb') as f:
        pickle.dump(_snapshot(), f)


class CUDAGraph:
    """torch.cuda.CUDAGraph: the capture runs its body eagerly; replay does nothing (a limit)."""

    def __init__(self, keep_graph=False):
        self._captured = False

    def capture_begin(self, pool=None, capture_error_mode='global'):
        pass

    def capture_end(self):
        self._captured = True

    def replay(self):
        if not self._captured:
            raise RuntimeError('CUDA graph has not been captured')

    def reset(self):
        self._captured = False

    def pool(self):
        return (0, id(self))

    def instantiate(self):
        pass

    def enable_debug_mode(self):
        pass

    def debug_dump(self, path):
        pass


class graph:
    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode='global'):
        if not isinstance(cuda_graph, CUDAGraph):
            raise TypeError('torch.cuda.graph expects a torch.cuda.CUDAGraph')
        self.cuda_graph = cuda_graph

    def __enter__(self):
        self.cuda_graph.capture_begin()

    def __exit__(self, *exc):
        self.cuda_graph.capture_end()
        return False


def make_graphed_callables(callables, sample_args, num_warmup_iters=3, allow_unused_input=False, pool=None):
    single = not isinstance(callables, tuple)
    if single:
        callables, sample_args = (callables,), (sample_args,)
    for c, args in zip(callables, sample_args):
        if not isinstance(args, tuple):
            raise TypeError('sample_args must be a tuple of tensors (one tuple per callable)')
        if isinstance(c, torch.nn.Module) and c.training is False:
            pass
        for _ in range(num_warmup_iters):
            out = c(*args)
            outs = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor) and o.requires_grad]
            ins = [a for a in args if a.requires_grad] + ([p for p in c.parameters() if p.requires_grad]
                                                          if isinstance(c, torch.nn.Module) else [])
            if outs and ins:
                torch.autograd.grad(outs, ins, [torch.ones_like(o) for o in outs],
                                    allow_unused=allow_unused_input)
    return callables[0] if single else callables


class _Nvtx:
    @staticmethod
    def range_push(msg):
        return 0

    @staticmethod
    def range_pop():
        return 0

    @staticmethod
    def mark(msg):
        pass

    @staticmethod
    @contextlib.contextmanager
    def range(msg, *args, **kwargs):
        yield


# ---------------------------------------------------------------- DataParallel's communication

def _comm_broadcast_coalesced(tensors, devices, buffer_size=10485760):
    devices = [_index(d) for d in devices]
    return [[t if _dev(t) == d else _tag(t.detach().clone(), d) for t in tensors] for d in devices]


def _comm_broadcast(tensor, devices=None, *, out=None):
    return tuple(row[0] for row in _comm_broadcast_coalesced([tensor], devices))


def _comm_scatter(tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):
    devices = [_index(d) for d in devices]
    if chunk_sizes is None:
        chunks = tensor.chunk(len(devices), dim)
    else:
        chunks = tensor.split(list(chunk_sizes), dim)
    return tuple(_tag(c.contiguous().clone(), d) for c, d in zip(chunks, devices))


def _comm_gather(tensors, dim=0, destination=None, *, out=None):
    if destination is None or destination == -1 or (isinstance(destination, str) and destination == 'cpu'):
        d = None if destination in (-1, 'cpu') else _state.current
    else:
        d = _index(destination)
    with torch._C.DisableTorchFunction():
        result = torch.cat([t for t in tensors], dim)
    if d is not None:
        _tag(result, d)
    else:
        _mark_host(result)
    return result


def _comm_reduce_add(inputs, destination=None):
    d = _index(destination) if destination is not None else _state.current
    with torch._C.DisableTorchFunction():
        result = functools.reduce(lambda a, b: a + b, inputs).clone()
    return _tag(result, d)


def _comm_reduce_add_coalesced(inputs, destination=None, buffer_size=10485760):
    return [_comm_reduce_add(list(ts), destination) for ts in zip(*inputs)]


def _parallel_apply(modules, inputs, kwargs_tup=None, devices=None):
    """parallel_apply, one replica after the other in this thread (the mode is per thread)."""
    from torch.nn.parallel.parallel_apply import get_a_var
    if len(modules) != len(inputs):
        raise AssertionError(f'The number of modules {len(modules)} is not equal to the number of inputs {len(inputs)}')
    kwargs_tup = kwargs_tup if kwargs_tup is not None else ({},) * len(modules)
    devices = devices if devices is not None else [None] * len(modules)
    outputs = []
    for m, inp, kw, d in zip(modules, inputs, kwargs_tup, devices):
        if d is None:
            t = get_a_var(inp)
            d = _dev(t) if _dev(t) is not None else _state.current
        with device(_index(d) if not isinstance(d, int) else d):
            outputs.append(m(*(inp if isinstance(inp, (list, tuple)) else (inp,)), **kw))
    return outputs


# ---------------------------------------------------------------- autocast, compile, distributed

_real_autocast = torch.amp.autocast_mode.autocast


class _Autocast(_real_autocast):
    """torch.autocast: 'cuda' runs the CPU's autocast, with the dtype asked for (a limit: CPU's op lists)."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type == 'cuda':
            device_type, dtype = 'cpu', dtype or torch.float16
        super().__init__(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


def _wrap_compiled(compiled):
    """A compiled function runs without the mode (Inductor's CPU code); its outputs keep the inputs' device."""
    @functools.wraps(compiled)
    def run(*args, **kwargs):
        devices = {_dev(t) for t in _tensors_in(args, kwargs) if _dev(t) is not None}
        params = []
        target = getattr(compiled, '_orig_mod', None)
        if isinstance(target, torch.nn.Module):
            params = [p for p in target.parameters() if _dev(p) is not None]
            devices |= {_dev(p) for p in params}
        with _paused():
            out = compiled(*args, **kwargs)
        if devices:
            i = min(devices)
            for x in _leaves(out):
                _tag(x, i)
        return out
    for attr in ('_orig_mod',):
        if hasattr(compiled, attr):
            setattr(run, attr, getattr(compiled, attr))
    return run


@contextlib.contextmanager
def _paused():
    """Run as plain PyTorch on the CPU: without the mode and the patches (used for compiled code,
    which Inductor turns into CPU code)."""
    from torch.overrides import _pop_mode_temporarily
    stack = []
    patched = [(obj, name, _current(obj, name)) for obj, name, _ in _saved]
    try:
        for obj, name, value in reversed(_saved):
            _put(obj, name, value)
        while torch._C._len_torch_function_stack() and isinstance(torch._C._get_function_stack_at(
                torch._C._len_torch_function_stack() - 1), _Mode):
            ctx = _pop_mode_temporarily()
            stack.append((ctx, ctx.__enter__()))
            break
        yield
    finally:
        for ctx, _ in reversed(stack):
            ctx.__exit__(None, None, None)
        for obj, name, value in patched:
            _put(obj, name, value)


def _current(obj, name):
    return obj.__dict__.get(name, _MISSING) if isinstance(obj, type) else getattr(obj, name, _MISSING)


def _put(obj, name, value):
    if value is _MISSING:
        if (name in obj.__dict__) if isinstance(obj, type) else hasattr(obj, name):
            delattr(obj, name)
    else:
        setattr(obj, name, value)


def _compile(model=None, **kwargs):
    if model is None:
        return lambda m: _compile(m, **kwargs)
    compiled = _real['compile'](model, **kwargs)
    if isinstance(compiled, torch.nn.Module):
        original_forward = compiled.forward

        def forward(*args, **kw):
            with _paused():
                out = original_forward(*args, **kw)
            devices = {_dev(p) for p in model.parameters() if _dev(p) is not None} | \
                      {_dev(t) for t in _tensors_in(args, kw) if _dev(t) is not None}
            if devices:
                for x in _leaves(out):
                    _tag(x, min(devices))
            return out
        compiled.forward = forward
        return compiled
    return _wrap_compiled(compiled)


_real = {}


def _pin_memory_util(data, device=None):
    """DataLoader's pin_memory (also run in its pin-memory thread, where the mode is off)."""
    def pin(x):
        if isinstance(x, torch.Tensor):
            with torch._C.DisableTorchFunction():
                out = x.clone()
            _tags_for(out)['pinned'] = True
            return out
        return x
    if isinstance(data, torch.Tensor):
        return pin(data)
    if hasattr(data, 'pin_memory') and not isinstance(data, (str, bytes)) and not isinstance(
            data, (list, tuple, dict)):
        return data.pin_memory()
    return pytree.tree_map(pin, data)


def _quick(method):
    """Timer.blocked_autorange / adaptive_autorange with the shortest run: the stand-in's times
    mean nothing, and a GPU-sized operation is slow on the host."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        if method.__name__ == 'blocked_autorange':
            return method(self, callback=args[0] if args else kwargs.get('callback'), min_run_time=1e-6)
        kwargs.update(min_run_time=1e-6, max_run_time=1e-3)
        return method(self, *args[:1], **kwargs)
    return run


def _checkpoint_metadata(x):
    """torch.utils.checkpoint's determinism check, on the real device: a recomputation in
    backward runs where the mode may be off, so its tensors are not tagged."""
    with torch._C.DisableTorchFunction():
        return {'shape': x.shape, 'dtype': x.dtype, 'device': x.device}


def _profile_class():
    """torch.profiler.profile without ProfilerActivity.CUDA (a CPU build has no CUPTI): CPU events only."""
    import torch.profiler as tp
    real = tp.profile

    class profile(real):
        def __init__(self, *args, activities=None, **kwargs):
            if activities is not None:
                activities = [a for a in activities if a != tp.ProfilerActivity.CUDA] or [tp.ProfilerActivity.CPU]
            super().__init__(*args, activities=activities, **kwargs)
    profile.__qualname__ = real.__qualname__
    return profile


def _legacy_profile_class():
    real = torch.autograd.profiler.profile

    class profile(real):
        def __init__(self, *args, use_cuda=False, use_device=None, **kwargs):
            super().__init__(*args, use_device=None if use_device == 'cuda' else use_device, **kwargs)
    return profile


def _load(f, map_location=None, *args, **kwargs):
    """torch.load: a map_location on CUDA loads to the host and tags the tensors."""
    i = _cuda_index_of(map_location) if isinstance(map_location, (str, torch.device)) else None
    if i is None:
        return _real['load'](f, map_location, *args, **kwargs)
    out = _real['load'](f, 'cpu', *args, **kwargs)
    for x in _leaves(out):
        _tag(x, i)
    return out


def _set_default_device(device):
    i = _cuda_index_of(device)
    if i is not None:
        _state.default = torch.device('cuda', i) if torch.device(device).index is not None else torch.device('cuda')
        _real['set_default_device'](None)
    else:
        _state.default = None
        _real['set_default_device'](device)


def _get_default_device():
    if _state.default is not None:
        return torch.device('cuda', _index(_state.default))
    return _real['get_default_device']()
_nccl_groups = set()


def _init_process_group(backend=None, *args, **kwargs):
    import torch.distributed as dist
    asked = backend
    if isinstance(backend, str) and 'nccl' in backend:
        backend = 'gloo'
    if _cuda_index_of(kwargs.get('device_id')) is not None or isinstance(kwargs.get('device_id'), int):
        kwargs['device_id'] = None                   # gloo on the host: no device to bind
    out = _real['init_process_group'](backend, *args, **kwargs)
    if isinstance(asked, str) and 'nccl' in asked:
        _nccl_groups.add('default')
    return out


def _get_backend(group=None):
    out = _real['get_backend'](group)
    if group is None and 'default' in _nccl_groups and out == 'gloo':
        return 'nccl'
    return out


# ---------------------------------------------------------------- activation

def _patch(obj, name, value):
    _saved.append((obj, name, _current(obj, name)))
    setattr(obj, name, value)


_MISSING = object()


def _patches(gpus):
    import torch.cuda.memory as cm
    import torch.nn.parallel.comm as comm
    c = torch.cuda
    p = _patch
    p(c, 'is_available', lambda: True)
    p(c, 'is_initialized', lambda: True)
    p(c, 'init', lambda: None)
    p(c, '_lazy_init', lambda: None)
    p(c, 'device_count', lambda: gpus)
    p(c, 'current_device', lambda: _state.current)
    p(c, 'set_device', set_device)
    p(c, 'device', device)
    p(c, 'device_of', device_of)
    # get_device_name / _capability / _properties are PyTorch's own (their argument checks and
    # errors: AssertionError('Invalid device id')), over the stand-in's properties
    p(c, '_get_device_properties', _DeviceProperties)
    p(c, 'get_arch_list', lambda: ['sm_80', 'sm_86', 'sm_90', 'sm_100', 'sm_120'])
    p(c, 'get_gencode_flags', lambda: '-gencode compute=compute_90,code=sm_90')
    p(c, 'can_device_access_peer', lambda a, b: (_index(a), _index(b), True)[2])
    p(c, 'is_bf16_supported', lambda including_emulation=True: True)
    p(c, 'is_tf32_supported', lambda: True)
    p(c, 'synchronize', synchronize)
    p(c, 'ipc_collect', lambda: None)
    p(c, 'Event', Event)
    p(c, 'Stream', Stream)
    p(c, 'current_stream', current_stream)
    p(c, 'default_stream', default_stream)
    p(c, 'stream', stream)
    p(c, 'StreamContext', _StreamContext)
    p(c, 'set_stream', lambda s: None)
    p(c, 'set_sync_debug_mode', set_sync_debug_mode)
    p(c, 'get_sync_debug_mode', lambda: _state.sync_debug)
    p(c, 'CUDAGraph', CUDAGraph)
    p(c, 'graph', graph)
    p(c, 'make_graphed_callables', make_graphed_callables)
    p(c, 'is_current_stream_capturing', lambda: False)
    p(c, 'graph_pool_handle', lambda: (0, 0))
    p(c, 'nvtx', _Nvtx)
    p(c, 'manual_seed', lambda seed: None)
    p(c, 'manual_seed_all', lambda seed: None)
    p(c, 'seed', lambda: None)
    p(c, 'seed_all', lambda: None)
    p(c, 'initial_seed', lambda: torch.initial_seed())
    p(c, 'get_rng_state', lambda device='cuda': torch.get_rng_state())
    p(c, 'get_rng_state_all', lambda: [torch.get_rng_state() for _ in range(gpus)])
    p(c, 'set_rng_state', lambda state, device='cuda': None)
    p(c, 'set_rng_state_all', lambda states: None)
    p(c, 'utilization', lambda device=None: 0)
    p(c, 'temperature', lambda device=None: 40)
    p(c, 'power_draw', lambda device=None: 100000)
    p(c, 'clock_rate', lambda device=None: 1980)
    p(c, 'memory_usage', lambda device=None: 0)
    p(c, 'device_memory_used', lambda device=None: _state.reserved[_index(device)])
    p(c, '_sleep', lambda cycles: None)
    for mod in (c, cm):
        p(mod, 'mem_get_info', mem_get_info)
        p(mod, 'empty_cache', empty_cache)
        p(mod, 'reset_peak_memory_stats', reset_peak_memory_stats)
        p(mod, 'reset_accumulated_memory_stats', reset_accumulated_memory_stats)
        p(mod, 'reset_max_memory_allocated', reset_peak_memory_stats)
        p(mod, 'reset_max_memory_cached', reset_peak_memory_stats)
        p(mod, 'memory_stats_as_nested_dict', memory_stats_as_nested_dict)
        p(mod, 'set_per_process_memory_fraction', lambda fraction, device=None: None)
        p(mod, 'get_per_process_memory_fraction', lambda device=None: 1.0)
        p(mod, 'caching_allocator_alloc', None)
    p(cm, 'is_initialized', lambda: True)
    p(cm, '_record_memory_history', _record_memory_history)
    p(cm, '_snapshot', _snapshot)
    p(cm, '_dump_snapshot', _dump_snapshot)
    p(cm, 'memory_snapshot', lambda *a, **k: _snapshot()['segments'])
    p(cm, 'list_gpu_processes', lambda device=None: f'GPU:{_index(device)}\nno processes are running')
    p(cm, '_set_allocator_settings', lambda env: None)
    p(cm, 'get_allocator_backend', lambda: 'native')
    p(cm, '_get_device_index', lambda d, optional=False, allow_cpu=False: _index(d))
    p(torch.version, 'cuda', CUDA_VERSION)
    p(torch.backends.cudnn, 'version', lambda: CUDNN_VERSION)
    p(torch.backends.cudnn, 'is_available', lambda: True)
    p(torch.backends.cuda, 'is_built', lambda: True)
    p(torch.accelerator, 'is_available', lambda: True)
    p(torch.accelerator, 'device_count', lambda: gpus)
    p(torch.accelerator, 'current_accelerator', lambda check_available=False: torch.device('cuda'))
    p(torch.accelerator, 'current_device_index', lambda: _state.current)
    p(torch.accelerator, 'current_device_idx', lambda: _state.current)
    p(torch.accelerator, 'set_device_index', lambda d: set_device(d))
    p(torch.accelerator, 'set_device_idx', lambda d: set_device(d))
    p(torch.accelerator, 'synchronize', lambda device=None: None)
    p(torch.accelerator, 'current_stream', lambda device=None: current_stream(device))
    p(torch.accelerator, 'device_index', device)
    p(torch.accelerator, 'set_stream', lambda s: None)
    p(torch.accelerator, 'get_device_capability', lambda device=None: {'capability': CAPABILITY})
    p(torch, 'autocast', _Autocast)
    real_swap = torch.utils.swap_tensors

    def swap_tensors(t1, t2):                    # the tags' weak references would stop the swap
        held = []
        for t in (t1, t2):
            tags = _tags.pop(t, None) if isinstance(t, torch.Tensor) else None
            fin = tags.get('fin') if tags else None
            held.append((tags, fin.detach() if fin is not None else None))
        real_swap(t1, t2)
        for t, (tags, fin) in zip((t2, t1), held):       # the tags follow the contents
            if tags:
                tags = dict(tags)
                if fin is not None:
                    tags['fin'] = weakref.finalize(t, fin[1], *fin[2])
                _tags[t] = tags
    p(torch.utils, 'swap_tensors', swap_tensors)
    real_make_subclass = torch.Tensor._make_subclass

    def make_subclass(cls, data, *args, **kwargs):          # nn.Parameter(x): the new object keeps x's device
        out = real_make_subclass(cls, data, *args, **kwargs)
        if _dev(data) is not None:
            _tag(out, _dev(data))
        if _is_pinned(data):
            _tags_for(out)['pinned'] = True
        return out
    p(torch.Tensor, '_make_subclass', staticmethod(make_subclass))
    import torch.utils.data._utils.pin_memory as pm
    p(pm, 'pin_memory', _pin_memory_util)
    import torch.utils.benchmark as bench
    for method in ('blocked_autorange', 'adaptive_autorange'):
        p(bench.Timer, method, _quick(getattr(bench.Timer, method)))
    import torch.utils.checkpoint as ckpt
    checks = dict(ckpt._allowed_determinism_checks_to_fns)
    checks[ckpt._DEFAULT_DETERMINISM_MODE] = _checkpoint_metadata
    p(ckpt, '_allowed_determinism_checks_to_fns', checks)
    import torch.profiler as tp
    p(tp, 'profile', _profile_class())
    p(torch.autograd.profiler, 'profile', _legacy_profile_class())
    _real['load'] = torch.load
    p(torch, 'load', _load)
    _real['set_default_device'] = torch.set_default_device
    _real['get_default_device'] = torch.get_default_device
    p(torch, 'set_default_device', _set_default_device)
    p(torch, 'get_default_device', _get_default_device)
    p(torch.amp, 'autocast', _Autocast)
    p(torch.amp.autocast_mode, 'autocast', _Autocast)
    p(comm, 'broadcast_coalesced', _comm_broadcast_coalesced)
    p(comm, 'broadcast', _comm_broadcast)
    p(comm, 'scatter', _comm_scatter)
    p(comm, 'gather', _comm_gather)
    p(comm, 'reduce_add', _comm_reduce_add)
    p(comm, 'reduce_add_coalesced', _comm_reduce_add_coalesced)
    import torch.nn.parallel._functions as pf
    import importlib
    importlib.import_module('torch.nn.parallel.data_parallel')      # the modules (their names are also functions')
    importlib.import_module('torch.nn.parallel.parallel_apply')
    for mod in (torch.nn.parallel, sys.modules['torch.nn.parallel.data_parallel'],
                sys.modules['torch.nn.parallel.parallel_apply']):
        p(mod, 'parallel_apply', _parallel_apply)
    p(pf, '_get_stream', lambda device: Stream(device) if torch.device(device).type == 'cuda' else None)
    _real['compile'] = torch.compile
    p(torch, 'compile', _compile)
    import torch.distributed as dist
    if dist.is_available():
        _real['init_process_group'] = dist.init_process_group
        _real['get_backend'] = dist.get_backend
        p(dist, 'init_process_group', _init_process_group)
        p(dist, 'get_backend', _get_backend)
        p(dist, 'is_nccl_available', lambda: True)
    nccl = importlib.import_module('torch.cuda.nccl')
    p(nccl, 'version', lambda: (2, 26, 2))
    p(nccl, 'is_available', lambda tensors: True)


class _PlainImports:
    """A meta-path finder: torch._dynamo and torch._inductor modules imported while the stand-in
    is active run their module-level code without it (they decide at import time, from
    torch.cuda.is_available(), to import CUDA-only parts of torch._C)."""

    PREFIXES = ('torch._dynamo', 'torch._inductor')

    def find_spec(self, name, path, target=None):
        if not name.startswith(self.PREFIXES) or _state is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, 'find_spec'):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, 'exec_module'):
            return spec
        real_exec = loader.exec_module

        class Loader:
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                with _paused():
                    real_exec(module)
        spec.loader = Loader()
        return spec


_finder = _PlainImports()


def _child_hook_dir():
    """A folder with a sitecustomize.py that activates the stand-in in child Pythons."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix='cuda-standin-'))
    (folder / 'sitecustomize.py').write_text(
        'import os, sys\n'
        f'sys.path.insert(0, {str(pathlib.Path(__file__).resolve().parent)!r})\n'
        f'if os.environ.get({ENV!r}):\n'
        '    import cuda_standin\n'
        f'    cuda_standin.activate(int(os.environ[{ENV!r}]), children=False)\n', encoding='utf-8')
    return folder


_env_saved = None
_hook_dir = None


def activate(gpus=1, children=True):
    """Make this process (and, with `children`, the Pythons it starts) see `gpus` stand-in GPUs."""
    global _state, _mode, _env_saved, _hook_dir
    if _state is not None:
        raise RuntimeError('the CUDA stand-in is already active')
    _state = _State(int(gpus))
    global _tags
    _tags = _TagTable()
    _patches(int(gpus))
    _mode = _Mode()
    _mode.__enter__()
    sys.meta_path.insert(0, _finder)
    if children:
        _hook_dir = _child_hook_dir()
        _env_saved = {k: os.environ.get(k) for k in (ENV, 'PYTHONPATH')}
        os.environ[ENV] = str(gpus)
        os.environ['PYTHONPATH'] = os.pathsep.join(p for p in (str(_hook_dir), os.environ.get('PYTHONPATH')) if p)


def deactivate():
    global _state, _mode, _env_saved, _hook_dir
    if _state is None:
        return
    _mode.__exit__(None, None, None)
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    while _saved:
        obj, name, value = _saved.pop()
        _put(obj, name, value)
    if _env_saved is not None:
        for k, v in _env_saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if _hook_dir is not None:
        import shutil
        shutil.rmtree(_hook_dir, ignore_errors=True)
    _state = _mode = _env_saved = _hook_dir = None


@contextlib.contextmanager
def active(gpus=1):
    activate(gpus)
    try:
        yield
    finally:
        deactivate()


# ---------------------------------------------------------------- running a lesson's cell (in its kernel)

def run_cell(index, cell_id, gpu, src, results_path):
    """Run one lesson cell in the kernel's namespace, its asserts turned into recorded value
    checks, and append its record (tests/test_gpu_branches.py says what the statuses mean)."""
    import ast
    import json
    import linecache
    import traceback
    from IPython import get_ipython
    ip = get_ipython()
    code = ip.transform_cell(src)
    filename = f'<cell {cell_id}>'
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    failed = []

    class Soft(ast.NodeTransformer):
        def visit_Assert(self, node):
            call = ast.Call(func=ast.Name('_standin_check_failed', ast.Load()),
                            args=[ast.Constant(node.lineno), ast.Constant(ast.unparse(node.test)[:200]),
                                  node.msg or ast.Constant(None)], keywords=[])
            new = ast.If(test=ast.UnaryOp(ast.Not(), node.test), body=[ast.Expr(call)], orelse=[])
            return ast.fix_missing_locations(ast.copy_location(new, node))

    def check_failed(line, test, msg):
        failed.append((line, test + ('' if msg is None else f' -- {str(msg)[-1500:]}')))

    ns = ip.user_ns
    ns['_standin_check_failed'] = check_failed
    record = {'index': index, 'cell': gpu or cell_id, 'gpu': gpu is not None, 'failed_checks': failed,
              'error': None}
    start = time.perf_counter()
    import signal

    stopped = threading.Event()      # set once the cell has stopped: a late signal is then ignored

    def too_long(signum, frame):
        if stopped.is_set():
            return
        raise StandinTimeout(f'the cell ran past {CELL_SECONDS:.0f} s on the CUDA stand-in (GPU-sized work on '
                             'the host; COURSE_STANDIN_CELL_S sets the limit): the rest of the cell was not run')
    previous = signal.signal(signal.SIGALRM, too_long)
    signal.setitimer(signal.ITIMER_REAL, CELL_SECONDS)
    # A watchdog too: the timer can be disarmed by code the cell calls, and a signal lost; past the
    # limit, it sends SIGALRM again every 2 s until the cell has stopped.

    def watchdog():
        if not stopped.wait(CELL_SECONDS + 2):
            while not stopped.wait(2):
                os.kill(os.getpid(), signal.SIGALRM)
    threading.Thread(target=watchdog, daemon=True).start()
    try:
        tree = Soft().visit(ast.parse(code, filename))
        exec(compile(tree, filename, 'exec'), ns)
        stopped.set()
        signal.setitimer(signal.ITIMER_REAL, 0)
        status = 'value' if failed else 'ok'
    except BaseException as e:
        stopped.set()
        signal.setitimer(signal.ITIMER_REAL, 0)          # every outcome is recorded, a timeout too
        frames = traceback.extract_tb(e.__traceback__)
        line = next((f.lineno for f in reversed(frames) if f.filename == filename), None)
        in_standin = bool(frames) and frames[-1].filename == __file__
        if isinstance(e, AssertionError):
            status = 'value'
            failed.append((line, f'{type(e).__name__}: {str(e)[:300]}'))
        elif isinstance(e, (StandinLimit, StandinTimeout)) or (
                isinstance(e, torch.OutOfMemoryError) and 'stand-in' in str(e)):
            status = 'limit'
        else:
            status = 'error'
        if status != 'value':
            record['error'] = {'type': type(e).__name__, 'message': str(e)[:1500], 'line': line,
                               'in_standin': in_standin,
                               'traceback': ''.join(traceback.format_list(frames))[-3500:]
                               + f'{type(e).__name__}: {str(e)[:500]}'}
    finally:
        stopped.set()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    record['status'] = status
    record['seconds'] = round(time.perf_counter() - start, 2)
    with open(results_path, 'a', encoding='utf-8') as f:
        f.write(json.dumps(record, default=str) + '\n')
    if status == 'error':
        print(f'[stand-in] {record["cell"]}: {record["error"]["type"]}: {record["error"]["message"][:300]}')
