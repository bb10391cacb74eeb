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
