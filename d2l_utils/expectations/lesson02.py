"""What lesson 2's GPU-only cells are expected to show on the reference GPUs (H200, T4).

Every one shows a rule, not a speed, so nothing here depends on which GPU it is: the
messages are the ones PyTorch's C++ source produces (checked in the 2.11 and 2.13
binaries), and the printed tensors are simulated on the CPU with the device suffix that
``torch/_tensor_str.py`` adds for a tensor on the GPU.
"""
import torch

from . import expectation

# TensorIterator.cpp (compute_types): the first operand that is not on the CPU sets the
# common device, and any other operand on another device fails, unless it is a 0-dim CPU tensor.
ITERATOR_MESSAGE = 'Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!'
# The wrapper generated for a CUDA kernel checks its tensor arguments in order
# (c10::impl::check_and_update_common_device): self sets the device, index fails.
WRAPPER_211 = ('Expected all tensors to be on the same device, but got index is on cpu, different '
               'from other tensors on cuda:0 (when checking argument in method wrapper_CUDA__index_select)')
INDEX_MESSAGE = 'indices should be either on cpu or on the same device as the indexed tensor (cpu)'


def printed_on_gpu(t, device='cuda:0'):
    """How ``print`` shows the CPU tensor ``t`` once it lives on ``device`` (the current GPU's
    index is not the default device, so torch/_tensor_str.py appends ``device='...'``)."""
    if not isinstance(t, torch.Tensor) or t.device.type != 'cpu':
        raise TypeError(f't must be a CPU tensor, got {type(t).__name__}')
    text = repr(t)
    return f"{text[:-1]}, device='{device}')"


@expectation('02-cpu-plus-cuda', how='source')
def _(e, gpu):
    e.note('A CPU tensor of shape (2, 3) plus a CUDA tensor fails in TensorIterator, which runs '
           'elementwise operations; its wording differs from the meta check.')
    e.text('message', 'RuntimeError', ITERATOR_MESSAGE,
           why='aten/src/ATen/TensorIterator.cpp (compute_types): the CUDA operand sets the common '
               'device and the CPU one fails; the same text in 2.11 and 2.13')


@expectation('02-cpu-scalar-times-cuda', how='simulated')
def _(e, gpu):
    e.note('A 0-dim CPU tensor rides along as a scalar; the product is a CUDA tensor.')
    e.text('device', 'prod.device', 'cuda:0', how='source',
           why='aten/src/ATen/TensorIterator.cpp: a 0-dim CPU input of a CUDA kernel is allowed '
               '(allow_cpu_scalars) and the output goes to the common device')
    e.text('printed', 'print(prod)', printed_on_gpu(2.0 * torch.ones(3)),
           why='the product computed on this CPU, with the suffix torch/_tensor_str.py adds')


@expectation('02-cpu-index-into-cuda', how='source')
def _(e, gpu):
    e.note('A CPU index into a CUDA tensor is copied to the GPU first and works; a CUDA '
           'index into a CPU tensor is refused.')
    e.text('picked', 'CUDA tensor, CPU index', ['cuda:0', str(torch.arange(6.0)[torch.tensor([0, 5])].tolist())],
           why='aten/src/ATen/native/TensorAdvancedIndexingUtils.h (make_info) moves the indices '
               "to the tensor's device")
    e.text('message', 'CPU tensor, CUDA index: RuntimeError', INDEX_MESSAGE,
           why='aten/src/ATen/native/TensorAdvancedIndexing.cpp (check_indices_on_cpu_or_selfdevice), '
               'the same text in 2.11 and 2.13')


@expectation('02-index-select-cpu-index', how='source')
def _(e, gpu):
    e.note('The wrapper generated for the CUDA kernel checks that self and index share a device, '
           'a check that meta skipped.')
    e.text('message', 'RuntimeError', WRAPPER_211,
           why='aten/src/ATen/core/adaption.cpp (common_device_check_failure) in 2.11 and 2.13; '
               'older releases ended "... cuda:0 and cpu! (when checking argument for argument '
               'index in method wrapper_CUDA__index_select)"')


@expectation('02-gpu-values-to-host', how='simulated')
def _(e, gpu):
    g = torch.arange(4.0)
    e.note('Printing and tolist() bring the values over; .cpu() makes a host copy, so writing to '
           'its array leaves the GPU tensor as it was.')
    e.text('printed', 'print(g)', printed_on_gpu(g),
           why='the values computed on this CPU, with the suffix torch/_tensor_str.py adds')
    host = g.clone().numpy()
    host[0] = -1.0
    e.text('host_after_write', 'the array after writing to it', str(host.tolist()),
           why='the write itself, on this CPU')
    e.text('gpu_after_write', 'the GPU tensor after writing to the array', str(g.tolist()), how='source',
           why='aten/src/ATen/native/TensorConversions.cpp: to another device (_to_copy) makes a '
               'new tensor, so the array shares nothing with the GPU')


@expectation('02-two-gpus', how='source')
def _(e, gpu):
    e.note('Two GPUs are two devices: an elementwise operation on cuda:0 and cuda:1 fails in '
           'TensorIterator; copying one operand first (to, copy_) works.')
    e.text('message', 'cuda:0 + cuda:1: RuntimeError', ITERATOR_MESSAGE.replace('and cpu!', 'and cuda:1!'),
           why='aten/src/ATen/TensorIterator.cpp (compute_types): the first operand sets the common '
               'device, cuda:0, and the one on cuda:1 fails; the same text in 2.11 and 2.13')
    e.text('device', 'a + b.to(a.device) is on', 'cuda:0',
           why='to() copies b to cuda:0, so both operands share a device (Copy.cu copies between GPUs)')
    e.text('values', 'its values', str((torch.ones(3) + torch.ones(3)).tolist()), how='simulated',
           why='the sum computed on this CPU')


@expectation('02-cpu-index-waits', how='source')
def _(e, gpu):
    e.note('A CPU index tensor is copied to the GPU with a blocking copy, which waits for all the '
           'work queued on the stream; a CPU mask is sent from pinned memory without a wait.')
    e.text('index_waits', 'CPU index: the host waited', 'True',
           why='aten/src/ATen/native/IndexingUtils.h (expandTensors): index.to(self.device()), '
               'non_blocking=False; aten/src/ATen/native/cuda/Copy.cu then calls memcpy_and_sync, '
               'which warns in sync debug mode (c10/cuda/CUDAFunctions.h)')
    e.text('done_after_index', 'CPU index: the queued work was done', 'True',
           why='memcpy_and_sync (c10/cuda/CUDAFunctions.h) ends with cudaStreamSynchronize: the '
               'whole stream, the event recorded before the copy included')
    e.text('mask_waits', 'CPU mask: the host waited', 'False',
           why='aten/src/ATen/native/IndexingUtils.h (expandTensors): a mask\'s nonzero() goes to '
               'pinned memory and .to(self.device(), non_blocking=True): no synchronisation')
