"""The calculators (d2l_utils/calculators.py): the lessons' models behind sliders.

At their defaults they reproduce numbers the lessons print (read from the stored lessons, so
the calculators and the lessons cannot drift apart); bad settings give a message, in the
widget, never a traceback; their static table is what nbval and GitHub see; and in Chromium,
moving a slider changes the shown number to the model's value.
"""
import json
import re
import time

import pytest
from conftest import NOTEBOOKS, ROOT, slow, source

from d2l_utils import calculators as calc
from d2l_utils.gpu_models import DATASHEET

GiB, MiB = 2**30, 2**20


def stored_text(lesson, cell_id):
    """The text a stored lesson's cell printed."""
    path = next(p for p in NOTEBOOKS if p.name.startswith(lesson))
    nb = json.loads(path.read_text(encoding="utf-8"))
    cell = next((c for c in nb["cells"] if c["id"] == cell_id), None)
    assert cell is not None, f"{path.name} has no cell {cell_id}"
    return "".join("".join(o.get("text", "")) for o in cell["outputs"])


def cell_printing(lesson, pattern):
    """The text of the stored lesson's first code cell whose output matches ``pattern``."""
    path = next(p for p in NOTEBOOKS if p.name.startswith(lesson))
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "code":
            text = "".join("".join(o.get("text", "")) for o in cell["outputs"])
            if re.search(pattern, text):
                return text
    raise AssertionError(f"lesson {lesson} prints nothing like {pattern!r}")


def test_copy_calculator_at_its_defaults_is_lesson_3s_copy_model():
    text = cell_printing("03", r"EXPECTED by the copy model, not measured: 64 MiB")
    for link, gpu in (("PCIe 5.0 x16", "H200"), ("PCIe 3.0 x16", "T4")):
        line = next(l for l in text.splitlines() if l.strip().startswith(f"{gpu}, {link}"))
        pageable, pinned = (float(x) for x in re.findall(r"(?:pageable|pinned) ([\d.]+)", line))
        assert f"{calc.copy_time(64 * MiB, link, 'pinned')['gb_s'].value:.1f}" == f"{pinned:.1f}", line
        assert f"{calc.copy_time(64 * MiB, link, 'pageable')['gb_s'].value:.1f}" == f"{pageable:.1f}", line


def test_memory_calculator_at_its_defaults_is_lesson_8s_table():
    text = cell_printing("08", r"per sequence\s+24 GiB\s+80 GiB")
    names = {"float32": "float32", "pure bfloat16": "pure bf16", "bf16 + fp32 master": "bf16 + fp32 master",
             "autocast": "bf16 autocast"}
    for lesson_name, ours in names.items():
        line = next(l for l in text.splitlines() if l.strip().startswith(lesson_name + " "))
        per_sequence, at_24, at_80 = re.findall(r"([\d.]+) GiB\s+(\d+)\s+(\d+)\s*$", line)[0]
        rows = calc.training_memory_per_gpu(precision=ours)
        assert f"{rows['activations'] / GiB:.2f}" == per_sequence, line
        assert [calc.largest_batch(c * GiB, precision=ours) for c in (24, 80)] == [int(at_24), int(at_80)], line
    default = calc.memory_calculator()
    assert default.controls == {} or default.controls["batch"].value == int(re.findall(
        r"float32 .* (\d+)\s*$", text, re.M)[0])           # the default batch is the lesson's most that fit


def test_roofline_calculator_at_its_defaults_is_lesson_10s_product():
    text = cell_printing("10", r"16-bit \(bfloat16; float16 on a T4\)")
    line = next(l for l in text.splitlines() if l.strip().startswith("H200") and "TFLOP/s" in l)
    value, low, high = (float(x) for x in re.findall(r"([\d.]+) TFLOP/s \(([\d.]+) to ([\d.]+)\)", line)[0])
    e = calc.matmul_roofline()["tflops"]
    assert (round(e.value), round(e.low), round(e.high)) == (round(value), round(low), round(high)), line


def test_allreduce_calculator_at_its_defaults_is_lesson_12s_ring_model():
    text = cell_printing("12", r"bus bandwidth of the 256 MiB all-reduce")
    after = text.split("bus bandwidth of the 256 MiB all-reduce")[1]
    for gpu, interconnect in (("H200", "NVLink (H200)"), ("T4", "PCIe 3.0 x16 (T4)")):
        value = float(re.search(rf"{gpu}\s+([\d.]+) GB/s", after)[1])
        assert calc.allreduce_time(256 * MiB, 2, interconnect)["bus_gb_s"].value == pytest.approx(value, rel=5e-3)


def test_the_calculators_read_the_datasheet_table():
    assert calc.copy_time(1, "PCIe 5.0 x16")["link_gb_s"] == pytest.approx(63.0, rel=1e-3)
    assert calc.matmul_roofline(gpu="T4", dtype="float16")["peak_tflops"] == DATASHEET["T4"].peak_flops["float16"] / 1e12
    assert calc.CARDS["H200 (141 GiB)"] == DATASHEET["H200"].memory_bytes


@pytest.mark.parametrize("call, message", [
    (lambda: calc.copy_time(-5), "the size (bytes) must be a positive number, got -5"),
    (lambda: calc.copy_time(10, link="PCIe 9.0 x16"), "link must be one of"),
    (lambda: calc.training_memory_per_gpu(gpus=4), "one GPU means 1 GPU, got 4"),
    (lambda: calc.training_memory_per_gpu(batch=0), "sequences per GPU must be a positive whole number"),
    (lambda: calc.training_memory_per_gpu(shape=(100, 30, 2, 4)), "must be a multiple of the heads"),
    (lambda: calc.matmul_roofline(measured_ms=0.001), "faster than the roofline allows"),
    (lambda: calc.allreduce_time(gpus=1), "needs at least 2"),
])
def test_bad_settings_get_a_clear_message(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def test_a_bad_setting_shows_its_message_in_the_widget_not_a_traceback():
    pytest.importorskip("ipywidgets")
    memory = calc.memory_calculator()
    memory.controls["gpus"].value = 4                       # 'one GPU' is still chosen
    assert 'class="calc-error"' in memory.result.value and "one GPU means 1 GPU, got 4" in memory.result.value
    memory.controls["parallel"].value = "FSDP"
    assert "calc-error" not in memory.result.value and "calc-value" in memory.result.value
    roofline = calc.roofline_calculator()
    roofline.controls["measured_ms"].value = -1.0
    assert "must be positive" in roofline.result.value


def test_a_model_that_needs_more_gpus_than_offered_says_how_many():
    settings = dict(shape="GPT, D=8192, L=80 (64.7B)", precision="float32", optimizer="Adam", batch=1, seq=1024,
                    checkpointing=False, parallel="DDP", gpus=8)
    shown = calc._memory_html(settings, "80 GiB card")
    assert "does not fit on a 80 GiB card" in shown and re.search(r"FSDP needs \d+ GPUs for it \(you offer 8\)", shown)


def test_the_static_table_is_text_for_nbval_and_github():
    for make in (calc.copy_calculator, calc.memory_calculator, calc.roofline_calculator, calc.allreduce_calculator):
        bundle = make()._repr_mimebundle_()
        assert bundle["text/plain"].splitlines()[0].endswith("(static: a few settings; run the cell for the sliders)")
        assert 4 <= len(bundle["text/plain"].splitlines()) <= 12
        assert "<pre>" in bundle["text/html"] and "Traceback" not in bundle["text/plain"]


def test_checkpointing_keeps_block_inputs_and_one_block():
    full = calc.training_memory_per_gpu(precision="float32")["activations"]
    ckpt = calc.training_memory_per_gpu(precision="float32", checkpointing=True)["activations"]
    assert 0.1 < ckpt / full < 0.2                          # 18 blocks' inputs, one block and the head
    fsdp = calc.training_memory_per_gpu(parallel="FSDP", gpus=8)
    ddp = calc.training_memory_per_gpu(parallel="DDP", gpus=8)
    assert fsdp["optimizer state"] * 8 == ddp["optimizer state"] and "DDP's gradient buckets" in ddp


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_four_lessons_show_their_calculator(path):
    """Lessons 3, 8, 10 and 12 show theirs, with the lesson's own numbers checked in the cell."""
    wanted = {"03": ["copy_calculator"], "08": ["memory_calculator"], "10": ["roofline_calculator"],
              "12": ["memory_calculator", "allreduce_calculator"]}.get(path.name[:2], [])
    nb = json.loads(path.read_text(encoding="utf-8"))
    for name in wanted:
        cells = [c for c in nb["cells"] if c["cell_type"] == "code" and f"calculators.{name}(" in source(c)]
        assert cells, f"{path.name} shows no {name}"
        assert "assert" in source(cells[0]), f"{path.name}: the {name} cell checks no number of the lesson"
        assert any("(static: a few settings" in "".join(o.get("data", {}).get("text/plain", ""))
                   for o in cells[0]["outputs"]), f"{path.name}: the {name} cell has no stored static table"


# ------------------------------------------------------------------------------ in Chromium

CELLS = ["from d2l_utils import calculators as calc",
         "calc.copy_calculator()", "calc.memory_calculator()", "calc.roofline_calculator()",
         "calc.allreduce_calculator()"]


def _notebook(path):
    cells = [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
              "source": s} for i, s in enumerate(CELLS)]
    path.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {
        "display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5}))


def _shown(page, k, name):
    value = page.locator(".calc").nth(k).locator(f".calc-value[data-name='{name}']").get_attribute("data-value")
    return float(value)


def _changes(page, k, name, before, timeout_s=20):
    deadline = time.monotonic() + timeout_s
    while True:
        now = _shown(page, k, name)
        if now != before:
            return now
        assert time.monotonic() < deadline, f"calculator {k}: {name} stayed {before}"
        time.sleep(0.2)


def _wait_for_kernel(base, token, timeout_s=60):
    """Until the notebook's kernel is connected and idle (asked of the server)."""
    import urllib.request
    deadline = time.monotonic() + timeout_s
    while True:
        with urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=5) as r:
            kernels = [s["kernel"] for s in json.load(r) if s["path"].endswith("calculators.ipynb")]
        if any(k["connections"] > 0 and k["execution_state"] == "idle" for k in kernels):
            return
        assert time.monotonic() < deadline, f"no idle kernel in {timeout_s} s"
        time.sleep(0.3)


@slow("a JupyterLab and a kernel in Chromium, about 20 s")
def test_moving_a_slider_shows_the_models_new_value(tmp_path):
    pytest.importorskip("ipywidgets")
    from test_browser import CHROMIUM, CHROMIUM_ARGS, _run_all_cells, browser_tools, jupyterlab
    sync_playwright = browser_tools()
    (tmp_path / "course").mkdir()
    _notebook(tmp_path / "course" / "calculators.ipynb")
    with jupyterlab(tmp_path / "course", tmp_path) as (base, token), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.set_default_timeout(60_000)
        try:
            page.goto(f"{base}/lab/tree/calculators.ipynb?token={token}")
            page.locator(".jp-NotebookPanel .jp-Notebook").wait_for()
            _wait_for_kernel(base, token)
            _run_all_cells(page)
            deadline = time.monotonic() + 120
            while page.locator(".calc .calc-value").count() < 4:
                dialog = page.locator(".jp-Dialog", has_text="Select Kernel")
                if dialog.count():                      # no kernel yet: take the notebook's, and run again
                    dialog.locator("button.jp-mod-accept").click()
                    _wait_for_kernel(base, token)
                    _run_all_cells(page)
                assert time.monotonic() < deadline, "the four calculators did not render in 120 s"
                page.wait_for_timeout(500)
            page.screenshot(path=ROOT / "test-artifacts" / "calculators_before.png", full_page=True)

            # each calculator's first slider one step to the right; the number follows the model
            checks = [(0, "seconds", lambda: calc.copy_time(2**27)["seconds"].value),
                      (1, "total_gib", lambda: sum(calc.training_memory_per_gpu(batch=19).values()) / GiB),
                      (2, "expected_ms", lambda: calc.matmul_roofline(m=2**14)["expected_s"].value * 1e3),
                      (3, "bus_gb_s", lambda: calc.allreduce_time(2**29)["bus_gb_s"].value)]
            for k, name, model in checks:
                before = _shown(page, k, name)
                sliders = page.locator(".calc").nth(k).locator(".widget-slider .noUi-handle")
                slider = sliders.first                        # the memory one: sequences per GPU
                slider.focus()
                page.keyboard.press("ArrowRight")
                assert _changes(page, k, name, before) == pytest.approx(model(), rel=1e-9), f"calculator {k}"

            # a bad setting: the message in the widget, no traceback
            gpus = page.locator(".calc").nth(1).locator(".widget-slider .noUi-handle").nth(1)
            gpus.focus()
            page.keyboard.press("ArrowRight")
            page.locator(".calc .calc-error", has_text="one GPU means 1 GPU, got 2").wait_for(timeout=20_000)
            assert not page.locator(".jp-OutputArea-output", has_text="Traceback").count()
        finally:
            page.screenshot(path=ROOT / "test-artifacts" / "calculators.png", full_page=True)
            browser.close()
