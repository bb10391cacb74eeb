"""Build the students' copy of the course: the lessons without their outputs and solutions.

    python tools/student_copy.py OUTDIR          # a folder to hand out (zip it, or push it)

The repository is the teacher's copy: its lessons hold stored outputs (some print an
exercise's answer) and a worked solution under every exercise, only collapsed. The
students' copy is the same course with, in every lesson, the solution cells (`#@title
Solution ...`) removed and every output and execution count cleared; everything else is
unchanged (cells, slide metadata and the slideshows' stylesheets, the Colab setup cell). Beside the lessons it holds what
students need to run them: the helpers (d2l_utils), the recordings from real hardware
(measurements/), the requirements files, pyproject.toml, binder/ and the README. The
teacher's guide, the tests and the tools stay out: the guide has the answers.
"""
import argparse
import json
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTE = ("> **The students' copy.** The lessons come without their outputs and without the worked\n"
        "> solutions of the exercises: run each lesson top to bottom yourself. The teacher's guide,\n"
        "> the tests and the authoring tools are in the full repository.\n\n")
KEEP = ["README.md", "pyproject.toml", "requirements.txt", "requirements-cpu.txt",
        "d2l_utils", "measurements", "binder"]


def source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def is_solution(cell):
    return cell["cell_type"] == "code" and source(cell).lstrip().startswith("#@title Solution")


def student_notebook(nb):
    """A lesson (notebook JSON) as students get it: no solutions, no outputs."""
    nb = json.loads(json.dumps(nb))                 # a copy
    nb["cells"] = [c for c in nb["cells"] if not is_solution(c)]
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
            cell["metadata"].pop("execution", None)
    return nb


def build(outdir, root=ROOT):
    """Write the students' copy into ``outdir`` (created; must not exist or be empty)."""
    outdir = pathlib.Path(outdir)
    if outdir.exists() and any(outdir.iterdir()):
        raise SystemExit(f"{outdir} is not empty: give a new folder")
    (outdir / "notebooks").mkdir(parents=True)
    for path in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = student_notebook(json.loads(path.read_text(encoding="utf-8")))
        (outdir / "notebooks" / path.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n",
                                                      encoding="utf-8")
    for css in sorted((root / "notebooks").glob("*.css")):     # the slideshows' type sizes (rise.css)
        shutil.copy2(css, outdir / "notebooks" / css.name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in KEEP:
        src = root / name
        if src.is_dir():
            shutil.copytree(src, outdir / name, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, outdir / name)
    readme = outdir / "README.md"
    readme.write_text(NOTE + readme.read_text(encoding="utf-8"), encoding="utf-8")
    return outdir


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outdir", type=pathlib.Path, help="a new folder for the students' copy")
    args = parser.parse_args(argv)
    out = build(args.outdir)
    lessons = sorted((out / "notebooks").glob("*.ipynb"))
    removed = sum(is_solution(c) for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
                  for c in json.loads(path.read_text(encoding="utf-8"))["cells"])
    print(f"wrote the students' copy of {len(lessons)} lessons to {out}, "
          f"without their {removed} solution cells and without outputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
