"""Unit tests of lesson 9's helpers: round_mantissa, tf32_matmuls(_enabled); the PyTorch
behaviour the lesson states about the old and new TF32 switches; and lesson 8's
saved_tensor_bytes split by dtype, as this lesson uses it."""
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import d2l_utils as d2l


def _all_kinds_of_float32(n=200_000, seed=0):
    """Random bit patterns: normal, subnormal, zero, infinite and NaN float32 values."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-2**31, 2**31, (n,), generator=g).to(torch.int32).view(torch.float32)
    special = torch.tensor([0.0, -0.0, float('inf'), float('-inf'), float('nan'), 1.0, -1.0,
                            torch.finfo(torch.float32).max, -torch.finfo(torch.float32).max,
                            torch.finfo(torch.float32).tiny, 1e-45, 1 + 2**-8, 1 + 3 * 2**-8])
    return torch.cat([x, special])


def _same(a, b):
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())


def test_round_mantissa_7_bits_is_bfloat16():
    x = _all_kinds_of_float32()
    assert _same(d2l.round_mantissa(x, 7), x.bfloat16().float())


def test_round_mantissa_10_bits_is_float16_in_its_normal_range():
    x = _all_kinds_of_float32()
    x = x[(x.abs() >= 2**-14) & (x.abs() <= 65504)]
    assert len(x) > 10_000
    assert torch.equal(d2l.round_mantissa(x, 10), x.half().float())


def test_round_mantissa_rounds_ties_to_even_and_keeps_signs():
    ties = torch.tensor([1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-11), -(1 + 3 * 2**-11)])
    assert d2l.round_mantissa(ties, 10).tolist() == [1.0, 1 + 2**-9, -1.0, -(1 + 2**-9)]
    zeros = d2l.round_mantissa(torch.tensor([0.0, -0.0]), 3)
    assert zeros.tolist() == [0.0, 0.0] and zeros.signbit().tolist() == [False, True]


def test_round_mantissa_carries_into_the_exponent_and_overflows_to_infinity():
    x = torch.tensor([2 - 2**-20, torch.finfo(torch.float32).max])
    assert d2l.round_mantissa(x, 10).tolist() == [2.0, float('inf')]


def test_round_mantissa_23_bits_is_the_identity_and_a_copy():
    x = _all_kinds_of_float32(1000)
    y = d2l.round_mantissa(x, 23)
    assert _same(y, x) and y.data_ptr() != x.data_ptr()


def test_round_mantissa_is_idempotent_and_monotonic_in_bits():
    x = torch.randn(10_000, generator=torch.Generator().manual_seed(1))
    errors = []
    for bits in (2, 5, 7, 10, 16):
        r = d2l.round_mantissa(x, bits)
        assert torch.equal(d2l.round_mantissa(r, bits), r)
        errors.append(((r - x).abs() / x.abs()).max().item())
        assert errors[-1] <= 2.0 ** -(bits + 1)             # at most half a unit in the last place
    assert errors == sorted(errors, reverse=True)


def test_round_mantissa_keeps_shape_and_leaves_its_input_alone():
    x = torch.randn(3, 4)
    before = x.clone()
    assert d2l.round_mantissa(x, 5).shape == (3, 4)
    assert torch.equal(x, before)


@pytest.mark.parametrize("x, bits, error", [
    ([1.0, 2.0], 10, TypeError),                     # not a tensor
    (torch.ones(3, dtype=torch.float64), 10, TypeError),
    (torch.ones(3, dtype=torch.bfloat16), 10, TypeError),
    (torch.ones(3, dtype=torch.int32), 10, TypeError),
    (torch.ones(3), 10.0, TypeError),
    (torch.ones(3), True, TypeError),
    (torch.ones(3), '10', TypeError),
    (torch.ones(3), -1, ValueError),
    (torch.ones(3), 24, ValueError),
])
def test_round_mantissa_rejects_bad_input(x, bits, error):
    with pytest.raises(error):
        d2l.round_mantissa(x, bits)


def _switch():
    matmul = torch.backends.cuda.matmul
    return matmul.fp32_precision if torch.__version__ >= (2, 9) else matmul.allow_tf32


def test_tf32_matmuls_sets_and_restores_without_warnings():
    before, raw = d2l.tf32_matmuls_enabled(), _switch()
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        with d2l.tf32_matmuls(True):
            assert d2l.tf32_matmuls_enabled()
            with d2l.tf32_matmuls(False):                 # nested
                assert not d2l.tf32_matmuls_enabled()
            assert d2l.tf32_matmuls_enabled()
        assert d2l.tf32_matmuls_enabled() == before and _switch() == raw


def test_tf32_matmuls_restores_after_an_exception():
    raw = _switch()
    with pytest.raises(KeyError):
        with d2l.tf32_matmuls(True):
            raise KeyError('inside')
    assert _switch() == raw


@pytest.mark.skipif(torch.__version__ < (2, 9), reason="the newer switch takes 'tf32'/'ieee' from 2.9 on")
def test_tf32_matmuls_uses_the_newer_switch():
    with d2l.tf32_matmuls(True):
        assert torch.backends.cuda.matmul.fp32_precision == 'tf32'
    with d2l.tf32_matmuls(False):
        assert torch.backends.cuda.matmul.fp32_precision == 'ieee'


@pytest.mark.skipif(torch.__version__ < (2, 9), reason="the newer switch takes 'tf32'/'ieee' from 2.9 on")
def test_tf32_matmuls_enabled_sees_a_setting_made_for_all_backends():
    if torch.backends.cuda.matmul.fp32_precision != 'none' or torch.backends.fp32_precision != 'none':
        pytest.skip('needs the default TF32 settings')
    try:
        torch.backends.fp32_precision = 'tf32'             # every backend; matmul itself not set
        assert d2l.tf32_matmuls_enabled()
        with d2l.tf32_matmuls(False):
            assert not d2l.tf32_matmuls_enabled()
        assert d2l.tf32_matmuls_enabled()
    finally:
        torch.backends.fp32_precision = 'none'
        torch.backends.cuda.matmul.fp32_precision = 'none'
    assert not d2l.tf32_matmuls_enabled()


@pytest.mark.skipif(torch.__version__ < (2, 9), reason="the newer switch takes 'tf32'/'ieee' from 2.9 on")
def test_old_tf32_getters_raise_inside_tf32_matmuls_and_agree_after_the_old_setter():
    # The lesson's section "Old and new switches do not mix" says so (checked in 2.11 and 2.13).
    old = (torch.get_float32_matmul_precision, lambda: torch.backends.cuda.matmul.allow_tf32)
    with d2l.tf32_matmuls(True):
        for read in old:
            with pytest.raises(RuntimeError, match='mix of the legacy and new'):
                read()
    assert [read() for read in old] == ['highest', False]
    try:
        torch.set_float32_matmul_precision('high')          # writes the old and the new record
        assert [read() for read in old] == ['high', True] and d2l.tf32_matmuls_enabled()
    finally:
        torch.set_float32_matmul_precision('highest')
        torch.backends.cuda.matmul.fp32_precision = torch.backends.mkldnn.matmul.fp32_precision = 'none'
    assert not d2l.tf32_matmuls_enabled()


def test_profiler_runs_inside_tf32_matmuls():
    # The lesson says the profiler reads the new record (2.11, 2.13) and works in the block.
    a = torch.randn(8, 8)
    with d2l.tf32_matmuls(True), warnings.catch_warnings():
        warnings.simplefilter('ignore')                      # 2.11 warns about clearing events
        with torch.profiler.profile() as prof:
            a @ a
    assert any(e.name == 'aten::mm' for e in prof.events())


@pytest.mark.parametrize("enabled", [1, 'yes', None, torch.tensor(True)])
def test_tf32_matmuls_rejects_non_bool(enabled):
    with pytest.raises(TypeError):
        with d2l.tf32_matmuls(enabled):
            pass


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))


def _split(fn, **kw):
    """Lesson 8's saved_tensor_bytes by dtype, with fn's result kept for a backward pass."""
    out = []
    saved = d2l.saved_tensor_bytes(lambda: out.append(fn()), by_dtype=True, **kw)
    return out[0], saved


def test_saved_bytes_by_dtype_counts_activations_once():
    net, x = _mlp(), torch.randn(32, 16)
    out, saved = _split(lambda: net(x).sum(), exclude=[x, *net.parameters()])
    # ReLU saves its output and the second layer its input: one (32, 64) float32 storage.
    assert saved == {torch.float32: 32 * 64 * 4}
    out.backward()                                          # the graph still works
    assert net[0].weight.grad is not None


def test_saved_bytes_by_dtype_counts_what_is_not_excluded():
    net, x = _mlp(), torch.randn(32, 16)
    _, saved = _split(lambda: net(x).sum())
    params = sum(p.numel() for p in (net[2].weight,)) * 4   # the second weight is saved (a view)
    assert saved == {torch.float32: 32 * 64 * 4 + 32 * 16 * 4 + params}


def test_saved_bytes_by_dtype_sees_autocast_copies():
    net, x = _mlp(), torch.randn(32, 16)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out, saved = _split(lambda: net(x), exclude=[x, *net.parameters()])
    # bfloat16: the input's copy, the ReLU output, the second weight's copy
    assert saved == {torch.bfloat16: (32 * 16 + 32 * 64 + 64 * 4) * 2}
    out.float().sum().backward()
    assert net[0].weight.grad.dtype == torch.float32


def test_saved_bytes_by_dtype_without_grad():
    assert _split(lambda: 42) == (42, {})
    with torch.no_grad():
        net = _mlp()
        out, saved = _split(lambda: net(torch.ones(2, 16)))
    assert saved == {} and out.shape == (2, 4)


def test_saved_bytes_by_dtype_with_a_loss():
    net, x, y = _mlp(), torch.randn(8, 16), torch.randint(0, 4, (8,))
    loss, saved = _split(lambda: F.cross_entropy(net(x), y), exclude=[x, y, *net.parameters()])
    # activations (8, 64), log-probabilities (8, 4) and the loss's total weight (a scalar)
    assert saved == {torch.float32: 8 * 64 * 4 + 8 * 4 * 4 + 4}
    loss.backward()


@pytest.mark.parametrize("fn, exclude", [(42, ()), (lambda: 1, [1.0]), (lambda: 1, 'abc'),
                                         (lambda: 1, [torch.ones(1), None])])
def test_saved_bytes_by_dtype_rejects_bad_input(fn, exclude):
    with pytest.raises(TypeError):
        d2l.saved_tensor_bytes(fn, exclude, by_dtype=True)
