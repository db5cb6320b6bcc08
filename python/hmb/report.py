"""`hmb report`: figures (PNG + SVG), report.md and report.html from JSON Lines results.

Each figure answers a question stated above it and carries a one-line reading computed from
the data below it. Repeats of a point are combined (median of medians; spread drawn as an
error bar); the band is the 95% CI of the median (with repeats: the range of their medians, at
least one repeat's CI); oversubscribed points have hollow markers. Results that differ in
their identity (results.identity: ranks, thread level, run options) are never merged: a
figure that does not show such a difference splits the line and names it in the label.
"""
from __future__ import annotations

import base64
import dataclasses
import html
import math
import statistics
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from . import __version__  # noqa: E402
from .results import (Combined, Result, ResultSet, combine, fmt_num, fmt_size, identity,  # noqa: E402
                      point_key, varying)

EARLY_BIRD_SEEN = 0.05   # early-bird fraction above which transfer counts as "seen"
COLORS = plt.get_cmap("tab10").colors
STYLES = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D")]


@dataclasses.dataclass
class Line:
    label: str
    color_key: object
    mpi: str
    points: list        # (x, Combined), sorted by x
    extra: str = ""     # ", name=value" of identity items that tell this line from the others


@dataclasses.dataclass
class Figure:
    name: str
    title: str
    question: str
    reading: str
    png: str = ""
    svg: str = ""
    oversubscribed: bool = False


# ------------------------------------------------------------------ grouping helpers

def _ok(rs: ResultSet, bench: str) -> list[Result]:
    return [r for r in rs.results if r.bench == bench and r.status == "ok"]


def _lines(results, metric, line_key, x_of, label_of, x_names=("size_bytes",), shown=()) -> list[Line]:
    """Group results into lines (combining repeats at each x).

    A line holds one point identity per x: results whose identity (results.identity) differs
    in anything but x_names become separate lines, and identity items that the label does
    not show (shown: the names line_key and label_of already cover) but that differ between
    lines are appended to the label (", compute=10ms")."""
    groups = defaultdict(lambda: defaultdict(list))
    rest_of = {}
    for r in results:
        x = x_of(r)
        if x is None or r.metric(metric) is None:
            continue
        rest = {k: v for k, v in identity(r).items() if k not in x_names}
        key = (line_key(r), tuple(sorted(rest.items())))
        rest_of[key] = rest
        groups[key][x].append(r)
    differing = varying(list(rest_of.values()), skip=shown)
    lines = []
    for key in sorted(groups, key=lambda k: (tuple(str(p) for p in k[0]), k[1])):
        pts = []
        for x in sorted(groups[key]):
            c = combine(groups[key][x], metric)
            if c is not None:
                pts.append((x, c))
        if pts:
            first = next(iter(groups[key].values()))[0]
            extra = "".join(f", {k}={rest_of[key][k]}" for k in differing if k in rest_of[key])
            color_key = key[0][1:] + ((extra,) if extra else ())
            lines.append(Line(label_of(first) + extra, color_key, first.mpi, pts, extra))
    return lines


def _size(r: Result):
    v = r.params.get("size_bytes")
    return int(v) if v is not None else None


def _int_param(r: Result, name: str, default=None):
    v = r.params.get(name, default)
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


# ------------------------------------------------------------------ drawing

def _draw(fig_name: str, panels: list, xlabel: str, ylabel: str, outdir: Path, *,
          xsize=True, ylog=False, yref=None, ylim=None, yfloor=None,
          color_order=None) -> tuple[str, str, bool]:
    """panels: [(title, [Line])]. Writes PNG and SVG; returns their paths relative to outdir
    and whether any point was oversubscribed. color_order: colour keys in a fixed order, so
    that two figures give the same thing the same colour."""
    mpis = sorted({ln.mpi for _, lines in panels for ln in lines})
    color_keys = sorted({ln.color_key for _, lines in panels for ln in lines}, key=str)
    if color_order:
        color_keys = list(color_order) + [k for k in color_keys if k not in color_order]
    color_of = {k: COLORS[i % len(COLORS)] for i, k in enumerate(color_keys)}
    style_of = {m: STYLES[i % len(STYLES)] for i, m in enumerate(mpis)}
    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 4.0), squeeze=False, sharey=True)
    any_over = False
    handles = {}
    for ax, (title, lines) in zip(axes[0], panels):
        for ln in lines:
            color = color_of[ln.color_key]
            linestyle, marker = style_of[ln.mpi]
            xs = [x for x, _ in ln.points]
            med = [c.median for _, c in ln.points]
            ax.plot(xs, med, linestyle=linestyle, color=color, linewidth=1.6)
            lo = [c.ci_lo for _, c in ln.points]
            hi = [c.ci_hi for _, c in ln.points]
            if any(not (math.isnan(a) or math.isnan(b)) for a, b in zip(lo, hi)):
                ax.fill_between(xs, [a if not math.isnan(a) else m for a, m in zip(lo, med)],
                                [b if not math.isnan(b) else m for b, m in zip(hi, med)],
                                color=color, alpha=0.15, linewidth=0)
            for x, c in ln.points:
                hollow = c.oversubscribed
                any_over |= hollow
                ax.plot([x], [c.median], marker=marker, color=color, markersize=6,
                        markerfacecolor="white" if hollow else color, markeredgewidth=1.4,
                        linestyle="none")
                if c.repeats > 1 and c.spread_hi > c.spread_lo:
                    ax.errorbar([x], [c.median], yerr=[[c.median - c.spread_lo], [c.spread_hi - c.median]],
                                color=color, capsize=3, linewidth=0.9)
            handles.setdefault(ln.label, Line2D([], [], color=color, linestyle=linestyle, marker=marker))
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel)
        if xsize:
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_size(v) if v >= 1 and float(v).is_integer() else ""))
        else:  # small integer counts (threads): a tick at each value measured
            xs_all = sorted({x for ln in lines for x, _ in ln.points})
            if xs_all and min(xs_all) > 0:
                ax.set_xscale("log", base=2)
                ax.set_xticks(xs_all)
                ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
                ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        if ylog:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(_axis_number))
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        if yref is not None:
            ax.axhline(yref, color="grey", linewidth=0.8, linestyle=":")
        if ylim is not None:
            ax.set_ylim(*ylim)
        if yfloor is not None and ax.get_ylim()[0] < yfloor:
            # A few very negative values would flatten everything else: clip and label them.
            top = min(ax.get_ylim()[1], 110.0) if yref == 0.0 else ax.get_ylim()[1]
            span = top - yfloor
            ax.set_ylim(yfloor - 0.04 * span, top)
            for ln in lines:
                for x, c in ln.points:
                    if c.median < yfloor:
                        ax.plot([x], [yfloor], marker="v", color=color_of[ln.color_key], linestyle="none")
                        ax.annotate(fmt_num(c.median), (x, yfloor), textcoords="offset points", xytext=(4, 3),
                                    fontsize=7, color=color_of[ln.color_key])
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel(ylabel)
    extra = []
    if any_over:
        extra.append(Line2D([], [], color="black", marker="o", markerfacecolor="white", linestyle="none",
                            label="hollow: oversubscribed (ranks×threads > cores)"))
    if any(c.repeats > 1 for _, lines in panels for ln in lines for _, c in ln.points):
        extra.append(Line2D([], [], color="black", marker="|", linestyle="none",
                            label="bar: range of repeat medians; band: 95% CI of a repeat or that range, the wider"))
    else:
        extra.append(matplotlib.patches.Patch(color="grey", alpha=0.25, label="band: 95% CI of median"))
    fig.tight_layout()
    fig.legend(list(handles.values()) + extra, list(handles) + [h.get_label() for h in extra],
               loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    figdir = outdir / "figures"
    figdir.mkdir(parents=True, exist_ok=True)
    fig.savefig(figdir / f"{fig_name}.png", dpi=110, bbox_inches="tight")
    fig.savefig(figdir / f"{fig_name}.svg", bbox_inches="tight")
    plt.close(fig)
    return f"figures/{fig_name}.png", f"figures/{fig_name}.svg", any_over


def _axis_number(v, _pos=None) -> str:
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


# ------------------------------------------------------------------ readings

OVERSUBSCRIBED_NOTE = (" Hollow points ran oversubscribed (ranks × threads > cores): "
                       "their timings are distorted.")



def _per_mpi(lines: list[Line]) -> dict:
    out = defaultdict(list)
    for ln in lines:
        out[ln.mpi].append(ln)
    return out


def _reading_early_bird(lines: list[Line]) -> str:
    parts_seen, parts_none = [], []
    for mpi, mlines in sorted(_per_mpi(lines).items()):
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
                          f"{at_largest[1].label.split(', ', 1)[-1]})")
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


def _reading_extreme(lines: list[Line], what: str, unit: str = "", best_high=True) -> str:
    out = []
    for mpi, mlines in sorted(_per_mpi(lines).items()):
        pts = [(c.median, x, ln) for ln in mlines for x, c in ln.points]
        v, x, ln = (max if best_high else min)(pts, key=lambda t: t[0])
        out.append(f"{mpi} {what} {fmt_num(v)}{unit} ({fmt_size(x)}, {ln.label.split(', ', 1)[-1]})")
    return "; ".join(out) + "."


def _reading_overhead(lines: list[Line]) -> str:
    out = []
    for mpi, mlines in sorted(_per_mpi(lines).items()):
        one = [c.median for ln in mlines if _partitions_of(ln) == 1 for _, c in ln.points]
        worst = max(((c.median, x, ln) for ln in mlines for x, c in ln.points), key=lambda t: t[0])
        txt = f"{mpi}: "
        if one:
            txt += f"P=1 median {fmt_num(float(statistics.median(one)))} (1 expected), "
        txt += f"highest {fmt_num(worst[0])} at {fmt_size(worst[1])} with {worst[2].label.split(', ', 1)[-1]}"
        out.append(txt)
    return "; ".join(out) + "."


def _reading_modes(lines: list[Line], unit: str, what: str, x_fmt=fmt_size) -> str:
    """At each MPI's largest x: modes ranked best first."""
    out = []
    for mpi, mlines in sorted(_per_mpi(lines).items()):
        xmax = max(x for ln in mlines for x, _ in ln.points)
        at = sorted(((c.median, ln.label.split(", ", 1)[-1]) for ln in mlines
                     for x, c in ln.points if x == xmax), reverse=True)
        out.append(f"{mpi} at {x_fmt(xmax)}: " + ", ".join(f"{m} {fmt_num(v)}{unit}" for v, m in at))
    return f"{what} " + "; ".join(out) + "."


# ------------------------------------------------------------------ per benchmark

def part_figures(rs: ResultSet, outdir: Path) -> list[Figure]:
    res = _ok(rs, "part")
    if not res:
        return []
    multi_threads = len({r.params.get("threads") for r in res}) > 1
    noises = sorted({r.noise for r in res}, key=lambda n: (n != "none", n))

    def key(r):
        return (r.mpi, _int_param(r, "partitions", 0), _int_param(r, "threads", 0) if multi_threads else 0)

    def label(r):
        t = f", T={r.params.get('threads')}" if multi_threads else ""
        p = r.params.get("partitions")
        return f"{r.mpi}, {p} partition{'' if str(p) == '1' else 's'}{t}"

    specs = [
        ("part_overhead", "overhead", "Partitioned overhead",
         "Does splitting a message into partitions cost time? (t_part / t_pt2pt; 1 = as fast as one send)",
         "overhead (t_part / t_pt2pt)", dict(yref=1.0, ylog=True), _reading_overhead),
        ("part_perceived_bw", "perceived_bw_MBps", "Perceived bandwidth",
         "What bandwidth does the receiver see from the last Pready to the last arrival?",
         "perceived bandwidth (MB/s)", dict(ylog=True),
         lambda ls: "Highest perceived bandwidth: " + _reading_extreme(ls, "reaches", " MB/s")),
        ("part_availability", "availability", "Application availability",
         "How much of the send is hidden behind the threads' computation? (1 − t_after_join / t_pt2pt)",
         "availability", dict(yref=0.0),
         lambda ls: "Best availability: " + _reading_extreme(ls, "reaches")),
        ("part_early_arrival", "early_arrival", "Early-bird transfer",
         "Does the library deliver partitions before the last thread is ready (early-bird transfer)? "
         "(share of the message reported arrived before the join)",
         "early arrival (share of message)", dict(ylim=(-0.03, 1.03)), _reading_early_bird),
        ("part_early_bird", "early_bird", "Early-bird fraction (SPEC interval definition)",
         "How much of the ready-to-arrival windows lies before the join? (counts time a ready partition "
         "waits inside the library as well, so it is high whenever threads finish far apart)",
         "early-bird fraction", dict(ylim=(-0.03, 1.03)),
         lambda ls: "Largest early-bird fraction: " + _reading_extreme(ls, "reaches")),
    ]
    figs = []
    for name, metric, title, question, ylabel, kw, reader in specs:
        panels, noise_of = [], {}
        for noise in noises:
            sub = [r for r in res if r.noise == noise]
            lines = _lines(sub, metric, key, _size, label, shown=("partitions", "threads"))
            if lines:
                panels.append((f"noise {noise}", lines))
                noise_of[id(lines)] = noise
        if not panels:
            continue
        png, svg, over = _draw(name, panels, "message size (bytes)", ylabel, outdir, **kw)
        read = [(noise_of[id(lines)], lines) for _, lines in panels]
        if metric == "overhead" and any(noise == "none" for noise, _ in read):
            read = [(noise, lines) for noise, lines in read if noise == "none"]  # defined with noise off
        figs.append(Figure(name, title, question, _per_noise(read, reader), png, svg, over))
    return figs


def _per_noise(read: list, reader) -> str:
    """One reading per noise panel, each naming its noise model (a single panel: as is)."""
    if len(read) == 1 and read[0][0] == "none":
        return reader(read[0][1])
    return " ".join(f"Noise {noise}: {reader(lines)}" for noise, lines in read)


EFFICIENCY_NAMES = ("efficiency_pct", "E_pct", "efficiency")


def async_figures(rs: ResultSet, outdir: Path) -> list[Figure]:
    res = _ok(rs, "async")
    if not res:
        return []
    metric = next((m for m in EFFICIENCY_NAMES if any(r.metric(m) for r in res)), None)
    if metric is None:
        return []
    ops = sorted({str(r.params.get("op", "?")) for r in res})
    panels = []
    for op in ops:
        lines = _lines([r for r in res if str(r.params.get("op", "?")) == op], metric,
                       lambda r: (r.mpi, str(r.params.get("progress", "?"))), _size,
                       lambda r: f"{r.mpi}, {r.params.get('progress', '?')}", shown=("progress", "op"))
        if lines:
            panels.append((f"op {op}", lines))
    if not panels:
        return []
    png, svg, over = _draw("async_efficiency", panels, "message size (bytes)", "efficiency E (%)", outdir,
                           yref=0.0, yfloor=-200.0)
    reading = " ".join(_reading_modes(ls, "%", f"E by progress mode, {title}:") for title, ls in panels)
    unsupported = sorted({(r.mpi, str(r.params.get("progress", "?"))) for r in rs.results
                          if r.bench == "async" and r.status == "unsupported"})
    if unsupported:
        reading += " Unsupported: " + ", ".join(f"{p} on {m}" for m, p in unsupported) + "."
    return [Figure("async_efficiency", "Overlap efficiency by progress mode",
                   "How much of the communication does each progress mode hide behind computation? "
                   "(E = 1 − T_over / T_sync; 100% = fully hidden, negative = worse than blocking)",
                   reading, png, svg, over)]


# -- mt: message rate per threading mode, set against MPI everywhere (SPEC §3.4, seed 003)

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
    return _int_param(r, "threads") or r.run.get("threads")


def _thread_level(r: Result, which: str = "provided") -> str:
    level = (r.run.get("thread_level") or {}).get(which)
    if level is None and which == "provided":
        level = (r.record.get("extra") or {}).get("thread_level_provided")
    return str(level or "MULTIPLE").upper()


def _mt_results(rs: ResultSet) -> list[Result]:
    """ok mt points at the benchmark's own thread level (MULTIPLE): the thread-safety runs at
    SINGLE are compared in their own table, not mixed into the rate curves."""
    return [r for r in _ok(rs, "mt") if r.metric("msg_rate") and _thread_level(r, "requested") == "MULTIPLE"]


def _mt_sizes(res: list[Result]) -> list:
    return sorted({_size(r) for r in res}, key=lambda s: -1 if s is None else s)


def _mt_ratio_points(res: list[Result]) -> dict:
    """(mpi, size) -> mode -> {T: Combined ratio to everywhere with T processes per side}.

    CI and spread are propagated conservatively (low over high, high over low)."""
    groups = defaultdict(list)
    for r in res:
        if _mt_test(r) == "rate":
            groups[(r.mpi, _size(r), _mt_mode(r), _mt_threads(r))].append(r)
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
    return [dataclasses.replace(ln, label=ln.color_key[0] + ln.extra, mpi="") for ln in
            sorted(lines, key=lambda ln: _mode_order(ln.color_key[0]))]


def _reading_rates(lines: list[Line]) -> str:
    out = []
    for mpi, mlines in sorted(_per_mpi(lines).items()):
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


def mt_figures(rs: ResultSet, outdir: Path) -> list[Figure]:
    res = _mt_results(rs)
    if not res:
        return []
    sizes = _mt_sizes(res)
    several_sizes = len(sizes) > 1
    panels, all_lines = [], []
    for test in sorted({_mt_test(r) for r in res}):
        for size in sizes:
            sub = [r for r in res if _mt_test(r) == test and _size(r) == size]
            lines = _lines(sub, "msg_rate", lambda r: (r.mpi, _mt_mode(r)), _mt_threads,
                           lambda r: f"{r.mpi}, {_mt_mode(r)}", x_names=("threads", "ranks"),
                           shown=("mode", "test", "size_bytes"))
            all_lines += lines
            for mpi, mlines in sorted(_per_mpi(lines).items()):
                where = f"{mpi}, test {test}" + (f", {fmt_size(size)}" if several_sizes and size else "")
                panels.append((where, _one_style(mlines)))
    figs = []
    png, svg, over = _draw("mt_rate", panels, "threads per rank T (everywhere: T processes)",
                           "message rate (msg/s)", outdir, xsize=False, ylog=True, color_order=MT_COLORS)
    figs.append(Figure("mt_rate", "Multithreaded message rate",
                       "How does the message rate scale with threads in each threading mode?",
                       _reading_rates(all_lines), png, svg, over))

    ratios = _mt_ratio_points(res)
    if ratios:
        panels = []
        for (mpi, size), modes in sorted(ratios.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
            mlines = [Line(mode, (mode,), "", sorted(pts.items()))
                      for mode, pts in sorted(modes.items(), key=lambda kv: _mode_order(kv[0]))]
            panels.append((mpi + (f", {fmt_size(size)}" if several_sizes and size else ""), mlines))
        png, svg, over = _draw("mt_rate_vs_everywhere", panels, "threads per rank T (everywhere: T processes)",
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
        groups[(r.mpi, _size(r), _mt_threads(r))][_mt_mode(r)].append(r)
    unsupported = defaultdict(dict)
    for r in rs.results:
        if r.bench == "mt" and r.status != "ok" and str(r.params.get("test", "rate")) == "rate":
            unsupported[(r.mpi, _size(r), _mt_threads(r))][_mt_mode(r)] = r.record.get("reason", r.status)
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
    for r in _ok(rs, "mt"):
        if r.metric("msg_rate") and _mt_test(r) == "rate" and _mt_mode(r) != "everywhere" \
                and _int_param(r, "threads") == 1:
            groups[(r.mpi, _size(r), _mt_mode(r))][_thread_level(r)].append(r)
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


def _p2p_metric(r: Result, kind: str):
    names = list((r.record.get("metrics") or {}))
    pats = {"latency": ("lat", "time", "_us"), "bw": ("bw", "bandwidth", "mbps")}[kind]
    for pat in pats:
        for n in names:
            if pat in n.lower():
                return n
    return names[0] if names else None


def p2p_figures(rs: ResultSet, outdir: Path) -> list[Figure]:
    res = _ok(rs, "p2p")
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
        metric = _p2p_metric(sub[0], kind)
        if metric is None:
            continue
        lines = _lines(sub, metric, lambda r: (r.mpi, str(r.params.get("mode", kind))), _size,
                       lambda r: f"{r.mpi}, {r.params.get('mode', kind)}", shown=("mode",))
        if not lines:
            continue
        png, svg, over = _draw(name, [(f"{metric}", lines)], "message size (bytes)", ylabel, outdir, ylog=True)
        if kind == "latency":
            out = []
            for mpi, mlines in sorted(_per_mpi(lines).items()):
                x0, c0 = min((p for ln in mlines for p in ln.points), key=lambda p: p[0])
                x1, c1 = max((p for ln in mlines for p in ln.points), key=lambda p: p[0])
                out.append(f"{mpi} {fmt_num(c0.median)} µs at {fmt_size(x0)}, {fmt_num(c1.median)} µs at {fmt_size(x1)}")
            reading = "Latency: " + "; ".join(out) + "."
        else:
            reading = "Peak bandwidth: " + _reading_extreme(lines, "reaches", " MB/s")
        figs.append(Figure(name, title, question, reading, png, svg, over))
    return figs


# ------------------------------------------------------------------ tables

def environment_rows(rs: ResultSet) -> list[list[str]]:
    launches = {ln.get("tag"): ln for ln in rs.launches}
    groups = defaultdict(int)
    for run in rs.runs.values():
        mpi = run.get("mpi") or {}
        binding = _binding(run, launches.get(run.get("tag")))
        library = " ".join(str(mpi.get("library", "?")).split(",")[0].split())
        key = (run.get("bench", "?"), library, str(run.get("ranks", "?")),
               str(run.get("threads", "?")), binding, "yes" if run.get("oversubscribed") else "no",
               ", ".join(run.get("hosts") or []) or "?", str(run.get("git_revision", "?"))[:12])
        groups[key] += 1
    return [list(k) + [str(n)] for k, n in sorted(groups.items())]


def _binding(run: dict, launch: dict | None) -> str:
    cmd = (launch or {}).get("command") or []
    for flag in ("-bind-to", "--bind-to"):
        if flag in cmd and cmd.index(flag) + 1 < len(cmd):
            return f"{flag} {cmd[cmd.index(flag) + 1]}"
    for a in cmd:
        if a.startswith("--cpu-bind"):
            return a
    sets = [str(p.get("cpuset", "?")) for p in run.get("placement") or []]
    return "cpusets " + " | ".join(sets) if sets else "?"


def unsupported_rows(rs: ResultSet) -> list[list[str]]:
    groups = defaultdict(list)
    for r in rs.results:
        if r.status != "ok":
            groups[(r.bench, r.mpi, r.status, r.record.get("reason", "?"))].append(r)
    rows = []
    for (bench, mpi, status, reason), rr in sorted(groups.items()):
        pts = sorted({", ".join(f"{k}={v}" for k, v in sorted(r.params.items()) if k != "size_bytes")
                      for r in rr})
        rows.append([bench, mpi, status, reason, "; ".join(pts)[:160] + f" ({len(rr)} points)"])
    return rows


def failure_rows(rs: ResultSet) -> list[list[str]]:
    rows = [[f.get("bench", "?"), f.get("kind", "?"), str(f.get("params", "")), f.get("message", "")]
            for f in rs.failures]
    rows += [[ln.get("point", {}).get("bench", "?"), f"launch failed (exit {ln.get('rc')})",
              ln.get("tag", ""), " ".join(ln.get("command", []))[:160]]
             for ln in rs.launches if ln.get("status") == "failed"]
    return rows


def results_rows(rs: ResultSet) -> dict:
    """bench -> (header, rows): every point, first metrics' medians [CI] (repeats)."""
    by_bench = defaultdict(lambda: defaultdict(list))
    for r in rs.results:
        if r.status == "ok":
            bench, items, noise, mpi = point_key(r)
            by_bench[bench][(mpi, noise, items)].append(r)
    out = {}
    for bench, groups in sorted(by_bench.items()):
        # The point's params, and whatever else of its identity differs between rows.
        param_names = {k for rr in groups.values() for r in rr for k in r.params}
        shown = param_names | set(varying([dict(items) for _, _, items in groups]))
        metrics = []
        for rr in groups.values():
            for m in (rr[0].record.get("metrics") or {}):
                if m not in metrics:
                    metrics.append(m)
        metrics = metrics[:6]
        header = ["MPI", "noise", "parameters"] + metrics + ["repeats"]
        rows = []
        for (mpi, noise, params), rr in sorted(groups.items(), key=lambda kv: _sort_key(kv[0])):
            row = [mpi, noise, ", ".join(f"{k}={fmt_size(v) if k == 'size_bytes' else v}" for k, v in params
                                         if k in shown)]
            for m in metrics:
                c = combine(rr, m)
                row.append("" if c is None else f"{fmt_num(c.median)} (no valid CI)" if math.isnan(c.ci_lo)
                           else f"{fmt_num(c.median)} [{fmt_num(c.ci_lo)}, {fmt_num(c.ci_hi)}]")
            row.append(str(len(rr)))
            rows.append(row)
        out[bench] = (header, rows)
    return out


def _sort_key(k):
    mpi, noise, params = k
    return (mpi, noise, tuple((n, int(v)) if v.lstrip("-").isdigit() else (n, v) for n, v in params))


# ------------------------------------------------------------------ rendering

def build(rs: ResultSet, outdir: Path, embed: bool = False) -> dict:
    """Write figures, report.md and report.html into outdir; returns their paths."""
    outdir.mkdir(parents=True, exist_ok=True)
    sections = []   # (title, figures, section tables [(title, header, rows, note)])
    for title, maker, table_maker in (("Partitioned point-to-point (part)", part_figures, None),
                                      ("Asynchronous progress and overlap (async)", async_figures, None),
                                      ("Multithreaded communication (mt)", mt_figures, mt_tables),
                                      ("Point-to-point baselines (p2p)", p2p_figures, None)):
        figs = maker(rs, outdir)
        for f in figs:
            if f.oversubscribed:
                f.reading += OVERSUBSCRIBED_NOTE
        section_tables = table_maker(rs) if table_maker else []
        if figs or section_tables:
            sections.append((title, figs, section_tables))
    tables = [
        ("Environment", ["bench", "library", "ranks", "threads", "binding", "oversubscribed",
                         "hosts", "git", "runs"], environment_rows(rs)),
        ("Unsupported", ["bench", "MPI", "status", "reason", "points"], unsupported_rows(rs)),
        ("Failures", ["bench", "kind", "where", "message"], failure_rows(rs)),
    ]
    per_bench = results_rows(rs)
    md = _markdown(rs, sections, tables, per_bench)
    page = _html(rs, sections, tables, per_bench, outdir, embed)
    (outdir / "report.md").write_text(md)
    (outdir / "report.html").write_text(page)
    return {"md": outdir / "report.md", "html": outdir / "report.html",
            "figures": [outdir / f.png for _, figs, _ in sections for f in figs],
            "readings": [(f.title, f.question, f.reading) for _, figs, _ in sections for f in figs]}


def _summary_line(rs: ResultSet) -> str:
    ok = sum(r.status == "ok" for r in rs.results)
    return (f"{len(rs.results)} results ({ok} ok) from {len(rs.runs)} runs in "
            f"{', '.join(Path(s).name for s in rs.sources)}; generated by hmb {__version__}.")


def _md_table(header, rows) -> str:
    if not rows:
        return "_none_\n"
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(map(esc, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(esc, row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _markdown(rs, sections, tables, per_bench) -> str:
    out = ["# HMB report", "", _summary_line(rs), ""]
    for title, figs, section_tables in sections:
        out += [f"## {title}", ""]
        for f in figs:
            out += [f"### {f.title}", "", f"**Question:** {f.question}", "",
                    f"![{f.title}]({f.png})", "", f"**Reading:** {f.reading}", "",
                    f"([SVG]({f.svg}))", ""]
        for table_title, header, rows, note in section_tables:
            out += [f"### {table_title}", "", _md_table(header, rows), note, ""]
    for title, header, rows in tables:
        out += [f"## {title}", "", _md_table(header, rows)]
    out += ["## All results (median [95% CI])", ""]
    for bench, (header, rows) in per_bench.items():
        out += [f"### {bench}", "", _md_table(header, rows)]
    return "\n".join(out)


CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
h1,h2{border-bottom:1px solid #ddd}.q{font-weight:600}.reading{background:#f3f6fa;padding:.5em;border-left:4px solid #4a7}
img{max-width:100%}table{border-collapse:collapse;font-size:85%;margin-bottom:1em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#eee}"""


def _html_table(header, rows) -> str:
    if not rows:
        return "<p><em>none</em></p>"
    h = "".join(f"<th>{html.escape(str(c))}</th>" for c in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def _html(rs, sections, tables, per_bench, outdir: Path, embed: bool) -> str:
    e = html.escape
    out = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>HMB report</title>",
           f"<style>{CSS}</style></head><body><h1>HMB report</h1><p>{e(_summary_line(rs))}</p>"]
    for title, figs, section_tables in sections:
        out.append(f"<h2>{e(title)}</h2>")
        for f in figs:
            src = f.png
            if embed:
                src = "data:image/png;base64," + base64.b64encode((outdir / f.png).read_bytes()).decode()
            out.append(f"<h3>{e(f.title)}</h3><p class='q'>Question: {e(f.question)}</p>"
                       f"<img src='{src}' alt='{e(f.title)}'>"
                       f"<p class='reading'>Reading: {e(f.reading)}</p>"
                       f"<p><a href='{f.svg}'>SVG</a></p>")
        for table_title, header, rows, note in section_tables:
            out.append(f"<h3>{e(table_title)}</h3>{_html_table(header, rows)}<p>{e(note)}</p>")
    for title, header, rows in tables:
        out.append(f"<h2>{e(title)}</h2>{_html_table(header, rows)}")
    out.append("<h2>All results (median [95% CI])</h2>")
    for bench, (header, rows) in per_bench.items():
        out.append(f"<h3>{e(bench)}</h3>{_html_table(header, rows)}")
    out.append("</body></html>")
    return "\n".join(out)
