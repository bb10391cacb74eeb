"""The teacher's kit (teaching/kit/) and the handouts stay in step with the lessons.

- Handouts (tools/handouts.py): every lesson with a teacher's page gets a page with its
  title, what you will learn, its Summary, its key figure (when it has a figure), its
  exercises' titles and its three questions, without answers, and a teacher's copy with
  the answers on a second page. They are built from the current files each time (the test
  changes a copy of a lesson and sees the change), and no built copy is stored. As a slow
  check (CI, COURSE_SLOW=1), Chromium prints each page: one A4 or Letter page for students,
  two for the teacher.
- The workshop (teaching/kit/workshop.md): every lesson has its slot, with the slide count
  of its deck, the slide numbers of the sections it names, and "Run all" exactly where a
  cell shown on the slides needs a cell that is not; every lab names exercises that
  exist; the times of each day follow on, with breaks, lunch and slack.
- The quiz (teaching/kit/quiz.md): every lesson with a teacher's page has its three
  questions, worded as on the page, each with exactly one right answer.
Decks are computed by tools/slides.py from the lessons as they are now, never stored here.
"""
import json
import re

import nbformat
import pytest

import handouts  # tools/ is put on sys.path by conftest.py
import slides
from conftest import NOTEBOOKS, ROOT, cells, slow, source
from test_browser import CHROMIUM, CHROMIUM_ARGS, browser_tools

KIT = ROOT / "teaching" / "kit"
WORKSHOP, QUIZ, RUBRIC = KIT / "workshop.md", KIT / "quiz.md", KIT / "rubric.md"
PAGES = {nb: ROOT / "teaching" / f"{nb.stem}.md" for nb in NOTEBOOKS}
TAUGHT = [nb for nb in NOTEBOOKS if PAGES[nb].exists()]      # lessons with a teacher's page
SPAN = re.compile(r"slides? (\d+)(?:–(\d+))?")


def number(notebook):
    return int(notebook.name[:2])


def norm(text):
    return " ".join(text.split())


def squash(text):
    """Text without spaces and markdown marks, to compare markdown with rendered text."""
    return re.sub(r"[\s`*]", "", text)


# --- handouts ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("handouts")
    handouts.build(out)
    return out


def _text(html_page):
    """The visible text of a page, roughly: tags dropped, entities of quotes undone."""
    text = re.sub(r"<style>.*?</style>|<[^>]+>", " ", html_page, flags=re.S)
    return norm(text.replace("&quot;", '"').replace("&#x27;", "'").replace("&amp;", "&")
                .replace("&lt;", "<").replace("&gt;", ">"))


@pytest.mark.parametrize("notebook", TAUGHT, ids=lambda p: p.name)
def test_every_lesson_gets_a_handout_with_its_parts(built, notebook):
    parts = handouts.lesson_parts(notebook, PAGES[notebook])
    student = (built / f"{notebook.stem}.html").read_text(encoding="utf-8")
    teacher = (built / f"{notebook.stem}-teacher.html").read_text(encoding="utf-8")
    seen = squash(_text(student))
    assert squash(parts["title"]) in seen
    assert parts["learn"] and squash(parts["learn"])[:60] in seen
    assert parts["summary"] and "<h2>Summary</h2>" in student
    for bullet in re.findall(r"^\* (.{20})", parts["summary"], re.M):
        assert squash(bullet)[:12] in seen, f"{notebook.name}: summary bullet {bullet!r}"
    exercises = re.findall(r"^\d+\. ", handouts.section_text(cells(notebook), "Exercises"), re.M)
    assert len(parts["exercises"]) == len(exercises) >= 2
    assert student.count("<li>") >= len(exercises) + 3
    assert len(parts["questions"]) == 3 and all(q and a for q, a in parts["questions"])
    figures = [c for c in cells(notebook) if c["cell_type"] == "code"
               and not source(c).lstrip().startswith("#@title")
               and any("image/png" in o.get("data", {}) for o in c.get("outputs", []))]
    assert ('<img alt="key figure"' in student) == bool(figures), f"{notebook.name}: key figure"
    tagged = [c for c in figures if handouts.FIGURE_TAG in c["metadata"].get("tags", [])]
    if parts["figure"]:
        chosen = (tagged or figures)[0]
        png = next(o["data"]["image/png"] for o in chosen["outputs"] if "image/png" in o.get("data", {}))
        assert parts["figure"][0] == "".join(png).replace("\n", "")
    for _, answer in parts["questions"]:
        words = squash(answer)[:40]
        assert words not in seen, f"{notebook.name}: an answer on the students' page"
        assert words in squash(_text(teacher)), f"{notebook.name}: an answer missing from the teacher's copy"
    assert 'class="answers"' in teacher and "break-before: page" in teacher


def test_handouts_are_built_from_the_current_lesson(tmp_path):
    """Change a copy of a lesson and of its page: the handout changes with them."""
    notebook = TAUGHT[0]
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "teaching").mkdir()
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    summary = next(c for c in nb["cells"] if "## Summary" in source(c))
    summary["source"] = source(summary).replace("## Summary\n", "## Summary\n\n* A line made up by the test.\n", 1)
    (tmp_path / "notebooks" / notebook.name).write_text(json.dumps(nb), encoding="utf-8")
    page = PAGES[notebook].read_text(encoding="utf-8").replace("### Q1. ", "### Q1. Made up: ", 1)
    (tmp_path / "teaching" / PAGES[notebook].name).write_text(page, encoding="utf-8")
    handouts.build(tmp_path / "out", root=tmp_path)
    text = (tmp_path / "out" / f"{notebook.stem}.html").read_text(encoding="utf-8")
    assert "A line made up by the test." in text and "Made up: " in text
    stored = [p.relative_to(ROOT) for p in ROOT.glob("teaching/**/*.html")]
    assert not stored, f"built handouts are not kept in the repository: {stored}"


@slow("Chromium prints every handout to PDF, A4 and Letter")
def test_handouts_print_on_one_page_and_the_answers_on_a_second(built):
    sync_playwright = browser_tools()
    problems = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page()
        try:
            for notebook in TAUGHT:
                for name, want in ((notebook.stem, 1), (f"{notebook.stem}-teacher", 2)):
                    page.goto((built / f"{name}.html").as_uri())
                    for paper in ("A4", "Letter"):
                        pdf = page.pdf(format=paper)
                        pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf))
                        if pages != want:
                            problems.append(f"{name}.html prints on {pages} {paper} pages, not {want}")
        finally:
            browser.close()
    assert not problems, "\n".join(problems)


# --- the workshop -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def decks():
    """{notebook: (deck, sections, cells needing Run all)} as tools/slides.py makes them now."""
    found = {}
    for notebook in NOTEBOOKS:
        nb = nbformat.read(notebook, as_version=4)
        types = slides.slide_types(nb)
        found[notebook] = (slides.deck(nb, types), slides.sections(nb, types), slides.needs_run_all(nb, types))
    return found


def _days():
    """{day heading: table rows (time, session, slides, before class)} of workshop.md."""
    days, current = {}, None
    for line in WORKSHOP.read_text(encoding="utf-8").splitlines():
        if line.startswith("## Day"):
            current = days.setdefault(line, [])
        elif current is not None and line.startswith("| ") and not line.startswith("| Time"):
            cols = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r"-+", c) for c in cols):
                current.append(cols)
        elif line.startswith("## "):
            current = None
    return days


def _minutes(hhmm):
    h, m = hhmm.split(":")
    return int(h) * 60 + int(m)


def test_the_days_follow_on_with_breaks_lunch_and_slack():
    days = _days()
    assert len(days) == 2, f"two days, found {list(days)}"
    for day, rows in days.items():
        spans = [re.fullmatch(r"(\d\d:\d\d)–(\d\d:\d\d)", r[0]) for r in rows]
        assert all(spans), f"{day}: times are written 09:00–09:45"
        for (a, b), (c, _) in zip([s.groups() for s in spans], [s.groups() for s in spans[1:]]):
            assert b == c, f"{day}: {a}–{b} is followed by a session at {c}"
        kinds = [r[1] for r in rows]
        minutes = {k: _minutes(s[2]) - _minutes(s[1]) for k, s in zip(kinds, spans)}
        assert sum(k.startswith("Break") for k in kinds) >= 2 and "Lunch" in kinds, f"{day}: breaks and lunch"
        assert sum(m for k, m in minutes.items() if k.startswith("Slack")) >= 15, f"{day}: keep slack"
        for kind, m in minutes.items():
            if kind.startswith(("**Lesson", "**Lab")):
                assert m >= 45, f"{day}: {kind} gets {m} minutes"


def test_every_lesson_has_its_slot_with_the_slides_of_its_deck(decks):
    rows = {int(m[1]): r for rs in _days().values() for r in rs
            if (m := re.match(r"\*\*Lesson (\d+)\*\*", r[1]))}
    assert sorted(rows) == [number(nb) for nb in NOTEBOOKS], (
        f"workshop.md has slots for lessons {sorted(rows)}, the course has {[number(nb) for nb in NOTEBOOKS]}")
    problems = []
    for notebook in NOTEBOOKS:
        deck, spans, run_all = decks[notebook]
        _, session, shown, before = rows[number(notebook)]
        if not PAGES[notebook].exists():
            continue                   # a lesson still being written: its slot names no slides yet
        assert f"(../{PAGES[notebook].name})" in session, f"lesson {number(notebook)}: link its page"
        total = re.match(r"slides 1–(\d+)", shown)
        if not total or int(total[1]) != len(deck):
            problems.append(f"lesson {number(notebook)}: the deck has slides 1–{len(deck)}, "
                            f"workshop.md says {total[0] if total else 'nothing'}")
        for name, where in re.findall(r'§ "([^"]+)" \(([^)]*)\)', shown):
            first, last = SPAN.fullmatch(where).groups()
            said = (int(first), int(last or first))
            if spans.get(norm(name)) != said:
                problems.append(f"lesson {number(notebook)}: § \"{name}\" is on slides "
                                f"{spans.get(norm(name))} of the deck, workshop.md says {said}")
        wanted = "Run all" if run_all else "as you go"
        if before != wanted:
            problems.append(f"lesson {number(notebook)}: before class '{wanted}' ("
                            + (f"{len(run_all)} shown cells need cells off the slides, e.g. {run_all[0]}"
                               if run_all else "every shown cell runs in order") + f"), not '{before}'")
    assert not problems, ("workshop.md is out of step with the decks (python tools/slides.py "
                          "--sections NOTEBOOK prints them):\n" + "\n".join(problems))


def test_four_labs_from_exercises_that_exist():
    text = WORKSHOP.read_text(encoding="utf-8")
    labs = {int(m[1]): m[2] for m in re.finditer(r"\| \*\*Lab (\d)\*\*: ([^|]+)\|", text)}
    assert sorted(labs) == [1, 2, 3, 4], f"four labs in the agenda, found {sorted(labs)}"
    count = {number(nb): len(re.findall(r"^\d+\. ", handouts.section_text(cells(nb), "Exercises") or "",
                                        re.M)) for nb in NOTEBOOKS}
    for lab, what in labs.items():
        named = re.findall(r"lesson (\d+) exercises? (\d+)(?: and (\d+))?", what)
        assert named, f"Lab {lab} names no exercise ('lesson N exercise E')"
        for lesson, *numbers in named:
            for n in filter(None, numbers):
                assert int(lesson) in count and 1 <= int(n) <= count[int(lesson)], (
                    f"Lab {lab}: lesson {lesson} has no exercise {n}")
    assert "(rubric.md)" in text and RUBRIC.exists()


def test_kit_links_resolve():
    for page in (WORKSHOP, QUIZ, RUBRIC):
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            path = target.partition("#")[0]
            if path and not re.match(r"[a-z]+:", target):
                assert (page.parent / path).exists(), f"{page.name}: broken link {target}"


# --- the quiz ---------------------------------------------------------------------------

def _quiz():
    """{lesson: [(question, [(right?, option)])]} of quiz.md."""
    found, lesson = {}, None
    for line in QUIZ.read_text(encoding="utf-8").splitlines():
        if m := re.match(r"## Lesson (\d+):", line):
            lesson = found.setdefault(int(m[1]), [])
        elif (m := re.match(r"### (\d+)\.(\d) (.*)", line)) and lesson is not None:
            assert int(m[1]) == list(found)[-1] and int(m[2]) == len(lesson) + 1, line
            lesson.append((m[3], []))
        elif (m := re.match(r"- \[([ x])\] (.*)", line)) and lesson:
            lesson[-1][1].append((m[1] == "x", m[2]))
    return found


def test_the_quiz_has_every_lessons_questions_each_with_one_right_answer():
    quiz = _quiz()
    assert sorted(quiz) == [number(nb) for nb in TAUGHT], (
        f"quiz.md covers lessons {sorted(quiz)}; the lessons with a teacher's page are "
        f"{[number(nb) for nb in TAUGHT]}")
    for notebook in TAUGHT:
        asked = [norm(q) for q, _ in handouts.questions(PAGES[notebook].read_text(encoding="utf-8"))]
        here = quiz[number(notebook)]
        assert [norm(q) for q, _ in here] == asked, (
            f"quiz.md, lesson {number(notebook)}: the questions must read as on {PAGES[notebook].name}")
        for k, (_, options) in enumerate(here, 1):
            assert len(options) >= 3, f"quiz {number(notebook)}.{k}: at least three answers"
            assert sum(right for right, _ in options) == 1, f"quiz {number(notebook)}.{k}: one right answer"
            assert len({text for _, text in options}) == len(options), f"quiz {number(notebook)}.{k}: repeats"


def test_the_rubric_marks_each_criterion_two_one_or_zero():
    rows = [r for r in RUBRIC.read_text(encoding="utf-8").splitlines() if r.startswith("| **")]
    assert len(rows) >= 4 and all(r.count("|") == 5 for r in rows)
