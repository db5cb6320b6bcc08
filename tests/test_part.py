"""Integration tests of `part` (partitioned point-to-point, SPEC §3.2) under each MPI.

Correctness and physically possible bounds only: the machine is shared and noisy, so no
test asserts a timing. Tiny sizes and few iterations keep each MPI's share well under 90 s.
"""
from __future__ import annotations

import math
import time

import pytest

from conftest import one_hmb_line, run_bench, run_planted_never_complete, usage_cases

TINY = ["--iters", "5", "--warmup", "1", "--ci-target", "0", "--compute", "100us"]
POLLED = ("overhead_polled", "t_pt2pt_polled_us", "polled_over_blocking")   # the polled-receive baseline's
PERSISTENT = ("overhead_persistent", "t_persist_us")                          # the persistent baseline's
METRICS = ("overhead", "overhead_persistent", "t_part_us", "t_pt2pt_us", "t_persist_us", "perceived_bw_MBps",
           "availability", "early_bird", "t_after_join_us") + POLLED


def check_physical(result: dict, polled: bool = True, persistent: bool = True) -> None:
    """Every metric present and finite; every one-way time positive (an arrival cannot precede
    its send: a clock or pairing error would break this on any machine). Without the polled
    phase (--no-polled) or the persistent one (--no-persistent) their metrics are present with
    no sample."""
    m = result["metrics"]
    left_out = (() if polled else POLLED) + (() if persistent else PERSISTENT)
    for name in METRICS:
        assert name in m, f"metric {name} missing: {sorted(m)}"
        if name in left_out:
            assert m[name]["count"] == 0, (name, m[name])
            continue
        for key in ("median", "min", "max"):
            assert math.isfinite(m[name][key]), f"{name}.{key} = {m[name][key]}"
        assert m[name]["count"] >= 1
    for name in ("t_part_us", "t_pt2pt_us", "t_persist_us", "perceived_bw_MBps", "t_pt2pt_polled_us"):
        if name not in left_out:
            assert m[name]["min"] > 0, (name, m[name])


@pytest.mark.parametrize("pready,observe,complete", [("single", "thread", "test"), ("range", "thread", "wait"),
                                                     ("list", "poller", "test")])
def test_modes_produce_physical_results(mpi_name, tmp_path, pready, observe, complete):
    r = run_bench(mpi_name, ["part", "--sizes", "4K,64K", "--threads", "2", "--partitions", "2,4",
                             "--pready", pready, "--observe", observe, "--complete", complete] + TINY,
                  threads=2, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    results = r.results()
    assert len(results) == 4, r.stdout
    points = {(x["params"]["size_bytes"], x["params"]["partitions"]) for x in results}
    assert points == {(4096, 2), (4096, 4), (65536, 2), (65536, 4)}
    for res in results:
        check_physical(res)
        assert res["extra"]["pready"] == pready and res["extra"]["observe"] == observe
        assert res["params"]["complete"] == complete
        assert res["extra"]["partitions_send"] == res["params"]["partitions"]
        assert res["extra"]["partitions_recv"] == res["params"]["partitions"]
        assert res["iterations"] == 5 and res["invalid"] == 0


def test_single_partition_completes_by_test_or_wait(mpi_name, tmp_path):
    # One thread, one partition, the sender completing by MPI_Test polling or by MPI_Wait (one
    # point each). (That no byte is an early bird and all of t_part lies after the join follows
    # from the single Pready after the join: the formulas' unit tests, test_metrics.py
    # test_part_single_partition_no_early_bird, check it on hand-computed times.)
    r = run_bench(mpi_name, ["part", "--sizes", "4K,64K", "--partitions", "1", "--raw", "--observe", "poller",
                             "--complete", "test,wait"] + TINY, threads=1, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    results = r.results()
    assert sorted((x["params"]["size_bytes"], x["params"]["complete"]) for x in results) == [
        (4096, "test"), (4096, "wait"), (65536, "test"), (65536, "wait")]
    for res in results:
        check_physical(res)
        assert res["invalid"] == 0 and len(res["samples"]["early_bird"]) == 5
        assert ("MPI_Wait" in res["extra"]["persistent"]) == (res["params"]["complete"] == "wait")
        assert "MPI_Irecv + MPI_Test polling" in res["extra"]["polled_receive"]


@pytest.mark.parametrize("extra", [["--noise", "uniform:20"], ["--noise", "single:50", "--noise-thread", "rand"],
                                   ["--noise", "gaussian:10", "--cache", "cold"]])
def test_noise_models_and_cold_cache_run(mpi_name, tmp_path, extra):
    r = run_bench(mpi_name, ["part", "--sizes", "64K", "--threads", "2", "--partitions", "2"] + TINY + extra,
                  threads=2, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    (res,) = r.results()
    check_physical(res)
    assert res["extra"]["noise"] == extra[1]


@pytest.mark.parametrize(*usage_cases("args,named", [
    (["--sizes", "1000", "--partitions", "4"], ["1000", "4"]),
    (["--sizes", "4K", "--recv-partitions", "3", "--partitions", "2"], ["4096", "3"]),
    (["--sizes", "4K", "--threads", "2", "--partitions", "3"], ["3", "--threads"]),
    (["--sizes", "4K", "--complete", "poll"], ["--complete", "poll"]),
    (["--sizes", "4K", "--complete", "test,"], ["--complete"]),
]))
def test_bad_values_are_usage_errors(mpi_name, tmp_path, args, named):
    r = run_bench(mpi_name, ["part"] + args + TINY, threads=2 if "--threads" in args else 1, tmp_path=tmp_path)
    assert r.rc == 2, (r.rc, r.stderr)
    line = one_hmb_line(r.stderr)
    for word in named:
        assert word in line, line
    assert not r.results(status=None)


@pytest.mark.parametrize("complete", ["test", "wait"])
def test_corruption_is_detected(mpi_name, tmp_path, complete):
    r = run_bench(mpi_name, ["part", "--sizes", "64K", "--threads", "2", "--partitions", "4", "--inject", "corrupt:2",
                             "--complete", complete] + TINY, threads=2, tmp_path=tmp_path)
    assert r.rc == 3, (r.rc, r.stderr)
    assert "iteration=2" in r.stderr and "partition=" in r.stderr, r.stderr
    # the polled-receive phase's buffer is checked first: the planted byte is found there, so
    # its received data is validated every iteration like the other phases'
    assert "polled-receive phase, send partition" in r.stderr, r.stderr
    failures = [x for x in r.records if x.get("type") == "failure"]
    assert failures and failures[0]["kind"] == "validation"


def test_no_polled_leaves_out_the_polled_receive_phase(mpi_name, tmp_path):
    """--no-polled runs three phases: the polled baseline's metrics have no sample, the rest are
    as before, and the result says the phase did not run."""
    r = run_bench(mpi_name, ["part", "--sizes", "4K", "--partitions", "1", "--no-polled", "--raw"] + TINY,
                  tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    (res,) = r.results()
    check_physical(res, polled=False)
    assert res["extra"]["polled_receive"] == "not run (--no-polled)"
    assert res["invalid"] == 0 and len(res["samples"]["overhead"]) == 5


def test_no_persistent_and_no_polled_leave_two_phases(mpi_name, tmp_path):
    """--no-persistent --no-polled: the single send and the partitioned request only; the two
    baselines' metrics have no sample, the rest are as before, both left-out phases are named,
    and every phase that runs is still checked (a byte corrupted in the first received buffer,
    the partitioned one now, fails the run there)."""
    args = ["part", "--sizes", "4K", "--partitions", "1", "--no-polled", "--no-persistent", "--raw"] + TINY
    r = run_bench(mpi_name, args, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    (res,) = r.results()
    check_physical(res, polled=False, persistent=False)
    assert res["extra"]["persistent"] == "not run (--no-persistent)"
    assert res["invalid"] == 0 and len(res["samples"]["perceived_bw_MBps"]) == 5
    r = run_bench(mpi_name, args + ["--inject", "corrupt:2"], tmp_path=tmp_path)
    assert r.rc == 3 and "partitioned phase, send partition" in r.stderr, r.stderr


def run_mismatch(mpi_name, tmp_path, send, recv, size="64K", extra=()):
    args = ["part", "--sizes", size, "--threads", "2", "--partitions", str(send), "--recv-partitions",
            str(recv), "--observe", "poller", "--timeout", "60s"] + TINY + list(extra)
    start = time.monotonic()
    r = run_bench(mpi_name, args, threads=2, tmp_path=tmp_path, timeout=120)
    return r, time.monotonic() - start


def assert_mismatch_ok(r, send, recv):
    assert r.rc == 0, r.stderr
    (res,) = r.results()
    check_physical(res)
    assert res["extra"]["partitions_send"] == send and res["extra"]["partitions_recv"] == recv


def assert_conformance_failure(r, elapsed, expected):
    assert r.rc == 3, (r.rc, r.stdout, r.stderr)
    assert "library conformance problem" in r.stderr and expected in r.stderr, r.stderr
    assert elapsed < 60, f"took {elapsed:.0f} s to detect"
    failures = [x for x in r.records if x.get("type") == "failure"]
    assert failures and failures[0]["kind"] == "validation"


def test_more_receive_partitions(mpi_name, tmp_path):
    """SPEC §4: MPICH supports 4 send -> 8 receive partitions; Open MPI 5.0.x's MPI_Parrived
    never reports receive partition 7. HMB must say so (exit 3) in bounded time, not hang."""
    r, elapsed = run_mismatch(mpi_name, tmp_path, 4, 8)
    if mpi_name == "openmpi":
        assert_conformance_failure(r, elapsed, "never reported partition 7 of the receive request")
    else:
        assert_mismatch_ok(r, 4, 8)


def test_fewer_receive_partitions_spanning_threads(mpi_name, tmp_path):
    """Open MPI 5.0.x reports receive partition j arrived once the FIRST send partition in it
    has landed. Visible when one receive partition spans both threads' blocks and thread 1
    is late (single-thread noise on thread 1 = seed 1 mod 2): the poison check catches it.
    Eager-sized pieces (16K / 8) travel as soon as they are ready, so the gap is real."""
    r, elapsed = run_mismatch(mpi_name, tmp_path, 8, 1, "16K", ["--noise", "single:100", "--compute", "500us"])
    if mpi_name == "openmpi" and r.rc == 0:
        # The early report needs thread 1 to be late while thread 0's pieces land: with one core
        # kept busy the race was seen not to happen. Then every byte was validated: fine.
        assert_mismatch_ok(r, 8, 1)
    elif mpi_name == "openmpi":
        assert_conformance_failure(r, elapsed, "arrived but its data had not")
    else:
        assert_mismatch_ok(r, 8, 1)


def test_fewer_receive_partitions_keep_t_part_from_the_first_pready(tmp_path):
    """Regression (review): with P_recv < P_send, t_part was measured from the LAST Pready
    overlapping a receive partition, so a late thread's extra compute disappeared (t_part
    14 us, overhead 0.6). Pieces now pair each send partition's s with its bytes' arrival.
    Thread 1 computes 11 x 1 ms (single:1000), thread 0 1 ms: even time-sliced on one core
    (2 ranks x 2 threads on 2 cores), thread 0 is ready ~9 ms before thread 1, so t_part
    must be milliseconds for both receive partition counts. The bound is 1 ms, 70 x the fault's
    14 us: with another process on the machine thread 0 itself starts late now and then (a median
    of 2.05 ms, CI 0.13-7.0 ms, in a make test with builds beside it; 3 ms failed there)."""
    for recv in (2, 1):
        r = run_bench("mpich", ["part", "--sizes", "64K", "--threads", "2", "--partitions", "2",
                                "--recv-partitions", str(recv), "--observe", "poller", "--noise", "single:1000",
                                "--compute", "1ms", "--iters", "5", "--warmup", "1", "--ci-target", "0"],
                      threads=2, tmp_path=tmp_path)
        assert r.rc == 0, r.stderr
        (res,) = r.results()
        assert res["metrics"]["t_part_us"]["median"] > 1000, (recv, res["metrics"]["t_part_us"])


def test_fewer_receive_partitions_aligned_with_threads(mpi_name, tmp_path):
    """8 -> 2 with 2 threads: each receive partition is one thread's block, readied back to
    back, so Open MPI's premature report is observable only if the poll lands between two
    pieces' arrivals (usually, with eager-sized pieces; rarely with large ones). Either
    outcome is legitimate there, but never a hang or unvalidated data."""
    r, elapsed = run_mismatch(mpi_name, tmp_path, 8, 2, "16K", ["--noise", "uniform:50"])
    if mpi_name == "openmpi" and r.rc == 3:
        assert_conformance_failure(r, elapsed, "arrived but its data had not")
    else:
        assert_mismatch_ok(r, 8, 2)


@pytest.mark.parametrize("complete,expected", [
    # polled, the sender's bounded wait fires first (the receiver's bound starts one bound later)
    ("test", "MPI_Test never completed the 1 request of the partitioned send"),
    # blocked in MPI_Wait, the sender's bound (kept by the watchdog thread) fires first too
    ("wait", "MPI_Wait never completed the 1 request of the partitioned send"),
])
def test_planted_never_completing_wait_ends_within_the_bound(mpi_name, tmp_path, complete, expected):
    r = run_planted_never_complete(mpi_name, ["part", "--sizes", "4K", "--partitions", "2", "--complete", complete]
                                   + TINY, 2, tmp_path=tmp_path)
    messages = [x["message"] for x in r.records if x.get("type") == "failure"]
    assert any(m.startswith(expected) for m in messages), messages


def test_third_rank_stays_idle(mpi_name, tmp_path):
    """Ranks beyond the pair only join the harness's collectives. MPICH runs normally; Open
    MPI 5.0.11 never completes a partitioned send unless every rank of MPI_COMM_WORLD has
    created a partitioned request (measured) — HMB says so within --wait-bound instead of hanging."""
    start = time.monotonic()
    r = run_bench(mpi_name, ["part", "--sizes", "4K", "--partitions", "2", "--timeout", "60s", "--wait-bound", "3s"]
                  + TINY, ranks=3, tmp_path=tmp_path, timeout=120)
    elapsed = time.monotonic() - start
    if mpi_name == "openmpi":
        assert_conformance_failure(r, elapsed, "MPI_Test never completed the 1 request of the partitioned send")
    else:
        assert r.rc == 0, r.stderr
        (res,) = r.results()
        check_physical(res)


def test_threads_without_multiple_are_refused(mpi_name, tmp_path):
    """Two threads call MPI_Pready/MPI_Parrived at once: at MPI_THREAD_SERIALIZED the point is
    reported unsupported naming the level (hmb_mode_refused), never run."""
    r = run_bench(mpi_name, ["part", "--sizes", "4K", "--threads", "2", "--thread-level", "serialized"] + TINY,
                  threads=2, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    (res,) = r.results(status="unsupported")
    assert res["reason"] == ("threads call MPI concurrently: needs MPI_THREAD_MULTIPLE (the library provides "
                             "MPI_THREAD_SERIALIZED)"), res
    assert not r.results()
