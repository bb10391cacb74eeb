"""Mark a lab's submitted notebooks: one command, a table of marks with feedback per item.

    python tools/autograde.py LAB SUBMISSION [SUBMISSION ...] [--jobs N] [--json FILE] [--to-exercises]
    python tools/autograde.py 2 handed-in/lab2/* --jobs 2        # every pair's folder of lab 2

LAB is 1-4, as in teaching/kit/workshop.md ("The labs"). Each SUBMISSION is one pair's folder
holding the notebooks of the lab's lessons, as the students' copy names them
(``03_copies_between_devices.ipynb``, anywhere inside the folder); the folder's name names the
pair in the table. The teacher's own lessons (``notebooks/``) grade as a solved submission.

The grading is otter-grader's (``otter run``: local, without Docker; its test files, its notebook
execution and its per-case results). For each lesson of the lab, the checks are the asserts of
the teacher's worked solutions (``student_copy.solution_checks``, read from ``notebooks/`` at every
run, so they follow the lessons), one otter test file per exercise and one test case per assert;
a starter is also checked with ``student_copy.EXTRA_CHECKS`` (what a lab's solution prints but
does not assert yet), the teacher's solution cells with their own asserts only. Each submitted
notebook is executed top to bottom in a fresh kernel (in a temporary folder, errors allowed), and
each exercise's checks run right after its cells (the starter's cells and what the pair added
after them; in the teacher's copy, the solution cells), before a later cell can rebind its names.

A row per item: its mark (2, 1 or 0), the checks that held, whether a prediction was written,
and the checks' messages. 2: every check holds and a prediction is written; 1: every check holds
without a prediction, or a prediction and some checks; 0: otherwise. A row per lesson says
whether its notebook ran to the end without an error (the rubric's "runs top to bottom", 2 or
0). Lab 4's compile item counts the better of lesson 11's exercises 2 and 1. The marks are the
machine's part of the rubric (teaching/kit/rubric.md): the explanations are still read.
Each notebook takes about as long as its lesson (seconds to a minute on a laptop); ``--jobs``
runs several at once, one per free core.
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import student_copy  # noqa: E402

# The labs of teaching/kit/workshop.md: items of (lesson, exercise); a tuple of two exercises
# is an item either of which counts (lab 4: lesson 11 exercise 2, or exercise 1 without a compiler).
LABS = {
    1: [(2, 1), (3, 1), (3, 3)],
    2: [(5, 3), (6, 2), (7, 2)],
    3: [(8, 1), (8, 2), (9, 2)],
    4: [(10, 2), (10, 3), ((11, 2), (11, 1))],
}
PREDICTED = re.compile(r"#\s*Prediction\b|\bpredicted\w*(\[[^\]]*\])?\s*=(?!=)|['\"][^'\"\n]*\bpredicted\b")
# The first cell notes the folder otter runs the notebook in: a lesson may change the working
# directory (lesson 7 works in a scratch folder), and otter finds its tests relative to it.
FIRST_CELL = "# autograde: where the tests are\nimport os as _os_autograde\n_AUTOGRADE_CWD = _os_autograde.getcwd()"
LAST_CELL = "# autograde: back where the tests are\n_os_autograde.chdir(_AUTOGRADE_CWD)"
CHECK_CELL = ("# autograde: check {name}\nimport contextlib as _contextlib_autograde, otter as _otter_autograde\n"
              "with _contextlib_autograde.chdir(_AUTOGRADE_CWD):\n    _otter_autograde.Notebook().check({name!r})")
TEST_FILE = '''OK_FORMAT = False
from otter.test_files import test_case
name = {name!r}
points = {points}

def _check(env, src, names):
    unset = [n for n in names if env.get(n) is None]
    assert not unset, "not computed: " + ", ".join(unset) + " (None or missing)"
    try:
        exec(src, env)
    except AssertionError as e:
        raise AssertionError("does not hold: " + src + (" (" + str(e) + ")" if str(e) else "")) from None
'''
CASE = '''
@test_case(points=1, hidden=False, name={label!r})
def check_{i}(env):
    _check(env, {src!r}, {names!r})
'''


def exercises(lab):
    """[(lesson, exercise)] that lab ``lab`` grades, alternatives included."""
    return [ex for item in LABS[lab] for ex in (item if isinstance(item[0], tuple) else [item])]


def item_name(lesson, n):
    return f"L{lesson:02d}E{n}"


def lesson_path(lesson, root=ROOT):
    return next((root / "notebooks").glob(f"{lesson:02d}_*.ipynb"))


def checks(lesson, root=ROOT, extra=True):
    """{exercise: [(source, names)]}: the asserts of the teacher's solutions of ``lesson``, and
    (``extra``) student_copy.EXTRA_CHECKS, which read names only the starters set."""
    nb = json.loads(lesson_path(lesson, root).read_text(encoding="utf-8"))
    return student_copy.exercise_checks(nb, lesson, extra)


def write_tests(folder, lesson, numbers, root=ROOT):
    """Two otter test files per exercise in ``numbers``, one test case per check: ``L03E1`` for
    a starter's cells, ``L03E1s`` for the teacher's solution cells (its asserts only)."""
    folder.mkdir(parents=True, exist_ok=True)
    for suffix, found in (("", checks(lesson, root)), ("s", checks(lesson, root, extra=False))):
        for n in numbers:
            _write_test(folder, item_name(lesson, n) + suffix, found.get(n, []))


def _write_test(folder, name, cases):
    text = TEST_FILE.format(name=name, points=max(len(cases), 1))
    for i, (src, names) in enumerate(cases):
        label = src if len(src) < 90 else src[:87] + "..."
        text += CASE.format(i=i, label=label, src=src, names=names)
    if not cases:                                   # nothing to check: only the prediction counts
        text += CASE.format(i=0, label="no check", src="pass", names=[])
    (folder / f"{name}.py").write_text(text, encoding="utf-8")


def autograder_zip(workdir, lesson, numbers, root=ROOT):
    """otter's autograder.zip for the exercises ``numbers`` of ``lesson``."""
    from otter.generate import main as generate
    tests, config = workdir / f"tests{lesson:02d}", workdir / "otter_config.json"
    write_tests(tests, lesson, numbers, root)
    config.write_text(json.dumps({"pdf": False, "print_summary": False, "print_score": False}))
    out = workdir / f"autograder{lesson:02d}.zip"
    cwd = os.getcwd()
    try:
        os.chdir(workdir)                           # otter generate writes what it makes beside it
        generate(tests_dir=str(tests), output_path=str(out), config=str(config), no_requirements=True,
                 no_environment=True)
    finally:
        os.chdir(cwd)
    return out


def _source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def regions(nb, lesson, numbers, known_ids):
    """{exercise: (first, last) cell index}: a starter's cells (or the teacher's solution cells)
    and the cells a pair added after them (cells the teacher's lesson does not have)."""
    found = {}
    for i, cell in enumerate(nb["cells"]):
        m = re.match(rf"starter-{lesson:02d}-(\d+)-", cell.get("id", ""))
        n = int(m[1]) if m else student_copy.solution_number(cell)
        if n in numbers:
            first, _ = found.get(n, (i, i))
            found[n] = (first, i)
    for n, (first, last) in found.items():
        while (last + 1 < len(nb["cells"]) and nb["cells"][last + 1].get("id") not in known_ids
               and not student_copy.is_starter(nb["cells"][last + 1])):
            last += 1
        found[n] = (first, last)
    return found


def predicted(nb, span):
    """Whether the cells in ``span`` write a prediction: the starter's prediction cell filled in,
    or, in code, a `# Prediction:` comment, a `predicted` value or a printed "predicted"."""
    if span is None:
        return False
    for cell in nb["cells"][span[0]:span[1] + 1]:
        text = _source(cell)
        if cell["cell_type"] == "markdown":
            rest = text.replace(student_copy.PLACEHOLDER, "").replace(student_copy.ZH["placeholder"], "")
            rest = re.sub(r"\*\*(?:Exercise \d+\.\*\*\s*Prediction:|练习 \d+。\*\*\s*预测：)", "", rest)
            if cell.get("id", "").endswith("-prediction") and len(rest.strip()) >= 10:
                return True
            if not student_copy.is_starter(cell) and re.search(r"predict", text, re.I):
                return True
        else:
            code = "\n".join(l for l in text.splitlines() if not re.match(r"\w+ = None\b", l.strip()))
            if PREDICTED.search(code):
                return True
    return False


def prepare(path, lesson, numbers, root=ROOT, to_exercises=False):
    """The submission with a check cell after each exercise's cells; {exercise: predicted?};
    the exercises whose cells were not found (checked at the end); {exercise: the test's name}.
    ``to_exercises``: leave out the cells after the last graded exercise's (when all were found)."""
    nb = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    known = {c.get("id") for c in json.loads(lesson_path(lesson, root).read_text(encoding="utf-8"))["cells"]}
    spans = regions(nb, lesson, numbers, known)
    wrote = {n: predicted(nb, spans.get(n)) for n in numbers}
    tests = {n: item_name(lesson, n) for n in numbers}
    if to_exercises and len(spans) == len(numbers):
        del nb["cells"][max(last for _, last in spans.values()) + 1:]
    for n in sorted(spans, key=lambda k: -spans[k][1]):
        if student_copy.solution_number(nb["cells"][spans[n][0]]) is not None:
            tests[n] += "s"                         # the teacher's solution: its own asserts
        cell = {"cell_type": "code", "id": f"autograde-{n}", "metadata": {}, "execution_count": None,
                "outputs": [], "source": CHECK_CELL.format(name=tests[n])}
        nb["cells"].insert(spans[n][1] + 1, cell)
    nb["cells"].insert(0, {"cell_type": "code", "id": "autograde-start", "metadata": {}, "execution_count": None,
                           "outputs": [], "source": FIRST_CELL})
    nb["cells"].append({"cell_type": "code", "id": "autograde-end", "metadata": {}, "execution_count": None,
                        "outputs": [], "source": LAST_CELL})      # otter collects its results from there
    return nb, wrote, sorted(set(numbers) - set(spans)), tests


def grade_one(notebook, zip_path, timeout):
    """Run otter on one prepared notebook in a child process: {tests, errors} (or an error)."""
    code = (
        "import sys, json, io, contextlib\n"
        "from nbclient import NotebookClient\n"
        f"NotebookClient.timeout.default_value = {int(timeout)}\n"     # a cell that hangs stops the run
        "import otter.run\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    r = otter.run.main(sys.argv[1], autograder=sys.argv[2], output_dir=None, no_logo=True)\n"
        "tests = {name: [(t.test_case.name, bool(t.passed), (t.message or '').strip())\n"
        "                for t in tf.test_case_results] for name, tf in r.results.items()}\n"
        "def first(src):\n"                                            # the line that names the cell
        "    lines = [l for l in src.splitlines() if l.strip()]\n"
        "    return next((l for l in lines if not l.startswith('#') or l.startswith('#@title')), '')[:70]\n"
        "errors = [(first(c.source), o.get('ename', ''), str(o.get('evalue', ''))[:300])\n"
        "          for c in r.notebook.cells\n"
        "          if c.cell_type == 'code' and not c.get('id', '').startswith('autograde-')\n"
        "          and not c.source.startswith(('from otter import', 'import sys\\nsys.path.append', 'from otter.execute'))\n"
        "          for o in c.outputs if o.output_type == 'error']\n"
        "print('AUTOGRADE-RESULT ' + json.dumps({'tests': tests, 'errors': errors}))\n")
    try:
        run = subprocess.run([sys.executable, "-c", code, str(notebook), str(zip_path)], capture_output=True,
                             text=True, timeout=4 * timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {4 * timeout} s"}
    for line in run.stdout.splitlines():
        if line.startswith("AUTOGRADE-RESULT "):
            return json.loads(line.removeprefix("AUTOGRADE-RESULT "))
    return {"error": (run.stderr.strip().splitlines() or ["no result"])[-1][:300]}


def _message(text):
    """The useful line of otter's message for a failed case."""
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.startswith(("❌", "✅"))]
    return lines[-1] if lines else text.strip()


def find_notebook(folder, lesson):
    found = sorted(p for p in pathlib.Path(folder).rglob(f"{lesson:02d}_*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    return found[0] if found else None


def grade(lab, submissions, jobs=1, timeout=300, root=ROOT, to_exercises=()):
    """[{pair, item, mark, checks, prediction, feedback}] for each submission (a pair's folder).
    ``to_exercises``: the submissions run only as far as the lab's exercises (the depth left out)."""
    numbers = {}
    for lesson, n in exercises(lab):
        numbers.setdefault(lesson, []).append(n)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        zips = {lesson: autograder_zip(tmp, lesson, ns, root) for lesson, ns in numbers.items()}
        work = {}
        for k, folder in enumerate(submissions):
            for lesson, ns in numbers.items():
                path = find_notebook(folder, lesson)
                if path is None:
                    work[k, lesson] = None
                    continue
                nb, wrote, missing, names = prepare(path, lesson, ns, root, folder in to_exercises)
                target = tmp / f"s{k}" / path.name
                target.parent.mkdir(exist_ok=True)
                target.write_text(json.dumps(nb), encoding="utf-8")
                work[k, lesson] = (target, wrote, missing, names)
        with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
            futures = {key: pool.submit(grade_one, w[0], zips[key[1]], timeout) for key, w in work.items() if w}
            results = {key: f.result() for key, f in futures.items()}
    for k, folder in enumerate(submissions):
        pair = pathlib.Path(folder).name
        marks = {}
        for lesson, ns in numbers.items():
            if work[k, lesson] is None:
                for n in ns:
                    marks[lesson, n] = dict(mark=0, checks="0/0", prediction=False,
                                            feedback=f"no {lesson:02d}_*.ipynb handed in")
                rows.append(dict(pair=pair, item=f"L{lesson:02d} runs", mark=0, checks="", prediction=None,
                                 feedback="notebook not handed in"))
                continue
            _, wrote, missing, names = work[k, lesson]
            result = results[k, lesson]
            for n in ns:
                ran = names[n] in result.get("tests", {})
                cases = result.get("tests", {}).get(names[n], [])
                real = [c for c in cases if c[0] != "no check"]
                held = sum(passed for _, passed, _ in real)
                notes = [_message(msg) for _, passed, msg in real if not passed]
                if "error" in result:
                    notes = [f"not graded: {result['error']}"]
                elif not ran:
                    notes = ["the checks did not run (see the notebook's errors)"]
                if n in missing:
                    notes.append("the exercise's starter cells were not found: checked at the end")
                if not wrote[n]:
                    notes.append("no prediction written")
                all_held = held == len(real) and "error" not in result and ran
                mark = 2 if all_held and wrote[n] else 1 if (all_held or (wrote[n] and held)) else 0
                marks[lesson, n] = dict(mark=mark, checks=f"{held}/{len(real)}", prediction=wrote[n],
                                        feedback="; ".join(notes))
            errors = result.get("errors", [])
            rows_runs = dict(pair=pair, item=f"L{lesson:02d} runs", mark=0 if errors or "error" in result else 2,
                             checks="", prediction=None,
                             feedback=result.get("error") or "; ".join(f"in the cell `{line}`: {e}: {v}"
                                                                        for line, e, v in errors[:3]))
            rows.append(rows_runs)
        for item in LABS[lab]:
            options = item if isinstance(item[0], tuple) else (item,)
            best = max(options, key=lambda ex: marks[ex]["mark"])
            name = " or ".join(f"L{les:02d} E{n}" for les, n in options)
            rows.append(dict(pair=pair, item=name + (f" (E{best[1]} counted)" if len(options) > 1 else ""),
                             **marks[best]))
    return rows


def table(rows):
    """The marks as a markdown table."""
    lines = ["| pair | item | mark | checks | prediction | feedback |", "|---|---|---|---|---|---|"]
    for r in rows:
        pred = "" if r["prediction"] is None else "yes" if r["prediction"] else "no"
        feedback = r["feedback"].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r['pair']} | {r['item']} | {r['mark']} | {r['checks']} | {pred} | {feedback} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("lab", type=int, choices=sorted(LABS), help="the lab (teaching/kit/workshop.md)")
    parser.add_argument("submissions", nargs="+", type=pathlib.Path,
                        help="one folder per pair, holding the lab's lessons' notebooks")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="notebooks run at once (default 1)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds a cell may take (default 300)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the rows to this JSON file")
    parser.add_argument("--to-exercises", action="store_true",
                        help="run each notebook only as far as the lab's exercises, not its depth (faster; "
                             "then 'runs' means 'runs as far as the exercises')")
    args = parser.parse_args(argv)
    for folder in args.submissions:
        if not folder.is_dir():
            parser.error(f"{folder} is not a folder (one folder per pair)")
    rows = grade(args.lab, args.submissions, jobs=args.jobs, timeout=args.timeout,
                 to_exercises=args.submissions if args.to_exercises else ())
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
