"""Lesson 4's claims about timing queued work, checked on any machine with a simulated
device queue, and on a real GPU where there is one."""
import time
import warnings

import pytest
import torch

import d2l_utils as d2l

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
WORK_S = 0.05


@pytest.fixture
def queued_device(monkeypatch):
    """A pretend CUDA device whose calls return at once and whose work ends WORK_S later.

    Like a GPU: `launch()` only queues work; `torch.accelerator.synchronize` waits for it.
    """
    done_at = [0.0]

    def launch():
        done_at[0] = max(done_at[0], time.perf_counter()) + WORK_S

    def synchronize(device=None):
        time.sleep(max(0.0, done_at[0] - time.perf_counter()))

    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "device_count", lambda: 1)
    monkeypatch.setattr(torch.accelerator, "current_accelerator",
                        lambda *a, **k: torch.device("cuda"))
    monkeypatch.setattr(torch.accelerator, "synchronize", synchronize)
    return launch


def test_time_op_counts_queued_work(queued_device):
    assert d2l.time_op(queued_device, "cuda:0", min_run_time=0.05) >= 0.95 * WORK_S


def test_a_naive_clock_sees_only_the_launch(queued_device):
    start = time.perf_counter()
    queued_device()
    naive = time.perf_counter() - start
    d2l.synchronize("cuda:0")
    waited = time.perf_counter() - start
    assert naive < WORK_S / 2 <= waited


def test_timing_the_cpu_device_does_not_wait_for_the_accelerator(queued_device):
    # time_op waits only for the devices it is told about: not for work queued elsewhere
    queued_device()
    assert d2l.time_op(lambda: None, "cpu", min_run_time=0.01) < WORK_S / 2
    d2l.synchronize("cuda:0")


@cuda
def test_naive_clock_on_a_gpu_misses_the_work():
    a = torch.randn(4096, 4096, device="cuda")
    a @ a
    torch.cuda.synchronize()
    start = time.perf_counter()
    a @ a
    naive = time.perf_counter() - start
    assert naive < 0.5 * d2l.time_op(lambda: a @ a, "cuda", min_run_time=0.1)


@cuda
def test_sync_debug_mode_flags_item():
    x = torch.ones(10, device="cuda")
    try:
        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            x.sum().item()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert any("synchroniz" in str(w.message) for w in caught)
