"""`--cache cold` on every benchmark the binary lists, at sizes whose buffers malloc maps and
unmaps on its own (256K, 512K): a buffer freed while still registered for the flush is then
unmapped memory, and the flush crashes (async's calibration did: SIGSEGV)."""
from __future__ import annotations

import subprocess

import pytest

from conftest import get_mpi, pattern_modes, run_bench

# Both above glibc's mmap threshold (128K; freeing a mapped 256K chunk raises it to that chunk's
# size, and the 512K buffers of the next point are still mapped). 4M as the second size made no
# other buffer mapped and cost 2.7x the time (sweep3d 11.5 s against 4.2 s, proto 8.2 against 3.4).
SIZES = "256K,512K"
# --llc-size 8M: the flush's eviction buffer is sized from the LLC, and this VM reports its host's
# 480 MB L3 (each flush wrote and read 480 MB: async alone took 31 s here, 4 s with 8M). These
# tests check the mechanism; `hmb check` judges the physics with the machine's own LLC.
FEW = ["--iters", "2", "--max-iters", "2", "--warmup", "1", "--ci-target", "0", "--llc-size", "8M"]
# What a benchmark needs for --sizes to be its points: proto's default test (probe) scans --range.
# Short windows and one k-block: the sizes' buffers are the same, the transfers far fewer
# (mt's 64-message windows of 4M took 18 s, sweep3d's 4 k-blocks 8 s, p2p's 6 s).
EXTRA_ARGS: dict[str, list[str]] = {"proto": ["--test", "tradeoff"],
                                    "mt": ["--window", "4", "--windows-per-iter", "1"],
                                    "p2p": ["--window", "4"], "sweep3d": ["--kblocks", "1"]}
# halo3d's --sizes is bytes per face of a cubic block: 4M faces would be a 3 GB block per rank.
# 64K faces (a 5.6 MB block) still give buffers malloc maps on its own.
SIZES_OF: dict[str, str] = {"halo3d": "16K,64K"}


def listed_benchmarks(mpi_name: str) -> list[str]:
    """Timed benchmarks from `hmb-bench --list` (a header line, then one benchmark per line: name,
    group, summary). The conformance group is left out: its checks have no sizes and no timed
    buffers for --cache cold to flush (tests/test_conform.py covers it)."""
    out = subprocess.run([str(get_mpi(mpi_name).bench), "--list"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    rows = [ln.split()[:2] for ln in out.splitlines() if ln.strip()]
    assert rows and rows[0] == ["name", "group"], out
    assert any(group == "conformance" for _, group in rows[1:]), out  # the group this filter names exists
    return [name for name, group in rows[1:] if group != "conformance"]


@pytest.mark.mpi
def test_every_benchmark_runs_with_cold_cache(mpi_name, tmp_path):
    benches = listed_benchmarks(mpi_name)
    assert "async" in benches and "p2p" in benches  # the list was read, not an empty parse
    failures = []
    for bench in benches:
        # The pattern benchmarks' partitioned mode meets Open MPI 5.0.11's partitioned problem
        # (conftest.OPENMPI_PARTITIONED): their modes here are the ones their own tests run.
        modes = ["--mode", ",".join(pattern_modes(mpi_name))] if bench in ("halo3d", "sweep3d") else []
        run = run_bench(mpi_name, [bench, "--cache", "cold", "--sizes", SIZES_OF.get(bench, SIZES), *FEW,
                                   *EXTRA_ARGS.get(bench, []), *modes],
                        tmp_path=tmp_path, timeout=300)
        if run.rc != 0:
            failures.append(f"{bench}: exit {run.rc}: {run.stderr.strip()[-400:]}")
            continue
        if run.header()["cache"]["mode"] != "cold":
            failures.append(f"{bench}: run header says cache mode {run.header()['cache']['mode']}")
        # Each size was really measured (with flushes), not skipped as unsupported (a benchmark
        # may round a size to its geometry: halo3d's face is a whole square of cells).
        measured = {r["params"]["size_bytes"] for r in run.results()}
        if len(measured) != 2:
            failures.append(f"{bench}: measured sizes {sorted(measured)}")
    assert not failures, "\n".join(failures)


@pytest.mark.mpi
@pytest.mark.parametrize("bench,args,flushes,flushed_bytes", [
    # part's rank 0 is the sender: one 64 KiB send buffer; its four paired phases (partitioned,
    # single send, persistent, single send to a polling receiver) each start cold: 4 flushes in
    # each of 1 + 3 iterations
    ("part", ["--sizes", "64K", "--partitions", "2", "--threads", "2"], 4 * (1 + 3), 65536),
    # halo3d, 4x4x4 cells, 2 ranks: 6 faces x (send + receive) x 16 cells x 8 B; every one of the
    # two paired modes starts cold: 2 flushes per iteration
    ("halo3d", ["--domain", "4,4,4", "--mode", "single,multiple", "--compute", "10us"], 2 * (1 + 3), 12 * 16 * 8),
])
def test_cold_cache_flushes_every_registered_buffer(mpi_name, tmp_path, bench, args, flushes, flushed_bytes):
    """The mechanism (not its physics, which `hmb check` judges from the header's probe): under
    --cache cold the harness flushes before every iteration and paired mode, line by line over
    exactly the message buffers the benchmark registered; under --cache hot never."""
    threads = 2 if "--threads" in args else 1
    few = ["--iters", "3", "--max-iters", "3", "--warmup", "1", "--ci-target", "0", "--llc-size", "8M"]
    cold = run_bench(mpi_name, [bench, "--cache", "cold", *args, *few], threads=threads, tmp_path=tmp_path)
    assert cold.rc == 0, cold.stderr
    (res,) = cold.results()
    assert (res["extra"]["cache_flushes"], res["extra"]["cache_flushed_bytes"]) == (flushes, flushed_bytes)
    probe = cold.header()["cache"]
    assert probe["probe_bytes"] > 0 and probe["probe_hot_ns"] > 0 and probe["probe_cold_ns"] > 0
    hot = run_bench(mpi_name, [bench, "--cache", "hot", *args, *few], threads=threads, tmp_path=tmp_path)
    assert hot.rc == 0, hot.stderr
    (res,) = hot.results()
    assert "cache_flushes" not in res["extra"] and "probe_bytes" not in hot.header()["cache"]
