"""tools/handouts.py: a handout prints every exercise whole, keeps the quiz off the students'
page, and prints its figure at a size whose text can be read on A4.

What the tests read from the lessons (the numbered tasks of "## Exercises"), from the quiz
(teaching/kit/quiz.md) and from the teachers' pages is parsed here, not with the tool's own
functions, so that a tool that drops part of a task fails. As a slow check (CI,
COURSE_SLOW=1), Chromium prints each students' page and measures the figure on paper.
"""
import base64
import re
import struct

import pytest
from conftest import NOTEBOOKS, ROOT, cells, slow, source

import handouts  # tools/ is put on sys.path by conftest.py

PAGES = {nb: ROOT / "teaching" / f"{nb.stem}.md" for nb in NOTEBOOKS}
TAUGHT = [nb for nb in NOTEBOOKS if PAGES[nb].exists()]
QUIZ = ROOT / "teaching" / "kit" / "quiz.md"
A4_MM = 210
FIGURE_PT, FIGURE_DPI, MIN_PT = 12, 100, 8        # d2l_utils/course.mplstyle: 12 pt text at 100 dpi


def squash(text):
    """Text without spaces and markdown marks, to compare markdown with rendered text."""
    return re.sub(r"[\s`*_]", "", text)


def visible(page):
    """The visible text of an HTML page, roughly: style and tags dropped, entities undone."""
    text = re.sub(r"<style>.*?</style>|<[^>]+>", " ", page, flags=re.S)
    for entity, char in (("&quot;", '"'), ("&#x27;", "'"), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&")):
        text = text.replace(entity, char)
    return text


def tasks(notebook):
    """(introduction, [whole task]) of a lesson's '## Exercises' section, read from the notebook."""
    for cell in cells(notebook):
        text = source(cell)
        if cell["cell_type"] == "markdown" and re.search(r"^## Exercises$", text, re.M):
            body = re.split(r"^## Exercises$", text, flags=re.M)[1]
            body = re.split(r"^#{1,2} ", body, flags=re.M)[0]
            parts = re.split(r"^\d+\. ", body, flags=re.M)
            return parts[0].strip(), [p.strip() for p in parts[1:]]
    raise AssertionError(f"{notebook.name} has no Exercises section")


def quiz_texts():
    """{lesson: [question or option text]} of teaching/kit/quiz.md."""
    found, lesson = {}, None
    for line in QUIZ.read_text(encoding="utf-8").splitlines():
        if m := re.match(r"## Lesson (\d+)", line):
            lesson = found.setdefault(int(m[1]), [])
        elif lesson is not None and (m := re.match(r"### \d+\.\d+ (.*)|- \[[ xX]\] (.*)", line)):
            lesson.append(m[1] or m[2])
    return found


def page_questions(notebook):
    """[(question, answer)] of a teacher's page (### Qn. ... and its **Answer.**)."""
    text = PAGES[notebook].read_text(encoding="utf-8")
    found = []
    for m in re.finditer(r"^### Q\d+\. ([^\n]*)\n(.*?)(?=^#|\Z)", text, re.M | re.S):
        found.append((m[1], m[2].split("**Answer.**", 1)[1] if "**Answer.**" in m[2] else ""))
    return found


@pytest.mark.parametrize("notebook", TAUGHT, ids=lambda p: p.name)
def test_every_exercise_is_printed_whole(built, notebook):
    page = (built / f"{notebook.stem}.html").read_text(encoding="utf-8")
    assert 'href="#' not in page, f"{notebook.name}: a link into the lesson leads nowhere on a handout"
    student = squash(visible(page))
    intro, whole = tasks(notebook)
    assert len(whole) >= 2
    for k, task in enumerate(whole, 1):
        task = re.sub(r"\[([^\]]*)\]\(#[^)]*\)", r"\1", task)     # a link into the lesson: its words
        assert squash(task) in student, f"{notebook.name}: exercise {k} is not printed whole: {task[:80]!r}..."
    if intro:
        assert squash(intro) in student, f"{notebook.name}: the exercises' introduction is missing"


def test_the_short_tasks_the_issue_found_are_whole_now(built):
    """Lesson 3's third exercise and lesson 8's first: their tasks, not only their first sentence."""
    three = visible((built / "03_copies_between_devices.html").read_text(encoding="utf-8"))
    assert "counting the time of the stack" in " ".join(three.split())
    eight = " ".join(visible((built / "08_gpu_memory.html").read_text(encoding="utf-8")).split())
    assert "Explain the difference, byte for byte" in eight


@pytest.mark.parametrize("notebook", TAUGHT, ids=lambda p: p.name)
def test_no_quiz_question_on_a_students_handout(built, notebook):
    page = (built / f"{notebook.stem}.html").read_text(encoding="utf-8")
    assert 'href="#' not in page, f"{notebook.name}: a link into the lesson leads nowhere on a handout"
    student = squash(visible(page))
    teacher = squash(visible((built / f"{notebook.stem}-teacher.html").read_text(encoding="utf-8")))
    lesson = int(notebook.name[:2])
    quiz = quiz_texts().get(lesson, [])
    asked = page_questions(notebook)
    assert quiz and len(asked) == 3, f"{notebook.name}: quiz.md and its teacher's page have its questions"
    for text in quiz + [q for q, _ in asked] + [a for _, a in asked]:
        assert squash(text)[:60] not in student, f"{notebook.name}: the students' page gives the quiz away: {text[:70]!r}"
    assert "Check yourself" not in student
    for question, answer in asked:                    # the teacher's copy keeps them, answers too
        assert squash(question)[:60] in teacher and squash(answer)[:60] in teacher, notebook.name


def _figure(page):
    """(width in mm from its style, PNG width in px) of a page's figure, or None."""
    m = re.search(r'<img alt="key figure" style="width: ([\d.]+)mm" src="data:image/png;base64,([^"]+)"', page)
    if not m:
        return None
    raw = base64.b64decode(m[2][:64])
    return float(m[1]), struct.unpack(">II", raw[16:24])[0]


def _printable_mm(page):
    margin = float(re.search(r"@page\s*{\s*margin:\s*([\d.]+)mm", page)[1])
    return A4_MM - 2 * margin


@pytest.mark.parametrize("notebook", TAUGHT, ids=lambda p: p.name)
def test_figure_text_prints_at_8_pt_or_more_on_a4(built, notebook):
    page = (built / f"{notebook.stem}.html").read_text(encoding="utf-8")
    has_png = any("image/png" in o.get("data", {}) for c in cells(notebook) if c["cell_type"] == "code"
                  and not source(c).lstrip().startswith("#@title") for o in c.get("outputs", []))
    figure = _figure(page)
    if figure is None:
        assert not has_png or "too wide to print readable" in page, f"{notebook.name}: figure lost silently"
        return
    printed_mm, px = figure
    full_mm = px / FIGURE_DPI * 25.4                     # the figure at the size matplotlib drew it
    smallest = FIGURE_PT * printed_mm / full_mm
    assert smallest >= MIN_PT - 0.05, f"{notebook.name}: figure text prints at {smallest:.1f} pt"
    assert printed_mm <= _printable_mm(page), f"{notebook.name}: the figure is wider than A4's printable width"
    rule = re.search(r"figure img\s*{([^}]*)}", page)[1]
    assert "max-" not in rule, "nothing may shrink the figure below its computed width"


def test_the_figure_scale_is_computed_from_the_style_and_the_png():
    dpi, smallest = handouts._style_numbers()
    style = (ROOT / "d2l_utils" / "course.mplstyle").read_text(encoding="utf-8")
    assert f"savefig.dpi: {dpi:g}" in style and smallest == FIGURE_PT

    def png(width):
        ihdr = struct.pack(">II", width, 300) + bytes([8, 6, 0, 0, 0])
        return base64.b64encode(b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\0" * 4).decode()
    assert handouts.figure_width_mm(png(1000)) == pytest.approx(1000 / 100 * 25.4 * 8 / 12)
    parts = {"title": "T", "learn": "", "need": "", "summary": "* s", "exercises": ["a task"],
             "exercises_intro": "", "questions": [("Q?", "A.")], "notebook": "x.ipynb"}
    wide = handouts.render({**parts, "figure": (png(1300), "A section")})       # 220 mm: too wide
    assert '<img alt="key figure"' not in wide and "too wide to print readable" in wide and "A section" in wide
    fits = handouts.render({**parts, "figure": (png(900), "A section")})
    assert _figure(fits)[0] == pytest.approx(900 * 0.254 * 8 / 12, abs=0.1)
    assert "Q?" not in handouts.render(parts | {"figure": None}) and "A." in handouts.render(parts | {"figure": None}, teacher=True)


@slow("Chromium prints every students' handout and measures its figure on A4")
def test_figures_print_readable_in_chromium(built):
    import test_browser
    sync_playwright = test_browser.browser_tools()
    problems = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(test_browser.CHROMIUM), headless=True,
                                     args=test_browser.CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 794, "height": 1123})   # A4 at 96 px per inch
        page.emulate_media(media="print")
        try:
            for notebook in TAUGHT:
                html_page = (built / f"{notebook.stem}.html").read_text(encoding="utf-8")
                if not (figure := _figure(html_page)):
                    continue
                page.goto((built / f"{notebook.stem}.html").as_uri())
                width_mm = page.eval_on_selector('img[alt="key figure"]', "e => e.getBoundingClientRect().width") * 25.4 / 96
                smallest = FIGURE_PT * width_mm / (figure[1] / FIGURE_DPI * 25.4)
                if smallest < MIN_PT - 0.05:
                    problems.append(f"{notebook.name}: figure text prints at {smallest:.1f} pt ({width_mm:.0f} mm wide)")
                pages = len(re.findall(rb"/Type\s*/Page[^s]", page.pdf(format="A4")))
                if pages > 2:
                    problems.append(f"{notebook.name}: the students' handout takes {pages} A4 pages, not one sheet")
        finally:
            browser.close()
    assert not problems, "\n".join(problems)


def test_handouts_follow_the_current_lesson_and_page(tmp_path):
    """Change a copy of a lesson's summary, exercise and its page's question: the students' page
    prints the new summary line and the new task whole; only the teacher's copy prints the new
    question."""
    import json
    notebook = TAUGHT[0]
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "teaching").mkdir()
    (tmp_path / "d2l_utils").mkdir()
    (tmp_path / "d2l_utils" / "course.mplstyle").write_text(
        (ROOT / "d2l_utils" / "course.mplstyle").read_text(encoding="utf-8"), encoding="utf-8")
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    summary = next(c for c in nb["cells"] if "## Summary" in source(c))
    summary["source"] = source(summary).replace("## Summary\n", "## Summary\n\n* A line made up by the test.\n", 1)
    cell = next(c for c in nb["cells"] if "## Exercises" in source(c))
    cell["source"] = re.sub(r"^1\. ", "1. A task made up by the test. Its second sentence matters too.\n   ",
                            source(cell), count=1, flags=re.M)
    (tmp_path / "notebooks" / notebook.name).write_text(json.dumps(nb), encoding="utf-8")
    page = PAGES[notebook].read_text(encoding="utf-8").replace("### Q1. ", "### Q1. Made up: ", 1)
    (tmp_path / "teaching" / PAGES[notebook].name).write_text(page, encoding="utf-8")
    handouts.build(tmp_path / "out", root=tmp_path)
    student = (tmp_path / "out" / f"{notebook.stem}.html").read_text(encoding="utf-8")
    teacher = (tmp_path / "out" / f"{notebook.stem}-teacher.html").read_text(encoding="utf-8")
    assert "Its second sentence matters too." in student and "A line made up by the test." in student
    assert "Made up: " not in student and "Made up: " in teacher


# --- the Chinese handouts (--zh) -------------------------------------------------------------

ZH_NOTEBOOKS = sorted((ROOT / "notebooks" / "zh").glob("[0-9][0-9]_*.ipynb"))
QUIZ_ZH = ROOT / "translations" / "zh" / "kit" / "quiz.md"


@pytest.fixture(scope="module")
def built_zh(tmp_path_factory):
    out = tmp_path_factory.mktemp("handouts-zh")
    handouts.build(out, language="zh")
    return out


def zh_tasks(notebook):
    """[whole task] of a Chinese lesson's '## 练习' section."""
    for cell in cells(notebook):
        text = source(cell)
        if cell["cell_type"] == "markdown" and re.search(r"^## 练习$", text, re.M):
            body = re.split(r"^#{1,2} ", re.split(r"^## 练习$", text, flags=re.M)[1], flags=re.M)[0]
            return [p.strip() for p in re.split(r"^\d+\. ", body, flags=re.M)[1:]]
    raise AssertionError(f"zh/{notebook.name} has no 练习 section")


def zh_quiz(lesson):
    """[(question, right option)] of one lesson in the Chinese quiz, read here."""
    found, current = [], None
    for line in QUIZ_ZH.read_text(encoding="utf-8").split("## 答案")[0].splitlines():
        if m := re.match(r"### (\d+)\.\d+ (.*)", line):
            current = [m[2], None] if int(m[1]) == lesson else None
            if current:
                found.append(current)
        elif current and (m := re.match(r"- \[x\] (.*)", line)):
            current[1] = m[1]
    return found


@pytest.mark.parametrize("notebook", ZH_NOTEBOOKS, ids=lambda p: "zh_" + p.name)
def test_a_chinese_handout_is_chinese_with_every_task_whole_and_the_quiz_only_for_the_teacher(built_zh, notebook):
    page = (built_zh / f"{notebook.stem}.html").read_text(encoding="utf-8")
    teacher = (built_zh / f"{notebook.stem}-teacher.html").read_text(encoding="utf-8")
    student = squash(visible(page))
    assert 'lang="zh-CN"' in page and "<h2>小结</h2>" in page and "<h2>练习</h2>" in page
    assert "Summary" not in page and "Exercises" not in page
    for task in zh_tasks(notebook):
        assert squash(re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", task)) in student, (
            f"zh/{notebook.name}: a task is not printed whole: {task[:60]!r}")
    asked = zh_quiz(int(notebook.name[:2]))
    assert len(asked) >= 3, f"zh/{notebook.name}: the Chinese quiz has its questions"
    for question, right in asked:
        assert squash(question) not in student, f"zh/{notebook.name}: the students' page gives the quiz away"
        assert squash(question) in squash(visible(teacher)) and squash(right) in squash(visible(teacher))
