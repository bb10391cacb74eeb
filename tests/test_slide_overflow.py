"""No slide of any deck overflows: every slide of every lesson's slideshow, measured in Chromium.

tools/slides.py estimates what fits a 1280x720 slide; this check measures it. Each deck
(every lesson in notebooks/, and the Chinese edition in notebooks/zh/) is opened once as a
RISE slideshow in headless Chromium (Debian's), served by JupyterLab as test_slides.py
serves it (a copy of the lessons with notebooks/rise.css and their CSS, the stored outputs,
no cell run, no kernel started), and every slide is measured by one script in that page
(`slides.MEASURE_ALL`: reveal.js draws only the slides near the present one, so the
script draws them all, fragments included, and measures each). A deck fails, naming
the deck, the slide and its cells, when

- a slide is taller or wider than the screen;
- a code cell, an output, a markdown table or a code block in markdown scrolls sideways,
  or is cut or scrolls vertically; a table or a figure reaches past the slide's right edge;
- the slideshow has another number of slides than the metadata implies.

test_slides.py walks each deck slide by slide as a presenter does (fragments, slide
numbers, type sizes, figure scale: several seconds a deck); this check loads each deck
once and measures every slide in the page, a few seconds a deck, so it can look at every
deck, the workshop's too (tests/test_workshop_decks.py). Slow: in CI (COURSE_CI=1, where a
missing chromium or playwright fails it) and with COURSE_SLOW=1.
"""
import json
import time

import nbformat
import pytest

import slides  # tools/ is put on sys.path by conftest.py
from conftest import NOTEBOOKS, ROOT, require, slow
from test_browser import CHROMIUM, CHROMIUM_ARGS, browser_tools, jupyterlab
from test_slides import SCREEN, ZH_ALL, _end_sessions, _has_chinese_font, _rise_settings, serve_copy

DECKS = [("notebooks", p) for p in NOTEBOOKS] + [("notebooks/zh", p) for p in ZH_ALL]


def measure_decks(pages, urls, timeout_ms=60_000):
    """Open each deck's slideshow and measure all its slides (slides.MEASURE_ALL): {url: result}.

    Two pages take turns: while one deck is measured, the next one loads in the other page."""
    found = {}
    if urls:
        pages[0].goto(urls[0], wait_until="commit")
    for k, url in enumerate(urls):
        page = pages[k % len(pages)]
        if k + 1 < len(urls):
            pages[(k + 1) % len(pages)].goto(urls[k + 1], wait_until="commit")
        try:
            page.locator(".reveal.ready .slides > section > section").first.wait_for(
                state="attached", timeout=timeout_ms)
            found[url] = page.evaluate(slides.MEASURE_ALL)
        except Exception as e:                       # the deck's test reports it
            found[url] = f"the slideshow did not open or measure: {e}"
    return found


def deck_problems(measured, nb):
    """The overflows of a measured deck, and a slide count other than its metadata's."""
    expected = len(slides.slides_of(nb))
    problems = slides.overflows(measured, nb)
    if len(measured["slides"]) != expected:
        problems.insert(0, f"{len(measured['slides'])} slides in the slideshow, {expected} in the metadata")
    return problems


def _without_kernel(copy):
    """Name no installed kernel in a served copy: RISE then starts none (it draws the stored
    outputs either way), which saves a kernel's start, about a second a deck."""
    nb = json.loads(copy.read_text(encoding="utf-8"))
    nb["metadata"]["kernelspec"] = {"name": "none", "display_name": "none", "language": "python"}
    copy.write_text(json.dumps(nb), encoding="utf-8")


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Every deck measured once: a JupyterLab serving a copy of the lessons (English and
    Chinese, with their CSS), and two pages of headless Chromium; {(where, name): result}."""
    sync_playwright = browser_tools()
    tmp = tmp_path_factory.mktemp("overflow")
    served = serve_copy(tmp)
    for copy in [*served.glob("*.ipynb"), *served.glob("zh/*.ipynb")]:
        _without_kernel(copy)
    _rise_settings(tmp / "settings")
    decks = [(where, path.name) for where, path in DECKS
             if not where.endswith("zh") or _has_chinese_font()]
    start = time.perf_counter()
    with jupyterlab(served.parent, tmp) as (base, token), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            pages = [browser.new_page(viewport=SCREEN) for _ in range(2)]
            urls = {deck: f"{base}/rise/{deck[0]}/{deck[1]}?token={token}" for deck in decks}
            found = measure_decks(pages, list(urls.values()))
            _end_sessions(base, token)
        finally:
            browser.close()
    print(f"\n{len(decks)} decks measured in {time.perf_counter() - start:.1f} s "
          "(JupyterLab's start included)")
    return {deck: found[url] for deck, url in urls.items()}


@slow("a few seconds a deck in Chromium, and a JupyterLab to start")
@pytest.mark.parametrize("where,path", DECKS, ids=lambda d: d if isinstance(d, str) else d.stem)
def test_no_slide_of_any_deck_overflows(measured, where, path):
    if where.endswith("zh"):
        require(_has_chinese_font(), "no Chinese font for Chromium: the slides would show boxes "
                "(Debian: apt-get install fonts-wqy-microhei)")
    result = measured[(where, path.name)]
    assert not isinstance(result, str), f"{where}/{path.name}: {result}"
    problems = deck_problems(result, nbformat.read(path, as_version=4))
    assert not problems, f"{where}/{path.name}:\n" + "\n".join(problems)


def test_the_overflow_sentences_name_the_slide_and_its_cells():
    """slides.overflows, on a made-up measurement (no browser)."""
    nb = {"cells": [{"id": "title"}, {"id": "wide-table"}, {"id": "long-output"}]}
    measured = {"screen": [1280, 720], "slides": [
        {"number": 1, "id": "slide-0-0", "height": 400, "width": 1280, "cells": [0],
         "wide": [], "tall": [], "beyond": []},
        {"number": 2, "id": "slide-1-0", "height": 790, "width": 1300, "cells": [1, 2],
         "wide": [1], "tall": [2], "beyond": [1]}]}
    problems = slides.overflows(measured, nb)
    assert problems[0] == ("slide 2 (slide-1-0) is 1300x790 px, more than the 1280x720 screen; "
                           "its cells: wide-table, long-output")
    assert [p.split(": ", 1)[1] for p in problems[1:]] == [
        "a code block, output or table scrolls sideways: wide-table",
        "a code block, output or table is cut or scrolls vertically: long-output",
        "a table or figure reaches past the slide's right edge: wide-table"]
    assert not slides.overflows({"screen": [1280, 720], "slides": measured["slides"][:1]}, nb)
    assert ROOT.exists()
