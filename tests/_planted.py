"""Planted hmb-bench records (schema-valid) for the tidy loader and study tests."""
from __future__ import annotations

import json
from pathlib import Path


def metric(median, lo=None, hi=None, unit="us", count=10, higher=False) -> dict:
    lo = median * 0.9 if lo is None else lo
    hi = median * 1.1 if hi is None else hi
    return {"unit": unit, "median": median, "ci_lo": lo, "ci_hi": hi, "ci_valid": True,
            "min": lo, "p95": hi, "max": hi, "mean": median, "stddev": 0.0, "count": count,
            "higher_is_better": higher}


def run(run_id, bench, impl="MPICH", library="MPICH Version: 4.2.0", ranks=2, threads=1,
        noise="none", oversubscribed=False, host="node1") -> dict:
    return {"type": "run", "schema": 1, "run_id": run_id, "bench": bench, "tag": None,
            "mpi": {"library": library, "library_full": library, "impl": impl, "standard": "4.0"},
            "thread_level": {"requested": "MULTIPLE", "provided": "MULTIPLE"},
            "ranks": ranks, "hosts": [host], "ranks_per_node": ranks, "threads": threads,
            "cpus_available": 2, "oversubscribed": oversubscribed,
            "noise": {"model": noise, "thread": "fixed", "seed": 1},
            "options": {"noise": noise}, "extra": {}}


def result(run_id, bench, params, metrics, extra=None) -> dict:
    return {"type": "result", "schema": 1, "run_id": run_id, "bench": bench, "params": params,
            "status": "ok", "iterations": 10, "metrics": metrics, "extra": extra or {}}


def write(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path
