"""The hmb-bench runtime: command line, usage errors, run header, adaptive stopping, JSON
append, validation failures and the watchdog (through the p2p benchmark, tiny sizes).

Launcher noise: on a failure, MPICH's and Open MPI's launchers print their own lines (MPICH
"Abort(3) on node ...", Open MPI's prterun banners). Usage errors must give exactly one
stderr line in total under MPICH; under Open MPI we count only lines starting with
"hmb-bench" (its launcher adds a banner when a process exits nonzero without MPI_Finalize).
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import get_mpi, hmb_lines, one_hmb_line, run_bench, usage_cases

FAST = ["--iters", "5", "--warmup", "1", "--ci-target", "0"]


def direct(mpi_name: str, args: list[str]) -> subprocess.CompletedProcess:
    """Run hmb-bench without a launcher (paths that exit before MPI_Init)."""
    impl = get_mpi(mpi_name)
    return subprocess.run([str(impl.bench)] + args, capture_output=True, text=True, timeout=60, env=impl.env())


def test_list_and_version(mpi_name):
    p = direct(mpi_name, ["--list"])
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["name", "group", "summary"]
    rows = [line.split(None, 2) for line in lines[1:]]
    assert any(r[0] == "p2p" and r[1] == "baseline" for r in rows)
    assert rows == sorted(rows, key=lambda r: (r[1], r[0])), "sorted by group, then name"
    v = direct(mpi_name, ["--version"])
    assert v.returncode == 0 and v.stdout.startswith("hmb-bench 0.1.0")


def test_bench_help(mpi_name):
    p = direct(mpi_name, ["p2p", "--help"])
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "ping-pong latency" in out  # summary first
    assert out.index("--window") < out.index("--sizes"), "benchmark options before common ones"
    for opt in ("--mode", "--iters", "--ci-target", "--budget", "--cache", "--timeout", "--json"):
        assert opt in out
    assert "latency_us" in out and "bandwidth_MBps" in out


MALFORMED = [
    ("unknown option", ["p2p", "--bogus"], 2, "unknown option --bogus"),
    ("malformed size", ["p2p", "--sizes", "4Q"], 2, "4Q"),
    ("out of range", ["p2p", "--window", "0"], 2, "--window"),
    ("one rank", ["p2p"], 1, "needs at least 2 ranks (got 1)"),
    ("bad choice", ["p2p", "--cache", "warm"], 2, "warm"),
    ("bad noise", ["p2p", "--noise", "bogus:3"], 2, "bogus"),
    ("negative iters", ["p2p", "--iters", "-5"], 2, "--iters"),
    ("negative timeout", ["p2p", "--timeout", "-1s"], 2, "--timeout"),
    ("unknown benchmark", ["nosuchbench"], 2, "unknown benchmark 'nosuchbench'"),
    ("missing value", ["p2p", "--sizes"], 2, "--sizes needs a value"),
    ("duration without unit", ["p2p", "--timeout", "60"], 2, "--timeout"),
    ("data reuse unsupported", ["part", "--data", "reuse"], 2, "--data reuse: part writes its send data"),
]


@pytest.mark.parametrize(*usage_cases("case", MALFORMED, ids=[c[0] for c in MALFORMED]))
def test_malformed_invocation(mpi_name, case):
    _, args, ranks, expect = case
    r = run_bench(mpi_name, args, ranks=ranks, timeout=60)
    assert r.rc == 2, (r.rc, r.stderr)
    ours = hmb_lines(r.stderr)
    assert len(ours) == 1 and ours[0].strip(), r.stderr
    assert expect in ours[0]
    if mpi_name == "mpich":
        assert len([line for line in r.stderr.splitlines() if line.strip()]) == 1, r.stderr
    assert "Traceback" not in r.stderr and "Segmentation" not in r.stderr


@pytest.mark.parametrize("args,requests", [
    (["p2p", "--compute-check", "full"], 3),                            # asked (hmb check does)
    (["part", "--compute", "5ms", "--noise", "uniform:100"], 3),        # draws reach 10 ms
    (["part", "--compute", "5ms", "--noise", "uniform:99"], 2),         # 9.95 ms at most
    (["async", "--progress", "none"], 3),           # C from --calc-factor: judged by the check nearest it
    (["async", "--compute", "10us", "--progress", "none"], 2),          # C given: the rule above
])
def test_startup_check_runs_100ms_when_the_run_may_need_it(args, requests, tmp_path):
    """The rule (src/harness/env.c, compute_checks_wanted): the 100 ms request runs when the run's
    largest compute request (--compute and its largest noise draw) is 10 ms or more, for async when
    it derives C (no --compute), or with --compute-check full. MPICH only: the rule is hmb-bench's, the same under any library."""
    r = run_bench("mpich", args + ["--sizes", "1K"] + FAST, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    cal = r.header()["calibration"]
    assert [c["request_ns"] for c in cal["check"]] == [10_000, 1_000_000, 100_000_000][:requests]
    assert all(len(t["check_work_on_core_ns"]) == requests for t in cal["per_thread"])
    assert ("check_skipped" in cal) == (requests < 3)
    # every one of these runs computes (asked, --compute, or async's C): the full calibration
    assert "calibration_skipped" not in cal
    assert all(t["verify_error"] is not None and t["interrupt_lost_frac"] is not None for t in cal["per_thread"])


def test_fixed_iterations_are_valid_samples(tmp_path):
    """--iters N with --ci-target 0 gives N valid samples: a sample left out as invalid (planted by
    --inject invalid:2, as async leaves out a kernel faster than calibrated) is replaced, so the point
    runs 4 measured iterations for --iters 3, counts 1 invalid and keeps 3 samples of each metric.
    MPICH only: the rule is the harness's."""
    r = run_bench("mpich", ["p2p", "--mode", "latency", "--sizes", "8", "--iters", "3", "--warmup", "1",
                            "--ci-target", "0", "--inject", "invalid:2"], tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    (res,) = r.results()
    assert (res["iterations"], res["invalid"], res["stop_reason"]) == (4, 1, "fixed")
    assert res["metrics"]["latency_us"]["count"] == 3
    # without a sample to replace the point stops where it did: 3 iterations, none invalid
    r = run_bench("mpich", ["p2p", "--mode", "latency", "--sizes", "8", "--iters", "3", "--warmup", "1",
                            "--ci-target", "0"], tmp_path=tmp_path)
    (res,) = r.results()
    assert (res["iterations"], res["invalid"], res["stop_reason"]) == (3, 0, "fixed")


def test_run_header(mpi_name, tmp_path):
    r = run_bench(mpi_name, ["p2p", "--mode", "latency", "--sizes", "8"] + FAST, tmp_path=tmp_path,
                  env={"HMB_TAG": "sweep-7", "MPIR_CVAR_HMB_TEST": "1"})
    assert r.rc == 0, r.stderr
    h = r.header()
    assert h["schema"] == 1 and h["bench"] == "p2p" and h["run_id"]
    assert h["tag"] == "sweep-7"
    assert h["mpi"]["impl"] == {"mpich": "MPICH", "openmpi": "Open MPI"}[mpi_name]
    assert h["mpi"]["library"] and "\n" not in h["mpi"]["library"]
    assert h["mpi"]["standard"][0].isdigit()
    assert h["thread_level"] == {"requested": "SINGLE", "provided": h["thread_level"]["provided"]}
    assert h["ranks"] == 2 and h["threads"] == 1 and len(h["hosts"]) == 1
    assert h["ranks_per_node"] == 2
    assert h["argv"][1:3] == ["p2p", "--mode"]
    assert h["env"].get("OMP_NUM_THREADS") == "1" and h["env"].get("MPIR_CVAR_HMB_TEST") == "1"
    assert h["git_revision"] and h["compiler"] and "cflags" in h
    # One node: the applied offsets are exactly 0 (one system-wide clock on rank 0's host); how
    # close the estimates come to 0, the timer's figures and the calibration error are machine
    # physics, measured by hmb check.
    offsets = h["clock_offsets_estimated_s"]
    assert len(offsets) == 2 and offsets[0] == 0
    assert h["clock_offsets_s"] == [0, 0]
    assert h["timer"]["clock"] == "CLOCK_MONOTONIC"
    assert h["timer"]["resolution_ns"] > 0 and h["timer"]["overhead_ns"] > 0
    cal = h["calibration"]
    assert len(cal["per_thread"]) == 2 and all(c["iters_per_ns"] > 0 for c in cal["per_thread"])
    # p2p computes nothing: the start-up check skips its 100 ms request (0.2 s of every launch) and says so
    assert [c["request_ns"] for c in cal["check"]] == [10_000, 1_000_000]
    assert cal["check_skipped"].startswith("100 ms") and "--compute-check full" in cal["check_skipped"]
    assert all(len(t["check_measured_ns"]) == 2 for t in cal["per_thread"])
    # ... and, computing nothing, calibrates the rate alone: no verification, no interruption probe,
    # no second measurement with every rank at once (85 ms of each rank's start-up)
    assert "the run computes nothing" in cal["calibration_skipped"]
    for t in cal["per_thread"]:
        assert t["verify_error"] is None and t["interrupt_lost_frac"] is None and t["interrupts_per_s"] is None
        assert t["measured"] == "alone" and t["calibrations"] == 1 and t["iters_per_ns"] == t["alone_iters_per_ns"]
    assert all(c["measured_ns"] > 0 for c in cal["check"])
    for place in h["placement"]:
        assert len(place["thread_cpus"]) == 1 and place["cpuset"]
    assert h["cache"]["mode"] == "hot" and h["cache"]["llc_bytes"] > 0
    assert h["noise"] == {"model": "none", "thread": "fixed", "seed": 1}
    assert h["options"]["sizes"] == "8" and h["options"]["mode"] == "latency"
    assert h["options"]["timeout"] == "300s"
    if (os.cpu_count() or 1) >= 2:
        assert h["oversubscribed"] is False
    assert "# MPI:" in r.stdout and "latency_us" in r.stdout


def test_oversubscribed_threads(mpi_name, tmp_path):
    """2 ranks x 2 threads on this 2-core machine: flagged in the header and warned once."""
    cores = os.cpu_count() or 1
    r = run_bench(mpi_name, ["p2p", "--mode", "latency", "--sizes", "8", "--threads", "2"] + FAST,
                  threads=2, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    h = r.header()
    assert h["threads"] == 2
    for place in h["placement"]:
        assert len(place["thread_cpus"]) == 2 and all(c >= 0 for c in place["thread_cpus"])
    assert h["oversubscribed"] is (2 * 2 > h["cpus_available"])
    warned = [line for line in hmb_lines(r.stderr) if line.startswith("hmb-bench: warning: oversubscribed")]
    if cores < 4:
        assert h["oversubscribed"] is True and len(warned) == 1
    assert r.results()[0]["params"]["threads"] == 2


def test_stop_reasons(mpi_name, tmp_path):
    base = ["p2p", "--mode", "latency", "--warmup", "1"]
    fixed = run_bench(mpi_name, base + ["--sizes", "8", "--iters", "7", "--ci-target", "0"], tmp_path=tmp_path)
    res = fixed.results()[0]
    assert res["stop_reason"] == "fixed" and res["iterations"] == 7 and res["ci_target_met"] is False
    assert res["warmup"] == 1 and res["metrics"]["latency_us"]["count"] == 7

    # 1M, not 8 B or 64K: short round trips on a quiet machine can all read the same 20 ns timer
    # steps, a zero-width CI that meets any target and stops on "ci" before max_iters/budget.
    cap = run_bench(mpi_name, base + ["--sizes", "1M", "--iters", "5", "--max-iters", "9",
                                      "--ci-target", "0.0001", "--budget", "100s"], tmp_path=tmp_path)
    res = cap.results()[0]
    assert res["stop_reason"] == "max_iters" and res["iterations"] == 9

    budget = run_bench(mpi_name, base + ["--sizes", "1M", "--iters", "5", "--ci-target", "0.0001",
                                         "--budget", "0.2s", "--raw"], tmp_path=tmp_path)
    res = budget.results()[0]
    assert res["stop_reason"] == "budget" and res["ci_target_met"] is False
    assert res["iterations"] >= 5 and len(res["samples"]["latency_us"]) == res["metrics"]["latency_us"]["count"]
    assert res["elapsed_s"] >= 0.2  # the budget was spent, not cut short

    ci = run_bench(mpi_name, base + ["--sizes", "8", "--iters", "10", "--ci-target", "100",
                                     "--budget", "100s"], tmp_path=tmp_path)
    res = ci.results()[0]
    assert res["stop_reason"] == "ci" and res["ci_target_met"] is True and res["ci_target"] == 1.0


@pytest.mark.planted_json("runs.jsonl")
def test_json_append_keeps_previous_runs(mpi_name, tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text('{"type": "note", "keep": true}\n')
    args = ["p2p", "--mode", "latency", "--sizes", "8,1K", "--json", str(path)] + FAST
    for _ in range(2):
        assert run_bench(mpi_name, args).rc == 0
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records[0] == {"type": "note", "keep": True}
    runs = [r for r in records if r["type"] == "run"]
    assert len(runs) == 2 and runs[0]["run_id"] != runs[1]["run_id"]
    for run in runs:
        results = [r for r in records if r["type"] == "result" and r["run_id"] == run["run_id"]]
        assert [r["params"]["size_bytes"] for r in results] == [8, 1024]


def test_cache_cold(mpi_name, tmp_path):
    r = run_bench(mpi_name, ["p2p", "--mode", "latency", "--sizes", "4K", "--cache", "cold",
                             "--llc-size", "1M"] + FAST, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    cache = r.header()["cache"]
    assert (cache["mode"], cache["llc_bytes"]) == ("cold", 1 << 20)
    # the start-up eviction probe reads a quarter of a 1 MiB last-level cache (at most 1 MiB)
    assert cache["probe_bytes"] == 1 << 18 and cache["probe_hot_ns"] > 0 and cache["probe_cold_ns"] > 0
    assert r.results()[0]["metrics"]["latency_us"]["median"] > 0


@pytest.mark.parametrize("mode", ["latency", "bw"])
def test_validation_failure(mpi_name, mode, tmp_path):
    window = ["--window", "4"] if mode != "latency" else []  # latency reads no --window (refused: exit 2)
    r = run_bench(mpi_name, ["p2p", "--mode", mode, "--sizes", "64K", "--inject", "corrupt:2", *window]
                  + FAST, tmp_path=tmp_path, timeout=120)
    # MPICH passes MPI_Abort's code through; Open MPI's prterun also returns it (checked here).
    assert r.rc == 3, (r.rc, r.stderr)
    lines = [line for line in hmb_lines(r.stderr) if "validation failed" in line]
    assert len(lines) == 1, r.stderr
    line = lines[0]
    for piece in ("bench=p2p", "size=64K", f"mode={mode}", "iteration=2", "rank=1", "partition=0"):
        assert piece in line, line
    fail = [x for x in r.records if x["type"] == "failure"]
    assert fail and fail[0]["kind"] == "validation" and fail[0]["iteration"] == 2 and fail[0]["rank"] == 1


def test_no_validate_skips_checks(mpi_name, tmp_path):
    r = run_bench(mpi_name, ["p2p", "--mode", "latency", "--sizes", "1K", "--no-validate"] + FAST, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    assert r.header()["options"]["no-validate"] == "1"
    # a planted corruption nothing would check tests nothing: refused before the run (issue 29)
    bad = run_bench(mpi_name, ["p2p", "--mode", "latency", "--sizes", "1K", "--inject", "corrupt:2",
                               "--no-validate"] + FAST, tmp_path=tmp_path)
    assert bad.rc == 2 and "--inject corrupt:2: never caught: --no-validate" in one_hmb_line(bad.stderr)


def test_watchdog_timeout(mpi_name, tmp_path):
    r = run_bench(mpi_name, ["p2p", "--mode", "latency", "--sizes", "8", "--inject", "hang:3", "--timeout", "3s"]
                  + FAST, tmp_path=tmp_path, timeout=90)
    # MPICH returns the MPI_Abort code 4; Open MPI's prterun returns it as well.
    assert r.rc == 4, (r.rc, r.stderr)
    lines = [line for line in hmb_lines(r.stderr) if line.startswith("hmb-bench: timeout:")]
    assert lines, r.stderr
    # The hanging rank 1 names its phase; under Open MPI rank 0's watchdog may abort first,
    # naming the phase it waits in (the p2p latency loop's).
    assert all("p2p size=8 mode=latency" in line and "did not finish within 3 s" in line for line in lines), lines
    assert any("rank 1 phase 'inject hang" in line or "rank 0 phase 'latency: " in line for line in lines), lines
    fail = [x for x in r.records if x["type"] == "failure"]
    assert fail and fail[0]["kind"] == "timeout" and fail[0]["params"]["size_bytes"] == 8
