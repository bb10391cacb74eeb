"""Every lesson launches from its badges: Colab, Binder, and the README's links.

The repository URL is declared once, in pyproject.toml; tools/nbtemplate.py derives
the Colab addresses and the Colab setup cell from it, and these tests compare the
notebooks and the README against those derivations.
"""
import json
import pathlib
import re
import urllib.parse

import pytest

import nbtemplate  # tools/ is put on sys.path by conftest.py
from conftest import NOTEBOOKS, cells, source

ROOT = pathlib.Path(__file__).resolve().parent.parent
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
GUARD = "if 'google.colab' in sys.modules:"


def _slug():
    url = nbtemplate.repo_url()
    assert url.startswith("https://github.com/") and url.count("/") == 4, (
        f"[project.urls] Repository should be https://github.com/<owner>/<name>: {url}")
    return url.removeprefix("https://github.com/")


def binder_url():
    """The mybinder.org address that opens JupyterLab at notebooks/ on the main branch."""
    return f"https://mybinder.org/v2/gh/{_slug()}/main?urlpath=lab/tree/notebooks"


def _links(markdown):
    """The targets of the markdown links and images, and of HTML href/src attributes."""
    return re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", markdown) + \
        re.findall(r"(?:href|src)=\"([^\"]+)\"", markdown)


def _repo_path_of_colab(url):
    """The repository path a Colab address opens, checked against the repository URL."""
    prefix = f"https://colab.research.google.com/github/{_slug()}/blob/main/"
    assert url.startswith(prefix), f"Colab link to another repository or branch: {url}"
    return url.removeprefix(prefix)


def test_there_are_lessons():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_colab_badge_opens_this_notebook(path):
    first_md = next(c for c in cells(path) if c["cell_type"] == "markdown")
    links = [u for u in _links(source(first_md)) if "colab.research.google.com/github/" in u]
    assert COLAB_BADGE in source(first_md) and len(links) == 1, (
        f"{path.name}: the first markdown cell needs one 'Open in Colab' badge "
        f"(tools/nbtemplate.py writes it); found {links}")
    assert links[0] == nbtemplate.colab_url(path.name), (
        f"{path.name}: badge points at {links[0]}, expected {nbtemplate.colab_url(path.name)}")
    target = _repo_path_of_colab(links[0])
    assert target == f"notebooks/{path.name}" and (ROOT / target).is_file(), target


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_code_cell_installs_the_helpers_on_colab_only(path):
    first = next(c for c in cells(path) if c["cell_type"] == "code")
    lines = source(first).splitlines()
    assert GUARD in lines and "import sys" in lines[:lines.index(GUARD)], (
        f"{path.name}: the first code cell must be the Colab setup cell, guarded by {GUARD!r}")
    body = lines[lines.index(GUARD) + 1:]
    installs = [l for l in lines if re.search(r"\bpip\b.*\binstall\b", l)]
    assert installs, f"{path.name}: the setup cell installs nothing"
    for line in installs:
        assert line in body and line.startswith((" ", "\t")), (
            f"{path.name}: {line.strip()!r} runs outside Colab too")
        assert not re.search(r"\btorch\w*\b", line), (
            f"{path.name}: the setup cell must not install torch (Colab keeps its own): {line!r}")
        urls = re.findall(r"git\+([^\s'\"@#]+)", line)
        assert urls == [nbtemplate.repo_url()], (
            f"{path.name}: installs from {urls}, but pyproject.toml declares "
            f"{nbtemplate.repo_url()}")
    assert source(first) == nbtemplate.setup_source(), (
        f"{path.name}: the setup cell differs from tools/nbtemplate.py's setup_source()")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_asks_colab_for_a_gpu(path):
    meta = json.loads(path.read_text(encoding="utf-8"))["metadata"]
    assert meta.get("accelerator") == "GPU", f"{path.name}: metadata needs accelerator: GPU"
    assert meta.get("colab", {}).get("gpuType"), f"{path.name}: metadata needs colab.gpuType"


README = (ROOT / "README.md").read_text(encoding="utf-8")


def _repository_target(url):
    """The path inside the repository that a README link opens, or None for other links."""
    parsed = urllib.parse.urlsplit(url)
    if url.startswith("https://colab.research.google.com/github/"):
        target = _repo_path_of_colab(url)
        assert url == nbtemplate.colab_url(pathlib.PurePosixPath(target).name), url
        return target
    if parsed.netloc == "mybinder.org" and parsed.path.startswith("/v2/"):
        assert parsed.path == f"/v2/gh/{_slug()}/main", (
            f"Binder link to another repository or branch: {url}")
        query = urllib.parse.parse_qs(parsed.query)
        urlpath = query["urlpath"][0] if "urlpath" in query else \
            "lab/tree/" + query.get("labpath", [""])[0]
        assert urlpath.startswith("lab/tree/"), f"Binder should open JupyterLab: {url}"
        return urlpath.removeprefix("lab/tree/") or "."
    if url.startswith(f"https://github.com/{_slug()}/"):
        rest = url.removeprefix(f"https://github.com/{_slug()}/")
        return re.sub(r"^(blob|tree)/main/", "", rest.split("#")[0])
    if parsed.scheme or parsed.netloc or url.startswith("#"):
        return None                       # elsewhere on the web (badge images, docs)
    return urllib.parse.unquote(parsed.path)


REPO_LINKS = sorted(u for u in set(_links(README)) if _repository_target(u) is not None)


@pytest.mark.parametrize("url", REPO_LINKS)
def test_readme_link_into_the_repository_exists(url):
    target = _repository_target(url)
    assert target and (ROOT / target).exists(), f"README links to {target!r}, which does not exist"


def test_readme_has_the_binder_badge_and_every_lesson():
    assert REPO_LINKS, "README.md links nothing in the repository"
    assert binder_url() in _links(README), f"README.md needs the Binder badge for {binder_url()}"
    for path in NOTEBOOKS:
        assert f"notebooks/{path.name}" in _links(README), f"README.md does not link {path.name}"
        assert nbtemplate.colab_url(path.name) in _links(README), (
            f"README.md has no Colab badge for {path.name}")
