"""Is this machine ready for the course? Run it before the first day:

    python -m d2l_utils.setup_check

It takes a few seconds and prints one line per check, then a verdict: READY, READY with
notes (the course runs; something a teacher should know, such as no GPU), or NOT READY with
what to do. The exit status is 0 unless it is NOT READY. Course machinery, written by hand.

What it checks: the Python version; PyTorch, its build (CUDA, ROCm, CPU) and whether it
computes; which accelerator is there (CUDA, Apple MPS, Intel XPU) and whether a tensor can
be put on it and computed with; the course's helpers; the packages the lessons import
(numpy, matplotlib, tqdm, nvidia-ml-py); JupyterLab and the slideshow extension
(jupyterlab-rise), where a lab is meant to run; and what a GPU-only cell shows where
there is no GPU (its expectation, and a recording from real hardware where one is installed).
"""
import importlib.metadata
import importlib.util
import platform
import sys

OK, NOTE, FAIL = 'ok', 'note', 'FAIL'
TESTED_PYTHON = ((3, 11), (3, 12), (3, 13))
LOWEST_TORCH = (2, 11)


def _version(name):
    """The installed version of distribution ``name``, or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _release(text):
    """'2.13.0+cpu' -> (2, 13)."""
    return tuple(int(part) for part in text.split('+')[0].split('.')[:2])


def check_python():
    v = sys.version_info[:2]
    text = f'Python {platform.python_version()}'
    if v < (3, 11):
        return FAIL, f'{text}: the course needs Python 3.11 or later (3.11 is what the lab pins)'
    if v not in TESTED_PYTHON:
        return NOTE, f'{text}: newer than the course was tested on (3.11 to 3.13)'
    return OK, text


def check_torch():
    try:
        import torch
    except ImportError:
        return FAIL, 'PyTorch is not installed: pip install -r requirements.txt (see the README)'
    build = ('ROCm ' + torch.version.hip if torch.version.hip else
             'CUDA ' + torch.version.cuda if torch.version.cuda else 'CPU-only')
    text = f'PyTorch {torch.__version__} ({build} build)'
    if _release(torch.__version__) < LOWEST_TORCH:
        return FAIL, f'{text}: the lessons need PyTorch 2.11 or later'
    try:
        ok = torch.equal(torch.ones(2, 2) @ torch.ones(2, 2), torch.full((2, 2), 2.0))
    except Exception as e:                          # a broken install fails here
        return FAIL, f'{text}: a matrix product on the CPU failed: {e}'
    return (OK, text) if ok else (FAIL, f'{text}: a matrix product on the CPU gave a wrong answer')


def check_accelerator():
    import torch
    if not torch.accelerator.is_available():
        cuda = torch.version.cuda is not None
        return NOTE, ('no GPU: every lesson runs; GPU-only cells show what they printed on a GPU'
                      + (' (a CUDA build: with an NVIDIA GPU, check its driver with nvidia-smi; without '
                         'one, requirements-cpu.txt installs the smaller CPU build)' if cuda else ''))
    device = torch.accelerator.current_accelerator()
    name = torch.cuda.get_device_name(0) if device.type == 'cuda' else device.type.upper()
    try:
        x = torch.ones(256, 256, device=device)
        ok = (x @ x).sum().item() == 256 ** 3
    except Exception as e:
        return FAIL, f'{name} ({device.type}) is there but a tensor on it failed: {e}'
    count = torch.accelerator.device_count()
    return (OK, f'{count} x {name} ({device.type}): a matrix product on it is right') if ok else \
        (FAIL, f'{name}: a matrix product on it gave a wrong answer')


def check_helpers():
    try:
        import d2l_utils as d2l
    except Exception as e:
        return FAIL, f"the course's helpers do not import ({e}): pip install -e . in the course's folder"
    missing = [name for name in ('try_gpu', 'time_op', 'show_recording') if not hasattr(d2l, name)]
    if missing:
        return FAIL, f"the course's helpers lack {missing}: reinstall them (pip install -e .)"
    return OK, f"the course's helpers (d2l_utils {_version('d2l-utils') or 'from this folder'})"


def check_packages():
    missing = [name for name in ('numpy', 'matplotlib', 'tqdm') if importlib.util.find_spec(name) is None]
    if missing:
        return FAIL, f'missing {", ".join(missing)}: pip install -r requirements.txt'
    if importlib.util.find_spec('pynvml') is None:
        return NOTE, 'numpy, matplotlib, tqdm; no nvidia-ml-py (lesson 1 then picks no GPUs for you)'
    return OK, 'numpy, matplotlib, tqdm, nvidia-ml-py'


def check_lab():
    if 'google.colab' in sys.modules:
        return OK, 'Colab: its own notebook interface (slideshows need JupyterLab)'
    lab, rise = _version('jupyterlab'), _version('jupyterlab-rise') or _version('jupyterlab_rise')
    if lab is None:
        return FAIL, 'JupyterLab is not installed here: pip install -r requirements.txt'
    if rise is None:
        return NOTE, f'JupyterLab {lab}, without jupyterlab-rise: no slideshows (the lessons run)'
    return OK, f'JupyterLab {lab} with jupyterlab-rise {rise} (slideshows: View -> Render as slideshow)'


def check_recordings():
    from d2l_utils.recordings import RECORDING, recording_path
    path = recording_path()
    if path is None:
        return NOTE, (f'no recording from real hardware ({RECORDING}): without a GPU, a GPU-only '
                      'cell shows what a GPU is expected to show (labelled as expected, with how it '
                      'was derived) and its lesson\'s Colab link to measure it')
    import json
    machine = json.loads(path.read_text(encoding='utf-8'))['machine']
    return OK, (f"recordings from {machine['gpu_count']}x {machine['gpu']} ({machine['date']}) at {path}: "
                'without a GPU, a GPU-only cell shows its expectation and what that GPU printed')


CHECKS = [('Python', check_python), ('PyTorch', check_torch), ('accelerator', check_accelerator),
          ('helpers', check_helpers), ('packages', check_packages), ('JupyterLab', check_lab),
          ('recordings', check_recordings)]


def run(checks=CHECKS, out=print):
    """Run ``checks``; print a line each and the verdict; return the exit status."""
    results = []
    for name, check in checks:
        try:
            status, text = check()
        except Exception as e:                      # a check that breaks is a failure, said plainly
            status, text = FAIL, f'the check itself failed: {type(e).__name__}: {e}'
        results.append((status, name, text))
        out(f'[{status:>4}] {name:12} {text}')
        if status == FAIL and name in ('Python', 'PyTorch'):
            break                                   # the rest needs them
    fails = [r for r in results if r[0] == FAIL]
    notes = [r for r in results if r[0] == NOTE]
    if fails:
        out(f'NOT READY: fix {", ".join(r[1] for r in fails)} (see above), then run this again.')
        return 1
    out('READY' + (f' (with notes: {", ".join(r[1] for r in notes)})' if notes else '') +
        ': open the course with `jupyter lab notebooks/` (or the lessons on Colab or Binder).')
    return 0


if __name__ == '__main__':
    sys.exit(run())
