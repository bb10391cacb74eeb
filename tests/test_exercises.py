"""Every lesson asks the reader, at least twice, to predict, then measure, then explain.

An exercise counts when its task (one numbered item of "## Exercises") names the three
steps as emphasised words (*Predict* or **Predict**, a measuring verb, *explain*) and its
worked solution (the "#@title Solution N" cells, with "#@title Solution N, run" and the like)
writes the prediction down before it measures. Concretely:

- The prediction is written where the solution's code first assigns a name that says so
  (``predicted``, ``predicted_pieces``, ``predicted[n]``), or a name on a line whose comment
  starts a prediction (``# predicted: ...``), or where a ``# Prediction:`` comment or a
  printed text saying "predicted" first appears.
- A measurement is a call of a timing or measuring helper: the clocks (``time.perf_counter``,
  ``time.time``, ``timeit``, ``torch.utils.benchmark``, CUDA events), the profiler
  (``torch.profiler.profile``, ``FlopCounterMode``), memory readings (``saved_tensors_hooks``,
  ``torch.cuda.memory_allocated`` and the like), or a function of the lesson or of its
  helpers (``d2l.time_op``, ``copy_bandwidth``, ``saved_tensor_bytes``, ``clock``,
  ``second_job``, ``epoch``...) that calls one, found by reading their code.
- Each measured value that the solution compares with the prediction (a name read by a
  statement that reads the prediction or prints "predicted", and assigned, directly or
  through a computation, by a measurement) is measured after the prediction is written.
  Measurements the prediction is computed from (its inputs: "from the time measured without
  the profiler") may come first. Where nothing measured is compared, no measurement may come
  before the prediction, except its inputs.
- A prediction the stored output prints is a possible value: not negative, not NaN or
  infinite, and not a zero time.
"""
import ast
import math
import re

import pytest
from conftest import NOTEBOOKS, ROOT, cells, source

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


def solution_cells(path):
    """{number: [every code cell titled "Solution N" or "Solution N, ..."], in lesson order}."""
    found = {}
    for cell in cells(path):
        match = re.match(r"\s*#@title Solution (\d+)\b", source(cell))
        if cell["cell_type"] == "code" and match:
            found.setdefault(int(match[1]), []).append(cell)
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
    solved, measuring = solution_cells(path), measuring_functions(path)
    problems = []
    for n in predict_measure_explain(path):
        assert n in solved, f"{path.name}: exercise {n} has no '#@title Solution {n}' cell"
        assert all(cell["outputs"] for cell in solved[n]), f"{path.name}, Solution {n}: no stored output"
        code = "\n".join(source(cell) for cell in solved[n])
        problems += [f"{path.name}, Solution {n}: {p}" for p in order_problems(code, measuring)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_stored_solution_prints_an_impossible_prediction(path):
    problems = []
    for n, solution in solution_cells(path).items():
        for cell in solution:
            text = "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                           for o in cell["outputs"])
            problems += [f"{path.name}, Solution {n} printed {p!r}" for p in impossible_predictions(text)]
    assert not problems, ("a prediction that no measurement can meet (say what the model misses, or "
                          "predict from inputs that cannot give it):\n" + "\n".join(problems))


# ------------------------------------------------------------------------- reading the code
# The calls that measure, by their dotted name as the lessons write them.
CLOCKS = re.compile(
    r"(?:time\.(?:perf_counter|perf_counter_ns|process_time|time)|timeit\.\w+|(?:\w+\.)*benchmark\.Timer"
    r"|(?:torch\.)?(?:cuda\.)?Event|(?:torch\.)?(?:profiler\.)?profile|(?:\w+\.)*FlopCounterMode"
    r"|(?:\w+\.)*saved_tensors_hooks|(?:torch\.)?cuda\.(?:memory\.)?(?:max_)?(?:memory_allocated|memory_reserved"
    r"|mem_get_info|memory_stats|memory_snapshot|_record_memory_history|_snapshot)"
    r"|\w+(?:\.\w+)*\.(?:elapsed_time|get_total_flops|key_averages|blocked_autorange|adaptive_autorange))")
PREDICTION_COMMENT = re.compile(r"#\s*(?:the\s+)?predict(?:ion|ed)\s*[:,(.]", re.I)
PREDICTION_NAME = re.compile(r"predict", re.I)


def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value) or 'x'}.{node.attr}"
    return None


def _short(call):
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)


def _parse(code):
    """The code's syntax tree; IPython's `%` and `!` lines left out."""
    return ast.parse("\n".join("" if re.match(r"\s*[%!]", line) else line for line in code.splitlines()))


def _calls(node):
    """The calls in ``node``, not those in the bodies of functions it defines (lambdas count)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return
    if isinstance(node, ast.Call):
        yield node
    for child in ast.iter_child_nodes(node):
        yield from _calls(child)


def measuring_functions(path):
    """The names of the functions, in the lesson and in the helpers, that call a clock, the profiler
    or a memory reading, directly or through one another (the lesson's own definitions first)."""
    defs = {}
    codes = [(ROOT / "d2l_utils" / "lessons.py").read_text(encoding="utf-8")]
    codes += [source(c) for c in cells(path) if c["cell_type"] == "code"]
    for code in codes:
        try:
            tree = _parse(code)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                calls = [c for c in ast.walk(node) if isinstance(c, ast.Call)]
                defs[node.name] = (any(CLOCKS.fullmatch(_dotted(c.func) or "") for c in calls),
                                   {_short(c) for c in calls})
    found = {name for name, (clock, _) in defs.items() if clock}
    while True:
        more = {name for name, (_, called) in defs.items() if called & found} - found
        if not more:
            return found
        found |= more


def _is_measurement(call, measuring):
    return bool(CLOCKS.fullmatch(_dotted(call.func) or "")) or _short(call) in measuring


def _targets(node):
    """The names a target assigns (a tuple's names; the base name of ``d[k]`` or ``o.a``)."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, (ast.Tuple, ast.List)):
        return set().union(*(_targets(e) for e in node.elts)) if node.elts else set()
    if isinstance(node, (ast.Subscript, ast.Attribute, ast.Starred)):
        return _targets(node.value)
    return set()


def _statements(body):
    """(line, assigned names, read names, the node whose calls run there, texts) of every
    statement that runs, compound statements' headers included, function bodies left out."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.lineno, {node.name}, set(), None, []
            continue
        if isinstance(node, (ast.For, ast.AsyncFor)):
            header, assigned = node.iter, _targets(node.target)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            header = ast.Tuple([i.context_expr for i in node.items], ast.Load())
            assigned = set().union(*(_targets(i.optional_vars) for i in node.items if i.optional_vars))
        elif isinstance(node, (ast.If, ast.While)):
            header, assigned = node.test, set()
        elif isinstance(node, ast.Try):
            header, assigned = None, set()
        else:
            header = node
            assigned = set()
            if isinstance(node, ast.Assign):
                assigned = set().union(*(_targets(t) for t in node.targets))
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                assigned = _targets(node.target)
        if header is not None:
            reads = {n.id for n in ast.walk(header) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            if isinstance(node, ast.AugAssign):
                reads |= assigned
            texts = [n.value for n in ast.walk(header) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            yield node.lineno, assigned, reads, header, texts
        for field in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(node, field, []))
        for handler in getattr(node, "handlers", []):
            yield from _statements(handler.body)


def order_problems(code, measuring):
    """What is wrong with the order of prediction and measurement in a solution's ``code``."""
    lines = code.splitlines()
    statements = list(_statements(_parse(code).body))
    comment_lines = [n for n, line in enumerate(lines, 1) if PREDICTION_COMMENT.search(line)]
    predicted = {name for _, assigned, _, _, _ in statements for name in assigned if PREDICTION_NAME.search(name)}
    predicted |= {name for line, assigned, _, _, _ in statements if line in comment_lines for name in assigned}
    written = [line for line, assigned, _, _, texts in statements
               if assigned & predicted or any(PREDICTION_NAME.search(t) for t in texts)] + comment_lines
    if not written:
        return ["write the prediction down (a `# Prediction:` comment, a `predicted` value, or a printed "
                "'predicted ...') before measuring"]
    first = min(written)
    measured_at = [(line, assigned) for line, assigned, _, header, _ in statements
                   if header is not None and any(_is_measurement(c, measuring) for c in _calls(header))]
    # Names that come from a measurement, directly or through a computation (the prediction aside).
    measured = {}
    for line, assigned, reads, header, _ in statements:
        if any(line == m for m, _ in measured_at) or reads & set(measured):
            for name in assigned - predicted:
                measured.setdefault(name, line)
    # The prediction's inputs: what its assignments read, and what those were computed from.
    inputs, frontier = set(), {n for _, assigned, reads, _, _ in statements if assigned & predicted for n in reads}
    while frontier - inputs:
        inputs |= frontier
        frontier = {n for line, assigned, reads, _, _ in statements if assigned & frontier and line <= first
                    for n in reads} | inputs
    problems = []
    compared = {name for line, assigned, reads, _, texts in statements
                if not assigned & predicted and (reads & predicted or any(PREDICTION_NAME.search(t) for t in texts))
                for name in reads}
    for name in sorted((compared & set(measured)) - predicted - inputs):
        if measured[name] < first:
            problems.append(f"`{name}`, compared with the prediction, is measured on line {measured[name]}, "
                            f"before the prediction is written (line {first}): measure it after predicting")
    if not problems:
        early = [line for line, assigned in measured_at if line < first and not assigned & inputs]
        if early and not compared & set(measured):
            problems.append(f"line {early[0]} measures before the prediction is written (line {first})")
    return problems


NUMBER = r"(?<![\w.])([-−]?(?:\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?|nan|inf))\s*(ms|µs|us|ns|s\b)?"
PRINTED_PREDICTION = re.compile(r"\bpredict(?:ed|ion)?\b[^\n]{0,60}?" + NUMBER, re.I)


def impossible_predictions(text):
    """The printed predictions in ``text`` that no measurement can meet: negative, NaN, infinite,
    or a time of zero."""
    found = []
    for match in PRINTED_PREDICTION.finditer(text):
        number, unit = match[1].replace("−", "-").replace(",", ""), match[2]
        value = float(number)
        if value < 0 or math.isnan(value) or math.isinf(value) or (unit and value == 0):
            found.append(match[0])
    return found


PLANTED = """#@title Solution 9
measured = d2l.time_op(lambda: f(x))
predicted = 2 * n / bandwidth
print(f'predicted {predicted}, measured {measured}')
"""


def test_the_order_check_finds_a_prediction_written_after_measuring():
    helpers = {"time_op"}
    assert order_problems(PLANTED, helpers) and "`measured`" in order_problems(PLANTED, helpers)[0]
    fixed = "\n".join(PLANTED.splitlines()[i] for i in (0, 2, 1, 3))
    assert order_problems(fixed, helpers) == []
    # A prediction computed from a measurement may follow it; what it is compared with may not.
    inputs = ("t8 = second_job(8)\npredicted = 32 * t8\nt256 = second_job(256)\n"
              "print(f'predicted {predicted}, measured {t256}')")
    assert order_problems(inputs, {"second_job"}) == []
    late = ("slow = fast = 1\nfor _ in range(2):\n    slow = min(slow, second_job(8))\n"
            "    fast = min(fast, second_job(256))\npredicted = slow / 2\nprint(f'{predicted} {fast}')")
    assert order_problems(late, {"second_job"}), "fast is measured before the prediction"
    # A printed prediction computed from what was just measured is written after it.
    printed = "slow = d2l.time_op(step)\nprint(f'predicted {slow - charged:.2f} ms')"
    assert order_problems(printed, helpers)
    assert order_problems("measured = d2l.time_op(step)\nprint(measured)", helpers)[0].startswith("write")
    # A clock is a measurement with no helper at all; so is a profile.
    assert order_problems("t = time.perf_counter()\n# Prediction: 2 ms\nprint(t)", set())
    assert order_problems("with profile() as prof:\n    f()\n# Prediction: 2 ms\nprint(prof)", set())


def test_the_output_check_finds_an_impossible_prediction():
    assert impossible_predictions("step 8.84 ms: predicted -0.14 ms after the fix, measured 0.54 ms")
    assert impossible_predictions("predicted nan ms") and impossible_predictions("predicted 0.00 ms")
    assert not impossible_predictions("predicted break-even: 62,511 calls after a cold compile")
    assert not impossible_predictions("predicted +100.7 MFLOP, counted +50.3 MFLOP")
    assert not impossible_predictions("batch of 10: predicted [3, 3, 3, 1], measured [3, 3, 3, 1]")


def test_the_counter_tells_a_real_exercise_from_a_question():
    assert is_predict_measure_explain("*Predict* the time; *measure* it; *explain* the gap.")
    assert is_predict_measure_explain("**Predict** N. **Count** them. **Explain** why.")
    assert not is_predict_measure_explain("Predict the time, then measure it and explain it.")
    assert not is_predict_measure_explain("*Predict* the time and *measure* it.")
