"""Unit tests of lesson 1's helpers, with the accelerator count substituted."""
import sys
import types

import pytest
import torch

import d2l_utils as d2l


@pytest.fixture
def accelerators(monkeypatch):
    """Pretend the machine has `n` accelerators of type `kind`."""
    def fake(n, kind="cuda"):
        monkeypatch.setattr(torch.accelerator, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.accelerator, "device_count", lambda: n)
        monkeypatch.setattr(torch.accelerator, "current_accelerator",
                            lambda *a, **k: torch.device(kind) if n else None)
    return fake


CPU = torch.device("cpu")


def test_no_accelerator_gives_the_cpu(accelerators):
    accelerators(0)
    assert d2l.num_gpus() == 0
    assert d2l.try_gpu() == CPU and d2l.try_gpu(3) == CPU
    assert d2l.try_all_gpus() == [CPU]


def test_one_gpu(accelerators):
    accelerators(1)
    assert d2l.try_gpu() == torch.device("cuda:0")
    assert d2l.try_gpu(1) == CPU                       # past the last GPU: the CPU, as in d2l
    assert d2l.try_all_gpus() == [torch.device("cuda:0")]


def test_several_gpus(accelerators):
    accelerators(8)
    assert d2l.num_gpus() == 8
    assert d2l.try_gpu(7) == torch.device("cuda", 7) and d2l.try_gpu(8) == CPU
    assert d2l.try_all_gpus() == [torch.device("cuda", i) for i in range(8)]


@pytest.mark.parametrize("kind", ["mps", "xpu"])
def test_other_accelerators_are_found(accelerators, kind):
    accelerators(1, kind)
    assert d2l.try_gpu() == torch.device(kind, 0)
    assert d2l.try_all_gpus() == [torch.device(kind, 0)]


def test_numpy_and_torch_integers_are_indices(accelerators):
    import numpy as np
    accelerators(2)
    assert d2l.try_gpu(np.int64(1)) == torch.device("cuda:1")
    assert d2l.try_gpu(torch.tensor(1)) == torch.device("cuda:1")


@pytest.mark.parametrize("bad, error, message", [
    (-1, ValueError, ">= 0"),
    ("cuda:0", TypeError, "must be an int, not str"),
    (1.0, TypeError, "not float"),
    (True, TypeError, "not bool"),
    (None, TypeError, "not NoneType"),
])
def test_bad_index_is_a_clear_error(accelerators, bad, error, message):
    accelerators(2)
    with pytest.raises(error, match=message):
        d2l.try_gpu(bad)


def _fake_pynvml(free_by_index, fail_init=False):
    class NVMLError(Exception):
        pass
    mod = types.SimpleNamespace(NVMLError=NVMLError, shutdowns=[])
    def init():
        if fail_init:
            raise NVMLError("Driver Not Loaded")
    mod.nvmlInit = init
    mod.nvmlShutdown = lambda: mod.shutdowns.append(True)
    mod.nvmlDeviceGetCount = lambda: len(free_by_index)
    mod.nvmlDeviceGetHandleByIndex = lambda i: i
    mod.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(free=free_by_index[h])
    return mod


def test_least_busy_gpus_sorts_by_free_memory(monkeypatch):
    fake = _fake_pynvml([10, 40, 40, 20])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert d2l.least_busy_gpus(1) == [1]          # ties go to the lower index
    assert d2l.least_busy_gpus(3) == [1, 2, 3]
    assert d2l.least_busy_gpus(9) == [1, 2, 3, 0]  # no more than there are
    assert len(fake.shutdowns) == 3


def test_least_busy_gpus_without_a_driver_or_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml([], fail_init=True))
    assert d2l.least_busy_gpus(2) == []
    monkeypatch.setitem(sys.modules, "pynvml", None)   # import pynvml -> ImportError
    assert d2l.least_busy_gpus(2) == []


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-2, ValueError), ("2", TypeError)])
def test_least_busy_gpus_rejects_bad_k(bad, error):
    with pytest.raises(error):
        d2l.least_busy_gpus(bad)
