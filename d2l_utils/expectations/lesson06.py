"""What lesson 6's GPU-only cells are expected to show on the reference GPUs (H100, H200, T4).

Where each chunk, output and gradient lands is read from ``torch/nn/parallel`` and its C++
half (``torch/csrc/cuda/comm.cpp``); the chunk sizes are simulated with ``torch.chunk`` on
the CPU; DataParallel's device check is quoted from ``data_parallel.py``. Two cells need two
GPUs, which neither reference machine has: their expectation is for two of that GPU, the
two the cells use (``device_ids=[0, 1]``) on a machine with two or more. The memory each GPU gains during one DataParallel step is a model, counted tensor
by tensor from the code that runs (``comm.cpp``, autograd's formulas), with a range.
"""
import torch

from .. import gpu_models
from ..gpu_models import Estimate
from . import expectation

MiB = 2**20


def chunk_rows(rows, n):
    """The rows of each chunk when ``rows`` are scattered over ``n`` devices (torch.chunk)."""
    return [len(c) for c in torch.zeros(rows).chunk(n)]


@expectation('06-library-functions', how='source')
def _(e, gpu):
    e.note('With one GPU (as on Colab, or a one-GPU H100 or H200 machine) ids is [0]: scatter makes one '
           f'chunk of all {chunk_rows(16, 1)[0]} rows on cuda:0, and the copy that replicate '
           "makes there uses the module's own parameters.")
    e.note("Backward through the library's copies sums their gradients into net's: equal to "
           'the gradients on one device (the cell asserts it).')
    e.number('rows', 'rows in the chunks, together', Estimate(16, 16, 16, 'rows',
             'torch.chunk on this CPU: every row of the batch in exactly one chunk'), how='simulated')
    e.text('first_chunk_on', 'chunks[0].device', 'cuda:0',
           why='torch/csrc/cuda/comm.cpp (scatter): chunk i is copied to devices[i]')
    e.text('output_on', 'lib_out.device', 'cuda:0',
           why='torch/nn/parallel/_functions.py (Gather): the outputs are concatenated on the '
               'target device, here ids[0]')


@expectation('06-real-split', how='source')
def _(e, gpu):
    sizes = chunk_rows(16, 2)
    e.note(f'On two GPUs, device_ids=[0, 1] (however many the machine has; this one has fewer): '
           f'the batch of 16 is split {sizes[0]} + {sizes[1]}, each GPU runs its own copy of the '
           'module on its chunk.')
    e.text('split', 'records: (device, rows) seen by forward',
           [f"('cuda:{i}', {n})" for i, n in enumerate(sizes)], how='simulated',
           why='torch.chunk on this CPU, the rule of scatter (torch/nn/parallel/scatter_gather.py)')
    e.text('output_on', 'out.device', 'cuda:1',
           why='torch/nn/parallel/data_parallel.py (forward) gathers on output_device, device_ids[-1] = 1 here')
    e.text('gradients_on', "the gradients' device", 'cuda:0',
           why="torch/nn/parallel/_functions.py: Broadcast's backward sums the copies' gradients "
               'on the device the parameters came from, device_ids[0]')


@expectation('06-params-on-first-device', how='source')
def _(e, gpu):
    e.note('The wrapper checks every parameter and buffer at each forward, before it splits '
           'anything; the module, moved back to the CPU, fails the check.')
    e.text('message', 'RuntimeError', 'module must have its parameters and buffers on device cuda:0 '
           '(device_ids[0]) but found one of them on device: cpu',
           why='torch/nn/parallel/data_parallel.py (DataParallel.forward), the same text in 2.11 and 2.13')


def step_peaks(rows=1024, n_in=1024, hidden=1024, n_out=4096):
    """MiB that GPU 0 and GPU 1 gain at their peaks during one step of the cell, on two GPUs:
    ``DataParallel(Linear(n_in, hidden), Linear(hidden, n_out))`` on a CPU batch of ``rows``,
    then ``out.square().mean().backward()``. Each term is a float32 tensor alive at that moment."""
    if not all(isinstance(n, int) and n > 0 and n % 2 == 0 for n in (rows, n_in, hidden, n_out)):
        raise ValueError('the sizes must be even ints > 0 (two equal chunks)')
    chunk, h = 4 * rows // 2 * n_in, 4 * rows // 2 * hidden       # a chunk of the batch, its hidden
    out = 4 * rows * n_out                                        # the gathered output
    params = 4 * (n_in * hidden + hidden + hidden * n_out + n_out)
    # GPU 0, in square's backward (pow_backward: grad * (2 * out.pow(1))): its chunk and hidden,
    # saved; the output, saved by square; mean's gradient; pow(1), 2 * it and the product.
    gpu0 = chunk + h + out + out + 3 * out
    # GPU 1, in its copy's backward of the second layer: the parameters broadcast to it, its
    # chunk and hidden, its chunk of the output's gradient, the gradients of hidden and of W2.
    gpu1 = params + chunk + h + out // 2 + h + 4 * hidden * n_out
    return gpu0 / MiB, gpu1 / MiB


@expectation('06-first-gpu-load', how='model')
def _(e, gpu):
    gpu0, gpu1 = step_peaks()
    workspace = gpu_models.cublas_workspace_bytes(gpu) / MiB
    e.note('On two GPUs, device_ids=[0, 1] (this machine has fewer). At its peak GPU 0 holds the '
           "gathered output and its gradient, 16 MiB each, and three temporaries of square's "
           'backward; GPU 1 holds its copy of the 20 MiB of parameters and half of the rest.')
    why = (f'tensors alive at the peak, counted from the code; 80% of that, up to one new cuBLAS '
           f'workspace ({workspace:.0f} MiB) more')
    e.number('gpu0_rise_mib', 'GPU 0, peak rise in the step',
             Estimate(gpu0, 0.8 * gpu0, gpu0 + workspace, 'MiB', why))
    e.number('other_rise_mib', 'GPU 1, peak rise in the step',
             Estimate(gpu1, 0.8 * gpu1, gpu1 + workspace, 'MiB', why))
    e.text('gpu0_highest', 'rises[0] > max(rises[1:])', 'True',
           why=f'{gpu0:.0f} MiB against {gpu1:.0f}; it holds even with a new workspace on GPU 1 alone')


@expectation('06-library-replicate', how='source')
def _(e, gpu):
    e.note('The times are printed, not judged. The first copy is the module itself: nothing is copied '
           'for the GPU it is on.')
    e.detail('replicate broadcasts the parameters with Broadcast, that is comm.broadcast_coalesced '
             '(torch/nn/parallel/replicate.py, _functions.py); for the first device it hands back the '
             'input tensors themselves.')
    e.number('first_copy_mib', 'MiB copied for copy 0 (on the module\'s own GPU)',
             Estimate(0, 0, 0, 'MiB', "torch/csrc/cuda/comm.cpp (broadcast_coalesced): the outputs "
                      "for devices[0] are the inputs; data_parallel.py's docstring: the replica on "
                      "device[0] shares storage with the module"))
