"""What lesson 5's GPU-only cells are expected to show on the reference GPUs (H100, H200, T4).

Three of them show a behaviour, read from PyTorch's source: the same-device check of the
CUDA kernel that a Linear layer calls, where ``Module.to`` leaves an optimizer's state,
and where Adam's update fails when that state meets a CUDA gradient. The place of that
failure is also simulated: Adam's foreach code in ``torch/optim/adam.py`` runs here on the
CPU, with the ``meta`` device standing in for CUDA. The fourth cell times a convolution
with ``cudnn.benchmark`` off and on; a tuned call's time is a model (the roofline of
``gpu_models`` plus the host's launches), shown but not judged (which plan cuDNN picks moves
it 3-6x); the tuned call over the untuned one, measured in the same run, is judged.
"""
import functools
import os
import traceback

import torch

from .. import gpu_models
from ..gpu_models import ASSUMPTIONS, Estimate, assumed
from . import expectation

# aten/src/ATen/core/adaption.cpp (common_device_check_failure), 2.11 and later: the wrapper
# generated for a CUDA kernel checks its tensor arguments in order. addmm's are the bias
# (self, on the GPU) and then the batch (mat1, on the CPU).
ADDMM_MESSAGE = ('Expected all tensors to be on the same device, but got mat1 is on cpu, different '
                 'from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)')
# aten/src/ATen/TensorIterator.cpp (compute_types): the first operand not on the CPU sets the
# common device; the CPU output exp_avg then fails.
ITERATOR_MESSAGE = ('Expected all tensors to be on the same device, but found at least two devices, '
                    'cuda:0 and cpu!')


@functools.lru_cache(maxsize=None)
def where_foreach_adam_fails():
    """Run Adam's foreach update on this CPU as it runs after ``small.to('cuda:0')``: parameters and
    gradients on ``meta`` (standing in for CUDA), the state still on the CPU. Return the function
    of torch/optim/adam.py, and its line, where it raises (as the lesson's ``where_in_adam``)."""
    weight = torch.nn.Parameter(torch.zeros(1, 2, device='meta'))
    weight.grad = torch.ones(1, 2, device='meta')
    # foreach=True: what _default_to_fused_or_foreach (torch/optim/optimizer.py) picks for CUDA
    adam = torch.optim.Adam([weight], foreach=True)
    adam.state[weight] = {'step': torch.tensor(1.0), 'exp_avg': torch.zeros(1, 2),
                          'exp_avg_sq': torch.zeros(1, 2)}
    try:
        adam.step()
    except RuntimeError as error:
        frame = [f for f in traceback.extract_tb(error.__traceback__)
                 if f.filename.endswith(os.path.join('optim', 'adam.py'))][-1]
        return f'{frame.name}: {frame.line}'
    raise AssertionError('a CPU state beside meta gradients should not mix')


@expectation('05-cpu-batch-gpu-model', how='source')
def _(e, gpu):
    e.note('A Linear layer on a 2-D batch calls addmm(bias, x, weight.t()); the CUDA kernel\'s '
           'wrapper finds the bias on cuda:0 and the batch (mat1) on the CPU.')
    e.text('message', 'RuntimeError', ADDMM_MESSAGE,
           why='aten/src/ATen/native/Linear.cpp calls addmm; aten/src/ATen/core/adaption.cpp words it '
               'so in 2.11 and 2.13 (older: "found at least two devices, cuda:0 and cpu!")')


@expectation('05-adam-state-after-move', how='source')
def _(e, gpu):
    e.note("Module.to replaces the data inside each Parameter (and its gradient), so the "
           "Parameters, which are the keys of adam.state, stay; the state tensors stay on the CPU.")
    e.text('weight_device', 'small.weight.device', 'cuda:0',
           why='torch/nn/modules/module.py (_apply): param.data = fn(param), the same Parameter')
    e.text('state_device', "adam.state[small.weight]['exp_avg'].device", 'cpu',
           why='torch/optim/adam.py (_init_group) made it with zeros_like(p) at the first step, '
               'on the CPU; Module.to knows nothing of the optimizer')


@expectation('05-adam-step-mixes-devices', how='source')
def _(e, gpu):
    e.note("Adam's step raises: its state is still on the CPU, the gradients are on the GPU, and one "
           'operation gets both.')
    e.detail('With CUDA parameters Adam takes its foreach path. Its grouping by device '
             '(torch/utils/_foreach_utils.py) lets CPU float tensors through, for the step counters, '
             'so the first operation that mixes state and gradient raises.')
    e.text('message', 'RuntimeError', ITERATOR_MESSAGE,
           why='aten/src/ATen/native/cuda/ForeachTernaryOp.cu: tensors on two devices take the slow '
               'path, one lerp_ each; aten/src/ATen/TensorIterator.cpp refuses the CPU exp_avg')
    e.text('raised_in', 'where_in_adam(e)', where_foreach_adam_fails(), how='simulated',
           why='torch/optim/adam.py run here, meta standing in for CUDA, with foreach=True (what '
               'torch/optim/optimizer.py picks for CUDA parameters)')


# --- the cell's convolution: Conv2d(64, 64, 3, padding=1) on a batch of 32 images.
BATCH, CHANNELS, KERNEL = 32, 64, 3
# cuDNN may run a 3x3 convolution by Winograd's method, F(2x2, 3x3), which needs 2.25 times
# fewer multiplications than the direct method: the low end of the range allows it.
WINOGRAD = 2.25
# On tensor cores (TF32) this layer is a skinny matrix product, pixels x 64 channels out with
# 576 terms each, which fills their large tiles poorly: the slow end allows the least share of
# the peak ASSUMPTIONS['skinny_tf32_share'] gives (on the T4's CUDA cores 'matmul_share' applies).
# The host's work for one timed call, in kernel launches (ASSUMPTIONS['launch_s']): the module
# call and cuDNN's own host work for the convolution (about three), the bias add, the wait.
HOST_LAUNCHES = 5


def conv_work(size):
    """FLOPs and bytes of the cell's convolution of a ``size`` x ``size`` float32 batch, and the
    bytes of the bias add PyTorch runs after it (aten/src/ATen/native/Convolution.cpp)."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f'size must be an int >= 1, got {size!r}')
    pixels = BATCH * size * size
    activation = 4 * pixels * CHANNELS                        # one float32 activation tensor
    flops = 2 * pixels * CHANNELS * CHANNELS * KERNEL * KERNEL
    return flops, 2 * activation + 4 * CHANNELS * CHANNELS * KERNEL * KERNEL, 2 * activation


def conv_call_seconds(size, gpu):
    """A steady call of the convolution on ``gpu``, waited for: host launches, the convolution by
    the roofline (TF32 where the GPU has it, as cuDNN's default allows), the bias add."""
    flops, conv_bytes, add_bytes = conv_work(size)
    dtype = 'tf32' if 'tf32' in gpu.peak_flops else 'float32'
    conv = gpu_models.kernel_seconds(flops, conv_bytes, gpu, dtype)
    slowest = conv.high
    if dtype == 'tf32':
        slowest = max(slowest, flops / (ASSUMPTIONS['skinny_tf32_share'][1] * gpu.sustained_flops(dtype)))
    winograd = gpu_models.kernel_seconds(flops / WINOGRAD, conv_bytes, gpu, dtype)
    add = gpu_models.elementwise_seconds(add_bytes, gpu)
    launch_s = assumed('launch_s', gpu)
    launch, low, high = launch_s.value, launch_s.low, launch_s.high
    how = 'TF32, down to a fifth of the peak' if dtype == 'tf32' else f'float32, no TF32 on the {gpu.key}'
    why = (f'{flops / 1e9:.1f} GFLOP ({how}), a {add_bytes / 2**20:.0f} MiB bias add, {HOST_LAUNCHES} '
           f'host launches of {low * 1e6:.0f}-{high * 1e6:.0f} µs; low end: Winograd, '
           f'{WINOGRAD}x fewer FLOPs')
    return Estimate(HOST_LAUNCHES * launch + conv.value + add.value,
                    HOST_LAUNCHES * low + winograd.low + add.low,
                    HOST_LAUNCHES * high + slowest + add.high, 's', why)


# The tuned call against the untuned one, measured in the same run: the same layer, 57 x 57
# against 56 x 56 pixels. benchmark=True times the candidate plans and keeps the fastest; the
# heuristic's own choice is among the candidates (aten/src/ATen/native/cudnn/Conv_v8.cpp,
# get_plans_from_find: the engine configs the heuristic modes return, up to benchmark_limit),
# so the tuned call is no slower, up to the larger image and one call's timing noise (a single
# call of 0.05-3 ms, timed with a synchronize on each side: 20%). A better plan than the
# heuristic's makes it faster: published benchmark gains for 3x3 convolutions are up to about
# 2x, hence the low end.
TUNING_GAIN, CALL_NOISE = 2.0, 1.2


def tuned_ratio():
    """The expected ratio of the tuned call (57 x 57) to the untuned one (56 x 56), an Estimate."""
    pixels = (57 / 56) ** 2
    return Estimate(pixels, pixels / TUNING_GAIN, pixels * CALL_NOISE, 'x',
                    f'the same plan at worst ({pixels:.2f}x the pixels, {CALL_NOISE - 1:.0%} noise), '
                    f'up to {TUNING_GAIN:g}x faster where timing finds a better plan than the '
                    'heuristic (Conv_v8.cpp times the candidates, its choice among them)')


@expectation('05-cudnn-benchmark', how='model')
def _(e, gpu):
    e.note('The first call on a new shape builds a cuDNN plan, so it is the slower one either '
           'way; with benchmark=True it also times the candidate plans first, the slowest by far.')
    e.note('Later calls reuse the cached plan: one convolution (in TF32 on the tensor cores of '
           'the H100 and H200, in float32 on the T4, which has no TF32) and a bias add.')
    wide = ("which plan cuDNN runs (Winograd's or the direct method, how well the tiles fill the "
            'tensor cores) moves a call 3-6x: shown, not judged; their ratio is judged')
    e.number('untuned_ms', 'benchmark=False, third call (56 x 56)',
             conv_call_seconds(56, gpu).scaled(1e3, 'ms'), not_judged=wide)
    e.number('steady_ms', 'benchmark=True, fastest later call (57 x 57)',
             conv_call_seconds(57, gpu).scaled(1e3, 'ms'), not_judged=wide)
    e.number('tuned_ratio', 'benchmark=True later call / benchmark=False call', tuned_ratio(),
             how='source')
    e.text('tuning_is_slowest', 'benchmark=True: first call slower than the later ones', 'True',
           how='source',
           why='aten/src/ATen/native/cudnn/Conv_v8.cpp (run_single_conv): no plan cached for the '
               'shape, so it times up to benchmark_limit (10) candidate plans and caches the fastest')


@expectation('05-copies-wait', how='source')
def _(e, gpu):
    batches = 1000 // 100           # the lesson's loader: 1000 examples in batches of 100
    e.note('A blocking copy from the CPU makes the host wait for the GPU (in sync debug mode it warns '
           'first); a non-blocking copy from pinned memory only queues the copy; a batch already on the '
           'GPU is not copied at all.')
    e.detail('A blocking copy is memcpy_and_sync (c10/cuda/CUDAFunctions.h): cudaMemcpyAsync, then '
             'cudaStreamSynchronize. A non-blocking copy (aten/src/ATen/native/cuda/Copy.cu) only queues '
             'cudaMemcpyAsync and records an event for the pinned block.')
    e.number('blocking', 'waits: pageable batches, blocking copies',
             Estimate(2 * batches, 2 * batches, 2 * batches, 'waits',
                      f'two copies (X and y) in each of {batches} batches, each one memcpy_and_sync '
                      '(c10/cuda/CUDAFunctions.h), which warns in sync debug mode'))
    e.number('pinned', 'waits: pinned batches, non_blocking=True',
             Estimate(0, 0, 0, 'waits', 'aten/src/ATen/native/cuda/Copy.cu (copy_kernel_cuda): the non_blocking branch, no sync'))
    e.number('on_device', 'waits: batches already on the GPU',
             Estimate(0, 0, 0, 'waits', 'aten/src/ATen/native/TensorConversions.cpp (to): nothing to change, so it returns the tensor itself'))


@functools.lru_cache(maxsize=None)
def not_deterministic_message(op):
    """The start of the error that ``use_deterministic_algorithms(True)`` raises for ``op``: raised
    here by ``put_``, which has no deterministic version on any device, with ``op``'s name in its
    place (both come from alertNotDeterministic, aten/src/ATen/Context.cpp)."""
    previous = (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(True)
    try:
        torch.zeros(2).put_(torch.tensor([0, 0]), torch.ones(2))
    except RuntimeError as error:
        text = str(error)
        return op + text[len('put_'):text.index("(True)'") + len("(True)'")]
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])
    raise AssertionError('put_ with repeated indices should raise in deterministic mode')


@expectation('05-deterministic-cuda', how='source')
def _(e, gpu):
    e.note('With use_deterministic_algorithms(True), index_add_ on a GPU gives the same bits every time; '
           'histc on a GPU has no deterministic version and raises.')
    e.detail('index_add_ on CUDA then sorts the indices instead of adding atomically; torch/__init__.py '
             '(use_deterministic_algorithms) lists both operations.')
    e.text('repeatable', 'index_add_ twice with the flag: same bits', 'True',
           why='aten/src/ATen/native/cuda/Indexing.cu (index_add_cuda_impl): with the flag it '
               'calls index_put_ with accumulate=True, which sorts first')
    e.text('histc', 'RuntimeError from histc', not_deterministic_message('_histc_cuda'),
           how='simulated',
           why='aten/src/ATen/native/cuda/SummaryOps.cu calls alertNotDeterministic("_histc_cuda"); '
               'the message raised here by put_, with that name')
