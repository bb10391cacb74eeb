"""Generate ``d2l_utils/lessons.py`` from the ``#@save`` cells of the notebooks.

Usage, from the repository root::

    python -m d2l_utils.build           # rewrite d2l_utils/lessons.py
    python -m d2l_utils.build --check   # exit 1 if the file and the notebooks disagree

A code cell whose first line is ``#@save`` is copied into the module, notebook by
notebook in lesson order (file name order: ``01_...``, ``02_...``), cell by cell.
Its top-level imports are gathered, without repeats, at the top of the module.
Every function and class in such a cell must have a triple-quoted docstring; the
build appends a line naming the lesson that defines it.
"""
import argparse
import ast
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
TARGET = pathlib.Path(__file__).resolve().parent / "lessons.py"
MARK = "#@save"

HEADER = '''\
# GENERATED FILE, do not edit: it is rebuilt from the #@save cells of
# notebooks/*.ipynb by `python -m d2l_utils.build`, and a test fails when the two
# disagree. Change a helper in the lesson that teaches it, then rebuild.
"""Helpers that the lessons define in their ``#@save`` cells, in lesson order."""
'''


class BuildError(ValueError):
    """A #@save cell that the build cannot turn into module code."""


def _source(cell):
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def saved_cells(notebook_dir=NOTEBOOKS):
    """Yield ``(notebook_name, cell_source)`` for every #@save cell, in lesson order."""
    for path in sorted(notebook_dir.glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for cell in cells:
            src = _source(cell)
            if cell["cell_type"] == "code" and src.lstrip().startswith(MARK):
                yield path.name, src


def _with_lesson_line(src, lesson, where):
    """Return ``src`` with 'Defined in <lesson>.' added to each top-level docstring."""
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        raise BuildError(f"{where}: #@save cell is not valid Python: {e}") from None
    lines = src.splitlines()
    inserts = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        doc = node.body[0] if node.body else None
        is_doc = (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
                  and isinstance(doc.value.value, str))
        if not is_doc:
            raise BuildError(f"{where}: `{node.name}` needs a docstring")
        row, col = doc.end_lineno - 1, doc.end_col_offset - 3
        quote = lines[row][col:col + 3]
        if quote not in ('"""', "'''"):
            raise BuildError(f"{where}: the docstring of `{node.name}` must be triple-quoted")
        indent = " " * doc.col_offset
        inserts.append((row, col, f"{indent}Defined in notebooks/{lesson}.\n{indent}"))
    for row, col, text in sorted(inserts, reverse=True):
        before = lines[row][:col]
        # closing quotes on a line of their own need one newline, after text two
        lead = "\n" if before.strip() == "" else "\n\n"
        lines[row] = before.rstrip() + lead + text + lines[row][col:]
    return "\n".join(lines)


def _split_imports(src):
    """Split a cell into its top-level import lines and the rest."""
    tree = ast.parse(src)
    lines = src.splitlines()
    import_rows = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            import_rows.update(range(node.lineno - 1, node.end_lineno))
    imports = ["\n".join(lines[i] for i in range(n.lineno - 1, n.end_lineno))
               for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    body = "\n".join(l for i, l in enumerate(lines) if i not in import_rows)
    return imports, body.strip("\n")


def _public_names(body):
    names = []
    for node in ast.parse(body).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return [n for n in names if not n.startswith("_")]


def render(notebook_dir=NOTEBOOKS):
    """Return the text of the generated module."""
    imports, blocks, names = [], [], []
    for lesson, src in saved_cells(notebook_dir):
        where = f"notebooks/{lesson}"
        src = src.lstrip().split("\n", 1)[1] if "\n" in src.lstrip() else ""
        cell_imports, body = _split_imports(_with_lesson_line(src, lesson, where))
        imports += [i for i in cell_imports if i not in imports]
        if body:
            blocks.append(f"# ---- from notebooks/{lesson} ----\n{body}")
            names += [n for n in _public_names(body) if n not in names]
    all_line = "__all__ = [\n" + "".join(f"    {n!r},\n" for n in names) + "]"
    parts = [HEADER + "\n" + "\n".join(imports), all_line] + blocks
    return "\n\n\n".join(parts) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if lessons.py is out of date")
    args = parser.parse_args(argv)
    try:
        text = render()
    except BuildError as e:
        sys.exit(f"build failed: {e}")
    current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
    if args.check:
        if text != current:
            sys.exit(f"{TARGET.relative_to(ROOT)} is out of date: run `python -m d2l_utils.build`")
        print(f"{TARGET.relative_to(ROOT)} is up to date")
        return
    if text != current:
        TARGET.write_text(text, encoding="utf-8")
        print(f"wrote {TARGET.relative_to(ROOT)}")
    else:
        print(f"{TARGET.relative_to(ROOT)} already up to date")


if __name__ == "__main__":
    main()
