"""The teacher's kit (teaching/kit/) and the handouts stay in step with the lessons.

- Handouts (tools/handouts.py): every lesson with a teacher's page gets a page with its
  title, what you will learn, its Summary, its key figure (when it has a figure) and its
  exercises, and a teacher's copy with its three questions and their answers on a second
  page (the questions are the quiz's, so the students' page leaves them out). They are built from the current files each time (the test
  changes a copy of a lesson and sees the change), and no built copy is stored. As a slow
  check (CI, COURSE_SLOW=1), Chromium prints each page: one A4 or Letter page for students,
  two for the teacher.
- The workshop (teaching/kit/workshop.md): every lesson has its slot (or a paragraph,
  "**Optional: lesson N**", that says why it has none), and each slot's
  Slides column (minutes kept, slides to show, to skip, to pause on) is what
  tools/agenda.py computes from the lesson's 45-minute plan, the agenda's cuts and the deck;
  "Run all" stands exactly where a cell shown on the slides needs a cell that is not. The
  times of each day follow on, with breaks, lunch, slack and a change-over in each slot;
  labs are at least a third of each day's contact time; lab 4 comes before the capstone,
  which the shorter track keeps; a correction is taught in one lecture. Every lab names
  exercises that exist, and each lab item says what a CPU laptop shows, quoting what the
  solution's stored run prints, or names the machine it needs.
- The quiz (teaching/kit/quiz.md): every lesson with a teacher's page has its three
  questions (in the workshop's part or the optional one), worded as on the page but for the
  two that issue 41 worded more tightly, each with exactly one right answer.
Decks are computed by tools/slides.py from the lessons as they are now, never stored here.
"""
import re

import nbformat
import pytest

import agenda  # tools/ is put on sys.path by conftest.py
import handouts
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
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)       # a link: its text
    return re.sub(r"[\s`*]", "", text)


# --- handouts ---------------------------------------------------------------------------

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

MAIN_DAYS = ("## Day 1:", "## Day 2:")            # the agenda; other "## Day" tables are tracks


@pytest.fixture(scope="module")
def decks():
    """{notebook: (deck, sections, cells needing Run all)} as tools/slides.py makes them now."""
    found = {}
    for notebook in NOTEBOOKS:
        nb = nbformat.read(notebook, as_version=4)
        types = slides.slide_types(nb)
        found[notebook] = (slides.deck(nb, types), slides.sections(nb, types), slides.needs_run_all(nb, types))
    return found


@pytest.fixture(scope="module")
def lectures():
    """{lesson: agenda.lesson_slides(...)}: each lecture's plan less its cuts, and its slides."""
    return agenda.expected(WORKSHOP.read_text(encoding="utf-8"))


def _optional():
    """{lesson: why} of the lessons workshop.md leaves out of the two days: a paragraph that
    starts "**Optional: lesson N**", links the lesson's page and gives its reason."""
    found = {}
    for block in WORKSHOP.read_text(encoding="utf-8").split("\n\n"):
        if m := re.match(r"\*\*Optional: lesson (\d+)\*\*", block):
            page = PAGES[notebook_of(int(m[1]))]
            assert f"(../{page.name})" in block, f"optional lesson {m[1]}: link its page"
            assert len(block.split()) >= 30, f"optional lesson {m[1]}: say why it has no slot"
            found[int(m[1])] = norm(block)
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


def _span(row):
    a, b = re.fullmatch(r"(\d\d:\d\d)–(\d\d:\d\d)", row[0]).groups()
    return _minutes(b) - _minutes(a)


def _lesson(row):
    m = re.match(r"\*\*Lesson (\d+)\*\*", row[1])
    return int(m[1]) if m else None


def _lab(row):
    m = re.match(r"\*\*Lab (\d)\*\*", row[1])
    return int(m[1]) if m else None


def _share(rows):
    """(hands-on minutes, contact minutes): labs against everything but breaks and lunch."""
    contact = sum(_span(r) for r in rows if not r[1].startswith(("Break", "Lunch")))
    return sum(_span(r) for r in rows if _lab(r)), contact


def test_the_days_follow_on_with_breaks_lunch_change_overs_and_slack(lectures):
    days = _days()
    assert len([d for d in days if d.startswith(MAIN_DAYS)]) == 2, f"two days, found {list(days)}"
    for day, rows in days.items():
        spans = [re.fullmatch(r"(\d\d:\d\d)–(\d\d:\d\d)", r[0]) for r in rows]
        assert all(spans), f"{day}: times are written 09:00–09:45"
        for (a, b), (c, _) in zip([s.groups() for s in spans], [s.groups() for s in spans[1:]]):
            assert b == c, f"{day}: {a}–{b} is followed by a session at {c}"
        kinds = [r[1] for r in rows]
        assert sum(k.startswith("Break") for k in kinds) >= 2 and "Lunch" in kinds, f"{day}: breaks and lunch"
        assert sum(_span(r) for r in rows if r[1].startswith("Slack")) >= 15, f"{day}: keep slack"
        for row in rows:
            if (n := _lesson(row)) is not None:
                kept = lectures[n]["kept_minutes"]
                assert _span(row) - kept >= agenda.CHANGE_OVER, (
                    f"{day}: lesson {n} keeps {kept} minutes of its plan in a {_span(row)}-minute slot: "
                    f"leave {agenda.CHANGE_OVER} for the change-over (cut a row, or lengthen the slot)")
            if _lab(row):
                assert _span(row) >= 60, f"{day}: {row[1]} gets {_span(row)} minutes"
        lectures_in_a_row = [_lesson(a) and _lesson(b) and _lesson(c) for a, b, c in zip(rows, rows[1:], rows[2:])]
        assert not any(lectures_in_a_row), f"{day}: three lectures in a row, with no lab or break between"


def test_at_least_a_third_of_each_day_is_hands_on():
    text = WORKSHOP.read_text(encoding="utf-8")
    for day, rows in _days().items():
        hands_on, contact = _share(rows)
        assert 3 * hands_on >= contact, (
            f"{day}: {hands_on} of {contact} contact minutes are hands-on, under a third")
    said = {int(d): (int(h), int(c)) for h, c, d in re.findall(r"(\d+) of (\d+)(?: minutes)? on day (\d)", text)}
    for day, rows in _days().items():
        if day.startswith(MAIN_DAYS):
            n = int(day[len("## Day "):].split(":")[0])
            assert said.get(n) == _share(rows), f"workshop.md says day {n} is {said.get(n)}, the table {_share(rows)}"


def test_lab_4_comes_before_the_capstone_and_every_track_keeps_it():
    days = _days()
    assert len(days) >= 3, "a shorter track besides the two days"
    for day, rows in days.items():
        order = [(_lesson(r), _lab(r)) for r in rows]
        if day.startswith("## Day 1"):
            continue
        assert (13, None) in order, f"{day}: the capstone, lesson 13, is kept"
        capstone = order.index((13, None))
        labs = [i for i, (_, lab) in enumerate(order) if lab]
        assert labs and max(labs) < capstone, f"{day}: every lab comes before lesson 13"
    main = [n for d, rows in days.items() if d.startswith(MAIN_DAYS) for r in rows if (n := _lesson(r))]
    for day, rows in days.items():
        if not day.startswith(MAIN_DAYS):
            lessons = [n for r in rows if (n := _lesson(r))]
            hands_on, contact = _share(rows)
            main_day = next(v for d, v in days.items() if d.startswith("## Day 2:"))
            assert len(lessons) < len([r for r in main_day if _lesson(r)]), f"{day}: shorter than day 2"
            assert hands_on / contact > _share(main_day)[0] / _share(main_day)[1], f"{day}: more practice"
    assert sorted(main) == sorted(set(main)), "a lesson is taught once over the two days"


def test_every_lesson_has_its_slot_with_slides_generated_from_its_plan(decks, lectures):
    days = _days()
    rows = {}
    for day, rs in days.items():
        for r in rs:
            if (n := _lesson(r)) is not None:
                rows.setdefault(n, []).append((day, r))
    main = sorted(n for n, found in rows.items() if any(d.startswith(MAIN_DAYS) for d, _ in found))
    optional = _optional()
    assert main == [number(nb) for nb in NOTEBOOKS if number(nb) not in optional], (
        f"workshop.md has slots for lessons {main}, the course has {[number(nb) for nb in NOTEBOOKS]} "
        f"(optional: {sorted(optional)})")
    problems = []
    for notebook in NOTEBOOKS:
        if number(notebook) in optional:
            continue                   # no slot: workshop.md says why
        deck, _, run_all = decks[notebook]
        if not PAGES[notebook].exists():
            continue                   # a lesson still being written: its slot names no slides yet
        info = lectures[number(notebook)]
        assert info["total"] == len(deck)
        for day, (_, session, shown, before) in rows[number(notebook)]:
            assert f"(../{PAGES[notebook].name})" in session, f"lesson {number(notebook)}: link its page"
            if shown != agenda.slides_column(info):
                problems.append(f"{day[3:]}, lesson {number(notebook)}: '{shown}', computed "
                                f"'{agenda.slides_column(info)}'")
            wanted = "Run all" if run_all else "as you go"
            if before != wanted:
                problems.append(f"lesson {number(notebook)}: before class '{wanted}' ("
                                + (f"{len(run_all)} shown cells need cells off the slides, e.g. {run_all[0]}"
                                   if run_all else "every shown cell runs in order") + f"), not '{before}'")
    assert not problems, ("workshop.md is out of step with the plans and decks; run "
                          "python tools/agenda.py to rewrite its Slides columns:\n" + "\n".join(problems))


def test_the_slides_follow_the_plan_not_the_typing(tmp_path):
    """Cut a row of lesson 1's plan in a copy: its slides move from show to skip."""
    notebook = next(nb for nb in TAUGHT if number(nb) == 1)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "teaching").mkdir()
    (tmp_path / "notebooks" / notebook.name).write_bytes(notebook.read_bytes())
    page = PAGES[notebook].read_text(encoding="utf-8")
    (tmp_path / "teaching" / PAGES[notebook].name).write_text(page, encoding="utf-8")
    nb = nbformat.read(notebook, as_version=4)
    first, last = slides.sections(nb)["Which accelerators are there?"]
    text = WORKSHOP.read_text(encoding="utf-8")
    before = agenda.expected(text, root=tmp_path)[1]
    assert set(range(first, last + 1)) <= before["show"]
    cut = text.replace('| 1 | § "Correction:', '| 1 | § "Which accelerators are there?"; § "Correction:', 1)
    after = agenda.expected(cut, root=tmp_path)[1]
    assert set(range(first, last + 1)) <= after["skip"] and after["kept_minutes"] < before["kept_minutes"]
    assert agenda.rewrite(cut, root=tmp_path) != agenda.rewrite(text, root=tmp_path)
    with pytest.raises(ValueError, match="names no row"):
        agenda.expected(text.replace('| 1 | § "Correction:', '| 1 | § "No such row"; § "Correction:', 1),
                        root=tmp_path)


def test_how_a_plan_row_names_its_sections():
    order = [(1, "1. T"), (2, "A"), (3, "Correction: a"), (3, "B"), (3, "Correction: b"), (2, "C"), (2, "D")]
    assert agenda.row_sections('§ "A" and its two corrections', order) == {"A", "Correction: a", "Correction: b"}
    assert agenda.row_sections('§ "A"', order) == {"A"}
    assert agenda.row_sections('§ "A" to § "C"', order) == {"A", "Correction: a", "B", "Correction: b", "C"}
    assert agenda.row_sections("Opening", order) == {"1. T"}
    assert agenda.row_sections('§ "D"', order, what='then § "B"') == {"D", "B"}
    with pytest.raises(ValueError, match="does not have"):
        agenda.row_sections('§ "E"', order)
    assert agenda.spans({1, 2, 3, 5, 7, 8}) == "1–3, 5, 7–8"


def test_each_correction_is_taught_once(lectures):
    """empty_cache was taught in lessons 1 and 8: a section on it is kept in one lecture only."""
    taught = {}
    for n, info in lectures.items():
        nb = nbformat.read(notebook_of(n), as_version=4)
        order, _ = agenda._marks(nb)
        for (minutes, part, what), key in info["rows"]:
            if key not in agenda.cuts(WORKSHOP.read_text(encoding="utf-8")).get(n, ()):
                for h in agenda.row_sections(part, order, what):
                    if "empty_cache()" in h:
                        taught.setdefault("empty_cache", set()).add(n)
    assert taught.get("empty_cache") == {8}, f"empty_cache is taught in lessons {taught.get('empty_cache')}"


def notebook_of(n):
    return next(nb for nb in NOTEBOOKS if number(nb) == n)


def _lab_items():
    """{lab: [(lesson, exercise, text of its bullet)]} from § "The labs" of workshop.md."""
    text = WORKSHOP.read_text(encoding="utf-8").split("## The labs", 1)[1].split("\n## ", 1)[0]
    labs = {}
    for block in re.split(r"\n- (?=\*\*Lab)", text)[1:]:
        lab = int(re.match(r"\*\*Lab (\d)\*\*", block)[1])
        items = re.split(r"\n  - ", block)[1:]
        labs[lab] = [(int(m[1]), int(m[2]), norm(item)) for item in items
                     if (m := re.match(r"lesson (\d+) exercise (\d+)", item))]
    return labs


def _solution_output(lesson, exercise):
    found = [c for c in cells(notebook_of(lesson)) if c["cell_type"] == "code"
             and source(c).lstrip().startswith(f"#@title Solution {exercise}")]
    assert found, f"lesson {lesson} has no worked solution {exercise}"
    return "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                   for c in found for o in c.get("outputs", []))


def test_four_labs_from_exercises_that_exist():
    text = WORKSHOP.read_text(encoding="utf-8")
    labs = {int(m[1]): m[2] for m in re.finditer(r"\| \*\*Lab (\d)\*\*: ([^|]+)\|", text)}
    assert sorted(labs) == [1, 2, 3, 4], f"four labs in the agenda, found {sorted(labs)}"
    count = {number(nb): len(re.findall(r"^\d+\. ", handouts.section_text(cells(nb), "Exercises") or "",
                                        re.M)) for nb in NOTEBOOKS}
    items = _lab_items()
    for lab, what in labs.items():
        named = re.findall(r"lesson (\d+) exercises? (\d+)(?: and (\d+))?(?: \(or exercise (\d+)\))?", what)
        assert named, f"Lab {lab} names no exercise ('lesson N exercise E')"
        agenda_items = set()
        for lesson, *numbers in named:
            for n in filter(None, numbers):
                assert int(lesson) in count and 1 <= int(n) <= count[int(lesson)], (
                    f"Lab {lab}: lesson {lesson} has no exercise {n}")
                agenda_items.add((int(lesson), int(n)))
        assert agenda_items == {(l, e) for l, e, _ in items[lab]}, (
            f"Lab {lab}: the agenda names {sorted(agenda_items)}, § The labs describes "
            f"{sorted((l, e) for l, e, _ in items[lab])}")
    assert "(rubric.md)" in text and RUBRIC.exists()


def test_every_lab_item_shows_its_effect_on_a_cpu_laptop_or_names_its_machine():
    from d2l_utils import setup_check
    checks = [name for name, _ in setup_check.CHECKS]
    for lab, items in _lab_items().items():
        for lesson, exercise, text in items:
            where = f"Lab {lab}, lesson {lesson} exercise {exercise}"
            out = _solution_output(lesson, exercise)
            assert "on a cpu laptop" in text.lower(), f"{where}: say what a pair sees on a CPU laptop"
            needs = re.search(r"It needs ([^.:;]+)", text)
            if "This cell needs" in out or "EXPECTED on a GPU" in out:
                assert needs, f"{where}: its solution shows nothing on a CPU (the stored run); name the machine"
            for quoted in re.findall(r"prints `([^`]+)`", text):
                assert norm(quoted) in norm(out), f"{where}: the solution's stored run does not print {quoted!r}"
            if (lesson, exercise) == (11, 2):
                for word in ("gcc", "clang", "headers", "python3-dev", "xcode-select --install", "libomp"):
                    assert word in text, f"{where}: torch.compile needs a compiler; name {word!r}"
                line = re.search(r"The setup check's `([^`]+)` line", text)
                assert line and line[1] in checks, (
                    f"{where}: name the setup check's line that tests the compiler; it has {checks}")
    text = norm(WORKSHOP.read_text(encoding="utf-8"))
    for lesson, exercise in ((4, 3), (5, 2)):       # shown nothing on a CPU: out of the labs, the reason said
        assert f"lesson {lesson} exercise {exercise} (" in text and "it needs a CUDA GPU" in text


def _numbers(out, pattern):
    m = re.search(pattern, out)
    assert m, f"the stored run no longer prints {pattern!r}: update workshop.md's lab text"
    return [float(g.replace(",", "")) for g in m.groups()]


def test_the_labs_timing_claims_match_the_stored_runs():
    """The lab text says, of timings, what the solutions' stored runs show, in words."""
    one, stacked = _numbers(_solution_output(3, 3), r"one by one ([\d.]+) ms; stack \+ one copy ([\d.]+) ms")
    assert one / stacked >= 3, "lesson 3 exercise 3: 'several times slower'"
    step, fixed = _numbers(_solution_output(10, 2), r"measured: ([\d.]+) ms as written, ([\d.]+) ms fixed")
    assert fixed < step / 4, "lesson 10 exercise 2: 'a small fraction of the old one's time'"
    three, zero, two = _numbers(_solution_output(10, 3), r"measured (\d+) ms \(num_workers=0: (\d+) ms, "
                                                         r"num_workers=2: (\d+) ms")
    assert three < two < zero, "lesson 10 exercise 3: 'the epoch shortens with each worker'"
    predicted, measured = _numbers(_solution_output(10, 3), r"num_workers=3: predicted (\d+) ms an epoch, measured (\d+) ms")
    assert measured > predicted, "lesson 10 exercise 3: 'the extra worker helps less than predicted'"
    serial, overlapped = _numbers(_solution_output(11, 1), r"measured: serial ([\d.]+) ms, overlapped ([\d.]+) ms")
    assert 0.4 <= overlapped / serial <= 0.85, "lesson 11 exercise 1: 'clearly less time than the serial one'"
    cold, cached, measured = _numbers(_solution_output(11, 2), r"break-even: ([\d,]+) calls after a cold compile, "
                                                               r"([\d,]+) from the cache[\s\S]*break-even ([\d,]+) calls")
    assert cold >= 10_000 and 100 <= cached < 1000 and 100 <= measured < 1000, (
        "lesson 11 exercise 2: 'hundreds of calls from the cache, tens of thousands after a cold compile'")


# --- numbers the kit takes from the lessons' runs -------------------------------------------

RUN = re.compile(r"\bstored run\b|\blesson's run\b|\bin the lesson\b")
NUMBER_WORDS = re.compile(r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|"
                          r"hundreds?|thousands?|twice|thrice|half|halves|thirds?|quarters?|fifths?|"
                          r"tenths?|dozens?)\b", re.I)


def _lesson_outputs(lesson):
    return "\n".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                     for c in cells(notebook_of(lesson)) for o in c.get("outputs", []))


def attributed(block, lesson, words=True, before=True):
    """What in `block` (a paragraph or a list item about lesson `lesson`) is said to come from
    a stored run and is not in that lesson's stored outputs: [problem]. A clause (a sentence,
    a part of one after ';', or a parenthesis) that names the run may hold figures only inside
    a `quote` of the output, and no number in words ("about six times"): quote, or say
    nothing. before=False reads only what follows the words naming the run (the rubric's
    rows name the exercise's inputs and code before them)."""
    quotes = []
    masked = re.sub(r"`([^`]*)`", lambda m: quotes.append(m[1]) or f"\x00{len(quotes) - 1}\x00", norm(block))
    problems = []
    for clause in re.split(r"(?<=[.;])\s+|\s*\(|\)\s*", masked):
        if not (run := RUN.search(clause)):
            continue
        if not before:
            clause = clause[run.start():]
        plain = re.sub(r"\x00\d+\x00", " ", clause)
        figures = re.findall(r"\d[\d,.]*", plain)
        spelled = NUMBER_WORDS.search(plain) if words else None
        quoted = re.findall(r"\x00(\d+)\x00", clause)
        if lesson is None:
            if figures or spelled or quoted:
                problems.append(f"names no lesson: {clause!r}")
            continue
        out = norm(_lesson_outputs(lesson))
        for figure in figures:
            problems.append(f"lesson {lesson}: {figure!r} outside a quote of the output in {clause!r}")
        if spelled:
            problems.append(f"lesson {lesson}: {spelled[0]!r} in words, not quoted, in {clause!r}")
        for k in quoted:
            if norm(quotes[int(k)]) not in out:
                problems.append(f"lesson {lesson}: `{quotes[int(k)]}` is not in its stored outputs")
    return problems


def _blocks(text):
    """The paragraphs and list items of a markdown page, each with the first lesson it names."""
    found = []
    for para in re.split(r"\n\s*\n", text):
        for item in re.split(r"\n\s*- (?=\S)", "\n" + para):
            if item.strip():
                m = re.search(r"\blesson (\d+)\b", item, re.I)
                found.append((item, int(m[1]) if m else None))
    return found


def test_every_number_the_workshop_takes_from_a_stored_run_is_in_it():
    problems, said = [], 0
    for block, lesson in _blocks(WORKSHOP.read_text(encoding="utf-8")):
        said += bool(RUN.search(block))
        problems += attributed(block, lesson)
    assert said >= 3, "workshop.md's quotes of the stored runs were not found"
    assert not problems, "workshop.md: quote the stored outputs, or say nothing:\n" + "\n".join(problems)


def test_every_number_the_rubric_takes_from_a_lessons_run_is_in_it():
    problems = []
    for line in RUBRIC.read_text(encoding="utf-8").splitlines():
        if line.startswith("| **") and (m := re.search(r"\(lesson (\d+) exercises? \d+", line)):
            problems += attributed(line, int(m[1]), words=False, before=False)
    assert not problems, "rubric.md:\n" + "\n".join(problems)


def test_the_attribution_check_catches_a_number_typed_by_hand():
    bad = "On a CPU laptop one by one is several times slower (about six times in the stored run)."
    assert any("'six' in words" in p for p in attributed(bad, 3))
    assert any("'4.1'" in p for p in attributed("It is 4.1 times slower in the stored run.", 3))
    assert any("not in its stored outputs" in p
               for p in attributed("The stored run prints `one by one 9.99 ms`.", 3))
    assert not attributed("The stored run prints `one by one 3.39 ms; stack + one copy 0.27 ms`.", 3) or \
        "one by one 3.39 ms" not in _solution_output(3, 3)


# --- breaks ---------------------------------------------------------------------------------

def test_no_stretch_of_a_day_runs_past_ninety_minutes_without_a_break():
    text = WORKSHOP.read_text(encoding="utf-8")
    assert agenda.MAX_STRETCH == 90
    assert not agenda.stretch_problems(text), "\n".join(agenda.stretch_problems(text))
    found = agenda.stretches(text)
    assert len({day for day, *_ in found}) == len(_days()) and all(m > 0 for *_, m in found)
    # The agenda before issue 41: day 1's afternoon, 14:35-17:30 with lab 2, had no break.
    old = ("## Day 1: x\n\n| Time | Session | Slides | Before class |\n|---|---|---|---|\n"
           "| 14:20–14:35 | Break | | |\n| 14:35–15:10 | **Lesson 6**, x | | |\n"
           "| 15:10–15:50 | **Lesson 7**, x | | |\n| 15:50–17:15 | **Lab 2**: x | | |\n"
           "| 17:15–17:30 | Slack: x | | |\n")
    assert agenda.stretch_problems(old) == [
        "Day 1: x: 14:35–17:30 is 175 minutes without a break or lunch (at most 90)"]
    assert agenda.main(["--check"]) == 0


def test_kit_links_resolve():
    for page in (WORKSHOP, QUIZ, RUBRIC):
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            path, _, anchor = target.partition("#")
            if path and not re.match(r"[a-z]+:", target):
                assert (page.parent / path).exists(), f"{page.name}: broken link {target}"
            if not path and anchor:
                headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M)
                slugs = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}
                assert anchor in slugs, f"{page.name}: no heading for #{anchor}"


# --- the quiz ---------------------------------------------------------------------------

def _quiz():
    """{lesson: {question number: (question, [(right?, option)])}} of quiz.md, both its parts
    (the workshop's, then "## Optional questions"); a question's lesson is its number's."""
    found, current = {}, None
    for line in QUIZ.read_text(encoding="utf-8").split("## Answer key")[0].splitlines():
        if m := re.match(r"### (\d+)\.(\d+) (.*)", line):
            number = f"{m[1]}.{m[2]}"
            assert number not in found.get(int(m[1]), {}), f"quiz.md: {number} twice"
            current = found.setdefault(int(m[1]), {})[number] = (m[3], [])
        elif (m := re.match(r"- \[([ x])\] (.*)", line)) and current:
            current[1].append((m[1] == "x", m[2]))
    return found


def test_the_quiz_has_every_lessons_questions_each_with_one_right_answer():
    quiz = _quiz()
    assert sorted(quiz) == [number(nb) for nb in TAUGHT], (
        f"quiz.md covers lessons {sorted(quiz)}; the lessons with a teacher's page are "
        f"{[number(nb) for nb in TAUGHT]}")
    for notebook in TAUGHT:
        n = number(notebook)
        asked = [norm(q) for q, _ in handouts.questions(PAGES[notebook].read_text(encoding="utf-8"))]
        here = quiz[n]
        for k, question in enumerate(asked, 1):
            assert f"{n}.{k}" in here, f"quiz.md lacks {n}.{k}, the page's Q{k} ({PAGES[notebook].name})"
            assert norm(here[f"{n}.{k}"][0]) == question, (
                f"quiz.md, {n}.{k}: the question must read as on {PAGES[notebook].name}")
        own = [k for k in here if int(k.split(".")[1]) > len(asked)]
        assert len(own) <= 3, f"quiz.md, lesson {n}: {own}, more questions of its own than the page has"
        for k, (_, options) in here.items():
            assert len(options) >= 3, f"quiz {k}: at least three answers"
            assert sum(right for right, _ in options) == 1, f"quiz {k}: one right answer"
            assert len({text for _, text in options}) == len(options), f"quiz {k}: repeats"


def test_the_rubric_marks_each_criterion_two_one_or_zero():
    rows = [r for r in RUBRIC.read_text(encoding="utf-8").splitlines() if r.startswith("| **")]
    assert len(rows) >= 4 and all(r.count("|") == 5 for r in rows)
