"""The teacher's guide (teaching/): its structure, checked so that it cannot drift from the lessons.

One page per lesson, named like its notebook (teaching/01_devices.md for
notebooks/01_devices.ipynb), with the same sections in the same order; exactly three
questions, each answered; 45- and 90-minute plans whose minutes fit, each with a pause
for a question. Every GPU-only cell of a lesson (``d2l.show_recording('<id>', gpus=N)``)
is listed on its page with its number of GPUs, and no page names an id that no cell has.
Every range a row of that table quotes, ``V (L to H)`` or ``V (L–H)``, is one of the cell's
expected numbers (d2l_utils/expectations) at the precision printed. Every section a page
names as § "..." is a heading of its lesson, every relative link resolves, and the index's
table has the right counts. Nothing is executed.
"""
import functools
import re
from collections import Counter

import pytest
from conftest import NOTEBOOKS, ROOT, cells, source

from d2l_utils import gpu_models
from d2l_utils.expectations import expected_for
from d2l_utils.recordings import gpu_cells

TEACHING = ROOT / "teaching"
INDEX = TEACHING / "README.md"
PAGES = [TEACHING / f"{nb.stem}.md" for nb in NOTEBOOKS]
SECTIONS = ["## 45 minutes", "## 90 minutes", "## Run live", "## Without a GPU: what to expect", "## Questions",
            "## Common mistakes", "## Skip when short of time", "## As a slideshow"]
PLANS = {"## 45 minutes": 45, "## 90 minutes": 90}
LESSON_NUMBERS = "|".join(nb.name[:2] for nb in NOTEBOOKS)
# A cell id as the tools read it (d2l_utils.recordings), starting with a lesson's number,
# so that '64-bit' is not taken for one.
CELL_ID = re.compile(rf"(?<![\w-])((?:{LESSON_NUMBERS})-[a-z0-9]+(?:-[a-z0-9]+)*)(?![\w-])")
SECTION_REF = re.compile(r'§ "([^"]+)"')
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def by_lesson():
    """{notebook name: {cell id: gpus}} for every GPU-only cell."""
    found = {nb.name: {} for nb in NOTEBOOKS}
    for lesson, cell_id, gpus, _ in gpu_cells(ROOT / "notebooks"):
        found[lesson][cell_id] = gpus
    return found


GPU_CELLS = by_lesson()


def section(text, heading):
    """The lines under ``heading`` up to the next heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines))
                if re.match(r"#{1,%d} " % level, lines[i])), len(lines))
    return lines[start:end]


def table_rows(lines):
    """The cells of a Markdown table's body rows (the header and the separator left out)."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in lines if line.strip().startswith("|")]
    return [r for r in rows[1:] if not all(re.fullmatch(r":?-+:?", c) for c in r)]


def headings(notebook):
    """The headings of a notebook's Markdown cells, without the #'s."""
    return {line.lstrip("#").strip() for c in cells(notebook) if c["cell_type"] == "markdown"
            for line in source(c).splitlines() if re.match(r"#{1,6} ", line)}


def slug(heading):
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def pairs():
    return list(zip(NOTEBOOKS, PAGES))


# A number as a page prints it: 1,026, 0.48, 1.1·10⁻⁶.
NUMBER = r"\d[\d,]*(?:\.\d+)?(?:·10⁻?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)?"
# A range in brackets, perhaps after a word or two ("(0.48–0.63)", "(model, 0.105 to 0.6)").
RANGE = rf"\([^\d()]{{0,12}}?(?P<low>{NUMBER}) ?(?:to|–|-) ?(?P<high>{NUMBER})[^()]*\)"
# The value it belongs to, before it: a number (not part of a word: H200), then no number
# but inside a word ("ms on the H100", "GiB in float32", "of the time").
VALUE_AND_RANGE = re.compile(rf"(?<![\w.,·⁻])(?P<value>{NUMBER})(?:[^\d()]|(?<=\w)\d){{0,40}}?{RANGE}")
# A share the cell prints as 0.51 may be quoted as 51%, a time it prints as 848 ms as 0.85 s.
SCALES = (1, 0.01, 1000)


def quoted(text):
    """A quoted number as (value, half a unit of its last digit): '2.5' is (2.5, 0.05)."""
    mantissa, _, exponent = text.replace(",", "").partition("·10")
    scale = 10.0 ** int(exponent.translate(str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789"))) if exponent else 1.0
    decimals = len(mantissa.partition(".")[2])
    return float(mantissa) * scale, 0.5 * 10.0 ** -decimals * scale


@functools.lru_cache(maxsize=None)
def expected_numbers(cell_id):
    """(value, low, high) of every number item of the cell, on every GPU of the datasheet table."""
    return {(i["value"], i["low"], i["high"]) for gpu in gpu_models.DATASHEET.values()
            for i in expected_for(cell_id, gpu).items if i["kind"] == "number"}


def matches(quote, expected):
    """Whether the quoted (value, low, high) are ``expected``'s at the precision printed."""
    return any(all(abs(q * scale - x) <= half * scale * (1 + 1e-9)
                   for (q, half), x in zip(map(quoted, quote), expected))
               for scale in SCALES)


def gpu_rows(page):
    """(cell id, what it shows) for each row of the page's table of GPU-only cells."""
    rows = table_rows(section(page.read_text(encoding="utf-8"), "## Without a GPU: what to expect"))
    return [(r[0].strip("`"), r[2]) for r in rows if len(r) >= 3]


def test_every_lesson_has_a_page_and_every_page_a_lesson():
    assert NOTEBOOKS
    missing = [p.name for p in PAGES if not p.exists()]
    assert not missing, f"teaching/ has no page for these lessons: {missing}"
    extra = {p.name for p in TEACHING.glob("*.md")} - {p.name for p in PAGES} - {INDEX.name}
    assert not extra, f"teaching/ has pages for no lesson: {sorted(extra)}"


@pytest.mark.parametrize("notebook, page", pairs(), ids=lambda p: p.name)
def test_page_has_the_sections_in_order(notebook, page):
    lines = page.read_text(encoding="utf-8").splitlines()
    found = [line for line in lines if line.startswith("## ")]
    assert found == SECTIONS, f"{page.name}: sections {found}, expected exactly {SECTIONS}"
    assert f"../notebooks/{notebook.name}" in page.read_text(encoding="utf-8"), (
        f"{page.name} must link its notebook")


@pytest.mark.parametrize("notebook, page", pairs(), ids=lambda p: p.name)
def test_plans_fit_their_time_and_pause_for_questions(notebook, page):
    text = page.read_text(encoding="utf-8")
    for heading, limit in PLANS.items():
        rows = table_rows(section(text, heading))
        assert len(rows) >= 3, f"{page.name}, {heading}: a table of at least three parts"
        bad = [r for r in rows if not re.fullmatch(r"[1-9]\d*", r[0])]
        assert not bad, f"{page.name}, {heading}: the first column holds minutes: {bad}"
        total = sum(int(r[0]) for r in rows)
        assert total <= limit, f"{page.name}, {heading}: the parts add up to {total} minutes"
        assert any("**Pause:**" in " ".join(r) for r in rows), (
            f"{page.name}, {heading}: say where to pause for a question (**Pause:**)")


@pytest.mark.parametrize("notebook, page", pairs(), ids=lambda p: p.name)
def test_exactly_three_questions_each_with_an_answer(notebook, page):
    lines = section(page.read_text(encoding="utf-8"), "## Questions")
    titles = [line for line in lines if line.startswith("### ")]
    assert [t.split(".")[0] for t in titles] == ["### Q1", "### Q2", "### Q3"], (
        f"{page.name}: three questions titled '### Q1. ...' to '### Q3. ...', got {titles}")
    text = page.read_text(encoding="utf-8")
    for title in titles:
        body = section(text, title)
        assert sum(line.startswith("**Answer.**") for line in body) == 1, (
            f"{page.name}, {title}: one answer, starting with **Answer.**")
        answer = " ".join(body[next(i for i, l in enumerate(body) if l.startswith("**Answer.**")):])
        assert len(answer.split()) >= 20, f"{page.name}, {title}: the answer is too short to be precise"


@pytest.mark.parametrize("notebook, page", pairs(), ids=lambda p: p.name)
def test_every_gpu_only_cell_is_listed_with_its_gpus(notebook, page):
    rows = table_rows(section(page.read_text(encoding="utf-8"), "## Without a GPU: what to expect"))
    listed = {r[0].strip("`"): r[1] for r in rows if len(r) >= 3}
    expected = {cell_id: str(gpus) for cell_id, gpus in GPU_CELLS[notebook.name].items()}
    assert listed == expected, (
        f"{page.name}: the table under 'Without a GPU: what to expect' must list exactly this lesson's "
        f"GPU-only cells as | `id` | GPUs | what it shows |; listed {listed}, the lesson has {expected}")
    text = " ".join(section(page.read_text(encoding="utf-8"), "## Without a GPU: what to expect"))
    for cell_id, gpus in GPU_CELLS[notebook.name].items():
        if gpus >= 2:   # the recording machine has one GPU: say what to do instead
            assert text.count(cell_id) >= 2 and "multi-GPU server" in text, (
                f"{page.name}: below the table, say what to do for {cell_id}, which needs {gpus} "
                "GPUs and has no recording (describe it, or run it on a multi-GPU server)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_quoted_ranges_are_the_expectations(page):
    stale = []
    for cell_id, shows in gpu_rows(page):
        found = list(VALUE_AND_RANGE.finditer(shows))
        unread = len(re.findall(RANGE, shows)) - len(found)
        assert not unread, (f"{page.name}, {cell_id}: write each range right after its value, "
                            f"as V (L to H) or V unit (L to H), with no number between them: {shows}")
        stale += [f"{cell_id}: {m[0]}" for m in found
                  if not any(matches(m.group("value", "low", "high"), e) for e in expected_numbers(cell_id))]
    assert not stale, (f"{page.name} quotes ranges that no number of the cell's expectation has, on any GPU "
                       "of d2l_utils/gpu_models.py (print them with d2l_utils.expectations.show_expected): "
                       + "; ".join(stale))


@pytest.mark.parametrize("notebook, page", pairs(), ids=lambda p: p.name)
def test_counts_of_gpu_only_cells_in_the_text_are_right(notebook, page):
    text = " ".join(page.read_text(encoding="utf-8").split())
    counts = [int(n) for n in re.findall(r"(\d+) GPU-only cells?\b", text)]
    assert counts, f"{page.name}: say how many GPU-only cells the lesson has ('N GPU-only cells')"
    assert set(counts) == {len(GPU_CELLS[notebook.name])}, (
        f"{page.name} says {counts} GPU-only cells; the lesson has {len(GPU_CELLS[notebook.name])}")


@pytest.mark.parametrize("page", [INDEX, *PAGES], ids=lambda p: p.name)
def test_no_page_names_a_cell_that_does_not_exist(page):
    known = {cell_id: lesson for lesson, ids in GPU_CELLS.items() for cell_id in ids}
    named = set(CELL_ID.findall(page.read_text(encoding="utf-8")))
    unknown = sorted(named - set(known))
    assert not unknown, f"{page.name} names GPU-only cells that no lesson has: {unknown}"
    if page != INDEX:
        elsewhere = sorted(i for i in named if known[i][:2] != page.name[:2])
        assert not elsewhere, f"{page.name} names cells of other lessons: {elsewhere}"


@pytest.mark.parametrize("notebook, page", pairs(), ids=lambda p: p.name)
def test_named_sections_are_headings_of_the_lesson(notebook, page):
    named = {" ".join(ref.split()) for ref in SECTION_REF.findall(page.read_text(encoding="utf-8"))}
    missing = sorted(named - headings(notebook))
    assert not missing, (f"{page.name} names sections that {notebook.name} does not have "
                         f"(renamed?): {missing}")


@pytest.mark.parametrize("page", [INDEX, *PAGES], ids=lambda p: p.name)
def test_relative_links_resolve(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):                 # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: broken link {target}"
        if anchor and dest.suffix == ".md":
            slugs = {slug(line.lstrip("#").strip())
                     for line in dest.read_text(encoding="utf-8").splitlines() if line.startswith("#")}
            assert anchor in slugs, f"{page.name}: no heading for the anchor in {target}"


def test_index_lists_every_page_with_its_gpu_cells():
    rows = table_rows(section(INDEX.read_text(encoding="utf-8"), "## The lessons"))
    for notebook, page in pairs():
        row = next((r for r in rows if f"]({page.name})" in " ".join(r)), None)
        assert row is not None, f"teaching/README.md: no row links {page.name}"
        assert f"](../notebooks/{notebook.name})" in " ".join(row), f"the row of {page.name} links its notebook"
        gpus = Counter(g >= 2 for g in GPU_CELLS[notebook.name].values())
        assert row[-2:] == [str(sum(gpus.values())), str(gpus[True])], (
            f"teaching/README.md, row of {page.name}: GPU-only cells and those needing 2+ GPUs "
            f"should read {sum(gpus.values())} and {gpus[True]}, not {row[-2:]}")


@pytest.mark.parametrize("notebook,page", pairs(), ids=lambda x: getattr(x, "name", ""))
def test_the_slideshow_notes_quote_the_decks_size_and_section_ranges(notebook, page):
    """The deck's count and each quoted section's slides ("§ "Title" 5-7") are the deck's, as
    tools/slides.py builds it; the kit's other slide numbers are not checked yet."""
    import nbformat
    import slides  # tools/ is put on sys.path by conftest.py
    nb = nbformat.read(notebook, as_version=4)
    text = " ".join(" ".join(section(page.read_text(encoding="utf-8"), "## As a slideshow")).split())
    count = re.search(r"(\d+) slides", text)
    assert count and int(count[1]) == len(slides.slides_of(nb)), f"{page.name}: the deck has {len(slides.slides_of(nb))} slides"
    spans = {" ".join(k.split()): v for k, v in slides.sections(nb).items()}
    for title, first, last in re.findall(r'§ "([^"]+)" (\d+)(?:–(\d+))?', text):
        assert title in spans, f"{page.name}: no section {title!r}"
        quoted_span = (int(first), int(last or first))
        assert quoted_span == spans[title], f"{page.name}: § {title!r} is on slides {spans[title]}, not {quoted_span}"



@pytest.mark.parametrize("notebook, page", pairs(), ids=lambda p: p.name)
def test_the_lesson_and_its_page_say_which_run_made_the_stored_outputs(notebook, page):
    """The lesson's first output (``d2l_utils.this_run()`` in its setup cell) and the line under its
    page's title name the run that tools/execute_notebooks.py recorded in the notebook's metadata."""
    import json

    import execute_notebooks
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    run = nb["metadata"]["course"]["last_run"]
    assert page.read_text(encoding="utf-8").count("*Stored outputs: ") == 1, f"{page.name}: one stamp line"
    assert execute_notebooks.stamp_line(run) in page.read_text(encoding="utf-8"), (
        f"{page.name}: the line under its title must be {execute_notebooks.stamp_line(run)!r} "
        "(python tools/execute_notebooks.py --pages writes it)")
    printed = "".join("".join(o.get("text", "")) for o in nb["cells"][1].get("outputs", [])
                      if o.get("name") == "stdout")
    stamp = f"This run: PyTorch {run['torch']}, Python {run['python']}, {run['date']} (UTC), "
    assert stamp in printed, f"{notebook.name}: its setup cell printed {printed!r}, its metadata says {run}"
    gpus = printed.split(stamp, 1)[1].strip()
    assert (gpus == "no GPU") == (run["accelerator"] is None), (notebook.name, gpus, run["accelerator"])
