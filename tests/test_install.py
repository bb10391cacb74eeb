"""The two ways to install the lab: requirements.txt, and requirements-cpu.txt (CPU-only PyTorch)."""
import json
import os
import subprocess
import sys

from conftest import ROOT, require
from packaging.version import Version
from test_binder import CPU_INDEX, _local_cpu_wheel, _pin, _requirements


def test_requirements_say_which_build_of_pytorch_they_install():
    text = (ROOT / "requirements.txt").read_text()
    assert "the CUDA\n# build" in text and "requirements-cpu.txt" in text, "say which build each file installs"
    cpu, options = _requirements(ROOT / "requirements-cpu.txt")
    root, _ = _requirements(ROOT / "requirements.txt")
    assert _pin(cpu["torch"]).local == "cpu"
    assert _pin(cpu["torch"]).public == _pin(root["torch"]).public
    assert options == [f"--extra-index-url {CPU_INDEX}", "-r requirements.txt"], options


def test_cpu_requirements_resolve_to_the_cpu_build(tmp_path):
    """The torch pins of requirements-cpu.txt and requirements.txt agree, on the CPU build.

    PyTorch's CPU index is not reachable on the course's build machines, so its line is
    replaced by the same CPU wheel from the machine's local wheel folder (as in
    tests/test_binder.py). `--dry-run` resolves everything and installs nothing.
    """
    version = _pin(_requirements(ROOT / "requirements-cpu.txt")[0]["torch"])
    wheel = _local_cpu_wheel(version)
    require(wheel is not None, f"no local wheel torch-{version} to stand in for PyTorch's CPU index")
    # Only the torch lines of both files, without dependencies: resolving the whole lab
    # takes minutes here, and CI installs requirements.txt itself anyway.
    torch_lines = [line for path in ("requirements-cpu.txt", "requirements.txt")
                   for line in (ROOT / path).read_text().splitlines() if line.startswith("torch==")]
    assert len(torch_lines) == 2, torch_lines
    offline = tmp_path / "torch-lines.txt"
    offline.write_text("\n".join(torch_lines) + "\n")
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                           "--no-deps", "-q", "--find-links", str(wheel.parent), "--report", str(report),
                           "-r", str(offline)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    chosen = {item["metadata"]["name"].lower(): item["metadata"]["version"]
              for item in json.loads(report.read_text())["install"]}
    assert Version(chosen["torch"]) == version, chosen["torch"]


def test_the_torch_lower_bound_is_a_release_ci_runs_the_lessons_on():
    """pyproject.toml's torch>= is the release of CI's second environment, and CI runs the
    lessons there (.ci/run); the other pins of that environment are the lab's."""
    import tomllib
    from packaging.requirements import Requirement
    deps = [Requirement(d) for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    lower = [Version(s.version) for d in deps if d.name == "torch" for s in d.specifier if s.operator == ">="]
    second, options = _requirements(ROOT / ".ci" / "requirements-2.11.txt")
    assert lower == [_pin(second["torch"])], (lower, second["torch"])
    assert options == ["-e ."], options
    lab, _ = _requirements(ROOT / "requirements.txt")
    for name, req in second.items():
        if name != "torch":
            assert _pin(req) == _pin(lab[name]), f"{name}: {req} in CI's second environment, {lab[name]} in the lab"
    run = (ROOT / ".ci" / "run").read_text()
    assert "-r .ci/requirements-2.11.txt" in run and "-m pytest -p no:cacheprovider notebooks tests" in run
