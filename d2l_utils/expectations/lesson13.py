"""Lesson 13's GPU-only cells: what the job at a GPU's size is expected to show on the H200 and the T4.

A step of the lesson's GPU job is counted by hand from its shapes: each kernel it runs, with the
FLOPs of the matrix products and the bytes every kernel reads and writes (float32, or under CUDA's
16-bit autocast), the operations the host launches, the host's work on the data path and the
calls that make it wait. ``tests/test_13_make_a_training_job_fast.py`` checks the float32 count
against the operations PyTorch runs for the lesson's model (recorded at small sizes) and against
``FlopCounterMode``.

Each version's time per step then follows from ``gpu_models``: the roofline of every kernel from
the datasheet table, ``ASSUMPTIONS['launch_s']`` for every operation the host launches, and, while
the loop waits for the GPU at every step, the host's own work added on top; the host's speed at
the data path and a kernel's cost beyond its roofline come from ``ASSUMPTIONS`` too. Every range
is the model evaluated at each corner of the assumptions' ranges (``gpu_models.spread``), so that
a ratio of two times keeps one machine's speeds in both.
"""
import collections
import functools

from .. import gpu_models
from . import expectation

# The lesson's gpu_job (a test checks it against the notebook) and its corpus: 4096 lines of 257
# characters and a newline, the whole file read by every __getitem__ of the loop as written.
JOB = dict(vocab=17, d=512, depth=6, heads=8, seq=256, batch=64)
CORPUS_LINES = 4096

_BYTES = {'f32': 4, 'act': 4, 'i64': 8, 'bool': 1}      # 'act': 2 under 16-bit autocast

# One kernel: its name, FLOPs, the tensors it reads and writes as (elements, kind) pairs, and
# 'autocast' for a cast that only autocast adds. Kind 'act' is an activation that a matrix
# product makes or takes: float32, or 2 bytes under 16-bit autocast.
Kernel = collections.namedtuple('Kernel', 'name flops tensors only', defaults=(0, (), None))


def _cast(n, to='act'):
    """Autocast's copy of ``n`` elements into the other precision (float32 <-> 16-bit)."""
    return Kernel('_to_copy', 0, ((n, 'f32' if to == 'act' else 'act'), (n, to)), 'autocast')


def _linear(n, fan_in, fan_out, bias=True):
    """``nn.Linear`` on n rows: autocast's casts of its weights, then the product (addmm, or mm)."""
    cast = [_cast(fan_in * fan_out)] + ([_cast(fan_out)] if bias else [])
    w = [(fan_in * fan_out, 'act')]
    if bias:
        return cast + [Kernel('addmm', 2 * n * fan_in * fan_out, ((fan_out, 'act'), (n * fan_in, 'act'), *w,
                                                                  (n * fan_out, 'act')))]
    return cast + [Kernel('mm', 2 * n * fan_in * fan_out, ((n * fan_in, 'act'), *w, (n * fan_out, 'act')))]


def _linear_backward(n, fan_in, fan_out, bias=True, input_cast=True):
    """The backward of ``_linear``: the input's gradient, the weight's, the bias's, and autocast's
    casts of the gradients back to the float32 of the parameters (and of the input, if cast)."""
    f = 2 * n * fan_in * fan_out
    out = [Kernel('mm', f, ((n * fan_out, 'act'), (fan_in * fan_out, 'act'), (n * fan_in, 'act')))]
    out += [_cast(n * fan_in, 'f32')] if input_cast else []
    out += [Kernel('mm', f, ((n * fan_out, 'act'), (n * fan_in, 'act'), (fan_in * fan_out, 'act'))),
            _cast(fan_in * fan_out, 'f32')]
    if bias:
        out += [Kernel('sum', 0, ((n * fan_out, 'act'), (fan_out, 'act'))), _cast(fan_out, 'f32')]
    return out


def _layer_norm(n, d):
    """``nn.LayerNorm`` over d features of n rows: the normalised rows, and each row's mean and 1/std."""
    return [Kernel('native_layer_norm', 0, ((n * d, 'f32'), (2 * d, 'f32'), (n * d, 'f32'), (2 * n, 'f32')))]


def _layer_norm_backward(n, d):
    """Its backward pass: reads the gradient, the input, the statistics and the weights."""
    return [Kernel('native_layer_norm_backward', 0, ((2 * n * d, 'f32'), (2 * n, 'f32'), (2 * d, 'f32'),
                                                      (n * d, 'f32'), (2 * d, 'f32')))]


def sdpa_backend(gpu):
    """The attention kernel PyTorch's SDPA picks for the lesson's job on ``gpu`` (16-bit, head size 64,
    causal, training), by ``priority_order`` and ``check_prefer_cudnn_attention`` in
    ``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp``: (the op name's part, the reason, whether
    the GPU alone decides). Compute capability 9.0 and 10.x put cuDNN attention first when the cuDNN
    loaded at run time is newer than 9.15.0 (the wheels built for CUDA 13; those for CUDA 12 ship an
    older one, and then flash comes first); flash attention needs 8.0 or later; before that,
    memory-efficient attention."""
    major, _ = gpu.capability
    if major in (9, 10):
        return ('cudnn', f'sm{major}0: cuDNN attention first where the cuDNN loaded is newer than 9.15.0, '
                'else flash (check_prefer_cudnn_attention, sdp_utils.cpp)', False)
    if major >= 8:
        return ('flash', f'sm{major}{gpu.capability[1]}: flash attention first (priority_order, sdp_utils.cpp)', True)
    return ('efficient', f'sm{major}{gpu.capability[1]}: no flash attention before sm80; memory-efficient '
            'attention (sdp_utils.cpp)', True)


def _attention(j, nd, copy):
    """Attention in one operation (the lesson's sdpa switch, ``is_causal=True``), forward and backward:
    cuDNN's, flash or memory-efficient attention (``sdpa_backend``), modelled alike as a flash kernel. The causal kernel skips the blocks above the diagonal: about half
    of the two products' FLOPs forward, and of the five backward (it computes the scores again); it reads q,
    k, v (and forward's output, its gradient and each row's log-sum-exp backward), never the T x T scores."""
    t, rows = j['seq'], j['batch'] * j['heads'] * j['seq']
    a = 2 * j['batch'] * j['heads'] * t * t * (j['d'] // j['heads'])     # one T x T x d/heads product
    forward = [Kernel('_flash_attention_forward', a, ((3 * nd, 'act'), (nd, 'act'), (rows, 'f32')))]
    backward = [Kernel('_flash_attention_backward', 5 * a // 2,
                       ((5 * nd, 'act'), (rows, 'f32'), (2 * nd, 'f32'), (3 * nd, 'act')))]   # dq summed in float32
    return forward, backward


def _block(j, sdpa=False):
    """One transformer block, forward then backward, as the lesson's gpt.py runs it (``sdpa``: with
    attention in one operation)."""
    n, d, t = j['batch'] * j['seq'], j['d'], j['seq']
    s = j['batch'] * j['heads'] * t * t                  # the attention scores: T x T per head
    a = 2 * s * (d // j['heads'])                        # FLOPs of one of attention's two products
    nd, copy = n * d, lambda k: Kernel('clone', 0, ((k, 'act'), (k, 'act')))
    attention = [copy(nd), copy(nd),                                    # q and k^T made contiguous
                 Kernel('bmm', a, ((2 * nd, 'act'), (s, 'act'))),
                 Kernel('div', 0, ((s, 'act'), (s, 'act'))),
                 Kernel('masked_fill', 0, ((s, 'act'), (t * t, 'bool'), (s, 'act'))),
                 Kernel('_softmax', 0, ((s, 'act'), (s, 'f32'))),         # CUDA autocast: softmax in float32
                 _cast(s), copy(nd),                                     # the weights to 16 bits; v contiguous
                 Kernel('bmm', a, ((s, 'act'), (nd, 'act'), (nd, 'act')))]
    attention_backward = [Kernel('bmm', a, ((s, 'act'), (nd, 'act'), (nd, 'act'))),      # the gradient of v
                          Kernel('bmm', a, ((2 * nd, 'act'), (s, 'act'))),                # of the weights
                          _cast(s, 'f32'),
                          Kernel('_softmax_backward_data', 0, ((2 * s, 'f32'), (s, 'act'))),
                          Kernel('masked_fill', 0, ((s, 'act'), (t * t, 'bool'), (s, 'act'))),
                          Kernel('div', 0, ((s, 'act'), (s, 'act'))),
                          Kernel('bmm', a, ((nd, 'act'), (s, 'act'), (nd, 'act'))),      # of k
                          Kernel('bmm', a, ((s, 'act'), (nd, 'act'), (nd, 'act')))]      # of q
    if sdpa:
        attention, attention_backward = _attention(j, nd, copy)
    forward = [*_layer_norm(n, d), _cast(nd), *_linear(n, d, 3 * d), *attention,
               copy(nd), *_linear(n, d, d),                      # heads put back together
               Kernel('add', 0, ((nd, 'f32'), (nd, 'act'), (nd, 'f32'))),
               *_layer_norm(n, d), _cast(nd), *_linear(n, d, 4 * d),
               Kernel('gelu', 0, ((4 * nd, 'act'), (4 * nd, 'act'))),
               *_linear(n, 4 * d, d),
               Kernel('add', 0, ((nd, 'f32'), (nd, 'act'), (nd, 'f32')))]
    backward = [_cast(nd), *_linear_backward(n, 4 * d, d, input_cast=False),
                Kernel('gelu_backward', 0, ((8 * nd, 'act'), (4 * nd, 'act'))),
                *_linear_backward(n, d, 4 * d), *_layer_norm_backward(n, d),
                Kernel('add', 0, ((2 * nd, 'f32'), (nd, 'f32'))),
                _cast(nd), *_linear_backward(n, d, d, input_cast=False), copy(nd),
                *attention_backward,
                Kernel('stack', 0, ((3 * nd, 'act'), (3 * nd, 'act'))), copy(3 * nd),
                *_linear_backward(n, d, 3 * d), *_layer_norm_backward(n, d),
                Kernel('add', 0, ((2 * nd, 'f32'), (nd, 'f32')))]
    return forward, backward


def _outside(vocab, d, seq, batch, parts=False):
    """The kernels outside the blocks: embeddings, the head and the loss, and their backward passes
    (in three lists, as a step runs them around the blocks, with ``parts``)."""
    n, t, v = batch * seq, seq, vocab
    embed = [Kernel('embedding', 0, ((v * d, 'f32'), (n, 'i64'), (n * d, 'f32'))),
             Kernel('embedding', 0, ((t * d, 'f32'), (t, 'i64'), (t * d, 'f32'))),
             Kernel('add', 0, ((n * d, 'f32'), (t * d, 'f32'), (n * d, 'f32')))]
    head = [*_layer_norm(n, d), _cast(n * d), *_linear(n, d, v, bias=False),
            Kernel('_log_softmax', 0, ((n * v, 'act'), (n * v, 'act'))),
            Kernel('nll_loss_forward', 0, ((n * v, 'act'), (n, 'i64'), (2, 'act')))]
    head_backward = [Kernel('ones_like', 0, ((1, 'act'), (1, 'act'))),
                     Kernel('nll_loss_backward', 0, ((2, 'act'), (n * v, 'act'), (n, 'i64'), (n * v, 'act'))),
                     Kernel('_log_softmax_backward_data', 0, ((2 * n * v, 'act'), (n * v, 'act'))),
                     Kernel('mm', 2 * n * d * v, ((n * v, 'act'), (n * d, 'act'), (v * d, 'act'))),
                     _cast(v * d, 'f32'),
                     Kernel('mm', 2 * n * d * v, ((n * v, 'act'), (v * d, 'act'), (n * d, 'act'))),
                     _cast(n * d, 'f32'), *_layer_norm_backward(n, d)]
    embed_backward = [Kernel('sum', 0, ((n * d, 'f32'), (t * d, 'f32'))),
                      Kernel('embedding_dense_backward', 0, ((t * d, 'f32'), (t, 'i64'), (t * d, 'f32'))),
                      Kernel('embedding_dense_backward', 0, ((n * d, 'f32'), (n, 'i64'), (v * d, 'f32')))]
    return (embed, head + head_backward, embed_backward) if parts else embed + head + head_backward + embed_backward


@functools.lru_cache(maxsize=None)
def step_kernels(vocab, d, depth, heads, seq, batch, sdpa=False):
    """The kernels of one forward and backward pass of the lesson's GPT, in order, as a tuple of
    ``Kernel``s; the ones marked 'autocast' run only under 16-bit autocast. ``sdpa``: attention in one
    operation."""
    forward, backward = _block(dict(d=d, heads=heads, seq=seq, batch=batch), sdpa)
    embed, head, embed_backward = _outside(vocab, d, seq, batch, parts=True)
    return tuple(embed + forward * depth + head + backward * depth + embed_backward)


def kernel_bytes(kernel, autocast=False):
    """The bytes ``kernel`` reads and writes, each tensor once; 16-bit activations under autocast."""
    return sum(n * (2 if kind == 'act' and autocast else _BYTES[kind]) for n, kind in kernel.tensors)


def parameters(job):
    """The model's parameters, counted as lesson 13 counts them by hand."""
    d, depth = job['d'], job['depth']
    return (job['vocab'] + job['seq']) * d + depth * (12 * d * d + 13 * d) + 2 * d + job['vocab'] * d


# ---- what a kernel costs, and a step of each version ----
# The assumptions the step model uses, from gpu_models.ASSUMPTIONS: the shares of the peaks reached,
# a launch, a wait, the host's speed at the data path as written, a kernel's cost beyond its roofline.
_ASSUMED = ('matmul_share', 'memory_share', 'launch_s', 'copy_latency_s', 'text_bytes_per_s', 'python_char_s',
            'kernel_gap_s')


def _ranges(gpu):
    """Every assumption the step model uses, for ``gpu``'s host (``gpu_models.assumed``): name -> (value, low, high)."""
    return {k: tuple(gpu_models.assumed(k, gpu)[:3]) for k in _ASSUMED}


def estimate(f, unit, why, gpu, extra=None):
    """``f(p)`` with every assumption (for ``gpu``'s host) at its value, and its least and greatest over
    every corner of their ranges (and of ``extra``'s, name -> (value, low, high)): ``gpu_models.spread``
    of ``f`` of a dict, name -> value."""
    ranges = {**_ranges(gpu), **(extra or {})}
    return gpu_models.spread(lambda *x: f(dict(zip(ranges, x))), ranges.values(), unit, why)


def _roofline(kernels, gpu, dtype, autocast, m, s):
    """The GPU time of ``kernels`` by the roofline, each at the reachable shares ``m`` (matrix
    products) and ``s`` (memory), without a launch floor (they run queued), and how many kernels."""
    total = sum(gpu_models.roofline_seconds(k.flops, kernel_bytes(k, autocast), gpu, dtype, m, s) for k in kernels)
    return total, len(kernels)


@functools.lru_cache(maxsize=None)
def _products(sdpa=False):
    """The matrix products of one block, forward and backward (with ``sdpa``, attention's kernels)."""
    forward, backward = _block(JOB, sdpa)
    return tuple(k for k in forward + backward if k.flops)


def _fused_bytes(sdpa=False):
    """The bytes a compiled block's fused kernels move: what its products take and make, once more,
    and 13 passes over the float32 residual stream."""
    return sum(kernel_bytes(k, True) for k in _products(sdpa)) + 13 * 4 * JOB['batch'] * JOB['seq'] * JOB['d']


@functools.lru_cache(maxsize=None)
def gpu_work(precision, gpu_key, m, s, sdpa=False):
    """A forward and backward pass of the GPU job on ``gpu_key``: (seconds by the roofline, kernels,
    each an operation the host calls). ``precision``: 'float32', 'tf32', '16-bit' (autocast; float16 on a
    GPU without bfloat16) or 'compiled' (16-bit, each block compiled); ``sdpa``: attention in one operation."""
    if precision not in ('float32', 'tf32', '16-bit', 'compiled'):
        raise ValueError(f"precision must be 'float32', 'tf32', '16-bit' or 'compiled', got {precision!r}")
    gpu = gpu_models.DATASHEET[gpu_key]
    kernels = step_kernels(**JOB, sdpa=sdpa)
    if precision in ('float32', 'tf32'):
        dtype = 'tf32' if precision == 'tf32' and 'tf32' in gpu.peak_flops else 'float32'
        return _roofline([k for k in kernels if k.only is None], gpu, dtype, False, m, s)
    low = 'bfloat16' if 'bfloat16' in gpu.peak_flops else 'float16'
    if precision == '16-bit':
        return _roofline(kernels, gpu, low, True, m, s)
    # Compiled blocks: the products stay (cuBLAS); between them Inductor fuses the rest, so each tensor
    # a product takes or makes is written once and read once more, and the float32 residual stream
    # (batch x seq x d) is read or written 13 times a block, forward and backward. The rest stays eager.
    products = _products(sdpa)
    mm, _ = _roofline(products, gpu, low, True, m, s)
    rest = _outside(JOB['vocab'], JOB['d'], JOB['seq'], JOB['batch'])           # embeddings, head, loss
    outside, n_out = _roofline(rest, gpu, low, True, m, s)
    block = mm + _fused_bytes(sdpa) / (s * gpu.memory_bytes_per_s)
    return JOB['depth'] * block + outside, JOB['depth'] * 2 * len(products) + n_out   # a fused kernel per product


def step_bytes(precision, sdpa=False):
    """The bytes a forward and backward pass moves: 'float32', '16-bit' or 'compiled' (``sdpa``: attention
    in one operation)."""
    kernels = step_kernels(**JOB, sdpa=sdpa)
    if precision == 'float32':
        return sum(kernel_bytes(k) for k in kernels if k.only is None)
    if precision == '16-bit':
        return sum(kernel_bytes(k, True) for k in kernels)
    outside = _outside(JOB['vocab'], JOB['d'], JOB['seq'], JOB['batch'])
    block = sum(kernel_bytes(k, True) for k in _products(sdpa)) + _fused_bytes(sdpa)
    return JOB['depth'] * block + sum(kernel_bytes(k, True) for k in outside)


def optimizer_work(fused, gpu, s):
    """AdamW's update of every parameter: (seconds, operations). The foreach default runs 8
    operations over all the parameters, 21 float32 passes in all (torch/optim/adamw.py's
    _multi_tensor_adam); fused=True reads parameter, gradient and both states once and writes three."""
    passes, ops = (7, 1) if fused else (21, 8)
    return passes * 4 * parameters(JOB) / (s * gpu.memory_bytes_per_s), ops


# The versions of 13-gpu-versions and 13-gpu-compile: (fixes, precision).
VERSIONS = {
    'as written': ((), 'float32'),
    '+ data encoded once': (('data',), 'float32'),
    '+ no host waits': (('data', 'waits'), 'float32'),
    '+ TF32 matmuls': (('data', 'waits'), 'tf32'),
    '16-bit autocast, not TF32': (('data', 'waits'), '16-bit'),
    '+ fused AdamW': (('data', 'waits', 'fused'), '16-bit'),
    '+ attention in one op': (('data', 'waits', 'fused', 'sdpa'), '16-bit'),
    '+ torch.compile (blocks)': (('data', 'waits', 'fused', 'sdpa'), 'compiled'),
    '+ CUDA Graphs': (('data', 'waits', 'fused', 'sdpa', 'graphs'), 'compiled'),
}
LOOP_OPS = 8          # the loop's own operations a step: the batch's copies, mask, positions, the loss stored


def data_seconds(fixes, p):
    """The host's data path for one batch: the loop as written reads the whole corpus file and
    encodes one line per sample; encoded once, a batch is drawn in Python and indexed."""
    b = JOB['batch']
    if 'data' in fixes:
        return b * p['python_char_s'] + 4 * p['launch_s']
    file_bytes = CORPUS_LINES * (JOB['seq'] + 2)                 # seq + 1 characters and a newline
    return b * (file_bytes / p['text_bytes_per_s'] + (JOB['seq'] + 1) * p['python_char_s'])


def _version(version):
    """(fixes, precision) of a version of the GPU table."""
    if version not in VERSIONS:
        raise ValueError(f'version must be one of {list(VERSIONS)}, got {version!r}')
    return VERSIONS[version]


def waits_per_step(version):
    """The calls a step makes the host wait at, by reading the loops (13-gpu-evidence says which)."""
    fixes, _ = _version(version)
    if 'waits' in fixes:
        return 0
    return 5 if version == 'as written' else 6       # train() also writes each loss into a CUDA tensor


Step = collections.namedtuple('Step', 'busy gpu host data waits resume')


def _parts(version, gpu, p):
    """A step of ``version`` under the assumptions ``p``: the seconds kernels run, the GPU's seconds,
    the host's (its operations), the data path's, the waits, and what each wait costs the GPU after it."""
    fixes, precision = _version(version)
    busy, kernels = gpu_work(precision, gpu.key, p['matmul_share'], p['memory_share'], 'sdpa' in fixes)
    opt, opt_ops = optimizer_work('fused' in fixes, gpu, p['memory_share'])
    waits, ops, bw = waits_per_step(version), kernels, p['memory_share'] * gpu.memory_bytes_per_s
    if precision in ('16-bit', 'compiled') and 'bfloat16' not in gpu.peak_flops:
        # float16 needs the GradScaler: its pass over the gradients and, unless AdamW is fused, a wait
        # for found_inf (.item() in _maybe_opt_step, torch/amp/grad_scaler.py)
        opt, opt_ops, waits = opt + 8 * parameters(JOB) / bw, opt_ops + 3, waits + ('fused' not in fixes)
    gpu_s = busy + opt + (kernels + opt_ops) * p['kernel_gap_s']
    if 'graphs' in fixes:                      # one replay per block and pass; the first input copied in
        ops -= JOB['depth'] * (2 * len(_products('sdpa' in fixes)) - 2)
        gpu_s += 2 * 8 * JOB['batch'] * JOB['seq'] * JOB['d'] / bw
    host = (ops + opt_ops + LOOP_OPS) * p['launch_s']
    resume = p['copy_latency_s'] + opt_ops * p['launch_s']     # a wait, then the optimizer's launches
    return Step(busy + opt, gpu_s, host, data_seconds(fixes, p), waits, resume)


def step(version, gpu, p):
    """The seconds per step of ``version`` on ``gpu`` under the assumptions ``p``."""
    t = _parts(version, gpu, p)
    if 'waits' in VERSIONS[version][0]:       # the host runs ahead: the slower of the two sets the pace
        return max(t.gpu, t.host + t.data) + t.waits * t.resume
    return t.data + t.waits * p['copy_latency_s'] + max(t.gpu, t.host)   # the data path, then the work


def busy_share(version, gpu, p, steps):
    """The share of ``steps`` profiled steps during which a kernel ran; the gaps between kernels count
    as busy in the share ``p['gap_busy']`` (a trace's kernel spans may include their start and end)."""
    t = _parts(version, gpu, p)
    kernel_time = t.busy + p.get('gap_busy', 0) * (t.gpu - t.busy)
    tail = max(0.0, t.gpu - t.host)           # the last step's GPU work after the host's last label
    return (steps * kernel_time - tail) / (steps * step(version, gpu, p) - tail)


def _central(f, gpu):
    """``f(p)`` with every assumption (for ``gpu``'s host) at its value."""
    return f({k: v for k, (v, _, _) in _ranges(gpu).items()})


def _ms(version, gpu, why):
    return estimate(lambda p: 1e3 * step(version, gpu, p), 'ms/step', why, gpu)


# ---- the four cells ----
PROFILED_STEPS = 8          # 13-gpu-evidence profiles WARMUP + 5 steps
RANGES = ("Ranges: the model at every corner of its assumptions (shares of the datasheets' peaks reached, "
          "a launch's cost, the host's speed).")
SHARES = 'range: the shares of the peaks reached'


@expectation('13-gpu-evidence', how='model')
def _evidence(e, gpu):
    data = _central(lambda p: data_seconds((), p), gpu)
    work = _central(lambda p: _parts('+ no host waits', gpu, p).gpu, gpu)
    e.note('Six waits a step without the fixes (the loop as written has five), none with them; as written the '
           'GPU idles while the host reads.')
    e.number('waits_as_written', 'waits a step, as written',
             gpu_models.Estimate(6, 6, 6, 'waits',
                                 '4 copies with non_blocking=False (memcpy_and_sync, '
                                 'aten/src/ATen/native/cuda/Copy.cu), .item(), losses[step] = a float '
                                 '(torch/csrc/autograd/python_variable_indexing.cpp)'),
             how='source')
    e.number('waits_fixed', 'waits a step, fixed',
             gpu_models.Estimate(0, 0, 0, 'waits', 'pinned, non_blocking=True: a cudaMemcpyAsync '
                                 '(aten/src/ATen/native/cuda/Copy.cu)'), how='source')
    gaps = {'gap_busy': (0, 0, 1)}
    e.number('busy_as_written', 'GPU busy, as written',
             estimate(lambda p: busy_share('as written', gpu, p, PROFILED_STEPS), 'of the time',
                      f'host {1e3 * data:.0f} ms, then GPU {1e3 * work:.0f} ms; range: host speed', gpu, gaps))
    e.number('busy_fixed', 'GPU busy, fixed',
             estimate(lambda p: busy_share('+ no host waits', gpu, p, PROFILED_STEPS), 'of the time',
                      'range: 1-5 µs between kernels, idle or busy', gpu, gaps))


@expectation('13-gpu-versions', how='model')
def _versions(e, gpu):
    t4 = 'bfloat16' not in gpu.peak_flops
    data = _central(lambda p: 1e3 * data_seconds((), p), gpu)
    f32 = _central(lambda p: 1e3 * step('+ no host waits', gpu, p), gpu)
    e.note('The data path, then float32 products set the pace; TF32 and 16-bit cut those (the T4 has no TF32); '
           'attention in one operation no longer writes the T x T scores.')
    e.number('as_written_ms', "'as written'", _ms('as written', gpu,
             f'host {data:.0f} ms, then GPU {f32:.0f} ms; range: host speed'))
    e.number('data_ms', "'+ data encoded once'", _ms('+ data encoded once', gpu,
             'float32 step, 6 short waits; ' + SHARES))
    e.number('waits_ms', "'+ no host waits'", _ms('+ no host waits', gpu, 'float32 step; ' + SHARES))
    e.number('tf32_ms', "'+ TF32 matmuls'", _ms('+ TF32 matmuls', gpu,
             'no TF32 on Turing: as the row before' if t4 else 'TF32 products; ' + SHARES))
    e.number('autocast_ms', "'16-bit autocast, not TF32'", _ms('16-bit autocast, not TF32', gpu,
             'float16; the GradScaler waits once a step' if t4 else 'bfloat16; ' + SHARES))
    e.number('fused_ms', "'+ fused AdamW'", _ms('+ fused AdamW', gpu,
             "AdamW's 21 passes become 7" + ('; no GradScaler wait' if t4 else '; ' + SHARES)))
    gb = {sdpa: step_bytes('16-bit', sdpa) / 1e9 for sdpa in (False, True)}
    backend, why, decided = sdpa_backend(gpu)
    e.number('sdpa_ms', "'+ attention in one op'", _ms('+ attention in one op', gpu,
             f"{backend} attention: {gb[True]:.0f} GB moved a step instead of {gb[False]:.0f}; " + SHARES))
    e.text('sdpa_backend', 'the attention operations the profile saw', [backend], why, how='source',
           not_judged=None if decided else 'the cuDNN version PyTorch loads decides: cuDNN or flash')


@expectation('13-gpu-compile', how='model')
def _compile(e, gpu):
    gb = {precision: step_bytes(precision, sdpa=True) / 1e9 for precision in ('16-bit', 'compiled')}
    e.note('Compiled, a block keeps its matrix products and attention kernel and fuses what lies between them '
           '(layer norms, GELU, casts, residual additions). CUDA Graphs add little: the GPU, not the host, sets '
           'the pace.')
    e.note("The first run's compile time depends on the host's CPU cores: it is not predicted.")
    e.detail(RANGES)
    e.number('compiled_ms', "'+ torch.compile (blocks)'", _ms('+ torch.compile (blocks)', gpu,
             f"{gb['compiled']:.0f} GB moved a step instead of {gb['16-bit']:.0f}; " + SHARES))
    e.number('graphs_ms', "'+ CUDA Graphs'", _ms('+ CUDA Graphs', gpu,
             f'the same kernels, {2 * JOB["depth"]} graph replays for the blocks; ' + SHARES))


def speedup(gpu, p):
    """The fastest version's speed-up over the job as written, with one machine's speeds in both."""
    return step('as written', gpu, p) / min(step(v, gpu, p) for v in ('+ torch.compile (blocks)', '+ CUDA Graphs'))


def draw_versions(ax):
    """The expected time per step of every version on each reference GPU: bars at the model's
    value, a black line over its range; log scale."""
    rows = range(len(VERSIONS))
    gpus = gpu_models.reference_gpus()
    for g, (gpu, color) in enumerate(zip(gpus, ('tab:blue', 'tab:orange', 'tab:green'))):
        t = [estimate(lambda p: 1e3 * step(version, gpu, p), 'ms', '', gpu) for version in VERSIONS]
        y = [i + (g - (len(gpus) - 1) / 2) * 0.8 / len(gpus) for i in rows]
        ax.barh(y, [e.value for e in t], height=0.76 / len(gpus), color=color, alpha=0.6, label=gpu.key)
        ax.hlines(y, [e.low for e in t], [e.high for e in t], color='k', lw=1)
    ticks = [3, 10, 30, 100, 300, 1000, 3000]
    ax.set(yticks=rows, yticklabels=list(VERSIONS), xscale='log', xlim=(3, 3000),
           xlabel='expected time per training step (ms, log scale); black: the range',
           title="The job at a GPU's size, one fix at a time")
    ax.set_xticks(ticks, [str(t) for t in ticks], minor=False)     # plain labels: quicker to draw than 10^n
    ax.set_xticks([], minor=True)
    ax.invert_yaxis()
    ax.legend(loc='lower right', bbox_to_anchor=(1, 0.2))     # clear of the bars and of the MODEL mark


@expectation('13-gpu-picture', how='model')
def _picture(e, gpu):
    e.note("The table as a picture: each version's expected time per step on an H100, an H200 and a T4.")
    e.number('speedup', 'the fastest version against the job as written',
             estimate(lambda p: speedup(gpu, p), 'x',
                      'as written over the faster compiled version; range: both at the same corner', gpu))
    e.draw(draw_versions)
