"""libhmbprof.so: exact per-pair counts on a program with a known traffic (tests/data/prof_pairs.c),
under MPICH and Open MPI, preloaded into an unmodified binary."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import get_mpi, mpi_run

DATA = Path(__file__).parent / "data"


def profiled_run(mpi_name, tmp_path, program):
    """Build tests/data/PROGRAM.c, run it on 2 ranks with libhmbprof.so preloaded: (profile, stdout)."""
    impl = get_mpi(mpi_name)   # builds hmb-bench and libhmbprof.so
    exe = tmp_path / program
    subprocess.run([impl.mpicc, "-O1", "-pthread", str(DATA / f"{program}.c"), "-o", str(exe)], check=True,
                   env=impl.env())
    out = tmp_path / "profile.json"
    env = {**impl.env(), "LD_PRELOAD": str(impl.build_dir / "libhmbprof.so"), "HMB_PROF_OUT": str(out)}
    p = mpi_run(impl, impl.launch_args(2) + [str(exe)], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert f"hmbprof: wrote {out}" in p.stderr
    return json.loads(out.read_text()), p.stdout


@pytest.fixture
def profile(mpi_name, tmp_path):
    prof, stdout = profiled_run(mpi_name, tmp_path, "prof_pairs")
    return prof, "provided 3" in stdout  # MPI_THREAD_MULTIPLE is 3 in both


def _side(prof, rank, peer, side):
    r = next(x for x in prof["ranks"] if x["rank"] == rank)
    return next(p for p in r["peers"] if p["peer"] == peer)[side]


def test_exact_counts(profile):
    prof, multiple = profile
    assert prof["type"] == "hmbprof" and prof["world_size"] == 2
    threaded = 100 if multiple else 0   # 2 threads x 50 messages of 64 B each way
    # rank 0 -> 1: 3 x 100 B Send, 2 x 10000 B Isend, 28 B Issend (reversed communicator), 5 B Sendrecv
    fwd = {"messages": 7 + threaded, "bytes": 300 + 20000 + 28 + 5 + 64 * threaded,
           "blocking": 4, "nonblocking": 3 + threaded}
    back = {"messages": 1 + threaded, "bytes": 9 + 64 * threaded, "blocking": 1, "nonblocking": threaded}
    for rank, peer, side, want in ((0, 1, "send", fwd), (1, 0, "recv", fwd), (1, 0, "send", back), (0, 1, "recv", back)):
        got = _side(prof, rank, peer, side)
        assert {k: got[k] for k in want} == want, (rank, side)
    hist = {(lo, hi): n for lo, hi, n in _side(prof, 1, 0, "recv")["size_hist"]}
    assert hist == {(4, 8): 1, (16, 32): 1, (64, 128): 3 + threaded, (8192, 16384): 2}
    # every non-blocking message was waited for, on both sides, per exact size
    for rank, peer, side in ((0, 1, "send"), (1, 0, "recv")):
        nb = {e["size"]: (e["messages"], e["waited"]) for e in _side(prof, rank, peer, side)["nonblocking_sizes"]}
        want = {10000: (2, 2), 28: (1, 1)}
        if threaded:
            want[64] = (threaded, threaded)
        assert nb == want, (rank, side)
        for e in _side(prof, rank, peer, side)["nonblocking_sizes"]:
            assert sum(n for _, _, n in e["post_to_wait_hist"]) == e["waited"]


def test_calls_and_rank_fields(profile):
    prof, multiple = profile
    threaded = 100 if multiple else 0
    r0, r1 = prof["ranks"]
    assert (r0["rank"], r1["rank"]) == (0, 1)
    assert r0["calls"]["MPI_Send"] == 3 and r0["calls"]["MPI_Isend"] == 2 + threaded
    assert r0["calls"]["MPI_Issend"] == 1 and r0["calls"]["MPI_Test"] >= 1
    assert r1["calls"]["MPI_Recv"] == 3 and r1["calls"]["MPI_Irecv"] == 3 + threaded
    assert r1["calls"]["MPI_Waitany"] == 1 and r1["calls"]["MPI_Wait"] == 2
    assert r1["calls"]["MPI_Waitall"] == threaded
    for r in (r0, r1):
        assert r["pending_at_finalize"] == 0 and r["untracked_peer_messages"] == 0
        assert r["vmhwm_kib"] > 0 and 0 < r["p2p_s"] and 0 < r["p2p_fraction"] <= 1


def test_not_preloaded_into_non_mpi_programs(tmp_path):
    """Preloaded into a whole command line (the launcher too), it stays silent where MPI never starts."""
    impl = get_mpi("mpich")
    env = {**impl.env(), "LD_PRELOAD": str(impl.build_dir / "libhmbprof.so"),
           "HMB_PROF_OUT": str(tmp_path / "p.json")}
    p = subprocess.run(["true"], env=env, capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == "" and not (tmp_path / "p.json").exists()


def test_time_outside_mpi(mpi_name, tmp_path):
    """tests/data/prof_outside.c: a receive waited after 20 ms of computation spent them outside MPI;
    one completed by an MPI_Test loop that ran 20 ms spent (nearly) all of its post-to-wait inside."""
    prof, _ = profiled_run(mpi_name, tmp_path, "prof_outside")
    nb = {e["size"]: e for e in _side(prof, 0, 1, "recv")["nonblocking_sizes"]}
    computed, polled = nb[100], nb[200]
    for e in (computed, polled):
        assert e["waited"] == e["outside_mpi_known"] == 1
        assert sum(n for _, _, n in e["outside_mpi_hist"]) == 1
    # 20.0 ms in every run seen idle or with one core busy; once, under heavier load, 18.3 ms,
    # which the accounting does not explain yet (an open issue): the bound is half the compute.
    assert computed["outside_mpi_sum_s"] >= 0.01
    # Rank 1's 20 ms start when the token arrives; rank 0 posts after sending it, possibly later.
    assert polled["post_to_wait_sum_s"] >= 0.01 and polled["outside_mpi_sum_s"] < polled["post_to_wait_sum_s"]
    # How much of a polling loop lands outside MPI depends on the machine (a descheduled thread
    # between two MPI_Test calls counts as outside: 53 % was seen under heavy load), but the
    # computing receive spends a larger share of its post-to-wait outside MPI than the polling one.
    share = {k: e["outside_mpi_sum_s"] / e["post_to_wait_sum_s"] for k, e in (("c", computed), ("p", polled))}
    assert share["c"] > share["p"], share
