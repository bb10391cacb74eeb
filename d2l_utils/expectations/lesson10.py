"""Lesson 10 (profiling and the performance model): what its four GPU-only cells are expected to show.

All from the roofline the lesson teaches, on the reference GPUs' datasheet numbers
(``d2l_utils/gpu_models.py``): a product's rate (lesson 9's ``matmul_tflops``, which also
knows the T4's power limit), an elementwise kernel's bandwidth, their ratio the ridge point.
The profiled training step of ``10-gpu-kernels`` and ``10-gpu-mfu`` is counted operation by
operation (``STEP_KERNELS``, ``step_flops``) and timed as its products plus its elementwise
traffic; ``draw_rooflines`` draws both GPUs' rooflines, which the fallback of
``10-gpu-rooflines`` shows.
"""
from .. import gpu_models
from ..gpu_models import Estimate
from . import expectation
from .lesson09 import matmul_tflops

ADD_BYTES = 12 * 2**27        # the cell's add of two 512 MiB float32 vectors: two reads and a write
WIDTH = BATCH = 4096          # the profiled network: Linear(4096, 4096), ReLU, twice, then Linear(4096, 10)
CLASSES = 10
# The operations of one profiled step that launch a kernel on the GPU: 3 addmm and 5 mm, 2 relu and
# 2 threshold_backward, 3 bias sums, log_softmax and its backward, nll_loss and its backward, the
# loss's seed gradient (ones_like), and a mul and a sub_ for each of the 6 parameters: 32 operations,
# counted on the CPU by tests/test_10_profiling.py; on CUDA, nll_loss's backward first zeroes its
# output, one kernel more.
STEP_KERNELS = 33


def half_dtype(gpu):
    """The 16-bit format the cells use on ``gpu``: bfloat16 from Ampere on, float16 before (a T4)."""
    return 'bfloat16' if 'bfloat16' in gpu.peak_flops else 'float16'


def add_bandwidth(gpu):
    """TB/s of the cell's 512 MiB add, by ``gpu_models.elementwise_seconds``."""
    t = gpu_models.elementwise_seconds(ADD_BYTES, gpu)
    _, low, high, _ = gpu_models.ASSUMPTIONS['memory_share']
    return Estimate(ADD_BYTES / t.value / 1e12, ADD_BYTES / t.high / 1e12, ADD_BYTES / t.low / 1e12, 'TB/s',
                    f'{gpu.memory_bytes_per_s / 1e12:.2f} TB/s x {low:.0%}-{high:.0%}')


def ridge(gpu):
    """The ridge point in the 16-bit format, FLOP/byte: the product's rate over the add's bandwidth."""
    peak, bw = matmul_tflops(8192, gpu, half_dtype(gpu)), add_bandwidth(gpu)
    return Estimate(peak.value / bw.value, peak.low / bw.high, peak.high / bw.low, 'FLOP/byte',
                    "the product's rate over the add's bandwidth")


@expectation('10-gpu-roofline', how='model')
def _gpu_roofline(e, gpu):
    h200, t4 = gpu_models.DATASHEET['H200'], gpu_models.DATASHEET['T4']
    e.note(f"16-bit products run {h200.flops('bfloat16') / h200.vector_flops:.0f} times float32's rate on the H200, "
           f"{t4.flops('float16') / t4.vector_flops:.0f} times on the T4 (float16: no bfloat16 or TF32 there). Ridge "
           'points near 100 FLOP/byte or more: much is memory-bound on a GPU.')
    half = half_dtype(gpu)
    e.number('half_tflops', '16-bit (bfloat16; float16 on a T4), fastest of 1024, 4096, 8192', matmul_tflops(8192, gpu, half))
    e.number('float32_tflops', 'float32, fastest', matmul_tflops(8192, gpu, 'float32'))
    e.number('tf32_tflops', 'tf32, fastest', matmul_tflops(8192, gpu, 'tf32'))
    e.number('bandwidth_tb_s', 'add of two 512 MiB vectors', add_bandwidth(gpu))
    e.number('ridge', '16-bit ridge point', ridge(gpu))


def draw_rooflines(ax, gpus=None):
    """Draw each reference GPU's 16-bit roofline from the model (reachable rate and bandwidth),
    with its ridge point marked, on log-log axes of intensity (FLOP/byte) and FLOP/s."""
    gpus = gpu_models.reference_gpus() if gpus is None else gpus
    x = [10 ** (k / 20) for k in range(-40, 81)]           # 0.01 to 10,000 FLOP/byte
    for gpu, color in zip(gpus, ('tab:blue', 'tab:green', 'tab:brown')):
        peak = matmul_tflops(8192, gpu, half_dtype(gpu)).value * 1e12
        bw = add_bandwidth(gpu).value * 1e12
        ax.loglog(x, [min(peak, i * bw) for i in x], color=color,
                  label=f'{gpu.key}, {half_dtype(gpu)}: ridge at {peak / bw:.0f} FLOP/byte')
        ax.plot([peak / bw], [peak], 'o', color=color)
    top = max(matmul_tflops(8192, g, half_dtype(g)).value for g in gpus) * 1e12
    ax.set(xlabel='arithmetic intensity (FLOP/byte)', ylabel='attainable FLOP/s', ylim=(None, 30 * top))
    ax.legend(loc='upper left')                     # room above the roofs: clear of the lines


@expectation('10-gpu-rooflines', how='model')
def _gpu_rooflines(e, gpu):
    e.note("Each GPU's roofline lies far above a CPU thread's, its ridge far to the right: between the two ridge "
           'points, work is compute-bound on the CPU and memory-bound on the GPU.')
    e.number('gpu_ridge', '16-bit ridge point', ridge(gpu))

    def draw(ax):
        draw_rooflines(ax)
        ax.set_title('Rooflines of the reference GPUs, from their datasheets')
    e.draw(draw)


def step_flops(width=WIDTH, batch=BATCH, classes=CLASSES):
    """FLOPs of one profiled step, as FlopCounterMode counts them (2 per multiply-add of each product):
    3 forward products, 3 weight-gradient products, and input-gradient products for the last two layers."""
    forward = 2 * batch * width * (width + width + classes)
    return 3 * forward - 2 * batch * width * width


def step_bytes(width=WIDTH, batch=BATCH):
    """Bytes the elementwise kernels of one profiled step read and write (16-bit values)."""
    act = batch * width * 2                  # one 16-bit activation
    weight = width * width * 2
    # ReLU forward (read, write) and backward (read two, write one), twice; two bias sums over the
    # batch; SGD as written, p -= 0.01 * p.grad: a mul (read, write) and a sub_ (read two, write one).
    return 2 * (2 + 3) * act + 2 * act + 2 * 5 * weight


def _shares(name):
    """(value, low, high) of the entry ``name`` of gpu_models.ASSUMPTIONS."""
    return gpu_models.ASSUMPTIONS[name][:3]


def step_seconds(gpu, rate=None, share=(0.95, 0.8, 1.05)):
    """(value, low, high) seconds of one profiled step on the GPU: its products at ``share`` of the
    8192 product's rate (``rate``, TFLOP/s, default the model's), its elementwise traffic, and a
    short gap between kernels."""
    rate = matmul_tflops(8192, gpu, half_dtype(gpu)) if rate is None else rate
    memory = gpu_models.elementwise_seconds(step_bytes(), gpu)
    gap = gpu_models.ASSUMPTIONS['kernel_gap_s'][:3]       # the GPU's moment between two kernels
    f = step_flops()
    value = f / (share[0] * rate.value * 1e12) + memory.value + STEP_KERNELS * gap[0]
    low = f / (share[2] * rate.high * 1e12) + memory.low + STEP_KERNELS * gap[1]
    high = f / (share[1] * rate.low * 1e12) + memory.high + STEP_KERNELS * gap[2]
    return value, low, high


@expectation('10-gpu-kernels', how='model')
def _gpu_kernels(e, gpu):
    e.note("First come cuBLAS's matrix-product kernels (names with tile shape and data types, which change with the "
           "GPU and cuBLAS version), then PyTorch's far shorter elementwise and reduction kernels.")
    e.number('kernels', 'kernels in 10 steps',
             Estimate(10 * STEP_KERNELS, 10 * STEP_KERNELS - 40, 10 * STEP_KERNELS + 160, 'kernels',
                      f'{STEP_KERNELS} kernels a step (counted on the CPU); cuBLAS may split a product in two'))
    value, low, high = step_seconds(gpu)
    _, _, launch_high = _shares('launch_s')
    host_high = 2 * STEP_KERNELS * launch_high          # a slow host, and the profiler's own work per op
    gap = gpu_models.ASSUMPTIONS['kernel_gap_s'][:3]       # the GPU's moment between two kernels

    def busy(step, gap_s, host):
        gpu_time = step - STEP_KERNELS * gap_s
        return gpu_time / max(step, host)
    e.number('busy', 'share of the window with a kernel running',
             Estimate(busy(value, gap[0], 0), busy(low, gap[2], host_high), 1.0, 'of the window',
                      f'{value * 1e3:.3g} ms of kernels a step, {gap[1] * 1e6:.0f}-{gap[2] * 1e6:.0f} µs between '
                      f'them; a slow host (up to {host_high * 1e3:.1f} ms a step) leaves the GPU waiting'))


def mfu_estimate(gpu):
    """The step's rate as a share of the 8192 product's rate timed in turn with it, as an Estimate
    (the cell's ``matmul_share``: a ratio measured in one run, not an MFU)."""
    rate = matmul_tflops(8192, gpu, half_dtype(gpu))
    f = step_flops()
    _, _, launch_high = gpu_models.assumed('launch_s', gpu)[:3]
    slowest = max(step_seconds(gpu, rate=Estimate(rate.high, rate.high, rate.high))[2], STEP_KERNELS * launch_high)
    fastest = step_seconds(gpu, rate=Estimate(rate.low, rate.low, rate.low))[1]
    return Estimate(f / (step_seconds(gpu)[0] * rate.value * 1e12), f / (slowest * rate.high * 1e12),
                    min(1.1, f / (fastest * rate.low * 1e12)), "of the 8192 product's rate",
                    'products at 80-105% of that rate, plus the elementwise kernels and the gaps')


def dense_mfu(gpu):
    """The MFU of the step: its expected FLOP/s over ``gpu``'s dense datasheet peak in its 16-bit format
    (as PaLM defines MFU: model FLOPs, the datasheet's peak), as an Estimate."""
    rate, share, dense = matmul_tflops(8192, gpu, half_dtype(gpu)), mfu_estimate(gpu), gpu.flops(half_dtype(gpu))
    return Estimate(share.value * rate.value * 1e12 / dense, share.low * rate.low * 1e12 / dense,
                    share.high * rate.high * 1e12 / dense, 'of the dense datasheet peak',
                    f"the matmul share x the 8192 product's rate, over {dense / 1e12:.4g} TFLOP/s "
                    f'({half_dtype(gpu)}, dense, the datasheet\'s)')


TWO_RANGES = ("the product of two ranges (the share of the peak a large product reaches, and the step's share "
              "of that product's rate): wider than a judged range may be; the matmul share beside it is judged")


@expectation('10-gpu-mfu', how='model')
def _gpu_mfu(e, gpu):
    half = half_dtype(gpu)
    rate, share, f = matmul_tflops(8192, gpu, half), mfu_estimate(gpu), step_flops()
    dense = ', '.join(f'{g.key} {dense_mfu(g).value:.0%}' for g in gpu_models.reference_gpus())
    e.note("Mostly products: the step runs near the rate of a large product timed with it; its MFU, against the "
           f"datasheets' dense peaks, is lower: {dense}.")
    e.number('step_tflop', 'TFLOP a step', Estimate(f / 1e12, f / 1e12, f / 1e12, 'TFLOP',
                                                    'counted as FlopCounterMode counts: 8 products'), how='simulated')
    e.number('achieved_tflops', 'TFLOP/s of the step',
             Estimate(share.value * rate.value, share.low * rate.low, share.high * rate.high, 'TFLOP/s',
                      f"the matmul share x the 8192 product's rate ({rate.why})"), not_judged=TWO_RANGES)
    e.number('matmul_share', "share of the 8192 product's rate (timed in turn)", share)
    e.number('mfu', 'MFU (over the dense datasheet peak)', dense_mfu(gpu), not_judged=TWO_RANGES)
