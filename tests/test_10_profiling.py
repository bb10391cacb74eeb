"""Unit tests of lesson 10's helpers (roofline_bound, busy_fraction, SlowDataset), and the counts
that the expectations of its GPU-only cells rest on (d2l_utils/expectations/lesson10.py). No
timing asserts: the verdicts are tested on made-up numbers, the dataset with no sleep."""
import pickle

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

import d2l_utils as d2l
from d2l_utils import gpu_models
from d2l_utils.expectations import lesson10

PEAK, BW = 100e9, 10e9            # a made-up machine: 100 GFLOP/s, 10 GB/s, ridge at 10 FLOP/byte


@pytest.mark.parametrize("flops, nbytes, seconds, expected", [
    (1e9, 1e6, 0.01, "compute"),        # predicted 10 ms of arithmetic, 0.1 ms of traffic
    (1e6, 1e9, 0.1, "memory"),          # predicted 0.1 s of traffic
    (1e6, 1e9, 0.5, "memory"),          # five times slower than the roof: still memory
    (1, 12, 2e-6, "overhead or uncounted work"),  # a one-element add taking microseconds
    (0, 1e9, 0.1, "memory"),            # a copy: no FLOPs at all
    (1e9, 0, 0.01, "compute"),
])
def test_roofline_bound_names_the_bound(flops, nbytes, seconds, expected):
    assert d2l.roofline_bound(flops, nbytes, seconds, PEAK, BW) == expected


def test_roofline_bound_overhead_threshold_is_the_factor():
    # predicted 0.1 s (memory); 'overhead or uncounted work' only beyond overhead_factor times that
    assert d2l.roofline_bound(1e6, 1e9, 0.99, PEAK, BW) == "memory"
    assert d2l.roofline_bound(1e6, 1e9, 1.01, PEAK, BW) == "overhead or uncounted work"
    assert d2l.roofline_bound(1e6, 1e9, 0.3, PEAK, BW, overhead_factor=2) == "overhead or uncounted work"
    assert d2l.roofline_bound(1e6, 1e9, 0.3, PEAK, BW, overhead_factor=2.5 + 1) == "memory"


@pytest.mark.parametrize("args, error, match", [
    (("1e9", 1e6, 0.01, PEAK, BW), TypeError, "flops must be a number"),
    ((True, 1e6, 0.01, PEAK, BW), TypeError, "flops must be a number"),
    ((-1, 1e6, 0.01, PEAK, BW), ValueError, "flops must be >= 0"),
    ((0, 0, 0.01, PEAK, BW), ValueError, "no FLOPs and no bytes"),
    ((1, 1, 0, PEAK, BW), ValueError, "seconds must be > 0"),
    ((1, 1, float("nan"), PEAK, BW), ValueError, "seconds"),
    ((1, 1, 1, 0, BW), ValueError, "peak_flops"),
    ((1, 1, 1, PEAK, float("inf")), ValueError, "bytes_per_s"),
    ((1, 1, 1, PEAK, BW, 0.5), ValueError, "overhead_factor must be >= 1"),
])
def test_roofline_bound_rejects_bad_arguments(args, error, match):
    with pytest.raises(error, match=match):
        d2l.roofline_bound(*args)


def test_busy_fraction_counts_overlaps_once_and_clips_to_the_window():
    assert d2l.busy_fraction([], 0, 10) == 0
    assert d2l.busy_fraction([(0, 2), (1, 3), (6, 7)], 0, 10) == pytest.approx(0.4)
    assert d2l.busy_fraction([(5, 20)], 0, 10) == pytest.approx(0.5)
    assert d2l.busy_fraction([(-5, 1), (2, 4), (3, 4), (9, 30)], 0, 10) == pytest.approx(0.4)
    assert d2l.busy_fraction([(0, 10), (2, 3)], 0, 10) == pytest.approx(1.0)
    assert d2l.busy_fraction(((3.5, 3.5),), 0, 10) == 0          # an empty span
    ts = [(1e12 + i * 10.0, 1e12 + i * 10.0 + 4.0) for i in range(100)]   # trace-sized numbers, µs
    assert d2l.busy_fraction(ts, 1e12, 1e12 + 1000.0) == pytest.approx(0.4)


@pytest.mark.parametrize("spans, start, end, error, match", [
    ([(0, 1)], 5, 5, ValueError, "end > start"),
    ([(2, 1)], 0, 5, ValueError, "end >= begin"),
    ([("a", 1)], 0, 5, TypeError, "begin must be a number"),
    ([(0, 1)], None, 5, TypeError, "start must be a number"),
])
def test_busy_fraction_rejects_bad_arguments(spans, start, end, error, match):
    with pytest.raises(error, match=match):
        d2l.busy_fraction(spans, start, end)


def test_slow_dataset_gives_the_same_sample_every_time_and_pickles_by_reference():
    data = d2l.SlowDataset(5, 3, 0.0)
    x, label = data[4]
    assert len(data) == 5 and x.shape == (3,) and x.dtype == torch.float32 and label == 4
    assert torch.equal(data[4][0], x) and not torch.equal(data[3][0], x)
    copy = pickle.loads(pickle.dumps(data))          # what a spawned DataLoader worker receives
    assert type(copy) is d2l.SlowDataset and torch.equal(copy[4][0], x)
    assert type(data).__module__ == "d2l_utils.lessons"
    batch, labels = next(iter(torch.utils.data.DataLoader(data, batch_size=5)))
    assert batch.shape == (5, 3) and labels.tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("args, error", [
    ((0, 3, 0.0), ValueError), ((5, 0, 0.0), ValueError), ((5.0, 3, 0.0), TypeError),
    ((5, True, 0.0), TypeError), ((5, 3, -1.0), ValueError), ((5, 3, "1"), TypeError),
])
def test_slow_dataset_rejects_bad_arguments(args, error):
    with pytest.raises(error):
        d2l.SlowDataset(*args)


@pytest.mark.parametrize("index", [5, -1, 1.0, True])
def test_slow_dataset_rejects_bad_indices(index):
    with pytest.raises(IndexError, match="sample index"):
        d2l.SlowDataset(5, 3, 0.0)[index]


def test_slow_dataset_is_the_same_in_every_instance_and_iterates_to_its_end():
    a, b = d2l.SlowDataset(4, 3, 0.0), d2l.SlowDataset(4, 3, 0.0)   # as in two worker processes
    assert all(torch.equal(a[i][0], b[i][0]) for i in range(4))
    assert [label for _, label in a] == [0, 1, 2, 3]                  # IndexError ends the iteration


def test_roofline_bound_takes_any_real_numbers():
    numpy = pytest.importorskip("numpy")
    assert d2l.roofline_bound(numpy.int64(10**9), numpy.float32(1e6), 0.01, PEAK, BW) == "compute"


def _profiled_step(width, batch, classes=10):
    """The training step of the lesson's cell 10-gpu-kernels, on a CPU at ``width`` and ``batch``."""
    torch.manual_seed(0)
    wide = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, classes))
    X, y = torch.randn(batch, width), torch.randint(0, classes, (batch,))

    def step():
        loss = nn.functional.cross_entropy(wide(X), y); wide.zero_grad(); loss.backward()
        with torch.no_grad():
            for p in wide.parameters():
                p -= 0.01 * p.grad
    return step


def test_the_step_flops_are_what_flop_counter_mode_counts():
    step = _profiled_step(48, 40, classes=10)
    with FlopCounterMode(display=False) as counter:
        step()
    assert counter.get_total_flops() == lesson10.step_flops(width=48, batch=40, classes=10)
    assert lesson10.step_flops() == 688_201_400_320


class _Ops(TorchDispatchMode):
    """The operations that run inside, by name."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def test_the_step_launches_the_kernels_the_expectation_counts():
    """Every operation of the step but views (t, view, detach) launches a kernel; on CUDA,
    nll_loss's backward also zeroes its output first: STEP_KERNELS is one more."""
    step = _profiled_step(16, 8)
    step()                                       # the first step makes the gradients
    ops = _Ops()
    with ops:
        step()
    computing = [n for n in ops.names if n not in ('t', 'view', 'detach')]
    assert len(computing) + 1 == lesson10.STEP_KERNELS, sorted(computing)
    assert computing.count('mm') + computing.count('addmm') == 8


def test_the_rooflines_follow_the_datasheets():
    """The ridge's range holds the ratio of the sustained peak to the bandwidth; the step's share of the
    product's rate lies in (0, 1.1]; its MFU, over the dense datasheet peak, is below that share times
    the product's share of the sustained peak."""
    h200, t4 = gpu_models.DATASHEET['H200'], gpu_models.DATASHEET['T4']
    assert lesson10.half_dtype(h200) == 'bfloat16' and lesson10.half_dtype(t4) == 'float16'
    for gpu in gpu_models.DATASHEET.values():
        half = lesson10.half_dtype(gpu)
        ridge = lesson10.ridge(gpu)
        assert ridge.low < gpu.sustained_flops(half) / gpu.memory_bytes_per_s < ridge.high
        share, mfu = lesson10.mfu_estimate(gpu), lesson10.dense_mfu(gpu)
        assert 0 < share.low < share.value < share.high <= 1.1
        assert 0 < mfu.low < mfu.value < mfu.high < share.high * gpu.clock_share


def test_hta_sorts_kernels_into_types_by_name_as_the_lesson_says():
    """The depth's Holistic Trace Analysis section states HTA's rule (get_kernel_type in
    hta/utils/utils.py): a name matching nccl...Kernel is communication, one starting Memcpy or
    Memset memory, any other computation. A new HTA that changes it changes the lesson's numbers."""
    from hta.utils.utils import get_kernel_type
    assert get_kernel_type("ncclDevKernel_AllReduce_Sum_bf16_RING_LL") == "COMMUNICATION"
    assert get_kernel_type("ncclKernel_AllReduce_RING_LL_Sum_float") == "COMMUNICATION"
    assert get_kernel_type("Memcpy HtoD (Pinned -> Device)") == get_kernel_type("Memset (Device)") == "MEMORY"
    assert get_kernel_type("gemm_bf16") == get_kernel_type("nccl_without_the_word") == "COMPUTATION"
