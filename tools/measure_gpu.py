"""Record the GPU figures that lessons 3 and 4 cannot measure on a machine without one.

    python tools/measure_gpu.py                      # writes measurements/gpu.json
    python tools/measure_gpu.py --out /tmp/gpu.json  # somewhere else

Needs a CUDA GPU (it measures cuda:0); on a machine without one it says so and exits
with status 2, writing nothing. It measures, with the course's own helpers
(d2l_utils.time_op, copy_bandwidth, fit_latency_bandwidth):

* host->device and device->host copies over sizes, from pageable and pinned memory,
  with the fitted latency and bandwidth of each;
* what pin_memory() costs (first time, again) against one pageable / pinned copy;
* 1000 copies of 1 KiB against one copy of 1000 KiB, and 1000 small adds against one large add;
* a naive clock against a synchronized one, time_op and CUDA events, on a 4096x4096 matmul;
* lesson 4's training loop with loss.item() every step against summing on the device.

The file records the GPU, driver, CUDA and PyTorch versions, the PCIe link where NVML
(nvidia-ml-py) can read it, and the date, so that the lessons can show the figures
with their provenance. Takes about a minute.
"""
import argparse
import datetime
import json
import pathlib
import platform
import statistics
import sys
import time

import torch
from torch import nn

import d2l_utils as d2l

ROOT = pathlib.Path(__file__).resolve().parent.parent
SIZES = [2**k for k in range(10, 29, 2)]          # 1 KiB ... 256 MiB


def machine(device):
    """What was measured: GPU, driver, CUDA, PCIe link (where NVML answers), host."""
    props = torch.cuda.get_device_properties(device)
    info = {"gpu": props.name, "capability": ".".join(map(str, torch.cuda.get_device_capability(device))),
            "gpu_memory_bytes": props.total_memory, "cuda_runtime": torch.version.cuda,
            "driver": None, "pcie_link": None, "cpu": platform.processor() or platform.machine(),
            "python": platform.python_version()}
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            info["driver"] = pynvml.nvmlSystemGetDriverVersion()
            h = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
            info["pcie_link"] = {"generation": pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h),
                                 "width": pynvml.nvmlDeviceGetCurrPcieLinkWidth(h),
                                 "max_generation": pynvml.nvmlDeviceGetMaxPcieLinkGeneration(h),
                                 "max_width": pynvml.nvmlDeviceGetMaxPcieLinkWidth(h)}
        finally:
            pynvml.nvmlShutdown()
    except Exception as e:            # no nvidia-ml-py, or NVML cannot answer: leave None
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
    """pin_memory() (first call, then again from PyTorch's cache) against the copies it serves."""
    host = torch.device("cpu")
    x = torch.ones(nbytes, dtype=torch.uint8)
    out = {"nbytes": nbytes, "host_clone_s": d2l.time_op(lambda: x.clone(), host, min_run_time),
           "pageable_copy_s": d2l.copy_bandwidth(nbytes, host, device, min_run_time=min_run_time)[0]}
    if pinned_too:
        start = time.perf_counter()
        x.pin_memory()
        out["pin_first_s"] = time.perf_counter() - start
        out["pin_again_s"] = d2l.time_op(lambda: x.pin_memory(), host, min_run_time)
        out["pinned_copy_s"] = d2l.copy_bandwidth(nbytes, host, device, pinned=True, min_run_time=min_run_time)[0]
    return out


def call_overhead(device, min_run_time):
    """1000 copies of 1 KiB against one of 1000 KiB; 1000 small adds against one large add."""
    host = torch.device("cpu")
    pieces = [torch.ones(1024, dtype=torch.uint8) for _ in range(1000)]
    targets = [torch.empty(1024, dtype=torch.uint8, device=device) for _ in range(1000)]
    whole, target = torch.ones(1024 * 1000, dtype=torch.uint8), torch.empty(1024 * 1000, dtype=torch.uint8, device=device)
    smalls = [torch.ones(1000, device=device) for _ in range(1000)]
    large = torch.ones(1000, 1000, device=device)
    return {"many_copies_s": d2l.time_op(lambda: [b.copy_(a) for a, b in zip(pieces, targets)], [host, device], min_run_time),
            "one_copy_s": d2l.time_op(lambda: target.copy_(whole), [host, device], min_run_time),
            "many_adds_s": d2l.time_op(lambda: [s + 1 for s in smalls], device, min_run_time),
            "one_add_s": d2l.time_op(lambda: large + 1, device, min_run_time)}


def timing(device, n, min_run_time):
    """One n x n matmul: naive clock, synchronized clock, time_op, CUDA events (medians)."""
    a = torch.randn(n, n, device=device) / n**0.5
    a @ a
    d2l.synchronize(device)

    def clock(wait_at_end):
        d2l.synchronize(device)
        start = time.perf_counter()
        a @ a
        if wait_at_end:
            d2l.synchronize(device)
        return time.perf_counter() - start

    out = {"n": n, "naive_s": statistics.median(clock(False) for _ in range(11)),
           "synchronized_s": statistics.median(clock(True) for _ in range(11)),
           "time_op_s": d2l.time_op(lambda: a @ a, device, min_run_time)}
    if device.type == "cuda":
        ms = []
        for _ in range(11):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(); a @ a; end.record()
            end.synchronize()
            ms.append(start.elapsed_time(end))
        out["events_s"] = statistics.median(ms) / 1e3
    return out


def train(net, X, y, steps, read_every_step):
    """Lesson 4's loop: SGD for `steps` steps; the loss read every step or summed on the device."""
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    total = 0.0 if read_every_step else torch.zeros((), device=X.device)
    for _ in range(steps):
        loss = nn.functional.mse_loss(net(X), y)
        optimizer.zero_grad(); loss.backward(); optimizer.step()
        if read_every_step:
            total += loss.item()
        else:
            total += loss.detach()
    return float(total) / steps


def training_loop(device, width, batch, steps, min_run_time):
    """Time lesson 4's two loops on the same network and data."""
    torch.manual_seed(0)
    X, y = torch.randn(batch, width, device=device), torch.randn(batch, 1, device=device)
    net = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                        nn.Linear(width, 1)).to(device)
    return {"width": width, "batch": batch, "steps": steps,
            "item_every_step_s": d2l.time_op(lambda: train(net, X, y, steps, True), device, min_run_time),
            "sum_on_device_s": d2l.time_op(lambda: train(net, X, y, steps, False), device, min_run_time)}


def measure(device, sizes=SIZES, pinned_too=True, min_run_time=0.1, width=1024, matmul=4096,
            pin_bytes=64 * 2**20):
    """Every measurement, as the dictionary written to gpu.json (without the machine)."""
    return {"copies": copies(device, sizes, pinned_too, min_run_time),
            "pin_cost": pin_cost(device, pin_bytes, pinned_too, min_run_time),
            "call_overhead": call_overhead(device, min_run_time),
            "timing": timing(device, matmul, min_run_time),
            "training_loop": training_loop(device, width, width, 20, min_run_time)}


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
    record = {"machine": machine(device), "torch": torch.__version__,
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "script": "tools/measure_gpu.py", **measure(device)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}: {record['machine']['gpu']}, torch {record['torch']}")
    for name, rec in record["copies"].items():
        print(f"  {name}: latency {rec['latency_s'] * 1e6:.1f} us, bandwidth {rec['fit_bytes_per_s'] / 1e9:.1f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
