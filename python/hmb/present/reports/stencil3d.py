"""Readings of the 3-D stencil overlap study (stencil3d, seed 001 Figs 1, 7, 8; figures.toml:
stencil3d_times, stencil3d_overlap, stencil3d_ranks)."""
from __future__ import annotations

from ..format import fmt_num, fmt_size
from .common import per_mpi, reading, readings, register

register("stencil3d", "3-D stencil overlap (stencil3d)")


def _at(panel, mpi: str, x: float):
    return next((p.median for p, ln in readings(panel.lines) if ln.mpi == mpi and p.x == x), None)


@reading("stencil3d_times")
def times(plan, unsupported=None) -> str:
    by = {p.value: p for p in plan.panels}
    comm, overall, comp = by.get("t_comm_us"), by.get("t_overall_us"), by.get("t_comp_us")
    out = []
    if comm and overall and comp:
        for mpi, mlines in per_mpi(comm.lines).items():
            xs = [p.x for p, _ in readings(mlines)]
            if not xs:
                continue
            x = max(xs)
            c, o, t = _at(comm, mpi, x), _at(overall, mpi, x), _at(comp, mpi, x)
            if None not in (c, o, t):
                out.append(f"{mpi} at {fmt_size(x)}: T_comm {fmt_num(c)} µs, T_comp {fmt_num(t)} µs, "
                           f"T_overall {fmt_num(o)} µs ({fmt_num(o - t)} µs beyond the compute)")
    return "; ".join(out) + "." if out else "No size has all three times as a reading."


@reading("stencil3d_overlap")
def overlap(plan, unsupported=None) -> str:
    out = [f"{ln.mpi} ({ln.name}): " + ", ".join(f"{fmt_size(p.x)} {p.median:.0f}%" for p in ln.reading_points)
           for ln in plan.lines() if ln.reading_points]
    return "Overlap by size — " + ("; ".join(out) or "no reading") + "."


@reading("stencil3d_ranks")
def by_ranks(plan, unsupported=None) -> str:
    panel = next((p for p in plan.panels if p.value == "overlap_pct"), None)
    out = [f"{mpi}: " + ", ".join(f"{p.x:g} ranks {p.median:.0f}%" for p, _ in sorted(readings(mlines), key=lambda t: t[0].x))
           for mpi, mlines in per_mpi(panel.lines if panel else []).items()]
    return "Overlap by process count — " + ("; ".join(out) or "none") + "."
