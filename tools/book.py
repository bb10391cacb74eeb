"""Build the course as a static book site, from the stored notebooks: `python tools/book.py [OUTDIR]`.

    .venv/bin/pip install -r requirements-book.txt      # once: Sphinx, MyST-NB, sphinx-book-theme
    .venv/bin/python tools/book.py                       # the site in build/book/ (open index.html)

The English site is OUTDIR/ (home: README.md; the 14 lessons, core and depth; the glossary; the
teacher's pages), the Chinese one OUTDIR/zh/ (home: README.zh.md; the 14 Chinese lessons; the
Chinese term table), each its own Sphinx build (the Chinese one with language zh_CN, so that its
search segments Chinese with jieba). Nothing is executed and nothing is fetched: the lessons show
the outputs stored in them (MyST-NB with execution off), the calculators their static table.

The sources are copied into a staging folder (OUTDIR's sibling OUTDIR-src/, e.g. build/book-src/)
and only the copies are adjusted: every lesson page gets, under its title, links to the same
lesson in the other language, to Binder and to Colab, and the line saying which PyTorch, Python
and day its stored outputs came from (the notebook's `course.last_run`); the calculators a link
to run them live; the links to the glossary on GitHub, between lessons, to the teacher's pages and
within a lesson (JupyterLab's heading anchors) become links between the site's pages; links to
files the site has no page for go to the repository. Sphinx's configuration is book/conf.py.

Sphinx's warnings are printed (and counted); `--strict` makes any warning a failure. The
staging folder keeps Sphinx's environment, so a second build redoes only what changed;
`--clean` starts afresh. At the end the build's time and the site's size are printed.
"""
import argparse
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
sys.path.insert(0, str(ROOT / "tools"))
import nbtemplate  # noqa: E402  (the one place that names the repository)
import translate  # noqa: E402  (join_streams: a cell's prints as JupyterLab shows them)

REPO = nbtemplate.repo_url()                       # https://github.com/d2l-gpu/gpu-course
REPO_PATH = REPO.removeprefix("https://github.com/")
BLOB = f"{REPO}/blob/main/"
TREE = f"{REPO}/tree/main/"
LANGS = ("en", "zh")
PREFIX = {"en": "", "zh": "zh/"}                   # where each site lies under OUTDIR
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
# [text](target "title") and ![alt](target): one level of brackets inside the text
LINK = re.compile(r"(!?\[(?:[^\[\]]|\[[^\[\]]*\])*\])\((<[^>\n]*>|[^)\s]+)((?:\s+\"[^\"\n]*\")?)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
BADGE_LINE = re.compile(r"^\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)[ \t]*\n?", re.M)
WIDGET = "application/vnd.jupyter.widget-view+json"

TEXT = {
    "en": {"other": "中文", "other_lang": "zh-CN", "other_home": "中文版（首页）",
           "binder": "Run on Binder", "colab": "Open in Colab",
           "stored": "Stored outputs: PyTorch {torch}, Python {python}, {date}{acc}",
           "calc": ("*This calculator is static here: its table shows a few settings. To move "
                    "its sliders, run the lesson [on Binder]({binder}) or [in Colab]({colab}).*"),
           "lessons": "Lessons", "glossary": "Glossary", "teaching": "For teachers"},
    "zh": {"other": "English", "other_lang": "en", "other_home": "English (home)",
           "binder": "在 Binder 上运行", "colab": "在 Colab 中打开",
           "stored": "存储的输出来自：PyTorch {torch}，Python {python}，{date}{acc}",
           "calc": ("*这里的计算器是静态的：表格只列出几组设置。要拖动滑块，请[在 Binder 上]({binder})"
                    "或[在 Colab 中]({colab})运行本课。*"),
           "lessons": "课程", "glossary": "术语表", "teaching": "教师用书"},
}


# ---------------------------------------------------------------- the pages of the two sites

def lessons(lang):
    folder = ROOT / "notebooks" / ("zh" if lang == "zh" else "")
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def teaching_pages():
    """The teacher's pages, in reading order: the guide, the lessons' pages, then the kit."""
    top = ROOT / "teaching"
    pages = [top / "README.md", *sorted(top.glob("[0-9][0-9]_*.md"))]
    kit = top / "kit"
    order = ["workshop.md", "quiz.md", "rubric.md"]
    pages += sorted(kit.glob("*.md"), key=lambda p: (order.index(p.name) if p.name in order else 99, p.name))
    pages += sorted((kit / "labs").glob("*.md"))
    return pages


def site_pages():
    """{lang: {repository path: docname}}: every page of each site and the file it comes from."""
    en = {"README.md": "index", "GLOSSARY.md": "GLOSSARY"}
    en.update({f"notebooks/{p.name}": f"notebooks/{p.stem}" for p in lessons("en")})
    en.update({p.relative_to(ROOT).as_posix(): p.relative_to(ROOT).with_suffix("").as_posix()
               for p in teaching_pages()})
    zh = {"README.zh.md": "index", "translations/zh/GLOSSARY.md": "GLOSSARY"}
    zh.update({f"notebooks/zh/{p.name}": f"notebooks/{p.stem}" for p in lessons("zh")})
    return {"en": en, "zh": zh}


def page_url(lang, docname):
    """A page's path under OUTDIR."""
    return f"{PREFIX[lang]}{docname}.html"


def counterpart(lang, docname, pages):
    """The other language's page for a page: the same page, or else the other site's home."""
    other = "zh" if lang == "en" else "en"
    return other, (docname if docname in pages[other].values() else "index")


def relative(from_lang, from_doc, to_lang, to_doc):
    return posixpath.relpath(page_url(to_lang, to_doc), posixpath.dirname(page_url(from_lang, from_doc)))


# ---------------------------------------------------------------- headings and anchors

def _md():
    from markdown_it import MarkdownIt
    return MarkdownIt("commonmark")


def heading_anchors(nb):
    """{JupyterLab's anchor of a heading: the site's (MyST's GitHub-style) anchor} for a notebook.

    JupyterLab names a heading by its text with spaces as hyphens (`#What-reads-the-GPU`);
    MyST by the GitHub slug of the same text (`#what-reads-the-gpu`), unique within the page."""
    from myst_parser.slugs import github_slugify, unique_slug
    md, found, slugs = _md(), {}, set()
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        tokens = md.parse("".join(cell["source"]))
        for i, tok in enumerate(tokens):
            if tok.type != "heading_open":
                continue
            title = "".join(c.content for c in (tokens[i + 1].children or [])
                            if c.type in ("text", "code_inline"))
            slug = unique_slug(github_slugify(title), slugs)
            slugs.add(slug)
            found.setdefault(title.strip().replace(" ", "-"), slug)
    return found


_ANCHORS = {}


def anchors_of(repo_path):
    if repo_path not in _ANCHORS:
        path = ROOT / repo_path
        _ANCHORS[repo_path] = (heading_anchors(json.loads(path.read_text(encoding="utf-8")))
                               if path.suffix == ".ipynb" and path.exists() else {})
    return _ANCHORS[repo_path]


def _fragment(repo_path, fragment):
    """A link's #fragment into a page: a lesson's JupyterLab anchors become the site's."""
    if not fragment:
        return ""
    table = anchors_of(repo_path)
    for candidate in (fragment, urllib.parse.unquote(fragment)):
        if candidate in table:
            return "#" + table[candidate]
    return "#" + fragment


# ---------------------------------------------------------------- links

def rewrite_links(text, src, lang, docname, pages):
    """The links of a page's Markdown `text` (from the repository file `src`), made site links."""
    ext = {d: Path(p).suffix for p, d in pages[lang].items()}

    def target_of(target):
        bare = target[1:-1] if target.startswith("<") else target
        if bare.startswith(BLOB):
            path, local = bare[len(BLOB):], True
        elif bare.startswith(TREE):
            path, local = bare[len(TREE):], True
        elif bare.startswith("#"):                                  # within the page
            return _fragment(src, bare[1:]) or bare
        elif SCHEME.match(bare) or bare.startswith("//"):
            return None
        else:
            path, local = bare, False
        path, _, frag = path.partition("#")
        path = urllib.parse.unquote(path)
        if not local:
            path = posixpath.normpath(posixpath.join(posixpath.dirname(src), path)) if path else src
        frag = _fragment(path, frag)
        if path in pages[lang]:                                   # a page of this site: MyST links it
            doc = pages[lang][path]
            rel = posixpath.relpath(doc + ext[doc], posixpath.dirname(docname))
            return rel + frag
        for other in LANGS:                                       # a page of the other site
            if other != lang and path in pages[other]:
                return "site:" + relative(lang, docname, other, pages[other][path]) + frag
        if (ROOT / path).exists():                                # a file with no page: GitHub's
            return (TREE if (ROOT / path).is_dir() else BLOB) + path.strip("/") + frag
        return None                                               # unknown: left for Sphinx to report

    def one(m):
        new = target_of(m.group(2))
        return m.group(0) if new is None else f"{m.group(1)}({new}{m.group(3)})"

    # not inside fenced code
    out, last = [], 0
    for fence in FENCE.finditer(text):
        out.append(LINK.sub(one, text[last:fence.start()]))
        out.append(fence.group(0))
        last = fence.end()
    out.append(LINK.sub(one, text[last:]))
    return "".join(out)


# ---------------------------------------------------------------- the staged pages

def _html_links(lang, docname, pages, extra=()):
    t = TEXT[lang]
    other, doc = counterpart(lang, docname, pages)
    label = t["other"] if doc != "index" or docname == "index" else t["other_home"]
    links = [f'<a class="course-lang" hreflang="{t["other_lang"]}" lang="{t["other_lang"]}" '
             f'href="{relative(lang, docname, other, doc)}">{label}</a>', *extra]
    return '<p class="course-links">\n' + "\n".join(links) + "\n</p>\n"


def binder_url(lang, name):
    sub = "zh/" if lang == "zh" else ""
    return f"https://mybinder.org/v2/gh/{REPO_PATH}/main?urlpath=lab/tree/notebooks/{sub}{name}"


def colab_url(lang, name):
    return nbtemplate.colab_url(("zh/" if lang == "zh" else "") + name)


def stored_line(lang, nb):
    run = nb["metadata"].get("course", {}).get("last_run", {})
    acc = run.get("accelerator")
    return TEXT[lang]["stored"].format(torch=run.get("torch", "?"), python=run.get("python", "?"),
                                       date=run.get("date", "?"), acc=f", {acc}" if acc else "")


def _after_title(text, block):
    """`block` put right under the page's first `# ` title (or first, if it has none)."""
    m = re.search(r"^# .*\n?", text, re.M)
    if not m:
        return block + "\n" + text
    end = m.end()
    return text[:end] + ("" if text[:end].endswith("\n") else "\n") + "\n" + block + "\n" + text[end:]


def _md_cell(cell_id, text):
    return {"cell_type": "markdown", "id": cell_id, "metadata": {},
            "source": text.splitlines(keepends=True)}


def stage_notebook(path, lang, pages):
    src = path.relative_to(ROOT).as_posix()
    docname = pages[lang][src]
    nb = json.loads(path.read_text(encoding="utf-8"))
    t = TEXT[lang]
    binder, colab = binder_url(lang, path.name), colab_url(lang, path.name)
    header = _html_links(lang, docname, pages, [
        f'<a class="course-binder" href="{binder}">{t["binder"]}</a>',
        f'<a class="course-colab" href="{colab}">{t["colab"]}</a>'])
    header += f'<p class="course-stored">{stored_line(lang, nb)}</p>\n'
    cells, calculators = [], 0
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown":
            text = rewrite_links("".join(cell["source"]), src, lang, docname, pages)
            if i == 0:
                text = _after_title(BADGE_LINE.sub("", text), header)
            cell = {**cell, "source": text.splitlines(keepends=True)}
        elif cell["cell_type"] == "code":
            # adjacent prints joined, the order kept: MyST-NB's own merging would move every print
            # above a display between them, such as an expectation block's folded derivations
            cell = {**cell, "outputs": translate.join_streams(cell.get("outputs", []))}
        cells.append(cell)
        if cell["cell_type"] == "code" and any(WIDGET in o.get("data", {}) for o in cell.get("outputs", [])):
            calculators += 1
            cells.append(_md_cell(f"book-calculator-{calculators}", t["calc"].format(binder=binder, colab=colab)))
    nb["cells"] = cells
    nb["metadata"].pop("widgets", None)
    return docname + ".ipynb", json.dumps(nb, ensure_ascii=False, indent=1)


def toctree(caption, entries, hidden=True):
    opts = (":hidden:\n" if hidden else "") + f":caption: {caption}\n" + ":titlesonly:\n"
    return "\n```{toctree}\n" + opts + "\n" + "\n".join(entries) + "\n```\n"


def stage_markdown(path, lang, pages):
    src = path.relative_to(ROOT).as_posix()
    docname = pages[lang][src]
    text = _no_skipped_levels(rewrite_links(path.read_text(encoding="utf-8"), src, lang, docname, pages))
    if docname != "index":        # the READMEs carry their own English | 中文 line
        text = _after_title(text, _html_links(lang, docname, pages))
    t = TEXT[lang]
    if docname == "index":
        text += toctree(t["lessons"], [f"notebooks/{p.stem}" for p in lessons(lang)])
        text += toctree(t["glossary"], ["GLOSSARY"])
        if lang == "en":
            text += toctree(t["teaching"], ["teaching/README"])
    elif src == "teaching/README.md":
        text += toctree(t["teaching"], [p.relative_to(ROOT / "teaching").with_suffix("").as_posix()
                                        for p in teaching_pages()[1:]])
    return docname + ".md", text


def _no_skipped_levels(text):
    """A page whose headings go from `#` straight to `###` (the glossary's terms) gets them one
    level up: Sphinx's sections may not skip a level. The anchors are the same."""
    levels = {len(m.group(1)) for m in re.finditer(r"^(#{1,6}) ", FENCE.sub("", text), re.M)}
    if 1 in levels and 2 not in levels and 3 in levels:
        parts = re.split(r"(^(?:```|~~~).*?^(?:```|~~~))", text, flags=re.M | re.S)
        text = "".join(p if p.startswith(("```", "~~~")) else re.sub(r"^#(#{2,6}) ", r"\1 ", p, flags=re.M)
                       for p in parts)
    return text


def _write(path, text):
    """Write only what changed, so that Sphinx rebuilds only the pages that did."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def stage(staging):
    """Copy and adjust the sources of both sites into staging/en and staging/zh."""
    pages = site_pages()
    for lang in LANGS:
        top = staging / lang
        wanted = set()
        for src in pages[lang]:
            path = ROOT / src
            name, text = (stage_notebook if path.suffix == ".ipynb" else stage_markdown)(path, lang, pages)
            _write(top / name, text)
            wanted.add((top / name).resolve())
        for old in top.rglob("*"):                       # pages that are gone
            if old.is_file() and old.resolve() not in wanted:
                old.unlink()
    return pages


# ---------------------------------------------------------------- the build

def _sphinx(lang, staging):
    """Sphinx on staging/LANG into staging/html/LANG/site/, copied to OUTDIR afterwards (MyST-NB
    writes the outputs' files next to the build folder, staging/html/LANG/jupyter_execute/)."""
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-c", str(BOOK),
           "-d", str(staging / f".doctrees-{lang}"), str(staging / lang), str(staging / "html" / lang / "site")]
    env = {**os.environ, "COURSE_BOOK_LANG": lang, "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


# Not shipped: Sphinx's build record, and the themes' Jinja macros that land in _static/ (templates,
# not pages: their links are unrendered `{{ pathto(...) }}`).
_UNSHIPPED = shutil.ignore_patterns(".buildinfo", ".doctrees", "webpack-macros.html", "sbt-webpack-macros.html")


def size_of(folder):
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def build(outdir, staging=None, clean=False, strict=False, quiet=False):
    """Build both sites into outdir (English) and outdir/zh (Chinese).

    Returns {"warnings": [...], "seconds": s, "bytes": n}; raises RuntimeError if Sphinx fails
    (or, with strict, if it warned)."""
    start = time.monotonic()
    outdir = Path(outdir).resolve()
    staging = Path(staging).resolve() if staging else outdir.with_name(outdir.name + "-src")
    if clean:
        shutil.rmtree(outdir, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)
    stage(staging)
    # The two builds run side by side (they share nothing but the CPU).
    procs = {lang: _sphinx(lang, staging) for lang in LANGS}
    warnings, failed = [], []
    for lang, proc in procs.items():
        stdout, stderr = proc.communicate()
        for line in (stdout + stderr).splitlines():
            if "WARNING" in line or "ERROR" in line or "CRITICAL" in line:
                warnings.append(f"[{lang}] {line}")
            elif line.strip() and not quiet and not _noise(line):
                print(f"[{lang}] {line}")
        if proc.returncode:
            failed.append(f"{lang}: sphinx exited with {proc.returncode}\n{stderr[-3000:]}")
    if not failed:
        shutil.rmtree(outdir, ignore_errors=True)
        shutil.copytree(staging / "html" / "en" / "site", outdir, ignore=_UNSHIPPED)
        shutil.copytree(staging / "html" / "zh" / "site", outdir / "zh", ignore=_UNSHIPPED)
    seconds, size = time.monotonic() - start, size_of(outdir)
    if not quiet:
        for w in warnings:
            print(w)
        print(f"{len(warnings)} Sphinx warning(s)")
        print(f"built {outdir} (English) and {outdir / 'zh'} (Chinese) in {seconds:.1f} s; "
              f"site size {size / 2**20:.1f} MiB")
    if failed:
        raise RuntimeError("\n".join(failed))
    if strict and warnings:
        raise RuntimeError(f"{len(warnings)} Sphinx warning(s) (--strict)")
    return {"warnings": warnings, "seconds": seconds, "bytes": size}


def _noise(line):
    """jieba's start-up chatter (the Chinese search's word segmentation)."""
    return any(s in line for s in ("prefix dict", "Loading model", "Dumping model", "Prefix dict"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outdir", nargs="?", default=str(ROOT / "build" / "book"),
                        help="where the site goes (default build/book); the Chinese site is OUTDIR/zh")
    parser.add_argument("--clean", action="store_true", help="rebuild from scratch")
    parser.add_argument("--strict", action="store_true", help="fail on any Sphinx warning")
    args = parser.parse_args(argv)
    try:
        build(args.outdir, clean=args.clean, strict=args.strict)
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
