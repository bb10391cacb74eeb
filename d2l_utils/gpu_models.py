"""The course's reference GPUs, from their datasheets, and the models that predict what they show.

Course machinery, written by hand (like ``recordings.py``). Every GPU-only cell's
expectation (``expectations/``) and every calculator is computed from these two tables
and these few models, never from numbers typed again in a lesson:

* ``DATASHEET``: the H200 that records the course and the T4 of Colab's free tier, each
  number with the vendor page it comes from (and ``THREADS_PER_SM``, the CUDA guide's
  resident threads by compute capability);
* ``ASSUMPTIONS``: what no datasheet gives (a kernel launch's cost, the share of a link
  that a copy reaches, the host's speed, a CUDA context's memory, NCCL's share of a link),
  each with the range the expectations carry and why;
* the models the lessons teach: a copy costs latency plus bytes over bandwidth (lesson 3),
  a kernel takes the longer of its FLOPs over the peak and its bytes over the memory
  bandwidth (``roofline_seconds``), with a launch cost below which it cannot go
  (``kernel_seconds``; lessons 4, 10, 11).

An ``Estimate`` is a value with the range an expectation accepts, and why the range is
that wide: a model is a prediction, and a measurement inside the range confirms it.
``assumption`` makes one of an entry of ``ASSUMPTIONS``, ``total`` adds estimates, and
``spread`` gives the range of a function of several of them.
"""
import dataclasses
import itertools

__all__ = ['DATASHEET', 'THREADS_PER_SM', 'ASSUMPTIONS', 'Estimate', 'Datasheet', 'reference_gpus',
           'gpu_spec', 'assumption', 'total', 'spread', 'pcie_bytes_per_s', 'link_copy_seconds', 'copy_seconds',
           'peer_link', 'peer_copy_seconds',
           'copy_bytes_per_s', 'roofline_seconds', 'kernel_seconds', 'matmul_seconds',
           'elementwise_seconds', 'cublas_workspace_bytes']
_MiB = 2**20


@dataclasses.dataclass(frozen=True)
class Datasheet:
    """One GPU as its vendor's datasheet describes it (dense peaks: no sparsity)."""
    key: str                    # the course's short name: 'H200', 'T4'
    name: str                   # what torch.cuda.get_device_name() returns for it
    capability: tuple           # CUDA compute capability (major, minor)
    memory_bytes: float         # the datasheet's memory size ('141 GB' is 141 GiB of HBM3e)
    memory_bytes_per_s: float   # memory bandwidth
    memory_type: str            # 'HBM3e', 'GDDR6': GDDR keeps its ECC bits in the memory itself
    peak_flops: dict            # dtype name -> dense FLOP/s of matrix products (tensor cores where it has them)
    vector_flops: float         # float32 FLOP/s without tensor cores
    pcie: tuple                 # (generation, lanes) of its host link
    nvlink_bytes_per_s: float   # one GPU's total NVLink bandwidth (0: none)
    sms: int                    # streaming multiprocessors
    source: str                 # where the numbers come from

    def flops(self, dtype):
        """Dense peak FLOP/s of a matrix product in ``dtype`` ('float32' means without TF32)."""
        if dtype == 'float32':
            return self.vector_flops
        if dtype not in self.peak_flops:
            raise ValueError(f'the {self.key} has no {dtype} matrix units in its datasheet; '
                             f'it has {sorted(self.peak_flops)} and float32')
        return self.peak_flops[dtype]


DATASHEET = {
    # NVIDIA H200 Tensor Core GPU datasheet and product page (nvidia.com/en-us/data-center/h200/),
    # the SXM part: FP32 67 TFLOPS; TF32 989, BF16 1,979, FP16 1,979, FP8 3,958 TFLOPS, each
    # "with sparsity", so the dense rates are half; 141 GB HBM3e at 4.8 TB/s; NVLink 900 GB/s;
    # PCIe Gen5 128 GB/s (both directions together, so x16 of Gen5). 132 SMs: the Hopper
    # architecture whitepaper's H100 SXM5, the same die (torch reports 132).
    'H200': Datasheet(
        key='H200', name='NVIDIA H200', capability=(9, 0), memory_bytes=141 * 2**30,
        memory_bytes_per_s=4.8e12, memory_type='HBM3e',
        peak_flops={'tf32': 989e12 / 2, 'bfloat16': 1979e12 / 2, 'float16': 1979e12 / 2,
                    'float8': 3958e12 / 2},
        vector_flops=67e12, pcie=(5, 16), nvlink_bytes_per_s=900e9, sms=132,
        source='NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200/), SXM; sparse peaks halved'),
    # NVIDIA T4 datasheet (nvidia.com/en-us/data-center/tesla-t4/): FP32 8.1 TFLOPS; mixed
    # precision (FP16/FP32) 65 TFLOPS; 16 GB GDDR6 at 320 GB/s ("320+ GB/s"); PCIe Gen3 x16;
    # 40 SMs (Turing whitepaper, TU104 as T4). Turing has no TF32 and no bfloat16 tensor cores.
    'T4': Datasheet(
        key='T4', name='Tesla T4', capability=(7, 5), memory_bytes=16 * 2**30,
        memory_bytes_per_s=320e9, memory_type='GDDR6', peak_flops={'float16': 65e12},
        vector_flops=8.1e12, pcie=(3, 16), nvlink_bytes_per_s=0, sms=40,
        source='NVIDIA T4 datasheet (nvidia.com/en-us/data-center/tesla-t4/)'),
}

# Resident threads per SM by compute capability (CUDA C++ Programming Guide, the table of
# compute capabilities): every one of them gets its stack in a CUDA context (lesson 1).
THREADS_PER_SM = {(7, 5): 1024, (8, 0): 2048, (8, 6): 1536, (8, 9): 1536, (9, 0): 2048,
                  (10, 0): 2048, (12, 0): 1536}

# What no datasheet says. Each entry: (value, low, high, why); the expectations take their
# ranges from here, so a GPU run that misses one changes this table, and every cell follows.
ASSUMPTIONS = {
    # --- the host
    'launch_s': (6e-6, 2e-6, 20e-6,
                 "the host's cost of one eager PyTorch op on CUDA (dispatch plus cudaLaunchKernel): "
                 'a few microseconds on a fast host, several times that on a slow or virtual one'),
    'light_op_s': (1.5e-6, 0.5e-6, 5e-6,
                   'an op that launches no kernel (a view, a detach, a profiler mark) costs the host '
                   "PyTorch's dispatch only, a fraction of a launch"),
    'step_python_s': (40e-6, 15e-6, 150e-6,
                      "one training step's Python beyond its ops (zero_grad and SGD.step looping over "
                      "the parameters, autograd's hand-off to its device thread; lesson 4's network)"),
    'text_bytes_per_s': (0.8e9, 0.4e9, 2.0e9,
                         'how fast Python reads a text file into a list of lines (f.readlines()): '
                         'decoding and splitting, about a byte a nanosecond on a server core; '
                         'a slow or virtual host (Colab, gVisor) takes up to twice as long'),
    'python_char_s': (0.5e-6, 0.2e-6, 1.5e-6,
                      "Python's cost per character encoded in a loop (str.index in a list "
                      'comprehension, then torch.tensor of the list)'),
    'compile_s': (10.0, 2.0, 90.0,
                  "a cold compile: tracing, lowering, Triton's kernel and launcher; slow hosts take longer"),
    # --- copies between host and GPU
    'copy_latency_s': (10e-6, 3e-6, 50e-6,
                       "a host-device copy's fixed cost (the call, the DMA setup, the completion): "
                       'tens of microseconds at most on PCIe'),
    'pinned_share': (0.85, 0.6, 0.97,
                     'the share of the link a large pinned copy reaches (PCIe packet headers cost '
                     '10-20%; a virtual machine or a narrow slot costs more)'),
    'pageable_share': (0.5, 0.1, 0.97,
                       'the share a large pageable copy reaches: CUDA first copies it through a '
                       'pinned staging buffer on the host, at host memory speed, so it varies most'),
    # --- kernels
    'memory_share': (0.85, 0.6, 0.97,
                     'the share of the datasheet memory bandwidth a large elementwise kernel reaches'),
    'matmul_share': (0.75, 0.45, 0.95,
                     'the share of the dense datasheet peak a large matrix product reaches '
                     '(clocks under power limits, data that is not all zeros)'),
    'skinny_tf32_share': (0.2, 0.2, 0.2,
                          'the least share of the TF32 peak a skinny product reaches (a convolution '
                          "as pixels x 64 channels of 576 terms fills the tensor cores' tiles poorly)"),
    'misaligned_matmul_share': (0.7, 0.25, 1.0,
                                'the rate of a 16-bit product whose rows are not multiples of 16 bytes (n = 4095), '
                                'as a share of n = 4096: cuBLAS then picks kernels with narrower loads; NVIDIA '
                                'publishes no figure for current GPUs (uncertain, hence wide)'),
    'kernel_gap_s': (2e-6, 1e-6, 5e-6,
                     "a kernel's cost to the GPU beyond its roofline time (starting it, ending it, "
                     'starting the next one queued behind it): all a tiny kernel takes; more at lower clocks'),
    # --- memory
    'cuda_context_bytes': (250 * _MiB, 100 * _MiB, 900 * _MiB,
                           "what the driver keeps for itself in a CUDA context that ran no kernel, "
                           "beyond the threads' stacks: not documented"),
    'thread_stack_bytes': (1024, 1024, 1024,
                           "a context's local memory for each thread the card can hold at once: "
                           "cudaLimitStackSize's default (CUDA Runtime API, cudaDeviceSetLimit)"),
    'clock_share_70w': (0.5, 0.35, 1.0,
                        "the share of its quoted clock a 70 W card (the T4) keeps through a long matrix "
                        "product: at full clock it would draw more than its datasheet's 70 W"),
    'context_with_kernels_bytes': (512 * _MiB, 100 * _MiB, 2048 * _MiB,
                                   "what a process holds outside PyTorch's segments once it ran "
                                   "kernels: the CUDA context (at least cuda_context_bytes' low end) and the libraries' kernels"),
    'driver_kept_share': (0.015, 0.0, 0.05,
                          'the share of the memory the driver keeps, which mem_get_info does not count'),
    'ecc_share': (1 / 16, 1 / 16, 1 / 16,
                  "what ECC keeps for check bits on GDDR memory (on by default on the T4, as on "
                  "Colab); HBM (the H200's) has its ECC bits apart"),
    'cublas_workspace_bytes': (8 * _MiB + 128 * 1024, 8 * _MiB + 128 * 1024, 8 * _MiB + 128 * 1024,
                               "the workspace a thread's first cuBLAS call allocates through the caching "
                               'allocator before Hopper: the default :4096:2:16:8 (2 x 4 MiB, 8 x 16 KiB; '
                               'aten/src/ATen/cuda/CublasHandlePool.cpp)'),
    'cublas_workspace_bytes_sm90': (32 * _MiB, 32 * _MiB, 32 * _MiB,
                                    'the same on Hopper (compute capability 9.0): 32 MiB (CublasHandlePool.cpp)'),
    # --- NCCL between two GPUs
    'nccl_nvlink_share': (0.8, 0.5, 0.95,
                          "the share of one direction of NVLink that NCCL's all-reduce reaches on "
                          'large tensors (protocol overhead, the reduction on the GPU)'),
    'nccl_pcie_share': (0.6, 0.3, 0.9,
                        'the share of one direction of PCIe that NCCL reaches between two GPUs: '
                        'through the host bridge, or staged in host memory where peer access is off '
                        '(common in VMs)'),
    'nccl_latency_nvlink_s': (10e-6, 3e-6, 30e-6,
                              "NCCL's time for a tiny all-reduce between two GPUs on NVLink"),
    'nccl_latency_pcie_s': (25e-6, 8e-6, 80e-6,
                            "NCCL's time for a tiny all-reduce between two GPUs over PCIe"),
    # --- copies between two GPUs (lesson 3)
    'peer_nvlink_share': (0.8, 0.5, 0.95,
                          'the share of one direction of NVLink that a large copy between two GPUs with '
                          "peer access reaches (the copy engines' DMA; NVLink's packet headers)"),
    'peer_pcie_share': (0.6, 0.2, 0.97,
                        'the share of one direction of PCIe that a large copy between two GPUs reaches: '
                        'peer to peer through a PCIe switch, or staged through host memory where peer '
                        'access is off (common in VMs), which can halve it or worse'),
}


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A model's value with the range an expectation accepts, its unit and why the range."""
    value: float
    low: float
    high: float
    unit: str = ''
    why: str = ''

    def __post_init__(self):
        if not (self.low <= self.value <= self.high):
            raise ValueError(f'an estimate needs low <= value <= high, got {self.low}, {self.value}, {self.high}')

    def scaled(self, factor, unit=None):
        """The same estimate times ``factor`` (positive), in another unit if given."""
        return Estimate(self.value * factor, self.low * factor, self.high * factor,
                        self.unit if unit is None else unit, self.why)

    def inverse(self, numerator, unit):
        """``numerator / self``: a time becomes a rate (the range flips)."""
        return Estimate(numerator / self.value, numerator / self.high, numerator / self.low, unit, self.why)


def reference_gpus():
    """The GPUs every expectation is computed for, in the order they are shown."""
    return [DATASHEET['H200'], DATASHEET['T4']]


def gpu_spec(device_name):
    """The datasheet entry of the GPU that ``torch.cuda.get_device_name`` calls ``device_name``,
    or None when the table has none (an H200 NVL is not the H200 SXM: other clocks and power)."""
    for spec in DATASHEET.values():
        if device_name == spec.name:
            return spec
    return None


def pcie_bytes_per_s(generation, lanes=16):
    """The most a PCIe link carries one way, in bytes/s: lanes x transfers x the share that is data
    (lesson 3's formula: 8b/10b coding for 1.0 and 2.0, 128b/130b for 3.0 to 5.0)."""
    gt_per_s = {1: 2.5, 2: 5, 3: 8, 4: 16, 5: 32}[generation]      # 6.0 codes differently (FLIT)
    data = 8 / 10 if generation <= 2 else 128 / 130
    return lanes * gt_per_s * 1e9 * data / 8


def assumption(name, unit=''):
    """The entry ``name`` of ``ASSUMPTIONS`` as an Estimate in ``unit``, its why included."""
    value, low, high, why = ASSUMPTIONS[name]
    return Estimate(value, low, high, unit, why)


def total(*parts, unit='s', why=''):
    """The sum of estimates in seconds (low with low, high with high), as an Estimate in
    ``unit``: 's', 'ms' or 'µs'."""
    scale = {'s': 1, 'ms': 1e3, 'µs': 1e6}[unit]
    return Estimate(sum(p.value for p in parts) * scale, sum(p.low for p in parts) * scale,
                    sum(p.high for p in parts) * scale, unit, why)


def _levels(x, points):
    """(value, the values a grid takes) of ``x``, an Estimate or a (value, low, high, ...) tuple."""
    value, low, high = (x.value, x.low, x.high) if isinstance(x, Estimate) else tuple(x[:3])
    if points == 2:
        return value, (low, high)
    return value, sorted({value, *(low * (high / low) ** (i / (points - 1)) for i in range(points))})


def spread(f, inputs, unit='', why='', points=2):
    """``f(*inputs)`` as an Estimate: ``f`` at the inputs' values, and the least and greatest ``f``
    over a grid of their ranges (each input an Estimate or a (value, low, high, ...) tuple).

    With ``points=2`` the grid is every corner, each input at its low or high end: enough where
    ``f`` grows or falls with each input, and a ratio of two times keeps one machine's speeds in
    both. With more, each input takes its value and ``points`` values spread geometrically from
    low to high (its ends must be positive), for an ``f`` that is not monotonic (a max, a ratio).
    """
    levels = [_levels(x, points) for x in inputs]
    value = f(*(v for v, _ in levels))
    seen = [f(*point) for point in itertools.product(*(grid for _, grid in levels))] + [value]
    return Estimate(value, min(seen), max(seen), unit, why)


def link_copy_seconds(nbytes, link, share, where, of_link=''):
    """Lesson 3's copy model over any link: latency + ``nbytes`` at the ``ASSUMPTIONS`` entry
    ``share`` of ``link`` bytes/s (one way). ``where`` names the link in the reason, ``of_link``
    follows the share's range there."""
    lat, lat_low, lat_high = ASSUMPTIONS['copy_latency_s'][:3]
    mid, low, high = ASSUMPTIONS[share][:3]
    why = f'{where} at {low:.0%}-{high:.0%}{of_link}, plus {lat_low * 1e6:.0f}-{lat_high * 1e6:.0f} µs of latency'
    return Estimate(lat + nbytes / (mid * link), lat_low + nbytes / (high * link),
                    lat_high + nbytes / (low * link), 's', why)


def copy_seconds(nbytes, gpu, pinned=True):
    """A host-device copy of ``nbytes`` on ``gpu``'s PCIe link: latency + bytes / bandwidth."""
    link = pcie_bytes_per_s(*gpu.pcie)
    return link_copy_seconds(nbytes, link, 'pinned_share' if pinned else 'pageable_share',
                             f'PCIe {gpu.pcie[0]}.0 x{gpu.pcie[1]} ({link / 1e9:.1f} GB/s one way)',
                             f' of the link ({"pinned" if pinned else "pageable"})')


def peer_link(gpu):
    """(bytes/s one way, the ``ASSUMPTIONS`` entry of the share a copy reaches) between two ``gpu``s
    with peer access: NVLink where the datasheet has it (half its both-ways figure), else PCIe."""
    if gpu.nvlink_bytes_per_s:
        return gpu.nvlink_bytes_per_s / 2, 'peer_nvlink_share'
    return pcie_bytes_per_s(*gpu.pcie), 'peer_pcie_share'


def peer_copy_seconds(nbytes, gpu):
    """A copy of ``nbytes`` from one ``gpu`` to another: lesson 3's model over ``peer_link``."""
    link, share = peer_link(gpu)
    where = 'NVLink' if gpu.nvlink_bytes_per_s else f'PCIe {gpu.pcie[0]}.0 x{gpu.pcie[1]}'
    return link_copy_seconds(nbytes, link, share, f'{where} ({link / 1e9:.0f} GB/s one way)')


def copy_bytes_per_s(nbytes, gpu, pinned=True):
    """The bandwidth a copy of ``nbytes`` shows (bytes over its whole time), as an Estimate in GB/s."""
    return copy_seconds(nbytes, gpu, pinned).inverse(nbytes / 1e9, 'GB/s')


def roofline_seconds(flops, nbytes, gpu, dtype='float32', matmul_share=1.0, memory_share=1.0):
    """A kernel's own time on ``gpu`` by the roofline, in seconds, at the given shares of the peaks:
    the longer of its FLOPs and its bytes, without a launch floor (the GPU's time for a kernel
    queued behind others)."""
    return max(flops / (matmul_share * gpu.flops(dtype)), nbytes / (memory_share * gpu.memory_bytes_per_s))


def kernel_seconds(flops, nbytes, gpu, dtype='float32'):
    """One kernel on ``gpu`` by the roofline: the longer of FLOPs at the reachable peak and bytes
    at the reachable memory bandwidth, and never less than a launch."""
    peak, bw = gpu.flops(dtype), gpu.memory_bytes_per_s
    m, m_low, m_high = ASSUMPTIONS['matmul_share'][:3]
    b, b_low, b_high = ASSUMPTIONS['memory_share'][:3]
    launch, l_low, l_high = ASSUMPTIONS['launch_s'][:3]

    def at(mm, bb, floor):
        return max(roofline_seconds(flops, nbytes, gpu, dtype, mm, bb), floor)
    bound = 'compute' if flops / peak > nbytes / bw else 'memory'
    why = (f'{bound}-bound on the roofline ({gpu.key}: {peak / 1e12:.0f} TFLOP/s {dtype}, '
           f'{bw / 1e12:.2f} TB/s), at the reachable share of each, never under a launch')
    return Estimate(at(m, b, launch), at(m_high, b_high, l_low), at(m_low, b_low, l_high), 's', why)


def matmul_seconds(m, n, k, gpu, dtype='float32', itemsize=None):
    """An (m x k) @ (k x n) product: 2mnk FLOPs, each operand read once and the result written."""
    itemsize = itemsize or {'float32': 4, 'tf32': 4, 'bfloat16': 2, 'float16': 2, 'float8': 1}[dtype]
    return kernel_seconds(2 * m * n * k, itemsize * (m * k + k * n + m * n), gpu, dtype)


def elementwise_seconds(nbytes, gpu):
    """An elementwise kernel that moves ``nbytes`` (read and written together)."""
    return kernel_seconds(0, nbytes, gpu)


def cublas_workspace_bytes(gpu):
    """The bytes of the workspace a thread's first cuBLAS call on ``gpu`` allocates (by architecture)."""
    hopper = gpu.capability == (9, 0)
    return ASSUMPTIONS['cublas_workspace_bytes_sm90' if hopper else 'cublas_workspace_bytes'][0]
