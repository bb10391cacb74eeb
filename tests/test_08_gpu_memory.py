"""Unit tests of lesson 8's helpers: training_memory, saved_tensor_bytes, cpu_memory_timeline, peak_memory;
and its slideshow: a lecture's length, with the ideas behind the teacher's questions on slides."""
import gc

import nbformat
import pytest
import torch
from torch import nn

import d2l_utils as d2l
import slides  # tools/ is put on sys.path by conftest.py
from conftest import ROOT


def _mlp(dtype=torch.float32, device='cpu'):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(device=device, dtype=dtype)


N_PARAMS = 8 * 16 + 16 + 16 * 4 + 4


@pytest.mark.parametrize("optimizer, states", [('sgd', 0), ('momentum', 1), ('adam', 2), ('adamw', 2)])
def test_training_memory_counts_bytes_per_parameter(optimizer, states):
    assert d2l.training_memory(_mlp(), optimizer) == {
        'parameters': 4 * N_PARAMS, 'gradients': 4 * N_PARAMS,
        'optimizer state': 4 * states * N_PARAMS, 'master weights': 0}


def test_training_memory_follows_the_dtype_and_master_weights():
    pure = d2l.training_memory(_mlp(torch.bfloat16), 'adam')
    assert pure == {'parameters': 2 * N_PARAMS, 'gradients': 2 * N_PARAMS,
                    'optimizer state': 4 * N_PARAMS, 'master weights': 0}
    mixed = d2l.training_memory(_mlp(torch.bfloat16), 'adam', master_weights=True)
    assert mixed == {'parameters': 2 * N_PARAMS, 'gradients': 2 * N_PARAMS,
                     'optimizer state': 8 * N_PARAMS, 'master weights': 4 * N_PARAMS}
    assert sum(mixed.values()) == 16 * N_PARAMS == sum(d2l.training_memory(_mlp(), 'adam').values())


def test_training_memory_counts_buffers_but_trains_only_trainable_parameters():
    net = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16))
    net[0].requires_grad_(False)                         # frozen: no gradient, no state
    mem = d2l.training_memory(net, 'adam')
    buffers = 16 * 4 + 16 * 4 + 8                        # running mean, variance, batch counter
    assert mem['parameters'] == 4 * (8 * 16 + 16 + 2 * 16) + buffers
    assert mem['gradients'] == 4 * 2 * 16 and mem['optimizer state'] == 2 * 4 * 2 * 16


def test_training_memory_matches_what_adam_allocates():
    net = _mlp()
    opt = torch.optim.Adam(net.parameters())
    net(torch.randn(5, 8)).sum().backward()
    opt.step()
    grads = sum(p.grad.numel() * p.grad.element_size() for p in net.parameters())
    state = sum(t.numel() * t.element_size() for s in opt.state.values()
                for t in s.values() if t.dim() > 0)            # step counters left out
    mem = d2l.training_memory(net, 'adam')
    assert (mem['gradients'], mem['optimizer state']) == (grads, state)


def test_training_memory_works_on_meta_without_memory():
    with torch.device('meta'):
        big = nn.Linear(50_000, 50_000)                      # 10 GB in float32
    assert sum(d2l.training_memory(big, 'adam').values()) == 16 * (50_000 * 50_000 + 50_000)


@pytest.mark.parametrize("args, error", [
    ((_mlp().parameters(),), TypeError),
    ((_mlp(), 'adagrad'), ValueError),
    ((_mlp(), 'Adam'), ValueError),
    ((_mlp(), 'adam', 1), TypeError),
    ((_mlp(), 'adam', True), ValueError),                   # float32 needs no master copy
])
def test_training_memory_rejects_bad_input(args, error):
    with pytest.raises(error):
        d2l.training_memory(*args)


def test_training_memory_messages_say_what_was_expected():
    with pytest.raises(TypeError, match='model must be an nn.Module, not generator'):
        d2l.training_memory(_mlp().parameters())
    with pytest.raises(ValueError, match=r"optimizer must be one of \['adam', 'adamw', 'momentum', 'sgd'\]"):
        d2l.training_memory(_mlp(), 'adagrad')
    with pytest.raises(TypeError, match='master_weights must be True or False'):
        d2l.training_memory(_mlp(), 'adam', 1)
    with pytest.raises(ValueError, match='float32 parameters are their own master copy'):
        d2l.training_memory(_mlp(), 'adam', True)


def test_saved_tensor_bytes_counts_what_backward_needs():
    x = torch.randn(10, 8)
    w = torch.randn(8, 16, requires_grad=True)
    # x @ w saves x, for w's gradient (w itself only if x needed a gradient); relu its output
    assert d2l.saved_tensor_bytes(lambda: torch.relu(x @ w), exclude=[x]) == 10 * 16 * 4
    assert d2l.saved_tensor_bytes(lambda: torch.relu(x @ w)) == (10 * 16 + 10 * 8) * 4
    x.requires_grad_()
    assert d2l.saved_tensor_bytes(lambda: torch.relu(x @ w)) == (10 * 16 + 10 * 8 + 8 * 16) * 4


def test_saved_tensor_bytes_counts_a_storage_once_and_whole():
    w = torch.randn(4, 4, requires_grad=True)
    h = w * 2                                               # 16 floats, saved by the products below
    # h.t() and h[0] are views of h's storage: counted once, by the whole storage
    fn = lambda: (h.t() * w).sum() + (h[0] * w[0]).sum()
    assert d2l.saved_tensor_bytes(fn, exclude=[w]) == 16 * 4


def test_saved_tensor_bytes_works_on_meta_and_leaves_the_graph_usable():
    with torch.device('meta'):
        net = nn.Sequential(nn.Linear(1000, 4000), nn.ReLU(), nn.Linear(4000, 1000))
    x = torch.empty(512, 1000, device='meta')
    # the first layer's input is excluded; ReLU saves its output, the last layer its input (the same)
    assert d2l.saved_tensor_bytes(lambda: net(x), exclude=[*net.parameters(), x]) == 512 * 4000 * 4
    real = _mlp()
    out = []
    d2l.saved_tensor_bytes(lambda: out.append(real(torch.randn(3, 8)).sum()))
    out[0].backward()                                       # the hooks handed the tensors back
    assert all(p.grad is not None for p in real.parameters())


def test_saved_tensor_bytes_by_dtype_splits_the_same_total():
    # lessons 9 and 12 call it with by_dtype=True: {dtype: bytes}, adding up to the plain count
    w = torch.randn(8, 16, requires_grad=True)
    x = torch.randn(10, 8, dtype=torch.float64)
    fn = lambda: torch.relu(x.float() @ w).to(torch.bfloat16).square()
    split = d2l.saved_tensor_bytes(fn, exclude=[w], by_dtype=True)
    # float32: the cast of x (for w's gradient) and relu's output; bfloat16: square's input
    assert split == {torch.float32: (10 * 8 + 10 * 16) * 4, torch.bfloat16: 10 * 16 * 2}
    assert sum(split.values()) == d2l.saved_tensor_bytes(fn, exclude=[w])


def test_saved_tensor_bytes_accepts_a_generator_of_tensors_to_exclude():
    net = nn.Linear(8, 4)
    x = torch.randn(3, 8)
    assert (d2l.saved_tensor_bytes(lambda: net(x), exclude=(p for p in [*net.parameters(), x]))
            == d2l.saved_tensor_bytes(lambda: net(x), exclude=[*net.parameters(), x]) == 0)


@pytest.mark.parametrize("args, error", [
    ((torch.ones(2),), TypeError),
    ((lambda: None, [torch.ones(2), 'x']), TypeError),
])
def test_saved_tensor_bytes_rejects_bad_input(args, error):
    with pytest.raises(error):
        d2l.saved_tensor_bytes(*args)


def test_cpu_memory_timeline_sees_allocations_releases_and_regions():
    def fn():
        with torch.profiler.record_function('make'):
            a = torch.ones(1000)                                # 4000 bytes
            b = torch.ones(3000)                                # 12000 bytes
        del a
        return b

    timeline = d2l.cpu_memory_timeline(fn)
    held = timeline['bytes']
    assert max(held) >= 16000 and held[-1] <= max(held) - 4000    # a was released
    assert timeline['seconds'] == sorted(timeline['seconds']) and len(timeline['seconds']) == len(held)
    start, end = timeline['regions']['make']
    assert 0 <= start <= end


def test_cpu_memory_timeline_restores_the_garbage_collector():
    assert gc.isenabled()
    d2l.cpu_memory_timeline(lambda: torch.ones(10))
    assert gc.isenabled()
    gc.disable()
    try:
        d2l.cpu_memory_timeline(lambda: torch.ones(10))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_cpu_memory_timeline_ends_at_gradients_plus_adam_state():
    net = _mlp()
    opt = torch.optim.Adam(net.parameters())
    x = torch.randn(32, 8)

    def step():
        net(x).square().mean().backward()
        opt.step()

    held = d2l.cpu_memory_timeline(step)['bytes']
    mem = d2l.training_memory(net, 'adam')
    counters = 4 * len(list(net.parameters()))               # Adam's step counters, on the CPU
    assert held[-1] == mem['gradients'] + mem['optimizer state'] + counters


def test_peak_memory_on_the_cpu():
    assert d2l.peak_memory(lambda: torch.ones(250_000)) >= 1_000_000
    assert d2l.peak_memory(lambda: None) == 0
    x = torch.randn(256, 64)
    net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))
    saved = d2l.saved_tensor_bytes(lambda: net(x).sum(), exclude=[*net.parameters(), x])
    assert d2l.peak_memory(lambda: net(x).sum().backward(), torch.device('cpu')) >= saved


@pytest.mark.parametrize("args, error", [
    ((torch.ones(2),), TypeError),
    ((lambda: None, 0), TypeError),
    ((lambda: None, 'meta'), ValueError),
    ((lambda: None, 'cuda:99'), ValueError),
    ((lambda: None, 'not a device'), ValueError),
])
def test_peak_memory_rejects_bad_input(args, error):
    with pytest.raises(error):
        d2l.peak_memory(*args)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_peak_memory_on_a_cuda_gpu():
    assert d2l.peak_memory(lambda: torch.ones(2**20, device='cuda'), 'cuda') >= 4 * 2**20
    net = _mlp(device='cuda')
    x = torch.randn(64, 8, device='cuda')
    net(x).sum().backward()                                 # warm-up: cuBLAS's workspace
    net.zero_grad()
    saved = d2l.saved_tensor_bytes(lambda: net(x).sum(), exclude=[*net.parameters(), x])
    assert d2l.peak_memory(lambda: net(x).sum().backward(), 'cuda') >= saved


def test_the_deck_is_a_lecture_with_its_key_ideas_on_slides():
    """At most 25 slides (issue 21), and the ideas behind questions 1 and 2 and the
    recovery after an out-of-memory error on slides, not only in the speaker notes."""
    nb = nbformat.read(ROOT / 'notebooks' / '08_gpu_memory.ipynb', as_version=4)
    types = slides.slide_types(nb)
    assert 15 <= len(slides.deck(nb, types)) <= 25
    shown = [' '.join(c.source.split()) for c in nb.cells if types[c.id] not in ('notes', 'skip')]
    for idea in ('"Training in bfloat16" can mean three things', '**`memory_allocated`**',
                 'recover *after* the `except` block', 'each loss scaled by `1/k`, the sum is the gradient'):
        assert any(idea in text for text in shown), f'not on a slide: {idea}'


# What lesson 8's GPU-only cells are expected to show (d2l_utils/expectations/lesson08.py): the
# allocator replayed, and autocast's rules restated, must agree with what the lesson teaches.

import ast
import math
import subprocess
import sys

import torch.nn.functional as F
from conftest import cells, slow, source

from d2l_utils.expectations import lesson08

LESSON = ROOT / 'notebooks' / '08_gpu_memory.ipynb'
MiB = 2**20


def lesson_definitions(*ids):
    """The functions, classes and upper-case constants of the lesson's cells ``ids``, defined
    in a namespace (the rest of each cell, which runs the lesson, is left out)."""
    namespace = {'math': math, 'torch': torch, 'F': F, 'nn': nn, 'd2l': d2l, 'MiB': MiB}
    by_id = {c['id']: c for c in cells(LESSON)}
    for cell_id in ids:
        tree = ast.parse(source(by_id[cell_id]))
        keep = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.ImportFrom))
                or isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id.isupper()
                                                          for t in node.targets)]
        exec(compile(ast.Module(keep, []), cell_id, 'exec'), namespace)
    return namespace


def test_the_replayed_allocator_gives_the_lessons_blocks_and_segments():
    lesson = lesson_definitions('c049-08gpumemory')['cuda_block_and_segment']
    for n in [1, 511, 512, 513, 1000, MiB - 1, MiB, MiB + 1, 5 * MiB, 9 * MiB, 10 * MiB - 512, 10 * MiB,
              10 * MiB + 1, 11 * MiB, 11 * MiB + 1, 12 * MiB, 100 * MiB, 100 * MiB + 3]:
        alloc = lesson08.Allocator()
        assert (alloc.malloc(n)[0], alloc.reserved) == lesson(n), n


def test_the_replayed_allocator_reuses_splits_merges_and_releases():
    alloc = lesson08.Allocator()
    a, b = alloc.malloc(3 * MiB), alloc.malloc(3 * MiB)        # one 20 MiB segment, split twice
    assert (alloc.allocated, alloc.reserved, alloc.segments_allocated) == (6 * MiB, 20 * MiB, 1)
    alloc.free(a)
    assert alloc.inactive_split == 3 * MiB + 14 * MiB          # a hole before b, the rest after it
    alloc.free(b)                                              # merges back into one free block
    assert alloc.inactive_split == 0 and alloc.segments[0]['blocks'] == [[20 * MiB, False]]
    alloc.malloc(1000, stream=1)                               # small pool, another stream
    alloc.empty_cache()
    assert (alloc.reserved, len(alloc.segments)) == (2 * MiB, 1)


def test_the_replayed_allocator_rejects_bad_input():
    alloc = lesson08.Allocator()
    with pytest.raises(ValueError, match='nbytes must be an int'):
        alloc.malloc(-1)
    with pytest.raises(ValueError, match='nbytes must be an int'):
        alloc.malloc(1.5)
    block = alloc.malloc(10)
    alloc.free(block)
    with pytest.raises(ValueError, match='already free'):
        alloc.free(block)
    with pytest.raises(ValueError, match='not a block'):
        alloc.free([512, True])
    with pytest.raises(NotImplementedError):
        lesson08.Allocator(expandable=True).empty_cache()


def test_the_expectations_autocast_rules_are_the_lessons():
    """lesson08 restates the lesson's GPT and AutocastRules (a package cannot import a notebook):
    both give the same bytes, and the CPU's rules give real CPU autocast's."""
    lesson = lesson_definitions('c033-08gpumemory', 'c040-08gpumemory', 'ca9dd10-08gpumemory',
                                'c27c688-08gpumemory')
    torch.manual_seed(0)
    small, words = lesson['GPT'](100, 32, 2, 4), torch.randint(0, 100, (2, 16))
    cuda, cpu = lesson08.cuda_and_cpu_saved()
    rules = lesson['AutocastRules']
    assert lesson['saved_under'](rules(lesson['LOW'], lesson['CUDA_FP32'], lesson['CUDA_PARTS']),
                                 small, words) == cuda
    assert lesson['saved_under'](rules(lesson['LOW'], lesson['CPU_FP32']), small, words) == cpu
    assert lesson['saved_under'](torch.autocast('cpu', dtype=torch.bfloat16), small, words) == cpu
    assert lesson['dtypes'](cuda) == lesson08.dtypes(cuda)
    # the difference the lesson explains: log_softmax's bfloat16 result, T x V numbers of 2 bytes
    assert cuda[torch.bfloat16] - cpu[torch.bfloat16] == 2 * 16 * 100 * 2


def test_softmax_alone_makes_cudas_float32_difference():
    """The note of 08-autocast-rules credits the float32 bytes CUDA adds to softmax alone: CUDA's rules
    without softmax save the CPU's float32 bytes; without layer_norm they save the same as with it
    (its input, the residual stream, is float32 on both devices)."""
    cuda, cpu = lesson08.cuda_and_cpu_saved()
    without = lambda *fs: lesson08.saved_by_dtype(
        lesson08.AutocastRules(lesson08.LOW, lesson08.CUDA_FP32 - set(fs), lesson08.CUDA_PARTS))
    assert without(F.layer_norm) == cuda
    assert without(F.softmax, torch.Tensor.softmax)[torch.float32] == cpu[torch.float32] < cuda[torch.float32]
    assert 'layer norm' not in ' '.join(lesson08_expected('08-autocast-rules').notes)


def lesson08_expected(cell_id):
    from d2l_utils import gpu_models
    from d2l_utils.expectations import expected_for
    return expected_for(cell_id, gpu_models.DATASHEET['H200'])


def test_the_snapshots_allocation_count_is_counted():
    """08-memory-snapshot's events come from STEP_ALLOCATIONS, which a count on this CPU reproduces."""
    assert lesson08.count_step_allocations() == lesson08.STEP_ALLOCATIONS


def test_the_snapshot_model_pickles_shared_frames_once():
    """snapshot_bytes builds the snapshot as THCPModule_memorySnapshot does: frame dicts shared by
    every stack, one list per stack. Pickle writes a shared object once, so deeper stacks add only
    references (a few bytes a frame an event), and a copy of every frame would cost many times more."""
    import pickle
    size, events = lesson08.snapshot_bytes()
    deeper, _ = lesson08.snapshot_bytes(kernel_frames=2 * lesson08.KERNEL_FRAMES[0])
    assert events == 2 * 3 * sum(lesson08._step_allocations().values())
    assert 0 < (deeper - size) / events / lesson08.KERNEL_FRAMES[0] < 10       # bytes per added frame per event
    def frame(i):                                  # new string objects each time, as a copy would have
        return {'name': f'frame_{i}', 'filename': f'/usr/lib/python3/site-packages/ipykernel/module_{i}.py', 'line': i}
    unshared = len(pickle.dumps([[frame(i) for i in range(30)] for _ in range(10)]))
    frames = [frame(i) for i in range(30)]
    shared = len(pickle.dumps([list(frames) for _ in range(10)]))
    assert unshared > 5 * shared
    per_event = lesson08.snapshot_bytes_per_event()
    assert per_event.low < size / events == per_event.value < per_event.high < 1024     # far under a KiB


def test_cross_entropy_parts_is_cross_entropy_and_refuses_what_it_does_not_write_out():
    logits, target = torch.randn(6, 5), torch.tensor([0, 1, 2, 3, 4, 0])
    assert torch.allclose(lesson08.cross_entropy_parts(logits, target), F.cross_entropy(logits, target))
    with pytest.raises(NotImplementedError):
        lesson08.cross_entropy_parts(logits, target, label_smoothing=0.1)
    with pytest.raises(NotImplementedError):
        lesson08.cross_entropy_parts(logits, logits.softmax(1))


CUDA_ON_THE_CPU = """
import warnings, torch
from d2l_utils.expectations import lesson08
K = torch._C.DispatchKey.AutocastCPU
def without_autocast():
    return torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(K))
def layer_norm(x, shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):      # CUDA: fp32
    f = lambda t: t.float() if t is not None else t
    with without_autocast():
        return torch.ops.aten.layer_norm(f(x), shape, f(weight), f(bias), eps, cudnn_enable)
def float32_unless_named(op):                                     # CUDA: fp32_set_opt_dtype
    def kernel(x, dim, dtype=None):
        with without_autocast():
            return op(x, dim, torch.float32 if dtype is None else dtype)
    return kernel
lib = torch.library.Library('aten', 'IMPL')
with warnings.catch_warnings():
    warnings.simplefilter('ignore')
    lib.impl('cross_entropy_loss', torch.library.fallthrough_kernel, 'AutocastCPU')    # CUDA lists none
    lib.impl('layer_norm', layer_norm, 'AutocastCPU')
    lib.impl('softmax.int', float32_unless_named(torch.ops.aten.softmax.int), 'AutocastCPU')
    lib.impl('log_softmax.int', float32_unless_named(torch.ops.aten.log_softmax.int), 'AutocastCPU')
emulated = lesson08.saved_by_dtype(torch.autocast('cpu', dtype=torch.bfloat16))
assert emulated == lesson08.cuda_and_cpu_saved()[0], (emulated, lesson08.cuda_and_cpu_saved()[0])
print('ok')
"""


@slow('a child process that imports torch: a few seconds')
def test_cudas_rules_agree_with_cudas_policies_replayed_by_the_dispatcher():
    """CUDA's autocast policies for the ops the GPT meets, registered for the CPU's autocast key
    (cross_entropy_loss unlisted, layer_norm float32, softmax and log_softmax float32 unless a
    dtype is named: aten/src/ATen/autocast_mode.cpp), save what lesson 8's CUDA rules predict.
    In a child process: the registrations would change autocast for the other tests."""
    run = subprocess.run([sys.executable, '-c', CUDA_ON_THE_CPU], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == 'ok', run.stderr[-2000:]


def test_the_teachers_page_quotes_the_expectations():
    """teaching/08_gpu_memory.md quotes what the GPU-only cells are expected to show, for a
    teacher without a GPU: the quoted numbers are the expectations' own."""
    from d2l_utils import gpu_models
    from d2l_utils.expectations import expected_for, fmt
    page = (ROOT / 'teaching' / '08_gpu_memory.md').read_text(encoding='utf-8')
    quoted = page[page.index('## Without a GPU: what to expect'):page.index('## Questions')]

    def item(cell_id, name):
        return next(i for i in expected_for(cell_id, gpu_models.DATASHEET['H200']).items if i['name'] == name)

    assert f"`{item('08-autocast-rules', 'autocast')['value'][0]}`" in quoted
    for cell_id, name in [('08-measured-step', 'held_after_kib'), ('08-measured-step', 'peak_kib'),
                          ('08-fragmentation', 'holes_mib'), ('08-fragmentation', 'grew_mib'),
                          ('08-expandable-segments', 'default_reserved_mib'),
                          ('08-expandable-segments', 'expandable_reserved_mib'),
                          ('08-empty-cache', 'released_mib'), ('08-memory-snapshot', 'events'),
                          *[('08-fixes-on-gpu', n) for n in ('baseline_kib', 'micro_batches_kib', 'zeroed_grads_kib',
                                                             'autocast_kib', 'checkpointing_kib')]]:
        assert fmt(item(cell_id, name)['value']) in quoted, (cell_id, name)


def test_the_sdpa_backend_expected_follows_sdp_utils_rules():
    """08-sdpa-backend: cuDNN on compute capability 9.x and 10.x (check_prefer_cudnn_attention, PyTorch 2.11
    on), flash from 8.0 to 12.1, the math path for bfloat16 below 8.0; cuDNN and flash save the same
    tensors (output and a float32 number per row) within their random-number state."""
    from d2l_utils import gpu_models
    expected = {'H100': 'cudnn', 'H100-PCIe': 'cudnn', 'H200': 'cudnn', 'A100': 'flash', 'L4': 'flash',
                'RTX-4090': 'flash', 'T4': 'math'}
    for key, gpu in gpu_models.DATASHEET.items():
        assert lesson08.sdpa_backend(gpu)[0] == expected.get(key, lesson08.sdpa_backend(gpu)[0]), key
    saved = lesson08.sdpa_saved_bytes()
    assert saved.keys() == lesson08.SDPA_SAVED.keys()
    assert all(abs(saved[k] - lesson08.SDPA_SAVED[k]) < 1024 for k in saved), saved     # within the rng state
    out_and_rows = 1024 * 2048 * 2 + 16 * 1024 * 4               # bfloat16 output, a float32 number per row
    assert 0 <= saved['flash'] - out_and_rows < 1024 and 0 <= saved['cudnn'] - out_and_rows < 1024
    assert saved['math'] > 16 * 1024 * 1024 * 4                  # the weights: heads x T x T float32
