"""Lesson 4's claims about timing queued work, checked on any machine with a simulated
device queue, and on a real GPU where there is one; and the shape of its GPU-only cells."""
import os
import re
import subprocess
import sys
import threading
import time
import warnings

import pytest
import torch
from conftest import ROOT, cuda_cells

import d2l_utils as d2l

LESSON = ROOT / "notebooks" / "04_synchronization.ipynb"
GPU_CELLS = {"04-sync-debug-mode": 1, "04-timing-on-gpu": 1, "04-training-loop": 1,
             "04-item-waits-for-the-queue": 1, "04-launch-blocking": 1,
             "04-launch-timeline": 1, "04-blocking-copy-waits": 1}
gil = pytest.mark.skipif(not getattr(sys, "_is_gil_enabled", lambda: True)(),
                         reason="a free-threaded Python has no GIL to hold")

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


@cuda
def test_sync_debug_mode_does_not_flag_an_explicit_synchronize():
    # The lesson says so (torch.cuda.synchronize -> c10::cuda::device_synchronize, which does not
    # call warn_or_error_on_sync); if a new PyTorch flags it, the lesson's prose must change.
    torch.ones(10, device="cuda").sum()
    try:
        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.synchronize()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert not any("synchroniz" in str(w.message) for w in caught)


def test_cuda_errors_are_runtime_errors():
    # The lesson's child script catches RuntimeError and its cell matches the message, not the
    # class name: from PyTorch 2.8 (pytorch/pytorch#152023) a CUDA error is torch.AcceleratorError.
    major, minor = (int(v) for v in re.findall(r"\d+", torch.__version__)[:2])
    if (major, minor) >= (2, 8):
        assert issubclass(torch.AcceleratorError, RuntimeError)


@cuda
@pytest.mark.skipif(torch.version.hip is not None, reason="ROCm builds may compile kernel asserts out")
def test_a_kernel_assert_is_raised_as_a_cuda_error_by_the_line_that_caused_it_when_launches_block():
    script = ("import torch\n"
              "x, i = torch.zeros(10, device='cuda'), torch.tensor([20], device='cuda')\n"
              "try:\n    x[i]; print('returned')\n"
              "except RuntimeError as e:\n    print(str(e).splitlines()[0])\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "CUDA_LAUNCH_BLOCKING": "1"}).stdout
    assert out.startswith("CUDA error:") and "returned" not in out


def counting_rate(call):
    """Counts per ms that another Python thread makes while ``call()`` runs (as in the lesson)."""
    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1
    thread = threading.Thread(target=spin)
    thread.start()
    time.sleep(0.02)
    before, start = count[0], time.perf_counter()
    call()
    after, seconds = count[0], time.perf_counter() - start
    stop.set()
    thread.join()
    return (after - before) / (seconds * 1e3)


@gil
def test_other_threads_run_during_a_pytorch_call_and_not_during_a_call_that_holds_the_gil():
    m = torch.randn(1024, 1024)
    best = 0.0
    for _ in range(3):                      # the best of three tries: other tests share the cores
        in_torch = counting_rate(lambda: m @ m @ m)
        holding = counting_rate(lambda: sum(range(15_000_000)))
        best = max(best, in_torch / max(holding, 1e-3))
        if best > 5:
            break
    assert best > 5


def test_the_gpu_only_cells_are_marked_and_ask_for_cuda():
    assert cuda_cells(LESSON) == GPU_CELLS


def lesson_function(name, **names):
    """Execute the lesson's code cell that defines ``name`` and return the function."""
    from conftest import code_cells, source
    cell, = [c for c in code_cells(LESSON) if f"def {name}(" in source(c)]
    namespace = {"torch": torch, "time": time, "d2l": d2l, "device": torch.device("cpu"), **names}
    import statistics
    namespace["statistics"] = statistics
    exec(source(cell), namespace)
    return namespace[name]


def test_in_turn_keeps_the_fastest_and_pairs_rounds_so_a_slow_spell_cancels():
    # The machine slows down fourfold halfway (another program starts): both timers see it.
    # The fastest readings differ by 10%, but every round's ratio is the same 1.1.
    in_turn = lesson_function("in_turn")
    speed = iter([1] * 8 + [4] * 8 + [1] * 14)
    fastest_a, fastest_b, quartiles = in_turn(lambda: 1.1 * next(speed), lambda: 1.0 * next(speed))
    assert (fastest_a, fastest_b) == (1.1, 1.0)
    assert quartiles == pytest.approx([1.1, 1.1, 1.1])


def test_in_turn_shows_noise_as_a_spread_of_ratios():
    # Two timers of the same work with noise: the ratios spread on both sides of 1.
    in_turn = lesson_function("in_turn")
    noise = iter([1.0, 1.3, 1.2, 1.0, 1.0, 1.0, 1.4, 1.1, 1.0, 1.2, 1.1, 1.0])
    low, mid, high = in_turn(lambda: next(noise), lambda: next(noise), rounds=6)[2]
    assert low < 1 < high and low < mid < high


def test_the_clock_cells_report_a_spread_and_time_every_width_in_rounds():
    # Lesson 4's stored outputs must carry their spread (issue: a gap that is noise read as a
    # cost), and the GPU cell must time each width more than once (a slow card at width 4096).
    from conftest import code_cells, source
    texts = [source(c) for c in code_cells(LESSON)]
    timing = [t for t in texts if "in_turn(lambda: clock(" in t]
    assert len(timing) == 3 and all("middle half" in t or "ratio by round" in t for t in timing)
    gpu_loop, = [t for t in texts if "d2l.show_recording('04-training-loop'" in t]
    assert "in_turn(" in gpu_loop and "time_op" not in gpu_loop


# ---- the expectations of the GPU-only cells (d2l_utils/expectations/lesson04.py) ----

def test_the_simulated_step_dispatches_what_pytorch_dispatches():
    # 04-training-loop's expectation plays a step out op by op; its list must be the ops PyTorch
    # dispatches for the lesson's step (here on the CPU, with SGD's foreach update as CUDA uses).
    from torch import nn
    from torch.utils._python_dispatch import TorchDispatchMode
    from d2l_utils.expectations import lesson04

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(func.__name__.split(".")[0])
            return func(*args, **(kwargs or {}))

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    X, y, total = torch.randn(1024, 64), torch.randn(1024, 1), torch.zeros(())
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, foreach=True)
    for _ in range(2):                                     # the second step is the steady one
        with Ops() as ops:
            loss = nn.functional.mse_loss(net(X), y)
            optimizer.zero_grad(); loss.backward(); optimizer.step()
            total += loss.detach()
    light = {"t", "detach", "view", "_record_function_enter_new", "_record_function_exit"}
    real = ["light" if name in light else name for name in ops.names][:-1]      # the last: total +=
    real = [k for name in real for k in (["kernel", "kernel"] if name == "mse_loss" else   # two kernels
                                          ["light" if name == "light" else "kernel"])]
    model = ["light" if op is None else "kernel" for op in lesson04.step_ops(64) if op != "python"]
    assert model == real


@pytest.mark.parametrize("gpu", ["H100", "H200", "T4", "RTX-4090"])
def test_the_simulated_loop_lies_between_the_lessons_bounds(gpu):
    # The lesson's L/C model: a step takes at least max(L, C); reading every step costs at most L + C
    # (plus the read), and with the step's 21 kernels, a few percent. The kernel-by-kernel simulation
    # must agree, and reading never be a gain.
    from d2l_utils import gpu_models
    from d2l_utils.expectations import lesson04
    spec = gpu_models.DATASHEET[gpu]
    latency = lesson04.host_costs(spec)[1].value
    for width in lesson04.WIDTHS:
        ops = lesson04.step_ops(width)
        L, C = lesson04.host_and_gpu(ops, spec)
        item = lesson04.simulate(ops, spec, 20, True, "value") / 20
        device = lesson04.simulate(ops, spec, 20, False, "value") / 20
        assert max(L, C) <= device * 1.001 and device <= item
        assert item <= L + C + latency + 1e-9
        assert item < 1.1 * device                   # the lesson: a few percent, not L + C


def test_the_schematic_matches_its_formulas():
    # notebooks/04's schedule: max(L, C) + min(L, C) / kernels a step with a read every step.
    import nbformat
    nb = nbformat.read(ROOT / "notebooks" / "04_synchronization.ipynb", as_version=4)
    source = next(c.source for c in nb.cells if c.source.startswith("def schedule("))
    space = {}
    exec(source, space)
    for L, C, k in [(3, 4.5, 3), (2, 3, 1), (5, 1, 5), (1, 1, 4)]:
        end = space["schedule"](L, C, 6, True, kernels=k)[3]
        assert end == pytest.approx(6 * (max(L, C) + min(L, C) / k))
        end = space["schedule"](L, C, 6, False, kernels=k)[3]
        assert end == pytest.approx(6 * max(L, C) + min(L, C) / k)


def test_the_launch_timeline_expectation_holds_the_cells_asserts():
    # The GPU branch asserts: the loop returns before the GPU is done, and the GPU before .item() returns.
    from d2l_utils import gpu_models
    from d2l_utils.expectations import lesson04
    for spec in gpu_models.reference_gpus():
        for scenario in lesson04.SCENARIOS:
            host, device, waits = lesson04.timeline(spec, scenario)
            assert host[-1][1] < device[-1][1] <= waits[0][1]
