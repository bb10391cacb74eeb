"""Lessons 8-14 on the CUDA stand-in: the check of tests/test_gpu_branches.py (which runs lessons 1-7),
in a module of its own so that pytest-xdist can run the two halves on its two workers."""
import pytest
from conftest import slow
from test_gpu_branches import LESSONS, check_lesson

SECOND_HALF = [p for p in LESSONS if int(p.name[:2]) > 7]


@slow('re-executes every lesson on the CUDA stand-in, 8 s to 1.5 min a lesson')
@pytest.mark.parametrize('path', SECOND_HALF, ids=[p.stem for p in SECOND_HALF])
def test_gpu_branches_run_on_the_standin(path):
    check_lesson(path)


def test_the_two_halves_cover_every_lesson_once():
    from test_gpu_branches import FIRST_HALF
    assert sorted(FIRST_HALF + SECOND_HALF) == sorted(LESSONS) and not set(FIRST_HALF) & set(SECOND_HALF)
