"""The GPUs the course predicts for, from their datasheets, and the models that predict what they show.

Course machinery, written by hand (like ``recordings.py``). Every GPU-only cell's
expectation (``expectations/``) and every calculator is computed from these tables and
these few models, never from numbers typed again in a lesson:

* ``DATASHEET``: the H100 (SXM and PCIe) and H200 of data-centre servers, the T4, L4 and
  A100 of Colab, and a consumer card (the RTX 4090), each number with the vendor page it
  comes from, the ``torch.cuda.get_device_name()`` strings it matches, the share of its
  clock it sustains through a long matrix product (``clock_share``), and the host it
  usually sits in (``host``); ``THREADS_PER_SM``, the CUDA guide's resident threads by
  compute capability;
* ``ASSUMPTIONS``: what no datasheet gives (a kernel launch's cost, the share of a link
  that a copy reaches, a CUDA context's memory, NCCL's share of a link), each with the
  range the expectations carry and why; ``HOST_ASSUMPTIONS`` narrows the entries that
  depend on the host (a data-centre ``'server'``, Colab's virtual machine ``'colab'``, a
  ``'desktop'`` PC) to what that host supports, and ``assumed(name, gpu)`` picks the one
  for a GPU's host;
* the models the lessons teach: a copy costs latency plus bytes over bandwidth (lesson 3),
  a kernel takes the longer of its FLOPs over the sustained peak and its bytes over the
  memory bandwidth (``roofline_seconds``), with a launch cost below which it cannot go
  (``kernel_seconds``; lessons 4, 10, 11). Every model uses ``Datasheet.sustained_flops``
  (the datasheet's peak times ``clock_share``), so no expectation applies a clock of its own.

An ``Estimate`` is a value with the range an expectation accepts, and why the range is
that wide: a model is a prediction, and a measurement inside the range confirms it.
``assumption`` makes one of an entry of ``ASSUMPTIONS`` (``assumed``: of the GPU's host),
``total`` adds estimates, and ``spread`` gives the range of a function of several of them.
"""
import dataclasses
import itertools

__all__ = ['DATASHEET', 'THREADS_PER_SM', 'ASSUMPTIONS', 'HOST_ASSUMPTIONS', 'HOST_PCIE_GENERATION', 'HOSTS',
           'Estimate', 'Datasheet', 'reference_gpus', 'gpu_spec', 'assumption', 'assumed', 'total', 'spread',
           'pcie_bytes_per_s', 'host_link', 'link_copy_seconds', 'copy_seconds', 'peer_link', 'peer_copy_seconds',
           'copy_bytes_per_s', 'roofline_seconds', 'kernel_seconds', 'matmul_seconds',
           'elementwise_seconds', 'cublas_workspace_bytes']
_MiB = 2**20
HOSTS = ('server', 'colab', 'desktop')


@dataclasses.dataclass(frozen=True)
class Datasheet:
    """One GPU as its vendor's datasheet describes it (dense peaks: no sparsity), with the host a
    machine with that GPU usually is and the share of its clock it sustains."""
    key: str                    # the course's short name: 'H200', 'T4'
    name: str                   # what torch.cuda.get_device_name() returns for it (the first of names)
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
    names: tuple = ()           # every torch.cuda.get_device_name() string it matches (name first)
    clock_share: float = 1.0    # the share of its quoted clock it sustains through a long matrix product
    host: str = 'server'        # 'server', 'colab' or 'desktop': the host such a GPU usually sits in
    ecc_in_memory: bool = False  # ECC on by default with its check bits in the memory (GDDR): less to use

    def __post_init__(self):
        object.__setattr__(self, 'names', tuple(dict.fromkeys((self.name, *self.names))))
        if self.host not in HOSTS:
            raise ValueError(f'host must be one of {HOSTS}, got {self.host!r}')
        if not 0 < self.clock_share <= 1:
            raise ValueError(f'clock_share must be in (0, 1], got {self.clock_share!r}')

    def flops(self, dtype):
        """Dense peak FLOP/s of a matrix product in ``dtype`` ('float32' means without TF32), as the
        datasheet quotes it (at its boost clock)."""
        if dtype == 'float32':
            return self.vector_flops
        if dtype not in self.peak_flops:
            raise ValueError(f'the {self.key} has no {dtype} matrix units in its datasheet; '
                             f'it has {sorted(self.peak_flops)} and float32')
        return self.peak_flops[dtype]

    def sustained_flops(self, dtype):
        """``flops(dtype)`` at the clock the card sustains through a long product (``clock_share``):
        the peak every model of the course uses."""
        return self.flops(dtype) * self.clock_share


# Sources: NVIDIA's datasheets and product pages, named with each entry. NVIDIA quotes tensor-core
# rates "with sparsity" (2:4 structured sparsity doubles them); the course's peaks are dense, so
# those figures are halved here, and each entry says so.
#
# clock_share. A 70 W or 72 W card cannot hold its boost clock through a long matrix product: it
# lowers its clock to stay within its power limit. The T4: NVIDIA's developer forum ("About GPU
# peak performance", forums.developer.nvidia.com/t/about-gpu-peak-performance/264462) reports a
# 4096 float16 cuBLAS product at about 24 TFLOP/s of the 65 quoted, and NVIDIA's answer there
# names power capping at 70 W as the cause; Colab's T4 reaches about 4.2 TFLOP/s in float32 of
# the 8.1 quoted (issue 37). Those are 37% and 52% of the peaks; the same TU104 chip without the
# 70 W limit (an SXM2 board, github.com/zzc0721/torch-performance-test-data issue 90) reaches
# 7.9 and 56 TFLOP/s, 97% and 86%: the gap is the clock. With clock_share 0.6 and matmul_share's
# 50-97%, the model gives 2.4-4.7 TFLOP/s in float32 and 19.5-38 in float16, around both figures.
# The L4 (72 W): torch 2.9 on an L4 (same repository, issue 120) reaches 10.7 TFLOP/s float32,
# 25.7 TF32, 53.8 float16 and 59.4 bfloat16 for n = 8192: 35%, 43%, 44% and 49% of its dense
# peaks; clock_share 0.6 puts each inside 50-97% of the sustained rate. The 350-700 W parts keep
# the clock the datasheet's peaks are quoted at (1.0); what they lose (data-dependent power,
# tile quantisation) is matmul_share's range, the same for every GPU.
DATASHEET = {
    # NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/), the H100 SXM column:
    # FP32 67 TFLOPS; TF32 989, BF16 1,979, FP16 1,979, FP8 3,958 TFLOPS, each "with sparsity", so
    # the dense rates are half; 80 GB HBM3 at 3.35 TB/s; NVLink 900 GB/s; PCIe Gen5 128 GB/s (both
    # directions: x16 of Gen5). 132 SMs (NVIDIA Hopper architecture whitepaper, H100 SXM5).
    # torch.cuda.get_device_name() reports 'NVIDIA H100 80GB HBM3' for it.
    'H100': Datasheet(
        key='H100', name='NVIDIA H100 80GB HBM3', capability=(9, 0), memory_bytes=80 * 2**30,
        memory_bytes_per_s=3.35e12, memory_type='HBM3',
        peak_flops={'tf32': 989e12 / 2, 'bfloat16': 1979e12 / 2, 'float16': 1979e12 / 2,
                    'float8': 3958e12 / 2},
        vector_flops=67e12, pcie=(5, 16), nvlink_bytes_per_s=900e9, sms=132, host='server',
        source='NVIDIA H100 datasheet (nvidia.com/en-us/data-center/h100/), H100 SXM; sparse peaks halved'),
    # The same datasheet, H100 PCIe column: FP32 51 TFLOPS; TF32 756, BF16 1,513, FP16 1,513, FP8
    # 3,026 TFLOPS with sparsity (halved here); 80 GB HBM2e at 2 TB/s; NVLink 600 GB/s (through
    # the NVLink bridge that joins two cards; without it, two cards use PCIe); PCIe Gen5 128 GB/s.
    # 114 SMs (Hopper whitepaper, H100 PCIe). An H100 NVL (94 GB) is another part: not matched.
    'H100-PCIe': Datasheet(
        key='H100-PCIe', name='NVIDIA H100 PCIe', capability=(9, 0), memory_bytes=80 * 2**30,
        memory_bytes_per_s=2.0e12, memory_type='HBM2e',
        peak_flops={'tf32': 756e12 / 2, 'bfloat16': 1513e12 / 2, 'float16': 1513e12 / 2,
                    'float8': 3026e12 / 2},
        vector_flops=51e12, pcie=(5, 16), nvlink_bytes_per_s=600e9, sms=114, host='server',
        source='NVIDIA H100 datasheet (nvidia.com/en-us/data-center/h100/), H100 PCIe; sparse peaks halved'),
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
        vector_flops=67e12, pcie=(5, 16), nvlink_bytes_per_s=900e9, sms=132, host='server',
        source='NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200/), SXM; sparse peaks halved'),
    # NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100/), the A100 40GB SXM
    # column, which is Colab's A100 ('NVIDIA A100-SXM4-40GB'): FP32 19.5 TFLOPS; TF32 156, BF16 312,
    # FP16 312 TFLOPS dense (the datasheet gives 312, 624, 624 "with sparsity" beside them); 40 GB
    # HBM2 at 1,555 GB/s; NVLink 600 GB/s; PCIe Gen4 64 GB/s (x16 of Gen4). 108 SMs (NVIDIA A100
    # Tensor Core GPU architecture whitepaper). Only this variant: the 80 GB parts have HBM2e at
    # 1,935-2,039 GB/s, and the PCIe cards a 250-300 W limit, so they are not matched.
    'A100': Datasheet(
        key='A100', name='NVIDIA A100-SXM4-40GB', capability=(8, 0), memory_bytes=40 * 2**30,
        memory_bytes_per_s=1555e9, memory_type='HBM2',
        peak_flops={'tf32': 156e12, 'bfloat16': 312e12, 'float16': 312e12},
        vector_flops=19.5e12, pcie=(4, 16), nvlink_bytes_per_s=600e9, sms=108, host='colab',
        source='NVIDIA A100 datasheet (nvidia.com/en-us/data-center/a100/), A100 40GB SXM; dense peaks as quoted'),
    # NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/l4/): FP32 30.3 TFLOPS;
    # TF32 120, BF16 242, FP16 242, FP8 485 TFLOPS, each "with sparsity" (halved here); 24 GB GDDR6
    # at 300 GB/s; PCIe Gen4 x16; 72 W. 58 SMs (its 7,424 CUDA cores, 128 an SM on Ada; what torch
    # reports for it). Colab's L4 runs with ECC on (it reports 22.5 GiB of the 24).
    'L4': Datasheet(
        key='L4', name='NVIDIA L4', capability=(8, 9), memory_bytes=24 * 2**30,
        memory_bytes_per_s=300e9, memory_type='GDDR6',
        peak_flops={'tf32': 120e12 / 2, 'bfloat16': 242e12 / 2, 'float16': 242e12 / 2, 'float8': 485e12 / 2},
        vector_flops=30.3e12, pcie=(4, 16), nvlink_bytes_per_s=0, sms=58, host='colab', clock_share=0.6,
        ecc_in_memory=True,
        source='NVIDIA L4 datasheet (nvidia.com/en-us/data-center/l4/); sparse peaks halved'),
    # NVIDIA T4 datasheet (nvidia.com/en-us/data-center/tesla-t4/): FP32 8.1 TFLOPS; mixed
    # precision (FP16/FP32) 65 TFLOPS; 16 GB GDDR6 at 320 GB/s ("320+ GB/s"); PCIe Gen3 x16;
    # 70 W; 40 SMs (Turing whitepaper, TU104 as T4). Turing has no TF32 and no bfloat16 tensor
    # cores. ECC is on by default (as on Colab, which reports 15 GiB of the 16).
    'T4': Datasheet(
        key='T4', name='Tesla T4', capability=(7, 5), memory_bytes=16 * 2**30,
        memory_bytes_per_s=320e9, memory_type='GDDR6', peak_flops={'float16': 65e12},
        vector_flops=8.1e12, pcie=(3, 16), nvlink_bytes_per_s=0, sms=40, host='colab', clock_share=0.6,
        ecc_in_memory=True,
        source='NVIDIA T4 datasheet (nvidia.com/en-us/data-center/tesla-t4/)'),
    # NVIDIA Ada Lovelace GPU architecture whitepaper (images.nvidia.com/aem-dam/Solutions/geforce/
    # ada/nvidia-ada-gpu-architecture.pdf), the GeForce RTX 4090 column: 82.6 TFLOPS FP32 (16,384
    # CUDA cores at 2,520 MHz boost, as the product page nvidia.com/en-us/geforce/graphics-cards/
    # 40-series/rtx-4090/ lists them); tensor cores with FP32 accumulate (what PyTorch's cuBLAS
    # calls use): FP16 and BF16 165.2, TF32 82.6, FP8 330.3 TFLOPS dense (the whitepaper gives
    # the sparse rates beside them; FP16 accumulate, which PyTorch does not use, is twice as fast);
    # 24 GB GDDR6X at 1,008 GB/s; 128 SMs; PCIe Gen4 x16; no NVLink; 450 W. GeForce cards run
    # without ECC.
    'RTX-4090': Datasheet(
        key='RTX-4090', name='NVIDIA GeForce RTX 4090', capability=(8, 9), memory_bytes=24 * 2**30,
        memory_bytes_per_s=1008e9, memory_type='GDDR6X',
        peak_flops={'tf32': 82.6e12, 'bfloat16': 165.2e12, 'float16': 165.2e12, 'float8': 330.3e12},
        vector_flops=82.6e12, pcie=(4, 16), nvlink_bytes_per_s=0, sms=128, host='desktop',
        source='NVIDIA Ada Lovelace architecture whitepaper, RTX 4090 (nvidia.com/en-us/geforce/graphics-cards/'
               '40-series/rtx-4090/); FP32-accumulate tensor rates, dense'),
}

# Resident threads per SM by compute capability (CUDA C++ Programming Guide, the table of
# compute capabilities): every one of them gets its stack in a CUDA context (lesson 1).
THREADS_PER_SM = {(7, 5): 1024, (8, 0): 2048, (8, 6): 1536, (8, 9): 1536, (9, 0): 2048,
                  (10, 0): 2048, (12, 0): 1536}

# What no datasheet says. Each entry: (value, low, high, why); the expectations take their
# ranges from here, so a GPU run that misses one changes this table, and every cell follows.
# An entry that depends on the host (its CPU, its virtual machine, its driver) is narrowed for
# each host in HOST_ASSUMPTIONS below: use ``assumed(name, gpu)``, which picks the GPU's host.
# The entries here hold for any host (the union), for code that knows no GPU.
ASSUMPTIONS = {
    # --- the host (narrower for each host in HOST_ASSUMPTIONS)
    'launch_s': (6e-6, 2e-6, 20e-6,
                 "the host's cost of one eager PyTorch op on CUDA (dispatch plus cudaLaunchKernel): "
                 'a few microseconds on a fast host, several times that on a slow or virtual one'),
    'light_op_s': (1.5e-6, 0.5e-6, 5e-6,
                   'an op that launches no kernel (a view, a detach, a profiler mark) costs the host '
                   "PyTorch's dispatch only, a fraction of a launch"),
    'step_python_s': (40e-6, 15e-6, 150e-6,
                      "one training step's Python beyond its ops (zero_grad and SGD.step looping over "
                      "the parameters, autograd's hand-off to its device thread; lesson 4's network)"),
    'text_bytes_per_s': (0.8e9, 0.3e9, 2.0e9,
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
    'pageable_bytes_per_s': (12e9, 5e9, 24e9,
                             "the most a large pageable copy reaches: the driver copies it, piece by piece, "
                             "through a pinned staging buffer on the host, so it runs at the lesser of the "
                             "pinned rate and that host copy's rate (one CPU thread's memcpy)"),
    # --- kernels (the GPU's side: the same on every host)
    'memory_share': (0.85, 0.65, 0.95,
                     'the share of the datasheet memory bandwidth a large elementwise kernel reaches: '
                     'about 90% on HBM, less on GDDR with ECC on (the T4, the L4)'),
    'matmul_share': (0.75, 0.5, 0.97,
                     'the share of the sustained dense peak (Datasheet.sustained_flops) a large matrix product '
                     'reaches: data-dependent power, tiles that do not fill every SM; cuBLAS reaches 97% '
                     'of float32 on an A100, 60-80% of 16-bit on an H100'),
    'skinny_tf32_share': (0.2, 0.2, 0.2,
                          'the least share of the TF32 peak a skinny product reaches (a convolution '
                          "as pixels x 64 channels of 576 terms fills the tensor cores' tiles poorly)"),
    'misaligned_matmul_share': (0.7, 0.25, 1.0,
                                'the rate of a 16-bit product whose rows are not multiples of 16 bytes (n = 4095), '
                                'as a share of n = 4096: cuBLAS then picks kernels with narrower loads; NVIDIA '
                                'publishes no figure for current GPUs (uncertain, hence wide)'),
    'kernel_gap_s': (2e-6, 1.2e-6, 3.5e-6,
                     "a kernel's cost to the GPU beyond its roofline time (starting it, ending it, "
                     'starting the next one queued behind it): all a tiny kernel takes, 1-3 µs back to back in '
                     'one stream on current GPUs (NVIDIA, "Getting Started with CUDA Graphs": a few µs a short '
                     'kernel, graphed or not); more at lower clocks'),
    # --- memory
    'cuda_context_bytes': (250 * _MiB, 100 * _MiB, 900 * _MiB,
                           "what the driver keeps for itself in a CUDA context that ran no kernel, "
                           "beyond the threads' stacks: not documented"),
    'thread_stack_bytes': (1024, 1024, 1024,
                           "a context's local memory for each thread the card can hold at once: "
                           "cudaLimitStackSize's default (CUDA Runtime API, cudaDeviceSetLimit)"),
    'context_with_kernels_bytes': (512 * _MiB, 100 * _MiB, 2048 * _MiB,
                                   "what a process holds outside PyTorch's segments once it ran "
                                   "kernels: the CUDA context (at least cuda_context_bytes' low end) and the libraries' kernels"),
    'driver_kept_share': (0.015, 0.0, 0.05,
                          'the share of the memory the driver keeps, which mem_get_info does not count'),
    'ecc_share': (1 / 16, 1 / 16, 1 / 16,
                  "what ECC keeps for check bits on GDDR memory where it is on (Datasheet.ecc_in_memory: the T4 "
                  "and the L4, as on Colab); HBM has its ECC bits apart"),
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
    'nccl_pcie_share': (0.6, 0.35, 0.9,
                        'the share of one direction of PCIe that NCCL reaches between two GPUs: '
                        'through the host bridge, or staged in host memory where peer access is off '
                        '(common in VMs)'),
    'nccl_latency_nvlink_s': (10e-6, 6e-6, 17e-6,
                              "NCCL's time for a tiny all-reduce between two GPUs on NVLink (nccl-tests' "
                              'all_reduce_perf at 8 bytes: about 10 µs, its LL protocol)'),
    'nccl_latency_pcie_s': (25e-6, 14e-6, 40e-6,
                            "NCCL's time for a tiny all-reduce between two GPUs over PCIe (peer to peer, or "
                            "through host memory (its SHM transport) where peer access is off: tens of µs)"),
    # --- copies between two GPUs (lesson 3)
    'peer_nvlink_share': (0.8, 0.5, 0.95,
                          'the share of one direction of NVLink that a large copy between two GPUs with '
                          "peer access reaches (the copy engines' DMA; NVLink's packet headers)"),
    'peer_pcie_share': (0.55, 0.3, 0.88,
                        'the share of one direction of PCIe that a large copy between two GPUs reaches: '
                        'peer to peer through a PCIe switch (as a pinned copy, up to 88%), or staged through '
                        'host memory where peer access is off (common in VMs, and on GeForce cards), two DMA '
                        'hops the driver overlaps, which can halve it'),
}

# The newest PCIe generation each kind of host gives its GPUs: a copy between host and GPU runs at
# the slower of the GPU's link (Datasheet.pcie) and the host's (``host_link``). Colab's VMs run on
# Google Compute Engine's N1 (T4), A2 (A100) and G2 (L4) machines, whose CPUs (Skylake, Cascade
# Lake: Google's "CPU platforms" page) have PCIe 3.0 (Intel's product pages): an A100's or an L4's
# Gen4 link carries host copies at Gen3's rate there. Servers with H100s or H200s (Sapphire and
# Emerald Rapids, EPYC Genoa) and current desktop boards have Gen5 slots.
HOST_PCIE_GENERATION = {'server': 5, 'colab': 3, 'desktop': 5}

# The host-dependent entries of ASSUMPTIONS, narrowed to one kind of host each (``assumed`` picks
# the one of a GPU's ``host``):
#   'server'  a data-centre server with H100s or H200s: recent Xeon or EPYC cores (3.5-4 GHz turbo),
#             PCIe Gen5 to each GPU, a recent driver, dozens of cores;
#   'colab'   Colab's virtual machine (Google Compute Engine): 2.0-2.2 GHz Xeon vCPUs, two of them on
#             the free T4 tier (12 with an A100); a VM's PCIe passthrough; Colab's older driver;
#   'desktop' a PC with a consumer card: a 5-6 GHz desktop core, PCIe Gen4, few background processes.
# A host's own work (PyTorch's dispatch, Python, a memcpy) runs at the speed of one core: a Colab vCPU
# is about half a server core, a desktop core a little faster than a server's. Each range below is a
# host's value x/÷ about 1.7 (high/low <= 3): the spread between the CPUs and drivers of one kind of
# host, which a measurement outside it would show to be wrong. No GPU has measured them yet for this
# course: the first recording checks them, and a miss changes this table.
HOST_ASSUMPTIONS = {
    'server': {
        'launch_s': (5e-6, 3e-6, 8e-6,
                     'one eager op on CUDA from a 3.5-4 GHz server core: PyTorch\'s dispatch (a few µs) and '
                     'cudaLaunchKernel (2-3 µs)'),
        'light_op_s': (1.2e-6, 0.7e-6, 2e-6, "PyTorch's dispatch of an op that launches nothing, on a server core"),
        'step_python_s': (35e-6, 20e-6, 55e-6,
                          "a training step's Python beyond its ops (zero_grad, SGD.step's loop over the "
                          'parameters) on a server core'),
        'text_bytes_per_s': (1.0e9, 0.6e9, 1.6e9, 'f.readlines() decodes and splits about a byte a nanosecond '
                                                  'on a server core'),
        'python_char_s': (0.4e-6, 0.25e-6, 0.65e-6, "Python's loop over characters (str.index, then "
                                                    'torch.tensor of the list) on a server core'),
        'compile_s': (12.0, 6.0, 18.0, "a cold compile (Dynamo's trace, Inductor's lowering, Triton's kernels "
                                       'and launchers), its kernels built in parallel on a server\'s many cores'),
        'copy_latency_s': (8e-6, 5e-6, 14e-6, "a host-device copy's fixed cost on a server (the call, the DMA "
                                              'setup, the completion)'),
        'pinned_share': (0.85, 0.75, 0.93, "PCIe's packet headers and DMA requests take 7-25% of the link: "
                                           'bandwidthTest reaches about 85% of Gen4 and Gen5 x16 on servers'),
        'pageable_bytes_per_s': (15e9, 9e9, 24e9, "the driver's staging copy of pageable memory, one server core's "
                                                  'memcpy (9-24 GB/s), overlapped with the DMA'),
        'cuda_context_bytes': (300 * _MiB, 180 * _MiB, 500 * _MiB,
                               "the driver's own share of a context beyond the stacks on a server's recent "
                               'driver, with lazy module loading (CUDA_MODULE_LOADING=LAZY, the default): not '
                               'documented, a few hundred MiB'),
        'context_with_kernels_bytes': (700 * _MiB, 450 * _MiB, 1100 * _MiB,
                                       'the context with its stacks (about 270 MiB on a Hopper), and the kernels '
                                       "of cuBLAS and PyTorch that ran, loaded lazily"),
    },
    'colab': {
        'launch_s': (10e-6, 6e-6, 16e-6, "one eager op on CUDA from a Colab vCPU (a 2.0-2.2 GHz Xeon thread in a "
                                         'VM): about twice a server core\'s time'),
        'light_op_s': (2.5e-6, 1.4e-6, 4e-6, "PyTorch's dispatch of an op that launches nothing, on a Colab vCPU"),
        'step_python_s': (70e-6, 40e-6, 110e-6, "a training step's Python beyond its ops, on a Colab vCPU"),
        'text_bytes_per_s': (0.5e9, 0.3e9, 0.8e9, 'f.readlines() on a Colab vCPU: about half a server core'),
        'python_char_s': (0.8e-6, 0.5e-6, 1.3e-6, "Python's loop over characters on a Colab vCPU"),
        'compile_s': (30.0, 15.0, 45.0, 'a cold compile on Colab: two vCPUs (free tier) build the kernels '
                                        'mostly one after another'),
        'copy_latency_s': (12e-6, 7e-6, 20e-6, "a host-device copy's fixed cost in a VM (the call, the DMA "
                                               'setup through the passthrough, the completion)'),
        'pinned_share': (0.8, 0.65, 0.9, 'PCIe headers, and a VM\'s passthrough: Colab\'s T4 reaches about '
                                         '12 of the 15.8 GB/s of Gen3 x16'),
        'pageable_bytes_per_s': (8e9, 5e9, 13e9, "the driver's staging copy of pageable memory on a Colab vCPU "
                                                 '(5-13 GB/s)'),
        'cuda_context_bytes': (200 * _MiB, 120 * _MiB, 350 * _MiB,
                               "the driver's own share of a context beyond the stacks on Colab's driver, "
                               'with lazy module loading: not documented, a few hundred MiB'),
        'context_with_kernels_bytes': (450 * _MiB, 250 * _MiB, 750 * _MiB,
                                       'the context with its stacks (40 MiB on a T4, 216 MiB on an A100) and '
                                       'the kernels of cuBLAS and PyTorch that ran, loaded lazily'),
    },
    'desktop': {
        'launch_s': (4e-6, 2.5e-6, 6.5e-6, 'one eager op on CUDA from a 5-6 GHz desktop core'),
        'light_op_s': (1e-6, 0.6e-6, 1.7e-6, "PyTorch's dispatch of an op that launches nothing, on a desktop core"),
        'step_python_s': (30e-6, 17e-6, 47e-6, "a training step's Python beyond its ops, on a desktop core"),
        'text_bytes_per_s': (1.2e9, 0.7e9, 1.9e9, 'f.readlines() on a desktop core'),
        'python_char_s': (0.35e-6, 0.2e-6, 0.55e-6, "Python's loop over characters on a desktop core"),
        'compile_s': (12.0, 6.0, 18.0, 'a cold compile on a desktop: 8-24 fast cores build the kernels in parallel'),
        'copy_latency_s': (8e-6, 5e-6, 14e-6, "a host-device copy's fixed cost on a PC"),
        'pinned_share': (0.82, 0.7, 0.92, "PCIe's headers, and a desktop board's Gen4 slot"),
        'pageable_bytes_per_s': (15e9, 9e9, 24e9, "the driver's staging copy of pageable memory, one desktop "
                                                  "core's memcpy"),
        'cuda_context_bytes': (300 * _MiB, 180 * _MiB, 500 * _MiB,
                               "the driver's own share of a context beyond the stacks: not documented, "
                               'a few hundred MiB with lazy module loading'),
        'context_with_kernels_bytes': (600 * _MiB, 350 * _MiB, 1000 * _MiB,
                                       'the context with its stacks (192 MiB on an RTX 4090) and the kernels '
                                       'of cuBLAS and PyTorch that ran, loaded lazily'),
    },
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

    def __getitem__(self, index):
        """``estimate[:3]`` is (value, low, high), ``estimate[3]`` its why: an Estimate reads like an
        entry of ``ASSUMPTIONS``, so ``value, low, high, why = assumed(name, gpu)`` works too."""
        return (self.value, self.low, self.high, self.why)[index]

    def __iter__(self):
        return iter((self.value, self.low, self.high, self.why))

    def scaled(self, factor, unit=None):
        """The same estimate times ``factor`` (positive), in another unit if given."""
        return Estimate(self.value * factor, self.low * factor, self.high * factor,
                        self.unit if unit is None else unit, self.why)

    def inverse(self, numerator, unit):
        """``numerator / self``: a time becomes a rate (the range flips)."""
        return Estimate(numerator / self.value, numerator / self.high, numerator / self.low, unit, self.why)


def reference_gpus():
    """The GPUs every expectation block shows, in order: the H100 (the GPU most likely to record the
    course: the lent machine is an H100 unless an H200 is asked for), the H200, and the T4 (Colab's
    free tier). Expectations are computed, and judged, for every GPU of ``DATASHEET``."""
    return [DATASHEET['H100'], DATASHEET['H200'], DATASHEET['T4']]


def gpu_spec(device_name):
    """The datasheet entry of the GPU that ``torch.cuda.get_device_name`` calls ``device_name``,
    or None when the table has none (an H200 NVL is not the H200 SXM: other clocks and power)."""
    for spec in DATASHEET.values():
        if device_name in spec.names:
            return spec
    return None


def pcie_bytes_per_s(generation, lanes=16):
    """The most a PCIe link carries one way, in bytes/s: lanes x transfers x the share that is data
    (lesson 3's formula: 8b/10b coding for 1.0 and 2.0, 128b/130b for 3.0 to 5.0)."""
    gt_per_s = {1: 2.5, 2: 5, 3: 8, 4: 16, 5: 32}[generation]      # 6.0 codes differently (FLIT)
    data = 8 / 10 if generation <= 2 else 128 / 130
    return lanes * gt_per_s * 1e9 * data / 8


def assumption(name, unit=''):
    """The entry ``name`` of ``ASSUMPTIONS`` as an Estimate in ``unit``, its why included (any host:
    prefer ``assumed(name, gpu)`` where the GPU is known)."""
    value, low, high, why = ASSUMPTIONS[name]
    return Estimate(value, low, high, unit, why)


def _host(gpu):
    """The host of ``gpu`` (a Datasheet, or a host's name), or None for any host."""
    if gpu is None:
        return None
    host = gpu if isinstance(gpu, str) else gpu.host
    if host not in HOST_ASSUMPTIONS:
        raise ValueError(f'no host {host!r}: the hosts are {", ".join(HOSTS)}')
    return host


def assumed(name, gpu, unit=''):
    """The assumption ``name`` for ``gpu``'s host (``gpu`` a Datasheet, or 'server', 'colab',
    'desktop'), as an Estimate in ``unit``: the entry of ``HOST_ASSUMPTIONS`` where the host has
    one, else the entry of ``ASSUMPTIONS`` (an assumption about the GPU, the same on any host)."""
    host = _host(gpu)
    if name not in ASSUMPTIONS:
        raise KeyError(f'no assumption named {name!r}')
    value, low, high, why = HOST_ASSUMPTIONS.get(host, {}).get(name, ASSUMPTIONS[name])
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


def link_copy_seconds(nbytes, link, share, where, of_link='', gpu=None):
    """Lesson 3's copy model over any link: latency + ``nbytes`` at the assumption ``share`` (its
    name) of ``link`` bytes/s (one way), each for ``gpu``'s host (``assumed``; any host without
    ``gpu``). ``where`` names the link in the reason, ``of_link`` follows the share's range there."""
    lat, share = assumed('copy_latency_s', gpu), assumed(share, gpu)
    why = (f'{where} at {share.low:.0%}-{share.high:.0%}{of_link}, plus {lat.low * 1e6:.0f}-{lat.high * 1e6:.0f} µs '
           'of latency')
    return Estimate(lat.value + nbytes / (share.value * link), lat.low + nbytes / (share.high * link),
                    lat.high + nbytes / (share.low * link), 's', why)


def host_link(gpu):
    """(generation, lanes) of the PCIe link between ``gpu`` and its host: the GPU's own link
    (``Datasheet.pcie``), at most the generation its host gives (``HOST_PCIE_GENERATION``)."""
    return min(gpu.pcie[0], HOST_PCIE_GENERATION[_host(gpu)]), gpu.pcie[1]


def copy_seconds(nbytes, gpu, pinned=True):
    """A host-device copy of ``nbytes`` on ``gpu``'s PCIe link to its host (``host_link``): latency +
    bytes / bandwidth. A pinned copy reaches ``pinned_share`` of the link; a pageable one the lesser
    of that and the host's staging copy (``pageable_bytes_per_s``), so it is never faster than a
    pinned one."""
    generation, lanes = host_link(gpu)
    link = pcie_bytes_per_s(generation, lanes)
    where = f'PCIe {generation}.0 x{lanes} ({link / 1e9:.1f} GB/s one way)'
    if generation < gpu.pcie[0]:
        where += f", the host's (the {gpu.key}'s own is {gpu.pcie[0]}.0)"
    if pinned:
        return link_copy_seconds(nbytes, link, 'pinned_share', where, ' of the link (pinned)', gpu)
    lat, share, staging = (assumed(n, gpu) for n in ('copy_latency_s', 'pinned_share', 'pageable_bytes_per_s'))
    rate = [min(s * link, g) for s, g in ((share.value, staging.value), (share.low, staging.low),
                                          (share.high, staging.high))]
    why = (f'{where}, pageable: the lesser of {share.low:.0%}-{share.high:.0%} of the link and the host\'s staging '
           f'copy ({staging.low / 1e9:.0f}-{staging.high / 1e9:.0f} GB/s), plus {lat.low * 1e6:.0f}-'
           f'{lat.high * 1e6:.0f} µs of latency')
    return Estimate(lat.value + nbytes / rate[0], lat.low + nbytes / rate[2], lat.high + nbytes / rate[1], 's', why)


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
    return link_copy_seconds(nbytes, link, share, f'{where} ({link / 1e9:.0f} GB/s one way)', gpu=gpu)


def copy_bytes_per_s(nbytes, gpu, pinned=True):
    """The bandwidth a copy of ``nbytes`` shows (bytes over its whole time), as an Estimate in GB/s."""
    return copy_seconds(nbytes, gpu, pinned).inverse(nbytes / 1e9, 'GB/s')


def roofline_seconds(flops, nbytes, gpu, dtype='float32', matmul_share=1.0, memory_share=1.0, sustained=True):
    """A kernel's own time on ``gpu`` by the roofline, in seconds, at the given shares of the peaks:
    the longer of its FLOPs and its bytes, without a launch floor (the GPU's time for a kernel
    queued behind others). The FLOP peak is the sustained one (``Datasheet.sustained_flops``);
    ``sustained=False`` takes the datasheet's, for the time the datasheet allows."""
    peak = gpu.sustained_flops(dtype) if sustained else gpu.flops(dtype)
    return max(flops / (matmul_share * peak), nbytes / (memory_share * gpu.memory_bytes_per_s))


def kernel_seconds(flops, nbytes, gpu, dtype='float32'):
    """One kernel on ``gpu`` by the roofline: the longer of FLOPs at the reachable share of the
    sustained peak and bytes at the reachable memory bandwidth, and never less than a launch
    (``launch_s`` of ``gpu``'s host)."""
    peak, bw = gpu.sustained_flops(dtype), gpu.memory_bytes_per_s
    m, b, launch = assumed('matmul_share', gpu), assumed('memory_share', gpu), assumed('launch_s', gpu)

    def at(mm, bb, floor):
        return max(roofline_seconds(flops, nbytes, gpu, dtype, mm, bb), floor)
    bound = 'compute' if flops / peak > nbytes / bw else 'memory'
    clock = f' at {gpu.clock_share:.0%} of its clock' if gpu.clock_share < 1 else ''
    why = (f'{bound}-bound on the roofline ({gpu.key}: {peak / 1e12:.3g} TFLOP/s {dtype}{clock}, '
           f'{bw / 1e12:.2f} TB/s), at the reachable share of each, never under a launch')
    return Estimate(at(m.value, b.value, launch.value), at(m.high, b.high, launch.low),
                    at(m.low, b.low, launch.high), 's', why)


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
