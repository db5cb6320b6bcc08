"""The report's sections, one per benchmark: its declared figures, its readings and its tables.

A benchmark's figures are declared in figures.toml (the studies' format) and drawn by the one
figure engine (hmb.figures) from the tidy table. A module here adds what a declaration
cannot carry: the reading under each figure (@reading("FIGURE-ID"): the plan drawn → one
paragraph) and the benchmark's tables (@register("bench", "Section title", tables=...)). A
benchmark without declared figures gets one per summary-worthy metric of its descriptor
(generic.py). docs/contributing.md walks adding a figure.
"""
from __future__ import annotations

from pathlib import Path

from .common import FAMILIES, figure_instances, render
from .generic import generic_figures


def sections(rs, outdir: Path) -> list:
    """(title, figures, tables) per benchmark in the results: registered families first, in
    registration order, then the others by name."""
    from ...data import tidy
    df, unsupported = tidy.frame(rs), tidy.unsupported(rs)
    benches = {r.bench for r in rs.results}
    out = []
    for bench in list(FAMILIES) + sorted(benches - set(FAMILIES)):
        if bench not in benches:
            continue
        fam = FAMILIES.get(bench)
        desc = rs.descriptors.get(bench)
        title = fam.title if fam else f"{desc.summary} ({bench})" if desc and desc.summary else bench
        figs = figures(rs, outdir, bench, df, unsupported)
        tables = fam.tables(rs) if fam and fam.tables else []
        if figs or tables:
            out.append((title, figs, tables))
    return out


def figures(rs, outdir: Path, bench: str, df=None, unsupported=None) -> list:
    """A benchmark's figures drawn into outdir/figures with their readings: those declared for it
    in figures.toml, else (a benchmark with no module here) one per summary-worthy metric."""
    from ...data import tidy
    from ...study import report_figures
    df = tidy.frame(rs) if df is None else df
    unsupported = tidy.unsupported(rs) if unsupported is None else unsupported
    decls = [d for d in report_figures().values() if d["bench"] == bench] or \
        ([] if bench in FAMILIES else generic_figures(bench, rs.descriptors.get(bench), df))
    return [f for d in decls for inst in figure_instances(d, df)
            if (f := render(inst, d["id"], df, unsupported, rs.descriptors, outdir)) is not None]


from . import async_, conform, match, mt, p2p, part, patterns, proto, stencil3d  # noqa: E402,F401  (registration)
