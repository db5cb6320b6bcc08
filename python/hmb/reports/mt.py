"""Report of the multithreaded communication benchmark (mt): message rate per threading mode,
set against MPI everywhere (SPEC §3.4), and its tables."""
from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from pathlib import Path

from ..results import Combined, Result, ResultSet, combine, fmt_size, run_context
from . import register
from .common import Figure, Line, draw, int_param, lines_of, ok_results, per_mpi, size_of

MT_MODES = ("everywhere", "shared", "comm", "tag", "stream", "funneled")   # fixed colours


MT_COLORS = [(m,) for m in MT_MODES]


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


def _mt_results(rs: ResultSet) -> list[Result]:
    """ok mt points at the benchmark's own thread level (MULTIPLE): the thread-safety runs at
    SINGLE are compared in their own table, not mixed into the rate curves."""
    return [r for r in ok_results(rs, "mt") if r.metric("msg_rate") and _thread_level(r, "requested") == "MULTIPLE"]


def _mt_sizes(res: list[Result]) -> list:
    return sorted({size_of(r) for r in res}, key=lambda s: -1 if s is None else s)


def _mt_ratio_points(res: list[Result]) -> dict:
    """(mpi, size) -> mode -> {T: Combined ratio to everywhere with T processes per side}.

    CI and spread are propagated conservatively (low over high, high over low)."""
    groups = defaultdict(list)
    for r in res:
        if _mt_test(r) == "rate":
            groups[(r.mpi, size_of(r), _mt_mode(r), _mt_threads(r))].append(r)
    out = defaultdict(lambda: defaultdict(dict))
    for (mpi, size, mode, threads), rr in groups.items():
        base = groups.get((mpi, size, "everywhere", threads))
        if mode == "everywhere" or not base:
            continue
        c, e = combine(rr, "msg_rate"), combine(base, "msg_rate")
        if c is None or e is None or e.median <= 0:
            continue
        div = lambda a, b: a / b if b > 0 and not (math.isnan(a) or math.isnan(b)) else float("nan")  # noqa: E731
        out[(mpi, size)][mode][threads] = Combined(
            c.median / e.median, div(c.ci_lo, e.ci_hi), div(c.ci_hi, e.ci_lo),
            div(c.spread_lo, e.spread_hi), div(c.spread_hi, e.spread_lo),
            min(c.repeats, e.repeats), c.oversubscribed or e.oversubscribed)
    return out


def _fmt_rate(v: float) -> str:
    """Messages per second with a unit prefix: 1.11M, 532k."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{suffix}"
    return f"{v:.3g}"


def _mode_order(mode: str) -> int:
    return MT_MODES.index(mode) if mode in MT_MODES else len(MT_MODES)


def _one_style(lines: list[Line]) -> list[Line]:
    """Lines drawn in a panel of their own MPI: labelled by mode, one line style."""
    return [dataclasses.replace(ln, label=ln.detail, mpi="") for ln in
            sorted(lines, key=lambda ln: _mode_order(ln.color_key[0]))]


def _reading_rates(lines: list[Line]) -> str:
    out = []
    for mpi, mlines in sorted(per_mpi(lines).items()):
        t_max = max(x for ln in mlines for x, _ in ln.points)
        at = sorted(((c.median, ln.color_key[0]) for ln in mlines for x, c in ln.points if x == t_max), reverse=True)
        out.append(f"{mpi} at T={t_max}: " + ", ".join(f"{m} {_fmt_rate(v)}" for v, m in at))
    return "Message rate (msg/s), best first: " + "; ".join(out) + "."


def _reading_vs_everywhere(ratios: dict, several_sizes: bool) -> str:
    out = []
    for (mpi, size), modes in sorted(ratios.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        t_max = max(t for pts in modes.values() for t in pts)
        at = sorted(((pts[t_max].median, mode) for mode, pts in modes.items() if t_max in pts), reverse=True)
        where = f"At T={t_max} on {mpi}" + (f" ({fmt_size(size)})" if several_sizes and size else "")
        (best, best_mode), rest = at[0], at[1:]
        text = f"{where}, {best_mode} reaches {best:.2f} of everywhere"
        out.append(text + "".join(f", {m} {v:.2f}" for v, m in rest))
    return "; ".join(out) + "." if out else "No mode has an everywhere run with the same processes per side."


@register("mt", "Multithreaded communication (mt)", tables=lambda rs: mt_tables(rs))
def mt_figures(rs: ResultSet, outdir: Path) -> list[Figure]:
    res = _mt_results(rs)
    if not res:
        return []
    sizes = _mt_sizes(res)
    several_sizes = len(sizes) > 1
    panels, all_lines = [], []
    for test in sorted({_mt_test(r) for r in res}):
        for size in sizes:
            sub = [r for r in res if _mt_test(r) == test and size_of(r) == size]
            lines = lines_of(sub, "msg_rate", lambda r: (r.mpi, _mt_mode(r)), _mt_threads,
                           _mt_mode, x_names=("threads", "ranks"),
                           shown=("mode", "test", "size_bytes"))
            all_lines += lines
            for mpi, mlines in sorted(per_mpi(lines).items()):
                where = f"{mpi}, test {test}" + (f", {fmt_size(size)}" if several_sizes and size else "")
                panels.append((where, _one_style(mlines)))
    figs = []
    png, svg, over = draw("mt_rate", panels, "threads per rank T (everywhere: T processes)",
                           "message rate (msg/s)", outdir, xsize=False, ylog=True, color_order=MT_COLORS)
    figs.append(Figure("mt_rate", "Multithreaded message rate",
                       "How does the message rate scale with threads in each threading mode?",
                       _reading_rates(all_lines), png, svg, over))

    ratios = _mt_ratio_points(res)
    if ratios:
        panels = []
        ratio_context = frozenset(run_context(r.run) for r in res)
        for (mpi, size), modes in sorted(ratios.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
            mlines = [Line(mode, (mode,), "", sorted(pts.items()), context=ratio_context)
                      for mode, pts in sorted(modes.items(), key=lambda kv: _mode_order(kv[0]))]
            panels.append((mpi + (f", {fmt_size(size)}" if several_sizes and size else ""), mlines))
        png, svg, over = draw("mt_rate_vs_everywhere", panels, "threads per rank T (everywhere: T processes)",
                               "message rate / everywhere's", outdir, xsize=False, yref=1.0,
                               color_order=MT_COLORS, ylim=(0.0, None))
        figs.append(Figure("mt_rate_vs_everywhere", "Message rate relative to MPI everywhere",
                           "With T threads per process, how close does each mode get to T single-threaded "
                           "processes per side (MPI everywhere)? (1.0 = as fast as everywhere)",
                           _reading_vs_everywhere(ratios, several_sizes), png, svg, over))
    return figs


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


def mt_tables(rs: ResultSet) -> list[tuple]:
    """The talk's performance-vs-resources table and the thread-safety cost, as
    [(title, header, rows, note)]."""
    tables = []
    res = [r for r in _mt_results(rs) if _mt_test(r) == "rate"]
    several_sizes = len(_mt_sizes(res)) > 1
    groups = defaultdict(lambda: defaultdict(list))
    for r in res:
        groups[(r.mpi, size_of(r), _mt_threads(r))][_mt_mode(r)].append(r)
    unsupported = defaultdict(dict)
    for r in rs.results:
        if r.bench == "mt" and r.status != "ok" and str(r.params.get("test", "rate")) == "rate":
            unsupported[(r.mpi, size_of(r), _mt_threads(r))][_mt_mode(r)] = r.record.get("reason", r.status)
    rows = []
    for key in sorted(set(groups) | set(unsupported), key=lambda k: (k[0], k[1] or 0, k[2] or 0)):
        mpi, size, threads = key
        modes = groups.get(key, {})
        base = combine(modes["everywhere"], "msg_rate") if "everywhere" in modes else None
        base_rss = _median_of([_per_side(r, "vmrss_kib") for r in modes.get("everywhere", [])])
        where = [mpi] + ([fmt_size(size)] if several_sizes else []) + [str(threads)]
        order = sorted(set(modes) | set(unsupported.get(key, {})),
                       key=lambda m: MT_MODES.index(m) if m in MT_MODES else len(MT_MODES))
        for mode in order:
            if mode not in modes:
                rows.append(where + [mode, "unsupported", "–", "–", "–", "–", "–", "–", "0"])
                continue
            rr = modes[mode]
            c = combine(rr, "msg_rate")
            first = rr[0]
            vcis, reserved = _per_side(first, "vcis"), _per_side(first, "reserve_vcis")
            vci_text = _count(vcis) + (f" ({reserved:g} reserved)" if reserved else "")
            rss = _median_of([_per_side(r, "vmrss_kib") for r in rr])
            over = "*" if c.oversubscribed else ""
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
                       "of the repeats' medians; * marks an oversubscribed run (ranks × threads > cores)."))
    tables += _mt_thread_safety(rs)
    return tables


def _mt_thread_safety(rs: ResultSet) -> list[tuple]:
    """One thread at MPI_THREAD_SINGLE vs MULTIPLE, where both were measured."""
    groups = defaultdict(lambda: defaultdict(list))
    for r in ok_results(rs, "mt"):
        if r.metric("msg_rate") and _mt_test(r) == "rate" and _mt_mode(r) != "everywhere" \
                and int_param(r, "threads") == 1:
            groups[(r.mpi, size_of(r), _mt_mode(r))][_thread_level(r)].append(r)
    rows, notes = [], []
    for (mpi, size, mode), levels in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0, kv[0][2])):
        if "SINGLE" not in levels or "MULTIPLE" not in levels:
            continue
        single, multiple = combine(levels["SINGLE"], "msg_rate"), combine(levels["MULTIPLE"], "msg_rate")
        ratio = multiple.median / single.median
        rows.append([mpi, fmt_size(size) if size else "?", mode, _fmt_rate(single.median), _fmt_rate(multiple.median),
                     f"{ratio:.2f}", f"{len(levels['SINGLE'])} / {len(levels['MULTIPLE'])}"])
        notes.append(f"{mpi} {mode}: MULTIPLE runs at {ratio:.2f} of SINGLE's rate")
    if not rows:
        return []
    return [("Cost of thread safety (one thread, MPI_THREAD_SINGLE vs MPI_THREAD_MULTIPLE)",
             ["MPI", "size", "mode", "msg/s SINGLE", "msg/s MULTIPLE", "MULTIPLE / SINGLE", "repeats"], rows,
             "Thread level as provided (run header). " + "; ".join(notes) + ".")]

