"""Every lesson's core path fits one sitting, and its depth sits beside it (tools/sitting.py)."""
import nbformat
import pytest
from conftest import ROOT

import sitting

LESSONS = sitting.lessons()


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_the_core_path_fits_one_sitting_and_its_depth_is_one_click_away(path):
    found = sitting.problems(path)
    assert not found, "\n".join(found)


def lesson(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 99. A lesson"), *cells]
    for i, cell in enumerate(nb.cells):
        cell.id = f"c{i}"
    return nb


def problems_of(nb, tmp_path, name="99_lesson.ipynb"):
    path = tmp_path / name
    nbformat.write(nb, path)
    return sitting.problems(path)


def depth(text="## Going deeper\n\nMore, for later."):
    cell = nbformat.v4.new_markdown_cell(text)
    cell.metadata["tags"] = ["depth"]
    return cell


def test_a_lesson_within_the_rules_passes(tmp_path):
    nb = lesson(nbformat.v4.new_markdown_cell("A reason; the machinery is in [the depth](#How-it-works)."),
                nbformat.v4.new_code_cell("x = 1"),
                nbformat.v4.new_markdown_cell("## Exercises\n\n1. *Predict* ..."),
                depth(), nbformat.v4.new_markdown_cell("## How it works\n\nDetails."),
                nbformat.v4.new_code_cell("import torch.profiler  # lesson 10 teaches it"))
    assert problems_of(nb, tmp_path) == []


def test_each_rule_fails_when_broken(tmp_path):
    long = nbformat.v4.new_markdown_cell("word " * (sitting.CORE_WORDS + 1))
    nb = lesson(long, *[nbformat.v4.new_code_cell("x = 1") for _ in range(sitting.CORE_CELLS)],
                nbformat.v4.new_markdown_cell("See [this](#Nowhere)."),
                nbformat.v4.new_code_cell("with torch.profiler.profile() as p: pass"),
                depth(), nbformat.v4.new_markdown_cell("## Unlinked section"),
                nbformat.v4.new_markdown_cell("## Exercises\n\n1. *Predict*"),
                nbformat.v4.new_code_cell("d2l.show_recording('99-x', gpus=1)"))
    found = "\n".join(problems_of(nb, tmp_path, "09_lesson.ipynb"))
    for expected in ("words of prose", "cells; at most", "exercises are not in its core",
                     "GPU-only cell", "#Nowhere", "'Unlinked section'", "the profiler"):
        assert expected in found, expected


def test_words_are_counted_as_read():
    cell = nbformat.v4.new_markdown_cell("A [link](https://example.com/a/long/path) and `code` <b>here</b>.")
    assert sitting.words([cell]) == 5


def test_anchors_are_jupyterlabs():
    assert sitting.heading_anchor("The `set_device` of a **tensor**") == "The-set_device-of-a-tensor"


ZH = sorted((ROOT / "notebooks" / "zh").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", ZH, ids=lambda p: "zh/" + p.name)
def test_the_chinese_lessons_links_inside_the_notebook_lead_to_its_headings(path):
    nb = nbformat.read(path, as_version=4)
    targets = sitting.headings(nb.cells)
    broken = [(cid, anchor) for cid, anchor in sitting.internal_links(nb.cells) if anchor not in targets]
    assert not broken, f"zh/{path.name}: links to no heading of the lesson: {broken}"
    core, depth = sitting.split(nb)
    english = nbformat.read(ROOT / "notebooks" / path.name, as_version=4)
    assert len(core) == len(sitting.split(english)[0]), "the Chinese core path ends where the English one does"
