"""Every lesson is also a lecture: a RISE slideshow (jupyterlab-rise) whose slides fit the screen.

tools/slides.py writes each cell's `metadata.slideshow.slide_type` by rules. The fast
tests check the stored metadata: it is what the script writes, the title and every
`## ` heading start a slide, and the Colab setup cell and the solutions are left out.

The browser test opens every lesson as a slideshow, as "Render as slideshow" does, in
headless Chromium (Debian's) at 1280x720, with test_browser.py's server and browser
settings. The lessons are served as stored: RISE shows the stored outputs, no cell
runs. It goes through the slides with Alt+Space (reveal.js: the next slide, fragments
skipped), as a presenter does, and checks that the deck has the slides the metadata
implies, each with the cells and fragments it implies, and that no slide is taller or
wider than the screen (measured in the page: a slide's height includes its fragments,
shown or not). A screenshot of each lesson's fullest slide (by the script's estimate),
with its fragments shown, and of any slide that overflows, is kept in test-artifacts/.
Without chromium or playwright it skips; in CI (COURSE_CI=1) that is a failure.

Every lesson costs about 5-15 s in the browser, and JupyterLab and Chromium take more to
start, so the walk is a slow check: CI (COURSE_CI=1) and COURSE_SLOW=1 walk every lesson,
and the README's test command, which must stay inside the suite's 3-minute budget, runs
only the fast tests of the metadata.
"""
import contextlib
import json
import re
import time
import urllib.request

import nbformat
import pytest

import slides  # tools/ is put on sys.path by conftest.py
from conftest import NOTEBOOKS, cells, slow, source
from test_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, browser_tools, jupyterlab

SCREEN = {"width": slides.SCREEN[0], "height": slides.SCREEN[1]}


def _types(path):
    return [c["metadata"].get("slideshow", {}).get("slide_type") for c in cells(path)]


def test_slide_metadata_is_what_tools_slides_writes():
    stale = {}
    for path in NOTEBOOKS:
        wanted = slides.slide_types(nbformat.read(path, as_version=4))
        stale[path.name] = [f"{c['id']}: {t} (tools/slides.py: {wanted[c['id']]})"
                            for c, t in zip(cells(path), _types(path)) if t != wanted[c["id"]]]
    stale = {name: diff for name, diff in stale.items() if diff}
    assert not stale, ("slide metadata out of date, run `python tools/slides.py`:\n"
                       + "\n".join(f"{name}: {', '.join(diff[:3])}" + (" ..." if len(diff) > 3 else "")
                                   for name, diff in stale.items()))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_title_and_sections_start_slides_setup_and_solutions_are_left_out(path):
    nb_cells, types = cells(path), _types(path)
    assert all(t in slides.TYPES for t in types), f"{path.name}: unknown slide types {set(types)}"
    assert types[0] == "slide", f"{path.name}: the title cell must start the first slide"
    for cell, kind in zip(nb_cells, types):
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
    copy = tmp_path / path.name
    nbformat.write(nb, copy)
    assert slides.main([str(copy), "--check"]) == 1
    assert slides.main([str(copy)]) == 0
    assert copy.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")
    assert slides.main([str(copy), "--check"]) == 0


# --- the slideshow in a browser -------------------------------------------------------

# The present (sub)slide once its cells are drawn: its size against the screen's, the
# notebook indices of its cells, its fragments, and the cells that need a scroll bar.
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
  const wide = [...sec.querySelectorAll(
      '.cm-scroller, .jp-OutputArea-output, .jp-RenderedMarkdown table, .jp-RenderedMarkdown pre')]
      .filter(e => e.scrollWidth > e.clientWidth + 1)
      .map(e => +e.closest('.jp-Cell').dataset.windowedListIndex);
  return {id: sec.id, height: sec.scrollHeight, width: sec.scrollWidth,
          screen: [screen.offsetWidth, screen.offsetHeight],
          cells: shown.map(c => +c.dataset.windowedListIndex), wide: [...new Set(wide)],
          fragments: sec.querySelectorAll('.fragment').length};
}"""


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


def _show_lesson(page, base, token, path):
    """Open one lesson as a slideshow and go through it; its slide count and its problems."""
    nb = nbformat.read(path, as_version=4)
    index = {c.id: i for i, c in enumerate(nb.cells)}
    kinds = {c.id: c.metadata.get("slideshow", {}).get("slide_type", "-") for c in nb.cells}
    expected = slides.slides_of(nb)
    # the slide the estimate calls fullest is the one to look at
    fullest = max(range(len(expected)), key=lambda k: sum(
        slides.cell_height(nb.cells[index[i]]) for i in expected[k]))

    page.goto(f"{base}/rise/notebooks/{path.name}?token={token}")
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
        if slide["cells"] != [index[i] for i in cell_ids]:
            problems.append(f"{where} shows cells {slide['cells']}, the metadata says "
                            f"{[index[i] for i in cell_ids]}")
        fragments = sum(kinds[i] == "fragment" for i in cell_ids)
        if slide["fragments"] != fragments:
            problems.append(f"{where} has {slide['fragments']} fragments, the metadata {fragments}")
        over = slide["height"] > slide["screen"][1] or slide["width"] > slide["screen"][0]
        if over:
            problems.append(f"{where} is {slide['width']}x{slide['height']} px, more than the "
                            f"{slide['screen'][0]}x{slide['screen'][1]} screen; its cells: "
                            + ", ".join(nb.cells[i].id for i in slide["cells"]))
        if slide["wide"]:
            problems.append(f"{where}: cells scroll sideways: "
                            + ", ".join(nb.cells[i].id for i in slide["wide"]))
        if over or slide["wide"] or k == fullest:
            for _ in range(fragments):                   # everything on it, as the audience sees it
                page.keyboard.press("Space")
            page.screenshot(path=ARTIFACTS / f"slides_{path.stem}_{k + 1:02d}.png")
    return len(ids), problems


@slow("5-15 s a lesson in Chromium, and a JupyterLab to start")
def test_every_lesson_as_a_slideshow_fits_the_screen(tmp_path):
    sync_playwright = browser_tools()
    ARTIFACTS.mkdir(exist_ok=True)
    for old in ARTIFACTS.glob("slides_*.png"):
        old.unlink()

    served = tmp_path / "course" / "notebooks"       # a copy: nothing can write to the lessons
    served.mkdir(parents=True)
    for path in NOTEBOOKS:
        (served / path.name).write_bytes(path.read_bytes())
    _rise_settings(tmp_path / "settings")

    start, report, problems = time.perf_counter(), [], []
    with jupyterlab(served.parent, tmp_path) as (base, token), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                     args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=SCREEN)
        page.set_default_timeout(60_000)
        try:
            for path in NOTEBOOKS:
                t = time.perf_counter()
                count, found = _show_lesson(page, base, token, served / path.name)
                _end_sessions(base, token)
                report.append(f"{path.stem} {count} slides {time.perf_counter() - t:.1f} s")
                problems += [f"{path.name}: {p}" for p in found]
        finally:
            browser.close()
    print(f"slideshows in {time.perf_counter() - start:.0f} s: " + "; ".join(report))
    assert not problems, "\n".join(problems)
