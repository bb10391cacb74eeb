"""GPU-only cells: how they are marked, their fallback, and the recording from real hardware.

A GPU-only cell ends its fallback branch with ``d2l.show_recording('<id>', gpus=N)``
(d2l_utils/recordings.py). These tests check that every such cell is marked so that
tests and tools can read it, that the fallback shows a recording with its provenance,
that it refuses to run where the GPUs are present, and that the committed recording
(measurements/gpu-recording.json) matches the current cells.

The recording used by most tests here is tests/data/fixture-recording.json: a test
fixture written by hand, clearly labelled, not a measurement.
"""
import copy
import json
import pathlib
import re

import nbformat
import pytest
import torch
from conftest import NOTEBOOKS, ROOT, code_cells, source

import record_gpu
from d2l_utils import recordings
from d2l_utils.recordings import MARK, check_recording, gpu_cells, show_recording, source_hash

FIXTURE = pathlib.Path(__file__).parent / "data" / "fixture-recording.json"
REAL = ROOT / "measurements" / recordings.RECORDING


@pytest.fixture(autouse=True)
def fixture_expectations(monkeypatch):
    """The fixture cells' expectations (a test fixture, not a prediction)."""
    from d2l_utils import expectations
    from d2l_utils.gpu_models import Estimate
    monkeypatch.setitem(expectations.LESSONS, "99", "99_fixture.ipynb")
    for cell_id in ("99-one-gpu", "99-two-gpus", "99-not-recorded", "99-new-cell", "99-broken"):
        monkeypatch.setitem(expectations._REGISTRY, cell_id, (
            lambda e, gpu: e.number("value", "fixture value", Estimate(1, 0, 2, "s", "a fixture")), "model"))


def all_gpu_cells():
    return list(gpu_cells(ROOT / "notebooks"))


def test_the_lessons_have_gpu_only_cells():
    assert len(all_gpu_cells()) >= 10, "the lessons should mark their GPU-only cells"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_fallback_call_is_a_readable_mark(path):
    """A call the tools cannot parse (an id in a variable, say) would go unrecorded."""
    for cell in code_cells(path):
        src = source(cell)
        calls = src.count("show_recording(")
        marks = MARK.findall(src)
        assert calls == len(marks), (
            f"{path.name}: write show_recording('NN-name', gpus=N) literally:\n{src}")
        assert calls <= 1, f"{path.name}: one GPU-only mark per cell:\n{src}"
        for cell_id, gpus in marks:
            assert cell_id[:2] == path.name[:2], f"{path.name}: id {cell_id} must start with {path.name[:2]}"
            assert int(gpus) >= 1
            lines = [l for l in src.splitlines() if not l.startswith("#@title")]  # a solution's title
            assert lines[0] == "# NBVAL_IGNORE_OUTPUT", (
                f"{path.name}, cell {cell_id}: its output differs between machines, so it starts "
                "with # NBVAL_IGNORE_OUTPUT")


def test_gpu_cell_ids_are_unique_across_the_course():
    ids = [cell_id for _, cell_id, _, _ in all_gpu_cells()]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_fallback_prints_only_no_gpu_here(path):
    """Every fallback shows the recording; none just says that there is no GPU."""
    for cell in code_cells(path):
        assert not re.search(r"No CUDA GPU here", source(cell)), (
            f"{path.name}: use d2l.show_recording(...) as the fallback:\n{source(cell)}")


@pytest.fixture
def fixture_recording(monkeypatch):
    monkeypatch.setenv("COURSE_RECORDING", str(FIXTURE))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    return json.loads(FIXTURE.read_text())


def test_fallback_shows_the_recording_headed_by_where_and_when(fixture_recording, capsys):
    show_recording("99-one-gpu", gpus=1)
    out = capsys.readouterr().out.splitlines()
    out = out[out.index(next(l for l in out if l.startswith("[RECORDED"))):]
    assert out[0] == ("[RECORDED on 1x FAKE GPU (test fixture) (driver 0.0, CUDA 0.0, "
                      "PyTorch 0.0), 1970-01-01:]")
    assert out[1] == "fixture line one"
    assert out[-1] == "fixture value"
    assert any("Image" in line for line in out[2:-1]), "the recorded figure is displayed"


def test_fallback_says_when_a_cell_has_no_recording(fixture_recording, capsys):
    show_recording("99-not-recorded", gpus=1)
    assert "has no recording yet" in capsys.readouterr().out
    show_recording("99-two-gpus", gpus=2)
    assert "The recording machine had 1 GPU(s), so there is no recording of this cell" in capsys.readouterr().out


def test_fallback_says_when_no_recording_is_installed(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(recordings, "recording_path", lambda: None)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    show_recording("99-one-gpu", gpus=1)
    out = capsys.readouterr().out
    assert "needs a CUDA GPU; none here" in out and "No recording from real hardware is installed" in out
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)      # a one-GPU machine, a two-GPU cell
    show_recording("99-two-gpus", gpus=2)
    out = capsys.readouterr().out
    assert "needs 2 CUDA GPUs; this machine has 1" in out and "a machine with 2 GPUs" in out


def test_fallback_fails_on_a_machine_that_has_the_gpus(fixture_recording, monkeypatch):
    """This is how the suite, run on a GPU machine, catches a cell that skipped its GPU code."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(RuntimeError, match="took its fallback branch"):
        show_recording("99-one-gpu", gpus=1)
    show_recording("99-two-gpus", gpus=2)          # one GPU is not enough for this one


@pytest.mark.parametrize("args, match", [(("3-x", 1), "cell_id"), ((7, 1), "cell_id"),
                                         (("03-x", 0), "gpus"), (("03-x", True), "gpus"),
                                         (("03-x", "1"), "gpus")])
def test_fallback_rejects_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        show_recording(*args)


GPU_CELL = """# NBVAL_IGNORE_OUTPUT
if torch.cuda.device_count() >= {n}:
    print('on the GPU')
else:
    d2l.show_recording('{id}', gpus={n})"""


def _lessons(tmp_path, *cells):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbformat.write(nb, folder / "99_fixture.ipynb")
    return folder


def test_check_recording_accepts_a_matching_recording(tmp_path):
    one, two = GPU_CELL.format(n=1, id="99-one-gpu"), GPU_CELL.format(n=2, id="99-two-gpus")
    rec = json.loads(FIXTURE.read_text())
    rec["cells"]["99-one-gpu"]["source_sha256"] = source_hash(one)
    assert check_recording(rec, _lessons(tmp_path, one, two)) == []


def test_check_recording_names_stale_missing_and_orphaned_cells(tmp_path):
    one, two = GPU_CELL.format(n=1, id="99-one-gpu"), GPU_CELL.format(n=2, id="99-two-gpus")
    new = GPU_CELL.format(n=1, id="99-new-cell")
    rec = json.loads(FIXTURE.read_text())
    rec["cells"]["99-one-gpu"]["source_sha256"] = source_hash(one)
    changed = one.replace("'on the GPU'", "'still on the GPU'")
    problems = check_recording(rec, _lessons(tmp_path, changed, new))
    assert problems == [
        "99_fixture.ipynb, cell 99-one-gpu: the cell changed since it was recorded (stale): "
        "record it again with tools/record_gpu.py on a GPU machine",
        "99_fixture.ipynb, cell 99-new-cell: has no recording",
        "cell 99-two-gpus is recorded but no lesson has it"]
    unlisted = copy.deepcopy(rec)
    del unlisted["needs_more_gpus"]["99-two-gpus"]
    (tmp_path / "b").mkdir()
    problems = check_recording(unlisted, _lessons(tmp_path / "b", one, two))
    assert problems == ["99_fixture.ipynb, cell 99-two-gpus: needs 2 GPUs, the recording machine "
                        "had 1, and it is not listed in needs_more_gpus"]


def test_check_recording_names_a_cell_that_raised_on_the_gpu(tmp_path):
    """The recorder keeps a failed cell's traceback; committed, it would show readers a crash."""
    one, two = GPU_CELL.format(n=1, id="99-one-gpu"), GPU_CELL.format(n=2, id="99-two-gpus")
    rec = json.loads(FIXTURE.read_text())
    rec["cells"]["99-one-gpu"]["source_sha256"] = source_hash(one)
    rec["cells"]["99-one-gpu"]["error"] = "KeyError: 'module.net.0.weight'"
    assert check_recording(rec, _lessons(tmp_path, one, two)) == [
        "99_fixture.ipynb, cell 99-one-gpu: its GPU branch raised on the GPU "
        "(KeyError: 'module.net.0.weight'): fix it and record the lesson again"]


def test_source_hash_ignores_trailing_blanks_only():
    assert source_hash("a = 1  \nb = 2\n\n") == source_hash("a = 1\nb = 2")
    assert source_hash("a = 1\nb = 2") != source_hash("a = 1\nb = 3")


def test_record_gpu_stores_what_a_gpu_cell_printed():
    """tools/record_gpu.py's extraction, on an executed notebook made here."""
    one, two = GPU_CELL.format(n=1, id="99-one-gpu"), GPU_CELL.format(n=2, id="99-two-gpus")
    broken = GPU_CELL.format(n=1, id="99-broken")
    cells = [nbformat.v4.new_code_cell(c) for c in (one, two, broken, "print('not a GPU cell')")]
    cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="on the GPU\n"),
                        nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0K\n"})]
    cells[2].outputs = [nbformat.v4.new_output("error", ename="AcceleratorError", evalue="boom",
                                               traceback=[])]
    nb = nbformat.v4.new_notebook(cells=cells)
    recorded, needs_more, problems = record_gpu.record_notebook(nb, "99_fixture.ipynb", 1)
    assert recorded == {"99-one-gpu": {
        "lesson": "99_fixture.ipynb", "gpus": 1, "source_sha256": source_hash(one),
        "outputs": [{"type": "text", "name": "stdout", "text": "on the GPU\n"},
                    {"type": "png", "data": "iVBORw0K"}]}}
    assert needs_more == {"99-two-gpus": {"lesson": "99_fixture.ipynb", "gpus": 2,
                                          "why": "needs 2 GPUs; this machine has 1"}}
    assert problems == ["99_fixture.ipynb, cell 99-broken: raised AcceleratorError: boom"]


def test_record_gpu_refuses_to_record_without_a_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert record_gpu.main([str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()


def test_the_committed_recording_matches_the_lessons():
    """Every GPU-only cell one GPU can run has a recording made from its current source."""
    if not REAL.exists():
        pytest.skip("no recording from real hardware is committed yet: run tools/record_gpu.py "
                    "on a GPU machine (see CONTRIBUTING.md)")
    problems = check_recording(json.loads(REAL.read_text()), ROOT / "notebooks")
    assert not problems, "\n".join(problems)
