"""Is this machine ready for the course? Run it before the first day:

    python -m d2l_utils.setup_check

It takes a few seconds and prints one line per check, then a verdict: READY, READY with
notes (the course runs; something a teacher should know, such as no GPU), or NOT READY with
what to do. The exit status is 0 unless it is NOT READY. Course machinery, written by hand.

What it checks: the Python version; the machine (an Intel Mac cannot install the PyTorch
the course needs; what a Mac with Apple silicon runs); PyTorch, its build (CUDA, ROCm,
CPU) and whether it computes; which accelerator is there (CUDA, Apple MPS, Intel XPU) and
whether a tensor can be put on it and computed with; the course's helpers; the packages the
lessons import (numpy, matplotlib, tqdm, nvidia-ml-py); whether `torch.compile` can build
CPU kernels (a C++ compiler, Python's headers, OpenMP); JupyterLab and the slideshow
extension (jupyterlab-rise), where a lab is meant to run; what a GPU-only cell shows where
there is no GPU (its expectation, and a recording from real hardware where one is
installed); and which PyTorch and Python each lesson's stored outputs came from, against
the ones installed here.

The compiler check does not run `torch.compile` itself by default: a first compile loads
and warms up Dynamo and Inductor, 10 s to a minute on a laptop, longer than all the other
checks together. Instead it builds, in a child process with a timeout, what Inductor builds
for a CPU kernel: a small C++ shared library that includes Python's headers and OpenMP,
with the compiler Inductor would call (about a second). A failure is a note, not NOT
READY: only lesson 11's compile cells and its exercise 2 (the workshop's lab 4) need it on
a laptop, and lesson 13's compiled rows on a CUDA GPU. Two options:

    python -m d2l_utils.setup_check --compile   # run a real torch.compile on the CPU instead
    python -m d2l_utils.setup_check --lessons   # each lesson: the versions its outputs came from
"""
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile

OK, NOTE, FAIL = 'ok', 'note', 'FAIL'
TESTED_PYTHON = ((3, 11), (3, 12), (3, 13))
LOWEST_TORCH = (2, 11)
# The lessons whose code puts tensors on `d2l.try_gpu()` or `d2l.try_all_gpus()`, which come
# from torch.accelerator: on a Mac with Apple silicon, the Mac's GPU (mps). Their CUDA-only
# cells, and the other lessons, run on the CPU there. (tests/test_setup_check.py derives this
# list from the notebooks.)
MPS_LESSONS = (1, 2, 3, 4, 5, 6, 11)
LESSONS = pathlib.Path(__file__).resolve().parent.parent / 'notebooks'
COMPILE_TIMEOUT_S = 30          # the small library builds in about a second
FULL_COMPILE_TIMEOUT_S = 300    # a real first torch.compile: 10 s to a minute on a laptop


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


def _rosetta():
    """True when this Python is an Intel (x86-64) program that macOS runs under Rosetta 2."""
    try:
        return subprocess.run(['sysctl', '-n', 'sysctl.proc_translated'], capture_output=True,
                              text=True, timeout=5).stdout.strip() == '1'
    except (OSError, subprocess.SubprocessError):
        return False


def _lesson_list(numbers):
    """(1, 2, 3, 4, 6, 7, 11) -> 'lessons 1-4, 6, 7 and 11'."""
    runs, numbers = [], sorted(numbers)
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    parts = [p for a, b in runs for p in ([f'{a}-{b}'] if b > a + 1 else [f'{n}' for n in range(a, b + 1)])]
    text = parts[0] if len(parts) == 1 else ', '.join(parts[:-1]) + ' and ' + parts[-1]
    return ('lesson ' if len(numbers) == 1 else 'lessons ') + text


def check_machine():
    system, machine = platform.system(), platform.machine()
    if system == 'Darwin' and machine == 'x86_64':
        rosetta = _rosetta()
        where = 'an Intel Python under Rosetta on a Mac with Apple silicon' if rosetta else 'an Intel Mac'
        installed = _version('torch')
        if installed and _release(installed) >= LOWEST_TORCH:
            return NOTE, (f'{where}, with PyTorch {installed} (not from PyPI, which has had no Intel Mac '
                          'wheels since 2.3): untested; Binder or Colab is the tested way')
        fix = ("install an arm64 Python (python.org's installer, or Homebrew's in /opt/homebrew) and follow "
               'the README with it, or open the course on Binder or Colab' if rosetta else
               'open the course on Binder or Colab instead (a browser is enough; see the README)')
        return FAIL, (f'{where}: PyTorch has published no wheels for Intel Macs since 2.3 and the lessons need '
                      f'{LOWEST_TORCH[0]}.{LOWEST_TORCH[1]} or later, so pip cannot install it here: {fix}')
    if system == 'Darwin':
        return OK, (f'a Mac with Apple silicon ({machine}): every lesson runs; '
                    f"{_lesson_list(MPS_LESSONS)} put their tensors on the Mac's GPU (mps) through "
                    'torch.accelerator, the others run on the CPU, and CUDA-only cells show their expectations')
    if system == 'Windows':
        return NOTE, (f'Windows ({machine}): not tested; use WSL 2 (Ubuntu) and the Linux commands, '
                      'or Binder or Colab')
    return OK, f'{system} ({machine})'


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
        return NOTE, ('no GPU: every lesson runs; GPU-only cells show what a GPU is expected to show, '
                      'labelled as a prediction (the recordings line says whether a real GPU\'s output is '
                      'installed too)'
                      + ('; a CUDA build: with an NVIDIA GPU, check its driver with nvidia-smi; without '
                         'one, requirements-cpu.txt installs the smaller CPU build' if cuda else ''))
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


def _run_child(cmd, timeout, **kwargs):
    """subprocess.run(cmd, capture_output=True, text=True), in a session of its own, so that a
    timeout kills the child's children too (a compiler's cc1plus, Inductor's compile workers),
    which would otherwise hold its output open; TimeoutExpired as subprocess.run raises it."""
    posix = hasattr(os, 'killpg')
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=posix, **kwargs) as child:
        try:
            out, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            if posix:
                os.killpg(child.pid, 9)
                child.communicate()
            else:
                child.kill()
                child.wait()
            raise
    return subprocess.CompletedProcess(cmd, child.returncode, out, err)


def _inductor_cxx():
    """The C++ compiler torch.compile's CPU backend (Inductor) calls: $CXX, or else g++
    (clang++ on macOS), as torch._inductor.config.cpp.cxx has it (a test checks that)."""
    return os.environ.get('CXX', 'clang++' if sys.platform == 'darwin' else 'g++')


def _what_to_install():
    if sys.platform == 'darwin':
        return 'install the Xcode command line tools (xcode-select --install) and OpenMP (brew install libomp)'
    return ("install a C++ compiler and Python's headers (Debian, Ubuntu: sudo apt install build-essential "
            'python3-dev; Fedora: sudo dnf install gcc-c++ python3-devel)')


NEEDS_COMPILER = ("lesson 11's compile cells and its exercise 2 (the workshop's lab 4) need it, and lesson 13's "
                  'compiled rows on a GPU; the rest runs')


def _openmp_flags():
    """What Inductor adds for OpenMP: -fopenmp; on macOS -Xclang -fopenmp and libomp, found
    through $OMP_PREFIX or Homebrew (Apple's clang has no OpenMP of its own)."""
    if sys.platform != 'darwin':
        return ['-fopenmp']
    flags = ['-Xclang', '-fopenmp']
    prefix = os.environ.get('OMP_PREFIX')
    if not prefix and shutil.which('brew'):
        try:
            prefix = subprocess.run(['brew', '--prefix', 'libomp'], capture_output=True, text=True,
                                    timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            prefix = None
    if prefix and os.path.exists(os.path.join(prefix, 'include', 'omp.h')):
        flags += ['-I', os.path.join(prefix, 'include'), '-L', os.path.join(prefix, 'lib')]
    return flags + ['-lomp']


LIBRARY = ('#include <Python.h>\n#include <omp.h>\n'
           'extern "C" int course_check() { return PY_MAJOR_VERSION + omp_get_max_threads(); }\n')


def check_compiler(timeout=COMPILE_TIMEOUT_S):
    if sys.platform == 'win32':
        return NOTE, ("torch.compile on Windows needs Visual Studio's C++ build tools (cl), untested by the "
                      f'course: {NEEDS_COMPILER}; WSL 2 has g++')
    cxx = _inductor_cxx()
    if shutil.which(cxx) is None:
        return NOTE, f'no C++ compiler ({cxx}) for torch.compile: {NEEDS_COMPILER}; {_what_to_install()}'
    include = sysconfig.get_paths()['include']
    if not os.path.exists(os.path.join(include, 'Python.h')):
        return NOTE, (f"{cxx} is there but Python's headers are not (no Python.h in {include}), and "
                      f'torch.compile needs both: {NEEDS_COMPILER}; {_what_to_install()}')
    with tempfile.TemporaryDirectory() as scratch:
        src = os.path.join(scratch, 'check.cpp')
        with open(src, 'w', encoding='utf-8') as f:
            f.write(LIBRARY)
        cmd = ([cxx, '-shared', '-fPIC', '-I', include, src, '-o', os.path.join(scratch, 'check.so')]
               + _openmp_flags())
        try:
            done = _run_child(cmd, timeout, cwd=scratch)
        except subprocess.TimeoutExpired:
            return NOTE, (f'{cxx} took over {timeout} s to build a three-line library: torch.compile will be slow '
                          'or stuck here (python -m d2l_utils.setup_check --compile tries the real thing)')
        except OSError as e:
            return NOTE, f'{cxx} does not run ({e}): {NEEDS_COMPILER}; {_what_to_install()}'
    if done.returncode != 0:
        said = (done.stderr + done.stdout).strip().splitlines()
        said = next((line for line in said if 'error' in line.lower()), said[0] if said else 'no message')
        return NOTE, (f'{cxx} cannot build what torch.compile builds (a library with Python.h and OpenMP): '
                      f'"{said.strip()[:160]}"; {NEEDS_COMPILER}; {_what_to_install()}')
    return OK, f"{cxx} builds a library with Python's headers and OpenMP: torch.compile can make CPU kernels"


FULL_COMPILE = """
import torch
f = torch.compile(lambda x: x * 2 + 1, dynamic=False)
assert torch.equal(f(torch.arange(4.0)), torch.tensor([1.0, 3.0, 5.0, 7.0]))
print('compiled')
"""


def check_full_compile(timeout=FULL_COMPILE_TIMEOUT_S):
    """The real thing (--compile): torch.compile a one-line function on the CPU, in a child process."""
    try:
        done = _run_child([sys.executable, '-c', FULL_COMPILE], timeout)
    except subprocess.TimeoutExpired:
        return NOTE, f'torch.compile of a one-line function did not finish within {timeout} s'
    if done.returncode != 0 or 'compiled' not in done.stdout:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        said = next((line for line in reversed(lines) if 'Error' in line), lines[-1] if lines else 'no message')
        return NOTE, (f'torch.compile failed on the CPU: "{said.strip()[:200]}"; {NEEDS_COMPILER}; '
                      f'{_what_to_install()}')
    return OK, 'torch.compile compiled a one-line function on the CPU, and it computed right'


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


def last_runs(folder=None):
    """{lesson file name: its stored run's record, or None}: what tools/execute_notebooks.py wrote
    into each notebook's metadata (course.last_run: torch, python, date) when it made its outputs."""
    folder = LESSONS if folder is None else pathlib.Path(folder)
    found = {}
    for path in sorted(folder.glob('[0-9][0-9]_*.ipynb')):
        meta = json.loads(path.read_text(encoding='utf-8')).get('metadata', {})
        found[path.name] = meta.get('course', {}).get('last_run')
    return found


def check_lessons(folder=None):
    runs = last_runs(folder)
    if not runs:
        return OK, 'no lessons beside the helpers here (on Colab, a lesson is its own notebook)'
    here = _version('torch')
    groups = {}                                     # (torch, python) -> [(lesson number, date)]
    for name, run in runs.items():
        if run:
            groups.setdefault((run['torch'], run['python']), []).append((int(name[:2]), run['date']))
    missing = [int(name[:2]) for name, run in runs.items() if not run]
    parts = []
    for (torch_version, python), lessons in sorted(groups.items(), key=lambda group: group[1][0][0]):
        dates = sorted(d for _, d in lessons)
        when = dates[0] if dates[0] == dates[-1] else f'{dates[0]} to {dates[-1]}'
        which = 'every lesson' if len(lessons) == len(runs) else _lesson_list([n for n, _ in lessons])
        parts.append(f'{which} last run with PyTorch {torch_version}, Python {python} ({when})')
    if missing:
        whose = 'its' if len(missing) == 1 else 'their'
        parts.append(f'{_lesson_list(missing)}: no record of {whose} last run')
    stale = sorted({t for t, _ in groups if here is None or _release(t) != _release(here)})
    text = ('; '.join(parts) if groups else 'no lesson records its last run') + f'; here PyTorch {here}'
    if missing or stale:
        return NOTE, (text + (': a cell may print other details than its stored output' if stale else '')
                      + ' (--lessons lists each lesson)')
    return OK, text + ', the same release'


def print_lessons(folder=None, out=print):
    """The --lessons table: each lesson, and the versions and date of its stored outputs."""
    out(f'here: PyTorch {_version("torch")}, Python {platform.python_version()}')
    for name, run in last_runs(folder).items():
        out(f'{name:40} ' + (f'PyTorch {run["torch"]:14} Python {run["python"]:8} {run["date"]}' if run
                             else 'no record of its last run'))


CHECKS = [('Python', check_python), ('machine', check_machine), ('PyTorch', check_torch),
          ('accelerator', check_accelerator), ('helpers', check_helpers), ('packages', check_packages),
          ('compiler', check_compiler), ('JupyterLab', check_lab), ('recordings', check_recordings),
          ('lessons', check_lessons)]


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
    # The verdict in Chinese first (for the Chinese edition's readers), then in English, last.
    if fails:
        out(f'未就绪：请先解决 {", ".join(r[1] for r in fails)}（见上文各行），然后重新运行本检查。')
        out(f'NOT READY: fix {", ".join(r[1] for r in fails)} (see above), then run this again.')
        return 1
    # The Chinese edition where this copy has it (the students' copy of the workshop does not).
    zh = 'notebooks/zh/' if (LESSONS / 'zh').is_dir() else 'notebooks/'
    out('就绪' + (f'（有提示：{", ".join(r[1] for r in notes)}）' if notes else '') +
        f'：用 `jupyter lab {zh}` 打开{"中文版" if zh.endswith("zh/") else ""}课程（或在 Colab、Binder 上打开）。')
    out('READY' + (f' (with notes: {", ".join(r[1] for r in notes)})' if notes else '') +
        ': open the course with `jupyter lab notebooks/` (or the lessons on Colab or Binder).')
    return 0


def main(args=None):
    import argparse
    parser = argparse.ArgumentParser(prog='python -m d2l_utils.setup_check',
                                     description='Is this machine ready for the course?')
    parser.add_argument('--compile', action='store_true',
                        help='run a real torch.compile on the CPU (up to a minute) instead of building '
                             'a small library')
    parser.add_argument('--lessons', action='store_true',
                        help='list each lesson with the PyTorch, Python and date of its stored outputs, and stop')
    options = parser.parse_args(args)
    if options.lessons:
        print_lessons()
        return 0
    return run([(name, check_full_compile if options.compile and name == 'compiler' else check)
                for name, check in CHECKS])


if __name__ == '__main__':
    sys.exit(main())
