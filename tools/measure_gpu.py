"""Record the GPU copy figures that lesson 3 plots for readers without a GPU.

    python tools/measure_gpu.py                      # writes measurements/gpu.json
    python tools/measure_gpu.py --out /tmp/gpu.json  # somewhere else

Needs a CUDA GPU (it measures cuda:0); on a machine without one it says so on stderr
and exits with status 2, writing nothing. Takes about a minute on one H200. It measures
with the course's own helpers (d2l_utils.time_op, copy_bandwidth, fit_latency_bandwidth).

Keys of the JSON file (times in seconds, sizes in bytes, bandwidths in bytes per second):

machine        d2l_utils.recordings.machine_info() (gpu, gpu_count, capability, driver,
               cuda, torch, python, date), and from this script: gpu_memory_bytes,
               integrated (CUDA's is_integrated: the GPU shares the host's memory), cpu,
               pcie_link, and nvml_error where the link could not be read.
  pcie_link    None where neither NVML (nvidia-ml-py) nor nvidia-smi answers (nvml_error
               says why); else the link of cuda:0: read_with ('nvml' or 'nvidia-smi'),
               matched_by ('uuid' or 'pci_bus_id': how cuda:0 was found among NVML's
               devices, which NVML numbers in its own order), max_generation, max_width
               (the fastest link that GPU and slot support), idle_generation, idle_width
               (read before any copy: an idle link may slow down to save power), and
               load_generation, load_width (the fastest reading during pinned
               host->device copies: the link as copies use it).
torch, date    PyTorch version; UTC time of the run
script         "tools/measure_gpu.py"
pin_cost       measured first, on a size class (32 MiB) that nothing had pinned before:
               nbytes; pin_first_s (the first pin_memory() of that size: allocate and
               page-lock memory, then copy); pin_again_s (median of later ones: PyTorch's
               caching host allocator hands back the freed block, so only the copy is
               left); host_copy_s (a copy of nbytes into host memory already in place);
               pageable_copy_s, pinned_copy_s (one host->device copy of nbytes).
               The three host-side figures use all of PyTorch's CPU threads.
copies         "cpu->cuda:0 pageable", "cpu->cuda:0 pinned", "cuda:0->cpu pageable",
               "cuda:0->cpu pinned", each: nbytes, seconds, bytes_per_s (lists, 1 KiB to
               256 MiB), latency_s and fit_bytes_per_s (fit_latency_bandwidth over all sizes).

Lesson 4's GPU figures are not here: its GPU-only cells print them, and
tools/record_gpu.py records what they printed.
"""
import argparse
import datetime
import json
import pathlib
import platform
import subprocess
import sys
import time
import types

import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))            # the helpers of this checkout, installed or not
import d2l_utils as d2l  # noqa: E402
from d2l_utils.recordings import machine_info  # noqa: E402
SIZES = [2**k for k in range(10, 29, 2)]          # 1 KiB ... 256 MiB, even powers of two
PIN_BYTES = 32 * 2**20                            # an odd power of two: no copy above pins its size class


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def _bare_uuid(value):
    """'GPU-ffc7...' or 'MIG-ffc7...' (NVML) and 'ffc7...' (PyTorch) alike, as 'ffc7...'."""
    text = _text(value).strip().lower()
    return text.split("-", 1)[1] if text[:4] in ("gpu-", "mig-") else text


def nvml_handle(nvml, props):
    """Find the NVML device of the CUDA device with properties ``props``: return (handle, matched_by).

    An index does not do: NVML numbers GPUs in an order it does not promise (its API
    reference: no consistency between reboots, and an index that need not match CUDA's;
    look devices up by PCI id or UUID; nvidia-smi shows PCI bus order in practice), CUDA
    numbers them fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, and
    CUDA_VISIBLE_DEVICES renumbers CUDA's devices only. So NVML's devices are searched,
    never indexed by CUDA's number. A UUID names the same GPU in both (``props.uuid``,
    PyTorch >= 2.4; a MIG instance's UUID leads to its GPU), and so does the PCI address
    (``props.pci_domain_id``, ``pci_bus_id``, ``pci_device_id`` where this PyTorch has
    them). ``nvml`` is the ``pynvml`` module, initialised. Raises LookupError when no NVML
    device matches.
    """
    uuid = _bare_uuid(getattr(props, "uuid", "") or "")
    pci = tuple(getattr(props, f"pci_{part}_id", None) for part in ("domain", "bus", "device"))
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    for handle in handles if uuid else []:
        if _bare_uuid(nvml.nvmlDeviceGetUUID(handle)) == uuid:
            return handle, "uuid"
        try:                                            # MIG instances of this GPU, if any
            slots = nvml.nvmlDeviceGetMaxMigDeviceCount(handle)
        except Exception:                               # this GPU has no MIG
            slots = 0
        for j in range(slots):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, j)
            except Exception:                           # an unused slot
                continue
            if _bare_uuid(nvml.nvmlDeviceGetUUID(mig)) == uuid:
                return handle, "uuid"
    for handle in handles if None not in pci else []:
        info = nvml.nvmlDeviceGetPciInfo(handle)
        if (info.domain, info.bus, info.device) == pci:
            return handle, "pci_bus_id"
    raise LookupError(f"no NVML device has UUID {uuid or '(unknown)'} or PCI address {pci}")


def read_link(nvml, handle, keep_busy=None, rounds=25):
    """The current PCIe link of NVML device ``handle``: (generation, width).

    An idle link may slow down to save power (often to generation 1), so the link that
    copies use can only be read while copies run. Without ``keep_busy`` the link is read
    once, as it is now. With it, ``keep_busy()`` must queue work across the link and
    return a function that waits for that work; the link is read while the work runs,
    ``rounds`` times, and the fastest reading is returned.
    """
    def now():
        return (nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle),
                nvml.nvmlDeviceGetCurrPcieLinkWidth(handle))
    if keep_busy is None:
        return now()
    readings = []
    for _ in range(rounds):
        wait = keep_busy()
        readings.append(now())
        wait()
    return max(readings)


def copy_load(device, nbytes=2**28, copies=4):
    """A keep_busy for read_link: queue ``copies`` pinned host->device copies of ``nbytes``."""
    src = torch.ones(nbytes, dtype=torch.uint8).pin_memory()
    dst = torch.empty(nbytes, dtype=torch.uint8, device=device)

    def keep_busy():
        for _ in range(copies):
            dst.copy_(src, non_blocking=True)       # from pinned memory: queued, returns at once
        return lambda: torch.cuda.synchronize(device)
    return keep_busy


def pcie_link(nvml, props, keep_busy, rounds=25):
    """Everything recorded under machine.pcie_link but read_with (see the module's docstring)."""
    handle, matched_by = nvml_handle(nvml, props)
    idle = read_link(nvml, handle)
    load = read_link(nvml, handle, keep_busy, rounds)
    return {"matched_by": matched_by,
            "max_generation": nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle),
            "max_width": nvml.nvmlDeviceGetMaxPcieLinkWidth(handle),
            "idle_generation": idle[0], "idle_width": idle[1],
            "load_generation": load[0], "load_width": load[1]}


class NvidiaSmi:
    """The pynvml calls this script makes, answered by the nvidia-smi program instead.

    For machines without nvidia-ml-py. A handle is NVML's index, which nvidia-smi's
    --id takes too; the query fields are those of ``nvidia-smi --help-query-gpu``.
    """
    FIELDS = ("uuid", "pci.domain", "pci.bus", "pci.device", "pcie.link.gen.current",
              "pcie.link.width.current", "pcie.link.gen.max", "pcie.link.width.max")

    def __init__(self, run=subprocess.run):
        self.run = run

    def _query(self, handle=None):
        command = ["nvidia-smi", f"--query-gpu={','.join(self.FIELDS)}", "--format=csv,noheader,nounits"]
        if handle is not None:
            command.append(f"--id={handle}")
        out = self.run(command, capture_output=True, text=True, timeout=60, check=True).stdout
        return [dict(zip(self.FIELDS, (v.strip() for v in line.split(","))))
                for line in out.strip().splitlines()]

    def nvmlDeviceGetCount(self):
        return len(self._query())

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetUUID(self, handle):
        return self._query(handle)[0]["uuid"]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):
        raise NotImplementedError("MIG instances are not looked up through nvidia-smi")

    def nvmlDeviceGetPciInfo(self, handle):
        row = self._query(handle)[0]
        return types.SimpleNamespace(**{part: int(row[f"pci.{part}"], 16) for part in ("domain", "bus", "device")})

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        return int(self._query(handle)[0]["pcie.link.gen.current"])

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        return int(self._query(handle)[0]["pcie.link.width.current"])

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        return int(self._query(handle)[0]["pcie.link.gen.max"])

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        return int(self._query(handle)[0]["pcie.link.width.max"])


def cpu_name():
    """The host CPU's model name (Linux), else what platform knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(device):
    """What was measured: machine_info(), the GPU's memory, the CPU, the PCIe link."""
    props = torch.cuda.get_device_properties(device)
    info = {**machine_info(), "gpu_memory_bytes": props.total_memory,
            "integrated": bool(props.is_integrated), "cpu": cpu_name(), "pcie_link": None}
    try:
        try:
            import pynvml as nvml
        except ImportError:           # no nvidia-ml-py: ask nvidia-smi, one program run per reading,
            nvml, read_with = NvidiaSmi(), "nvidia-smi"     # so queue more copies and read fewer times
            link = pcie_link(nvml, props, copy_load(device, copies=64), rounds=5)
        else:
            nvml.nvmlInit()
            try:
                read_with, link = "nvml", pcie_link(nvml, props, copy_load(device))
            finally:
                nvml.nvmlShutdown()
        info["pcie_link"] = {**link, "read_with": read_with}
    except Exception as e:            # NVML or nvidia-smi cannot answer: leave None, say why
        info["nvml_error"] = f"{type(e).__name__}: {e}"
    return info


def copies(device, sizes, pinned_too, min_run_time):
    """Copy time and bandwidth against size, both ways, pageable (and pinned), with fits."""
    host, out = torch.device("cpu"), {}
    for src, dst in [(host, device), (device, host)]:
        for pinned in ([False, True] if pinned_too else [False]):
            rows = [d2l.copy_bandwidth(n, src, dst, pinned=pinned, min_run_time=min_run_time) for n in sizes]
            latency, bandwidth = d2l.fit_latency_bandwidth(sizes, [s for s, _ in rows])
            out[f"{src}->{dst} {'pinned' if pinned else 'pageable'}"] = {
                "nbytes": sizes, "seconds": [s for s, _ in rows], "bytes_per_s": [b for _, b in rows],
                "latency_s": latency, "fit_bytes_per_s": bandwidth}
    return out


def pin_cost(device, nbytes, pinned_too, min_run_time):
    """The first pin_memory() of a size class, later ones, and the copies they serve.

    Must run before anything else pins a tensor of ``nbytes``' power-of-two size class:
    PyTorch's caching host allocator keeps freed pinned blocks by that class and hands
    them back, and then no pin is a first one (aten/src/ATen/core/CachingHostAllocator.h).
    """
    host, threads = torch.device("cpu"), torch.get_num_threads()
    x = torch.ones(nbytes, dtype=torch.uint8)
    in_place = torch.empty_like(x).copy_(x)               # host memory, already touched
    out = {"nbytes": nbytes}
    if pinned_too:
        torch.ones(1).pin_memory()                        # start the allocator on another size class
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        x.pin_memory()
        out["pin_first_s"] = time.perf_counter() - start
        out["pin_again_s"] = d2l.time_op(lambda: x.pin_memory(), host, min_run_time, num_threads=threads)
    out["host_copy_s"] = d2l.time_op(lambda: in_place.copy_(x), host, min_run_time, num_threads=threads)
    out["pageable_copy_s"] = d2l.copy_bandwidth(nbytes, host, device, min_run_time=min_run_time)[0]
    if pinned_too:
        out["pinned_copy_s"] = d2l.copy_bandwidth(nbytes, host, device, pinned=True, min_run_time=min_run_time)[0]
    return out


def measure(device, sizes=SIZES, pinned_too=True, min_run_time=0.1, pin_bytes=PIN_BYTES):
    """Every measurement, as the dictionary written to gpu.json (without the machine).

    pin_cost runs first, before the copies pin blocks of their own sizes.
    """
    out = {"pin_cost": pin_cost(device, pin_bytes, pinned_too, min_run_time)}
    out["copies"] = copies(device, sizes, pinned_too, min_run_time)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "measurements" / "gpu.json",
                        help="where to write the JSON (default: measurements/gpu.json)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("measure_gpu.py: no CUDA GPU here (torch.cuda.is_available() is False), so there is "
              "nothing to measure; run it on a machine with an NVIDIA GPU. Nothing was written.",
              file=sys.stderr)
        return 2
    device = torch.device("cuda:0")
    torch.ones(1, device=device)                  # start CUDA before anything is timed
    start = time.perf_counter()
    described = machine(device)                   # reads the idle link before any copy
    record = {"machine": described, "torch": torch.__version__,
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "script": "tools/measure_gpu.py", **measure(device)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out} in {time.perf_counter() - start:.0f} s: {described['gpu']}, torch {record['torch']}")
    link = described["pcie_link"]
    print("  PCIe link: " + (f"Gen {link['load_generation']} x{link['load_width']} during copies, "
                             f"Gen {link['idle_generation']} x{link['idle_width']} idle, "
                             f"up to Gen {link['max_generation']} x{link['max_width']}"
                             if link else f"not read ({described.get('nvml_error')})"))
    pin = record["pin_cost"]
    print(f"  pin_memory() of {pin['nbytes'] // 2**20} MiB: first {pin['pin_first_s'] * 1e3:.1f} ms, "
          f"again {pin['pin_again_s'] * 1e3:.1f} ms, a host copy {pin['host_copy_s'] * 1e3:.1f} ms")
    for name, rec in record["copies"].items():
        print(f"  {name}: latency {rec['latency_s'] * 1e6:.1f} us, bandwidth {rec['fit_bytes_per_s'] / 1e9:.1f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
