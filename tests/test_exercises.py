"""Every lesson asks the reader, at least twice, to predict, then measure, then explain.

An exercise counts when its task (one numbered item of "## Exercises") names the three
steps as emphasised words (*Predict* or **Predict**, a measuring verb, *explain*) and its
worked solution (the "#@title Solution N" cell) writes the prediction down before it
measures: the solution's source says "predict" (in a comment or a name) before the
measurement's output appears.
"""
import re

import pytest
from conftest import NOTEBOOKS, cells, source

MINIMUM = 2
EMPHASIS = r"(?:\*\*|\*|_)"
PREDICT = re.compile(EMPHASIS + r"predict\w*" + EMPHASIS, re.I)
MEASURE = re.compile(EMPHASIS + r"(?:measure|count|time|check|watch|run|profile)\w*" + EMPHASIS, re.I)
EXPLAIN = re.compile(EMPHASIS + r"explain\w*" + EMPHASIS, re.I)


def exercises(path):
    """{number: task text} of the lesson's "## Exercises" section."""
    for cell in cells(path):
        text = source(cell)
        if cell["cell_type"] == "markdown" and re.search(r"^## Exercises$", text, re.M):
            body = re.split(r"^## Exercises$", text, flags=re.M)[1]
            parts = re.split(r"^(\d+)\. ", body, flags=re.M)[1:]
            return {int(n): task for n, task in zip(parts[::2], parts[1::2])}
    raise AssertionError(f"{path.name} has no '## Exercises' section")


def solutions(path):
    found = {}
    for cell in cells(path):
        match = re.match(r"\s*#@title Solution (\d+)", source(cell))
        if cell["cell_type"] == "code" and match:
            found[int(match[1])] = cell
    return found


def is_predict_measure_explain(task):
    return bool(PREDICT.search(task) and MEASURE.search(task) and EXPLAIN.search(task))


def predict_measure_explain(path):
    return [n for n, task in exercises(path).items() if is_predict_measure_explain(task)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_lesson_has_two_predict_measure_explain_exercises(path):
    found = predict_measure_explain(path)
    assert len(found) >= MINIMUM, (
        f"{path.name}: {len(found)} predict-measure-explain exercise(s) ({found}); the course asks "
        f"for {MINIMUM}: a task with *Predict* ..., *measure* ..., *explain* ... and a solution")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_such_exercise_has_a_solution_that_predicts_before_it_measures(path):
    solved = solutions(path)
    for n in predict_measure_explain(path):
        assert n in solved, f"{path.name}: exercise {n} has no '#@title Solution {n}' cell"
        cell = solved[n]
        assert re.search(r"predict", source(cell), re.I), (
            f"{path.name}, Solution {n}: write the prediction down (a 'Prediction' comment or a "
            f"`predicted` value) before measuring")
        assert cell["outputs"], f"{path.name}, Solution {n}: the solution has no stored output"


def test_the_counter_tells_a_real_exercise_from_a_question():
    assert is_predict_measure_explain("*Predict* the time; *measure* it; *explain* the gap.")
    assert is_predict_measure_explain("**Predict** N. **Count** them. **Explain** why.")
    assert not is_predict_measure_explain("Predict the time, then measure it and explain it.")
    assert not is_predict_measure_explain("*Predict* the time and *measure* it.")
