"""Sphinx configuration of the course's book site (built by tools/book.py, not by hand).

One configuration serves both editions: tools/book.py runs Sphinx twice, on the staged English
sources (site at OUTDIR/) and on the staged Chinese ones (OUTDIR/zh/), with this folder as the
configuration folder and COURSE_BOOK_LANG set to `en` or `zh`.

The lessons are read as stored (MyST-NB, execution off): the site shows the outputs the notebooks
carry. The calculators' widgets have no saved state, so the widget view is never chosen: their
static text/html shows instead (tools/book.py adds a link to run them live).
"""
import os
import tomllib
from pathlib import Path

from docutils import nodes

ROOT = Path(__file__).resolve().parent.parent
LANG = os.environ.get("COURSE_BOOK_LANG", "en")
REPOSITORY = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]

project = "GPU computing in PyTorch" if LANG == "en" else "PyTorch GPU 计算"
author = "d2l-gpu"
copyright = "the course's authors"
language = "en" if LANG == "en" else "zh_CN"      # zh_CN: Sphinx's Chinese search (jieba)
html_title = project
root_doc = "index"

extensions = ["myst_nb"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# MyST-NB: the stored outputs, never executed; no widget views (no saved state). Its stream merging
# is off: it joins every print of a cell, moving them above the displays between them
# (tools/book.py joins only adjacent ones, as JupyterLab shows them).
nb_execution_mode = "off"
nb_mime_priority_overrides = [("*", "application/vnd.jupyter.widget-view+json", None),
                              ("*", "application/vnd.jupyter.widget-state+json", None)]
nb_merge_streams = False
nb_output_stderr = "show"
# GitHub-style heading anchors (the glossary's and the READMEs' links use them), also as HTML ids.
myst_heading_anchors = 6
# `site:` links (tools/book.py writes them) point to the other edition's pages, outside this
# Sphinx project: rendered as plain links, the path kept as written.
myst_url_schemes = {"http": None, "https": None, "mailto": None, "ftp": None,
                    "site": {"url": "{{path}}#{{fragment}}"}}

html_theme = "sphinx_book_theme"
html_theme_options = {
    "repository_url": REPOSITORY,
    "repository_branch": "main",
    "use_repository_button": True,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
html_static_path = [str(Path(__file__).parent / "_static")]
html_css_files = ["book.css"]
html_copy_source = False           # the sources are the repository's; _sources/ would double the size
html_show_sourcelink = False
html_permalinks_icon = "#"


def _site_links(app, doctree, docname):
    """`site:PATH` links come out as `PATH#`; drop the empty fragment."""
    for ref in doctree.findall(nodes.reference):
        uri = ref.get("refuri", "")
        if uri.endswith("#"):
            ref["refuri"] = uri[:-1]


def setup(app):
    app.connect("doctree-resolved", _site_links)
