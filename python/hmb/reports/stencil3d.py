"""Report of the 3-D stencil overlap study (stencil3d, seed 001 Figs 1, 7, 8): communication
alone and overlapped with compute, and the overlap share, by message size; by process count
where the results hold several (Fig 8)."""
from __future__ import annotations

from pathlib import Path

from ..results import ResultSet, fmt_num, fmt_size
from . import register
from .common import OVERSUBSCRIBED_NOTE, Figure, draw, int_param, lines_of, ok_results, per_mpi, size_of

BENCH = "stencil3d"
# Fig 8 draws one message size against the process count: the seed's 128 KB where measured.
FIG8_SIZE = 128 * 1024


def _ranks(r):
    return int_param(r, "ranks", r.run.get("ranks"))


def _label(r) -> str:
    return f"{_ranks(r)} ranks"


def _size_lines(res, metric):
    return lines_of(res, metric, lambda r: (r.mpi, _ranks(r)), size_of, _label, shown=("ranks",))


def _at(lines, x):
    return {ln.mpi: c.median for ln in lines for xx, c in ln.points if xx == x}


@register(BENCH, "3-D stencil overlap (stencil3d)")
def stencil_figures(rs: ResultSet, outdir: Path) -> list[Figure]:
    res = ok_results(rs, BENCH)
    figs = [f for f in (_times(res, outdir), _overlap(res, outdir), _by_ranks(res, outdir)) if f]
    return figs


def _times(res, outdir) -> Figure | None:
    panels = [(title, ls) for title, metric in (("communication alone: T_comm", "t_comm_us"),
                                                 ("overlapped with compute: T_overall", "t_overall_us"),
                                                 ("compute alone: T_comp", "t_comp_us"))
              if (ls := _size_lines(res, metric))]
    if not panels:
        return None
    png, svg, over = draw("stencil3d_times", panels, "message size per neighbour (bytes)", "time (µs)", outdir,
                          ylog=True)
    comm, overall = dict(panels).get("communication alone: T_comm", []), \
        dict(panels).get("overlapped with compute: T_overall", [])
    comp = dict(panels).get("compute alone: T_comp", [])
    out = []
    for mpi, mlines in sorted(per_mpi(comm).items()):
        x = max(xx for ln in mlines for xx, _ in ln.points)
        c, o, p = _at(mlines, x).get(mpi), _at(overall, x).get(mpi), _at(comp, x).get(mpi)
        if None not in (c, o, p):
            out.append(f"{mpi} at {fmt_size(x)}: T_comm {fmt_num(c)} µs, T_comp {fmt_num(p)} µs, "
                       f"T_overall {fmt_num(o)} µs ({fmt_num(o - p)} µs beyond the compute)")
    reading = ("; ".join(out) + "." if out else "No size has all three times.") + (OVERSUBSCRIBED_NOTE if over else "")
    return Figure("stencil3d_times", "Stencil communication alone and overlapped",
                  "What does the 6-neighbour exchange cost alone, and what does an iteration cost when it is "
                  "posted before the compute and completed after it? (seed 001 Figs 1a, 7a, 7c)",
                  reading, png, svg, over)


def _overlap(res, outdir) -> Figure | None:
    lines = _size_lines(res, "overlap_pct")
    if not lines:
        return None
    png, svg, over = draw("stencil3d_overlap", [("overlap", lines)], "message size per neighbour (bytes)",
                          "overlap (%)", outdir, ylim=(-3, 103))
    out = []
    for mpi, mlines in sorted(per_mpi(lines).items()):
        for ln in mlines:
            out.append(f"{mpi} ({ln.detail}): " + ", ".join(f"{fmt_size(x)} {c.median:.0f}%" for x, c in ln.points))
    reading = "Overlap by size — " + "; ".join(out) + "." + (OVERSUBSCRIBED_NOTE if over else "")
    return Figure("stencil3d_overlap", "Stencil overlap of communication and computation",
                  "How much of the exchange does the library hide behind the compute, by message size? "
                  "Eager messages can move during the compute; a rendezvous waits for the Waitall. "
                  "(overlap = (T_comm + T_comp − T_overall) / T_comm; seed 001 Figs 1b, 7b)",
                  reading, png, svg, over)


def _by_ranks(res, outdir) -> Figure | None:
    if len({_ranks(r) for r in res}) < 2:
        return None
    sizes = {size_of(r) for r in res}
    size = FIG8_SIZE if FIG8_SIZE in sizes else max(s for s in sizes if s is not None)
    sub = [r for r in res if size_of(r) == size]
    panels = [(title, ls) for title, metric in (("T_comm (µs)", "t_comm_us"), ("overlap (%)", "overlap_pct"),
                                                 ("T_overall (µs)", "t_overall_us"))
              if (ls := lines_of(sub, metric, lambda r: (r.mpi,), _ranks, lambda r: fmt_size(size),
                                 x_names=("ranks", "size_bytes")))]
    if not panels:
        return None
    png, svg, over = draw("stencil3d_ranks", panels, "processes", "", outdir, xsize=False, sharey=False)
    out = []
    for mpi, mlines in sorted(per_mpi(dict(panels).get("overlap (%)", [])).items()):
        out.append(f"{mpi}: " + ", ".join(f"{x} ranks {c.median:.0f}%" for ln in mlines for x, c in ln.points))
    reading = f"Overlap at {fmt_size(size)} by process count — " + ("; ".join(out) or "none") + "." + \
        (OVERSUBSCRIBED_NOTE if over else "")
    return Figure("stencil3d_ranks", f"Stencil at {fmt_size(size)} by process count",
                  "How do communication time, overlap and overall time change with the number of processes? "
                  "(seed 001 Fig 8)", reading, png, svg, over)
