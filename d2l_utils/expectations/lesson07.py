"""What lesson 7's GPU-only cell is expected to show on the reference GPUs (H200, T4).

The cell runs ``train_ddp.py`` with ``nccl``, one process per GPU (one on each reference
machine). Its backend and the equality of its gradients and weights with the one-process
CPU training are behaviours, read from PyTorch's source and from the script. Its time per
step is a model: the script's tiny model leaves the GPU idle, so a step costs what the host
needs to launch its work (``ASSUMPTIONS['launch_s']`` in ``gpu_models``), counted from the
script.
"""
from ..gpu_models import ASSUMPTIONS, spread
from . import expectation

# The script's model and batch: Linear(64, 512), ReLU, Linear(512, 1), 32 samples a step.
D, HIDDEN, BATCH = 64, 512, 32
# One timed step, in launches: two copies of the batch to the GPU; forward (2 matmuls, ReLU)
# and the loss (2); backward (about 9 kernels); DDP's bucket (copies in, NCCL's all-reduce,
# the division, copies out: about 10); the foreach SGD step (1); the synchronize (1); and the
# Python of DDP's forward, autograd and the optimizer, worth about 20 more.
LAUNCHES = (50, 35, 70)


def step_seconds(gpu):
    """The median time of one DDP training step of train_ddp.py on ``gpu``, as an Estimate in s."""
    flops = 3 * 2 * BATCH * (D * HIDDEN + HIDDEN)            # forward and backward of both layers
    gpu_s = flops / gpu.flops('float32')                      # at the GPU's float32 peak
    launch = ASSUMPTIONS['launch_s']
    arithmetic = 'under 1 µs' if gpu_s < 1e-6 else f'{gpu_s * 1e6:.0f} µs'
    why = (f'{LAUNCHES[1]}-{LAUNCHES[2]} host launches of {launch[1] * 1e6:.0f}-{launch[2] * 1e6:.0f} µs '
           f'(copies, kernels, DDP, the optimizer); its {flops / 1e6:.0f} MFLOP take {arithmetic} of the GPU')
    return spread(lambda n, each: n * each, (LAUNCHES, launch), 's', why)


@expectation('07-nccl-run', how='source')
def _(e, gpu):
    e.note('One GPU, so a world of one rank, which still runs the whole GPU path (NCCL, DDP\'s '
           'buckets). A step costs what the host needs to launch it.')
    e.text('backend', "rep['backend']", 'nccl',
           why='train_ddp.py asks for it when CUDA is there; torch/distributed/distributed_c10d.py '
               'builds ProcessGroupNCCL')
    e.number('ms_per_step', 'median time per step', step_seconds(gpu).scaled(1e3, 'ms'), how='model')
    e.text('same_gradient', 'first gradient = one process on the same 32 samples', 'True',
           why='torch/csrc/distributed/c10d/reducer.cpp averages over the ranks, and 1, 2, 4 or 8 '
               'ranks share out the same first 32 samples')
    e.text('same_weights', 'final weights = the one-process CPU training', 'True',
           why='float32 on both: TF32 matmuls are off by default (torch/backends/cuda/__init__.py)')
