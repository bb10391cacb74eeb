"""Lesson 11's GPU-only cells: what a GPU is expected to show, and how that was derived.

* Overlap (``11-copy-compute-overlap``, ``11-prefetcher``): a copy's time from
  ``gpu_models.copy_seconds``, a product's from ``gpu_models.matmul_seconds``, put together the
  way each cell runs them; the prefetcher's loop by the lesson's own ``pipeline_schedule``,
  drawn as a model timeline.
* The two hazards (``11-pinned-buffer-reuse``, ``11-record-stream``): the behaviour that
  PyTorch's source gives, with the file named.
* Launch overhead (``11-cuda-graph-replay``, ``11-reduce-overhead``, ``11-graphed-callables``):
  the host's cost of an eager operation (``gpu_models.assumed('launch_s', gpu)``: the GPU's host) times the operations,
  against one graph launch while the GPU runs the same kernels back to back; and what a host
  synchronization inside a capture raises, quoted from the source.
* The outputs of ``mode='reduce-overhead'`` (``11-cudagraph-overwritten``): what reading an output
  after the next call raises, and the two ways to keep it, quoted from
  ``torch/_inductor/cudagraph_trees.py``.

The machine's speeds come from ``gpu_models.ASSUMPTIONS``: a launch (``launch_s``), a tiny
kernel's time on the GPU (``kernel_gap_s``, all that such a kernel takes), a cold compile
(``compile_s``). The host work of a compiled call and of a training step, in launches, is
counted below from the lesson's code, as (value, low, high, why). A number that combines
several ranges gets the least and the greatest value of its model over a grid of them
(``gpu_models.spread``, five points a range).
"""
import dataclasses
import functools

from .. import gpu_models
from ..gpu_models import ASSUMPTIONS, Estimate, assumption, spread
from . import expectation

COMPILED_CALL_LAUNCHES = (8, 4, 16,
                          "the host work of a call compiled with mode='reduce-overhead', in eager "
                          "launches: Dynamo's guards, the wrapper, the input copied into the graph, the replay")
# The lesson's training step (eight Linear(64, 64) + ReLU, a Linear(64, 1) head, MSE, SGD) in CUDA
# kernels: forward 9 products, 8 ReLUs, 2 for the loss; backward 1 for the loss, 3 for the head,
# 8 ReLUs, 15 products and 8 bias sums in the body; one foreach update of every parameter.
STEP_KERNELS = 56
BODY_KERNELS = 47          # of those, the body's 16 forward and 31 backward kernels: its two graphs
GRAPHED_LAUNCHES = 13      # body graphed: head, loss and their backward, 2 copies in, 2 replays, the update
STEP_HOST_EAGER = (17, 10, 25, "the rest of an eager step, in launches: 18 module calls, some 40 "
                   "autograd nodes, zero_grad and the optimizer's Python")
STEP_HOST_GRAPHED = (13, 8, 20, "the same, body graphed: 2 module calls, the graphed function's Python, "
                     '8 autograd nodes, zero_grad and the optimizer')


def _spread(f, unit, why, *inputs):
    """``f`` at the inputs' values, with the least and greatest ``f`` over a grid of their ranges
    (``gpu_models.spread``: each input at its value and at 5 points from low to high)."""
    return spread(f, inputs, unit, why, points=5)


def _share(f, unit, *inputs):
    """A ratio of two times: ``_spread``'s range, 5% lower for timing noise and 0.1 higher for what
    the model leaves out (the copy and the computation share the memory; the streams' waits)."""
    s = _spread(f, unit, '', *inputs)
    return Estimate(s.value, 0.95 * s.low, s.high + 0.1, unit,
                    'about half; 5% lower for noise, 0.1 higher for shared memory, waits')


def _copy(nbytes, gpu):
    """gpu_models.copy_seconds of a pinned copy, in ms, with a short reason (the host's link)."""
    (generation, lanes), (_, low, high, _) = gpu_models.host_link(gpu), gpu_models.assumed('pinned_share', gpu)
    link = gpu_models.pcie_bytes_per_s(generation, lanes)
    return dataclasses.replace(gpu_models.copy_seconds(nbytes, gpu).scaled(1e3, 'ms'), why=(
        f'PCIe {generation}.0 x{lanes}: {low:.0%}-{high:.0%} of {link / 1e9:.1f} GB/s, plus a latency'))


def _product(m, n, k, gpu):
    """gpu_models.matmul_seconds of a float32 product, with a short reason."""
    _, low, high, _ = ASSUMPTIONS['matmul_share']
    return dataclasses.replace(gpu_models.matmul_seconds(m, n, k, gpu), why=(
        f'{2 * m * n * k / 1e9:.1f} GFLOP at {low:.0%}-{high:.0%} of {gpu.sustained_flops("float32") / 1e12:.1f} '
        'TFLOP/s sustained'))


def launch(gpu):
    """A launch's host time on the host such a ``gpu`` sits in (``gpu_models.assumed``), in s."""
    return gpu_models.assumed('launch_s', gpu, 's')


TINY_KERNEL_S = assumption('kernel_gap_s', 's')         # a tiny kernel takes its gap alone


def _us(x):
    """'2-20 µs': the range of ``x``, an Estimate in seconds."""
    return f'{x.low * 1e6:.0f}-{x.high * 1e6:.0f} µs'


# ---- overlap: a copy on a side stream while the GPU computes ------------------------------------

def _copy_and_products(c, m):
    """The cell's plan: k products last about one copy; serial is the copy then the products,
    overlapped the longer of the two (both start together, on their own streams)."""
    k = max(1, round(c / m))
    return k, c + k * m, max(c, k * m)


@expectation('11-copy-compute-overlap', how='model')
def _(e, gpu):
    copy, product = _copy(2**27, gpu), _product(2048, 2048, 2048, gpu).scaled(1e3, 'ms')
    run = _copy_and_products                                   # both in ms
    k = run(copy.value, product.value)[0]
    e.note('Copy and products run at once: overlapped takes the longer of the two, about half of serial.')
    e.number('copy_ms', 'a 128 MiB copy from pinned memory', copy)
    e.number('product_ms', 'a 2048 x 2048 float32 product (no TF32)', product)
    e.number('serial_ms', 'serial: the copy, then k products (k = round(copy / product))', _spread(
        lambda c, m: run(c, m)[1], 'ms', f'copy + {k} products', copy, product))
    e.number('overlapped_ms', 'the copy on a side stream during the products', _spread(
        lambda c, m: run(c, m)[2], 'ms', 'the longer of the two', copy, product))
    e.number('overlapped_share', 'overlapped / serial',
             _share(lambda c, m: run(c, m)[2] / run(c, m)[1], 'of serial', copy, product))


# ---- the prefetcher: copy batch i+1 while computing on batch i ----------------------------------

@functools.lru_cache(maxsize=None)                 # the ranges' grids ask for the same points again
def _prefetch_loop(c, m, launch, tiny, batches=16):
    """The cell's two loops, in seconds: (k, plain, prefetched, compute per batch).

    A batch's compute is k products, each with its tanh (a tiny kernel), and a sum; plain
    ``.to(device)`` waits for each copy, then the host launches again; the prefetcher follows
    ``pipeline_schedule``: copies back to back, compute i after copy i and compute i - 1.
    """
    from ..lessons import pipeline_schedule
    k = max(1, round(c / (m + tiny)))
    compute = k * (m + tiny) + tiny
    plain = batches * (c + compute + launch)
    prefetched = pipeline_schedule([c] * batches, [compute] * batches)[1][-1][1]
    return k, plain, prefetched, compute


def _prefetch_inputs(gpu):
    return (gpu_models.copy_seconds(2**24, gpu), gpu_models.matmul_seconds(64, 256, 2**16, gpu),
            launch(gpu), TINY_KERNEL_S)


def _draw_prefetcher(ax):
    """The expected timelines of 16 batches, plain and prefetched, one panel per reference GPU (ms)."""
    from ..lessons import pipeline_schedule
    ax.axis('off')
    ax.set_title('16 batches: copies (blue) and computes (orange), plain and through the Prefetcher')
    gpus = gpu_models.reference_gpus()
    for i, gpu in enumerate(gpus):
        inputs = [x.value for x in _prefetch_inputs(gpu)]
        k, plain, pre, compute = _prefetch_loop(*inputs)
        share, c, compute, plain = pre / plain, 1e3 * inputs[0], 1e3 * compute, 1e3 * plain
        starts = [j * (c + compute) for j in range(16)]
        copies, computes = pipeline_schedule([c] * 16, [compute] * 16)
        sub = ax.inset_axes([0.1, 1 - (i + 1) / len(gpus) + 0.1, 0.89, 0.55 / len(gpus)])
        for y, spans, color in ((2, [(s, c) for s in starts], 'tab:blue'),
                                (2, [(s + c, compute) for s in starts], 'tab:orange'),
                                (1, [(s, t - s) for s, t in copies], 'tab:blue'),
                                (0, [(s, t - s) for s, t in computes], 'tab:orange')):
            sub.broken_barh(spans, (y + 0.1, 0.8), color=color, edgecolor='white', linewidth=0.5)
        sub.set_xlim(0, plain)
        sub.set_yticks([0.5, 1.5, 2.5], ['compute', 'copy', 'plain'])
        sub.set_title(f'{gpu.key}: plain {plain:.1f} ms; Prefetcher {share * plain:.1f} ms ({share:.0%})',
                      fontsize='medium', loc='left')
    sub.set_xlabel('time (ms)')


@expectation('11-prefetcher', how='model')
def _(e, gpu):
    inputs = _prefetch_inputs(gpu)
    k = _prefetch_loop(*(x.value for x in inputs))[0]
    e.note('With the next copy queued on a side stream, a batch costs about one copy, not a copy '
           'plus a compute.')
    e.number('copy_ms', 'a 16 MiB copy from pinned memory', _copy(2**24, gpu))
    e.number('plain_ms', '16 batches, plain .to(device)', _spread(
        lambda *x: 1e3 * _prefetch_loop(*x)[1], 'ms',
        f'16 x (copy, {k} products of {1e6 * inputs[1].value:.0f} µs, a launch)', *inputs))
    e.number('prefetcher_ms', '16 batches through d2l.Prefetcher', _spread(
        lambda *x: 1e3 * _prefetch_loop(*x)[2], 'ms', 'pipeline_schedule of the same steps', *inputs))
    e.number('prefetcher_share', 'Prefetcher / plain',
             _share(lambda *x: _prefetch_loop(*x)[2] / _prefetch_loop(*x)[1], 'of plain', *inputs))
    e.draw(_draw_prefetcher)


# ---- the two hazards -----------------------------------------------------------------------------

@expectation('11-pinned-buffer-reuse', how='source')
def _(e, gpu):
    e.note('A non_blocking copy is only queued: the copy engine reads src later, after the host '
           'refilled it.')
    e.text('received_at_once', 'the mean the GPU received, src refilled at once', '2.0', (
        'aten/src/ATen/native/cuda/Copy.cu: non_blocking queues cudaMemcpyAsync and returns'))
    e.text('received_after_sync', 'the same after copied.synchronize()', '1.0',
           'torch/cuda/streams.py: Event.synchronize returns once the copy has read src')


@expectation('11-record-stream', how='source')
def _(e, gpu):
    e.note('A freed block goes at once to the next tensor on its stream, unless record_stream '
           'named another.')
    source = 'c10/cuda/CUDACachingAllocator.cpp: '
    e.text('without_record', "without record_stream: (b got a's address, the mean read)", ['True', '2.0'],
           source + "free() gives b a's block at once; b's twos land before the sum")
    e.text('with_record', 'with a.record_stream(main): the same', ['False', '1.0'],
           source + 'the block waits for an event on main (stream_uses); a keeps its ones')


COMPILED_UNKNOWN = ("a compiled call's host work (Dynamo's guards, the wrapper, the input copy) is counted as "
                    f'{COMPILED_CALL_LAUNCHES[1]}-{COMPILED_CALL_LAUNCHES[2]} launches, a range no source narrows; '
                    'the eager chain is judged')
STEP_UNKNOWN = ("a step's host work beyond its launches (module calls, autograd's nodes, the optimizer's Python) "
                f'is counted as {STEP_HOST_EAGER[1]}-{STEP_HOST_EAGER[2]} launches eager, '
                f'{STEP_HOST_GRAPHED[1]}-{STEP_HOST_GRAPHED[2]} graphed, ranges no source narrows; the losses are judged')


# ---- launch overhead: CUDA Graphs ----------------------------------------------------------------

def _eager_chain(launch, tiny, ops=40):
    """The eager chain: each operation costs the host a launch and the GPU a tiny kernel; calls
    queue back to back, so a call takes the longer of the two."""
    return ops * max(launch, tiny)


def _replay(launch, tiny, ops=40):
    """One graph launch; the GPU then runs the chain's kernels back to back."""
    return max(launch, ops * tiny)


def eager_why(gpu):
    """How the eager chain's time is derived, with ``gpu``'s host's launch."""
    return f'40 x the longer of a launch ({_us(launch(gpu))} of host time) and a tiny kernel ({_us(TINY_KERNEL_S)})'
SYNC_IN_CAPTURE = 'operation not permitted when stream is capturing'
CAPTURE_INVALIDATED = 'operation failed due to a previous error during capture'


@expectation('11-cuda-graph-replay', how='model')
def _(e, gpu):
    inputs = (launch(gpu), TINY_KERNEL_S)
    e.note('One launch replays the forty kernels, so the host no longer sets the pace; a .item() '
           'inside a capture is refused.')
    e.number('eager_us', 'a call of the eager chain (40 kernels on 1024 numbers)',
             _spread(lambda L, g: 1e6 * _eager_chain(L, g), 'µs', eager_why(gpu), *inputs))
    e.number('replay_us', 'a graph replay of the same chain', _spread(
        lambda L, g: 1e6 * _replay(L, g), 'µs', 'one launch; the 40 kernels back to back', *inputs))
    e.number('speedup', 'eager / replay', _spread(
        lambda L, g: _eager_chain(L, g) / _replay(L, g), 'x',
        '1x if a launch is cheaper than a kernel; 20x on a slow host', *inputs),
             not_judged="a launch's host time over a tiny kernel's GPU time, each known only within a range: "
                        'the two times above are judged')
    e.text('sync_in_capture', 'a .item() inside torch.cuda.graph (in a child process)',
           [SYNC_IN_CAPTURE, CAPTURE_INVALIDATED], how='source', why=(
               '.item() syncs in memcpy_and_sync (c10/cuda/CUDAFunctions.h, from aten/src/ATen/native/cuda/'
               'CUDAScalar.cu), refused while capturing; then capture_end (aten/src/ATen/cuda/CUDAGraph.cpp); '
               "CUDA's texts"))


@expectation('11-reduce-overhead', how='model')
def _(e, gpu):
    inputs = (launch(gpu), TINY_KERNEL_S, COMPILED_CALL_LAUNCHES)
    reduced = lambda L, g, n: max(n * L, 2 * g)       # the input copied into the graph, one fused kernel
    e.note("mode='reduce-overhead' fuses the chain into one kernel and replays it as a CUDA Graph: "
           'a few launches of host work, not forty.')
    e.number('compile_s', 'first three calls: compile, warm up, record the graph',
             gpu_models.assumed('compile_s', gpu, 's'))
    e.number('eager_us', 'a call of the eager chain',
             _spread(lambda L, g, n: 1e6 * _eager_chain(L, g), 'µs', eager_why(gpu), *inputs))
    e.number('reduced_us', "a call compiled with mode='reduce-overhead'", _spread(
        lambda L, g, n: 1e6 * reduced(L, g, n), 'µs',
        f'{COMPILED_CALL_LAUNCHES[1]}-{COMPILED_CALL_LAUNCHES[2]} launches of host work (guards, input '
        'copy, replay), one fused kernel', *inputs), not_judged=COMPILED_UNKNOWN)
    e.number('speedup', 'eager / reduce-overhead',
             _spread(lambda L, g, n: _eager_chain(L, g) / reduced(L, g, n), 'x', 'the two above', *inputs),
             not_judged=COMPILED_UNKNOWN)
    e.text('matches_eager', "compiled against eager within the lesson's tolerance (rtol 1e-5, atol 2e-5)",
           'True', how='simulated', why=(
               'an FMA rounds once, eager twice: chain_fma simulates it, within tol on 20 inputs'))


def _training_steps(launch, tiny, host_eager, host_graphed):
    """A training step of the lesson's network, eager and with the body graphed, in seconds:
    the longer of the host's launches and other work, and the GPU's kernels."""
    eager = max((STEP_KERNELS + host_eager) * launch, STEP_KERNELS * tiny)
    graphed = max((GRAPHED_LAUNCHES + host_graphed) * launch, STEP_KERNELS * tiny)
    return eager, graphed


@expectation('11-graphed-callables', how='model')
def _(e, gpu):
    inputs = (launch(gpu), TINY_KERNEL_S, STEP_HOST_EAGER, STEP_HOST_GRAPHED)
    e.note(f'Two replays replace {BODY_KERNELS} of the step\'s {STEP_KERNELS} kernel launches: the step '
           'saves their host time and computes the same losses.')
    e.number('eager_us', 'a training step, eager', _spread(
        lambda *x: 1e6 * _training_steps(*x)[0], 'µs',
        f'{STEP_KERNELS} launches + {STEP_HOST_EAGER[1]}-{STEP_HOST_EAGER[2]} of other host work '
        f'({_us(launch(gpu))} each), or {STEP_KERNELS} kernels of {_us(TINY_KERNEL_S)}', *inputs),
             not_judged=STEP_UNKNOWN)
    e.number('graphed_us', 'a training step, body graphed', _spread(
        lambda *x: 1e6 * _training_steps(*x)[1], 'µs',
        f'{GRAPHED_LAUNCHES} launches (the body: two replays) + {STEP_HOST_GRAPHED[1]}-'
        f'{STEP_HOST_GRAPHED[2]} of other host work', *inputs), not_judged=STEP_UNKNOWN)
    e.number('speedup', 'eager / graphed', _spread(
        lambda *x: _training_steps(*x)[0] / _training_steps(*x)[1], 'x',
        'the host work saved; 1x where the GPU sets the pace', *inputs), not_judged=STEP_UNKNOWN)
    e.number('largest_difference', 'largest difference of the 5 losses, graphed against eager', Estimate(
        0, 0, 2e-5, 'absolute', 'same kernels, same order, same bits; the check allows rtol 1e-5 '
        'of losses near 1'))


OVERWRITTEN = 'Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run.'


@expectation('11-cudagraph-overwritten', how='source')
def _(e, gpu):
    e.note("mode='reduce-overhead' keeps outputs in the graph's memory: the next call frees them, "
           'unless they are cloned or the calls share one iteration marked by cudagraph_mark_step_begin().')
    e.text('error', 'reading the first output after a second call', OVERWRITTEN, why=(
        'format_dealloc_msg in torch/_inductor/cudagraph_trees.py, set on the freed outputs by '
        'dealloc_current_path_weakrefs (_set_storage_access_error_msg) when a call starts a new generation'))
    e.text('kept', 'a clone taken before the next call, against eager within tol', 'True', why=(
        "clone() allocates outside the graph's pool (torch/_inductor/cudagraph_trees.py frees only the graph's outputs); the values are chain's"))
    e.text('marked', 'two calls after cudagraph_mark_step_begin(): equal outputs, both readable', 'True', why=(
        'get_curr_generation in torch/_inductor/cudagraph_trees.py: once mark_step_begin has been called, '
        'a generation starts only at the next mark, so the first output is not freed'))
