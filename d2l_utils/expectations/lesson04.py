"""Lesson 4 (synchronization): what its seven GPU-only cells are expected to show.

The times come from ``gpu_models``: each eager op costs the host a launch
(``assumed('launch_s', gpu)``: the launch cost of the kind of host that GPU typically has),
each kernel takes its roofline time at the sustained clock (``matmul_seconds``,
``kernel_seconds``), and the GPU runs the queue in order, starting each kernel once it is
launched and the one before it is done. ``simulate`` plays a training step out kernel by
kernel that way, with two more host costs for the same host: an op that launches no kernel
(``light_op_s``) and a step's own Python (``step_python_s``). The warnings and error messages
are quoted from PyTorch's source, with the file named.
"""
import math

from .. import gpu_models
from ..gpu_models import Estimate
from . import expectation

SCENARIOS = ('value', 'low', 'high')       # every input at its value, all at their fast end, all at their slow end


def pick(entry, scenario):
    """``entry`` (a (value, low, high, why) tuple or an Estimate) at ``scenario``."""
    if isinstance(entry, Estimate):
        return getattr(entry, scenario)
    return dict(zip(SCENARIOS, entry[:3]))[scenario]


def combine(fn, unit, why):
    """An Estimate whose value, low and high are ``fn(scenario)`` for each scenario (``fn`` grows with every
    input, so its fast and slow ends bound it), in ``unit`` ('ms' or 'µs'); ``fn`` returns seconds."""
    scale = {'ms': 1e3, 'µs': 1e6, 's': 1}[unit]
    return Estimate(*(fn(s) * scale for s in SCENARIOS), unit, why)


def host_costs(gpu):
    """The host's costs on ``gpu``'s kind of host (``gpu_models.assumed``), each an Estimate in seconds:
    (a launch, a copy's latency, an op without a kernel, a step's own Python)."""
    return tuple(gpu_models.assumed(name, gpu, 's')
                 for name in ('launch_s', 'copy_latency_s', 'light_op_s', 'step_python_s'))


def launch_text(gpu):
    """'3-8 µs a launch (launch_s, server)' for ``gpu``'s host."""
    launch = gpu_models.assumed('launch_s', gpu)
    return f'{launch.low * 1e6:.1f}-{launch.high * 1e6:.1f} µs a launch (launch_s, {gpu.host})'


def product(n, gpu):
    """An n x n float32 product on ``gpu`` (float32: PyTorch's default leaves TF32 off for matmuls)."""
    return gpu_models.matmul_seconds(n, n, n, gpu, 'float32')


# ---- 04-launch-timeline: 8 products of 2048 x 2048, each between two events, then .item() ----

def timeline(gpu, scenario='value'):
    """The model's spans in ms: host launches, GPU products, and the .item() wait, as the cell measures them.

    Each iteration costs the host two event records and a product (cuBLAS's setup and the launch: two
    launches); the GPU starts the first product once it is launched and runs the eight back to back.
    """
    LAUNCH, LATENCY = host_costs(gpu)[:2]
    launch, mm = pick(LAUNCH, scenario), pick(product(2048, gpu), scenario)
    host, device, now, free = [], [], 0.0, 0.0
    for _ in range(8):
        start = now
        now += 4 * launch                            # start.record(), the product (two), end.record()
        free = max(now - launch, free) + mm         # the product is queued before end.record()
        host.append((start * 1e3, now * 1e3))
        device.append(((free - mm) * 1e3, free * 1e3))
    item_start = now
    item_end = max(now + launch, free + pick(LAUNCH, scenario)) + pick(LATENCY, scenario)   # the sum, then the read
    return host, device, [(item_start * 1e3, item_end * 1e3)]


def draw_timelines(ax):
    """The model's timeline for each reference GPU, one above the other, each on its own time axis."""
    ax.axis('off')
    ax.set_title('8 products of 2048 x 2048 launched, then .item()\n'
                 'blue: the host launching; orange: the GPU computing; hatched: the host waiting')
    gpus = gpu_models.reference_gpus()
    for k, gpu in enumerate(gpus):
        sub = ax.inset_axes([0.07, 1 - (k + 0.82) / len(gpus), 0.92, 0.52 / len(gpus)])
        sub.patch.set_alpha(0)                       # the MODEL mark below stays visible
        host, device, waits = timeline(gpu)
        sub.broken_barh([(s, e - s) for s, e in host], (1.6, 0.8), color='tab:blue')
        sub.broken_barh([(s, e - s) for s, e in waits], (1.6, 0.8), facecolor='none', edgecolor='tab:red', hatch='//')
        sub.broken_barh([(s, e - s) for s, e in device], (0.1, 0.8), color='tab:orange', edgecolor='black')
        for i, (s, e) in enumerate(device, 1):
            sub.text((s + e) / 2, 0.5, str(i), ha='center', va='center', fontsize='small')
        sub.set(yticks=[0.5, 2], yticklabels=['GPU', 'host'], ylim=(0, 2.5), xlim=(0, waits[0][1] * 1.03))
        sub.set_xlabel(f'time on the {gpu.key} (ms)', fontsize='small', labelpad=1)


@expectation('04-launch-timeline', how='model')
def _launch_timeline(e, gpu):
    e.note('The host launches all eight products in a fraction of a millisecond; the GPU takes far longer, '
           'and .item() waits for it.')
    spans = {s: timeline(gpu, s) for s in SCENARIOS}
    why = f'8 x (2 event records + a product): 32 launches at {launch_text(gpu)}'
    e.number('loop_returned_ms', 'loop returned at', Estimate(*(spans[s][0][-1][1] for s in SCENARIOS), 'ms', why))
    mm = product(2048, gpu)
    why = f'8 float32 products of {mm.value * 1e3:.2f} ms ({mm.low * 1e3:.2f} to {mm.high * 1e3:.2f}) each'
    e.number('gpu_done_ms', 'GPU done at', Estimate(*(spans[s][1][-1][1] for s in SCENARIOS), 'ms', why))
    e.number('item_returned_ms', '.item() returned at', Estimate(
        *(spans[s][2][0][1] for s in SCENARIOS), 'ms', 'then the sum, and one number copied to the host'))
    e.draw(draw_timelines)


# ---- 04-sync-debug-mode ----

WARNS = ['x.sum().item()', 'print(x.sum())', 'x.cpu()', 'x.cpu().numpy()', 'if x.sum() > 0:', 'x.nonzero()', 'x[mask]',
         'h.to(device)']
SILENT = ['x + 1', 'x.sum()', 'torch.where(mask, x, 0.)', 'h.to(device, non_blocking=True)', 'torch.cuda.synchronize()']


@expectation('04-sync-debug-mode', how='source')
def _sync_debug_mode(e, gpu):
    e.note('Calls that copy a value or a size to the host warn, and so does a blocking copy to the GPU; calls '
           'that only queue work do not, nor a non-blocking copy, nor torch.cuda.synchronize(), which waits '
           'without the check.')
    e.text('message', "the warning's message", 'called a synchronizing CUDA operation',
           why='TORCH_WARN in warn_or_error_on_sync, c10/cuda/CUDAFunctions.cpp; called by memcpy_and_sync and '
               'stream_synchronize in c10/cuda/CUDAFunctions.h')
    e.text('flagged', 'the calls that warn', ', '.join(WARNS),
           why='.item() and if: read a value (_local_scalar_dense_cuda, aten/src/ATen/native/cuda/CUDAScalar.cu); '
               '.cpu() and print copy to the host (copy_kernel_cuda, aten/src/ATen/native/cuda/Copy.cu); '
               'nonzero and a boolean mask read the count (aten/src/ATen/native/cuda/Nonzero.cu); h.to(device) is a '
               'blocking copy to the GPU (copy_kernel_cuda again): all through memcpy_and_sync')
    e.text('silent', 'the calls that do not', ', '.join(SILENT),
           why='the first three only launch kernels; with non_blocking=True copy_kernel_cuda calls cudaMemcpyAsync '
               'without memcpy_and_sync (aten/src/ATen/native/cuda/Copy.cu); torch.cuda.synchronize() calls '
               'device_synchronize (c10/cuda/CUDAFunctions.cpp), a plain cudaDeviceSynchronize without the check')


# ---- 04-blocking-copy-waits: 20 products of 2048 x 2048, then 16 bytes to the GPU with a plain to() ----

@expectation('04-blocking-copy-waits', how='model')
def _blocking_copy_waits(e, gpu):
    e.note('A blocking copy to the GPU, however small, returns only once everything queued before it is done: '
           'PyTorch queues the copy, then waits for the whole stream.')
    mm = product(2048, gpu)
    LAUNCH, LATENCY = host_costs(gpu)[:2]
    queued = combine(lambda s: 20 * pick(mm, s), 'ms', '20 float32 products of 2048 x 2048, back to back')
    e.number('gpu_ms', 'the queued products (CUDA events)', queued)
    e.number('returned_ms', 'the 16-byte copy returned after',
             Estimate(1e3 * (20 * mm.value - 20 * LAUNCH[0] + LATENCY[0]), 1e3 * (20 * mm.low - 20 * LAUNCH[2]),
                      1e3 * (20 * mm.high + LATENCY[2]), 'ms',
                      'the queued products, less what the GPU ran while the host launched them (20 launches), '
                      'plus the copy itself'))
    e.text('waited', 'the copy waited for the queued products', 'True', how='source',
           why='non_blocking=False: copy_kernel_cuda (aten/src/ATen/native/cuda/Copy.cu) calls memcpy_and_sync '
               '(c10/cuda/CUDAFunctions.h): cudaMemcpyAsync, then cudaStreamSynchronize')


# ---- 04-timing-on-gpu: one 4096 x 4096 product, four clocks ----

@expectation('04-timing-on-gpu', how='model')
def _timing_on_gpu(e, gpu):
    e.note('The naive clock reads only the launch (microseconds); the synchronized clock, time_op and '
           'CUDA events all read the product itself, milliseconds, and agree.')
    mm, LAUNCH = product(4096, gpu), host_costs(gpu)[0]
    e.number('naive_ms', 'naive clock', combine(lambda s: 2 * pick(LAUNCH, s), 'ms',
             f"a product's host cost, two launches (PyTorch's and cuBLAS's setup), at {launch_text(gpu)}"))
    product_why = (f'float32, compute-bound, at the reachable share of the sustained '
                   f'{gpu.sustained_flops("float32") / 1e12:.0f} TFLOP/s (gpu_models.matmul_seconds)')
    e.number('synced_ms', 'synchronized clock', combine(lambda s: 3 * pick(LAUNCH, s) + pick(mm, s), 'ms',
             f'the launch, the product ({product_why}), and the wait'))
    mm = Estimate(mm.value, mm.low, mm.high, 's', product_why)
    e.number('time_op_ms', 'time_op (median)', mm.scaled(1e3, 'ms'))
    e.number('events_ms', 'CUDA events (median of 10)', mm.scaled(1e3, 'ms'))


# ---- 04-training-loop: three linear layers, batch 1024, 20 steps of SGD ----

def step_ops(width, batch=1024):
    """One training step of the lesson's make_net(width), as the host dispatches it: (flops, bytes) for a
    kernel, None for an op that launches none, 'python' for half of the step's Python beyond its ops.

    The ops and their order are those PyTorch dispatches for the step (listed on a CPU with
    TorchDispatchMode, with SGD's foreach update, which CUDA uses): 52 ops, which launch 21 kernels.
    The last, the loss added to the running total, depends on the loop and is left to ``simulate``.
    """
    B, w, f = batch, width, 4                                   # float32: 4 bytes

    def mm(m, n, k):
        return 2 * m * n * k, f * (m * k + k * n + m * n)

    def ew(n, passes):
        return 0, f * n * passes

    params = 2 * w * w + 2 * w + w + 1                          # two w x w layers and w -> 1, with biases
    forward = [None, mm(B, w, w), ew(B * w, 2), None, None, mm(B, w, w), ew(B * w, 2), None, None,
               mm(B, 1, w), ew(B, 3), ew(B, 1)]                 # mse_loss: the squares, then their mean
    backward = [ew(1, 1), ew(B, 3),                             # the loss's gradient
                None, mm(B, w, 1), None, mm(1, w, B), None, ew(B, 1), None, None, None, None, None,
                ew(B * w, 3),                                   # layer 3, then ReLU's backward
                None, mm(B, w, w), None, mm(w, w, B), None, ew(B * w, 1), None, None, None, None, None,
                ew(B * w, 3),                                   # layer 2, then ReLU's backward
                None, mm(w, w, B), None, ew(B * w, 1), None, None, None, None]   # layer 1 (no input gradient)
    zero_grad, update = [None, None], [None, ew(params, 3), None, None]        # SGD: p -= lr * g, all at once
    return forward + zero_grad + ['python'] + backward + ['python'] + update


def simulate(ops, gpu, steps, read_every_step, scenario):
    """Seconds for ``steps`` training steps: the host launches each op in turn; the GPU runs each kernel
    once it is launched and the one before is done; a read waits for the GPU, then copies one number."""
    LAUNCH, LATENCY, LIGHT_OP_S, STEP_PYTHON_S = host_costs(gpu)
    launch, light = pick(LAUNCH, scenario), pick(LIGHT_OP_S, scenario)
    python, latency = pick(STEP_PYTHON_S, scenario), pick(LATENCY, scenario)
    add = (0, 12)                                              # total += loss.detach(): one tiny kernel
    kernel = {op: pick(gpu_models.kernel_seconds(*op, gpu), scenario) for op in [*ops, add] if isinstance(op, tuple)}
    now = free = 0.0                                           # the host's clock; when the GPU's queue is done
    for _ in range(steps):
        for op in ops + ([] if read_every_step else [add]):
            if op is None or op == 'python':
                now += light if op is None else python / 2
            else:
                now += launch
                free = max(now, free) + kernel[op]
        if read_every_step:                                    # loss.item(): wait, then copy the number
            now = max(now, free) + latency
    return max(now, free) + latency                            # float(total), or clock's wait: the end


WIDTHS = (64, 1024, 4096)


def host_and_gpu(ops, gpu):
    """Seconds a step costs the host (L) and the GPU (C), at the model's values: the lesson's L and C."""
    LAUNCH, _, LIGHT_OP_S, STEP_PYTHON_S = host_costs(gpu)
    launch, light, python = LAUNCH[0], LIGHT_OP_S[0], STEP_PYTHON_S[0]
    kernels = [op for op in ops if isinstance(op, tuple)]
    host = len(kernels) * launch + ops.count(None) * light + ops.count('python') * python / 2
    return host, sum(gpu_models.kernel_seconds(*op, gpu).value for op in kernels)


@expectation('04-training-loop', how='model')
def _training_loop(e, gpu):
    e.note('At width 64 the host is the bottleneck and the GPU waits for launches; at 4096 the GPU is, and the '
           'host runs ahead. A read every step costs a few percent.')
    e.detail('A read costs about min(L, C) / 21 a step plus the read: the GPU starts each of the 21 kernels as '
             'soon as it is queued, so only a step\'s first launch and its last kernel stop overlapping (the '
             'schematic\'s middle row, not its worst case L + C).')
    _, _, LIGHT_OP_S, STEP_PYTHON_S = host_costs(gpu)
    e.detail(f'Simulated kernel by kernel: 52 host ops a step, 21 of them kernels. Ranges for the {gpu.key}\'s '
           f'host: {launch_text(gpu)}, '
           f'{LIGHT_OP_S[1] * 1e6:.1f}-{LIGHT_OP_S[2] * 1e6:.1f} µs an op without a kernel, '
           f'{STEP_PYTHON_S[1] * 1e6:.0f}-{STEP_PYTHON_S[2] * 1e6:.0f} µs of Python a step, '
           'each kernel at the reachable share of its roofline.')
    for w in WIDTHS:
        ops = step_ops(w)
        host, device = host_and_gpu(ops, gpu)
        why = f'a step costs the host L = {host * 1e3:.2f} ms, the {gpu.key} C = {device * 1e3:.2f} ms'
        for every, name, label in ((True, f'item_{w}_ms', 'loss.item() every step'),
                                   (False, f'device_{w}_ms', 'sum on the device')):
            e.number(name, f'width {w}, {label}, per step',
                     combine(lambda s: simulate(ops, gpu, 20, every, s) / 20, 'ms', why))


# ---- 04-item-waits-for-the-queue: about 0.3 s of 4096 x 4096 products, then .item() ----

@expectation('04-item-waits-for-the-queue', how='model')
def _item_waits(e, gpu):
    e.note('.item() waits about as long as the queued products take, whatever the GPU: the cell sizes the '
           'queue at 0.3 s; the other thread keeps counting meanwhile.')
    mm, (LAUNCH, LATENCY) = product(4096, gpu), host_costs(gpu)[:2]
    launch_low, launch_high = LAUNCH[1], LAUNCH[2]
    count = math.ceil(0.3 / (mm.value + 3 * LAUNCH[0]))              # products queued, as the cell sizes them
    most, fewest = math.ceil(0.3 / mm.low), math.ceil(0.3 / (mm.high + 3 * launch_high))
    slow = gpu_models.ASSUMPTIONS['matmul_share'][0] / gpu_models.ASSUMPTIONS['matmul_share'][1]
    gpu_s = Estimate(count * mm.value, 0.3 * mm.low / (mm.low + 3 * launch_high), 0.3 * slow + mm.high, 's',
                     'the queue was sized from one product timed alone; run back to back for 0.3 s a card may '
                     f'slow down under its power limit, to the low end of matmul_share (x{slow:.2f})')
    e.number('gpu_ms', 'queued products (CUDA events)', gpu_s.scaled(1e3, 'ms'))
    # .item() starts waiting once the host has launched the products and counting_rate has slept 20 ms
    waited = Estimate(gpu_s.value - 0.02 - count * 2 * LAUNCH[0] + LATENCY[0],
                      gpu_s.low - 0.025 - most * 2 * launch_high + LATENCY[1],
                      gpu_s.high - 0.02 - fewest * 2 * launch_low + LATENCY[2] + 0.005, 's',
                      'the queued products, less what the GPU ran while the host launched them and slept 20 ms '
                      '(counting_rate), give or take a late wake-up and a switch of the GIL (5 ms each)')
    e.number('waited_ms', '.item() waited', waited.scaled(1e3, 'ms'))
    e.text('kept_counting', 'the other thread kept counting', 'True', how='source',
           why='.item() releases the GIL while it waits (THPVariable_item, '
               'torch/csrc/autograd/python_variable_methods.cpp)')


# ---- 04-launch-blocking: an index out of range, in a child process ----

ASSERT = 'CUDA error: device-side assert triggered'


@expectation('04-launch-blocking', how='source')
def _launch_blocking(e, gpu):
    e.note('The kernel fails on the GPU after its launch returned: by default the error surfaces at the next '
           'call that waits; with CUDA_LAUNCH_BLOCKING=1 the launch waits, and the indexing line raises it.')
    source = ("the index kernel's CUDA_KERNEL_ASSERT (aten/src/ATen/native/cuda/IndexKernel.cu) makes CUDA "
              "report cudaErrorAssert, 'device-side assert triggered'; c10_cuda_check_implementation "
              "(c10/cuda/CUDAException.cpp) prefixes 'CUDA error: '")
    e.text('default', 'default (indexing, then the next call)', ['indexing returned', ASSERT], why=source)
    e.text('blocking', 'with CUDA_LAUNCH_BLOCKING=1', ASSERT, why=source)
    e.text('next_call_returned', "default: the next call returned", 'False',
           why='the next call waits for the queue (.item(): memcpy_and_sync, c10/cuda/CUDAFunctions.h) and '
               'raises the error the kernel left')
    e.text('indexing_returned_blocking', 'blocking: the indexing line returned', 'False',
           why='with CUDA_LAUNCH_BLOCKING=1 every launch waits for its kernel, so C10_CUDA_KERNEL_LAUNCH_CHECK '
               'after the index kernel (aten/src/ATen/native/cuda/IndexKernel.cu) raises it')
