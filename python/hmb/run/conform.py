"""`hmb conform`: run hmb-bench's conformance checks under each MPI library and print one matrix.

Every check runs in its own launch (with a launch timeout, and the launch layer's shared-memory
clean-up after a killed launch), so one check that wedges or crashes a library costs that check
only. A launch that ends without the check's record (a crash, the launch timeout) is recorded as
a FAIL naming how it ended. Records: the "conformance" type of docs/output-schema.md; the
reproducer of each is the exact command of its launch. docs/conformance.md explains each check.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import sys
import tempfile
import time
from pathlib import Path

from ..data import launchlog
from . import launch

# Bound of one check inside hmb-bench (its --bound) and the launch timeout around it: start-up,
# the bound, the verdict gather (bound + 2 s) and the abort of a wedged run.
BOUND_S = 3.0
LAUNCH_TIMEOUT_S = 45.0
MT_THREADS = 4


@dataclasses.dataclass(frozen=True)
class Spec:
    """One check as one launch: its name in the matrix, hmb-bench arguments, ranks, threads."""
    name: str
    args: tuple
    ranks: int = 2
    threads: int = 1
    env: tuple = ()          # (flavor, NAME, value): set for that library only


def specs() -> list[Spec]:
    out = [Spec(f"inactive-buffer requests={k}", ("--check", "inactive-buffer", "--requests", str(k)))
           for k in (1, 2, 8)]
    out += [Spec("pready-nonblocking", ("--check", "pready-nonblocking")),
            Spec("parrived-truth", ("--check", "parrived-truth"))]
    out += [Spec(f"parrived-inactive {s}", ("--check", "parrived-inactive", "--state", s))
            for s in ("unstarted", "null", "completed")]
    out += [Spec(f"part-counts {a}->{b}", ("--check", "part-counts", "--counts", f"{a}:{b}"))
            for a, b in ((4, 8), (8, 2), (3, 6), (6, 4))]
    out += [Spec(f"pready-order {o}", ("--check", "pready-order", "--order", o),
                 threads=MT_THREADS if o == "threads" else 1)
            for o in ("reverse", "random", "threads", "range", "list")]
    out += [Spec("third-rank", ("--check", "third-rank"), ranks=3)]
    out += [Spec(f"many-partitions partitions={n}", ("--check", "many-partitions", "--many", str(n)))
            for n in (1024, 65536)]
    out += [Spec("restarts", ("--check", "restarts")),
            Spec("request-free", ("--check", "request-free")),
            Spec("multi-completion", ("--check", "multi-completion")),
            Spec("mt-order", ("--check", "mt-order"), threads=MT_THREADS),
            Spec("info-assertions", ("--check", "info-assertions")),
            # MPICH streams need reserved VCIs (SPEC §4)
            Spec("streams", ("--check", "streams"), env=(("mpich", "MPIR_CVAR_CH4_RESERVE_VCIS", "1"),))]
    out += [Spec(f"thread-level {lv}", ("--check", "thread-level", "--thread-level", lv))
            for lv in ("single", "funneled", "serialized", "multiple")]
    return out


def _signal_name(status: int) -> str:
    sig = status - 128 if status > 128 else -status
    try:
        return f"signal {sig} ({signal.Signals(sig).name})"
    except ValueError:
        return f"exit status {status}"


def _ended_without_record(status: int, stderr: str, timeout: float) -> str:
    """Why a launch left no record, in one line."""
    if status == 124:
        return f"the launch did not end within {timeout:g} s and was killed (the check's own bound did not end it)"
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    crash = next((ln for ln in lines if "signal" in ln.lower() and "prterun" not in ln.lower()), None)
    how = crash or launchlog.last_said("\n".join(ln for ln in lines if not ln.startswith("#")))
    what = _signal_name(status) if status > 128 or status < 0 else f"exit status {status}"
    return f"the launch ended ({what}) before the check reported" + (f": {how[:300]}" if how else "")


def run_one(target: launch.Target, spec: Spec, json_path: str, bound_s: float = BOUND_S,
            timeout: float = LAUNCH_TIMEOUT_S, extra_args: tuple = ()) -> dict:
    """Launch one check; returns its conformance record (read back, or made for a launch that
    left none), with mpi (the hmb MPI name) and the launch's exact reproducer."""
    args = list(spec.args) + ["--bound", f"{bound_s:g}s", "--threads", str(spec.threads)] + list(extra_args)
    env_add = {name: value for flavor, name, value in spec.env if flavor == target.flavor}
    with tempfile.TemporaryDirectory(prefix="hmb-conform-") as tmp:
        out_json = os.path.join(tmp, "out.jsonl")
        env, added = launch.environment(target, spec.threads, env_add, None, spec.ranks)
        cmd = launch.command(target, "conform", args + ["--json", out_json], spec.ranks, spec.threads,
                             env_names=sorted(added))
        t0 = time.monotonic()
        with open(os.path.join(tmp, "stdout"), "w+") as so, open(os.path.join(tmp, "stderr"), "w+") as se:
            # a failed check's shared-memory segments: removed by run_streaming (remove_left_shm)
            status = launch.run_streaming(cmd, env, timeout, stdout=so, stderr=se, library=target.flavor)
            so.seek(0)
            se.seek(0)
            stderr = se.read() + "\n" + so.read()   # MPICH's launcher tells a rank's signal on stdout
        seconds = time.monotonic() - t0
        records = []
        if os.path.exists(out_json):
            with open(out_json, errors="replace") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(rec, dict):
                        records.append(rec)
    library = next(((r.get("mpi") or {}).get("library") for r in records
                    if r.get("type") == "run" and isinstance(r.get("mpi"), dict)), None)
    mine = [r for r in records if r.get("type") == "conformance"]
    # the reproducer: this launch's command without the temporary --json
    repro_cmd = cmd[:-2] if cmd[-2:] == ["--json", out_json] else cmd
    repro = " ".join(f"{k}={shlex.quote(v)}" for k, v in added.items()) + " " + shlex.join(repro_cmd)
    if mine:
        rec = dict(mine[-1])
        if len(mine) > 1:   # one launch, one check: the worst counts
            order = {"FAIL": 2, "UNSUPPORTED": 1, "PASS": 0}
            rec = dict(max(mine, key=lambda r: order.get(r.get("verdict"), 0)))
    elif status == 2:
        rec = {"type": "conformance", "schema": 1, "library": library or target.name, "check": spec.name,
               "verdict": "UNSUPPORTED", "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "reason": "hmb-bench refused the launch: " + (stderr.strip().splitlines() or ["(no message)"])[-1][:300]}
    else:
        rec = {"type": "conformance", "schema": 1, "library": library or target.name, "check": spec.name,
               "verdict": "FAIL", "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "reason": _ended_without_record(status, stderr, timeout)}
    rec["check"] = spec.name
    rec["mpi"] = target.name
    rec["reproducer"] = repro.strip()
    rec["seconds"] = rec.get("seconds", round(seconds, 3))
    rec["launch_s"] = round(seconds, 3)
    with open(json_path, "a") as f:
        f.write(json.dumps(rec) + "\n")
    return rec


def matrix_rows(records: list[dict], libraries: list[str] | None = None) -> tuple[list, list, list]:
    """(header, rows, notes): checks as rows, libraries as columns (a record's `mpi`, else its
    `library`), verdicts as cells; each FAIL and UNSUPPORTED cell refers to a numbered note
    [n, check, library, reason, reproducer], so the table stays narrow. The last record of a
    (check, library) counts."""
    column = lambda r: r.get("mpi") or r.get("library") or "?"  # noqa: E731
    if libraries is None:
        libraries = list(dict.fromkeys(column(r) for r in records))
    rows: list[str] = []
    cell: dict = {}
    for r in records:
        if r.get("check") not in rows:
            rows.append(r.get("check"))
        cell[(r.get("check"), column(r))] = r
    notes: list = []
    table = []
    for row in rows:
        line = [row]
        for lib in libraries:
            r = cell.get((row, lib))
            if r is None:
                line.append("-")
                continue
            text = r.get("verdict", "?")
            if text != "PASS":
                notes.append([len(notes) + 1, row, lib, r.get("reason") or "", r.get("reproducer") or ""])
                text += f" [{len(notes)}]"
            line.append(text)
        table.append(line)
    return ["check"] + libraries, table, notes


def matrix(records: list[dict], libraries: list[str]) -> str:
    """The matrix as text, the notes' reasons below it."""
    header, rows, notes = matrix_rows(records, libraries)
    table = [header] + rows
    widths = [max(len(t[i]) for t in table) for i in range(len(header))]
    out = ["  ".join(c.ljust(w) for c, w in zip(t, widths)).rstrip() for t in table]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out + ([""] + [f"[{n}] {check} / {lib}: {why}" for n, check, lib, why, _ in notes]
                              if notes else []))


def parse_checks(text: str | None) -> list[str] | None:
    """--check NAMES: the checks named (a comma list of check names, or of a check's first word:
    "part-counts" is all four), None for all when not given. An empty list, a name that is no
    check, or one written twice is a one-line LaunchError (',' ran every check)."""
    if text is None:
        return None
    names = [x.strip() for x in text.split(",")]
    shown = text if text.isprintable() else ascii(text)[1:-1]
    if not any(names):
        raise launch.LaunchError(f"--check '{shown[:60]}': names no check (a comma list, e.g. "
                                 "--check parrived-truth,restarts; docs/conformance.md)")
    known = {s.name for s in specs()} | {s.name.split()[0] for s in specs()}
    for n in names:
        if not n:
            raise launch.LaunchError(f"--check '{shown[:60]}': an empty name in the list")
        if n not in known:
            n = n if n.isprintable() else ascii(n)[1:-1]
            raise launch.LaunchError(f"--check: no check named '{n[:60]}' (checks: "
                                     f"{', '.join(dict.fromkeys(s.name.split()[0] for s in specs()))}; "
                                     "docs/conformance.md)")
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise launch.LaunchError(f"--check: '{twice}' named twice")
    return names


def run(libraries: list[str], json_path: str, only: list[str] | None = None, bound_s: float = BOUND_S,
        timeout: float = LAUNCH_TIMEOUT_S) -> int:
    """Every check under every library; prints progress, then the matrix. Exit status 1 if any
    check FAILed, else 0."""
    chosen = [s for s in specs() if not only or any(s.name == o or s.name.split()[0] == o for o in only)]
    if not chosen:
        raise launch.LaunchError(f"--check: no check named {', '.join(only)} (see docs/conformance.md)")
    Path(json_path).parent.mkdir(parents=True, exist_ok=True)
    targets = [launch.prepare(lib) for lib in libraries]
    records = []
    t0 = time.monotonic()
    for target in targets:
        for spec in chosen:
            rec = run_one(target, spec, json_path, bound_s, timeout)
            records.append(rec)
            print(f"hmb conform: {target.name:8s} {rec['verdict']:11s} {spec.name} ({rec['launch_s']:.1f} s)",
                  file=sys.stderr, flush=True)
    print(matrix(records, libraries))
    print(f"\n{len(records)} records in {json_path} ({time.monotonic() - t0:.0f} s); reproduce one with its "
          "'reproducer' field; docs/conformance.md explains each check")
    return 1 if any(r["verdict"] == "FAIL" for r in records) else 0
