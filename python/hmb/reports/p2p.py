"""Readings of the point-to-point baselines (p2p): latency and bandwidth by message size
(figures.toml: p2p_latency, p2p_bandwidth)."""
from __future__ import annotations

from ..results import fmt_num, fmt_size
from .common import none_read, per_mpi, reading, reading_extreme, readings, register

register("p2p", "Point-to-point baselines (p2p)")


@reading("p2p_latency")
def latency(plan, unsupported=None) -> str:
    out = []
    for mpi, mlines in per_mpi(plan.lines()).items():
        pts = readings(mlines)
        if not pts:
            out.append(none_read(mpi))
            continue
        first, _ = min(pts, key=lambda t: t[0].x)
        last, _ = max(pts, key=lambda t: t[0].x)
        out.append(f"{mpi} {fmt_num(first.median)} µs at {fmt_size(first.x)}, "
                   f"{fmt_num(last.median)} µs at {fmt_size(last.x)}")
    return "Latency: " + "; ".join(out) + "."


@reading("p2p_bandwidth")
def bandwidth(plan, unsupported=None) -> str:
    return "Peak bandwidth: " + reading_extreme(plan.lines(), "reaches", " MB/s")
