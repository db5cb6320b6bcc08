"""The one figure engine: a declared figure + the tidy table → matplotlib. The studies
([[figure]] in a study file: study/figures.py), the report (hmb.reports: each benchmark's
declared figures, reports/figures.toml) and `hmb project` declare their figures alike and draw
them here.

A figure declares: `bench`, `y` (a metric; a list of metrics; or a name with `{mode}`, one metric
per exchange mode the benchmark's descriptor lists, e.g. "throughput_{mode}_MBps"), `x` (a
column, or a list of columns: the first that has a value in a row, e.g. mt's
["everywhere_processes", "threads"]), `panels` and `hue` (columns: one subplot per panel value,
one line per hue value; "metric" when y lists several; the MPI is always part of the line),
`where` (column filters), `layers` (further selections [{bench, y, where}] drawn in the same
figure, e.g. another benchmark's metric in a panel of its own), `logx`/`logy` (logy may list the
panel values drawn on a log scale), `sharey` (default true), `ymin`/`ymax` (bounds the axis never
passes: a point beyond sits at the edge as a triangle with its value), `min_x` (draw only when x
holds that many values: a figure "by process count" of one process count says nothing), `ref` (horizontal reference
lines: [{y, label}]), `ylabel`, `xlabel`, `labels` (value → legend or panel text), `hue_order`
(the order, and so the colours, of the hue values), `number`, `title` and `footer` (said after
the library versions and machine of the rows drawn: where numbers not measured came from).

A line never merges points that differ in their identity (tidy.point_columns): where two points
of a line would share an x, the line splits by the columns they differ in and its label names
them ("none, ranks=4"). Each point is the median over its launches (tidy.over_launches: the
one launch_median); the band is tidy.band (the launches' 95% CIs, lowest to highest bound), a
bar the range of their medians. Points that are no reading (tidy.is_no_reading: oversubscribed,
or a progress thread on a compute core) are
drawn hollow and dashed and named so in the legend. The footer names the library versions and
the machine. plan() gives the lines drawn (for a report's reading), render() the figure.
"""
from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import matplotlib
import pandas as pd

matplotlib.use("Agg")
matplotlib.rcParams["svg.fonttype"] = "none"   # SVG text stays text: searchable, editable in slides
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator  # noqa: E402

from ..data import tidy  # noqa: E402
from ..data.descriptors import local  # noqa: E402
from ..data.tidy import select  # noqa: E402
from .format import clip_text, context_text, fmt_num, fmt_size  # noqa: E402

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
          "#7f7f7f", "#bcbd22"]
MPI_STYLES = ["-", "--", ":", "-."]
SIZE_COLUMNS = ("size_bytes",)
X = "_x"          # the x value of a row (the first of the declared x columns with a value)
NO_READING = "_no_reading"   # the row is no reading (tidy.no_reading), once per figure
MODE = "{mode}"   # in a y name: one metric per mode of the benchmark's descriptor
PANEL = "_panel"  # a row's panel when `panels` names several columns (panelled)


@dataclasses.dataclass
class Point:
    x: float
    median: float        # median over the point's launches (tidy.launch_median)
    lo: float            # band (tidy.band); NaN: no valid CI
    hi: float
    spread_lo: float     # lowest and highest launch median
    spread_hi: float
    launches: int
    reading: bool        # False: some launch is no reading (tidy.is_no_reading)
    launch_medians: tuple = ()   # each launch's median, in the order of the results


@dataclasses.dataclass
class Line:
    mpi: str
    hue: str | None      # the hue value (text); None without hue
    name: str            # what the line is besides its MPI ("partitions=4, ranks=2"), as labelled
    split: tuple         # ((column, value), ...): identity items it was split by
    points: list
    label: str = ""      # the legend's label

    @property
    def reading_points(self) -> list:
        return [p for p in self.points if p.reading]


@dataclasses.dataclass
class Panel:
    value: str | None
    title: str
    lines: list
    unit: str = ""


@dataclasses.dataclass
class Plan:
    """What a figure draws: its rows, its panels with their lines, and whether x has one value."""
    fig: dict
    rows: object
    panels: list
    one_x: float | None

    def lines(self) -> list:
        return [ln for p in self.panels for ln in p.lines]


def value_format(col: str):
    """How the values of a column are written on an axis (sizes as 4K, 1M)."""
    if col in SIZE_COLUMNS:
        return lambda v: fmt_size(v) if float(v).is_integer() and v >= 1 else f"{v:g}"
    return lambda v: f"{v:g}" if isinstance(v, (int, float)) else str(v)


def value_label(col: str, value, labels: dict | None = None, fmt: str | None = None) -> str:
    """A value as a legend or panel names it: its label, else fmt with the value, else col=value
    (clipped: a 100,000-character label from a results file stays one line)."""
    return clip_text(_value_text(col, value, labels, fmt))


def _value_text(col: str, value, labels: dict | None, fmt: str | None) -> str:
    if col == PANEL:    # already labelled (panelled)
        return str(value)
    n = as_number(value)
    for key in (str(value), f"{n:g}" if n is not None else None):   # 1.0 is labelled as 1
        if labels and key in labels:
            return labels[key]
    if col == "metric":
        return str(value)
    if fmt:
        return fmt.replace("{}", f"{n:g}" if n is not None else str(value))
    if col in SIZE_COLUMNS:
        try:
            return f"{fmt_size(float(value))}"
        except (TypeError, ValueError):
            pass
    n = as_number(value)
    return f"{col}={n:g}" if n is not None else f"{col}={value}"


def as_number(v):
    """The value as a finite float, or None."""
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


def choices(bench: str | None, column: str | None, described: dict | None) -> list:
    """The values the benchmark's descriptor lists for the option behind a column (its mode
    option: the exchange modes), in the descriptor's order; [] when it lists none."""
    if not bench or not column:
        return []
    if described is None:
        described = local()
    desc = (described or {}).get(bench)
    opt = desc.option(column.replace("_", "-")) or desc.option(column) if desc else None
    return list(opt.choices or ()) if opt else []


def modes(bench: str | None, described: dict | None) -> list:
    """A benchmark's paired modes as its descriptor lists them: (name, the metrics it adds), in its
    order (--describe `modes`); from a descriptor without them, its --mode choices with no
    metrics known."""
    if described is None:
        described = local()
    desc = (described or {}).get(bench) if bench else None
    if desc is not None and desc.modes:
        return [(m.name, set(m.metrics)) for m in desc.modes]
    return [(name, None) for name in choices(bench, "mode", described)]


def expand(fig: dict, df, described: dict | None = None) -> dict:
    """The declaration with a `{mode}` y resolved: one metric per mode of the benchmark's
    descriptor that adds it (--describe `modes`), in the descriptor's order and labelled by its
    mode (without a descriptor: the modes the table's metric names hold); hue "metric" in that
    order unless declared."""
    y = fig.get("y")
    if not isinstance(y, str) or MODE not in y:
        return fig
    present = set(df["metric"].unique()) if df is not None and not df.empty else set()
    names = [(y.replace(MODE, mode), mode, adds) for mode, adds in modes(fig.get("bench"), described)]
    names = [(n, mode) for n, mode, adds in names if (n in adds if adds is not None else n in present)]
    if not names:   # no descriptor: the modes the table's metric names hold
        pat = re.compile("^" + re.escape(y).replace(re.escape(MODE), "(.+)") + "$")
        names = sorted((m.group(0), m.group(1)) for m in map(pat.match, present) if m)
    out = {**fig, "y": [n for n, _ in names],
           "labels": {**{n: mode for n, mode in names}, **fig.get("labels", {})}}
    if not fig.get("panels") == "metric":
        out.setdefault("hue", "metric")
        out.setdefault("hue_order", [n for n, _ in names])
    return out


def panelled(rows, panels, labels: dict | None = None):
    """(rows, panel column, panel values in order or None) for `panels`: None or one column as
    they are; a list of columns gives a panel per combination of their values, in numeric order
    (seed004's tables per scale and progress mode), named by its labelled values in column PANEL;
    rows without a value in one of them are in no panel."""
    if not isinstance(panels, list):
        return rows, panels, None
    if rows.empty or not set(panels) <= set(rows.columns):
        return rows.iloc[0:0].assign(**{PANEL: ""}), PANEL, []
    combos = sorted({tuple(str(v) for v in t) for t in rows[panels].dropna().itertuples(index=False)},
                    key=lambda t: [sort_key(v) for v in t])
    name = {t: ", ".join(value_label(c, v, labels) for c, v in zip(panels, t)) for t in combos}
    key = [name.get(tuple(str(v) for v in t), "") for t in rows[panels].itertuples(index=False)]
    rows = rows.assign(**{PANEL: key})
    return rows[rows[PANEL] != ""], PANEL, [name[t] for t in combos]


def _rows(fig: dict, df):
    """The declaration's rows (its layers' too), with the x value of each in column X."""
    parts = [select(df, layer.get("bench"), layer.get("y"), layer.get("where"))
             for layer in [fig] + list(fig.get("layers", []))]
    parts = [p for p in parts if p is not None and not p.empty]
    if not parts:
        return None
    rows = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    xs = fig["x"] if isinstance(fig["x"], list) else [fig["x"]]
    xs = [c for c in xs if c in rows.columns]
    if not xs:
        return None
    x = rows[xs[0]].map(as_number)
    for c in xs[1:]:
        x = x.where(x.notna(), rows[c].map(as_number))
    rows = rows.assign(**{X: x})[x.notna()]
    return rows.assign(**{NO_READING: tidy.no_reading(rows)})


def _order(values, declared=None) -> list:
    first = [str(v) for v in declared or () if str(v) in values]
    return first + sorted((v for v in values if v not in first), key=sort_key)


def _split_columns(group, exclude) -> list:
    """Identity columns in which two rows at one x differ: the line must split by them."""
    keys = [c for c in tidy.point_columns(group) if c not in exclude and c != NO_READING]
    if not keys or group.empty:
        return []
    keys = [c for c in keys if group[c].astype(str).nunique() > 1]   # a column one value throughout: never
    if not keys:
        return []
    counts = group[[X] + keys].astype(str).groupby(X)[keys].nunique(dropna=False)
    return [c for c in keys if (counts[c] > 1).any()]


def _points(rows) -> list:
    """One Point per x of a line's rows (the launches of one point each): tidy's Launches."""
    out = []
    for xv, g in rows.groupby(X, sort=True):
        c = tidy.Launches.of(g["median"], g["ci_lo"], g["ci_hi"], g[NO_READING])
        out.append(Point(float(xv), c.median, c.lo, c.hi, c.spread_lo, c.spread_hi, c.launches, not c.no_reading,
                         c.medians))
    return out


def _ratio(a: float, b: float) -> float:
    return a / b if b and not (math.isnan(a) or math.isnan(b)) else math.nan


def _over(points: list, ref: list) -> list:
    """Each point over the reference point at its x: the ratio of medians, its band the lowest
    over the highest and the highest over the lowest (the same for the launch range); a point
    with no reference at its x is left out."""
    at = {p.x: p for p in ref}
    return [Point(p.x, _ratio(p.median, r.median), _ratio(p.lo, r.hi), _ratio(p.hi, r.lo),
                  _ratio(p.spread_lo, r.spread_hi), _ratio(p.spread_hi, r.spread_lo), min(p.launches, r.launches),
                  p.reading and r.reading)
            for p in points if (r := at.get(p.x)) is not None and r.median]


def _line_parts(group, exclude) -> list:
    """The lines of one panel, hue value and MPI: [(identity items it is split by, its rows)], one
    line unless two points of different identity would share an x."""
    if group.empty:
        return []
    split = _split_columns(group, exclude)
    if not split:
        return [((), group)]
    parts = [(tuple(zip(split, key if isinstance(key, tuple) else (key,))), part)
             for key, part in group.groupby([group[c].astype(str) for c in split], sort=False)]
    return sorted(parts, key=lambda kv: tuple(sort_key(v) for _, v in kv[0]))


def _reference(ref_rows, mpi: str, panel_col, panel_value, items):
    """The `over` reference's rows for one line: its MPI, its panel, the items it was split by."""
    ref = ref_rows[ref_rows["mpi"] == mpi]
    if panel_value is not None:
        ref = ref[ref[panel_col].astype(str) == panel_value]
    for c, v in items:
        if c in ref:
            ref = ref[ref[c].astype(str) == v]
    return ref


def plan(fig: dict, df, described: dict | None = None) -> Plan | None:
    """The panels and lines a declared figure draws from the tidy table (None: no row matches)."""
    fig = expand(fig, df, described)
    rows = _rows(fig, df)
    if rows is None or rows.empty:
        return None
    over, ref_rows = fig.get("over"), None
    if over:   # the reference's rows: the figure's with the over filters; its own line is not drawn
        ref_rows = _rows({**fig, "where": {**fig.get("where", {}), **over}, "layers": []}, df)
        rows = rows[~tidy.matches(rows, over)]
        if ref_rows is None or rows.empty:
            return None
    panel_col, hue_col = fig.get("panels"), fig.get("hue")
    if isinstance(fig["y"], list) and len(fig.get("layers", [])) == 0 and panel_col != "metric" and not hue_col:
        hue_col = "metric"
    labels, bench = fig.get("labels"), fig.get("bench")
    rows, panel_col, combos = panelled(rows, panel_col, labels)   # several panel columns: one panel each combination
    if ref_rows is not None:
        ref_rows = panelled(ref_rows, fig.get("panels"), labels)[0]
    if rows.empty:
        return None
    ys = [y for part in [fig] + list(fig.get("layers", []))
          for y in (part["y"] if isinstance(part["y"], list) else [part["y"]])]

    def order(col, declared):   # declared, else the y list's for metrics, else --describe's choices
        return declared or (ys if col == "metric" else choices(bench, col, described))
    panel_vals = _order(set(rows[panel_col].dropna().astype(str)),
                        combos or order(panel_col, fig.get("panel_order"))) if panel_col else [None]
    hue_vals = _order(set(rows[hue_col].dropna().astype(str)), order(hue_col, fig.get("hue_order"))) if hue_col else [None]
    mpis = sorted(rows["mpi"].unique())
    xs = set(fig["x"] if isinstance(fig["x"], list) else [fig["x"]])
    exclude = xs | {X, "mpi", panel_col, hue_col}
    x_values = set(rows[X].unique())
    panels = []
    for pv in panel_vals:
        sub = rows if pv is None else rows[rows[panel_col].astype(str) == pv]
        lines = []
        for hv in hue_vals:
            hsub = sub if hv is None else sub[sub[hue_col].astype(str) == hv]
            for m in mpis:
                for items, part in _line_parts(hsub[hsub["mpi"] == m], exclude):
                    name = ", ".join(([value_label(hue_col, hv, labels, fig.get("hue_format"))] if hv is not None else [])
                                     + [clip_text(f"{c}={v}") for c, v in items])
                    pts = _points(part)
                    if ref_rows is not None:
                        pts = _over(pts, _points(_reference(ref_rows, m, panel_col, pv, items)))
                    if pts:
                        label = ", ".join(s for s in (clip_text(m) if len(mpis) > 1 else "", name) if s) or clip_text(m)
                        lines.append(Line(m, hv, name, items, pts, label))
        if lines:
            units = sorted(set(str(u) for u in sub["unit"].dropna()))
            title = value_label(panel_col, pv, labels) if pv is not None else ""
            panels.append(Panel(pv, title, lines, units[0] if len(units) == 1 else ""))
    if not panels or len(x_values) < fig.get("min_x", 1):
        return None
    one_x = next(iter(x_values)) if len(x_values) == 1 else None
    return Plan(fig, rows, panels, float(one_x) if one_x is not None else None)


def save(f, outdir: Path, name: str, formats=("png",)) -> list:
    """Write a rendered figure as outdir/NAME.png (and .svg ...); returns the paths."""
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = outdir / f"{name}.{fmt}"
        f.savefig(path, dpi=110, bbox_inches="tight")
        paths.append(path)
    plt.close(f)
    return paths


def _logy(fig: dict, panel: Panel) -> bool:
    v = fig.get("logy", False)
    return panel.value in [str(x) for x in v] if isinstance(v, list) else bool(v)


def render(fig: dict, df, title_prefix: str = "", plan_: Plan | None = None, described: dict | None = None):
    """(matplotlib Figure, note) for one declared figure, or (None, why) when no row matches.
    plan_: the figure's plan() when the caller has it already (a report's reading reads it too)."""
    p = plan_ or plan(fig, df, described)
    if p is None:
        return None, f"{fig.get('number') or fig['id']}: no results for this figure"
    fig, rows, one_x = p.fig, p.rows, p.one_x
    x = fig["x"][0] if isinstance(fig["x"], list) else fig["x"]
    sharey = fig.get("sharey", True)
    n = len(p.panels)
    f, axes = plt.subplots(1, n, figsize=(4.8 * n + 1.5, 4.0), squeeze=False, sharey=sharey)
    keys = []   # colour keys in order: the hue value, then how a line was split
    for panel in p.panels:
        for ln in panel.lines:
            if (ln.hue, ln.split) not in keys:
                keys.append((ln.hue, ln.split))
    hue_rank = {hv: i for i, hv in enumerate(dict.fromkeys(k[0] for k in keys))}
    keys.sort(key=lambda k: (hue_rank[k[0]], [str(v) for v in k[1]]))
    color_of = {k: COLORS[i % len(COLORS)] for i, k in enumerate(keys)}
    mpis = sorted({ln.mpi for panel in p.panels for ln in panel.lines})
    style_of = {m: MPI_STYLES[i % len(MPI_STYLES)] for i, m in enumerate(mpis)}
    handles, any_bad, any_spread, any_band = {}, False, False, False
    bands = []                # (axes, [(x, lo, hi)], colour): drawn once the y range is set
    kept, hollow = {}, {}     # per axes (or shared): y values that set the range; points that are no reading
    beyond = []               # points past ymin/ymax
    xfmt = value_format(x)
    for ax, panel in zip(axes[0], p.panels):
        scope = 0 if sharey else id(ax)
        xs_all, slots = set(), []
        for ln in panel.lines:
            color, ls = color_of[(ln.hue, ln.split)], style_of[ln.mpi]
            pts = ln.points
            if one_x is not None:
                pts = [dataclasses.replace(pt, x=float(len(slots))) for pt in pts]
                slots.append(ln.label)
            xs_all.update(pt.x for pt in pts)
            solid = [pt for pt in pts if pt.reading]
            ax.plot([pt.x for pt in pts], [pt.median for pt in pts], linestyle=ls if solid else "--", color=color,
                    linewidth=1.5, label=ln.label, alpha=1.0 if solid else 0.6)
            for reading in (True, False):   # one artist per kind of marker, not one per point
                marked = [pt for pt in pts if pt.reading == reading]
                if marked:
                    ax.plot([pt.x for pt in marked], [pt.median for pt in marked], marker="o", color=color,
                            markersize=5, linestyle="none", markerfacecolor=color if reading else "white")
            for pt in pts:
                any_bad |= not pt.reading
                if pt.reading:
                    kept.setdefault(scope, []).extend(v for v in (pt.median, pt.spread_lo, pt.spread_hi)
                                                      if math.isfinite(v))
                else:
                    hollow.setdefault(scope, []).append((ax, pt.x, pt.median, color))
                beyond.append((scope, ax, pt.x, pt.median, color, pt.reading))
            spread = [pt for pt in pts if pt.launches > 1 and pt.spread_hi > pt.spread_lo]
            if spread:   # the range of the launch medians
                any_spread = True
                ax.errorbar([pt.x for pt in spread], [pt.median for pt in spread], fmt="none", color=color,
                            yerr=[[pt.median - pt.spread_lo for pt in spread], [pt.spread_hi - pt.median for pt in spread]],
                            capsize=3, linewidth=0.9)
            band = [(pt.x, pt.lo, pt.hi) for pt in pts if math.isfinite(pt.lo) and math.isfinite(pt.hi)]
            if len(band) > 1:
                any_band = True
                bands.append((ax, band, color))
            handles.setdefault(ln.label, Line2D([], [], color=color, linestyle=ls, marker="o"))
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
        if _logy(fig, panel):
            ax.set_yscale("log")
        for ref in fig.get("ref", []):
            ax.axhline(ref["y"], color="grey", linewidth=0.9, linestyle=":")
            if ref.get("label"):
                ax.annotate(clip_text(ref["label"]), (0.01, ref["y"]), xycoords=("axes fraction", "data"),
                            fontsize=7, color="grey", va="bottom")
            kept.setdefault(scope, []).append(ref["y"])
        xlabel = clip_text(fig.get("xlabel", "message size (bytes)" if x in SIZE_COLUMNS else
                                   fig["x"][-1] if isinstance(fig["x"], list) else x))
        ax.set_xlabel(xlabel if one_x is None else f"{xlabel}: {xfmt(one_x)} (the only value in this run)")
        ax.set_title(panel.title, fontsize=9)
        if not sharey:   # a panel per quantity: its label (which names the unit), else metric (unit)
            named = fig.get("panels") == "metric" and str(panel.value) in (fig.get("labels") or {})
            ax.set_ylabel(clip_text(fig.get("ylabel") or (panel.title if named or not panel.unit
                                                          else f"{panel.title} ({panel.unit})")))
        ax.grid(True, alpha=0.3)
        plt.setp(ax.get_xticklabels(), rotation=45 if len(ticks) > 6 or (one_x is not None and len(ticks) > 2) else 0,
                 fontsize=8, ha="right" if one_x is not None and len(ticks) > 2 else "center")
    for scope in dict.fromkeys([0] if sharey else [id(a) for a in axes[0]]):
        ax0 = axes[0][0] if sharey else next(a for a in axes[0] if id(a) == scope)
        _clip(ax0, fig, kept.get(scope, []), hollow.get(scope, []),
              [b[1:] for b in beyond if b[0] == scope], ax0.get_yscale() == "log")
    wide = _draw_bands(bands)
    for ax in axes[0]:
        if ax.get_yscale() == "log":
            _plain_log_labels(ax)
    if sharey:
        units = sorted(set(str(u) for u in rows["unit"].dropna()))
        axes[0][0].set_ylabel(clip_text(fig.get("ylabel") or (f"{fig['y']} ({units[0]})" if isinstance(fig["y"], str)
                                                              and units else units[0] if len(units) == 1 else "")))
    number = fig.get("number")
    f.suptitle(clip_text(f"{title_prefix}{number + ': ' if number else ''}{fig['title']}", 160), fontsize=10)
    extra = []
    if any_bad:
        extra.append(Line2D([], [], color="black", marker="o", markerfacecolor="white", linestyle="--",
                            label="hollow, dashed: oversubscribed or progress thread on a compute core (not a reading)"))
    if any_spread:
        extra.append(Line2D([], [], color="black", marker="|", linestyle="none", label="bar: range over launches"))
    if any_band:
        extra.append(Patch(facecolor="grey", alpha=0.25, linewidth=0,
                           label="band: 95% CI, lowest to highest bound over launches"))
    if wide:
        extra.append(Line2D([], [], color="black", linestyle=":", linewidth=0.8,
                            label="dotted: a 95% CI as wide as the panel (its edges only)"))
    f.legend(list(handles.values()) + extra, list(handles) + [e.get_label() for e in extra],
             loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    context = context_line(rows) if rows["library"].astype(str).str.strip().any() else ""
    footer = " · ".join(t for t in (context, fig.get("footer", "")) if t)
    f.text(0.01, -0.02, footer or context_line(rows), fontsize=7, color="dimgrey", ha="left", va="top")
    f.tight_layout()
    launches = rows[["source", "run_id"]].drop_duplicates().shape[0]
    note = f"{number or fig['id']}: {len(rows)} rows, {launches} launches"
    if any_bad:
        note += "; some points hollow (oversubscribed or progress thread sharing a compute core)"
    return f, note


# A point that is no reading may stretch the axis up to this much beyond the readings' range
# (linear: times the readings' span; log: decades) before it is clipped to the edge.
HOLLOW_STRETCH, HOLLOW_DECADES = 10.0, 1.0


# Values beyond this magnitude are drawn at the axis' edge with their value, never spanned by it.
DRAWABLE = 1e100

# A band covering this share of its panel's y range at most of its points hides the lines under
# it: only its edges are drawn.
WIDE_BAND = 0.8


def _draw_bands(bands: list) -> bool:
    """The CI bands, once the y range is set: filled, or, where a band covers WIDE_BAND of the
    panel at most of its points (few samples a point), only its edges, dotted, so the lines and
    the launch ranges stay readable. Returns whether any band was drawn as edges."""
    wide_any = False
    for ax, band, color in bands:
        lo, hi = ax.get_ylim()
        log = ax.get_yscale() == "log"

        def pos(v):
            v = min(max(v, lo), hi)
            return math.log(v / lo) / math.log(hi / lo) if log and lo > 0 and v > 0 else (v - lo) / ((hi - lo) or 1.0)
        covered = [pos(b[2]) - pos(b[1]) for b in band]
        xs, los, his = [b[0] for b in band], [b[1] for b in band], [b[2] for b in band]
        if sum(c >= WIDE_BAND for c in covered) * 2 > len(covered):
            wide_any = True
            for edge in (los, his):
                ax.plot(xs, edge, color=color, linestyle=":", linewidth=0.8)
        else:
            ax.fill_between(xs, los, his, color=color, alpha=0.12, linewidth=0)
        if ax.get_autoscaley_on() and (lo > 0 or not log):   # no range set: the band may not set one
            ax.set_ylim(lo, hi)
    return wide_any


def _pad(lo: float, hi: float, logy: bool) -> tuple[float, float]:
    """lo..hi with a margin; where the margin would overflow (a median of 1e308), none."""
    if logy:
        pad = (hi / lo) ** 0.08
        out = (lo / pad, hi * pad)
    else:
        pad = 0.08 * (hi - lo or abs(hi) or 1.0)
        out = (lo - pad, hi + pad)
    if all(math.isfinite(v) for v in out) and out[0] < out[1]:
        return out
    if lo < hi:
        return lo, hi
    return (lo / 2, hi * 2) if logy else (lo - 1.0, hi + 1.0) if abs(lo) < 1e300 else (lo * 0.5, hi * 0.5 + lo * 0.5)


def _clip(ax, fig: dict, keep: list, hollow: list, points: list, logy: bool) -> None:
    """The y range: the readings (solid points, their launch ranges, reference lines) within the
    declared ymin/ymax, and the points that are no reading unless they would stretch it far
    beyond the readings (HOLLOW_STRETCH, HOLLOW_DECADES). A band reaching past it is cut by the
    axis (a median's CI over few samples ran to -30000 % in seed004 Fig. 1 and flattened every
    reading); a point past it (past ymin/ymax, or a far point that is no reading) is drawn at the
    edge as a triangle with its value, so an oversubscribed -250000 % flattens nothing either."""
    ymin, ymax = fig.get("ymin"), fig.get("ymax")

    def inside(v):   # beyond DRAWABLE no axis can span it (a median of 1e308): drawn at the edge
        return (ymin is None or v >= ymin) and (ymax is None or v <= ymax) and (v > 0 or not logy) \
            and abs(v) < DRAWABLE and (not logy or v > 1 / DRAWABLE)
    keep = [v for v in keep if math.isfinite(v) and inside(v)]
    near = [h for h in hollow if math.isfinite(h[2]) and inside(h[2])]
    if not keep:
        keep, near = [h[2] for h in near], []
    if not keep and not any(math.isfinite(p[2]) for p in points):
        return
    # nothing the axis can span (every value past DRAWABLE): a neutral range, each point at its edge
    lo, hi = _pad(min(keep), max(keep), logy) if keep else ((0.1, 10.0) if logy else (-1.0, 1.0))
    far = [h for h in near if not lo <= h[2] <= hi]
    if far:
        vals = [h[2] for h in far] + [lo, hi]
        if logy:
            stretch = math.log10(max(vals) / min(vals)) - math.log10(hi / lo) > HOLLOW_DECADES
        else:
            stretch = (max(vals) - min(vals)) > HOLLOW_STRETCH * (hi - lo)
        if not stretch:   # close enough to show where it is
            lo, hi = _pad(min(keep + [h[2] for h in far]), max(keep + [h[2] for h in far]), logy)
            far = []
    ax.set_ylim(lo, hi)   # shared: every panel
    outside = [(a, xv, yv, c) for a, xv, yv, c, _ in points if math.isfinite(yv) and not lo <= yv <= hi]
    for a, xv, yv, color in dict.fromkeys(outside):
        edge = lo if yv < lo else hi
        a.plot([xv], [edge], marker="v" if yv < lo else "^", color=color, markerfacecolor="white",
               linestyle="none", clip_on=False)
        a.annotate(fmt_num(yv), (xv, edge), textcoords="offset points", xytext=(4, 3 if yv < lo else -9),
                   fontsize=7, color=color)


def _axis_number(v, _pos=None) -> str:
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


def _plain_log_labels(ax) -> None:
    """A log axis labelled 2M, 500, 0.1 rather than 2 × 10^6; its minor ticks labelled too when
    the axis spans less than a decade, and at 2 and 5 up to two and a half (else an axis from 6 to
    60 reads "10" alone)."""
    lo, hi = ax.get_ylim()
    decades = math.log10(hi / lo) if lo > 0 else math.inf
    ax.yaxis.set_major_formatter(FuncFormatter(_axis_number))
    if decades < 1.0:
        ax.yaxis.set_minor_formatter(FuncFormatter(_axis_number))
    elif decades < 2.5:
        ax.yaxis.set_minor_formatter(FuncFormatter(
            lambda v, _p: _axis_number(v) if v > 0 and round(v / 10 ** math.floor(math.log10(v) + 1e-9)) in (2, 5)
            else ""))
    else:
        ax.yaxis.set_minor_formatter(NullFormatter())


def sort_key(v):
    """Numbers first, by value, then text."""
    n = as_number(v)
    return (0, n, "") if n is not None else (1, 0.0, str(v))
