"""The course as a static book site (tools/book.py): built once here, into a temporary folder.

The checks: every lesson (both languages), the glossaries and the teacher's pages are pages of
the site; Sphinx warned about nothing; no local link or image is broken, #anchors included; each
lesson page shows the outputs its notebook stores (every stream's text and every text/plain or
text/html shown, as many images as it has PNGs, each calculator's static table and a link to
run it live); each lesson page links to its other-language page, Binder and Colab and says which
PyTorch, Python and day its outputs came from; every other page links to its counterpart (or the
other site's home). Debian's Chromium opens every page at a phone's width (390x844) and checks
that nothing makes the page scroll sideways: a `pre` or table wider than the screen must scroll
inside itself. Screenshots of the home page, a lesson in each language and the two glossaries
go to test-artifacts/book_*.png.

The build needs requirements-book.txt (Sphinx, MyST-NB, sphinx-book-theme): without it the tests
skip, in CI (COURSE_CI=1) they fail. The build takes about 30 s of CPU (15 s on an idle
2-core machine, over a minute on a busy one), so the module is a slow check (CI, COURSE_SLOW=1).
COURSE_BOOK_SITE=build/book checks a site built before with tools/book.py instead of building one.
"""
import contextlib
import functools
import html
import http.server
import importlib.util
import json
import os
import posixpath
import re
import threading
import urllib.parse
from pathlib import Path

import pytest

from conftest import ROOT, require, slow
from test_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, browser_tools

pytestmark = slow("builds the book site with Sphinx: about 30 s of CPU")

PHONE = {"width": 390, "height": 844}
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@pytest.fixture(scope="module")
def book():
    require(all(importlib.util.find_spec(m) for m in ("sphinx", "myst_nb", "sphinx_book_theme")),
            "Sphinx, MyST-NB or sphinx-book-theme is missing (pip install -r requirements-book.txt)")
    import book as tool      # tools/ is on sys.path (conftest.py)
    return tool


@pytest.fixture(scope="module")
def site(book, tmp_path_factory):
    """(the site's folder, tools/book.py's result); COURSE_BOOK_SITE=build/book checks a site
    built before instead (then Sphinx's warnings are not known)."""
    if os.environ.get("COURSE_BOOK_SITE"):
        return Path(os.environ["COURSE_BOOK_SITE"]).resolve(), None
    out = tmp_path_factory.mktemp("book") / "site"
    result = book.build(out, quiet=True)
    return out, result


def _soup(path):
    from bs4 import BeautifulSoup
    return BeautifulSoup(Path(path).read_text(encoding="utf-8"), "html.parser")


@functools.lru_cache(maxsize=None)
def _article(path):
    """A page's article (its content, without the theme's sidebars), parsed once for the module."""
    from bs4 import BeautifulSoup
    text = Path(path).read_text(encoding="utf-8")
    start, end = text.find("<article"), text.rfind("</article>")
    assert 0 <= start < end, f"{path}: no <article>"
    return BeautifulSoup(text[start:end + len("</article>")], "html.parser").article


# Sphinx writes well-formed HTML with double-quoted attributes: the link check reads it with
# regular expressions, many times faster than parsing every page.
ID = re.compile(r'<[a-zA-Z][^>]*?\s(?:id|name)="([^"]*)"')
REF = re.compile(r'<(a|link|img|script)\b[^>]*?\s(href|src)="([^"]*)"')


@functools.lru_cache(maxsize=None)
def _ids(path):
    return {html.unescape(m) for m in ID.findall(Path(path).read_text(encoding="utf-8"))}


def _text(node):
    return " ".join(node.get_text(" ").split())


def _norm(text):
    return " ".join(ANSI.sub("", text).split())


def _lessons(book):
    """(lang, notebook path, page docname) for every lesson of both sites."""
    pages = book.site_pages()
    return [(lang, ROOT / src, doc) for lang in book.LANGS for src, doc in pages[lang].items()
            if src.endswith(".ipynb")]


def _page(out, lang, doc):
    return out / f"{'zh/' if lang == 'zh' else ''}{doc}.html"


def _resolve(page, href, out):
    """The file a local href of `page` names, and its #fragment."""
    url = urllib.parse.urlsplit(href)
    path = urllib.parse.unquote(url.path)
    target = (page.parent / path).resolve() if path else page
    if target.is_dir():
        target = target / "index.html"
    return target, url.fragment


def test_build_is_clean(site):
    _, result = site
    if result is None:
        pytest.skip("COURSE_BOOK_SITE: a site built before, its warnings unknown")
    assert not result["warnings"], "Sphinx warned:\n" + "\n".join(result["warnings"])


def test_every_lesson_glossary_and_teaching_page_is_a_page(site, book):
    out, _ = site
    pages = book.site_pages()
    lessons = {lang: [s for s in pages[lang] if s.endswith(".ipynb")] for lang in book.LANGS}
    assert [Path(s).name for s in lessons["en"]] == [p.name for p in sorted((ROOT / "notebooks").glob("*.ipynb"))]
    assert [Path(s).name for s in lessons["zh"]] == [p.name for p in sorted((ROOT / "notebooks/zh").glob("*.ipynb"))]
    assert len(lessons["en"]) == len(lessons["zh"]) == 14
    teaching = [p.relative_to(ROOT).as_posix() for p in (ROOT / "teaching").rglob("*.md")]
    assert set(teaching) <= set(pages["en"]), "a teacher's page is not on the site"
    assert {"GLOSSARY.md", "README.md"} <= set(pages["en"])
    assert {"translations/zh/GLOSSARY.md", "README.zh.md"} <= set(pages["zh"])
    for lang in book.LANGS:
        for src, doc in pages[lang].items():
            page = _page(out, lang, doc)
            assert page.exists(), f"{src}: no page {page.relative_to(out)}"
        # the sidebar (the table of contents): the lessons in reading order, then the glossary
        # (and, in English, the teacher's pages)
        home = _soup(_page(out, lang, "index")).select_one("nav.bd-links")
        hrefs = [a["href"] for a in home.find_all("a", href=True)]
        wanted = [f"notebooks/{Path(s).stem}.html" for s in lessons[lang]] + ["GLOSSARY.html"]
        wanted += ["teaching/README.html"] if lang == "en" else []
        assert [h for h in hrefs if h in wanted] == wanted, f"{lang} sidebar: {hrefs}"
    teacher = _soup(out / "teaching/README.html").select_one("nav.bd-links")
    shown = {a["href"] for a in teacher.find_all("a", href=True)}
    for src, doc in pages["en"].items():
        if src.startswith("teaching/") and doc != "teaching/README":    # (itself: "#")
            assert posixpath.relpath(f"{doc}.html", "teaching") in shown, f"{src} is not in the sidebar"
    # the glossary: one page, each `### Term` an anchor (the one GitHub gives it)
    from myst_parser.slugs import github_slugify
    terms = re.findall(r"^### (.+)$", (ROOT / "GLOSSARY.md").read_text(encoding="utf-8"), re.M)
    ids = _ids(out / "GLOSSARY.html")
    missing = [t for t in terms if github_slugify(t) not in ids]
    assert terms and not missing, f"glossary terms without their anchor: {missing}"


def test_no_broken_local_link(site):
    out, _ = site
    broken = []
    for page in sorted(out.rglob("*.html")):
        for _, _, href in REF.findall(page.read_text(encoding="utf-8")):
            href = html.unescape(href)
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//", href):
                continue            # http(s), mailto, data:, javascript:
            target, fragment = _resolve(page, href, out)
            where = f"{page.relative_to(out)}: {href}"
            if not target.exists():
                broken.append(f"{where} (no file)")
            elif fragment and target.suffix == ".html" and fragment not in _ids(target):
                broken.append(f"{where} (no #{fragment})")
            elif not target.resolve().is_relative_to(out.resolve()):
                broken.append(f"{where} (outside the site)")
    assert not broken, f"{len(broken)} broken links:\n" + "\n".join(broken[:40])


def _shown(output):
    """What the site shows of a stored output: ('stream'|'text'|'html'|'png', content)."""
    if output["output_type"] == "stream":
        return "stream", "".join(output["text"])
    if output["output_type"] == "error":
        return "text", "\n".join(output.get("traceback", []))
    data = output.get("data", {})
    for mime, kind in (("text/html", "html"), ("image/png", "png"), ("text/plain", "text")):
        if mime in data:
            value = data[mime]
            return kind, value if isinstance(value, str) else "".join(value)
    return None, None


def test_lesson_pages_show_the_stored_outputs(site, book):
    from bs4 import BeautifulSoup
    out, _ = site
    problems = []
    for lang, path, doc in _lessons(book):
        article = _article(_page(out, lang, doc))
        text = _norm(article.get_text(" "))
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        outputs = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
        pngs, calculators = 0, 0
        for o in outputs:
            kind, value = _shown(o)
            if kind == "png":
                pngs += 1
                continue
            if kind is None:
                continue
            shown = _norm(BeautifulSoup(value, "html.parser").get_text(" ")) if kind == "html" else _norm(value)
            if shown and shown not in text:
                problems.append(f"{lang} {path.name}: {kind} output not on the page: {shown[:120]!r}")
            if "application/vnd.jupyter.widget-view+json" in o.get("data", {}):
                calculators += 1
        images = article.select(".cell_output img")
        if len(images) != pngs:
            problems.append(f"{lang} {path.name}: {len(images)} output images on the page, {pngs} stored")
        live = [a for a in article.find_all("a", href=True) if "mybinder.org" in a["href"]]
        if calculators and len(live) < 1 + calculators:
            problems.append(f"{lang} {path.name}: {calculators} calculators but no link to run them live")
        if article.select(".jupyter-widgets, script[type='application/vnd.jupyter.widget-view+json']"):
            problems.append(f"{lang} {path.name}: an (empty) widget view on the page")
    assert not problems, "\n".join(problems[:30])


def test_lesson_pages_link_other_language_binder_colab_and_say_where_outputs_came_from(site, book):
    out, _ = site
    pages = book.site_pages()
    problems = []
    for lang, path, doc in _lessons(book):
        page = _page(out, lang, doc)
        soup = _article(page)
        run = json.loads(path.read_text(encoding="utf-8"))["metadata"]["course"]["last_run"]
        stored = soup.select_one(".course-stored")
        line = _text(stored) if stored else ""
        for value in (run["torch"], run["python"], run["date"]):
            if value not in line:
                problems.append(f"{page.relative_to(out)}: {value} not in the stored-outputs line {line!r}")
        other, other_doc = book.counterpart(lang, doc, pages)
        lang_link = soup.select_one("a.course-lang")
        if not lang_link or _resolve(page, lang_link["href"], out)[0] != _page(out, other, other_doc).resolve():
            problems.append(f"{page.relative_to(out)}: no link to {other}/{other_doc}")
        binder = soup.select_one("a.course-binder")
        if not binder or binder["href"] != book.binder_url(lang, path.name):
            problems.append(f"{page.relative_to(out)}: no Binder link")
        colab = soup.select_one("a.course-colab")
        if not colab or colab["href"] != book.colab_url(lang, path.name):
            problems.append(f"{page.relative_to(out)}: no Colab link")
    # every other page links to its counterpart in the other language (or the other site's home)
    for lang in book.LANGS:
        for src, doc in pages[lang].items():
            if src.endswith(".ipynb"):
                continue
            page = _page(out, lang, doc)
            other, other_doc = book.counterpart(lang, doc, pages)
            want = _page(out, other, other_doc).resolve()
            article = _article(page)
            hrefs = [a["href"] for a in article.find_all("a", href=True) if not re.match(r"^\w+:", a["href"])]
            if not any(_resolve(page, h, out)[0] == want for h in hrefs):
                problems.append(f"{page.relative_to(out)}: no link to {other}/{other_doc}")
    assert not problems, "\n".join(problems[:30])


@contextlib.contextmanager
def _serve(folder):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# Whether anything makes the page wider than the screen: the page's own width, and each pre or
# table wider than the screen that no box around it (itself included) scrolls sideways.
OVERFLOW_JS = """() => {
  const w = document.documentElement.clientWidth, bad = [];
  const scrolls = el => { for (let e = el; e && e !== document.body; e = e.parentElement) {
      const o = getComputedStyle(e).overflowX;
      if ((o === 'auto' || o === 'scroll' || o === 'hidden') && e.getBoundingClientRect().right <= w + 1) return true; }
    return false; };
  for (const el of document.querySelectorAll('pre, table')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0) continue;
    if ((r.right > w + 1 || r.left < -1) && !scrolls(el))
      bad.push(el.tagName + ' ' + Math.round(r.width) + 'px: ' + el.textContent.slice(0, 60));
  }
  return {scrollWidth: document.documentElement.scrollWidth, clientWidth: w, innerWidth: window.innerWidth, bad: bad};
}"""

# The pages whose screenshots are kept; the width check runs on every page of both sites.
PHONE_PAGES = {"home": "index.html", "lesson_03": "notebooks/03_copies_between_devices.html",
               "zh_lesson_01": "zh/notebooks/01_devices.html", "glossary": "GLOSSARY.html",
               "zh_glossary": "zh/GLOSSARY.html"}


def test_pages_fit_a_phone(site, tmp_path):
    sync_playwright = browser_tools()
    out, _ = site
    ARTIFACTS.mkdir(exist_ok=True)
    problems = []
    with _serve(out) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True)
            page = context.new_page()
            page.set_default_timeout(30_000)
            shots = {path: name for name, path in PHONE_PAGES.items()}
            every = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html")
                           if "_static" not in p.parts)
            for path in [*PHONE_PAGES.values(), *(p for p in every if p not in shots)]:
                page.goto(f"{base}/{path}", wait_until="load")
                found = page.evaluate(OVERFLOW_JS)
                if path in shots:
                    page.screenshot(path=str(ARTIFACTS / f"book_{shots[path]}.png"))
                # (a phone's browser widens its layout to the content: then innerWidth grows too)
                width = max(found["scrollWidth"], found["innerWidth"])
                if width > PHONE["width"]:
                    problems.append(f"{path}: the page is {width} px wide on a {PHONE['width']} px screen")
                problems += [f"{path}: {b}" for b in found["bad"]]
        finally:
            browser.close()
    assert not problems, "\n".join(problems[:20])
