"""What each GPU-only cell is expected to show on a GPU, and the check of it on a GPU.

Course machinery, written by hand (like ``recordings.py``). Every GPU-only cell (marked by
``d2l.show_recording('<id>', gpus=N)``) has one expectation here, registered by its id in
the module of its lesson (``lesson03.py`` for ``'03-...'``). An expectation is derived in
one of three ways, and says which:

* ``'model'``: computed by the course's models from the datasheet table
  (``d2l_utils/gpu_models.py``), for the reference GPUs (H200 and T4), each number with a
  range and the reason for the range;
* ``'simulated'``: PyTorch's behaviour is deterministic (the allocator's rounding,
  autocast's dtypes, TF32's rounding, byte counts), so it is simulated exactly on the CPU;
* ``'source'``: the message, warning or name that PyTorch's source produces, with the file.

On a machine without the GPUs, ``show_recording`` prints the expectation, labelled as
expected, with the lesson's Colab link to measure it. On a GPU, the cell's GPU branch calls
``d2l.check_expected('<id>', name=measured, ...)``: it prints each expected item against
what was measured, and where ``$COURSE_CHECKS`` names a file (the recorder sets it) appends
one JSON line per item, which ``tools/record_gpu.py`` stores in the recording. A miss is a
finding: the model or the prose changes, never the measurement.

An expectation is a function of the GPU it predicts for::

    @expectation('03-pinned-copies', how='model')
    def _(e, gpu):
        e.note('Pinned copies run close to the link; pageable ones lose the staging copy.')
        e.number('pinned_gb_s', 'host->GPU, pinned, 64 MiB', gpu_models.copy_bytes_per_s(2**26, gpu))
"""
import importlib
import json
import os
import re

from .. import gpu_models

__all__ = ['expectation', 'Expected', 'expected_for', 'check_expected', 'show_expected',
           'HOW', 'colab_url', 'LESSONS']

HOW = {
    'model': "computed by the course's models from the lesson's counts and the NVIDIA H200 (SXM) "
             "and T4 datasheets (d2l_utils/gpu_models.py)",
    'simulated': "PyTorch's deterministic rule, simulated exactly on this CPU",
    'source': "what PyTorch's source produces (file named)",
}
# The lessons, by number: the Colab link of each (tests/test_expectations.py checks them
# against notebooks/ and tools/nbtemplate.py).
LESSONS = {
    '01': '01_devices.ipynb', '02': '02_tensors_on_devices.ipynb',
    '03': '03_copies_between_devices.ipynb', '04': '04_synchronization.ipynb',
    '05': '05_module_placement.ipynb', '06': '06_data_parallel.ipynb',
    '07': '07_distributed_data_parallel.ipynb', '08': '08_gpu_memory.ipynb',
    '09': '09_mixed_precision.ipynb', '10': '10_profiling.ipynb',
    '11': '11_overlap_and_launch_overhead.ipynb', '12': '12_collectives_and_sharding.ipynb',
    '13': '13_make_a_training_job_fast.ipynb',
}
COLAB = 'https://colab.research.google.com/github/d2l-gpu/gpu-course/blob/main/notebooks/'
_REGISTRY = {}


def colab_url(cell_id):
    """The Colab link of the lesson that holds ``cell_id``."""
    return COLAB + LESSONS[cell_id[:2]]


def expectation(cell_id, how):
    """Register ``fn(e, gpu)`` as what the GPU-only cell ``cell_id`` is expected to show.

    ``how`` is the default derivation of its items ('model', 'simulated' or 'source');
    an item may name another.
    """
    if how not in HOW:
        raise ValueError(f'how must be one of {sorted(HOW)}, got {how!r}')

    def register(fn):
        if cell_id in _REGISTRY:
            raise ValueError(f'two expectations for cell {cell_id}')
        _REGISTRY[cell_id] = (fn, how)
        return fn
    return register


class Expected:
    """What one GPU-only cell is expected to show on one GPU: notes, numbers and texts."""

    def __init__(self, cell_id, how, gpu):
        self.cell_id, self.how, self.gpu = cell_id, how, gpu
        self.notes, self.items, self.figure = [], [], None

    def note(self, line):
        """A sentence printed above the items: what the cell shows, and why."""
        self.notes.append(line)

    def number(self, name, label, estimate, how=None):
        """A number the GPU branch measures, expected inside ``estimate``'s range."""
        if not isinstance(estimate, gpu_models.Estimate):
            raise TypeError(f'{name}: a number is expected as a gpu_models.Estimate, got {estimate!r}')
        self._add(dict(name=name, label=label, kind='number', value=estimate.value, low=estimate.low,
                       high=estimate.high, unit=estimate.unit, why=estimate.why, how=how or self.how))

    def text(self, name, label, expected, why, how=None):
        """A text the GPU branch produces (a message, a warning, a name, a dtype): the measured
        text must contain ``expected`` (a string, or a list of strings that must all appear)."""
        parts = [expected] if isinstance(expected, str) else list(expected)
        self._add(dict(name=name, label=label, kind='text', value=parts, why=why, how=how or self.how))

    def draw(self, fn):
        """``fn(ax)`` draws what the GPU would draw, from the model (styled as a model)."""
        self.figure = fn

    def _add(self, item):
        if not re.fullmatch(r'[a-z][a-z0-9_]*', item['name']):
            raise ValueError(f"an item's name is a Python keyword argument, got {item['name']!r}")
        if any(i['name'] == item['name'] for i in self.items):
            raise ValueError(f"two items named {item['name']!r} in {self.cell_id}")
        if item['how'] not in HOW:
            raise ValueError(f"how must be one of {sorted(HOW)}, got {item['how']!r}")
        self.items.append(item)


def _load(cell_id):
    if not re.fullmatch(r'\d\d-[a-z0-9]+(?:-[a-z0-9]+)*', str(cell_id)):
        raise ValueError(f"cell_id must look like '03-pinned-copies', got {cell_id!r}")
    if cell_id not in _REGISTRY:
        try:
            importlib.import_module(f'{__name__}.lesson{cell_id[:2]}')
        except ModuleNotFoundError as e:
            if e.name != f'{__name__}.lesson{cell_id[:2]}':
                raise
    if cell_id not in _REGISTRY:
        raise KeyError(f'no expectation is registered for GPU-only cell {cell_id} '
                       f'(d2l_utils/expectations/lesson{cell_id[:2]}.py)')
    return _REGISTRY[cell_id]


def expected_for(cell_id, gpu):
    """The ``Expected`` of ``cell_id`` on ``gpu`` (a ``gpu_models.Datasheet``)."""
    fn, how = _load(cell_id)
    e = Expected(cell_id, how, gpu)
    fn(e, gpu)
    return e


def registered(lesson):
    """The ids that lesson ``lesson`` ('03') registers."""
    importlib.import_module(f'{__name__}.lesson{lesson}')
    return sorted(k for k in _REGISTRY if k.startswith(lesson + '-'))


def fmt(x):
    """A number in three significant figures, without an exponent where one is not needed."""
    if x == 0:
        return '0'
    if abs(x) >= 1e5 or abs(x) < 1e-3:
        return f'{x:.3g}'
    return f'{x:.3g}' if abs(x) < 100 else f'{x:,.0f}'


def _show_value(item):
    if item['kind'] == 'text':
        return ' + '.join(repr(p) for p in item['value'])
    unit = f" {item['unit']}" if item['unit'] else ''
    if item['low'] == item['high']:
        return f"{fmt(item['value'])}{unit} (exactly)"
    return f"{fmt(item['value'])}{unit} ({fmt(item['low'])} to {fmt(item['high'])})"


def show_expected(cell_id, header=True):
    """Print what ``cell_id`` is expected to show, for each reference GPU, labelled as expected.

    Each item names how it was derived and why its range is what it is; an item that does not
    depend on the GPU is printed once, the others once per reference GPU. Draws the expected
    figure, styled as a model, where the expectation has one.
    """
    gpus = gpu_models.reference_gpus()
    exps = [expected_for(cell_id, gpu) for gpu in gpus]
    first = exps[0]
    if header:
        print('EXPECTED on a GPU (a prediction, not a measurement):')
    for line in first.notes:
        print(f'  {line}')
    hows = []
    for k, item in enumerate(first.items):
        per_gpu = [e.items[k] for e in exps if k < len(e.items)]
        hows += [item['how']] if item['how'] not in hows else []
        if all(p == item for p in per_gpu):
            print(f"  {item['label']} [{item['how']}]: {_show_value(item)}")
            if item['why']:
                print(f"      {item['why']}")
        else:
            print(f"  {item['label']} [{item['how']}]:")
            one_why = len({p['why'] for p in per_gpu}) == 1
            for gpu, p in zip(gpus, per_gpu):
                print(f'    {gpu.key:5} {_show_value(p)}' + (f": {p['why']}" if p['why'] and not one_why else ''))
            if one_why and item['why']:
                print(f"      {item['why']}")
    print('  ' + '; '.join(f'[{how}] {HOW[how]}' for how in hows or [first.how]) + '.')
    if first.figure is not None:
        _draw_model(exps)


def _draw_model(exps):
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(8, 3.2), layout='constrained')
    exps[0].figure(ax)
    ax.set_title((ax.get_title() + '\n' if ax.get_title() else '') + 'MODEL: expected, not measured',
                 fontsize='medium', color='tab:purple')
    ax.text(0.99, 0.02, 'MODEL', transform=ax.transAxes, ha='right', va='bottom', fontsize=28,
            color='tab:purple', alpha=0.18, weight='bold')
    plt.show()


def _judge(item, measured):
    if item['kind'] == 'text':
        return all(p in str(measured) for p in item['value'])
    try:
        value = float(measured)
    except (TypeError, ValueError):
        return False
    return item['low'] <= value <= item['high']


def check_expected(cell_id, **measured):
    """On a GPU: compare what the cell measured with what it was expected to show.

    Prints one line per item (expected, measured, and whether it is inside the range or
    contains the expected text). On a GPU outside the datasheet table, numbers and texts that
    differ between the reference GPUs (a name, a capability) are shown, not judged.
    Where ``$COURSE_CHECKS`` names a file, appends one JSON line per item to it. Returns
    the names of the items it missed (a miss is a finding, not an error: nothing raises).
    """
    import torch
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'
    spec = gpu_models.gpu_spec(name)
    e = expected_for(cell_id, spec or gpu_models.DATASHEET['H200'])
    # On a GPU outside the table, a text is judged only where every reference GPU expects it.
    alike = {i['name'] for i in e.items if i['kind'] == 'text' and all(
        i in expected_for(cell_id, g).items for g in gpu_models.reference_gpus())}
    names = [i['name'] for i in e.items]
    unknown = sorted(set(measured) - set(names))
    if unknown:
        raise TypeError(f'check_expected({cell_id!r}): no expected item named {unknown}; it has {names}')
    print(f'Expected against measured on this {name}' + ('' if spec else
          ' (not in the datasheet table: numbers are shown, not judged)') + ':')
    lines, misses = [], []
    for item in e.items:
        if item['name'] not in measured:
            ok, shown = False, 'not measured'
        else:
            value = measured[item['name']]
            judged = spec is not None or item['name'] in alike
            ok = _judge(item, value) if judged else None
            shown = repr(str(value)[:160])
            if item['kind'] == 'number':
                shown = fmt(float(value)) + (f" ({float(value) / item['value']:.2g}x the expected value)"
                                             if item['value'] else '')
        verdict = {True: 'as expected', False: 'MISS', None: 'not judged'}[ok]
        print(f"  {item['label']}: expected {_show_value(item)}, measured {shown}: {verdict}")
        if ok is False:
            misses.append(item['name'])
        lines.append({'cell': cell_id, 'item': item['name'], 'label': item['label'], 'kind': item['kind'],
                      'gpu': spec.key if spec else name, 'expected': item['value'],
                      'low': item.get('low'), 'high': item.get('high'), 'unit': item.get('unit', ''),
                      'how': item['how'],
                      'measured': (None if item['name'] not in measured else
                                   float(measured[item['name']]) if item['kind'] == 'number'
                                   else str(measured[item['name']])),
                      'ok': ok})
    path = os.environ.get('COURSE_CHECKS')
    if path:
        with open(path, 'a', encoding='utf-8') as f:
            for line in lines:
                f.write(json.dumps(line) + '\n')
    return misses
