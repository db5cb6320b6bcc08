"""Reading JSON Lines results (docs/output-schema.md) and combining repeats of a point.

Readers ignore unknown keys and unknown record types. A launch that was redone after an
interruption (`hmb sweep --resume`) leaves two runs with the same tag; only the last one
counts, so a point is never counted twice.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np


class ResultsError(Exception):
    """A one-line problem with a results file (exit status 2)."""


@dataclasses.dataclass
class Result:
    record: dict
    run: dict           # its run header ({} if missing)
    launch: dict        # the driver's launch record ({} outside sweeps)
    source: str

    @property
    def bench(self) -> str:
        return self.record.get("bench") or self.run.get("bench", "?")

    @property
    def params(self) -> dict:
        return dict(self.record.get("params") or {})

    @property
    def status(self) -> str:
        return self.record.get("status", "ok")

    @property
    def mpi(self) -> str:
        return mpi_label(self.run, self.launch)

    @property
    def oversubscribed(self) -> bool:
        return bool(self.run.get("oversubscribed"))

    @property
    def noise(self) -> str:
        n = self.run.get("noise")
        if isinstance(n, dict):
            return str(n.get("model", "none"))
        opts = self.run.get("options") or {}
        return str(opts.get("noise", "none"))

    def metric(self, name: str) -> dict | None:
        m = (self.record.get("metrics") or {}).get(name)
        if m is None:
            v = (self.record.get("extra") or {}).get(name)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return {"median": float(v), "ci_lo": float("nan"), "ci_hi": float("nan")}
        return m

    def samples(self, name: str):
        s = (self.record.get("samples") or {}).get(name)
        return np.asarray(s, dtype=float) if s else None


def mpi_label(run: dict, launch: dict | None = None) -> str:
    m = run.get("mpi") or {}
    impl = m.get("impl")
    if impl and impl != "unknown":
        return impl
    if launch and launch.get("mpi"):
        return str(launch["mpi"])
    lib = m.get("library")
    return lib.split(",")[0].strip() if lib else "unknown MPI"


@dataclasses.dataclass
class ResultSet:
    results: list
    runs: dict          # run_id -> header
    launches: list      # launch records (latest per tag)
    failures: list      # failure records
    sources: list


def _read(path: Path) -> list[dict]:
    if not path.is_file():
        raise ResultsError(f"results file not found: {path}")
    records = []
    with open(path, errors="replace") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a killed run
            if isinstance(rec, dict):
                records.append(rec)
    return records


def load(paths) -> ResultSet:
    """Load one or more JSONL files (a directory means every *.jsonl in it)."""
    files = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.glob("*.jsonl"))
            if not found:
                raise ResultsError(f"no *.jsonl files in {p}")
            files += found
        else:
            files.append(p)
    runs, launches_by_tag, items, failures = {}, {}, [], []
    last_run_of_tag = {}
    for path in files:
        records = _read(path)
        if not any(r.get("type") in ("run", "result") for r in records):
            raise ResultsError(f"{path}: no hmb-bench records (is it a JSON Lines results file?)")
        for rec in records:
            kind = rec.get("type")
            if kind == "run":
                runs[rec.get("run_id")] = rec
                if rec.get("tag"):
                    last_run_of_tag[rec["tag"]] = rec.get("run_id")
            elif kind == "launch":
                launches_by_tag[rec.get("tag")] = rec
            elif kind == "result":
                items.append((rec, str(path)))
            elif kind == "failure":
                failures.append(rec)
    results = []
    for rec, src in items:
        run = runs.get(rec.get("run_id"), {})
        tag = run.get("tag")
        if tag and last_run_of_tag.get(tag) != rec.get("run_id"):
            continue  # superseded by a redone launch of the same tag
        results.append(Result(rec, run, launches_by_tag.get(tag, {}) if tag else {}, src))
    return ResultSet(results, runs, list(launches_by_tag.values()), failures, [str(f) for f in files])


# Parameters that identify a point, besides bench, MPI and the params dict itself.
def point_key(r: Result, with_mpi: bool = True, with_noise: bool = True) -> tuple:
    params = r.params
    params.setdefault("threads", r.run.get("threads"))
    key = [r.bench, tuple(sorted((k, str(v)) for k, v in params.items()))]
    if with_noise:
        key.append(r.noise)
    if with_mpi:
        key.append(r.mpi)
    return tuple(key)


@dataclasses.dataclass
class Combined:
    """One point's metric over its repeats: median of medians and the spread."""
    median: float
    ci_lo: float
    ci_hi: float
    spread_lo: float    # min of the repeats' medians
    spread_hi: float    # max of the repeats' medians
    repeats: int
    oversubscribed: bool


def combine(results: list, metric: str) -> Combined | None:
    meds, los, his = [], [], []
    over = False
    for r in results:
        m = r.metric(metric)
        if not m or m.get("median") is None:
            continue
        meds.append(float(m["median"]))
        los.append(_num(m.get("ci_lo")))
        his.append(_num(m.get("ci_hi")))
        over = over or r.oversubscribed
    if not meds:
        return None
    med = float(np.median(meds))
    if len(meds) == 1:
        lo, hi = los[0], his[0]
    else:  # the typical CI of one repeat, centred by the repeats (spread shown separately)
        lo = float(np.nanmedian(los)) if not all(math.isnan(x) for x in los) else float("nan")
        hi = float(np.nanmedian(his)) if not all(math.isnan(x) for x in his) else float("nan")
    return Combined(med, lo, hi, min(meds), max(meds), len(meds), over)


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def fmt_size(n) -> str:
    n = int(n)
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def fmt_num(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    a = abs(v)
    if a != 0 and (a >= 1e5 or a < 1e-3):
        return f"{v:.3g}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"
