"""Write a one-page handout per lesson, generated from the lesson and its teacher's page.

    python tools/handouts.py OUTDIR        # OUTDIR/01_devices.html ... and OUTDIR/index.html
    python tools/handouts.py OUTDIR --zh   # the Chinese edition's (notebooks/zh/); the teacher's copies
                                           # take their questions from the Chinese quiz (the right option)

Each lesson gets two HTML pages, self-contained (the figure is inlined), to print from the
browser on A4 or Letter (or to save as PDF there):

- `NN_name.html`, for students, on one sheet (one or two sides): the lesson's title, what you
  will learn and what you need (from its first cell), its Summary, one key figure, and its
  exercises, each task printed whole as the lesson words it (with the text that introduces
  them, where there is one). The questions of the teacher's page are not on it: they are the
  quiz's questions (teaching/kit/quiz.md), and a handout must not give the quiz away;
- `NN_name-teacher.html`: the same, and then, from a new page, the teacher's three questions
  with their answers.

The key figure is the first image output of the cell tagged `handout-figure` (a lesson's
author sets the tag in JupyterLab's property inspector, Cell Tags); without such a tag, the
lesson's first figure outside the solutions; without any figure, none. Its caption names the
section it is in. It prints at the size that keeps its text readable: the course's figures
are made at 100 dpi (savefig.dpi in d2l_utils/course.mplstyle) with 12 pt text (the
smallest size the style sets), so a figure W pixels wide is W / 100 inches at full size,
and printing it at 8/12 of that keeps its smallest text at 8 pt. That width is computed
from the PNG's own width (read from its header); a figure wider than an A4 page's printable
width at that scale is left out, and the handout says so and where the lesson shows it.
Nothing is stored: the pages are built from the current notebook and
teacher's page each time, so they cannot drift from the lesson (tests/test_kit.py checks
them, and tests/test_handouts.py checks whole tasks, no quiz question and the figure's
scale, and prints them to PDF in Chromium as a slow check).
"""
import argparse
import base64
import html
import pathlib
import re
import struct
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIGURE_TAG = "handout-figure"
MARGIN_MM = 8                                    # the printed page's margins (@page below)
PRINT_WIDTH_MM = 210 - 2 * MARGIN_MM             # A4's printable width: Letter's (215.9 mm) is wider
MIN_FIGURE_PT = 8                                # the smallest figure text a handout prints


# The Chinese handouts' words, by the English ones (--zh).
ZH = {"Summary": "小结", "Exercises": "练习", "What you will learn": "本节内容", "What you need": "所需条件",
      "handout": "讲义", "GPU computing in PyTorch": "用 PyTorch 做 GPU 计算", "teacher's copy": "教师版",
      "From §": "出自 §", "questions": "检查理解的问题及答案（教师版；也是测验的题目）", "with answers": "附答案",
      "Handouts": "讲义", "index": "每课一页（一张纸，单面或双面）；在浏览器中打印（A4 或 Letter）。"
      "学生版不含测验题；教师版附上测验题及答案。",
      "too wide": "这一课的图{where}没有放进讲义：印在 A4 上就看不清了。请在课中查看。"}


def _style_numbers(root=ROOT):
    """(dpi, smallest font size in pt) of the course's figures, from d2l_utils/course.mplstyle."""
    values = dict(re.findall(r"^\s*([\w.]+)\s*:\s*([\d.]+)\s*(?:#.*)?$",
                             (root / "d2l_utils" / "course.mplstyle").read_text(encoding="utf-8"), re.M))
    sizes = [float(v) for k, v in values.items() if k.endswith("size")]
    return float(values.get("savefig.dpi", values.get("figure.dpi", 100))), min(sizes)


def png_size(data):
    """(width, height) in pixels of a PNG given as base64 text, from its IHDR header."""
    raw = base64.b64decode(data[:64])
    if raw[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    return struct.unpack(">II", raw[16:24])


def figure_width_mm(data, root=ROOT):
    """The printed width (mm) that keeps a course figure's smallest text at MIN_FIGURE_PT:
    its width at full size (pixels / dpi inches) times MIN_FIGURE_PT / the style's smallest size."""
    dpi, smallest = _style_numbers(root)
    return png_size(data)[0] / dpi * 25.4 * MIN_FIGURE_PT / smallest

STYLE = """
@page { margin: %dmm; }
* { box-sizing: border-box; }
body { font: 8.5pt/1.28 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
       color: #111; max-width: %dmm; margin: 0 auto; }
h1 { font-size: 16pt; margin: 0 0 0.5mm; }
h2 { font-size: 10.5pt; margin: 2mm 0 1mm; border-bottom: 0.3mm solid #999; break-after: avoid; }
p, ul, ol { margin: 0 0 1.2mm; }
ul, ol { padding-left: 4.5mm; }
li { margin: 0 0 0.5mm; }
code { font: 8pt "DejaVu Sans Mono", Menlo, Consolas, monospace; background: #f1f1f1; padding: 0 0.4mm;
       overflow-wrap: anywhere; }
.meta { color: #444; margin-bottom: 1mm; }
.columns { columns: 2; column-gap: 6mm; }
.columns > :first-child { margin-top: 0; }
figure { margin: 1.5mm 0; text-align: center; break-inside: avoid; }
figure img { height: auto; }
.exercises > li { margin-bottom: 1.2mm; }
figcaption { font-size: 8.5pt; color: #444; }
.answers { break-before: page; page-break-before: always; }
.answers li { margin-bottom: 2mm; }
@media screen { body { padding: 12mm; } .answers { border-top: 1mm dashed #bbb; padding-top: 6mm; margin-top: 8mm; } }
""" % (MARGIN_MM, PRINT_WIDTH_MM)


def source(cell):
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _inline(text):
    """Markdown of one line or paragraph as HTML: `code`, **bold**, *emphasis*, [links](...).
    A link to a place in the lesson (`#...`, its depth) leads nowhere on paper: its words stay."""
    out = []
    for k, part in enumerate(re.split(r"`([^`]*)`", " ".join(text.split()))):
        if k % 2:
            out.append(f"<code>{html.escape(part)}</code>")
            continue
        part = html.escape(part, quote=False)
        part = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", part)
        # (a Chinese character beside the star does not stop emphasis: Chinese has no spaces)
        part = re.sub(r"(?<![A-Za-z0-9_*])\*(?!\s)(.+?)(?<!\s)\*(?![A-Za-z0-9_*])", r"<em>\1</em>", part)
        part = re.sub(r"\[([^\]]+)\]\(#[^)\s]*\)", r"\1", part)     # a place in the lesson: its words
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
    """The markdown under `## heading` (or its Chinese, ZH) in the cell that has it, up to the next
    `## ` or the cell's end."""
    found = _section_text(cells, heading)
    return found if found is not None or heading not in ZH else _section_text(cells, ZH[heading])


def _section_text(cells, heading):
    for cell in cells:
        if cell["cell_type"] != "markdown":
            continue
        lines = source(cell).split("\n")
        if f"## {heading}" in lines:
            start = lines.index(f"## {heading}") + 1
            end = next((i for i in range(start, len(lines)) if re.match(r"#{1,2} ", lines[i])), len(lines))
            return "\n".join(lines[start:end]).strip()
    return None


def exercises(cells):
    """Each numbered exercise's whole task, in order (its lines joined)."""
    text = section_text(cells, "Exercises") or ""
    items = re.split(r"^\d+\.\s+", text, flags=re.M)[1:]
    return [" ".join(item.split()) for item in items]


def exercises_intro(cells):
    """The text of the Exercises section before its first numbered task ('' when none)."""
    text = section_text(cells, "Exercises") or ""
    return re.split(r"^\d+\.\s+", text, flags=re.M)[0].strip()


def _labelled(first_cell, label):
    """The paragraph of the title cell that starts with **label.** (or its Chinese, **本节内容。**),
    without the label."""
    for para in re.split(r"\n\s*\n", source(first_cell)):
        for start in (f"**{label}.**", f"**{ZH.get(label, label)}。**"):
            if para.startswith(start):
                return para[len(start):].strip()
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


def quiz_questions(lesson, quiz_path):
    """[(question, its right option)] of lesson ``lesson`` in a quiz (the Chinese teacher's copy's)."""
    import quiz
    return [(q["question"], next(text for right, text in q["options"] if right))
            for q in quiz.parse(pathlib.Path(quiz_path).read_text(encoding="utf-8")) if q["lesson"] == lesson]


def lesson_parts(notebook, page, quiz_path=None):
    """Everything a handout shows, read from the lesson and its teacher's page (or, with
    ``quiz_path``, the lesson's questions of that quiz, with its right answers)."""
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
        "exercises_intro": exercises_intro(cells),
        "questions": (quiz_questions(int(pathlib.Path(notebook).name[:2]), quiz_path) if quiz_path else
                      questions(pathlib.Path(page).read_text(encoding="utf-8"))),
        "notebook": pathlib.Path(notebook).name,
    }


def render(parts, teacher=False, language="en"):
    """The HTML page of one lesson's handout (with a second page of answers for the teacher)."""
    say = (lambda text: text) if language == "en" else (lambda text: ZH.get(text, text))  # noqa: E731
    folder = "notebooks/" if language == "en" else "notebooks/zh/"
    out = ["<!DOCTYPE html>", f'<html lang="{"en" if language == "en" else "zh-CN"}"><head><meta charset="utf-8">',
           f"<title>{html.escape(parts['title'])}: {say('handout')}</title>", f"<style>{STYLE}</style></head><body>",
           f"<h1>{_inline(parts['title'])}</h1>",
           f'<p class="meta">{say("GPU computing in PyTorch")} · {folder}{html.escape(parts["notebook"])}'
           + (f" · {say(chr(39).join(['teacher', 's copy']))}" if teacher else "") + "</p>"]
    out.append('<div class="columns">')
    if parts["learn"]:
        out += [f"<h2>{say('What you will learn')}</h2>", f"<p>{_inline(parts['learn'])}</p>"]
    if parts["need"]:
        out += [f"<p><strong>{say('What you need')}{'.' if language == 'en' else '。'}</strong> {_inline(parts['need'])}</p>"]
    out += [f"<h2>{say('Summary')}</h2>", _markdown(parts["summary"] or ""), "</div>"]
    if parts["figure"]:
        data, where = parts["figure"]
        width = figure_width_mm(data)
        if width <= PRINT_WIDTH_MM:
            out += [f'<figure><img alt="key figure" style="width: {width:.1f}mm" src="data:image/png;base64,{data}">',
                    f"<figcaption>{say('From §')} {_inline(where)}</figcaption>" if where else "", "</figure>"]
        elif language == "en":
            out += [f'<p class="meta">The lesson\'s figure{" in § " + _inline(where) if where else ""} is left '
                    "out: it is too wide to print readable on A4. See it in the lesson.</p>"]
        else:
            out += [f'<p class="meta">{ZH["too wide"].format(where="（§ " + _inline(where) + "）" if where else "")}</p>']
    out += ['<div class="columns">', f"<h2>{say('Exercises')}</h2>"]
    if parts.get("exercises_intro"):
        out += [_markdown(parts["exercises_intro"])]
    out += ['<ol class="exercises">', *[f"<li>{_inline(e)}</li>" for e in parts["exercises"]], "</ol>", "</div>"]
    if teacher:
        heading = ("Questions to check understanding, with answers (teacher's copy; they are also the quiz's)"
                   if language == "en" else ZH["questions"])
        out += ['<section class="answers">', f"<h2>{heading}</h2>", "<ol>",
                *[f"<li><strong>{_inline(q)}</strong><br>{_inline(a)}</li>" for q, a in parts["questions"]],
                "</ol>", "</section>"]
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def pairs(root=ROOT, language="en"):
    """(notebook, teacher's page) of every lesson (of the Chinese edition, with language='zh')."""
    folder = root / "notebooks" / ("zh" if language == "zh" else "")
    return [(nb, root / "teaching" / f"{nb.stem}.md")
            for nb in sorted(folder.glob("[0-9][0-9]_*.ipynb"))]


def build(outdir, root=ROOT, language="en"):
    """Write every lesson's handouts and an index into outdir; return the students' pages."""
    outdir = pathlib.Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    quiz_path = root / "translations" / "zh" / "kit" / "quiz.md" if language == "zh" else None
    with_answers = "with answers" if language == "en" else ZH["with answers"]
    written, rows = [], []
    for notebook, page in pairs(root, language):
        if not page.exists():
            print(f"{notebook.name}: no teacher's page ({page.name}), so no handout", file=sys.stderr)
            continue
        parts = lesson_parts(notebook, page, quiz_path)
        for teacher in (False, True):
            path = outdir / (f"{notebook.stem}-teacher.html" if teacher else f"{notebook.stem}.html")
            path.write_text(render(parts, teacher, language), encoding="utf-8")
        written.append(outdir / f"{notebook.stem}.html")
        rows.append(f'<li><a href="{notebook.stem}.html">{_inline(parts["title"])}</a> '
                    f'(<a href="{notebook.stem}-teacher.html">{with_answers}</a>)</li>')
    title, intro = (("Handouts: GPU computing in PyTorch",
                     "One sheet per lesson (one or two sides); print from the browser (A4 or Letter). "
                     "The students' pages have no quiz questions; the teacher's copies add them, with answers.")
                    if language == "en" else (f"{ZH['Handouts']}：{ZH['GPU computing in PyTorch']}", ZH["index"]))
    (outdir / "index.html").write_text(
        f'<!DOCTYPE html><html lang="{"en" if language == "en" else "zh-CN"}"><head><meta charset="utf-8">'
        f"<title>{'Handouts' if language == 'en' else ZH['Handouts']}</title><style>{STYLE}</style></head><body>"
        f"<h1>{title}</h1><p>{intro}</p><ul>"
        + "".join(rows) + "</ul></body></html>\n", encoding="utf-8")
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outdir", type=pathlib.Path, help="a folder for the handouts")
    parser.add_argument("--zh", action="store_true", help="the Chinese edition's handouts (notebooks/zh/)")
    args = parser.parse_args(argv)
    outdir = args.outdir
    written = build(outdir, language="zh" if args.zh else "en")
    print(f"wrote {len(written)} handouts and the teacher's copies; print them from {outdir / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
