"""Report of the matching benchmark (match, SPEC §3.6, seed 002): the accuracy table — the
2-rank low-cost emulation next to the real 9/27-rank halo at its centre rank, per MPI, pattern,
thread count and message size, with the ratio low-cost/real and its 95% CI computed as
`hmb compare` computes a change (compare.compare_point: bootstrap on raw samples, else from the
summaries' CIs), from the tidy table."""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from ...data import tidy
from ..compare import Launch, compare_point
from ..format import fmt_num, fmt_size
from .common import int_param, ok_results, register, size_of

# (metric, label) in table order: the seed's quantities (queue depth, items searched, time).
QUANTITIES = (
    ("posted_q", "posted queue (sum over peers)"),
    ("posted_q_peer_max", "posted queue (longest per peer)"),
    ("unexpected_q", "unexpected queue (sum over peers)"),
    ("unexpected_q_peer_max", "unexpected queue (longest per peer)"),
    ("searched_per_msg", "items searched per message"),
    ("match_time_us_per_msg", "matching time per message (us)"),
    ("post_us_per_msg", "posting time per operation (us)"),
    ("wait_us_per_msg", "completion time per operation (us)"),
    ("t_iter_us", "halo iteration (us)"),
)

HEADER = ["MPI", "pattern", "T", "size", "quantity", "real mean", "real max", "low-cost mean", "low-cost max",
          "low-cost/real (medians)", "95% CI"]


def _variant(r) -> str:
    return str(r.params.get("variant", "?"))


def _stat(results, metric: str, key: str):
    """Median over repeats of one summary field (mean, max: the record's, no column of the tidy
    table); None when no repeat measured the metric."""
    vals = []
    for r, _ in results:
        m = r.metric(metric) or {}
        if m.get("count") and m.get(key) is not None and not math.isnan(float(m[key])):
            vals.append(float(m[key]))
    return float(np.median(vals)) if vals else None


def _cell(v) -> str:
    return "unavailable" if v is None else fmt_num(v)


def _launches(t: tidy.Table, results: list, metric: str) -> list:
    """Each launch's compare.Launch of metric, from its row of the tidy table (None: it has none)."""
    out = []
    for r, ix in results:
        rows = t.df.loc[ix]
        rows = rows[rows["metric"] == metric]
        out.append(None if rows.empty else Launch(float(rows["median"].iloc[0]), float(rows["ci_lo"].iloc[0]),
                                                  float(rows["ci_hi"].iloc[0]), tidy.samples(r.record, metric)))
    return out


def accuracy_rows(t: tidy.Table, seed: int = 0) -> list[list[str]]:
    """One row per (MPI, pattern, T, size, quantity) that has both a real and a low-cost run.
    A quantity neither side measured (no MPI_T variable) is left out; one side only: the other
    side says "unavailable"."""
    groups = defaultdict(lambda: defaultdict(list))
    for r, ix in ok_results(t, "match"):
        key = (r.mpi, str(r.params.get("pattern", "?")), int_param(r, "threads", 1), size_of(r) or 0)
        groups[key][_variant(r)].append((r, ix))
    rng = np.random.default_rng(seed)
    rows = []
    for key in sorted(groups):
        real, low = groups[key].get("real"), groups[key].get("lowcost")
        if not real or not low:
            continue
        mpi, pattern, threads, size = key
        for metric, label in QUANTITIES:
            cells = [_stat(side, metric, k) for side in (real, low) for k in ("mean", "max")]
            if all(c is None for c in cells):
                continue
            ratio, ci = "–", "–"
            cmp = compare_point(_launches(t, real, metric), _launches(t, low, metric), False, rng) \
                if None not in cells else None
            if cmp is not None:
                _, _, scale, change, lo, hi = cmp[:6]
                sign = "" if scale == "ratio" else "Δ "   # a median of 0: compare reports a difference
                ratio = sign + fmt_num(change)
                ci = "–" if math.isnan(lo) else f"[{fmt_num(lo)}, {fmt_num(hi)}]"
            rows.append([mpi, pattern, str(threads), fmt_size(size), label, *map(_cell, cells), ratio, ci])
    return rows


def match_tables(t: tidy.Table) -> list[tuple]:
    rows = accuracy_rows(t)
    if not rows:
        return []
    match = t.df[t.df["bench"] == "match"]
    over = bool(tidy.no_reading(match).any())
    note = ("Queue lengths are read at the centre rank right after its main thread posted its receives "
            "(docs/metrics.md, match). The low-cost centre receives everything from one rank: a library with "
            "per-peer queues (Open MPI ob1) sees one long queue where the real centre sees one short queue per "
            "neighbour, so compare the sums over peers with each other; the longest-per-peer rows show the "
            "difference. Ratios are of medians (Δ: difference, when a median is 0).")
    if over:
        note += (" Some runs are no reading (oversubscribed, or a progress thread on a compute core): their "
                 "times are not meaningful, counts are.")
    return [("Low-cost vs real matching behaviour (seed 002's accuracy table)", HEADER, rows, note)]


register("match", "Multithreaded message matching (match)", tables=match_tables)   # the table is the result
