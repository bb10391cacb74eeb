"""Lesson 14's GPU-only cells: a tensor-parallel block and a pipeline's bubble on two GPUs.

Both need two GPUs, which neither Colab nor the machine a recording would be made on (one H100
or H200) has; on a machine with more, they run on the first two, as modelled.

``14-tp-block-nvlink``: one MLP block of width 8192 on 8 x 1024 tokens in 16-bit floats, split
column-wise then row-wise over the two GPUs, forward and backward. Its all-reduce of the
activation (8192 x 8192 values, 128 MiB) by lesson 12's ring model on the pair's link (NVLink
where the datasheet has it, else PCIe), its matrix products (6 x 8 width^2 FLOPs a token, half
on each GPU) by the roofline at ``matmul_share``.

``14-pipeline-bubble-gpu``: lesson 14's stack of four blocks at width 2048, 64 sequences of 1024
tokens, cut in two stages and run with GPipe; the bubble is one minus the stages' busy time
(CUDA events) over two steps' time (the clock). The model is the lesson's ``(p - 1) / (m + p - 1)``
with the activation's trip between the stages and the last stage's loss added to the step:
``1 - m t / ((m + p - 1) t + m L + 2 (p - 1) c)`` for a micro-batch's forward and backward ``t``
(three times the forward's matrix products), the loss ``L`` (four passes over the activation at
``memory_share``) and the trip ``c`` (lesson 3's copy model between GPUs, ``peer_link``).
"""
from .. import gpu_models
from ..gpu_models import ASSUMPTIONS, Estimate, spread
from . import expectation
from .lesson12 import allreduce_link, allreduce_seconds, ring_latency

WIDTH, TOKENS = 8192, 8 * 1024                       # the tensor-parallel block
PP_WIDTH, PP_TOKENS, PP_BLOCKS = 2048, 64 * 1024, 2   # the pipeline: its width, tokens a step, blocks a stage


def _dtype(gpu):
    return 'bfloat16' if 'bfloat16' in gpu.peak_flops else 'float16'


@expectation('14-tp-block-nvlink', how='model')
def _(e, gpu):
    kind, link = allreduce_link(gpu)
    share, nccl = ASSUMPTIONS[f'nccl_{kind}_share'], ASSUMPTIONS[f'nccl_latency_{kind}_s']
    launch = tuple(gpu_models.assumed('launch_s', gpu)[:3])
    nbytes = TOKENS * WIDTH * 2
    e.note('Two all-reduces of the activation (one forward, one backward) beside the matrix products of the block: '
           'a small share of the block\'s time at this size.')
    e.number('allreduce_ms', f'one all-reduce of {nbytes / 2**20:.0f} MiB', spread(
        lambda n, each, s: 1e3 * allreduce_seconds(nbytes, link, ring_latency(n, each), s), (nccl, launch, share), 'ms',
        f"lesson 12's ring model on {'NVLink' if kind == 'nvlink' else 'PCIe'} at NCCL's share of it"))
    flops = 6 * 8 * WIDTH**2 * TOKENS / 2
    e.number('compute_ms', "the block's forward and backward less its two all-reduces, on one GPU", spread(
        lambda s: 1e3 * flops / (s * gpu.sustained_flops(_dtype(gpu))), (ASSUMPTIONS['matmul_share'],), 'ms',
        f'{flops / 1e12:.1f} TFLOP of matrix products at matmul_share of the sustained {_dtype(gpu)} peak'))


def bubble_model(m, p, gpu, matmul_share, peer_share, memory_share, latency):
    """The measured bubble's model: (p - 1) / (m + p - 1), with the trips between stages and the loss."""
    tokens = PP_TOKENS / m                                              # a micro-batch
    forward = 2 * tokens * 8 * PP_WIDTH**2 * PP_BLOCKS / (matmul_share * gpu.sustained_flops(_dtype(gpu)))
    t = 3 * forward                                                     # forward and backward
    activation = tokens * PP_WIDTH * 2
    link, _ = gpu_models.peer_link(gpu)
    c = latency + activation / (peer_share * link)
    loss = 4 * activation / (memory_share * gpu.memory_bytes_per_s)
    return 1 - m * t / ((m + p - 1) * t + m * loss + 2 * (p - 1) * c)


@expectation('14-pipeline-bubble-gpu', how='model')
def _(e, gpu):
    e.note('The bubble shrinks as the micro-batches grow in number: a third of the step with 2, '
           'about a sixteenth with 16, a little more than equal stages and free transfers would give.')
    _, share_name = gpu_models.peer_link(gpu)
    inputs = (ASSUMPTIONS['matmul_share'], ASSUMPTIONS[share_name], ASSUMPTIONS['memory_share'],
              gpu_models.assumed('copy_latency_s', gpu))
    for m in (2, 16):
        est = spread(lambda *a: bubble_model(m, 2, gpu, *a), inputs)
        equal = (2 - 1) / (m + 2 - 1)
        e.number(f'bubble_m{m}', f'bubble, 2 stages, m = {m}', Estimate(
            100 * est.value, 100 * min(est.low, 0.95 * equal), 100 * est.high, '%',
            f'(p - 1) / (m + p - 1) = {equal:.1%}, plus the trips between the stages and the loss at the '
            'corners of matmul_share, the link\'s share, memory_share and a copy\'s latency; down to 95% of '
            '(p - 1) / (m + p - 1) for what CUDA events and the clock bracket differently'))
