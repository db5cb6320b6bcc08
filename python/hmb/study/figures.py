"""The one figure engine of the studies: a declared figure + the tidy table → matplotlib.

A figure ([[figure]] in a study file) declares: `bench`, `y` (a metric), `x` (a column),
`panels` and `hue` (columns: one subplot per panel value, one line per hue value; the MPI is
always part of the line), `where` (column filters), `logx`/`logy`, `ref` (horizontal reference
lines: [{y, label}]), `ylabel`, `xlabel`. Each point is the median over its launches; the
band spans the launches' CIs, a bar the range of their medians. Points that are oversubscribed
or whose progress thread shares a compute core are drawn hollow and dashed and named so in the
legend: never a solid reading. The footer names the library versions and the machine.
"""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator  # noqa: E402

from ..results import clip_text, context_text, fmt_num, fmt_size, md_text  # noqa: E402
from .claims import select  # noqa: E402

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
          "#7f7f7f", "#bcbd22"]
MPI_STYLES = ["-", "--", ":", "-."]
SIZE_COLUMNS = ("size_bytes",)


def _xfmt(col: str):
    if col in SIZE_COLUMNS:
        return lambda v: fmt_size(v) if float(v).is_integer() and v >= 1 else f"{v:g}"
    return lambda v: f"{v:g}" if isinstance(v, (int, float)) else str(v)


PANEL = "_panel"   # the column panelled() adds when `panels` names several columns


def panelled(rows, panels, labels: dict | None = None):
    """(rows, panel column, panel values in order) for `panels`: one column, or a list of
    columns (a panel per combination: seed004's tables per scale and progress mode)."""
    if not panels:
        return rows, None, [None]
    if not isinstance(panels, list):
        return rows, panels, sorted(rows[panels].dropna().astype(str).unique(), key=_sortkey)
    if not set(panels) <= set(rows.columns):
        return rows.iloc[0:0], None, [None]
    combos = sorted({tuple(str(v) for v in t) for t in rows[panels].dropna().itertuples(index=False)},
                    key=lambda t: [_sortkey(v) for v in t])
    name = {t: ", ".join(_label(c, v, labels) for c, v in zip(panels, t)) for t in combos}
    key = rows[panels].astype(str).apply(lambda r: name.get(tuple(r), ""), axis=1)
    return rows.assign(**{PANEL: key}), PANEL, [name[t] for t in combos]


def _label(col: str, value, labels: dict | None = None) -> str:
    return clip_text(_label_text(col, value, labels))


def _label_text(col: str, value, labels: dict | None = None) -> str:
    if col == PANEL:
        return str(value)
    if labels and str(value) in labels:
        return labels[str(value)]
    if col == "metric":
        return str(value)
    if col in SIZE_COLUMNS:
        try:
            return f"{fmt_size(float(value))}"
        except (TypeError, ValueError):
            pass
    n = _num(value)
    return f"{col}={n:g}" if n is not None else f"{col}={value}"


def _num(v):
    try:
        f = float(v)
        return f if math.isfinite(f) else None
    except (TypeError, ValueError):
        return None


def context_line(df) -> str:
    """Library versions and machine of the rows drawn: a figure keeps its context when copied."""
    return context_text((clip_text(" ".join(str(v).split())) for v in df["library"].dropna()),
                        (h for v in df["host"].dropna() for h in str(v).split(",")),
                        (df["cpus"].dropna() if "cpus" in df else ()))


def points(rows, x: str):
    """[(x, median over launches, lo, hi, spread lo, spread hi, launches, not_solid)] sorted by x."""
    out = []
    for xv, g in rows.groupby(x, sort=False):
        xn = _num(xv)
        if xn is None:
            continue
        meds = g["median"].astype(float)
        bad = bool(g["oversubscribed"].astype(bool).any() or (g["progress_shares_core"] == True).any())  # noqa: E712
        lo = g["ci_lo"].astype(float).min()
        hi = g["ci_hi"].astype(float).max()
        out.append((xn, float(meds.median()), lo, hi, float(meds.min()), float(meds.max()),
                    g["run_id"].nunique(), bad))
    return sorted(out)


def draw(fig: dict, df, outdir: Path, title_prefix: str = "") -> tuple[Path | None, str]:
    """Draw one declared figure from the tidy table into outdir/ID.png; returns (the path, or
    None when no row matches, and a one-line note)."""
    f, note = render(fig, df, title_prefix)
    if f is None:
        return None, note
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / f"{fig['id']}.png"
    f.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(f)
    return path, note


def render(fig: dict, df, title_prefix: str = ""):
    """(matplotlib Figure, note) for one declared figure, or (None, why) when no row matches."""
    rows = select(df, fig.get("bench"), fig["y"], fig.get("where"))
    if rows is None or rows.empty or fig["x"] not in rows.columns:
        return None, f"{fig['number']}: no results for this figure"
    hue_col, x = fig.get("hue"), fig["x"]
    if isinstance(fig["y"], list):    # several metrics on one axis: one line each
        hue_col = "metric"
    rows, panel_col, panel_vals = panelled(rows, fig.get("panels"), fig.get("labels"))
    n = len(panel_vals)
    f, axes = plt.subplots(1, n, figsize=(4.8 * n + 1.5, 4.0), squeeze=False, sharey=True)
    hue_vals = sorted(rows[hue_col].dropna().astype(str).unique(), key=_sortkey) if hue_col else [None]
    mpis = sorted(rows["mpi"].unique())
    handles, any_bad, any_spread, any_band = {}, False, False, False
    solid_y, hollow_pts = [], []    # what sets the y range; points that are no reading, per axes
    xfmt = _xfmt(x)
    # One x value in the whole figure (a --fit run left one thread count): each line gets its own
    # slot on the x axis, named by the line, so points are not stacked on one tick.
    x_values = {v for v in (_num(u) for u in rows[x].dropna().unique()) if v is not None}
    one_x = next(iter(x_values)) if len(x_values) == 1 else None
    for ax, pv in zip(axes[0], panel_vals):
        sub = rows if pv is None else rows[rows[panel_col].astype(str) == pv]
        xs_all, slots = set(), []
        for hi_, hv in enumerate(hue_vals):
            hsub = sub if hv is None else sub[sub[hue_col].astype(str) == hv]
            for mi, m in enumerate(mpis):
                pts = points(hsub[hsub["mpi"] == m], x)
                if not pts:
                    continue
                color, ls = COLORS[hi_ % len(COLORS)], MPI_STYLES[mi % len(MPI_STYLES)]
                label = ", ".join(s for s in (clip_text(m) if len(mpis) > 1 else "",
                                              _label(hue_col, hv, fig.get("labels")) if hv is not None else "")
                                  if s) or clip_text(m)
                if one_x is not None:
                    pts = [(float(len(slots)), *p[1:]) for p in pts]
                    slots.append(label)
                xs = [p[0] for p in pts]
                xs_all.update(xs)
                solid = [p for p in pts if not p[7]]
                ax.plot(xs, [p[1] for p in pts], linestyle=ls if solid else "--", color=color, linewidth=1.5,
                        label=label, alpha=1.0 if solid else 0.6)
                for p in pts:
                    ax.plot([p[0]], [p[1]], marker="o", color=color, markersize=5, linestyle="none",
                            markerfacecolor="white" if p[7] else color)
                    any_bad |= p[7]
                    if p[7]:
                        hollow_pts.append((ax, p[0], p[1], color))
                    else:
                        solid_y.extend(v for v in (p[1], p[4], p[5]) if math.isfinite(v))
                    if p[6] > 1 and p[5] > p[4]:
                        any_spread = True
                        ax.errorbar([p[0]], [p[1]], yerr=[[p[1] - p[4]], [p[5] - p[1]]], color=color,
                                    capsize=3, linewidth=0.9)
                band = [(p[0], p[2], p[3]) for p in pts if not (math.isnan(p[2]) or math.isnan(p[3]))]
                if len(band) > 1:
                    any_band = True
                    ax.fill_between([b[0] for b in band], [b[1] for b in band], [b[2] for b in band],
                                    color=color, alpha=0.12, linewidth=0)
                handles.setdefault(label, Line2D([], [], color=color, linestyle=ls, marker="o"))
        if one_x is not None:
            ticks = list(range(len(slots)))
            ax.xaxis.set_major_locator(FixedLocator(ticks))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p, s=slots: s[int(round(v))]
                                                       if 0 <= round(v) < len(s) else ""))
            ax.set_xlim(-0.6, len(slots) - 0.4)
        elif fig.get("logx", x in SIZE_COLUMNS) and xs_all and min(xs_all) > 0:
            ax.set_xscale("log", base=2)
        ticks = sorted(xs_all) if one_x is None else ticks
        if len(ticks) > 10:   # readable: at most ~10 labels, always the first and last point
            step = math.ceil(len(ticks) / 10)
            ticks = ticks[::step] + ([ticks[-1]] if (len(ticks) - 1) % step else [])
        if one_x is None:
            ax.xaxis.set_major_locator(FixedLocator(ticks))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: xfmt(v)))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
        if fig.get("logy"):
            ax.set_yscale("log")
        for ref in fig.get("ref", []):
            ax.axhline(ref["y"], color="grey", linewidth=0.9, linestyle=":")
            ax.annotate(clip_text(ref.get("label", fmt_num(ref["y"]))), (0.01, ref["y"]), xycoords=("axes fraction", "data"),
                        fontsize=7, color="grey", va="bottom")
        xlabel = clip_text(fig.get("xlabel", "message size (bytes)" if x in SIZE_COLUMNS else x))
        ax.set_xlabel(xlabel if one_x is None else f"{xlabel}: {xfmt(one_x)} (the only value in this run)")
        ax.set_title(_label(panel_col, pv, fig.get("labels")) if pv is not None else "", fontsize=9)
        ax.grid(True, alpha=0.3)
        plt.setp(ax.get_xticklabels(), rotation=45 if len(ticks) > 6 or (one_x is not None and len(ticks) > 2) else 0,
                 fontsize=8, ha="right" if one_x is not None and len(ticks) > 2 else "center")
    _clip_to_readings(axes[0][0], solid_y + [r["y"] for r in fig.get("ref", [])], hollow_pts,
                      bool(fig.get("logy")))
    ylabel = fig.get("ylabel") or (f"{fig['y']} ({rows['unit'].iloc[0]})" if isinstance(fig["y"], str)
                                   else f"{rows['unit'].iloc[0]}")
    axes[0][0].set_ylabel(clip_text(ylabel))
    f.suptitle(clip_text(f"{title_prefix}{fig['number']}: {fig['title']}", 160), fontsize=10)
    extra = []
    if any_bad:
        extra.append(Line2D([], [], color="black", marker="o", markerfacecolor="white", linestyle="--",
                            label="hollow, dashed: oversubscribed or progress thread on a compute core (not a reading)"))
    if any_spread:
        extra.append(Line2D([], [], color="black", marker="|", linestyle="none", label="bar: range over launches"))
    if any_band:
        extra.append(Patch(facecolor="grey", alpha=0.25, linewidth=0,
                           label="band: 95% CI, lowest to highest bound over launches"))
    f.legend(list(handles.values()) + extra, list(handles) + [e.get_label() for e in extra],
             loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    f.text(0.01, -0.02, context_line(rows), fontsize=7, color="dimgrey", ha="left", va="top")
    f.tight_layout()
    note = f"{fig['number']}: {len(rows)} rows, {rows['run_id'].nunique()} launches"
    if any_bad:
        note += "; some points hollow (oversubscribed or progress thread sharing a compute core)"
    return f, note


def _clip_to_readings(ax, keep: list, hollow: list, logy: bool) -> None:
    """The shared y range covers the readings (solid points, their launch ranges, reference
    lines); a point that is no reading (hollow) beyond it is drawn at the edge as a triangle
    with its value, so an oversubscribed -250000 % does not flatten every reading to a line."""
    if not keep or not hollow:
        return
    lo, hi = min(keep), max(keep)
    if logy:
        if lo <= 0:
            return
        pad = (hi / lo) ** 0.08
        lo, hi = lo / pad, hi * pad
    else:
        pad = 0.08 * (hi - lo or abs(hi) or 1.0)
        lo, hi = lo - pad, hi + pad
    outside = [h for h in hollow if not lo <= h[2] <= hi]
    if not outside:
        return
    ax.set_ylim(lo, hi)   # shared: every panel
    for a, xv, yv, color in outside:
        edge = lo if yv < lo else hi
        a.plot([xv], [edge], marker="v" if yv < lo else "^", color=color, markerfacecolor="white",
               linestyle="none", clip_on=False)
        a.annotate(fmt_num(yv), (xv, edge), textcoords="offset points", xytext=(4, 3 if yv < lo else -9),
                   fontsize=7, color=color)


def _sortkey(v):
    n = _num(v)
    return (0, n, "") if n is not None else (1, 0.0, str(v))


def table(decl: dict, df) -> str:
    """A declared table ([[table]]: `rows` metrics × `columns` values, one block per `panels`
    value and MPI) as markdown; each cell the median over launches, marked † where the point is
    oversubscribed or its progress thread shares a compute core (not a reading). `resources`:
    recorded fields of the same points (communicators, vmrss_kib: no timing) as further rows."""
    rows = select(df, decl.get("bench"), decl["rows"], decl.get("where"))
    head = f"**{md_text(decl['number'])}: {md_text(decl['title'])}**"
    if rows is None or rows.empty or decl["columns"] not in rows.columns:
        return f"{head}\n\n{md_text(decl['number'])}: no results for this table\n"
    col, labels = decl["columns"], decl.get("labels") or {}
    rows, panel_col, panel_vals = panelled(rows, decl.get("panels"), labels)
    cols = sorted({v for v in rows[col].dropna().unique()}, key=_sortkey)
    fmt = _xfmt(col)
    colname = md_text(decl.get("column_label", col))
    out, any_bad = [head, "", md_text(context_line(rows)), ""], False
    for m in sorted(rows["mpi"].unique()):
        for pv in panel_vals:
            sub = rows[rows["mpi"] == m]
            if pv is not None:
                sub = sub[sub[panel_col].astype(str) == pv]
            if sub.empty:
                continue
            title = md_text(f"{m}" + (f", {_label(panel_col, pv, labels)}" if pv is not None else ""))
            out += [f"*{title}*", "", f"| {colname} | " + " | ".join(
                fmt(_num(c)) if _num(c) is not None else md_text(clip_text(c)) for c in cols) + " |",
                "|---|" + "---|" * len(cols)]
            for metric in decl["rows"]:
                cells = []
                for c in cols:
                    g = sub[(sub["metric"] == metric) & (sub[col] == c)]
                    if g.empty:
                        cells.append("–")
                        continue
                    bad = bool(g["oversubscribed"].astype(bool).any() or (g["progress_shares_core"] == True).any())  # noqa: E712
                    any_bad |= bad
                    cells.append(fmt_num(float(g["median"].astype(float).median())) + ("†" if bad else ""))
                unit = sub[sub["metric"] == metric]["unit"]
                name = md_text(labels.get(metric, metric) + (f" ({unit.iloc[0]})" if len(unit) else ""))
                out.append(f"| {name} | " + " | ".join(cells) + " |")
            for field in decl.get("resources", []):
                vals = [sub[sub[col] == c][field].astype(float).dropna() if field in sub.columns else () for c in cols]
                out.append(f"| {md_text(labels.get(field, field))} | " + " | ".join(
                    "–" if not len(v) else f"{v.median():.0f}" if float(v.median()).is_integer()
                    else fmt_num(float(v.median())) for v in vals) + " |")
            out.append("")
    if any_bad:
        out.append("† oversubscribed, or the progress thread shares a compute core: not a reading.")
    return "\n".join(out) + "\n"
