"""Every GPU-only cell's expectation: registered, derived and labelled, and checked on a GPU.

d2l_utils/expectations/ holds, for each GPU-only cell, what it is expected to show on every GPU
of d2l_utils/gpu_models.py's datasheet table (readers see the reference GPUs: H100, H200, T4),
computed from that table, simulated, or quoted from PyTorch's source. These tests keep the cells,
the expectations and the GPU branches' checks in step, show that a GPU run that misses an
expectation fails a test, and that every judged range is narrow enough to be missed
(expectations.RANGE_LIMIT).
"""
import ast
import dataclasses
import json
import pathlib
import re

import pytest
import torch
from conftest import NOTEBOOKS, ROOT, code_cells, source

import nbtemplate
from d2l_utils import expectations, gpu_models, recordings
from d2l_utils.expectations import check_expected, expected_for
from d2l_utils.recordings import MARK, expectation_misses, gpu_cells, show_recording

CELLS = list(gpu_cells(ROOT / "notebooks"))
IDS = [cell_id for _, cell_id, _, _ in CELLS]
FIXTURE = pathlib.Path(__file__).parent / "data" / "fixture-recording.json"
SOURCE_FILE = re.compile(r"[\w/]+\.(?:cpp|cu|cuh|h|py|pyi)\b")


def check_calls(src, cell_id):
    """The keyword names of every d2l.check_expected('<cell_id>', ...) call in a cell's source."""
    calls = []
    for node in ast.walk(ast.parse(src)):
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
                == "check_expected"):
            assert node.args and isinstance(node.args[0], ast.Constant), (
                f"{cell_id}: write check_expected('{cell_id}', name=value, ...) with the id literally")
            assert node.args[0].value == cell_id, f"{cell_id}: checks another cell's id {node.args[0].value}"
            calls.append({k.arg for k in node.keywords})
    return calls


@pytest.mark.parametrize("lesson, cell_id, gpus, src", CELLS, ids=IDS)
def test_every_gpu_cell_has_an_expectation_and_its_gpu_branch_checks_it(lesson, cell_id, gpus, src):
    for gpu in gpu_models.DATASHEET.values():
        e = expected_for(cell_id, gpu)
        assert e.items, f"{cell_id}: an expectation names at least one thing the GPU run checks"
        for item in e.items:
            assert item["why"], f"{cell_id}, {item['name']}: say why (the range's reason, or the source file)"
            if item["kind"] == "number":
                assert item["low"] <= item["value"] <= item["high"] and item["unit"], (cell_id, item)
            if item["how"] == "source":
                assert SOURCE_FILE.search(item["why"]), (
                    f"{cell_id}, {item['name']}: a quoted message names the PyTorch file it comes from")
    names = [i["name"] for i in expected_for(cell_id, gpu_models.DATASHEET["H200"]).items]
    for gpu in gpu_models.DATASHEET.values():
        assert names == [i["name"] for i in expected_for(cell_id, gpu).items], (
            f"{cell_id}: the same items on every GPU of the table ({gpu.key} differs)")
    calls = check_calls(src, cell_id)
    assert calls, f"{cell_id}: its GPU branch calls d2l.check_expected('{cell_id}', ...)"
    assert set().union(*calls) == set(names), (
        f"{cell_id}: the GPU branch checks {sorted(set().union(*calls))}, the expectation has {names}")


@pytest.mark.parametrize("lesson", sorted(expectations.LESSONS))
def test_no_expectation_without_its_cell(lesson):
    assert set(expectations.registered(lesson)) <= set(IDS)


def test_the_lesson_table_matches_the_notebooks_and_their_colab_links():
    assert sorted(expectations.LESSONS.values()) == sorted(p.name for p in NOTEBOOKS if p.name[:2].isdigit())
    for number, name in expectations.LESSONS.items():
        assert expectations.colab_url(f"{number}-x") == nbtemplate.colab_url(name)


def test_the_datasheet_names_its_sources_and_the_models_agree_with_lesson_3():
    assert [g.key for g in gpu_models.reference_gpus()] == ["H100", "H200", "T4"]
    assert {"H100", "H100-PCIe", "H200", "A100", "L4", "T4", "RTX-4090"} <= set(gpu_models.DATASHEET)
    for key, gpu in gpu_models.DATASHEET.items():
        assert gpu.key == key and "nvidia.com" in gpu.source and gpu.names[0] == gpu.name
        assert all(gpu_models.gpu_spec(name) is gpu for name in gpu.names)
        assert gpu.host in gpu_models.HOSTS and 0 < gpu.clock_share <= 1
        assert gpu.capability in gpu_models.THREADS_PER_SM, f"{key}: THREADS_PER_SM lacks {gpu.capability}"
        for dtype in ["float32", *gpu.peak_flops]:
            assert gpu.sustained_flops(dtype) == gpu.flops(dtype) * gpu.clock_share
    assert gpu_models.gpu_spec("NVIDIA A100-SXM4-40GB") is gpu_models.DATASHEET["A100"]   # Colab's A100
    assert gpu_models.gpu_spec("NVIDIA A100-SXM4-80GB") is None     # other memory: not matched
    assert gpu_models.gpu_spec("NVIDIA H200 NVL") is None          # another part: not judged
    assert gpu_models.gpu_spec("NVIDIA H100 NVL") is None
    assert round(gpu_models.pcie_bytes_per_s(4) / 1e9, 1) == 31.5   # lesson 3 prints 31.5 GB/s
    with pytest.raises(ValueError, match="no bfloat16"):
        gpu_models.DATASHEET["T4"].flops("bfloat16")


def test_the_fallback_shows_the_expectation_labelled_and_the_colab_link(monkeypatch, capsys):
    monkeypatch.setattr(recordings, "recording_path", lambda: None)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    for lesson, cell_id, gpus, src in CELLS:
        show_recording(cell_id, gpus=gpus)
        out = capsys.readouterr().out
        assert "EXPECTED on a GPU (a prediction, not a measurement)" in out, cell_id
        assert "No recording from real hardware is installed" in out
        assert expectations.colab_url(cell_id) in out or gpus > 1
        assert re.search(r"\[(model|simulated|source)\]", out), cell_id


def test_in_a_notebook_the_derivations_fold_under_one_line(monkeypatch, capsys):
    """What to expect and the table stay in view; the derivations open on a click (HTML
    details), with the whole text kept as the plain-text form for other front ends."""
    import IPython
    import IPython.display
    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: type("Shell", (), {"kernel": object()})())
    monkeypatch.setattr(IPython.display, "display", lambda data, raw: shown.append(data))
    expectations.show_expected("03-pinned-copies")
    printed = capsys.readouterr().out
    assert printed.startswith("EXPECTED on a GPU") and "host -> GPU, 64 MiB, pinned" in printed
    assert "How each was derived" not in printed and "[model]" not in printed
    (data,) = shown
    assert data["text/plain"].startswith("  How each was derived, and why its range:\n")
    assert data["text/html"].startswith("<details><summary>How each was derived, and why its range (click to open)")
    assert "host -&gt; GPU, 64 MiB, pinned [model]: H100, H200: PCIe 5.0 x16" in data["text/html"]
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)       # plain Python: all printed
    expectations.show_expected("03-pinned-copies")
    assert "How each was derived" in capsys.readouterr().out and len(shown) == 1


@pytest.fixture
def on_an_h200(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setenv("COURSE_CHECKS", str(tmp_path / "checks.jsonl"))
    return tmp_path / "checks.jsonl"


def _a_number_item(differs=False):
    """(cell id, item) of the first number any GPU-only cell expects (on the H200), or with
    ``differs``, of the first one whose value or range differs between GPUs of the table."""
    for lesson, cell_id, gpus, src in CELLS:
        for k, item in enumerate(expected_for(cell_id, gpu_models.DATASHEET["H200"]).items):
            if item["kind"] == "number" and not item["not_judged"]:
                others = [expected_for(cell_id, g).items[k] for g in gpu_models.DATASHEET.values()]
                if not differs or any((o["value"], o["low"], o["high"]) != (item["value"], item["low"], item["high"])
                                      for o in others):
                    return cell_id, item
    pytest.fail("no GPU-only cell expects a number")


def as_expected(cell_id):
    """What a GPU run that meets every expectation of ``cell_id`` on the H200 would measure."""
    return {i["name"]: (i["value"] if i["kind"] == "number" else " ".join(i["value"]))
            for i in expected_for(cell_id, gpu_models.DATASHEET["H200"]).items}


def test_check_expected_judges_a_number_and_writes_what_the_recorder_stores(on_an_h200, capsys):
    cell_id, item = _a_number_item()
    others = as_expected(cell_id)
    assert check_expected(cell_id, **others) == []
    assert check_expected(cell_id, **{**others, item["name"]: item["high"] * 2 + 1}) == [item["name"]]
    out = capsys.readouterr().out
    assert "MISS" in out and "on this NVIDIA H200" in out
    lines = [json.loads(line) for line in on_an_h200.read_text().splitlines()]
    assert [line["ok"] for line in lines if line["item"] == item["name"]] == [True, False]
    with pytest.raises(TypeError, match="no expected item named"):
        check_expected(cell_id, not_an_item=1)


def test_on_a_gpu_outside_the_table_numbers_are_shown_not_judged(on_an_h200, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA GeForce RTX 3060")
    cell_id, item = _a_number_item(differs=True)
    assert check_expected(cell_id, **{item["name"]: item["high"] * 10}) == []
    out = capsys.readouterr().out
    assert "not judged (the NVIDIA GeForce RTX 3060 is not in the datasheet table)" in out
    line = [json.loads(l) for l in on_an_h200.read_text().splitlines() if item["name"] in l][0]
    assert line["ok"] is None and "not in the datasheet table" in line["not_judged"]


def test_a_recording_that_misses_an_expectation_fails_the_check(on_an_h200):
    """A fake GPU run that misses one expectation: expectation_misses names it (and the committed
    recording is held to the same test below)."""
    cell_id, item = _a_number_item()
    check_expected(cell_id, **{**as_expected(cell_id), item["name"]: item["high"] * 2 + 1})
    rec = json.loads(FIXTURE.read_text())
    rec["cells"]["99-one-gpu"]["checks"] = [json.loads(l) for l in on_an_h200.read_text().splitlines()]
    misses = expectation_misses(rec)
    assert len(misses) == 1 and misses[0].startswith(f"cell 99-one-gpu, {item['name']}")
    assert "on the H200" in misses[0]


def test_the_committed_recording_meets_every_expectation():
    """A miss is a finding: change the model or the prose (never the measurement), then record again."""
    real = ROOT / "measurements" / recordings.RECORDING
    if not real.exists():
        pytest.skip("no recording from real hardware is committed yet (see CONTRIBUTING.md)")
    misses = expectation_misses(json.loads(real.read_text()))
    assert not misses, "\n".join(misses)


# ---- ranges that can be missed, per-host assumptions, items not judged ------------------------

def too_wide(lesson):
    """'cell, item on GPU: problem' for every judged number of ``lesson``'s expectations, on every GPU
    of the datasheet table, whose range is too wide to be missed (expectations.range_problem)."""
    found = []
    for cell_id in expectations.registered(lesson):
        for gpu in gpu_models.DATASHEET.values():
            for item in expected_for(cell_id, gpu).items:
                problem = expectations.range_problem(item)
                if problem:
                    found.append(f"{cell_id}, {item['name']} ({item['label']}) on the {gpu.key}: {problem}")
    return found


@pytest.mark.parametrize("lesson", sorted(expectations.LESSONS))
def test_every_judged_range_can_be_missed(lesson):
    """A range a healthy GPU cannot miss checks nothing: narrow it to the evidence, judge a ratio
    measured in the same run, or mark the item not_judged with its reason (expectations.RANGE_LIMIT)."""
    found = too_wide(lesson)
    assert not found, f"{len(found)} judged ranges too wide to be missed:\n" + "\n".join(found)


def test_range_problem_follows_the_limit_and_the_zero_rule():
    item = dict(kind="number", low=1.0, high=expectations.RANGE_LIMIT, unit="ms", not_judged=None, value=1.0)
    assert expectations.range_problem(item) is None
    assert "RANGE_LIMIT" in expectations.range_problem({**item, "high": expectations.RANGE_LIMIT * 1.01})
    assert expectations.range_problem({**item, "high": 100.0, "not_judged": "a reason"}) is None
    assert expectations.range_problem({**item, "low": 0.0, "high": 0.0, "value": 0.0}) is None      # exact
    assert expectations.range_problem({**item, "low": 0.0, "high": 2.0, "unit": "MiB"}) is None
    assert "ZERO_WIDTH" in expectations.range_problem({**item, "low": 0.0, "high": 4.0, "unit": "MiB"})
    assert "no ZERO_WIDTH" in expectations.range_problem({**item, "low": 0.0, "high": 1.0, "unit": "ms"})


def test_each_host_narrows_the_assumptions_that_depend_on_it():
    names = set(gpu_models.HOST_ASSUMPTIONS["server"])
    assert {"launch_s", "compile_s", "copy_latency_s", "pinned_share", "pageable_bytes_per_s",
            "cuda_context_bytes", "context_with_kernels_bytes", "text_bytes_per_s"} <= names
    for host, table in gpu_models.HOST_ASSUMPTIONS.items():
        assert set(table) == names, f"{host}: the same entries on every host"
        for name, (value, low, high, why) in table.items():
            _, any_low, any_high, _ = gpu_models.ASSUMPTIONS[name]
            assert 0 < low <= value <= high and why, (host, name)
            assert high / low <= expectations.RANGE_LIMIT, f"{host}, {name}: {low:g} to {high:g}"
            assert any_low <= low and high <= any_high, f"{host}, {name}: ASSUMPTIONS holds every host's range"
    for gpu in gpu_models.DATASHEET.values():
        for name in names:
            value, low, high, why = gpu_models.HOST_ASSUMPTIONS[gpu.host][name]
            assert gpu_models.assumed(name, gpu, "s") == gpu_models.Estimate(value, low, high, "s", why)
    server, colab = gpu_models.assumed("launch_s", gpu_models.DATASHEET["H200"]), gpu_models.assumed(
        "launch_s", gpu_models.DATASHEET["T4"])
    assert server.high < colab.high and server.why != colab.why
    assert gpu_models.assumed("memory_share", "colab") == gpu_models.assumption("memory_share")   # not a host's
    assert tuple(gpu_models.assumed("launch_s", "server")) == gpu_models.HOST_ASSUMPTIONS["server"]["launch_s"]
    with pytest.raises(ValueError, match="no host"):
        gpu_models.assumed("launch_s", "laptop")


def test_a_copy_runs_at_the_slower_of_the_gpus_link_and_its_hosts():
    a100, h100 = gpu_models.DATASHEET["A100"], gpu_models.DATASHEET["H100"]
    assert a100.pcie == (4, 16) and gpu_models.host_link(a100) == (3, 16)       # Colab's hosts: PCIe 3.0
    assert gpu_models.host_link(h100) == h100.pcie == (5, 16)
    assert gpu_models.copy_seconds(2**26, a100).value == gpu_models.copy_seconds(2**26, gpu_models.DATASHEET["T4"]).value
    assert "the host's (the A100's own is 4.0)" in gpu_models.copy_seconds(2**26, a100).why


def test_a_pageable_copy_never_beats_a_pinned_one():
    for gpu in gpu_models.DATASHEET.values():
        for nbytes in (2**16, 2**26):
            pinned, pageable = (gpu_models.copy_bytes_per_s(nbytes, gpu, p) for p in (True, False))
            assert pageable.value <= pinned.value and pageable.low <= pinned.low and pageable.high <= pinned.high


def test_the_sustained_clock_puts_the_t4_and_the_l4_near_their_published_rates():
    """Published rates of long products (sources beside DATASHEET): Colab's T4 about 4.2 TFLOP/s in
    float32 and 24 in float16; an L4 10.7 float32, 53.8 float16 and 59.4 bfloat16 (n = 8192)."""
    def rate(gpu, dtype, n):
        return gpu_models.matmul_seconds(n, n, n, gpu, dtype).inverse(2 * n**3 / 1e12, "TFLOP/s")
    t4, l4 = gpu_models.DATASHEET["T4"], gpu_models.DATASHEET["L4"]
    too_fast = 0
    for gpu, dtype, n, published in ((t4, "float32", 4096, 4.2), (t4, "float16", 4096, 24),
                                     (l4, "float32", 8192, 10.7), (l4, "float16", 8192, 53.8),
                                     (l4, "bfloat16", 8192, 59.4)):
        r = rate(gpu, dtype, n)
        assert r.low <= published <= r.high, (gpu.key, dtype, r)
        too_fast += rate(dataclasses.replace(gpu, clock_share=1.0), dtype, n).low > published
    assert too_fast >= 4            # at the full clock the model would miss nearly every published rate


@pytest.fixture
def a_test_expectation():
    """A registered expectation for the id '99-not-judged': an exact count, a number that differs
    between GPUs, and a number shown but not judged."""
    @expectations.expectation("99-not-judged", how="model")
    def _(e, gpu):
        e.note("A test expectation.")
        e.number("waits", "waits", gpu_models.Estimate(6, 6, 6, "waits", "counted"), how="simulated")
        e.number("rate", "a rate", gpu_models.copy_bytes_per_s(2**26, gpu), how="model")
        e.number("compile_s", "a compile", gpu_models.Estimate(10, 1, 100, "s", "any host"),
                 not_judged="no model predicts a cold compile within 3x")
    yield "99-not-judged"
    del expectations._REGISTRY["99-not-judged"]


def test_an_item_not_judged_is_shown_with_its_reason_and_never_missed(a_test_expectation, on_an_h200, capsys):
    expectations.show_expected(a_test_expectation)
    out = capsys.readouterr().out
    assert "shown, not judged: no model predicts a cold compile within 3x" in out
    assert re.search(r"^\s+H100\s+H200\s+T4\s*$", out, re.M)          # one column per reference GPU
    assert re.search(r"^\s+waits\s+6 exactly waits, every GPU$", out, re.M)
    assert check_expected(a_test_expectation, waits=6, rate=53, compile_s=1e6) == []
    assert "not judged (no model predicts a cold compile within 3x)" in capsys.readouterr().out
    assert check_expected(a_test_expectation, waits=6, rate=53) == []     # not measured: still no miss
    lines = [json.loads(l) for l in on_an_h200.read_text().splitlines()]
    assert [(l["item"], l["ok"]) for l in lines[:3]] == [("waits", True), ("rate", True), ("compile_s", None)]
    assert lines[2]["not_judged"] == "no model predicts a cold compile within 3x" and lines[0]["not_judged"] is None
    with pytest.raises(ValueError, match="short reason"):
        expectations.Expected("99-x", "model", None).number("x", "x", gpu_models.Estimate(1, 1, 1, "s"), not_judged="")


def test_on_a_gpu_outside_the_table_what_every_gpu_expects_is_judged(a_test_expectation, on_an_h200,
                                                                     monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA GeForce RTX 3060")
    assert check_expected(a_test_expectation, waits=7, rate=1e6, compile_s=1) == ["waits"]
    lines = {l["item"]: l for l in map(json.loads, on_an_h200.read_text().splitlines())}
    assert lines["waits"]["ok"] is False and lines["rate"]["ok"] is None and lines["compile_s"]["ok"] is None
    assert "RTX 3060 is not in the datasheet table" in lines["rate"]["not_judged"]
