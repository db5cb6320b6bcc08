"""Integration tests of the `async` benchmark (SPEC §3.3): every operation and progress mode
runs and validates on each MPI, `impl` is honest about the library's progress thread, bad
input is rejected, corrupted data is caught, and the result records hold what the metrics
promise (E_loaded, the pt2pt baseline, the counterbalanced phase order, invalid samples).

Correctness only: invariants that hold on any machine under any load. What E is on a given
library and machine (eager messages partly hidden, manual progress moving a rendezvous into
the compute, ...) is machine physics and belongs to `hmb check`, not here."""
from __future__ import annotations

import math

import pytest

from conftest import TEST_MPIS, run_bench

mpich_only = pytest.mark.skipif("mpich" not in TEST_MPIS, reason="MPICH not selected (HMB_TEST_MPIS)")

ALL_OPS = ["pt2pt", "exch", "allreduce", "ialltoall", "ibcast", "neighbor_alltoall", "allreduce_init"]
# T_total first: the primary metric, whose relative CI the stopping rule watches (E can be ~0).
METRICS = ["t_total_us", "efficiency_pct", "efficiency_loaded_pct", "efficiency_mean_pct",
           "efficiency_loaded_mean_pct", "t_sync_us", "c_actual_us", "c_loaded_us", "t_over_us", "t_over_loaded_us", "slowdown", "load_slowdown", "t_wait_us"]
FAST = ["--iters", "5", "--warmup", "1", "--ci-target", "0"]


def _by_point(run):
    return {(r["params"]["op"], r["params"]["progress"], r["params"]["size_bytes"]): r
            for r in run.results(status=None)}


def _median(result, metric):
    return result["metrics"][metric]["median"]


def _check_physical(result):
    """Invariants of every result, whatever the machine's load."""
    assert list(result["metrics"]) == METRICS  # the JSON keeps the descriptor's order
    extra = result["extra"]
    # Every measured iteration is a sample or counted invalid; invalid ones say why.
    valid = result["iterations"] - result["invalid"]
    assert result["invalid"] == extra["invalid_compute_too_fast"]
    for k in METRICS:
        assert result["metrics"][k]["count"] == valid, k
    if result["invalid"]:
        assert "compute ran faster than calibrated" in extra["invalid_reason"]
    else:
        assert "invalid_reason" not in extra
    assert extra["phase_order"] == "counterbalanced"
    assert sorted(extra["phase_orders"].split(",")) == sorted(["bnc", "bcn", "nbc", "ncb", "cbn", "cnb"])
    assert extra["library_progress_thread"] in (0, 1)
    # The rate probe before the point (hmb_compute_probe_rate): the shortest probe median of any
    # rank, and a count of the ranks whose rate it measured again. A rank does so when its own probe
    # ran short by more than its own tolerance, at least 1 % (rank 0's tolerance is no bound for
    # another rank's), so the shortest median is then below 0.99.
    assert extra["rate_probe_ratio"] > 0 and extra["rate_remeasured_ranks"] in range(0, 257), extra
    if extra["rate_remeasured_ranks"] > 0:
        assert extra["rate_probe_ratio"] < 0.99, extra
    if valid == 0:
        return
    m = {k: result["metrics"][k]["median"] for k in METRICS}
    for k, v in m.items():
        assert math.isfinite(v), (k, result["params"])
    # C is the calibrated request, not a measurement: in extra only, at least the 10 µs floor.
    assert "c_us" not in result["metrics"]
    assert extra["c_request_ns"] >= 10e3 - 1e-6
    # (worst E <= mean E and T_total >= C_actual hold by construction and by the validity filter:
    # the aggregation and the filter have unit tests of their own in test_async_metrics.py.)
    assert m["t_sync_us"] > 0


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 4])
def test_every_op_and_mode_runs_and_validates(mpi_name, ranks, tmp_path):
    env = {"MPIR_CVAR_ASYNC_PROGRESS": "0"} if mpi_name == "mpich" else None
    run = run_bench(mpi_name, ["async", "--op", ",".join(ALL_OPS), "--sizes", "32,1K",
                               "--progress", "none,test:10,thread,impl", *FAST],
                    ranks=ranks, tmp_path=tmp_path, env=env)
    assert run.rc == 0, run.stderr
    points = _by_point(run)
    assert len(points) == len(ALL_OPS) * 4 * 2
    for (op, progress, size), r in points.items():
        if progress == "impl":
            # Never labelled impl while the library's thread is off.
            assert r["status"] == "unsupported", (op, size)
            if mpi_name == "openmpi":
                assert "Open MPI has no asynchronous progress thread" in r["reason"]
            else:
                assert "MPIR_CVAR_ASYNC_PROGRESS=0" in r["reason"]
                assert "MPIR_CVAR_ASYNC_PROGRESS=1" in r["reason"]
            continue
        assert r["status"] == "ok", (op, progress, size, r.get("reason"))
        # --iters 5: 5 valid samples (an invalid one is replaced while the budget lasts)
        assert (r["iterations"] - r["invalid"] == 5 or r["stop_reason"] == "budget") and r["warmup"] == 1
        assert r["extra"]["op"] == op and r["extra"]["progress"] == progress
        _check_physical(r)
    assert run.header()["extra"]["library_progress_thread"] == 0
    assert "unsupported: impl" in run.stdout


@pytest.mark.mpi
def test_grid_neighbourhoods(mpi_name, tmp_path):
    """Periodic 2-D grid (2x2 on 4 ranks: every neighbour appears twice) with 4 and 8 neighbours."""
    for k in ("4", "8"):
        run = run_bench(mpi_name, ["async", "--op", "exch,neighbor_alltoall", "--topology", "grid2d",
                                   "--neighbors", k, "--sizes", "64", "--progress", "none,test:5", *FAST],
                        ranks=4, tmp_path=tmp_path)
        assert run.rc == 0, run.stderr
        results = run.results()
        assert len(results) == 4
        for r in results:
            assert r["params"]["neighbors"] == int(k) and r["extra"]["topology"] == "grid2d"
            _check_physical(r)


@pytest.mark.mpi
@mpich_only
def test_impl_with_mpich_progress_thread_on(tmp_path):
    run = run_bench("mpich", ["async", "--op", "pt2pt,allreduce", "--sizes", "32", "--progress", "impl,none",
                              "--iters", "3", "--warmup", "1", "--ci-target", "0"],
                    tmp_path=tmp_path, env={"MPIR_CVAR_ASYNC_PROGRESS": "1"})
    assert run.rc == 0, run.stderr
    results = run.results()
    assert {(r["params"]["op"], r["params"]["progress"]) for r in results} == {
        ("pt2pt", "impl"), ("pt2pt", "none"), ("allreduce", "impl"), ("allreduce", "none")}
    for r in results:
        # The library's thread changes every mode's numbers: each result says it was on.
        assert r["extra"]["library_progress_thread"] == 1
        _check_physical(r)
    extra = run.header()["extra"]
    assert extra["library_progress_thread"] == 1
    assert extra["library_progress_control"] == "MPIR_CVAR_ASYNC_PROGRESS=1"


@pytest.mark.mpi
@pytest.mark.parametrize("op", ["pt2pt", "exch", "ialltoall", "allreduce", "allreduce_init"])
def test_corrupted_data_is_caught(mpi_name, op, tmp_path):
    """--inject corrupt flips one received byte; every check, the reduction's included, must see it."""
    run = run_bench(mpi_name, ["async", "--op", op, "--sizes", "1K", "--progress", "none",
                               "--inject", "corrupt:2", *FAST], tmp_path=tmp_path)
    assert run.rc == 3, (run.rc, run.stderr)
    assert "validation failed" in run.stderr and "bench=async" in run.stderr
    failures = [r for r in run.records if r.get("type") == "failure"]
    assert failures and failures[0]["kind"] == "validation"


@pytest.mark.mpi
@mpich_only
@pytest.mark.parametrize("args,ranks,needle", [
    (["--op", "pt2pt,bogus"], 2, '--op: "bogus" is not one of pt2pt|exch|'),
    (["--progress", "none,fast"], 2, '--progress: "fast" is not one of none|test:|thread|impl'),
    (["--progress", "test:abc"], 2, '--progress: "test:abc": "abc" is not a number'),
    (["--progress", "test:0"], 2, "--progress: 0 is below the minimum 0.1"),
    (["--sizes", "12"], 2, "--sizes: 12 is not a positive multiple of 8"),
    (["--op", "pt2pt"], 3, "needs an even number of ranks"),
    (["--op", "exch", "--neighbors", "3"], 2, "--neighbors: 3 on a ring must be even"),
    (["--op", "exch", "--topology", "grid2d", "--neighbors", "6"], 2, "--neighbors: 6 on grid2d"),
    (["--compute", "0"], 2, "--compute: must be > 0"),
    # 16 GiB is 2^31 doubles: one more than an MPI int count (it used to wrap to 0 and pass).
    (["--sizes", "16G"], 2, "--sizes: 17179869184 bytes is 2147483648 doubles"),
    (["--op", "ialltoall", "--sizes", "8,32G"], 2, "more than an MPI int count holds"),
    (["--op", "pt2pt,pt2pt"], 2, '--op: "pt2pt" is listed twice'),
    (["--op", "allreduce,exch,allreduce"], 2, '--op: "allreduce" is listed twice'),
    (["--progress", "none,none"], 2, '--progress: "none" is listed twice'),
    (["--progress", "test:10,thread,test:10.0"], 2, '--progress: "test:10.0" is listed twice'),
    (["--progress", "test"], 2, '--progress: "test" is not one of'),
    (["--baseline", "ping"], 2, "--baseline"),
])
def test_bad_input_is_one_line_and_exit_2(args, ranks, needle, tmp_path):
    sizes = [] if "--sizes" in args else ["--sizes", "8"]
    run = run_bench("mpich", ["async", *args, *sizes, *FAST], ranks=ranks)
    assert run.rc == 2, (run.rc, run.stderr)
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], run.stderr


@pytest.mark.mpi
def test_thread_mode_needs_thread_multiple(mpi_name, tmp_path):
    """Below MPI_THREAD_MULTIPLE a second thread must not call MPI: `thread` is never run."""
    run = run_bench(mpi_name, ["async", "--op", "pt2pt", "--sizes", "64", "--progress", "none,thread",
                               "--thread-level", "funneled", *FAST], tmp_path=tmp_path)
    assert run.rc == 0, run.stderr
    points = {r["params"]["progress"]: r for r in run.results(status=None)}
    assert points["none"]["status"] == "ok"
    assert points["thread"]["status"] == "unsupported"
    assert points["thread"]["reason"] == (
        "thread: needs MPI_THREAD_MULTIPLE, the library provides MPI_THREAD_FUNNELED")


@pytest.mark.mpi
def test_cold_cache_runs_and_validates_both_phases(mpi_name, tmp_path):
    """--cache cold: prepare() writes both phases' data before the flush; every op still
    validates both phases (each has its own buffers) on every iteration."""
    run = run_bench(mpi_name, ["async", "--op", ",".join(ALL_OPS), "--sizes", "1K", "--progress", "test:10",
                               "--cache", "cold", "--llc-size", "1M", *FAST], ranks=4, tmp_path=tmp_path)
    assert run.rc == 0, run.stderr
    results = run.results()
    assert {r["params"]["op"] for r in results} == set(ALL_OPS)
    for r in results:
        _check_physical(r)


@pytest.mark.mpi
@pytest.mark.parametrize("baseline", [None, "sendrecv"])
def test_pt2pt_baseline_is_named_and_e_loaded_shown_beside_e(mpi_name, baseline, tmp_path):
    """The pt2pt baseline (default: IMB-ASYNC's ping-pong) is named in the stdout header, the
    run header and each pt2pt result; other ops carry no baseline. The summary table shows
    E_loaded on the row after E, for every point."""
    args = ["--baseline", baseline] if baseline else []
    run = run_bench(mpi_name, ["async", "--op", "pt2pt,allreduce", "--sizes", "64,4K", "--progress", "none",
                               *args, *FAST], tmp_path=tmp_path)
    assert run.rc == 0, run.stderr
    expected = baseline or "pingpong"
    assert run.header()["extra"]["pt2pt_baseline"] == expected
    header = [ln for ln in run.stdout.splitlines() if ln.startswith("# async:")]
    assert len(header) == 1 and f"pt2pt_baseline={expected}" in header[0], run.stdout
    for r in run.results():
        if r["params"]["op"] == "pt2pt":
            assert r["extra"]["baseline"] == expected
        else:
            assert "baseline" not in r["extra"]
        _check_physical(r)
    summary = run.stdout.split("# summary", 1)[1].splitlines()
    rows = [ln.split()[0] for ln in summary if ln and not ln.startswith("#") and not ln.startswith(" ")]
    e_rows = [i for i, name in enumerate(rows) if name == "efficiency_pct"]
    assert len(e_rows) == 2  # one group per op
    for i in e_rows:
        assert rows[i + 1] == "efficiency_loaded_pct"


@pytest.mark.mpi
def test_run_without_pt2pt_names_no_baseline(mpi_name, tmp_path):
    """Without pt2pt the baseline does not apply: the headers do not mention it."""
    run = run_bench(mpi_name, ["async", "--op", "allreduce", "--sizes", "64", "--progress", "none", *FAST],
                    tmp_path=tmp_path)
    assert run.rc == 0, run.stderr
    assert "pt2pt_baseline" not in run.header()["extra"]
    assert "pt2pt_baseline" not in run.stdout
