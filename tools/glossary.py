"""Check, and make, the links from the lessons to the course's glossary (GLOSSARY.md).

    python tools/glossary.py            # list what is wrong; exit 1 if anything is
    python tools/glossary.py --link     # link each term where the course first uses it

The rule: where the course first uses a term of the glossary (reading the lessons' core
paths in order, prose only: not code, not headings, not the text of another glossary link), the
word links to its entry, and the entry's "First met in lesson N" names that lesson. So a
newcomer meets no term of the glossary without a link to its plain-words definition. Part 2
(lessons PART_2 on) is also read on its own, by practitioners: there each lesson links a
term where that lesson first uses it. A lesson's depth (tools/sitting.py), read after its
core, links a term where it first uses one that the cores read before it have not used.
A term's forms are its heading and its plural (ending in -s), plus FORMS below; terms
written in capitals (CUDA, GIL) match in that case only, the others in any case.
After an edit moves a first use, `--link` adds the new link (remove the old one by hand),
and the Chinese translation of each cell it changes is then stale (tools/translate.py).
"""
import argparse
import pathlib
import re
import sys

import nbformat
import sitting

ROOT = pathlib.Path(__file__).resolve().parent.parent
GLOSSARY = ROOT / "GLOSSARY.md"
URL = "https://github.com/d2l-gpu/gpu-course/blob/main/GLOSSARY.md#"
FORMS = {   # forms beyond the heading and its plural
    "all-reduce": ["all-reduced", "all-reducing"],
    "asynchronous": ["asynchronously"],
    "cuda graph": ["CUDA Graph", "CUDA Graphs"],
    "dma engine": ["DMA"],
    "flop": ["FLOP/s"],
    "host": ["host's"],
    "overlap": ["overlapping", "overlapped"],
    "pageable memory": ["pageable"],
    "pinned memory": ["pinned"],
    "synchronization": ["synchronize", "synchronizes", "synchronized", "synchronizing"],
    "tensor cores": ["Tensor Core", "tensor cores", "tensor core"],
    "utilisation": ["utilization"],
}
PART_2 = 8      # lessons 8-14, which a practitioner may start at: each links its own first uses too
FIRST_MET = re.compile(r"First met (?:and taught )?in lesson (\d+)")


def anchor(title):
    """GitHub's anchor of a heading: lower case, spaces to hyphens, other punctuation dropped."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def entries(text=None):
    """[(title, anchor, first lesson, forms)] of the glossary, in its order."""
    text = GLOSSARY.read_text(encoding="utf-8") if text is None else text
    found = []
    for block in re.split(r"^### ", text, flags=re.M)[1:]:
        title, _, body = block.partition("\n")
        met = FIRST_MET.search(" ".join(body.split()))
        if not met:
            raise ValueError(f"glossary entry {title!r} does not say where it is first met")
        forms = [title, title + "s", *FORMS.get(title.lower(), [])]
        found.append((title, anchor(title), int(met.group(1)), forms))
    return found


def lessons():
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _pattern(forms):
    """Any of the forms, as a whole word; in their case if the term has a capital after its
    first letter (CUDA, cuBLAS, Tensor Cores), in any case otherwise (kernel, Kernel)."""
    words = "|".join(sorted((re.escape(f) for f in forms), key=len, reverse=True))
    exact = any(c.isupper() for c in forms[0][1:])
    return re.compile(rf"(?<![\w\-/#.])(?:{words})(?![\w\-])", 0 if exact else re.I)


def prose(markdown, anchor):
    """The markdown with what is not prose blanked out: code, headings, quoted section names
    (§ "..."), URLs, HTML, and the text of every link except the glossary's links to
    ``anchor`` (those are uses, linked)."""
    masked = list(markdown)
    for pattern, flags in ((r"```.*?```", re.S), (r"`[^`\n]*`", 0), (r"<!--.*?-->", re.S), (r"^#.*$", re.M),
                           (r'§ "[^"]*"', 0),                       # a section's name, quoted
                           (r"\]\([^)\n]*\)", 0), (r"<[^>\n]*>", 0)):
        for m in re.finditer(pattern, markdown, flags=flags):
            masked[m.start():m.end()] = " " * (m.end() - m.start())
    for m in re.finditer(r"\[([^\]\n]*)\](?=\()", markdown):
        if not markdown.startswith(f"]({URL}{anchor})", m.end(1)):
            masked[m.start():m.end()] = " " * (m.end() - m.start())
    return "".join(masked)


def linked(markdown, anchor, start):
    """Whether the word at ``start`` is inside the text of a glossary link to ``anchor``."""
    return any(m.start(1) <= start < m.end(1)
               for m in re.finditer(r"\[([^\]\n]*)\]\(" + re.escape(URL + anchor) + r"\)", markdown))


def _part(nb, part):
    """[(index, cell)] of a lesson's core path, of its depth, or of both (part "all")."""
    core, depth = sitting.split(nb)
    cells = {"core": core, "depth": depth, "all": nb.cells}[part]
    start = 0 if part != "depth" else len(core)
    return list(enumerate(cells, start))


def first_uses(paths=None, part="core"):
    """{anchor: (lesson number, path, cell index, cell id, start, end)} of each term's first use,
    reading the lessons' core paths (or their depths, or both) in order."""
    todo = {a: _pattern(forms) for _, a, _, forms in entries()}
    found = {}
    for path in paths or lessons():
        nb = nbformat.read(path, as_version=4)
        for i, cell in _part(nb, part):
            if cell.cell_type != "markdown":
                continue
            for a, pattern in list(todo.items()):
                if m := pattern.search(prose(cell.source, a)):
                    found[a] = (int(path.name[:2]), path, i, cell.get("id"), m.start(), m.end())
                    del todo[a]
    return found


def uses_to_link():
    """[(anchor, use)]: where the core paths, read in order, first use each term; in each lesson
    of Part 2, where its core first uses it (a reader may start Part 2 without Part 1); and in
    each lesson's depth, where it first uses a term that the core paths its reader has read (the
    lessons' cores up to this one; in Part 2, this lesson's core) have not used."""
    found = list(first_uses().items())
    read_so_far = set()                           # the terms the cores of the lessons up to this one use
    for path in lessons():
        own = first_uses([path])
        read_so_far |= own.keys()
        if int(path.name[:2]) >= PART_2:
            found += [(a, use) for a, use in own.items() if (a, use) not in found]
        read = own.keys() if int(path.name[:2]) >= PART_2 else read_so_far
        found += [(a, use) for a, use in first_uses([path], part="depth").items()
                  if a not in read and (a, use) not in found]
    return found


def links(markdown):
    """[(anchor, text)] of the glossary links in a markdown text."""
    return [(m.group(2), m.group(1)) for m in re.finditer(r"\[([^\]\n]*)\]\(" + re.escape(URL) + r"([\w\-]*)\)", markdown)]


def problems():
    """What breaks the rule, one sentence each."""
    terms = entries()
    known = {a for _, a, _, _ in terms}
    found = {**first_uses(part="depth"), **first_uses()}     # a term only the depths use: its first
    said = []
    for title, a, lesson, forms in terms:
        if a not in found:
            said.append(f"{title!r}: no lesson uses it (drop it from the glossary)")
            continue
        number, path, i, cid, start, end = found[a]
        if number != lesson:
            said.append(f"{title!r}: first met in lesson {number} (cell {i + 1}), but the glossary says lesson {lesson}")
    books = {path: nbformat.read(path, as_version=4) for path in lessons()}
    for a, (number, path, i, cid, start, end) in uses_to_link():
        source = books[path].cells[i].source
        if not linked(source, a, start):
            said.append(f"#{a}: its first use in lesson {number}, {source[start:end]!r} in {path.name} cell "
                        f"{i + 1} ({cid}), is not a link to {URL}{a}")
    for path, nb in books.items():
        for i, cell in enumerate(nb.cells):
            for target, text in links(cell.source) if cell.cell_type == "markdown" else []:
                if target not in known:
                    said.append(f"{path.name} cell {i + 1}: the link {text!r} goes to #{target}, which the glossary lacks")
    return said


def link():
    """Link each term's first use that is not linked yet; returns the cells changed."""
    changed = []
    while True:                                   # one link at a time: a link moves what follows it
        todo = [(a, use) for a, use in uses_to_link()
                if not linked(nbformat.read(use[1], as_version=4).cells[use[2]].source, a, use[4])]
        if not todo:
            return changed
        todo.sort(key=lambda t: t[1][4] - t[1][5])      # longest first: "CUDA Graphs" before "CUDA"
        a, (number, path, i, cid, start, end) = todo[0]
        nb = nbformat.read(path, as_version=4)
        source = nb.cells[i].source
        nb.cells[i].source = f"{source[:start]}[{source[start:end]}]({URL}{a}){source[end:]}"
        nbformat.write(nb, path)
        changed.append((path.name, cid, a))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--link", action="store_true", help="link each term's first use")
    args = parser.parse_args(argv)
    if args.link:
        for name, cid, a in link():
            print(f"linked #{a} in {name} ({cid})")
    said = problems()
    print("\n".join(said) or f"the glossary's {len(entries())} terms are each linked where first used")
    return 1 if said else 0


if __name__ == "__main__":
    sys.exit(main())
