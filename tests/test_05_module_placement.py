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
    ("elsewhere", ValueError, "net.to"),
    ("empty", ValueError, "no batches"),
])
def test_train_epoch_rejects_bad_input(which, error, match):
    net, opt = _setup()
    args = dict(net=net, data_iter=_loader(), loss_fn=nn.MSELoss(), optimizer=opt, device='cpu')
    args.update({"net": {"net": lambda x: x}, "loss_fn": {"loss_fn": "mse"},
                 "optimizer": {"optimizer": object()}, "device": {"device": 0},
                 "device_name": {"device": "not-a-device"}, "elsewhere": {"device": "meta"},
                 "empty": {"data_iter": []}}[which])
    with pytest.raises(error, match=match):
        d2l.train_epoch(**args)
