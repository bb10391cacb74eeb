"""The course's reference GPUs, from their datasheets, and the models that predict what they show.

Course machinery, written by hand (like ``recordings.py``). Every GPU-only cell's
expectation (``expectations.py``) and every calculator is computed from this one table
and these few models, never from numbers typed again in a lesson:

* ``DATASHEET``: the H200 that records the course and the T4 of Colab's free tier, each
  number with the vendor page it comes from;
* ``ASSUMPTIONS``: what no datasheet gives (a kernel launch's cost, the share of a link
  that a copy reaches), each with the range the expectations carry and why;
* the models the lessons teach: a copy costs latency plus bytes over bandwidth (lesson 3),
  a kernel takes the longer of its FLOPs over the peak and its bytes over the memory
  bandwidth, with a launch cost below which it cannot go (lessons 4, 10, 11).

An ``Estimate`` is a value with the range an expectation accepts, and why the range is
that wide: a model is a prediction, and a measurement inside the range confirms it.
"""
import dataclasses

__all__ = ['DATASHEET', 'ASSUMPTIONS', 'Estimate', 'Datasheet', 'reference_gpus', 'gpu_spec',
           'pcie_bytes_per_s', 'copy_seconds', 'copy_bytes_per_s', 'kernel_seconds',
           'matmul_seconds', 'elementwise_seconds']


@dataclasses.dataclass(frozen=True)
class Datasheet:
    """One GPU as its vendor's datasheet describes it (dense peaks: no sparsity)."""
    key: str                    # the course's short name: 'H200', 'T4'
    name: str                   # what torch.cuda.get_device_name() returns for it
    capability: tuple           # CUDA compute capability (major, minor)
    memory_bytes: float         # the datasheet's memory size ('141 GB' is 141 GiB of HBM3e)
    memory_bytes_per_s: float   # memory bandwidth
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
        memory_bytes_per_s=4.8e12,
        peak_flops={'tf32': 989e12 / 2, 'bfloat16': 1979e12 / 2, 'float16': 1979e12 / 2,
                    'float8': 3958e12 / 2},
        vector_flops=67e12, pcie=(5, 16), nvlink_bytes_per_s=900e9, sms=132,
        source='NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200/), SXM; sparse peaks halved'),
    # NVIDIA T4 datasheet (nvidia.com/en-us/data-center/tesla-t4/): FP32 8.1 TFLOPS; mixed
    # precision (FP16/FP32) 65 TFLOPS; 16 GB GDDR6 at 320 GB/s ("320+ GB/s"); PCIe Gen3 x16;
    # 40 SMs (Turing whitepaper, TU104 as T4). Turing has no TF32 and no bfloat16 tensor cores.
    'T4': Datasheet(
        key='T4', name='Tesla T4', capability=(7, 5), memory_bytes=16 * 2**30,
        memory_bytes_per_s=320e9, peak_flops={'float16': 65e12},
        vector_flops=8.1e12, pcie=(3, 16), nvlink_bytes_per_s=0, sms=40,
        source='NVIDIA T4 datasheet (nvidia.com/en-us/data-center/tesla-t4/)'),
}

# What no datasheet says. Each entry: (value, low, high, why); the expectations take their
# ranges from here, so a GPU run that misses one changes this table, and every cell follows.
ASSUMPTIONS = {
    'launch_s': (6e-6, 2e-6, 20e-6,
                 "the host's cost of one eager PyTorch op on CUDA (dispatch plus cudaLaunchKernel): "
                 'a few microseconds on a fast host, several times that on a slow or virtual one'),
    'copy_latency_s': (10e-6, 3e-6, 50e-6,
                       "a host-device copy's fixed cost (the call, the DMA setup, the completion): "
                       'tens of microseconds at most on PCIe'),
    'pinned_share': (0.85, 0.6, 0.97,
                     'the share of the link a large pinned copy reaches (PCIe packet headers cost '
                     '10-20%; a virtual machine or a narrow slot costs more)'),
    'pageable_share': (0.5, 0.1, 0.97,
                       'the share a large pageable copy reaches: CUDA first copies it through a '
                       'pinned staging buffer on the host, at host memory speed, so it varies most'),
    'memory_share': (0.85, 0.6, 0.97,
                     'the share of the datasheet memory bandwidth a large elementwise kernel reaches'),
    'matmul_share': (0.75, 0.45, 0.95,
                     'the share of the dense datasheet peak a large matrix product reaches '
                     '(clocks under power limits, data that is not all zeros)'),
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
    (lesson 3's formula: 8b/10b coding up to 3.0's predecessors, 128b/130b from 3.0)."""
    gt_per_s = {1: 2.5, 2: 5, 3: 8, 4: 16, 5: 32, 6: 64}[generation]
    data = 8 / 10 if generation <= 2 else 128 / 130
    return lanes * gt_per_s * 1e9 * data / 8


def _share(name):
    value, low, high, _ = ASSUMPTIONS[name]
    return value, low, high


def copy_seconds(nbytes, gpu, pinned=True):
    """A host-device copy of ``nbytes`` on ``gpu``'s PCIe link: latency + bytes / bandwidth."""
    link = pcie_bytes_per_s(*gpu.pcie)
    lat, lat_low, lat_high = _share('copy_latency_s')
    share, low, high = _share('pinned_share' if pinned else 'pageable_share')
    why = (f'PCIe {gpu.pcie[0]}.0 x{gpu.pcie[1]} ({link / 1e9:.1f} GB/s one way) at '
           f'{low:.0%}-{high:.0%} of the link ({"pinned" if pinned else "pageable"}), plus '
           f'{lat_low * 1e6:.0f}-{lat_high * 1e6:.0f} µs of latency')
    return Estimate(lat + nbytes / (share * link), lat_low + nbytes / (high * link),
                    lat_high + nbytes / (low * link), 's', why)


def copy_bytes_per_s(nbytes, gpu, pinned=True):
    """The bandwidth a copy of ``nbytes`` shows (bytes over its whole time), as an Estimate in GB/s."""
    return copy_seconds(nbytes, gpu, pinned).inverse(nbytes / 1e9, 'GB/s')


def kernel_seconds(flops, nbytes, gpu, dtype='float32'):
    """One kernel on ``gpu`` by the roofline: the longer of FLOPs at the reachable peak and bytes
    at the reachable memory bandwidth, and never less than a launch."""
    peak, bw = gpu.flops(dtype), gpu.memory_bytes_per_s
    m, m_low, m_high = _share('matmul_share')
    b, b_low, b_high = _share('memory_share')
    launch, l_low, l_high = _share('launch_s')

    def at(mm, bb, floor):
        return max(flops / (mm * peak), nbytes / (bb * bw), floor)
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

