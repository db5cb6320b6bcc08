"""`hmb run --repeats N`: the same launch N times, and per point and metric the median of the
launch medians, the between-launch spread (min-max of launch medians) next to the typical
within-launch 95% CI. A launch's CI says how precisely one launch pinned its median; the
spread says how much that median moves from launch to launch (placement, frequency, noise),
which a single launch cannot show."""
from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import textwrap
from collections import defaultdict
from pathlib import Path

from ..run import launch
from ..data import results
from ..data.results import combine, point_key
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
            loaded = [results.load([f]) for f in files]
            wanted = args.metric.split(",") if getattr(args, "metric", None) else None
            known = {m for rs in loaded for r in rs.results for m in (r.record.get("metrics") or {})}
            unknown = [m for m in wanted or () if m not in known]
            if unknown:
                raise results.ResultsError(f"--metric: no result has {', '.join(unknown)} (it has: {', '.join(sorted(known))})")
            sys.stdout.write(summary(loaded, wanted))
    return worst


TABLE_COLUMNS = 120   # hmb-bench's tables fit this width too


def summary(launches: list, metrics: list | None = None) -> str:
    """One row per point and summary-worthy metric over the launches (each a ResultSet).
    Parameters with one value in every point are said once above the table, not in each row."""
    groups = defaultdict(list)
    for rs in launches:
        for r in rs.results:
            if r.status == "ok":
                groups[point_key(r)].append(r)
    values = defaultdict(set)
    for rr in groups.values():
        for k, v in rr[0].params.items():
            values[k].add(repr(v))
    constant = {k for k, vs in values.items()
                if len(vs) == 1 and all(k in rr[0].params for rr in groups.values())}
    if len(groups) == 1:
        constant -= {"size_bytes"}   # a point is never named by nothing
    rows = []
    for key, rr in groups.items():
        first = rr[0]
        names = list((first.record.get("metrics") or {}))
        if first.desc:
            names = [m.name for m in first.desc.metrics if m.in_table and m.name in names]
        if metrics:
            names = [m for m in metrics if (first.record.get("metrics") or {}).get(m)]
        point = " ".join(_param(k, v) for k, v in sorted(first.params.items()) if k not in constant)
        for name in names:
            c = combine(rr, name)
            if c is None:
                continue
            los = [results.as_float((r.metric(name) or {}).get("ci_lo")) for r in rr]
            his = [results.as_float((r.metric(name) or {}).get("ci_hi")) for r in rr]
            ci = "n/a"
            if all(v == v for v in los + his):   # every launch has a valid CI
                ci = f"[{fmt_num(statistics.median(los))}, {fmt_num(statistics.median(his))}]"
            rows.append([point, name, fmt_num(c.median), f"{fmt_num(c.spread_lo)} - {fmt_num(c.spread_hi)}",
                         ci, str(c.repeats)])
    head = ["point", "metric", "median", "min - max", "95% CI", "launches"]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    said = " ".join(_param(k, v) for k, v in sorted(groups[next(iter(groups))][0].params.items())
                    if k in constant) if groups else ""
    title = (f"{len(launches)} launches of the same command; per point and metric: median of the launch medians, "
             f"their min - max, and the median of the launches' 95% CI bounds"
             + (f"; every point has {said}" if said else ""))
    lines = [""] + textwrap.wrap(title, TABLE_COLUMNS, initial_indent="# ", subsequent_indent="#   ")
    lines += ["  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip() for row in [head] + rows]
    return "\n".join(lines) + "\n"


def _param(key: str, value) -> str:
    return f"{key}={fmt_size(value) if key == 'size_bytes' else value}"
