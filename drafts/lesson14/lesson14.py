"""DRAFT (not installed, not run on a GPU): lesson 14's GPU-only cells, for d2l_utils/expectations/lesson14.py.

Needs also: LESSONS['14'] = '14_beyond_data_parallelism.ipynb' in expectations/__init__.py.

``14-tp-block-nvlink`` (2 GPUs): one tensor-parallel MLP block of width 8192 on 8 x 1024 tokens in
bfloat16, forward and backward, over NCCL. Its all-reduces (2 of tokens x width x 2 bytes) by
lesson 12's ring model on the pair's link, its matrix products (6 x 8 width^2 FLOPs a token, half
per GPU) by the roofline; the share of the step in all-reduces is a ratio measured in the same run.

``14-pipeline-bubble-gpu`` (2 GPUs): the lesson's pipeline (GPipe, m = 2 ... 16) on two GPUs, each
forward and backward timed with CUDA events, the replayed bubble; expected (p - 1)/(m + p - 1)
within the imbalance of the stages (the last computes the loss).
"""
from .. import gpu_models
from ..gpu_models import ASSUMPTIONS, Estimate, spread
from . import expectation
from .lesson12 import allreduce_link, allreduce_seconds, ring_latency

WIDTH, TOKENS = 8192, 8 * 1024


@expectation('14-tp-block-nvlink', how='model')
def _(e, gpu):
    kind, link = allreduce_link(gpu)
    share, nccl = ASSUMPTIONS[f'nccl_{kind}_share'], ASSUMPTIONS[f'nccl_latency_{kind}_s']
    launch = tuple(gpu_models.assumed('launch_s', gpu)[:3])
    nbytes = TOKENS * WIDTH * 2
    e.note('Two all-reduces of the activation (one forward, one backward) against the block\'s matrix products.')
    e.number('allreduce_ms', f'one all-reduce of {nbytes / 2**20:.0f} MiB', spread(
        lambda n, each, s: 1e3 * allreduce_seconds(nbytes, link, ring_latency(n, each), s), (nccl, launch, share), 'ms',
        f"lesson 12's ring model on {kind}"))
    flops = 6 * 8 * WIDTH**2 * TOKENS / 2
    dtype = 'bfloat16' if 'bfloat16' in gpu.peak_flops else 'float16'
    mm = ASSUMPTIONS['matmul_share']
    e.number('compute_ms', 'the block\'s matrix products, forward and backward, per GPU', spread(
        lambda s: 1e3 * flops / (s * gpu.sustained_flops(dtype)), (mm,), 'ms', 'the roofline at matmul_share'))


@expectation('14-pipeline-bubble-gpu', how='model')
def _(e, gpu):
    e.note('The bubble replayed from CUDA-event times shrinks with m; equal stages would give (p - 1)/(m + p - 1).')
    for m in (2, 16):
        model = (2 - 1) / (m + 2 - 1)
        e.number(f'bubble_m{m}', f'bubble, 2 stages, m = {m}', Estimate(model, model, model * 1.6, '',
                 'the model, up to the imbalance of the last stage (it also computes the loss)'))
