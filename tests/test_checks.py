"""d2l_utils.checks: the one-line argument checks that the saved helpers use."""
import numpy as np
import pytest
import torch
from torch import nn

from d2l_utils import checks


def test_checks_return_the_value_converted():
    assert checks.integer(np.int64(3), 'n', low=1) == 3 and checks.integer(torch.tensor(2), 'n') == 2
    assert checks.number(2, 'x', above=0) == 2.0 and isinstance(checks.number(2, 'x'), float)
    assert checks.devices('cpu') == [torch.device('cpu')]
    assert checks.tensors((t for t in [torch.ones(1)]), 'ts')[0].shape == (1,)
    assert checks.environment(None) is None and checks.environment({'A': '1'}) == {'A': '1'}


@pytest.mark.parametrize('call, error, message', [
    (lambda: checks.integer(True, 'n'), TypeError, 'n must be an int, not bool'),
    (lambda: checks.integer(1.0, 'n'), TypeError, 'n must be an int, not float'),
    (lambda: checks.integer(0, 'n', low=1), ValueError, 'n must be >= 1, got 0'),
    (lambda: checks.integer(24, 'bits', 0, 23), ValueError, 'bits must be between 0 and 23, got 24'),
    (lambda: checks.number('1', 'x'), TypeError, 'x must be a number, not str'),
    (lambda: checks.number(float('inf'), 'x'), ValueError, 'x must be finite'),
    (lambda: checks.number(0, 'x', above=0), ValueError, 'x must be > 0'),
    (lambda: checks.number(-1, 'x', low=0), ValueError, 'x must be >= 0'),
    (lambda: checks.flag(1, 'pinned'), TypeError, 'pinned must be True or False'),
    (lambda: checks.function(3, 'fn'), TypeError, 'fn must be callable'),
    (lambda: checks.one_of('x', 'optimizer', {'sgd', 'adam'}), ValueError, r"one of \['adam', 'sgd'\]"),
    (lambda: checks.instance(3, 'net', nn.Module, 'an nn.Module'), TypeError, 'net must be an nn.Module, not int'),
    (lambda: checks.tensor(torch.ones(1).double(), 'x', torch.float32), TypeError, 'x must be a float32 tensor'),
    (lambda: checks.tensors([torch.ones(1), 2], 'exclude'), TypeError, 'exclude must hold tensors'),
    (lambda: checks.devices([]), ValueError, 'at least one device'),
    (lambda: checks.devices(7), TypeError, 'a device must be a str or torch.device, not int'),
    (lambda: checks.devices('gpu'), ValueError, "not a device: 'gpu'"),
    (lambda: checks.devices('meta'), ValueError, 'not present'),
    (lambda: checks.environment({'A': 1}), TypeError, 'env must be a dict of strings'),
])
def test_checks_name_the_argument_and_what_was_expected(call, error, message):
    with pytest.raises(error, match=message):
        call()
