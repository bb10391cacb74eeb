"""Tests of lesson 13 (notebooks/13_make_a_training_job_fast.ipynb), which saves no helper.

Its structure is checked statically: the versions of the job in the order the lesson measures
them, on the CPU and on a GPU; the checklist and every "lesson N, § ..." pointing at a heading
that lesson has; one launch of processes; the GPU-only cells; the earlier lessons' helpers it uses.
One behaviour is run: the data path, fixed, gives the batches of the data path as written.
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
CPU_VERSIONS = ["as written", "+ data encoded once", "+ fused AdamW", "+ no host waits"]
BFLOAT16 = "+ bfloat16 autocast"          # a row only on a CPU where bfloat16 is faster
GPU_VERSIONS = ["as written", "+ data encoded once", "+ no host waits", "+ TF32 matmuls", "16-bit autocast, not TF32",
                "+ fused AdamW", "+ torch.compile (blocks)", "+ CUDA Graphs"]
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
    cell = one_cell("print('rows:', list(cpu_rows))")
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
    for fix in ("data", "waits", "fused", "autocast", "compile", "graphs", "tf32"):
        assert f"'{fix}' in fixes" in switched or f"'{fix}' not in fixes" in switched, fix


def test_references_to_other_lessons_name_their_headings():
    refs = [(int(n), " ".join(h.split())) for text in markdown() + code() for n, h in REFERENCE.findall(text)]
    assert len(refs) >= 15
    missing = [(n, h) for n, h in refs if h not in headings(n)]
    assert not missing, f"lesson 13 names sections that those lessons lack (renamed?): {missing}"


def test_the_checklist_points_every_line_at_a_lesson():
    texts = markdown()
    first = next(i for i, t in enumerate(texts) if t.startswith("## A checklist for your own job"))
    last = next(i for i, t in enumerate(texts) if t.startswith("## Summary"))
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
