"""The students' copy of the workshop's quiz (teaching/kit/quiz.md), without its answers.

    python tools/quiz.py [OUTDIR]        # OUTDIR/quiz.md and OUTDIR/quiz.html (default: build/quiz)
    python tools/quiz.py --zh [OUTDIR]   # the Chinese quiz (translations/zh/kit/quiz.md; default build/quiz-zh)
    python tools/quiz.py --key           # rewrite quiz.md's answer key from its [x] marks

The Chinese quiz is the same questions in the same order with the same right answers (tests/test_quiz.py
compares them); its headings are Chinese (`## 第 1 课：设备`, `## 选做题`, `## 答案`, `*出处：§ "..."。*`),
and its first line names the English text it translates and that text's fingerprint, as the lessons'
translations do.

The students' copy keeps each question and its four options, lettered A to D in the order
printed, each with an empty box; it leaves out every answer mark (`[x]`), the *From* lines
(they name the teacher's sources), the teacher's notes at the top and the answer key. The
workshop's part (lessons 1-13) comes first; the optional part follows, on a page of its own
when printed. build/ is git-ignored; tests/test_quiz.py builds a copy and checks that no
answer mark leaks into it. Course machinery, written by hand.
"""
import argparse
import html
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import handouts  # noqa: E402  (tools/handouts.py: its inline markdown)

ROOT = pathlib.Path(__file__).resolve().parent.parent
QUIZ = ROOT / "teaching" / "kit" / "quiz.md"
QUIZ_ZH = ROOT / "translations" / "zh" / "kit" / "quiz.md"
LETTERS = "ABCD"
OPTIONAL = "## Optional questions"
KEY = "## Answer key"
# The Chinese quiz's headings and words, beside the English ones.
ZH = {OPTIONAL: "## 选做题", KEY: "## 答案", "Quiz": "测验", "Tick one answer a question.": "每题勾选一个答案。",
      "The workshop's quiz": "工作坊测验", "Optional questions": "选做题"}
STYLE = """
@page { size: A4; margin: 14mm; }
body { font-family: sans-serif; font-size: 11pt; line-height: 1.35; max-width: 180mm; margin: auto; }
h1 { font-size: 16pt; } h2 { font-size: 13pt; margin-top: 1.2em; }
.q { break-inside: avoid; margin: 0.8em 0; }
.q ol { list-style: none; padding-left: 1.2em; margin: 0.3em 0; }
.q li { margin: 0.15em 0; }
.optional { break-before: page; }
code { font-size: 10pt; }
"""


def parse(text):
    """[{'number', 'lesson', 'title', 'question', 'options': [(right?, text)], 'sources', 'optional'}]."""
    found, title, optional = [], None, False
    for line in text.splitlines():
        if line.startswith((KEY, ZH[KEY])):
            break
        if line.startswith((OPTIONAL, ZH[OPTIONAL])):
            optional = True
        if m := re.match(r"## (?:Lesson (\d+): |第 (\d+) 课：)(.*)", line):
            title = m[3]
        elif m := re.match(r"### (\d+)\.(\d+) (.*)", line):
            found.append({"number": f"{m[1]}.{m[2]}", "lesson": int(m[1]), "title": title,
                          "question": m[3], "options": [], "sources": [], "optional": optional})
        elif (m := re.match(r"- \[([ x])\] (.*)", line)) and found:
            found[-1]["options"].append((m[1] == "x", m[2]))
        elif (m := re.match(r"\*(?:From |出处：)(.*)[.。]\*$", line)) and found:
            found[-1]["sources"] = re.findall(r'§ "([^"]+)"', m[1])
    return found


def answer_key(questions):
    """The answer key's table, a row a lesson: '1.1 C, 1.2 A, ...'."""
    rows = ["| Lesson | Answers |", "|---|---|"]
    lessons = sorted({q["lesson"] for q in questions})
    for n in lessons:
        mine = sorted((q for q in questions if q["lesson"] == n), key=lambda q: int(q["number"].split(".")[1]))
        rows.append(f"| {n} | " + ", ".join(
            f"{q['number']} {LETTERS[[r for r, _ in q['options']].index(True)]}" for q in mine) + " |")
    return "\n".join(rows)


def with_key(text):
    """quiz.md's text with its answer key rewritten from the marks."""
    head, _, _ = text.partition(KEY)
    return f"{head}{KEY}\n\n{answer_key(parse(text))}\n"


def _words(language):
    return (lambda text: text) if language == "en" else ZH.get


def _groups(questions, language="en"):
    day = [q for q in questions if not q["optional"]]
    say = _words(language)
    return [(say("The workshop's quiz"), day), (say("Optional questions"), [q for q in questions if q["optional"]])]


def students_markdown(questions, language="en"):
    say = _words(language)
    out = [f"# {say('Quiz')}", "", say("Tick one answer a question."), ""]
    for heading, group in _groups(questions, language):
        if not group:
            continue
        out += [f"## {heading}", ""]
        for q in group:
            out += [f"**{q['number']}** {q['question']}", ""]
            out += [f"- ☐ {letter}. {text}" for letter, (_, text) in zip(LETTERS, q["options"])]
            out.append("")
    return "\n".join(out)


def students_html(questions, language="en"):
    say = _words(language)
    out = ["<!DOCTYPE html>", f'<html lang="{"en" if language == "en" else "zh-CN"}"><head><meta charset="utf-8">'
           f'<title>{say("Quiz")}</title>', f"<style>{STYLE}</style></head><body>", f"<h1>{say('Quiz')}</h1>",
           f"<p>{say('Tick one answer a question.')}</p>"]
    for k, (heading, group) in enumerate(_groups(questions, language)):
        if not group:
            continue
        css = ' class="optional"' if k else ""
        out.append(f"<section{css}><h2>{html.escape(heading)}</h2>")
        for q in group:
            out.append(f'<div class="q"><p><strong>{q["number"]}</strong> {handouts._inline(q["question"])}</p><ol>')
            out += [f"<li>☐ {letter}. {handouts._inline(text)}</li>" for letter, (_, text) in zip(LETTERS, q["options"])]
            out.append("</ol></div>")
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def build(outdir, quiz=QUIZ, language="en"):
    """Write the students' quiz.md and quiz.html into outdir; return their paths."""
    outdir = pathlib.Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    questions = parse(quiz.read_text(encoding="utf-8"))
    md, page = outdir / "quiz.md", outdir / "quiz.html"
    md.write_text(students_markdown(questions, language), encoding="utf-8")
    page.write_text(students_html(questions, language), encoding="utf-8")
    return [md, page]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outdir", nargs="?")
    parser.add_argument("--zh", action="store_true", help="the Chinese quiz (translations/zh/kit/quiz.md)")
    parser.add_argument("--key", action="store_true", help="rewrite quiz.md's answer key from its marks")
    args = parser.parse_args(argv)
    if args.key:
        QUIZ.write_text(with_key(QUIZ.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"rewrote the answer key of {QUIZ.relative_to(ROOT)}")
        return 0
    outdir = args.outdir or str(ROOT / "build" / ("quiz-zh" if args.zh else "quiz"))
    for path in build(outdir, QUIZ_ZH if args.zh else QUIZ, "zh" if args.zh else "en"):
        print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
