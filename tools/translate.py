"""Build the Chinese edition (Part 1 whole; the core paths of lessons 8 on) from the English lessons and the translations.

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
updates the text and the marker (`--todo` prints both). Every code cell with comments for a
reader has a block too (marker `<!-- code c020-... en:... -->`, then the whole code cell with
translated comments): its code must stay the English code (checked token by token), and a
comment left in English is named. Every GPU-only cell's expectation (what its fallback
prints) has a block `<!-- expect 03-pinned-copies en:... -->`: each English line of its notes,
labels and reasons, then `= ` and its Chinese; expectations.md holds the frame around them.
They are gathered into d2l_utils/expectations/zh.json, which `d2l_utils.use_language('zh')`
reads (the Chinese setup cell calls it).

The generated notebook keeps every code cell, its outputs and every cell's metadata (so the
slides) exactly as the English run made them, except the setup cell (Chinese, with the call
above) and the GPU-only cells' outputs: a fresh kernel per lesson prints their fallbacks in
Chinese (`render()`; a stamp in the notebook's metadata says when that is due again). Colab
links point to the Chinese notebook. Never edit notebooks/zh/ by hand.
"""
import argparse
import copy
import functools
import hashlib
import io
import json
import pathlib
import re
import shutil
import sys
import tokenize

import nbformat
import nbtemplate
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
MARKER = re.compile(r"^<!-- (cell|code|expect) (\S+) en:([0-9a-f]{12}) -->$", re.M)
FRAME_FILE = TRANSLATIONS / "expectations.md"        # the expectation blocks' frame (FRAME)
CATALOG = ROOT / "d2l_utils" / "expectations" / "zh.json"
# A comment that is an instruction to a tool, not words to a reader: never translated.
DIRECTIVE = re.compile(r"#\s*(?:@save|@title|NBVAL_|noqa|type:|pragma|!)")
SHOW = re.compile(r"show_recording\(\s*'([^']+)'\s*,\s*gpus\s*=\s*(\d+)\s*\)")
ENGLISH_WORDS = re.compile(r"[A-Za-z][A-Za-z'-]+(?:[ ,;:]+[A-Za-z][A-Za-z'-]+){2,}")
HAN = re.compile(r"[\u4e00-\u9fff]")
COLAB = "colab.research.google.com/github/d2l-gpu/gpu-course/blob/main/notebooks/"
# Cells whose outputs print the lesson's own source, comments included, and so differ in Chinese:
# build() takes their outputs from a run of the Chinese lesson's code cells up to them (replay()).
# Lesson 7 prints the lines of train_ddp.py that make it a DDP program (a strict nbval run of every
# Chinese lesson found no other such cell).
REPLAY = {"07_distributed_data_parallel": ("c009c-07ddplines",)}


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
        body = text[m.end():end].strip("\n")
        body = joined(body) if m[1] == "cell" else body
        if m[2] in entries:
            raise ValueError(f"{pathlib.Path(path).name}: cell {m[2]} is translated twice")
        entries[m[2]] = (m[1], m[3], body)
    return entries


def _python(code):
    """The code without its magics' lines (`%%writefile`, `!ls`), which Python cannot parse."""
    return "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))) + "\n"


def docstrings(code):
    """{(line, column): text} of the docstrings of ``code`` (module, function, class)."""
    import ast
    try:
        tree = ast.parse(_python(code))
    except SyntaxError:
        return {}
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found[first.value.lineno, first.value.col_offset] = first.value.value
    return found


def code_tokens(code):
    """The code without its comments and docstrings (which a translation translates): what must not change."""
    magics = [line for line in code.splitlines() if line.lstrip().startswith(("%", "!"))]
    tokens = tokenize.generate_tokens(io.StringIO(_python(code)).readline)
    docs = docstrings(code)
    kept = [(t.type, "<docstring>" if t.type == tokenize.STRING and t.start in docs else t.string) for t in tokens
            if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                              tokenize.DEDENT, tokenize.ENDMARKER)]
    return kept, magics


def comments(code):
    """The comments of a code cell (its magics' lines left out), each with its '#'."""
    lines = [line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    return [t.string for t in tokens if t.type == tokenize.COMMENT]


def worded(code):
    """The comments of ``code`` that are words for a reader (not a tool's directive): what a
    translation of the cell translates, with its docstrings."""
    return [c for c in comments(code) if not DIRECTIVE.match(c) and re.search(r"[A-Za-z]{2}", c)]


def untranslated(code):
    """Comments and docstrings of a translated cell still in English: three English words in a row and
    no Chinese (a docstring is shown by its first line)."""
    texts = worded(code) + [doc.strip().splitlines()[0] for doc in docstrings(code).values() if doc.strip()]
    return [c for c in texts if not HAN.search(c) and ENGLISH_WORDS.search(c)]


def is_setup(cell):
    """The setup cell (tools/nbtemplate.py's), whose Chinese edition build() writes itself."""
    return cell.cell_type == "code" and source(cell) == nbtemplate.setup_source()


def expectation_ids(cell):
    """The GPU-only cells' ids (``'03-pinned-copies'``) that a code cell's fallback shows."""
    return [m[0] for m in SHOW.findall(source(cell))] if cell.cell_type == "code" else []


@functools.lru_cache(maxsize=None)
def expect_lines(cell_id):
    """The English sentences of one expectation (its notes, labels, reasons), or of the frame."""
    if cell_id == "frame":
        return tuple(expectations().FRAME)
    return tuple(expectations().lines_of(cell_id))


def expectations():
    sys.path.insert(0, str(ROOT))
    import d2l_utils.expectations
    return d2l_utils.expectations


def pairs(body):
    """{English line: Chinese line} of an ``expect`` block: each English line, then its
    translation on the next line after '= ' (an empty translation is missing)."""
    found, english = {}, None
    for line in body.splitlines():
        if line.startswith("= ") or line == "=":
            if english is not None:
                found[english] = line[2:].strip()
                english = None
        elif line.strip():
            english = line.rstrip()
            found.setdefault(english, "")
    return found


def expect_problems(where, cell_id, entry):
    """What is wrong with the translation ``entry`` (or None) of expectation ``cell_id``."""
    lines = expect_lines(cell_id)
    fp = fingerprint("\n".join(lines))
    if entry is None:
        return [f"{where}: expectation {cell_id} has no translation (marker <!-- expect {cell_id} en:{fp} -->)"]
    kind, old, body = entry
    if old != fp:
        return [f"{where}: expectation {cell_id} is stale (its English changed; python tools/translate.py "
                f"--todo NN shows the new lines; marker en:{fp})"]
    given = pairs(body)
    missing = [line for line in lines if not given.get(line)]
    extra = [line for line in given if line not in lines]
    found = [f"{where}: expectation {cell_id}: no translation of {line!r}" for line in missing]
    return found + [f"{where}: expectation {cell_id}: {line!r} is not one of its lines" for line in extra]


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
        elif (worded(source(cell)) or docstrings(source(cell))) and cell.id not in entries and not is_setup(cell):
            found.append(f"{lesson.stem}, cell {cell.id}: its comments have no translation "
                         f"(marker <!-- code {cell.id} en:{fingerprint(source(cell))} -->)")
        for cell_id in expectation_ids(cell):
            found += expect_problems(f"{lesson.stem}, cell {cell.id}", cell_id, entries.get(cell_id))
    shown = {i for c in translated(nb, lesson) for i in expectation_ids(c)}
    for cid, (kind, fp, body) in entries.items():
        cell = cells.get(cid)
        if kind == "expect":
            if cid not in shown:
                found.append(f"{lesson.stem}: expectation {cid} is translated, but no cell of its core shows it")
        elif cell is None:
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
            elif untranslated(body):
                found.append(f"{lesson.stem}, cell {cid}: comment or docstring still in English: "
                             f"{untranslated(body)[0]!r}")
    return found


def stamp(cell, before=()):
    """What a GPU-only cell's Chinese outputs are made from: its English outputs, the Chinese of its
    expectations' lines and of the frame (and, for a REPLAY cell, the Chinese code cells ``before``
    it and its own). When it changes, the outputs are rendered again."""
    chinese = catalog()
    made_of = {"en": cell.get("outputs", []), "setup": nbtemplate.setup_source("zh"), "before": list(before),
               "frame": chinese["frame"], "lines": {line: chinese["lines"].get(line)
                                                    for i in expectation_ids(cell) for line in expect_lines(i)}}
    return fingerprint(json.dumps(made_of, sort_keys=True, ensure_ascii=False))


def _shape(output):
    """An output as compared with its rendering: a figure's image bytes left out."""
    o = dict(output)
    o.pop("execution_count", None)
    if "data" in o:
        o["data"] = {k: v for k, v in o["data"].items() if not k.startswith("image/")}
    return json.dumps(o, sort_keys=True)


def render(cells):
    """{cell id: Chinese outputs} of GPU-only cells (``cells``: [(lesson, English cell)]), from a fresh
    kernel per lesson (as the lesson's own run) that runs each cell's fallback in English and in
    Chinese: the English rendering must be the end of the cell's stored outputs (else the English lesson's outputs are not current), and
    the Chinese replaces it (a figure keeps the English run's image: its text is English in both)."""
    done = {}
    for lesson in dict.fromkeys(lesson for lesson, _ in cells):
        mine = [(l, c) for l, c in cells if l == lesson]
        fallbacks = [(l, c) for l, c in mine if expectation_ids(c)]
        if fallbacks:
            done.update(_render(fallbacks))
        for _, cell in mine:
            if not expectation_ids(cell):
                done[cell.id] = replay(lesson, cell.id)
    return done


def zh_code(lesson):
    """[(id, Chinese source)] of a lesson's code cells, as build() writes them (outputs aside)."""
    entries = read_translations(translation_path(lesson))
    nb = nbformat.read(lesson, as_version=4)
    return [(c.id, nbtemplate.setup_source("zh") if is_setup(c) else
             entries[c.id][2] if c.id in entries and entries[c.id][0] == "code" else source(c))
            for c in nb.cells if c.cell_type == "code"]


def code_upto(lesson, cell_id):
    """The Chinese sources of a lesson's code cells up to ``cell_id`` (included): what a REPLAY
    cell's outputs come from (and () for any other cell)."""
    if cell_id not in REPLAY.get(pathlib.Path(lesson).stem, ()):
        return ()
    code = zh_code(lesson)
    return [text for _, text in code[:[i for i, _ in code].index(cell_id) + 1]]


def replay(lesson, cell_id):
    """The outputs of the Chinese lesson's cell ``cell_id``: its code cells up to it, run in a fresh
    kernel in a scratch folder (files the lesson writes go there)."""
    import tempfile
    from nbclient import NotebookClient
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(text) for text in code_upto(lesson, cell_id)])
    with tempfile.TemporaryDirectory() as scratch:
        NotebookClient(nb, timeout=300, kernel_name="python3", record_timing=False,
                       resources={"metadata": {"path": scratch}}).execute()
    return join_streams(nb.cells[-1].outputs)


def join_streams(outputs):
    """Outputs (copies) with each run of adjacent prints to the same stream joined in one, the order
    kept: as nbval compares them (how a kernel's prints split into messages depends on timing) and
    as JupyterLab shows them (tools/book.py uses it too)."""
    joined = []
    for o in outputs:
        o = copy.deepcopy(o)
        if o.get("output_type") == "stream" and isinstance(o["text"], list):
            o["text"] = "".join(o["text"])
        if joined and o.get("output_type") == "stream" == joined[-1].get("output_type") \
                and o["name"] == joined[-1]["name"]:
            joined[-1]["text"] += o["text"]
        else:
            joined.append(o)
    return joined


def _render(cells):
    from nbclient import NotebookClient
    runs = [nbformat.v4.new_code_cell("%matplotlib inline\nimport matplotlib.pyplot as plt\n"
                                      "plt.style.use('d2l_utils.course')\nimport d2l_utils")]
    for _, cell in cells:
        calls = "\n".join(f"d2l_utils.show_recording('{i}', gpus={g})" for i, g in SHOW.findall(source(cell)))
        runs += [nbformat.v4.new_code_cell(f"d2l_utils.use_language('{lang}')\n{calls}") for lang in ("en", "zh")]
    nb = nbformat.v4.new_notebook(cells=runs)
    NotebookClient(nb, timeout=300, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(EN)}}).execute()
    done = {}
    for k, (lesson, cell) in enumerate(cells):
        en, zh = (join_streams(nb.cells[j].outputs) for j in (1 + 2 * k, 2 + 2 * k))
        stored = join_streams(nbformat.from_dict(o) for o in cell.outputs)
        head, tail = stored[:len(stored) - len(en)], stored[len(stored) - len(en):]
        if tail and en and tail[0].get("output_type") == "stream" and en[0].get("output_type") == "stream" \
                and tail[0]["text"] != en[0]["text"] and tail[0]["text"].endswith(en[0]["text"]):
            before = copy.deepcopy(tail[0])            # an earlier print in the same stream output
            before["text"] = tail[0]["text"][:-len(en[0]["text"])]
            head, tail = head + [before], [en[0]] + tail[1:]
        if [_shape(o) for o in tail] != [_shape(o) for o in en]:
            raise ValueError(f"{lesson.stem}, cell {cell.id}: its stored outputs do not end with what its fallback "
                             "prints now: run python tools/execute_notebooks.py on the English lesson first")
        zh = [copy.deepcopy(o) for o in zh]
        for mine, theirs in zip(zh, tail):
            if "data" in mine and any(k.startswith("image/") for k in theirs.get("data", {})):
                mine["data"] = copy.deepcopy(theirs["data"])
        if head and zh and head[-1].get("output_type") == "stream" == zh[0].get("output_type") \
                and head[-1]["name"] == zh[0]["name"]:
            head[-1] = copy.deepcopy(head[-1])
            head[-1]["text"] += zh[0]["text"]
            zh = zh[1:]
        done[cell.id] = head + zh
    return done


def build(lesson, rendered=None):
    """The Chinese notebook of one English lesson (raises if its translation has problems). A GPU-only
    cell's outputs are the Chinese rendering of its fallback: from ``rendered`` ({cell id: outputs}), or
    the stored Chinese notebook's where its stamp is current, else the English ones (not current)."""
    lesson = pathlib.Path(lesson)
    wrong = problems(lesson)
    if wrong:
        raise ValueError("\n".join(wrong))
    nb = nbformat.read(lesson, as_version=4)
    rendered = dict(rendered or {})
    stamps = {}
    old = nbformat.read(zh_path(lesson), as_version=4) if zh_path(lesson).exists() else None
    old_stamps = old.metadata.get("course", {}).get("translation", {}).get("rendered", {}) if old else {}
    entries = read_translations(translation_path(lesson))
    out = copy.deepcopy(nb)
    for cell in out.cells:
        if is_setup(cell):
            cell.source = nbtemplate.setup_source("zh")
        elif cell.id in entries and entries[cell.id][0] != "expect":
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
    shown = {c.id for c in translated(nb, lesson) if expectation_ids(c)} | set(REPLAY.get(lesson.stem, ()))
    for en_cell, zh_cell in zip(nb.cells, out.cells):
        if en_cell.id not in shown:
            continue
        stamps[en_cell.id] = stamp(en_cell, code_upto(lesson, en_cell.id))
        if en_cell.id not in rendered and old is not None and old_stamps.get(en_cell.id) == stamps[en_cell.id]:
            rendered[en_cell.id] = next(c.outputs for c in old.cells if c.id == en_cell.id)
        if en_cell.id in rendered:
            zh_cell.outputs = copy.deepcopy(rendered[en_cell.id])
        else:
            stamps[en_cell.id] = "not rendered"
    out.metadata.setdefault("course", {})["translation"] = {
        "language": "zh-CN", "source": f"../{lesson.name}",
        "note": "generated by tools/translate.py from the English lesson; do not edit",
        "rendered": stamps}
    return out


def to_render(lesson):
    """[(lesson, English cell)]: the GPU-only cells whose stored Chinese outputs are not current."""
    nb = nbformat.read(lesson, as_version=4)
    old = nbformat.read(zh_path(lesson), as_version=4) if zh_path(lesson).exists() else None
    stamps = old.metadata.get("course", {}).get("translation", {}).get("rendered", {}) if old else {}
    replayed = REPLAY.get(pathlib.Path(lesson).stem, ())
    return [(pathlib.Path(lesson), c) for c in translated(nb, lesson)
            if (expectation_ids(c) or c.id in replayed) and stamps.get(c.id) != stamp(c, code_upto(lesson, c.id))]


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
    """Why the stored Chinese notebook (or its CSS, or the catalog) is not what build() makes now, or None."""
    path = zh_path(lesson)
    if not CATALOG.exists() or CATALOG.read_text(encoding="utf-8") != catalog_text():
        return f"{CATALOG.relative_to(ROOT)} is not current: run python tools/translate.py"
    if not path.exists():
        return f"{path.relative_to(ROOT)} is missing: run python tools/translate.py"
    made = build(lesson)
    stale = [c for c, st in made.metadata["course"]["translation"]["rendered"].items() if st == "not rendered"]
    if stale:
        return (f"{path.relative_to(ROOT)}: the Chinese outputs of cell {stale[0]} (GPU-only) are not current: "
                "run python tools/translate.py")
    if path.read_text(encoding="utf-8") != dumps(made):
        return f"{path.relative_to(ROOT)} is not current: run python tools/translate.py"
    for src, dst in companions(lesson):
        if not dst.exists() or dst.read_bytes() != src.read_bytes():
            return f"{dst.relative_to(ROOT)} differs from {src.relative_to(ROOT)}: run python tools/translate.py"
    return None


def todo(lesson):
    """Blocks to fill in for each missing or stale cell and expectation, with the English to translate
    (a code cell: its code, whose comments are translated; an expectation: its lines, each followed
    by '= ' and its translation, the ones still current already filled in)."""
    lesson = pathlib.Path(lesson)
    nb = nbformat.read(lesson, as_version=4)
    entries = read_translations(translation_path(lesson))
    blocks = []
    for cell in translated(nb, lesson):
        fp = fingerprint(source(cell))
        stale = cell.id not in entries or entries[cell.id][1] != fp
        if cell.cell_type == "markdown" and stale:
            old = f"\n(now: {entries[cell.id][2][:200]}...)" if cell.id in entries else ""
            blocks.append(f"<!-- cell {cell.id} en:{fp} -->\n[ENGLISH]\n{source(cell)}{old}\n")
        elif (cell.cell_type == "code" and (worded(source(cell)) or docstrings(source(cell))) and not is_setup(cell)
              and (stale or untranslated(entries[cell.id][2]))):
            old = f"\n(now:\n{entries[cell.id][2]}\n)" if cell.id in entries else ""
            blocks.append(f"<!-- code {cell.id} en:{fp} -->\n{source(cell)}{old}\n")
        for cell_id in expectation_ids(cell):
            if expect_problems("", cell_id, entries.get(cell_id)):
                blocks.append(expect_block(cell_id, entries.get(cell_id)))
    return "\n".join(blocks)


def expect_block(cell_id, entry):
    """An ``expect`` block for ``cell_id``: its current lines, with the translations still valid."""
    lines = expect_lines(cell_id)
    given = pairs(entry[2]) if entry else {}
    body = "\n".join(f"{line}\n= {given.get(line, '')}".rstrip() for line in lines)
    return f"<!-- expect {cell_id} en:{fingerprint(chr(10).join(lines))} -->\n{body}\n"


def catalog():
    """{'frame': {template: Chinese}, 'lines': {line: Chinese}}: what use_language('zh') reads."""
    files = [FRAME_FILE] + [translation_path(lesson) for lesson in LESSONS]
    return _catalog(tuple((f, f.stat().st_mtime_ns if f.exists() else None) for f in files))


@functools.lru_cache(maxsize=2)
def _catalog(_files):
    frame = read_translations(FRAME_FILE).get("frame")
    lines = {}
    for lesson in LESSONS:
        for kind, fp, body in read_translations(translation_path(lesson)).values():
            if kind == "expect":
                lines.update({en: zh for en, zh in pairs(body).items() if zh})
    return {"frame": {en: zh for en, zh in pairs(frame[2]).items() if zh} if frame else {},
            "lines": dict(sorted(lines.items()))}


def catalog_text():
    return json.dumps(catalog(), ensure_ascii=False, indent=0, sort_keys=True) + "\n"


def frame_problems():
    entry = read_translations(FRAME_FILE).get("frame")
    found = expect_problems(FRAME_FILE.name, "frame", entry)
    if entry and not found:
        templates = pairs(entry[2])
        fields = lambda t: sorted(re.findall(r"\{(\w+)\}", t))      # noqa: E731
        found = [f"{FRAME_FILE.name}: {en!r} and its translation name different fields"
                 for en, zh in templates.items() if fields(en) != fields(zh)]
    return found


def glossary():
    """[(English forms, Chinese term, avoided variants, first-use text)] from the glossary's table,
    longest forms first. A term may be given as 'A / B' (either is the term; A is the main one)."""
    return _glossary(GLOSSARY.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=4)
def _glossary(text):
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and line.startswith("|") and not set(cells[1]) <= set("-") and cells[1] != "中文":
            forms, chinese, avoid, first = cells
            rows.append(Term([f.strip() for f in forms.split("/")], chinese.split(" / ")[0].strip(),
                             [t.strip() for t in chinese.split(" / ")],
                             [v.strip() for v in re.split("[、,]", avoid) if v.strip()], first))
    return sorted(rows, key=lambda row: -max(len(f) for f in row.forms))


class Term(tuple):
    """One glossary row: ``forms`` (English), ``chinese`` (the main term), ``accepted`` (every Chinese
    term that counts), ``avoid`` (variants not to use for it), ``first`` (the text of its first use)."""
    def __new__(cls, forms, chinese, accepted, avoid, first):
        return super().__new__(cls, (forms, chinese))

    def __init__(self, forms, chinese, accepted, avoid, first):
        self.forms, self.chinese, self.accepted, self.avoid, self.first = forms, chinese, accepted, avoid, first


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
    for term in glossary():
        pattern = r"\b(?:" + "|".join(re.escape(f).replace(r"\ ", r"\s+") for f in term.forms) + r")\b"
        if re.search(pattern, text, re.I):
            used.append(term)
            text = re.sub(pattern, " ", text, flags=re.I)
    return used


def _uses(lesson):
    """[(cell id, English terms, Chinese prose)] of a lesson's translated markdown cells, in order."""
    nb = nbformat.read(lesson, as_version=4)
    entries = read_translations(translation_path(lesson))
    return [(cell.id, terms_in(source(cell)), prose(entries[cell.id][2])) for cell in translated(nb, lesson)
            if cell.cell_type == "markdown" and cell.id in entries and entries[cell.id][0] == "cell"]


def glossary_problems(lesson):
    """Cells whose translation lacks the glossary's term for a term its English uses, or uses a
    variant the glossary avoids for it; and terms whose first use in the course (reading the
    lessons in order; the first cell whose English uses them) gives no English beside the Chinese,
    or not the glossary's first-use text."""
    lesson = pathlib.Path(lesson)
    earlier = [p for p in LESSONS if sitting.number(p) < sitting.number(lesson)]
    introduced = {term.chinese for p in earlier for _, terms, _ in _uses(p) for term in terms}
    found = []
    for cell_id, terms, chinese_text in _uses(lesson):
        where = f"{lesson.stem}, cell {cell_id}"
        others = [t for term in terms for t in term.accepted]
        for term in terms:
            if not any(t in chinese_text for t in term.accepted):
                found.append(f"{where}: the English says '{term.forms[0]}', the translation lacks {term.chinese}")
                continue
            for variant in term.avoid:
                if variant in chinese_text and not any(variant in t for t in others):
                    found.append(f"{where}: the English says '{term.forms[0]}', the translation uses "
                                 f"{variant}; the glossary's term is {term.chinese}")
            if term.chinese in introduced:
                continue
            introduced.add(term.chinese)
            if term.first:
                if term.first not in chinese_text:
                    found.append(f"{where}: first use of {term.chinese} in the course; write it {term.first}")
            elif not any(re.search(rf"\b{re.escape(f)}\b", chinese_text, re.I) for f in term.forms):
                found.append(f"{where}: first use of {term.chinese} in the course; give the English "
                             f"beside it, e.g. {term.chinese}（{term.forms[0]}）")
    return found


TRANSLATES = re.compile(r"\A<!-- translates (\S+) en:([0-9a-f]{12}) -->\n")


def kit_files():
    """The workshop kit's Chinese texts (translations/zh/kit/): the quiz and the lab sheets."""
    return sorted((TRANSLATIONS / "kit").rglob("*.md"))


def kit_problems():
    """Each Chinese kit text whose first line does not name the English it translates, or whose
    English has changed since (its fingerprint), or whose links lead nowhere."""
    found = []
    for path in kit_files():
        name, text = path.relative_to(ROOT), path.read_text(encoding="utf-8")
        m = TRANSLATES.match(text)
        if not m:
            found.append(f"{name}: its first line must be <!-- translates teaching/kit/... en:FINGERPRINT -->")
            continue
        english = ROOT / m[1]
        if not english.exists():
            found.append(f"{name}: translates {m[1]}, which does not exist")
        elif fingerprint(english.read_text(encoding="utf-8")) != m[2]:
            found.append(f"{name}: stale ({m[1]} changed: update the translation and its marker to "
                         f"en:{fingerprint(english.read_text(encoding='utf-8'))})")
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if not target.startswith(("http://", "https://")) and not (path.parent / target).exists():
                found.append(f"{name}: its link to {target} leads nowhere")
    return found


def write(lessons):
    ZH.mkdir(exist_ok=True)
    CATALOG.write_text(catalog_text(), encoding="utf-8")
    cells = [pair for lesson in lessons for pair in to_render(lesson)]
    rendered = render(cells) if cells else {}
    for lesson in lessons:
        zh_path(lesson).write_text(dumps(build(lesson, rendered)), encoding="utf-8")
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
    found = [p for lesson in lessons for p in problems(lesson)] + frame_problems()
    if args.check:
        found += kit_problems()
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
