"""The workshop's decks (tools/workshop_decks.py): one a day, the agenda's slides only, and a PDF.

The fast test builds the decks' notebooks (no browser): each day has the lectures of its
table in workshop.md, in order, and as many slides as the agenda shows (tools/agenda.py),
and no heading of a section the agenda cuts, nor any cell under one, is in a deck (on a
slide or in the notes). The slow test also prints them in Chromium, as the tool does:
no slide of a day's deck overflows (tools/slides.py's MEASURE_ALL), and the PDF has one
page per slide. It builds into a temporary folder; `python tools/workshop_decks.py` writes
to build/workshop/ (git-ignored).
"""
import time

import nbformat
import pytest

import agenda  # tools/ is put on sys.path by conftest.py
import slides
import workshop_decks
from conftest import ROOT, slow
from test_browser import browser_tools

TEXT = (ROOT / "teaching" / "kit" / "workshop.md").read_text(encoding="utf-8")


def _check_decks(out, built):
    want_days = workshop_decks.days(TEXT)
    assert sorted(built) == sorted(want_days) == [1, 2], f"days built: {sorted(built)}"
    expected = agenda.expected(TEXT)
    for day, lessons in want_days.items():
        nb = nbformat.read(out / f"day{day}.ipynb", as_version=4)
        assert nb.metadata["workshop"]["lessons"] == lessons
        shown = sum(len(expected[n]["show"]) for n in lessons)
        assert built[day]["slides"] == len(slides.slides_of(nb)) == shown, (
            f"day {day}: {len(slides.slides_of(nb))} slides, the agenda shows {shown}")
        titles = [c for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("# ")]
        assert [int(c.source[2:].split(".")[0]) for c in titles] == lessons   # each lecture's title, in order
        lesson, shown_cut = None, []
        for cell in nb.cells:
            for level, text in slides.headings(cell):
                if level == 1:
                    lesson = int(text.split(".")[0])
                elif agenda.norm(text) in built[day]["lessons"][lesson]["cut"]:
                    shown_cut.append(f"lesson {lesson}: {text}")
        assert not shown_cut, f"day {day} shows sections the agenda cuts: {shown_cut}"
        assert (out / f"day{day}.css").exists()
    all_cut = {name for info in built.values() for c in info["lessons"].values() for name in c["cut"]}
    assert len(all_cut) >= 10, f"the cut table names sections; found {sorted(all_cut)}"


def test_each_day_has_the_agendas_slides_and_no_cut_section(tmp_path):
    built = workshop_decks.build(tmp_path, pdf=False)
    _check_decks(tmp_path, built)


@slow("about a minute in Chromium: every slide of both days printed")
def test_the_workshop_decks_print_a_page_a_slide_and_nothing_overflows(tmp_path):
    browser_tools()                      # skip without chromium or playwright (in CI: fail)
    start = time.perf_counter()
    built = workshop_decks.build(tmp_path)
    print(f"workshop decks built and printed in {time.perf_counter() - start:.0f} s: "
          + ", ".join(f"day {d} {info['slides']} slides" for d, info in built.items()))
    _check_decks(tmp_path, built)
    for day, info in built.items():
        assert info["pdf"] and info["pdf"].exists(), f"day {day}: no PDF"
        pages = workshop_decks.pdf_pages(info["pdf"])
        assert pages == info["slides"], f"day {day}: {pages} PDF pages for {info['slides']} slides"
        assert not info["problems"], f"day{day}.ipynb:\n" + "\n".join(info["problems"])
