"""Readings and tables of the multithreaded communication benchmark (mt; figures.toml: mt_rate,
mt_rate_vs_everywhere): message rate per threading mode, set against MPI everywhere (SPEC §3.4);
the performance/resources table and the cost of thread safety."""
from __future__ import annotations

import math
import statistics
from collections import defaultdict

from ...data import tidy
from ...data.results import Result
from ..format import fmt_size
from .common import (int_param, largest_read, none_read, ok_results, per_mpi, reading, readings, register, size_of,
                     value)


def _mt_test(r: Result) -> str:
    return str(r.params.get("test", "rate"))


def _mt_mode(r: Result) -> str:
    return str(r.params.get("mode", "?"))


def _mt_threads(r: Result):
    """Threads per rank; for everywhere, the single-threaded processes per side it stands for."""
    if _mt_mode(r) == "everywhere":
        procs = (r.record.get("extra") or {}).get("everywhere_processes")
        if isinstance(procs, (int, float)) and procs >= 1:
            return int(procs)
        ranks = r.run.get("ranks")
        if ranks:
            return int(ranks) // 2
    return int_param(r, "threads") or r.run.get("threads")


def _thread_level(r: Result, which: str = "provided") -> str:
    level = (r.run.get("thread_level") or {}).get(which)
    if level is None and which == "provided":
        level = (r.record.get("extra") or {}).get("thread_level_provided")
    return str(level or "MULTIPLE").upper()


def _mt_results(t: tidy.Table) -> list:
    """[(Result, rows)] of the ok mt points at the benchmark's own thread level (MULTIPLE): the
    thread-safety runs at SINGLE are compared in their own table, not mixed into the rates."""
    return [(r, ix) for r, ix in ok_results(t, "mt")
            if r.metric("msg_rate") and _thread_level(r, "requested") == "MULTIPLE"]


def _mt_sizes(res: list) -> list:
    return sorted({size_of(r) for r, _ in res}, key=lambda s: -1 if s is None else s)


def _modes(t: tidy.Table) -> list:
    """mt's modes in its descriptor's order (--describe), for the tables' rows."""
    desc = t.descriptors.get("mt")
    opt = desc.option("mode") if desc else None
    return list(opt.choices or ()) if opt else []


def _fmt_rate(v: float) -> str:
    """Messages per second with a unit prefix: 1.11M, 532k."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{suffix}"
    return f"{v:.3g}"


def _at_largest(lines: list, value) -> list:
    """Per MPI: (mpi, T, [(value text, mode)] best first, larger Ts with no reading)."""
    out = []
    for mpi, mlines in per_mpi(lines).items():
        t_max, beyond = largest_read(mlines)
        if t_max is None:
            out.append((mpi, None, [], beyond))
            continue
        at = sorted(((p.median, ln.name) for p, ln in readings(mlines) if p.x == t_max), reverse=True)
        out.append((mpi, t_max, [(value(v), m) for v, m in at], beyond))
    return out


def _beyond(beyond: list) -> str:
    return f" (T={', '.join(f'{t:g}' for t in beyond)}: no reading)" if beyond else ""


register("mt", "Multithreaded communication (mt)", tables=lambda t: mt_tables(t))


@reading("mt_rate")
def rates(plan, unsupported=None) -> str:
    out = []
    for mpi, t, at, beyond in _at_largest(plan.lines(), _fmt_rate):
        out.append(none_read(mpi) if t is None else
                   f"{mpi} at T={t:g}: " + ", ".join(f"{m} {v}" for v, m in at) + _beyond(beyond))
    return "Message rate (msg/s), best first: " + "; ".join(out) + "."


@reading("mt_rate_vs_everywhere")
def vs_everywhere(plan, unsupported=None) -> str:
    out = []
    for mpi, t, at, beyond in _at_largest(plan.lines(), lambda v: f"{v:.2f}"):
        if t is None:
            out.append(none_read(mpi))
            continue
        (best, best_mode), rest = at[0], at[1:]
        out.append(f"At T={t:g} on {mpi}, {best_mode} reaches {best} of everywhere"
                   + "".join(f", {m} {v}" for v, m in rest) + _beyond(beyond))
    return "; ".join(out) + "." if out else "No mode has an everywhere run with the same processes per side."


def _per_side(r: Result, key: str):
    """A resource per side of the exchange: rank 0's figure times the processes on its side
    (everywhere: T processes, each with its own VCIs, communicators and memory)."""
    v = (r.record.get("extra") or {}).get(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or math.isnan(v):
        return None
    return v * max(1, int(r.run.get("ranks") or 2) // 2)


def _median_of(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _pct(v, base) -> str:
    return f"{100.0 * v / base:.0f}%" if v is not None and base else "–"


def _count(v) -> str:
    return "–" if v is None else f"{v:g}"


def mt_tables(t: tidy.Table) -> list[tuple]:
    """The talk's performance-vs-resources table and the thread-safety cost, as
    [(title, header, rows, note)]."""
    tables = []
    res = [(r, ix) for r, ix in _mt_results(t) if _mt_test(r) == "rate"]
    several_sizes = len(_mt_sizes(res)) > 1
    groups = defaultdict(lambda: defaultdict(list))
    for r, ix in res:
        groups[(r.mpi, size_of(r), _mt_threads(r))][_mt_mode(r)].append((r, ix))
    unsupported = defaultdict(dict)
    for r, _ in t.records(t.unsupported):
        if r.bench == "mt" and r.status != "ok" and str(r.params.get("test", "rate")) == "rate":
            unsupported[(r.mpi, size_of(r), _mt_threads(r))][_mt_mode(r)] = r.record.get("reason", r.status)
    rows = []
    for key in sorted(set(groups) | set(unsupported), key=lambda k: (k[0], k[1] or 0, k[2] or 0)):
        mpi, size, threads = key
        modes = groups.get(key, {})
        base = value(t, modes["everywhere"], "msg_rate") if "everywhere" in modes else None
        base_rss = _median_of([_per_side(r, "vmrss_kib") for r, _ in modes.get("everywhere", [])])
        where = [mpi] + ([fmt_size(size)] if several_sizes else []) + [str(threads)]
        known = _modes(t)
        order = sorted(set(modes) | set(unsupported.get(key, {})),
                       key=lambda m: (known.index(m) if m in known else len(known), m))
        for mode in order:
            if mode not in modes:
                rows.append(where + [mode, "unsupported", "–", "–", "–", "–", "–", "–", "0"])
                continue
            rr = modes[mode]
            c = value(t, rr, "msg_rate")
            first = rr[0][0]
            vcis, reserved = _per_side(first, "vcis"), _per_side(first, "reserve_vcis")
            vci_text = _count(vcis) + (f" ({reserved:g} reserved)" if reserved else "")
            rss = _median_of([_per_side(r, "vmrss_kib") for r, _ in rr])
            over = "*" if c.no_reading else ""
            rows.append(where + [mode, _fmt_rate(c.median) + over, _pct(c.median, base.median if base else None),
                                 vci_text, _count(_per_side(first, "streams")),
                                 _count(_per_side(first, "communicators")),
                                 "–" if rss is None else f"{rss / 1024:.1f}", _pct(rss, base_rss), str(len(rr))])
    if rows:
        header = (["MPI"] + (["size"] if several_sizes else []) + ["T", "mode", "msg/s", "% of everywhere",
                  "VCIs", "streams", "communicators", "RSS MiB", "RSS % of everywhere", "repeats"])
        tables.append(("Performance and resources per mode (relative to MPI everywhere)", header, rows,
                       "Resources are per side of the exchange: rank 0's VCIs (MPIR_CVAR_CH4_NUM_VCIS, "
                       "– where the library exposes none), MPIX streams, communicators and resident memory "
                       "after set-up, times the processes on its side (everywhere: T). msg/s is the median "
                       "of the repeats' medians; * marks a point that is no reading (oversubscribed: ranks × threads > "
                       "cores, or a progress thread on a compute core)."))
    tables += _mt_thread_safety(t)
    return tables


def _mt_thread_safety(t: tidy.Table) -> list[tuple]:
    """One thread at MPI_THREAD_SINGLE vs MULTIPLE, where both were measured."""
    groups = defaultdict(lambda: defaultdict(list))
    for r, ix in ok_results(t, "mt"):
        if r.metric("msg_rate") and _mt_test(r) == "rate" and _mt_mode(r) != "everywhere" \
                and int_param(r, "threads") == 1:
            groups[(r.mpi, size_of(r), _mt_mode(r))][_thread_level(r)].append((r, ix))
    rows, notes = [], []
    for (mpi, size, mode), levels in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0, kv[0][2])):
        if "SINGLE" not in levels or "MULTIPLE" not in levels:
            continue
        single, multiple = value(t, levels["SINGLE"], "msg_rate"), value(t, levels["MULTIPLE"], "msg_rate")
        ratio = multiple.median / single.median
        rows.append([mpi, fmt_size(size) if size else "?", mode, _fmt_rate(single.median), _fmt_rate(multiple.median),
                     f"{ratio:.2f}", f"{len(levels['SINGLE'])} / {len(levels['MULTIPLE'])}"])
        notes.append(f"{mpi} {mode}: MULTIPLE runs at {ratio:.2f} of SINGLE's rate")
    if not rows:
        return []
    return [("Cost of thread safety (one thread, MPI_THREAD_SINGLE vs MPI_THREAD_MULTIPLE)",
             ["MPI", "size", "mode", "msg/s SINGLE", "msg/s MULTIPLE", "MULTIPLE / SINGLE", "repeats"], rows,
             "Thread level as provided (run header). " + "; ".join(notes) + ".")]
