"""The calculators (d2l_utils/calculators.py): the lessons' models behind sliders.

At their defaults they reproduce numbers the lessons print (read from the stored lessons, so
the calculators and the lessons cannot drift apart), and the defaults themselves, read from the
calculator functions and from the widgets they build, are the settings of the lesson's example
(its size, GPUs, product shape, batch): a changed default fails the README's test command, not
only the slow Chromium test; bad settings give a message, in the
widget, never a traceback; their static table is what nbval and GitHub see; and in Chromium,
moving a slider changes the shown number to the model's value.
"""
import ast
import html
import inspect
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


# ------------------------------------------------------------------------------ the defaults
# Each calculator opens at its lesson's example. The settings are read from the calculator
# functions themselves (their signatures, and the widget they build), the lesson's example from
# its stored outputs: a changed default (the copy's size, the all-reduce's GPUs, the roofline's m,
# the memory calculator's batch...) or a changed model fails here, in the README's test command.
WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "eight": 8}


def defaults(function):
    """{parameter: default} of ``function``, as a call would use them now."""
    return {name: p.default for name, p in inspect.signature(function).parameters.items()
            if p.default is not inspect.Parameter.empty}


def settings_of(settings, *names):
    """The named settings (a calculator may have others; their defaults count in the numbers below)."""
    return {name: settings.get(name, "(no such setting)") for name in names}


def agree(settings, model):
    """The calculator's defaults are its model function's, for every setting both have."""
    model_defaults = defaults(model)
    differ = {k: (v, model_defaults[k]) for k, v in settings.items() if k in model_defaults and model_defaults[k] != v}
    assert not differ, f"the calculator's defaults differ from {model.__name__}'s: {differ}"


def shown(calculator):
    """{name: value} of the numbers a calculator's widget shows now (its data-value attributes)."""
    return {name: ast.literal_eval(html.unescape(value))
            for name, value in re.findall(r'data-name="(\w+)" data-value="([^"]*)"', calculator.result.value)}


def size_bytes(number, unit):
    return int(number) * {"KiB": 2**10, "MiB": MiB, "GiB": GiB}[unit]


def lesson_3_copies():
    """(size in bytes, {gpu: (link, {'pageable': GB/s, 'pinned': GB/s})}) of lesson 3's expected copies."""
    text = cell_printing("03", r"EXPECTED by the copy model, not measured: \d+ [KMG]iB")
    size = re.search(r"not measured: (\d+) ([KMG]iB) copies", text)
    assert size, f"lesson 3 no longer names the size of its expected copies as this test reads it:\n{text}"
    rows = {gpu: (link, {kind: float(v) for kind, v in re.findall(r"(pageable|pinned) ([\d.]+)", rest)})
            for gpu, link, rest in re.findall(r"^\s+([\w-]+), (PCIe \d\.0 x\d+): (.*)$", text, re.M)}
    assert "H200" in rows and "T4" in rows, text
    return size_bytes(size[1], size[2]), rows


def test_copy_calculator_at_its_defaults_is_lesson_3s_copy_model():
    nbytes, rows = lesson_3_copies()
    for gpu, (link, rates) in rows.items():
        for memory in ("pinned", "pageable"):
            assert f"{calc.copy_time(nbytes, link, memory)['gb_s'].value:.1f}" == f"{rates[memory]:.1f}", (gpu, memory)
    # Its defaults: the lesson's size, over the H200's link, from pinned memory (its headline).
    link, rates = rows["H200"]
    settings = defaults(calc.copy_calculator)
    assert settings_of(settings, "nbytes", "link", "memory") == {"nbytes": nbytes, "link": link, "memory": "pinned"}
    agree(settings, calc.copy_time)
    assert f"{calc.copy_time(**settings)['gb_s'].value:.1f}" == f"{rates['pinned']:.1f}"


def lesson_8_table():
    text = cell_printing("08", r"per sequence\s+24 GiB\s+80 GiB")
    cards = [int(c) for c in re.findall(r"(\d+) GiB", text.splitlines()[0])]
    rows = {}
    for line in text.splitlines()[1:]:
        found = re.match(r"\s*(.+?)\s+[\d.]+ GiB\s+[\d.]+ GiB\s+([\d.]+) GiB\s+(\d+)\s+(\d+)\s*$", line)
        if found:
            rows[found[1]] = (found[2], [int(found[3]), int(found[4])])
    return cards, rows


def test_memory_calculator_at_its_defaults_is_lesson_8s_table():
    cards, rows = lesson_8_table()
    assert cards == [24, 80], cards
    names = {"float32": "float32", "pure bfloat16": "pure bf16", "bf16 + fp32 master": "bf16 + fp32 master",
             "autocast": "bf16 autocast"}
    assert set(rows) == set(names), rows
    for lesson_name, ours in names.items():
        per_sequence, fit = rows[lesson_name]
        assert f"{calc.training_memory_per_gpu(precision=ours)['activations'] / GiB:.2f}" == per_sequence, lesson_name
        assert [calc.largest_batch(c * GiB, precision=ours) for c in cards] == fit, lesson_name
    # Its defaults: lesson 8's model in float32 with Adam, on the 80 GiB card, with the most sequences
    # that fit there (the table's float32 row), the same model the table's rows are computed with.
    settings = defaults(calc.memory_calculator)
    card = settings.pop("card")
    most = rows["float32"][1][cards.index(80)]
    assert card == "80 GiB card" and calc.CARDS[card] == 80 * GiB, card
    assert settings["precision"] == "float32" and settings["batch"] == most, settings
    agree({k: v for k, v in settings.items() if k != "batch"}, calc.training_memory_per_gpu)
    fixed = {k: v for k, v in settings.items() if k != "batch"}
    assert calc.largest_batch(calc.CARDS[card], **fixed) == most


NUMBER = r"[\d.,]+"


def expected_numbers(text):
    """{item label: {gpu: (value, low, high)}} of the expectation block a GPU-only cell printed,
    in either of its layouts: one item after another, a line per GPU ("H200  742 TFLOP/s (445 to
    940)"), or a table, a column per GPU ("742 (495–960)"), its labels wrapped over lines."""
    number = lambda x: float(x.replace(",", ""))
    found, label, gpus, pending = {}, None, None, ""
    for line in text.splitlines():
        if line.strip().startswith(("How each was derived", "[")):
            gpus = None
            continue
        item = re.fullmatch(r"  (\S.*?) \[\w+\]:", line)
        row = re.fullmatch(rf"    ([\w-]+)\s+({NUMBER}) \S+ \(({NUMBER}) to ({NUMBER})\).*", line)
        if item:
            label = item[1]
        elif row and label:
            found.setdefault(label, {})[row[1]] = tuple(number(x) for x in row.groups()[1:])
        elif re.fullmatch(r"\s+(?:[\w-]+\s+)*[\w-]+", line) and all(g in DATASHEET for g in line.split()):
            gpus, pending = line.split(), ""                       # a table's header: its GPUs
        elif gpus:
            cells = list(re.finditer(rf"({NUMBER}) \(({NUMBER})–({NUMBER})\)", line))
            if len(cells) == len(gpus):
                name = " ".join((pending + line[:cells[0].start()].strip()).split())
                found[name] = {g: tuple(number(x) for x in c.groups()) for g, c in zip(gpus, cells)}
                pending = ""
            else:
                text_part = line.strip()
                pending += text_part if text_part.endswith("-") else text_part + " "
    return found


def lesson_10_product():
    """(sizes, dtype, {gpu: (TFLOP/s, low, high)}) of lesson 10's expected 16-bit product."""
    text = cell_printing("10", r"16-bit \(bfloat16; float16 on a T4\)")
    items = {label: rates for label, rates in expected_numbers(text).items() if label.startswith("16-bit (")}
    assert len(items) == 1, f"lesson 10's 16-bit product, as this test reads it: {items}\n{text}"
    (label, rates), = items.items()
    head = re.search(r"16-bit \((\w+); float16 on a T4\), fastest of ([\d, ]+\d)", label)
    assert head, f"lesson 10 no longer names the sizes of its expected product as this test reads it: {label!r}"
    return [int(n) for n in head[2].split(",")], head[1], rates


def test_roofline_calculator_at_its_defaults_is_lesson_10s_product():
    sizes, dtype, rates = lesson_10_product()
    assert "H200" in rates, rates
    # Its defaults: the largest square product the lesson's GPU cell times, in its 16-bit type, on the H200.
    settings = defaults(calc.roofline_calculator)
    assert settings_of(settings, "m", "n", "k", "dtype", "gpu", "measured_ms") == {
        "m": max(sizes), "n": max(sizes), "k": max(sizes), "dtype": dtype, "gpu": "H200", "measured_ms": None}
    agree(settings, calc.matmul_roofline)
    e = calc.matmul_roofline(**settings)["tflops"]
    value, low, high = rates["H200"]
    assert (round(e.value), round(e.low), round(e.high)) == (round(value), round(low), round(high)), rates


def lesson_12_allreduce():
    """(size in bytes, GPUs, {gpu: bus GB/s}) of lesson 12's expected all-reduce."""
    text = cell_printing("12", r"bus bandwidth of the \d+ [KMG]iB all-")
    items = {re.search(r"bus bandwidth of the (\d+) ([KMG]iB) all-reduce", label): rates
             for label, rates in expected_numbers(text).items()}
    items = {(m[1], m[2]): rates for m, rates in items.items() if m}
    gpus = re.search(r"Expected of (\w+)", text)
    assert len(items) == 1 and gpus, f"lesson 12's all-reduce, as this test reads it: {items}\n{text}"
    ((size, unit), rates), = items.items()
    return size_bytes(size, unit), WORDS.get(gpus[1]) or int(gpus[1]), {g: r[0] for g, r in rates.items()}


def test_allreduce_calculator_at_its_defaults_is_lesson_12s_ring_model():
    nbytes, gpus, bus = lesson_12_allreduce()
    for gpu, interconnect in (("H200", "NVLink (H200)"), ("T4", "PCIe 3.0 x16 (T4)")):
        assert calc.allreduce_time(nbytes, gpus, interconnect)["bus_gb_s"].value == pytest.approx(bus[gpu], rel=5e-3)
    # Its defaults: the lesson's message, on as many GPUs as its expectation, over the H200's NVLink.
    settings = defaults(calc.allreduce_calculator)
    assert settings_of(settings, "nbytes", "gpus", "interconnect") == {
        "nbytes": nbytes, "gpus": gpus, "interconnect": "NVLink (H200)"}
    assert calc.INTERCONNECTS[settings["interconnect"]] == "H200"
    agree(settings, calc.allreduce_time)
    assert calc.allreduce_time(**settings)["bus_gb_s"].value == pytest.approx(bus["H200"], rel=5e-3)


def test_parallel_calculator_at_its_defaults_is_lesson_14s_larger_example():
    """Its static table is what lesson 14 printed for 64 H100s, line for line, from the lesson's
    own parallel_plans (the calculator adds only the sliders)."""
    text = cell_printing("14", r"64 H100s: \d+ of \d+ ways fit")
    printed = [line.strip() for line in text[text.index("width 8192, 80 blocks"):].splitlines()[:4]]
    assert calc.parallel_calculator().static == printed
    assert defaults(calc.parallel_calculator) == {
        "width": 8192, "layers": 80, "gpu": "H100", "gpus": 64, "tokens": 2**20, "micro": 16}


def test_each_widget_opens_at_its_defaults_and_shows_their_numbers():
    """The sliders start at the calculator's defaults, and the numbers shown are the model's there
    (which the tests above compare with the lessons)."""
    pytest.importorskip("ipywidgets")
    copy = calc.copy_calculator()
    d = defaults(calc.copy_calculator)
    assert 2 ** copy.controls["log2_bytes"].value == d["nbytes"]
    assert shown(copy)["gb_s"] == calc.copy_time(**d)["gb_s"].value
    roof = calc.roofline_calculator()
    d = defaults(calc.roofline_calculator)
    assert [2 ** roof.controls[f"log2_{x}"].value for x in "mnk"] == [d["m"], d["n"], d["k"]]
    assert shown(roof)["expected_ms"] == calc.matmul_roofline(**d)["expected_s"].value * 1e3
    ring = calc.allreduce_calculator()
    d = defaults(calc.allreduce_calculator)
    assert 2 ** ring.controls["log2_bytes"].value == d["nbytes"] and ring.controls["gpus"].value == d["gpus"]
    assert shown(ring)["bus_gb_s"] == calc.allreduce_time(**d)["bus_gb_s"].value
    memory = calc.memory_calculator()
    d = defaults(calc.memory_calculator)
    card = d.pop("card")
    assert memory.controls["batch"].value == d["batch"] and memory.controls["card"].value == card
    assert shown(memory)["largest_batch"] == calc.largest_batch(calc.CARDS[card], **{**d, "batch": 1})
    assert shown(memory)["total_gib"] == sum(calc.training_memory_per_gpu(**d).values()) / GiB
    splits = calc.parallel_calculator()
    d = defaults(calc.parallel_calculator)
    assert 2 ** splits.controls["log2_tokens"].value == d["tokens"] and splits.controls["gpus"].value == d["gpus"]
    from d2l_utils.lessons import parallel_plans
    fit = [p for p in parallel_plans(**{**d, "value_bytes": 2}) if p["fits"]]
    assert shown(splits)["fastest_step_s"] == min(p["step_s"] for p in fit)


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
    (lambda: calc.parallel_calculator(gpu="V100"), "gpu must be one of"),
    (lambda: calc.parallel_calculator(gpus=0), "gpus must be >= 1"),
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
    for make in (calc.copy_calculator, calc.memory_calculator, calc.roofline_calculator, calc.allreduce_calculator,
                 calc.parallel_calculator):
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
def test_five_lessons_show_their_calculator(path):
    """Lessons 3, 8, 10, 12 and 14 show theirs, with the lesson's own numbers checked in the cell."""
    wanted = {"03": ["copy_calculator"], "08": ["memory_calculator"], "10": ["roofline_calculator"],
              "12": ["memory_calculator", "allreduce_calculator"],
              "14": ["parallel_calculator"]}.get(path.name[:2], [])
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
