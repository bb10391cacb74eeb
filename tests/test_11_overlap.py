"""Lesson 11's helpers (add_to_class, Prefetcher, pipeline_schedule) on any machine, the CUDA
path of Prefetcher where there is a GPU, the settings and facts the lesson's compile cells rely
on (nothing is compiled here: a cold compile takes seconds), and the shape of its GPU-only cells."""
import collections
import pathlib
import random
import re

import pytest
import torch
from conftest import ROOT, cuda_cells

import d2l_utils as d2l

LESSON = ROOT / "notebooks" / "11_overlap_and_launch_overhead.ipynb"
GPU_CELLS = {"11-copy-compute-overlap": 1, "11-prefetcher": 1, "11-pinned-buffer-reuse": 1,
             "11-record-stream": 1, "11-cuda-graph-replay": 1, "11-reduce-overhead": 1,
             "11-graphed-callables": 1, "11-cudagraph-overwritten": 1}
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


def test_add_to_class_grows_a_class_and_its_existing_instances():
    class Counter:
        def __init__(self):
            self.n = 0

    before = Counter()

    @d2l.add_to_class(Counter)
    def step(self, by=1):
        """Add ``by``."""
        self.n += by
        return self.n

    assert Counter.step is step and step.__name__ == "step"     # stored under its own name, returned
    assert before.step(2) == 2 and Counter().step() == 1        # an instance made earlier has it too
    assert {"__len__", "__iter__", "_copy_next"} <= set(vars(d2l.Prefetcher))


@pytest.mark.parametrize("loader, device, error, match", [
    (42, "cpu", TypeError, "loader must be an iterable of batches"),
    (None, "cpu", TypeError, "loader must be an iterable of batches"),
    (torch.utils.data.TensorDataset(torch.zeros(4, 2)), "cpu", TypeError, "not a Dataset"),   # would walk samples
    ([], 3.0, TypeError, "must be a str or torch.device"), ([], 0, TypeError, "must be a str or torch.device"),
    ([], "gpu", ValueError, "not a device: 'gpu'")])
def test_prefetcher_rejects_bad_arguments(loader, device, error, match):
    with pytest.raises(error, match=match):
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


@pytest.mark.parametrize("copy_s, compute_s, error, match", [
    ([], [], ValueError, "at least one"), ([1, 2], [1], ValueError, "as many copies as computes"),
    ([-1], [1], ValueError, "a copy duration must be >= 0"), ([1], [-1], ValueError, "a compute duration"),
    ([float("nan")], [1], ValueError, "must be finite"), (["1"], [1], TypeError, "must be a number"),
    ([True], [1], TypeError, "must be a number"), (5, [1], TypeError, "not iterable")])
def test_pipeline_schedule_rejects_bad_durations(copy_s, compute_s, error, match):
    with pytest.raises(error, match=match):
        d2l.pipeline_schedule(copy_s, compute_s)


def test_the_settings_the_compile_cells_rely_on_exist():
    """The lesson sets these before its cold compile and catches this error. Read from
    Inductor's source, since importing Inductor takes seconds (nothing is compiled here)."""
    inductor = pathlib.Path(torch.__file__).parent / "_inductor"
    config = (inductor / "config.py").read_text(encoding="utf-8")
    assert "\ncompile_threads" in config and "vec_isa_ok" in config
    # vec_isa_ok=True: "force usage as specified, without testing", i.e. no probe, still vectorized
    assert "if vec_isa_ok is not None:\n            return vec_isa_ok" in (
        inductor / "cpu_vec_isa.py").read_text(encoding="utf-8")
    assert '"triton.cudagraphs": True' in (inductor / "__init__.py").read_text(encoding="utf-8")
    exc = (inductor / "exc.py").read_text(encoding="utf-8")
    assert "class InvalidCxxCompiler" in exc and "No working C++ compiler found" in exc


def test_what_the_lesson_says_about_rounding_is_in_the_source():
    """The CPU's C++ is compiled without contraction by default; Triton kernels with FMA fusion
    unless emulate_precision_casts is set (read from the installed Inductor)."""
    inductor = pathlib.Path(torch.__file__).parent / "_inductor"
    config = (inductor / "config.py").read_text(encoding="utf-8")
    assert '"TORCHINDUCTOR_CPP_ENABLE_FLOATING_POINT_CONTRACT_FLAG", "off"' in config
    assert "ffp-contract={config.cpp.enable_floating_point_contract_flag}" in (
        inductor / "cpp_builder.py").read_text(encoding="utf-8")
    assert '"enable_fp_fusion": not config.emulate_precision_casts' in (
        inductor / "codegen" / "triton.py").read_text(encoding="utf-8")


def test_what_the_depth_says_about_recompiles_and_ddp_is_in_the_source():
    """The limit's default and its old name, Dynamo's warning when it is hit, and DDPOptimizer."""
    dynamo = pathlib.Path(torch.__file__).parent / "_dynamo"
    config = (dynamo / "config.py").read_text(encoding="utf-8")
    assert re.search(r"\nrecompile_limit(: int)? = 8\n", config)
    assert 'cache_size_limit: int = Config(alias="torch._dynamo.config.recompile_limit")' in config
    assert "\noptimize_ddp" in config and "match DDP bucket sizes" in config
    assert "hit config.%s" in (dynamo / "convert_frame.py").read_text(encoding="utf-8")
    assert "class DDPOptimizer" in (dynamo / "backends" / "distributed.py").read_text(encoding="utf-8")


def test_what_the_tlparse_and_ddp_sections_rely_on_is_in_the_source():
    """The handler that TORCH_TRACE attaches (the tlparse cell attaches it itself), DDP's single
    first bucket, FSDP2's hooks hidden from Dynamo, and the DDP script parses (2.11 and 2.13 alike)."""
    import ast
    from conftest import cells, source
    from torch._logging import _internal
    assert "LazyTraceHandler(trace_dir_name)" in pathlib.Path(_internal.__file__).read_text(encoding="utf-8")
    _internal.TorchLogsFormatter(trace=True)
    assert _internal.LazyTraceHandler(None).root_dir is None and _internal.trace_log.name == "torch.__trace"
    assert torch._dynamo.config.optimize_ddp is True
    torch_dir = pathlib.Path(torch.__file__).parent
    ddp = (torch_dir / "nn" / "parallel" / "distributed.py").read_text(encoding="utf-8")
    assert "def _ddp_init_helper" in ddp and "bucket_size_limits = [sys.maxsize]" in ddp
    fsdp = torch_dir / "distributed" / "fsdp" / "_fully_shard"
    common, state = ((fsdp / name).read_text(encoding="utf-8") for name in ("_fsdp_common.py", "_fsdp_state.py"))
    if "def _dynamo_disable" in common:                   # 2.13: always
        assert 'reason="skipping FSDP hooks"' in common and "@_dynamo_disable" in state
    else:                                                 # 2.11: while skip_fsdp_hooks is on, its default
        assert "def disable_if_config_true" in state and torch._dynamo.config.skip_fsdp_hooks is True
    namespace = {}
    exec(source(next(c for c in cells(LESSON) if c["id"] == "c11-ddp-script")), namespace)   # only the text
    script = namespace["DDP_COMPILE"]
    ast.parse(script)
    assert "bucket_cap_mb=1" in script and "optimize_ddp=split" in script and "del step, model; gc.collect()" in script


def test_past_the_recompile_limit_a_function_runs_uncompiled():
    """With the limit at 2, a third dtype compiles nothing and still gives the right result
    (a counting backend: no Inductor)."""
    import torch._dynamo
    from torch._dynamo.testing import CompileCounter
    counter = CompileCounter()
    fn = torch.compile(lambda t: t * 2 + 1, backend=counter)
    with torch._dynamo.config.patch(recompile_limit=2):
        outs = [fn(torch.ones(2, dtype=dt)) for dt in (torch.float32, torch.float64, torch.int32)]
    torch._dynamo.reset()
    assert counter.frame_count == 2 and outs[2].dtype == torch.int32 and outs[2].tolist() == [3, 3]


def fma_rounds(x, n):
    """n rounds of x * 1.01 + 0.1, each rounded once (as an FMA): the product is exact in float64."""
    m, a = torch.tensor(1.01).item(), torch.tensor(0.1).item()
    for _ in range(n):
        x = (x.double() * m + a).float()
    return x


def eager_rounds(x, n):
    for _ in range(n):
        x = x * 1.01 + 0.1
    return x


def test_the_lessons_tolerance_covers_fma_and_the_default_does_not():
    """The lesson's tolerance (rtol 1e-5, atol 2e-5) holds for one rounding against two on many
    inputs, and the default allclose fails on nearly all of them (seeded)."""
    gen = torch.Generator().manual_seed(0)
    inputs = [torch.randn(1000, generator=gen) for _ in range(50)]
    default = sum(torch.allclose(eager_rounds(t, 20), fma_rounds(t, 20)) for t in inputs)
    ours = sum(torch.allclose(eager_rounds(t, 20), fma_rounds(t, 20), rtol=1e-5, atol=2e-5) for t in inputs)
    assert default <= 5 and ours == 50


def test_one_rounding_in_float64_is_what_a_fused_multiply_add_gives():
    """The lesson's emulation of an FMA against exact arithmetic: x * 1.01f + 0.1f computed with
    fractions and rounded once to the nearest float32 (ties to even)."""
    from fractions import Fraction
    import numpy as np

    def nearest_float32(exact):
        f = np.float32(float(exact))                                   # within one float32 step
        candidates = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
        return min(candidates, key=lambda c: (abs(Fraction(float(c)) - exact), int(c.view(np.int32)) & 1))

    m, a = Fraction(torch.tensor(1.01).item()), Fraction(torch.tensor(0.1).item())
    xs = torch.randn(2000, generator=torch.Generator().manual_seed(0))
    ours = fma_rounds(xs, 1).tolist()
    exact = [float(nearest_float32(Fraction(v) * m + a)) for v in xs.tolist()]
    assert sum(o != e for o, e in zip(ours, exact)) <= 2                # double rounding differs only at rare ties
    assert sum(o != e for o, e in zip(eager_rounds(xs, 1).tolist(), exact)) > 100   # two roundings often differ


def test_the_gpu_only_cells_are_marked_and_ask_for_cuda():
    assert cuda_cells(LESSON) == GPU_CELLS


# ---- the GPU-only cells' expectations (d2l_utils/expectations/lesson11.py) -----------------------

def _expected(cell_id, gpu):
    from d2l_utils import gpu_models
    from d2l_utils.expectations import expected_for
    return {i["name"]: i for i in expected_for(cell_id, gpu_models.DATASHEET[gpu]).items}


def _markdown(cell_id):
    from conftest import cells, source
    return " ".join(source(next(c for c in cells(LESSON) if c["id"] == cell_id)).split())


@pytest.mark.parametrize("gpu", ["H200", "T4"])
def test_the_gpu_cells_asserts_hold_at_the_expected_values(gpu):
    """Each timing assert of a GPU cell, at the model's value: a first GPU run should pass."""
    assert _expected("11-copy-compute-overlap", gpu)["overlapped_share"]["value"] < 0.8
    assert _expected("11-prefetcher", gpu)["prefetcher_share"]["value"] < 0.85
    assert _expected("11-cuda-graph-replay", gpu)["speedup"]["value"] > 1 / 0.7
    assert _expected("11-reduce-overhead", gpu)["speedup"]["value"] > 1 / 0.7
    assert _expected("11-graphed-callables", gpu)["speedup"]["value"] > 1 / 0.8


def test_the_overlap_follows_the_lessons_schedule():
    """The prefetcher's expectation is pipeline_schedule's: a bit over half of the plain loop,
    never under the busier row (16 copies)."""
    for gpu in ("H200", "T4"):
        e = _expected("11-prefetcher", gpu)
        assert 0.5 < e["prefetcher_share"]["value"] < 0.6
        assert e["prefetcher_ms"]["value"] >= 16 * e["copy_ms"]["value"]
        assert e["copy_ms"]["low"] < e["copy_ms"]["value"] < e["copy_ms"]["high"]


def test_the_prose_quotes_the_models_numbers():
    """The notes before the GPU cells quote the expectations' values (rounded), not typed guesses."""
    h200, t4 = _expected("11-copy-compute-overlap", "H200"), _expected("11-copy-compute-overlap", "T4")
    text = _markdown("cd8f8dc-11overlapandlaunchov")
    assert f"about {h200['copy_ms']['value']:.1f} ms" in text and f"{h200['product_ms']['value']:.2f} ms" in text
    assert f"{h200['overlapped_share']['value']:.0%} of serial" in text
    assert f"{t4['copy_ms']['value']:.0f} ms copy" in text
    pre = {gpu: _expected("11-prefetcher", gpu) for gpu in ("H200", "T4")}
    text = _markdown("c2acb71-11overlapandlaunchov")
    assert f"{pre['H200']['copy_ms']['value']:.2f} ms" in text and f"{pre['T4']['copy_ms']['value']:.1f} ms" in text
    assert all(f"{pre[g]['prefetcher_share']['value']:.0%}" in text for g in pre)
    graph = _expected("11-cuda-graph-replay", "H200")
    text = _markdown("c345f1d-11overlapandlaunchov")
    assert f"about {graph['eager_us']['value']:.0f} µs" in text and f"{graph['replay_us']['value']:.0f} µs" in text
    reduced = _expected("11-reduce-overhead", "H200")
    assert f"about {round(reduced['reduced_us']['value'], -1):.0f} µs" in _markdown("c059-11overlapandlaunchov")
    step = _expected("11-graphed-callables", "H200")
    text = _markdown("ceb1138-11overlapandlaunchov")
    assert all(f"about {round(step[k]['value'], -1):.0f} µs" in text for k in ("eager_us", "graphed_us"))


def test_the_sync_in_capture_script_calls_item_inside_the_capture():
    """The child process's script (run by 11-cuda-graph-replay on a GPU) parses, syncs inside
    torch.cuda.graph, and prints the first line of each error; the expectation quotes CUDA's texts."""
    import ast
    from conftest import cells, source
    cell = next(c for c in cells(LESSON) if c["id"] == "cb7e2a4-11overlapandlaunchov")
    namespace = {}
    exec(source(cell), namespace)                         # only defines the script's text
    script = namespace["SYNC_IN_CAPTURE"]
    ast.parse(script)
    capture = script[script.index("torch.cuda.graph("):]
    assert ".item()" in capture and "e.__context__" in script
    texts = _expected("11-cuda-graph-replay", "H200")["sync_in_capture"]["value"]
    assert texts == ["operation not permitted when stream is capturing",
                     "operation failed due to a previous error during capture"]


def test_the_overwritten_output_message_is_pytorchs():
    """11-cudagraph-overwritten quotes format_dealloc_msg of torch/_inductor/cudagraph_trees.py, and
    the lesson's fix names an API that exists (in 2.11 and 2.13 alike)."""
    import pathlib
    from d2l_utils.expectations import lesson11
    source = (pathlib.Path(torch.__file__).parent / "_inductor" / "cudagraph_trees.py").read_text()
    assert lesson11.OVERWRITTEN in source and "def mark_step_begin" in source
    assert callable(torch.compiler.cudagraph_mark_step_begin) and callable(torch._dynamo.mark_dynamic)
    assert torch._inductor.list_mode_options("max-autotune")["max_autotune"] is True
