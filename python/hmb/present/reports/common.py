"""Drawing a report's declared figures with the one engine (hmb.present.figures), the reading
helpers the benchmark modules write their prose with, and what their tables read of the tidy
table.

A reading reads the lines the engine drew (figures.Plan: lines with points, each the median over
its launches) and only their readings: a point that is no reading (tidy.is_no_reading:
oversubscribed, or a progress thread on a compute core) is drawn hollow and left out of the
prose; where a library has no reading at all, the prose says so.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path
from typing import Callable

from ...data import tidy
from .. import figures as engine
from ..format import fmt_num, fmt_size

NO_READING_NOTE = (" Hollow points are no reading (oversubscribed: ranks × threads > cores, or a progress "
                   "thread on a compute core): the reading leaves them out.")


@dataclasses.dataclass
class Family:
    bench: str
    title: str
    tables: Callable | None  # (tidy.Table) -> [(title, header, rows, note)]


FAMILIES: dict = {}
READINGS: dict = {}   # figure id -> (Plan, unsupported tidy rows) -> text


def register(bench: str, title: str, tables: Callable | None = None) -> None:
    FAMILIES[bench] = Family(bench, title, tables)


def reading(fig_id: str):
    """@reading("ID"): the function that writes figure ID's reading from its plan."""
    def wrap(fn):
        READINGS[fig_id] = fn
        return fn
    return wrap


@dataclasses.dataclass
class Figure:
    name: str
    title: str
    question: str
    reading: str
    png: str = ""
    svg: str = ""
    no_reading: bool = False    # some point drawn is no reading


def figure_instances(decl: dict, df) -> list[dict]:
    """The figures one declaration draws: itself, or with `per`, one per value of that column
    among its benchmark's rows (the value in its id and, as {column}, in its title)."""
    col = decl.get("per")
    if not col:
        return [decl]
    rows = df[df["bench"] == decl["bench"]] if df is not None and not df.empty else None
    if rows is None or col not in rows.columns:
        return []
    out = []
    for value in sorted(rows[col].dropna().astype(str).unique(), key=engine.sort_key):
        tag = "".join(ch if ch.isalnum() else "p" if ch == "." else "_" for ch in value)
        out.append({**decl, "id": f"{decl['id']}_{tag}", "title": decl["title"].replace(f"{{{col}}}", value),
                    "where": {**decl.get("where", {}), col: value}})
    return out


def render(decl: dict, declared_id: str, df, unsupported, described, outdir: Path) -> Figure | None:
    """Draw one figure into outdir/figures (PNG and SVG) and write its reading; None when no
    row matches."""
    plan = engine.plan(decl, df, described)
    if plan is None:
        return None
    f, _ = engine.render(decl, df, plan_=plan)
    png, svg = engine.save(f, outdir / "figures", decl["id"], ("png", "svg"))
    reader = READINGS.get(declared_id, default_reading)
    no_reading = any(not p.reading for ln in plan.lines() for p in ln.points)
    return Figure(decl["id"], decl["title"], decl["question"], reader(plan, unsupported),
                  str(png.relative_to(outdir)), str(svg.relative_to(outdir)), no_reading)


# A report's tables read the tidy table: each result record of a benchmark with the index of its
# rows (tidy.Table.records: results.Result is the record's own view, for what is no column), and a
# point's metric over its launches from those rows (value: tidy.over_launches).

def ok_results(t: tidy.Table, bench: str) -> list:
    """[(Result, index of its rows)] of the benchmark's ok results, in reading order."""
    return t.records(t.df[t.df["bench"] == bench]) if not t.df.empty else []


def value(t: tidy.Table, group: list, metric: str) -> tidy.Launches | None:
    """A point's metric over the launches of group [(Result, rows index)] (tidy.over_launches);
    None when none of them gave a median of it."""
    rows = t.df.loc[[i for _, index in group for i in index]]
    rows = rows[rows["metric"] == metric]
    c = tidy.over_launches(rows)
    return c if c.launches else None


def launch_value(t: tidy.Table, index, metric: str) -> float:
    """One launch's median of metric (its row of the tidy table; a memory reading, *_kB, from its
    column), NaN when it has none."""
    rows = t.df.loc[index]
    hit = rows[rows["metric"] == metric]
    if not hit.empty:
        return float(hit["median"].iloc[0])
    if tidy.is_reading(metric) and metric in rows.columns and rows[metric].notna().any():
        return float(rows[metric].dropna().iloc[0])
    return float("nan")


def size_of(r):
    v = r.params.get("size_bytes")
    return int(v) if v is not None else None


def int_param(r, name: str, default=None):
    v = r.params.get(name, default)
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def per_mpi(lines: list) -> dict:
    out = defaultdict(list)
    for ln in lines:
        out[ln.mpi].append(ln)
    return dict(sorted(out.items()))


def readings(lines: list) -> list:
    """(point, line) of every point that is a reading."""
    return [(p, ln) for ln in lines for p in ln.points if p.reading]


def none_read(mpi: str) -> str:
    return f"{mpi}: no point is a reading"


def default_reading(plan, unsupported=None) -> str:
    """A figure without prose of its own: its extreme per MPI (highest where higher is better)."""
    rows = plan.rows
    higher = bool(rows["higher_is_better"].astype(bool).any()) if "higher_is_better" in rows else True
    units = sorted(set(str(u) for u in rows["unit"].dropna()))
    unit = f" {units[0]}" if len(units) == 1 else ""
    what = ", ".join(sorted(set(str(m) for m in rows["metric"])))
    return (f"{'Highest' if higher else 'Lowest'} {what}: "
            + reading_extreme(plan.lines(), "reaches" if higher else "gets down to", unit, best_high=higher))


def each_mpi(lines: list, read) -> list[str]:
    """read(mpi, [(point, line)]) for each MPI whose lines hold readings; for the others, that
    none of its points is a reading."""
    return [read(mpi, pts) if (pts := readings(mlines)) else none_read(mpi) for mpi, mlines in per_mpi(lines).items()]


def reading_extreme(lines: list, what: str, unit: str = "", best_high=True) -> str:
    def read(mpi, pts):
        p, ln = (max if best_high else min)(pts, key=lambda t: t[0].median)
        return f"{mpi} {what} {fmt_num(p.median)}{unit} ({fmt_size(p.x)}, {ln.name})"
    return "; ".join(each_mpi(lines, read)) + "."


def largest_read(mlines: list):
    """The largest x where this MPI's lines have a reading, and the larger xs that have none."""
    xs = sorted({p.x for p, _ in readings(mlines)})
    beyond = sorted({p.x for ln in mlines for p in ln.points} - set(xs))
    return (xs[-1] if xs else None), [x for x in beyond if not xs or x > xs[-1]]


def reading_modes(lines: list, unit: str, what: str, x_fmt=fmt_size) -> str:
    """At each MPI's largest x with readings: the lines ranked best first (and the larger xs
    that hold no reading)."""
    out = []
    for mpi, mlines in per_mpi(lines).items():
        xmax, beyond = largest_read(mlines)
        if xmax is None:
            out.append(none_read(mpi))
            continue
        at = sorted(((p.median, ln.name) for p, ln in readings(mlines) if p.x == xmax), reverse=True)
        unread = [ln.name for ln in mlines if any(p.x == xmax and not p.reading for p in ln.points)]
        text = f"{mpi} at {x_fmt(xmax)}: " + ", ".join([f"{m} {fmt_num(v)}{unit}" for v, m in at]
                                                      + [f"{m}: no reading" for m in unread])
        if beyond:
            text += f" ({', '.join(x_fmt(x) for x in beyond)}: no reading)"
        out.append(text)
    return f"{what} " + "; ".join(out) + "."


def per_panel(plan, reader) -> str:
    """One reading per panel, each naming its panel ("Noise uniform:4: ..."); a single panel of
    noise none: as is."""
    col = plan.fig.get("panels")
    if len(plan.panels) == 1 and (col is None or plan.panels[0].value == "none"):
        return reader(plan.panels[0].lines)
    name = (col or "").replace("_", " ").capitalize()
    return " ".join(f"{name} {p.value}: {reader(p.lines)}" if col != "metric" else f"{p.title}: {reader(p.lines)}"
                    for p in plan.panels)
