"""The helper package as a reader gets it: importing it, and what its wheel carries.

`import d2l_utils` must start nothing and print nothing, so that a reader can still set
CUDA_VISIBLE_DEVICES afterwards (lesson 1): no call that asks CUDA or the accelerator API
whether a GPU is there (on a CUDA build that starts the CUDA driver), and none of the
modules that make such a call when imported (torch.utils.benchmark, and through it
torch.utils.cpp_extension, which on a CUDA build without a GPU also logs on stderr).
"""
import json
import subprocess
import sys
import zipfile

from conftest import ROOT, slow

SPY = '''
import json, sys, torch
calls = []
def spy(owner, name):
    real = getattr(owner, name, None)
    if real is not None:
        def wrapper(*args, **kwargs):
            calls.append(f'{owner.__name__}.{name}')
            return real(*args, **kwargs)
        setattr(owner, name, wrapper)
for name in ('is_available', 'device_count', 'init', 'current_device'):
    spy(torch.cuda, name)
for name in ('is_available', 'device_count', 'current_accelerator'):
    spy(torch.accelerator, name)
spy(torch._C, '_cuda_getDeviceCount')
import d2l_utils
loaded = [m for m in ('torch.utils.benchmark', 'torch.utils.cpp_extension') if m in sys.modules]
print(json.dumps({'calls': calls, 'modules': loaded}))
'''


def spied(after_import=""):
    """What the spy saw: the GPU-asking calls and the modules, after ``import d2l_utils``
    and then ``after_import``."""
    code = SPY.replace("import d2l_utils\n", f"import d2l_utils\n{after_import}\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=ROOT / "notebooks")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), done


def test_importing_the_helpers_starts_nothing_and_prints_nothing():
    seen, done = spied()
    assert seen == {"calls": [], "modules": []} and done.stdout.count("\n") == 1, done.stdout
    assert done.stderr == "", done.stderr


def test_the_spy_sees_a_call_that_asks_for_gpus():
    """The check above can fail on either half. A helper's call that asks whether an
    accelerator is there (checks.devices, as time_op and try_gpu make) is seen as a call,
    without the module; the import of torch.utils.benchmark is seen as a module (on a CUDA
    build its import asks for GPUs too, which is why the package must not import it)."""
    seen, _ = spied("d2l_utils.checks.devices('cpu')")
    assert "torch.accelerator.is_available" in seen["calls"] and seen["modules"] == [], seen
    seen, _ = spied("import torch.utils.benchmark")
    assert "torch.utils.benchmark" in seen["modules"], seen


@slow("builds the wheel: about 5 s")
def test_the_wheel_carries_the_recordings(tmp_path):
    """Colab installs the package from git, without the repository: the wheel must hold
    measurements/ (the recordings from real hardware), where d2l_utils.recordings looks."""
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    wheel, = tmp_path.glob("d2l_utils-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for path in sorted((ROOT / "measurements").iterdir()):
        assert f"d2l_utils/measurements/{path.name}" in names, (path.name, names)
    assert "d2l_utils/lessons.py" in names and "d2l_utils/recordings.py" in names
    assert not any(n.startswith(("tests/", "notebooks/", "conftest")) for n in names), names
    # Installed alone, as on Colab, the package finds its own copy.
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    found = subprocess.run([sys.executable, "-c", "from d2l_utils.recordings import measurement_path; "
                            "print(measurement_path('budgets-cpu.json'))"], capture_output=True, text=True,
                           timeout=120, cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    assert found.stdout.strip() == str(site / "d2l_utils" / "measurements" / "budgets-cpu.json"), found
