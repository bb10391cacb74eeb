"""Every lesson is also a lecture: a RISE slideshow (jupyterlab-rise) whose slides a room can read.

tools/slides.py writes each cell's `metadata.slideshow.slide_type` by rules, the notebook's
`rise` settings, and `<lesson>.css` (the cells whose slides show their output without their
code). The fast tests check the stored metadata and CSS (they are what the script writes),
the structure (the title and every `## ` heading start a slide; the Colab setup cell and
the solutions are left out), the rules themselves on a made-up lesson, and that the
script's size model and notebooks/rise.css (code at 18 px or more) name the same sizes.

The browser test opens every lesson as a slideshow, as "Render as slideshow" does, in
headless Chromium (Debian's) at 1280x720, with test_browser.py's server and browser
settings and the course's notebooks/rise.css. The lessons are served as stored: RISE shows
the stored outputs, no cell runs. It goes through the slides with Alt+Space (reveal.js: the
next slide, fragments skipped), as a presenter does, and checks that the deck has the slides
the metadata implies, each with the cells and fragments it implies and the slide number the
teacher's kit quotes; that no slide is taller or wider than the screen (measured in the page:
a slide's height includes its fragments, shown or not); that code, outputs and prose are drawn
at 18 px or more; that the output-only cells show no code and every other code cell its
code; and that no figure is scaled down below 96% (matplotlib text of 12 pt at 100 dpi is
then 12 pt or more on the slide). A screenshot of each lesson's title slide, its fullest slide
(by the script's estimate), with its fragments shown, and of any slide with a problem is kept
in test-artifacts/ (COURSE_SLIDE_SHOTS=all: every slide). Without chromium or playwright it
skips; in CI (COURSE_CI=1) that is a failure.

tests/test_slide_overflow.py measures every slide of every deck for overflow in one page
load a deck (faster; no fragments, numbers or type sizes), and tests/test_workshop_decks.py
the workshop's two decks.

Every lesson costs about 5-15 s in the browser, and JupyterLab and Chromium take more to
start, so the walk is a slow check: CI (COURSE_CI=1) and COURSE_SLOW=1 walk every lesson
(`-k 01_devices` walks one), and the README's test command, which must stay inside the
suite's 3-minute budget, runs only the fast tests.
"""
import contextlib
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request

import nbformat
import pytest

import slides  # tools/ is put on sys.path by conftest.py
import sitting  # noqa: E402
from conftest import NOTEBOOKS, ROOT, cells, require, slow, source
from test_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, browser_tools, jupyterlab

SCREEN = {"width": slides.SCREEN[0], "height": slides.SCREEN[1]}
RISE_CSS = ROOT / "notebooks" / "rise.css"
SMALLEST_PX = 18                  # code, outputs and prose on a slide
SMALLEST_FIGURE_SCALE = 0.96      # 12 pt at 100 dpi is 16.7 px; 16 px is 12 pt in CSS


def _types(path):
    return [c["metadata"].get("slideshow", {}).get("slide_type") for c in cells(path)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_slide_metadata_is_what_tools_slides_writes(path):
    nb = nbformat.read(path, as_version=4)
    wanted = slides.slide_types(nb)
    stale = [f"{c['id']}: {t} (tools/slides.py: {wanted[c['id']]})"
             for c, t in zip(cells(path), _types(path)) if t != wanted[c["id"]]]
    assert not stale, (f"{path.name}: slide metadata out of date, run `python tools/slides.py "
                       f"notebooks/{path.name}`: " + ", ".join(stale[:3]) + (" ..." if len(stale) > 3 else ""))
    assert nb.metadata.get("rise") == slides.RISE_SETTINGS, (
        f"{path.name}: the notebook's `rise` settings are not tools/slides.py's; run it")
    assert slides.css_is_current(path, nb), (
        f"{slides.css_path(path).name} is not what tools/slides.py writes for {path.name}; run it")


def test_no_lesson_css_without_its_lesson():
    lessons = {p.stem for p in NOTEBOOKS}
    orphans = [p.name for p in (ROOT / "notebooks").glob("*.css")
               if p.name != RISE_CSS.name and p.stem not in lessons]
    assert not orphans, f"CSS for no lesson in notebooks/: {orphans}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_summary_slide_is_a_few_short_points_and_no_slide_speaks_to_maintainers(path):
    """A room reads the Summary slide at a glance (the full summary follows in the notes), and
    maintainers' instructions (tools, tests, recorders) stay off the slides."""
    nb = nbformat.read(path, as_version=4)
    types = slides.slide_types(nb)
    summary = next(c for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("## Summary"))
    points = [slides._visible_text(line) for line in summary.source.splitlines() if line[:2] in ("- ", "* ")]
    assert 4 <= len(points) <= 6 and all(len(p) <= 92 for p in points), (
        f"{path.name}: the Summary slide has {len(points)} points, the longest "
        f"{max(map(len, points), default=0)} characters (4-6 points of at most about 90)")
    for cell in nb.cells:
        if cell.cell_type == "markdown" and types[cell.id] not in ("notes", "skip"):
            found = re.search(r"(?<![\w-])(?:tools/|tests/)|CONTRIBUTING|record_gpu", cell.source)
            assert not found, f"{path.name}, cell {cell.id}: a slide names {found.group(0)!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_title_and_sections_start_slides_setup_and_solutions_are_left_out(path):
    nb_cells, types = cells(path), _types(path)
    assert all(t in slides.TYPES for t in types), f"{path.name}: unknown slide types {set(types)}"
    assert types[0] == "slide", f"{path.name}: the title cell must start the first slide"
    core = len(sitting.split({"cells": nb_cells})[0])
    for cell, kind in zip(nb_cells[core:], types[core:]):
        assert kind == "skip", f"{path.name}: {cell['id']} is in the depth, which is not on the slides"
    for cell, kind in zip(nb_cells[:core], types[:core]):
        text = source(cell)
        heading = re.search(r"^## .*", text, re.M)
        if cell["cell_type"] == "markdown" and heading:
            assert kind == "slide", f"{path.name}: the cell of {heading[0]!r} must start a slide"
        if cell["cell_type"] == "code" and text.lstrip().startswith("#@title Solution"):
            assert kind == "skip", f"{path.name}: solution {cell['id']} must be left out (skip)"
    setup = next(c for c in nb_cells if c["cell_type"] == "code")
    assert "'google.colab' in sys.modules" in source(setup)
    assert types[nb_cells.index(setup)] == "skip", f"{path.name}: the Colab setup cell must be skipped"
    exercises = [c for c, t in zip(nb_cells, types)
                 if "## Exercises" in source(c) and t not in ("skip", "notes")]
    assert exercises, f"{path.name}: the exercises must stay on the slides"


def test_the_script_changes_nothing_but_slide_metadata(tmp_path):
    path = NOTEBOOKS[0]
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("slideshow", None)
    nb.metadata.pop("rise", None)
    copy = tmp_path / path.name
    nbformat.write(nb, copy)
    assert slides.main([str(copy), "--check"]) == 1
    assert slides.main([str(copy)]) == 0
    assert copy.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")
    css = slides.css_path(path)
    assert (slides.css_path(copy).read_text(encoding="utf-8") if slides.css_path(copy).exists() else None) \
        == (css.read_text(encoding="utf-8") if css.exists() else None)
    assert slides.main([str(copy), "--check"]) == 0


# --- the rules, on a made-up lesson -----------------------------------------------------

def _lesson(*specs):
    """A notebook from (kind, source[, outputs[, tags]]) specs, with a title and a setup cell."""
    made = [nbformat.v4.new_markdown_cell("# 0. A lesson\n\nWhat you will learn."),
            nbformat.v4.new_code_cell("import sys\nif 'google.colab' in sys.modules:\n    pass")]
    for kind, text, *rest in specs:
        outputs, tags = (rest + [[], []])[:2] if rest else ([], [])
        cell = (nbformat.v4.new_markdown_cell(text) if kind == "md"
                else nbformat.v4.new_code_cell(text, outputs=outputs))
        if tags:
            cell.metadata["tags"] = tags
        made.append(cell)
    for i, cell in enumerate(made):
        cell.id = f"c{i:02d}"
    return nbformat.v4.new_notebook(cells=made)


def _printed(text):
    return [nbformat.v4.new_output("stream", name="stdout", text=text)]


GPU_CELL = ("# NBVAL_IGNORE_OUTPUT\nif torch.cuda.is_available():\n"
            + "".join(f"    x{i} = torch.ones({i}, device='cuda')\n" for i in range(11))
            + "    print(x0)\nelse:\n    d2l.show_recording('00-long', gpus=1)")


def test_the_rules_on_a_made_up_lesson():
    nb = _lesson(
        ("md", "## A section\n\nA lead-in."),                                        # c02
        ("code", "x = 1\nprint(x)", _printed("1\n")),                                # c03
        ("code", "#@save\ndef helper(n):\n    return n"),                            # c04 helper
        ("code", "assert helper(1) == 1\nassert helper(2) == 2"),                    # c05 check
        ("code", "def draw(ax):\n    ax.plot([1, 2])\n    ax.set_xlabel('s')"),      # c06 drawing def
        ("code", GPU_CELL, _printed("[This cell needs a CUDA GPU]\n")),              # c07 GPU, long
        ("code", "\n".join(f"y{i} = {i}" for i in range(12))),                       # c08 long, no output
        ("code", "\n".join(f"y{i} = {i}" for i in range(12)), _printed("done\n")),   # c09 long, output
        ("md", "Prose " * 80),                                                       # c10 long prose
        ("code", "#@save\ndef shown():\n    pass", [], ["slide-show"]),              # c11 tagged
        ("code", "z = 2", [], ["slide-notes"]),                                      # c12 tagged
        ("md", "### A subsection"),                                                  # c13
        ("code", "#@title Solution 1\nprint(2)", _printed("2\n")),                   # c14 solution
        ("code", "del x"),                                                           # c15 after them
    )
    found = {cid: role for cid, (role, _) in slides.roles(nb).items()}
    assert found == {"c00": "slide", "c01": "skip", "c02": "slide", "c03": "code", "c04": "skip",
                     "c05": "skip", "c06": "skip", "c07": "output", "c08": "skip", "c09": "output",
                     "c10": "notes", "c11": "code", "c12": "notes", "c13": "subslide", "c14": "skip",
                     "c15": "skip"}
    assert slides.output_only(nb) == ["c07", "c09"]
    css = slides.lesson_css(nb)
    assert css.startswith(slides.CSS_MARK)
    assert re.findall(r'data-windowed-list-index="(\d+)"', css) == ["7", "9"]   # positions in the lesson
    types = slides.slide_types(nb)
    assert types["c03"] == "fragment" and types["c13"] == "fragment"    # a short subsection joins
    slides.OVERRIDES["c03"] = "notes"                       # the table by id has the last word
    try:
        assert slides.slide_types(nb)["c03"] == "notes"
    finally:
        del slides.OVERRIDES["c03"]
    assert slides.lesson_css(_lesson(("code", "x = 1"))) is None


def test_a_lead_in_whose_code_is_off_the_slides_goes_to_the_notes():
    """A lead-in that would introduce a cell the room never sees is said, not shown; one
    before a helper stays (the idea it states is on the slide), and one whose code cell is
    off the slides but followed by another shown code cell is shown with that cell."""
    long_silent = "\n".join(f"y{i} = {i}" for i in range(12))                      # no output: skipped
    nb = _lesson(("md", "## A section"),                                                # c02
                 ("md", "The cell measures it (GPU only):"), ("code", long_silent),      # c03, c04
                 ("md", "A helper: it states the idea."), ("code", "#@save\ndef f():\n    pass"),  # c05, c06
                 ("md", "The cells count it:"), ("code", "z = 1", [], ["slide-notes"]),  # c07, c08
                 ("code", "print(z)", _printed("1\n")),                                 # c09
                 ("md", "## Next"))                                                       # c10
    found = slides.roles(nb)
    assert found["c03"] == ("notes", "its code is off the slides")
    assert found["c05"][0] == "lead" and found["c07"][0] == "lead"
    types = slides.slide_types(nb)
    assert types["c03"] == "notes" and types["c07"] != "notes" and types["c09"] == "-"   # c09 with its lead-in
    assert [s["cells"] for s in slides.deck(nb, types)][1] == ["c02", "c05", "c07", "c09"]


def test_the_report_names_slides_the_room_cannot_read():
    """--report: an output alone on a slide without a word, a long block, table rows that wrap."""
    gpu_out = _printed("[This cell needs a CUDA GPU; none here.]\n")
    nb = _lesson(("md", "## A section"), ("code", "print(1)", _printed("1\n")),                # c02, c03
                 ("code", GPU_CELL, gpu_out),                                                   # c04
                 ("md", "## Long"), ("code", "print(2)", _printed("x\n" * 20)),                # c05, c06
                 ("md", "## Wide"), ("code", "print(3)", _printed(("w" * 120 + "\n") * 2)))    # c07, c08
    types = slides.slide_types(nb)
    for cell in nb.cells:
        cell.metadata["slideshow"] = {"slide_type": types[cell.id]}
    problems = slides.block_problems(nb)
    assert any("c06 prints 20 lines" in p for p in problems)
    assert any("2 lines of c08's output are wider than a slide" in p for p in problems)
    alone = [s for s in slides.deck(nb) if s["cells"][0] == "c04"]
    assert bool(alone) == any("starts with c04's output" in p for p in problems)


def test_notes_are_short_and_no_test_marker_is_projected():
    nb = _lesson(("md", "## A section\n\nA lead-in."),                               # c02
                 ("code", "# NBVAL_IGNORE_OUTPUT\nprint(3)", _printed("3\n")),          # c03 marked
                 ("md", "Said. " * 150), ("md", "Also [said](https://x.org/a/long/path). " * 60),  # c04, c05
                 ("md", "More. " * 120),                                                  # c06: over
                 ("md", "## Next"), ("md", "Said again. " * 100))                         # c07, c08
    types = slides.slide_types(nb)
    assert [types[c] for c in ("c04", "c05", "c06", "c08")] == ["notes", "notes", "skip", "notes"]
    assert slides.marked(nb) == ["c03"]
    css = slides.lesson_css(nb)
    assert re.search(r'is\(\[data-windowed-list-index="3"\]\) \.cm-content > \.cm-line:first-child \{\n  display: none', css)
    assert "jp-Cell-inputWrapper" not in css                  # no cell shows only its output


def test_deck_titles_and_section_ranges():
    nb = _lesson(("md", "## First"), ("code", "a = 1", _printed("x\n" * 19)), ("md", "### Sub"), ("code", "b = 2"),
                 ("md", "## Second"), ("code", "\n".join(["c = 3"] * 9), _printed("x\n" * 20)),
                 ("code", "\n".join(["d = 4"] * 9), _printed("x\n" * 14)),
                 ("md", "## Summary\n\n* one\n\n## Exercises\n\n1. Do it."))
    for cell in nb.cells:
        cell.metadata["slideshow"] = {"slide_type": slides.slide_types(nb)[cell.id]}
    deck = slides.deck(nb)
    assert [s["title"] for s in deck] == ["0. A lesson", "First", "Sub", "Second", "Second (cont.)",
                                          "Summary"]
    assert slides.sections(nb) == {"0. A lesson": (1, 6), "First": (2, 3), "Sub": (3, 3),
                                   "Second": (4, 5), "Summary": (6, 6), "Exercises": (6, 6)}


def test_figures_need_text_of_12_pt():
    png = nbformat.v4.new_output("display_data", data={"image/png": _tiny_png(), "text/plain": "<Figure>"})
    small = _lesson(("code", "plt.plot([1])\nplt.legend(fontsize=8)\nplt.show()", [png]))
    problems = slides.figure_problems(small)
    assert len(problems) == 2 and "10 pt" in problems[0] and "at 8" in problems[1]
    styled = _lesson(("code", f"plt.style.use('{slides.COURSE_STYLE}')"),
                     ("code", "plt.plot([1])\nplt.show()", [png]))
    assert slides.figure_problems(styled) == []


def _tiny_png():
    import base64
    import struct
    import zlib
    raw = b"\x00\xff\xff\xff"                                   # one row: no filter, a white pixel
    chunk = lambda kind, data: (struct.pack(">I", len(data)) + kind + data
                                + struct.pack(">I", zlib.crc32(kind + data)))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    return base64.b64encode(png).decode()


def test_rise_css_sets_the_sizes_the_size_model_assumes():
    css = RISE_CSS.read_text(encoding="utf-8")
    sizes = dict(re.findall(r"(--jp-code-font-size|--jp-content-font-size1):\s*(\d+)px", css))
    assert sizes == {"--jp-code-font-size": str(slides.CODE_PX),
                     "--jp-content-font-size1": str(slides.PROSE_PX)}, (
        "notebooks/rise.css and tools/slides.py (CODE_PX, PROSE_PX) must name the same sizes")
    assert slides.CODE_PX >= SMALLEST_PX and slides.PROSE_PX >= SMALLEST_PX


# --- the slideshow in a browser -------------------------------------------------------

# The present (sub)slide once its cells are drawn: its size against the screen's, the
# notebook indices of its cells, its fragments, the cells that need a scroll bar, the
# smallest type drawn, the code cells whose code shows, the test markers in view, the
# figures' scale and the number reveal.js shows.
MEASURE = """(force) => {
  const sec = document.querySelector('.reveal .slides > section.present > section.present');
  if (!sec) return null;
  const shown = [...sec.querySelectorAll('.jp-Cell')]
      .filter(c => !c.closest('aside.notes') && !c.classList.contains('reveal-skip'));
  const drawn = shown.every(c => !c.classList.contains('jp-CodeCell')
                                 || c.querySelector('.cm-content, .jp-InputPlaceholder'))
                && [...sec.querySelectorAll('img')].every(i => i.complete);
  if (!drawn && !force) return null;
  const screen = document.querySelector('.reveal .slides');
  const index = e => +e.closest('.jp-Cell').dataset.windowedListIndex;
  const wide = [...sec.querySelectorAll(
      '.cm-scroller, .jp-OutputArea-output, .jp-RenderedMarkdown table, .jp-RenderedMarkdown pre')]
      .filter(e => e.scrollWidth > e.clientWidth + 1).map(index);
  const visible = e => e.getClientRects().length > 0;
  const texts = [...sec.querySelectorAll(
      '.cm-line, .jp-OutputArea-output pre, .jp-RenderedMarkdown p, .jp-RenderedMarkdown li, '
      + '.jp-RenderedMarkdown td, .jp-RenderedMarkdown th')]
      .filter(e => visible(e) && !e.closest('aside.notes') && e.textContent.trim());
  const small = texts.filter(e => parseFloat(getComputedStyle(e).fontSize) < SMALLEST)
      .map(e => [index(e), getComputedStyle(e).fontSize]);
  const code = shown.filter(c => c.classList.contains('jp-CodeCell'))
      .filter(c => visible(c.querySelector('.jp-Cell-inputWrapper')))
      .map(c => +c.dataset.windowedListIndex);
  const markers = [...sec.querySelectorAll('.cm-line')]
      .filter(e => visible(e) && !e.closest('aside.notes') && e.textContent.startsWith('# NBVAL_')).map(index);
  const figures = [...sec.querySelectorAll('.jp-OutputArea-output img')].filter(visible)
      .map(i => [index(i), i.getBoundingClientRect().width / i.naturalWidth]);
  const number = document.querySelector('.reveal .slide-number');
  return {id: sec.id, height: sec.scrollHeight, width: sec.scrollWidth,
          screen: [screen.offsetWidth, screen.offsetHeight],
          cells: shown.map(c => +c.dataset.windowedListIndex), wide: [...new Set(wide)],
          fragments: sec.querySelectorAll('.fragment').length, small: small, code: code,
          figures: figures, markers: [...new Set(markers)], number: number ? number.textContent.replace(/\\s+/g, '') : null};
}""".replace("SMALLEST", str(SMALLEST_PX))


def _rise_settings(settings_dir):
    """The slideshow without slide transitions (they animate, the layout is the same)."""
    path = settings_dir / "jupyterlab-rise" / "plugin.jupyterlab-settings"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"transition": "none"}))


def _end_sessions(base, token):
    """RISE starts a kernel for the lesson it shows (no cell runs): stop it."""
    with urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=10) as r:
        sessions = json.load(r)
    for s in sessions:
        request = urllib.request.Request(f"{base}/api/sessions/{s['id']}?token={token}",
                                         method="DELETE")
        with contextlib.suppress(OSError):
            urllib.request.urlopen(request, timeout=10).close()


def _present(page, slide_id):
    """The measures of the present slide once it is slide_id and drawn (None if it never is)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    try:
        return page.wait_for_function(
            f"(m => {{ const s = m(false); return s && s.id === {json.dumps(slide_id)} && s; }})"
            f"({MEASURE})", timeout=20_000).json_value()
    except PlaywrightTimeout:                   # measure what is there, drawn or not
        slide = page.evaluate(f"({MEASURE})(true)")
        return slide if slide and slide["id"] == slide_id else None


def _slide_problems(slide, cell_ids, nb, index, kinds, hidden, number, total):
    """What is wrong with one measured slide, as sentences."""
    problems = []
    if slide["cells"] != [index[i] for i in cell_ids]:
        problems.append(f"shows cells {slide['cells']}, the metadata says {[index[i] for i in cell_ids]}")
    fragments = sum(kinds[i] == "fragment" for i in cell_ids)
    if slide["fragments"] != fragments:
        problems.append(f"has {slide['fragments']} fragments, the metadata {fragments}")
    if slide["height"] > slide["screen"][1] or slide["width"] > slide["screen"][0]:
        problems.append(f"is {slide['width']}x{slide['height']} px, more than the "
                        f"{slide['screen'][0]}x{slide['screen'][1]} screen; its cells: "
                        + ", ".join(nb.cells[i].id for i in slide["cells"]))
    if slide["wide"]:
        problems.append("cells scroll sideways: " + ", ".join(nb.cells[i].id for i in slide["wide"]))
    if slide["small"]:
        problems.append(f"type under {SMALLEST_PX} px: "
                        + ", ".join(sorted({f"{nb.cells[i].id} ({px})" for i, px in slide["small"]})))
    code_cells = [index[i] for i in cell_ids if nb.cells[index[i]].cell_type == "code"]
    want_code = [i for i in code_cells if nb.cells[i].id not in hidden]
    if slide["code"] != want_code:
        problems.append(f"code shown for cells {slide['code']}, expected {want_code} "
                        f"(output only: {sorted(hidden & {nb.cells[i].id for i in code_cells})})")
    if slide["markers"]:
        problems.append("projects a test marker (# NBVAL_...): " + ", ".join(nb.cells[i].id for i in slide["markers"]))
    shrunk = [f"{nb.cells[i].id} ({scale:.0%})" for i, scale in slide["figures"] if scale < SMALLEST_FIGURE_SCALE]
    if shrunk:
        problems.append("figures scaled down, and their text with them: " + ", ".join(shrunk))
    if slide["number"] != f"{number}/{total}":
        problems.append(f"reveal.js numbers it {slide['number']!r}, tools/slides.py {number}/{total}")
    return problems


def _show_lesson(page, base, token, path, where="notebooks", shots=None):
    """Open one lesson as a slideshow and go through it; its slide count and its problems."""
    shots = shots or path.stem
    nb = nbformat.read(path, as_version=4)
    index = {c.id: i for i, c in enumerate(nb.cells)}
    kinds = {c.id: c.metadata.get("slideshow", {}).get("slide_type", "-") for c in nb.cells}
    hidden = set(slides.output_only(nb))
    expected = slides.slides_of(nb)
    # the slide the estimate calls fullest is the one to look at
    fullest = max(range(len(expected)), key=lambda k: sum(
        slides.cell_height(nb.cells[index[i]], i in hidden) for i in expected[k]))
    every = os.environ.get("COURSE_SLIDE_SHOTS", "") == "all"

    page.goto(f"{base}/rise/{where}/{path.name}?token={token}")
    page.locator(".reveal.ready .slides > section > section").first.wait_for(state="attached")
    ids = page.eval_on_selector_all(".reveal .slides > section > section", "s => s.map(x => x.id)")
    if len(ids) != len(expected):
        return len(ids), [f"{len(ids)} slides in the slideshow, {len(expected)} in the metadata"]
    problems = []
    for k, (slide_id, cell_ids) in enumerate(zip(ids, expected)):
        if k:
            page.keyboard.press("Alt+Space")             # reveal.js: next slide, skipping fragments
        slide = _present(page, slide_id)
        where = f"slide {k + 1} ({slide_id})"
        if slide is None:
            problems.append(f"{where}: the slideshow did not get there with Alt+Space")
            break
        found = _slide_problems(slide, cell_ids, nb, index, kinds, hidden, k + 1, len(expected))
        problems += [f"{where} {p}" for p in found]
        if found or k in (0, fullest) or every:
            for _ in range(sum(kinds[i] == "fragment" for i in cell_ids)):
                page.keyboard.press("Space")             # everything on it, as the audience sees it
            page.screenshot(path=ARTIFACTS / f"slides_{shots}_{k + 1:02d}.png")
    return len(ids), problems


@pytest.fixture(scope="module")
def slideshow(tmp_path_factory):
    """A JupyterLab serving a copy of the lessons (with rise.css and their CSS), and a page."""
    sync_playwright = browser_tools()
    ARTIFACTS.mkdir(exist_ok=True)
    tmp = tmp_path_factory.mktemp("slideshow")
    served = serve_copy(tmp)                       # a copy: nothing can write to the lessons
    _rise_settings(tmp / "settings")
    with jupyterlab(served.parent, tmp) as (base, token), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=SCREEN)
        page.set_default_timeout(60_000)
        try:
            yield page, base, token, served
        finally:
            browser.close()


@slow("5-15 s a lesson in Chromium, and a JupyterLab to start")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_lesson_as_a_slideshow_fits_the_screen_at_the_larger_type(slideshow, path):
    page, base, token, served = slideshow
    for old in ARTIFACTS.glob(f"slides_{path.stem}_*.png"):
        old.unlink()
    start = time.perf_counter()
    try:
        count, problems = _show_lesson(page, base, token, served / path.name)
    finally:
        _end_sessions(base, token)
    print(f"{path.stem}: {count} slides walked in {time.perf_counter() - start:.1f} s")
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


ZH = ROOT / "notebooks" / "zh"


def serve_copy(tmp):
    """tmp/course/notebooks: a copy of the lessons with rise.css and their CSS, and of the Chinese
    edition (with its own copies of the CSS), for a JupyterLab to serve."""
    served = tmp / "course" / "notebooks"
    served.mkdir(parents=True)
    for path in NOTEBOOKS:
        shutil.copy(path, served / path.name)
        if slides.css_path(path).exists():
            shutil.copy(slides.css_path(path), served)
    shutil.copy(RISE_CSS, served)
    if ZH_ALL:
        shutil.copytree(ZH, served / "zh")
    return served


def _has_chinese_font():
    """Whether fontconfig, which Chromium asks, has a font for Chinese."""
    try:
        found = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return bool(found.strip())
# Part 1's Chinese decks are walked here; every Chinese deck (later lessons' too, whose depth is
# English) is measured for overflow by tests/test_slide_overflow.py, which keeps CI in its budget.
ZH_ALL = sorted(ZH.glob("*.ipynb"))
ZH_NOTEBOOKS = [p for p in ZH_ALL if int(p.name[:2]) <= 7]


@slow("5-15 s a lesson in Chromium")
@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: "zh_" + p.name)
def test_every_chinese_lesson_as_a_slideshow_fits_the_screen(slideshow, path):
    """The Chinese decks have the English decks' slides (the same cell metadata); their text
    is another, so each is walked too."""
    require(_has_chinese_font(), "no Chinese font for Chromium: the slides would show boxes "
            "(Debian: apt-get install fonts-wqy-microhei)")
    page, base, token, served = slideshow
    for old in ARTIFACTS.glob(f"slides_zh_{path.stem}_*.png"):
        old.unlink()
    try:
        count, problems = _show_lesson(page, base, token, served / "zh" / path.name,
                                       where="notebooks/zh", shots=f"zh_{path.stem}")
    finally:
        _end_sessions(base, token)
    assert not problems, f"zh/{path.name}:\n" + "\n".join(problems)
