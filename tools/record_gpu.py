"""On a GPU machine: run every lesson and record what its GPU-only cells print; then
tools/measure_gpu.py, then the strict test suite, as far as a time budget allows.

    python3 tools/record_gpu.py --plan                      # here: what one call runs, from the estimates
    python3 tools/record_gpu.py OUTDIR                      # on the GPU machine (needs CUDA)
    python3 tools/record_gpu.py OUTDIR --resume PREVIOUS    # a later call: what is missing
    python3 tools/record_gpu.py OUTDIR --resume PREVIOUS --lessons 8,11    # record these again
    python3 tools/record_gpu.py --accept OUTDIR             # back here: check, copy into measurements/
    python3 tools/record_gpu.py OUTDIR --rehearse           # here, without a GPU: the whole run, dry

The GPU machine as it is lent (CONTRIBUTING.md, "Recording on a GPU machine"): one H100
(an H200 where it is named, or where no H100 starts in time), about 15 minutes (900 s) of device time in all per session, the
machine's start (1-2 minutes) and its 30 s warm-down after a call included, at most 10
minutes (600 s) a command, and no machine started with less than 4 minutes left. So the
recording is planned as ONE call of the device tool (``timeout_s: 600``), and this script
keeps ``--budget`` seconds (default 570: the command's 600 s, less about 10 s for the wheels
before it starts and 20 s to stop a kernel and write the files after it):

    the session, at most: start 120 s + transfers 20 s + the command 600 s + warm-down 30 s = 770 s of 900 s

The 130 s left are less than the 240 s a new machine needs, so there is no second call in
that session unless the machine is still warm (within 30 s of the first call's end):
whatever the call did not do waits for a later session (``--resume``). The plan for that
call on an H100 (``--plan``, from the estimates below; nothing has been timed on a GPU yet):

    start 5 s, preflight 30 s, lessons 01-11 and 13 (395 s; lesson 12 is skipped: its one
    GPU-only cell needs 2 GPUs; so is lesson 14, whose two need 2 GPUs), measure_gpu 60 s:
    about 490 s of the 570, 80 s spare.
    The suite (about 470 s) fits in no call after the lessons: a later session runs it.

If the lessons take longer than estimated, the budget stops them, and every GPU-only cell
that finished is kept (below). The steps, in order:

0. The preflight: is there a C compiler and are Python's headers there (Triton builds a
   small C module the first time it runs), and, on a GPU, does ``torch.compile`` of a
   one-line function run on cuda (in a child process, cold caches, with a timeout)? Its
   answer, and what is missing, goes into ``summary.json``; lessons 11 and 13 compile.
   Before it, the GPU's name is looked up in the datasheet table
   (``d2l_utils.gpu_models.gpu_spec``): a GPU that is not there gets a warning at once and a
   line in the summary (``judged``): its numbers are shown, not judged.
1. The lessons, in order, each in a fresh kernel, with errors allowed (a cell that raises
   keeps its outputs, its traceback too, and the lesson goes on to its end). A lesson
   is skipped (listed under ``skipped``) when it has no GPU-only cell that the machine's GPUs
   can run (on one GPU: lessons whose GPU-only cells all need two). A lesson starts when its
   estimate fits in the time left; the kernel is killed when the budget runs out (the lesson
   is then reported as cut off, and a resume runs it again).
   **Saved per cell**: as soon as a GPU-only cell finishes, its outputs and the lines its
   ``d2l.check_expected`` wrote are put into ``gpu-recording.json`` and the summary is
   rewritten (each file written whole to ``NAME.tmp``, then renamed), so a call killed in
   the middle of a lesson (the device tool kills the command at its limit and returns what
   is under $OUT) keeps every GPU-only cell that had finished.
2. ``tools/measure_gpu.py`` (lesson 3's copy curves), if ``--measure-s`` seconds and a
   margin are left (cut off, its figures would be lost).
3. The lessons whose estimate did not fit, started anyway while ``--partial-min`` seconds
   are left: the budget may cut them off, and the GPU-only cells they finish are kept.
4. The strict suite (``python -m pytest``, nbval comparing outputs), only with
   ``--suite-min`` seconds left, and stopped at the budget.

The estimates. A lesson's estimate is its seconds in ``measurements/budgets-cpu.json`` (the
whole lesson, kernel start included, measured on 2 cores without a GPU) plus its entry in
``GPU_ALLOWANCE_S``: the seconds its GPU-only branches are expected to add on an H100 (CUDA's
start, compiles, CUDA graphs, timing loops; each entry says why). A lesson that is not in
the budgets file counts ``budget.lesson_s`` (the most a lesson may take there), a lesson
without an allowance ``DEFAULT_ALLOWANCE_S``, and a skipped lesson 0. On ``--resume`` a
lesson that an earlier call finished is estimated at the seconds it took there.
``--estimates FILE`` (JSON, lesson file name to seconds) replaces any of them. The other
steps: ``PREFLIGHT_S``, ``--measure-s``, and for the suite the sum of the lessons'
estimates plus ``SUITE_EXTRA_S``. ``--plan`` prints, from these estimates, which steps each
call runs (``--plan 570,570``: two calls, each in a session of its own) and the device time.

``--resume DIR`` reads a recording written by an earlier call (the files come back from the
GPU machine; carry them to the next call) and runs only what it lacks: the lessons it has
not finished (a lesson cut off or killed half-way runs again from the top; the cells it
recorded stay until they are recorded again), then the steps not yet passed. Lessons named
with ``--lessons`` (``8,11`` or ``08,11``) are recorded again: their cells are replaced as
they run, and when the lesson finishes, a cell of it that was not recorded again is dropped;
a suite that passed before is then run again too (it ran the lessons as they were). Only a
recording of the same machine (GPU, GPU count, driver, CUDA, PyTorch) is resumed: a resume
asks for the kind of machine the first call got.

It writes into OUTDIR at most six files (the device tool brings back at most eight):

* ``gpu-recording.json``: for every GPU-only cell (a cell whose fallback calls
  ``d2l.show_recording('<id>', gpus=N)``), the text and figures its GPU branch printed, with
  a fingerprint of the cell's source and, under ``checks``, the lines its
  ``d2l.check_expected`` call wrote (expected against measured); a cell that raised keeps
  its outputs and checks, its traceback as text and ``error`` (the exception's first line);
  cells that need more GPUs than the machine has, under ``needs_more_gpus``; and under
  ``lessons`` each finished or skipped lesson's time and problems.
* ``gpu.json``: the figures of ``tools/measure_gpu.py`` (lesson 3 plots them).
* ``summary.json``: the machine, whether its GPU is in the datasheet table (``judged``),
  the environment the children ran in, and each step's result and seconds (the preflight's
  findings; the lessons' problems, failed cells with their errors, skipped, cut-off and
  running lessons, and missed expectations). The exit status is 0 only when every step ran
  and passed, no cell failed and no expectation was missed.
* ``lessons.log``, ``measure.log``, ``suite.log``: what each step printed.

(A command killed while a JSON file is being rewritten can leave one ``NAME.tmp`` more.)
The expectation checks go through a temporary file outside OUTDIR: each lesson's kernel gets
``COURSE_CHECKS`` naming a fresh one, read after each GPU-only cell. A missed expectation is
a finding, not a failure of the recording: ``--accept`` accepts such a recording and says so.
A failed cell is not a finding but a bug in its GPU branch: ``--accept`` refuses the
recording and names the cell (fix it, then ``--resume DIR --lessons N``).

Every child (kernel, measure_gpu.py, pytest) runs with the repository on PYTHONPATH and
without ``PYTORCH_CUDA_ALLOC_CONF`` / ``PYTORCH_ALLOC_CONF`` (lesson 8's allocator numbers
assume the default settings). The GPU machine may lack the Jupyter packages and have no
network: ``tools/fetch_gpu_wheels.sh`` downloads them here beforehand (see its header).

``--rehearse`` runs the same steps on a machine without a GPU, as if on the lent machine
(``--rehearse-as``, default one NVIDIA H100 80GB HBM3): lessons are skipped and the table is
looked up as they would be there; GPU-only cells take their fallback, which is "recorded"
per cell in their place; the preflight checks the compiler and the headers only; the
machine description says it is a rehearsal, and ``--accept`` refuses the result. It tries
everything but the GPU: the wheels, the kernels, the budget, per-cell saving, a kill and a
resume.
"""
import argparse
import base64
import json
import math
import os
import pathlib
import re
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

# The estimates (the module's docstring says how they are used): the seconds that a lesson's
# GPU-only branches add on one H100 SXM (the lent machine: 132 SMs, 80 GB at 3.35 TB/s, a
# 16-core host) to its CPU seconds in measurements/budgets-cpu.json. Nothing has run on a GPU
# yet: each entry is read off the lesson's GPU branches (what they time, compile, start). The
# twelve lessons run on one GPU come to about 395 s (lessons 12 and 14 are skipped), inside issue 27's
# forecast for an H200 (400-460 s): the H100's matrix rate is the H200's and its memory 30%
# slower, which changes seconds only where a cell moves gigabytes (none does for long); the
# host's work (Python, kernel and CUDA starts, compiles) dominates almost everywhere. After a
# first call, the seconds it measured (gpu-recording.json, "lessons") are the better figures.
GPU_ALLOWANCE_S = {
    "01": (12, "CUDA starts in the kernel (1-2 s), and again in the child processes of 01-too-late and "
               "01-context-memory (2-4 s each); the rest are property reads"),
    "02": (6, "six small one-GPU cells: CUDA's start and a few copies and host waits"),
    "03": (12, "copy timings up to 64 MiB both ways, pinned and pageable, a 32 MiB pin-cost loop, 20 "
               "products in 03-pageable-non-blocking (cuBLAS's start); NVML's link"),
    "04": (12, "time_op loops (0.2 s and more each), a launch timeline, sync-debug mode, and "
               "CUDA_LAUNCH_BLOCKING's two child processes (each starts CUDA: 2-4 s)"),
    "05": (8, "cuDNN's start and its benchmark search over convolution algorithms, deterministic "
              "index_add_ over 10^6 values"),
    "06": (5, "three one-GPU cells (DataParallel on one GPU); the two 2-GPU cells are skipped"),
    "07": (20, "torchrun: a child process that starts CUDA and NCCL (5-10 s), then trains; "
               "the one-process reference on cuda"),
    "08": (30, "twelve cells: allocator experiments of a few MiB, two of them in a child process "
               "(each starts CUDA: 2-4 s), an out-of-memory request (refused at once), a measured "
               "training step, a memory snapshot of two steps pickled and read back, and "
               "08-sdpa-backend's four attention runs (cuDNN's graph build)"),
    "09": (20, "time_op for 0.5 s x 4 dtypes (8192^3 products), 1 s x 4 training-step modes, "
               "0.3 s x 3 shapes, each with its warm-up; a float64 4096^3 reference product"),
    "10": (20, "the profiler (CUPTI) starts (2-5 s); roofline sweeps over sizes and dtypes; "
               "an MFU measurement with FlopCounterMode"),
    "11": (35, "a cold torch.compile(mode='reduce-overhead') with Triton (15-25 s on 16 cores), "
               "CUDA graph captures and make_graphed_callables, a child for the capture error"),
    "12": (3, "its one GPU-only cell needs 2 GPUs: on one GPU the lesson is skipped"),
    "13": (95, "two cold compiles (torch.compile of the blocks, then with CUDA graphs: 30-45 s "
               "each) and eight GPU versions of the training job, a profile (90-120 s in all)"),
    "14": (0, "its two GPU-only cells need 2 GPUs: on one GPU the lesson is skipped"),
}
DEFAULT_ALLOWANCE_S = 60        # a lesson not in the table above
PREFLIGHT_S = 30                # torch and Inductor start, one Triton compile (cold), cc builds its stub
PREFLIGHT_TIMEOUT_S = 150
SUITE_EXTRA_S = 30              # pytest's start and collection; the unit tests run beside the lessons
STARTUP_S = 5                   # the recorder's own start (torch's import, the machine's description)
MEASURE_MARGIN_S = 30           # measure_gpu starts only with its estimate and this to spare: cut off, its
                                # figures are lost, so it waits for the next call rather than squeeze in
PARTIAL_MIN_S = 30              # a lesson whose estimate does not fit starts anyway (step 3) with this left

# The lent machine (/work/.library/device/README.md and KINDS.md; CONTRIBUTING.md says which to ask for).
COMMAND_S = 600                 # the device tool's limit on one command (timeout_s at most)
WHEELS_S = 10                   # installing .whl/ (29 MB: 5 s on 2 cores here) before this script starts
FINISH_S = 20                   # after the budget: kill the kernel and its children, write the files
BUDGET_S = COMMAND_S - WHEELS_S - FINISH_S      # 570: the default --budget
DEVICE_S = 900                  # device time in all for a session, starts and warm-downs included
MACHINE_START_S = 120           # a machine's start, at most (1-2 minutes)
TRANSFER_S = 20                 # the working tree there (a few MiB, .whl/ 29 MB) and $OUT back
WARM_S = 30                     # a machine stays warm this long after a call (give_back ends it at once)
START_MIN_S = 240               # no machine starts with less device time left than this
LENT_GPUS = 1                   # every lent kind has one GPU
LENT_GPU = "NVIDIA H100 80GB HBM3"      # torch.cuda.get_device_name() there (KINDS.md: nvidia-smi's name)


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


def rehearsal_machine(gpu=LENT_GPU, gpus=LENT_GPUS):
    """The machine description of a rehearsal: it says that no GPU was there, and which
    machine it rehearses (``gpu_count`` is that machine's, so that lessons are skipped and
    cells listed under needs_more_gpus as they would be there)."""
    import datetime
    import platform

    import torch
    return {"gpu": f"NONE (rehearsal without a GPU, as {gpus}x {gpu}: not a recording)", "gpu_count": gpus,
            "rehearsed_gpu": gpu, "capability": "none", "driver": "none", "cuda": str(torch.version.cuda),
            "torch": torch.__version__, "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(), "rehearsal": True}


def judging(gpu):
    """Whether ``check_expected`` will judge this GPU's numbers: its entry in the datasheet
    table (``d2l_utils.gpu_models.gpu_spec``), as the summary's ``judged`` states it."""
    from d2l_utils import gpu_models
    spec = gpu_models.gpu_spec(gpu)
    if spec is not None:
        return {"gpu": gpu, "in_table": True, "table_key": spec.key,
                "line": f"{gpu} is the datasheet table's {spec.key}: its numbers are judged"}
    return {"gpu": gpu, "in_table": False, "table_key": None,
            "line": (f"{gpu} is not in the datasheet table (d2l_utils/gpu_models.py): its numbers are shown, "
                     "not judged (only items that are the same on every reference GPU are); add it to "
                     "the table, with its vendor source, to have them judged")}


def write_json(path, data):
    """Write ``data`` to ``path`` whole or not at all (a kill never leaves half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# ---------------------------------------------------------------- estimates and the plan

def lesson_paths(notebooks):
    return sorted(pathlib.Path(notebooks).glob("[0-9][0-9]_*.ipynb"))


def gpu_marks(path):
    """The GPU-only cells of the lesson at ``path``: [(cell index, id, GPUs it needs, source)]."""
    cells = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))["cells"]
    marks = []
    for index, cell in enumerate(cells):
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        if cell["cell_type"] == "code":
            marks += [(index, cell_id, int(gpus), src) for cell_id, gpus in MARK.findall(src)]
    return marks


def skipped_lessons(notebooks, gpus):
    """{lesson: why} for the lessons with no GPU-only cell that ``gpus`` GPUs can run."""
    skipped = {}
    for path in lesson_paths(notebooks):
        marks = gpu_marks(path)
        if not marks:
            skipped[path.name] = "it has no GPU-only cell"
        elif all(g > gpus for _, _, g, _ in marks):
            need = min(g for _, _, g, _ in marks)
            skipped[path.name] = (f"its GPU-only cell(s) {', '.join(i for _, i, _, _ in marks)} need "
                                  f"{need} GPUs or more; this machine has {gpus}")
    return skipped


def estimates_for(names, measured=None, override=None, budgets_path=BUDGETS, skipped=None):
    """Each lesson's estimate in seconds, and how it was made: {name: (seconds, why)}.

    ``measured``: seconds an earlier call took (used where given); ``override``: seconds
    from ``--estimates`` (used before anything else); ``skipped``: {lesson: why} for the
    lessons that are not run (0 s).
    """
    budgets = json.loads(pathlib.Path(budgets_path).read_text(encoding="utf-8"))
    cpu_default = budgets["budget"]["lesson_s"]
    out = {}
    for name in names:
        if skipped and name in skipped:
            out[name] = (0.0, f"skipped: {skipped[name]}")
        elif override and name in override:
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
         measure_done=False, suite_done=False, partial_min=PARTIAL_MIN_S, suite_s=None):
    """Which steps each call runs, by the rules the recorder follows and the estimates.

    ``estimates``: {lesson: seconds}, in lesson order, of the lessons to run (not the skipped
    ones). Returns ``(calls, unrun)``: per call, its budget, its steps as (name, seconds,
    whole), the seconds spare; then what no call runs whole. A lesson started in step 3 with
    less time left than its estimate is planned as cut off at the budget (not whole): the
    GPU-only cells it finishes are kept, and a later call runs it again. ``suite_s``: the
    suite's estimate (default: the lessons' estimates and ``SUITE_EXTRA_S``).
    """
    todo = [n for n in estimates if n not in lessons_done]
    if suite_s is None:
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
        if todo and left >= partial_min:
            steps.append((todo[0], round(left, 1), False))      # cut off at the budget
            left = 0
        if not suite_done and left >= suite_min:
            whole = suite_s <= left
            steps.append(("suite", suite_s if whole else round(left, 1), whole))
            left -= min(suite_s, left)
            suite_done = whole
        calls.append((budget, steps, round(left, 1)))
    unrun = todo + (["measure_gpu"] if not measure_done else []) + (["suite"] if not suite_done else [])
    return calls, unrun


def lesson_list(names):
    """'01-11, 13' for the lessons 01_..., ..., 11_..., 13_...: runs of numbers joined."""
    numbers, runs = [int(n[:2]) for n in names], []
    for k in numbers:
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    return ", ".join(f"{a:02d}" if a == b else f"{a:02d}, {b:02d}" if b == a + 1 else f"{a:02d}-{b:02d}"
                     for a, b in runs)


def session_seconds(command_s):
    """The device time of a session with one call whose command takes ``command_s``: the
    machine's start, the transfers, the command, the warm-down after it."""
    return MACHINE_START_S + TRANSFER_S + command_s + WARM_S


def print_plan(budgets, estimates, measure_s, suite_min, out=print, skipped=None):
    """The plan, printed: the estimates, each call with its margins, and the device time.

    ``estimates``: {lesson: (seconds, why)} of every lesson, skipped ones included
    (``skipped``: {lesson: why}). Returns what no call runs."""
    skipped = skipped or {}
    seconds = {n: s for n, (s, _) in estimates.items() if n not in skipped}
    cpu = json.loads(BUDGETS.read_text(encoding="utf-8"))["lessons"]      # the suite runs a skipped lesson too
    suite_s = round(sum(seconds.values()) + sum(cpu.get(n, {}).get("seconds", 30) for n in skipped)
                    + SUITE_EXTRA_S, 1)
    out(f"Estimates, in seconds on one {LENT_GPU} (tools/record_gpu.py's docstring says how they are made):")
    rows = [("start", STARTUP_S, "the recorder's own start, each call"),
            ("preflight", PREFLIGHT_S, f"torch.compile of a one-line function, cold (timeout {PREFLIGHT_TIMEOUT_S} s)"),
            *((n, s, why) for n, (s, why) in estimates.items()),
            ("measure_gpu", measure_s, "--measure-s (its docstring: about a minute on one GPU)"),
            ("suite", suite_s, f"the lessons again (skipped ones at their CPU seconds), taking turns on the "
                               f"GPU, + {SUITE_EXTRA_S} s")]
    for name, s, why in rows:
        out(f"  {name:37} {s:6.1f}  {why}")
    if skipped:
        out(f"skipped on {LENT_GPUS} GPU: lesson(s) {lesson_list(list(skipped))} (no GPU-only cell that "
            f"{LENT_GPUS} GPU can run)")
    calls, unrun = plan(budgets, seconds, measure_s, suite_min, suite_s=suite_s)
    for k, (budget, steps, spare) in enumerate(calls, 1):
        lessons = [n for n, _, whole in steps if n in seconds and whole]
        shown = [n for n, _, _ in steps if n == "preflight"]
        if lessons:
            shown.append(f"lessons {lesson_list(lessons)}" if len(lessons) > 1 else f"lesson {lessons[0][:2]}")
        shown += [n for n, _, _ in steps if n == "measure_gpu"]
        shown += [f"lesson {n[:2]} started with {s:.0f} s left, cut off at the budget (the GPU-only cells "
                  f"it finishes are kept)" for n, s, whole in steps if n in seconds and not whole]
        shown += [("suite" if whole else f"suite, cut off at the budget after {s:.0f} of its {suite_s:.0f} s")
                  for n, s, whole in steps if n == "suite"]
        used = budget - spare
        command = WHEELS_S + budget + FINISH_S
        device = session_seconds(command)
        out(f"call {k} (--budget {budget:g}): {', '.join(shown)}: {used:.0f} s planned, {spare:.0f} s of the "
            f"budget spare; the budget stops every step, and the command ({WHEELS_S} s of wheels, the "
            f"budget, up to {FINISH_S} s to write the files) takes at most {command:.0f} s of the tool's "
            f"{COMMAND_S} s" + ("" if command <= COMMAND_S else ": TOO LONG, the tool kills it (what it saved stays)"))
        out(f"  its session's device time: start up to {MACHINE_START_S} s + transfers {TRANSFER_S} s + the "
            f"command {command:.0f} s + warm-down {WARM_S} s = {device:.0f} s of the {DEVICE_S} s there are"
            + (f" ({DEVICE_S - device:.0f} s spare: " + (
                "too little to start another machine, so a further call goes to a later session, "
                f"or to this machine while it is warm ({WARM_S} s)" if DEVICE_S - device < START_MIN_S else
                "enough for another machine's start") + ")" if device <= DEVICE_S else
               ": MORE than there is; a smaller --budget"))
    out("not run whole by these calls: " + (", ".join(unrun) if unrun else "nothing"))
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

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def outputs_of(cell):
    """A cell's outputs as the recording stores them: text (stdout, stderr, values, and an
    error's traceback as stderr, without colours) and PNG figures; consecutive pieces of one
    stream are joined.

    Returns ``(outputs, error)``; ``error`` is the error's name and message, or None.
    """
    outputs, error = [], None
    for out in cell.get("outputs", []):
        kind = out["output_type"]
        if kind == "stream":
            text = out["text"] if isinstance(out["text"], str) else "".join(out["text"])
            if outputs and outputs[-1]["type"] == "text" and outputs[-1]["name"] == out["name"] \
                    and not outputs[-1].get("traceback"):
                outputs[-1]["text"] += text
            else:
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
            trace = ANSI.sub("", "\n".join(out.get("traceback") or [])).strip() or error
            outputs.append({"type": "text", "name": "stderr", "text": trace + "\n", "traceback": True})
    return outputs, error


def cell_entry(cell, lesson, cell_id, gpus, src):
    """The recording of one executed GPU-only cell: ``(entry, problem)``.

    A cell that raised is recorded with what it printed, its traceback, and ``error``; a
    cell that printed nothing is not recorded (``problem`` says so)."""
    outputs, error = outputs_of(cell)
    if not outputs:
        return None, f"{lesson}, cell {cell_id}: printed nothing"
    entry = {"lesson": lesson, "gpus": gpus, "source_sha256": source_hash(src), "outputs": outputs}
    if error:
        entry["error"] = error[:500]
    return entry, None


def record_notebook(nb, lesson, gpu_count, ran=None, keep_failed=False):
    """From an executed notebook, the recording of its GPU-only cells.

    ``ran``: the indices of the cells that ran to their end (None: all of them); a cell that
    did not (the budget cut the lesson off) is not recorded. Returns ``(cells, needs_more,
    problems)``: recorded cells by id, the ids that need more GPUs than ``gpu_count`` (with
    why), and what went wrong (a GPU-only cell that raised, or that printed nothing). A cell
    that raised is recorded (with ``error``) only with ``keep_failed``, as the recorder does
    cell by cell; else it is left out, and named in the problems.
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
            entry, problem = cell_entry(cell, lesson, cell_id, gpus, src)
            if problem:
                problems.append(problem)
            elif "error" in entry and not keep_failed:
                problems.append(f"{lesson}, cell {cell_id}: raised {entry['error']}")
            else:
                cells[cell_id] = entry
    return cells, needs_more, problems


def read_checks(path):
    """The JSON lines that ``d2l.check_expected`` appended to ``path``; returns (lines, problems)."""
    lines, problems = [], []
    if not path or not os.path.exists(path):
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


def run_lesson(path, cell_timeout, deadline=None, checks_file=None, on_cell=None, skip_errors=()):
    """Execute one lesson in a fresh kernel, stopping it at ``deadline`` (time.monotonic()).

    The stored outputs are cleared first, so a cell that did not run shows nothing. The
    kernel gets ``COURSE_CHECKS=checks_file``. Errors are allowed: a cell that raises keeps
    its traceback and the next cell runs. ``on_cell(cell, index)`` is called as each cell
    finishes, with its outputs complete. Returns ``(nb, ran, problems, cut)``: the executed
    notebook, the indices of the code cells that ran to their end, what went wrong (the
    errors of cells not in ``skip_errors``, a kernel that died), and None or where the
    budget cut the lesson off (the kernel is then killed).
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

    def executed(cell, cell_index, execute_reply):
        ran.add(cell_index)
        if on_cell is not None:
            on_cell(cell, cell_index)

    def timeout(cell):
        return max(1, math.ceil(min(cell_timeout, deadline - time.monotonic())))

    env = child_env()
    if checks_file:
        env["COURSE_CHECKS"] = str(checks_file)
    client = client_class()(nb, timeout_func=timeout, kernel_name="python3", allow_errors=True,
                            on_cell_execute=before, on_cell_executed=executed,
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
                 for index, c in enumerate(nb.cells) if c.cell_type == "code" and index not in skip_errors
                 for o in c.get("outputs", []) if o["output_type"] == "error"]
    return nb, ran, problems, cut


# ---------------------------------------------------------------- one call

class Run:
    """One call of the recorder: its budget, its files, and what earlier calls left."""

    def __init__(self, outdir, budget, notebooks=NOTEBOOKS, start=None):
        self.outdir, self.notebooks = outdir, notebooks
        self.start, self.budget = (time.monotonic() if start is None else start), budget
        self.cut_off, self.running = {}, {}
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
    (two-digit numbers) among the finished ones, and without its suite step when a lesson
    is recorded again. Every recorded cell stays (a cell of a lesson that did not finish, or
    that is recorded again, is replaced when it runs again)."""
    if previous is None:
        return {"note": NOTE, "machine": machine, "cells": {}, "needs_more_gpus": {}, "lessons": {}}, {}
    rec = json.loads((previous / RECORDING).read_text(encoding="utf-8"))
    differs = {k: (rec["machine"].get(k), machine.get(k)) for k in SAME_MACHINE
               if rec["machine"].get(k) != machine.get(k)}
    if differs:
        raise SystemExit(f"--resume: {previous / RECORDING} was made on another machine: {differs} "
                         "(ask the device tool for the kind the first call got)")
    rec["machine"] = machine                        # today's date
    rec["lessons"] = {k: v for k, v in rec.get("lessons", {}).items() if k[:2] not in redo}
    steps = {}
    if (previous / "summary.json").exists():
        steps = json.loads((previous / "summary.json").read_text(encoding="utf-8"))["steps"]
        steps.pop("lessons", None)
        if redo:
            steps.pop("suite", None)                # it ran the lessons as they were
    return rec, steps


class LessonRecorder:
    """Records one lesson's GPU-only cells as they finish, saving after each one.

    ``save()`` writes the recording and the summary (each atomically). ``cell_done`` is
    nbclient's per-cell hook (through ``run_lesson``'s ``on_cell``); ``finish`` ends the lesson.
    """

    def __init__(self, rec, path, gpus, checks, save):
        self.rec, self.lesson, self.checks, self.save = rec, path.name, checks, save
        marks = gpu_marks(path)
        self.marks = {}
        for index, cell_id, need, src in marks:
            if need <= gpus:
                self.marks.setdefault(index, []).append((cell_id, need, src))
        self.recorded, self.problems = [], []
        needs_more = rec["needs_more_gpus"]
        for cell_id in [k for k, v in needs_more.items() if v["lesson"] == self.lesson]:
            del needs_more[cell_id]
        needs_more.update({cell_id: {"lesson": self.lesson, "gpus": need,
                                     "why": f"needs {need} GPUs; this machine has {gpus}"}
                           for _, cell_id, need, _ in marks if need > gpus})

    def cell_done(self, cell, index):
        if index not in self.marks:
            return
        lines, _ = read_checks(self.checks)
        for cell_id, need, src in self.marks[index]:
            entry, problem = cell_entry(cell, self.lesson, cell_id, need, src)
            if problem:
                self.problems.append(problem)
                continue
            entry["checks"] = [line for line in lines if line.get("cell") == cell_id]
            self.rec["cells"][cell_id] = entry
            self.recorded.append(cell_id)
        self.save()

    def finish(self, cut, ended=True):
        """The lesson's end: the problems of its checks; when it ran to its end (not ``cut``
        off, and ``ended``: its last code cell ran), the cells of it that an earlier call
        recorded and this one did not are dropped."""
        lines, problems = read_checks(self.checks)
        orphans = sorted({str(line.get("cell")) for line in lines} - set(self.recorded))
        if orphans and not cut:
            problems.append(f"{self.lesson}: expectation checks of cell(s) {', '.join(orphans)}, which this "
                            "lesson did not record")
        if not cut and ended:
            for cell_id in [k for k, v in self.rec["cells"].items()
                            if v["lesson"] == self.lesson and k not in self.recorded]:
                del self.rec["cells"][cell_id]
        return self.problems + problems


def record_lessons(run, rec, summary, cell_timeout, estimates, gpus, partial=False, partial_min=PARTIAL_MIN_S):
    """Run each lesson that ``rec`` has not finished: skip those with no GPU-only cell that
    ``gpus`` GPUs can run; start the others when their estimate fits in the time left (with
    ``partial``: when ``partial_min`` seconds are left). Each GPU-only cell is saved as it
    finishes, and everything again after each lesson."""
    skipped = skipped_lessons(run.notebooks, gpus)

    def save():
        write_json(run.outdir / RECORDING, rec)
        summary["steps"]["lessons"] = lessons_step(rec, run.notebooks, run.cut_off, run.running)
        write_json(run.outdir / "summary.json", summary)

    waiting = []
    for path in lesson_paths(run.notebooks):
        if path.name in rec["lessons"]:
            continue
        if path.name in skipped:
            LessonRecorder(rec, path, gpus, None, save)         # lists its cells under needs_more_gpus
            rec["lessons"][path.name] = {"seconds": 0.0, "problems": [], "skipped": skipped[path.name]}
            save()
            run.log("lessons.log", f"{path.name}: skipped: {skipped[path.name]}")
            continue
        need, left = estimates[path.name][0], max(0.0, run.left())
        if need > left and not (partial and left >= partial_min):
            if partial:
                waiting.append(path.name)
            else:
                run.log("lessons.log", f"{path.name}: not started: its estimate is {need:.0f} s, {left:.0f} s left"
                        + (" (it may start after measure_gpu)" if left >= partial_min else ""))
            continue
        if need > left:
            run.log("lessons.log", f"{path.name}: started with {left:.0f} s left, less than its "
                                   f"estimate ({need:.0f} s): the GPU-only cells it finishes are kept")
        began = time.monotonic()
        run.cut_off.pop(path.name, None)
        with tempfile.TemporaryDirectory(prefix="course-checks-") as tmp:
            checks = pathlib.Path(tmp) / "checks.jsonl"
            lesson = LessonRecorder(rec, path, gpus, checks, save)
            run.running = {path.name: lesson.recorded}
            nb, ran, problems, cut = run_lesson(path, cell_timeout, run.deadline(), checks,
                                                on_cell=lesson.cell_done, skip_errors=set(lesson.marks))
            last = max((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), default=None)
            problems += lesson.finish(cut, ended=last is None or last in ran)   # not when the kernel died
        run.running = {}
        seconds = round(time.monotonic() - began, 1)
        if cut:
            run.cut_off[path.name] = {"seconds": seconds, "where": cut, "recorded": list(lesson.recorded),
                                      "problems": problems}
        else:
            rec["lessons"][path.name] = {"seconds": seconds, "problems": problems}
        save()
        failed = [c for c in lesson.recorded if "error" in rec["cells"][c]]
        run.log("lessons.log", f"{path.name}: {seconds} s (estimate {need:.0f} s), "
                               + (f"{cut}; the kernel was killed (resume to run it again), " if cut else "")
                               + f"{len(lesson.recorded)} GPU cell(s) recorded"
                               + (f" ({len(failed)} failed: {', '.join(failed)})" if failed else "")
                               + f", {len(problems)} problem(s)")
        for cell_id in failed:
            run.log("lessons.log", f"  cell {cell_id} failed: {rec['cells'][cell_id]['error']}")
        for problem in problems:
            run.log("lessons.log", f"  {problem}")
    if waiting:
        run.log("lessons.log", f"not started, {max(0.0, run.left()):.0f} s left: lesson(s) {lesson_list(waiting)} "
                               "(resume to run them)")


def lessons_step(rec, notebooks, cut_off=None, running=None):
    """The lessons step as the summary reports it."""
    all_lessons = [p.name for p in lesson_paths(notebooks)]
    done = rec["lessons"]
    problems = [p for v in done.values() for p in v["problems"]]
    missing = [name for name in all_lessons if name not in done]
    if not missing:                       # a cell that raised is listed once, under "failed"
        problems += check_recording(rec, notebooks, failed=False)
    return {"finished": sum(1 for v in done.values() if "skipped" not in v), "of": len(all_lessons),
            "skipped": {k: v["skipped"] for k, v in done.items() if "skipped" in v},
            "missing": missing, "problems": problems,
            "failed": {k: {"lesson": v["lesson"], "error": v["error"]} for k, v in sorted(rec["cells"].items())
                       if "error" in v},
            "cells_recorded": len(rec["cells"]),
            "running": {k: {"recorded so far": list(v)} for k, v in (running or {}).items()},
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
    if args.rehearse:
        gpus, gpu = LENT_GPUS, args.rehearse_as
        machine = rehearsal_machine(gpu, gpus)
    else:
        gpus, gpu = torch.cuda.device_count(), torch.cuda.get_device_name()
        machine = machine_info()
    judged = judging(gpu)
    if not judged["in_table"]:
        print(f"WARNING: {judged['line']}.", file=sys.stderr, flush=True)
    names = [p.name for p in lesson_paths(run.notebooks)]
    redo = lesson_numbers(args.lessons)
    unknown = sorted(redo - {n[:2] for n in names})
    if unknown:
        raise SystemExit(f"--lessons: no lesson numbered {', '.join(unknown)} in {run.notebooks}")
    earlier = {}
    if args.resume:
        earlier = {k: v["seconds"] for k, v in json.loads((args.resume / RECORDING).read_text(
            encoding="utf-8")).get("lessons", {}).items() if "skipped" not in v}
    rec, steps = resume(args.resume, machine, redo)
    if args.resume:
        for name in ("gpu.json", "measure.log", "suite.log"):    # carry an earlier step's files over
            if (args.resume / name).exists() and not (run.outdir / name).exists():
                shutil.copy(args.resume / name, run.outdir / name)
    skipped = skipped_lessons(run.notebooks, gpus)
    estimates = estimates_for(names, measured=earlier, override=read_estimates(args.estimates), skipped=skipped)
    summary = {"machine": machine, "judged": judged, "environment": environment_record(), "budget_s": args.budget,
               "estimates_s": {n: s for n, (s, _) in estimates.items()}, "steps": steps}
    summary["steps"]["lessons"] = lessons_step(rec, run.notebooks)
    write_json(run.outdir / RECORDING, rec)
    write_json(run.outdir / "summary.json", summary)
    run.log("lessons.log", f"machine: {machine}\nbudget: {args.budget} s\n{judged['line']}")

    if not summary["steps"].get("preflight", {}).get("ok"):
        summary["steps"]["preflight"] = preflight(args.rehearse, max(1, min(PREFLIGHT_TIMEOUT_S, run.left() - 10)))
        write_json(run.outdir / "summary.json", summary)
        for line in preflight_lines(summary["steps"]["preflight"]):
            run.log("lessons.log", line)

    record_lessons(run, rec, summary, args.cell_timeout, estimates, gpus)

    if "measure_gpu" not in summary["steps"] or summary["steps"]["measure_gpu"]["exit"] != 0:
        if run.left() >= args.measure_s + MEASURE_MARGIN_S and not args.rehearse:
            summary["steps"]["measure_gpu"] = run_step(
                [sys.executable, "tools/measure_gpu.py", "--out", str(run.outdir / "gpu.json")],
                run.outdir / "measure.log", timeout=max(1, run.left() - 10))
            write_json(run.outdir / "summary.json", summary)
        else:
            run.log("lessons.log", "measure_gpu.py: not run (" +
                    ("a rehearsal has no GPU to measure)" if args.rehearse else f"{max(0.0, run.left()):.0f} s left)"))

    if any(n not in rec["lessons"] for n in names):                 # step 3: what did not fit, partly
        record_lessons(run, rec, summary, args.cell_timeout, estimates, gpus, partial=True,
                       partial_min=args.partial_min)
    summary["steps"]["lessons"] = lessons_step(rec, run.notebooks, run.cut_off)
    write_json(run.outdir / "summary.json", summary)

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
            run.log("lessons.log", f"suite: not run ({max(0.0, run.left()):.0f} s left; resume to run it)")

    lessons = summary["steps"]["lessons"]
    pre = summary["steps"]["preflight"]
    print(judged["line"], flush=True)
    print(*preflight_lines(pre), sep="\n", flush=True)
    print(f"lessons: {lessons['finished']} of {lessons['of']} finished, {len(lessons['skipped'])} skipped, "
          f"{lessons['cells_recorded']} GPU-only cell(s) recorded, {len(lessons['failed'])} failed, "
          f"{len(lessons['problems'])} problem(s)", *lessons["problems"], sep="\n  ", flush=True)
    for name, why in lessons["skipped"].items():
        print(f"  {name}: skipped: {why}")
    for cell_id, failed in lessons["failed"].items():
        print(f"  cell {cell_id} ({failed['lesson']}) failed: {failed['error']}")
    for name, cut in lessons["cut_off"].items():
        print(f"  {name}: {cut['where']}, {len(cut['recorded'])} GPU-only cell(s) kept (resume to run it again)")
    for name in lessons["missing"]:
        if name not in lessons["cut_off"]:
            print(f"  {name}: not started (resume to run it)")
    if lessons["misses"]:
        print(f"expectations: {len(lessons['misses'])} missed (findings: the model or the prose changes, "
              "not the measurement)", *lessons["misses"], sep="\n  ", flush=True)
    for name in ("measure_gpu", "suite"):
        print(f"{name}: {summary['steps'].get(name, 'not run')}", flush=True)
    ok = (pre["ok"] and not lessons["missing"] and not lessons["problems"] and not lessons["failed"]
          and not lessons["misses"]
          and all(summary["steps"].get(s, {}).get("exit") == 0 for s in ("measure_gpu", "suite")))
    return 0 if ok else 1


def accept(outdir):
    """Check a recording brought back from a GPU machine and copy it into measurements/.

    A missed expectation does not stop it: a miss is a finding. A cell that raised does: its
    GPU branch has a bug, and readers would be shown its traceback."""
    rec = json.loads((outdir / RECORDING).read_text())
    if rec["machine"].get("rehearsal"):
        print(f"{outdir / RECORDING} comes from a rehearsal without a GPU: not a recording.", file=sys.stderr)
        return 1
    problems = check_recording(rec, NOTEBOOKS, failed=False)      # a cell that raised: listed below
    problems += [f"{v['lesson']}, cell {k}: raised {v['error']} on the GPU (fix its GPU branch, then "
                 f"record it again: --resume {outdir} --lessons {v['lesson'][:2]})"
                 for k, v in sorted(rec["cells"].items()) if "error" in v]
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
    p.add_argument("--plan", nargs="?", const=f"{BUDGET_S}", metavar="BUDGETS",
                   help=f"print which steps each call runs, from the estimates (default {BUDGET_S}: one call; "
                        f"{BUDGET_S},{BUDGET_S}: two, each in a session of its own)")
    p.add_argument("--resume", type=pathlib.Path, help="a folder with an earlier call's files")
    p.add_argument("--lessons", help="lesson numbers to record again, e.g. 8,11 (with --resume)")
    p.add_argument("--budget", type=float, default=BUDGET_S,
                   help=f"seconds this call may take (default {BUDGET_S}: the device tool's {COMMAND_S} s a "
                        f"command, less {WHEELS_S} s of wheels and {FINISH_S} s to finish)")
    p.add_argument("--estimates", type=pathlib.Path,
                   help="JSON file: lesson file name -> estimated seconds (replaces the table's)")
    p.add_argument("--measure-s", type=float, default=60,
                   help="run measure_gpu.py with this many seconds left (its estimate; default 60)")
    p.add_argument("--partial-min", type=float, default=PARTIAL_MIN_S,
                   help=f"after measure_gpu, start a lesson whose estimate does not fit with this many seconds "
                        f"left (default {PARTIAL_MIN_S}); the GPU-only cells it finishes are kept")
    p.add_argument("--suite-min", type=float, default=150, help="run the suite with this many seconds left")
    p.add_argument("--cell-timeout", type=int, default=240, help="seconds per cell")
    p.add_argument("--workers", type=int, default=4, help="pytest-xdist workers for the suite")
    p.add_argument("--rehearse", action="store_true", help="run without a GPU, to try the run itself")
    p.add_argument("--rehearse-as", default=LENT_GPU, metavar="NAME",
                   help=f"with --rehearse: the GPU name rehearsed (default {LENT_GPU!r}, the lent H100)")
    p.add_argument("--notebooks", type=pathlib.Path, default=NOTEBOOKS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.start = STARTED if argv is None else None
    if args.plan is not None:
        try:
            budgets = [float(b) for b in args.plan.split(",")]
        except ValueError:
            p.error(f"--plan takes budgets in seconds, e.g. {BUDGET_S},{BUDGET_S}; got {args.plan!r}")
        names = [q.name for q in lesson_paths(args.notebooks)]
        skipped = skipped_lessons(args.notebooks, LENT_GPUS)
        print_plan(budgets, estimates_for(names, override=read_estimates(args.estimates), skipped=skipped),
                   args.measure_s, args.suite_min, skipped=skipped)
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
