"""Report of the partitioned point-to-point benchmark (part). A metric absent from the
results (older or newer builds) is skipped."""
from __future__ import annotations

import math
import statistics
from pathlib import Path

from ..results import ResultSet, fmt_num, fmt_size, identity
from . import register
from .common import Figure, Line, draw, int_param, lines_of, ok_results, per_mpi, per_noise, reading_extreme, size_of

EARLY_BIRD_SEEN = 0.05   # early-bird fraction above which transfer counts as "seen"


def _reading_early_bird(lines: list[Line]) -> str:
    parts_seen, parts_none = [], []
    for mpi, mlines in sorted(per_mpi(lines).items()):
        multi = [ln for ln in mlines if ln.color_key and _partitions_of(ln) > 1]
        best = max(((c.median, x, ln) for ln in multi for x, c in ln.points), default=None,
                   key=lambda t: t[0])
        if best is None:
            parts_none.append(f"{mpi} has no point with more than one partition")
            continue
        seen_sizes = sorted({x for ln in multi for x, c in ln.points if c.median > EARLY_BIRD_SEEN})
        if not seen_sizes:
            parts_none.append(f"{mpi} shows none (max {best[0]:.2f})")
            continue
        all_sizes = sorted({x for ln in multi for x, _ in ln.points})
        tail = all_sizes[all_sizes.index(seen_sizes[0]):]
        span = f"from {fmt_size(seen_sizes[0])} on" if tail == seen_sizes else \
            "at " + ", ".join(fmt_size(s) for s in seen_sizes)
        largest = max(all_sizes)
        at_largest = max(((c.median, ln) for ln in multi for x, c in ln.points if x == largest),
                         key=lambda t: t[0])
        parts_seen.append(f"on {mpi} {span} (median {at_largest[0]:.2f} at {fmt_size(largest)}, "
                          f"{at_largest[1].detail})")
    text = []
    if parts_seen:
        text.append("Early-bird transfer seen " + "; ".join(parts_seen))
    if parts_none:
        text.append(("; " if text else "No early-bird transfer: ") + "; ".join(parts_none))
    return "".join(text) + "."


def _partitions_of(ln: Line) -> int:
    try:
        return int(ln.color_key[0])
    except (TypeError, ValueError, IndexError):
        return 0


def _reading_overhead(lines: list[Line]) -> str:
    out = []
    for mpi, mlines in sorted(per_mpi(lines).items()):
        one = [c.median for ln in mlines if _partitions_of(ln) == 1 for _, c in ln.points]
        worst = max(((c.median, x, ln) for ln in mlines for x, c in ln.points), key=lambda t: t[0])
        txt = f"{mpi}: "
        if one:
            txt += f"P=1 median {fmt_num(float(statistics.median(one)))} (1 expected), "
        txt += f"highest {fmt_num(worst[0])} at {fmt_size(worst[1])} with {worst[2].detail}"
        out.append(txt)
    return "; ".join(out) + "."


def launch_spread(res, metric: str) -> str:
    """Per MPI: how many launches each point ran in and the widest spread of the launches'
    medians. A point measured in one launch is not a claim about the library: MPICH's launches
    of one point have read 0.74 and 1.86 (docs/findings.md), so one launch can show either mode."""
    groups: dict = {}
    for r in res:
        m = r.metric(metric)
        if not m or m.get("median") is None:
            continue
        key = (r.mpi, r.noise, tuple(sorted(identity(r).items())))
        groups.setdefault(key, {})[(r.source, r.record.get("run_id"))] = float(m["median"])
    out = []
    for mpi in sorted({k[0] for k in groups}):
        points = {k: v for k, v in groups.items() if k[0] == mpi}
        multi = {k: v for k, v in points.items() if len(v) > 1}
        if not multi:
            out.append(f"{mpi}: 1 launch: not a claim")
            continue

        def spread(vals):
            lo, hi = min(vals.values()), max(vals.values())
            return hi / lo if lo > 0 else math.inf

        key, vals = max(multi.items(), key=lambda kv: spread(kv[1]))
        ident = dict(key[2])
        where = f"P={ident.get('partitions', '?')}"
        if ident.get("size_bytes", "").isdigit():
            where += " " + fmt_size(int(ident["size_bytes"]))
        txt = (f"{mpi}: {len(multi)} of {len(points)} points in 2+ launches, widest at {where}: "
               + " / ".join(fmt_num(v) for v in vals.values()) + f" ({len(vals)} launches)")
        if len(multi) < len(points):
            txt += f"; {len(points) - len(multi)} in 1 launch: not a claim"
        out.append(txt)
    return "Launch spread of the medians: " + "; ".join(out) + "."


@register("part", "Partitioned point-to-point (part)")
def part_figures(rs: ResultSet, outdir: Path) -> list[Figure]:
    res = ok_results(rs, "part")
    if not res:
        return []
    multi_threads = len({r.params.get("threads") for r in res}) > 1
    noises = sorted({r.noise for r in res}, key=lambda n: (n != "none", n))

    def key(r):
        return (r.mpi, int_param(r, "partitions", 0), int_param(r, "threads", 0) if multi_threads else 0)

    def label(r):
        t = f", T={r.params.get('threads')}" if multi_threads else ""
        p = r.params.get("partitions")
        return f"{p} partition{'' if str(p) == '1' else 's'}{t}"

    specs = [
        ("part_overhead", "overhead", "Partitioned overhead",
         "Does splitting a message into partitions cost time? (t_part / t_pt2pt; 1 = as fast as one send)",
         "overhead (t_part / t_pt2pt)", dict(yref=1.0, ylog=True), _reading_overhead),
        ("part_overhead_persistent", "overhead_persistent", "Partitioned overhead against persistent sends",
         "Does splitting a message into partitions cost time against a persistent single send?",
         "overhead against persistent send", dict(yref=1.0, ylog=True), _reading_overhead),
        ("part_perceived_bw", "perceived_bw_MBps", "Perceived bandwidth",
         "What bandwidth does the receiver see from the last Pready to the last arrival?",
         "perceived bandwidth (MB/s)", dict(ylog=True),
         lambda ls: "Highest perceived bandwidth: " + reading_extreme(ls, "reaches", " MB/s")),
        ("part_availability", "availability", "Application availability",
         "How much of the send is hidden behind the threads' computation? (1 − t_after_join / t_pt2pt)",
         "availability", dict(yref=0.0),
         lambda ls: "Best availability: " + reading_extreme(ls, "reaches")),
        ("part_early_bird", "early_bird", "Early-bird transfer",
         "Does the library deliver partitions before the last thread is ready (early-bird transfer)? "
         "(bytes first seen by MPI_Parrived at or before the join, as a share of the message)",
         "early-bird fraction (share of message)", dict(ylim=(-0.03, 1.03)), _reading_early_bird),
    ]
    figs = []
    for name, metric, title, question, ylabel, kw, reader in specs:
        panels, noise_of = [], {}
        for noise in noises:
            sub = [r for r in res if r.noise == noise]
            lines = lines_of(sub, metric, key, size_of, label, shown=("partitions", "threads"))
            if lines:
                panels.append((f"noise {noise}", lines))
                noise_of[id(lines)] = noise
        if not panels:
            continue
        png, svg, over = draw(name, panels, "message size (bytes)", ylabel, outdir, **kw)
        read = [(noise_of[id(lines)], lines) for _, lines in panels]
        if metric.startswith("overhead") and any(noise == "none" for noise, _ in read):
            read = [(noise, lines) for noise, lines in read if noise == "none"]  # defined with noise off
        reading = per_noise(read, reader)
        if metric.startswith("overhead"):
            shown_noise = {noise for noise, _ in read}
            reading += " " + launch_spread([r for r in res if r.noise in shown_noise], metric)
        figs.append(Figure(name, title, question, reading, png, svg, over))
    return figs

