"""Unit tests of the helper of lesson 6 (notebooks/06_data_parallel.ipynb)."""
import pytest
import torch

import d2l_utils as d2l

CPU = torch.device('cpu')


def test_split_batch_gives_one_chunk_per_device_in_order():
    X, y = torch.arange(32.).reshape(16, 2), torch.arange(16)
    Xs, ys = d2l.split_batch(X, y, [CPU] * 4)
    assert [len(x) for x in Xs] == [4, 4, 4, 4] and [len(t) for t in ys] == [4, 4, 4, 4]
    assert torch.equal(torch.cat(Xs), X) and torch.equal(torch.cat(ys), y)
    assert all(x.device == CPU for x in Xs + ys)


def test_split_batch_accepts_device_names_and_tuples():
    Xs, ys = d2l.split_batch(torch.zeros(6, 3), torch.zeros(6), ('cpu', 'cpu'))
    assert [x.shape for x in Xs] == [torch.Size([3, 3])] * 2
    assert all(t.device == CPU for t in ys)


@pytest.mark.parametrize('n, sizes', [(10, [3, 3, 3, 1]), (3, [1, 1, 1]), (1, [1])])
def test_split_batch_follows_the_chunk_rule_of_scatter(n, sizes):
    Xs, ys = d2l.split_batch(torch.zeros(n, 2), torch.zeros(n), [CPU] * 4)
    assert [len(x) for x in Xs] == sizes == [len(t) for t in ys]


def test_split_batch_keeps_autograd_history():
    X = torch.randn(4, 2, requires_grad=True)
    Xs, _ = d2l.split_batch(X, torch.zeros(4), [CPU, CPU])
    sum(x.sum() for x in Xs).backward()
    assert torch.equal(X.grad, torch.ones(4, 2))


@pytest.mark.parametrize('X, y, devices, error, message', [
    ([1, 2], torch.zeros(2), [CPU], TypeError, 'must be tensors'),
    (torch.zeros(2), None, [CPU], TypeError, 'must be tensors'),
    (torch.zeros(2), torch.zeros(2), 'cpu', TypeError, 'list of devices'),
    (torch.zeros(2), torch.zeros(2), CPU, TypeError, 'list of devices'),
    (torch.zeros(2), torch.zeros(2), [0, 1], TypeError, 'list of devices'),
    (torch.zeros(2), torch.zeros(2), [], ValueError, 'empty'),
    (torch.zeros(2), torch.zeros(2), ['nonsense'], ValueError, 'not a device name'),
    (torch.zeros(3, 2), torch.zeros(2), [CPU], ValueError, 'same number'),
    (torch.zeros(0, 2), torch.zeros(0), [CPU], ValueError, 'same number'),
    (torch.tensor(1.), torch.tensor(1.), [CPU], ValueError, 'same number'),
])
def test_split_batch_rejects_bad_input(X, y, devices, error, message):
    with pytest.raises(error, match=message):
        d2l.split_batch(X, y, devices)
