"""The tidy table of results: one row per point and metric, as a pandas DataFrame. The one data
model every reader of results uses: the report and its tables, compare, the --repeats summary,
hmb project, the figures, the studies, the claims and `hmb export --csv`.

`hmb.load(paths)` reads results with results.scan (the one reader of JSON Lines: bad lines
skipped and named, resumed launches counted once) and flattens them: every parameter of a
point is a column of its own, beside the metric's name, median, 95% CI, sample count and unit,
and the launch's context (benchmark, MPI, library version, settings, noise, ranks, threads,
oversubscription, hosts and the network between them, run id, file).

A point's columns (point_columns) are its identity, the one identity() gives: rows that
agree on them are launches of one point. Everything else in a row belongs to the launch (its
library version string, host, run id, whether it was a reading) or to the measurement. A
point's value over its launches is launch_median of its launches' medians, whoever asks
(points, point_medians, over_launches: the figures, the claims, the report's tables, compare).

A result's memory readings (numbers in its `extra` named `*_kB`: the resident memory `proto`
records, docs/metrics.md) are columns too, on each of that result's rows. They are recorded
figures, not metrics: no samples, no CI, and they differ from launch to launch, so they are no
part of a point's identity (is_reading). readings_as_metric turns one into metric rows,
so a figure or a claim can read memory as it reads a metric (select does it on request).

read(paths) gives the table with what the files hold besides it (a Table): the points a library
did not run, the run headers, launch records, failures and conformance records, and, per row,
the record it came from (Table.detail) for the few facts a table prints that are no column (a
record's own parameter names, its metric order, its extra fields).
"""
from __future__ import annotations

import csv
import dataclasses
import math
import os
import pickle
import tempfile

import numpy as np
import pandas as pd

from . import results as hresults
from .results import DEFAULT_SETTINGS

# Columns every table has, in this order; the point's parameters follow them.
CONTEXT = ["bench", "metric", "median", "ci_lo", "ci_hi", "count", "unit", "higher_is_better",
           "mpi", "library", "settings", "noise", "ranks", "threads", "oversubscribed",
           "spare_core_missing", "progress_shares_core", "host", "network", "cpus", "ranks_per_node", "run_id", "tag",
           "source"]
# What a row measured, and what belongs to its launch rather than to its point.
MEASURE = ("median", "ci_lo", "ci_hi", "count", "unit", "higher_is_better")
LAUNCH = ("library", "oversubscribed", "spare_core_missing", "progress_shares_core", "host", "network", "cpus",
          "ranks_per_node", "run_id", "tag", "source")
# Resources a point recorded after its set-up (mt, halo3d --thread-comm: docs/metrics.md), columns
# beside the context where the record has them: what a mode cost, not a parameter of the point
# (they vary from launch to launch: no part of its identity). everywhere_processes: the processes
# per side mt's everywhere mode ran as (its x beside the threads of the other modes).
RESOURCES = ["communicators", "streams", "vcis", "reserve_vcis", "vmrss_kib", "vmhwm_kib", "everywhere_processes"]


# Numbers in a result's extra that are columns: the memory readings (kB).
READING_SUFFIX = "_kB"


def is_reading(col) -> bool:
    """A column that holds a result's memory reading (e.g. proto's rss_traffic_kB), not a parameter."""
    return isinstance(col, str) and col.endswith(READING_SUFFIX)


def point_columns(df) -> list:
    """The columns that make a row's point what it is (identity()'s items, the benchmark,
    metric, MPI, noise and settings): rows equal in them are launches of one point."""
    return [c for c in df.columns if c not in MEASURE and c not in LAUNCH and c not in RESOURCES
            and not is_reading(c)]


def is_no_reading(oversubscribed, progress_shares_core) -> bool:
    """The one predicate for what is not a reading: a point that ran oversubscribed (ranks ×
    threads beyond the cores) or whose progress thread shared a compute core. Figures draw it
    hollow and dashed, tables mark it, readings and claims leave it out."""
    return bool(oversubscribed) or progress_shares_core == True   # noqa: E712 (None, NaN: no thread)


def no_reading(df):
    """Boolean Series: rows that are no reading (is_no_reading: oversubscribed, or a progress
    thread on a compute core)."""
    shares = df["progress_shares_core"] if "progress_shares_core" in df else [None] * len(df)
    return pd.Series([is_no_reading(o, s) for o, s in zip(df["oversubscribed"], shares)],
                     index=df.index, dtype=bool)


def readings(df):
    """The rows that are readings (no_reading false)."""
    return df[~no_reading(df)]


def launch_median(values) -> float:
    """A point's value over its launches: the median of the launches' medians, a launch whose
    median is NaN (hmb-bench's null) left out; NaN when every launch is. The one answer to "what
    is this point's median": points, over_launches (the figures, the report's tables, compare,
    the --repeats summary) and the claims all take it from here."""
    vals = sorted(float(v) for v in values if v is not None and not math.isnan(float(v)))
    if not vals:
        return float("nan")   # a NaN of its own: tuples holding two are not equal (sorted readings keep their order)
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def band(medians, ci_los, ci_his) -> tuple[float, float]:
    """The error band of a point over its launches: the lowest to the highest bound of the
    launches' 95% CIs, stretched to hold every launch's median (a launch without a valid CI still
    counts by its median); NaN bounds when no launch has a valid CI. One launch: its CI. The one
    band every figure, table and legend draws (figures: "band: 95% CI, lowest to highest bound
    over launches")."""
    valid = [(a, b) for a, b in zip(ci_los, ci_his) if not (math.isnan(a) or math.isnan(b))]
    if not valid or not medians:
        return math.nan, math.nan
    return min(min(a for a, _ in valid), min(medians)), max(max(b for _, b in valid), max(medians))


@dataclasses.dataclass
class Launches:
    """One point's metric over its launches (over_launches)."""
    median: float       # launch_median of the launches' medians
    lo: float           # the band (band()); NaN: no launch has a valid CI
    hi: float
    spread_lo: float    # the lowest and highest launch median
    spread_hi: float
    medians: tuple      # each launch's median, in reading order (NaN ones left out)
    no_reading: bool    # some launch that gave a median is no reading (is_no_reading)

    @property
    def launches(self) -> int:
        return len(self.medians)

    @classmethod
    def of(cls, medians, ci_los, ci_his, no_readings) -> "Launches":
        """From each launch's median, CI bounds and whether it is no reading; a launch whose median
        is NaN gives nothing (its CI and its no reading included)."""
        keep = [(float(m), float(lo), float(hi), bool(nr))
                for m, lo, hi, nr in zip(medians, ci_los, ci_his, no_readings) if not math.isnan(float(m))]
        meds = [k[0] for k in keep]
        lo, hi = band(meds, [k[1] for k in keep], [k[2] for k in keep])
        return cls(launch_median(meds), lo, hi, min(meds, default=math.nan), max(meds, default=math.nan),
                   tuple(meds), any(k[3] for k in keep))


def over_launches(rows) -> Launches:
    """A point's metric over its launches, from its rows of the tidy table (one per launch): the
    median (launch_median), the band and the range of the launches' medians."""
    return Launches.of(rows["median"], rows["ci_lo"], rows["ci_hi"], no_reading(rows))


def varying(items_per_thing: list[dict], skip=()) -> list[str]:
    """Names whose value is not the same in every dict (absent counts as a value): what a
    label must name to tell things apart."""
    names = []
    for d in items_per_thing:
        for k in d:
            if k not in names and k not in skip:
                names.append(k)
    return [k for k in names if len({d.get(k) for d in items_per_thing}) > 1]


def _missing(v) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and v != v)


def _column_text(col) -> list:
    """col.astype(str).tolist() (a missing value stays NaN, the rest become their text), without
    its cost on the few dozen rows a claim selects: 32,000 calls in test_claims."""
    if col.dtype.kind not in "biufO" or col.dtype.kind == "f" and col.dtype.itemsize != 8:
        return col.astype(str).tolist()
    return [math.nan if _missing(v) else str(v) for v in col.tolist()]


def _grouped(rows):
    """points()'s grouping: (the point columns, the columns that split them, each column's text,
    the points' keys in points' order, each key's launch medians)."""
    keys = point_columns(rows)
    text = {k: _column_text(rows[k]) for k in keys}
    # A claim selects a few dozen rows: grouped here, in Python, against pandas' groupby at
    # ~10 ms a call (3551 calls in test_claims). Columns with one value split nothing.
    split = [k for k in keys if len(set(text[k])) > 1] or keys[:1]
    groups: dict = {}
    for key, v in zip(zip(*(text[k] for k in split)), rows["median"].tolist()):
        groups.setdefault(key, []).append(v)
    # as groupby orders them: by text, a missing value (pandas' NA in a string column) last
    order = sorted(groups, key=lambda t: tuple((0, x) if isinstance(x, str) else (1, "") for x in t))
    return keys, split, text, order, groups


def points(rows):
    """One row per point: its parameters (as text, launches grouped) and `value`, the point's
    launch_median, points in the order of their parameters' text."""
    keys, split, text, order, groups = _grouped(rows)
    out = {k: ([t[split.index(k)] for t in order] if k in split else [text[k][0]] * len(order))
           for k in keys}
    out["value"] = [launch_median(groups[t]) for t in order]
    return pd.DataFrame(out, columns=[*keys, "value"])


def point_values(rows) -> list:
    """points(rows)["value"] as a list, without building the table (a claim's plain reading and
    each launch's reading want only the values)."""
    _, _, _, order, groups = _grouped(rows)
    return [launch_median(groups[t]) for t in order]


def n_points(rows) -> int:
    """len(points(rows)), without building them."""
    keys = point_columns(rows)
    if rows.empty:
        return 0
    if not keys:
        return len(points(rows))
    return len(set(zip(*(_column_text(rows[k]) for k in keys))))


def launch_points(rows, labels) -> dict | None:
    """Each label's points (labels: one per row, e.g. its launch replicate), as {label: {point:
    its rows' medians}}, a point its point columns as text (n_points' identity), labels and
    points in reading order; the point columns' text is read once for all labels. None when rows
    have no point columns (n_points counts those through points)."""
    keys = point_columns(rows)
    if not keys:
        return None
    out: dict = {}
    for label, point, v in zip(labels, zip(*(_column_text(rows[k]) for k in keys)), rows["median"].tolist()):
        out.setdefault(label, {}).setdefault(point, []).append(v)
    return out


def point_medians(rows):
    """Each point's launch_median, a Series indexed by the point columns (as text)."""
    pts = points(rows)
    return pts.set_index(point_columns(rows))["value"] if len(pts.columns) > 1 else pts["value"]


# Run-level options that never make a point: the noise model (a column of its own) and where the
# output went (also run control in every descriptor; named here for results read without one).
NOT_IDENTITY_OPTIONS = frozenset({"noise", "json", "raw"})


def identity(r: hresults.Result) -> dict:
    """column -> value of everything that makes a point what it is, besides bench, noise and
    MPI: the one point identity (the tidy table's point columns are these; point_columns).

    The point's params (threads from the run if absent), the run's ranks and provided thread
    level (`thread_level`), and every run-level option (dashes read as underscores: the column
    name) except run control (role "run-control" in the benchmark's descriptor: options that
    steer the run but not what is measured), the noise model (kept apart), the output files and
    options the benchmark expanded into params (sizes -> size_bytes, partitions -> partitions,
    ...); the level asked for (`thread_level_requested`) only where it is not what was provided;
    and the sweep's `settings` entry when it set library variables (an eager threshold measures
    something else than the default). Values as recorded; a switch reads "true" / "false"."""
    params = r.params
    out = dict(params)
    if "threads" not in out and r.run.get("threads") is not None:
        out["threads"] = r.run.get("threads")
    if r.run.get("ranks") is not None:
        out["ranks"] = r.run["ranks"]
    provided = (r.run.get("thread_level") or {}).get("provided")
    if provided:
        out["thread_level"] = str(provided)
    run_control = r.desc.run_control if r.desc else frozenset()
    for name, value in (r.run.get("options") or {}).items():
        key = name.replace("-", "_")
        if value is None or name in run_control or name in NOT_IDENTITY_OPTIONS or key in params:
            continue   # not set, run control, kept apart, or expanded into params
        if name == "sizes" and "size_bytes" in params:
            continue
        if key == "thread_level":   # the level asked for: only news when it is not what was provided
            if provided and str(value).upper() == str(provided).upper():
                continue
            key = "thread_level_requested"
        out.setdefault(key, _text(value) if isinstance(value, bool) else value)
    if r.settings != DEFAULT_SETTINGS:
        out["settings"] = r.settings
    return out


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def as_float(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _readings(extra: dict) -> dict:
    return {k: float(v) for k, v in extra.items() if is_reading(k) and isinstance(v, (int, float))
            and not isinstance(v, bool) and math.isfinite(v)}


def _host(run: dict) -> str:
    hosts = run.get("hosts") or []
    return ",".join(str(h) for h in hosts) if isinstance(hosts, list) else str(hosts)


def _network(run: dict) -> str:
    """The network between the run's hosts as its header records it ("" where it says nothing:
    one node, or hosts HMB did not lay out): HMB_NETWORK, set on an hmb lab (docs/lab.md)."""
    env = run.get("env")
    return str(env.get("HMB_NETWORK") or "") if isinstance(env, dict) else ""


def _point(r) -> tuple[dict, dict, dict]:
    """A result's context columns, its parameters (the rest of its identity, and its memory
    readings) and its identity."""
    run = r.run
    mpi_info = run.get("mpi") or {}
    extra = r.record.get("extra") or {}
    ident = identity(r)
    base = {
        "bench": r.bench, "mpi": r.mpi, "library": str(mpi_info.get("library") or ""),
        "settings": r.settings, "noise": r.noise, "ranks": ident.get("ranks"),
        "threads": ident.get("threads"), "oversubscribed": r.oversubscribed,
        "spare_core_missing": bool(run.get("spare_core_missing")),
        "progress_shares_core": r.progress_shares_core,
        "host": _host(run), "network": _network(run), "cpus": run.get("cpus_available"),
        "ranks_per_node": run.get("ranks_per_node"),
        "run_id": str(run.get("run_id") or r.record.get("run_id") or ""),
        "tag": str(run.get("tag") or ""), "source": r.source,
        **{k: as_float(extra[k]) for k in RESOURCES if k in extra},
    }
    params = {k: v for k, v in ident.items() if k not in base and k not in CONTEXT}
    params.update(_readings(extra))
    return base, params, ident


def result_rows(r) -> list[dict]:
    """The rows of one result: one per metric of an ok result, none for a point the library did
    not run (its status is not ok: Table.unsupported lists those)."""
    if r.status != "ok":
        return []
    base, params, _ = _point(r)
    return [row for _, row in _metric_rows(r, base, params)]


def _metric_rows(r, base: dict, params: dict) -> list[tuple[str, dict]]:
    out = []
    for name, m in sorted((r.record.get("metrics") or {}).items()):
        if not isinstance(m, dict):
            continue
        s = r.metric(name)     # results.py's reading: an invalid CI reads as NaN bounds
        count = m.get("count")
        out.append((name, {**base, "metric": name, "median": as_float(s.get("median")),
                           "ci_lo": as_float(s.get("ci_lo")), "ci_hi": as_float(s.get("ci_hi")),
                           "count": int(count) if isinstance(count, (int, float)) and not isinstance(count, bool)
                           and math.isfinite(count) else None,
                           "unit": str(m.get("unit") or ""),
                           "higher_is_better": m.get("higher_is_better"), **params}))
    return out


METRIC_FIELDS = ("metric", "median", "ci_lo", "ci_hi", "count", "unit", "higher_is_better")


def readings_as_metric(df, name: str):
    """The reading column `name` as metric rows (metric = name, median = the reading, no CI,
    count 1, unit kB, lower is better): one row per result that has it."""
    if df is None or df.empty or name not in df.columns or not is_reading(name):
        return df.iloc[0:0] if df is not None else df
    rows = df[df[name].notna()]
    key = rows[[c for c in rows.columns if c not in METRIC_FIELDS]].astype(str)   # lists: as text
    rows = rows[~key.duplicated()]
    return rows.assign(metric=name, median=rows[name].astype(float), ci_lo=math.nan, ci_hi=math.nan,
                       count=1, unit="kB", higher_is_better=False)


def with_readings(df, names):
    """df plus, for each of names that is a reading column and no metric, its metric rows."""
    extra = [readings_as_metric(df, n) for n in names
             if df is not None and n in df.columns and is_reading(n) and not (df["metric"] == n).any()]
    extra = [e for e in extra if not e.empty]
    return pd.concat([df, *extra], ignore_index=True) if extra else df


def _frame(data: list):
    df = pd.DataFrame(data)
    if df.empty:
        return pd.DataFrame(columns=CONTEXT)
    params = [c for c in df.columns if c not in CONTEXT]
    return df[[c for c in CONTEXT if c in df.columns] + params]


@dataclasses.dataclass
class Table:
    """Results files as the tidy table, with what else they hold (read()).

    df: the tidy table (hmb.load's), one row per ok result and metric. unsupported: the points a
    library did not run, one row each (the context and parameter columns, `status`, `reason`).
    detail: per row of either (the same index: df's rows first, then unsupported's), the record
    it came from, for what a table prints that is no column: `result` (rows of one result record
    share it, in reading order), `identity` (the point's identity as (column, text) pairs:
    identity() with every value as the record wrote it), `order` (the metric's place in its
    record), `record` (the result record: its own params, extra fields, a metric's whole
    summary), `run` and `launch` (its run header and launch record). records() gives them as
    results.Result, the records layer's view of one. The rest are the files'
    records that are no result: run headers by (file, run id), launch records, failures,
    conformance records, the benchmarks' descriptors; and the files read, their bad lines and
    duplicate records, the result records that count (`results`) and of those the ok ones."""
    df: object
    unsupported: object
    detail: object
    runs: dict
    launches: list
    failures: list
    conformance: list
    descriptors: dict
    sources: list
    bad_lines: list
    duplicates: int
    results: int
    ok: int

    def detail_of(self, rows):
        """The detail of rows (of df or unsupported), in their order."""
        return self.detail.loc[rows.index]

    def keys(self, rows, with_mpi: bool = True, with_settings: bool = True) -> list[tuple]:
        """Each row's point as (bench, identity items, noise, MPI): rows with equal keys are launches
        of one point. with_mpi, with_settings False: the MPI or the library setting left out (compare
        matches one library or setting against another)."""
        idents = [tuple(sorted(kv for kv in items if with_settings or kv[0] != "settings"))
                  for items in self.detail_of(rows)["identity"]]
        return [(b, items, n, m if with_mpi else "")
                for b, items, n, m in zip(rows["bench"], idents, rows["noise"], rows["mpi"])]

    def records(self, rows) -> list[tuple]:
        """The result records of rows (of df or unsupported) in reading order, each as
        (results.Result: the record's own view, the index of its rows among rows)."""
        if rows.empty:
            return []
        d = self.detail_of(rows)
        out: dict = {}
        for at, res, rec, run, launch, src in zip(rows.index, d["result"], d["record"], d["run"], d["launch"],
                                                  rows["source"]):
            if res not in out:
                out[res] = (hresults.Result(rec, run, launch, src, self.descriptors.get(rec.get("bench") or
                                                                                         run.get("bench", "?"))), [])
            out[res][1].append(at)
        return [out[k] for k in sorted(out)]

    def metric_names(self, rows) -> list[str]:
        """The metrics of rows' first result record, in the record's order (what a table shows
        first)."""
        if rows.empty:
            return []
        d = self.detail_of(rows)
        first = rows[(d["result"] == d["result"].min()).to_numpy()]
        return list(first.assign(_order=self.detail_of(first)["order"].to_numpy())
                    .sort_values("_order", kind="stable")["metric"])


def samples(record: dict, metric: str):
    """A metric's --raw samples in a result record (read with samples), finite ones, as an array;
    None when it has none."""
    s = (record.get("samples") or {}).get(metric)
    if not s:
        return None
    s = np.asarray(s, dtype=float)
    return s[np.isfinite(s)]


def read(paths, warn=True, samples: bool = False) -> Table:
    """Results files (a directory: its *.jsonl) as a Table: the tidy table, the points no library
    ran, the rows' records and the files' other records (run headers whole). Each file is its own
    data set (results.scan: the last run of a tag counts, run ids and launch records are scoped to
    their file, a record identical to an earlier one is read once); unreadable lines are skipped,
    named on `warn` and kept in Table.bad_lines. samples: keep the --raw samples in the records
    (hmb compare's bootstrap); the tables read summaries only."""
    stream = hresults.scan(_paths(paths), warn=warn, samples=samples, slim=False)
    data, un, detail, un_detail = [], [], [], []
    count = ok = 0
    for i, r in enumerate(stream):
        count += 1
        base, params, ident = _point(r)
        common = {"result": i, "identity": tuple((k, _text(v)) for k, v in ident.items()),
                  "record": r.record, "run": r.run, "launch": r.launch}
        if r.status == "ok":
            ok += 1
            order = {name: k for k, name in enumerate(r.record.get("metrics") or {})}
            for name, row in _metric_rows(r, base, params):
                data.append(row)
                detail.append({**common, "order": order[name]})
        else:
            un.append({**base, "status": r.status, "reason": str(r.record.get("reason") or ""), **params})
            un_detail.append({**common, "order": -1})
    stream.say_bad_lines()
    df = _frame(data)
    unsupported = pd.DataFrame(un, index=range(len(data), len(data) + len(un)))
    details = pd.DataFrame(detail + un_detail, columns=["result", "identity", "order", "record", "run", "launch"])
    return Table(df, unsupported, details, stream.runs, stream.launches, stream.failures, stream.conformance,
                 stream.descriptors, stream.sources, stream.bad_lines, stream.duplicates, count, ok)


def _paths(paths) -> list:
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [paths]
    try:
        paths = [os.fsdecode(p) for p in paths]   # bytes paths too
    except TypeError:
        raise hresults.ResultsError(f"hmb.load: expected a results file or directory, or a list of them; got "
                                    f"{type(paths).__name__ if not isinstance(paths, list) else 'a list holding other things'}") from None
    if not paths:
        raise hresults.ResultsError("hmb.load: no results file given")
    return paths


def load(paths, warn=True):
    """hmb.load(paths): results files (a directory: its *.jsonl) → tidy DataFrame, one row per
    point and metric. Raises results.ResultsError (one line) on a file that cannot be read. The
    files are read a line at a time and --raw samples are not kept (the table has none)."""
    stream = hresults.scan(_paths(paths), warn=warn, samples=False)    # no list of results kept
    data = [row for r in stream for row in result_rows(r)]
    stream.say_bad_lines()
    return _frame(data)


# A CSV cell a spreadsheet would read as a formula (CSV injection): OWASP's advice is to start it
# with a quote. Text cells only (a number such as -1.5 stays a number); hmb.load's frame is not
# changed, only the CSV hmb export writes for spreadsheets.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(v):
    """A cell as hmb export writes it: empty for no value (None, NaN), a text cell that starts
    like a formula with a quote before it, anything else as Python writes it."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, str) and v.startswith(FORMULA_START):
        return "'" + v
    return v


def write_csv(stream, f) -> int:
    """The tidy table of a results.ResultStream as CSV on the text file f (RFC 4180: CRLF line
    ends), a result at a time: rows go to a temporary file while the columns are collected (a
    point's parameters are columns, known once every result has been read), then out under the
    header. Memory stays bounded by one result. Returns the rows written."""
    columns = dict.fromkeys(CONTEXT)
    count = 0
    with tempfile.TemporaryFile() as spool:
        for r in stream:
            for row in result_rows(r):
                columns.update(dict.fromkeys(row))
                pickle.dump(row, spool, protocol=pickle.HIGHEST_PROTOCOL)
                count += 1
        spool.seek(0)
        header = list(columns)
        # csv quotes a field holding a character of the line terminator only, so with "\n" a CR
        # inside a cell was written bare and a spreadsheet split the row there
        w = csv.writer(f, lineterminator="\r\n")
        w.writerow(header)
        for _ in range(count):
            row = pickle.load(spool)
            w.writerow([_csv_cell(row.get(c)) for c in header])
    return count


def select(df, bench: str | None, metric: str | None, where: dict | None):
    """Rows of the tidy table for bench, metric and column filters (a list: any of them)."""
    if df is None or df.empty:
        return df
    m = df
    if bench:
        m = m[m["bench"] == bench]
    if metric:
        wanted = metric if isinstance(metric, list) else [metric]
        m = with_readings(m, wanted)     # a reading (proto's memory, *_kB) read as a metric
        m = m[m["metric"].isin(wanted)]
    for col in where or {}:
        m = with_derived(m, col)
    if any(col not in m.columns for col in where or {}):
        return m.iloc[0:0]
    return m[matches(m, where or {})]


def with_derived(df, col: str):
    """`cores` (ranks × threads: threads compared with processes at equal cores) when asked for
    and not a column of its own."""
    if col == "cores" and "cores" not in df.columns and {"ranks", "threads"} <= set(df.columns):
        return df.assign(cores=df["ranks"].astype(float) * df["threads"].astype(float))
    return df


def matches(df, where: dict):
    """Boolean Series: the rows whose columns hold the filters' values (a list: any of them); a
    column the table lacks matches nothing."""
    mask = pd.Series(True, index=df.index)
    for col, want in where.items():
        if col not in df.columns:
            return mask & False
        wants = want if isinstance(want, list) else [want]
        mask &= df[col].map(lambda v: any(same(v, w) for w in wants)).astype(bool)
    return mask


def same(value, want) -> bool:
    """A table cell equals a filter value: as numbers when both read as numbers (partitions
    1.0 is 1), else as text."""
    try:
        return float(value) == float(want)
    except (TypeError, ValueError):
        return str(value) == str(want)
