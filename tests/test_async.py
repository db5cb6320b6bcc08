"""Integration tests of the `async` benchmark (SPEC §3.3): every operation and progress mode
runs and validates on each MPI, `impl` is honest about the library's progress thread, bad
input is rejected, corrupted data is caught, and (on MPICH) the overlap physics holds.

Timings on the shared 2-core machine are noisy: tests check correctness and physically
possible bounds only; the physics checks use medians and wide margins."""
from __future__ import annotations

import math
import statistics

import pytest

from conftest import TEST_MPIS, run_bench

mpich_only = pytest.mark.skipif("mpich" not in TEST_MPIS, reason="MPICH not selected (HMB_TEST_MPIS)")

ALL_OPS = ["pt2pt", "exch", "allreduce", "ialltoall", "ibcast", "neighbor_alltoall", "allreduce_init"]
# T_total first: the primary metric, whose relative CI the stopping rule watches (E can be ~0).
METRICS = ["t_total_us", "efficiency_pct", "t_sync_us", "c_us", "c_actual_us", "t_over_us", "slowdown"]
FAST = ["--iters", "5", "--warmup", "1", "--ci-target", "0"]


def _by_point(run):
    return {(r["params"]["op"], r["params"]["progress"], r["params"]["size_bytes"]): r
            for r in run.results(status=None)}


def _median(result, metric):
    return result["metrics"][metric]["median"]


def _check_physical(result):
    """Bounds that hold whatever the machine's noise."""
    m = {k: _median(result, k) for k in METRICS}
    assert set(METRICS) <= set(result["metrics"])
    assert next(iter(result["metrics"])) == "t_total_us"  # the JSON keeps the descriptor's order
    for k, v in m.items():
        assert math.isfinite(v), (k, result["params"])
    assert result["metrics"]["efficiency_pct"]["count"] == result["iterations"]
    # C is the calibrated request: constant, at least the 10 µs floor, recorded in extra.
    assert result["metrics"]["c_us"]["min"] == pytest.approx(result["metrics"]["c_us"]["max"])
    assert m["c_us"] >= 10.0 - 1e-9
    assert m["c_us"] == pytest.approx(result["extra"]["c_request_ns"] / 1e3)
    # Per iteration T_total >= C_actual (the compute is inside the timed region), so the
    # medians keep that order; the kernel cannot beat its own undisturbed calibration.
    assert m["t_total_us"] >= m["c_actual_us"] * (1 - 1e-9)
    assert m["slowdown"] > 0.9
    assert m["t_sync_us"] > 0
    # E = 100 (1 - (T_total - C) / T_sync) <= 100 up to the kernel's calibration error.
    assert m["efficiency_pct"] <= 100.0 + 100.0 * 0.02 * m["c_us"] / m["t_sync_us"]
    assert result["extra"]["library_progress_thread"] in (0, 1)


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
        assert r["iterations"] == 5 and r["warmup"] == 1
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
    """--corrupt-at flips one received byte; every check, the reduction's included, must see it."""
    run = run_bench(mpi_name, ["async", "--op", op, "--sizes", "1K", "--progress", "none",
                               "--corrupt-at", "2", *FAST], tmp_path=tmp_path)
    assert run.rc == 3, (run.rc, run.stderr)
    assert "validation failed" in run.stderr and "bench=async" in run.stderr
    failures = [r for r in run.records if r.get("type") == "failure"]
    assert failures and failures[0]["kind"] == "validation"


@pytest.mark.mpi
@mpich_only
@pytest.mark.parametrize("args,ranks,needle", [
    (["--op", "pt2pt,bogus"], 2, "--op: unknown operation 'bogus'"),
    (["--progress", "none,fast"], 2, "--progress: unknown mode 'fast'"),
    (["--progress", "test:abc"], 2, "--progress: 'test:abc'"),
    (["--progress", "test:0"], 2, "--progress: 'test:0'"),
    (["--sizes", "12"], 2, "--sizes: 12 is not a positive multiple of 8"),
    (["--op", "pt2pt"], 3, "needs an even number of ranks"),
    (["--op", "exch", "--neighbors", "3"], 2, "--neighbors: 3 on a ring must be even"),
    (["--op", "exch", "--topology", "grid2d", "--neighbors", "6"], 2, "--neighbors: 6 on grid2d"),
    (["--compute", "0"], 2, "--compute: must be > 0"),
    # 16 GiB is 2^31 doubles: one more than an MPI int count (it used to wrap to 0 and pass).
    (["--sizes", "16G"], 2, "--sizes: 17179869184 bytes is 2147483648 doubles"),
    (["--op", "ialltoall", "--sizes", "8,32G"], 2, "more than an MPI int count holds"),
    (["--op", "pt2pt,pt2pt"], 2, "--op: operation 'pt2pt' listed twice"),
    (["--op", "allreduce,exch,allreduce"], 2, "--op: operation 'allreduce' listed twice"),
    (["--progress", "none,none"], 2, "--progress: mode 'none' listed twice"),
    (["--progress", "test:10,thread,test:10.0"], 2, "--progress: mode 'test:10.0' listed twice"),
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


# ------------------------------------------------------------------ physics (MPICH)

SMALL, LARGE = 2048, 1 << 20  # well below MPICH's ~8 KB eager switch; far above it


def _undisturbed(points):
    """The shared machine sometimes gives many of a point's iterations to other jobs. Such a
    run shows it (undisturbed, measured: median/min of T_total <= 1.07, of T_sync <= 1.4):
    the kernel ran slower than calibrated, or a time's median sits far above its minimum."""
    for r in points.values():
        t_total, t_sync = r["samples"]["t_total_us"], r["samples"]["t_sync_us"]
        if (_median(r, "slowdown") > 1.3 or statistics.median(t_total) > 1.5 * min(t_total)
                or statistics.median(t_sync) > 2.5 * min(t_sync)):
            return False
    return True


@pytest.fixture(scope="module")
def mpich_overlap(tmp_path_factory):
    """Compute 4x the blocking time, 15 iterations per point (medians); the first of up to
    four runs that other jobs on the machine did not disturb (else the last one)."""
    for _ in range(4):
        run = run_bench("mpich", ["async", "--op", "pt2pt", "--sizes", f"{SMALL},{LARGE}",
                                  "--progress", "none,test:2", "--calc-factor", "4",
                                  "--iters", "15", "--warmup", "2", "--ci-target", "0", "--raw"],
                        tmp_path=tmp_path_factory.mktemp("async_physics"),
                        env={"MPIR_CVAR_ASYNC_PROGRESS": "0"})
        assert run.rc == 0, run.stderr
        points = {(p, s): r for (op, p, s), r in _by_point(run).items()}
        if _undisturbed(points):
            break
    return points


@pytest.mark.mpi
@mpich_only
def test_eager_message_is_largely_hidden_without_progress(mpich_overlap):
    """Below the eager switch the sender never waits, so a good part of T_sync is hidden.
    Measured here: E ≈ 35–50 %, not ~100 %: the receiver still copies the message out of the
    shared-memory cell inside MPI_Waitall, after the compute (about half of T_sync)."""
    e_small = _median(mpich_overlap[("none", SMALL)], "efficiency_pct")
    assert e_small > 15.0, e_small


@pytest.mark.mpi
@mpich_only
def test_rendezvous_message_is_not_hidden_without_progress(mpich_overlap):
    """Far above the eager switch nothing moves until MPI_Waitall: E ≈ 0 (measured -20…+15 %)."""
    e_large = _median(mpich_overlap[("none", LARGE)], "efficiency_pct")
    assert e_large < 50.0, e_large


@pytest.mark.mpi
@mpich_only
def test_manual_progress_moves_large_transfer_into_compute(mpich_overlap):
    """Manual progress does progress the rendezvous: with MPI_Test every 2 µs the 1 MB transfer
    is done by the time the compute ends, so the final MPI_Waitall is short, while without
    progress the whole transfer is left for it.

    FINDING (MPICH 5.0.2, shared memory, one core per rank): that does NOT raise E for 1 MB. The
    copy through shared memory needs the CPU, and both cores are computing: polling moves the
    copy from MPI_Waitall into the test calls, which count in T_total, plus the cost of
    interrupting the compute (fixed work, so it shows as C_actual / C of ~1.03). Measured on the
    2-core VM: none E ≈ -3…0 %, test:2 -18…-25 %, test:10 -9…-16 %, test:50 -9…-12 % (the seed's
    conclusion ii: manual progress does not help point-to-point here). Asserted as the finding:
    polling does not buy efficiency at 1 MB on this library."""
    wait_none = _median(mpich_overlap[("none", LARGE)], "t_wait_us")
    wait_test = _median(mpich_overlap[("test:2", LARGE)], "t_wait_us")
    assert wait_test < 0.5 * wait_none, (wait_none, wait_test)
    e_none = _median(mpich_overlap[("none", LARGE)], "efficiency_pct")
    e_test = _median(mpich_overlap[("test:2", LARGE)], "efficiency_pct")
    assert e_test < e_none + 10.0, (e_none, e_test)


@pytest.mark.mpi
@mpich_only
def test_manual_progress_costs_no_compute(mpich_overlap):
    """Poll time is excluded from C_actual, so test:P must not look like a compute slow-down."""
    for size in (SMALL, LARGE):
        assert _median(mpich_overlap[("test:2", size)], "slowdown") < 1.5
