"""The tidy table of results: one row per point and metric, as a pandas DataFrame. The one data
model the report, the studies, the claims and `hmb export --csv` read.

`hmb.load(paths)` reads results with results.load (the one reader of JSON Lines: bad lines
skipped and named, resumed launches counted once) and flattens them: every parameter of a
point is a column of its own, beside the metric's name, median, 95% CI, sample count and unit,
and the launch's context (benchmark, MPI, library version, settings, noise, ranks, threads,
oversubscription, hosts and the network between them, run id, file).

A point's columns (point_columns) are its identity, the one results.identity gives: rows that
agree on them are launches of one point. Everything else in a row belongs to the launch (its
library version string, host, run id, whether it was a reading) or to the measurement.

A result's memory readings (numbers in its `extra` named `*_kB`: the resident memory `proto`
records, docs/metrics.md) are columns too, on each of that result's rows. They are recorded
figures, not metrics: no samples, no CI, and they differ from launch to launch, so they are no
part of a point's identity (is_reading). readings_as_metric turns one into metric rows,
so a figure or a claim can read memory as it reads a metric (select does it on request).
"""
from __future__ import annotations

import math

from . import results as hresults

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
    """The columns that make a row's point what it is (results.identity's items, the benchmark,
    metric, MPI, noise and settings): rows equal in them are launches of one point."""
    return [c for c in df.columns if c not in MEASURE and c not in LAUNCH and c not in RESOURCES
            and not is_reading(c)]


def no_reading(df):
    """Boolean Series: rows that are no reading (results.no_reading: oversubscribed, or a progress
    thread on a compute core)."""
    import pandas as pd
    shares = df["progress_shares_core"] if "progress_shares_core" in df else [None] * len(df)
    return pd.Series([hresults.no_reading(o, s) for o, s in zip(df["oversubscribed"], shares)],
                     index=df.index, dtype=bool)


def readings(df):
    """The rows that are readings (no_reading false)."""
    return df[~no_reading(df)]


def _as_text(df, cols):
    """The columns as text, lists and NaN included, to group by."""
    return df.assign(**{c: df[c].astype(str) for c in cols})


def point_medians(rows):
    """The median of each point over its launches (a Series indexed by the point columns)."""
    keys = point_columns(rows)
    return _as_text(rows, keys).groupby(keys, dropna=False)["median"].median()


def _readings(extra: dict) -> dict:
    return {k: float(v) for k, v in extra.items() if is_reading(k) and isinstance(v, (int, float))
            and not isinstance(v, bool) and math.isfinite(v)}


def _host(run: dict) -> str:
    hosts = run.get("hosts") or []
    return ",".join(str(h) for h in hosts) if isinstance(hosts, list) else str(hosts)


def _network(run: dict) -> str:
    """The network between the run's hosts as its header records it ("" where it says nothing:
    one node, or hosts HMB did not lay out): HMB_NETWORK, set on an hmb lab (docs/lab.md)."""
    return str((run.get("env") or {}).get("HMB_NETWORK") or "")


def _point(r) -> tuple[dict, dict]:
    """A result's context columns and its parameters (the rest of its identity, and its memory
    readings)."""
    run = r.run
    mpi_info = run.get("mpi") or {}
    extra = r.record.get("extra") or {}
    ident = hresults.identity(r)
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
        **{k: hresults.as_float(extra[k]) for k in RESOURCES if k in extra},
    }
    params = {k: v for k, v in ident.items() if k not in base and k not in CONTEXT}
    params.update(_readings(extra))
    return base, params


def rows(rs: hresults.ResultSet) -> list[dict]:
    """One dict per (ok result, metric) of a ResultSet; unsupported points have no metric and
    no row here (unsupported() lists them, results.ResultSet keeps them for the report's table)."""
    return [row for r in rs.results for row in result_rows(r)]


def result_rows(r) -> list[dict]:
    """The rows of one result (rows())."""
    if r.status != "ok":
        return []
    out = []
    base, params = _point(r)
    for name, m in sorted((r.record.get("metrics") or {}).items()):
        if not isinstance(m, dict):
            continue
        s = r.metric(name)     # results.py's reading: an invalid CI reads as NaN bounds
        count = m.get("count")
        out.append({**base, "metric": name, "median": hresults.as_float(s.get("median")),
                    "ci_lo": hresults.as_float(s.get("ci_lo")), "ci_hi": hresults.as_float(s.get("ci_hi")),
                    "count": int(count) if isinstance(count, (int, float)) and not isinstance(count, bool)
                    and math.isfinite(count) else None,
                    "unit": str(m.get("unit") or ""),
                    "higher_is_better": m.get("higher_is_better"), **params})
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
    import pandas as pd
    extra = [readings_as_metric(df, n) for n in names
             if df is not None and n in df.columns and is_reading(n) and not (df["metric"] == n).any()]
    extra = [e for e in extra if not e.empty]
    return pd.concat([df, *extra], ignore_index=True) if extra else df


def frame(rs: hresults.ResultSet):
    """The ResultSet as a tidy DataFrame (CONTEXT columns first, then the parameters)."""
    return _frame(rows(rs))


def _frame(data: list):
    import pandas as pd
    df = pd.DataFrame(data)
    if df.empty:
        return pd.DataFrame(columns=CONTEXT)
    params = [c for c in df.columns if c not in CONTEXT]
    return df[[c for c in CONTEXT if c in df.columns] + params]


def unsupported(rs: hresults.ResultSet):
    """The points a library did not run (status other than ok): one row each with its context,
    parameters, `status` and the benchmark's `reason`."""
    import pandas as pd
    out = []
    for r in rs.results:
        if r.status == "ok":
            continue
        base, params = _point(r)
        out.append({**base, "status": r.status, "reason": str(r.record.get("reason") or ""), **params})
    return pd.DataFrame(out)


def _paths(paths) -> list:
    import os
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
    import csv
    import pickle
    import tempfile
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
    import pandas as pd
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
