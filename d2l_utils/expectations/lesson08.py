"""Lesson 8's GPU-only cells: what the caching allocator, autocast and an out-of-memory error show.

Course machinery, written by hand. Most of lesson 8's GPU cells are deterministic, so their
expectations are simulated here on the CPU rather than modelled:

* ``Allocator`` replays PyTorch's CUDA caching allocator with its default settings
  (``c10/cuda/CUDACachingAllocator.cpp``: ``round_size``, ``get_allocation_size``,
  ``get_free_block``, ``should_split``, ``free_block``, ``release_blocks``, and the growth of an
  expandable segment), the rules the lesson teaches in § "The caching allocator";
* ``cuda_autocast_saved`` runs the lesson's small GPT under CUDA's autocast rules (the lesson's
  ``AutocastRules``, restated here because the package cannot import a notebook;
  ``tests/test_08_gpu_memory.py`` checks that the two agree) and counts what it saves;
* peaks of memory that depend on the kernels' temporary buffers are modelled from the bytes the
  lesson counts, with a range for what no count sees;
* the out-of-memory error's class and message are quoted from the allocator's source.

The lesson's small model is fixed here as in the lesson: 6 residual blocks of width 64, a batch
of 256, Adam.
"""
import functools
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from .. import gpu_models
from . import expectation

MiB, GiB = 2**20, 2**30
ALLOCATOR = 'c10/cuda/CUDACachingAllocator.cpp'

# The caching allocator's constants (the top of CUDACachingAllocator.cpp).
MIN_BLOCK = 512                 # kMinBlockSize: every size is rounded up to a multiple of this
SMALL = MiB                     # kSmallSize: the largest request of the small pool
SMALL_SEGMENT = 2 * MiB         # kSmallBuffer: the small pool's segments
LARGE_SEGMENT = 20 * MiB        # kLargeBuffer: the segment of a request under 10 MiB
MIN_LARGE_ALLOC = 10 * MiB      # kMinLargeAlloc: from here on, a segment of the request's size
ROUND_LARGE = 2 * MiB           # kRoundLarge: ... rounded up to 2 MiB


def round_size(nbytes):
    """The block a request of ``nbytes`` takes: a multiple of 512 bytes (``round_size``)."""
    return max(MIN_BLOCK, -(-nbytes // MIN_BLOCK) * MIN_BLOCK)


def segment_size(size):
    """The segment a new block of ``size`` (already rounded) asks the driver for (``get_allocation_size``)."""
    if size <= SMALL:
        return SMALL_SEGMENT
    if size < MIN_LARGE_ALLOC:
        return LARGE_SEGMENT
    return -(-size // ROUND_LARGE) * ROUND_LARGE


class Allocator:
    """A replay of the CUDA caching allocator on one device, with its default settings.

    Segments are lists of blocks ``[size, in_use]`` in address order. A request takes the
    smallest free block of its pool and stream that fits (best fit), else a new segment; the
    rest of the block is split off when ``should_split`` says so; a freed block merges with
    free neighbours; ``empty_cache`` returns the segments that are one free block. With
    ``expandable=True`` each pool and stream has one segment that grows by pages (2 MiB small,
    20 MiB large) instead (Note [Expandable Segments]).
    """

    def __init__(self, expandable=False):
        self.expandable = expandable
        self.segments = []            # dicts: pool, stream, blocks
        self.segments_allocated = 0   # memory_stats()['segment.all.allocated']
        self.max_allocated = 0

    @property
    def allocated(self):
        return sum(b[0] for s in self.segments for b in s['blocks'] if b[1])

    @property
    def reserved(self):
        return sum(b[0] for s in self.segments for b in s['blocks'])

    @property
    def inactive_split(self):
        """Free blocks in segments that still hold more than one block (``inactive_split_bytes``)."""
        return 0 if self.expandable else sum(b[0] for s in self.segments if len(s['blocks']) > 1
                                             for b in s['blocks'] if not b[1])

    def malloc(self, nbytes, stream=0):
        """Allocate ``nbytes`` on ``stream``; return the block (a handle for ``free``)."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f'nbytes must be an int >= 0, got {nbytes!r}')
        size = round_size(nbytes)
        pool = 'small' if size <= SMALL else 'large'
        fits = [(b[0], i, j) for i, s in enumerate(self.segments) if (s['pool'], s['stream']) == (pool, stream)
                for j, b in enumerate(s['blocks']) if not b[1] and b[0] >= size]
        if fits:
            _, i, j = min(fits)
        elif self.expandable:
            i, j = self._grow(pool, stream, size)
        else:
            self.segments.append({'pool': pool, 'stream': stream, 'blocks': [[segment_size(size), False]]})
            self.segments_allocated += 1
            i, j = len(self.segments) - 1, 0
        blocks = self.segments[i]['blocks']
        rest = blocks[j][0] - size
        if rest >= MIN_BLOCK if (pool == 'small' or self.expandable) else rest > SMALL:   # should_split
            blocks[j:j + 1] = [[size, True], [rest, False]]
        else:
            blocks[j][1] = True
        self.max_allocated = max(self.max_allocated, self.allocated)
        return blocks[j]

    def _grow(self, pool, stream, size):
        page = SMALL_SEGMENT if pool == 'small' else LARGE_SEGMENT
        mine = [i for i, s in enumerate(self.segments) if (s['pool'], s['stream']) == (pool, stream)]
        if not mine:
            self.segments.append({'pool': pool, 'stream': stream, 'blocks': []})
            mine = [len(self.segments) - 1]
        blocks = self.segments[mine[0]]['blocks']
        if not blocks or blocks[-1][1]:
            blocks.append([0, False])               # the free block at the end, which grows
        blocks[-1][0] += -(-(size - blocks[-1][0]) // page) * page       # map whole pages
        return mine[0], len(blocks) - 1

    def free(self, block):
        """Free ``block`` (returned by ``malloc``); merge it with free neighbours."""
        for s in self.segments:
            for j, b in enumerate(s['blocks']):
                if b is block:
                    if not b[1]:
                        raise ValueError('this block is already free')
                    b[1] = False
                    blocks = s['blocks']
                    if j + 1 < len(blocks) and not blocks[j + 1][1]:
                        b[0] += blocks.pop(j + 1)[0]
                    if j > 0 and not blocks[j - 1][1]:
                        blocks[j - 1][0] += blocks.pop(j)[0]
                    return
        raise ValueError('not a block of this allocator')

    def empty_cache(self):
        """Return every segment that holds no tensor to the driver (``release_blocks``)."""
        if self.expandable:
            raise NotImplementedError('empty_cache is replayed for the default settings only')
        self.segments = [s for s in self.segments if len(s['blocks']) > 1 or s['blocks'][0][1]]


# The lesson's small model: 6 residual blocks of width 64 (up 64 -> 256, down 256 -> 64), a batch of 256.
D, DEPTH, N = 64, 6, 256
ACTS = DEPTH * 9 * N * D * 4           # the activations of a forward pass, float32 (the lesson's count)
GRADS = DEPTH * (8 * D * D + 5 * D) * 4   # the gradients, 4 bytes per parameter
BUFFER = 4 * N * D * 4                 # the largest gradient buffer of the backward pass: 4N·d floats


def _parameter_bytes():
    """The bytes of each parameter tensor of the small model (up's weight and bias, down's)."""
    return [4 * n for _ in range(DEPTH) for n in (4 * D * D, 4 * D, 4 * D * D, D)]


def _peak_kib(low, buffer, what):
    """A peak of memory in KiB: ``low`` bytes that a count finds held together, plus two gradient
    buffers of the backward pass, plus up to 30% for what no count sees (kernels' temporaries)."""
    value = (low + 2 * buffer) / 1024
    return gpu_models.Estimate(value, low / 1024, 1.3 * value, 'KiB',
                               f'{what} ({low / 1024:,.0f} KiB, counted) + 2 buffers of {buffer / 1024:,.0f} KiB;'
                               ' +30% for temporaries')


@expectation('08-measured-step', how='simulated')
def _(e, gpu):
    kept = 3 * sum(round_size(n) for n in _parameter_bytes()) / 1024
    e.note("After Adam's first step the GPU keeps the gradients and Adam's two buffers, in 512-byte blocks.")
    e.number('held_after_kib', 'kept after the step', gpu_models.Estimate(
        kept, kept, kept, 'KiB', '24 tensors x 3 in 512 B blocks; step counters on the CPU (torch/optim/adam.py)'))
    e.number('peak_kib', 'peak above the level before', _peak_kib(ACTS, BUFFER, 'the activations'),
             how='model')


class AutocastRules(TorchFunctionMode):
    """The lesson's AutocastRules: cast the floating-point inputs of ``low`` to ``dtype`` and of
    ``fp32`` to float32 (unless the call names a dtype); run the functions in ``parts`` as the
    functions they call, each under the rules."""

    def __init__(self, low, fp32, parts=None, dtype=torch.bfloat16):
        super().__init__()
        self.to = {**{f: dtype for f in low}, **{f: torch.float32 for f in fp32}}
        self.parts = parts or {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.parts:
            with self:
                return self.parts[func](*args, **kwargs)
        to = None if kwargs.get('dtype') is not None else self.to.get(func)
        cast = lambda a: a.to(to) if to and isinstance(a, torch.Tensor) and a.is_floating_point() else a
        return func(*map(cast, args), **{k: cast(v) for k, v in kwargs.items()})


def cross_entropy_parts(logits, target, weight=None, size_average=None, ignore_index=-100,
                        reduce=None, reduction='mean', label_smoothing=0.0):
    """F.cross_entropy as cross_entropy_loss runs it for class indices (aten/src/ATen/native/LossNLL.cpp)."""
    if label_smoothing or target.is_floating_point():
        raise NotImplementedError('only class indices without label smoothing are written out here')
    log_p = F.log_softmax(logits, 1 if logits.dim() > 1 else 0, dtype=logits.dtype)
    return F.nll_loss(log_p, target, weight, size_average, ignore_index, reduce, reduction)


LOW = {F.linear, torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__}
CPU_FP32 = {F.cross_entropy}
CUDA_FP32 = {F.layer_norm, F.softmax, torch.Tensor.softmax, F.log_softmax, F.nll_loss}
CUDA_PARTS = {F.cross_entropy: cross_entropy_parts}


class _Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.qkv, self.proj = heads, nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        weights = scores.masked_fill(future, float('-inf')).softmax(dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(b, t, d))


class _Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.norm1, self.attn, self.norm2 = nn.LayerNorm(d), _Attention(d, heads), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class _GPT(nn.Module):
    def __init__(self, vocab, d, depth, heads):
        super().__init__()
        self.embed = nn.Parameter(torch.empty(vocab, d).uniform_(-1, 1))
        self.blocks = nn.Sequential(*[_Block(d, heads) for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        return self.head(self.norm(self.blocks(F.embedding(tokens, self.embed))))


def saved_by_dtype(rules):
    """Bytes the lesson's small GPT (GPT(100, 32, 2, 4), 2 sequences of 16 tokens) saves for
    backward under ``rules``, by dtype, each storage counted once (as ``saved_tensor_bytes``)."""
    with torch.random.fork_rng(devices=[]):            # leave the caller's random numbers alone
        model = _GPT(100, 32, 2, 4)
    tokens = torch.zeros(2, 16, dtype=torch.long)
    skip = {id(t.untyped_storage()) for t in [*model.parameters(), tokens]}
    saved = {}

    def pack(t):
        if id(t.untyped_storage()) not in skip:
            saved[id(t.untyped_storage())] = (t.dtype, t.untyped_storage())
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), rules:
        F.cross_entropy(model(tokens).flatten(0, 1), tokens.flatten())
    split = {}
    for dtype, s in saved.values():
        split[dtype] = split.get(dtype, 0) + s.nbytes()
    return split


def dtypes(saved):
    """Bytes by dtype as the lesson prints them: 'bfloat16 1,024 B, float32 4 B'."""
    return ', '.join(f'{str(dtype).removeprefix("torch.")} {n:,} B' for dtype, n in sorted(saved.items(), key=str))


@functools.lru_cache(maxsize=None)
def cuda_and_cpu_saved():
    """The small GPT's saved bytes by dtype under CUDA's rules and under the CPU's."""
    return (saved_by_dtype(AutocastRules(LOW, CUDA_FP32, CUDA_PARTS)),
            saved_by_dtype(AutocastRules(LOW, CPU_FP32)))


@expectation('08-autocast-rules', how='simulated')
def _(e, gpu):
    cuda, cpu = cuda_and_cpu_saved()
    # Running CUDA's rules without one function each (tests/test_08_gpu_memory.py): without softmax the float32
    # difference goes; without layer_norm nothing changes, since its input, the residual stream, is float32 on
    # both devices already.
    because = {torch.bfloat16: "log_softmax's result inside cross_entropy",
               torch.float32: "softmax's weights: its bfloat16 input cast to float32"}
    more = [f'{cuda[k] - cpu.get(k, 0):,} B more {str(k).removeprefix("torch.")} ({because.get(k, "")})'
            for k in sorted(cuda, key=str) if cuda[k] != cpu.get(k, 0)]
    e.note("torch.autocast('cuda') saves what CUDA's rules save. Against the CPU: " + ' and '.join(more) + '.')
    if 'bfloat16' not in gpu.peak_flops:
        e.note(f'The {gpu.key} has no bfloat16 tensor cores: bfloat16 runs slower there, same bytes.')
    why = "the small GPT under CUDA's rules, on this CPU"
    e.text('autocast', 'torch.autocast("cuda")', dtypes(cuda), why=why)
    e.text('rules', "CUDA's rules", dtypes(cuda), why=why)


# ---- which fused attention kernel runs (08-sdpa-backend) ----------------------------------------------

SDP_UTILS = 'aten/src/ATen/native/transformers/cuda/sdp_utils.cpp'


def sdpa_backend(gpu):
    """(backend, why): what F.scaled_dot_product_attention runs for the cell's bfloat16 attention on ``gpu``
    with PyTorch 2.11 or later (the course's lower bound), by the rules of ``select_sdp_backend``."""
    if gpu.capability[0] in (9, 10):
        return 'cudnn', ('check_prefer_cudnn_attention puts cuDNN first on compute capability 9.x and 10.x when '
                         'cuDNN is newer than 9.15 (2.11\'s wheels bring 9.19; TORCH_CUDNN_SDPA_DEPRIORITIZED=1 '
                         f'undoes it; PyTorch issue 193893 saw it on a B200 with 2.11), {SDP_UTILS}; '
                         'earlier releases checked other cuDNN versions and GPUs')
    if (8, 0) <= gpu.capability <= (12, 1):
        return 'flash', f'flash attention first: 16 bits, compute capability 8.0 to 12.1 ({SDP_UTILS})'
    return 'math', ('no flash attention below 8.0, and memory-efficient attention takes no bfloat16 there '
                    f'({SDP_UTILS}): the math path')


# sdpa_saved_bytes() on PyTorch 2.13 (a run on meta takes seconds; tests/test_08_gpu_memory.py runs it again).
SDPA_SAVED = {'flash': 4_259_864, 'cudnn': 4_259_856, 'math': 92_274_688}


def sdpa_saved_bytes():
    """Bytes one causal bfloat16 attention of 16 heads x 1024 tokens x 128 saves for backward (q, k, v
    excluded), by backend, from the operators' shape functions on ``meta``."""
    q, k, v = (torch.empty(1, 16, 1024, 128, device='meta', dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    ops = torch.ops.aten
    runs = {'flash': lambda: ops._scaled_dot_product_flash_attention(q, k, v, 0.0, True)[0],
            'cudnn': lambda: ops._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, True)[0],
            'math': lambda: ops._scaled_dot_product_attention_math(q, k, v, None, 0.0, True)[0]}
    saved = {}
    for name, run in runs.items():
        skip = {id(t.untyped_storage()) for t in (q, k, v)}
        held = {}

        def pack(t):
            if id(t.untyped_storage()) not in skip:
                held[id(t.untyped_storage())] = t.untyped_storage().nbytes()
            return t.detach()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            run()
        saved[name] = sum(held.values())
    return saved


@expectation('08-sdpa-backend', how='source')
def _(e, gpu):
    backend, why = sdpa_backend(gpu)
    e.note('PyTorch 2.11 and later run cuDNN\'s attention on Hopper and Blackwell data-centre GPUs, flash attention '
           'on other GPUs from Ampere on, and the written-out math path for bfloat16 below Ampere (the T4), which '
           'saves the attention weights. cuDNN and flash save the same: the output and a float32 number per row.')
    e.text('backend', 'the backend PyTorch chooses', backend, why=why)
    nbytes = SDPA_SAVED[backend] / 1024
    e.number('saved_kib', 'saved for backward (q, k, v excluded)', gpu_models.Estimate(
        nbytes, nbytes - 1, nbytes + 1, 'KiB', f'the {backend} operator\'s saved tensors, from its shape function '
        'on meta (simulated); ± 1 KiB for its random-number state'), how='simulated')
    forced = 'flash' if (8, 0) <= gpu.capability <= (12, 1) else 'unavailable'
    e.text('flash_forced', 'under sdpa_kernel(SDPBackend.FLASH_ATTENTION)', forced,
           why=f'check_flash_attention_hardware_support: compute capability 8.0 to 12.1 ({SDP_UTILS})')


REPLAYED = 'CUDACachingAllocator.cpp replayed on this CPU'


@expectation('08-allocator-rules', how='simulated')
def _(e, gpu):
    blocks, segments = [], []
    for n in [1, 1000, MiB, MiB + 1, 5 * MiB, 10 * MiB + 1, 11 * MiB, 100 * MiB]:
        alloc = Allocator()
        blocks.append(alloc.malloc(n)[0])
        segments.append(alloc.reserved // MiB)
    e.note('Every request gets the block and the new segment of the rules table, on every GPU.')
    e.text('blocks', 'blocks (B)', str(blocks), why=REPLAYED)
    e.text('segments', 'new segments (MiB)', str(segments), why=REPLAYED)


@expectation('08-allocated-reserved', how='simulated')
def _(e, gpu):
    alloc, steps = Allocator(), []
    t = alloc.malloc(100 * MiB)
    steps.append((alloc.allocated // MiB, alloc.reserved // MiB, alloc.segments_allocated))
    alloc.free(t)
    steps.append((alloc.allocated // MiB, alloc.reserved // MiB, alloc.segments_allocated))
    alloc.malloc(90 * MiB)
    steps.append((alloc.allocated // MiB, alloc.reserved // MiB, alloc.segments_allocated))
    e.note('Freeing lowers allocated, not reserved; 90 MiB then fit in the cached block, without a new segment.')
    e.text('steps', '(allocated MiB, reserved MiB, segments) after each step', str(steps), why=REPLAYED)


def _exact(value, unit):
    return gpu_models.Estimate(value, value, value, unit, REPLAYED)


@expectation('08-fragmentation', how='simulated')
def _(e, gpu):
    alloc = Allocator()
    four = [alloc.malloc(5 * MiB) for _ in range(4)]
    alloc.free(four[0])
    alloc.free(four[2])
    holes = alloc.inactive_split / MiB
    alloc.malloc(8 * MiB)
    e.note('Two holes of 5 MiB with a tensor between them cannot hold 8 MiB: a second 20 MiB segment.')
    e.number('holes_mib', 'free holes', _exact(holes, 'MiB'))
    e.number('grew_mib', 'growth of reserved memory', _exact(alloc.reserved / MiB, 'MiB'))


@expectation('08-expandable-segments', how='simulated')
def _(e, gpu):
    e.note('By default each larger tensor needs a new segment and the old ones stay cached; an '
           'expandable segment grows by 20 MiB pages instead.')
    for name, expandable in (('default', False), ('expandable', True)):
        alloc = Allocator(expandable=expandable)
        for mib in range(100, 140, 2):
            alloc.free(alloc.malloc(mib * MiB))
        e.number(f'{name}_largest_mib', f'{name}: largest tensor', _exact(alloc.max_allocated / MiB, 'MiB'))
        e.number(f'{name}_reserved_mib', f'{name}: reserved at the end', _exact(alloc.reserved / MiB, 'MiB'))


@expectation('08-empty-cache', how='simulated')
def _(e, gpu):
    alloc = Allocator()

    def allocate_and_free():
        before = alloc.segments_allocated
        for t in [alloc.malloc(64 * MiB) for _ in range(4)]:
            alloc.free(t)
        return alloc.segments_allocated - before

    first, reused = allocate_and_free(), allocate_and_free()
    reserved = alloc.reserved
    alloc.empty_cache()
    released = (reserved - alloc.reserved) / MiB
    e.note('Reuse needs no new segment; after empty_cache() the next allocations need new ones.')
    e.text('segments', 'new segments: first time, second, after empty_cache()',
           str((first, reused, allocate_and_free())), why=REPLAYED)
    e.number('released_mib', 'released by empty_cache()', _exact(released, 'MiB'))
    e.number('driver_mib', "more free in the driver's view", gpu_models.Estimate(
        released, 0.9 * released, 1.1 * released, 'MiB', 'what cudaFree returned (if no other process '
        'allocates)'), how='model')
    outside = gpu_models.assumed('context_with_kernels_bytes', gpu)
    e.number('outside_mib', "outside PyTorch's segments", gpu_models.Estimate(
        outside.value / MiB, outside.low / MiB, outside.high / MiB, 'MiB',
        "the CUDA context and the kernels that ran, by host (gpu_models.HOST_ASSUMPTIONS); other processes "
        'add theirs'),
        how='model')


@expectation('08-out-of-memory', how='source')
def _(e, gpu):
    e.note(f'Twice the card (about {2 * gpu.memory_bytes / GiB:.0f} GiB on the {gpu.key}) fails at once; the '
           'request took nothing, and the process goes on.')
    e.text('caught', 'the error', ['torch.OutOfMemoryError', 'CUDA out of memory. Tried to allocate'],
           why=f'TORCH_CHECK_WITH(OutOfMemoryError, ...) in malloc, {ALLOCATOR}')
    e.number('allocated_change', 'change of allocated memory', gpu_models.Estimate(
        0, 0, 0, 'B', f'a block exists only once cudaMalloc succeeds (alloc_block, {ALLOCATOR})'))
    e.number('new_ooms', 'change of num_ooms', gpu_models.Estimate(
        1, 1, 1, 'error(s)', f'stats.num_ooms += 1 before the error is raised ({ALLOCATOR})'))


@expectation('08-fixes-on-gpu', how='model')
def _(e, gpu):
    autocast = DEPTH * 9 * N * D * 2 + 2 * (2 * DEPTH - 1) * 4 * D * D + N * D * 4   # exercise 1's count
    e.note("Each fix lowers the baseline's peak and zeroed gradients raise it, as on the CPU.")
    e.number('baseline_kib', 'baseline', _peak_kib(ACTS, BUFFER, 'the activations'))
    e.number('micro_batches_kib', '4 micro-batches', _peak_kib(GRADS + ACTS // 4, BUFFER // 4,
                                                               'gradients + 1/4 of activations'))
    e.number('zeroed_grads_kib', 'zero_grad(set_to_none=False)', _peak_kib(GRADS + ACTS, BUFFER,
                                                                           'gradients + activations'))
    e.number('autocast_kib', 'autocast bfloat16', _peak_kib(autocast, BUFFER // 2, 'what autocast saves'))
    e.number('checkpointing_kib', 'checkpointing', _peak_kib(GRADS * 5 // 6 + 8 * N * D * 4, BUFFER,
                                                             "5 blocks' gradients + 1 block redone"))


# What one allocation's events carry in a snapshot (torch/csrc/cuda/Module.cpp, THCPModule_memorySnapshot):
# a dict of action, addr, size, stream, time_us and frames, the Python stack of the alloc (and, with the
# default context='all', one stack shared by its free_requested and free_completed: free_block passes the
# free's context). py_symbolize (torch/csrc/profiler/python/combined_traceback.cpp) makes one dict per
# distinct frame and one list per distinct stack, and pickle writes a shared object once, then a 2-5 byte
# reference to it: so a stack of 30 frames costs its 30 references, not 30 frames' text.
KERNEL_FRAMES = (28, 20, 40)   # frames of a Jupyter kernel's own stack below a cell (ipykernel 6-7, asyncio)
SITE_FRAMES = (4, 2, 8)        # frames of the lesson and of torch.nn above it, per place that allocates


class _SmallBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.up, self.act, self.down = nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(self.act(self.up(x)))


# Tensors one training step of the small model allocates, by phase: count_step_allocations() on a CPU
# (tests/test_08_gpu_memory.py counts them again; a count takes seconds, too long for the lesson).
STEP_ALLOCATIONS = {'forward': 27, 'backward': 51, 'optimizer': 24}


def _step_allocations():
    return dict(STEP_ALLOCATIONS)


def count_step_allocations():
    """Tensors (storages) one training step of the small model allocates, by phase: counted on this CPU
    with a TorchDispatchMode that sees every operation's outputs, in the second and third steps (Adam's
    state exists), with Adam's foreach path, CUDA's default (torch/optim/adam.py)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class NewStorages(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []                                   # keep them: a freed storage's id may return

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            known = {id(s) for s in self.seen}               # and the inputs' storages: a view allocates nothing
            known |= {id(t.untyped_storage()) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor) and id(t.untyped_storage()) not in known:
                    self.seen.append(t.untyped_storage())
                    known.add(id(self.seen[-1]))
            return out

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = nn.Sequential(*[_SmallBlock(D) for _ in range(DEPTH)])
        x, y = torch.randn(N, D), torch.randn(N, D)
    opt = torch.optim.Adam(net.parameters(), foreach=True)
    counts = {'forward': 0, 'backward': 0, 'optimizer': 0}
    for step in range(3):
        modes = {phase: NewStorages() for phase in counts}
        with modes['forward']:
            loss = (net(x) - y).square().mean()
        with modes['backward']:
            loss.backward()
        with modes['optimizer']:
            opt.step()
        opt.zero_grad()
        if step:                                              # the first step makes Adam's state
            for phase, mode in modes.items():
                counts[phase] += len(mode.seen)
    return {phase: n // 2 for phase, n in counts.items()}


def snapshot_bytes(steps=2, kernel_frames=KERNEL_FRAMES[0], site_frames=SITE_FRAMES[0], backward_stacks=False):
    """(bytes, events) of the pickle ``_dump_snapshot`` writes after ``steps`` steps of the small model,
    built as THCPModule_memorySnapshot builds it (shared frame dicts, one list per stack) and pickled
    here. The backward pass allocates on the autograd engine's CUDA thread, which has no Python stack
    (``backward_stacks=True`` gives it one, for the upper end)."""
    import pickle
    kernel = [{'name': f'frame_{i}', 'filename': f'/usr/lib/python3/site-packages/ipykernel/module_{i}.py',
               'line': 100 + i} for i in range(kernel_frames)]
    sites = {}

    def stack(site):                                  # a new list per stack, of shared frame dicts
        if site not in sites:
            sites[site] = [{'name': f'{site[0]}_{j}', 'filename': '/tmp/ipykernel_1/1234567890.py', 'line': 10 + j}
                           for j in range(site_frames)] + kernel
        return list(sites[site]) if site[0] != 'backward' or backward_stacks else []
    trace, t, addr = [], 1_765_000_000_000_000, 0x7F3A_0000_0000
    for _ in range(steps):
        for phase, n in _step_allocations().items():
            for i in range(n):
                allocated, freed, addr = stack((phase, i)), stack((phase, i)), addr + 512 * 1024
                for action, frames in (('alloc', allocated), ('free_requested', freed), ('free_completed', freed)):
                    t += 7
                    trace.append({'frames': frames, 'action': action, 'addr': addr, 'size': 256 * 1024,
                                  'stream': 0, 'time_us': t})
    block = {'address': addr, 'size': 512, 'requested_size': 256, 'state': 'inactive', 'frames': []}
    segments = [{'device': 0, 'address': addr, 'total_size': 2 * MiB, 'allocated_size': 0, 'active_size': 0,
                 'requested_size': 0, 'stream': 0, 'segment_type': 'small', 'segment_pool_id': (0, 0),
                 'is_expandable': False, 'frames': [], 'blocks': [dict(block) for _ in range(10)]} for _ in range(8)]
    snapshot = {'segments': segments, 'device_traces': [trace], 'allocator_settings': {}, 'external_annotations': []}
    return len(pickle.dumps(snapshot)), len(trace)


@functools.lru_cache(maxsize=None)
def snapshot_bytes_per_event():
    """The snapshot's bytes per event, as an Estimate: the stacks' depths as assumed, and between the
    shallowest and the deepest (then with the backward pass's events given stacks too)."""
    def per_event(**kw):
        size, events = snapshot_bytes(**kw)
        return size / events
    return gpu_models.Estimate(per_event(), per_event(kernel_frames=KERNEL_FRAMES[1], site_frames=SITE_FRAMES[1]),
                               per_event(kernel_frames=KERNEL_FRAMES[2], site_frames=SITE_FRAMES[2],
                                         backward_stacks=True), 'B/event',
                               f'stacks of {KERNEL_FRAMES[0] + SITE_FRAMES[0]} frames '
                               f'({KERNEL_FRAMES[1] + SITE_FRAMES[1]} to {KERNEL_FRAMES[2] + SITE_FRAMES[2]}), each '
                               'frame and stack pickled once and then referenced: built and pickled on this CPU')


@expectation('08-memory-snapshot', how='model')
def _(e, gpu):
    per_step = sum(_step_allocations().values())                   # forward, backward, Adam's temporaries
    events = 2 * per_step * 3                                       # alloc, free_requested, free_completed
    per_event = snapshot_bytes_per_event()
    e.note("Some hundreds of events; the level peaks near a step's activations. The file is small: "
           f'about {per_event.value:.0f} B an event, since each frame and each stack is pickled once and then '
           'only referenced.')
    e.text('actions', 'kinds of events', ['alloc', 'free_requested', 'free_completed'], how='source',
           why='the actions of a trace entry (torch/cuda/memory.py)')
    e.number('events', 'events', gpu_models.Estimate(
        events, 0.9 * events, 1.25 * events, 'events',
        f'{per_step} tensors a step, counted on a CPU (Adam foreach, as on CUDA), x 3 events x 2 steps; '
        "-10% to +25% for CUDA kernels' own temporaries, the segments' events and the frees of the gradients "
        'an earlier cell left'), how='simulated')
    e.number('max_level_kib', 'most allocated while recording', _peak_kib(ACTS, BUFFER, 'the activations'))
    e.number('segments', 'segments', gpu_models.Estimate(
        8, 4, 30, 'segments', '2 MiB segments for ~7 MB of tensors, + cuBLAS workspaces'),
        not_judged="the segments held at the dump depend on every tensor earlier cells keep (and a reader's "
                   "own), and on cuBLAS's workspace per stream: no count of this cell predicts them")
    e.number('bytes_per_event', 'snapshot file, bytes per event', per_event, how='simulated')


@expectation('08-memory-summary', how='source')
def _(e, gpu):
    alloc = Allocator()
    alloc.free(alloc.malloc(100 * MiB))                              # a tensor of 100 MiB, freed
    e.note('memory_summary() prints memory_stats() as a table; max_memory_reserved() keeps the peak of the '
           "reserved memory: the freed tensor's segment stays reserved.")
    e.text('summary', 'memory_summary(abbreviated=True)',
           ['PyTorch CUDA memory summary, device ID', 'CUDA OOMs:', 'cudaMalloc retries:',
            'Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed', 'GPU reserved memory',
            'Non-releasable memory'], why='the lines memory_summary writes (torch/cuda/memory.py)')
    e.number('peak_reserved_mib', 'rise of max_memory_reserved()', _exact(alloc.reserved / MiB, 'MiB'),
             how='simulated')
