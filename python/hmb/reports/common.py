"""Shared grouping, drawing and readings for the per-benchmark report modules.

Repeats of a point are combined (median of medians; spread drawn as an error bar); the band
is the 95% CI of the median (with repeats: the range of their medians, at least one repeat's
CI); oversubscribed points have hollow markers. Results that differ in their identity
(results.identity) are never merged: a figure that does not show such a difference splits the
line and names it in the label. Readings use the lines' structured fields (Line.detail,
color_key, points), never their labels.
"""
from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.fonttype"] = "none"   # SVG text stays text: searchable, editable in slides
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from ..results import (IDENTITY_ABSENT, Result, ResultSet, clip_text, combine, context_text, fmt_num, fmt_size,  # noqa: E402
                       identity, run_context, varying)

COLORS = plt.get_cmap("tab10").colors


STYLES = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D")]


@dataclasses.dataclass
class Line:
    label: str
    color_key: object
    mpi: str
    points: list        # (x, Combined), sorted by x
    extra: str = ""     # ", name=value" of identity items that tell this line from the others
    detail: str = ""    # what the line is besides its MPI ("4 partitions", "thread"), extra included
    context: frozenset = frozenset()   # run_context of its results: the footer naming library and machine


@dataclasses.dataclass
class Figure:
    name: str
    title: str
    question: str
    reading: str
    png: str = ""
    svg: str = ""
    oversubscribed: bool = False


def ok_results(rs: ResultSet, bench: str) -> list[Result]:
    return [r for r in rs.results if r.bench == bench and r.status == "ok"]


def lines_of(results, metric, line_key, x_of, label_of, x_names=("size_bytes",), shown=()) -> list[Line]:
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
            extra = "".join(f", {k}={rest_of[key].get(k, IDENTITY_ABSENT.get(k))}" for k in differing
                            if k in rest_of[key] or k in IDENTITY_ABSENT)
            color_key = key[0][1:] + ((extra,) if extra else ())
            detail = label_of(first) + extra
            context = frozenset(run_context(r.run) for rs_x in groups[key].values() for r in rs_x)
            lines.append(Line(f"{first.mpi}, {detail}", color_key, first.mpi, pts, extra, detail, context))
    return lines


def size_of(r: Result):
    v = r.params.get("size_bytes")
    return int(v) if v is not None else None


def int_param(r: Result, name: str, default=None):
    v = r.params.get(name, default)
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def draw(fig_name: str, panels: list, xlabel: str, ylabel: str, outdir: Path, *,
          xsize=True, ylog=False, yref=None, ylim=None, yfloor=None,
          color_order=None, sharey=True) -> tuple[str, str, bool]:
    """panels: [(title, [Line])]. Writes PNG and SVG; returns their paths relative to outdir
    and whether any point was oversubscribed. color_order: colour keys in a fixed order, so
    that two figures give the same thing the same colour. sharey=False: panels of different
    quantities, each on its own scale (the titles name the units); ylog may then be a list,
    one flag per panel."""
    mpis = sorted({ln.mpi for _, lines in panels for ln in lines})
    color_keys = sorted({ln.color_key for _, lines in panels for ln in lines}, key=str)
    if color_order:
        color_keys = list(color_order) + [k for k in color_keys if k not in color_order]
    color_of = {k: COLORS[i % len(COLORS)] for i, k in enumerate(color_keys)}
    style_of = {m: STYLES[i % len(STYLES)] for i, m in enumerate(mpis)}
    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 4.0), squeeze=False, sharey=sharey)
    any_over = False
    handles = {}
    for i, (ax, (title, lines)) in enumerate(zip(axes[0], panels)):
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
            handles.setdefault(clip_text(ln.label), Line2D([], [], color=color, linestyle=linestyle, marker=marker))
        ax.set_title(clip_text(title), fontsize=10)
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
        if (ylog[i] if isinstance(ylog, (list, tuple)) else ylog):
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
    contexts = {c for _, lines in panels for ln in lines for c in ln.context}
    if contexts:   # a figure copied into slides keeps its library versions and machine
        fig.text(0.01, -0.02, context_text((clip_text(c[0]) for c in contexts), (clip_text(h) for c in contexts for h in c[1]),
                                           (c[2] for c in contexts)),
                 fontsize=7, color="dimgrey", ha="left", va="top")
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


OVERSUBSCRIBED_NOTE = (" Hollow points ran oversubscribed (ranks × threads > cores): "
                       "their timings are distorted.")


def per_mpi(lines: list[Line]) -> dict:
    out = defaultdict(list)
    for ln in lines:
        out[ln.mpi].append(ln)
    return out


def reading_extreme(lines: list[Line], what: str, unit: str = "", best_high=True) -> str:
    out = []
    for mpi, mlines in sorted(per_mpi(lines).items()):
        pts = [(c.median, x, ln) for ln in mlines for x, c in ln.points]
        v, x, ln = (max if best_high else min)(pts, key=lambda t: t[0])
        out.append(f"{mpi} {what} {fmt_num(v)}{unit} ({fmt_size(x)}, {ln.detail})")
    return "; ".join(out) + "."


def reading_modes(lines: list[Line], unit: str, what: str, x_fmt=fmt_size) -> str:
    """At each MPI's largest x: modes ranked best first."""
    out = []
    for mpi, mlines in sorted(per_mpi(lines).items()):
        xmax = max(x for ln in mlines for x, _ in ln.points)
        at = sorted(((c.median, ln.detail) for ln in mlines
                     for x, c in ln.points if x == xmax), reverse=True)
        out.append(f"{mpi} at {x_fmt(xmax)}: " + ", ".join(f"{m} {fmt_num(v)}{unit}" for v, m in at))
    return f"{what} " + "; ".join(out) + "."


def per_noise(read: list, reader) -> str:
    """One reading per noise panel, each naming its noise model (a single panel: as is)."""
    if len(read) == 1 and read[0][0] == "none":
        return reader(read[0][1])
    return " ".join(f"Noise {noise}: {reader(lines)}" for noise, lines in read)

