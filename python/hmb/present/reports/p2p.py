"""Readings of the point-to-point baselines (p2p): latency and bandwidth by message size
(figures.toml: p2p_latency, p2p_bandwidth)."""
from __future__ import annotations

from ..format import fmt_num, fmt_size
from .common import each_mpi, reading, reading_extreme, register

register("p2p", "Point-to-point baselines (p2p)")


@reading("p2p_latency")
def latency(plan, unsupported=None) -> str:
    def read(mpi, pts):
        first, _ = min(pts, key=lambda t: t[0].x)
        last, _ = max(pts, key=lambda t: t[0].x)
        return f"{mpi} {fmt_num(first.median)} µs at {fmt_size(first.x)}, {fmt_num(last.median)} µs at {fmt_size(last.x)}"
    return "Latency: " + "; ".join(each_mpi(plan.lines(), read)) + "."


@reading("p2p_bandwidth")
def bandwidth(plan, unsupported=None) -> str:
    return "Peak bandwidth: " + reading_extreme(plan.lines(), "reaches", " MB/s")
