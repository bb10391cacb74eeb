"""Write a one-page handout per lesson, generated from the lesson and its teacher's page.

    python tools/handouts.py OUTDIR        # OUTDIR/01_devices.html ... and OUTDIR/index.html

Each lesson gets two HTML pages, self-contained (the figure is inlined) and made to print
on one sheet of A4 or Letter (print it from the browser, or save it as PDF there):

- `NN_name.html`, for students: the lesson's title, what you will learn and what you need
  (from its first cell), its Summary, one key figure, the titles of its exercises (the
  first sentence of each), and the three questions of its teacher's page, without answers;
- `NN_name-teacher.html`: the same page, and on a second page the questions' answers.

The key figure is the first image output of the cell tagged `handout-figure` (a lesson's
author sets the tag in JupyterLab's property inspector, Cell Tags); without such a tag, the
lesson's first figure outside the solutions; without any figure, none. Its caption names the
section it is in. Nothing is stored: the pages are built from the current notebook and
teacher's page each time, so they cannot drift from the lesson (tests/test_kit.py checks
them, and prints them to PDF in Chromium as a slow check).
"""
import argparse
import base64
import html
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIGURE_TAG = "handout-figure"

STYLE = """
@page { margin: 10mm; }
* { box-sizing: border-box; }
body { font: 8.5pt/1.28 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
       color: #111; max-width: 190mm; margin: 0 auto; }
h1 { font-size: 16pt; margin: 0 0 0.5mm; }
h2 { font-size: 10.5pt; margin: 2mm 0 1mm; border-bottom: 0.3mm solid #999; break-after: avoid; }
p, ul, ol { margin: 0 0 1.2mm; }
ul, ol { padding-left: 4.5mm; }
li { margin: 0 0 0.5mm; }
code { font: 8pt "DejaVu Sans Mono", Menlo, Consolas, monospace; background: #f1f1f1; padding: 0 0.4mm; }
.meta { color: #444; margin-bottom: 1mm; }
.columns { columns: 2; column-gap: 6mm; }
.columns > :first-child { margin-top: 0; }
figure { margin: 1.5mm 0; text-align: center; break-inside: avoid; }
figure img { max-width: 100%; max-height: 46mm; }
figcaption { font-size: 8.5pt; color: #444; }
.answers { break-before: page; page-break-before: always; }
.answers li { margin-bottom: 2mm; }
@media screen { body { padding: 12mm; } .answers { border-top: 1mm dashed #bbb; padding-top: 6mm; margin-top: 8mm; } }
"""


def source(cell):
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _inline(text):
    """Markdown of one line or paragraph as HTML: `code`, **bold**, *emphasis*, [links](...)."""
    out = []
    for k, part in enumerate(re.split(r"`([^`]*)`", " ".join(text.split()))):
        if k % 2:
            out.append(f"<code>{html.escape(part)}</code>")
            continue
        part = html.escape(part, quote=False)
        part = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", part)
        part = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", part)
        part = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", r'<a href="\2">\1</a>', part)
        out.append(part)
    return "".join(out)


def _markdown(text):
    """Markdown of paragraphs and bulleted or numbered lists as HTML (what a Summary holds)."""
    out, items, kind = [], [], None

    def close():
        nonlocal items, kind
        if items:
            out.append(f"<{kind}>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + f"</{kind}>")
        items, kind = [], None

    for block in re.split(r"\n\s*\n", text.strip()):
        lines = block.split("\n")
        if re.match(r"\s*(?:[*+-]|\d+\.) ", lines[0]):
            for line in lines:
                if m := re.match(r"\s*([*+-]|\d+\.) (.*)", line):
                    tag = "ol" if m[1][0].isdigit() else "ul"
                    if kind and tag != kind:
                        close()
                    kind = tag
                    items.append(m[2])
                elif items:
                    items[-1] += " " + line.strip()
        else:
            close()
            if block.strip():
                out.append(f"<p>{_inline(block)}</p>")
    close()
    return "\n".join(out)


def section_text(cells, heading):
    """The markdown under `## heading` in the cell that has it, up to the next `## ` or the cell's end."""
    for cell in cells:
        if cell["cell_type"] != "markdown":
            continue
        lines = source(cell).split("\n")
        if f"## {heading}" in lines:
            start = lines.index(f"## {heading}") + 1
            end = next((i for i in range(start, len(lines)) if re.match(r"#{1,2} ", lines[i])), len(lines))
            return "\n".join(lines[start:end]).strip()
    return None


def first_sentence(text):
    """The first sentence of a paragraph of markdown: up to a . ? or ! outside `code`, before a space."""
    text, ticks = " ".join(text.split()), False
    for i, ch in enumerate(text):
        ticks ^= ch == "`"
        if not ticks and ch in ".?!" and (i + 1 == len(text) or text[i + 1] == " "):
            return text[:i + 1]
    return text


def exercises(cells):
    """The first sentence of each numbered exercise, in order."""
    text = section_text(cells, "Exercises") or ""
    items = re.split(r"^\d+\.\s+", text, flags=re.M)[1:]
    return [first_sentence(item) for item in items]


def _labelled(first_cell, label):
    """The paragraph of the title cell that starts with **label.**, without the label."""
    for para in re.split(r"\n\s*\n", source(first_cell)):
        if para.startswith(f"**{label}.**"):
            return para[len(label) + 5:].strip()
    return None


def key_figure(cells):
    """(PNG base64, section it is in) of the handout's figure, or None (see the module's doc)."""
    def png(cell):
        return next((o["data"]["image/png"] for o in cell.get("outputs", [])
                     if "image/png" in o.get("data", {})), None)
    section, candidates = "", []
    for cell in cells:
        for line in source(cell).split("\n") if cell["cell_type"] == "markdown" else []:
            if re.match(r"#{2,3} ", line):
                section = line.lstrip("#").strip()
        if cell["cell_type"] == "code" and png(cell) and not source(cell).lstrip().startswith("#@title"):
            tagged = FIGURE_TAG in cell.get("metadata", {}).get("tags", [])
            candidates.append((not tagged, len(candidates), png(cell), section))
    if not candidates:
        return None
    _, _, data, where = min(candidates)
    data = "".join(data) if isinstance(data, list) else data
    return data.replace("\n", ""), where


def questions(page_text):
    """[(question, answer)] of a teacher's page: '### Qn. question' and its '**Answer.** ...'."""
    found, lines = [], page_text.split("\n")
    for i, line in enumerate(lines):
        m = re.match(r"### Q\d+\. (.*)", line)
        if not m:
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("#")), len(lines))
        body = "\n".join(lines[i + 1:end])
        answer = body.split("**Answer.**", 1)[1].strip() if "**Answer.**" in body else ""
        found.append((m.group(1).strip(), answer))
    return found


def lesson_parts(notebook, page):
    """Everything a handout shows, read from the lesson and its teacher's page."""
    import json
    cells = json.loads(pathlib.Path(notebook).read_text(encoding="utf-8"))["cells"]
    title = re.search(r"^# (.*)$", source(cells[0]), re.M).group(1).strip()
    return {
        "title": title,
        "learn": _labelled(cells[0], "What you will learn"),
        "need": _labelled(cells[0], "What you need"),
        "summary": section_text(cells, "Summary"),
        "figure": key_figure(cells),
        "exercises": exercises(cells),
        "questions": questions(pathlib.Path(page).read_text(encoding="utf-8")),
        "notebook": pathlib.Path(notebook).name,
    }


def render(parts, teacher=False):
    """The HTML page of one lesson's handout (with a second page of answers for the teacher)."""
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{html.escape(parts['title'])}: handout</title>", f"<style>{STYLE}</style></head><body>",
           f"<h1>{_inline(parts['title'])}</h1>",
           f'<p class="meta">GPU computing in PyTorch · notebooks/{html.escape(parts["notebook"])}'
           + (" · teacher's copy" if teacher else "") + "</p>"]
    out.append('<div class="columns">')
    if parts["learn"]:
        out += ["<h2>What you will learn</h2>", f"<p>{_inline(parts['learn'])}</p>"]
    if parts["need"]:
        out += [f"<p><strong>What you need.</strong> {_inline(parts['need'])}</p>"]
    out += ["<h2>Summary</h2>", _markdown(parts["summary"] or ""), "</div>"]
    if parts["figure"]:
        data, where = parts["figure"]
        out += [f'<figure><img alt="key figure" src="data:image/png;base64,{data}">',
                f"<figcaption>From § {_inline(where)}</figcaption>" if where else "", "</figure>"]
    out += ['<div class="columns">', "<h2>Exercises</h2>", "<ol>",
            *[f"<li>{_inline(e)}</li>" for e in parts["exercises"]], "</ol>",
            "<h2>Check yourself</h2>", '<ol class="questions">',
            *[f"<li>{_inline(q)}</li>" for q, _ in parts["questions"]], "</ol>", "</div>"]
    if teacher:
        out += ['<section class="answers">', "<h2>Answers (teacher's copy)</h2>", "<ol>",
                *[f"<li><strong>{_inline(q)}</strong><br>{_inline(a)}</li>" for q, a in parts["questions"]],
                "</ol>", "</section>"]
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def pairs(root=ROOT):
    """(notebook, teacher's page) of every lesson."""
    return [(nb, root / "teaching" / f"{nb.stem}.md")
            for nb in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))]


def build(outdir, root=ROOT):
    """Write every lesson's handouts and an index into outdir; return the students' pages."""
    outdir = pathlib.Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written, rows = [], []
    for notebook, page in pairs(root):
        if not page.exists():
            print(f"{notebook.name}: no teacher's page ({page.name}), so no handout", file=sys.stderr)
            continue
        parts = lesson_parts(notebook, page)
        for teacher in (False, True):
            path = outdir / (f"{notebook.stem}-teacher.html" if teacher else f"{notebook.stem}.html")
            path.write_text(render(parts, teacher), encoding="utf-8")
        written.append(outdir / f"{notebook.stem}.html")
        rows.append(f'<li><a href="{notebook.stem}.html">{_inline(parts["title"])}</a> '
                    f'(<a href="{notebook.stem}-teacher.html">with answers</a>)</li>')
    (outdir / "index.html").write_text(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Handouts</title>'
        f"<style>{STYLE}</style></head><body><h1>Handouts: GPU computing in PyTorch</h1>"
        "<p>One page per lesson; print from the browser (A4 or Letter).</p><ul>"
        + "".join(rows) + "</ul></body></html>\n", encoding="utf-8")
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outdir", type=pathlib.Path, help="a folder for the handouts")
    outdir = parser.parse_args(argv).outdir
    written = build(outdir)
    print(f"wrote {len(written)} handouts and the teacher's copies; print them from {outdir / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
