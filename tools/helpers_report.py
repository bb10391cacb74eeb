"""How much of each saved helper is its idea, and how much is checking its arguments.

    python tools/helpers_report.py            # one line per function, then the totals
    python tools/helpers_report.py --totals   # the totals only

Reads d2l_utils/lessons.py (generated from the lessons' #@save cells). For every function
and method it counts the lines of its body, leaving out the docstring, blank lines and
comments, and splits them in two: *checks* (a statement that only tests an argument and
raises: an `if` whose body is a `raise`, a bare `raise`, or a line that calls
`d2l_utils.checks`) and *idea* (everything else). tests/test_build.py fails when a helper's
checks outnumber its idea.
"""
import argparse
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
LESSONS = ROOT / "d2l_utils" / "lessons.py"


def _code_lines(node, lines):
    """Line numbers of ``node`` that hold code (no blank line, comment or docstring)."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        skip = set(range(body[0].lineno, body[0].end_lineno + 1))
    else:
        skip = set()
    first = body[0].lineno
    return [n for n in range(first, node.end_lineno + 1)
            if n not in skip and lines[n - 1].strip() and not lines[n - 1].strip().startswith("#")]


def _is_check(stmt):
    """A statement that only checks arguments: `raise`, `if ...: raise ...`, or a checks.* call."""
    if isinstance(stmt, ast.Raise):
        return True
    if isinstance(stmt, ast.If) and not stmt.orelse and all(isinstance(s, ast.Raise) for s in stmt.body):
        return True
    calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call)]
    return bool(calls) and all(isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name)
                               and c.func.value.id == "checks" for c in calls)


def helpers(path=LESSONS):
    """Yield (name, lines of checks, lines of idea) for every function and method."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        code = set(_code_lines(node, lines)) - {node.lineno}
        checks = set()
        for stmt in ast.walk(node):
            if isinstance(stmt, ast.stmt) and stmt is not node and _is_check(stmt):
                checks.update(n for n in range(stmt.lineno, stmt.end_lineno + 1) if n in code)
        yield node.name, len(checks), len(code - checks)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--totals", action="store_true", help="print the totals only")
    args = parser.parse_args(argv)
    rows = sorted(helpers(), key=lambda r: -(r[1] + r[2]))
    if not args.totals:
        print(f"{'helper':32} {'checks':>6} {'idea':>5}")
        for name, checks, idea in rows:
            print(f"{name:32} {checks:6} {idea:5}" + ("   <- mostly checks" if checks > idea else ""))
    text = LESSONS.read_text(encoding="utf-8")
    public = len(ast.literal_eval(next(n.value for n in ast.parse(text).body if isinstance(n, ast.Assign)
                                       and getattr(n.targets[0], "id", "") == "__all__")))
    print(f"{len(rows)} functions ({public} public names): {sum(r[1] for r in rows)} lines of checks, "
          f"{sum(r[2] for r in rows)} of idea; {text.count('raise ')} raise statements; "
          f"mostly checks: {sum(r[1] > r[2] for r in rows)}; longest: {rows[0][0]} "
          f"({rows[0][1] + rows[0][2]} lines)")


if __name__ == "__main__":
    main()
