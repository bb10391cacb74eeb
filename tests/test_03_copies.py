"""Unit tests of lesson 3's measuring helpers: time_op, synchronize, copy_bandwidth,
fit_latency_bandwidth. No timing assert here except the agreement of time_op with
torch.utils.benchmark on the same CPU operation."""
import pytest
import torch
import torch.utils.benchmark as benchmark

import d2l_utils as d2l

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture
def fake_cuda(monkeypatch):
    """Pretend there is one CUDA device; record the devices that get synchronized."""
    synced = []
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "device_count", lambda: 1)
    monkeypatch.setattr(torch.accelerator, "current_accelerator",
                        lambda *a, **k: torch.device("cuda"))
    monkeypatch.setattr(torch.accelerator, "synchronize", lambda d=None: synced.append(d))
    return synced


def test_time_op_agrees_with_torch_utils_benchmark():
    # The same steady single-threaded CPU operation, timed by both in turn, five times
    # each; the fastest median of each is compared, since other processes running during
    # the tests only ever slow a window down. A disagreement is measured again (three
    # tries at most, about 1.5 s each).
    a = torch.randn(128, 128)
    ratios = []
    for _ in range(3):
        ours, theirs = [], []
        for _ in range(5):
            ours.append(d2l.time_op(lambda: a @ a, "cpu", min_run_time=0.1))
            theirs.append(benchmark.Timer("a @ a", globals={"a": a}, num_threads=1).blocked_autorange(
                min_run_time=0.1).median)
        ratios.append(min(ours) / min(theirs))
        if abs(ratios[-1] - 1) < 0.10:
            break
    assert abs(ratios[-1] - 1) < 0.10, f"time_op / benchmark, fastest medians: {ratios}"


def test_time_op_returns_seconds_and_accepts_a_list_of_devices():
    seconds = d2l.time_op(lambda: None, ["cpu", torch.device("cpu")], min_run_time=0.01)
    assert isinstance(seconds, float) and 0 < seconds < 0.01


def test_time_op_synchronizes_the_devices_it_is_given(fake_cuda):
    d2l.time_op(lambda: None, ["cpu", "cuda:0"], min_run_time=0.01)
    assert fake_cuda and all(torch.device(d) == torch.device("cuda:0") for d in fake_cuda)
    d2l.synchronize("cpu")            # the CPU has no queue: nothing more is synchronized
    n = len(fake_cuda)
    d2l.synchronize(["cuda", "cpu"])
    assert len(fake_cuda) == n + 1


def test_time_op_restores_the_thread_count():
    before = torch.get_num_threads()
    d2l.time_op(lambda: None, "cpu", min_run_time=0.01, num_threads=1)
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((torch.ones(1),), {}, TypeError, "fn must be callable"),
    ((lambda: None, 0), {}, TypeError, "must be a str or torch.device, not int"),
    ((lambda: None, []), {}, ValueError, "at least one device"),
    ((lambda: None, "cuda:99"), {}, ValueError, "not present"),
    ((lambda: None, "meta"), {}, ValueError, "not present"),
    ((lambda: None,), {"min_run_time": 0}, ValueError, "> 0"),
    ((lambda: None,), {"min_run_time": "1"}, TypeError, "number of seconds"),
    ((lambda: None,), {"min_run_time": True}, TypeError, "number of seconds"),
    ((lambda: None,), {"num_threads": 0}, ValueError, "int >= 1"),
])
def test_time_op_rejects_bad_arguments(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        d2l.time_op(*args, **kwargs)


def test_synchronize_rejects_a_device_that_is_not_there():
    with pytest.raises(ValueError, match="not present"):
        d2l.synchronize("cuda:99")


def test_copy_bandwidth_is_consistent():
    nbytes = 1 << 16
    seconds, rate = d2l.copy_bandwidth(nbytes, "cpu", "cpu", min_run_time=0.01)
    assert seconds > 0 and rate > 0
    assert rate * seconds == pytest.approx(nbytes)
    assert d2l.copy_bandwidth(1, min_run_time=0.01)[1] > 0       # defaults: host to host


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((0,), {}, ValueError, ">= 1"),
    ((-5,), {}, ValueError, ">= 1"),
    ((1.5,), {}, TypeError, "must be an int, not float"),
    ((True,), {}, TypeError, "must be an int, not bool"),
    (("1024",), {}, TypeError, "must be an int, not str"),
    ((1024, "cpu", "cuda:99"), {}, ValueError, "not present"),
    ((1024,), {"pinned": "yes"}, TypeError, "True or False"),
])
def test_copy_bandwidth_rejects_bad_arguments(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        d2l.copy_bandwidth(*args, **kwargs)


@pytest.mark.skipif(torch.accelerator.is_available(), reason="there is an accelerator here")
def test_pinned_needs_an_accelerator():
    with pytest.raises(ValueError, match="needs an accelerator"):
        d2l.copy_bandwidth(1024, pinned=True)


def test_fit_recovers_latency_and_bandwidth():
    latency, bandwidth = 5e-6, 12e9
    sizes = [2**k for k in range(10, 27, 2)]
    latency_fit, bandwidth_fit = d2l.fit_latency_bandwidth(sizes, [latency + n / bandwidth for n in sizes])
    assert latency_fit == pytest.approx(latency, rel=1e-6)
    assert bandwidth_fit == pytest.approx(bandwidth, rel=1e-6)


@pytest.mark.parametrize("sizes, times, message", [
    ([1024], [1e-6], "at least two"),
    ([1024, 2048], [1e-6], "at least two"),
    ([0, 2048], [1e-6, 2e-6], "positive"),
    ([1024, 2048], [1e-6, -2e-6], "positive"),
])
def test_fit_rejects_bad_data(sizes, times, message):
    with pytest.raises(ValueError, match=message):
        d2l.fit_latency_bandwidth(sizes, times)


def test_fit_wants_lists():
    with pytest.raises(TypeError, match="lists"):
        d2l.fit_latency_bandwidth(1024, 1e-6)


@cuda
@pytest.mark.parametrize("pinned", [False, True])
def test_copy_bandwidth_both_ways_on_a_gpu(pinned):
    for src, dst in [("cpu", "cuda:0"), ("cuda:0", "cpu")]:
        seconds, rate = d2l.copy_bandwidth(1 << 20, src, dst, pinned=pinned, min_run_time=0.01)
        assert seconds > 0 and rate * seconds == pytest.approx(1 << 20)


# tools/measure_gpu.py records the GPU figures that lessons 3 and 4 read, when present.

@pytest.mark.skipif(torch.cuda.is_available(), reason="there is a CUDA GPU here")
def test_measure_gpu_without_cuda_says_so_and_writes_nothing(tmp_path, capsys):
    import measure_gpu
    out = tmp_path / "gpu.json"
    assert measure_gpu.main(["--out", str(out)]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err and not out.exists()


def test_measure_gpu_records_what_the_lessons_read():
    import measure_gpu
    record = measure_gpu.measure(torch.device("cpu"), sizes=[1024, 4096], pinned_too=False,
                                 min_run_time=0.01, width=16, matmul=32, pin_bytes=2**16)
    for rec in record["copies"].values():          # lesson 3: the plot and the printed fits
        assert len(rec["nbytes"]) == len(rec["bytes_per_s"]) == 2
        assert rec["latency_s"] == rec["latency_s"] and rec["fit_bytes_per_s"] > 0
    assert record["training_loop"]["item_every_step_s"] > 0 < record["training_loop"]["sum_on_device_s"]
    assert record["timing"]["naive_s"] > 0 < record["timing"]["synchronized_s"]   # lesson 4
