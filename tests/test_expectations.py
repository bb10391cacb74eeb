"""Every GPU-only cell's expectation: registered, derived and labelled, and checked on a GPU.

d2l_utils/expectations/ holds, for each GPU-only cell, what it is expected to show on the
reference GPUs (H200, T4), computed from d2l_utils/gpu_models.py's datasheet table, simulated,
or quoted from PyTorch's source. These tests keep the cells, the expectations and the GPU
branches' checks in step, and show that a GPU run that misses an expectation fails a test.
"""
import ast
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
    for gpu in gpu_models.reference_gpus():
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
    assert names == [i["name"] for i in expected_for(cell_id, gpu_models.DATASHEET["T4"]).items], (
        f"{cell_id}: the same items on every reference GPU")
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
    for gpu in gpu_models.reference_gpus():
        assert "nvidia.com" in gpu.source
        assert gpu_models.gpu_spec(gpu.name) is gpu
    assert gpu_models.gpu_spec("NVIDIA H200 NVL") is None          # another part: not judged
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


@pytest.fixture
def on_an_h200(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setenv("COURSE_CHECKS", str(tmp_path / "checks.jsonl"))
    return tmp_path / "checks.jsonl"


def _a_number_item():
    for lesson, cell_id, gpus, src in CELLS:
        for item in expected_for(cell_id, gpu_models.DATASHEET["H200"]).items:
            if item["kind"] == "number":
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
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA GeForce RTX 4090")
    cell_id, item = _a_number_item()
    check_expected(cell_id, **{item["name"]: item["high"] * 10})
    assert "not judged" in capsys.readouterr().out


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


PROMISES = re.compile(r"(course's H200 printed|what (it|the cell|they) printed on (a|the) (real )?GPU"
                      r"|shows? (a|the) recording)", re.I)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_sentence_promises_a_recording_that_is_not_installed(path):
    if (ROOT / "measurements" / recordings.RECORDING).exists():
        pytest.skip("a recording is installed")
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            found = PROMISES.search(source(cell))
            assert not found, f"{path.name}, cell {cell.get('id')}: {found.group(0)!r}"
