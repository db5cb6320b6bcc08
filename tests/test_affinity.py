"""CPU placement: the rank's real CPU set behind OpenMP's narrowing of the initial thread,
oversubscription decided from the node's threads, and a spare core for progress threads.

Launches here set OMP_PLACES=cores OMP_PROC_BIND=close as `hmb run` does: with them the
OpenMP runtime narrows the initial thread to one core before main, which used to make every
bound threaded run look oversubscribed and put library progress threads on a compute core.
"""
from __future__ import annotations

import ctypes as C
import json
import os
import subprocess

import pytest

import _corelib as cl
from conftest import get_mpi, mpi_run, run_bench
from hmb.run import launch

CORES = os.cpu_count() or 1
OMP_BOUND = {"OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}
FAST = ["--warmup", "1", "--iters", "3", "--ci-target", "0"]
needs_two_cores = pytest.mark.skipif(CORES < 2, reason="needs 2 CPUs")


Cpus = cl.Cpus


@pytest.fixture(scope="module")
def lib():
    return cl.load()


def cpus(lib, text: str) -> Cpus:
    s = Cpus()
    assert lib.hmb_cpulist_parse(text.encode(), C.byref(s)) == 0, text
    return s


# ------------------------------------------------------------------ mask arithmetic (pure)

@pytest.mark.parametrize("text, canonical, count", [
    ("0-3,6,8-9", "0-3,6,8-9", 7), ("5", "5", 1), ("", "", 0),
    ("3,1,2", "1-3", 3), ("0,2-3,63-65", "0,2-3,63-65", 6),    # across a 64-bit word
])
def test_cpulist_round_trip(lib, text, canonical, count):
    s = cpus(lib, text)
    buf = C.create_string_buffer(256)
    lib.hmb_cpulist_format(C.byref(s), buf, 256)
    assert buf.value.decode() == canonical and lib.hmb_cpus_count(C.byref(s)) == count


@pytest.mark.parametrize("bad", ["3-1", "a", "1,", "1-", "-1", "1 2", "1024"])
def test_cpulist_rejects_malformed(lib, bad):
    assert lib.hmb_cpulist_parse(bad.encode(), C.byref(Cpus())) == -1


@pytest.mark.parametrize("rank, compute, spare, n", [
    ("0-1", "0", "1", 1),            # 1 thread on 2 bound cores: the second is spare
    ("0-1", "0-1", "", 0),           # T threads on T cores: none
    ("8-11", "8-10", "11", 1),       # -bind-to core:4 with 3 threads
    ("0-7", "0,2,4,6", "1,3,5,7", 4),
    ("4", "0-7", "", 0),             # threads allowed wider than the rank: nothing spare
])
def test_spare_cpus_are_the_rank_minus_the_compute_threads(lib, rank, compute, spare, n):
    buf = C.create_string_buffer(256)
    assert lib.hmb_spare_cpulist(rank.encode(), compute.encode(), buf, 256) == n
    assert buf.value.decode() == spare


@pytest.mark.parametrize("threads, occupied, over", [
    (2, "0-1", 0),      # 1 rank x 2 threads on its 2 cores (OpenMP narrowed the main thread)
    (4, "0-1", 1),      # 2 ranks x 2 threads, each rank bound to one core
    (16, "0-15", 0),    # 2 ranks x 8 threads on 16 cores (the 16-core finding)
    (3, "0-1", 1),
])
def test_oversubscription_counts_the_nodes_threads_against_their_cpus(lib, threads, occupied, over):
    assert lib.hmb_cpus_oversubscribed(threads, C.byref(cpus(lib, occupied))) == over


@pytest.mark.parametrize("values, match", [
    ("impl", 1), ("none,test:10,thread", 1), ("none,test:10", 0), ("threads", 0),
    ("test:10,impl", 1), ("", 0), ("thread:2", 1),
])
def test_spare_core_rule_matches_option_values(lib, values, match):
    assert lib.hmb_spare_rule_matches(b"progress=impl,thread", values.encode()) == match


def test_spare_core_rule_names_its_option(lib):
    buf = C.create_string_buffer(64)
    assert lib.hmb_spare_rule_option(b"progress=impl,thread", buf, 64) == 0 and buf.value == b"progress"
    for bad in (b"progress", b"=impl", b"progress="):
        assert lib.hmb_spare_rule_option(bad, buf, 64) == -1


# ------------------------------------------------------------------ hmb-bench --launch-needs

def launch_needs(args: list[str]) -> subprocess.CompletedProcess:
    impl = get_mpi("mpich")
    return subprocess.run([str(impl.bench)] + args + ["--launch-needs"], capture_output=True, text=True,
                          timeout=60, env=impl.env())


@pytest.mark.parametrize("args, spare", [
    (["async"], 1),                                        # default modes include thread
    (["async", "--progress", "impl"], 1),
    (["async", "--progress", "none,test:10"], 0),
    (["p2p", "--sizes", "8"], 0),                          # no progress thread at all
])
def test_launch_needs_follows_the_descriptor(args, spare):
    r = launch_needs(args)
    assert r.returncode == 0, r.stderr
    needs = json.loads(r.stdout)
    assert needs["spare_cores_per_rank"] == spare
    assert set(needs) <= {"spare_cores_per_rank", "rank_bytes"}


def test_launch_needs_rejects_bad_input():
    r = launch_needs(["async", "--sizes", "1X"])
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "--sizes" in r.stderr


@needs_two_cores
def test_launcher_binds_a_spare_core_only_when_a_progress_thread_needs_it():
    t = launch.Target("mpich", "mpich", get_mpi("mpich"))
    one_rank = launch.command(t, "async", ["--progress", "impl"], 1, 1, launcher="mpiexec")
    assert one_rank[one_rank.index("-bind-to") + 1] == "core:2"
    plain = launch.command(t, "async", ["--progress", "none"], 1, 1, launcher="mpiexec")
    assert plain[plain.index("-bind-to") + 1] == "core"
    srun = launch.command(t, "async", ["--progress", "thread"], 4, 2, launcher="srun")
    assert srun[srun.index("-c") + 1] == "3"
    if CORES < 4:  # 2 ranks x 2 cores do not fit: no spare (hmb-bench warns and records it)
        two = launch.command(t, "async", ["--progress", "impl"], 2, 1, launcher="mpiexec")
        assert two[two.index("-bind-to") + 1] == "core"


# ------------------------------------------------------------------ placement on real launches

def placement(mpi_name: str, ranks: int, cores_per_rank: int, threads: int, env: dict | None = None):
    """`mpiexec hmb-bench --placement` with each rank bound to cores_per_rank cores."""
    impl = get_mpi(mpi_name)
    e = impl.env()
    e.update(OMP_BOUND, OMP_NUM_THREADS=str(threads), **(env or {}))
    cmd = impl.launch_args(ranks, cores_per_rank) + [str(impl.bench), "--placement"]
    p = mpi_run(impl, cmd, capture_output=True, text=True, timeout=120, env=e)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


@needs_two_cores
def test_one_rank_two_threads_on_its_two_cores_is_not_oversubscribed(mpi_name):
    """The launcher's 2-core mask is seen although OpenMP narrowed the initial thread."""
    p, stderr = placement(mpi_name, ranks=1, cores_per_rank=2, threads=2)
    rank0 = p["placement"][0]
    assert p["oversubscribed"] is False and "oversubscribed" not in stderr
    assert rank0["cpuset"] == rank0["compute_cpus"] and p["cpus_available"] == 2
    assert len(set(rank0["thread_cpus"])) == 2          # the threads really are on both cores
    assert rank0["spare_cpus"] == ""


@needs_two_cores
def test_two_ranks_two_threads_on_two_cores_are_flagged(mpi_name, tmp_path):
    r = run_bench(mpi_name, ["p2p", "--mode", "latency", "--sizes", "8", "--threads", "2"] + FAST,
                  threads=2, env=OMP_BOUND, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    h = r.header()
    if CORES < 4:
        assert h["oversubscribed"] is True
        warned = [ln for ln in r.stderr.splitlines() if ln.startswith("hmb-bench: warning: oversubscribed")]
        assert len(warned) == 1 and "2 ranks per node x 2 threads" in warned[0]


@needs_two_cores
def test_library_threads_start_on_the_spare_core(mpi_name):
    """1 rank x 1 thread bound to 2 cores: the threads the library starts in MPI_Init (MPICH's
    async progress thread among them) inherit the spare core, not the compute thread's."""
    env = {"MPIR_CVAR_ASYNC_PROGRESS": "1"} if mpi_name == "mpich" else {}
    p, _ = placement(mpi_name, ranks=1, cores_per_rank=2, threads=1, env=env)
    rank0 = p["placement"][0]
    assert rank0["spare_cpus"] and rank0["spare_cpus"] != rank0["compute_cpus"]
    assert rank0["library_threads"] >= 1
    assert rank0["library_thread_cpus"] == rank0["spare_cpus"]
    if mpi_name == "mpich":   # the progress thread is one more thread than without it
        without, _ = placement(mpi_name, ranks=1, cores_per_rank=2, threads=1)
        assert rank0["library_threads"] == without["placement"][0]["library_threads"] + 1


def test_no_spare_core_is_warned_and_recorded(mpi_name, tmp_path):
    """2 ranks bound to one core each: the progress threads must share the compute core —
    one warning line, the run header and every progress point say so."""
    modes = "thread,impl" if mpi_name == "mpich" else "thread"
    env = dict(OMP_BOUND, MPIR_CVAR_ASYNC_PROGRESS="1") if mpi_name == "mpich" else OMP_BOUND
    r = run_bench(mpi_name, ["async", "--op", "pt2pt", "--progress", f"none,{modes}", "--sizes", "32",
                             "--compute", "100us"] + FAST, env=env, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    h = r.header()
    warned = [ln for ln in r.stderr.splitlines() if ln.startswith("hmb-bench: warning: no spare core")]
    assert h["spare_cores_per_rank"] == 1
    assert h["spare_core_missing"] is True and len(warned) == 1
    assert all(p["spare_cpus"] == "" for p in h["placement"])
    results = {x["extra"]["progress"]: x["extra"] for x in r.results()}
    assert set(results) == {"none"} | set(modes.split(","))
    assert "progress_cpus_allowed" not in results["none"]
    for mode in modes.split(","):
        extra = results[mode]
        assert extra["progress_cpus_allowed"] == h["placement"][0]["cpuset"], mode
        assert str(extra["progress_last_cpu"]) in extra["progress_cpus_allowed"].split(","), mode
        assert extra["progress_shares_compute_core"] == 1, mode
