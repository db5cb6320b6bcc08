"""Readings of the partitioned point-to-point benchmark (part; figures.toml: part_*): the
overhead at one partition and its worst, the early-bird transfer, the launch spread."""
from __future__ import annotations

import math
import statistics

from ..format import fmt_num, fmt_size
from .common import each_mpi, per_mpi, per_panel, reading, reading_extreme, readings, register

register("part", "Partitioned point-to-point (part)")

EARLY_BIRD_SEEN = 0.05   # early-bird fraction above which transfer counts as "seen"


def _partitions(ln) -> int:
    """The partition count a line is drawn for (its hue)."""
    try:
        return int(float(ln.hue))
    except (TypeError, ValueError):
        return 0


def _reading_early_bird(lines: list) -> str:
    parts_seen, parts_none = [], []
    for mpi, mlines in per_mpi(lines).items():
        multi = [(p, ln) for p, ln in readings(mlines) if _partitions(ln) > 1]
        if not multi:
            parts_none.append(f"{mpi} has no point with more than one partition that is a reading")
            continue
        best = max(p.median for p, _ in multi)
        seen_sizes = sorted({p.x for p, _ in multi if p.median > EARLY_BIRD_SEEN})
        if not seen_sizes:
            parts_none.append(f"{mpi} shows none (max {best:.2f})")
            continue
        all_sizes = sorted({p.x for p, _ in multi})
        tail = all_sizes[all_sizes.index(seen_sizes[0]):]
        span = f"from {fmt_size(seen_sizes[0])} on" if tail == seen_sizes else \
            "at " + ", ".join(fmt_size(s) for s in seen_sizes)
        largest = max(all_sizes)
        top, ln = max(((p, ln) for p, ln in multi if p.x == largest), key=lambda t: t[0].median)
        parts_seen.append(f"on {mpi} {span} (median {top.median:.2f} at {fmt_size(largest)}, {ln.name})")
    text = []
    if parts_seen:
        text.append("Early-bird transfer seen " + "; ".join(parts_seen))
    if parts_none:
        text.append(("; " if text else "No early-bird transfer: ") + "; ".join(parts_none))
    return "".join(text) + "."


def _reading_overhead(lines: list) -> str:
    def read(mpi, pts):
        one = [p.median for p, ln in pts if _partitions(ln) == 1]
        worst, ln = max(pts, key=lambda t: t[0].median)
        return (f"{mpi}: " + (f"P=1 median {fmt_num(float(statistics.median(one)))} (1 expected), " if one else "")
                + f"highest {fmt_num(worst.median)} at {fmt_size(worst.x)} with {ln.name}")
    return "; ".join(each_mpi(lines, read)) + "."


def launch_spread(lines: list) -> str:
    """Per MPI: how many launches each point ran in and the widest spread of the launches'
    medians. A point measured in one launch is not a claim about the library: MPICH's launches
    of one point have read 0.74 and 1.86 (docs/findings.md), so one launch can show either mode."""
    out = []
    for mpi, mlines in per_mpi(lines).items():
        points = [(p, ln) for ln in mlines for p in ln.points]
        multi = [(p, ln) for p, ln in points if len(p.launch_medians) > 1]
        if not multi:
            out.append(f"{mpi}: 1 launch: not a claim")
            continue

        def spread(pl):
            lo, hi = min(pl[0].launch_medians), max(pl[0].launch_medians)
            return hi / lo if lo > 0 else math.inf

        p, ln = max(multi, key=spread)
        where = ", ".join([f"P={_partitions(ln)}"] + [f"{c}={v}" for c, v in ln.split])
        txt = (f"{mpi}: {len(multi)} of {len(points)} points in 2+ launches, widest at {where} {fmt_size(p.x)}: "
               + " / ".join(fmt_num(v) for v in p.launch_medians) + f" ({len(p.launch_medians)} launches)")
        if len(multi) < len(points):
            txt += f"; {len(points) - len(multi)} in 1 launch: not a claim"
        out.append(txt)
    return "Launch spread of the medians: " + "; ".join(out) + "."


def _overhead(plan) -> str:
    """The overhead is defined with noise off: that panel's reading when it was measured."""
    panels = [p for p in plan.panels if p.value == "none"] or plan.panels
    lines = [ln for p in panels for ln in p.lines]
    body = _reading_overhead(lines) if len(panels) == 1 else per_panel(plan, _reading_overhead)
    return body + " " + launch_spread(lines)


@reading("part_overhead")
def overhead(plan, unsupported=None) -> str:
    return _overhead(plan)


@reading("part_overhead_persistent")
def overhead_persistent(plan, unsupported=None) -> str:
    return _overhead(plan)


@reading("part_perceived_bw")
def perceived_bw(plan, unsupported=None) -> str:
    return per_panel(plan, lambda ls: "Highest perceived bandwidth: " + reading_extreme(ls, "reaches", " MB/s"))


@reading("part_availability")
def availability(plan, unsupported=None) -> str:
    return per_panel(plan, lambda ls: "Best availability: " + reading_extreme(ls, "reaches"))


@reading("part_early_bird")
def early_bird(plan, unsupported=None) -> str:
    return per_panel(plan, _reading_early_bird)
