"""Build the Chinese edition of Part 1 (lessons 1-7) from the English lessons and the translations.

    python tools/translate.py             # write notebooks/zh/*.ipynb (fails if a translation is missing or stale)
    python tools/translate.py 03          # only lesson 03 (as --check 03)
    python tools/translate.py --check     # exit 1, naming lesson and cell, if anything is missing, stale or not current
    python tools/translate.py --todo 03   # what lesson 03 needs: each missing or stale cell's
                                          # English text under a marker with its new fingerprint

The English notebook is the source. `translations/zh/<lesson>.md` holds, for each English
markdown cell, a block that starts with a marker line

    <!-- cell c012-03copiesbetweendevic en:4f1c2a9b0d3e -->

naming the cell by its id and the fingerprint (`fingerprint()`: the first 12 hex digits of
the SHA-256 of the English text) of the English text that the block translates. When an
English cell changes, its fingerprint changes, and the block is stale until a translator
updates the text and the marker (`--todo` prints both). A block may also translate a code
cell's comments (marker `<!-- code c020-... en:... -->`, then the whole code cell with
translated comments): its code must stay the English code (checked token by token).

The generated notebook keeps every code cell, its outputs and every cell's metadata (so the
slides) exactly as the English run made them: the Chinese lessons need no run of their
own. Colab links point to the Chinese notebook. Never edit notebooks/zh/ by hand.
"""
import argparse
import copy
import hashlib
import io
import pathlib
import re
import shutil
import sys
import tokenize

import nbformat
import sitting

ROOT = pathlib.Path(__file__).resolve().parent.parent
EN = ROOT / "notebooks"
ZH = EN / "zh"
TRANSLATIONS = ROOT / "translations" / "zh"
GLOSSARY = TRANSLATIONS / "GLOSSARY.md"
PART_1 = sorted(p for p in EN.glob("0[1-7]_*.ipynb"))
# Parts 2 and 3 (lessons 8 on) are translated as far as their core path and the heading cell of
# their depth, which says that the depth stays in English; a lesson joins the Chinese edition
# when its translation file exists.
LATER = sorted(p for p in EN.glob("[0-9][0-9]_*.ipynb") if p not in PART_1)
LESSONS = PART_1 + [p for p in LATER if (TRANSLATIONS / f"{p.stem}.md").exists()]
MARKER = re.compile(r"^<!-- (cell|code) (\S+) en:([0-9a-f]{12}) -->$", re.M)
COLAB = "colab.research.google.com/github/d2l-gpu/gpu-course/blob/main/notebooks/"


CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"      # CJK punctuation, ideographs, full-width forms
SOFT_BREAK = re.compile(f"(?<=[{CJK}])\n(?=[{CJK}])")


def joined(text):
    """A translation with its line breaks between two Chinese characters removed: markdown turns a
    line break inside a paragraph into a space, which between Chinese characters shows as a gap."""
    return SOFT_BREAK.sub("", text)


def fingerprint(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def source(cell):
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def translated(nb, lesson):
    """The cells of ``nb`` that the Chinese edition translates: every cell of a Part 1 lesson; of a
    later lesson, its core path and the first cell of its depth (tools/sitting.py)."""
    if sitting.number(lesson) <= 7:                  # Part 1: lessons 1-7
        return list(nb.cells)
    core, depth = sitting.split(nb)
    return list(core) + list(depth[:1])


def translation_path(lesson):
    return TRANSLATIONS / f"{pathlib.Path(lesson).stem}.md"


def read_translations(path):
    """{cell id: (kind, fingerprint, text)} from one translation file."""
    text = pathlib.Path(path).read_text(encoding="utf-8") if pathlib.Path(path).exists() else ""
    marks = list(MARKER.finditer(text))
    entries = {}
    for k, m in enumerate(marks):
        end = marks[k + 1].start() if k + 1 < len(marks) else len(text)
        body = joined(text[m.end():end].strip("\n"))
        if m[2] in entries:
            raise ValueError(f"{pathlib.Path(path).name}: cell {m[2]} is translated twice")
        entries[m[2]] = (m[1], m[3], body)
    return entries


def code_tokens(code):
    """The code without its comments: what must not change in a translation."""
    lines = [line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))]
    magics = [line for line in code.splitlines() if line.lstrip().startswith(("%", "!"))]
    tokens = tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline)
    kept = [(t.type, t.string) for t in tokens
            if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                              tokenize.DEDENT, tokenize.ENDMARKER)]
    return kept, magics


def problems(lesson):
    """Sentences naming each missing, stale, unknown or altered translation of one lesson."""
    lesson = pathlib.Path(lesson)
    nb = nbformat.read(lesson, as_version=4)
    entries = read_translations(translation_path(lesson))
    found, cells = [], {c.id: c for c in translated(nb, lesson)}
    for cell in translated(nb, lesson):
        if cell.cell_type == "markdown":
            if cell.id not in entries:
                found.append(f"{lesson.stem}, cell {cell.id}: no translation")
            elif entries[cell.id][1] != fingerprint(source(cell)):
                found.append(f"{lesson.stem}, cell {cell.id}: stale (the English text changed; "
                             f"update the translation and its marker to en:{fingerprint(source(cell))})")
    for cid, (kind, fp, body) in entries.items():
        cell = cells.get(cid)
        if cell is None:
            found.append(f"{lesson.stem}, cell {cid}: translated, but the English lesson has no such cell "
                         "(or it is in the depth, which stays English)")
        elif (kind == "cell") != (cell.cell_type == "markdown"):
            found.append(f"{lesson.stem}, cell {cid}: marked '{kind}' but it is a {cell.cell_type} cell")
        elif kind == "code":
            if fp != fingerprint(source(cell)):
                found.append(f"{lesson.stem}, cell {cid}: stale comments (the English code changed; "
                             f"marker en:{fingerprint(source(cell))})")
            elif code_tokens(body) != code_tokens(source(cell)):
                found.append(f"{lesson.stem}, cell {cid}: the translated cell's code differs from the "
                             "English beyond its comments")
    return found


def build(lesson):
    """The Chinese notebook of one English lesson (raises if its translation has problems)."""
    lesson = pathlib.Path(lesson)
    wrong = problems(lesson)
    if wrong:
        raise ValueError("\n".join(wrong))
    nb = nbformat.read(lesson, as_version=4)
    entries = read_translations(translation_path(lesson))
    out = copy.deepcopy(nb)
    for cell in out.cells:
        if cell.id in entries:
            text = entries[cell.id][2]
            if cell.cell_type == "markdown":
                text = text.replace(COLAB + lesson.name, COLAB + "zh/" + lesson.name)
            cell.source = text
    # A link to a heading that is now Chinese follows it (a translator may keep the English
    # anchor; a later lesson's English depth links to its core's headings).
    moved = {}
    for en_cell, zh_cell in zip(nb.cells, out.cells):
        if en_cell.cell_type == "markdown" and en_cell.id in entries:
            en_titles, zh_titles = (re.findall(r"^#{1,6} +(.+?) *$", c.source, re.M) for c in (en_cell, zh_cell))
            if len(en_titles) == len(zh_titles):
                moved.update({sitting.heading_anchor(a): sitting.heading_anchor(b)
                              for a, b in zip(en_titles, zh_titles)})
    have = sitting.headings(out.cells)
    for cell in out.cells:
        if cell.cell_type == "markdown":
            cell.source = re.sub(r"\]\(#([^)\s]+)\)", lambda m: f"](#{moved[m[1]]})"
                                 if m[1] not in have and m[1] in moved else m[0], cell.source)
    out.metadata.setdefault("course", {})["translation"] = {
        "language": "zh-CN", "source": f"../{lesson.name}",
        "note": "generated by tools/translate.py from the English lesson; do not edit"}
    return out


def dumps(nb):
    return nbformat.writes(nb) + "\n"


def zh_path(lesson):
    return ZH / pathlib.Path(lesson).name


def companions(lesson):
    """The slideshow's CSS files next to a lesson: (English file, its copy beside the Chinese one)."""
    pairs = [(EN / "rise.css", ZH / "rise.css")]
    css = pathlib.Path(lesson).with_suffix(".css")
    if css.exists():
        pairs.append((css, ZH / css.name))
    return pairs


def not_current(lesson):
    """Why the stored Chinese notebook (or its CSS) is not what build() makes now, or None."""
    path = zh_path(lesson)
    if not path.exists():
        return f"{path.relative_to(ROOT)} is missing: run python tools/translate.py"
    if path.read_text(encoding="utf-8") != dumps(build(lesson)):
        return f"{path.relative_to(ROOT)} is not current: run python tools/translate.py"
    for src, dst in companions(lesson):
        if not dst.exists() or dst.read_bytes() != src.read_bytes():
            return f"{dst.relative_to(ROOT)} differs from {src.relative_to(ROOT)}: run python tools/translate.py"
    return None


def todo(lesson):
    """Blocks to fill in for each missing or stale markdown cell, with the English text to translate."""
    lesson = pathlib.Path(lesson)
    nb = nbformat.read(lesson, as_version=4)
    entries = read_translations(translation_path(lesson))
    blocks = []
    for cell in translated(nb, lesson):
        if cell.cell_type != "markdown":
            continue
        fp = fingerprint(source(cell))
        if cell.id in entries and entries[cell.id][1] == fp:
            continue
        old = f"\n(now: {entries[cell.id][2][:200]}...)" if cell.id in entries else ""
        blocks.append(f"<!-- cell {cell.id} en:{fp} -->\n[ENGLISH]\n{source(cell)}{old}\n")
    return "\n".join(blocks)


def glossary():
    """[(English forms, Chinese term)] from the glossary's table, longest forms first."""
    rows = []
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and line.startswith("|") and not set(cells[1]) <= set("-") and cells[1] != "中文":
            rows.append(([f.strip() for f in cells[0].split("/")], cells[1]))
    return sorted(rows, key=lambda row: -max(len(f) for f in row[0]))


def prose(markdown):
    """A markdown cell's words: without code, links' targets, URLs and HTML."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\]\([^)]*\)", "] ", text)
    text = re.sub(r"https?://\S+|<[^>]+>", " ", text)
    return text


def terms_in(english):
    """The glossary rows an English text uses; a longer term hides the shorter ones inside it
    ("device memory" is 显存, not also 设备)."""
    text, used = prose(english), []
    for forms, chinese in glossary():
        pattern = r"\b(?:" + "|".join(re.escape(f) for f in forms) + r")\b"
        if re.search(pattern, text, re.I):
            used.append((forms, chinese))
            text = re.sub(pattern, " ", text, flags=re.I)
    return used


def glossary_problems(lesson):
    """Cells whose translation lacks the glossary's term for a term its English uses, and terms
    whose first use in the lesson (the first cell whose English uses them) gives no English
    beside the Chinese."""
    lesson = pathlib.Path(lesson)
    nb = nbformat.read(lesson, as_version=4)
    entries = read_translations(translation_path(lesson))
    found, introduced = [], set()
    for cell in translated(nb, lesson):
        if cell.cell_type != "markdown" or cell.id not in entries:
            continue
        chinese_text = prose(entries[cell.id][2])
        for forms, chinese in terms_in(source(cell)):
            if chinese not in chinese_text:
                found.append(f"{lesson.stem}, cell {cell.id}: the English says '{forms[0]}', "
                             f"the translation lacks {chinese}")
            elif chinese not in introduced:
                introduced.add(chinese)
                if not any(re.search(rf"\b{re.escape(f)}\b", chinese_text, re.I) for f in forms):
                    found.append(f"{lesson.stem}, cell {cell.id}: first use of {chinese} in the lesson; "
                                 f"give the English beside it, e.g. {chinese}（{forms[0]}）")
    return found


def write(lessons):
    ZH.mkdir(exist_ok=True)
    for lesson in lessons:
        zh_path(lesson).write_text(dumps(build(lesson)), encoding="utf-8")
        for src, dst in companions(lesson):
            shutil.copyfile(src, dst)


def lessons_named(prefixes, parser, todo=False):
    """The lessons of the Chinese edition whose names start with each prefix ('03'), or all of
    them; for --todo, any lesson (a later lesson's translation may not exist yet)."""
    if not prefixes:
        return LESSONS
    found = []
    for prefix in prefixes:
        lesson = next((p for p in (PART_1 + LATER if todo else LESSONS) if p.name.startswith(prefix)), None)
        if lesson is None:
            parser.error(f"no lesson of the Chinese edition starts with {prefix!r}")
        found.append(lesson)
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("lessons", nargs="*", metavar="NN", help="only these lessons (01 ... 14); default all")
    parser.add_argument("--check", action="store_true", help="exit 1 if anything is missing, stale or not current")
    parser.add_argument("--todo", metavar="NN", help="print what lesson NN needs translated")
    args = parser.parse_args(argv)
    if args.todo:
        lesson, = lessons_named([args.todo], parser, todo=True)
        print(todo(lesson) or f"{lesson.stem}: every markdown cell is translated and fresh")
        return 0
    lessons = lessons_named(args.lessons, parser)
    found = [p for lesson in lessons for p in problems(lesson)]
    if args.check:
        found += [p for lesson in lessons for p in glossary_problems(lesson)]
        found += [why for lesson in lessons if not problems(lesson) for why in [not_current(lesson)] if why]
        print("\n".join(found) or "the Chinese edition is complete and current")
        return 1 if found else 0
    if found:
        print("\n".join(found), file=sys.stderr)
        return 1
    write(lessons)
    print(f"wrote {len(lessons)} lesson(s) to {ZH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
