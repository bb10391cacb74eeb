"""Labs 3 and 4 through the grader: the check of tests/test_autograde.py (which grades labs 1 and 2), in
a module of its own so that pytest-xdist can run the two halves on its two workers."""
import pytest
from conftest import slow
from test_autograde import FIRST_LABS, autograde, check_grading

LATER_LABS = [lab for lab in sorted(autograde.LABS) if lab not in FIRST_LABS]


@slow("runs the labs' lessons twice under otter: the teacher's and the students' copy (about a minute a lab)")
@pytest.mark.parametrize("lab", LATER_LABS)
def test_the_grader_marks_solved_and_unsolved_submissions(lab, tmp_path):
    check_grading(lab, tmp_path)


def test_the_two_halves_grade_every_lab_once():
    assert sorted(FIRST_LABS + LATER_LABS) == sorted(autograde.LABS) and LATER_LABS
