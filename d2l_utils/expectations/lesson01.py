"""What lesson 1's GPU-only cells are expected to show on the GPUs of the datasheet table.

Most of them show a behaviour, read here from PyTorch's source: what the bare ``'cuda'``
device means, what ``CUDA_VISIBLE_DEVICES`` does and when. The card's name, capability,
SMs and memory come from the datasheet table (``d2l_utils/gpu_models.py``); the caching
allocator's reserved memory is simulated from its rounding rules (replayed in ``lesson08.py``);
the memory a CUDA context holds is a model, per kind of host, since the driver decides it.
"""
from .. import gpu_models
from ..gpu_models import ASSUMPTIONS, Estimate
from . import expectation
from .lesson08 import round_size, segment_size

MiB, GiB = 2**20, 2**30


def segment_bytes(nbytes):
    """The bytes the caching allocator reserves from CUDA for a first request of ``nbytes``
    (``round_size`` and ``get_allocation_size`` in c10/cuda/CUDACachingAllocator.cpp, replayed
    in lesson08.py): 512 B blocks; requests up to 1 MiB share 2 MiB segments, up to 10 MiB get
    a 20 MiB segment, larger ones are rounded up to 2 MiB."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
        raise ValueError(f'nbytes must be an int >= 1, got {nbytes!r}')
    return segment_size(round_size(nbytes))


# The lesson's first GPU cells leave two one-element float32 tensors (x, y) on the GPU:
# 512 B blocks that share one small segment, which empty_cache() cannot return while they live.
EARLIER = segment_bytes(4)


def context_bytes(gpu):
    """The memory one CUDA context that ran no kernel holds on ``gpu``, as an Estimate in bytes:
    what the driver keeps for itself on ``gpu``'s kind of host (not documented:
    ``gpu_models.assumed('cuda_context_bytes', gpu)``), and a stack for every thread the card can
    hold at once (``gpu_models.THREADS_PER_SM`` and ``ASSUMPTIONS``), which both ends include."""
    if gpu.capability not in gpu_models.THREADS_PER_SM:
        raise ValueError(f'no resident-thread count for capability {gpu.capability} ({gpu.key})')
    threads, stack = gpu_models.THREADS_PER_SM[gpu.capability], ASSUMPTIONS['thread_stack_bytes'][0]
    local = gpu.sms * threads * stack
    base, low, high, _ = gpu_models.assumed('cuda_context_bytes', gpu)
    why = (f"{low // MiB}-{high // MiB} MiB for the driver ({gpu.host}), plus {local // MiB} MiB of stacks "
           f'({gpu.sms} SMs x {threads} threads x {stack // 1024} KiB)')
    return Estimate(base + local, low + local, high + local, 'B', why)


def reported_memory_bytes(gpu):
    """The total memory ``torch.cuda.mem_get_info`` reports on ``gpu``, as an Estimate in bytes:
    the datasheet's, less ECC's check bits on GDDR memory, less what the driver keeps."""
    ecc = ASSUMPTIONS['ecc_share'][0] if gpu.ecc_in_memory else 0
    usable = gpu.memory_bytes * (1 - ecc)
    kept, low, high, _ = ASSUMPTIONS['driver_kept_share']
    why = (f'the datasheet memory{f" less 1/{round(1 / ecc)} for ECC," if ecc else ","} '
           f'less the {low * 100:.0f}-{high:.0%} the driver keeps')
    return Estimate((1 - kept) * usable, (1 - high) * usable, (1 - low) * usable, 'B', why)


@expectation('01-bare-cuda', how='source')
def _(e, gpu):
    e.note("A tensor made on 'cuda' goes to the current GPU (cuda:0 in a fresh process) and reports "
           "that index, so its device is not equal to torch.device('cuda').")
    e.text('device', 'x.device', 'cuda:0',
           why='aten/src/ATen/cuda/EmptyTensor.cpp: a device guard on a device without an index '
               'keeps the current GPU, and the tensor records it')
    e.text('equals_bare', "x.device == torch.device('cuda')", 'False',
           why='c10/core/Device.h: devices are equal when type and index are (0 is not None)')
    e.text('type_is_cuda', "x.device.type == 'cuda'", 'True', why='c10/core/Device.h: the type alone')


@expectation('01-device-context', how='source')
def _(e, gpu):
    e.note("Inside `with torch.cuda.device(last)` the bare 'cuda' means the last GPU: cuda:0 "
           'on a one-GPU machine such as the H200 or a Colab T4.')
    e.text('landed_on_last', 'the tensor went to the last GPU', 'True',
           why='torch/cuda/__init__.py: device.__enter__ makes its GPU the current one '
               '(_exchange_device), and a bare cuda tensor goes to the current GPU')


@expectation('01-too-late', how='source')
def _(e, gpu):
    e.note('The child starts the driver with is_available() while is_initialized() still says '
           'False; hiding every GPU afterwards fools device_count(), not the driver.')
    e.text('asked', 'is_available(), is_initialized()', 'True False',
           why='torch/cuda/__init__.py: is_available() calls _cuda_getDeviceCount() (the driver '
               'starts), but only _lazy_init() sets _initialized')
    e.text('count_after_hiding', 'device_count() after hiding every GPU', '0',
           why='torch/cuda/__init__.py: before initialisation device_count() re-reads the variable '
               '(_parse_visible_devices of "" is empty)')
    e.text('tensor_on_last', 'a new tensor still lands on the last GPU', 'True',
           why='torch/cuda/__init__.py: _lazy_init asks the driver, which read the variable at its start')


@expectation('01-device-order', how='model')
def _(e, gpu):
    e.note('A machine with one kind of card lists the same names in both orders, one per GPU; '
           'the order differs only where the cards differ.')
    e.text('default_order', 'names, default order', gpu.name,
           why='the name torch.cuda.get_device_name reports (the datasheet table)')
    e.text('pci_order', 'names, PCI_BUS_ID order', gpu.name,
           why='the name torch.cuda.get_device_name reports (the datasheet table)')
    e.text('same_cards', 'the same cards in both', 'True',
           why='CUDA_DEVICE_ORDER renumbers the cards, it hides none (CUDA C++ Programming Guide)')


@expectation('01-card-properties', how='model')
def _(e, gpu):
    total = reported_memory_bytes(gpu)
    context = context_bytes(gpu)
    free = Estimate(total.value - context.value - EARLIER, total.low - context.high - EARLIER,
                    total.high - context.low, 'B', "the total less this process's CUDA context")
    arch = 'sm_%d%d' % gpu.capability
    e.note('One line per card: name, capability, whether the build runs on it, SMs, free memory.')
    e.text('card', 'name, capability', [gpu.name, '%d.%d' % gpu.capability], why='the datasheet table')
    e.text('build', 'kernels, runs on it', [arch, 'True'], how='source',
           why=f"torch/cuda/__init__.py: 2.13's x86 builds list {arch[3:]} (2.11's: sm_75 to sm_120)")
    e.number('sms', 'SMs', Estimate(gpu.sms, gpu.sms, gpu.sms, 'SMs', 'the datasheet table'))
    e.number('total_gib', 'total memory', total.scaled(1 / GiB, 'GiB'))
    e.number('free_gib', 'free memory', free.scaled(1 / GiB, 'GiB'))


@expectation('01-empty-cache', how='simulated')
def _(e, gpu):
    big = segment_bytes(GiB)
    why = (f'1 GiB is a multiple of 2 MiB, so its segment is exactly 1024 MiB; plus the '
           f'{EARLIER // MiB} MiB small segment of x and y from earlier cells (none if they are gone)')
    e.note('Reserved memory holds the freed 1 GiB, the second tensor reuses it, and '
           'empty_cache() returns it: only the small segment of live tensors stays.')
    e.number('after_del_mib', 'reserved after del', Estimate((big + EARLIER) / MiB, big / MiB,
                                                               (big + EARLIER) / MiB, 'MiB', why))
    e.number('again_mib', 'reserved after allocating again', Estimate(
        (big + EARLIER) / MiB, big / MiB, (big + EARLIER) / MiB, 'MiB', 'the same: the freed block is reused'))
    e.number('after_empty_mib', 'reserved after empty_cache()',
             Estimate(EARLIER / MiB, 0, EARLIER / MiB, 'MiB',
                      'c10/cuda/CUDACachingAllocator.cpp: empty_cache releases only segments without '
                      'a live block; x and y keep theirs'))


@expectation('01-memory-summary', how='simulated')
def _(e, gpu):
    big = segment_bytes(GiB)
    e.note('A table of the allocator\'s counters for GPU 0: now 2 MiB reserved (x and y), '
           'at the peak 1026 MiB (the 1 GiB tensor of the cell before).')
    e.text('summary', 'the table', ['PyTorch CUDA memory summary, device ID 0', 'CUDA OOMs: 0',
                                    'GPU reserved memory'], how='source',
           why='torch/cuda/memory.py: memory_summary formats memory_stats() this way')
    e.number('reserved_mib', 'reserved now', Estimate(EARLIER / MiB, 0, EARLIER / MiB, 'MiB',
                                                      'the small segment of x and y (none if gone)'))
    e.number('peak_reserved_mib', 'reserved at the peak',
             Estimate((big + EARLIER) / MiB, big / MiB, (big + EARLIER) / MiB, 'MiB',
                      'the 1 GiB segment (c10/cuda/CUDACachingAllocator.cpp rounds to 2 MiB) plus '
                      'the small one'))


@expectation('01-renumbered', how='source')
def _(e, gpu):
    e.note('On a machine with two or more GPUs the child sees only physical '
           'GPU 1, numbered cuda:0. A one-GPU machine cannot show it: with the variable "1" its '
           'child sees no GPU and fails with "No CUDA GPUs are available".')
    e.text('device', 'the child\'s tensor is on', 'cuda:0',
           why='CUDA numbers the visible GPUs from 0 (CUDA C++ Programming Guide), and '
               'aten/src/ATen/cuda/EmptyTensor.cpp puts a bare cuda tensor on the current one, 0')


@expectation('01-context-memory', how='model')
def _(e, gpu):
    e.note('A process that only asked mem_get_info() holds a CUDA context: some hundreds of MiB, '
           'more on a card with more SMs. It has run no kernel, and kernels load lazily, so none '
           'is loaded yet.')
    e.number('context_mib', 'a child\'s CUDA context', context_bytes(gpu).scaled(1 / MiB, 'MiB'))


@expectation('01-set-device', how='source')
def _(e, gpu):
    e.note('After set_device(last), the current GPU and a tensor on the bare cuda are '
           'on the last GPU (cuda:0 on a one-GPU machine such as the H200 or a Colab T4), while '
           "'cuda:0' still means GPU 0.")
    e.text('follow', "current_device() and 'cuda' follow set_device", 'True',
           why='torch/cuda/__init__.py: set_device calls _cuda_setDevice (cudaSetDevice); '
               'current_device() reads the current GPU, and '
               'aten/src/ATen/cuda/EmptyTensor.cpp puts a bare cuda tensor on it')
    e.text('explicit', "a tensor on 'cuda:0' stays on GPU 0", 'True',
           why='c10/core/Device.h: an explicit index is used as it is')


@expectation('01-oom-retry', how='source')
def _(e, gpu):
    e.note('With 60 % of the free memory cached, asking for 70 % succeeds: cudaMalloc fails once, '
           'the allocator frees its cached blocks itself and retries, and counts one retry.')
    e.text('retries', 'retries counted (num_alloc_retries)', '1',
           why='c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator::malloc): alloc_block '
               'fails, release_cached_blocks frees the unsplit cached block, alloc_block(isRetry=true) '
               'adds 1 to num_alloc_retries and succeeds')
