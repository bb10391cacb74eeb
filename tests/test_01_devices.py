"""Unit tests of lesson 1's helpers, with the accelerator count substituted."""
import itertools
import json
import pathlib
import sys
import types
import warnings
from unittest import mock

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


UUIDS = ["GPU-aa11-0000", "GPU-aa22-0000", "GPU-bb33-0000", "GPU-cc44-0000"]


def _fake_pynvml(free_by_index, fail_at=None, uuids=UUIDS, as_bytes=False, busy=None):
    """A stand-in for nvidia-ml-py: GPU i has UUID uuids[i], free_by_index[i] bytes free and
    busy[i] % utilisation (0 % for every GPU unless given).

    ``fail_at`` names the NVML call that raises (a permission error, a subclass of
    NVMLError as in pynvml).
    """
    class NVMLError(Exception):
        pass

    class NVMLError_NoPermission(NVMLError):
        pass

    def call(name, result):
        def f(*args):
            mod.calls.append(name)
            if name == fail_at:
                raise NVMLError_NoPermission("Insufficient Permissions")
            return result(*args)
        return f

    mod = types.SimpleNamespace(NVMLError=NVMLError, calls=[])
    mod.nvmlInit = call("init", lambda: None)
    mod.nvmlShutdown = call("shutdown", lambda: None)
    mod.nvmlDeviceGetCount = call("count", lambda: len(free_by_index))
    mod.nvmlDeviceGetHandleByIndex = call("handle", lambda i: i)
    mod.nvmlDeviceGetUUID = call(
        "uuid", lambda h: uuids[h].encode() if as_bytes else uuids[h])
    mod.nvmlDeviceGetMemoryInfo = call(
        "memory", lambda h: types.SimpleNamespace(free=free_by_index[h]))
    mod.nvmlDeviceGetUtilizationRates = call(
        "utilization", lambda h: types.SimpleNamespace(gpu=(busy or [0] * len(free_by_index))[h], memory=0))
    return mod


@pytest.fixture
def nvml(monkeypatch):
    """Install a fake pynvml; CUDA_VISIBLE_DEVICES starts unset."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    def install(*args, **kwargs):
        fake = _fake_pynvml(*args, **kwargs)
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake
    return install


def test_least_busy_gpus_returns_uuids_freest_first(nvml):
    fake = nvml([10, 40, 40, 20])
    assert d2l.least_busy_gpus(1) == [UUIDS[1]]                 # ties go to NVML order
    assert d2l.least_busy_gpus(3) == [UUIDS[1], UUIDS[2], UUIDS[3]]
    assert d2l.least_busy_gpus(9) == [UUIDS[1], UUIDS[2], UUIDS[3], UUIDS[0]]   # no more than there are
    assert fake.calls.count("init") == fake.calls.count("shutdown") == 3


def test_least_busy_gpus_ranks_by_utilisation_then_free_memory(nvml):
    nvml([40, 10, 30, 20], busy=[97, 0, 0, 35])       # GPU 0: computing, most memory free
    assert d2l.least_busy_gpus(4) == [UUIDS[2], UUIDS[1], UUIDS[3], UUIDS[0]]
    assert d2l.least_busy_gpus(1) == [UUIDS[2]]       # idle, and more free than GPU 1


def test_least_busy_gpus_ranks_within_cuda_visible_devices_by_load(nvml, monkeypatch):
    nvml([40, 10, 30, 20], busy=[97, 0, 0, 35])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,3,1")
    assert d2l.least_busy_gpus(3) == [UUIDS[1], UUIDS[3], UUIDS[0]]


def test_rank_by_load_orders_and_keeps_ties():
    cards = [("a", 50, 10), ("b", 0, 5), ("c", 0, 9), ("d", 50, 10), ("e", 0, 9)]
    assert d2l.rank_by_load(cards) == ["c", "e", "b", "a", "d"]
    assert d2l.rank_by_load([]) == []
    with pytest.raises(TypeError, match="tuple, not str"):
        d2l.rank_by_load(["GPU-aa11", "GPU-bb33"])          # UUIDs alone: no load to rank by


def test_least_busy_gpus_answer_is_a_cuda_visible_devices_value(nvml):
    nvml([10, 40, 40, 20])
    value = ",".join(d2l.least_busy_gpus(2))
    assert value == "GPU-aa22-0000,GPU-bb33-0000"
    assert d2l.lessons._visible_nvml_indices(value, UUIDS) == [1, 2]


def test_least_busy_gpus_decodes_bytes_uuids_of_old_pynvml(nvml):
    nvml([10, 40], as_bytes=True)
    assert d2l.least_busy_gpus(2) == [UUIDS[1], UUIDS[0]]


@pytest.mark.parametrize("visible, expected", [
    ("3,0", [3, 0]),                          # only the scheduler's GPUs, freest first
    ("0,3", [3, 0]),
    ("2", [2]),
    ("GPU-cc44-0000,GPU-aa11", [3, 0]),       # full UUIDs and unique prefixes
    ("GPU-aa,3", []),                         # ambiguous prefix names no GPU: list ends there
    ("0,7,3", [0]),                           # no GPU 7: the list ends there
    ("0,-1,3", [0]),                          # as NVIDIA's example 0,2,-1,1
    ("3,3", []),                              # a GPU listed twice: none visible
    ("", []),                                 # every GPU hidden
    ("MIG-0a1b2c3d", []),                     # MIG instances: nothing chosen
])
def test_least_busy_gpus_stays_within_cuda_visible_devices(nvml, monkeypatch, visible, expected):
    nvml([10, 40, 30, 20])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    got = d2l.least_busy_gpus(4)
    assert got == [UUIDS[i] for i in sorted(expected, key=lambda i: -[10, 40, 30, 20][i])]


def test_least_busy_gpus_ties_keep_the_listed_order(nvml, monkeypatch):
    nvml([5, 5, 5, 5])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0,1")
    assert d2l.least_busy_gpus(3) == [UUIDS[2], UUIDS[0], UUIDS[1]]


@pytest.mark.parametrize("fail_at", ["init", "count", "handle", "uuid", "utilization", "memory"])
def test_least_busy_gpus_gives_up_on_any_nvml_error(nvml, fail_at):
    fake = nvml([10, 40], fail_at=fail_at)
    assert d2l.least_busy_gpus(2) == []
    if fail_at != "init":
        assert fake.calls[-1] == "shutdown"   # NVML is shut down again


def test_least_busy_gpus_ignores_an_error_at_shutdown(nvml):
    nvml([10, 40], fail_at="shutdown")
    assert d2l.least_busy_gpus(1) == [UUIDS[1]]


def test_least_busy_gpus_without_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)   # import pynvml -> ImportError
    assert d2l.least_busy_gpus(2) == []


def test_least_busy_gpus_on_a_machine_without_gpus(nvml):
    nvml([])
    assert d2l.least_busy_gpus(1) == []


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-2, ValueError), ("2", TypeError),
                                        (1.0, TypeError)])
def test_least_busy_gpus_rejects_bad_k(bad, error):
    with pytest.raises(error):
        d2l.least_busy_gpus(bad)


@pytest.mark.parametrize("value, expected", [
    (None, [0, 1, 2, 3]),
    ("2,1", [2, 1]),                   # NVIDIA's examples: the listed order
    ("0,2,-1,1", [0, 2]),              # ... and an invalid entry ends the list
    (" 1 , 2 ", [1, 2]),               # spaces around an index
    ("+1,2", [1, 2]),                  # a sign, as strtoul reads it
    ("1gpu2,2ampere", [1, 2]),         # leading digits, as strtoul reads them
    ("-0,1", [0, 1]),                  # -0 is 0
    ("1,-3,2", [1]),                   # a negative index ends the list
    ("gpu0", []),
    ("", []),
    ("0,7,3", [0]),                    # no GPU 7: the list ends there
    ("0,7,0", []),                     # ... but a repeat anywhere before a bad entry hides all
    ("1,1", []),
    ("0,GPU-cc44", [0]),               # a list of indices: a UUID ends it
    ("GPU-cc44,0", [3]),               # a list of UUIDs: an index ends it
    ("GPU-bb33-0000", [2]),
    ("GPU-c", [3]),                    # a unique prefix
    ("GPU-aa", []),                    # ambiguous
    ("GPU-", []),                      # ambiguous too
    ("GPU-c,GPU-aa,GPU-b", [3]),       # an ambiguous prefix ends the list
    ("GPU-c,GPU-cc44", []),            # two prefixes of one UUID hide every GPU
    ("GPU-c,GPU-zz,GPU-c", []),        # a repeated entry hides every GPU, even after a bad one
    ("GPU-c, GPU-b", [3]),             # a space before GPU-: not a UUID, the list ends
    (" GPU-c", []),                    # a list that starts with a space is read as indices
    ("MIG-xyz", None),                 # MIG instances
    ("1,MIG-xyz", [1]),                # an index list: MIG- ends it, as a UUID would
])
def test_visible_nvml_indices_reads_the_variable_as_pytorch_does(value, expected):
    assert d2l.lessons._visible_nvml_indices(value, UUIDS) == expected


def _pytorch_reading(value, uuids, monkeypatch):
    """The NVML indices PyTorch itself reads from CUDA_VISIBLE_DEVICES=value (what
    torch.cuda.device_count() counts through NVML), or None where it gives up (MIG)."""
    if value is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    ids = torch.cuda._parse_visible_devices()
    if ids and isinstance(ids[0], str):
        return None if ids[0].startswith("MIG-") else torch.cuda._transform_uuid_to_ordinals(ids, uuids)
    return list(itertools.takewhile(lambda i: i < len(uuids), ids))    # as _device_count_nvml


def test_visible_nvml_indices_agrees_with_pytorchs_own_reading(monkeypatch):
    """Every list of up to three entries from a set of awkward ones, against PyTorch's code."""
    if not all(hasattr(torch.cuda, f) for f in ("_parse_visible_devices", "_transform_uuid_to_ordinals")):
        pytest.skip("this PyTorch reads CUDA_VISIBLE_DEVICES with other private functions")
    entries = ["0", "1", "3", "7", "-1", "-0", "+2", " 2 ", "1gpu", "gpu1", "", "GPU-aa11-0000",
               "GPU-aa", "GPU-c", "GPU-cc44", "GPU-zz", " GPU-bb33", "MIG-x"]
    values = [None] + [",".join(combo) for n in (1, 2, 3) for combo in itertools.product(entries, repeat=n)]
    differ = [v for v in values if d2l.lessons._visible_nvml_indices(v, UUIDS) != _pytorch_reading(v, UUIDS, monkeypatch)]
    assert not differ, f"read otherwise than PyTorch: {differ[:10]}"
    assert len(values) > 5000


def test_visible_nvml_indices_rejects_a_non_string():
    with pytest.raises(TypeError, match="string"):
        d2l.lessons._visible_nvml_indices(2, UUIDS)


def _lesson_functions(*names):
    """Functions that lesson 1 defines in cells it does not save (#@save), by name."""
    path = pathlib.Path(__file__).resolve().parent.parent / "notebooks" / "01_devices.ipynb"
    namespace = {}
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and any(f"def {name}(" in source for name in names):
            exec(source, namespace)
    return [namespace[name] for name in names]


def _pytorch_warns_really(capability, arch_list):
    """Run PyTorch's own start-up checks for one card of this capability under this build."""
    fake = dict(get_arch_list=lambda: arch_list, device_count=lambda: 1,
                get_device_capability=lambda i: capability, get_device_name=lambda i: "card")
    with mock.patch.multiple(torch.cuda, **fake), mock.patch.object(torch.version, "cuda", "12.6"), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda._check_capability()
        torch.cuda._check_cubins()
    return bool(caught)


def test_pytorch_warns_transcribes_pytorchs_own_checks():
    """The lesson's pytorch_warns against _check_capability and _check_cubins themselves, for
    every card and every build of one or two entries from known architectures (Jetson's
    integrated GPUs and Thor left out, as the lesson says)."""
    if not all(hasattr(torch.cuda, f) for f in ("_check_capability", "_check_cubins")):
        pytest.skip("this PyTorch checks the architectures with other private functions")
    pytorch_warns, build_runs_on = _lesson_functions("pytorch_warns", "build_runs_on")
    versions = [50, 60, 70, 75, 80, 86, 89, 90, 100, 103, 120]
    archs = [f"{kind}_{v}{suffix}" for v in versions for kind, suffix in
             [("sm", ""), ("compute", ""), ("sm", "a"), ("sm", "f")]]
    builds = [[a] for a in archs] + [list(pair) for pair in itertools.combinations(archs[::2], 2)]
    cards = [(v // 10, v % 10) for v in versions] + [(12, 1)]
    differ = [(card, build) for card in cards for build in builds
              if pytorch_warns(card, build) != _pytorch_warns_really(card, build)]
    assert not differ, f"pytorch_warns differs from PyTorch: {differ[:5]}"
    # and the lesson's examples of disagreement with NVIDIA's rules are real
    assert _pytorch_warns_really((9, 0), ["compute_90"]) and build_runs_on((9, 0), ["compute_90"])
    assert not _pytorch_warns_really((10, 3), ["sm_100a"]) and not build_runs_on((10, 3), ["sm_100a"])


# --- what lesson 1's GPU-only cells are expected to show (d2l_utils/expectations/lesson01.py)

def test_segment_bytes_follows_the_caching_allocators_rounding():
    from d2l_utils.expectations.lesson01 import segment_bytes
    MiB = 2**20
    assert [segment_bytes(n) for n in (4, 512, MiB)] == [2 * MiB] * 3          # small: 2 MiB segments
    assert segment_bytes(MiB + 1) == segment_bytes(10 * MiB - 512) == 20 * MiB   # 1-10 MiB: 20 MiB
    assert segment_bytes(10 * MiB) == 10 * MiB                                   # large: 2 MiB multiples
    assert segment_bytes(2**30) == 2**30 and segment_bytes(2**30 + 1) == 2**30 + 2 * MiB
    for bad in (0, -1, 1.5, True, "4"):
        with pytest.raises(ValueError, match="nbytes"):
            segment_bytes(bad)


def test_the_context_and_memory_models_hold_together():
    from d2l_utils import gpu_models
    from d2l_utils.expectations.lesson01 import context_bytes, reported_memory_bytes
    h200, t4 = gpu_models.DATASHEET["H200"], gpu_models.DATASHEET["T4"]
    assert context_bytes(h200).value > context_bytes(t4).value     # more SMs, more local memory
    for gpu in (h200, t4):
        total = reported_memory_bytes(gpu)
        assert 0.85 * gpu.memory_bytes < total.low <= total.high <= gpu.memory_bytes
    assert reported_memory_bytes(t4).high == 15 * 2**30              # ECC keeps 1/16 of 16 GiB
    odd = gpu_models.Datasheet(**{**h200.__dict__, "capability": (3, 5)})
    with pytest.raises(ValueError, match="capability"):
        context_bytes(odd)


def test_lesson_1_expects_the_datasheet_card():
    from d2l_utils import gpu_models
    from d2l_utils.expectations import expected_for
    for gpu in gpu_models.reference_gpus():
        items = {i["name"]: i for i in expected_for("01-card-properties", gpu).items}
        assert items["card"]["value"] == [gpu.name, "%d.%d" % gpu.capability]
        assert items["sms"]["value"] == gpu.sms
