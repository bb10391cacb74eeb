"""Lesson 12's GPU-only cell: what NCCL all-reduces are expected to show on two GPUs.

``12-nccl-allreduce`` needs two GPUs, which neither Colab nor the machine a recording
would be made on (one H100 or H200) has; on a machine with more, it runs on the first two, as modelled. Its expectation is the lesson's own ring model: an all-reduce of ``b`` bytes
costs a latency plus ``ring_allreduce_bytes(b, n)`` over the bandwidth of one GPU's link in one
direction, and ``bus_bandwidth`` turns the time back into that link's rate. The link is NVLink
for a pair of H200s (the datasheet's 900 GB/s is both directions together) and PCIe for a pair
of T4s, which have no NVLink. What NCCL reaches of a link, and its latency, come with their
ranges from ``gpu_models.ASSUMPTIONS`` (``nccl_nvlink_share``, ``nccl_latency_nvlink_s``, and
the same for PCIe); each range is the model at the corners of those (``gpu_models.spread``).
"""
from .. import gpu_models
from ..gpu_models import ASSUMPTIONS, spread
from . import expectation

HOST_LAUNCHES = 4   # the script's timed call: ProcessGroupNCCL's bookkeeping and launch, then the synchronize
BIG = 256 * 2**20   # the largest tensor the cell times


def allreduce_link(gpu):
    """('nvlink' or 'pcie', bytes/s one way) of the link two ``gpu``s all-reduce over."""
    if gpu.nvlink_bytes_per_s:
        return 'nvlink', gpu.nvlink_bytes_per_s / 2
    return 'pcie', gpu_models.pcie_bytes_per_s(*gpu.pcie)


def ring_latency(nccl_s, launch_s, gpus=2):
    """A timed all-reduce's fixed cost: NCCL's ``nccl_s`` for each of the ring's ``gpus`` - 1 steps
    (one between two GPUs), and the host's launches."""
    return (gpus - 1) * nccl_s + HOST_LAUNCHES * launch_s


def allreduce_seconds(nbytes, link, latency, share, gpus=2):
    """The lesson's ring model: a latency, then the ring's bytes at ``share`` of ``link``."""
    from ..lessons import ring_allreduce_bytes
    return latency + ring_allreduce_bytes(nbytes, gpus) / (share * link)


@expectation('12-nccl-allreduce', how='model')
def _(e, gpu):
    from ..lessons import bus_bandwidth
    kind, link = allreduce_link(gpu)
    share, nccl = ASSUMPTIONS[f'nccl_{kind}_share'], ASSUMPTIONS[f'nccl_latency_{kind}_s']
    launch = tuple(gpu_models.assumed('launch_s', gpu)[:3])       # the host such a pair sits in
    bus = lambda n, each, s: bus_bandwidth(BIG, allreduce_seconds(BIG, link, ring_latency(n, each), s), 2) / 1e9
    where = 'NVLink' if kind == 'nvlink' else f'PCIe {gpu.pcie[0]}.0 x{gpu.pcie[1]} (no NVLink)'
    e.note("It needs two GPUs (Colab, and the one-GPU machine a recording would be made on, have one). Expected of two, by "
           'the ring model:')
    e.number('latency_us', 'fitted latency (tiny all-reduce, from the host)', spread(
        lambda n, each: 1e6 * ring_latency(n, each), (nccl, launch), 'µs',
        f"NCCL's {1e6 * nccl[1]:.0f}-{1e6 * nccl[2]:.0f} µs + {HOST_LAUNCHES} launches of host time "
        f'({1e6 * launch[1]:.0f}-{1e6 * launch[2]:.0f} µs each)'))
    e.number('bus_gb_s', 'bus bandwidth of the 256 MiB all-reduce', spread(
        bus, (nccl, launch, share), 'GB/s',
        f'{where}: {share[1]:.0%}-{share[2]:.0%} of {link / 1e9:.3g} GB/s each way'))
