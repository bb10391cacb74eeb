"""The course's glossary: every term links to its entry where the course first uses it."""
import re

import glossary  # tools/ is put on sys.path by conftest.py
import nbformat
import pytest
from conftest import ROOT


def test_every_term_is_linked_where_the_course_first_uses_it():
    assert glossary.problems() == []


def test_part_2_lessons_each_link_their_own_first_uses():
    """A practitioner may start at lesson 8: each Part 2 lesson links a term where it first uses it."""
    uses = glossary.uses_to_link()
    part_2 = {(a, use[0]) for a, use in uses if use[0] >= glossary.PART_2}
    assert {n for _, n in part_2} == set(range(glossary.PART_2, 15))
    assert ("kernel", 8) in part_2 and ("kernel", 13) in part_2      # taught in lesson 4, linked again


def test_entries_are_short_plain_and_in_order():
    text = glossary.GLOSSARY.read_text(encoding="utf-8")
    terms = glossary.entries(text)
    assert len(terms) >= 50
    anchors = [a for _, a, _, _ in terms]
    assert len(set(anchors)) == len(anchors)
    titles = [t.lower() for t, _, _, _ in terms]
    assert titles == sorted(titles)
    for block in re.split(r"^### ", text, flags=re.M)[1:]:
        title, _, body = block.partition("\n")
        assert len(body.split()) <= 80, f"{title}: a glossary entry is a few sentences ({len(body.split())} words)"


def test_chinese_links_to_the_glossary_arrive():
    known = {a for _, a, _, _ in glossary.entries()}
    for path in sorted((ROOT / "translations" / "zh").glob("0*.md")):
        for target, text in glossary.links(path.read_text(encoding="utf-8")):
            assert target in known, f"{path.name}: {text!r} links to #{target}"


def _lesson(folder, name, *texts):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(t) for t in texts])
    path = folder / name
    nbformat.write(nb, path)
    return path


@pytest.fixture
def small_course(tmp_path, monkeypatch):
    (tmp_path / "GLOSSARY.md").write_text(
        "# Glossary\n\n### Kernel\n\nA function on the GPU. First met in lesson 1.\n\n"
        "### Stream\n\nA queue of GPU work. First met in lesson 2.\n", encoding="utf-8")
    monkeypatch.setattr(glossary, "GLOSSARY", tmp_path / "GLOSSARY.md")
    lessons = [_lesson(tmp_path, "01_a.ipynb", "# 1. A kernel in the title does not count",
                       "`kernel` in code neither; here a kernel runs.", "Later kernels."),
               _lesson(tmp_path, "02_b.ipynb", "Each stream is a queue.")]
    monkeypatch.setattr(glossary, "lessons", lambda: lessons)
    return lessons


def test_an_unlinked_first_use_a_wrong_lesson_and_an_unused_term_are_reported(small_course, monkeypatch):
    said = glossary.problems()
    assert len(said) == 2 and all("is not a link" in s for s in said)
    assert "'kernel' in 01_a.ipynb cell 2" in said[0] and "'stream' in 02_b.ipynb cell 1" in said[1]
    early = _lesson(small_course[0].parent, "00_c.ipynb", "Streams, early.")
    monkeypatch.setattr(glossary, "lessons", lambda: [early, small_course[1]])
    said = glossary.problems()
    assert said[0] == "'Kernel': no lesson uses it (drop it from the glossary)"
    assert "'Stream': first met in lesson 0 (cell 1), but the glossary says lesson 2" in said


def test_link_fixes_what_it_reports_and_a_bad_anchor_is_caught(small_course):
    assert [a for _, _, a in glossary.link()] == ["kernel", "stream"]
    assert glossary.problems() == []
    cells = nbformat.read(small_course[0], as_version=4).cells
    assert cells[1].source == f"`kernel` in code neither; here a [kernel]({glossary.URL}kernel) runs."
    assert cells[2].source == "Later kernels."                       # only the first use
    cells[2].source = f"Later [kernels]({glossary.URL}kernals)."
    nbformat.write(nbformat.v4.new_notebook(cells=cells), small_course[0])
    assert glossary.problems() == [f"01_a.ipynb cell 3: the link 'kernels' goes to #kernals, which the glossary lacks"]
