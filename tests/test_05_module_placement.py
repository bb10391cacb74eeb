"""Unit tests of lesson 5's helpers: synthetic_data and train_epoch."""
import pytest
import torch
from torch import nn

import d2l_utils as d2l


def _loader(n=64, batch_size=16):
    torch.manual_seed(0)
    X, y = d2l.synthetic_data(torch.tensor([2.0, -3.4]), 4.2, n)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=batch_size)


def _setup():
    torch.manual_seed(0)
    net = nn.Linear(2, 1)
    return net, torch.optim.SGD(net.parameters(), lr=0.05)


def test_synthetic_data_shapes_and_relation():
    torch.manual_seed(0)
    w = torch.tensor([2.0, -3.4])
    X, y = d2l.synthetic_data(w, 4.2, 500)
    assert X.shape == (500, 2) and y.shape == (500, 1)
    assert X.dtype == y.dtype == torch.float32
    noise = y.squeeze(1) - (X @ w + 4.2)
    assert noise.abs().max() < 0.1 and 0.005 < noise.std() < 0.02


def test_synthetic_data_follows_w_device_and_dtype():
    X, y = d2l.synthetic_data(torch.ones(3, dtype=torch.float64, device='meta'), 0, 4)
    assert X.device.type == y.device.type == 'meta'
    assert X.dtype == y.dtype == torch.float64 and X.shape == (4, 3)


@pytest.mark.parametrize("w, b, n, error", [
    ([2.0, -3.4], 4.2, 10, TypeError),               # w not a tensor
    (torch.ones(2, 2), 4.2, 10, ValueError),          # w not 1-D
    (torch.tensor([1, 2]), 4.2, 10, ValueError),      # w not floating point
    (torch.ones(2), 'b', 10, TypeError),
    (torch.ones(2), True, 10, TypeError),
    (torch.ones(2), 4.2, 10.0, TypeError),
    (torch.ones(2), 4.2, True, TypeError),
    (torch.ones(2), 4.2, 0, ValueError),
])
def test_synthetic_data_rejects_bad_input(w, b, n, error):
    with pytest.raises(error):
        d2l.synthetic_data(w, b, n)


def test_train_epoch_returns_mean_loss_and_learns():
    net, opt = _setup()
    loader = _loader()
    losses = [d2l.train_epoch(net, loader, nn.MSELoss(), opt, 'cpu') for _ in range(10)]
    assert all(isinstance(l, float) for l in losses)
    assert losses[-1] < losses[0] / 10
    assert net.training


def test_train_epoch_mean_is_weighted_by_batch_size():
    # with lr=0 nothing changes, so the epoch loss must equal the loss over all examples
    net, _ = _setup()
    opt = torch.optim.SGD(net.parameters(), lr=0.0)
    loader = _loader(n=50, batch_size=16)               # batches of 16, 16, 16, 2
    X, y = loader.dataset.tensors
    expected = nn.functional.mse_loss(net(X), y).item()
    got = d2l.train_epoch(net, loader, nn.MSELoss(), opt, torch.device('cpu'))
    assert got == pytest.approx(expected, rel=1e-5)


def test_train_epoch_runs_on_try_gpu():
    dev = d2l.try_gpu()
    net, _ = _setup()
    net.to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    assert d2l.train_epoch(net, _loader(), nn.MSELoss(), opt, dev) > 0


@pytest.mark.parametrize("which, error, match", [
    ("net", TypeError, "nn.Module"),
    ("loss_fn", TypeError, "callable"),
    ("optimizer", TypeError, "Optimizer"),
    ("device", TypeError, "str or torch.device"),
    ("device_name", ValueError, "not a device"),
    ("absent", ValueError, "not present"),
    ("elsewhere", ValueError, "net.to"),
    ("empty", ValueError, "no batches"),
])
def test_train_epoch_rejects_bad_input(which, error, match):
    net, opt = _setup()
    args = dict(net=net, data_iter=_loader(), loss_fn=nn.MSELoss(), optimizer=opt, device='cpu')
    args.update({"net": {"net": lambda x: x}, "loss_fn": {"loss_fn": "mse"},
                 "optimizer": {"optimizer": object()}, "device": {"device": 0},
                 "device_name": {"device": "not-a-device"}, "absent": {"device": "cuda:99"},
                 "elsewhere": {"net": nn.Linear(2, 1).to('meta')},     # the model not on 'cpu'
                 "empty": {"data_iter": []}}[which])
    with pytest.raises(error, match=match):
        d2l.train_epoch(**args)


# ---- the lesson's story of Adam's two paths (notebooks/05_module_placement.ipynb) ----
# The GPU cell '05-adam-step-mixes-devices' asserts that, with the parameters on CUDA and
# Adam's state left on the CPU, the step fails in _multi_tensor_adam at torch._foreach_lerp_.
# No GPU here: the meta device stands in for CUDA, on the same Python path.
import ast  # noqa: E402
import os  # noqa: E402
import traceback  # noqa: E402

from torch.optim.optimizer import _default_to_fused_or_foreach  # noqa: E402
from torch.utils._foreach_utils import _get_foreach_kernels_supported_devices  # noqa: E402

from conftest import ROOT, code_cells, source  # noqa: E402

LESSON = ROOT / 'notebooks' / '05_module_placement.ipynb'


def lesson_function(name):
    """The function ``name`` as the lesson defines it (only its ``def``, not the rest of the cell)."""
    cell = next(c for c in code_cells(LESSON) if f'def {name}(' in source(c))
    tree = ast.parse(source(cell))
    namespace = {'os': os, 'traceback': traceback}
    exec(compile(ast.Module([n for n in tree.body if getattr(n, 'name', None) == name], []), 'lesson', 'exec'),
         namespace)
    return namespace[name]


def test_adam_loops_on_the_cpu_and_takes_foreach_on_cuda():
    assert _default_to_fused_or_foreach([nn.Parameter(torch.ones(2))], False) == (False, False)
    assert 'cuda' in _get_foreach_kernels_supported_devices()
    assert 'cpu' not in _get_foreach_kernels_supported_devices()


def test_adam_dtype_error_on_the_cpu_comes_from_the_loop():
    where_in_adam = lesson_function('where_in_adam')
    small = nn.Linear(2, 1)
    adam = torch.optim.Adam(small.parameters())
    small(torch.ones(3, 2)).sum().backward()
    adam.step()
    small.to(torch.float64)
    small(torch.ones(3, 2, dtype=torch.float64)).sum().backward()
    with pytest.raises(RuntimeError, match='dtype') as info:
        adam.step()
    assert where_in_adam(info.value) == '_single_tensor_adam: exp_avg.lerp_(grad, 1 - device_beta1)'


def test_foreach_grouping_lets_float32_cpu_state_beside_parameters_elsewhere():
    """The exception meant for step counters also lets a left-behind exp_avg through."""
    p, g = torch.ones(2, device='meta'), torch.ones(2, device='meta')
    grouped = torch._C._group_tensors_by_device_and_dtype([[p], [g], [torch.zeros(2)]], False)
    assert list(grouped) == [(torch.device('meta'), torch.float32)]
    with pytest.raises(RuntimeError, match='same device'):     # an int64 state is not let through
        torch._C._group_tensors_by_device_and_dtype([[p], [g], [torch.zeros(2, dtype=torch.int64)]], False)


def test_adam_foreach_step_with_cpu_state_fails_at_foreach_lerp():
    where_in_adam = lesson_function('where_in_adam')
    w = nn.Parameter(torch.ones(1, 2, device='meta'))          # stands in for a parameter on cuda:0
    adam = torch.optim.Adam([w], foreach=True)                 # what Adam picks by itself on CUDA
    adam.state[w] = {'step': torch.tensor(1.0), 'exp_avg': torch.zeros(1, 2), 'exp_avg_sq': torch.zeros(1, 2)}
    w.grad = torch.ones(1, 2, device='meta')
    with pytest.raises(RuntimeError, match='device') as info:
        adam.step()
    assert where_in_adam(info.value).startswith('_multi_tensor_adam: torch._foreach_lerp_(')


# ---- what the GPU-only cells are expected to show (d2l_utils/expectations/lesson05.py) ----
from d2l_utils import gpu_models  # noqa: E402
from d2l_utils.expectations import expected_for, fmt, lesson05  # noqa: E402

PAGE = ROOT / 'teaching' / '05_module_placement.md'


def expected_items(cell_id, gpu='H200'):
    return {i['name']: i for i in expected_for(cell_id, gpu_models.DATASHEET[gpu]).items}


def test_the_expected_messages_pass_the_gpu_cells_asserts():
    assert 'device' in expected_items('05-cpu-batch-gpu-model')['message']['value'][0]
    raised_in = expected_items('05-adam-step-mixes-devices')['raised_in']['value'][0]
    assert raised_in.startswith('_multi_tensor_adam: torch._foreach_lerp_(')
    assert expected_items('05-cudnn-benchmark')['tuning_is_slowest']['value'] == ['True']


def test_the_convolution_is_counted_as_the_cell_builds_it():
    conv = nn.Conv2d(64, 64, 3, padding=1, device='meta')
    out = conv(torch.empty(32, 64, 57, 57, device='meta'))
    flops, conv_bytes, add_bytes = lesson05.conv_work(57)
    assert flops == 2 * out.numel() * 64 * 3 * 3                  # a multiply and an add per term
    assert add_bytes == 2 * 4 * out.numel()                        # the bias add reads and writes it
    assert conv_bytes == 4 * (2 * out.numel() + conv.weight.numel())
    with pytest.raises(ValueError, match='size'):
        lesson05.conv_work(0)


def test_the_t4_convolves_in_float32_and_the_h200_in_tf32():
    h200 = expected_items('05-cudnn-benchmark')['steady_ms']
    t4 = expected_items('05-cudnn-benchmark', 'T4')['steady_ms']
    assert 'TF32' in h200['why'] and 'no TF32 on the T4' in t4['why']
    assert t4['low'] > 3 * h200['high']                           # 8.1 against 495 TFLOP/s


def test_the_teachers_page_quotes_the_expected_times():
    text = ' '.join(PAGE.read_text(encoding='utf-8').split())
    for gpu in ('H100', 'H200', 'T4'):
        item = expected_items('05-cudnn-benchmark', gpu)['steady_ms']
        assert f"{fmt(item['value'])} ms on the {gpu} ({fmt(item['low'])} to {fmt(item['high'])}" in text, gpu
    ratio = expected_items('05-cudnn-benchmark')['tuned_ratio']
    assert f"{fmt(ratio['value'])} ({fmt(ratio['low'])} to {fmt(ratio['high'])})" in text


def test_the_absolute_times_are_shown_and_their_ratio_judged():
    """Issue 37: a 3-6x range cannot miss. The times are shown, not judged; the tuned call over
    the untuned one, measured in the same run, is judged: the same on every GPU, within 3x."""
    for gpu in gpu_models.DATASHEET:
        items = expected_items('05-cudnn-benchmark', gpu)
        assert items['untuned_ms']['not_judged'] and items['steady_ms']['not_judged']
        ratio = items['tuned_ratio']
        assert not ratio.get('not_judged') and ratio['low'] < 1 < ratio['high'] < 3 * ratio['low']
        assert ratio['value'] == pytest.approx((57 / 56) ** 2)     # the same plan: the larger image


def test_train_epoch_blocks_on_copies_to_the_cpu():
    """A non-blocking copy to the CPU could be read before it lands: only CUDA gets one."""
    calls = []

    class Recording(torch.Tensor):
        def to(self, *args, **kwargs):
            calls.append(kwargs.get('non_blocking', False))
            return torch.Tensor.to(self.as_subclass(torch.Tensor), *args, **kwargs)

    net, opt = _setup()
    X, y = _loader(n=32).dataset.tensors
    batches = [(X[:16].as_subclass(Recording), y[:16].as_subclass(Recording))]
    d2l.train_epoch(net, batches, nn.MSELoss(), opt, 'cpu')
    assert calls == [False, False]
