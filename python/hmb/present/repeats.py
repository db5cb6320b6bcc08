"""`hmb run --repeats N`: the same launch N times, and per point and metric the median of the
launch medians, the between-launch spread (min-max of launch medians) next to the typical
within-launch 95% CI. A launch's CI says how precisely one launch pinned its median; the
spread says how much that median moves from launch to launch (placement, frequency, noise),
which a single launch cannot show."""
from __future__ import annotations

import math
import shutil
import statistics
import sys
import tempfile
import textwrap
from collections import defaultdict
from pathlib import Path

from ..data import tidy
from ..data.results import ResultsError
from ..run import launch
from .format import fmt_num, fmt_size


def run(target, args, timeout: float | None) -> int:
    worst = 0
    with tempfile.TemporaryDirectory(prefix="hmb-repeats-") as tmp:
        files = []
        for i in range(args.repeats):
            print(f"# hmb: launch {i + 1} of {args.repeats}", file=sys.stderr, flush=True)
            path = Path(tmp) / f"launch-{i}.jsonl"
            rc = launch.run_bench(target, args.bench, args.bench_args, args.ranks, args.threads,
                                  json_path=str(path), launcher=args.launcher, timeout=timeout,
                                  dry_run=args.dry_run, hosts=getattr(args, "hosts", None),
                                  ranks_per_node=getattr(args, "ranks_per_node", None))
            worst = worst or rc
            if rc == 2 and not path.exists():
                break   # a usage error: the same command fails the same way every time
            if path.exists():
                files.append(path)
                if args.json:
                    with open(args.json, "a") as out, open(path) as f:
                        shutil.copyfileobj(f, out)
        if files:
            table = tidy.read(files)     # each launch's file its own data set
            wanted = args.metric.split(",") if getattr(args, "metric", None) else None
            known = set(table.df["metric"])
            unknown = [m for m in wanted or () if m not in known]
            if unknown:
                raise ResultsError(f"--metric: no result has {', '.join(unknown)} (it has: {', '.join(sorted(known))})")
            sys.stdout.write(summary(table, wanted))
    return worst


TABLE_COLUMNS = 120   # hmb-bench's tables fit this width too


def summary(t: tidy.Table, metrics: list | None = None) -> str:
    """One row per point and summary-worthy metric over the launches (one file each in t).
    Parameters with one value in every point are said once above the table, not in each row."""
    groups = defaultdict(dict)     # point -> {its launch's first row: (its Result, {metric: row})}
    launches = t.records(t.df)
    for (r, index), key in zip(launches, t.keys(t.df.loc[[index[0] for _, index in launches]])):
        groups[key][index[0]] = (r, dict(zip(t.df.loc[index, "metric"], index)))
    values = defaultdict(set)
    firsts = {key: next(iter(rr.values()))[0] for key, rr in groups.items()}
    for first in firsts.values():
        for k, v in first.params.items():
            values[k].add(repr(v))
    constant = {k for k, vs in values.items()
                if len(vs) == 1 and all(k in first.params for first in firsts.values())}
    if len(groups) == 1:
        constant -= {"size_bytes"}   # a point is never named by nothing
    rows = []
    for key, rr in groups.items():
        first = firsts[key]
        names = list((first.record.get("metrics") or {}))
        if first.desc:
            names = [m.name for m in first.desc.metrics if m.in_table and m.name in names]
        if metrics:
            names = [m for m in metrics if (first.record.get("metrics") or {}).get(m)]
        point = " ".join(_param(k, v) for k, v in sorted(first.params.items()) if k not in constant)
        for name in names:
            at = [by_metric[name] for _, by_metric in rr.values() if name in by_metric]
            c = tidy.over_launches(t.df.loc[at])
            if not c.launches:
                continue
            los = [t.df.at[i, "ci_lo"] for i in at] + [math.nan] * (len(rr) - len(at))
            his = [t.df.at[i, "ci_hi"] for i in at] + [math.nan] * (len(rr) - len(at))
            ci = "n/a"
            if all(v == v for v in los + his):   # every launch has a valid CI
                ci = f"[{fmt_num(statistics.median(los))}, {fmt_num(statistics.median(his))}]"
            rows.append([point, name, fmt_num(c.median), f"{fmt_num(c.spread_lo)} - {fmt_num(c.spread_hi)}",
                         ci, str(c.launches)])
    head = ["point", "metric", "median", "min - max", "95% CI", "launches"]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    said = " ".join(_param(k, v) for k, v in sorted(firsts[next(iter(groups))].params.items())
                    if k in constant) if groups else ""
    title = (f"{len(t.sources)} launches of the same command; per point and metric: median of the launch medians, "
             f"their min - max, and the median of the launches' 95% CI bounds"
             + (f"; every point has {said}" if said else ""))
    lines = [""] + textwrap.wrap(title, TABLE_COLUMNS, initial_indent="# ", subsequent_indent="#   ")
    lines += ["  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip() for row in [head] + rows]
    return "\n".join(lines) + "\n"


def _param(key: str, value) -> str:
    return f"{key}={fmt_size(value) if key == 'size_bytes' else value}"
