"""Give every lesson the slide metadata of a RISE slideshow (a lecture, not the notebook cut up).

    python tools/slides.py                 # write the slide types of every lesson
    python tools/slides.py notebooks/01_devices.ipynb
    python tools/slides.py --check         # exit 1 if a lesson's slide types differ from ours
    python tools/slides.py --report        # each lesson's slides, with estimated heights

In JupyterLab with jupyterlab-rise, View -> Render as slideshow (Alt+R) shows a lesson
as reveal.js slides; each cell's `metadata.slideshow.slide_type` says where it goes:
"slide" starts a slide (a column of the deck), "subslide" a slide below it, "fragment"
appears on the next key press, "-" stays with the cell before it, "notes" goes to the
speaker notes (press T) and "skip" is left out.

The types follow from rules, in this order (the first that applies):

1. The first cell (the title, what you will learn, what you need) is a slide of its own.
2. Left out (skip): the Colab setup cell (the first code cell, guarded by
   `'google.colab' in sys.modules`), the worked solutions (`#@title Solution ...`; the
   exercises themselves stay, in the summary), code after the first solution (its
   housekeeping), and empty cells.
3. A markdown cell with a `## ` heading starts a slide, one with a `### ` heading a
   subslide (a heading further down a cell counts too; `--report` asks to split it).
4. Prose without a heading: a short lead-in (at most LEAD_CHARS characters, a sentence
   or two) is shown with the code it introduces; longer prose is what the speaker says,
   so it becomes speaker notes.
5. A code cell that cannot fit a slide even on its own (a long helper, a long output, a
   tall plot) goes to the speaker notes, and `--report` names it: shorten it to show it.
6. What remains of a section is cut into blocks: a lead-in with the code cell after it
   ("-"), or a code cell or lead-in on its own. A block is a fragment of the current
   slide if the slide still fits the 1280x720 screen with it, else it starts a
   subslide. A lead-in whose code would not fit beside it goes to the notes.
7. OVERRIDES, a table of cell id -> slide type, has the last word.

Whether a cell fits is estimated from its source and stored outputs (lines, wrapped
paragraphs, image sizes) with the sizes JupyterLab's RISE renders at 1280x720;
tests/test_slides.py opens every lesson as a slideshow in a real browser and checks
that no slide overflows the screen. The script changes cell metadata only, never
sources or outputs, and writes with nbformat (cell ids kept). It is deterministic and
idempotent: run it again after re-executing a lesson, since outputs take room too.
"""
import argparse
import base64
import math
import pathlib
import re
import struct
import sys

import nbformat

ROOT = pathlib.Path(__file__).resolve().parent.parent
TYPES = ("slide", "subslide", "fragment", "-", "skip", "notes")

# --- the screen, and how tall RISE (JupyterLab 4.6, reveal.js theme 'simple') draws things
SCREEN = (1280, 720)
BUDGET = 650            # px of a 720 px slide a (sub)slide may fill by estimate: a margin for errors
LEAD_CHARS = 350        # prose up to this long is a lead-in shown on the slide; longer: notes
WORDY_CHARS = 800       # --report: a (heading) cell with more prose than this is wordy for a slide
TEXT_CPL = 160          # characters of prose per line at 1280 px
CODE_CPL = 150          # characters of code or output per line before it needs scrolling / wraps
LINE = 18.2             # px per line of prose or code
OUT_LINE = 16.8         # px per line of text output
LIST_LINE = 22.4        # px per line of a bulleted or numbered list
LIST_CPL = 155          # characters per line of a list item
MD_CELL = 10            # px around a markdown cell
CODE_CELL = 25          # px around a code cell's editor
OUTPUT = 6              # px around each output
IMAGE = 60              # px around an image output

# Cell id -> slide type, where the rules above do not give a good slide.
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
    larger one, a heading's margin above counts only at the top of the cell, and the
    last block keeps a 7 px margin below.
    """
    boxes = []
    for kind, text in markdown_blocks(markdown):
        if kind.startswith("heading"):
            top, height = {"heading1": (32, 64), "heading2": (18, 36), "heading3": (13, 29)}[kind]
            height += 3 * ("`" in text)                       # code in a heading is taller
            boxes.append((top if not boxes else 0, height, 20))
        elif kind == "list":
            items = re.split(r"\n(?=\s{0,3}(?:[*+-]|\d+\.) )", text)
            lines = sum(_wrapped(_visible_text(" ".join(it.split())), LIST_CPL) for it in items)
            boxes.append((0, LIST_LINE * lines, 0))
        elif kind == "code":
            boxes.append((21, LINE * (text.count("\n") + 1), 21))
        elif kind == "table":
            boxes.append((20, 21 * text.count("\n"), 20))   # the |---| line is not drawn
        elif re.fullmatch(r"\[!\[[^\]]*\]\([^)]*\)\]\([^)]*\)", text.strip()):
            boxes.append((20, 58, 20))                        # the Colab badge alone
        else:
            boxes.append((20, LINE * _wrapped(_visible_text(" ".join(text.split())), TEXT_CPL), 20))
    if not boxes:
        return MD_CELL
    total = MD_CELL + boxes[0][0] + sum(b[1] for b in boxes) + 7
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


def output_height(output):
    """Estimated px of one output (streams merged)."""
    data = output.get("data", {})
    if "image/png" in data:
        width, height = _png_size(data["image/png"])
        size = output.get("metadata", {}).get("image/png", {})
        width, height = size.get("width", width), size.get("height", height)
        if width > SCREEN[0] - 100:               # drawn at most as wide as the cell
            height = height * (SCREEN[0] - 100) / width
        return height + IMAGE
    if output.get("output_type") == "error":
        text = "\n".join(output.get("traceback", []))
    else:
        text = _text(output)
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)                      # colours
    text = "\n".join(line.rstrip("\r").split("\r")[-1] for line in text.split("\n"))  # \r rewrites
    extra = OUTPUT if output.get("output_type") == "stream" else 2 * OUTPUT
    return extra + OUT_LINE * _wrapped(text.rstrip("\n"), CODE_CPL)


def code_height(cell):
    """Estimated px of a code cell with its stored outputs."""
    lines = _source(cell).count("\n") + 1
    return CODE_CELL + LINE * lines + sum(output_height(o) for o in _outputs(cell))


def cell_height(cell):
    if cell["cell_type"] == "markdown":
        return markdown_height(_source(cell))
    if cell["cell_type"] == "code":
        return code_height(cell)
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


def is_setup(cell, index_among_code):
    return index_among_code == 0 and "'google.colab' in sys.modules" in _source(cell)


def is_solution(cell):
    return cell["cell_type"] == "code" and _source(cell).lstrip().startswith("#@title Solution")


def slide_types(nb):
    """{cell id: slide type} for a notebook (nbformat node or plain dict), by the rules above."""
    cells = nb["cells"]
    heights = {c["id"]: cell_height(c) for c in cells}
    # First what each cell is: a (sub)slide's start, a lead-in, code, or not shown.
    roles, code_seen, solutions_seen = {}, 0, False
    for i, cell in enumerate(cells):
        cid, text = cell["id"], _source(cell)
        if i == 0:
            roles[cid] = "slide"
        elif cell["cell_type"] == "code" and is_setup(cell, code_seen):
            roles[cid] = "skip"
        elif is_solution(cell) or not text.strip() or cell["cell_type"] not in ("markdown", "code"):
            roles[cid] = "skip"
        elif cell["cell_type"] == "code" and solutions_seen:
            roles[cid] = "skip"                       # housekeeping after the solutions
        elif _heading_level(cell) in (1, 2):
            roles[cid] = "slide"
        elif _heading_level(cell) >= 3:
            roles[cid] = "subslide"
        elif cell["cell_type"] == "markdown":
            roles[cid] = "lead" if len(text) <= LEAD_CHARS else "notes"
        elif heights[cid] > BUDGET:
            roles[cid] = "notes"                      # cannot fit: --report names it
        else:
            roles[cid] = "code"
        code_seen += cell["cell_type"] == "code"
        solutions_seen = solutions_seen or is_solution(cell)

    # Then the blocks (a lead-in with the code cell after it, or one cell) fill slides.
    types, used, previous = {}, 0.0, None         # previous: the role of the last shown cell
    for i, cell in enumerate(cells):
        cid = cell["id"]
        role = types[cid] = roles[cid]
        if role in ("slide", "subslide"):
            used = heights[cid] if i else math.inf    # the title slide holds the title alone
        elif role == "code" and previous == "lead":
            types[cid] = "-"                          # with its lead-in, which made room for it
        elif role in ("lead", "code"):
            block = heights[cid]
            following = _next_shown(cells, roles, i)
            if role == "lead" and following is not None and roles[following["id"]] == "code":
                block += heights[following["id"]]
            if used + block <= BUDGET:
                types[cid], used = "fragment", used + block
            elif role == "lead" and block > BUDGET:
                types[cid] = role = "notes"           # no room for the lead-in beside its code
            else:
                types[cid], used = "subslide", block
        if role not in ("skip", "notes"):
            previous = role
    for cid, kind in OVERRIDES.items():
        if cid in types:
            types[cid] = kind
    return types


def _next_shown(cells, roles, i):
    """The first cell after cells[i] that is shown on a slide, or None."""
    for cell in cells[i + 1:]:
        if roles[cell["id"]] not in ("skip", "notes"):
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


def apply(nb):
    """Set every cell's slide type; True if anything changed."""
    kinds, changed = slide_types(nb), False
    for cell in nb.cells:
        if cell.metadata.get("slideshow") != {"slide_type": kinds[cell.id]}:
            cell.metadata["slideshow"] = {"slide_type": kinds[cell.id]}
            changed = True
    return changed


def lessons(args):
    """The notebooks named, or every lesson."""
    return [pathlib.Path(a) for a in args] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def report(path, nb):
    """Print the slides with their estimated heights, and what the lesson's author could change."""
    types = slide_types(nb)
    by_id = {c.id: c for c in nb.cells}
    deck = slides_of(nb, types)
    print(f"{path.name}: {len(deck)} slides")
    for n, ids in enumerate(deck, 1):
        est = sum(cell_height(by_id[i]) for i in ids)
        first = _source(by_id[ids[0]]).split("\n")[0][:60] if ids else ""
        print(f"  {n:3d} {est:5.0f} px {len(ids):2d} cells  {first}")
    for cell in nb.cells:
        text = _source(cell)
        if cell.cell_type == "code" and types[cell.id] == "notes":
            print(f"  too tall for a slide ({cell_height(cell):.0f} px est.), so in the notes: "
                  f"{cell.id}; shorten it to show it")
        if cell.cell_type == "code" and max(map(len, text.split("\n"))) > CODE_CPL:
            print(f"  a line of {cell.id} is longer than {CODE_CPL} characters: it scrolls sideways")
        if _heading_level(cell) and not re.match(r"#{1,6} ", text):
            print(f"  a heading in the middle of {cell.id}: split the cell there "
                  "(the prose before it becomes notes)")
        elif (cell.cell_type == "markdown" and cell is not nb.cells[0]
              and types[cell.id] not in ("notes", "skip")
              and len(text) > WORDY_CHARS and "## Exercises" not in text):
            print(f"  {len(text)} characters of prose on a slide in {cell.id}: the paragraphs "
                  "after its lead-in could be a cell of their own (speaker notes)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a lesson's slide types differ")
    parser.add_argument("--report", action="store_true", help="print the slides; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for path in lessons(args.notebooks):
        nb = nbformat.read(path, as_version=4)
        if args.report:
            report(path, nb)
            continue
        if apply(nb):
            stale.append(path)
            if not args.check:
                nbformat.write(nb, path)
                print(f"{path}: slide types written")
    if args.check and stale:
        print("slide metadata out of date (run tools/slides.py): "
              + ", ".join(str(p) for p in stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
