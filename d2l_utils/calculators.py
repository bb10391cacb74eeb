"""Calculators a reader can play with: the lessons' models, with sliders.

Course machinery, written by hand (like ``gpu_models.py``). Each calculator is a model the
course already uses, from the one datasheet table and ``ASSUMPTIONS`` of ``gpu_models.py``
(never numbers of its own), with controls:

* ``copy_calculator`` (lesson 3): a copy of N bytes over a chosen link, pinned or pageable, from
  a chosen kind of host: latency + bytes / bandwidth, ``gpu_models.copy_seconds``;
* ``memory_calculator`` (lessons 8 and 12): what training a GPT of lesson 8's shape keeps on
  each GPU (parameters, gradients, optimizer state, activations) by precision, optimizer,
  batch, sequence length, activation checkpointing, and DDP or FSDP over N GPUs;
* ``roofline_calculator`` (lesson 10): a matrix product of chosen sizes and dtype on a
  chosen GPU of the datasheet table: the time the roofline allows, the bound, and the MFU a
  measured time means;
* ``allreduce_calculator`` (lesson 12): a ring all-reduce of N bytes over N GPUs on a chosen
  interconnect: time and bus bandwidth;
* ``parallel_calculator`` (lesson 14): every split of a GPT over N GPUs of a chosen kind into
  tensor, pipeline and FSDP parallelism: which fit, and the expected time of a step, by lesson
  14's own ``parallel_plans`` (a ``#@save`` helper of the lesson, so not repeated here).

Each has a pure function (``copy_time``, ``training_memory_per_gpu``, ``matmul_roofline``,
``allreduce_time``) that raises a clear ``ValueError`` for a bad setting, and a widget
(``ipywidgets``) that shows that message instead of a traceback. Where widgets do not
render (GitHub's viewer, the handouts, nbval's comparison), the output is a small static
table of a few settings, computed by the same function.
"""
import dataclasses
import html
import math

from . import gpu_models
from .gpu_models import ASSUMPTIONS, DATASHEET, Estimate

__all__ = ['LINKS', 'HOSTS', 'link_host', 'INTERCONNECTS', 'SHAPES', 'PRECISIONS', 'copy_time',
           'training_memory_per_gpu', 'largest_batch', 'matmul_roofline', 'allreduce_time', 'copy_calculator', 'memory_calculator',
           'roofline_calculator', 'allreduce_calculator', 'plan_line', 'parallel_calculator']
GiB, MiB, KiB = 2**30, 2**20, 2**10


def _choice(value, name, options):
    if value not in options:
        raise ValueError(f'{name} must be one of {", ".join(map(repr, options))}; got {value!r}')
    return value


def _positive(value, name, integer=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f'{name} must be a number, got {value!r}')
    if value <= 0 or (integer and value != int(value)):
        raise ValueError(f'{name} must be a positive {"whole number" if integer else "number"}, got {value:g}')
    return int(value) if integer else float(value)


def _size(nbytes):
    for unit, scale in (('GiB', GiB), ('MiB', MiB), ('KiB', KiB)):
        if nbytes >= scale:
            return f'{nbytes / scale:.3g} {unit}'
    return f'{nbytes:.0f} B'


def _time(seconds):
    for unit, scale in (('s', 1), ('ms', 1e-3), ('µs', 1e-6)):
        if seconds >= scale:
            return f'{seconds / scale:.3g} {unit}'
    return f'{seconds * 1e9:.3g} ns'


# ---------------------------------------------------------------- a copy's time (lesson 3)

# A link, by name: ('pcie', (generation, lanes)) between host and GPU, or ('nvlink', GPU key)
# between two GPUs with peer access.
LINKS = {f'PCIe {g}.0 x{w}': ('pcie', (g, w)) for g in (3, 4, 5) for w in (16, 8)}
LINKS['NVLink, GPU to GPU (H200)'] = ('nvlink', 'H200')
LINKS['NVLink, GPU to GPU (A100)'] = ('nvlink', 'A100')
HOSTS = list(gpu_models.HOSTS)        # the kinds of host of gpu_models.HOST_ASSUMPTIONS


def link_host(link):
    """The host a copy over ``link`` is modelled on by default: that of the first reference GPU
    with that PCIe link (PCIe 5.0 x16: the H100's and H200's server; 3.0 x16: the T4's Colab VM),
    else a server; between two GPUs, that GPU's."""
    kind, what = LINKS[_choice(link, 'link', list(LINKS))]
    if kind == 'nvlink':
        return DATASHEET[what].host
    return next((g.host for g in gpu_models.reference_gpus() if g.pcie == what), 'server')


def copy_time(nbytes, link='PCIe 5.0 x16', memory='pinned', host=None):
    """A copy of ``nbytes`` over ``link`` (a key of ``LINKS``) from ``memory`` ('pinned' or
    'pageable' host memory; ignored between two GPUs) on a ``host`` ('server', 'colab' or
    'desktop'; by default ``link_host(link)``): {'seconds', 'gb_s'} as Estimates and 'link_gb_s',
    the link's one-way rate. Lesson 3's model, ``gpu_models.copy_seconds``, on a GPU with that
    PCIe link in that host (whose own PCIe generation may be lower: ``gpu_models.host_link``);
    between GPUs, ``gpu_models.peer_copy_seconds``."""
    nbytes = _positive(nbytes, 'the size (bytes)')
    kind, what = LINKS[_choice(link, 'link', list(LINKS))]
    _choice(memory, 'memory', ['pinned', 'pageable'])
    host = link_host(link) if host is None else _choice(host, 'host', HOSTS)
    if kind == 'pcie':
        # only the link and the host matter here
        gpu = dataclasses.replace(DATASHEET['H200'], key='GPU', pcie=what, host=host)
        seconds = gpu_models.copy_seconds(nbytes, gpu, memory == 'pinned')
        link_bytes_per_s = gpu_models.pcie_bytes_per_s(*gpu_models.host_link(gpu))    # Colab's hosts: 3.0 at most
    else:
        seconds = gpu_models.peer_copy_seconds(nbytes, dataclasses.replace(DATASHEET[what], host=host))
        link_bytes_per_s = gpu_models.peer_link(DATASHEET[what])[0]
    return {'seconds': seconds, 'gb_s': seconds.inverse(nbytes / 1e9, 'GB/s'), 'link_gb_s': link_bytes_per_s / 1e9}


def _copy_line(nbytes, link, memory):
    r = copy_time(nbytes, link, memory)
    s, g = r['seconds'], r['gb_s']
    return (f'{_size(nbytes)} over {link}, {memory} ({link_host(link)}): {_time(s.value)} ({_time(s.low)} to '
            f'{_time(s.high)}), {g.value:.1f} GB/s ({g.low:.1f} to {g.high:.1f}) of the link\'s {r["link_gb_s"]:.1f}')


# ------------------------------------------------- training memory (lessons 8 and 12)

# Lesson 8's GPT (written-out attention, GELU feed-forward of 4D), by (vocabulary, width D,
# blocks L, heads H). The first is the lesson's own; the others are the same design, larger.
SHAPES = {"lesson 8's GPT (1.04B)": (32_000, 2048, 18, 16),
          'GPT, D=768, L=12 (124M)': (50_257, 768, 12, 12),
          'GPT, D=4096, L=32 (6.7B)': (32_000, 4096, 32, 32),
          'GPT, D=5120, L=40 (12.9B)': (32_000, 5120, 40, 40),
          'GPT, D=8192, L=80 (64.7B)': (32_000, 8192, 80, 64)}
# precision -> (bytes of a parameter and its gradient, of an optimizer state, of a master weight,
# bytes of an activation, autocast's bfloat16 weight copies?)
PRECISIONS = {'float32': (4, 4, 0, 4, False), 'bf16 autocast': (4, 4, 0, None, True),
              'pure bf16': (2, 2, 0, 2, False), 'bf16 + fp32 master': (2, 4, 4, 2, False)}
OPTIMIZERS = {'SGD': 0, 'SGD with momentum': 1, 'Adam': 2}        # state tensors per parameter
PARALLEL = ['one GPU', 'DDP', 'FSDP']
STATES = ('parameters', 'gradients', 'optimizer state', 'master weights')      # what lives from step to step
CARDS = {'H200 (141 GiB)': DATASHEET['H200'].memory_bytes, 'T4 (16 GiB)': DATASHEET['T4'].memory_bytes,
         '80 GiB card': 80 * GiB, '24 GiB card': 24 * GiB, 'A100 (40 GiB)': DATASHEET['A100'].memory_bytes}


def gpt_parameters(vocab, d, depth):
    """Lesson 8's count: embeddings and output layer V·D each, 12·D² + 13·D a block, 2·D the final norm."""
    return 2 * vocab * d + depth * (12 * d * d + 13 * d) + 2 * d


def gpt_activation_bytes(vocab, d, depth, heads, t, precision):
    """Bytes one sequence of ``t`` tokens saves for backward in lesson 8's GPT, as its cells count
    them (``saved_tensor_bytes``), without the boolean masks. A block saves 16·t·D values (its two
    layer norms' inputs and outputs, queries-keys-values, the attention's output, the feed-forward's
    4·D twice), the attention weights H·t², and 4·t statistics; after the blocks, the last norm's
    input and output and the log-probabilities over the vocabulary (t·V). Under autocast, CUDA's
    rules (lesson 8, § "Activations under autocast") save some in float32 and some in bfloat16."""
    if precision == 'bf16 autocast':
        block = 4 * (2 * t * d + heads * t * t + 4 * t) + 2 * (14 * t * d + heads * t * t)
        return depth * block + 4 * (t * d + 2 * t + t * vocab) + 2 * (t * d + t * vocab)
    size = PRECISIONS[precision][3]
    return size * (depth * (16 * t * d + heads * t * t) + 2 * t * d + t * vocab) + 4 * (depth * 4 * t + 2 * t)


def _per_sequence(shape, precision, t, checkpointing):
    vocab, d, depth, heads = shape
    full = gpt_activation_bytes(vocab, d, depth, heads, t, precision)
    if not checkpointing:
        return full
    # Each block keeps only its input (the residual stream); one block's activations come back
    # during its recomputation in the backward pass, and the layers after the blocks keep theirs.
    one_block = (full - gpt_activation_bytes(vocab, d, 0, heads, t, precision)) / depth
    residual = 2 if precision in ('pure bf16', 'bf16 + fp32 master') else 4
    return depth * t * d * residual + one_block + gpt_activation_bytes(vocab, d, 0, heads, t, precision)


def training_memory_per_gpu(shape="lesson 8's GPT (1.04B)", precision='float32', optimizer='Adam',
                            batch=1, seq=1024, checkpointing=False, parallel='one GPU', gpus=1):
    """Bytes each GPU holds to train a GPT of ``shape`` (a key of ``SHAPES``, or (V, D, L, H)),
    ``batch`` sequences of ``seq`` tokens per GPU, as {row: bytes}. Lesson 8's counts (states by
    ``training_memory``'s rule, activations as its cells measure them) and lesson 12's sharding:
    DDP keeps every state on every GPU and a copy of the gradients in its buckets; FSDP keeps
    1/N of each state, and gathers the root's and a block's parameters whole (prefetching the next
    block's, which lesson 12 names, is not counted)."""
    shape = SHAPES[_choice(shape, 'model', list(SHAPES))] if isinstance(shape, str) else tuple(shape)
    vocab, d, depth, heads = (_positive(x, n, integer=True) for x, n in zip(shape, ('V', 'D', 'L', 'H')))
    if d % heads:
        raise ValueError(f'the width D={d} must be a multiple of the heads H={heads}')
    param_b, state_b, master_b, _, copies = PRECISIONS[_choice(precision, 'precision', list(PRECISIONS))]
    states = OPTIMIZERS[_choice(optimizer, 'optimizer', list(OPTIMIZERS))]
    batch, seq = _positive(batch, 'sequences per GPU', True), _positive(seq, 'sequence length', True)
    gpus = _positive(gpus, 'GPUs', True)
    _choice(parallel, 'parallelism', PARALLEL)
    if parallel == 'one GPU' and gpus != 1:
        raise ValueError(f'one GPU means 1 GPU, got {gpus}: choose DDP or FSDP to use several')
    n = gpt_parameters(vocab, d, depth)
    shard = gpus if parallel == 'FSDP' else 1
    rows = {'parameters': n * param_b / shard, 'gradients': n * param_b / shard,
            'optimizer state': states * n * state_b / shard, 'master weights': n * master_b / shard}
    if copies:
        rows['bf16 weight copies (autocast)'] = 2 * (depth * 12 * d * d + vocab * d)
    if parallel == 'DDP':
        rows["DDP's gradient buckets"] = n * param_b
    if parallel == 'FSDP' and gpus > 1:
        # Gathered whole at a block's forward (lesson 12 counts it): the root's parameters (embedding,
        # output layer, final norm), which stay whole after the forward, and the block's; in the
        # backward, a block's whole gradients before their reduce-scatter.
        block = (12 * d * d + 13 * d) * param_b
        rows['gathered at a forward (FSDP)'] = (2 * vocab * d + 2 * d) * param_b + block
        rows["a block's gradients (FSDP)"] = block
    rows['masks'] = depth * seq * seq
    rows['activations'] = batch * _per_sequence((vocab, d, depth, heads), precision, seq, checkpointing)
    return {k: v for k, v in rows.items() if v}


def largest_batch(card_bytes, **settings):
    """The most sequences per GPU that fit in ``card_bytes`` (0 if not even one), as lesson 8 counts:
    what is left after everything that does not grow with the batch, over one sequence's activations."""
    one = training_memory_per_gpu(**{**settings, 'batch': 1})
    fixed = sum(v for k, v in one.items() if k != 'activations')
    return max(0, int((card_bytes - fixed) // one['activations']))


# ---------------------------------------------------------- a product on a roofline (lesson 10)

ROOFLINE_DTYPES = ['float32', 'tf32', 'bfloat16', 'float16']


def matmul_roofline(m=8192, n=8192, k=8192, dtype='bfloat16', gpu='H200', measured_ms=None):
    """An (m x k) @ (k x n) product on ``gpu`` (a key of ``DATASHEET``): FLOPs, bytes, intensity,
    the ridge point, the bound, the roofline's time at the datasheet peaks, the time and rate expected
    at the reachable shares (lesson 9's ``product_tflops``, the model of lesson 10's GPU cells), and
    the MFU that ``measured_ms`` would mean."""
    from .expectations.lesson09 import ITEMSIZE, product_tflops, runs_as as computed_as
    m, n, k = (_positive(x, name, True) for x, name in ((m, 'm'), (n, 'n'), (k, 'k')))
    spec = DATASHEET[_choice(gpu, 'GPU', list(DATASHEET))]
    _choice(dtype, 'dtype', ROOFLINE_DTYPES)
    runs_as = computed_as(dtype, spec)
    flops, nbytes = 2 * m * n * k, ITEMSIZE[dtype] * (m * k + k * n + m * n)
    peak = spec.flops(runs_as)
    rate = product_tflops(m, n, k, spec, dtype)
    expected = rate.inverse(flops / 1e12, 's')
    ideal = gpu_models.roofline_seconds(flops, nbytes, spec, runs_as)
    result = {'flops': flops, 'bytes': nbytes, 'intensity': flops / nbytes,
              'ridge': peak / spec.memory_bytes_per_s, 'bound': 'compute' if flops / peak > nbytes /
              spec.memory_bytes_per_s else 'memory', 'ideal_s': ideal, 'expected_s': expected,
              'tflops': rate, 'peak_tflops': peak / 1e12, 'runs_as': runs_as}
    if measured_ms is not None:
        seconds = _positive(measured_ms, 'the measured time (ms)') / 1e3
        if seconds < ideal:
            raise ValueError(f'{measured_ms:g} ms is faster than the roofline allows ({ideal * 1e3:.3g} ms): '
                             'was the GPU synchronized before the clock stopped?')
        result['mfu'] = flops / seconds / peak
    return result


# ------------------------------------------------------------------ an all-reduce (lesson 12)

INTERCONNECTS = {'NVLink (H200)': 'H200', 'PCIe 3.0 x16 (T4)': 'T4', 'NVLink (A100)': 'A100',
                 'PCIe 4.0 x16': (4, 16), 'PCIe 5.0 x16': (5, 16)}


def allreduce_time(nbytes=256 * MiB, gpus=2, interconnect='NVLink (H200)'):
    """A ring all-reduce of ``nbytes`` over ``gpus`` GPUs, by lesson 12's model: a latency, then
    ``ring_allreduce_bytes`` (2(n-1)/n of the message) over one direction of the link at NCCL's
    share of it (``nccl_nvlink_share`` or ``nccl_pcie_share``), with the latency of lesson 12's
    expectation (``ring_latency``: NCCL's for each of the ring's n-1 steps, and four host
    launches, each ``launch_s`` of the GPU's host; a server's for a bare PCIe link).
    {'seconds', 'bus_gb_s'} as Estimates."""
    from .expectations.lesson12 import allreduce_link, allreduce_seconds, ring_latency
    from .lessons import bus_bandwidth
    nbytes = _positive(nbytes, 'the message size (bytes)')
    gpus = _positive(gpus, 'GPUs', True)
    if gpus < 2:
        raise ValueError(f'an all-reduce between GPUs needs at least 2, got {gpus}')
    what = INTERCONNECTS[_choice(interconnect, 'interconnect', list(INTERCONNECTS))]
    if isinstance(what, str):
        kind, link = allreduce_link(DATASHEET[what])
    else:
        kind, link = 'pcie', gpu_models.pcie_bytes_per_s(*what)
    host = DATASHEET[what] if isinstance(what, str) else 'server'
    share, nccl, launch = (ASSUMPTIONS[f'nccl_{kind}_share'], ASSUMPTIONS[f'nccl_latency_{kind}_s'],
                           gpu_models.assumed('launch_s', host))

    def seconds(lat, each, s):
        return allreduce_seconds(int(nbytes), link, ring_latency(lat, each, gpus), s, gpus)
    t = gpu_models.spread(seconds, (nccl, launch, share), 's',
                          f'{share[1]:.0%}-{share[2]:.0%} of {link / 1e9:.3g} GB/s each way')
    bus = gpu_models.spread(lambda lat, each, s: bus_bandwidth(int(nbytes), seconds(lat, each, s), gpus) / 1e9,
                            (nccl, launch, share), 'GB/s', t.why)
    return {'seconds': t, 'bus_gb_s': bus, 'link_gb_s': link / 1e9}


# --------------------------------------------------------------------------- the widgets

class Calculator:
    """Controls, a result that follows them, and a static table for where widgets do not render.

    ``compute(**values)`` returns the result as HTML; a ``ValueError`` becomes its message in the
    result, never a traceback. ``static`` is [(settings, text)] of a few settings."""

    def __init__(self, title, controls, compute, static):
        self.title, self.controls, self.compute, self.static = title, controls, compute, static
        self.widget = self.result = None
        try:
            import ipywidgets as w
        except ImportError:            # the static table is all there is: say how to get the rest
            self.missing = 'pip install ipywidgets, then run this cell again, for the sliders'
            return
        self.missing = None
        self.result = w.HTML()
        self.result.add_class('calc-result')
        for c in controls.values():
            c.style = {'description_width': 'initial'}
            c.layout = w.Layout(width='520px')
            c.observe(lambda _: self.update(), names='value')
        self.widget = w.VBox([w.HTML(f'<b>{html.escape(title)}</b>'), *controls.values(), self.result])
        self.widget.add_class('calc')
        self.update()

    def values(self):
        return {name: c.value for name, c in self.controls.items()}

    def update(self):
        try:
            self.result.value = self.compute(**self.values())
        except ValueError as e:
            self.result.value = f'<span class="calc-error" style="color:#b00">{html.escape(str(e))}</span>'

    def text(self):
        lines = [self.title + ' (static: a few settings; run the cell for the sliders)']
        lines += [f'  {text}' for text in self.static]
        return '\n'.join(lines + ([f'  ({self.missing})'] if self.missing else []))

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = {'text/plain': self.text(),
                  'text/html': '<pre>' + html.escape(self.text()) + '</pre>'}
        if self.widget is not None:
            bundle.update({k: v for k, v in self.widget._repr_mimebundle_().items() if k != 'text/plain'})
        return bundle


def _value(name, text, number):
    """A result line with its number where a test (and a reader's tools) can read it."""
    return f'<div>{html.escape(text)} <b class="calc-value" data-name="{name}" data-value="{number!r}"></b></div>'


def _controls(build):
    """``build(ipywidgets)``: the calculator's controls by name; none without ipywidgets."""
    try:
        import ipywidgets
    except ImportError:
        return {}
    return build(ipywidgets)


def copy_calculator(nbytes=64 * MiB, link='PCIe 5.0 x16', memory='pinned', host=None):
    """Lesson 3: a copy's time over a chosen link. Defaults: the lesson's 64 MiB over the H200's link,
    on the link's host (``link_host``: a server for PCIe 5.0 x16)."""
    copy_time(nbytes, link, memory, host)                  # a bad default fails here, not in the widget
    static = [_copy_line(64 * MiB, lk, mem) for lk in ('PCIe 5.0 x16', 'PCIe 3.0 x16')
              for mem in ('pinned', 'pageable')]
    static += [_copy_line(64 * KiB, 'PCIe 5.0 x16', 'pinned'),
               _copy_line(64 * MiB, 'NVLink, GPU to GPU (H200)', 'pinned')]
    controls = _controls(lambda w: {
        'log2_bytes': w.IntSlider(value=round(math.log2(nbytes)), min=0, max=34, description='size: 2^n bytes, n ='),
        'link': w.Dropdown(options=list(LINKS), value=link, description='link'),
        'memory': w.ToggleButtons(options=['pinned', 'pageable'], value=memory, description='host memory'),
        'host': w.ToggleButtons(options=['(the link\'s)'] + HOSTS, value=host or '(the link\'s)', description='host')})

    def compute(log2_bytes, link, memory, host):
        n = 2 ** log2_bytes
        host = link_host(link) if host not in HOSTS else host
        r = copy_time(n, link, memory, host)
        s, g = r['seconds'], r['gb_s']
        return (f'<div>{_size(n)} over {html.escape(link)} ({r["link_gb_s"]:.1f} GB/s one way), {memory}, '
                f'on a {host} host:</div>'
                + _value('seconds', f'time {_time(s.value)} (range {_time(s.low)} to {_time(s.high)})', s.value)
                + _value('gb_s', f'bandwidth seen {g.value:.1f} GB/s ({g.low:.1f} to {g.high:.1f})', g.value)
                + f'<div style="color:#555">{html.escape(s.why)}</div>')
    return Calculator('A copy: latency + bytes / bandwidth (lesson 3)', controls, compute, static)


def _memory_html(settings, card):
    rows = training_memory_per_gpu(**settings)
    total = sum(rows.values())
    top = max(rows, key=rows.get)
    fits = total <= CARDS[card]
    fixed = {k: v for k, v in settings.items() if k != 'batch'}
    most = largest_batch(CARDS[card], **fixed)
    lines = ''.join(f'<tr><td>{html.escape(k)}</td><td style="text-align:right">{v / GiB:.2f} GiB</td></tr>'
                    for k, v in rows.items())
    verdict = (f'fits on a {card}' if fits else f'does not fit on a {card}') + f'; most of it: {top}'
    if not fits:
        verdict += '; ' + _fsdp_needs(settings, card)
    return (f'<table>{lines}</table>'
            + _value('total_gib', f'per GPU: {total / GiB:.2f} GiB, {verdict}.', total / GiB)
            + _value('largest_batch', f'the most sequences per GPU that fit: {most}', most)
            + '<div style="color:#555">Upper limits: the CUDA context, the allocator\'s rounding and temporary '
              'buffers come on top (lesson 8).</div>')


def _fsdp_needs(settings, card, most=1024):
    """How many GPUs FSDP needs for ``settings`` to fit on ``card``, said as a sentence."""
    for gpus in range(2, most + 1):
        if sum(training_memory_per_gpu(**{**settings, 'parallel': 'FSDP', 'gpus': gpus}).values()) <= CARDS[card]:
            offered = f' (you offer {settings["gpus"]})' if settings['gpus'] > 1 else ''
            return f'FSDP needs {gpus} GPUs for it{offered}'
    return (f'not even FSDP on {most} GPUs makes it fit: what stays whole on every GPU (activations, masks, '
            'gathered blocks) is too large; fewer sequences or checkpointing help')


def _memory_line(card, **settings):
    rows = training_memory_per_gpu(**settings)
    fixed = {k: v for k, v in settings.items() if k != 'batch'}
    return (f'{settings.get("precision", "float32")}, {settings.get("parallel", "one GPU")}'
            f'{" x" + str(settings["gpus"]) if settings.get("gpus", 1) > 1 else ""}: states '
            f'{sum(v for k, v in rows.items() if k in STATES) / GiB:.1f} GiB, '
            f'a sequence {rows["activations"] / settings.get("batch", 1) / GiB:.2f} GiB; on a {card}: '
            f'{largest_batch(CARDS[card], **fixed)} sequences')


def memory_calculator(shape="lesson 8's GPT (1.04B)", precision='float32', optimizer='Adam', batch=18, seq=1024,
                      checkpointing=False, parallel='one GPU', gpus=1, card='80 GiB card'):
    """Lessons 8 and 12: what training keeps on each GPU. Defaults: lesson 8's GPT, float32 with Adam,
    18 sequences of 1024 tokens on an 80 GiB card (the most the lesson finds that fit)."""
    _choice(card, 'GPU', list(CARDS))
    settings = dict(shape=shape, precision=precision, optimizer=optimizer, batch=batch, seq=seq,
                    checkpointing=checkpointing, parallel=parallel, gpus=gpus)
    training_memory_per_gpu(**settings)
    static = [_memory_line(c, precision=p) for p in PRECISIONS for c in ('24 GiB card', '80 GiB card')]
    static += [_memory_line('80 GiB card', precision='bf16 autocast', checkpointing=True),
               _memory_line('80 GiB card', precision='float32', parallel='FSDP', gpus=8)]
    controls = _controls(lambda w: {
        'shape': w.Dropdown(options=list(SHAPES), value=shape, description='model'),
        'precision': w.Dropdown(options=list(PRECISIONS), value=precision, description='precision'),
        'optimizer': w.Dropdown(options=list(OPTIMIZERS), value=optimizer, description='optimizer'),
        'batch': w.IntSlider(value=batch, min=1, max=64, description='sequences per GPU'),
        'seq': w.Dropdown(options=[256, 512, 1024, 2048, 4096, 8192], value=seq, description='tokens a sequence'),
        'checkpointing': w.Checkbox(value=checkpointing, description='activation checkpointing (per block)'),
        'parallel': w.ToggleButtons(options=PARALLEL, value=parallel, description='across GPUs'),
        'gpus': w.IntSlider(value=gpus, min=1, max=64, description='GPUs'),
        'card': w.Dropdown(options=list(CARDS), value=card, description='GPU')})

    def compute(card, **settings):
        return _memory_html(settings, card)
    return Calculator('Training memory per GPU (lessons 8 and 12)', controls, compute, static)


def _roofline_line(m, n, k, dtype, gpu):
    r = matmul_roofline(m, n, k, dtype, gpu)
    e = r['tflops']
    return (f'{m}x{k} @ {k}x{n} {dtype} on the {gpu}: {r["intensity"]:.0f} FLOP/byte ({r["bound"]}-bound; ridge '
            f'{r["ridge"]:.0f}), {e.value:.0f} TFLOP/s ({e.low:.0f} to {e.high:.0f}) of {r["peak_tflops"]:.0f}')


def roofline_calculator(m=8192, n=8192, k=8192, dtype='bfloat16', gpu='H200', measured_ms=None):
    """Lesson 10: a matrix product on a roofline. Defaults: the 8192 product lesson 10's GPU cell times."""
    matmul_roofline(m, n, k, dtype, gpu)
    static = [_roofline_line(8192, 8192, 8192, 'bfloat16', 'H200'), _roofline_line(8192, 8192, 8192, 'float32', 'H200'),
              _roofline_line(8192, 8192, 8192, 'float16', 'T4'), _roofline_line(8192, 8192, 64, 'bfloat16', 'H200'),
              _roofline_line(4096, 1, 4096, 'bfloat16', 'H200')]
    controls = _controls(lambda w: {
        'log2_m': w.IntSlider(value=round(math.log2(m)), min=0, max=16, description='m = 2^'),
        'log2_n': w.IntSlider(value=round(math.log2(n)), min=0, max=16, description='n = 2^'),
        'log2_k': w.IntSlider(value=round(math.log2(k)), min=0, max=16, description='k = 2^'),
        'dtype': w.Dropdown(options=ROOFLINE_DTYPES, value=dtype, description='dtype'),
        'gpu': w.Dropdown(options=list(DATASHEET), value=gpu, description='GPU'),
        'measured_ms': w.FloatText(value=measured_ms or 0.0, description='measured (ms; 0: none)')})

    def compute(log2_m, log2_n, log2_k, dtype, gpu, measured_ms):
        if measured_ms < 0:
            raise ValueError(f'the measured time must be positive (or 0 for none), got {measured_ms:g} ms')
        r = matmul_roofline(2 ** log2_m, 2 ** log2_n, 2 ** log2_k, dtype, gpu, measured_ms or None)
        e, t = r['tflops'], r['expected_s']
        out = (f'<div>{r["flops"] / 1e9:.4g} GFLOP, {_size(r["bytes"])}: {r["intensity"]:.1f} FLOP/byte; the ridge '
               f'of the {gpu} in {r["runs_as"]} is at {r["ridge"]:.0f} FLOP/byte</div>'
               + _value('bound', f'bound: {r["bound"]}', r['bound'])
               + _value('ideal_ms', f'the roofline allows {r["ideal_s"] * 1e3:.4g} ms at the datasheet peaks',
                        r['ideal_s'] * 1e3)
               + _value('expected_ms', f'expected {t.value * 1e3:.4g} ms ({t.low * 1e3:.4g} to {t.high * 1e3:.4g}), '
                        f'{e.value:.1f} TFLOP/s of the {r["peak_tflops"]:.1f} peak', t.value * 1e3))
        if 'mfu' in r:
            out += _value('mfu', f'a measured {measured_ms:g} ms means an MFU of {r["mfu"]:.1%}', r['mfu'])
        return out
    return Calculator('A matrix product on the roofline (lesson 10)', controls, compute, static)


def _allreduce_line(nbytes, gpus, interconnect):
    r = allreduce_time(nbytes, gpus, interconnect)
    t, b = r['seconds'], r['bus_gb_s']
    return (f'{_size(nbytes)} on {gpus} GPUs over {interconnect}: {_time(t.value)} ({_time(t.low)} to '
            f'{_time(t.high)}), bus bandwidth {b.value:.0f} GB/s ({b.low:.0f} to {b.high:.0f})')


def allreduce_calculator(nbytes=256 * MiB, gpus=2, interconnect='NVLink (H200)'):
    """Lesson 12: a ring all-reduce. Defaults: the 256 MiB all-reduce of lesson 12's GPU cell, two H200s."""
    allreduce_time(nbytes, gpus, interconnect)
    static = [_allreduce_line(256 * MiB, 2, 'NVLink (H200)'), _allreduce_line(256 * MiB, 8, 'NVLink (H200)'),
              _allreduce_line(256 * MiB, 2, 'PCIe 3.0 x16 (T4)'), _allreduce_line(64 * KiB, 8, 'NVLink (H200)')]
    controls = _controls(lambda w: {
        'log2_bytes': w.IntSlider(value=round(math.log2(nbytes)), min=2, max=34, description='message: 2^n bytes, n ='),
        'gpus': w.IntSlider(value=gpus, min=1, max=64, description='GPUs'),
        'interconnect': w.Dropdown(options=list(INTERCONNECTS), value=interconnect, description='interconnect')})

    def compute(log2_bytes, gpus, interconnect):
        n = 2 ** log2_bytes
        r = allreduce_time(n, gpus, interconnect)
        t, b = r['seconds'], r['bus_gb_s']
        return (f'<div>{_size(n)} on {gpus} GPUs; each sends 2(n-1)/n of it: '
                f'{_size(2 * (gpus - 1) * n / gpus)}</div>'
                + _value('seconds', f'time {_time(t.value)} ({_time(t.low)} to {_time(t.high)})', t.value)
                + _value('bus_gb_s', f'bus bandwidth {b.value:.1f} GB/s ({b.low:.1f} to {b.high:.1f}) of the '
                         f'link\'s {r["link_gb_s"]:.0f} GB/s each way', b.value))
    return Calculator('An all-reduce on a ring (lesson 12)', controls, compute, static)


def _power(n):
    """2^k for a power of two, else the number."""
    return f'2^{n.bit_length() - 1}' if n > 0 and n & (n - 1) == 0 else f'{n:,}'


def plan_line(p):
    """One split of ``parallel_plans``, as lesson 14 prints it."""
    return (f"tp {p['tp']} pp {p['pp']:2} dp {p['dp']:2}: {p['memory_bytes'] / GiB:4.1f} GiB a GPU, step {p['step_s']:5.2f} s "
            f"= compute {p['compute_s']:.2f} / (1 - bubble {p['bubble']:.2f}) + tp {p['tp_s']:.2f} + FSDP {p['dp_s']:.2f}")


def parallel_calculator(width=8192, layers=80, gpu='H100', gpus=64, tokens=2**20, micro=16):
    """Lesson 14: the splits of a GPT into tensor x pipeline x FSDP over ``gpus`` GPUs, the fastest
    that fit first. Defaults: the lesson's larger example (width 8192, 80 blocks, 2^20 tokens a step
    in 16-bit values, 64 H100s, 16 micro-batches)."""
    from .lessons import parallel_plans

    def plans(width, layers, gpu, gpus, tokens, micro):
        _choice(gpu, 'gpu', list(DATASHEET))
        found = parallel_plans(width, layers, gpu, gpus, tokens=tokens, micro=micro, value_bytes=2)
        return [p for p in found if p['fits']], len(found)

    def lines(**settings):
        """(the head line, the splits that fit, fastest first, and their lines)."""
        fit, n = plans(**settings)
        fit.sort(key=lambda p: p['step_s'])
        head = (f"width {settings['width']}, {settings['layers']} blocks, {_power(settings['tokens'])} "
                f"tokens a step, {settings['gpus']} {settings['gpu']}s: {len(fit)} of {n} ways fit")
        return head, fit, [plan_line(p) for p in fit]

    head, _, best = lines(width=width, layers=layers, gpu=gpu, gpus=gpus, tokens=tokens, micro=micro)
    static = [head + '; the fastest:', *best[:3]]
    controls = _controls(lambda w: {
        'width': w.Dropdown(options=[1024, 2048, 4096, 5120, 8192, 12288, 16384], value=width, description='width'),
        'layers': w.IntSlider(value=layers, min=4, max=128, step=4, description='blocks'),
        'gpu': w.Dropdown(options=list(DATASHEET), value=gpu, description='GPU'),
        'gpus': w.Dropdown(options=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512], value=gpus, description='GPUs'),
        'log2_tokens': w.IntSlider(value=round(math.log2(tokens)), min=10, max=24, description='tokens a step: 2^n, n ='),
        'micro': w.IntSlider(value=micro, min=1, max=64, description='micro-batches')})

    def compute(width, layers, gpu, gpus, log2_tokens, micro):
        head, fit, best = lines(width=width, layers=layers, gpu=gpu, gpus=gpus, tokens=2 ** log2_tokens, micro=micro)
        rows = ''.join(f'<div><code>{html.escape(line)}</code></div>' for line in best[:5])
        fastest = fit[0]['step_s'] if fit else float('nan')
        return (f'<div>{html.escape(head)}{"; the fastest:" if best else ": none; more GPUs, or fewer blocks"}</div>'
                + rows + _value('fastest_step_s', f'fastest step {_time(fastest) if best else "-"}', fastest))
    return Calculator('Splitting a GPT over GPUs (lesson 14)', controls, compute, static)
