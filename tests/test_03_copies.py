"""Unit tests of lesson 3's measuring helpers (time_op, synchronize, copy_bandwidth,
fit_latency_bandwidth) and of the parts of tools/measure_gpu.py that run without a GPU.
No timing assert here except the agreement of time_op with torch.utils.benchmark on the
same CPU operation."""
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
    # The same steady single-threaded CPU operation, timed by both in turn in many short
    # windows; the fastest window of each is compared. Other processes running during the
    # tests slow windows down, by a factor of three on a loaded 2-core machine, but among
    # 25 short windows each timer finds a quiet one. A disagreement is measured again
    # (three tries at most, about 2.5 s each).
    a = torch.randn(128, 128)
    ratios = []
    for _ in range(3):
        ours, theirs = [], []
        for _ in range(25):
            ours.append(d2l.time_op(lambda: a @ a, "cpu", min_run_time=0.02))
            theirs.append(benchmark.Timer("a @ a", globals={"a": a}, num_threads=1).blocked_autorange(
                min_run_time=0.02).median)
        ratios.append(min(ours) / min(theirs))
        if abs(ratios[-1] - 1) < 0.10:
            break
    assert abs(ratios[-1] - 1) < 0.10, f"time_op / benchmark, fastest windows: {ratios}"


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
    ((lambda: None, "nonsense"), {}, ValueError, "not a device"),
    ((lambda: None,), {"min_run_time": 0}, ValueError, "min_run_time must be > 0"),
    ((lambda: None,), {"min_run_time": "1"}, TypeError, "min_run_time must be a number, not str"),
    ((lambda: None,), {"min_run_time": True}, TypeError, "min_run_time must be a number, not bool"),
    ((lambda: None,), {"num_threads": 0}, ValueError, "num_threads must be >= 1"),
    ((lambda: None,), {"num_threads": 1.5}, TypeError, "num_threads must be an int, not float"),
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
    ((1024, 2048, 4096), (1e-6, 2e-6), "as many"),
])
def test_fit_rejects_bad_data(sizes, times, message):
    with pytest.raises(ValueError, match=message):
        d2l.fit_latency_bandwidth(sizes, times)


def test_fit_wants_lists():
    with pytest.raises(TypeError, match="nbytes must be a list of sizes, not int"):
        d2l.fit_latency_bandwidth(1024, 1e-6)
    with pytest.raises(TypeError, match="seconds must be a list of times, not float"):
        d2l.fit_latency_bandwidth([1024, 2048], 1e-6)


@cuda
@pytest.mark.parametrize("pinned", [False, True])
def test_copy_bandwidth_both_ways_on_a_gpu(pinned):
    for src, dst in [("cpu", "cuda:0"), ("cuda:0", "cpu")]:
        seconds, rate = d2l.copy_bandwidth(1 << 20, src, dst, pinned=pinned, min_run_time=0.01)
        assert seconds > 0 and rate * seconds == pytest.approx(1 << 20)


# tools/measure_gpu.py records the GPU figures that lessons 3 and 4 read, when present.
# What it does without a GPU, and its parts that need none, are tested here.

@pytest.mark.skipif(torch.cuda.is_available(), reason="there is a CUDA GPU here")
def test_measure_gpu_without_cuda_says_so_and_writes_nothing(tmp_path, capsys):
    import measure_gpu
    out = tmp_path / "gpu.json"
    assert measure_gpu.main(["--out", str(out)]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err and not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="there is a CUDA GPU here")
def test_measure_gpu_script_exits_with_status_2_without_cuda(tmp_path):
    import subprocess
    import sys
    from conftest import ROOT
    out = tmp_path / "gpu.json"
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "measure_gpu.py"), "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "no CUDA GPU" in run.stderr and not out.exists()


def test_measure_gpu_records_what_the_lessons_read():
    import measure_gpu
    record = measure_gpu.measure(torch.device("cpu"), sizes=[1024, 4096], pinned_too=False,
                                 min_run_time=0.01, pin_bytes=2**16)
    for rec in record["copies"].values():          # lesson 3: the plot and the printed fits
        assert len(rec["nbytes"]) == len(rec["bytes_per_s"]) == len(rec["seconds"]) == 2
        assert rec["latency_s"] == rec["latency_s"] and rec["fit_bytes_per_s"] > 0
    assert record["pin_cost"]["host_copy_s"] > 0 and record["pin_cost"]["pageable_copy_s"] > 0


def test_measure_gpu_pins_first_before_the_copies_pin(monkeypatch):
    # The first pin of a size class is only a first pin if no copy pinned that class before:
    # PyTorch's caching host allocator would hand the freed block back.
    import measure_gpu
    calls = []
    for name in ["pin_cost", "copies"]:
        monkeypatch.setattr(measure_gpu, name, lambda *a, name=name: calls.append(name) or {})
    measure_gpu.measure(torch.device("cpu"))
    assert calls[0] == "pin_cost"
    size_class = (measure_gpu.PIN_BYTES - 1).bit_length()        # what the allocator rounds to
    assert size_class not in {(n - 1).bit_length() for n in measure_gpu.SIZES}


def test_measure_gpu_documents_every_key_it_writes():
    import measure_gpu
    record = measure_gpu.measure(torch.device("cpu"), sizes=[1024, 4096], pinned_too=False,
                                 min_run_time=0.01, pin_bytes=2**16)
    keys = set(record) | {"pin_first_s", "pin_again_s", "pinned_copy_s"}
    for rec in record.values():
        keys |= set(rec)
        keys |= {k for v in rec.values() if isinstance(v, dict) for k in v}
    keys |= {"matched_by", "max_generation", "max_width", "idle_generation", "idle_width",
             "load_generation", "load_width"}
    keys -= {"cpu->cpu pageable"}                   # a copy's name: documented as cpu->cuda:0 ...
    undocumented = sorted(k for k in keys if k not in measure_gpu.__doc__)
    assert not undocumented, f"measure_gpu.py's docstring does not explain {undocumented}"


class FakeNVML:
    """Just enough of pynvml: GPUs given as (uuid, pci address, MIG uuids), link per state."""

    class PciInfo:
        def __init__(self, domain, bus, device):
            self.domain, self.bus, self.device = domain, bus, device

    def __init__(self, gpus):
        self.gpus, self.busy = gpus, False

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("gpu", i)

    def nvmlDeviceGetUUID(self, handle):
        kind, i, *j = handle
        return self.gpus[i][0].encode() if kind == "gpu" else self.gpus[i][2][j[0]]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):
        if not self.gpus[handle[1]][2]:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return len(self.gpus[handle[1]][2])

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, j):
        if self.gpus[handle[1]][2][j] is None:
            raise RuntimeError("NVML_ERROR_NOT_FOUND")          # an unused MIG slot
        return ("mig", handle[1], j)

    def nvmlDeviceGetPciInfo(self, handle):
        return self.PciInfo(*self.gpus[handle[1]][1])

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        return 5 if self.busy else 1

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        return 16

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        return 5

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        return 16


class Props:
    def __init__(self, **fields):
        self.__dict__.update(fields)


GPUS = [("GPU-aaaaaaaa-0000-0000-0000-000000000000", (0, 0x1b, 0), []),
        ("GPU-bbbbbbbb-0000-0000-0000-000000000000", (0, 0x43, 0),
         [None, "MIG-cccccccc-0000-0000-0000-000000000000"]),
        ("GPU-dddddddd-0000-0000-0000-000000000000", (0, 0xdc, 0), [])]


@pytest.mark.parametrize("props, index, matched_by", [
    # PyTorch prints a CUDA UUID without NVML's 'GPU-': cuda:0 may be NVML's device 2
    (Props(uuid="dddddddd-0000-0000-0000-000000000000"), 2, "uuid"),
    (Props(uuid="DDDDDDDD-0000-0000-0000-000000000000", pci_domain_id=0, pci_bus_id=0x1b,
           pci_device_id=0), 2, "uuid"),
    (Props(uuid="cccccccc-0000-0000-0000-000000000000"), 1, "uuid"),      # a MIG instance: its GPU
    (Props(pci_domain_id=0, pci_bus_id=0x43, pci_device_id=0), 1, "pci_bus_id"),  # no uuid
])
def test_nvml_handle_finds_the_cuda_device_by_uuid_or_pci_address(props, index, matched_by):
    import measure_gpu
    assert measure_gpu.nvml_handle(FakeNVML(GPUS), props) == (("gpu", index), matched_by)


@pytest.mark.parametrize("props", [Props(uuid="eeeeeeee-0000-0000-0000-000000000000"),
                                   Props(pci_domain_id=0, pci_bus_id=0x99, pci_device_id=0),
                                   Props(name="no uuid, no PCI address")])
def test_nvml_handle_says_when_no_device_matches(props):
    import measure_gpu
    with pytest.raises(LookupError, match="no NVML device"):
        measure_gpu.nvml_handle(FakeNVML(GPUS), props)


def test_pcie_link_is_read_while_copies_run():
    import measure_gpu
    nvml = FakeNVML(GPUS)
    waited = []

    def keep_busy():                      # queue copies: the link speeds up until they finish
        nvml.busy = True
        return lambda: (waited.append(1), setattr(nvml, "busy", False))

    link = measure_gpu.pcie_link(nvml, Props(uuid="aaaaaaaa-0000-0000-0000-000000000000"), keep_busy)
    assert link == {"matched_by": "uuid", "max_generation": 5, "max_width": 16,
                    "idle_generation": 1, "idle_width": 16, "load_generation": 5, "load_width": 16}
    assert len(waited) == 25 and not nvml.busy              # every round waited for its copies


def test_measure_gpu_describes_the_machine_with_machine_info_and_the_link(monkeypatch):
    # machine() on a pretend CUDA machine: machine_info() and the device's properties
    # faked, NVML faked as a module, the copies that keep the link busy faked.
    import sys
    import types
    import measure_gpu
    nvml = FakeNVML(GPUS)
    module = types.ModuleType("pynvml")
    for name in dir(nvml):
        if name.startswith("nvml"):
            setattr(module, name, getattr(nvml, name))
    module.nvmlInit = module.nvmlShutdown = lambda: None
    monkeypatch.setitem(sys.modules, "pynvml", module)
    info = {"gpu": "Fake GPU", "gpu_count": 3, "capability": "9.0", "driver": "0", "cuda": "0",
            "torch": torch.__version__, "python": "3", "date": "2000-01-01"}
    monkeypatch.setattr(measure_gpu, "machine_info", lambda: dict(info))
    props = Props(name="Fake GPU", total_memory=2**30, is_integrated=0,
                  uuid="bbbbbbbb-0000-0000-0000-000000000000")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)

    def copy_load(device, copies=4):
        def keep_busy():
            nvml.busy = True
            return lambda: setattr(nvml, "busy", False)
        return keep_busy
    monkeypatch.setattr(measure_gpu, "copy_load", copy_load)
    described = measure_gpu.machine(torch.device("cuda:0"))
    assert {k: described[k] for k in info} == info
    assert described["integrated"] is False and described["gpu_memory_bytes"] == 2**30
    link = described["pcie_link"]
    assert link["load_generation"] == 5 and link["idle_generation"] == 1 and link["read_with"] == "nvml"
    assert "nvml_error" not in described
    undocumented = sorted(k for k in [*described, *link] if k not in measure_gpu.__doc__)
    assert not undocumented, f"measure_gpu.py's docstring does not explain {undocumented}"

    # No nvidia-ml-py: nvidia-smi is asked instead; where it is missing too, no link, and why.
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(measure_gpu.NvidiaSmi, "__init__", lambda self: setattr(self, "run", no_program))
    described = measure_gpu.machine(torch.device("cuda:0"))
    assert described["pcie_link"] is None and "nvidia-smi" in described["nvml_error"]


def no_program(command, **kwargs):
    raise FileNotFoundError(f"[Errno 2] No such file or directory: {command[0]!r}")


def test_nvidia_smi_answers_the_calls_that_read_the_link():
    # Where nvidia-ml-py is missing, the same code reads the link through nvidia-smi.
    import types
    import measure_gpu
    busy, commands = [False], []

    def run(command, **kwargs):
        commands.append(command)
        rows = [("GPU-aaaaaaaa-0000-0000-0000-000000000000", "0x0000", "0x1B", "0x00"),
                ("GPU-dddddddd-0000-0000-0000-000000000000", "0x0000", "0xDC", "0x00")]
        ids = [c.split("=")[1] for c in command if c.startswith("--id=")]
        gen = "5" if busy[0] else "1"
        lines = [", ".join([*row, gen, "16", "5", "16"]) for i, row in enumerate(rows)
                 if not ids or ids == [str(i)]]
        return types.SimpleNamespace(stdout="\n".join(lines) + "\n")

    def keep_busy():
        busy[0] = True
        return lambda: busy.__setitem__(0, False)

    smi = measure_gpu.NvidiaSmi(run=run)
    link = measure_gpu.pcie_link(smi, Props(pci_domain_id=0, pci_bus_id=0xdc, pci_device_id=0), keep_busy, rounds=2)
    assert link == {"matched_by": "pci_bus_id", "max_generation": 5, "max_width": 16,
                    "idle_generation": 1, "idle_width": 16, "load_generation": 5, "load_width": 16}
    assert all(c[0] == "nvidia-smi" and "--format=csv,noheader,nounits" in c for c in commands)
    assert measure_gpu.nvml_handle(smi, Props(uuid="aaaaaaaa-0000-0000-0000-000000000000")) == (0, "uuid")


# ---- the lesson's own cells (notebooks/03_copies_between_devices.ipynb) ----
import contextlib  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import types  # noqa: E402
import warnings  # noqa: E402

from conftest import ROOT, code_cells, source  # noqa: E402

LESSON = ROOT / "notebooks" / "03_copies_between_devices.ipynb"


def lesson_cell(anchor):
    """The source of the lesson's one code cell that contains ``anchor``."""
    found = [source(c) for c in code_cells(LESSON) if anchor in source(c)]
    assert len(found) == 1, f"{anchor!r}: {len(found)} cells"
    return found[0]


def lesson_namespace(*anchors, **names):
    """Run the lesson's cells that contain ``anchors``, in order, in one namespace."""
    namespace = {"torch": torch, "warnings": warnings, **names}
    for anchor in anchors:
        exec(lesson_cell(anchor), namespace)
    return namespace


def test_pcie_ceilings_follow_the_encodings():
    pcie_gb_s = lesson_namespace("def pcie_gb_s(")["pcie_gb_s"]
    assert pcie_gb_s(1) == pytest.approx(4.0)            # 16 lanes x 2.5 GT/s x 8/10, in bytes
    assert pcie_gb_s(2, lanes=8) == pytest.approx(4.0)
    assert pcie_gb_s(3) == pytest.approx(15.75, abs=0.01)
    assert pcie_gb_s(5) == 4 * pcie_gb_s(3) == pytest.approx(63.0, abs=0.1)


def test_the_lessons_pcie_formula_is_the_one_the_expectations_use():
    # gpu_models.pcie_bytes_per_s computes every GPU-only cell's copy expectation; the lesson's cell
    # teaches the same formula: they must agree for every generation it knows and common widths.
    from d2l_utils import gpu_models
    namespace = lesson_namespace("def pcie_gb_s(")
    for generation in namespace["gt_per_s"]:
        for lanes in (1, 4, 8, 16):
            assert namespace["pcie_gb_s"](generation, lanes) * 1e9 == pytest.approx(
                gpu_models.pcie_bytes_per_s(generation, lanes), rel=1e-12)
    for gpu in gpu_models.reference_gpus():           # and the reference GPUs' links are in the lesson's table
        assert f"{gpu.pcie[0]}.0" in namespace["pcie"] and gpu.pcie[1] == 16


@pytest.mark.parametrize("link, fastest, ceilings, says", [
    (((5, 16), (5, 16)), 50.0, ["5.0 x16"], ""),                   # the card's own link holds the copies
    (((3, 16), (1, 16)), 12.0, ["3.0 x16"], ""),                   # an idle link now: the most is what counts
    (((1, 1), (1, 1)), 50.0, ["3.0 x16", "4.0 x16", "5.0 x16"], "above the 0.2 GB/s"),   # a virtual bridge
    (((4, 16), (4, 16)), 40.0, ["3.0 x16", "4.0 x16", "5.0 x16"], "PCIe 4.0 x16 NVML reports"),
    (None, 50.0, ["3.0 x16", "4.0 x16", "5.0 x16"], ""),            # NVML cannot say
    (((6, 16), (6, 16)), 50.0, ["3.0 x16", "4.0 x16", "5.0 x16"], ""),  # a generation the lesson's table lacks
])
def test_link_ceilings_falls_back_to_the_x16_table_when_a_copy_beats_nvmls_link(link, fastest, ceilings, says):
    # Issue 27: NVML's maximum link is the lower of the card's and its upstream port's, and a virtual
    # machine's bridge may report less than the real link (older QEMU versions: PCIe 1.0 x1).
    link_ceilings = lesson_namespace("def pcie_gb_s(", "def link_ceilings(")["link_ceilings"]
    found, why = link_ceilings(link, fastest)
    assert sorted(found) == ceilings and max(found.values()) > fastest
    assert (says in why) if says else why == ""


class FakePynvml(types.ModuleType):
    """Just the part of nvidia-ml-py that the lesson's pcie_link uses: two GPUs, found by UUID."""

    class NVMLError(Exception):
        pass

    def __init__(self, fail_init=False):
        super().__init__("pynvml")
        self.fail_init, self.open = fail_init, 0
        self.cards = {"GPU-aaaaaaaa-0000-0000-0000-000000000000": (3, 16, 1, 16),      # a T4: Gen3 x16, idle
                      "GPU-bbbbbbbb-0000-0000-0000-000000000000": (5, 16, 5, 16)}

    def nvmlInit(self):
        if self.fail_init:
            raise self.NVMLError("NVML Shared Library Not Found")
        self.open += 1

    def nvmlShutdown(self):
        self.open -= 1

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid not in self.cards:
            raise self.NVMLError("Not Found")
        return uuid

    def nvmlDeviceGetMaxPcieLinkGeneration(self, card):
        return self.cards[card][0]

    def nvmlDeviceGetMaxPcieLinkWidth(self, card):
        return self.cards[card][1]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, card):
        return self.cards[card][2]

    def nvmlDeviceGetCurrPcieLinkWidth(self, card):
        return self.cards[card][3]


def _pcie_link_with(monkeypatch, nvml, uuid):
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device: types.SimpleNamespace(uuid=uuid, name="Fake GPU", is_integrated=0))
    return lesson_namespace("def pcie_link(")["pcie_link"](torch.device("cuda:0"))


def test_pcie_link_finds_the_card_by_its_cuda_uuid(monkeypatch):
    nvml = FakePynvml()
    # CUDA prints a UUID without NVML's 'GPU-' (str of _CUuuid in torch/csrc/cuda/Module.cpp)
    assert _pcie_link_with(monkeypatch, nvml, "aaaaaaaa-0000-0000-0000-000000000000") == ((3, 16), (1, 16))
    assert _pcie_link_with(monkeypatch, nvml, "bbbbbbbb-0000-0000-0000-000000000000") == ((5, 16), (5, 16))
    assert nvml.open == 0                                # every nvmlInit was shut down


@pytest.mark.parametrize("nvml, uuid", [
    (None, "aaaaaaaa-0000-0000-0000-000000000000"),              # nvidia-ml-py not installed
    (FakePynvml(fail_init=True), "aaaaaaaa-0000-0000-0000-000000000000"),   # no NVIDIA driver
    (FakePynvml(), "cccccccc-0000-0000-0000-000000000000"),      # NVML does not know it (a MIG slice, say)
])
def test_pcie_link_says_none_where_nvml_cannot_answer(monkeypatch, nvml, uuid):
    assert _pcie_link_with(monkeypatch, nvml, uuid) is None
    assert nvml is None or nvml.open == 0


def test_pcie_link_calls_only_what_nvidia_ml_py_has():
    # The fake above is only a stand-in: the names the lesson calls must exist in the real package.
    pynvml = pytest.importorskip("pynvml")
    called = set(re.findall(r"pynvml\.(\w+)", lesson_cell("def pcie_link(")))
    assert called and all(hasattr(pynvml, name) for name in called), called


def test_the_real_pcie_link_without_nvidia_driver_says_none():
    if torch.cuda.is_available():
        pytest.skip("there is a CUDA GPU here")
    pytest.importorskip("pynvml")
    assert lesson_namespace("def pcie_link(")["pcie_link"](torch.device("cuda:0")) is None


DEPRECATED = "The argument 'device' of Tensor.pin_memory() is deprecated. Please do not pass this argument."


def test_passing_a_device_to_pin_memory_warns_as_pytorch_2_9_and_2_10_do_on_every_batch():
    # Their torch/utils/data/_utils/pin_memory.py pins each tensor with data.pin_memory(device); the
    # DeprecationWarning comes from ATen, before pinning (which fails here without CUDA).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with contextlib.suppress(RuntimeError):
            torch.ones(1).pin_memory("cuda")
    assert any(w.category is DeprecationWarning and str(w.message).startswith(DEPRECATED) for w in caught)


@pytest.mark.parametrize("cuda_present", [False, True])
def test_dataloader_cells_catch_only_the_warning_they_teach(monkeypatch, cuda_present):
    """The two DataLoader cells, without an accelerator and with a pretend CUDA GPU whose loader
    pins like PyTorch 2.9 and 2.10: a DeprecationWarning on every batch, which is not theirs."""
    if cuda_present:
        import torch.utils.data._utils.pin_memory as pinning

        def pin_like_2_9(data, device=None):
            warnings.warn(DEPRECATED, DeprecationWarning)
            return data
        monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
        monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a, **k: torch.device("cuda"))
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(pinning, "pin_memory", pin_like_2_9)
        monkeypatch.setattr(torch.Tensor, "is_pinned", lambda self, *a: True)
    elif torch.accelerator.is_available():
        pytest.skip("there is an accelerator here")
    with warnings.catch_warnings(record=True) as passed_on:
        warnings.simplefilter("always", DeprecationWarning)       # as a test run shows them
        namespace = lesson_namespace("NO_ACCELERATOR = ", "warnings.filterwarnings('error', message=NO_ACCELERATOR)",
                                     gpu=torch.device("cpu"))
    assert len(namespace["batches"]) == 4
    assert bool(namespace["ours"]) is not cuda_present
    others = [str(w.message) for w in passed_on]
    assert others == ([DEPRECATED] * 5 if cuda_present else []), others      # 1 + 4 batches, let through
