"""On a GPU machine: run every lesson and record what its GPU-only cells print; then
tools/measure_gpu.py, then the strict test suite, as far as a time budget allows.

    python3 tools/record_gpu.py --plan                      # here: which call runs what, from the estimates
    python3 tools/record_gpu.py OUTDIR                      # on the GPU machine (needs CUDA)
    python3 tools/record_gpu.py OUTDIR --resume PREVIOUS    # a second call: what is missing
    python3 tools/record_gpu.py OUTDIR --resume PREVIOUS --lessons 8,11    # record these again
    python3 tools/record_gpu.py --accept OUTDIR             # back here: check, copy into measurements/
    python3 tools/record_gpu.py OUTDIR --rehearse           # here, without a GPU: the whole run, dry

The GPU machine is lent rarely and briefly (CONTRIBUTING.md, "Recording on a GPU machine"),
so the run is planned around ``--budget`` seconds (default 540: one 9-minute command) and
keeps everything it has done if it is killed:

0. The preflight: is there a C compiler and are Python's headers there (Triton builds a
   small C module the first time it runs), and, on a GPU, does ``torch.compile`` of a
   one-line function run on cuda (in a child process, cold caches, with a timeout)? Its
   answer, and what is missing, goes into ``summary.json``; lessons 11 and 13 compile.
1. The lessons, in order, each in a fresh kernel. A lesson starts only when its estimate
   (see "The estimates", below) fits in the time left, and the kernel is killed when the budget
   runs out (the lesson is then reported as cut off, and a resume runs it again). After
   each lesson the files below are rewritten (atomically), so a kill of the whole command
   loses at most the lesson that was running.
2. ``tools/measure_gpu.py`` (lesson 3's copy curves), if ``--measure-s`` seconds are left.
3. The strict suite (``python -m pytest``, nbval comparing outputs), only with
   ``--suite-min`` seconds left, and stopped at the budget: the lessons step has already
   failed any GPU-only cell that took its fallback.

The estimates. A lesson's estimate is its seconds in ``measurements/budgets-cpu.json`` (the
whole lesson, kernel start included, measured on 2 cores without a GPU) plus its entry in
``GPU_ALLOWANCE_S``: the seconds its GPU-only branches are expected to add on an H200 (CUDA's
start, compiles, CUDA graphs, timing loops; each entry says why). A lesson that is not in
the budgets file counts ``budget.lesson_s`` (the most a lesson may take there) and a lesson
without an allowance ``DEFAULT_ALLOWANCE_S``. On ``--resume`` a lesson that an earlier call
finished is estimated at the seconds it took there. ``--estimates FILE`` (JSON, lesson file
name to seconds) replaces any of them. The other steps: ``PREFLIGHT_S``, ``--measure-s``,
and for the suite the sum of the lessons' estimates (on a machine with CUDA GPUs the suite's
lessons take turns) plus ``SUITE_EXTRA_S``. ``--plan`` prints, from these estimates, which
steps each call runs (``--plan 540,540``: two calls of 540 s) and how much room is left.

``--resume DIR`` reads a recording written by an earlier call (the files come back from the
GPU machine; carry them to the next call) and runs only what it lacks: the lessons it has
not finished, then the steps not yet passed. Lessons named with ``--lessons`` (``8,11`` or
``08,11``) are recorded again and replace what the earlier call recorded for them; a suite
that passed before is then run again too (it ran the lessons as they were). Only a
recording of the same machine (GPU, driver, CUDA, PyTorch) is resumed.

It writes into OUTDIR at most six files (the device tool brings back at most eight):

* ``gpu-recording.json``: for every GPU-only cell (a cell whose fallback calls
  ``d2l.show_recording('<id>', gpus=N)``), the text and figures its GPU branch printed, with
  a fingerprint of the cell's source and, under ``checks``, the lines its
  ``d2l.check_expected`` call wrote (expected against measured); cells that need more GPUs
  than the machine has, under ``needs_more_gpus``; and under ``lessons`` each finished
  lesson's time and problems.
* ``gpu.json``: the figures of ``tools/measure_gpu.py`` (lesson 3 plots them).
* ``summary.json``: the machine, the environment the children ran in, and each step's
  result and seconds (the preflight's findings; the lessons' problems, cut-off lessons and
  missed expectations). The exit status is 0 only when every step ran and passed and no
  expectation was missed.
* ``lessons.log``, ``measure.log``, ``suite.log``: what each step printed.

(A command killed while a JSON file is being rewritten can leave one ``NAME.tmp`` more.)
The expectation checks go through a temporary file outside OUTDIR: each lesson's kernel gets
``COURSE_CHECKS`` naming a fresh one, read after the lesson. A missed expectation is a
finding, not a failure of the recording: ``--accept`` accepts such a recording and says so.

Every child (kernel, measure_gpu.py, pytest) runs with the repository on PYTHONPATH and
without ``PYTORCH_CUDA_ALLOC_CONF`` / ``PYTORCH_ALLOC_CONF`` (lesson 8's allocator numbers
assume the default settings). The GPU machine may lack the Jupyter packages and have no
network: ``tools/fetch_gpu_wheels.sh`` downloads them here beforehand (see its header).

``--rehearse`` runs the same steps on a machine without a GPU, with a machine description
that says so: GPU-only cells then take their fallback, the preflight checks the compiler and
the headers only, and ``--accept`` refuses the result. It tries everything but the GPU: the
wheels, the kernels, the budget, a kill and a resume.
"""
import argparse
import base64
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time

STARTED = time.monotonic()          # the budget counts from here, before torch is imported
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from d2l_utils.recordings import (MARK, RECORDING, check_recording,  # noqa: E402
                                  expectation_misses, machine_info, source_hash)

NOTEBOOKS = ROOT / "notebooks"
BUDGETS = ROOT / "measurements" / "budgets-cpu.json"
NOTE = ("Written by tools/record_gpu.py on the machine described here: what each GPU-only "
        "cell printed there. Do not edit; record again instead.")
DROPPED = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")     # lesson 8 assumes the defaults
SHOWN = ("CUDA_", "PYTORCH_", "TORCH_", "NCCL_", "OMP_", "NVIDIA_", "PYTHONPATH", "CC")
SAME_MACHINE = ("gpu", "gpu_count", "driver", "cuda", "torch")
FILES = ("gpu-recording.json", "gpu.json", "summary.json", "lessons.log", "measure.log", "suite.log")

# The estimates (the module's docstring says how they are used). Seconds that a lesson's
# GPU-only branches add on an H200 to its CPU seconds in measurements/budgets-cpu.json.
# Nothing has run on a GPU yet: they are set so that the thirteen lessons come to about
# 460 s, the top of issue 27's forecast (400-460 s, lesson 13 alone 90-120 s). After a
# first call, the seconds it measured (gpu-recording.json, "lessons") are the better figures.
GPU_ALLOWANCE_S = {
    "01": (12, "CUDA starts in the kernel, and again in the child processes of 01-too-late "
               "and 01-context-memory"),
    "02": (6, "five small one-GPU cells"),
    "03": (12, "copy curves up to 256 MiB both ways, pinned and pageable; NVML's link"),
    "04": (12, "timing loops (time_op) and a launch timeline"),
    "05": (8, "cuDNN's start and its benchmark search"),
    "06": (5, "two of its four GPU cells need 2 GPUs and are skipped"),
    "07": (20, "torchrun: a child process that starts CUDA and NCCL, then trains"),
    "08": (20, "ten cells: allocations up to the card's size, a memory snapshot"),
    "09": (20, "time_op for 1 s per precision mode; TF32 and bfloat16 matmuls"),
    "10": (20, "the profiler (CUPTI) starts; roofline sweeps; an MFU measurement"),
    "11": (35, "a cold torch.compile(mode='reduce-overhead') with Triton; CUDA graph captures"),
    "12": (3, "its one GPU cell needs 2 GPUs and is skipped"),
    "13": (95, "two cold compiles and the GPU versions of the training job (90-120 s in all)"),
}
DEFAULT_ALLOWANCE_S = 60        # a lesson not in the table above
PREFLIGHT_S = 30                # torch and Inductor start, one Triton compile (cold), cc builds its stub
PREFLIGHT_TIMEOUT_S = 150
SUITE_EXTRA_S = 30              # pytest's start and collection; the unit tests run beside the lessons
STARTUP_S = 5                   # the recorder's own start (torch's import, the machine's description)
MEASURE_MARGIN_S = 30           # measure_gpu starts only with its estimate and this to spare: cut off, its
                                # figures are lost, so it waits for the next call rather than squeeze in
COMMAND_S, WHEELS_S = 600, 10   # the device tool's limit on one command; installing .whl/ before this script
DEVICE_S, MACHINE_START_S = 900, 120    # device time in all (CONTRIBUTING), a machine's start at most


def child_env():
    """The environment of every process started here: the repository importable as
    d2l_utils, output unbuffered, the allocator at its defaults, no expectation-check file
    (each lesson's kernel gets its own), and $CC set to ``cc`` where Triton would find no
    compiler of its own choice but ``cc`` is there."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED and k != "COURSE_CHECKS"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    if not env.get("CC") and not shutil.which("gcc") and not shutil.which("clang") and shutil.which("cc"):
        env["CC"] = shutil.which("cc")
    return env


def environment_record():
    """What the summary says of the environment: the variables that change what the
    lessons measure, as the children get them, and those taken out."""
    env = child_env()
    return {"variables": {k: v for k, v in sorted(env.items()) if k.startswith(SHOWN)},
            "removed": [k for k in DROPPED if k in os.environ]}


def rehearsal_machine():
    """The machine description of a rehearsal: it says that no GPU was there."""
    import datetime
    import platform

    import torch
    return {"gpu": "NONE (rehearsal without a GPU: not a recording)", "gpu_count": 0,
            "capability": "none", "driver": "none", "cuda": str(torch.version.cuda), "torch": torch.__version__,
            "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(), "rehearsal": True}


def write_json(path, data):
    """Write ``data`` to ``path`` whole or not at all (a kill never leaves half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# ---------------------------------------------------------------- estimates and the plan

def lesson_paths(notebooks):
    return sorted(pathlib.Path(notebooks).glob("[0-9][0-9]_*.ipynb"))


def estimates_for(names, measured=None, override=None, budgets_path=BUDGETS):
    """Each lesson's estimate in seconds, and how it was made: {name: (seconds, why)}.

    ``measured``: seconds an earlier call took (used where given); ``override``: seconds
    from ``--estimates`` (used before anything else).
    """
    budgets = json.loads(pathlib.Path(budgets_path).read_text(encoding="utf-8"))
    cpu_default = budgets["budget"]["lesson_s"]
    out = {}
    for name in names:
        if override and name in override:
            out[name] = (float(override[name]), "--estimates")
        elif measured and name in measured:
            out[name] = (float(measured[name]), "measured by the earlier call")
        else:
            cpu = budgets["lessons"].get(name, {}).get("seconds")
            gpu, why = GPU_ALLOWANCE_S.get(name[:2], (DEFAULT_ALLOWANCE_S, "not in the allowance table"))
            out[name] = (round((cpu_default if cpu is None else cpu) + gpu, 1),
                         f"{'budget' if cpu is None else 'CPU'} {cpu_default if cpu is None else cpu} s "
                         f"+ GPU {gpu} s: {why}")
    return out


def plan(budgets, estimates, measure_s, suite_min, preflight_done=False, lessons_done=(),
         measure_done=False, suite_done=False):
    """Which steps each call runs, by the rules the recorder follows and the estimates.

    ``estimates``: {lesson: seconds}, in lesson order. Returns ``(calls, unrun)``: per call,
    its budget, its steps as (name, seconds, whole), the seconds spare; then what no call runs.
    """
    todo = [n for n in estimates if n not in lessons_done]
    suite_s = round(sum(estimates.values()) + SUITE_EXTRA_S, 1)
    calls = []
    for budget in budgets:
        left, steps = budget - STARTUP_S, [("start", STARTUP_S, True)]
        if not preflight_done:
            steps.append(("preflight", PREFLIGHT_S, True))
            left -= PREFLIGHT_S
            preflight_done = True
        for name in list(todo):
            if estimates[name] <= left:
                steps.append((name, estimates[name], True))
                left -= estimates[name]
                todo.remove(name)
        if not measure_done and measure_s + MEASURE_MARGIN_S <= left:
            steps.append(("measure_gpu", measure_s, True))
            left -= measure_s
            measure_done = True
        if not suite_done and left >= suite_min:
            whole = suite_s <= left
            steps.append(("suite", suite_s if whole else round(left, 1), whole))
            left -= min(suite_s, left)
            suite_done = whole
        calls.append((budget, steps, round(left, 1)))
    unrun = todo + (["measure_gpu"] if not measure_done else []) + (["suite"] if not suite_done else [])
    return calls, unrun


def print_plan(budgets, estimates, measure_s, suite_min, out=print):
    """The plan, printed: the estimates, each call with its margins, and the device time.

    Returns what no call runs."""
    seconds = {n: s for n, (s, _) in estimates.items()}
    suite_s = round(sum(seconds.values()) + SUITE_EXTRA_S, 1)
    out("Estimates, in seconds on the GPU machine (tools/record_gpu.py's docstring says how they are made):")
    rows = [("start", STARTUP_S, "the recorder's own start, each call"),
            ("preflight", PREFLIGHT_S, f"torch.compile of a one-line function, cold (timeout {PREFLIGHT_TIMEOUT_S} s)"),
            *((n, s, why) for n, (s, why) in estimates.items()),
            ("measure_gpu", measure_s, "--measure-s (its docstring: about a minute on one H200)"),
            ("suite", suite_s, f"the lessons again, taking turns on the GPU, + {SUITE_EXTRA_S} s")]
    for name, s, why in rows:
        out(f"  {name:37} {s:6.1f}  {why}")
    calls, unrun = plan(budgets, seconds, measure_s, suite_min)
    device = MACHINE_START_S
    for k, (budget, steps, spare) in enumerate(calls, 1):
        lessons = [n for n, _, _ in steps if n in seconds]
        shown = [n for n, _, _ in steps if n in ("preflight", "measure_gpu")]
        if lessons:
            shown.insert(1 if "preflight" in shown else 0,
                         f"lessons {', '.join(n[:2] for n in lessons)}" if len(lessons) < 3 else
                         f"lessons {lessons[0][:2]}-{lessons[-1][:2]}"
                         if len(lessons) == int(lessons[-1][:2]) - int(lessons[0][:2]) + 1 else
                         f"lessons {', '.join(n[:2] for n in lessons)}")
        shown += [("suite" if whole else f"suite, cut off at the budget after {s:.0f} of its {suite_s:.0f} s")
                  for n, s, whole in steps if n == "suite"]
        used = budget - spare
        device += WHEELS_S + used
        out(f"call {k} (--budget {budget:g}): {', '.join(shown)}: {used:.0f} s planned, {spare:.0f} s of the "
            f"budget spare; the budget stops every step, and the command's {COMMAND_S} s limit is "
            f"{COMMAND_S - WHEELS_S - budget:.0f} s beyond it (after {WHEELS_S} s of wheels)")
    out("not run by these calls: " + (", ".join(unrun) if unrun else "nothing"))
    out(f"device time: a machine's start (up to {MACHINE_START_S} s) and the commands as planned, {device:.0f} s "
        + (f"of the {DEVICE_S} s there are ({DEVICE_S - device:.0f} s spare)" if device <= DEVICE_S else
           f"> the {DEVICE_S} s there are: these calls do not fit the device time")
        + (f"; a machine that went back between calls starts again (up to {MACHINE_START_S} s more)"
           if len(calls) > 1 else ""))
    return unrun


# ---------------------------------------------------------------- the preflight

PREFLIGHT_CODE = ("import torch\n"
                  "f = torch.compile(lambda x: x + 1)\n"
                  "x = torch.ones(4, device='cuda')\n"
                  "assert f(x).sum().item() == 8\n"
                  "print('torch.compile ran on', torch.cuda.get_device_name())\n")


def python_include():
    """The folder Triton takes Python.h from (triton/runtime/build.py: the default scheme's
    include path, 'posix_local' read as 'posix_prefix')."""
    scheme = sysconfig.get_default_scheme()
    return sysconfig.get_paths(scheme="posix_prefix" if scheme == "posix_local" else scheme)["include"]


def preflight(rehearse, timeout, env=None):
    """Can Triton compile here? The C compiler Triton would use, Python's headers, and on a
    GPU a cold ``torch.compile`` of a one-line function on cuda in a child process.

    Returns the summary step: what was found, ``missing`` (what to fix, in words), ``ok``.
    """
    env = child_env() if env is None else env
    start = time.monotonic()
    found = {"CC": env.get("CC"), "gcc": shutil.which("gcc", path=env.get("PATH")),
             "clang": shutil.which("clang", path=env.get("PATH")), "cc": shutil.which("cc", path=env.get("PATH"))}
    compiler = found["CC"] or found["gcc"] or found["clang"]
    include = python_include()
    header = os.path.join(include, "Python.h")
    step = {"compiler": compiler, "found": found, "python_h": header if os.path.exists(header) else None,
            "include_dir": include, "missing": []}
    if not compiler:
        step["missing"].append("a C compiler: Triton looks for $CC, then gcc, then clang, and found none "
                               "(apt-get install gcc, or set CC)")
    if not step["python_h"]:
        step["missing"].append(f"Python's headers: no Python.h in {include} (apt-get install python3-dev, "
                               "or the python3.X-dev of this Python)")
    if rehearse:
        step["compile"] = "not run: a rehearsal has no GPU"
    else:
        with tempfile.TemporaryDirectory() as cache:       # cold: nothing compiled before counts
            child = dict(env, TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"),
                         TRITON_CACHE_DIR=os.path.join(cache, "triton"))
            try:
                done = subprocess.run([sys.executable, "-c", PREFLIGHT_CODE], cwd=cache, env=child,
                                      capture_output=True, text=True, timeout=timeout)
                rc, text = done.returncode, (done.stdout + done.stderr).strip()
            except subprocess.TimeoutExpired as e:
                rc = 124
                text = ((e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
                        + f"\n[stopped after {timeout:.0f} s]").strip()
        lines = text.splitlines()
        error = None if rc == 0 else next((line for line in reversed(lines) if "Error" in line or "error" in line),
                                          lines[-1] if lines else f"exit status {rc}")
        step["compile"] = {"exit": rc, "error": error, "tail": "\n".join(lines[-12:])[-2000:]}
        if rc != 0:
            step["missing"].append(f"torch.compile on cuda failed (exit {rc}): {error}")
    step["ok"] = not step["missing"]
    step["seconds"] = round(time.monotonic() - start, 1)
    return step


def preflight_lines(step):
    """The preflight in words, for the log."""
    if step["ok"]:
        how = "" if isinstance(step["compile"], str) else ", torch.compile ran on cuda"
        return [f"preflight: ok ({step['compiler']}, {step['python_h']}{how}; {step['seconds']} s)"]
    return ([f"preflight: Triton cannot compile here, so lessons 11 and 13's compiled cells will fail. Missing:"]
            + [f"  {m}" for m in step["missing"]])


# ---------------------------------------------------------------- running and recording a lesson

def outputs_of(cell):
    """A cell's outputs as the recording stores them: text (stdout, stderr, values) and PNG figures.

    Returns ``(outputs, error)``; ``error`` is the error's name and message, or None.
    """
    outputs, error = [], None
    for out in cell.get("outputs", []):
        kind = out["output_type"]
        if kind == "stream":
            text = out["text"] if isinstance(out["text"], str) else "".join(out["text"])
            outputs.append({"type": "text", "name": out["name"], "text": text})
        elif kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            if "image/png" in data:
                png = data["image/png"]
                png = (png if isinstance(png, str) else "".join(png)).replace("\n", "")
                base64.b64decode(png, validate=True)
                outputs.append({"type": "png", "data": png})
            elif "text/plain" in data:
                text = data["text/plain"]
                outputs.append({"type": "text", "name": "stdout",
                                "text": text if isinstance(text, str) else "".join(text)})
        elif kind == "error":
            error = f"{out['ename']}: {out['evalue']}"
    return outputs, error


def record_notebook(nb, lesson, gpu_count, ran=None):
    """From an executed notebook, the recording of its GPU-only cells.

    ``ran``: the indices of the cells that ran to their end (None: all of them); a cell that
    did not (the budget cut the lesson off) is not recorded. Returns ``(cells, needs_more,
    problems)``: recorded cells by id, the ids that need more GPUs than ``gpu_count`` (with
    why), and what went wrong (a GPU-only cell that raised, or that printed nothing).
    """
    cells, needs_more, problems = {}, {}, []
    for index, cell in enumerate(nb["cells"]):
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        if cell["cell_type"] != "code":
            continue
        for cell_id, gpus in MARK.findall(src):
            gpus = int(gpus)
            if gpus > gpu_count:
                needs_more[cell_id] = {"lesson": lesson, "gpus": gpus,
                                       "why": f"needs {gpus} GPUs; this machine has {gpu_count}"}
                continue
            if ran is not None and index not in ran:
                continue
            outputs, error = outputs_of(cell)
            if error:
                problems.append(f"{lesson}, cell {cell_id}: raised {error}")
            elif not outputs:
                problems.append(f"{lesson}, cell {cell_id}: printed nothing")
            else:
                cells[cell_id] = {"lesson": lesson, "gpus": gpus,
                                  "source_sha256": source_hash(src), "outputs": outputs}
    return cells, needs_more, problems


def read_checks(path):
    """The JSON lines that ``d2l.check_expected`` appended to ``path``; returns (lines, problems)."""
    lines, problems = [], []
    if not os.path.exists(path):
        return lines, problems
    with open(path, encoding="utf-8") as f:
        for k, text in enumerate(f, 1):
            if text.strip():
                try:
                    lines.append(json.loads(text))
                except ValueError:
                    problems.append(f"expectation checks, line {k}: not JSON: {text[:120]!r}")
    return lines, problems


def attach_checks(cells, lines, lesson, cut_off=False):
    """Store each check line in its cell's entry, as ``checks`` (a list, in the order written).

    Returns the problems: lines of a cell this lesson did not record (unless the lesson was
    cut off, when its last cell may have checked before it was stopped).
    """
    problems = []
    for cell_id in cells:
        cells[cell_id]["checks"] = [line for line in lines if line.get("cell") == cell_id]
    orphans = sorted({str(line.get("cell")) for line in lines} - set(cells))
    if orphans and not cut_off:
        problems.append(f"{lesson}: expectation checks of cell(s) {', '.join(orphans)}, which this "
                        "lesson did not record")
    return problems


class BudgetSpent(Exception):
    """The call's budget ran out while a lesson was running."""


def _kill(processes):
    """Kill what is left of ``processes`` (psutil.Process objects)."""
    if not processes:
        return
    import psutil
    for p in processes:
        try:
            p.kill()
        except psutil.Error:
            pass


def client_class():
    """nbclient's NotebookClient, made to end the kernel's whole process tree when it ends the
    kernel: jupyter_client kills the kernel's process group, and a lesson's children that
    started a session of their own (d2l.run_processes, torchrun) would outlive it."""
    from nbclient import NotebookClient

    class Client(NotebookClient):
        deadline = math.inf

        async def _async_cleanup_kernel(self):
            if time.monotonic() >= self.deadline - 1:      # cut off: no graceful wait for a busy kernel
                self.shutdown_kernel = "immediate"
            tree = []
            try:
                import psutil
                pid = getattr(getattr(self.km, "provisioner", None), "pid", None)
                tree = psutil.Process(pid).children(recursive=True) if pid else []
            except Exception:                       # no psutil, or the kernel is gone already
                pass
            try:
                await super()._async_cleanup_kernel()
            finally:
                _kill(tree)
    return Client


def run_lesson(path, cell_timeout, deadline=None, checks_file=None):
    """Execute one lesson in a fresh kernel, stopping it at ``deadline`` (time.monotonic()).

    The stored outputs are cleared first, so a cell that did not run shows nothing. The
    kernel gets ``COURSE_CHECKS=checks_file``. Returns ``(nb, ran, problems, cut)``: the
    executed notebook, the indices of the code cells that ran to their end, what went
    wrong, and None or where the budget cut the lesson off (the kernel is then killed).
    """
    import nbformat
    from nbclient.exceptions import CellTimeoutError
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    deadline = math.inf if deadline is None else deadline
    ran, now_at, problems, cut = set(), {}, [], None

    def before(cell, cell_index):
        if time.monotonic() >= deadline:
            raise BudgetSpent()
        now_at["index"] = cell_index

    def timeout(cell):
        return max(1, math.ceil(min(cell_timeout, deadline - time.monotonic())))

    env = child_env()
    if checks_file:
        env["COURSE_CHECKS"] = str(checks_file)
    client = client_class()(nb, timeout_func=timeout, kernel_name="python3", allow_errors=True,
                            on_cell_execute=before,
                            on_cell_executed=lambda cell, cell_index, execute_reply: ran.add(cell_index),
                            resources={"metadata": {"path": str(path.parent)}})
    client.deadline = deadline
    try:
        client.execute(env=env)
    except (BudgetSpent, CellTimeoutError) as e:
        if isinstance(e, BudgetSpent) or time.monotonic() >= deadline - 1:
            index = now_at.get("index")
            count = sum(1 for c in nb.cells[:index + 1] if c.cell_type == "code" and c.source.strip()) \
                if index is not None else 0
            cut = (f"cut off at the budget, in code cell {count} of "
                   f"{sum(1 for c in nb.cells if c.cell_type == 'code' and c.source.strip())}")
        else:
            problems.append(f"{path.name}: did not finish: {type(e).__name__}: {str(e)[:300]}")
    except Exception as e:                          # the kernel died, or did not start
        problems.append(f"{path.name}: did not finish: {type(e).__name__}: {str(e)[:300]}")
    problems += [f"{path.name}: cell {c.get('execution_count')} failed: {o['ename']}: {str(o['evalue'])[:300]}"
                 for c in nb.cells if c.cell_type == "code"
                 for o in c.get("outputs", []) if o["output_type"] == "error"]
    return nb, ran, problems, cut


# ---------------------------------------------------------------- one call

class Run:
    """One call of the recorder: its budget, its files, and what earlier calls left."""

    def __init__(self, outdir, budget, notebooks=NOTEBOOKS, start=None):
        self.outdir, self.notebooks = outdir, notebooks
        self.start, self.budget = (time.monotonic() if start is None else start), budget
        self.cut_off = {}
        outdir.mkdir(parents=True, exist_ok=True)

    def left(self):
        return self.budget - (time.monotonic() - self.start)

    def deadline(self):
        return self.start + self.budget

    def log(self, name, line):
        print(line, flush=True)
        with open(self.outdir / name, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def lesson_numbers(text):
    """'8,11' or '08,11' -> {'08', '11'}; raises ValueError on anything else."""
    numbers = set()
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        if not part.isdigit() or not 1 <= int(part) <= 99:
            raise ValueError(f"--lessons takes lesson numbers such as 8,11 or 08,11, got {part!r}")
        numbers.add(f"{int(part):02d}")
    return numbers


def resume(previous, machine, redo):
    """The recording and summary steps of an earlier call, without the lessons in ``redo``
    (two-digit numbers), without the cells of lessons it did not finish, and without its
    suite step when a lesson is recorded again."""
    if previous is None:
        return {"note": NOTE, "machine": machine, "cells": {}, "needs_more_gpus": {}, "lessons": {}}, {}
    rec = json.loads((previous / RECORDING).read_text(encoding="utf-8"))
    differs = {k: (rec["machine"].get(k), machine.get(k)) for k in SAME_MACHINE
               if rec["machine"].get(k) != machine.get(k)}
    if differs:
        raise SystemExit(f"--resume: {previous / RECORDING} was made on another machine: {differs}")
    rec["machine"] = machine                        # today's date
    rec["lessons"] = {k: v for k, v in rec.get("lessons", {}).items() if k[:2] not in redo}
    rec["cells"] = {k: v for k, v in rec["cells"].items() if v["lesson"] in rec["lessons"]}
    rec["needs_more_gpus"] = {k: v for k, v in rec["needs_more_gpus"].items() if v["lesson"][:2] not in redo}
    steps = {}
    if (previous / "summary.json").exists():
        steps = json.loads((previous / "summary.json").read_text(encoding="utf-8"))["steps"]
        steps.pop("lessons", None)
        if redo:
            steps.pop("suite", None)                # it ran the lessons as they were
    return rec, steps


def record_lessons(run, rec, summary, cell_timeout, estimates):
    """Run each lesson that ``rec`` has not finished and whose estimate fits in the time
    left; save everything after each one."""
    for path in lesson_paths(run.notebooks):
        if path.name in rec["lessons"]:
            continue
        need = estimates[path.name][0]
        if need > run.left():
            run.log("lessons.log", f"{path.name}: not started: its estimate is {need:.0f} s, "
                                   f"{run.left():.0f} s left (resume to run it)")
            continue
        began = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="course-checks-") as tmp:
            checks = pathlib.Path(tmp) / "checks.jsonl"
            nb, ran, problems, cut = run_lesson(path, cell_timeout, run.deadline(), checks)
            lines, bad = read_checks(checks)
        cells, needs_more, found = record_notebook(nb, path.name, rec["machine"]["gpu_count"],
                                                   ran if cut else None)
        problems += bad + found + attach_checks(cells, lines, path.name, cut_off=bool(cut))
        seconds = round(time.monotonic() - began, 1)
        rec["cells"].update(cells)
        rec["needs_more_gpus"].update(needs_more)
        if cut:
            run.cut_off[path.name] = {"seconds": seconds, "where": cut, "problems": problems}
        else:
            rec["lessons"][path.name] = {"seconds": seconds, "problems": problems}
        write_json(run.outdir / RECORDING, rec)
        summary["steps"]["lessons"] = lessons_step(rec, run.notebooks, run.cut_off)
        write_json(run.outdir / "summary.json", summary)
        run.log("lessons.log", f"{path.name}: {seconds} s (estimate {need:.0f} s), "
                               + (f"{cut}; the kernel was killed (resume to run it again), " if cut else "")
                               + f"{len(cells)} GPU cell(s) recorded, {len(problems)} problem(s)")
        for problem in problems:
            run.log("lessons.log", f"  {problem}")


def lessons_step(rec, notebooks, cut_off=None):
    """The lessons step as the summary reports it."""
    all_lessons = [p.name for p in lesson_paths(notebooks)]
    done = rec["lessons"]
    problems = [p for v in done.values() for p in v["problems"]]
    missing = [name for name in all_lessons if name not in done]
    if not missing:
        problems += check_recording(rec, notebooks)
    return {"finished": len(done), "of": len(all_lessons), "missing": missing, "problems": problems,
            "cut_off": dict(cut_off or {}), "misses": expectation_misses(rec),
            "seconds": round(sum(v["seconds"] for v in done.values()), 1)}


def run_step(cmd, log, timeout):
    """Run ``cmd`` with its output in ``log``; return a summary step (exit status, seconds)."""
    start = time.monotonic()
    with open(log, "w") as f:
        try:
            rc = subprocess.run(cmd, cwd=ROOT, env=child_env(), stdout=f, stderr=subprocess.STDOUT,
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write(f"\n[record_gpu.py: stopped after {timeout:.0f} s, at the end of the time budget]\n")
            rc = 124
    return {"exit": rc, "seconds": round(time.monotonic() - start, 1)}


def read_estimates(path):
    return None if path is None else {k: float(v) for k, v in json.loads(path.read_text()).items()}


def record(args):
    import torch
    if not args.rehearse and not torch.cuda.is_available():
        print("record_gpu.py records what GPU-only cells print on a GPU: this machine has no CUDA GPU "
              "(--rehearse tries the run without one).", file=sys.stderr)
        return 2
    run = Run(args.outdir, args.budget, args.notebooks, start=args.start)
    machine = rehearsal_machine() if args.rehearse else machine_info()
    names = [p.name for p in lesson_paths(run.notebooks)]
    redo = lesson_numbers(args.lessons)
    unknown = sorted(redo - {n[:2] for n in names})
    if unknown:
        raise SystemExit(f"--lessons: no lesson numbered {', '.join(unknown)} in {run.notebooks}")
    earlier = {}
    if args.resume:
        earlier = {k: v["seconds"] for k, v in json.loads((args.resume / RECORDING).read_text(
            encoding="utf-8")).get("lessons", {}).items()}
    rec, steps = resume(args.resume, machine, redo)
    if args.resume:
        for name in ("gpu.json", "measure.log", "suite.log"):    # carry an earlier step's files over
            if (args.resume / name).exists() and not (run.outdir / name).exists():
                shutil.copy(args.resume / name, run.outdir / name)
    estimates = estimates_for(names, measured=earlier, override=read_estimates(args.estimates))
    summary = {"machine": machine, "environment": environment_record(), "budget_s": args.budget,
               "estimates_s": {n: s for n, (s, _) in estimates.items()}, "steps": steps}
    write_json(run.outdir / RECORDING, rec)
    write_json(run.outdir / "summary.json", summary)
    run.log("lessons.log", f"machine: {machine}\nbudget: {args.budget} s")

    if not summary["steps"].get("preflight", {}).get("ok"):
        summary["steps"]["preflight"] = preflight(args.rehearse, max(1, min(PREFLIGHT_TIMEOUT_S, run.left() - 10)))
        write_json(run.outdir / "summary.json", summary)
        for line in preflight_lines(summary["steps"]["preflight"]):
            run.log("lessons.log", line)

    record_lessons(run, rec, summary, args.cell_timeout, estimates)
    summary["steps"]["lessons"] = lessons_step(rec, run.notebooks, run.cut_off)
    write_json(run.outdir / "summary.json", summary)

    if "measure_gpu" not in summary["steps"] or summary["steps"]["measure_gpu"]["exit"] != 0:
        if run.left() >= args.measure_s + MEASURE_MARGIN_S and not args.rehearse:
            summary["steps"]["measure_gpu"] = run_step(
                [sys.executable, "tools/measure_gpu.py", "--out", str(run.outdir / "gpu.json")],
                run.outdir / "measure.log", timeout=max(1, run.left() - 10))
            write_json(run.outdir / "summary.json", summary)
        else:
            run.log("lessons.log", "measure_gpu.py: not run (" +
                    ("a rehearsal has no GPU to measure)" if args.rehearse else f"{run.left():.0f} s left)"))

    if "suite" not in summary["steps"] or summary["steps"]["suite"]["exit"] != 0:
        if run.left() >= args.suite_min:
            summary["steps"]["suite"] = run_step(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", str(args.workers),
                 "--dist", "loadscope", "-rfEs", "-v"], run.outdir / "suite.log",
                timeout=max(1, run.left() - 10))
            tail = (run.outdir / "suite.log").read_text().strip().splitlines()[-1:]
            summary["steps"]["suite"]["last_line"] = tail
            write_json(run.outdir / "summary.json", summary)
        else:
            run.log("lessons.log", f"suite: not run ({run.left():.0f} s left; resume to run it)")

    lessons = summary["steps"]["lessons"]
    pre = summary["steps"]["preflight"]
    print(*preflight_lines(pre), sep="\n", flush=True)
    print(f"lessons: {lessons['finished']} of {lessons['of']} finished, {len(lessons['problems'])} problem(s)",
          *lessons["problems"], sep="\n  ", flush=True)
    for name, cut in lessons["cut_off"].items():
        print(f"  {name}: {cut['where']} (resume to run it again)")
    if lessons["misses"]:
        print(f"expectations: {len(lessons['misses'])} missed (findings: the model or the prose changes, "
              "not the measurement)", *lessons["misses"], sep="\n  ", flush=True)
    for name in ("measure_gpu", "suite"):
        print(f"{name}: {summary['steps'].get(name, 'not run')}", flush=True)
    ok = (pre["ok"] and not lessons["missing"] and not lessons["problems"] and not lessons["misses"]
          and all(summary["steps"].get(s, {}).get("exit") == 0 for s in ("measure_gpu", "suite")))
    return 0 if ok else 1


def accept(outdir):
    """Check a recording brought back from a GPU machine and copy it into measurements/.

    A missed expectation does not stop it: a miss is a finding, committed as it came."""
    rec = json.loads((outdir / RECORDING).read_text())
    if rec["machine"].get("rehearsal"):
        print(f"{outdir / RECORDING} comes from a rehearsal without a GPU: not a recording.", file=sys.stderr)
        return 1
    problems = check_recording(rec, NOTEBOOKS)
    if problems:
        print("The recording does not match the lessons:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    for name in (RECORDING, "gpu.json"):
        if (outdir / name).exists():
            shutil.copy(outdir / name, ROOT / "measurements" / name)
            print(f"copied {name} into measurements/")
    misses = expectation_misses(rec)
    if misses:
        print(f"Accepted with {len(misses)} missed expectation(s): findings, committed as they came "
              "(change the model in d2l_utils/expectations or the prose, never the measurement):",
              *misses, sep="\n  ")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("outdir", type=pathlib.Path, nargs="?", help="folder for the results (created)")
    p.add_argument("--accept", action="store_true",
                   help="check OUTDIR's recording against the lessons and copy it into measurements/")
    p.add_argument("--plan", nargs="?", const="540,540", metavar="BUDGETS",
                   help="print which steps each call runs, from the estimates (default 540,540: two calls)")
    p.add_argument("--resume", type=pathlib.Path, help="a folder with an earlier call's files")
    p.add_argument("--lessons", help="lesson numbers to record again, e.g. 8,11 (with --resume)")
    p.add_argument("--budget", type=float, default=540, help="seconds this call may take (default 540)")
    p.add_argument("--estimates", type=pathlib.Path,
                   help="JSON file: lesson file name -> estimated seconds (replaces the table's)")
    p.add_argument("--measure-s", type=float, default=60,
                   help="run measure_gpu.py with this many seconds left (its estimate; default 60)")
    p.add_argument("--suite-min", type=float, default=150, help="run the suite with this many seconds left")
    p.add_argument("--cell-timeout", type=int, default=240, help="seconds per cell")
    p.add_argument("--workers", type=int, default=4, help="pytest-xdist workers for the suite")
    p.add_argument("--rehearse", action="store_true", help="run without a GPU, to try the run itself")
    p.add_argument("--notebooks", type=pathlib.Path, default=NOTEBOOKS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.start = STARTED if argv is None else None
    if args.plan is not None:
        try:
            budgets = [float(b) for b in args.plan.split(",")]
        except ValueError:
            p.error(f"--plan takes budgets in seconds, e.g. 540,540; got {args.plan!r}")
        names = [q.name for q in lesson_paths(args.notebooks)]
        print_plan(budgets, estimates_for(names, override=read_estimates(args.estimates)),
                   args.measure_s, args.suite_min)
        return 0
    if args.outdir is None:
        p.error("give OUTDIR (or --plan)")
    if args.accept:
        return accept(args.outdir)
    if args.lessons and not args.resume:
        p.error("--lessons records lessons again: give the earlier call's files with --resume")
    try:
        lesson_numbers(args.lessons)
    except ValueError as e:
        p.error(str(e))
    return record(args)


if __name__ == "__main__":
    sys.exit(main())
