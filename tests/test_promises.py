"""No text of the course promises a recording from real hardware that is not installed.

No GPU has run the course yet: ``measurements/gpu-recording.json`` (what ``tools/record_gpu.py``
records) is absent, and so is lesson 3's ``measurements/gpu.json``. While that is so, no
sentence may say that a GPU-only cell shows what it printed on a GPU, that a recording
shows something, that something was recorded or measured on the course's H100/H200, or that
Colab has the recording too. A sentence that speaks of a recording conditionally ("once a
recording is installed", "where one is committed", "none is yet", 若有……记录) is fine.

Guarded, in English and in Chinese: README.md, README.zh.md, CONTRIBUTING.md, the setup
check (its docstring, and the lines it prints here and, monkeypatched, on a CUDA build and a
Mac), the teacher's pages and kit (teaching/), the texts of tools/handouts.py and
tools/student_copy.py, the English lessons (markdown, the strings and comments of code
cells, and the stored outputs), and the Chinese edition (translations/zh/*.md and
notebooks/zh/*.ipynb). A string inside code that runs only when a recording is there (an
``if recording:`` block, ``... if rec else ''``) is conditional too.

The checks run only while no recording is installed (``d2l_utils.recordings`` says where it
would be read from); once one is, the promises may come true, and the test of the installed
recording (tests/test_gpu_cells.py) takes over.
"""
import ast
import json
import re

import pytest
from conftest import NOTEBOOKS, ROOT, source

from d2l_utils import recordings, setup_check

ZH_NOTEBOOKS = sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))

# ---------------------------------------------------------------------------- the phrasings
GPU = r"(?:GPUs?|H100s?|H200s?|A100s?|L4s?|T4s?|RTX[ -]?\d+|real hardware|(?:a|the) GPU machine)"
PROMISES_EN = {
    "what a cell printed on a GPU": re.compile(
        r"\bwhat (?:it|they|the cells?|each cell|a cell|this cell|that cell|the (?:GPU|H100|H200|T4|machine)"
        r"|that (?:GPU|machine)|the course's \w+) (?:printed|showed|measured|recorded)"
        r"(?: (?:on|with) (?:an? |the |one |two |the course's |a real |real )?" + GPU + r"|\s+there)", re.I),
    "recorded or measured on a named GPU": re.compile(
        r"(?<!event )\b(?:recorded|printed|measured|ran) (?:it )?on (?:an? |the |one |two |\d+ ?x ?|the course's )?"
        r"(?:H100|H200|A100|L4|RTX[ -]?\d+)\b", re.I),
    "the course's own GPU": re.compile(r"\bcourse's (?:own )?(?:H100|H200|A100|L4)\b", re.I),
    "a recording that shows": re.compile(
        r"\b(?:shows?|showing|prints?|displays?) (?:a|the|its|their) recording\b"
        r"|\b(?:the|a|its|their) recording (?:shows|showed|prints|printed|drew|draws|says|measured)\b"
        r"|\brecordings? from real hardware (?:shows?|is shown|are shown)\b", re.I),
    "Colab has the recording too": re.compile(
        r"\bso Colab\b[^.]{0,60}?\b(?:has|shows|sees|gets) (?:it|them|a recording|the recording|one|the curves) too\b",
        re.I),
    "a figure drew the recorded curves": re.compile(r"\bdr[ae]ws? its (?:recorded )?curves\b", re.I),
}
PROMISES_ZH = {
    "GPU 上打印的内容": re.compile(
        r"(?:GPU|H100|H200|A100|L4|T4|显卡|真实硬件)\s*上\s*(?:所|曾)?打印(?:出)?(?:来)?的(?:内容|结果|输出|文字)"),
    "某块具名 GPU 上实测的": re.compile(r"(?:H100|H200|A100|L4)\s*上\s*(?:所|曾)?(?:实测|测得|录制)"),
    "录制于某块 GPU": re.compile(r"(?:录制|实测|记录)(?:于|自)\s*(?:\d+\s*[x×]\s*)?(?:H100|H200|A100|L4|T4|GPU)"),
    "课程自己的 GPU": re.compile(r"课程(?:自己)?的\s*(?:H100|H200|A100|L4)"),
    "录制的记录": re.compile(r"录制"),
    "记录显示": re.compile(r"(?:记录|录制结果)(?:显示|表明|打印)"),
    "Colab 上也有记录": re.compile(r"所以\s*Colab\s*上也(?:有|能看到|会显示|显示)"),
    "图画出了记录的曲线": re.compile(r"画出了其中的曲线"),
}
# A sentence that says the recording may be absent, or speaks of it as future or hypothetical.
CONDITIONAL_EN = re.compile(
    r"\bonce\b|\b(?:if|where|when|whenever|until) (?:a|one|the|any|such a) (?:recording|file)\b"
    r"|\bwhere one is (?:installed|committed)|\b(?:where|if|when|once) (?:it|they) (?:is|are) (?:installed|present|committed)"
    r"|\bwould\b|\bnone is\b|\bno recording\b"
    r"|\bnot (?:yet )?(?:installed|committed)\b|\bwithout (?:a|the) recording\b|\bis missing\b", re.I)
CONDITIONAL_ZH = re.compile(r"若|如果|一旦|假如|尚未|还没有|目前没有|没有.{0,12}记录|缺少|之后才")
# Sentences, and the clauses of a sentence that a semicolon separates.
SENTENCE = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])")


def promises(text):
    """The promising phrases in ``text``: [(offset, name, phrase)], conditional sentences skipped."""
    found = []
    pos = 0
    for sentence in SENTENCE.split(text):
        start = text.find(sentence, pos)
        pos = start + len(sentence)
        flat = " ".join(sentence.split())
        for patterns, conditional in ((PROMISES_EN, CONDITIONAL_EN), (PROMISES_ZH, CONDITIONAL_ZH)):
            for name, pattern in patterns.items():
                m = pattern.search(flat)
                if m and not conditional.search(flat):
                    found.append((start, name, flat))
    return found


# ---------------------------------------------------------------------------- the texts
def paragraphs(text, first_line=1):
    """[(line, paragraph)] of a markdown text: blank lines and HTML comments separate them."""
    out, block, start = [], [], None
    for n, line in enumerate(text.splitlines(), first_line):
        if not line.strip() or line.lstrip().startswith("<!--"):
            if block:
                out.append((start, "\n".join(block)))
            block, start = [], None
            continue
        if start is None:
            start = n
        block.append(line)
    if block:
        out.append((start, "\n".join(block)))
    return out


_RECORDING_TEST = re.compile(r"\brec(?:ording|orded|s)?\b|gpu_file|measurement_path|recording_path", re.I)


def code_texts(code):
    """[(line, text)]: the strings (docstrings and f-strings included) and comments of Python
    ``code``, leaving out the strings that only a recording's presence lets run (the body of
    an ``if`` or ``... if ... else ...`` whose test names the recording)."""
    lines = code.splitlines()
    cleaned = "\n".join("" if re.match(r"\s*[%!]", l) else l for l in lines)   # IPython magics
    out = [(n, l.split("#", 1)[1]) for n, l in enumerate(lines, 1)
           if "#" in l and not l.lstrip().startswith(("'", '"')) and "#@" not in l]
    try:
        tree = ast.parse(cleaned)
    except SyntaxError:
        return out + [(1, code)]
    conditional = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp)) and _RECORDING_TEST.search(ast.unparse(node.test)):
            body = node.body if isinstance(node.body, list) else [node.body]
            for part in body:
                conditional.update(id(n) for n in ast.walk(part))
    for node in ast.walk(tree):
        if id(node) in conditional:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            out.append((node.lineno, text))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.lineno, node.value))
    return out


def markdown_file(path):
    return [(f"{path.relative_to(ROOT)}:{line}", text)
            for line, text in paragraphs(path.read_text(encoding="utf-8"))]


def python_file(path):
    return [(f"{path.relative_to(ROOT)}:{line}", text) for line, text in code_texts(path.read_text(encoding="utf-8"))]


def notebook(path, outputs=True):
    """The markdown, code texts and (if ``outputs``) stored outputs of a notebook's cells."""
    found = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        where = f"{path.relative_to(ROOT)}, cell {cell.get('id')}"
        if cell["cell_type"] == "markdown":
            found += [(f"{where}, line {line}", text) for line, text in paragraphs(source(cell))]
        elif cell["cell_type"] == "code":
            found += [(f"{where}, line {line}", text) for line, text in code_texts(source(cell))]
            if outputs:
                for out in cell.get("outputs", []):
                    text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
                    if text:
                        found.append((f"{where}, output", text))
    return found


def setup_check_lines(monkeypatch):
    """What the setup check prints about GPUs and recordings, here and in the other cases it
    knows: no GPU with a CUDA build and with a CPU build, and a Mac with Apple silicon."""
    import torch
    lines = [setup_check.check_accelerator()[1], setup_check.check_recordings()[1]]
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)
    for cuda in ("12.8", None):
        monkeypatch.setattr(torch.version, "cuda", cuda)
        lines.append(setup_check.check_accelerator()[1])
    monkeypatch.setattr(setup_check.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(setup_check.platform, "machine", lambda: "arm64")
    lines.append(setup_check.check_machine()[1])
    return [("setup check, printed", line) for line in lines]


def offending(texts):
    """One line per promise: where (the line it starts on, where known), which phrasing, the sentence."""
    found, seen = [], set()
    for where, text in texts:
        for offset, name, sentence in promises(text):
            if (where, sentence) in seen:             # one line per sentence, however many phrasings
                continue
            seen.add((where, sentence))
            at = re.fullmatch(r"(.*?)(\d+)", where)
            line = f"{at[1]}{int(at[2]) + text[:offset].count(chr(10))}" if at else where
            found.append(f"{line}: {name}: {sentence!r}")
    return found


@pytest.fixture
def no_recording():
    installed = recordings.recording_path()
    if installed is not None:
        pytest.skip(f"a recording is installed ({installed}): what it shows may be promised")


# ---------------------------------------------------------------------------- the tests
SOURCES = {
    "README.md": lambda: markdown_file(ROOT / "README.md"),
    "README.zh.md": lambda: markdown_file(ROOT / "README.zh.md"),
    "CONTRIBUTING.md": lambda: markdown_file(ROOT / "CONTRIBUTING.md"),
    "teaching": lambda: [t for p in sorted((ROOT / "teaching").rglob("*.md")) for t in markdown_file(p)],
    "tools' texts": lambda: python_file(ROOT / "tools" / "handouts.py") + python_file(ROOT / "tools" / "student_copy.py"),
    "setup check's source": lambda: python_file(ROOT / "d2l_utils" / "setup_check.py"),
    "English lessons": lambda: [t for p in NOTEBOOKS for t in notebook(p)],
    "Chinese translations": lambda: [t for p in sorted((ROOT / "translations" / "zh").glob("*.md"))
                                     for t in markdown_file(p)],
    "Chinese lessons": lambda: [t for p in ZH_NOTEBOOKS for t in notebook(p)],
}


@pytest.mark.parametrize("name", SOURCES)
def test_no_text_promises_a_recording_that_is_not_installed(name, no_recording):
    found = offending(SOURCES[name]())
    assert not found, ("no recording from real hardware is installed, yet these promise one "
                       "(say it conditionally, or say what is shown instead):\n" + "\n".join(found))


def test_the_setup_check_promises_no_recording(no_recording, monkeypatch):
    found = offending(setup_check_lines(monkeypatch))
    assert not found, "\n".join(found)


def test_every_guarded_source_is_read():
    """The guard reads what it claims to: each source gives text, the lessons their code too."""
    counts = {name: len(read()) for name, read in SOURCES.items()}
    assert all(counts.values()), counts
    assert len(NOTEBOOKS) >= 13 and len(ZH_NOTEBOOKS) >= 7
    lesson3 = dict(notebook(next(p for p in NOTEBOOKS if p.name.startswith("03"))))
    assert any("No recording of a GPU machine" in text for text in lesson3.values())   # a code cell's string
    assert any("No recording from real hardware is installed" in text for text in lesson3.values())  # an output


@pytest.mark.parametrize("sentence", [
    "no GPU: every lesson runs; GPU-only cells show what they printed on a GPU",   # the setup check's old line
    "Without a GPU, the cell shows what the course's H200 printed.",
    "Each GPU-only cell then shows what it printed on the H100.",
    "The cell printed this when it was recorded on an H100 last week.",
    "The recording shows a 4.1 ms step.",
    "The helper package carries it, so Colab, which installs it from git, shows a recording too.",
    "It comes with the helper package (so Colab has it too).",
    "The plot of copies to a GPU above drew its curves.",
    "没有 GPU 时，单元格显示 H200 上打印的内容。",
    "这一步在 H100 上实测为 4.1 ms。",
    "这些数字录制于 H100。",
    "课程的 H200 上测得 4.1 ms。",
    "录制结果显示每步 4.1 ms。",
])
def test_a_promise_is_caught(sentence):
    assert promises(sentence), sentence


@pytest.mark.parametrize("sentence", [
    "Then, once a recording from real hardware is installed, what the cell printed there.",
    "A recording is shown beside the expectation once one is committed: none is yet.",
    "Where a recording is installed, the cell also shows what that GPU printed.",
    "No recording from real hardware is committed yet.",
    "Wait on an event recorded on the H100's stream.",
    "GPU-only cells show what a GPU is expected to show, labelled as a prediction.",
    "On a GPU, the cell measures the copy and compares it with the expectation.",
    "课程若有来自这种机器的记录（`measurements/gpu.json`），单元格就打印其中的数字。",
    "没有 GPU 时，需要 GPU 的单元格显示 GPU 上*预期*的结果，并标明是预期而非实测。",
    "在 CPU 上，对 CPU 张量调用 `.item()` 大约只花一微秒或更少（下文实测）。",
    "在你自己的 GPU 上实测这个单元格，再与预期比较。",
])
def test_a_conditional_or_plain_sentence_is_not(sentence):
    assert not promises(sentence), promises(sentence)


def test_code_that_runs_only_with_a_recording_is_conditional():
    code = ("if recording:\n    print('recorded on', machine_line(recording['machine']))\n"
            "title = f'; recorded on {m[\"gpu\"]} H100' if recording else ''\n"
            "print('what the cell printed on the H100')\n")
    texts = [t for _, t in code_texts(code)]
    assert [t for t in texts if promises(t)] == ["what the cell printed on the H100"], texts
