"""Every metric a benchmark declares (`hmb-bench BENCH --describe --json`) reaches the output of a
run that selects every mode (`--mode all`, or the options that run the rest). A metric list with a
fixed cap once dropped halo3d's 25th metric (speedup_persistent_vs_serial) and wrote past the
sample: the list is built at run time from the declarations now, and this test fails when a
declared metric is never recorded."""
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import get_mpi, run_bench

FAST = ["--iters", "2", "--warmup", "0", "--ci-target", "0", "--budget", "1s"]

# The launches whose results together must carry every declared metric: (args, ranks, threads).
LAUNCHES = {
    "p2p": [(["--mode", "all", "--sizes", "8"], 2, 1)],
    "part": [(["--sizes", "4K", "--compute", "10us"], 2, 1)],
    "async": [(["--sizes", "1K", "--compute", "10us", "--progress", "none"], 2, 1)],
    "halo3d": [(["--mode", "all", "--sizes", "4K", "--compute", "10us"], 2, 1),
               (["--thread-comm", "shared", "--sizes", "4K", "--compute", "10us"], 2, 2)],
    "sweep3d": [(["--mode", "all", "--sizes", "1K", "--compute", "10us"], 2, 1)],
    "stencil3d": [(["--sizes", "1K", "--compute", "10us"], 2, 1)],
    # the sender view from 64 B: it finds Open MPI's inline send (264 B) and MPICH's 8120 B; --view
    # both (the default) needs a linear range of 6 sizes or more
    "proto": [(["--test", "all", "--sizes", "1K", "--range", "64:8K", "--view", "sender"], 2, 1)],
    "match": [(["--sizes", "8"], 2, 1)],
    "mt": [(["--test", "all", "--sizes", "8"], 2, 1)],
    # a check with no partitioned request: restarts ends Open MPI 5.0.x runs with exit 3 (conftest.OPENMPI_PARTITIONED)
    "conform": [(["--check", "thread-level"], 2, 1)],
}

# Read from the library's MPI_T performance variables: recorded only where the library exposes
# them (the result says "available": 0 for each one it lacks).
PVAR_METRICS = {"match": {"posted_q", "posted_q_peer_max", "unexpected_q", "unexpected_q_peer_max",
                          "searched_per_msg", "match_time_us_per_msg"}}


def described(bench: str) -> dict:
    exe = get_mpi("mpich").bench
    doc = json.loads(subprocess.run([str(exe), bench, "--describe", "--json"], capture_output=True, text=True,
                                    check=True).stdout)
    return doc["benchmarks"][0]


def test_every_benchmark_has_launches():
    exe = get_mpi("mpich").bench
    doc = json.loads(subprocess.run([str(exe), "--list", "--json"], capture_output=True, text=True, check=True).stdout)
    assert sorted(b["name"] for b in doc["benchmarks"]) == sorted(LAUNCHES)


@pytest.mark.parametrize("bench", sorted(LAUNCHES))
def test_declared_metrics_reach_the_output(mpi_name, bench, tmp_path):
    want = {m["name"] for m in described(bench)["metrics"]}
    got, lacking_pvars = set(), False
    for args, ranks, threads in LAUNCHES[bench]:
        extra = [] if bench == "conform" else FAST
        r = run_bench(mpi_name, [bench] + args + extra, ranks=ranks, threads=threads, tmp_path=tmp_path,
                      timeout=240)
        assert r.rc == 0, (bench, args, r.stderr[-2000:])
        for rec in r.results():
            got |= {name for name, m in rec["metrics"].items() if m["count"] > 0}
            lacking_pvars |= any(k.endswith(".available") and v == 0 for k, v in rec.get("extra", {}).items())
        assert set().union(*(rec["metrics"].keys() for rec in r.results())) <= want, bench
    missing = want - got
    if lacking_pvars:
        missing -= PVAR_METRICS.get(bench, set())
    assert not missing, f"{bench} declares metrics no run recorded: {sorted(missing)}"


def test_modes_and_their_metrics_are_described():
    """halo3d describes its modes with the metrics each adds; the speed-up of persistent over
    serial is one of them (the 25th metric the fixed cap dropped)."""
    halo = described("halo3d")
    modes = {m["name"]: m for m in halo["modes"]}
    assert list(modes) == ["single", "multiple", "partitioned", "persistent", "serial", "threadcomm"]
    assert "speedup_persistent_vs_serial" in modes["persistent"]["metrics"]
    assert {m for mode in modes.values() for m in mode["metrics"]} <= {m["name"] for m in halo["metrics"]}
    assert len(halo["metrics"]) == 25
