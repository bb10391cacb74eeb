"""The two-day workshop's decks: one slideshow a day, the day's lectures cut down as the agenda says.

    python tools/workshop_decks.py                 # build/workshop/day1.ipynb, day1.pdf, day2...
    python tools/workshop_decks.py --no-pdf        # the notebooks only (no browser needed)
    python tools/workshop_decks.py --out DIR       # somewhere else than build/workshop/

teaching/kit/workshop.md's day tables ("## Day 1: ...", "## Day 2: ...", not the shorter
track) list each day's lectures in order, and tools/agenda.py computes from each lesson's
45-minute plan, less the rows the agenda's cut table names, which of the lesson's slides
a lecture shows. A day's deck is those slides, lesson after lesson, in one notebook: each
lesson's core path (the deck of tools/slides.py: the part before its `## Going deeper`
cell, solutions and helpers left out) with the skipped slides removed, and every cell under
a cut section's heading removed too (with its subsections), so that no cut section is on a
slide or in the speaker notes. A slide whose first cell was cut starts with its first
remaining cell; the cells keep their slide types, stored outputs and speaker notes, and
`dayN.css` hides the code of the cells whose slides show only their output, and the test
markers, as each lesson's own CSS does (by the cells' new positions).

The PDF is the deck as the room sees it, one page a slide at 1280x720, fragments shown:
JupyterLab's RISE draws each slide in headless Chromium (Debian's /usr/bin/chromium, as the
browser tests drive it), a screenshot is taken of each, and Pillow writes them as the
PDF's pages (RISE, inside JupyterLab, has no print view that Chromium's print can use).
Before that every slide is measured (tools/slides.py's MEASURE_ALL): a slide that overflows
is printed, and the exit status is 1.

The output goes to build/ (git-ignored): dayN.ipynb (open it in JupyterLab and press
Alt+R to present it; its cells show stored outputs, so do not run them: the cells that
define their helpers are not in it), dayN.css, rise.css and dayN.pdf.
tests/test_workshop_decks.py builds both decks and checks them. Course machinery,
written by hand.
"""
import argparse
import copy
import io
import pathlib
import re
import shutil
import sys
import time

import nbformat

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import agenda  # noqa: E402  (tools/agenda.py)
import slides  # noqa: E402  (tools/slides.py)

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "workshop"
DAY = re.compile(r"^## Day (\d+): ", re.M)


def days(text):
    """{day: [lesson numbers, in the agenda's order]} from workshop.md's main day tables."""
    found = {}
    for m in DAY.finditer(text):
        block = text[m.end():].split("\n## ", 1)[0]
        found[int(m[1])] = [int(row[2]) for row in map(agenda.LESSON_ROW.match, block.split("\n")) if row]
    return found


def notebook_of(n, root=ROOT):
    found = sorted((root / "notebooks").glob(f"{n:02d}_*.ipynb"))
    if not found:
        raise SystemExit(f"the agenda names lesson {n}, which notebooks/ does not have")
    return found[0]


def cut_sections(nb, page_text, cut):
    """The headings (normalised) of the sections the cut rows of a lesson's plan name."""
    order, _ = agenda._marks(nb)
    names = set()
    for _, part, _ in agenda.plan(page_text):
        if agenda.row_key(part) in cut and agenda.row_key(part) != agenda.OPENING:
            names |= agenda.row_sections(part, order)
    return names


def _under_cut(nb, names):
    """The ids of the cells under a heading in names (down to the next heading of its level or higher)."""
    found, level = set(), None
    for cell in nb.cells:
        heads = slides.headings(cell)
        if heads:
            first_level, text = heads[0]
            if level is not None and first_level <= level:
                level = None
            if level is None and agenda.norm(text) in names:
                level = first_level
        if level is not None:
            found.add(cell.id)
    return found


def lesson_part(n, text, root=ROOT):
    """What lesson n gives its day's deck: (cells with their slide types, output-only ids,
    marker ids, {'total', 'shown', 'cut'}); the cells are copies."""
    path = notebook_of(n, root)
    page = (root / "teaching" / f"{path.stem}.md").read_text(encoding="utf-8")
    nb = nbformat.read(path, as_version=4)
    cut_rows = agenda.cuts(text).get(n, ())
    show = agenda.lesson_slides(path, page, cut_rows)["show"]
    cut = _under_cut(nb, cut_sections(nb, page, cut_rows))
    types = {c.id: c.metadata.get("slideshow", {}).get("slide_type", "-") for c in nb.cells}
    where = {i: s["number"] for s in slides.deck(nb) for i in s["cells"]}
    kept, number, starts = [], 0, set()
    for cell in nb.cells:
        number = where.get(cell.id, number)                # a notes cell belongs to the slide in force
        if types[cell.id] == "skip" or number not in show or cell.id in cut:
            continue
        cell = copy.deepcopy(cell)
        if number not in starts and types[cell.id] not in ("slide", "subslide", "notes"):
            cell.metadata["slideshow"] = {"slide_type": "subslide"}   # its slide's start was cut
        if types[cell.id] != "notes":
            starts.add(number)
        kept.append(cell)
    total = len(slides.deck(nb))
    return kept, set(slides.output_only(nb)), set(slides.marked(nb)), {
        "total": total, "shown": len(show), "cut": sorted(cut_sections(nb, page, cut_rows))}


def day_css(nb, hidden, markers):
    """dayN.css: the code of the output-only cells and the test markers hidden, by position."""
    select = lambda chosen: ", ".join(f'[data-windowed-list-index="{k}"]'
                                      for k, c in enumerate(nb.cells) if c.id in chosen)
    text = ("/* Written by tools/workshop_decks.py from the lessons' cells: the cells listed (by\n"
            "   position) show their output without their code, as in each lesson's CSS, and the\n"
            "   others' first line, a test marker, is hidden. */\n")
    if any(c.id in hidden for c in nb.cells):
        text += (f".rise-enabled .reveal .jp-Cell:is({select(hidden)}) .jp-Cell-inputWrapper {{\n"
                 "  display: none;\n}\n")
    if any(c.id in markers for c in nb.cells):
        text += (f".rise-enabled .reveal .jp-Cell:is({select(markers)}) .cm-content > .cm-line:first-child {{\n"
                 "  display: none;\n}\n")
    return text


def build_day(day, lessons, text, root=ROOT):
    """One day's deck as a notebook, its CSS, and {lesson: counts} for the report."""
    cells, hidden, markers, counts, meta = [], set(), set(), {}, None
    for n in lessons:
        kept, out_only, marked, count = lesson_part(n, text, root)
        cells += kept
        hidden |= out_only
        markers |= marked
        counts[n] = count
        if meta is None:
            meta = nbformat.read(notebook_of(n, root), as_version=4).metadata
    ids = [c.id for c in cells]
    assert len(ids) == len(set(ids)), "two lessons share a cell id"
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata = {k: copy.deepcopy(v) for k, v in meta.items() if k in ("kernelspec", "language_info")}
    nb.metadata["rise"] = dict(slides.RISE_SETTINGS)
    nb.metadata["workshop"] = {"day": day, "lessons": lessons,
                               "built_by": "tools/workshop_decks.py from teaching/kit/workshop.md"}
    return nb, day_css(nb, hidden, markers), counts


def build(out=OUT, pdf=True, root=ROOT):
    """Write every day's deck (and PDF) to out; {day: {'slides', 'lessons', 'problems', 'pdf'}}."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text = (root / "teaching" / "kit" / "workshop.md").read_text(encoding="utf-8")
    shutil.copy(root / "notebooks" / "rise.css", out / "rise.css")
    built = {}
    for day, lessons in days(text).items():
        nb, css, counts = build_day(day, lessons, text, root)
        nbformat.write(nb, out / f"day{day}.ipynb")
        (out / f"day{day}.css").write_text(css, encoding="utf-8")
        built[day] = {"slides": len(slides.slides_of(nb)), "lessons": counts, "problems": [], "pdf": None}
    if pdf:
        print_decks(out, built)
    return built


def print_decks(out, built):
    """Measure every slide of each day's deck in Chromium, and write dayN.pdf, a page a slide."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_browser import CHROMIUM, CHROMIUM_ARGS, jupyterlab   # the browser tests' server and browser
    from playwright.sync_api import sync_playwright
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        settings = tmp / "settings" / "jupyterlab-rise" / "plugin.jupyterlab-settings"
        settings.parent.mkdir(parents=True)
        settings.write_text('{"transition": "none"}')          # no slide animations
        with jupyterlab(out, tmp) as (base, token), sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": slides.SCREEN[0], "height": slides.SCREEN[1]})
                page.set_default_timeout(60_000)
                for day, info in built.items():
                    info["pdf"], info["problems"] = _print_deck(page, base, token, out, day)
            finally:
                browser.close()
    shutil.rmtree(out / ".ipynb_checkpoints", ignore_errors=True)   # JupyterLab's, from opening the decks


FRAGMENTS_SHOWN = ".reveal .slides section .fragment { opacity: 1 !important; visibility: inherit !important; }"
PRESENT = "() => { const s = document.querySelector('.reveal .slides > section.present > section.present'); return s && s.id; }"


def _print_deck(page, base, token, out, day):
    from PIL import Image
    name = f"day{day}.ipynb"
    nb = nbformat.read(out / name, as_version=4)
    page.goto(f"{base}/rise/{name}?token={token}")
    page.locator(".reveal.ready .slides > section > section").first.wait_for(state="attached")
    measured = page.evaluate(slides.MEASURE_ALL)
    problems = slides.overflows(measured, nb)
    page.add_style_tag(content=FRAGMENTS_SHOWN)
    ids = [s["id"] for s in measured["slides"]]
    shots = []
    for k, slide_id in enumerate(ids):
        if k:
            page.keyboard.press("Alt+Space")               # reveal.js: the next slide
        page.wait_for_function(f"() => ({PRESENT})() === {slide_id!r}")
        page.wait_for_function("() => [...document.querySelectorAll('.reveal .slides section.present img')]"
                               ".every(i => i.complete)")
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        shots.append(Image.open(io.BytesIO(page.screenshot())).convert("RGB"))
    pdf = out / f"day{day}.pdf"
    shots[0].save(pdf, save_all=True, append_images=shots[1:], resolution=96.0)
    return pdf, problems


def pdf_pages(path):
    """The number of pages of a PDF that Pillow wrote (its page objects)."""
    return len(re.findall(rb"/Type\s*/Page\b(?!s)", pathlib.Path(path).read_bytes()))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(OUT), help="where to write (default: build/workshop)")
    parser.add_argument("--no-pdf", action="store_true", help="the notebooks only, no browser")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    built = build(args.out, pdf=not args.no_pdf)
    status = 0
    for day, info in built.items():
        full = sum(c["total"] for c in info["lessons"].values())
        print(f"day {day}: {info['slides']} slides (the full decks of its lessons: {full}); lessons "
              + ", ".join(f"{n} ({c['shown']} of {c['total']})" for n, c in info["lessons"].items()))
        if info["pdf"]:
            print(f"  {info['pdf']}: {pdf_pages(info['pdf'])} pages")
        for problem in info["problems"]:
            print(f"  overflows: {problem}")
            status = 1
    print(f"written to {args.out} in {time.perf_counter() - start:.0f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
