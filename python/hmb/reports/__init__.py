"""Per-benchmark report modules, registered by benchmark name.

A module registers a figure maker (and optionally a table maker) with @register("bench",
"Section title"). A benchmark without a module of its own still gets generic figures: each
summary-worthy metric (in_table in its descriptor; without a descriptor, every metric) against
message size, one line per MPI and parameter combination.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable


@dataclasses.dataclass
class Family:
    bench: str
    title: str
    figures: Callable        # (ResultSet, outdir) -> [Figure]
    tables: Callable | None  # (ResultSet) -> [(title, header, rows, note)]


FAMILIES: dict = {}


def register(bench: str, title: str, tables: Callable | None = None):
    def wrap(figures):
        FAMILIES[bench] = Family(bench, title, figures, tables)
        return figures
    return wrap


def sections(rs, outdir: Path) -> list:
    """(title, figures, tables) per benchmark in the results: registered families first, in
    registration order, then the others (generic) by name."""
    from . import generic
    benches = {r.bench for r in rs.results}
    out = []
    for bench in list(FAMILIES) + sorted(benches - set(FAMILIES)):
        if bench not in benches:
            continue
        fam = FAMILIES.get(bench) or generic.family(bench, rs)
        figs = fam.figures(rs, outdir)
        tables = fam.tables(rs) if fam.tables else []
        if figs or tables:
            out.append((fam.title, figs, tables))
    return out


from . import async_, conform, match, mt, p2p, part, patterns, proto, stencil3d  # noqa: E402,F401  (registration)
