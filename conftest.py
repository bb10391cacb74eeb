"""On a machine with CUDA GPUs, the lessons never share them.

At the top of the repository, so that pytest loads it for `pytest notebooks/` too.

Each notebook holds an exclusive lock (a file lock, per set of visible GPUs) from before
its first cell, and its kernel's start, until its kernel has shut down. With several
xdist workers the unit tests still run side by side, but the lessons take turns, so that
timings and device-wide memory readings (free memory, a context's size) see one lesson
alone. Without CUDA GPUs nothing is locked; COURSE_GPU_LOCK=1 locks anyway (its test).
"""
import os
import pathlib
import tempfile

import pytest

_held = {}                # notebook path -> open lock file, while that notebook runs


def lessons_take_turns():
    """True where lessons must not run side by side: CUDA GPUs are visible (counted through
    NVML where possible, which makes no CUDA context), or COURSE_GPU_LOCK=1."""
    if os.environ.get("COURSE_GPU_LOCK", "") not in ("", "0"):
        return True
    import torch
    return torch.cuda.device_count() > 0


def lock_file():
    """The lock of the GPUs this process sees."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all").replace(",", "_").replace("/", "_")
    return pathlib.Path(tempfile.gettempdir()) / f"d2l-course-gpus-{visible}.lock"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """Before a notebook's first cell (and its kernel's start), wait until no lesson holds the GPUs."""
    if item.path.suffix == ".ipynb" and item.path not in _held and lessons_take_turns():
        import fcntl                                # POSIX; a GPU machine here is Linux
        lock = open(lock_file(), "w")
        fcntl.flock(lock, fcntl.LOCK_EX)
        _held[item.path] = lock
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After a notebook's last cell, once its kernel has shut down, let the next lesson in."""
    yield
    if item.path in _held and (nextitem is None or nextitem.path != item.path):
        _held.pop(item.path).close()                # closing the file releases the lock


# The Chinese edition (notebooks/zh/) is generated from the English lessons and their stored
# outputs; tests/test_zh.py compares it with them. pytest must not execute it a second time.
collect_ignore = ["notebooks/zh"]
