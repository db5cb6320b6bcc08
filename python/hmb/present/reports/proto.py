"""Report of the protocol lab (proto, seed 001): where each view of the probe found the
eager/rendezvous switches per MPI and `settings` entry, and the threshold trade-off (message
rate, bandwidth, overlap from `async` runs of the same setting, library memory per peer projected
to 1,000 and 8,000 peers) as tables, and the trade-off as a figure with one line per library
setting (seed 001 Figs 1b and 2). docs/metrics.md ("proto") defines every field."""
from __future__ import annotations

import math

from ...data import tidy
from ..format import fmt_size
from .common import launch_value, ok_results, per_mpi, reading, register, size_of

VIEW_ORDER = ("both", "sender", "recv-early", "recv-late", "step")


def refused_of(r) -> str:
    """Library variables the driver's start-up probe refused for this launch ("" if none)."""
    return str((r.launch.get("env_added") or {}).get("HMB_ENV_REFUSED", ""))


def _fmt(v: float, scale: float = 1.0, digits: int = 0) -> str:
    return "–" if not math.isfinite(v) else f"{v / scale:,.{digits}f}"


def switch_table(t: tidy.Table) -> list[tuple]:
    rows = []
    for r, _ in ok_results(t, "proto"):
        if r.params.get("test") != "probe":
            continue
        extra = r.record.get("extra") or {}
        view = str(r.params.get("view", "?"))
        refused = refused_of(r)
        rows.append(((r.mpi, r.settings, VIEW_ORDER.index(view) if view in VIEW_ORDER else 9),
                     [r.mpi, r.settings + (" (refused: " + refused + ")" if refused else ""), view,
                      str(extra.get("switches", "?")), _fmt(extra.get("switch_agreement", math.nan), 1, 2),
                      f"{extra.get('trials_without_verdict', '?')} / {extra.get('trials_run', '?')}"]))
    if not rows:
        return []
    rows.sort(key=lambda kv: kv[0])
    return [("Eager/rendezvous switches per MPI, setting and view (proto probe)",
             ["MPI", "setting", "view", "switches (B: last like smaller – first like larger)", "agreement",
              "trials without verdict / run"], [row for _, row in rows],
             "View both (default): a switch is where a quarter or more of the transfer is still to do after "
             "both sides computed (MPICH's eager limit; Open MPI's only at 64 KB, docs/findings.md). View step: "
             "where the cost of a blocking transfer of fresh data jumps (Open MPI's eager limit too). Other views: "
             "a switch is where the observed side stops completing before its peer's first MPI call: the "
             "sender view shows MPICH's eager limit but Open MPI's max inline send; the receiver views show "
             "the eager limit only with single copy off ('+nocma'). (+) marks a switch back to progress. "
             "A refused setting ran with the library's default for the refused variables.")]


def tradeoff_table(t: tidy.Table) -> list[tuple]:
    overlap = {}
    for r, ix in ok_results(t, "async"):
        if r.params.get("op") == "pt2pt" and r.params.get("progress") == "none":
            overlap[(r.mpi, r.settings, size_of(r))] = launch_value(t, ix, "efficiency_pct")
    rows = []
    for r, ix in ok_results(t, "proto"):
        if r.params.get("test") != "tradeoff":
            continue
        size, setting = size_of(r), r.settings
        refused = refused_of(r)
        rows.append(((r.mpi, setting, size or 0),
                     [r.mpi, setting + (" (refused)" if refused else ""), fmt_size(size) if size else "?",
                      _fmt(launch_value(t, ix, "msg_rate")), _fmt(launch_value(t, ix, "bandwidth_MBps"), 1, 1),
                      _fmt(overlap.get((r.mpi, setting, size), math.nan), 1, 1),
                      _fmt(launch_value(t, ix, "per_peer_kB"), 1, 1),
                      _fmt(launch_value(t, ix, "rss_1000_peers_projected_kB"), 1024, 1),
                      _fmt(launch_value(t, ix, "rss_8000_peers_projected_kB"), 1024, 1)]))
    if not rows:
        return []
    rows.sort(key=lambda kv: kv[0])
    return [("Threshold trade-off: message rate, overlap, memory (proto tradeoff, async pt2pt)",
             ["MPI", "setting", "size", "msg/s", "MB/s", "overlap E (%)", "kB per peer", "RSS 1,000 peers (MB)",
              "RSS 8,000 peers (MB)"], [row for _, row in rows],
             "Medians. Overlap: async op pt2pt, progress none, same MPI, setting and size ('–' where not run). "
             "Memory per peer from 2 ranks (one peer): a rough figure to compare thresholds, not a capacity plan.")]


register("proto", "Protocols: eager/rendezvous switch and threshold trade-off (proto)",
         tables=lambda t: switch_table(t) + tradeoff_table(t))


def _against_default(panel) -> str:
    """Each setting against the same MPI's default at each size: a ratio of medians, or for the
    overlap (a percentage that can be negative) a difference in points."""
    what = panel.title.split(" (")[0]
    points = panel.value == "efficiency_pct"
    out = []
    for mpi, mlines in per_mpi(panel.lines).items():
        base = next(({p.x: p for p in ln.reading_points} for ln in mlines if ln.hue == "default" and not ln.split), None)
        if base is None:
            continue
        for ln in mlines:
            if ln.hue == "default" and not ln.split:
                continue
            cells = []
            for p in ln.reading_points:
                b = base.get(p.x)
                if b is None or not (math.isfinite(b.median) and math.isfinite(p.median)):
                    continue
                if points:
                    cells.append(f"{fmt_size(p.x)} {p.median - b.median:+.1f}")
                elif b.median > 0:
                    cells.append(f"{fmt_size(p.x)} ×{p.median / b.median:.2f}")
            if cells:
                out.append(f"{mpi} {ln.name}: " + ", ".join(cells))
    if not out:
        return ""
    unit = "points against the default" if points else "times the default"
    return f"{what} ({unit}) — " + "; ".join(out) + "."


@reading("proto_tradeoff")
def tradeoff(plan, unsupported=None) -> str:
    """Message rate, overlap and library memory per peer against the message size, one line per
    MPI and `settings` entry (the colour is the setting, the line style the MPI)."""
    out = [_against_default(p) for p in plan.panels]
    return " ".join(s for s in out if s) or "No setting but the default was measured."
