"""The Binder environment (binder/) agrees with the root requirements and installs.

repo2docker (what mybinder.org runs) installs binder/requirements.txt with
`pip install -r binder/requirements.txt` from the repository root, then runs
binder/postBuild there, which installs the helpers. The root requirements.txt and
pyproject.toml are ignored on Binder, so the two requirement files must be kept in
step by hand; the first test checks that they are.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

from conftest import require, slow
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = pathlib.Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# Packages of the root environment that Binder does not need: the test tools, the teacher's
# autograder (otter-grader), and the Jupyter server and kernel, which repo2docker's own
# environment already provides.
NOT_ON_BINDER = {"pytest", "pytest-xdist", "nbval", "playwright", "psutil", "nbformat", "nbclient",
                 "jupyterlab", "ipykernel", "otter-grader"}


def _requirements(path):
    """{name: Requirement} and the option lines ('--...') of a requirements file."""
    reqs, options = {}, []
    for line in path.read_text().splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            options.append(line)
            continue
        req = Requirement(line)
        reqs[req.name.lower()] = req
    return reqs, options


def _pin(req):
    """The version a requirement pins with '==', or None."""
    pins = [s.version for s in req.specifier if s.operator == "=="]
    return Version(pins[0]) if len(pins) == 1 else None


def test_binder_pins_the_same_versions_as_the_root_requirements():
    root, _ = _requirements(ROOT / "requirements.txt")
    binder, options = _requirements(BINDER / "requirements.txt")
    assert "torch" in binder, "binder/requirements.txt must install torch"
    for name, req in binder.items():
        assert _pin(req) is not None, f"binder pins {name} with '==': {req}"
        assert name in root, f"{name} is on Binder but not in the root requirements.txt"
        assert _pin(root[name]) is not None, f"the root requirements.txt pins {name}"
        # compare public versions: 2.13.0+cpu is the CPU build of 2.13.0
        assert _pin(req).public == _pin(root[name]).public, (
            f"{name}: binder pins {_pin(req)}, the root requirements.txt {_pin(root[name])}")
    missing = set(root) - set(binder) - NOT_ON_BINDER - {"d2l-utils"}
    assert not missing, f"pinned in the root requirements.txt but missing on Binder: {missing}"
    # the CPU build, from PyTorch's CPU index
    assert _pin(binder["torch"]).local == "cpu", "Binder has no GPU: pin the +cpu build of torch"
    assert f"--extra-index-url {CPU_INDEX}" in options, options
    # nothing local in the file: repo2docker may install it before the repository is copied
    assert not any(l.startswith(("-e", "-r", "-c", ".")) for l in options), options


def test_binder_python_and_postbuild():
    import torch
    root, _ = _requirements(ROOT / "requirements.txt")
    runtime = (BINDER / "runtime.txt").read_text().strip()
    if Version(torch.__version__).public != _pin(root["torch"]).public:
        # CI's second environment (another Python, PyTorch 2.11): Binder's Python is the
        # lab's, checked where the lab's pins are installed.
        assert re.fullmatch(r"python-3\.\d+", runtime), runtime
    else:
        assert runtime == f"python-{sys.version_info.major}.{sys.version_info.minor}", (
            f"binder/runtime.txt says {runtime!r}; the lab is tested with this Python")
    post = BINDER / "postBuild"
    assert os.access(post, os.X_OK), "binder/postBuild must be executable"
    text = post.read_text()
    assert text.startswith("#!/bin/bash") and "set -e" in text, "postBuild must stop on errors"
    assert "--no-deps -e ." in text, "postBuild installs the helpers without touching torch"


def _local_cpu_wheel(version):
    """A local torch CPU wheel of `version`, in the machine's pip find-links folders."""
    dirs = os.environ.get("PIP_FIND_LINKS", "").split() + ["/opt/wheels"]
    for d in dirs:
        for wheel in sorted(pathlib.Path(d).glob(f"torch-{version}-cp{sys.version_info.major}"
                                                 f"{sys.version_info.minor}-*.whl")):
            return wheel
    return None


@slow("about a minute")
def test_binder_environment_installs_in_a_fresh_virtualenv(tmp_path):
    """Install binder/requirements.txt and run binder/postBuild, as repo2docker does.

    download.pytorch.org is not reachable in the course's build machines, so this
    test drops the `--extra-index-url` line of PyTorch's CPU index and lets pip take
    the same CPU wheel (torch-<version>+cpu) from the machine's local wheel folder
    instead (`--find-links`, /opt/wheels here). Everything else comes from the
    package index pip is configured with. Where no such local wheel exists (a
    newcomer's laptop) the test skips; in CI (COURSE_CI=1) that is a failure.
    It takes about a minute on a 2-core machine, most of it pip resolving and installing
    some 110 packages (jupyterlab-rise brings JupyterLab itself here; on Binder it is
    already there), so it runs in CI (COURSE_CI=1) and when asked for (COURSE_SLOW=1).
    """
    reqs, _ = _requirements(BINDER / "requirements.txt")
    version = _pin(reqs["torch"])
    wheel = _local_cpu_wheel(version)
    require(wheel is not None,
            f"no local wheel torch-{version} (in /opt/wheels or $PIP_FIND_LINKS) to stand in "
            "for PyTorch's CPU index: the Binder install is not checked on this machine")

    # repo2docker copies the repository into the image and works from its root:
    # do the same with a copy, so that the editable install leaves this checkout alone
    repo = tmp_path / "repo"
    shutil.copytree(ROOT, repo, ignore=shutil.ignore_patterns(
        ".git", ".venv*", ".whl", "*.egg-info", "build", "dist", ".pytest_cache", "__pycache__",
        "test-artifacts", ".ipynb_checkpoints"))
    offline = tmp_path / "requirements-offline.txt"
    offline.write_text("".join(
        line + "\n" for line in (repo / "binder/requirements.txt").read_text().splitlines()
        if not line.startswith(("--index-url", "--extra-index-url"))))

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=120)
    py = venv / "bin" / "python"
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "VIRTUAL_ENV": str(venv), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)

    def run(*cmd, timeout=600):
        done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True,
                              timeout=timeout)
        assert done.returncode == 0, f"{cmd} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done.stdout

    start = time.perf_counter()
    run(py, "-m", "pip", "install", "-q", "--no-compile", "--find-links", wheel.parent, "-r", offline)
    run("binder/postBuild")
    installed = time.perf_counter() - start
    out = run(py, "-c", (
        "import torch, d2l_utils, matplotlib, tqdm, jupyterlab_rise, pathlib, sys\n"
        "assert pathlib.Path(d2l_utils.__file__).is_relative_to(sys.argv[1]), d2l_utils.__file__\n"
        "print(torch.__version__, torch.version.cuda, torch.backends.cuda.is_built(), "
        "d2l_utils.try_gpu())"), repo)
    torch_version, cuda, cuda_built, device = out.split()
    assert Version(torch_version) == version, f"installed torch {torch_version}, pinned {version}"
    assert cuda == "None" and cuda_built == "False", f"not a CPU build of torch: {out}"
    assert device == "cpu", out
    print(f"Binder environment installed in {installed:.0f} s")
