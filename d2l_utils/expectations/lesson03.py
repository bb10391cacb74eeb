"""Lesson 3 (copies between devices): what its seven GPU-only cells are expected to show.

Every copy number comes from the model the lesson teaches, a fixed latency plus the bytes
over the link's bandwidth, on each reference GPU's PCIe link (``gpu_models.copy_seconds``
and ``copy_bytes_per_s``: PCIe 5.0 x16 for the H200, 3.0 x16 for the T4), or, between two
GPUs, on NVLink where the datasheet gives one. The behaviours
(a call that returns before its copy, a wait that makes a read safe, a cached pinned block)
come from the PyTorch source files named with them. ``draw_copy_curves`` draws the model's
copy curves, which the fallback of ``03-pinned-copies`` shows.
"""
from .. import gpu_models
from ..gpu_models import Estimate, assumed, total
from . import expectation

MiB = 2**20
LARGEST = 64 * MiB               # the largest copy to or from a GPU that the lesson times


def link_text(gpu):
    """'PCIe 5.0 x16 (63.0 GB/s each way)' for the link between ``gpu`` and its host (``host_link``)."""
    generation, lanes = gpu_models.host_link(gpu)
    return f'PCIe {generation}.0 x{lanes} ({gpu_models.pcie_bytes_per_s(generation, lanes) / 1e9:.1f} GB/s each way)'


def copy_rate(nbytes, gpu, pinned):
    """``gpu_models.copy_bytes_per_s`` in GB/s, for ``gpu``'s host: its reason is the model's (the link, the
    share a pinned copy reaches, and for a pageable one the host's staging copy, which caps it below a pinned one)."""
    return gpu_models.copy_bytes_per_s(nbytes, gpu, pinned)


@expectation('03-pcie-share', how='model')
def _pcie_share(e, gpu):
    e.note('The largest pageable copy (64 MiB) stays below the PCIe link each way, and below what a '
           'pinned copy reaches: the driver first stages pageable memory on the host.')
    for name, way in (('to_gpu_gb_s', 'host -> GPU'), ('from_gpu_gb_s', 'GPU -> host')):
        e.number(name, f'{way}, 64 MiB, pageable', copy_rate(LARGEST, gpu, pinned=False))


def same_copies(gpus):
    """([names], [gpu]): ``gpus`` grouped where the copy model gives the same curves (the same host link
    and host, as the H100 and the H200), each group named 'H100, H200' and drawn once."""
    groups = {}
    for gpu in gpus:
        groups.setdefault((gpu_models.host_link(gpu), gpu.host), []).append(gpu)
    return [', '.join(g.key for g in group) for group in groups.values()], [group[0] for group in groups.values()]


def draw_copy_curves(ax, gpus=None, sizes=None):
    """Draw the copy model's bandwidth against size on ``ax``: pinned (a line and its range) and
    pageable (dashed) for each of ``gpus`` (the reference GPUs), with each link's ceiling."""
    gpus = gpu_models.reference_gpus() if gpus is None else gpus
    sizes = [2**k for k in range(10, 29)] if sizes is None else sizes
    for names, gpu, color in zip(*same_copies(gpus), ('tab:blue', 'tab:green', 'tab:brown')):
        pinned = [gpu_models.copy_bytes_per_s(n, gpu, pinned=True) for n in sizes]
        pageable = [gpu_models.copy_bytes_per_s(n, gpu, pinned=False).value for n in sizes]
        ax.fill_between(sizes, [p.low for p in pinned], [p.high for p in pinned], color=color, alpha=0.15, lw=0)
        ax.loglog(sizes, [p.value for p in pinned], color=color, label=f'{names} pinned (band: its range)')
        ax.loglog(sizes, pageable, '--', color=color, label=f'{names} pageable')
        generation, lanes = gpu_models.host_link(gpu)
        link = gpu_models.pcie_bytes_per_s(generation, lanes) / 1e9
        ax.axhline(link, color=color, lw=0.8, ls=':')
        ax.annotate(f'{names}: PCIe {generation}.0 x{lanes}', (sizes[0], link * 1.15), color=color)
    ax.set(xlabel='copy size (bytes)', ylabel='bandwidth (GB/s)', ylim=(None, 250))


@expectation('03-pinned-copies', how='model')
def _pinned_copies(e, gpu):
    e.note('Pinned copies run close to the link; pageable ones reach less, and vary more '
           '(the driver first copies them, piece by piece, into its own pinned buffer).')
    e.note('Small copies are mostly latency (tens of microseconds at most), whatever the memory.')
    for way, to_gpu in (('to', True), ('from', False)):
        arrow = 'host -> GPU' if to_gpu else 'GPU -> host'
        for pinned in (False, True):
            kind = 'pinned' if pinned else 'pageable'
            e.number(f'{kind}_{way}_gpu_gb_s', f'{arrow}, 64 MiB, {kind}', copy_rate(LARGEST, gpu, pinned))
    e.number('pinned_to_gpu_64k_gb_s', 'host -> GPU, 64 KiB, pinned', copy_rate(64 * 1024, gpu, pinned=True))
    e.text('pageable_not_faster', 'pageable at most 10% faster than pinned (64 MiB, each way, this run)', 'True',
           why='the driver stages a pageable copy through its own pinned buffer, so it is a pinned copy plus a '
               'host copy and cannot beat the pinned one measured beside it (10%: the two are timed apart)')

    def draw(ax):
        draw_copy_curves(ax)
        ax.set_title('Copies between host and GPU: latency + size / bandwidth')
        ax.legend(loc='lower center', bbox_to_anchor=(0.55, 0.0), fontsize='small')
    e.draw(draw)


@expectation('03-non-blocking-returns', how='model')
def _non_blocking_returns(e, gpu):
    e.note('From pinned memory, to(gpu, non_blocking=True) only queues the copy: the call returns '
           'in microseconds, the copy takes its size over the link.')
    launch, latency = assumed('launch_s', gpu, 's'), assumed('copy_latency_s', gpu, 's')
    returned = total(launch, latency, unit='µs', why=f'one PyTorch op on the host (launch_s) plus queueing '
                     f"the copy (copy_latency_s), for the {gpu.key}'s host ({gpu.host}, gpu_models.assumed)")
    copy = gpu_models.copy_seconds(LARGEST, gpu, pinned=True)
    done = total(launch, latency, copy, Estimate(0, 0, launch.high), unit='ms',
                 why=f'the call, then 64 MiB at {copy_rate(LARGEST, gpu, True).why}, then the wait (one launch at most)')
    e.number('returned_us', 'the call returned after', returned)
    e.number('done_ms', 'the copy finished after', done)
    e.text('returned_early', 'returned before half the copy was done', 'True',
           why=f'at most {returned.high:.0f} µs against at least {done.low:.2f} ms; the call returns once the copy '
               'is queued (cudaMemcpyAsync in copy_kernel_cuda, aten/src/ATen/native/cuda/Copy.cu)')


@expectation('03-pinning-cost', how='model')
def _pinning_cost(e, gpu):
    e.note('pin_memory() is a host copy; the first pin of a size also allocates and page-locks the memory, '
           'so pinning a tensor to copy it once costs more than the pageable copy it replaces.')
    for kind, pinned in (('pageable', False), ('pinned', True)):
        copy = gpu_models.copy_seconds(32 * MiB, gpu, pinned=pinned).scaled(1e3, 'ms')
        e.number(f'{kind}_ms', f'one 32 MiB copy to the GPU from {kind} memory',
                 Estimate(copy.value, copy.low, copy.high, 'ms', copy_rate(32 * MiB, gpu, pinned).why))
    e.text('first_pin_slower', 'the first pin slower than pinning again', 'True', how='source',
           why="a freed pinned block is cached by its size rounded up to a power of two and handed back "
               "(PyTorch's caching host allocator, aten/src/ATen/core/CachingHostAllocator.h), so a second "
               'pin of 32 MiB only copies')
    e.text('pin_once_costs_more', 'first pin + pinned copy slower than one pageable copy', 'True',
           why="the first pin allocates and page-locks 32 MiB and copies it on the host, then the link carries it; "
               'the pageable copy stages the same bytes on the host while the link already works')


@expectation('03-read-after-wait', how='model')
def _read_after_wait(e, gpu):
    e.note("to('cpu', non_blocking=True) returns a pinned tensor at once, the copy queued behind the products: "
           'the early read does not hold the data; after waiting on the event it does, and the products are done.')
    e.text('pinned', "the result of to('cpu', non_blocking=True) is pinned", 'True', how='source',
           why='_to_copy allocates the result with pin_out = non_blocking && self.is_cuda() && a CPU destination '
               '(aten/src/ATen/native/TensorConversions.cpp)')
    products = gpu_models.matmul_seconds(2048, 2048, 2048, gpu).scaled(50 * 1e3, 'ms')
    e.text('early_read_complete', 'the early read already holds the data', 'False',
           why=f'50 products of 2048 x 2048 keep the {gpu.key} busy at least {products.low:.0f} ms '
               f'(gpu_models.matmul_seconds, float32); the host queues them and the copy in a few ms')
    e.text('after_waiting', 'after event.synchronize(), the data is there', 'True', how='source',
           why='Event.synchronize (torch/cuda/streams.py) waits for the event recorded after the copy '
               '(cudaEventSynchronize in aten/src/ATen/cuda/CUDAEvent.h), and the stream runs in order')
    e.text('products_done', "the products are done once the copy's event is", 'True', how='source',
           why='an event completes when all work queued on its stream before its record has: the stream runs '
               'in order (CUDAEvent.h records with cudaEventRecord on the current stream)')


def products_seconds(count, gpu):
    """``count`` products of 2048 x 2048 (float32), each followed by a tanh, back to back on ``gpu``."""
    mm = gpu_models.matmul_seconds(2048, 2048, 2048, gpu)
    tanh = gpu_models.elementwise_seconds(2 * 4 * 2048 * 2048, gpu)
    return gpu_models.total(*[mm, tanh] * count, unit='ms',
                            why=f'{count} float32 products of 2048 x 2048 and their tanh, by the roofline '
                                '(gpu_models.matmul_seconds, elementwise_seconds)')


@expectation('03-pageable-non-blocking', how='model')
def _pageable_non_blocking(e, gpu):
    e.note('Behind 20 queued products, a blocking 64 KiB copy from pageable memory waits for them all '
           '(PyTorch copies, then waits for the stream); with non_blocking=True PyTorch skips that wait.')
    work = products_seconds(20, gpu)
    e.number('work_ms', 'the queued products (CUDA events)', work)
    launch, latency, staging = (assumed(name, gpu) for name in ('launch_s', 'copy_latency_s', 'pageable_bytes_per_s'))
    copy = Estimate(latency.value + 2**16 / staging.value, latency.low + 2**16 / staging.high,
                    latency.high + 2**16 / staging.low)
    seconds = work.scaled(1e-3)
    share = gpu_models.spread(lambda w, l, c: 1 - (40 * l - c) / w, [seconds, launch, copy])
    share = Estimate(share.value, share.low, 1 + (copy.high + launch.high) / seconds.low, 'x',
                     f'the blocking call waits for the products the GPU has not run by the time the host has '
                     f'launched all 40 (at {launch.low * 1e6:.1f}-{launch.high * 1e6:.1f} µs each, {gpu.host}), '
                     'then copies 64 KiB (memcpy_and_sync, c10/cuda/CUDAFunctions.h); at most all the products, '
                     'the copy and one call more. A ratio of two times of one run, whatever the clock')
    e.number('blocking_share', 'the blocking call / the queued products', share)
    e.text('non_blocking_waited', 'the non_blocking=True call waited for the products', 'False',
           why='PyTorch queues the copy without memcpy_and_sync (copy_kernel_cuda, aten/src/ATen/native/cuda/Copy.cu); '
               'the driver stages 64 KiB into its pinned buffer and returns. CUDA allows it to wait for the stream '
               'while staging (Runtime API, API synchronization behavior): True would be a finding about the driver')


@expectation('03-peer-copies', how='model')
def _peer_copies(e, gpu):
    e.note('Two GPUs with peer access copy directly: over NVLink where they have it, several times faster '
           'than PCIe; two GPUs without NVLink copy at PCIe speed at best.')
    link, share = gpu_models.peer_link(gpu)
    share = gpu_models.assumption(share)
    if gpu.nvlink_bytes_per_s:
        where = f'NVLink, {link / 1e9:.0f} GB/s each way (half the datasheet\'s {gpu.nvlink_bytes_per_s / 1e9:.0f} GB/s)'
        e.text('peer_access', 'the two GPUs have peer access', 'True',
               why='GPUs joined by NVLink on one board (an HGX H200) can access each other\'s memory')
    else:
        where = f'no NVLink: {link_text(gpu)}'
        e.text('peer_access', 'the two GPUs have peer access', 'False',
               why='two T4s in a cloud virtual machine usually lack peer access; CUDA then stages the copy in host memory')
    e.number('peer_gb_s', '256 MiB from one GPU to the other',
             Estimate(share.value * link / 1e9, share.low * link / 1e9, share.high * link / 1e9, 'GB/s',
                      f'{where}, at {share.low:.0%}-{share.high:.0%} of it (gpu_models.ASSUMPTIONS)'))
