"""Unit tests of lesson 9's helpers: round_mantissa, tf32_matmuls(_enabled); the PyTorch
behaviour the lesson states about the old and new TF32 switches; lesson 8's
saved_tensor_bytes split by dtype, as this lesson uses it; and what the expectations of its
GPU-only cells rest on (d2l_utils/expectations/lesson09.py): TF32's rounding, the float32
error model, autocast's CUDA lists as installed, and the training step's memory count."""
import collections
import math
import pathlib
import re
import warnings
import weakref

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import d2l_utils as d2l
from d2l_utils.expectations import lesson09


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


# ---- The expectations of the GPU-only cells (d2l_utils/expectations/lesson09.py) ----------------


def test_rounding_ties_away_differs_from_ties_to_even_only_at_ties():
    x = torch.randn(100_000, generator=torch.Generator().manual_seed(3))
    away, even = lesson09.round_ties_away(x), d2l.round_mantissa(x, 10)
    differ = away != even
    dropped = x.view(torch.int32) & 0x1FFF                       # the 13 bits TF32 drops
    assert torch.equal(differ, differ & (dropped == 0x1000))      # only where they are exactly half
    assert (away[differ].abs() > even[differ].abs()).all()        # and then away from zero
    assert lesson09.round_ties_away(torch.tensor(lesson09.NEAR_1024)).tolist() == [1024, 1025, 1025, 1026]
    assert lesson09.truncate(torch.tensor(lesson09.NEAR_1024)).tolist() == [1024, 1024, 1024, 1025]
    with pytest.raises(TypeError):
        lesson09.round_ties_away(torch.ones(2, dtype=torch.float64))


def test_the_float32_error_model_matches_sums_taken_one_term_after_the_other():
    k, g = 512, torch.Generator().manual_seed(0)
    a, b = torch.randn(64, k, generator=g), torch.randn(k, 64, generator=g)
    acc = torch.zeros(64, 64)
    for i in range(k):                                            # one term after the other, as a GPU thread adds
        acc += a[:, i:i + 1] * b[i:i + 1, :]
    exact = a.double() @ b.double()
    measured = ((acc.double() - exact).norm() / exact.norm()).item()
    model = lesson09.float32_product_error(k)
    assert 0.8 < measured / model.value < 1.25 and model.low < measured < model.high


def _autocast_lists():
    header = pathlib.Path(torch.__file__).parent / 'include' / 'ATen' / 'autocast_mode.h'
    if not header.exists():
        pytest.skip(f'this PyTorch installs no {header.name} (a build without C++ headers)')
    text = header.read_text()
    lists = {}
    for name in ('AT_FORALL_LOWER_PRECISION_FP', 'AT_FORALL_FP32', 'AT_FORALL_FP32_SET_OPT_DTYPE'):
        body = re.search(rf'#define {name}\(_\)(.*?)\n\n', text, re.S).group(1)
        lists[name] = set(re.findall(r'_\((\w+)', body))
    return lists


def test_autocast_cuda_expectation_follows_the_installed_lists():
    """The expectation of 09-autocast-cuda names, for each operation of the cell, the CUDA list
    that decides its dtype (or none): the header installed with PyTorch must agree."""
    lists = _autocast_lists()
    for name, (op, listed) in lesson09.AUTOCAST_CUDA.items():
        found = [k for k, ops in lists.items() if op in ops]
        assert found == ([listed] if listed else []), (name, op, found)
    assert 'nll_loss' in lists['AT_FORALL_FP32']          # cross_entropy's float32 comes from here
    assert 'log_softmax' in lists['AT_FORALL_FP32_SET_OPT_DTYPE']


class _LiveBytes(TorchDispatchMode):
    """Bytes of the storages the operations inside create, alive at once (the peak): each storage
    counted once, dropped when the last tensor on it dies. Storages of ``known`` tensors are not counted."""

    def __init__(self, known):
        super().__init__()
        self.refs, self.size, self.now, self.peak = collections.Counter(), {}, 0, 0
        for t in known:
            key = t.untyped_storage().data_ptr()
            self.size[key], self.refs[key] = 0, 10**9

    def _drop(self, key):
        self.refs[key] -= 1
        if self.refs[key] == 0:
            self.now -= self.size.pop(key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                key = t.untyped_storage().data_ptr()
                if key not in self.size:
                    self.size[key] = t.untyped_storage().nbytes()
                    self.now += self.size[key]
                self.refs[key] += 1
                weakref.finalize(t, self._drop, key)
        self.peak = max(self.peak, self.now)
        return out


@pytest.mark.parametrize('mode', ['float32', 'bfloat16'])
def test_the_train_step_memory_model_agrees_with_a_count_of_live_tensors(mode):
    """09-train-step's peak, counted on a CPU at a small size with the cell's shape (batch = 2 x
    width): float32 exactly; under autocast the count cannot see mse_loss's temporary inside its
    kernel (one float32 activation), which the model adds at the end of the forward pass."""
    width, batch, layers = 64, 128, 4
    torch.manual_seed(0)
    net = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(width, width), nn.ReLU())])
    xb, yb = torch.randn(batch, width), torch.randn(batch, width)
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-4)
    dtype = None if mode == 'float32' else torch.bfloat16

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast('cpu', dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            loss = F.mse_loss(net(xb), yb)
        loss.backward()
        optimizer.step()
    step()
    optimizer.zero_grad(set_to_none=True)
    live = _LiveBytes([*net.parameters(), xb, yb])
    with live:
        step()
    fixed = sum(p.numel() * 4 for p in net.parameters()) + 2 * batch * width * 4
    model = lesson09.train_step_peak_bytes(mode, width, batch, layers) - fixed
    activation = batch * width * 4
    if mode == 'float32':
        assert abs(live.peak - model) <= 64                       # a scalar or two: the loss's seed gradient
    else:
        assert live.peak <= model <= live.peak + activation
    assert lesson09.train_step_peak_bytes('bfloat16') < lesson09.train_step_peak_bytes('float32')


def test_matmul_rates_know_what_a_t4_lacks():
    from d2l_utils import gpu_models
    t4, h200 = gpu_models.DATASHEET['T4'], gpu_models.DATASHEET['H200']
    assert lesson09.matmul_tflops(8192, t4, 'tf32').value == lesson09.matmul_tflops(8192, t4, 'float32').value
    assert lesson09.matmul_tflops(8192, t4, 'bfloat16').low < lesson09.matmul_tflops(8192, t4, 'float32').low
    assert lesson09.matmul_tflops(8192, h200, 'bfloat16').value > 10 * lesson09.matmul_tflops(8192, h200, 'float32').value
    with pytest.raises(ValueError, match='dtype must be'):
        lesson09.matmul_tflops(8192, h200, 'float64')
    assert math.isclose(lesson09.train_step_flops(), 11 * 2 * 8192 * 4096**2)
    with pytest.raises(ValueError, match='mode must be'):
        lesson09.train_step_peak_bytes('float8')


def test_the_tf32_rule_is_judged_where_the_evidence_reaches():
    """Ampere and Ada (mma.sync) are expected to round and are judged; Hopper (wgmma, which reads its
    shared-memory operands truncated) is shown but not judged; below 8.0 there is no TF32."""
    from d2l_utils import gpu_models
    from d2l_utils.expectations import expected_for
    for gpu in gpu_models.DATASHEET.values():
        items = {i['name']: i for i in expected_for('09-tf32-inputs', gpu).items}
        rule = items['rule']
        if gpu.capability < (8, 0):
            assert rule['value'] == ['none'] and rule.get('not_judged') is None, gpu.key
        elif gpu.capability < (9, 0):
            assert rule['value'] == ['rounded'] and rule.get('not_judged') is None, gpu.key
        else:
            assert rule.get('not_judged'), gpu.key
            assert all(i.get('not_judged') for i in expected_for('09-tf32-matmul', gpu).items
                       if i['name'] != 'err_fp32'), gpu.key


def test_the_three_tf32_rules_are_told_apart_by_their_errors():
    """The cell names the rule whose emulated error is nearest, within 0.8-1.25: the three rules'
    errors must lie more than 1.25 x 1.25 apart, so that no error matches two."""
    _, errors, _ = lesson09.tf32_simulation()
    assert errors['rounded'] * 1.25**2 < errors['mixed'] and errors['mixed'] * 1.25**2 < errors['truncated']
