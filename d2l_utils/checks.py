"""Argument checks for the helpers that the lessons save: one readable line each.

Course machinery, written by hand like ``recordings.py`` (``lessons.py`` is generated from
the lessons). A ``#@save`` helper is lesson material: its idea comes first, and it checks an
argument only where a likely mistake would otherwise give a silent wrong answer or an
error deep inside PyTorch. Such a check is one line, with a name that reads as English::

    from d2l_utils import checks

    def copy_bandwidth(nbytes, src='cpu', dst='cpu', pinned=False):
        nbytes = checks.integer(nbytes, 'nbytes', low=1)
        src, dst = checks.devices([src, dst])

Each check returns the value (converted where that helps: an int, a float, a list of
``torch.device``) and raises ``TypeError`` for a value of the wrong kind or ``ValueError``
for one out of range, with a message that names the argument and says what it expected.
"""
import math
import numbers
import operator

import torch

__all__ = ['integer', 'number', 'flag', 'function', 'one_of', 'instance', 'tensor', 'tensors',
           'devices', 'environment']


def _describe(value):
    return f'{type(value).__name__} {value!r}'[:80]


def integer(value, name, low=None, high=None):
    """``value`` as an int, if it is an integer (a bool is not; a NumPy integer or a one-element
    integer tensor is) and ``low <= value <= high``."""
    if isinstance(value, bool) or not hasattr(type(value), '__index__'):
        raise TypeError(f'{name} must be an int, not {_describe(value)}')
    value = operator.index(value)
    if low is not None and high is not None and not low <= value <= high:
        raise ValueError(f'{name} must be between {low} and {high}, got {value}')
    if low is not None and value < low:
        raise ValueError(f'{name} must be >= {low}, got {value}')
    if high is not None and value > high:
        raise ValueError(f'{name} must be <= {high}, got {value}')
    return value


def number(value, name, above=None, low=None):
    """``value`` as a float, if it is a finite real number, ``> above`` and ``>= low``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f'{name} must be a number, not {_describe(value)}')
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f'{name} must be finite, got {value}')
    if above is not None and not value > above:
        raise ValueError(f'{name} must be > {above}, got {value}')
    if low is not None and not value >= low:
        raise ValueError(f'{name} must be >= {low}, got {value}')
    return value


def flag(value, name):
    """``value``, if it is True or False (not 1, not 'yes')."""
    if not isinstance(value, bool):
        raise TypeError(f'{name} must be True or False, not {_describe(value)}')
    return value


def function(value, name):
    """``value``, if it can be called (a function or a lambda, not its result)."""
    if not callable(value):
        raise TypeError(f'{name} must be callable (e.g. a lambda), not {type(value).__name__}')
    return value


def one_of(value, name, choices):
    """``value``, if it is one of ``choices``."""
    if value not in choices:
        raise ValueError(f'{name} must be one of {sorted(choices)}, not {value!r}')
    return value


def instance(value, name, kind, wanted):
    """``value``, if it is an instance of ``kind`` (a class, or a tuple of classes);
    ``wanted`` says in words what was expected, e.g. 'an nn.Module' or 'a path'."""
    if not isinstance(value, kind):
        raise TypeError(f'{name} must be {wanted}, not {type(value).__name__}')
    return value


def tensor(value, name, dtype=None):
    """``value``, if it is a tensor (of ``dtype``, when given)."""
    if not isinstance(value, torch.Tensor) or (dtype is not None and value.dtype != dtype):
        wanted = f'a {str(dtype).removeprefix("torch.")} tensor' if dtype else 'a tensor'
        raise TypeError(f'{name} must be {wanted}, not {getattr(value, "dtype", type(value).__name__)}')
    return value


def tensors(values, name):
    """``values`` as a list, if every item is a tensor (``values`` is a list, tuple or generator)."""
    values = list(values) if isinstance(values, (list, tuple)) or hasattr(values, '__next__') else values
    if not isinstance(values, list) or not all(isinstance(t, torch.Tensor) for t in values):
        raise TypeError(f'{name} must hold tensors, e.g. [*model.parameters(), x]')
    return values


def devices(device):
    """``device`` (a device, or a list or tuple of them) as a list of ``torch.device`` that
    exist on this machine: the CPU, or an index below the accelerator's device count."""
    items = list(device) if isinstance(device, (list, tuple)) else [device]
    if not items:
        raise ValueError('give at least one device')
    present = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    found = []
    for d in items:
        if not isinstance(d, (str, torch.device)):
            raise TypeError(f'a device must be a str or torch.device, not {_describe(d)}')
        try:
            d = torch.device(d)
        except RuntimeError:
            raise ValueError(f'not a device: {d!r}') from None
        if d.type != 'cpu' and (present is None or d.type != present.type
                                or (d.index or 0) >= torch.accelerator.device_count()):
            raise ValueError(f'device {d} is not present on this machine')
        found.append(d)
    return found


def environment(env, name='env'):
    """``env``, if it is None or a dict of environment variables (strings to strings)."""
    if env is not None and not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str)
                                                            for k, v in env.items())):
        raise TypeError(f'{name} must be a dict of strings (variable: value), not {env!r}'[:200])
    return env
