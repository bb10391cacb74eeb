"""Tests of lesson 13 (notebooks/13_make_a_training_job_fast.ipynb), which saves no helper.

Its structure is checked statically: the versions of the job in the order the lesson measures
them, on the CPU and on a GPU; the checklist and every "lesson N, § ..." pointing at a heading
that lesson has; one launch of processes; the GPU-only cells; the earlier lessons' helpers it uses.
One behaviour is run: the data path, fixed, gives the batches of the data path as written.
The GPU-only cells' expectations (d2l_utils/expectations/lesson13.py) count a step of the job by
hand: checked here against the operations and FLOPs PyTorch records for the lesson's model, and
against the job, the versions and the loops the notebook defines.
"""
import ast
import contextlib
import io
import re

import pytest
import torch
from conftest import ROOT, cells, code_cells, source

import d2l_utils as d2l

LESSON = ROOT / "notebooks" / "13_make_a_training_job_fast.ipynb"
CPU_VERSIONS = ["as written", "+ data encoded once", "+ fused AdamW", "+ attention in one op", "+ no host waits"]
BFLOAT16 = "+ bfloat16 autocast"          # a row only on a CPU where bfloat16 is faster
GPU_VERSIONS = ["as written", "+ data encoded once", "+ no host waits", "+ TF32 matmuls", "16-bit autocast, not TF32",
                "+ fused AdamW", "+ attention in one op", "+ torch.compile (blocks)", "+ CUDA Graphs"]
GPU_CELLS = {"13-gpu-evidence", "13-gpu-versions", "13-gpu-compile", "13-gpu-picture"}
REFERENCE = re.compile(r'lesson (\d+), § "([^"]+)"')


def code():
    return [source(c) for c in code_cells(LESSON)]


def markdown():
    return [source(c) for c in cells(LESSON) if c["cell_type"] == "markdown"]


def one_cell(marker):
    found = [s for s in code() if marker in s]
    assert len(found) == 1, f"{marker!r}: {len(found)} cells"
    return found[0]


def headings(number):
    """The headings of lesson `number`, without the #'s."""
    path = next((ROOT / "notebooks").glob(f"{number:02d}_*.ipynb"))
    return {line.lstrip("#").strip() for c in cells(path) if c["cell_type"] == "markdown"
            for line in source(c).splitlines() if re.match(r"#{1,6} ", line)}


def test_the_cpu_versions_are_measured_in_order():
    names = []
    for s in code():
        names += re.findall(r"cpu_rows\['([^']+)'\] = ", s)
        if "cpu_rows[name] = " in s:
            names += re.findall(r"^ *name = '([^']+)'$", s, re.M)
    assert names == CPU_VERSIONS + [BFLOAT16]


def test_the_stored_table_lists_the_cpu_versions_in_order():
    cell = one_cell("print('rows:', names)")
    stored = next(c for c in code_cells(LESSON) if source(c) == cell)
    text = "".join("".join(o.get("text", "")) for o in stored["outputs"])
    assert f"rows: {CPU_VERSIONS}" in text or f"rows: {CPU_VERSIONS + [BFLOAT16]}" in text
    table = [line.split("  ")[0].strip() for line in text.splitlines()[1:] if line.startswith(("as ", "+ "))]
    assert table in (CPU_VERSIONS, CPU_VERSIONS + [BFLOAT16])


def test_the_gpu_versions_add_one_fix_at_a_time():
    cell = one_cell("GPU_VERSIONS = {")
    tree = ast.parse(cell)
    literal = next(n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                   and getattr(n.targets[0], "id", None) == "GPU_VERSIONS")
    versions = ast.literal_eval(literal)
    assert list(versions) == GPU_VERSIONS
    fixes = [f or set() for f, _ in versions.values()]
    for before, after in zip(fixes, fixes[1:]):
        added, dropped = after - before, before - after
        assert len(added) == 1, (before, after)
        assert dropped <= {"tf32"} and (not dropped or added == {"autocast"}), (before, after)
    tolerances = [t for _, t in versions.values()][1:]
    assert set(tolerances) <= {0.01, 0.03} and tolerances == sorted(tolerances)


def test_every_fix_is_a_switch_of_the_loop():
    switched = "".join(one_cell(m) for m in ("def batches(", "def model_and_optimizer(", "def train(job", "def gpu_run("))
    for fix in ("data", "waits", "fused", "sdpa", "autocast", "compile", "graphs", "tf32"):
        assert f"'{fix}' in fixes" in switched or f"'{fix}' not in fixes" in switched, fix


def test_references_to_other_lessons_name_their_headings():
    refs = [(int(n), " ".join(h.split())) for text in markdown() + code() for n, h in REFERENCE.findall(text)]
    assert len(refs) >= 15
    missing = [(n, h) for n, h in refs if h not in headings(n)]
    assert not missing, f"lesson 13 names sections that those lessons lack (renamed?): {missing}"


def test_the_checklist_points_every_line_at_a_lesson():
    texts = markdown()
    first = next(i for i, t in enumerate(texts) if t.startswith("## A checklist for your own job"))
    last = next((i for i, t in enumerate(texts) if i > first and re.match(r"## ", t)), len(texts))   # its section
    rows = [line for t in texts[first:last] for line in t.splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(rows) >= 10
    for row in rows:
        assert REFERENCE.search(row), f"a checklist line without a lesson's section: {row}"
    assert {int(n) for row in rows for n, _ in REFERENCE.findall(row)} >= {2, 3, 4, 7, 8, 9, 10, 11, 12}


def test_one_launch_of_processes():
    """DDP's part starts its ranks once, with lesson 7's run_processes (no torchrun launcher,
    which would be one more process importing PyTorch)."""
    assert sum(s.count("d2l.run_processes(") for s in code()) == 1
    assert not any("d2l.torchrun(" in s for s in code())


def test_the_gpu_only_cells():
    marks = {m for s in code() for m in re.findall(r"d2l\.show_recording\('([^']+)', gpus=1\)", s)}
    assert marks == GPU_CELLS


def test_the_lesson_uses_the_earlier_lessons_helpers():
    used = {m for s in code() for m in re.findall(r"\bd2l\.(\w+)", s)}
    assert used >= {"time_op", "synchronize", "peak_memory", "training_memory", "saved_tensor_bytes",
                    "roofline_bound", "busy_fraction", "Prefetcher", "tf32_matmuls", "run_processes",
                    "read_rank_results", "ring_allreduce_bytes"}
    assert all(hasattr(d2l, name) for name in used), sorted(n for n in used if not hasattr(d2l, n))
    assert not any(s.startswith("#@save") for s in code()), "a helper here needs its tests in this file"


def test_two_exercises_that_predict_measure_and_explain():
    text = next(t for t in markdown() if "## Exercises" in t)
    exercises = re.findall(r"^\d\. \*\*", text.split("## Exercises")[1], re.M)
    assert len(exercises) == 2
    for part in re.split(r"^\d\. ", text.split("## Exercises")[1], flags=re.M)[1:]:
        assert all(f"*{word}*" in part.lower() for word in ("predict", "measure", "explain")), part[:60]
    assert sum(s.startswith("#@title Solution") for s in code()) == 2


def _data_path(tmp_path, monkeypatch):
    """The lesson's language, corpus, Dataset and batches, defined by running its own cells."""
    monkeypatch.chdir(tmp_path)
    namespace = {"torch": torch, "d2l": d2l}
    exec("import collections, math, os, random\nfrom torch.utils.data import DataLoader", namespace)
    with contextlib.redirect_stdout(io.StringIO()):
        for marker in ("ALPHABET = ", "def make_corpus(", "class Lines(", "def encode_lines("):
            exec(one_cell(marker), namespace)
    exec("Job = collections.namedtuple('Job', 'path d depth heads seq batch steps lr')", namespace)
    return namespace


def test_the_fixed_data_path_gives_the_same_batches(tmp_path, monkeypatch):
    ns = _data_path(tmp_path, monkeypatch)
    job = ns["Job"]("corpus.txt", d=32, depth=1, heads=2, seq=32, batch=16, steps=5, lr=0.03)
    cpu = torch.device("cpu")
    slow = [b for _, b in zip(range(5), ns["batches"](job, (), cpu))]
    fast = [b for _, b in zip(range(5), ns["batches"](job, {"data"}, cpu))]
    for (xs, ys), (xf, yf) in zip(slow, fast):
        assert torch.equal(xs, xf) and torch.equal(ys, yf)
        assert xs.shape == (16, 32) and torch.equal(xs[:, 1:], ys[:, :-1])   # y is x moved by one
    assert ns["Lines"]("corpus.txt")[3][0].tolist() == ns["encode_lines"]("corpus.txt")[3, :-1].tolist()


# ---- the expectations of the GPU-only cells (d2l_utils/expectations/lesson13.py) ----
VIEWS = {"view", "_unsafe_view", "transpose", "t", "detach", "expand", "permute", "unbind", "alias",
         "lift_fresh", "_local_scalar_dense"}


def _data_alphabet():
    """The lesson's ALPHABET, read from its cell."""
    return ast.literal_eval(re.search(r"ALPHABET = ('[^']*')", one_cell("ALPHABET = ")).group(1))


def _gpt():
    """The lesson's gpt.py, from its two %%writefile cells, as a namespace."""
    text = "".join(s.split("\n", 1)[1] for s in code() if s.startswith(("%%writefile gpt.py", "%%writefile -a gpt.py")))
    namespace = {}
    exec(compile(text, "gpt.py", "exec"), namespace)
    return namespace


def _recorded_step(sizes):
    """The kernels of a forward and backward pass of the lesson's GPT (on the CPU, at small sizes): (name,
    bytes of every tensor read or written) per operation that is not a view, and FlopCounterMode's count."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    class Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket.__name__ not in VIEWS:
                leaves = torch.utils._pytree.tree_leaves((args, kwargs, out))
                tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
                self.ops.append((func.overloadpacket.__name__, sum(t.numel() * t.element_size() for t in tensors)))
            return out

    s = sizes
    model = _gpt()["GPT"](s["vocab"], s["d"], s["depth"], s["heads"], s["seq"])
    x = torch.zeros(s["batch"], s["seq"], dtype=torch.long)
    mask, positions = torch.ones(s["seq"], s["seq"], dtype=torch.bool).triu(1), torch.arange(s["seq"])
    step = lambda: torch.nn.functional.cross_entropy(model(x, mask, positions).flatten(0, 1), x.flatten()).backward()
    record = Record()
    with record:
        step()
    with FlopCounterMode(display=False) as counter:
        step()
    return record.ops, counter.get_total_flops(), sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("sizes", [dict(vocab=17, d=64, depth=2, heads=4, seq=32, batch=8),
                                   dict(vocab=17, d=32, depth=1, heads=2, seq=16, batch=4)])
def test_the_expectations_count_of_a_step_is_the_step_pytorch_runs(sizes):
    """lesson13.step_kernels counts the float32 kernels of a step by hand: the same operations in the
    same order, each reading and writing the same bytes, the same FLOPs, the same parameters."""
    from d2l_utils.expectations import lesson13
    ops, flops, params = _recorded_step(sizes)
    mine = [k for k in lesson13.step_kernels(**sizes) if k.only is None]
    assert [(k.name, lesson13.kernel_bytes(k)) for k in mine] == ops
    assert sum(k.flops for k in mine) == flops and lesson13.parameters(sizes) == params


def test_the_expectations_model_the_lessons_gpu_job_and_versions():
    from d2l_utils.expectations import lesson13
    cell = one_cell("GPU_VERSIONS = {")
    job = re.search(r"gpu_job = Job\('gpu_corpus.txt', (.*?)\)\n", cell).group(1)
    sizes = {k: float(v) if "." in v or "e" in v else int(v) for k, v in re.findall(r"(\w+)=([\w.\-]+)", job)}
    assert {k: sizes[k] for k in ("d", "depth", "heads", "seq", "batch")} == {
        k: lesson13.JOB[k] for k in ("d", "depth", "heads", "seq", "batch")}
    assert f"make_corpus(gpu_job.path, {lesson13.CORPUS_LINES}, gpu_job.seq + 1)" in one_cell("def waits(fixes, steps)")
    assert lesson13.JOB["vocab"] == len(_data_alphabet())
    versions = ast.literal_eval(next(n.value for n in ast.walk(ast.parse(cell)) if isinstance(n, ast.Assign)
                                     and getattr(n.targets[0], "id", None) == "GPU_VERSIONS"))
    assert list(lesson13.VERSIONS) == list(versions)
    implied = {"float32": set(), "tf32": {"tf32"}, "16-bit": {"autocast"}, "compiled": {"autocast", "compile"}}
    for name, (fixes, precision) in lesson13.VERSIONS.items():
        assert set(fixes) | implied[precision] == (versions[name][0] or set()), name


def test_the_waits_the_expectation_counts_are_the_loops():
    """13-gpu-evidence expects 6 waits a step without the fixes and the loop as written 5: the switchable
    loop writes each loss into a CUDA tensor, which copies it from the host; the loop as written appends it
    to a list."""
    from d2l_utils.expectations import lesson13
    written, switchable = one_cell("def train_as_written("), one_cell("def train(job")
    assert written.count(".to(device)") == 4 and "losses.append(loss.item())" in written
    assert "torch.zeros(job.steps, device=device)" in switchable
    assert "losses[step] = loss.detach() if 'waits' in fixes else loss.item()" in switchable
    assert one_cell("def batches(").count(".to(device)") == 2 and switchable.count(".to(device)") == 2
    assert lesson13.waits_per_step("as written") == 5 and lesson13.waits_per_step("+ data encoded once") == 6
    assert lesson13.waits_per_step("+ no host waits") == 0


def test_the_teachers_page_quotes_the_models_numbers():
    """teaching/13_*.md quotes the expected numbers for a teacher without a GPU: they are the model's
    (the ranges in its table are checked by tests/test_teaching.py; these have none)."""
    from d2l_utils import gpu_models
    from d2l_utils.expectations import expected_for
    page = " ".join((ROOT / "teaching" / "13_make_a_training_job_fast.md").read_text(encoding="utf-8").split())
    rows = [{i["name"]: i["value"] for i in expected_for("13-gpu-versions", gpu).items if i["kind"] == "number"}
            for gpu in gpu_models.reference_gpus()]
    for item, words in (("autocast_ms", "with 16-bit autocast"), ("fused_ms", "with fused AdamW"),
                        ("sdpa_ms", "with attention in one operation")):
        a, b, c = (row[item] for row in rows)
        assert f"{a:.3g}, {b:.3g} and {c:.3g} {words}" in page, item


def test_attention_in_one_operation_is_the_attention_written_out():
    """gpt.py's sdpa switch (F.scaled_dot_product_attention, is_causal=True) computes what the written-out
    attention with the causal mask computes, up to float32 rounding."""
    torch.manual_seed(0)
    attention = _gpt()["Attention"](32, 2)
    x, mask = torch.randn(4, 16, 32), torch.ones(16, 16, dtype=torch.bool).triu(1)
    written = attention(x, mask)
    attention.sdpa = True
    torch.testing.assert_close(attention(x, mask), written, rtol=1e-5, atol=1e-6)


def test_the_sdpa_count_never_writes_the_scores():
    """With attention in one operation, no kernel of the step reads or writes the T x T scores, and the
    causal kernels do about half the products' FLOPs: forward 1 of 2 products' worth, backward 2.5 of 5
    (it computes the scores again), against 2 and 4 written out: 7/12."""
    from d2l_utils.expectations import lesson13
    sizes = dict(vocab=17, d=64, depth=2, heads=4, seq=40, batch=8)      # scores: no multiple of b*t*d
    scores = sizes["batch"] * sizes["heads"] * sizes["seq"] ** 2
    plain, fused = (lesson13.step_kernels(**sizes, sdpa=sdpa) for sdpa in (False, True))
    assert any(n == scores for k in plain for n, _ in k.tensors)
    assert not any(n == scores for k in fused for n, _ in k.tensors)
    attention = lambda kernels: sum(k.flops for k in kernels if k.name.startswith(("bmm", "_flash")))
    assert 12 * attention(fused) == 7 * attention(plain)
    assert lesson13.step_bytes("16-bit", sdpa=True) < lesson13.step_bytes("16-bit")
