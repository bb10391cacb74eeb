"""Write a lesson notebook in the course's common shape (an authoring aid).

    from nbtemplate import write_lesson, md, code, solution
    write_lesson("notebooks/02_tensors_on_devices.ipynb", [md("# 2. Tensors ..."), code("..."), ...])

The first markdown cell gets the "Open in Colab" badge under its title; the first
code cell is the setup cell that installs the helpers on Colab only; the notebook
asks Colab for a GPU runtime. Solutions are code cells collapsed in JupyterLab
(and shown as a titled form in Colab). Execute the result with
tools/execute_notebooks.py: this writes sources only.
"""
import pathlib
import re
import tomllib

import nbformat

ROOT = pathlib.Path(__file__).resolve().parent.parent


def repo_url():
    """The repository URL, declared once in pyproject.toml."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return data["project"]["urls"]["Repository"]


def colab_url(notebook_name):
    """The Colab address that opens notebooks/<notebook_name> from the repository."""
    path = repo_url().removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{path}/blob/main/notebooks/{notebook_name}"


def badge(notebook_name):
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"({colab_url(notebook_name)})")


STAMP = ("import d2l_utils\n"
         "d2l_utils.this_run()     # the PyTorch, Python, day and GPUs the outputs below came from")


def setup_source(language="en"):
    """The setup cell of a lesson; with language='zh', of its Chinese edition (tools/translate.py), whose
    last line makes the expectation blocks print Chinese."""
    if language == "zh":
        return ("# NBVAL_IGNORE_OUTPUT\n"
                "# 准备工作：在 Colab 上安装本课程的辅助函数；--no-deps 保留 Colab 自带的 PyTorch。\n"
                "# 在其他环境中它们已经装好。\n"
                "import sys\n"
                "if 'google.colab' in sys.modules:\n"
                f"    %pip install -q --no-deps 'd2l-utils @ git+{repo_url()}'\n"
                "import d2l_utils\n"
                "d2l_utils.this_run()     # 下面的输出来自哪个版本的 PyTorch 和 Python、哪一天、哪些 GPU\n"
                "d2l_utils.use_language('zh')     # 没有 GPU 时，GPU 单元格显示的预期结果用中文")
    return ("# NBVAL_IGNORE_OUTPUT\n"
            "# Setup. On Colab, install the course's helpers; --no-deps keeps Colab's own PyTorch.\n"
            "# Anywhere else they are already installed.\n"
            "import sys\n"
            "if 'google.colab' in sys.modules:\n"
            f"    %pip install -q --no-deps 'd2l-utils @ git+{repo_url()}'\n" + STAMP)


def md(text):
    return nbformat.v4.new_markdown_cell(text.strip("\n"))


def code(text):
    return nbformat.v4.new_code_cell(text.strip("\n"))


def solution(text, title="Solution"):
    """A worked solution: collapsed in JupyterLab, a titled form in Colab."""
    cell = code(f"#@title {title}\n" + text.strip("\n"))
    cell.metadata.update({"jupyter": {"source_hidden": True}, "cellView": "form"})
    return cell


def write_lesson(path, cells):
    path = pathlib.Path(path)
    cells = list(cells)
    first = cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# "), \
        "a lesson opens with a markdown cell holding its '# N. Title'"
    title, _, rest = first.source.partition("\n")
    first.source = f"{title}\n\n{badge(path.name)}\n{rest}"
    cells.insert(1, code(setup_source()))
    nb = nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                       "name": "python3"},
        "language_info": {"name": "python"},
        "accelerator": "GPU",
        "colab": {"provenance": [], "gpuType": "T4", "toc_visible": True},
    })
    for i, cell in enumerate(nb.cells):   # stable ids keep diffs small
        cell.id = f"c{i:03d}-{re.sub(r'[^a-z0-9]', '', path.stem)[:20]}"
    nbformat.write(nb, path)
