"""What hmb-bench says about its benchmarks (`hmb-bench --list --json`): the toolkit's one
source for benchmark names, options (parameter or run control), metrics (unit, direction,
signed, summary-worthy) and layout needs. The toolkit keeps no per-benchmark list of its own.

Descriptors are read once per hmb-bench binary (keyed by path, size and modification time).
Reading results needs no binary: without one, what the result records carry (unit,
higher_is_better) is used, and the rest is unknown (None).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess

from ..paths import REPO


class DescriptorError(Exception):
    """hmb-bench could not describe its benchmarks (one line)."""


@dataclasses.dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    description: str
    higher_is_better: bool
    signed: bool
    in_table: bool
    bounds: str = ""    # what the definition allows, "LO..HI" (parse_bounds)
    fixed: str = ""     # "VALUE at COL=V[; ...]": the value the definition gives there (parse_fixed)
    set_by: str = ""    # options that set the reading by construction, comma-separated

    def allowed(self) -> tuple[float, float]:
        """(lo, hi) of the readings the benchmark can produce: its bounds, else 0 upwards for a
        metric that cannot be negative."""
        lo, hi = parse_bounds(self.bounds)
        lo = lo if lo is not None else (-math.inf if self.signed else 0.0)
        return lo, hi if hi is not None else math.inf

    @property
    def fixed_at(self) -> tuple:
        """((value, {column: value}),) where the definition gives the value (parse_fixed)."""
        return parse_fixed(self.fixed)

    @property
    def set_by_options(self) -> tuple:
        return tuple(x.strip() for x in self.set_by.split(",") if x.strip())


@dataclasses.dataclass(frozen=True)
class Option:
    name: str
    type: str
    default: str | None
    role: str           # "parameter" or "run-control"
    help: str = ""
    range: tuple | None = None
    choices: tuple | None = None


@dataclasses.dataclass(frozen=True)
class Mode:
    """A paired mode (phase) of a benchmark: its --mode name, whether --mode lists it (choice) and
    runs it by default, and the metrics it adds (`modes` of --describe)."""
    name: str
    choice: bool
    default: bool
    metrics: tuple


@dataclasses.dataclass(frozen=True)
class Bench:
    name: str
    group: str
    summary: str
    options: tuple
    metrics: tuple
    min_ranks: int = 1
    rank_multiple: int = 1
    thread_level: str = "SINGLE"
    spare_core_when: str | None = None
    # what some option values need from a launch: {"option", "values", "env": {flavor: {VAR: template}},
    # "layout", "why"} (the benchmark's hmb_option_rule rows); the paired modes (Mode) with their metrics
    rules: tuple = ()
    modes: tuple = ()

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)

    @property
    def run_control(self) -> frozenset:
        return frozenset(o.name for o in self.options if o.role == "run-control")


def parse(text: str) -> dict:
    """name -> Bench from the JSON of `hmb-bench --list --json` (or BENCH --describe --json)."""
    try:
        return parse_obj(json.loads(text))
    except ValueError as e:
        raise DescriptorError(f"hmb-bench --list --json: not JSON ({e})") from None


def parse_bounds(text) -> tuple:
    """A metric's "LO..HI" (either end may be empty) as (lo, hi), None for an open end."""
    if not text:
        return (None, None)
    lo, sep, hi = str(text).partition("..")
    if not sep:
        raise ValueError(f"bounds {text!r}: expected LO..HI")
    return (float(lo) if lo.strip() else None, float(hi) if hi.strip() else None)


def parse_fixed(text) -> tuple:
    """A metric's "VALUE at COL=V[,COL=V][; VALUE at ...]" as ((value, {col: v}), ...): where the
    definition gives the value (early-bird is 0 with one partition, and with one thread)."""
    if not text:
        return ()
    out = []
    for part in str(text).split(";"):
        value, sep, where = part.strip().partition(" at ")
        if not sep:
            raise ValueError(f"fixed {text!r}: expected VALUE at COL=V")
        cond = {}
        for item in where.split(","):
            col, eq, v = item.partition("=")
            if not eq:
                raise ValueError(f"fixed {text!r}: expected COL=V")
            cond[col.strip()] = v.strip()
        out.append((float(value), cond))
    return tuple(out)


def _checked(text, parse) -> str:
    """A definition field as text, once parse accepts it (a malformed one: the output's problem)."""
    parse(text)
    return str(text or "")


def parse_obj(data: dict) -> dict:
    """parse() for the decoded object (also a "descriptors" record in a results file)."""
    try:
        out = {}
        for b in data["benchmarks"]:
            options = tuple(Option(o["name"], o["type"], o.get("default"), o.get("role", "parameter"),
                                   o.get("help") or "", tuple(o["range"]) if o.get("range") else None,
                                   tuple(o["choices"]) if o.get("choices") else None)
                            for o in b.get("options", []))
            metrics = tuple(Metric(m["name"], m.get("unit", ""), m.get("description", ""),
                                   bool(m.get("higher_is_better")), bool(m.get("signed")),
                                   bool(m.get("in_table", True)), _checked(m.get("bounds"), parse_bounds),
                                   _checked(m.get("fixed"), parse_fixed), str(m.get("set_by") or ""))
                            for m in b.get("metrics", []))
            modes = tuple(Mode(m["name"], bool(m.get("choice", True)), bool(m.get("default", False)),
                               tuple(m.get("metrics") or ()))
                          for m in b.get("modes") or [])
            out[b["name"]] = Bench(b["name"], b.get("group", ""), b.get("summary", ""), options, metrics,
                                   int(b.get("min_ranks", 1)), int(b.get("rank_multiple", 1)),
                                   b.get("thread_level", "SINGLE"), b.get("spare_core_when"),
                                   tuple(b.get("rules") or ()), modes)
        return out
    except (ValueError, KeyError, TypeError) as e:
        raise DescriptorError(f"hmb-bench --list --json: unexpected output ({e})") from None


def record(described: dict) -> dict:
    """A "descriptors" record for a results file (read back by parse_obj)."""
    benches = []
    for b in described.values():
        d = dataclasses.asdict(b)
        d["metrics"] = [{k: v for k, v in m.items() if v != "" or k not in ("bounds", "fixed", "set_by")}
                        for m in d["metrics"]]
        benches.append(d)
    return {"type": "descriptors", "schema_version": 1, "benchmarks": benches}


_cache: dict = {}


def load(command: list[str], env: dict | None = None) -> dict:
    """Descriptors of the hmb-bench run by `command` (its path first), read once per binary."""
    try:
        st = os.stat(command[0])
        key = (tuple(command), st.st_size, st.st_mtime_ns)
    except OSError:
        key = (tuple(command), None, None)   # a command found on PATH (the testing override)
    if key not in _cache:
        try:
            p = subprocess.run(list(command) + ["--list", "--json"], capture_output=True, text=True, errors="replace",
                               timeout=60, env=env)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise DescriptorError(f"cannot run {command[0]} --list --json: {e}") from None
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["no message"])[-1]
            raise DescriptorError(f"{command[0]} --list --json failed (exit {p.returncode}): {last}")
        _cache[key] = parse(p.stdout)
    return _cache[key]


def local_binaries() -> list:
    """The hmb-bench executables built in this repository, newest first (hmb.run.mpi.local_binary
    builds one when there is none). One being linked is left out: the linker writes the file
    without its execute bits and adds them when it is done, so the newest file may be one that
    cannot run yet (`hmb build` beside, or a test building another library's)."""
    root = REPO / os.environ.get("HMB_BUILD_ROOT", "build")
    found = []
    for path in root.glob("*/hmb-bench"):
        try:
            mtime = path.stat().st_mtime
        except OSError:
            continue                      # removed since the glob (a rebuild)
        if os.access(path, os.X_OK):
            found.append((mtime, path))
    return [path for _, path in sorted(found, key=lambda t: t[0], reverse=True)]


def local_loaded() -> tuple:
    """(path, descriptors) of the newest hmb-bench built here that answers --list --json;
    (None, {}) when none is built. The error of the last one tried when none answers."""
    error = None
    for path in local_binaries():
        try:
            return path, load([str(path)])
        except DescriptorError as e:
            error = e
    if error is not None:
        raise error
    return None, {}


def local() -> dict:
    """Descriptors of the newest hmb-bench built in this repository ({} when none is built or
    none answers): what the report and compare use to read metrics of results files."""
    try:
        return local_loaded()[1]
    except DescriptorError:
        return {}


def metric_info(bench: str, name: str, record_metric: dict | None = None,
                known: dict | None = None) -> Metric | None:
    """The metric as its descriptor says, else as much as a result record says (signed and
    in_table unknown: False/True)."""
    desc = (local() if known is None else known).get(bench)
    m = desc.metric(name) if desc else None
    if m is not None:
        return m
    if record_metric is None:
        return None
    hib = record_metric.get("higher_is_better")
    return Metric(name, str(record_metric.get("unit", "")), "", bool(hib), False, True)


def known_run_control(known: dict | None = None) -> frozenset:
    """Run-control option names any described benchmark declares (the common ones)."""
    known = local() if known is None else known
    return frozenset().union(*(b.run_control for b in known.values())) if known else frozenset()


