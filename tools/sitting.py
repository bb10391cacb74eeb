"""A lesson's core path fits one sitting; its depth sits beside it, one click away.

    python tools/sitting.py              # each lesson: words and cells of its core and its depth
    python tools/sitting.py --check      # exit 1, saying why, if a lesson breaks a rule below

A lesson is read in two parts. The core path runs from the title to the end of the exercises:
a newcomer reads it, runs it and does its exercises in one sitting (about 45 minutes). The
depth follows it in the same notebook, under one heading cell tagged `depth` (JupyterLab: the
property inspector, Cell Tags): "## Going deeper". It holds the machinery, the source-code
walkthroughs, the version differences and the extra recipes, each section linked from the
place in the core where a reader would want it. Being in the same notebook, the depth runs
after the core with everything the core made, and is tested the same way (nbval); the
Chinese translation of a cell follows the cell wherever it moves.

The rules (`problems()`), for every lesson:
- the core holds at most CORE_WORDS words of prose (markdown, as read: link targets, code
  marks and emphasis dropped) and at most CORE_CELLS cells;
- the core holds the exercises and every GPU-only cell (`d2l.show_recording(...)`);
- each of the depth's sections (a `## ` heading after the depth's heading) is linked from the
  core, and every link inside the notebook (`](#...)`) leads to a heading of it;
- no core cell uses a tool (TOOLS) that a later lesson teaches (LOOKS_AHEAD names the
  exceptions, each with its reason).
"""
import argparse
import pathlib
import re
import sys

import nbformat

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEPTH_TAG = "depth"
CORE_WORDS = 2100        # "about 2,000 words of prose"
CORE_CELLS = 50
# A tool, by the code that uses it, and the lesson that teaches it. A core path may use a tool
# from its own lesson on; the depth may look ahead if its prose says which lesson teaches it.
TOOLS = {
    "the CUDA caching allocator's statistics (torch.cuda.memory_stats)": (r"\bmemory_stats\(", 8),
    "the memory snapshot (torch.cuda.memory._record_memory_history)": (r"_record_memory_history|_snapshot\(", 8),
    "autocast": (r"\bautocast\(", 9),
    "the gradient scaler (GradScaler)": (r"\bGradScaler\(", 9),
    "the profiler (torch.profiler)": (r"\btorch\.profiler\b|\bprofiler\.profile\(|\bd2l\.profiled\(", 10),
    "the FLOP counter (FlopCounterMode)": (r"\bFlopCounterMode\b", 10),
    "torch.compile": (r"\btorch\.compile\(", 11),
    "CUDA graphs": (r"\bCUDAGraph\(|\btorch\.cuda\.graph\(|\bmake_graphed_callables\(", 11),
    "CUDA streams": (r"\btorch\.cuda\.Stream\(|\btorch\.cuda\.stream\(", 11),
    "FSDP (fully_shard)": (r"\bfully_shard\(|\bFullyShardedDataParallel\(", 12),
}
# Core cells allowed a later lesson's tool, each with the reason (keep this short).
LOOKS_AHEAD = {
    "c980c0d-08gpumemory": "a GPU-only cell (so in the core) that checks lesson 8's own restatement of "
                           "autocast's rules, which the core uses to count memory, against torch.autocast "
                           "itself; lesson 9 teaches autocast",
}


def source(cell):
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def lessons():
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def number(path):
    return int(pathlib.Path(path).name[:2])


def is_depth_start(cell):
    return DEPTH_TAG in cell.get("metadata", {}).get("tags", [])


def split(nb):
    """(core cells, depth cells) of a notebook: the depth starts at its tagged heading."""
    cells = nb["cells"]
    start = next((i for i, c in enumerate(cells) if is_depth_start(c)), len(cells))
    return cells[:start], cells[start:]


def visible_text(markdown):
    """The text a reader sees of a markdown fragment (links, code marks and emphasis dropped)."""
    text = re.sub(r"<[^>]+>", " ", markdown)                                  # HTML tags
    text = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", text)                    # images: alt text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)                     # links: their text
    return re.sub(r"[`*_]", "", text)


def words(cells):
    return sum(len([w for w in visible_text(source(c)).split() if re.search(r"\w", w)])
               for c in cells if c["cell_type"] == "markdown")


def heading_anchor(title):
    """JupyterLab's anchor of a heading (its `data-jupyter-id`): the heading's text as shown,
    spaces to hyphens (`createHeaderId` in @jupyterlab/rendermime)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)
    return re.sub(r"`|\*\*?", "", text).strip().replace(" ", "-")


def headings(cells):
    """{anchor: heading text} of the markdown headings of some cells."""
    found = {}
    for cell in cells:
        if cell["cell_type"] == "markdown":
            for title in re.findall(r"^#{1,6} +(.+?) *$", source(cell), re.M):
                found[heading_anchor(title)] = title
    return found


def internal_links(cells):
    """[(cell id, anchor)] of the links to a place in the same notebook."""
    return [(c["id"], anchor) for c in cells if c["cell_type"] == "markdown"
            for anchor in re.findall(r"\]\(#([^)\s]+)\)", source(c))]


def depth_sections(depth):
    """{anchor: title} of the depth's sections (its `## ` headings, the depth's own aside)."""
    found = {}
    for cell in depth[1:]:
        if cell["cell_type"] == "markdown":
            for title in re.findall(r"^## +(.+?) *$", source(cell), re.M):
                found[heading_anchor(title)] = title
    return found


def tool_uses(cells, lesson):
    """[(cell id, tool, lesson that teaches it)] of core cells using a tool taught later."""
    found = []
    for cell in cells:
        if cell["cell_type"] != "code" or cell["id"] in LOOKS_AHEAD:
            continue
        for tool, (pattern, taught) in TOOLS.items():
            if taught > lesson and re.search(pattern, source(cell)):
                found.append((cell["id"], tool, taught))
    return found


def problems(path):
    """What breaks the rules in one lesson, as sentences (none: it keeps them)."""
    nb = nbformat.read(path, as_version=4)
    core, depth = split(nb)
    name, found = pathlib.Path(path).name, []
    if words(core) > CORE_WORDS:
        found.append(f"{name}: its core holds {words(core)} words of prose; at most {CORE_WORDS}")
    if len(core) > CORE_CELLS:
        found.append(f"{name}: its core holds {len(core)} cells; at most {CORE_CELLS}")
    if not any(c["cell_type"] == "markdown" and re.search(r"^## Exercises$", source(c), re.M) for c in core):
        found.append(f"{name}: its exercises are not in its core")
    for cell in depth:
        if "d2l.show_recording(" in source(cell):
            found.append(f"{name}: GPU-only cell {cell['id']} is in the depth; it belongs in the core")
    targets = headings(nb["cells"])
    for cid, anchor in internal_links(nb["cells"]):
        if anchor not in targets:
            found.append(f"{name}: cell {cid} links to #{anchor}, which no heading of the lesson makes")
    linked = {anchor for _, anchor in internal_links(core)}
    for anchor, title in depth_sections(depth).items():
        if anchor not in linked:
            found.append(f"{name}: nothing in the core links to the depth's section {title!r} (#{anchor})")
    if depth and (depth[0]["cell_type"] != "markdown" or not source(depth[0]).startswith("## ")):
        found.append(f"{name}: the cell tagged {DEPTH_TAG!r} must be the depth's `## ` heading")
    for cid, tool, taught in tool_uses(core, number(path)):
        found.append(f"{name}: core cell {cid} uses {tool}, which lesson {taught} teaches")
    return found


def report(paths):
    print(f"{'lesson':34} {'core words':>10} {'cells':>6}   {'depth words':>11} {'cells':>6}")
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        core, depth = split(nb)
        print(f"{path.name:34} {words(core):10} {len(core):6}   {words(depth):11} {len(depth):6}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("lessons", nargs="*", type=pathlib.Path)
    args = parser.parse_args(argv)
    paths = args.lessons or lessons()
    if not args.check:
        report(paths)
        return 0
    found = [p for path in paths for p in problems(path)]
    print("\n".join(found) or "every lesson keeps the one-sitting rules")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
