"""Lesson 11's helpers (Prefetcher, pipeline_schedule) on any machine, the CUDA path of
Prefetcher where there is a GPU, the settings the lesson's compile cells rely on (nothing
is compiled here: a cold compile takes seconds), and the shape of its GPU-only cells."""
import collections
import pathlib
import random

import pytest
import torch
from conftest import ROOT, cuda_cells

import d2l_utils as d2l

LESSON = ROOT / "notebooks" / "11_overlap_and_launch_overhead.ipynb"
GPU_CELLS = {"11-copy-compute-overlap": 1, "11-prefetcher": 1, "11-pinned-buffer-reuse": 1,
             "11-record-stream": 1, "11-cuda-graph-replay": 1, "11-reduce-overhead": 1}
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
Pair = collections.namedtuple("Pair", "x y")


def batches():
    """Batches of every shape the prefetcher walks: a tensor, a tuple, a dict, a namedtuple."""
    return [torch.arange(4.), (torch.ones(2), torch.tensor(3)),
            {"x": torch.zeros(3), "y": [torch.ones(1), "label"]}, Pair(torch.ones(2), 7)]


def same(a, b):
    """``a`` and ``b`` have the same structure and values (tensors compared on the CPU)."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a.cpu(), b.cpu())
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return a == b


def test_prefetcher_on_the_cpu_moves_every_batch_unchanged():
    data = batches()
    prefetcher = d2l.Prefetcher(data, "cpu")
    assert len(prefetcher) == len(data) and prefetcher.stream is None
    for _ in range(2):                                   # a new pass each time, like a DataLoader
        out = list(prefetcher)
        assert len(out) == len(data) and all(map(same, out, data))
    assert isinstance(out[3], Pair) and out[2]["y"][1] == "label"


def test_prefetcher_walks_a_dataloader():
    data = torch.utils.data.TensorDataset(torch.randn(10, 3), torch.arange(10))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    out = list(d2l.Prefetcher(loader, torch.device("cpu")))
    assert [y.tolist() for _, y in out] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


@pytest.mark.parametrize("loader, device, error", [
    (42, "cpu", TypeError), (None, "cpu", TypeError), ([], 3.0, TypeError), ([], 0, TypeError),
    ([], "gpu", ValueError)])
def test_prefetcher_rejects_bad_arguments(loader, device, error):
    with pytest.raises(error):
        d2l.Prefetcher(loader, device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the machine has a CUDA GPU")
def test_prefetcher_refuses_a_missing_cuda_device():
    with pytest.raises(ValueError, match="not present"):
        d2l.Prefetcher([], "cuda")


@cuda
def test_prefetcher_on_cuda_copies_on_a_side_stream():
    data = [torch.randn(256, 256).pin_memory() for _ in range(5)]
    prefetcher = d2l.Prefetcher(data, "cuda")
    assert prefetcher.stream is not None and prefetcher.stream != torch.cuda.current_stream()
    out = [x * 2 for x in prefetcher]                    # used on the default stream
    torch.cuda.synchronize()
    assert all(y.is_cuda and torch.equal(y.cpu(), 2 * x) for x, y in zip(data, out))


def test_pipeline_schedule_by_hand():
    copies, computes = d2l.pipeline_schedule([2, 2, 2], [3, 3, 3])
    assert copies == [(0, 2), (2, 4), (4, 6)]
    assert computes == [(2, 5), (5, 8), (8, 11)]
    assert d2l.pipeline_schedule([4] * 6, [1] * 6)[1][-1][1] == 25     # copy-bound: sum(copy) + last compute
    assert d2l.pipeline_schedule([1] * 6, [4] * 6)[1][-1][1] == 25     # compute-bound: first copy + sum(compute)


def test_pipeline_schedule_is_never_longer_than_serial_nor_shorter_than_either_row():
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 8)
        copy_s, compute_s = [rng.uniform(0, 5) for _ in range(n)], [rng.uniform(0, 5) for _ in range(n)]
        copies, computes = d2l.pipeline_schedule(copy_s, compute_s)
        end = computes[-1][1]
        assert max(sum(copy_s), sum(compute_s)) - 1e-9 <= end <= sum(copy_s) + sum(compute_s) + 1e-9
        for (cs, ce), (ks, ke) in zip(copies, computes):
            assert ks >= ce - 1e-12                      # a step starts after its copy
        assert all(b[0] >= a[1] - 1e-12 for a, b in zip(computes, computes[1:]))


@pytest.mark.parametrize("copy_s, compute_s, error", [
    ([], [], ValueError), ([1, 2], [1], ValueError), ([-1], [1], ValueError),
    ([float("nan")], [1], ValueError), (["1"], [1], TypeError), ([True], [1], TypeError),
    (5, [1], TypeError)])
def test_pipeline_schedule_rejects_bad_durations(copy_s, compute_s, error):
    with pytest.raises(error):
        d2l.pipeline_schedule(copy_s, compute_s)


def test_the_settings_the_compile_cells_rely_on_exist():
    """The lesson sets these before its cold compile and catches this error. Read from
    Inductor's source, since importing Inductor takes seconds (nothing is compiled here)."""
    inductor = pathlib.Path(torch.__file__).parent / "_inductor"
    config = (inductor / "config.py").read_text(encoding="utf-8")
    assert "\ncompile_threads" in config and "vec_isa_ok" in config
    assert '"triton.cudagraphs": True' in (inductor / "__init__.py").read_text(encoding="utf-8")
    exc = (inductor / "exc.py").read_text(encoding="utf-8")
    assert "class InvalidCxxCompiler" in exc and "No working C++ compiler found" in exc


def test_the_gpu_only_cells_are_marked_and_ask_for_cuda():
    assert cuda_cells(LESSON) == GPU_CELLS
