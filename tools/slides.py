"""Give every lesson the slide metadata of a RISE slideshow (a lecture, not the notebook cut up).

    python tools/slides.py                 # write the slide types of every lesson
    python tools/slides.py notebooks/01_devices.ipynb
    python tools/slides.py --check         # exit 1 if a lesson's slides differ from ours
    python tools/slides.py --report        # each lesson's slides: numbers, titles, heights,
                                           # what went to the notes and why, and what the
                                           # room cannot read (an output without a word,
                                           # long blocks, table rows that wrap)
    python tools/slides.py --sections notebooks/03_copies_between_devices.ipynb
                                           # each section's slide numbers (for the teacher's kit)

In JupyterLab with jupyterlab-rise, View -> Render as slideshow (Alt+R) shows a lesson
as reveal.js slides; each cell's `metadata.slideshow.slide_type` says where it goes:
"slide" starts a slide (a column of the deck), "subslide" a slide below it, "fragment"
appears on the next key press, "-" stays with the cell before it, "notes" goes to the
speaker notes (press T) and "skip" is left out.

A deck is a 45-minute lecture: about 15-25 slides, type a room can read (code at
CODE_PX = 18 px, set by notebooks/rise.css), and on each slide what the room should
look at. So the types follow from rules, in this order (the first that applies):

1. The first cell (the title, what you will learn, what you need) is a slide of its own.
2. Left out (skip): the lesson's depth (from its heading tagged `depth` on: the deck is the
   core path; see tools/sitting.py), the Colab setup cell (the first code cell, guarded by
   `'google.colab' in sys.modules`), the worked solutions (`#@title Solution ...`; the
   exercises themselves stay, in the summary), code after the first solution (its
   housekeeping), and empty cells.
3. A markdown cell with a `## ` heading starts a slide, one with a `### ` heading a
   subslide, or continues the slide before when it fits there with its first block (a
   short subsection). A heading further down a cell counts too; `--report` asks to split it.
4. A cell's tags, which a lesson's author sets (JupyterLab: the property inspector, Cell
   Tags) and which survive any edit of its text: `slide-show` shows a code cell with its
   code, `slide-output` shows only its output, `slide-notes` puts a cell in the speaker
   notes, `slide-skip` leaves it out. (Not on heading cells: a section always starts a
   slide.)
5. Prose without a heading: a short lead-in (at most LEAD_CHARS characters as read, a sentence
   or two) is shown with the code it introduces; longer prose is what the speaker says,
   so it becomes speaker notes, and so does a lead-in whose code cell the rules leave off
   the slides (too tall with its code, or long code without output) when no shown code
   cell follows those: it would introduce a cell the room never sees. One before a
   helper or a check stays, and one whose next shown code cell comes after such cells is
   shown with that cell.
6. Code the room need not read is left out (the speaker notes are for what to say, not
   code): a helper (`#@save`: the slide shows where it is used), a cell that only checks
   (asserts, no output), a cell that defines a drawing function, and a cell of more than
   LONG_CODE lines of code (comments and blank lines not counted) that prints nothing.
7. Code whose result is the point shows its output without its code (on the slides only:
   the notebook view is unchanged): a GPU-only cell (`d2l.show_recording(...)`, whose
   output is the GPU's result or, without a GPU, the recording) of more than LONG_CODE
   lines, a cell that draws a figure (SHORT_DRAWING lines or more, or
   `matplotlib.patches`), any other cell of more than LONG_CODE lines with an output, and
   a cell too tall for a slide whose output alone fits. jupyterlab-rise has no cell
   metadata for this, but it loads `<lesson>.css` beside a notebook in the slideshow only;
   this script writes that file, hiding those cells' code by their position.
8. A cell that cannot fit a slide even on its own (a long output, a tall plot) is left
   out, and `--report` names it: shorten it to show it.
9. What remains of a section is cut into blocks: a lead-in with the code cell after it
   ("-"), or a code cell or lead-in on its own. A block is a fragment of the current
   slide if the slide still fits the 1280x720 screen with it, else it starts a
   subslide. A lead-in whose code would not fit beside it goes to the notes.
10. OVERRIDES, a table of cell id -> slide type (or "output"), has the last word.
11. Speaker notes a presenter reads at a glance: a (sub)slide keeps, in order, the notes
    cells that fit in NOTES_WORDS words; the others are left out.
12. A shown code cell's first line, when it is a test marker (`# NBVAL_IGNORE_OUTPUT`), is
    hidden on the slides by `<lesson>.css`, like the code of rule 7.

Every lesson also gets the notebook metadata `rise` (RISE_SETTINGS: slide numbers
"current/total", which the teacher's kit quotes, and a scroll bar rather than a cut when a
live run prints more than the stored output).

Whether a cell fits is estimated from its source and stored outputs (lines, wrapped
paragraphs, image sizes) with the sizes that JupyterLab's RISE draws at 1280x720 with
notebooks/rise.css, measured in Chromium; tests/test_slides.py opens every lesson as a
slideshow in a real browser and checks that no slide overflows the screen, and
tests/test_slide_overflow.py measures every slide of every deck in one page load a deck
(MEASURE_ALL, below; tools/workshop_decks.py uses it too). The script
changes metadata only (cell slide types, the notebook's `rise` settings), never sources or
outputs, writes with nbformat (cell ids kept), and writes `<lesson>.css` beside the lesson
(removing one it wrote before when no cell needs it). It is deterministic and idempotent:
run it again after re-executing a lesson, since outputs take room too.
"""
import argparse
import base64
import math
import pathlib
import re
import struct
import sys

import nbformat
import sitting  # tools/sitting.py: where a lesson's depth starts

ROOT = pathlib.Path(__file__).resolve().parent.parent
TYPES = ("slide", "subslide", "fragment", "-", "skip", "notes")
TAGS = {"slide-show": "code", "slide-output": "output", "slide-notes": "notes", "slide-skip": "skip"}
RISE_SETTINGS = {"slideNumber": "c/t", "scroll": True}
CSS_MARK = "/* Written by tools/slides.py"

# --- the screen, and how tall RISE (JupyterLab 4.6, jupyterlab-rise 0.43, reveal.js theme
# 'simple') draws things with notebooks/rise.css: measured in Chromium at 1280x720.
SCREEN = (1280, 720)
BUDGET = 650            # px of a 720 px slide a (sub)slide may fill by estimate: a margin for errors
CODE_PX = 18            # font size of code and text outputs (rise.css: --jp-code-font-size)
PROSE_PX = 18           # font size of prose (rise.css: --jp-content-font-size1)
LEAD_CHARS = 350        # prose up to this long is a lead-in shown on the slide; longer: notes
NOTES_WORDS = 300       # speaker notes of one (sub)slide, at most (words as read)
WORDY_CHARS = 600       # --report: a (heading) cell with more prose than this is wordy for a slide
LONG_CODE = 10          # lines of code (no comments, no blank lines) a slide shows at most
SHORT_DRAWING = 6       # a figure's cell of this many lines or more shows the figure only
TEXT_CPL = 124          # characters of prose per line (18 px, 1250 px wide)
LIST_CPL = 112          # characters of a list item per line
CODE_CPL = 110          # characters of code or output per line before it wraps (10.84 px each)
LINE = 25.2             # px per line of code in a code cell
OUT_LINE = 23.4         # px per line of text output
TEXT_LINE = 23.4        # px per line of prose
LIST_LINE = 22.5        # px per line of a bulleted or numbered list
MD_CODE_LINE = 23.54    # px per line of a code block in markdown
TABLE_ROW = 28.5        # px per row of a markdown table
MD_CELL = 10            # px around a markdown cell
CODE_CELL = 20          # px around a code cell's editor
OUTPUT_ONLY_CELL = 10   # px around a code cell whose code is hidden
OUTPUT = 8.2            # px around each stream output
RESULT = 14.1           # px around a result or displayed text
IMAGE = 68.4            # px around an image output
IMAGE_WIDTH = 1198      # widest an image is drawn (px); a wider one is scaled down
FIGURE_PT = 12          # the smallest font size a figure may use (at 100 dpi, shown 1:1)

# Cell id -> slide type (or "output"), where the rules above do not give a good slide.
OVERRIDES = {}


def _source(cell):
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _visible_text(markdown):
    """The text a reader sees of a markdown fragment (links, code marks and emphasis dropped)."""
    text = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", markdown)              # images: alt text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)                   # links: their text
    return re.sub(r"[`*_]", "", text)


def _wrapped(text, per_line):
    """Lines a text takes once wrapped at per_line characters."""
    return sum(max(1, math.ceil(len(line) / per_line)) for line in text.split("\n"))


def markdown_blocks(markdown):
    """The blocks of a markdown cell as (kind, text): heading1..3, list, code, table, para."""
    blocks, lines, i = [], markdown.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            blocks.append(("code", "\n".join(lines[i + 1:j])))
            i = j + 1
        elif m := re.match(r"(#{1,6}) ", line):
            blocks.append((f"heading{min(len(m.group(1)), 3)}", line[m.end():]))
            i += 1
        else:
            j = i
            while j < len(lines) and lines[j].strip() and not lines[j].startswith("```") \
                    and not re.match(r"#{1,6} ", lines[j]):
                j += 1
            text = "\n".join(lines[i:j])
            if re.match(r"\s*([*+-]|\d+\.) ", line):
                blocks.append(("list", text))
            elif line.lstrip().startswith("|"):
                blocks.append(("table", text))
            else:
                blocks.append(("para", text))
            i = j
    return blocks


def markdown_height(markdown):
    """Estimated px of a rendered markdown cell.

    Each block is (margin above, height, margin below); adjacent margins collapse to the
    larger one, and the first block's margin above and the last one's below count too.
    """
    boxes = []
    for kind, text in markdown_blocks(markdown):
        if kind.startswith("heading"):
            top, height = {"heading1": (26.4, 52.8), "heading2": (20.4, 40.8),
                           "heading3": (16.2, 32.4)}[kind]
            lines = _wrapped(_visible_text(text), {"heading1": 50, "heading2": 66, "heading3": 84}[kind])
            boxes.append((top, height * lines, 0))
        elif kind == "list":
            items = re.split(r"\n(?=\s{0,3}(?:[*+-]|\d+\.) )", text)
            lines = sum(_wrapped(_visible_text(" ".join(it.split())), LIST_CPL) for it in items)
            after_text = bool(boxes) and not boxes[-1][2] == 0   # inline-block after a paragraph
            boxes.append((0, LIST_LINE * lines + 11 * after_text, 9))
        elif kind == "code":
            boxes.append((27, MD_CODE_LINE * _wrapped(text, CODE_CPL), 27))
        elif kind == "table":
            rows = text.count("\n")                          # the |---| line is not drawn
            boxes.append((9, TABLE_ROW * rows + 10, 9))
        elif re.fullmatch(r"\[!\[[^\]]*\]\([^)]*\)\]\([^)]*\)", text.strip()):
            boxes.append((20, 63.4, 9))                      # the Colab badge alone
        else:
            boxes.append((20, TEXT_LINE * _wrapped(_visible_text(" ".join(text.split())), TEXT_CPL), 9))
    if not boxes:
        return MD_CELL
    total = MD_CELL + boxes[0][0] + sum(b[1] for b in boxes) + boxes[-1][2]
    total += sum(max(a[2], b[0]) for a, b in zip(boxes, boxes[1:]))
    return total


def _png_size(data):
    raw = base64.b64decode(data)
    if raw[:8] != b"\x89PNG\r\n\x1a\n":
        return 0, 0
    return struct.unpack(">II", raw[16:24])


def _text(output):
    text = output.get("text", output.get("data", {}).get("text/plain", ""))
    return "".join(text) if isinstance(text, list) else text


def _outputs(cell):
    """The cell's outputs as JupyterLab draws them: consecutive streams of one name merged."""
    merged = []
    for output in cell.get("outputs", []):
        if (output.get("output_type") == "stream" and merged
                and merged[-1].get("output_type") == "stream"
                and merged[-1].get("name") == output.get("name")):
            merged[-1] = {**merged[-1], "text": _text(merged[-1]) + _text(output)}
        else:
            merged.append(output)
    return merged


def image_size(output):
    """(width, height) in px at which an image output is drawn on a slide, or None."""
    data = output.get("data", {})
    if "image/png" not in data:
        return None
    width, height = _png_size(data["image/png"])
    size = output.get("metadata", {}).get("image/png", {})
    width, height = size.get("width", width), size.get("height", height)
    if width > IMAGE_WIDTH:                       # drawn at most as wide as the cell
        width, height = IMAGE_WIDTH, height * IMAGE_WIDTH / width
    return width, height


def output_height(output):
    """Estimated px of one output (streams merged)."""
    size = image_size(output)
    if size:
        return size[1] + IMAGE
    html = output.get("data", {}).get("text/html", "")
    if isinstance(html, list):
        html = "".join(html)
    if html.startswith("<details>"):                              # folded: its summary line
        return RESULT + OUT_LINE
    if output.get("output_type") == "error":
        text = "\n".join(output.get("traceback", []))
    else:
        text = _text(output)
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)                      # colours
    text = "\n".join(line.rstrip("\r").split("\r")[-1] for line in text.split("\n"))  # \r rewrites
    extra = OUTPUT if output.get("output_type") == "stream" else RESULT
    return extra + OUT_LINE * _wrapped(text.rstrip("\n"), CODE_CPL)


def code_height(cell, output_only=False):
    """Estimated px of a code cell with its stored outputs (only its outputs if output_only)."""
    outputs = sum(output_height(o) for o in _outputs(cell))
    if output_only:
        return OUTPUT_ONLY_CELL + outputs
    return CODE_CELL + LINE * _wrapped(_source(cell), CODE_CPL) + outputs


def cell_height(cell, output_only=False):
    if cell["cell_type"] == "markdown":
        return markdown_height(_source(cell))
    if cell["cell_type"] == "code":
        return code_height(cell, output_only)
    return LINE * (_source(cell).count("\n") + 1)


def _heading_level(cell):
    """The level of the cell's highest heading (1 for '# '), 0 if it has none.

    A heading further down a cell counts too: the section it opens starts with the cell
    (better: split the cell there, so that the prose before the heading becomes notes).
    """
    if cell["cell_type"] != "markdown":
        return 0
    levels = [len(m.group(1)) for m in re.finditer(r"^(#{1,6}) ", _source(cell), re.M)]
    return min(levels, default=0)


def headings(cell):
    """The headings of a markdown cell, as (level, text without the #'s)."""
    if cell["cell_type"] != "markdown":
        return []
    return [(len(m.group(1)), m.group(2).strip())
            for m in re.finditer(r"^(#{1,6}) (.*)$", _source(cell), re.M)]


def is_setup(cell, index_among_code):
    return index_among_code == 0 and "'google.colab' in sys.modules" in _source(cell)


def is_solution(cell):
    return cell["cell_type"] == "code" and _source(cell).lstrip().startswith("#@title Solution")


def code_lines(text):
    """The lines of code in a cell's source: no blank lines, no lines that are only a comment."""
    return [line for line in text.split("\n") if line.strip() and not line.lstrip().startswith("#")]


def is_helper(text):
    return text.lstrip().startswith("#@save")


def is_gpu_cell(text):
    return "d2l.show_recording(" in text


DRAWING = re.compile(r"\b(?:plt|ax|axes|fig)\.\w+\(|\bmatplotlib\.patches\b|\bpatches\.\w+\(")


def is_drawing(text):
    """Code that draws: matplotlib calls on plt, ax or fig, or patches."""
    return bool(DRAWING.search(text))


def defines_drawing(text):
    """A cell that defines a function that draws."""
    return bool(re.search(r"^def \w+", text, re.M)) and is_drawing(text)


def is_check(cell):
    """A code cell that only checks: every line of code is an assert (or continues one)."""
    lines = code_lines(_source(cell))
    return (not cell.get("outputs") and bool(lines)
            and all(line.startswith(("assert ", "    ", ")", "]")) for line in lines)
            and lines[0].startswith("assert "))


def has_image(cell):
    return any(image_size(o) for o in cell.get("outputs", []))


def _tag_role(cell):
    for tag in cell.get("metadata", {}).get("tags", []):
        if tag in TAGS:
            return TAGS[tag], f"tag {tag}"
    return None


def roles(nb):
    """{cell id: (role, reason)}: a (sub)slide's start, a lead-in, code, output, notes or skip.

    The reason says which rule decided (for --report)."""
    found, code_seen, solutions_seen, in_depth = {}, 0, False, False
    for i, cell in enumerate(nb["cells"]):
        cid, text, kind = cell["id"], _source(cell), cell["cell_type"]
        in_depth = in_depth or sitting.is_depth_start(cell)
        if in_depth:
            role = "skip", "the depth (after the core path)"
        elif i == 0:
            role = "slide", "title"
        elif kind == "code" and is_setup(cell, code_seen):
            role = "skip", "Colab setup"
        elif is_solution(cell):
            role = "skip", "solution"
        elif not text.strip() or kind not in ("markdown", "code"):
            role = "skip", "empty"
        elif kind == "code" and solutions_seen:
            role = "skip", "after the solutions"
        elif _heading_level(cell) in (1, 2):
            role = "slide", "section"
        elif _heading_level(cell) >= 3:
            role = "subslide", "subsection"
        elif _tag_role(cell):
            role = _tag_role(cell)
        elif kind == "markdown":
            role = ("lead", "lead-in") if len(_visible_text(text)) <= LEAD_CHARS else ("notes", "long prose")
        else:
            role = _code_role(cell, text)
        if kind == "code" and role[0] in ("code", "output"):
            role = _fitting(cell, role)
        found[cid] = role
        code_seen += kind == "code"
        solutions_seen = solutions_seen or is_solution(cell)
    cells = nb["cells"]
    for i, cell in enumerate(cells[:-1]):         # a lead-in introduces the code after it
        if found[cell["id"]][0] != "lead" or cells[i + 1]["cell_type"] != "code" \
                or found[cells[i + 1]["id"]][1] not in OFF_THE_SLIDES:
            continue
        j = i + 1                                 # the code cells after it that are off the slides
        while j < len(cells) and cells[j]["cell_type"] == "code" and found[cells[j]["id"]][0] in ("skip", "notes"):
            j += 1
        if j == len(cells) or cells[j]["cell_type"] != "code":   # and no shown code cell after them
            found[cell["id"]] = "notes", "its code is off the slides"
    for cid, kind in OVERRIDES.items():
        if cid in found:
            found[cid] = kind, "OVERRIDES"
    return found


# Why a code cell is off the slides, when its lead-in goes with it (rule 5): the lead-in would
# introduce a cell the room never sees. A helper or a check is left out because the slides
# show where it is used: the prose before it states the idea, and stays. So does the lead-in
# of a cell whose output is too tall: that output is the point, and --report asks to shorten it.
# A code cell its author tagged off the slides keeps its lead-in too: tag the prose as well
# (slide-notes) to move it.
OFF_THE_SLIDES = ("too tall for a slide", "long code, no output")


def _code_role(cell, text):
    long = len(code_lines(text)) > LONG_CODE
    outputs = bool(cell.get("outputs"))
    if is_helper(text):
        return "skip", "helper (#@save)"
    if is_check(cell):
        return "skip", "checks only"
    if defines_drawing(text) and not has_image(cell):
        return "skip", "defines a drawing function"
    if is_gpu_cell(text) and long:
        return "output", "GPU-only cell, long code"
    if has_image(cell) and (len(code_lines(text)) >= SHORT_DRAWING or "patches" in text):
        return "output", "drawing code"
    if long:
        return ("output", "long code") if outputs else ("skip", "long code, no output")
    return "code", ""


def _fitting(cell, role):
    """A code or output role, or skip if even the output alone cannot fit a slide."""
    if role[0] == "code" and cell_height(cell) > BUDGET:
        if cell.get("outputs") and cell_height(cell, output_only=True) <= BUDGET:
            return "output", "too tall with its code"
        return "skip", "too tall for a slide"
    if role[0] == "output" and cell_height(cell, output_only=True) > BUDGET:
        return "skip", "output too tall for a slide"
    return role


def output_only(nb, found=None):
    """The ids of the cells whose slides show their output without their code."""
    found = found or roles(nb)
    return [c["id"] for c in nb["cells"] if found[c["id"]][0] == "output"]


def slide_types(nb):
    """{cell id: slide type} for a notebook (nbformat node or plain dict), by the rules above."""
    cells = nb["cells"]
    found = roles(nb)
    kinds = {cid: role for cid, (role, _) in found.items()}
    shown = {cid: "code" if role == "output" else role for cid, role in kinds.items()}
    heights = {c["id"]: cell_height(c, kinds[c["id"]] == "output") for c in cells}

    # The blocks (a lead-in with the code cell after it, or one cell) fill slides.
    types, used, previous = {}, 0.0, None         # previous: the role of the last shown cell
    for i, cell in enumerate(cells):
        cid = cell["id"]
        role = shown[cid]
        types[cid] = role if role in TYPES else None
        if role == "subslide" and used + heights[cid] + _first_block(cells, shown, heights, i) <= BUDGET:
            types[cid], used = "fragment", used + heights[cid]   # a short subsection: same slide
        elif role in ("slide", "subslide"):
            used = heights[cid] if i else math.inf    # the title slide holds the title alone
        elif role == "code" and previous == "lead":
            types[cid] = "-"                          # with its lead-in, which made room for it
                                                      # (past code cells off the slides)
        elif role in ("lead", "code"):
            block = heights[cid]
            following = _next_shown(cells, shown, i)
            if role == "lead" and following is not None and shown[following["id"]] == "code":
                block += heights[following["id"]]
            if used + block <= BUDGET:
                types[cid], used = "fragment", used + block
            elif role == "lead" and block > BUDGET:
                types[cid] = role = "notes"           # no room for the lead-in beside its code
            else:
                types[cid], used = "subslide", block
        if role not in ("skip", "notes"):
            previous = role
    return _notes_within_budget(cells, types)


def _notes_within_budget(cells, types):
    """Speaker notes a presenter reads at a glance: a (sub)slide keeps the notes cells that fit
    in NOTES_WORDS words (as read), in order; the others are left out (the teacher's guide and
    the lesson itself have them)."""
    words = 0
    for cell in cells:
        kind = types[cell["id"]]
        if kind in ("slide", "subslide"):
            words = 0
        elif kind == "notes":
            count = len(_visible_text(_source(cell)).split())
            if words + count > NOTES_WORDS:
                types[cell["id"]] = "skip"
            else:
                words += count
    return types


def _first_block(cells, shown, heights, i):
    """The height of what must come with the heading cells[i]: its lead-in and code, or code."""
    following = _next_shown(cells, shown, i)
    if following is None or shown[following["id"]] not in ("lead", "code"):
        return 0
    block = heights[following["id"]]
    if shown[following["id"]] == "lead":
        after = _next_shown(cells, shown, cells.index(following))
        if after is not None and shown[after["id"]] == "code":
            block += heights[after["id"]]
    return block


def _next_shown(cells, shown, i):
    """The first cell after cells[i] that is shown on a slide, or None."""
    for cell in cells[i + 1:]:
        if shown[cell["id"]] not in ("skip", "notes"):
            return cell
    return None


def slides_of(nb, types=None):
    """The (sub)slides RISE builds: a list of lists of the cell ids each shows (notes, skips left out).

    `types` ({cell id: slide type}) defaults to the notebook's stored metadata. As in RISE,
    a "slide" or "subslide" cell starts a new one only once the first slide shows something.
    """
    types = types or {c["id"]: c.get("metadata", {}).get("slideshow", {}).get("slide_type", "-")
                      for c in nb["cells"]}
    deck, content = [[]], False
    for cell in nb["cells"]:
        kind = types[cell["id"]]
        if content and kind in ("slide", "subslide"):
            deck.append([])
        if kind not in ("notes", "skip"):
            content = True
            deck[-1].append(cell["id"])
    return deck


def deck(nb, types=None):
    """The slides as the room sees them, numbered as RISE shows them (RISE_SETTINGS: 'c/t').

    A list of dicts: number (from 1), title (the slide's first heading, or its section's
    with "(cont.)"), section (the heading in force at its start), cells (ids shown)."""
    by_id = {c["id"]: c for c in nb["cells"]}
    current, slides = "", []
    for number, ids in enumerate(slides_of(nb, types), 1):
        first = next((text for i in ids for _, text in headings(by_id[i])), None)
        title = first or f"{current} (cont.)"
        slides.append({"number": number, "title": title, "section": first or current, "cells": ids})
        for i in ids:
            for _, text in headings(by_id[i]):
                current = text
    return slides


def sections(nb, types=None):
    """{heading: (first slide, last slide)} for every heading of the lesson (without #'s).

    A section runs from the slide that shows its heading to the slide before the next
    heading of its level or higher (at least its own slide)."""
    where = {}                                            # cell id -> slide number
    for slide in deck(nb, types):
        for i in slide["cells"]:
            where[i] = slide["number"]
    marks = []                                            # (slide, level, heading) in order
    last = 0
    for cell in nb["cells"]:
        last = where.get(cell["id"], last)
        for level, text in headings(cell):
            marks.append((where.get(cell["id"], last), level, text))
    total = max(where.values(), default=0)
    spans = {}
    for k, (start, level, text) in enumerate(marks):
        end = next((s for s, lvl, _ in marks[k + 1:] if lvl <= level), total + 1)
        spans[text] = (start, max(start, end - 1))
    return spans


def marked(nb, found=None, types=None):
    """The ids of the code cells whose code a slide shows and whose first line is a test
    marker (`# NBVAL_IGNORE_OUTPUT`): the room need not read it."""
    found = found or roles(nb)
    types = types or slide_types(nb)
    return [c["id"] for c in nb["cells"] if c["cell_type"] == "code" and found[c["id"]][0] != "output"
            and types[c["id"]] not in ("skip", "notes") and _source(c).startswith("# NBVAL_")]


def lesson_css(nb, found=None):
    """The text of <lesson>.css: hide the code of the output-only cells on the slides, and the
    test marker of the others; None if there is nothing to hide."""
    found = found or roles(nb)
    ids, markers = set(output_only(nb, found)), set(marked(nb, found))
    if not ids and not markers:
        return None
    position = {c["id"]: i for i, c in enumerate(nb["cells"])}
    by_reason = {}                            # reason -> ["position (cell id)", ...], in order
    for c in nb["cells"]:
        if c["id"] in ids:
            by_reason.setdefault(found[c["id"]][1], []).append(f"{position[c['id']]} ({c['id']})")
    listing = "".join(f"   {reason}: {', '.join(cells)}.\n" for reason, cells in by_reason.items())
    select = lambda chosen: ", ".join(f'[data-windowed-list-index="{position[c["id"]]}"]'
                                      for c in nb["cells"] if c["id"] in chosen)
    text = (f"{CSS_MARK} from the lesson's cells; run it again after changing them.\n"
            "   jupyterlab-rise loads this file beside the lesson in the slideshow only: the\n"
            "   cells listed (by position) show their output without their code on the slides,\n"
            "   and the others' first line, a test marker, is hidden. The notebook view is\n"
            f"   unchanged.\n{listing}*/\n")
    if ids:
        text += (f".rise-enabled .reveal .jp-Cell:is({select(ids)}) .jp-Cell-inputWrapper {{\n"
                 "  display: none;\n}\n")
    if markers:
        text += (f".rise-enabled .reveal .jp-Cell:is({select(markers)}) .cm-content > .cm-line:first-child {{\n"
                 "  display: none;\n}\n")
    return text


def _names(code):
    """(names bound at the top level, names read anywhere as globals) by a cell's code
    (IPython's % and ! lines left out), from Python's symbol tables."""
    import symtable
    code = "\n".join(line[:len(line) - len(line.lstrip())] + "pass"
                     if line.lstrip().startswith(("%", "!")) else line for line in code.split("\n"))
    top = symtable.symtable(code, "<cell>", "exec")
    bound = {s.get_name() for s in top.get_symbols()
             if s.is_assigned() or s.is_imported() or s.is_namespace()}
    read, tables = set(), [top]
    while tables:
        table = tables.pop()
        read |= {s.get_name() for s in table.get_symbols()
                 if s.is_referenced() and (table is top or s.is_global())}
        tables.extend(table.get_children())
    return bound, read


def needs_run_all(nb, types=None):
    """The ids of shown code cells that read a name only a cell off the slides defines: run
    such a lesson top to bottom (Run -> Run All Cells) before presenting it, or they fail."""
    types = types or {c["id"]: c.get("metadata", {}).get("slideshow", {}).get("slide_type", "-")
                      for c in nb["cells"]}
    hidden_only, shown_bound, found = set(), set(), []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code" or is_solution(cell):
            continue
        bound, read = _names(_source(cell))
        if types[cell["id"]] in ("notes", "skip"):
            hidden_only |= bound - shown_bound
        else:
            if read & hidden_only:
                found.append(cell["id"])
            shown_bound |= bound
            hidden_only -= bound
    return found


# --- every slide of a deck measured at once, in the browser ----------------------------
# For a page that shows a lesson as a RISE slideshow (JupyterLab, /rise/...): every
# (sub)slide is drawn in turn (reveal.js draws only the slides near the present one, so a
# style shows them all, fragments included, for the measurement) and measured against the
# screen. Returns {screen: [w, h], slides: [{number, id, height, width, cells, wide, tall,
# beyond}]}: cells are the notebook positions of the cells a slide shows; wide, tall and
# beyond those whose code, output, markdown table or code block scrolls sideways, scrolls
# or is cut vertically, or whose table or image reaches past the slide's right edge (a
# wrapped output's text may touch the edge: its trailing spaces hang there). One page load
# per deck: tests/test_slide_overflow.py and tools/workshop_decks.py use it.
MEASURE_ALL = """async () => {
  const style = document.createElement('style');
  style.textContent = '.reveal .slides > section, .reveal .slides > section > section '
    + '{ display: block !important; }';
  document.head.appendChild(style);
  const settled = e => new Promise(done => {       // a stylesheet or image loaded, or failed
    e.addEventListener('load', done); e.addEventListener('error', done); setTimeout(done, 5000); });
  // rise.css and the lesson's CSS (which hides the code of output-only cells) load after the
  // deck is ready: measure once they apply
  await Promise.all([...document.querySelectorAll('link[rel="stylesheet"]')]
                    .map(l => l.sheet ? null : settled(l)));
  await document.fonts.ready;
  const images = [...document.querySelectorAll('.reveal .slides img')];
  await Promise.all(images.map(i => i.complete ? null : settled(i)));
  const drawn = () => [...document.querySelectorAll('.reveal .slides .jp-CodeCell')]
      .every(c => c.querySelector('.cm-content, .jp-InputPlaceholder'));
  for (let k = 0; k < 100 && !drawn(); k++) await new Promise(r => setTimeout(r, 50));
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const screen = document.querySelector('.reveal .slides');
  const visible = e => e.getClientRects().length > 0;
  const index = e => +e.closest('.jp-Cell').dataset.windowedListIndex;
  const sections = [...document.querySelectorAll('.reveal .slides > section > section')];
  const slides = sections.map((sec, k) => {
    const edge = sec.getBoundingClientRect().left + screen.offsetWidth;
    const cells = [...sec.querySelectorAll('.jp-Cell')]
        .filter(c => visible(c) && !c.closest('aside.notes') && !c.classList.contains('reveal-skip'));
    const boxes = [...sec.querySelectorAll('.cm-scroller, .jp-OutputArea-output, '
        + '.jp-RenderedMarkdown table, .jp-RenderedMarkdown pre')]
        .filter(e => visible(e) && !e.closest('aside.notes') && !e.closest('.reveal-skip'));
    const which = test => [...new Set(boxes.filter(test).map(index))];
    return {number: k + 1, id: sec.id, height: sec.scrollHeight, width: sec.scrollWidth,
            cells: cells.map(c => +c.dataset.windowedListIndex),
            wide: which(e => e.scrollWidth > e.clientWidth + 1),
            tall: which(e => e.scrollHeight > e.clientHeight + 1),
            beyond: [...new Set([...sec.querySelectorAll('.jp-RenderedMarkdown table, .jp-OutputArea-output img')]
                .filter(e => visible(e) && !e.closest('aside.notes') && !e.closest('.reveal-skip')
                             && e.getBoundingClientRect().right > edge + 1).map(index))]};
  });
  style.remove();
  return {screen: [screen.offsetWidth, screen.offsetHeight], slides: slides};
}"""


def overflows(measured, nb):
    """What MEASURE_ALL found too big, as sentences: "slide N (id): ..." (cells by id)."""
    width, height = measured["screen"]
    name = lambda positions: ", ".join(nb["cells"][i]["id"] for i in positions)
    problems = []
    for s in measured["slides"]:
        where = f"slide {s['number']} ({s['id']})"
        if s["height"] > height or s["width"] > width:
            problems.append(f"{where} is {s['width']}x{s['height']} px, more than the {width}x{height} "
                            f"screen; its cells: {name(s['cells'])}")
        for key, what in (("wide", "a code block, output or table scrolls sideways"),
                          ("tall", "a code block, output or table is cut or scrolls vertically"),
                          ("beyond", "a table or figure reaches past the slide's right edge")):
            if s[key]:
                problems.append(f"{where}: {what}: {name(s[key])}")
    return problems


def css_path(path):
    return pathlib.Path(path).with_suffix(".css")


COURSE_STYLE = "d2l_utils.course"    # proposed: the course's matplotlib style, font.size 12


def figure_problems(nb):
    """What keeps a lesson's figures from being readable on a slide: text under FIGURE_PT
    points (matplotlib's default is 10 pt, so a lesson with figures sets a larger size, e.g.
    `plt.style.use('d2l_utils.course')` or `plt.rcParams['font.size'] = 12`, and asks for no
    smaller size in a cell), and images that a slide must scale down (their text with them)."""
    problems, sized, figures = [], False, False
    for cell in nb["cells"]:
        if cell["cell_type"] != "code" or is_solution(cell):
            continue
        text = _source(cell)
        sized = sized or COURSE_STYLE in text or any(
            float(v) >= FIGURE_PT for v in re.findall(r"""['"]font\.size['"]\]?\s*[:=]\s*([0-9.]+)""", text))
        small = sorted({float(a or b) for a, b in re.findall(
            r"""\b(?:fontsize|labelsize|titlesize|size)\s*=\s*([0-9.]+)|['"]size['"]\s*:\s*([0-9.]+)""", text) if float(a or b) < FIGURE_PT})
        small += re.findall(r"""\b(?:fontsize|labelsize|size)\s*=\s*['"]((?:xx?-)?small|smaller)['"]""", text)
        if small and is_drawing(text):
            problems.append(f"{cell['id']}: figure text at {', '.join(f'{v:g}' if isinstance(v, float) else v for v in small)}"
                            f" (pt); {FIGURE_PT} pt or more is readable on a slide")
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" in data:
                figures = True
                if _png_size(data["image/png"])[0] > IMAGE_WIDTH:
                    problems.append(f"{cell['id']}: a figure {_png_size(data['image/png'])[0]} px wide "
                                    f"is scaled down to {IMAGE_WIDTH} px on a slide, and its text with it")
    if figures and not sized:
        problems.insert(0, f"figures at matplotlib's default 10 pt: set {FIGURE_PT} pt in the lesson's "
                           f"first plotting cell (plt.style.use('{COURSE_STYLE}'))")
    return problems


def apply(nb):
    """Set every cell's slide type and the notebook's RISE settings; True if anything changed."""
    kinds, changed = slide_types(nb), False
    for cell in nb.cells:
        if cell.metadata.get("slideshow") != {"slide_type": kinds[cell.id]}:
            cell.metadata["slideshow"] = {"slide_type": kinds[cell.id]}
            changed = True
    if nb.metadata.get("rise") != RISE_SETTINGS:
        nb.metadata["rise"] = dict(RISE_SETTINGS)
        changed = True
    return changed


def css_is_current(path, nb):
    """True if <lesson>.css beside path is what lesson_css writes (absent when it writes none)."""
    wanted, css = lesson_css(nb), css_path(path)
    have = css.read_text(encoding="utf-8") if css.exists() else None
    if have is not None and not have.startswith(CSS_MARK):
        raise SystemExit(f"{css} was not written by tools/slides.py: move it away")
    return have == wanted


def write_css(path, nb):
    """Write (or remove) <lesson>.css; True if it changed."""
    if css_is_current(path, nb):
        return False
    wanted, css = lesson_css(nb), css_path(path)
    if wanted is None:
        css.unlink()
    else:
        css.write_text(wanted, encoding="utf-8")
    return True


def lessons(args):
    """The notebooks named, or every lesson."""
    return [pathlib.Path(a) for a in args] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def report(path, nb):
    """Print the slides with numbers, titles and estimated heights, and what the lesson's
    author could change."""
    found = roles(nb)
    types = slide_types(nb)
    by_id = {c.id: c for c in nb.cells}
    slides = deck(nb, types)
    print(f"{path.name}: {len(slides)} slides")
    for slide in slides:
        ids = slide["cells"]
        est = sum(cell_height(by_id[i], found[i][0] == "output") for i in ids)
        hidden = sum(found[i][0] == "output" for i in ids)
        print(f"  {slide['number']:3d} {est:5.0f} px {len(ids):2d} cells"
              + (f" ({hidden} output only)" if hidden else "") + f"  {slide['title'][:70]}")
    notes = [(c.id, found[c.id][1] if found[c.id][0] == "notes" else "no room beside its code")
             for c in nb.cells if types[c.id] == "notes"]
    if notes:
        print("  in the speaker notes: " + "; ".join(f"{i} ({why})" for i, why in notes))
    for cell in nb.cells:
        text = _source(cell)
        if _heading_level(cell) and not re.match(r"#{1,6} ", text):
            print(f"  a heading in the middle of {cell.id}: split the cell there "
                  "(the prose before it becomes notes)")
        elif (cell.cell_type == "markdown" and cell is not nb.cells[0]
              and types[cell.id] not in ("notes", "skip")
              and len(text) > WORDY_CHARS and "## Exercises" not in text):
            print(f"  {len(text)} characters of prose on a slide in {cell.id}: keep a few short lines "
                  "under the heading, and put the paragraphs after them in a cell of their own (notes)")
        if cell.cell_type == "code" and found[cell.id] == ("notes", "too tall for a slide"):
            print(f"  too tall for a slide ({cell_height(cell):.0f} px est.), so in the notes: "
                  f"{cell.id}; shorten it to show it")
    for cell in nb.cells:
        if _heading_level(cell) and cell_height(cell) > BUDGET:
            print(f"  {cell.id} is too tall for a slide ({cell_height(cell):.0f} px est.): split it "
                  "(a cell of its own for each `## ` heading, prose in notes cells)")
    for problem in block_problems(nb, found, types):
        print(f"  {problem}")
    run_all = needs_run_all(nb, types)
    if run_all:
        print(f"  run all before presenting: {len(run_all)} shown cells need cells off the slides "
              f"(first: {run_all[0]})")
    for problem in figure_problems(nb):
        print(f"  {problem}")


BLOCK_LINES = 15        # --report: a code block or text output longer than this is not read at a glance


def block_problems(nb, found=None, types=None):
    """What the room cannot read on a slide, for --report: a slide that shows an output with
    neither its code nor a word before it, a text output or markdown code block of more than
    BLOCK_LINES lines, and an output whose lines are wider than a slide (a table whose rows
    all wrap). The fixes are the lesson's: a lead-in, a shorter output, narrower columns."""
    found = found or roles(nb)
    types = types or slide_types(nb)
    problems, by_id = [], {c["id"]: c for c in nb["cells"]}
    for slide in deck(nb, types):
        first = by_id[slide["cells"][0]]
        if first["cell_type"] == "code" and found[first["id"]][0] == "output" and not has_image(first):
            problems.append(f"slide {slide['number']} starts with {first['id']}'s output, without its code "
                            "or a word: give it a lead-in (a sentence before the cell), or tag it slide-skip")
        for cid in slide["cells"]:
            cell = by_id[cid]
            if cell["cell_type"] == "markdown":
                for kind, text in markdown_blocks(_source(cell)):
                    lines = text.count("\n") + 1
                    if kind == "code" and lines > BLOCK_LINES:
                        problems.append(f"slide {slide['number']}: a code block of {lines} lines in {cid} "
                                        f"(at most {BLOCK_LINES}): cut it, or split the cell")
                continue
            for output in _outputs(cell):
                text = re.sub(r"\x1b\[[0-9;]*m", "", _text(output)).rstrip("\n")
                html = output.get("data", {}).get("text/html", "")
                if not text or "".join(html).startswith("<details>"):        # folded: its summary line
                    continue
                lines = text.split("\n")
                if len(lines) > BLOCK_LINES:
                    problems.append(f"slide {slide['number']}: {cid} prints {len(lines)} lines "
                                    f"(at most {BLOCK_LINES} read at a glance): print less, or a summary")
                wide = [line for line in lines if len(line) > CODE_CPL]
                if len(wide) >= 2:
                    problems.append(f"slide {slide['number']}: {len(wide)} lines of {cid}'s output are wider "
                                    f"than a slide ({max(map(len, wide))} characters, {CODE_CPL} fit): "
                                    "its table rows wrap; narrow the columns")
    return problems


def print_sections(path, nb):
    print(f"{path.name}:")
    for heading, (first, last) in sections(nb, slide_types(nb)).items():
        span = f"{first}" if first == last else f"{first}–{last}"
        print(f"  slides {span:7} {heading}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a lesson's slide metadata or CSS differ")
    parser.add_argument("--report", action="store_true", help="print the slides; write nothing")
    parser.add_argument("--sections", action="store_true",
                        help="print each section's slide numbers; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for path in lessons(args.notebooks):
        nb = nbformat.read(path, as_version=4)
        if args.report or args.sections:
            (report if args.report else print_sections)(path, nb)
            continue
        if args.check:
            if apply(nb) or not css_is_current(path, nb):
                stale.append(path)
            continue
        if apply(nb):
            nbformat.write(nb, path)
            print(f"{path}: slide types written")
        if write_css(path, nb):
            print(f"{css_path(path)}: " + ("written" if css_path(path).exists() else "removed"))
    if args.check and stale:
        print("slide metadata out of date (run tools/slides.py): "
              + ", ".join(str(p) for p in stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
