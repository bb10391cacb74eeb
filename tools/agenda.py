"""The workshop agenda's slide lists, computed from the lessons' 45-minute plans.

teaching/kit/workshop.md teaches each lesson by its teacher's page's "## 45 minutes" plan,
less the rows that the agenda's cut table (§ "What each lecture cuts") names. The Slides
column of each lesson's row in the day tables says which slides to show, which to skip
and where to pause; this tool computes it from the plan and the deck, never by hand. Its
check also reads each day's times: a day's sessions between two breaks (or lunch) may last
MAX_STRETCH minutes at most.

    python tools/agenda.py            # rewrite the Slides columns of workshop.md
    python tools/agenda.py --check    # exit 1 and name the rows that are out of step, and
                                      # every stretch of a day longer than MAX_STRETCH minutes
                                      # without a break or lunch

How a plan row maps to slides: the row names sections (§ "...", in its Part or its What to
do); "Opening" is the lesson's title and what comes before its first section; § "A" to
§ "B" is every section from A to B; "and its corrections" / "with its correction" adds the
sections under the one named before whose heading starts with "Correction". A slide
belongs to a row when it shows a cell of one of the row's sections (a cell belongs to the
last heading above it, at any level), or that section's heading. Shown: slide 1 and the
slides of the rows kept; skipped: the rest. A row with "**Pause:**" pauses on its last
slide. Course machinery, written by hand.
"""
import pathlib
import re
import sys

import nbformat

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import sitting  # noqa: E402  (tools/sitting.py)
import slides  # noqa: E402  (tools/slides.py)

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORKSHOP = ROOT / "teaching" / "kit" / "workshop.md"
NAMED = re.compile(r'§ "([^"]+)"')
OPENING = "Opening"
CHANGE_OVER = 5          # minutes a lesson's slot keeps beyond its plan: laptops, questions, the next deck
MAX_STRETCH = 90         # minutes of sessions in a row, at most, before a break or lunch
PAUSES = ("Break", "Lunch")


def norm(text):
    return " ".join(text.split())


def plan(page_text):
    """The "## 45 minutes" table of a teacher's page: [(minutes, part, what to do)]."""
    block = page_text.split("## 45 minutes", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in block.splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cols) == 3 and cols[0].isdigit():
            rows.append((int(cols[0]), cols[1], cols[2]))
    return rows


def row_key(part):
    """How the cut table names a plan row: its first § name, or "Opening"."""
    m = NAMED.search(part)
    if part.startswith(OPENING) or not m:
        return OPENING
    return norm(m[1])


def _marks(nb):
    """[(level, heading)] in order, and {heading: set of slides showing its own cells}."""
    where = {}
    for slide in slides.deck(nb):
        for i in slide["cells"]:
            where[i] = slide["number"]
    order, own, current, depth = [], {}, None, set()
    in_depth = False
    for cell in nb.cells:
        in_depth = in_depth or sitting.is_depth_start(cell)
        for level, text in slides.headings(cell):
            current = norm(text)
            order.append((level, current))
            own.setdefault(current, set())
            if in_depth:
                depth.add(current)                              # the depth is not on the slides
        if current is not None and cell.get("id") in where:
            own[current].add(where[cell["id"]])
    for heading, (first, _) in slides.sections(nb).items():
        if norm(heading) not in depth:
            own.setdefault(norm(heading), set()).add(first)    # the slide that shows (or would show) it
    return order, own


def row_sections(part, order, what=""):
    """The headings a plan row names (see the module's docstring): its Part, and § in What."""
    names = [norm(n) for n in NAMED.findall(part)]
    headings = [h for _, h in order]
    missing = [n for n in names if n not in headings]
    if missing:
        raise ValueError(f"the plan names sections the lesson does not have: {missing}")
    found = set(names)
    if part.startswith(OPENING):
        found.add(order[0][1])                                  # the title's own cells
    for a, b in re.findall(r'§ "([^"]+)" to § "([^"]+)"', part):
        i, j = headings.index(norm(a)), headings.index(norm(b))
        found.update(headings[i:j + 1])
    if re.search(r"\b(?:and|with) its (?:\w+ )?corrections?\b", part):
        parent = names[-1] if names else order[0][1]
        k = headings.index(parent)
        level = order[k][0]
        for lvl, h in order[k + 1:]:
            if lvl <= level:
                break
            if h.startswith("Correction"):
                found.add(h)
    also = [norm(n) for n in NAMED.findall(what)]
    missing = [n for n in also if n not in headings]
    if missing:
        raise ValueError(f"the plan names sections the lesson does not have: {missing}")
    return found | set(also)


def spans(numbers):
    """'1–12, 19–25' from a set of slide numbers."""
    out, run = [], []
    for n in sorted(numbers):
        if run and n == run[-1] + 1:
            run.append(n)
        else:
            if run:
                out.append(run)
            run = [n]
    if run:
        out.append(run)
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in out)


def lesson_slides(notebook, page_text, cut=()):
    """{'total', 'show', 'skip', 'pauses', 'kept_minutes', 'rows'} for one lesson."""
    nb = nbformat.read(notebook, as_version=4)
    total = len(slides.deck(nb))
    order, own = _marks(nb)
    rows = plan(page_text)
    keys = [row_key(part) for _, part, _ in rows]
    unknown = [c for c in cut if c not in keys]
    if unknown:
        raise ValueError(f"{notebook.name}: the cut table names no row of the plan: {unknown}")
    show, pauses, kept = {1}, [], 0
    for (minutes, part, what), key in zip(rows, keys):
        if key in cut:
            continue
        kept += minutes
        mine = set().union(*(own[h] for h in row_sections(part, order, what)))
        show |= mine
        if "**Pause:**" in what and mine:
            pauses.append(max(mine))
    return {"total": total, "show": show, "skip": set(range(1, total + 1)) - show,
            "pauses": sorted(set(pauses)), "kept_minutes": kept, "rows": list(zip(rows, keys))}


def slides_column(info):
    """The text of a lesson row's Slides column."""
    text = f"{info['kept_minutes']} min of the plan; {info['total']} slides: show {spans(info['show'])}"
    text += f"; skip {spans(info['skip'])}" if info["skip"] else "; skip none"
    if info["pauses"]:
        text += f"; pause on {spans(info['pauses'])}" if len(info["pauses"]) == 1 else \
            f"; pause on {', '.join(map(str, info['pauses']))}"
    return text


def cuts(text):
    """{lesson number: [row keys]} from the cut table of workshop.md."""
    block = text.split("## What each lecture cuts", 1)[1].split("\n## ", 1)[0]
    found = {}
    for line in block.splitlines():
        m = re.match(r"\| (\d+) \| ([^|]+)\|", line)
        if m:
            names = [norm(n) for n in NAMED.findall(m[2])]
            if m[2].strip().startswith(OPENING):
                names.insert(0, OPENING)
            found[int(m[1])] = names
    return found


def expected(text, root=ROOT):
    """{lesson number: lesson_slides(...)} for every lesson with a teacher's page."""
    cut, found = cuts(text), {}
    for notebook in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        page = root / "teaching" / f"{notebook.stem}.md"
        if page.exists():
            n = int(notebook.name[:2])
            found[n] = lesson_slides(notebook, page.read_text(encoding="utf-8"), cut.get(n, ()))
    return found


LESSON_ROW = re.compile(r"^(\| [^|]+ \| \*\*Lesson (\d+)\*\*[^|]*\| )([^|]*)(\|.*)$")


def rewrite(text, root=ROOT):
    """workshop.md's text with every lesson row's Slides column computed."""
    want = expected(text, root)
    lines = []
    for line in text.split("\n"):
        m = LESSON_ROW.match(line)
        if m and int(m[2]) in want:
            line = f"{m[1]}{slides_column(want[int(m[2])])} {m[4]}"
        lines.append(line)
    return "\n".join(lines)


def _minutes(hhmm):
    hours, minutes = hhmm.split(":")
    return 60 * int(hours) + int(minutes)


def day_tables(text):
    """{'## Day ...' heading: [(start, end, session)]}: the rows of every day's table."""
    days, current = {}, None
    for line in text.split("\n"):
        if line.startswith("## Day"):
            current = days.setdefault(line, [])
        elif line.startswith("## "):
            current = None
        elif current is not None and (m := re.match(r"\| (\d\d:\d\d)–(\d\d:\d\d) \| ([^|]*)\|", line)):
            current.append((m[1], m[2], m[3].strip()))
    return days


def stretches(text):
    """[(day heading, start, end, minutes)]: every run of sessions between breaks and lunch."""
    found = []
    for day, rows in day_tables(text).items():
        start = end = None
        for first, last, session in rows + [(None, None, PAUSES[0])]:
            if session.startswith(PAUSES):
                if start is not None:
                    found.append((day, start, end, _minutes(end) - _minutes(start)))
                start = None
            else:
                start, end = start or first, last
    return found


def stretch_problems(text):
    """A line for every stretch of a day longer than MAX_STRETCH minutes without a break."""
    return [f"{day[3:]}: {start}–{end} is {minutes} minutes without a break or lunch "
            f"(at most {MAX_STRETCH})" for day, start, end, minutes in stretches(text) if minutes > MAX_STRETCH]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    text = WORKSHOP.read_text(encoding="utf-8")
    new = rewrite(text)
    if "--check" in argv:
        long = stretch_problems(text)
        for line in long:
            print(line)
        if new != text:
            old = [l for l in text.split("\n") if LESSON_ROW.match(l)]
            fresh = [l for l in new.split("\n") if LESSON_ROW.match(l)]
            for have, want in zip(old, fresh):
                if have != want:
                    print(f"out of step:\n  {have}\n  {want}")
            print("run: python tools/agenda.py")
            return 1
        if long:
            return 1
        print(f"workshop.md's slide lists are current, and no stretch runs past {MAX_STRETCH} minutes")
        return 0
    if new != text:
        WORKSHOP.write_text(new, encoding="utf-8")
        print(f"rewrote the Slides columns of {WORKSHOP.relative_to(ROOT)}")
    else:
        print("workshop.md's slide lists were current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
