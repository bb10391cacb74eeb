"""Lesson 9 (mixed precision): what its GPU-only cells are expected to show.

* TF32 (``09-tf32-matmul``, ``09-tf32-inputs``): the inputs' rounding is simulated on this CPU,
  exactly, bit for bit (``round_mantissa``, and ``round_ties_away``: rounding to nearest with
  ties away from zero, the conversion that reproduces PyTorch's TF32 products on Ampere); that
  Ampere and Ada round rather than truncate is the evidence (``TF32_EVIDENCE``); on Hopper the
  rule depends on the kernels cuBLAS picks (``HOPPER_TF32``), so the cells report it and it is
  not judged there.
* autocast on CUDA (``09-autocast-cuda``): each operation's dtype, from the CUDA lists in
  PyTorch's source (``tests/test_09_mixed_precision.py`` checks them against the installed
  ``autocast_mode.h``).
* speed (``09-matmul-speed``, ``09-train-step``): the datasheet table and the course's models
  (``d2l_utils/gpu_models.py``), at each GPU's sustained clock (``matmul_tflops``); a training
  step's peak memory counted tensor by tensor (``train_step_peak_bytes``).

``matmul_tflops`` is also used by lesson 10's expectations, ``product_tflops`` by lesson 10's
roofline calculator (``d2l_utils/calculators.py``).
"""
import functools
import math

import torch

from .. import gpu_models
from ..gpu_models import Estimate
from ..lessons import round_mantissa
from . import expectation

GiB = 2**30


def has_tf32(gpu):
    """True where ``gpu``'s datasheet lists TF32 tensor cores (Ampere, compute capability 8.0, on)."""
    return 'tf32' in gpu.peak_flops


ITEMSIZE = {'float32': 4, 'tf32': 4, 'bfloat16': 2, 'float16': 2}     # bytes a value is stored in


def runs_as(dtype, gpu):
    """The format ``gpu``'s units compute a ``dtype`` product in: without TF32 units a product with
    TF32 allowed runs as float32; without bfloat16 tensor cores (the T4) a bfloat16 product runs on
    the float32 units, converting as it goes."""
    if dtype not in ITEMSIZE:
        raise ValueError(f"dtype must be 'float32', 'tf32', 'bfloat16' or 'float16', got {dtype!r}")
    return dtype if dtype in gpu.peak_flops or dtype == 'float32' else 'float32'


def matmul_tflops(n, gpu, dtype):
    """The TFLOP/s of one n x n x n product in ``dtype`` on ``gpu`` (``product_tflops``)."""
    return product_tflops(n, n, n, gpu, dtype)


def product_tflops(m, n, k, gpu, dtype):
    """The TFLOP/s of an (m x k) @ (k x n) product in ``dtype`` ('float32', 'tf32', 'bfloat16',
    'float16') on ``gpu``, as an Estimate: ``gpu_models.matmul_seconds`` on the units it runs on
    (``runs_as``), its operands in ``dtype``'s bytes, at the clock the GPU sustains (the model's
    ``Datasheet.sustained_flops``: no clock factor here)."""
    computed = runs_as(dtype, gpu)
    t = gpu_models.matmul_seconds(m, n, k, gpu, computed, ITEMSIZE[dtype])
    rate = t.inverse(2 * m * n * k / 1e12, 'TFLOP/s')
    low = rate.low * (0.25 if bfloat16_emulated(dtype, gpu) else 1)
    peak = gpu.sustained_flops(computed) / 1e12
    why = f'{peak:.3g} TFLOP/s sustained x {rate.low / peak:.0%}-{rate.high / peak:.0%}'
    if gpu.clock_share < 1:
        why += f' (the datasheet\'s {gpu.flops(computed) / 1e12:.3g} at {gpu.clock_share:.0%} of its clock)'
    if dtype == 'tf32' and computed == 'float32':
        why = 'no TF32: float32, ' + why
    if bfloat16_emulated(dtype, gpu):
        why = 'no bfloat16 tensor cores: float32 units (down to 1/4 of their rate), ' + why
    return Estimate(rate.value, low, rate.high, 'TFLOP/s', why)


def bfloat16_emulated(dtype, gpu):
    """True for a bfloat16 product on a GPU without bfloat16 tensor cores (the T4)."""
    return dtype == 'bfloat16' and runs_as(dtype, gpu) == 'float32'


NO_BFLOAT16 = ("without bfloat16 tensor cores (Turing) cuBLAS runs bfloat16 on another path, "
               "how fast no document says")


# ---- TF32: the inputs as the tensor cores read them --------------------------------------------

def round_ties_away(x, bits=10):
    """Round a float32 tensor to ``bits`` mantissa bits, to nearest with ties away from zero.

    That is PTX's ``cvt.rna.tf32.f32``. Adding half of the last kept bit to the bit pattern, then
    clearing the dropped bits, rounds the magnitude half up: float32 stores sign and magnitude.
    """
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
        raise TypeError(f'x must be a float32 tensor, got {type(x).__name__} {getattr(x, "dtype", "")}'.strip())
    drop = 23 - bits
    u = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    u = ((u + (1 << (drop - 1))) >> drop << drop) & 0xFFFFFFFF
    return torch.where(u >= 2**31, u - 2**32, u).to(torch.int32).view(torch.float32)


def truncate(x, bits=10):
    """Keep the first ``bits`` mantissa bits of each float32 (the lesson's ``truncate_mantissa``)."""
    return (x.view(torch.int32) & -(1 << (23 - bits))).view(torch.float32)


NEAR_1024 = (1024.25, 1024.5, 1024.75, 1025.5)


@functools.lru_cache(maxsize=None)
def tf32_simulation():
    """What a random normal float32 matrix looks like to TF32 tensor cores, simulated on this CPU:
    shares of entries (%) that rounding to nearest (ties away) leaves equal to ``round_mantissa``'s
    ties-to-even and to truncation, and as they already were; and the relative error of a product
    whose inputs are rounded or truncated (its size does not matter for random normal inputs: the
    sums and their errors both grow as the square root of its length)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)              # small tensors: one thread is fastest, above all on a busy machine
    try:
        return _simulate_tf32()
    finally:
        torch.set_num_threads(threads)


def _simulate_tf32():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2**16, generator=g)
    tf32 = round_ties_away(x)
    same = {'rounded': (tf32 == round_mantissa(x, 10)).double().mean().item() * 100,
            'truncated': (tf32 == truncate(x)).double().mean().item() * 100,
            'unchanged': (x == round_mantissa(x, 10)).double().mean().item() * 100}
    a, b = torch.randn(128, 128, generator=g), torch.randn(128, 128, generator=g)
    exact = a.double() @ b.double()

    def error(change):
        return ((change(a).double() @ change(b).double() - exact).norm() / exact.norm()).item()
    errors = {'rounded': error(round_ties_away), 'truncated': error(truncate),
              'mixed': ((round_ties_away(a).double() @ truncate(b).double() - exact).norm() / exact.norm()).item()}
    near = round_ties_away(torch.tensor(NEAR_1024)).tolist()
    return same, errors, near


def float32_product_error(k):
    """The relative error of a float32 product whose sums of ``k`` terms run one term after the other
    (one thread's loop over k, as GPU kernels do), as an Estimate.

    Each addition rounds the running sum by at most half its last bit: a relative error of root
    mean square 2**-23 / sqrt(32 ln 2) over the sum's possible mantissas, and the running sums of
    random normal terms grow as the square root of their length, so the error is that times
    sqrt(k / 2). A library that adds in blocks or pairs errs less.
    """
    value = 2**-23 / math.sqrt(32 * math.log(2)) * math.sqrt(k / 2)
    return Estimate(value, value / 2, value * 1.25, 'relative',
                    f'float32 sums of {k} terms in a row, as each thread of a float32 GEMM adds its k-loop '
                    '(fused multiply-adds: the products add no rounding of their own); '
                    'down to half for a kernel that splits k in two or more')


TF32_EVIDENCE = ("PyTorch's CUDA notes (rounding, since PR 49625); inputs rounded by cvt.rna.tf32.f32 "
                 "reproduced PyTorch's A100 results (Triton issue 4574); an RTX 3090 rounded 1024.5 up "
                 "(PyTorch issue 53635)")
NO_TF32 = 'no TF32 below compute capability 8.0 (torch.cuda.is_tf32_supported, torch/cuda/__init__.py)'
HOPPER_TF32 = "Hopper: rounded, truncated or mixed, by the kernels cuBLAS picks (the expectation's derivations say why)"
HOPPER_NOTE = ("From compute capability 9.0 cuBLAS may run TF32 on wgmma kernels, whose shared-memory operands "
               "may lose their lower 13 bits (the PTX ISA's section on wgmma) unless a kernel rounds one "
               "first, or on mma.sync kernels, which round: on the H100 and H200 the rule is shown, not judged.")


def tf32_rule(gpu):
    """(rule, why, not_judged) for TF32 on ``gpu``: 'rounded' from compute capability 8.0 to 8.9 (the
    mma.sync path, which the evidence shows rounding), 'none' below 8.0, and no judgement from 9.0 on."""
    if gpu.capability < (8, 0):
        return 'none', NO_TF32, None
    if gpu.capability < (9, 0):
        return 'rounded', TF32_EVIDENCE, None
    return 'rounded', TF32_EVIDENCE, HOPPER_TF32


@expectation('09-tf32-matmul', how='simulated')
def _tf32_matmul(e, gpu):
    same, errors, _ = tf32_simulation()
    fp32 = float32_product_error(4096)
    rule, why, unsure = tf32_rule(gpu)
    e.note('Ampere and Ada cards (compute capability 8.x) read each input with 10 mantissa bits, rounded to '
           'nearest: the error should match the emulation with both inputs rounded, not the 1.6 times larger one '
           'with one input truncated (mixed) or the 2.6 times larger one with both truncated. The T4 has no TF32.')
    e.note('On the H100 and H200 (compute capability 9.0) the rule depends on the kernels cuBLAS picks: '
           'shown, not judged.')
    e.detail(HOPPER_NOTE)
    e.number('err_fp32', 'relative error, TF32 forbidden', fp32, how='model')
    if rule == 'none':
        e.number('err_tf32', 'relative error, TF32 allowed', fp32, how='model')
        e.text('rule', 'the emulation the GPU matches', 'none', how='source', why=why)
        return
    tf32 = Estimate(errors['rounded'], 0.8 * errors['rounded'], 1.25 * errors['rounded'], 'relative',
                    f"inputs rounded, simulated here (mixed: {errors['mixed']:.1e}, truncated: "
                    f"{errors['truncated']:.1e}); x 0.8-1.25")
    e.number('err_tf32', 'relative error, TF32 allowed', tf32, not_judged=unsure)
    e.text('rule', 'the emulation the GPU matches (rounded, mixed, truncated or neither)', rule, why=why,
           not_judged=unsure)


@expectation('09-tf32-inputs', how='simulated')
def _tf32_inputs(e, gpu):
    same, _, near = tf32_simulation()
    rule, why, unsure = tf32_rule(gpu)
    e.note('a @ I and I @ a are a as the tensor cores read it, as the left and as the right operand: on Ampere and '
           'Ada cards rounded to nearest (the tie 1024.5 expected away from zero, as on an RTX 3090); on the T4, '
           'which has no TF32, unchanged.')
    e.note('On the H100 and H200 (compute capability 9.0) the rule depends on the kernels cuBLAS picks: '
           'shown, not judged.')
    e.detail(HOPPER_NOTE)
    if rule == 'none':
        e.text('near_1024', f'{list(NEAR_1024)} become (left operand)', str(list(NEAR_1024)), how='source',
               why=NO_TF32 + '; x * 1 + 0 is exact')
        e.text('tie', '1024.5, a tie, becomes', str(NEAR_1024[1]), how='source', why=NO_TF32)
        e.number('rounded_share', 'entries equal to round_mantissa(a, 10)',
                 Estimate(same['unchanged'], 0, 0.1, '%', 'entries that already fit in 10 bits (1 in 8192)'))
        e.number('truncated_share', 'entries equal to truncate_mantissa(a, 10)',
                 Estimate(same['unchanged'], 0, 0.1, '%', 'the same entries'))
        e.text('rule', 'the rule of each operand, together', 'none', how='source', why=NO_TF32)
        return
    e.text('near_1024', f'{list(NEAR_1024)} become (left operand)', [f'[{near[0]}, ', f', {near[2]}, {near[3]}]'],
           why='rounded to nearest, the tie either way; truncated: [1024.0, 1024.0, 1024.0, 1025.0]',
           not_judged=unsure)
    e.text('tie', '1024.5, a tie, becomes', str(near[1]),
           why='away from zero, as cvt.rna.tf32.f32 rounds and an RTX 3090 did (PyTorch issue 53635); '
               'to even: 1024.0', not_judged=unsure)
    e.number('rounded_share', 'entries equal to round_mantissa(a, 10)',
             Estimate(same['rounded'], 99.9, 100, '%', 'all but ties (1 in 8192); 2**16 normal values simulated'),
             not_judged=unsure)
    e.number('truncated_share', 'entries equal to truncate_mantissa(a, 10)',
             Estimate(same['truncated'], 40, 60, '%', 'where the dropped bits round down anyway: about half'),
             not_judged=unsure)
    e.text('rule', 'the rule of each operand, together (rounded, mixed, truncated or neither)', rule, why=why,
           not_judged=unsure)


# ---- autocast on CUDA ------------------------------------------------------------------------------

# The cell's operations, by the CUDA list of aten/src/ATen/autocast_mode.h that decides their dtype
# (registered for CUDA in autocast_mode.cpp); None: on no list.
AUTOCAST_CUDA = {
    'linear': ('linear', 'AT_FORALL_LOWER_PRECISION_FP'), 'relu': ('relu', None),
    'exp': ('exp', 'AT_FORALL_FP32'), 'sum': ('sum', 'AT_FORALL_FP32_SET_OPT_DTYPE'),
    'softmax': ('softmax', 'AT_FORALL_FP32_SET_OPT_DTYPE'), 'layer_norm': ('layer_norm', 'AT_FORALL_FP32'),
    'cross_entropy': ('cross_entropy_loss', None), 'mse_loss': ('mse_loss', 'AT_FORALL_FP32'),
    'h + float32 tensor': ('add', None),
}
CUDA_FLOAT16 = ['linear', 'relu']


@expectation('09-autocast-cuda', how='source')
def _autocast_cuda(e, gpu):
    e.note("On CUDA (any GPU) exponentials, sums, softmax, normalization and losses return float32: CUDA's float32 "
           "lists hold them, the CPU's do not. cross_entropy is on no list: its log_softmax keeps float16 "
           '(LossNLL.cpp passes the dtype) and its nll_loss returns float32.')
    e.text('float16_ops', 'operations that return float16', ', '.join(CUDA_FLOAT16),
           why="AT_FORALL_LOWER_PRECISION_FP (linear) in aten/src/ATen/autocast_mode.h; relu is on no list")
    e.text('float32_ops', 'operations that return float32',
           ', '.join(name for name in AUTOCAST_CUDA if name not in CUDA_FLOAT16),
           why='AT_FORALL_FP32 and AT_FORALL_FP32_SET_OPT_DTYPE in aten/src/ATen/autocast_mode.h; '
               'float16 + float32 promotes')


# ---- speed and memory ----------------------------------------------------------------------------

@expectation('09-matmul-speed', how='model')
def _matmul_speed(e, gpu):
    h200 = gpu_models.DATASHEET['H200']
    e.note(f"The H200 runs TF32 {h200.flops('tf32') / h200.vector_flops:.0f} times, 16 bits "
           f"{h200.flops('bfloat16') / h200.vector_flops:.0f} times as fast as float32 (datasheet). The T4 has float16 "
           'tensor cores only (no TF32, bfloat16 on float32 units) and slows its clock to stay under 70 W.')
    for dtype in ('float32', 'tf32', 'bfloat16', 'float16'):
        e.number(f'{dtype}_tflops', f'{dtype}, 8192 x 8192', matmul_tflops(8192, gpu, dtype),
                 not_judged=NO_BFLOAT16 if bfloat16_emulated(dtype, gpu) else None)


WIDTH, BATCH, LAYERS = 4096, 8192, 4
MODES = ('float32', 'tf32', 'bfloat16', 'float16')          # float16 with a GradScaler


def train_step_flops(width=WIDTH, batch=BATCH, layers=LAYERS):
    """FLOPs of one step of the cell's network: per layer a forward product and a weight-gradient
    product, and an input-gradient product for every layer but the first (the batch needs none)."""
    return (3 * layers - 1) * 2 * batch * width * width


def _mode(mode):
    if mode not in MODES:
        raise ValueError(f'mode must be one of {MODES}, got {mode!r}')
    return mode


def train_step_bytes(mode, width=WIDTH, batch=BATCH, layers=LAYERS):
    """Bytes that one step's elementwise kernels read and write (the products left out), by mode."""
    mode = _mode(mode)
    act, w2 = batch * width, width * width            # elements of an activation, of a weight
    s = 4 if mode in ('float32', 'tf32') else 2       # bytes of an activation element
    nbytes = layers * (2 + 3) * act * s               # ReLU: forward reads and writes; backward reads two, writes one
    nbytes += 8 * act * 4                             # the float32 loss: forward 2 reads, 1 write, 1 read for the mean; backward 3 + 1
    nbytes += layers * act * s                        # bias gradients: a sum over the batch
    nbytes += 3 * layers * w2 * 4                     # SGD: p -= lr * g, reading both, writing p
    if s == 2:                                        # autocast's casts: weights and batch to 16 bits, the output to
        nbytes += 2 * layers * w2 * 6 + act * 6 + 2 * act * 6   # float32 and its gradient back, weight gradients to float32
    if mode == 'float16':
        nbytes += 2 * layers * w2 * 4                 # GradScaler: unscale every gradient in place
    return nbytes


def memory_rate(gpu):
    """'4.80 TB/s x 60-97%': the memory bandwidth an elementwise kernel reaches on ``gpu``, in words."""
    _, low, high, _ = gpu_models.ASSUMPTIONS['memory_share']
    return f'{gpu.memory_bytes_per_s / 1e12:.2f} TB/s x {low:.0%}-{high:.0%}'


def train_step_ms(mode, gpu):
    """Milliseconds of one training step: its products at ``matmul_tflops``'s rate, then its
    elementwise kernels at the memory's reachable bandwidth; a slow host may add its launches."""
    rate = matmul_tflops(8192, gpu, mode)
    products = Estimate(train_step_flops() / (rate.value * 1e12), train_step_flops() / (rate.high * 1e12),
                        train_step_flops() / (rate.low * 1e12), 's')
    memory = gpu_models.elementwise_seconds(train_step_bytes(mode), gpu)
    host = 70 * gpu_models.assumed('launch_s', gpu).high                          # about 70 kernels a step, if the host falls behind
    why = f'{rate.value:.3g} TFLOP/s for the products, {train_step_bytes(mode) / 1e9:.1f} GB elementwise'
    return Estimate((products.value + memory.value) * 1e3, (products.low + memory.low) * 1e3,
                    (products.high + memory.high + host) * 1e3, 'ms', why)


def train_step_peak_bytes(mode, width=WIDTH, batch=BATCH, layers=LAYERS):
    """The most memory one training step of the cell holds at once, counted tensor by tensor.

    Always: the weights and biases, and the batch (inputs and targets). The loss keeps a
    float32 buffer of a whole activation's size: mse_loss's structured kernel allocates its
    output at the inputs' shape, then resizes it to a scalar (aten/src/ATen/native/Loss.cpp),
    which keeps the storage. float32 peaks as the last ReLU's backward starts: four ReLU outputs,
    that buffer, the loss's gradient and the ReLU's (no weight gradient exists yet: each step
    starts with zero_grad(set_to_none=True)). Autocast peaks at the end of the forward pass: a
    16-bit copy of the batch and of each weight, four 16-bit ReLU outputs, a float32 copy of the
    output for the loss, the loss's buffer and the temporary of its elementwise squares.
    """
    mode = _mode(mode)
    act4 = batch * width * 4                           # one float32 activation, in bytes
    fixed = layers * (width * width + width) * 4 + 2 * act4
    if mode in ('float32', 'tf32'):
        return fixed + (layers + 3) * act4
    return fixed + act4 / 2 * (1 + layers) + layers * width * (width + 1) * 2 + 3 * act4


@expectation('09-train-step', how='model')
def _train_step(e, gpu):
    e.note(f'A step: {train_step_flops() / 1e12:.2f} TFLOP of products at the rates of the cell before, and about 5 GB '
           'of elementwise traffic, which 16 bits barely speed up. On the T4 only float16 gains.')
    e.note('Memory barely falls: 16-bit activations save 256 MiB, but autocast adds 16-bit copies of the batch and '
           'weights and a float32 copy of the output for the loss.')
    for mode in MODES:
        e.number(f'{mode}_ms', f'{mode}{" + scaler" if mode == "float16" else ""}, time a step',
                 train_step_ms(mode, gpu), not_judged=NO_BFLOAT16 if bfloat16_emulated(mode, gpu) else None)
    for mode, label in (('float32', 'float32 (and tf32)'), ('bfloat16', 'bfloat16 (and float16)')):
        peak = train_step_peak_bytes(mode) / GiB
        e.number(f'{mode}_peak_gib', f'{label}, peak above the level before the cell',
                 Estimate(peak, peak - 0.125, peak + 0.125, 'GiB',
                          'model, batch and the step at its fullest, tensor by tensor; ± 128 MiB'))


# ---- what autocast refuses, and shapes for tensor cores -------------------------------------------

@expectation('09-bce-banned', how='source')
def _bce_banned(e, gpu):
    e.note('CUDA autocast registers binary_cross_entropy as banned: it raises, on any GPU; the version with '
           'logits is on the float32 list.')
    e.text('message', 'binary_cross_entropy under autocast',
           ['torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast',
            'binary_cross_entropy_with_logits'],
           why='binary_cross_entropy_banned in aten/src/ATen/autocast_mode.cpp')
    e.text('fixed_dtype', 'binary_cross_entropy_with_logits returns', 'torch.float32',
           why='AT_FORALL_FP32 (binary_cross_entropy_with_logits) in aten/src/ATen/autocast_mode.h')


@expectation('09-matmul-shapes', how='model')
def _matmul_shapes(e, gpu):
    e.note('n = 4096 runs at the rate of the 8192 product. Rows of 4095 or 4097 halves are not 16-byte aligned, '
           "which rules out cuBLAS's fastest kernels (on Hopper its TMA and wgmma ones: a TMA stride must be a "
           'multiple of 16 bytes); what the fallback reaches depends on the kernel cuBLAS finds, from near the '
           'aligned rate to 100 times slower in published reports: shown, not judged.')
    e.number('aligned_tflops', 'float16, n = 4096', matmul_tflops(4096, gpu, 'float16'))
    share = gpu_models.assumption('misaligned_matmul_share', '%').scaled(100)
    for name, n in (('minus_one_percent', 4095), ('plus_one_percent', 4097)):
        e.number(name, f'float16, n = {n}, as a share of n = 4096', share, not_judged=MISALIGNED)


MISALIGNED = "how much slower the fallback runs no document says (see the note)"
