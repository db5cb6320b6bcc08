"""How hmb writes numbers and text for people: a number or a size in a table or a reading
(fmt_num, fmt_size), text from a file as markdown that reads as the text (md_text, md_cell,
md_code), a label a figure can draw (clip_text), and the line naming the library versions and
machine of what is shown (context_text). The report, compare, the studies and the figures all
write with these, so one value reads the same everywhere."""
from __future__ import annotations

import math
import re


def fmt_size(n) -> str:
    n = int(n)
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def fmt_num(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    a = abs(v)
    if a != 0 and (a >= 1e5 or a < 1e-3):
        return f"{v:.3g}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


_MD_SPECIAL = re.compile(r"([\\\[\]<>|])")
# What starts a block at a line's start: a quote, a heading or list item (before a space), a
# fence, a rule or setext underline (a line of = - _ *); a number with . or ) before a space.
_MD_LINE_START = re.compile(r"^(>|[#+*-](?=\s|$)|```|~~~|[=_*-]+\s*$)")
_MD_ORDERED = re.compile(r"^(\d{1,9})([.)])(?=\s|$)")


def md_text(value) -> str:
    """Text from a file (a study, a results file) as one line of markdown that reads as the text:
    line breaks and control characters become spaces, and what would make a link, an image,
    HTML, a table cell or a heading ([ ] < > | \\, a leading #) is escaped ("Fig. 1](x)" stays
    text, never a link)."""
    text = "".join(" " if not c.isprintable() else c for c in str(value))
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return _MD_ORDERED.sub(r"\1\\\2", _MD_LINE_START.sub(r"\\\1", text))


_MD_CELL_SPECIAL = re.compile(r"([\\|<>])")
_MD_LINKISH = re.compile(r"\]\s*[(\[:]|!\[")


def md_cell(value) -> str:
    """Text for one markdown table cell: as md_text, but a cell is inline, so nothing at its
    start can open a block ("-", "#", "1." stay as they are), and brackets are escaped only where
    they could make a link or an image ("[1]" stays, "[x](http://..)" does not link)."""
    text = "".join(" " if not c.isprintable() else c for c in str(value))
    text = _MD_CELL_SPECIAL.sub(r"\\\1", text)
    return re.sub(r"([\[\]])", r"\\\1", text) if _MD_LINKISH.search(text) else text


def md_code(text: str) -> str:
    """text as a fenced markdown block, its fence longer than any run of backticks inside."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


LABEL_CHARS = 80   # the most characters of one label a figure draws (a 100k-character one took 4 min)


def clip_text(text, limit: int = LABEL_CHARS) -> str:
    """Text for a figure's label, legend or title: at most `limit` characters (cut with …)."""
    text = str(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def context_text(libraries, hosts, cpus) -> str:
    """One line naming the library versions and the machine: "MPICH Version: 5.0.2 · vm (2 CPUs)"."""
    libs = sorted({str(v) for v in libraries if v})
    machine = ", ".join(sorted({str(h) for h in hosts if h})) or "unknown host"
    cpus = sorted({int(c) for c in cpus if c is not None})
    if cpus:
        machine += f" ({'/'.join(map(str, cpus))} CPUs)"
    return f"{'; '.join(libs) or 'unknown library'} · {machine}"
