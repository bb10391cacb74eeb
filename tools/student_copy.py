"""Build the students' copy of the course: the lessons without their outputs and solutions.

    python tools/student_copy.py OUTDIR                      # a folder to hand out (zip it)
    python tools/student_copy.py OUTDIR --repo OWNER/NAME    # to publish at github.com/OWNER/NAME
    python tools/student_copy.py OUTDIR --zh                 # the Chinese edition's copy (notebooks/zh/)

The repository is the teacher's copy: its lessons hold stored outputs (some print an
exercise's answer) and a worked solution under every exercise, only collapsed. The
students' copy is the same course with, in every lesson, the solution cells (`#@title
Solution ...`) removed and every output and execution count cleared; the other cells keep
their text and slide metadata, and the slideshows' stylesheets come along.

Nothing in the copy leads back to the teacher's repository (whose address is the Repository
in pyproject.toml), where the stored outputs and the solutions are:

- with ``--repo OWNER/NAME`` (where the teacher will push the copy), every address of the
  teacher's repository is replaced by the copy's: the lessons' Colab badges, the setup cell
  that installs the helpers on Colab, the helpers' "measure it yourself" Colab links, and the
  copy's pyproject.toml; the README gets a Binder badge and a Colab badge per lesson, all
  opening the copy;
- without it, there is nowhere for a badge to point, so the lessons' Colab badges are
  removed, and their links to the glossary (GLOSSARY.md, which the copy holds) become
  relative ones; the setup cell installs the helpers on Colab from ``d2l-utils.zip`` (a source
  archive of the helpers that the copy holds: students upload it beside the lesson), and the
  README says how to open a lesson on Colab (File > Upload notebook) and on Binder once the
  copy is published.

Beside the lessons the copy holds what students need to run them: the helpers (d2l_utils),
the recordings from real hardware (measurements/), the requirements files, pyproject.toml and
binder/ (without binder/README.md, which is about the teacher's tests). Its README is its own,
written here: how to open the lessons on a laptop, on Binder and on Colab, and how to run the
setup check; it names only files the copy has. The teacher's guide, the tests, the tools and
CONTRIBUTING.md stay out: the guide has the answers.

With ``--zh`` the copy's lessons are the Chinese edition's (notebooks/zh/, which tools/translate.py
makes from the English lessons), its starters and README in Chinese (``ZH``); everything else is
the same.

Every exercise gets a starter where its solution was: a markdown cell for the prediction
("Prediction: ...", which the rubric asks for before the measurement) and a code cell, the
measurement's skeleton. The skeleton makes what it needs itself (``SETUP``: the lesson's
objects made again, under names of their own where a later cell rebinds the lesson's), so
that it also runs after "Run all", and names the results the solution's own asserts check,
set to None: `tools/autograde.py` runs those asserts (``solution_checks``) on a submitted
notebook, right after the exercise's cells.
"""
import argparse
import ast
import json
import pathlib
import re
import shutil
import sys
import tomllib
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
KEEP = ["pyproject.toml", "requirements.txt", "requirements-cpu.txt", "GLOSSARY.md",
        "d2l_utils", "measurements", "binder"]
TEACHER_ONLY = ["otter-grader"]            # requirements the copy's files leave out: tools/autograde.py's
LEAVE_OUT = ["binder/README.md"]           # it explains the teacher's CI test of the Binder install
HELPERS_ZIP = "d2l-utils.zip"               # the helpers' source, for Colab without a published copy
BADGE = re.compile(r"\n*\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)\n*")
NO_REPO_SETUP = (
    "# Setup. On Colab, install the course's helpers from d2l-utils.zip, which is in your copy of the\n"
    "# course: upload it first (the Files panel on the left, Upload). --no-deps keeps Colab's own PyTorch.\n"
    "# Anywhere else they are already installed.\n"
    "import sys, pathlib\n"
    "if 'google.colab' in sys.modules:\n"
    "    assert pathlib.Path('d2l-utils.zip').exists(), 'upload d2l-utils.zip first (Files panel, Upload)'\n"
    "    %pip install -q --no-deps d2l-utils.zip")
NO_REPO_COLAB = "COLAB = 'Colab (File > Upload notebook, then upload d2l-utils.zip beside it): notebooks/'"


PLACEHOLDER = ("*Write it here, before you run the cell below: what you expect, with its numbers, "
               "and why.*")
# The Chinese copy's own words (--zh): the starters', the setup's without a repository, and the
# comments of SETUP and HINTS, by their English.
ZH = {
    "placeholder": "*在运行下面的单元格之前，先把预测写在这里：你预期看到什么、数字是多少、为什么。*",
    "prediction": "**练习 {n}。** 预测：{placeholder}",
    "skeleton": ("# 练习 {n}：你的测量。“全部运行”（Run all）之后它也必须能再次运行，那时后面的单元格已经\n"
                 "# 改变了课程里的名字：在这里用你自己起的名字创建所需的东西。"),
    "results": "# 把结果留在这些名字里（算出之前为 None）：教师的检查会读取它们。",
    "setup": "# 准备工作",
    "no_repo_setup": (
        "# 准备工作：在 Colab 上，从你的课程副本里的 d2l-utils.zip 安装本课程的辅助函数：先上传它\n"
        "# （左侧的 Files 面板，Upload）。--no-deps 保留 Colab 自带的 PyTorch。在其他环境中它们已经装好。\n"
        "import sys, pathlib\n"
        "if 'google.colab' in sys.modules:\n"
        "    assert pathlib.Path('d2l-utils.zip').exists(), 'upload d2l-utils.zip first (Files panel, Upload)'\n"
        "    %pip install -q --no-deps d2l-utils.zip"),
    "# the lesson's device": "# 本课的设备",
    "# By the end of this notebook `model` is a DDP wrapper and X, y other data: make your own.":
        "# 到本笔记本结尾，`model` 已是 DDP 包装，X、y 也换成了别的数据：自己创建一份。",
    "# the first step's 32 samples (indices: batch)": "# 第一步的 32 个样本（下标：batch）",
    "# the lesson's model sizes and batch, made again": "# 重新创建本课的模型尺寸和批量",
    "# the layer and input of the float16 section, made again": "# 重新创建 float16 一节的层和输入",
    "# chain's input, made again": "# 重新创建 chain 的输入",
    "# {'cpu': w.is_leaf after .to('cpu'), 'float64': w.is_leaf after .to(torch.float64)}":
        "# {'cpu': .to('cpu') 之后的 w.is_leaf, 'float64': .to(torch.float64) 之后的 w.is_leaf}",
    "# True if torch.load(..., weights_only=True) refused the file": "# torch.load(..., weights_only=True) 拒绝了该文件则为 True",
    "# the Config object, loaded inside safe_globals": "# 在 safe_globals 内加载得到的 Config 对象",
    "# {True: gathered output equal to one device's in training mode?, False: in evaluation mode?}":
        "# {True: 训练模式下汇集的输出是否等于单设备的输出？, False: 评估模式下呢？}",
}


def zh_comments(code):
    """``code`` with the comments that ZH translates in Chinese (for the Chinese copy's skeletons)."""
    for english, chinese in ZH.items():
        if english.startswith("# "):
            code = code.replace(english, chinese)
    return code
STARTER_TAG = "starter"                     # the starters' cells carry it (metadata.tags)
# What a skeleton makes again before the student's code, where the exercise needs a name that
# a later cell of the lesson rebinds (so that the cell also runs after "Run all"):
# {(lesson, exercise): code}.
SETUP = {
    **{(4, n): "device = d2l.try_gpu()                 # the lesson's device" for n in (1, 2, 3)},
    (7, 2): ("# By the end of this notebook `model` is a DDP wrapper and X, y other data: make your own.\n"
             "my_model, my_data = script['make_model'](), script['make_data']()\n"
             "X_first, y_first = my_data[batch]      # the first step's 32 samples (indices: batch)"),
    **{(8, n): ("d, depth, N = 64, 6, 256                # the lesson's model sizes and batch, made again\n"
                "torch.manual_seed(0)\n"
                "x, y = torch.randn(N, d), torch.randn(N, d)") for n in (1, 4, 5)},
    (9, 3): ("torch.manual_seed(0)                    # the layer and input of the float16 section, made again\n"
             "layer, x = nn.Linear(8, 8), torch.randn(4, 8)"),
    (11, 2): ("torch.manual_seed(0)                    # chain's input, made again\n"
              "x = torch.randn(1000)"),
}
# Checks of what a lab's solution prints but does not assert: {(lesson, exercise): [(assert
# statement, the names it reads, which the skeleton sets to None)]}. Empty: every lab item's
# solution now binds its result and asserts it.
EXTRA_CHECKS = {}


# What the skeleton says of a name it sets to None, where its form is not plain: {(lesson, name): comment}.
HINTS = {
    (2, "leaf_after"): "{'cpu': w.is_leaf after .to('cpu'), 'float64': w.is_leaf after .to(torch.float64)}",
    (5, "refused"): "True if torch.load(..., weights_only=True) refused the file",
    (5, "loaded_config"): "the Config object, loaded inside safe_globals",
    (6, "equal"): "{True: gathered output equal to one device's in training mode?, False: in evaluation mode?}",
}


def source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def is_solution(cell):
    return cell["cell_type"] == "code" and source(cell).lstrip().startswith("#@title Solution")


def is_setup(cell):
    """The Colab setup cell: its comment "# Setup. ..." (a Chinese lesson's "# 准备工作") opens it,
    after comment lines such as `# NBVAL_IGNORE_OUTPUT`."""
    if cell["cell_type"] != "code":
        return False
    for line in source(cell).lstrip().splitlines():
        if line.startswith(("# Setup.", ZH["setup"])):
            return True
        if not line.startswith("#"):
            return False
    return False


def no_repo_setup(text):
    """The setup cell ``text`` installing the helpers from d2l-utils.zip: its lines before
    "# Setup." and after the `%pip install` line stay (the lesson's own, such as `this_run()`)."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(("# Setup.", ZH["setup"])))
    pip = next((i for i, l in enumerate(lines) if l.lstrip().startswith("%pip install")), len(lines) - 1)
    setup = ZH["no_repo_setup"] if lines[start].startswith(ZH["setup"]) else NO_REPO_SETUP
    return "\n".join(lines[:start] + setup.splitlines() + lines[pip + 1:])


def solution_number(cell):
    """N of a solution cell (`#@title Solution N` or `#@title Solution N, run`), else None."""
    m = re.match(r"\s*#@title Solution (\d+)\b", source(cell)) if cell["cell_type"] == "code" else None
    return int(m[1]) if m else None


def _parse(code):
    """The cell's code as a tree, IPython's % and ! lines made `pass`."""
    return ast.parse("\n".join(l[:len(l) - len(l.lstrip())] + "pass" if l.lstrip().startswith(("%", "!")) else l
                               for l in code.splitlines()))


def _bound(tree):
    """(names the code binds outside functions and comprehensions, except imports and loop
    variables; the loop variables; the imported names)."""
    names, loops, imports = set(), set(), set()
    def visit(node, inside):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.update((a.asname or a.name).split(".")[0] for a in node.names)
        if isinstance(node, ast.For):
            loops.update(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child, inside)
    visit(tree, False)
    return names - loops - imports, loops, imports


def solution_checks(code):
    """The asserts of a solution's code, each as a check: (source, the names it reads that the
    solution computes). An assert under an `if` keeps its condition; one in a loop is checked
    with the loop's last values; asserts inside functions are left out."""
    tree = _parse(code)
    computed, loops, _ = _bound(tree)
    checks = []
    def visit(stmts, guards):
        for node in stmts:
            if isinstance(node, ast.Assert):
                stmt = node
                for guard in reversed(guards):
                    stmt = ast.If(test=guard, body=[stmt], orelse=[])
                text = ast.unparse(ast.fix_missing_locations(stmt))
                read = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
                checks.append((text, sorted(read & computed)))
            elif isinstance(node, ast.If):
                visit(node.body, guards + [node.test])
                visit(node.orelse, guards + [ast.UnaryOp(op=ast.Not(), operand=node.test)])
            elif isinstance(node, (ast.For, ast.While, ast.With, ast.Try)):
                visit(node.body, guards)
                visit(getattr(node, "orelse", []), guards)
                visit(getattr(node, "finalbody", []), guards)
    visit(tree.body, [])
    return checks


def lesson_number(path_or_name):
    return int(pathlib.Path(path_or_name).name[:2])


def exercise_checks(nb, lesson, extra=True):
    """{exercise: [(check source, names)]} from a teacher's lesson (notebook JSON): its
    solutions' asserts, and (``extra``) EXTRA_CHECKS."""
    found = {}
    for cell in nb["cells"]:
        n = solution_number(cell)
        if n is not None:
            found.setdefault(n, []).extend(solution_checks(source(cell)))
    for (les, n), more in EXTRA_CHECKS.items():
        if extra and les == lesson and n in found:
            found[n].extend(more)
    return found


def result_names(checks, lesson_names=()):
    """The names a skeleton sets to None: every name a check reads that the solution computes,
    except the lesson's own (``lesson_names``: bound by the cells before, which later cells may read)."""
    return sorted({name for _, names in checks for name in names} - set(lesson_names))


def starter_cells(lesson, n, checks, lesson_names=(), language="en"):
    """Exercise ``n``'s starter: a markdown cell for the prediction and a code cell, the skeleton
    (in Chinese where ``language`` is 'zh')."""
    meta = {"slideshow": {"slide_type": "skip"}, "tags": [STARTER_TAG]}
    prediction = {"cell_type": "markdown", "id": f"starter-{lesson:02d}-{n}-prediction", "metadata": meta,
                  "source": f"**Exercise {n}.** Prediction: {PLACEHOLDER}" if language == "en" else
                  ZH["prediction"].format(n=n, placeholder=ZH["placeholder"])}
    lines = [f"# Exercise {n}: your measurement. It must run again after \"Run all\" too, when later cells",
             "# have changed the lesson's names: make what you need here, under names of your own."]
    if (lesson, n) in SETUP:
        lines.append(SETUP[lesson, n])
    names = result_names(checks, lesson_names)
    if names:
        lines.append("# Leave your results in these names (None until you compute them): the teacher's checks read them.")
        lines += [f"{name} = None" + (f"   # {HINTS[lesson, name]}" if (lesson, name) in HINTS else "")
                  for name in names]
    lines.append("")
    text = "\n".join(lines)
    if language == "zh":
        text = zh_comments(text.replace(lines[0] + "\n" + lines[1], ZH["skeleton"].format(n=n)).replace(
            "# Leave your results in these names (None until you compute them): the teacher's checks read them.",
            ZH["results"]))
    code = {"cell_type": "code", "id": f"starter-{lesson:02d}-{n}-code", "metadata": json.loads(json.dumps(meta)),
            "execution_count": None, "outputs": [], "source": text}
    return [prediction, code]


def is_starter(cell):
    return STARTER_TAG in cell.get("metadata", {}).get("tags", [])


def teacher_repo(root=ROOT):
    """OWNER/NAME of the teacher's repository (the Repository URL of pyproject.toml)."""
    url = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]["Repository"]
    return url.removeprefix("https://github.com/").strip("/")


def retarget(text, teacher, repo):
    """``text`` with every address of the teacher's repository made the copy's (``repo``)."""
    return re.sub(rf"(?<![\w.-]){re.escape(teacher)}(?![\w.-])", repo, text)


def student_notebook(nb, teacher=None, repo=None, language="en"):
    """A lesson (notebook JSON) as students get it: no solutions, no outputs, and its links
    pointing at the copy's repository ``repo``, or, without one, no Colab badge and a setup
    cell that installs the helpers from the copy's d2l-utils.zip."""
    nb = json.loads(json.dumps(nb))                 # a copy
    lesson = int(_title(nb)[0])
    checks, cells, started, before = exercise_checks(nb, lesson), [], set(), set()
    for cell in nb["cells"]:
        n = solution_number(cell)
        if n is None:
            cells.append(cell)
            if cell["cell_type"] == "code":
                before |= set().union(*_bound(_parse(source(cell))))
        elif n not in started:                      # the exercise's first solution cell: its starter
            started.add(n)
            cells += starter_cells(lesson, n, checks.get(n, []), before, language)
    nb["cells"] = cells
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
            cell["metadata"].pop("execution", None)
        if teacher is None or is_starter(cell):
            continue
        text = source(cell)
        if repo:
            text = retarget(text, teacher, repo)
        elif is_setup(cell):
            text = no_repo_setup(text)
        elif cell["cell_type"] == "markdown":
            text = BADGE.sub("\n\n", text).strip("\n")
            text = text.replace(f"https://github.com/{teacher}/blob/main/GLOSSARY.md", "../GLOSSARY.md")
        cell["source"] = text
    return nb


def _title(nb):
    """('1', 'Devices') from a lesson's first heading '# 1. Devices'."""
    m = re.search(r"^# (\d+)\. (.*)$", source(nb["cells"][0]), re.M)
    return m[1], m[2].strip()


def readme(lessons, repo=None):
    """The copy's own README: what it is, how to open it (laptop, Binder, Colab), the setup check.
    ``lessons``: [(file name, number, title)]."""
    colab = f"https://colab.research.google.com/github/{repo}/blob/main/notebooks/" if repo else None
    binder = f"https://mybinder.org/v2/gh/{repo}/main?urlpath=lab/tree/notebooks" if repo else None
    rows = []
    for name, number, title in lessons:
        cell = (f" | [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab}{name})"
                if repo else "")
        rows.append(f"| {number} | [{title}](notebooks/{name}){cell} |")
    head = "| # | lesson | Colab |\n|---|---|---|" if repo else "| # | lesson |\n|---|---|"
    if repo:
        binder_text = (f"[![Binder](https://mybinder.org/badge_logo.svg)]({binder})\n\n"
                       "Binder runs the lessons on a CPU in your browser, with nothing to install: the "
                       "badge above opens this copy in JupyterLab there (the first start takes a few "
                       "minutes while Binder builds the environment from `binder/`).")
        colab_text = ("Each lesson's Colab badge (in the table above, and under the lesson's title) opens "
                      "it on Colab, where you can ask for a free GPU: *Runtime > Change runtime type > "
                      "T4 GPU*. The lesson's first cell installs the course's helpers there.")
    else:
        binder_text = ("Binder runs the lessons on a CPU in your browser, with nothing to install, once "
                       "this folder is published as a public GitHub repository: open "
                       "`https://mybinder.org/v2/gh/OWNER/NAME/main?urlpath=lab/tree/notebooks` with "
                       "the repository's owner and name (the first start takes a few minutes while Binder "
                       "builds the environment from `binder/`). Until then, use your laptop or Colab.")
        colab_text = ("This copy has no Colab badges: it is not published anywhere a badge could open. "
                      "To run a lesson on Colab, where you can ask for a free GPU: open "
                      "[colab.research.google.com](https://colab.research.google.com), choose *File > "
                      "Upload notebook* and pick the lesson from `notebooks/`; then, in the Files panel on "
                      f"the left, upload `{HELPERS_ZIP}` from this folder (the course's helpers). The "
                      "lesson's first cell installs them. For a GPU: *Runtime > Change runtime type > T4 GPU*.")
    return f"""> **The students' copy.** The lessons come without their outputs and without the worked
> solutions of the exercises: run each lesson top to bottom yourself, and try each exercise
> before you look anything up.

# GPU computing in PyTorch

An interactive course in Jupyter notebooks: devices, tensors on a GPU, copies between
devices, synchronization, several GPUs, GPU memory, mixed precision, profiling, overlap and
launch overhead, collectives and sharding, and one training job made fast. Every lesson
runs on a laptop without a GPU; with one, it shows more. Without a GPU, a cell that needs
one shows what a GPU is expected to show, labelled as expected.

{head}
{chr(10).join(rows)}

## On your laptop

Linux or macOS, Python 3.11. In this folder:

```bash
python3 -m venv .venv && .venv/bin/pip install -r requirements.txt && .venv/bin/jupyter lab notebooks/
```

On Linux, `requirements.txt` installs the CUDA build of PyTorch (several GB). Without an
NVIDIA GPU, install the CPU-only build instead (a few hundred MB):

```bash
python3 -m venv .venv && .venv/bin/pip install -r requirements-cpu.txt && .venv/bin/jupyter lab notebooks/
```

On Windows, use WSL 2 (Ubuntu) and the Linux commands there. PyTorch publishes no wheels
for Macs with an Intel processor: there, use Binder or Colab.

## Check your machine before the class

```bash
.venv/bin/python -m d2l_utils.setup_check
```

It takes a few seconds and ends with READY, READY with notes, or NOT READY and what to do.

## On Binder

{binder_text}

## On Colab

{colab_text}

## Slideshows

Every lesson is also a slideshow: in JupyterLab, *View > Render as Reveal Slideshow*.
"""


def readme_zh(lessons, repo=None):
    """The Chinese copy's README: readme()'s sections, in Chinese."""
    colab = f"https://colab.research.google.com/github/{repo}/blob/main/notebooks/" if repo else None
    binder = f"https://mybinder.org/v2/gh/{repo}/main?urlpath=lab/tree/notebooks" if repo else None
    rows = [f"| {number} | [{title}](notebooks/{name})" + (
        f" | [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab}{name})" if repo else "")
        + " |" for name, number, title in lessons]
    head = "| # | 课 | Colab |\n|---|---|---|" if repo else "| # | 课 |\n|---|---|"
    if repo:
        binder_text = (f"[![Binder](https://mybinder.org/badge_logo.svg)]({binder})\n\n"
                       "Binder 在浏览器里用 CPU 运行各课，无需安装：上面的徽章在那里用 JupyterLab 打开这份副本"
                       "（第一次启动要等几分钟，Binder 按 `binder/` 构建环境）。")
        colab_text = ("每课的 Colab 徽章（上表中，以及每课标题下）在 Colab 上打开它，可以申请免费 GPU："
                      "*Runtime > Change runtime type > T4 GPU*。每课的第一个单元格会在那里安装本课程的辅助函数。"
                      "在中国大陆访问 Colab 需要能连上 Google；也可以在国内带 GPU 的笔记本平台上按“在自己的电脑上”一节安装。")
    else:
        binder_text = ("这个文件夹作为公开的 GitHub 仓库发布之后，Binder 可以在浏览器里用 CPU 运行各课，无需安装："
                       "打开 `https://mybinder.org/v2/gh/OWNER/NAME/main?urlpath=lab/tree/notebooks`，换上仓库的所有者和名字"
                       "（第一次启动要等几分钟）。在那之前，请用自己的电脑或 Colab。")
        colab_text = ("这份副本没有 Colab 徽章：它还没有发布到徽章能打开的地方。要在 Colab 上运行某一课："
                      "打开 [colab.research.google.com](https://colab.research.google.com)，选 *File > Upload notebook*，"
                      f"从 `notebooks/` 里选这一课；再在左侧的 Files 面板上传本文件夹里的 `{HELPERS_ZIP}`（本课程的辅助函数），"
                      "这一课的第一个单元格会安装它们。要用 GPU：*Runtime > Change runtime type > T4 GPU*。")
    return f"""> **学生副本。** 各课不带输出，也不带练习的参考解答：请自己从头到尾运行每一课，
> 先动手做每道练习，再去查资料。

# 用 PyTorch 做 GPU 计算（中文版）

一门用 Jupyter 笔记本讲授的互动课程：设备、GPU 上的张量、设备之间的拷贝、同步、多块 GPU、显存、
混合精度、性能分析、重叠与启动开销、集合通信与分片，以及把一个训练作业变快。每一课都能在没有 GPU 的
笔记本电脑上运行；有 GPU 时能看到更多。没有 GPU 时，需要 GPU 的单元格显示 GPU 上预期会看到的内容，并标明是预期。
第 8 课起，每课的核心部分是中文，深入部分（depth）保留英文。

{head}
{chr(10).join(rows)}

## 在自己的电脑上

Linux 或 macOS，Python 3.11。在这个文件夹里：

```bash
python3 -m venv .venv && .venv/bin/pip install -r requirements.txt && .venv/bin/jupyter lab notebooks/
```

在 Linux 上，`requirements.txt` 安装 CUDA 版的 PyTorch（好几 GB）。没有 NVIDIA GPU 时，改装只用 CPU 的版本（几百 MB）：

```bash
python3 -m venv .venv && .venv/bin/pip install -r requirements-cpu.txt && .venv/bin/jupyter lab notebooks/
```

在中国大陆，可以给 pip 加上镜像，例如 `-i https://pypi.tuna.tsinghua.edu.cn/simple`。在 Windows 上，请用
WSL 2（Ubuntu）并在其中运行 Linux 的命令。PyTorch 不为使用 Intel 处理器的 Mac 发布安装包：那里请用 Binder 或 Colab。

## 上课之前检查你的机器

```bash
.venv/bin/python -m d2l_utils.setup_check
```

几秒钟就能跑完，结尾给出 READY（就绪）、READY with notes（就绪，有提示）或 NOT READY（未就绪）以及该怎么做。

## 在 Binder 上

{binder_text}

## 在 Colab 上

{colab_text}

## 幻灯片

每一课也是一套幻灯片：在 JupyterLab 中选 *View > Render as Reveal Slideshow*。
"""


def helpers_zip(outdir):
    """Write d2l-utils.zip: a source archive of the helpers that pip can install (on Colab)."""
    path = outdir / HELPERS_ZIP
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name in ("pyproject.toml", "README.md"):
            z.write(outdir / name, f"d2l-utils/{name}")
        for folder in ("d2l_utils", "measurements"):
            for file in sorted((outdir / folder).rglob("*")):
                if file.is_file():
                    z.write(file, f"d2l-utils/{file.relative_to(outdir)}")
    return path


def build(outdir, root=ROOT, repo=None, language="en"):
    """Write the students' copy into ``outdir`` (created; must not exist or be empty).
    ``repo``: OWNER/NAME where the copy will be published, or None; ``language``: 'zh' for the
    Chinese edition's lessons (notebooks/zh/)."""
    if repo is not None and not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise SystemExit(f"--repo must be OWNER/NAME (as in github.com/OWNER/NAME), not {repo!r}")
    teacher = teacher_repo(root)
    if repo is not None and repo.lower() == teacher.lower():
        raise SystemExit(f"--repo {repo} is the teacher's repository: give the copy's own")
    outdir = pathlib.Path(outdir)
    if outdir.exists() and any(outdir.iterdir()):
        raise SystemExit(f"{outdir} is not empty: give a new folder")
    (outdir / "notebooks").mkdir(parents=True)
    lessons = []
    source_dir = root / "notebooks" / ("zh" if language == "zh" else "")
    for path in sorted(source_dir.glob("[0-9][0-9]_*.ipynb")):
        nb = student_notebook(json.loads(path.read_text(encoding="utf-8")), teacher, repo, language)
        (outdir / "notebooks" / path.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n",
                                                      encoding="utf-8")
        lessons.append((path.name, *_title(nb)))
    for css in sorted(source_dir.glob("*.css")):     # the slideshows' type sizes (rise.css)
        shutil.copy2(css, outdir / "notebooks" / css.name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in KEEP:
        src = root / name
        if src.is_dir():
            shutil.copytree(src, outdir / name, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, outdir / name)
    for name in LEAVE_OUT:
        (outdir / name).unlink(missing_ok=True)
    # The teacher's address, wherever the copied files hold it (pyproject.toml, the helpers'
    # Colab links), becomes the copy's; without a copy's address, the helpers' Colab link
    # says to upload the lesson instead.
    for file in sorted(p for p in outdir.rglob("*") if p.is_file() and p.suffix in {".py", ".toml", ".txt", ".md", ".json"}
                       and "notebooks" not in p.relative_to(outdir).parts):
        text = file.read_text(encoding="utf-8")
        new = (retarget(text, teacher, repo) if repo else
               re.sub(r"^COLAB = .*$", NO_REPO_COLAB.replace("\\", r"\\"), text, flags=re.M))
        if not repo and file.name == "pyproject.toml":
            new = re.sub(r'^Repository = .*\n', "", new, flags=re.M)
            new = new.replace("# The one place that names the repository: the Colab setup cells and badges "
                              "are checked against it.\n", "")
            new = re.sub(r"\[project\.urls\]\n+(?=\[)", "", new)
        if file.name.startswith("requirements"):               # the copy has no CONTRIBUTING.md
            new = new.replace(" (see CONTRIBUTING.md)", "")
            # nor the teacher's autograder: its library (and the JupyterLab extensions it brings) stays out
            new = re.sub(rf"^#[^\n]*autograde[^\n]*\n(?=(?:{'|'.join(TEACHER_ONLY)})==)", "", new, flags=re.M)
            new = re.sub(rf"^(?:{'|'.join(TEACHER_ONLY)})==.*\n", "", new, flags=re.M)
        if file.name == "pyproject.toml":                      # the copy has no tests to configure
            new = re.sub(r"\[tool\.pytest\.ini_options\]\n(?:(?!\[).*\n?)*", "", new).rstrip("\n") + "\n"
        if new != text:
            file.write_text(new, encoding="utf-8")
    (outdir / "README.md").write_text(readme(lessons, repo) if language == "en" else readme_zh(lessons, repo),
                                      encoding="utf-8")
    if not repo:
        helpers_zip(outdir)
    return outdir


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outdir", type=pathlib.Path, help="a new folder for the students' copy")
    parser.add_argument("--repo", metavar="OWNER/NAME",
                        help="the GitHub repository where the copy will be published: the badges open it")
    parser.add_argument("--zh", action="store_true", help="the Chinese edition's lessons (notebooks/zh/)")
    args = parser.parse_args(argv)
    out = build(args.outdir, repo=args.repo, language="zh" if args.zh else "en")
    lessons = sorted((out / "notebooks").glob("*.ipynb"))
    removed = sum(is_solution(c) for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
                  for c in json.loads(path.read_text(encoding="utf-8"))["cells"])
    where = (f"its badges open github.com/{args.repo}: push the folder there" if args.repo else
             "no badges (no --repo): its README says how to open a lesson on Colab and Binder")
    print(f"wrote the students' copy of {len(lessons)} lessons to {out}, "
          f"without their {removed} solution cells and without outputs; {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
