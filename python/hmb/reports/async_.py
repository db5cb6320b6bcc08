"""Report of the asynchronous progress benchmark (async): overlap efficiency per progress mode.
A metric absent from the results is skipped."""
from __future__ import annotations

from pathlib import Path

from ..results import ResultSet
from . import register
from .common import Figure, draw, lines_of, ok_results, reading_modes, size_of

# (figure, metric, title, question, y label)
SPECS = (
    ("async_efficiency", "efficiency_pct", "Overlap efficiency by progress mode",
     "How much of the communication does each progress mode hide behind computation? "
     "(E = 1 − T_over / T_sync per rank, the worst rank's; 100% = fully hidden, negative = worse than blocking)", "efficiency E (%)"),
    ("async_e_loaded", "efficiency_loaded_pct", "Overlap efficiency under load by progress mode",
     "How much of the communication does each progress mode hide when the compute is charged only "
     "what it takes with every rank computing at once (E_loaded, the more lenient measure: the load's "
     "slow-down is forgiven)?", "efficiency E_loaded (%)"),
)


@register("async", "Asynchronous progress and overlap (async)")
def async_figures(rs: ResultSet, outdir: Path) -> list[Figure]:
    res = ok_results(rs, "async")
    figs = []
    for name, metric, title, question, ylabel in SPECS:
        fig = _figure(rs, res, name, metric, title, question, ylabel, outdir)
        if fig:
            figs.append(fig)
    return figs


def _figure(rs, res, name, metric, title, question, ylabel, outdir) -> Figure | None:
    res = [r for r in res if r.metric(metric)]
    panels = []
    for op in sorted({str(r.params.get("op", "?")) for r in res}):
        lines = lines_of([r for r in res if str(r.params.get("op", "?")) == op], metric,
                         lambda r: (r.mpi, str(r.params.get("progress", "?"))), size_of,
                         lambda r: str(r.params.get("progress", "?")), shown=("progress", "op"))
        if lines:
            panels.append((f"op {op}", lines))
    if not panels:
        return None
    png, svg, over = draw(name, panels, "message size (bytes)", ylabel, outdir, yref=0.0, yfloor=-200.0)
    reading = " ".join(reading_modes(ls, "%", f"{metric} by progress mode, {t}:") for t, ls in panels)
    unsupported = sorted({(r.mpi, str(r.params.get("progress", "?"))) for r in rs.results
                          if r.bench == "async" and r.status == "unsupported"})
    if unsupported:
        reading += " Unsupported: " + ", ".join(f"{p} on {m}" for m, p in unsupported) + "."
    return Figure(name, title, question, reading, png, svg, over)
