"""Figures for a benchmark without a report module of its own, from its descriptor: each
summary-worthy metric against message size, one line per MPI and parameter combination."""
from __future__ import annotations

from pathlib import Path

from ..results import ResultSet
from . import Family
from .common import Figure, draw, lines_of, ok_results, reading_extreme, size_of


def family(bench: str, rs: ResultSet) -> Family:
    res = ok_results(rs, bench)
    desc = next((r.desc for r in res if r.desc), None)
    title = f"{desc.summary} ({bench})" if desc and desc.summary else bench
    return Family(bench, title, lambda rs, outdir: figures(bench, res, desc, outdir), None)


def _metrics(res, desc) -> list:
    """(name, unit, description, higher_is_better) of the metrics worth a figure."""
    if desc:
        return [(m.name, m.unit, m.description, m.higher_is_better) for m in desc.metrics if m.in_table]
    seen = {}
    for r in res:
        for name, m in (r.record.get("metrics") or {}).items():
            seen.setdefault(name, (name, m.get("unit", ""), "", bool(m.get("higher_is_better"))))
    return list(seen.values())


def figures(bench: str, res: list, desc, outdir: Path) -> list[Figure]:
    res = [r for r in res if size_of(r) is not None]
    figs = []
    params = sorted({k for r in res for k in r.params if k != "size_bytes"})
    for name, unit, description, higher in _metrics(res, desc):
        lines = lines_of(res, name, lambda r: (r.mpi,) + tuple(str(r.params.get(k)) for k in params), size_of,
                         lambda r: " ".join(f"{k}={r.params.get(k)}" for k in params) or bench,
                         shown=tuple(params))
        if not lines:
            continue
        fig_name = f"{bench}_{name}"
        png, svg, over = draw(fig_name, [(name, lines)], "message size (bytes)", f"{name} ({unit})", outdir)
        best = "Highest" if higher else "Lowest"
        reading = f"{best} {name}: " + reading_extreme(lines, "reaches" if higher else "gets down to",
                                                        f" {unit}", best_high=higher)
        figs.append(Figure(fig_name, f"{bench}: {name}", description or f"{name} by message size", reading,
                           png, svg, over))
    return figs
