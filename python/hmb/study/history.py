"""A claim's verdict over time: every study run keeps its readings beside its results, and a
verdict stands only where this run and the kept runs fall on one side of the claim's range.

The history is one JSON Lines file beside the study directories (`results/history.jsonl` for
`results/study-NAME` and `results/demo`): one record per claim, library and run, with the time,
the HMB commit, the library's version, the machine and the network, this run's reading, the
reading of each of its launches and its decision (claims.decide). A run's own records are never
read back as kept runs (its `source`: the results file and the start of its sweep), so
reporting a run again does not count it twice.

over_time sets a run's verdict beside the kept runs of the same claim, library version, machine
and network (docs/studies.md, "Verdicts over time"):
- runs decided both ways: **unstable**, each run's reading and time shown;
- this run decided and no kept run against it: the verdict, "differs in 5 of 5 runs, first … last";
- this run undecided: the runs' readings decide where at least MIN_LAUNCHES runs' 97.5 % interval
  lies on one side (claims.decide over runs instead of launches); else undecided.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import platform
import socket
import subprocess
from pathlib import Path

from . import claims as hclaims

SCHEMA = 1
KEEP = 50   # the newest kept runs read per claim (a history of a year of daily demos stays short)


def path_for(outdir) -> Path:
    """The history beside a study directory: its parent's history.jsonl."""
    return Path(outdir).resolve().parent / "history.jsonl"


def machine() -> str:
    """This machine as the history names it: host name, CPUs and model."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{socket.gethostname()}, {os.cpu_count() or 1} CPUs, {model}"


def commit() -> str:
    here = Path(__file__).resolve().parent
    try:
        p = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True,
                           text=True, timeout=5)
        return p.stdout.strip() if p.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def claim_key(study: str, claim: dict) -> str:
    """A claim's identity across runs: its study, source, words, label and what it reads (an
    edited claim starts a history of its own)."""
    fields = [study, claim.get("figure"), claim.get("quote"), claim.get("label", ""), claim.get("bench"),
              claim.get("metric"), claim.get("where"), claim.get("over"), claim.get("stat", "median"),
              claim.get("trend"), claim.get("peak"), claim.get("compare"), claim.get("pair_on")]
    return hashlib.sha1(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def records(study: str, verdicts: list, source: str, when: str | None = None, network: str = "") -> list[dict]:
    """The history records of a run's verdicts: those with a reading and a decision (a claim
    judged here, whatever it decided); not-comparable claims keep no history."""
    out, when = [], when or _now()
    where, sha = machine(), commit()
    for v in verdicts:
        if v.decision is None or not math.isfinite(v.value):
            continue
        out.append({"type": "claim_run", "schema": SCHEMA, "study": study, "key": claim_key(study, v.claim),
                    "figure": v.claim.get("figure"), "label": v.claim.get("label", ""), "mpi": v.mpi,
                    "library": v.library, "machine": where, "network": network, "time": when, "commit": sha,
                    "reading": v.value, "launches": [float(x) for x in v.launches],
                    "decision": v.decision.verdict, "source": source})
    return out


def append(path: Path, recs: list[dict]) -> None:
    """Append records to the history (made if missing); one write, so a reader never sees half."""
    if not recs:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(r) + "\n" for r in recs)
    with open(path, "a") as f:
        f.write(data)


def load(path: Path) -> list[dict]:
    """The history's records (lines that are not a claim_run record are skipped)."""
    out = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if isinstance(r, dict) and r.get("type") == "claim_run" and isinstance(r.get("reading"), (int, float)):
                    out.append(r)
    except OSError:
        return []
    return out


def kept(history: list[dict], study: str, v, source: str, network: str = "") -> list[dict]:
    """The kept runs of v's claim: same study, claim, library name and version, machine and
    network; not this run's own (source); oldest first, the newest KEEP."""
    key, where = claim_key(study, v.claim), machine()
    runs = [r for r in history if r.get("key") == key and r.get("mpi") == v.mpi and r.get("library") == v.library
            and r.get("machine") == where and r.get("network", "") == network and r.get("source") != source]
    return sorted(runs, key=lambda r: str(r.get("time")))[-KEEP:]


def _stamp(iso: str, first: bool = True) -> str:
    try:
        t = datetime.datetime.fromisoformat(str(iso))
    except ValueError:
        return str(iso)
    return t.strftime("%Y-%m-%d %H:%M" if first else "%m-%d %H:%M")


def over_time(v, runs: list[dict], now: str | None = None):
    """v (this run's verdict, claims.judge) set beside its kept runs: its verdict and reason
    replaced as the module says; v.history says what the runs read. Returns v."""
    if v.decision is None or not runs:
        return v
    now = now or _now()
    every = runs + [{"time": now, "reading": v.value, "decision": v.decision.verdict}]
    decided = [r for r in every if r.get("decision") in hclaims.DECIDED]
    sides = {r["decision"] for r in decided}
    span = f"{_stamp(every[0]['time'])} … {_stamp(every[-1]['time'], first=False)}"
    listing = "; ".join(f"{_stamp(r['time'], first=False)}: {hclaims.fmt(float(r['reading']))} "
                        f"({r.get('decision')})" for r in every[-8:])
    if len(sides) == 2:
        agree = sum(r["decision"] == hclaims.AGREES for r in decided)
        v.verdict = hclaims.UNSTABLE
        v.history = (f"agrees in {agree}, differs in {len(decided) - agree} of {len(every)} runs, {span}: "
                     f"{listing}")
        return v
    if v.verdict in hclaims.DECIDED:
        undecided = len(every) - len(decided)
        v.history = (f"{v.verdict} in {len(decided)} of {len(every)} runs, {span}"
                     + (f" ({undecided} undecided)" if undecided else ""))
        return v
    over_runs = hclaims.decide(v.claim, v.value, [float(r["reading"]) for r in every])
    if over_runs.verdict in hclaims.DECIDED and (not sides or sides == {over_runs.verdict}):
        v.verdict = over_runs.verdict
        v.history = (f"{over_runs.verdict} over {len(every)} runs, {span} ({over_runs.text.replace('launches', 'runs')}); "
                     f"this run alone is undecided: {listing}")
        return v
    v.history = f"{len(every)} runs, {span}: {listing}"
    return v
