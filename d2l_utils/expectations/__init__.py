"""What each GPU-only cell is expected to show on a GPU, and the check of it on a GPU.

Course machinery, written by hand (like ``recordings.py``). Every GPU-only cell (marked by
``d2l.show_recording('<id>', gpus=N)``) has one expectation here, registered by its id in
the module of its lesson (``lesson03.py`` for ``'03-...'``). An expectation is derived in
one of three ways, and says which:

* ``'model'``: computed by the course's models from the datasheet table
  (``d2l_utils/gpu_models.py``) for every GPU in it, each number with a range and the reason
  for the range; readers without a GPU see the reference GPUs (H100, H200 and T4);
* ``'simulated'``: PyTorch's behaviour is deterministic (the allocator's rounding,
  autocast's dtypes, TF32's rounding, byte counts), so it is simulated exactly on the CPU;
* ``'source'``: the message, warning or name that PyTorch's source produces, with the file.

A number is judged only where its range can be missed: ``RANGE_LIMIT`` bounds high/low of every
judged number on every GPU of the table (``range_problem`` says what is wrong with one), and an
item whose value no model can pin down is marked ``not_judged`` with its reason, shown to the
reader, and never counted a miss.

On a machine without the GPUs, ``show_recording`` prints the expectation, labelled as
expected, with the lesson's Colab link to measure it: its notes in plain words first, then the
numbers as a small table (one column per reference GPU), then how each was derived and why its
range. On a GPU, the cell's GPU branch calls ``d2l.check_expected('<id>', name=measured, ...)``:
it prints each expected item against what was measured, and where ``$COURSE_CHECKS`` names a
file (the recorder sets it) appends one JSON line per item, which ``tools/record_gpu.py`` stores
in the recording. A miss is a finding: the model or the prose changes, never the measurement.

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
           'HOW', 'colab_url', 'LESSONS', 'RANGE_LIMIT', 'ZERO_WIDTH', 'range_problem',
           'use_language', 'lines_of', 'FRAME']

HOW = {
    'model': "computed by the course's models from the lesson's counts and NVIDIA's datasheets of the "
             "H100 (SXM), H200 (SXM) and T4, and of the other GPUs in d2l_utils/gpu_models.py",
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
    '13': '13_make_a_training_job_fast.ipynb', '14': '14_beyond_data_parallelism.ipynb',
}
COLAB = 'https://colab.research.google.com/github/d2l-gpu/gpu-course/blob/main/notebooks/'
_REGISTRY = {}

# The Chinese edition. A Chinese lesson's setup cell calls use_language('zh') (tools/translate.py
# adds the call); from then on the expectation blocks print Chinese and link to the Chinese lesson.
# The Chinese text comes from translations/zh/ (each lesson's `expect` blocks, and the frame's in
# expectations.md), which tools/translate.py gathers into zh.json beside this file, checked
# current by tests/test_zh.py. Printed numbers, PyTorch's messages and the figures stay as they are.
# FRAME: every sentence of the block's frame (what it prints around a lesson's own notes and
# labels), each a str.format template; say() prints one.
FRAME = (
    'EXPECTED on a GPU (a prediction, not a measurement):',
    '{value} exactly', '{value} (exactly)', '{value} ({low} to {high})', ', every GPU',
    '  (shown, not judged)', ' (shown, not judged: {reason})',
    '  How each was derived, and why its range:', '{title} (click to open)',
    "computed by the course's models from the lesson's counts and NVIDIA's datasheets of the "
    "H100 (SXM), H200 (SXM) and T4, and of the other GPUs in d2l_utils/gpu_models.py",
    "PyTorch's deterministic rule, simulated exactly on this CPU",
    "what PyTorch's source produces (file named)",
    '[This cell needs {need}; {here}.]', 'a CUDA GPU', '{gpus} CUDA GPUs',
    'this machine has {have}', 'none here',
    'Measure it yourself: {url} (Runtime > Change runtime type > T4 GPU).',
    'Measuring it needs a machine with {gpus} GPUs (Colab has one).',
    'No recording from real hardware is installed ({file} is missing).',
    'The recording machine had {gpus} GPU(s), so there is no recording of this cell.',
    'This cell has no recording yet: tools/record_gpu.py on a GPU machine makes one.',
    '[RECORDED on {machine}:]',
    '[{met} of {total} expectations met there. {yourself}]',
    '[{met} of {total} expectations met there: missed {missed}. {yourself}]',
    'Expected against measured on this {name}:',
    'Expected against measured on this {name} (not in the datasheet table: expected as on the {gpu}; '
    'only what is the same on every GPU of the table is judged):',
    '  {label}: expected {expected}, measured {measured}: {verdict}',
    'as expected', 'MISS', 'not judged ({reason})', 'not measured', '{value} ({ratio}x the expected value)',
    'the {name} is not in the datasheet table',
    '[{why} {yourself}]', '{items}.', '{a}; {b}',
)
LANGUAGES = ('en', 'zh')
_language = {'name': 'en', 'frame': {}, 'lines': {}}


def use_language(name):
    """Print the expectation blocks in ``name``: 'en' (the default) or 'zh' (the Chinese edition)."""
    if name not in LANGUAGES:
        raise ValueError(f'language must be one of {LANGUAGES}, got {name!r}')
    catalog = {'frame': {}, 'lines': {}}
    if name != 'en':
        import pathlib
        path = pathlib.Path(__file__).with_name(f'{name}.json')
        if not path.exists():
            raise FileNotFoundError(f'{path} is missing: python tools/translate.py writes it')
        catalog = json.loads(path.read_text(encoding='utf-8'))
    _language.update(name=name, **catalog)


def say(template, **fields):
    """One of FRAME's sentences, in the language in use, filled in."""
    if template not in FRAME:
        raise KeyError(f'not a sentence of FRAME: {template!r}')
    return _language['frame'].get(template, template).format(**fields)


def tr(line):
    """A lesson's note, label or reason in the language in use (as it is where it has no translation)."""
    return _language['lines'].get(line, line) if line else line

# The widest high/low a judged number may have, on every GPU of the table. A range is a prediction
# only where a wrong model lands outside it. The course's models have been wrong by factors of
# about two (issue 37: the T4's clock counted in some lessons and not in others, 2x; a pageable
# copy modelled anywhere from a tenth of the link to all of it). A range of high/low = 4 is its
# geometric middle x/÷ 2, so a model off by 2x still passes at its edge; at 3 (x/÷ 1.73) a
# measurement 2x from the middle misses. 3 still leaves room for one uncertain factor of a host
# or a GPU (HOST_ASSUMPTIONS' x/÷ 1.7 with the datasheet's numbers exact, or matmul_share's
# 50-97%). Wider: judge a ratio measured in the same run, or mark the item not_judged with why.
RANGE_LIMIT = 3.0
# A range that reaches zero or below has no ratio: it is judged by its width, at most ZERO_WIDTH
# of its unit, a width a wrong model would exceed. 'MiB': one 2 MiB segment, the least the
# caching allocator reserves (a leak shows a segment more); '%': one percentage point of values;
# 'absolute': 1e-3, a difference float32 rounding of a small network stays far below and a
# wrong result does not. Any other unit: make the range exact, positive, or not_judged.
ZERO_WIDTH = {'MiB': 2.0, '%': 1.0, 'absolute': 1e-3}


def range_problem(item):
    """What makes a judged number item's range too wide to be missed (a sentence), or None.

    Texts, items marked ``not_judged`` and exact numbers (low == high) have none; a positive range
    needs high/low <= ``RANGE_LIMIT``; one that reaches zero a width <= ``ZERO_WIDTH`` of its unit."""
    if item['kind'] != 'number' or item.get('not_judged') or item['low'] == item['high']:
        return None
    low, high, unit = item['low'], item['high'], item['unit']
    if low > 0:
        if high / low <= RANGE_LIMIT * (1 + 1e-9):
            return None
        return f'high/low = {high / low:.3g} > RANGE_LIMIT {RANGE_LIMIT:g} ({fmt(low)} to {fmt(high)} {unit})'
    if unit in ZERO_WIDTH and high - low <= ZERO_WIDTH[unit]:
        return None
    limit = f'ZERO_WIDTH {ZERO_WIDTH[unit]:g} {unit}' if unit in ZERO_WIDTH else f'no ZERO_WIDTH for {unit!r}'
    return f'reaches {fmt(low)}: width {fmt(high - low)} {unit}, {limit}'


def colab_url(cell_id):
    """The Colab link of the lesson that holds ``cell_id`` (its Chinese edition's under use_language('zh'))."""
    return COLAB + ('' if _language['name'] == 'en' else _language['name'] + '/') + LESSONS[cell_id[:2]]


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
        self.notes, self.details, self.items, self.figure = [], [], [], None

    def note(self, line):
        """A sentence printed above the items: what the cell shows, in plain words."""
        self.notes.append(line)

    def detail(self, line):
        """A sentence about the machinery behind the expectation (PyTorch's source, a model's
        assumptions): shown with the derivations, folded in a notebook, not above the table."""
        self.details.append(line)

    def number(self, name, label, estimate, how=None, not_judged=None):
        """A number the GPU branch measures, expected inside ``estimate``'s range. ``not_judged``: a
        short reason, shown to the reader, why it is shown but never judged (no model pins it down)."""
        if not isinstance(estimate, gpu_models.Estimate):
            raise TypeError(f'{name}: a number is expected as a gpu_models.Estimate, got {estimate!r}')
        self._add(dict(name=name, label=label, kind='number', value=estimate.value, low=estimate.low,
                       high=estimate.high, unit=estimate.unit, why=estimate.why, how=how or self.how,
                       not_judged=_reason(name, not_judged)))

    def text(self, name, label, expected, why, how=None, not_judged=None):
        """A text the GPU branch produces (a message, a warning, a name, a dtype): the measured
        text must contain ``expected`` (a string, or a list of strings that must all appear).
        ``not_judged``: as for ``number``."""
        parts = [expected] if isinstance(expected, str) else list(expected)
        self._add(dict(name=name, label=label, kind='text', value=parts, why=why, how=how or self.how,
                       not_judged=_reason(name, not_judged)))

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


def _reason(name, not_judged):
    if not_judged is not None and (not isinstance(not_judged, str) or not not_judged.strip()):
        raise ValueError(f'{name}: not_judged is a short reason (a non-empty string), got {not_judged!r}')
    return not_judged


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


def lines_of(cell_id):
    """The sentences of ``cell_id``'s expectation that a translation gives, in the order shown: on the
    reference GPUs, its notes, details, labels, reasons for ranges and reasons not judged."""
    exps = [expected_for(cell_id, gpu) for gpu in gpu_models.reference_gpus()]
    found = [line for e in exps for line in e.notes + e.details]
    found += [item[key] for e in exps for item in e.items for key in ('label', 'why', 'not_judged') if item.get(key)]
    return list(dict.fromkeys(found))


def _width(text):
    """Columns that ``text`` takes in a fixed-width font: a Chinese character takes two."""
    import unicodedata
    return sum(2 if unicodedata.east_asian_width(ch) in 'WF' else 1 for ch in text)


def _ljust(text, width):
    return text + ' ' * max(0, width - _width(text))


def _wrap(text, width):
    """``textwrap.wrap``, counting a Chinese character as two columns: a line may break between two
    Chinese characters or at a space, never inside a run of other characters ('10/24', 'cuda:0')."""
    import textwrap
    if _width(text) == len(text):
        return textwrap.wrap(text, width)
    lines, line = [], ''
    for token in re.findall(r'\s+|[^\s\u2e80-\uffef]+|[\u2e80-\uffef]', text):
        if line and _width(line + token.rstrip()) > width:
            lines.append(line.rstrip())
            line = token.lstrip()
        else:
            line += token
    return [*lines, line.rstrip()] if line.strip() else lines


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
        return say('{value} (exactly)', value=f"{fmt(item['value'])}{unit}")
    return say('{value} ({low} to {high})', value=f"{fmt(item['value'])}{unit}", low=fmt(item['low']),
               high=fmt(item['high']))


def _cell(item):
    """A table cell: the value, and its range where it has one (the unit goes at the row's end)."""
    if item['kind'] == 'text':
        return ' + '.join(repr(p) for p in item['value'])
    if item['low'] == item['high']:
        return say('{value} exactly', value=fmt(item['value']))
    return f"{fmt(item['value'])} ({fmt(item['low'])}–{fmt(item['high'])})"


LABEL_WIDTH = 38     # the table's first column at least; a longer label wraps above its values
LINE_WIDTH = 108     # the widest line of a table, which a slide's output block shows unwrapped
TEXT_WIDTH = 22      # a text longer than this is listed under the table, not in it


def show_expected(cell_id, header=True):
    """Print what ``cell_id`` is expected to show, for each reference GPU, labelled as expected.

    First the notes (what to expect, in plain words), then the numbers (and short texts) as a
    table with a column per reference GPU, the value and its range in each cell (one cell where
    every GPU expects the same), then each item's derivation ([model], [simulated] or [source])
    and why its range is what it is, folded in a notebook (a click opens it); an item marked
    not judged says so, and why. Draws the expected figure, styled as a model, where the
    expectation has one.
    """
    gpus = gpu_models.reference_gpus()
    exps = [expected_for(cell_id, gpu) for gpu in gpus]
    first = exps[0]
    if header:
        print(say('EXPECTED on a GPU (a prediction, not a measurement):'))
    for line in first.notes:
        print(f'  {tr(line)}')
    not_judged = say('  (shown, not judged)')
    rows, listed, hows = [], [], []
    for k, item in enumerate(first.items):
        per_gpu = [e.items[k] for e in exps]
        hows += [item['how']] if item['how'] not in hows else []
        cells = [_cell(p) for p in per_gpu]
        if item['kind'] == 'text' and max(map(_width, cells)) > TEXT_WIDTH:
            listed.append((item, per_gpu))
        else:
            same = all(_cell(p) == cells[0] and p.get('unit') == item.get('unit') for p in per_gpu)
            rows.append((item, [cells[0]] if same else cells))
    if rows:
        col = max([len(g.key) for g in gpus] + [_width(c) for _, cells in rows for c in cells if len(cells) > 1])
        # The label column takes what a line of LINE_WIDTH leaves beside the values (a label that
        # fits is not wrapped above its values), and at least LABEL_WIDTH.
        longest = max(_width(tr(i['label'])) for i, _ in rows)
        values = (max(len(cells) for _, cells in rows) * (col + 2) + max(len(i.get('unit') or '') for i, _ in rows)
                  + (_width(not_judged) if any(i.get('not_judged') for i, _ in rows) else 0))
        width = min(longest, max(LABEL_WIDTH, LINE_WIDTH - 4 - values))
        if any(len(cells) > 1 for _, cells in rows):
            print('  ' + ' ' * width + '  ' + '  '.join(f'{g.key:<{col}}' for g in gpus).rstrip())
        for item, cells in rows:
            label = _wrap(tr(item['label']), width) or ['']
            for line in label[:-1]:
                print(f'  {line}')
            unit = item.get('unit') or ''
            shown = ('  '.join(_ljust(c, col) for c in cells) + f'  {unit}' if len(cells) > 1
                     else f'{cells[0]} {unit}'.rstrip() + say(', every GPU'))
            mark = not_judged if item.get('not_judged') else ''
            print(f'  {_ljust(label[-1], width)}  {shown}'.rstrip() + mark)
    for item, per_gpu in listed:
        if all(p['value'] == item['value'] for p in per_gpu):
            print(f"  {tr(item['label'])}: {_cell(item)}" + (not_judged if item.get('not_judged') else ''))
        else:
            print(f"  {tr(item['label'])}:")
            for gpu, p in zip(gpus, per_gpu):
                print(f'    {gpu.key}: {_cell(p)}')
    derived = [f'    {tr(line)}' for line in first.details]
    for k, item in enumerate(first.items):
        groups = {}
        for gpu, e in zip(gpus, exps):
            groups.setdefault(e.items[k]['why'], []).append(gpu.key)
        whys = [w for w in groups if w]
        if len(whys) <= 1:
            why = tr(whys[0]) if whys else ''
        else:
            why = '; '.join(f"{', '.join(keys)}: {tr(w)}" for w, keys in groups.items() if w)
        line = f"    {tr(item['label'])} [{item['how']}]" + (f': {why}' if why else '')
        if item.get('not_judged'):
            line += say(' (shown, not judged: {reason})', reason=tr(item['not_judged']))
        derived.append(line)
    import functools
    items = functools.reduce(lambda a, b: say('{a}; {b}', a=a, b=b),
                             [f'[{how}] {say(HOW[how])}' for how in hows or [first.how]])
    derived.append('  ' + say('{items}.', items=items))
    _folded(say('  How each was derived, and why its range:'), derived)
    if first.figure is not None:
        _draw_model(exps)


def _folded(title, lines):
    """Print ``title`` and ``lines``; in a notebook, the lines are folded under the title, which
    opens them on a click (an HTML ``<details>``; the plain text stays for other front ends)."""
    text = '\n'.join([title, *lines])
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        get_ipython = lambda: None
    if getattr(get_ipython(), 'kernel', None) is None:          # plain Python, or a test
        print(text)
        return
    import html
    import sys
    sys.stdout.flush()                                          # what was printed comes first
    summary = html.escape(say('{title} (click to open)', title=title.strip().rstrip(':：')))
    display({'text/plain': text, 'text/html': f'<details><summary>{summary}</summary>'
             f'<pre style="white-space: pre-wrap">{html.escape(chr(10).join(lines))}</pre></details>'}, raw=True)


def _draw_model(exps):
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(8, 4), layout='constrained')      # room for three reference GPUs
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
    contains the expected text). An item marked ``not_judged`` is printed as 'not judged
    (<reason>)' and never counted a miss. On a GPU outside the datasheet table, an item is
    judged only where it is the same (value and range, or text) on every GPU of the table (a
    count, a FLOP count, a dtype); the others are shown against the first reference GPU's,
    not judged. Where ``$COURSE_CHECKS`` names a file, appends one JSON line per item to it
    (``ok``: True, False, or None where not judged; ``not_judged``: the reason, or None).
    Returns the names of the items it missed (a miss is a finding, not an error: nothing raises).
    """
    import torch
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'
    spec = gpu_models.gpu_spec(name)
    e = expected_for(cell_id, spec or gpu_models.reference_gpus()[0])
    names = [i['name'] for i in e.items]
    unknown = sorted(set(measured) - set(names))
    if unknown:
        raise TypeError(f'check_expected({cell_id!r}): no expected item named {unknown}; it has {names}')
    if spec is None:      # judged only where every GPU of the table expects the same
        mine, alike = {i['name']: i for i in e.items}, set(names)
        for gpu in gpu_models.DATASHEET.values():      # every GPU has the same items (tested)
            for other in expected_for(cell_id, gpu).items:
                if any(other.get(k) != mine[other['name']].get(k) for k in ('kind', 'value', 'low', 'high', 'unit')):
                    alike.discard(other['name'])
    print(say('Expected against measured on this {name}:', name=name) if spec else
          say('Expected against measured on this {name} (not in the datasheet table: expected as on the {gpu}; '
              'only what is the same on every GPU of the table is judged):', name=name, gpu=e.gpu.key))
    lines, misses = [], []
    for item in e.items:
        reason = tr(item.get('not_judged')) or (None if spec is not None or item['name'] in alike
                                                else say('the {name} is not in the datasheet table', name=name))
        if item['name'] not in measured:
            ok, shown = (False if reason is None else None), say('not measured')
        else:
            value = measured[item['name']]
            ok = _judge(item, value) if reason is None else None
            shown = repr(str(value)[:160])
            if item['kind'] == 'number':
                shown = (say('{value} ({ratio}x the expected value)', value=fmt(float(value)),
                             ratio=f"{float(value) / item['value']:.2g}") if item['value'] else fmt(float(value)))
        verdict = {True: say('as expected'), False: say('MISS'), None: say('not judged ({reason})', reason=reason)}[ok]
        print(say('  {label}: expected {expected}, measured {measured}: {verdict}', label=tr(item['label']),
                  expected=_show_value(item), measured=shown, verdict=verdict))
        if ok is False:
            misses.append(item['name'])
        lines.append({'cell': cell_id, 'item': item['name'], 'label': item['label'], 'kind': item['kind'],
                      'gpu': spec.key if spec else name, 'expected': item['value'],
                      'low': item.get('low'), 'high': item.get('high'), 'unit': item.get('unit', ''),
                      'how': item['how'],
                      'measured': (None if item['name'] not in measured else
                                   float(measured[item['name']]) if item['kind'] == 'number'
                                   else str(measured[item['name']])),
                      'ok': ok, 'not_judged': reason if ok is None else None})
    path = os.environ.get('COURSE_CHECKS')
    if path:
        with open(path, 'a', encoding='utf-8') as f:
            for line in lines:
                f.write(json.dumps(line) + '\n')
    return misses
