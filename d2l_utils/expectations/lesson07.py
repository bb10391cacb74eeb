"""What lesson 7's GPU-only cell is expected to show on the reference GPUs (H100, H200, T4).

The cell runs ``train_ddp.py`` with ``nccl``, one process per GPU, on one GPU or on two
(``min(device_count(), 2)``: a step's 32 samples split evenly over 1 or 2 ranks). Its backend
and the equality of its gradients and weights with the one-process CPU training are
behaviours, read from PyTorch's source and from the script, the same on every GPU and for
either world, so they are judged everywhere. Its time per step is a model: the script's tiny
model leaves the GPU idle, so a step costs what the host needs to launch its work
(``gpu_models.assumed('launch_s', gpu)``, per kind of host), counted from the script. That
count and the cost of DDP's Python are not known well enough to judge (the range spans more
than ``RANGE_LIMIT``): the time is shown, not judged.
"""
from ..gpu_models import ASSUMPTIONS, Estimate, assumed, spread
from . import expectation

# The script's model and batch: Linear(64, 512), ReLU, Linear(512, 1), 32 samples a step.
D, HIDDEN, BATCH = 64, 512, 32
# One timed step, in launches: two copies of the batch to the GPU; forward (2 matmuls, ReLU)
# and the loss (2); backward (about 9 kernels); DDP's bucket (copies in, NCCL's all-reduce,
# the division, copies out: about 10); the foreach SGD step (1); the synchronize (1); and the
# Python of DDP's forward, autograd and the optimizer, worth about 20 more.
LAUNCHES = (50, 35, 70)
HOSTS = {'server': 'a server', 'colab': "Colab's VM", 'desktop': 'a desktop'}
# The gradients' bytes: one bucket (under DDP's 1 MiB first-bucket cap), all-reduced once a step.
GRADIENT_BYTES = 4 * (D * HIDDEN + HIDDEN + HIDDEN + 1)


def step_seconds(gpu):
    """The median time of one DDP training step of train_ddp.py on ``gpu``, as an Estimate in s:
    the host's launches, and on two GPUs at most one NCCL all-reduce of a tiny bucket more."""
    flops = 3 * 2 * BATCH * (D * HIDDEN + HIDDEN)            # forward and backward of both layers
    gpu_s = flops / gpu.sustained_flops('float32')            # at the GPU's sustained float32 peak
    launch = assumed('launch_s', gpu)
    two = ASSUMPTIONS['nccl_latency_pcie_s'][2]               # the slower link's tiny all-reduce
    arithmetic = 'under 1 µs' if gpu_s < 1e-6 else f'{gpu_s * 1e6:.0f} µs'
    why = (f'{LAUNCHES[1]}-{LAUNCHES[2]} host launches of {launch.low * 1e6:.0f}-{launch.high * 1e6:.0f} µs '
           f'on {HOSTS[gpu.host]} (copies, kernels, DDP, the optimizer); its {flops / 1e6:.0f} MFLOP '
           f'take {arithmetic} of the GPU; on two GPUs, up to {two * 1e6:.0f} µs more for NCCL\'s '
           f'all-reduce of {GRADIENT_BYTES / 1e3:.0f} kB')
    step = spread(lambda n, each: n * each, (LAUNCHES, (launch.value, launch.low, launch.high)), 's', why)
    return Estimate(step.value, step.low, step.high + two, 's', why)


@expectation('07-nccl-run', how='source')
def _(e, gpu):
    e.note("One GPU gives a world of one rank, which still runs the whole GPU path (NCCL, DDP's "
           'buckets); two or more GPUs give two ranks (the cell uses two). A step costs what the '
           'host needs to launch it.')
    e.text('backend', "rep['backend']", 'nccl',
           why='train_ddp.py asks for it when CUDA is there; torch/distributed/distributed_c10d.py '
               'builds ProcessGroupNCCL')
    e.number('ms_per_step', 'median time per step (the slower rank)', step_seconds(gpu).scaled(1e3, 'ms'),
             how='model', not_judged='a step is host work (Python and 35-70 launches), whose count '
                                     'and cost per launch are known to 2x each')
    e.text('same_gradient', 'first gradient = one process on the same 32 samples, every rank', 'True',
           why='torch/csrc/distributed/c10d/reducer.cpp averages over the ranks, and 1 or 2 ranks '
               'share out the same first 32 samples (so would 4 or 8)')
    e.text('same_weights', 'final weights = the one-process CPU training, every rank', 'True',
           why='float32 on both: TF32 matmuls are off by default (torch/backends/cuda/__init__.py)')
