"""The reader's path in a real browser: open a lesson in JupyterLab, Run All Cells.

JupyterLab serves a *copy* of the notebooks in a temporary folder, with the stored
outputs stripped (so that every output and plot on the page comes from this run,
and so that running or autosaving can never rewrite the repository's stored
outputs). Headless Chromium (Debian's, at /usr/bin/chromium; Playwright's own
browser download is not used) opens the lesson, runs it through the Run menu, and
the test checks that every cell ran, no cell shows an error, and, in a lesson whose
stored outputs contain a plot, that the plot rendered as an image. A screenshot is
kept in test-artifacts/.

Without chromium or playwright the test skips; in CI (COURSE_CI=1) that is a failure.
"""
import contextlib
import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from conftest import code_cells, require, slow

ROOT = pathlib.Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = pathlib.Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic"]

# The lesson the browser runs: one with a plot, so that rendering is checked too.
LESSON = "05_module_placement.ipynb"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stripped_copy(src_dir, dst_dir):
    """Copy the notebooks, clearing outputs and execution counts."""
    shutil.copytree(src_dir, dst_dir, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for path in dst_dir.glob("*.ipynb"):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                cell["outputs"], cell["execution_count"] = [], None
        path.write_text(json.dumps(nb, indent=1), encoding="utf-8")


def _settings(settings_dir):
    """JupyterLab user settings for the test: every cell in the page, no news check."""
    for plugin, values in {
        # render all cells (not only the visible ones) so the page can be inspected
        "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
        "@jupyterlab/apputils-extension/notification": {"checkForUpdates": False,
                                                          "fetchNews": "false"},
    }.items():
        path = settings_dir / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


@contextlib.contextmanager
def jupyterlab(root_dir, tmp):
    """A JupyterLab server on 127.0.0.1 serving root_dir; yields its base URL and token.

    The server and every process it started (kernels) are ended on exit, also when
    the test fails.
    """
    import psutil
    token = secrets.token_hex(16)
    port = _free_port()
    env = {**os.environ,
           "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
           "JUPYTER_CONFIG_DIR": str(tmp / "config"),
           # plots inline, as in a reader's JupyterLab, whatever the CI machine sets
           "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    _settings(tmp / "settings")
    log = open(tmp / "jupyterlab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root_dir}",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         *(["--allow-root"] if os.geteuid() == 0 else [])],   # CI containers run as root
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root_dir, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (
                f"JupyterLab exited with {proc.returncode}:\n{(tmp / 'jupyterlab.log').read_text()}")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "JupyterLab did not start within 60 s"
            time.sleep(0.3)
        yield base, token
    finally:
        try:
            procs = [proc, *psutil.Process(proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            procs = [proc]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)       # the server shuts its kernels down
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for p in procs:                               # whatever is left, kernels included
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        proc.wait(timeout=10)
        log.close()


def _chromium(pw, tmp_path):
    """Debian's chromium, headless, at 1280x900: (its context, its page)."""
    context = pw.chromium.launch_persistent_context(
        tmp_path / "profile", executable_path=str(CHROMIUM), headless=True,
        args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 900})
    page = context.pages[0] if context.pages else context.new_page()
    page.set_default_timeout(30_000)
    return context, page


def _run_all_cells(page):
    """Run → Run All Cells, through the menu as a reader would."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()


def _wait_for_kernel(page, base, token, timeout_s=60):
    """Wait until the lesson's kernel runs, the page is connected to it, and it is idle.

    The page's status indicator alone says 'idle' before any kernel exists, so ask
    the server too: its session for the lesson must have a connected, idle kernel.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        with urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=5) as r:
            kernels = [s["kernel"] for s in json.load(r) if s["path"].endswith(LESSON)]
        if any(k["connections"] > 0 and k["execution_state"] == "idle" for k in kernels):
            break
        assert time.monotonic() < deadline, f"no idle kernel for {LESSON} in {timeout_s} s"
        time.sleep(0.3)
    page.locator(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status='idle']") \
        .wait_for(timeout=timeout_s * 1000)


def _saved_run(path, n_cells, timeout_s=30):
    """The notebook as JupyterLab saved it, once all n_cells code cells have a count."""
    deadline = time.monotonic() + timeout_s
    while True:
        cells = code_cells(path)
        counts = [c["execution_count"] for c in cells]
        if all(isinstance(n, int) for n in counts) and len(cells) == n_cells:
            return cells
        assert time.monotonic() < deadline, f"{path.name} was not saved with every cell run: {counts}"
        time.sleep(0.5)


def browser_tools():
    """playwright's ``sync_playwright``, once it and Debian's chromium are known to be there;
    else skip (in CI: fail), saying which is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    require(sync_playwright is not None, "playwright is not installed (pip install -r requirements.txt)")
    require(CHROMIUM.exists(), f"no browser at {CHROMIUM} (Debian: apt-get install chromium)")
    return sync_playwright


def test_run_all_cells_in_jupyterlab(tmp_path):
    sync_playwright = browser_tools()

    served = tmp_path / "course"
    _stripped_copy(ROOT / "notebooks", served / "notebooks")
    stored = code_cells(ROOT / "notebooks" / LESSON)
    # JupyterLab shows no prompt for a cell whose input is collapsed (the solutions)
    with_prompt = [c for c in stored
                   if not c["metadata"].get("jupyter", {}).get("source_hidden")]
    plots = sum("image/png" in o.get("data", {}) for c in stored for o in c["outputs"])
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"browser_{pathlib.Path(LESSON).stem}.png"

    start = time.perf_counter()
    phases = {}
    with jupyterlab(served, tmp_path) as (base, token), sync_playwright() as pw:
        phases["server up"] = time.perf_counter() - start
        context, page = _chromium(pw, tmp_path)
        try:
            page.goto(f"{base}/lab/tree/notebooks/{LESSON}?token={token}")
            page.locator(".jp-NotebookPanel .jp-Notebook").wait_for()
            phases["lesson shown"] = time.perf_counter() - start
            _wait_for_kernel(page, base, token)
            phases["kernel ready"] = time.perf_counter() - start
            _run_all_cells(page)

            # done when the kernel is idle and every cell's prompt shows its count
            prompts = page.locator(".jp-CodeCell .jp-InputArea-prompt")
            deadline = time.monotonic() + 120
            while True:
                dialog = page.locator(".jp-Dialog", has_text="Select Kernel")
                if dialog.count():
                    # no kernel yet: accept the notebook's own, as a reader would, and rerun
                    assert "Python 3" in dialog.locator("select").inner_text()
                    dialog.locator("button.jp-mod-accept").click()
                    _wait_for_kernel(page, base, token)
                    _run_all_cells(page)
                texts = [t.strip() for t in prompts.all_inner_texts()]
                ran = sum(bool(re.fullmatch(r"\[\d+\]:", t)) for t in texts)
                if ran >= len(with_prompt) and "[*]:" not in texts and page.locator(
                        ".jp-Notebook-ExecutionIndicator[data-status='idle']").count():
                    break
                assert time.monotonic() < deadline, (
                    f"{LESSON}: {ran} of {len(with_prompt)} cells ran in 120 s")
                time.sleep(0.5)
            phases["all cells ran"] = time.perf_counter() - start

            # what the reader sees: no traceback on the page, and the plots as images
            shown = page.locator(".jp-OutputArea-output").all_inner_texts()
            assert not [t for t in shown if "Traceback (most recent call last)" in t], (
                f"{LESSON}: a cell shows a traceback")
            if plots:
                images = page.locator(".jp-OutputArea-output img")
                assert images.count() >= plots, (
                    f"{LESSON}: {plots} plots in the stored lesson, {images.count()} rendered")
                images.first.scroll_into_view_if_needed()
                assert images.first.evaluate("img => img.complete && img.naturalWidth > 0"), (
                    f"{LESSON}: the plot's image is empty")

            # what the kernel did: save (the copy) and read every cell's outputs
            page.keyboard.press("Control+s")
            cells = _saved_run(served / "notebooks" / LESSON, len(stored))
            counts = [c["execution_count"] for c in cells]
            assert counts == list(range(1, len(cells) + 1)), f"{LESSON}: ran as {counts}"
            errors = [f"cell [{c['execution_count']}]: {o['ename']}: {o['evalue']}"
                      for c in cells for o in c["outputs"] if o["output_type"] == "error"]
            assert not errors, f"{LESSON}: errors in the browser run:\n" + "\n".join(errors)
        finally:
            page.screenshot(path=shot)
            context.close()
    print(f"{LESSON} in the browser, seconds from the start: "
          + ", ".join(f"{k} {v:.1f}" for k, v in phases.items()) + f"; screenshot {shot}")


@slow("starts JupyterLab and Chromium: about 20 s")
def test_a_link_in_the_core_leads_to_its_depth_section_in_jupyterlab(tmp_path):
    """A lesson's core links each section of its depth (tools/sitting.py): clicked in
    JupyterLab, the link brings that section's heading into view (JupyterLab's heading ids)."""
    import sitting
    sync_playwright = browser_tools()
    path = ROOT / "notebooks" / LESSON
    nb = json.loads(path.read_text(encoding="utf-8"))
    core, depth = sitting.split(nb)
    anchor = next(a for _, a in sitting.internal_links(core) if a in sitting.depth_sections(depth))
    _stripped_copy(ROOT / "notebooks", tmp_path / "course")       # JupyterLab may write beside what it opens
    with jupyterlab(tmp_path / "course", tmp_path) as (base, token), sync_playwright() as pw:
        context, page = _chromium(pw, tmp_path)
        try:
            page.goto(f"{base}/lab/tree/{LESSON}?token={token}")
            heading = page.locator(f'.jp-RenderedMarkdown [data-jupyter-id="{anchor}"]')
            heading.wait_for(state="attached")
            assert not heading.is_visible() or not _in_view(heading), "the depth's heading is in view already"
            link = page.locator(f'.jp-RenderedMarkdown a[href="#{anchor}"]').first
            link.scroll_into_view_if_needed()
            link.click()
            deadline = time.monotonic() + 10
            while not _in_view(heading):
                assert time.monotonic() < deadline, f"{LESSON}: the link to #{anchor} did not bring it into view"
                time.sleep(0.2)
        finally:
            page.screenshot(path=ARTIFACTS / f"browser_depth_link_{path.stem}.png")
            context.close()


def _in_view(locator):
    """Whether the element's top lies inside the browser's window."""
    return locator.evaluate("e => { const r = e.getBoundingClientRect();"
                            " return r.top >= 0 && r.top < window.innerHeight; }")
