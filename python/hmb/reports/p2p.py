"""Report of the point-to-point baselines (p2p): latency and bandwidth by message size."""
from __future__ import annotations

from pathlib import Path

from ..results import ResultSet, fmt_num, fmt_size
from . import register
from .common import Figure, draw, lines_of, ok_results, per_mpi, reading_extreme, size_of

# The metric each figure draws (p2p's descriptor names them).
METRIC = {"latency": "latency_us", "bw": "bandwidth_MBps"}


@register("p2p", "Point-to-point baselines (p2p)")
def p2p_figures(rs: ResultSet, outdir: Path) -> list[Figure]:
    res = ok_results(rs, "p2p")
    figs = []
    for kind, modes, name, title, question, ylabel in (
            ("latency", ("latency",), "p2p_latency", "Ping-pong latency",
             "What is the one-way latency by message size (the baseline)?", "latency (µs)"),
            ("bw", ("bw", "bibw"), "p2p_bandwidth", "Bandwidth",
             "What bandwidth does a window of messages reach (uni- and bi-directional)?",
             "bandwidth (MB/s)")):
        sub = [r for r in res if str(r.params.get("mode", "latency" if kind == "latency" else "bw")) in modes]
        if not sub:
            continue
        metric = METRIC[kind]
        lines = lines_of(sub, metric, lambda r: (r.mpi, str(r.params.get("mode", kind))), size_of,
                       lambda r: str(r.params.get('mode', kind)), shown=("mode",))
        if not lines:
            continue
        png, svg, over = draw(name, [(f"{metric}", lines)], "message size (bytes)", ylabel, outdir, ylog=True)
        if kind == "latency":
            out = []
            for mpi, mlines in sorted(per_mpi(lines).items()):
                x0, c0 = min((p for ln in mlines for p in ln.points), key=lambda p: p[0])
                x1, c1 = max((p for ln in mlines for p in ln.points), key=lambda p: p[0])
                out.append(f"{mpi} {fmt_num(c0.median)} µs at {fmt_size(x0)}, {fmt_num(c1.median)} µs at {fmt_size(x1)}")
            reading = "Latency: " + "; ".join(out) + "."
        else:
            reading = "Peak bandwidth: " + reading_extreme(lines, "reaches", " MB/s")
        figs.append(Figure(name, title, question, reading, png, svg, over))
    return figs

