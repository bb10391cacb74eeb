"""GPU-only cells, and what they printed on real hardware.

This module is course machinery, not lesson material, so it is written by hand
(unlike ``lessons.py``). A lesson cell that needs CUDA GPUs has this shape::

    # NBVAL_IGNORE_OUTPUT
    if torch.cuda.device_count() >= 1:
        ...                                    # the GPU code
    else:
        d2l.show_recording('03-pinned-copy', gpus=1)

The call is the cell's mark: its id (two digits of the lesson, then a name) finds
the cell again however the lesson is reordered, and ``gpus`` says how many CUDA
GPUs it needs. Without them, the call prints what the cell is expected to show on a
GPU (``d2l_utils/expectations``: derived from the course's models, simulated, or
quoted from PyTorch's source, and labelled so), then what the cell printed on a real
GPU machine where a recording is installed (``tools/record_gpu.py`` stores that in
``measurements/gpu-recording.json`` with the GPU, driver, CUDA and PyTorch versions
and the date). With them, the call raises: the cell took its fallback on a machine
that could run it, and the test suite, run on a GPU machine, fails there.
"""
import base64
import hashlib
import json
import os
import pathlib
import re
import sys

import torch

__all__ = ['show_recording', 'this_run']

RECORDING = 'gpu-recording.json'
_ID = r'\d\d-[a-z0-9]+(?:-[a-z0-9]+)*'
# The one form of the mark that the tests and tools/record_gpu.py recognise.
MARK = re.compile(r"show_recording\(\s*'(" + _ID + r")'\s*,\s*gpus\s*=\s*(\d+)\s*\)")


def source_hash(source):
    """A cell's fingerprint: SHA-256 of its source, trailing blanks ignored."""
    text = '\n'.join(line.rstrip() for line in source.strip().splitlines())
    return hashlib.sha256(text.encode()).hexdigest()


def gpu_cells(notebook_dir):
    """Yield ``(lesson_file, cell_id, gpus, source)`` for every GPU-only cell, in lesson order."""
    for path in sorted(pathlib.Path(notebook_dir).glob('[0-9][0-9]_*.ipynb')):
        for cell in json.loads(path.read_text(encoding='utf-8'))['cells']:
            src = cell['source'] if isinstance(cell['source'], str) else ''.join(cell['source'])
            if cell['cell_type'] == 'code':
                for cell_id, gpus in MARK.findall(src):
                    yield path.name, cell_id, int(gpus), src


def measurement_path(name):
    """Where the measurement file ``name`` (in measurements/) is read from, or None if nowhere.

    A clone's measurements/ first (found from the package, or from the notebook's folder),
    then the copy that an installed package carries (Colab installs it from git).
    """
    package = pathlib.Path(__file__).resolve().parent
    for folder in (package.parent / 'measurements', pathlib.Path.cwd().parent / 'measurements',
                   pathlib.Path.cwd() / 'measurements', package / 'measurements'):
        if (folder / name).exists():
            return folder / name
    return None


def recording_path():
    """Where the recording is read from: $COURSE_RECORDING, else ``measurement_path``'s answer."""
    if os.environ.get('COURSE_RECORDING'):
        return pathlib.Path(os.environ['COURSE_RECORDING'])
    return measurement_path(RECORDING)


def machine_info():
    """The GPU machine this process runs on: GPU name and count, driver, CUDA, PyTorch, date.

    Used by the tools that record measurements, so that every recording says where it
    was made. The driver version comes from NVML (``nvidia-ml-py``), else nvidia-smi.
    """
    import datetime
    import platform
    import subprocess
    if not torch.cuda.is_available():
        raise RuntimeError('machine_info() describes a CUDA machine; this one has no CUDA GPU')
    driver = 'unknown'
    try:
        import pynvml
        pynvml.nvmlInit()
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
    except Exception:
        try:
            driver = subprocess.run(['nvidia-smi', '--query-gpu=driver_version', '--format=csv,noheader'],
                                    capture_output=True, text=True, timeout=30).stdout.split()[0]
        except Exception:
            pass
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {'gpu': ', '.join(sorted(set(names))), 'gpu_count': len(names),
            'capability': '.'.join(map(str, torch.cuda.get_device_capability(0))),
            'driver': driver, 'cuda': torch.version.cuda, 'torch': torch.__version__,
            'python': platform.python_version(),
            'date': datetime.datetime.now(datetime.timezone.utc).date().isoformat()}


def _gpus_seen():
    """The machine's GPUs, asked without starting CUDA (a lesson may still choose its GPUs):
    NVIDIA's through NVML, Apple's through MPS; [] where there are none."""
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
                     for i in range(pynvml.nvmlDeviceGetCount())]
        finally:
            pynvml.nvmlShutdown()
        names = [n.decode() if isinstance(n, bytes) else n for n in names]
        if names:
            return names
    except Exception:                   # no NVIDIA driver (or no nvidia-ml-py): no NVIDIA GPU to name
        pass
    mps = getattr(torch.backends, 'mps', None)
    return ['Apple GPU (mps)'] if mps is not None and mps.is_available() else []


def this_run():
    """Print which PyTorch, Python and day (UTC) this run of the lesson is, and on which GPUs: the
    first output of every lesson, so that its stored outputs say where they came from (the same as
    the notebook's metadata, course.last_run, which tools/execute_notebooks.py writes)."""
    import collections
    import datetime
    import platform
    gpus = collections.Counter(_gpus_seen())
    where = ', '.join(f'{n} x {name}' for name, n in gpus.items()) if gpus else 'no GPU'
    print(f'This run: PyTorch {torch.__version__}, Python {platform.python_version()}, '
          f'{datetime.datetime.now(datetime.timezone.utc).date().isoformat()} (UTC), {where}')


def machine_line(machine):
    """One line saying where and when a recording was made."""
    m = machine
    return (f"{m['gpu_count']}x {m['gpu']} (driver {m['driver']}, CUDA {m['cuda']}, "
            f"PyTorch {m['torch']}), {m['date']}")


def _print_outputs(outputs):
    for out in outputs:
        if out['type'] == 'text':
            print(out['text'], end='' if out['text'].endswith('\n') else '\n',
                  file=sys.stderr if out.get('name') == 'stderr' else sys.stdout)
        elif out['type'] == 'png':
            try:
                from IPython.display import Image, display
            except ImportError:
                print('[a figure: open the lesson in Jupyter to see it]')
            else:
                display(Image(data=base64.b64decode(out['data'])))


def show_recording(cell_id, gpus=1):
    """Fallback of a GPU-only cell: what a GPU is expected to show, then what it showed.

    Prints the cell's expectation (``d2l_utils/expectations``), labelled as expected and
    saying how it was derived; then, where a recording from real hardware is installed,
    what the cell printed there (with its expected-against-measured lines), else the
    lesson's Colab link to measure it. Raises ``RuntimeError`` when this machine has
    ``gpus`` CUDA GPUs or more: the cell should have run its GPU branch, so taking the
    fallback is a bug.
    """
    from .expectations import colab_url, say, show_expected, tr
    if not isinstance(cell_id, str) or not re.fullmatch(_ID, cell_id):
        raise ValueError(f"cell_id must look like '03-pinned-copy', got {cell_id!r}")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f'gpus must be an int >= 1, got {gpus!r}')
    have = torch.cuda.device_count()
    if have >= gpus:
        raise RuntimeError(f'cell {cell_id} needs {gpus} CUDA GPU(s) and this machine has {have}, '
                           'yet it took its fallback branch: its GPU code did not run')
    need = say('{gpus} CUDA GPUs', gpus=gpus) if gpus > 1 else say('a CUDA GPU')
    here = say('this machine has {have}', have=have) if have else say('none here')
    print(say('[This cell needs {need}; {here}.]', need=need, here=here))
    show_expected(cell_id)
    yourself = (say('Measure it yourself: {url} (Runtime > Change runtime type > T4 GPU).', url=colab_url(cell_id))
                if gpus == 1 else say('Measuring it needs a machine with {gpus} GPUs (Colab has one).', gpus=gpus))
    path = recording_path()
    rec = json.loads(path.read_text(encoding='utf-8')) if path is not None else None
    entry = rec['cells'].get(cell_id) if rec else None
    if entry is None:
        if rec is None:
            why = say('No recording from real hardware is installed ({file} is missing).', file=RECORDING)
        elif gpus > rec['machine']['gpu_count']:
            why = say('The recording machine had {gpus} GPU(s), so there is no recording of this cell.',
                      gpus=rec['machine']['gpu_count'])
        else:
            why = say('This cell has no recording yet: tools/record_gpu.py on a GPU machine makes one.')
        print(say('[{why} {yourself}]', why=why, yourself=yourself))
        return
    print(say('[RECORDED on {machine}:]', machine=machine_line(rec['machine'])))
    _print_outputs(entry['outputs'])
    checks = entry.get('checks', [])
    missed = [c for c in checks if c.get('ok') is False]
    if checks:
        met, total = len(checks) - len(missed), len(checks)
        print(say('[{met} of {total} expectations met there: missed {missed}. {yourself}]', met=met, total=total,
                  missed=', '.join(tr(c['label']) for c in missed), yourself=yourself) if missed else
              say('[{met} of {total} expectations met there. {yourself}]', met=met, total=total, yourself=yourself))


def expectation_misses(recording):
    """The expectations a recording missed, one line each naming the cell and the item.

    A recorded cell's checks come from ``d2l.check_expected`` in its GPU branch. An item
    that was judged and missed, or that was expected and never measured, is a miss: a
    finding that changes the model or the prose, never the measurement.
    """
    misses = []
    for cell_id, entry in sorted(recording.get('cells', {}).items()):
        for c in entry.get('checks', []):
            if c.get('ok') is False:
                shown = 'not measured' if c.get('measured') is None else repr(c['measured'])
                expected = (f"{c['expected']} ({c['low']} to {c['high']}) {c.get('unit', '')}".rstrip()
                            if c['kind'] == 'number' else f"text containing {c['expected']}")
                misses.append(f"cell {cell_id}, {c['item']} ({c['label']}): expected {expected}, "
                              f"measured {shown} on the {c['gpu']}")
    return misses


def check_recording(recording, notebook_dir, failed=True):
    """Return what is wrong with ``recording`` against the GPU-only cells of ``notebook_dir``.

    Each problem names the cell: a GPU-only cell with no recording (unless it needs
    more GPUs than the recording machine had, and is listed as such), a recording
    made from an older version of the cell (stale), a cell whose GPU branch raised there (with
    ``failed``; the recorder lists those apart), or a recorded id no cell has.
    An empty list means the recording matches the lessons.
    """
    problems, seen = [], set()
    have = recording['machine']['gpu_count']
    listed = recording.get('needs_more_gpus', {})
    for lesson, cell_id, gpus, src in gpu_cells(notebook_dir):
        seen.add(cell_id)
        entry = recording['cells'].get(cell_id)
        if entry is None:
            if gpus > have and cell_id in listed:
                continue
            why = (f'needs {gpus} GPUs, the recording machine had {have}, and it is not listed '
                   'in needs_more_gpus' if gpus > have else 'has no recording')
            problems.append(f'{lesson}, cell {cell_id}: {why}')
        elif entry['source_sha256'] != source_hash(src):
            problems.append(f'{lesson}, cell {cell_id}: the cell changed since it was recorded '
                            '(stale): record it again with tools/record_gpu.py on a GPU machine')
        elif failed and entry.get('error'):
            problems.append(f'{lesson}, cell {cell_id}: its GPU branch raised on the GPU '
                            f"({str(entry['error'])[:120]}): fix it and record the lesson again")
    for cell_id in sorted((set(recording['cells']) | set(listed)) - seen):
        problems.append(f'cell {cell_id} is recorded but no lesson has it')
    return problems
