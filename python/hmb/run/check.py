"""`hmb check`: can numbers measured on this machine be trusted? (docs/methodology.md, "Self-check")

Machine physics lives here, not in the unit tests: each expectation is measured on the user's
own machine or cluster node, printed with its figure, PASS / WARN / FAIL and why it matters, and
the whole record is written as JSON. Every threshold is in EXPECTATIONS below, nowhere else.

Each check is a small function from measured records (hmb-bench's JSON: the run header, the
trailing clocks record, result records; /proc/stat) to Check lines, so the classification can be
tested on synthetic figures without launching anything.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..data import DATA_DIR, launchlog
from ..data.outputs import write_json
from . import launch
from . import mpi as hmpi

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"
INF = math.inf


@dataclasses.dataclass(frozen=True)
class Expectation:
    unit: str
    passes: tuple   # inclusive (lo, hi) of a PASS
    warns: tuple    # inclusive (lo, hi) of a WARN; outside both: FAIL
    why: str        # one line: why it matters


# Every threshold, in one table (name -> expectation). Ratios are hmb-bench / reference.
EXPECTATIONS = {
    "binding_shared_cores": Expectation(
        "threads", (0, 0), (0, 0),
        "ranks/threads sharing a core time-slice: latencies jump by a scheduler quantum"),
    "binding_unpinned": Expectation(
        "ranks", (0, 0), (0, INF),
        "a rank allowed on more cores than it has threads may migrate between iterations"),
    "timer_resolution_ns": Expectation(
        "ns", (0, 100), (0, 1000), "a coarse clock step blurs single-iteration timings"),
    "timer_overhead_ns": Expectation(
        "ns", (0, 100), (0, 1000), "every timestamp costs this much; short iterations carry it"),
    "calibration_error_10us": Expectation(
        "us", (-1, 1), (-3, 3), "async's calibrated work C (sustained rate) is only as exact as this (SPEC: max(1 us, 1%))"),
    "calibration_error_1ms": Expectation(
        "us", (-10, 10), (-30, 30), "async's calibrated work C (sustained rate) is only as exact as this (SPEC: 1%)"),
    "calibration_error_100ms": Expectation(
        "us", (-1000, 1000), (-3000, 3000), "async's calibrated work C (sustained rate) is only as exact as this (SPEC: 1%)"),
    "compute_time_error_10us": Expectation(
        "us", (-1, 1), (-3, 3), "the delays part, halo3d, sweep3d, mt, stencil3d compute are only as exact as this (SPEC: max(1 us, 1%))"),
    "compute_time_error_1ms": Expectation(
        "us", (-10, 10), (-30, 30), "the delays part, halo3d, sweep3d, mt, stencil3d compute are only as exact as this (SPEC: 1%)"),
    "compute_time_error_100ms": Expectation(
        "us", (-1000, 1000), (-3000, 3000), "the delays part, halo3d, sweep3d, mt, stencil3d compute are only as exact as this (SPEC: 1%)"),
    "compute_descheduled_pct": Expectation(
        "%", (0, 1), (0, INF), "other processes took the core from a computing thread (100 ms WORK request, wall - "
        "on-core): async's T_total and C_actual include it, the calibration rows above do not"),
    "clock_offset_same_host_us": Expectation(
        "us", (0, 10), (0, 100), "one clock on one host: the offset estimator must find ~0, or one-way times are off"),
    "clock_offset_one_clock_us": Expectation(
        "us", (0, 10), (0, 100), "nodes of one machine (hmb lab) share its clock: the estimate across hosts must be ~0"),
    "clock_end_residual_us": Expectation(
        "us", (0, 10), (0, 100), "how far cross-process timestamps drifted by the end of a run"),
    "clock_drift_ppm": Expectation(
        "ppm", (0, 50), (0, 500), "drift turns a start-up offset into an error growing with run length"),
    "steal_pct": Expectation(
        "%", (0, 1), (0, 10), "time the hypervisor gave these CPUs to other guests: timings swing between runs"),
    "interrupt_lost_pct": Expectation(
        "%", (0, 2), (0, 5), "share of a core taken by ticks, IRQs, VM exits: noise in every timing"),
    "node_spare_cores": Expectation(
        "cores", (1, INF), (0, INF), "across nodes (--hosts): cores a node has beside its ranks' threads, for the "
        "kernel's network work and the library's threads; with none, overlap and progress readings time-slice "
        "(study claims marked lab = \"overlap\" are refused there)"),
    "load_per_core": Expectation(
        "", (0, 0.25), (0, 1.0), "other runnable processes compete for the cores the benchmark uses"),
    "latency_8B_us": Expectation(
        "us", (0.01, 20), (0.01, 10_000), "8 B ping-pong latency: physically possible and plausible"),
    "latency_8B_ratio": Expectation(
        "", (0.8, 1.25), (0.5, 2.0), "hmb-bench's harness must add nothing measurable to a plain ping-pong"),
    "latency_1K_ratio": Expectation(
        "", (0.8, 1.25), (0.5, 2.0), "hmb-bench's harness must add nothing measurable to a plain ping-pong"),
    "async_eager_hidden_pct": Expectation(
        "%", (15, INF), (-INF, INF), "an eager message (2 KB) should be partly hidden by compute even without progress"),
    "async_rendezvous_hidden_pct": Expectation(
        "%", (-INF, 50), (-INF, INF), "a rendezvous message (1 MB) waits for MPI_Wait without progress"),
    "async_poll_wait_ratio": Expectation(
        "", (0, 0.5), (0, INF), "MPI_Test during compute should move a 1 MB transfer out of the final wait"),
    "async_poll_gain_pct": Expectation(
        "%", (-INF, 10), (-INF, INF), "reference finding: polling buys no efficiency at 1 MB when every core computes"),
    "async_poll_slowdown": Expectation(
        "", (0, 1.5), (0, 2.0), "poll time is excluded from C_actual: test:P must not look like a compute slow-down"),
    "async_slowdown_min": Expectation(
        "", (0.9, INF), (0.8, INF), "the kernel cannot beat its own undisturbed calibration"),
    "async_efficiency_excess_pct": Expectation(
        "%", (-INF, 0), (-INF, 10), "E cannot exceed 100% beyond the kernel's calibration error"),
    "async_progress_shares_compute_core": Expectation(
        "", (0, 0), (0, 0), "a progress thread on a computing core steals the compute it should overlap"),
    "cache_cold_read_ratio": Expectation(
        "", (1.5, INF), (1.1, INF),
        "--cache cold must evict: a read of flushed buffers slower than a hot one, or cold results are hot"),
}
# Round trips per latency sample, hmb-bench (--batch) and the minimal ping-pong alike.
LATENCY_BATCH = 16
# A drift fitted over less than this is not told from the offset estimator's noise.
MIN_DRIFT_SPAN_S = 1.0


@dataclasses.dataclass
class Check:
    name: str
    figure: float | None
    status: str
    why: str
    detail: str = ""


def classify(name: str, figure: float | None, detail: str = "") -> Check:
    """PASS / WARN / FAIL of a figure against EXPECTATIONS[name]; None: WARN, not recorded."""
    e = EXPECTATIONS[name]
    if figure is None or (isinstance(figure, float) and math.isnan(figure)):
        return Check(name, None, WARN, e.why, detail or "not recorded")
    if e.passes[0] <= figure <= e.passes[1]:
        status = PASS
    elif e.warns[0] <= figure <= e.warns[1]:
        status = WARN
    else:
        status = FAIL
    return Check(name, float(figure), status, e.why, detail)


def _bounds(e: Expectation) -> str:
    def rng(r):
        lo, hi = r
        if lo == -INF:
            return f"<= {hi:g}"
        if hi == INF:
            return f">= {lo:g}"
        return f"{lo:g}" if lo == hi else f"{lo:g}..{hi:g}"
    if e.warns == (-INF, INF):
        return f"pass {rng(e.passes)}, else warn"
    return f"pass {rng(e.passes)}" + ("" if e.warns == e.passes else f", warn {rng(e.warns)}")


def format_line(c: Check) -> str:
    """One line per expectation: status, name, figure with unit, the bounds, why (and detail)."""
    e = EXPECTATIONS[c.name]
    fig = "-" if c.figure is None else f"{c.figure:.4g}{(' ' + e.unit) if e.unit else ''}"
    extra = f" [{c.detail}]" if c.detail else ""
    return f"{c.status:<4}  {c.name:<36} {fig:>14}  ({_bounds(e)}){extra}: {c.why}"


def exit_status(checks: list[Check]) -> int:
    """0: nothing failed (warnings allowed); 1: at least one FAIL."""
    return 1 if any(c.status == FAIL for c in checks) else 0


# ------------------------------------------------------------------ checks (pure)

def _cpus(cpulist: str) -> set[int]:
    out: set[int] = set()
    for part in filter(None, cpulist.split(",")):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def check_binding(header: dict) -> list[Check]:
    seen: dict[tuple, int] = {}
    for place in header.get("placement", []):
        for cpu in place.get("thread_cpus", []):
            key = (place.get("host"), cpu)
            seen[key] = seen.get(key, 0) + 1
    shared = sum(n for n in seen.values() if n > 1)
    threads = header.get("threads", 1)
    unpinned = [p["rank"] for p in header.get("placement", []) if len(_cpus(p.get("cpuset", ""))) > threads]
    cores = ", ".join(f"rank {p['rank']}: {p.get('cpuset')}" for p in header.get("placement", [])[:4])
    return [classify("binding_shared_cores", shared if seen else None, cores),
            classify("binding_unpinned", len(unpinned) if header.get("placement") else None,
                     f"ranks {unpinned}" if unpinned else "")]


def check_timer(headers: list[dict]) -> list[Check]:
    timers = [h["timer"] for h in headers if h.get("timer")]
    out = []
    for key in ("resolution_ns", "overhead_ns"):
        values = [t[key] for t in timers if t.get(key) is not None]
        out.append(classify(f"timer_{key}", statistics.median(values) if values else None, _spread(values)))
    return out


CHECK_REQUESTS = ((10_000, "10us"), (1_000_000, "1ms"), (100_000_000, "100ms"))


def check_calibration(headers: list[dict]) -> list[Check]:
    """hmb-bench's start-up compute check (run header calibration.check: every thread of every
    rank at once, after MPI_Init), measured - requested in us: for each launch the median over
    threads and ranks, the figure the median over launches; the detail adds their spread and the
    worst thread of any rank in any launch. calibration_error_*: the WORK kind at the sustained
    rate (async's C), on its core as the rate is measured (work_on_core_*; the wall time,
    work_*, from an hmb-bench that records no on-core time); compute_time_error_*: the TIME kind
    (the delays of the other benchmarks). compute_descheduled_pct: the wall time less the on-core
    time of the largest WORK request, the share other processes took from a computing thread."""
    out = []
    for prefix, name in (("work_", "calibration_error"), ("", "compute_time_error")):
        for request_ns, label in CHECK_REQUESTS:
            errors, worst, wall_only = [], None, False
            for h in headers:
                cal = h.get("calibration", {})
                for c in cal.get("check", []):
                    p = "work_on_core_" if prefix == "work_" and "work_on_core_measured_ns" in c else prefix
                    if c.get("request_ns") != request_ns or c.get(p + "measured_ns") is None:
                        continue
                    wall_only |= prefix == "work_" and p == prefix
                    errors.append((c[p + "measured_ns"] - request_ns) / 1e3)
                    if c.get(p + "worst_measured_ns") is None:
                        continue
                    off = (c[p + "worst_measured_ns"] - request_ns) / 1e3
                    if worst is None or abs(off) > abs(worst[0]):
                        worst = (off, c.get(p + "worst_rank"), c.get(p + "worst_thread"), cal.get("threads"))
            detail = [_spread(errors)]
            if worst is not None:
                detail.append(f"worst thread {worst[0]:+.4g} us (rank {worst[1]} thread {worst[2]}, "
                              f"{worst[3]} per rank)")
            if prefix == "work_" and errors:
                detail.append("wall time: no on-core time recorded" if wall_only else "on core")
            out.append(classify(f"{name}_{label}", statistics.median(errors) if errors else None,
                                "; ".join(d for d in detail if d)))
    request_ns = CHECK_REQUESTS[-1][0]
    taken = [100 * (c["work_measured_ns"] - c["work_on_core_measured_ns"]) / request_ns
             for h in headers for c in h.get("calibration", {}).get("check", [])
             if c.get("request_ns") == request_ns and c.get("work_measured_ns") is not None
             and c.get("work_on_core_measured_ns") is not None]
    out.append(classify("compute_descheduled_pct", statistics.median(taken) if taken else None,
                        "; ".join(d for d in (_spread(taken), "of 100 ms, median thread") if d)))
    return out


def check_cache(headers: list[dict]) -> list[Check]:
    """Median over --cache cold launches of the start-up probe's cold / hot read time."""
    ratios = [h["cache"]["probe_cold_ns"] / h["cache"]["probe_hot_ns"] for h in headers
              if h.get("cache", {}).get("probe_hot_ns", 0) > 0 and "probe_cold_ns" in h["cache"]]
    size = next((h["cache"]["probe_bytes"] for h in headers if "probe_bytes" in h.get("cache", {})), None)
    detail = f"read of {size} B after a flush / hot; {_spread(ratios)}".strip("; ") if size else ""
    return [classify("cache_cold_read_ratio", statistics.median(ratios) if ratios else None, detail)]


def check_interruptions(headers: list[dict], steal_frac: float | None, load_per_core: float | None) -> list[Check]:
    lost = [t["interrupt_lost_frac"] * 100 for h in headers
            for t in h.get("calibration", {}).get("per_thread", []) if t.get("interrupt_lost_frac") is not None]
    rates = [t["interrupts_per_s"] for h in headers for t in h.get("calibration", {}).get("per_thread", [])
             if t.get("interrupts_per_s") is not None]
    rate = f"{statistics.median(rates):.0f} gaps/s" if rates else ""
    return [classify("steal_pct", None if steal_frac is None else 100 * steal_frac, "/proc/stat"),
            classify("interrupt_lost_pct", statistics.median(lost) if lost else None, rate),
            classify("load_per_core", load_per_core, "1-min load average before the check")]


def check_clocks(headers: list[dict], clocks: list[dict], one_clock: bool = False) -> list[Check]:
    """one_clock: the hosts share one clock (the nodes of an hmb lab): the offsets estimated for
    ranks on other hosts than rank 0's, which are applied, must be ~0 too."""
    same_host, other_hosts = [], []
    for h in headers:
        applied, estimated = h.get("clock_offsets_s", []), h.get("clock_offsets_estimated_s", [])
        # The exact 0 is applied on rank 0's host: those are the ranks whose estimate must be ~0.
        same_host += [abs(e) * 1e6 for a, e in zip(applied[1:], estimated[1:]) if a == 0]
        other_hosts += [abs(e) * 1e6 for a, e in zip(applied[1:], estimated[1:]) if a != 0]
    residual = [max((abs(x) for x in c["end_residual_s"]), default=0) * 1e6 for c in clocks if "end_residual_s" in c]
    # Drift from the launch with the longest span: over a short span the fit sees only the
    # estimator's noise (0.1 us over 0.05 s reads as 2 ppm).
    longest = max((c for c in clocks if "drift_ppm" in c and c.get("span_s")), key=lambda c: c["span_s"], default=None)
    drift_check = classify("clock_drift_ppm", None if longest is None else
                           max((abs(x) for x in longest["drift_ppm"]), default=0.0),
                           "" if longest is None else f"over {longest['span_s']:.2g} s")
    if longest is not None and longest["span_s"] < MIN_DRIFT_SPAN_S and drift_check.status == PASS:
        drift_check.status, drift_check.detail = WARN, drift_check.detail + ", too short to resolve drift"
    one = [classify("clock_offset_one_clock_us", max(other_hosts) if other_hosts else None,
                    f"max over ranks on other hosts and launches, {len(other_hosts)} estimates")] if one_clock else []
    return [classify("clock_offset_same_host_us", max(same_host) if same_host else None,
                     "max over ranks and launches" if same_host else "no other rank on rank 0's host"),
            *one,
            classify("clock_end_residual_us", statistics.median(residual) if residual else None, _spread(residual)),
            drift_check]


# Expectations only a run across hosts (--hosts) reads; one host prints the others.
ACROSS_HOSTS = ("clock_offset_one_clock_us", "node_spare_cores")


def check_spare_core(header: dict) -> list[Check]:
    """Across nodes: the cores the busiest node has beside its ranks' threads (the run header's
    cpus_available, ranks_per_node and threads)."""
    try:
        spare = float(header["cpus_available"]) - float(header["ranks_per_node"]) * float(header.get("threads", 1))
    except (KeyError, TypeError, ValueError):
        return [classify("node_spare_cores", None, "the run header does not say")]
    return [classify("node_spare_cores", spare, f"{header['cpus_available']} CPUs a node for "
                     f"{header['ranks_per_node']} rank(s) x {header.get('threads', 1)} thread(s)")]


def check_latency(rounds: list[dict]) -> list[Check]:
    """rounds: [{"hmb": {size: us}, "ref": {size: us}}] from alternating launches."""
    out = []
    hmb8 = [r["hmb"][8] for r in rounds if 8 in r.get("hmb", {})]
    out.append(classify("latency_8B_us", statistics.median(hmb8) if hmb8 else None, _spread(hmb8)))
    for size, name in ((8, "latency_8B_ratio"), (1024, "latency_1K_ratio")):
        ratios = [r["hmb"][size] / r["ref"][size] for r in rounds
                  if r.get("ref", {}).get(size) and size in r.get("hmb", {})]
        ref = [r["ref"][size] for r in rounds if r.get("ref", {}).get(size)]
        detail = (f"hmb {statistics.median([r['hmb'][size] for r in rounds if size in r['hmb']]):.3g} us vs "
                  f"ping-pong {statistics.median(ref):.3g} us, ratios {_spread(ratios)}") if ratios else ""
        out.append(classify(name, statistics.median(ratios) if ratios else None, detail))
    return out


SMALL, LARGE = 2048, 1 << 20


def check_async(results: list[dict], thread_results: list[dict], no_spare_core: str | None = None) -> list[Check]:
    """results: async pt2pt at SMALL and LARGE with progress none and test:2; thread_results:
    progress thread, launched with a spare core per rank when the node has one (no_spare_core:
    why it has not; a progress thread sharing a compute core then is a WARN saying so, not a
    FAIL). Medians of each point's samples."""
    pts = {(r["params"]["progress"], r["params"]["size_bytes"]): r["metrics"] for r in results
           if r.get("status") == "ok"}

    def med(progress, size, metric):
        m = pts.get((progress, size), {}).get(metric)
        return None if not m or m.get("median") is None else m["median"]

    def diff(a, b):
        return None if a is None or b is None else a - b

    wait_none, wait_test = med("none", LARGE, "t_wait_us"), med("test:2", LARGE, "t_wait_us")
    wait_ratio = wait_test / wait_none if wait_none and wait_test is not None else None
    poll_slow = [v for v in (med("test:2", s, "slowdown") for s in (SMALL, LARGE)) if v is not None]
    slowdowns = [m["slowdown"]["median"] for m in pts.values() if m.get("slowdown", {}).get("median") is not None]
    excess = []
    for r in results:
        if r.get("status") != "ok":
            continue
        m = r["metrics"]
        e, ts = (m.get(k, {}).get("median") for k in ("efficiency_pct", "t_sync_us"))
        c_ns = r.get("extra", {}).get("c_request_ns")  # the requested compute: not a per-sample metric
        c = None if c_ns is None else c_ns / 1e3
        # the compute tolerance hmb-bench itself applied to this point (1 % if not recorded)
        tol = r.get("extra", {}).get("compute_tolerance", r.get("compute_tolerance", 0.01))
        if None not in (e, c, ts) and ts > 0:
            excess.append(e - (100.0 + 100.0 * tol * c / ts))
    shares = [r.get("extra", {}).get("progress_shares_compute_core", r.get("progress_shares_compute_core"))
              for r in thread_results if r.get("status") == "ok"]
    recorded = [s for s in shares if s is not None]
    cpus = next((r.get("extra", {}).get("progress_cpus_allowed", r.get("progress_cpus_allowed"))
                 for r in thread_results if r.get("status") == "ok"), None)
    placement = classify("async_progress_shares_compute_core", max(recorded) if recorded else None,
                         f"progress thread cpus {cpus}" if recorded else "not recorded by this hmb-bench")
    if no_spare_core and placement.status == FAIL:
        placement.status = WARN
        placement.detail = f"{placement.detail}; no spare core to give it: {no_spare_core}"
    return [
        classify("async_eager_hidden_pct", med("none", SMALL, "efficiency_pct"), "E, progress none, 2 KB"),
        classify("async_rendezvous_hidden_pct", med("none", LARGE, "efficiency_pct"), "E, progress none, 1 MB"),
        classify("async_poll_wait_ratio", wait_ratio,
                 f"final wait {wait_test:.4g} us with test:2 vs {wait_none:.4g} us without" if wait_ratio else ""),
        classify("async_poll_gain_pct", diff(med("test:2", LARGE, "efficiency_pct"), med("none", LARGE, "efficiency_pct")),
                 "E(test:2) - E(none), 1 MB"),
        classify("async_poll_slowdown", max(poll_slow) if poll_slow else None, "C_actual / C with test:2"),
        classify("async_slowdown_min", min(slowdowns) if slowdowns else None, "over every point"),
        classify("async_efficiency_excess_pct", max(excess) if excess else None,
                 "E - (100 + tol C / T_sync), tol = the point's compute_tolerance"),
        placement,
    ]


def _spread(values: list[float]) -> str:
    if len(values) < 2:
        return ""
    return f"spread {min(values):.4g}..{max(values):.4g} over {len(values)}"


# ------------------------------------------------------------------ measuring

def read_proc_stat(path: str = "/proc/stat") -> tuple[int, int] | None:
    """(steal, total) jiffies of the aggregate cpu line, or None where there is no /proc/stat."""
    try:
        with open(path) as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [int(x) for x in fields[1:]]
    steal = values[7] if len(values) > 7 else 0
    return steal, sum(values[:8])


def steal_fraction(before, after) -> float | None:
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def load_per_core() -> float | None:
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except (OSError, AttributeError):
        return None


def build_pingpong(impl: hmpi.MPI) -> Path:
    """Compile the shipped minimal ping-pong with this MPI's mpicc into its build directory."""
    src = DATA_DIR / "pingpong.c"
    exe = impl.build_dir / "hmb-pingpong"
    if exe.exists() and exe.stat().st_mtime >= src.stat().st_mtime:
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([impl.mpicc, "-O2", "-o", str(exe), str(src)], env=impl.env(), capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        raise hmpi.MPIError(f"compiling {src.name} with {impl.mpicc} failed: {r.stderr.strip()[-300:]}")
    return exe


class Runner:
    """Launches hmb-bench with `threads` OpenMP threads per rank, pinned as `hmb run` pins them;
    hosts (launch.Hosts): across them (hmb check --hosts lab), with the settings a launch there
    gets (lab_env: the lab's network settings and checked path)."""
    def __init__(self, impl: hmpi.MPI, ranks: int, workdir: Path, timeout: float = 300, threads: int = 1,
                 hosts=None, lab_env: dict | None = None):
        self.impl, self.ranks, self.workdir, self.timeout, self.threads = impl, ranks, workdir, timeout, threads
        self.hosts, self.lab_env = hosts, lab_env or {}
        self.count = 0
        self.launches = 0

    def launch_args(self, ranks: int, cores: int = 1) -> list[str]:
        if self.hosts is None:
            return self.impl.launch_args(ranks, cores)
        return launch.hosts_prefix(launch.Target(self.impl.name, self.impl.flavor, self.impl), ranks, cores, self.hosts)

    def _run(self, what: str, cmd: list[str], env: dict | None = None) -> str:
        """Run one launch as every hmb launch runs (launch.run_streaming: the machine lock, its own
        process group, the shared-memory segments a failed launch leaves removed); its stdout."""
        e = self.impl.env()
        e.update(launch.OMP_ENV)
        e["OMP_NUM_THREADS"] = str(self.threads)
        e.update(self.lab_env)
        e.update(env or {})
        for attempt in (1, 2):
            self.launches += 1
            base = self.workdir / f"launch-{self.launches}"
            with open(f"{base}.out", "w+", errors="replace") as so, open(f"{base}.err", "w+", errors="replace") as se:
                rc = launch.run_streaming(cmd, e, self.timeout, stdout=so, stderr=se, library=self.impl.flavor)
                so.seek(0)
                se.seek(0)
                out, err = so.read(), se.read()
            # the machine, not the benchmark, ended it (a launcher that did not start the job):
            # launched again once, saying so, as a sweep's --resume would
            cause = launch.machine_failure(err + out, rc) if rc not in (0, 124) else None
            if cause is None or attempt == 2:
                break
            print(f"hmb: check: {what}: {cause}; launching it again", file=sys.stderr, flush=True)
        if rc == 124:
            raise hmpi.MPIError(f"check: {what} did not finish in {self.timeout:.0f} s")
        if rc != 0:
            raise hmpi.MPIError(f"check: {what} exited {rc}: {launchlog.log_reason(err + out, rc) or '(no message)'}")
        return out

    def cores_per_rank(self, args: list[str]) -> tuple[int, str | None]:
        """The cores to bind each rank to for hmb-bench args, by the launcher's rule
        (launch.cores_per_rank: the threads, plus a spare core for a progress thread when the
        node has room), and why a spare core the run needs was not given (None: given, or none needed)."""
        target = launch.Target(self.impl.name, self.impl.flavor, self.impl)
        cores = launch.cores_per_rank(target, args[0], args[1:], self.ranks, self.threads, "mpiexec")
        spare = launch.spare_cores(target, args[0], args[1:])
        if not spare or cores > self.threads:
            return cores, None
        return cores, (f"{self.ranks} ranks x ({self.threads} thread{'s' if self.threads > 1 else ''} + {spare} "
                       f"progress) need {self.ranks * (self.threads + spare)} cores, this node has {os.cpu_count()}")

    def bench(self, args: list[str], env: dict | None = None, cores: int | None = None) -> list[dict]:
        self.count += 1
        out = self.workdir / f"bench-{self.count}.jsonl"
        launcher = self.launch_args(self.ranks, cores or self.threads)
        # --compute-check full: every header carries the 100 ms request, which a run that computes
        # nothing of 10 ms or more skips (calibration_error_100ms, compute_time_error_100ms)
        self._run(f"hmb-bench {args[0]}", launcher + [str(self.impl.bench)] + args
                  + ["--threads", str(self.threads), "--compute-check", "full", "--json", str(out)], env)
        return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]

    def pingpong(self, exe: Path, iters: int, batch: int, sizes: list[int]) -> dict[int, float]:
        out = self._run("the minimal ping-pong", self.launch_args(2) + [str(exe), str(iters), str(batch)]
                        + [str(s) for s in sizes])
        return {int(a): float(b) for a, b in (line.split() for line in out.splitlines() if line.strip())}


def _of(records: list[dict], kind: str) -> list[dict]:
    return [r for r in records if r.get("type") == kind]


def default_record(mpi_name: str, hosts=None) -> str:
    """The machine record's default path: results/check-MPI.json, and with --hosts the lab's name
    or the hostfile's stem (results/check-mpich-lab.json, check-mpich-hosts.json), never a path
    built from --hosts (a hostfile '../../x' put the record outside results/)."""
    if hosts is None:
        return f"results/check-{mpi_name}.json"
    if hosts.lab is not None:
        tag = hosts.text.replace(":", "-")     # lab, lab-NAME (a checked lab name)
    else:
        tag = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(hosts.hostfile).stem).strip(".") or "hostfile"
    return f"results/check-{mpi_name}-{tag}.json"


def run(mpi_name: str, ranks: int, quick: bool, json_path: str | None, out=print, threads: int = 1,
        hosts=None) -> int:
    """hosts (launch.Hosts): the ranks spread over them; on an hmb lab (one machine's clock) the
    offsets estimated across hosts are checked against the true 0 too."""
    impl = hmpi.find(mpi_name)
    if hmpi.stale(impl):     # missing, or older than a source (a git pull)
        hmpi.build(impl)
    exe = build_pingpong(impl)
    lab_env = {}
    if hosts is not None and hosts.lab is not None:
        lab_env = launch.lab_network(launch.Target(impl.name, impl.flavor, impl), hosts, "mpiexec")
    rounds_n, iters = (2, 300) if quick else (7, 5000)
    load = load_per_core()
    stat_before, t0 = read_proc_stat(), time.monotonic()
    headers, clocks, rounds = [], [], []
    with tempfile.TemporaryDirectory(prefix="hmb-check-") as d:
        runner = Runner(impl, ranks, Path(d), threads=threads, hosts=hosts, lab_env=lab_env)
        # Both sides report the median of samples of LATENCY_BATCH back-to-back round trips: the
        # same statistic, so the ratio is the harness's own cost, not batch means vs single trips.
        lat_args = ["p2p", "--mode", "latency", "--sizes", "8,1K", "--iters", str(iters), "--warmup",
                    str(iters // 10), "--ci-target", "0", "--batch", str(LATENCY_BATCH)]
        for i in range(rounds_n):
            # Alternate which goes first, so neither always sees the machine a moment later.
            order = ("hmb", "ref") if i % 2 == 0 else ("ref", "hmb")
            rnd = {}
            for who in order:
                if who == "ref":
                    rnd["ref"] = runner.pingpong(exe, iters, LATENCY_BATCH, [8, 1024])
                else:
                    recs = runner.bench(lat_args)
                    headers += _of(recs, "run")
                    clocks += _of(recs, "clocks")
                    rnd["hmb"] = {r["params"]["size_bytes"]: r["metrics"]["latency_us"]["median"]
                                  for r in _of(recs, "result") if r.get("status") == "ok"}
            rounds.append(rnd)
        # A launch long enough for its end-of-run clock fit to resolve drift (MIN_DRIFT_SPAN_S); 1 MB,
        # since identical 8 B round trips can meet any CI target at once and stop early.
        recs = runner.bench(["p2p", "--mode", "latency", "--sizes", "1M", "--iters", "10", "--ci-target", "0.0001",
                             "--max-iters", "100000000", "--budget", f"{1.5 * MIN_DRIFT_SPAN_S:g}s"])
        headers += _of(recs, "run")
        clocks += _of(recs, "clocks")
        a_iters = "5" if quick else "15"
        env = {"MPIR_CVAR_ASYNC_PROGRESS": "0"}
        async_recs = runner.bench(["async", "--op", "pt2pt", "--sizes", f"{SMALL},{LARGE}", "--progress",
                                   "none,test:2", "--calc-factor", "4", "--iters", a_iters, "--warmup", "2",
                                   "--ci-target", "0"], env)
        # The progress thread gets a core of its own when the node has one, as `hmb run` gives it.
        thread_args = ["async", "--op", "pt2pt", "--sizes", "64", "--progress", "thread", "--iters", "3",
                       "--warmup", "1", "--ci-target", "0"]
        thread_cores, no_spare_core = runner.cores_per_rank(thread_args)
        thread_recs = runner.bench(thread_args, env, cores=thread_cores)
        # --cache cold: its header's start-up probe (a buffer read hot, and after a flush).
        cold_recs = runner.bench(["p2p", "--mode", "latency", "--sizes", "8", "--iters", "3", "--warmup", "1",
                                  "--ci-target", "0", "--cache", "cold"])
        headers += _of(async_recs, "run") + _of(thread_recs, "run")
        clocks += _of(async_recs, "clocks") + _of(thread_recs, "clocks")
    steal = steal_fraction(stat_before, read_proc_stat())
    checks = (check_binding(headers[0]) + check_timer(headers) + check_calibration(headers)
              + check_clocks(headers, clocks, one_clock=bool(lab_env))
              + check_interruptions(headers, steal, load)
              + check_latency(rounds)
              + check_async(_of(async_recs, "result"), _of(thread_recs, "result"), no_spare_core)
              + check_cache(_of(cold_recs, "run"))
              + (check_spare_core(headers[0]) if hosts is not None else []))
    h = headers[0]
    out(f"# hmb check: {impl.name} ({h.get('mpi', {}).get('library', '?')}), {ranks} ranks x {threads} "
        f"thread{'s' if threads > 1 else ''} on "
        f"{', '.join(h.get('hosts', []))}, {h.get('cpus_available', '?')} cpus available; "
        f"{len(rounds)} rounds, {time.monotonic() - t0:.0f} s")
    for c in checks:
        out(format_line(c))
    counts = {s: sum(c.status == s for c in checks) for s in (PASS, WARN, FAIL)}
    out(f"# {counts[PASS]} PASS, {counts[WARN]} WARN, {counts[FAIL]} FAIL")
    record = {"type": "check", "schema": 1, "mpi": impl.name, "ranks": ranks, "threads": threads, "quick": quick,
              "host": platform.node(), **({"hosts": hosts.text} if hosts is not None else {}),
              "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "run_header": h, "rounds": [
                  {k: {str(s): v for s, v in r.items()} for k, r in rnd.items()} for rnd in rounds],
              "checks": [dataclasses.asdict(c) | {"unit": EXPECTATIONS[c.name].unit,
                                                  "pass": _finite(EXPECTATIONS[c.name].passes),
                                                  "warn": _finite(EXPECTATIONS[c.name].warns)} for c in checks]}
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        write_json(json_path, record, "--json")
        out(f"# machine record: {json_path}")
    return exit_status(checks)


def _finite(bounds: tuple) -> list:
    """JSON has no infinity: an open bound is null."""
    return [b if math.isfinite(b) else None for b in bounds]
