"""p2p baselines: every mode produces sane, validated results under each MPI.

Timings on this shared 2-core VM are noisy, so only physically possible bounds are checked:
a positive latency below 10 ms, a bandwidth below 1 TB/s, medians inside their CIs.
"""
from __future__ import annotations

import math

import pytest

from conftest import run_bench

FAST = ["--iters", "5", "--warmup", "1", "--ci-target", "0"]
MODES = {  # mode -> metrics it reports (the others are null for that mode)
    "latency": ["latency_us", "iter_time_us"],
    "bw": ["bandwidth_MBps", "msg_rate", "iter_time_us"],
    "bibw": ["bandwidth_MBps", "msg_rate", "iter_time_us"],
    "msgrate": ["bandwidth_MBps", "msg_rate", "iter_time_us"],
}


def check_result(res: dict, mode: str) -> None:
    assert res["status"] == "ok" and res["invalid"] == 0
    assert res["params"]["mode"] == mode
    for name, m in res["metrics"].items():
        if name not in MODES[mode]:
            assert m["count"] == 0 and m["median"] is None, (mode, name)
            continue
        assert m["count"] == res["iterations"]
        assert math.isfinite(m["median"]) and m["median"] > 0, (mode, name, m)
        assert m["ci_lo"] <= m["median"] <= m["ci_hi"]
        assert m["min"] <= m["median"] <= m["max"]
    if mode == "latency":
        lat = res["metrics"]["latency_us"]["median"]
        assert 0.01 < lat < 10_000
        # One ping-pong per iteration: the round trip is twice the latency.
        assert res["metrics"]["iter_time_us"]["median"] == pytest.approx(2 * lat, rel=1e-6)
    else:
        bw = res["metrics"]["bandwidth_MBps"]["median"]
        assert 0 < bw < 1e6
        # bandwidth = messages x size / time and rate = messages / time: bw = rate x size.
        rate = res["metrics"]["msg_rate"]["median"]
        assert bw == pytest.approx(rate * res["params"]["size_bytes"] / 1e6, rel=1e-6)


@pytest.mark.parametrize("mode", ["latency", "bw", "bibw"])
def test_two_rank_modes(mpi_name, mode, tmp_path):
    r = run_bench(mpi_name, ["p2p", "--mode", mode, "--sizes", "8,1K,64K", "--window", "8"] + FAST,
                  tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    results = r.results()
    assert [x["params"]["size_bytes"] for x in results] == [8, 1024, 65536]
    for res in results:
        check_result(res, mode)
        assert res["params"]["window"] == (1 if mode == "latency" else 8)
        assert res["params"]["pairs"] == 1
    # The stdout table has one row per point, after the '#' header block.
    rows = [line for line in r.stdout.splitlines() if line and not line.startswith("#")]
    assert len(rows) == 3 and rows[1].split()[:2] == ["1K", mode]


def test_all_modes_default(mpi_name, tmp_path):
    r = run_bench(mpi_name, ["p2p", "--sizes", "4K", "--window", "4"] + FAST, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    assert [x["params"]["mode"] for x in r.results()] == ["latency", "bw", "bibw", "msgrate"]
    for res in r.results():
        check_result(res, res["params"]["mode"])


def test_msgrate_four_ranks(mpi_name, tmp_path):
    """Two pairs (0-2, 1-3); oversubscribed on 2 cores, so only correctness is checked."""
    r = run_bench(mpi_name, ["p2p", "--mode", "msgrate", "--sizes", "8,4K", "--window", "4"] + FAST,
                  ranks=4, tmp_path=tmp_path, timeout=240)
    assert r.rc == 0, r.stderr
    for res in r.results():
        check_result(res, "msgrate")
        assert res["params"]["pairs"] == 2


def test_three_ranks_latency_and_odd_msgrate(mpi_name, tmp_path):
    """Ranks beyond 0 and 1 idle in latency/bw; msgrate needs an even count (exit 2)."""
    ok = run_bench(mpi_name, ["p2p", "--mode", "latency,bw", "--sizes", "8", "--window", "2"] + FAST,
                   ranks=3, tmp_path=tmp_path, timeout=240)
    assert ok.rc == 0, ok.stderr
    assert [x["params"]["mode"] for x in ok.results()] == ["latency", "bw"]
    bad = run_bench(mpi_name, ["p2p", "--mode", "msgrate", "--sizes", "8"] + FAST, ranks=3, timeout=240)
    assert bad.rc == 2
    assert [line for line in bad.stderr.splitlines() if "even number of ranks (got 3)" in line]


def test_bad_mode_is_usage_error(mpi_name):
    r = run_bench(mpi_name, ["p2p", "--mode", "latency,pingpong"], timeout=60)
    assert r.rc == 2
    assert [line for line in r.stderr.splitlines() if line.startswith("hmb-bench p2p: --mode")]


def test_window_slots_validated(mpi_name, tmp_path):
    """bibw: both ranks receive windows; the corruption is caught on the highest checking rank."""
    r = run_bench(mpi_name, ["p2p", "--mode", "bibw", "--sizes", "1K", "--window", "3",
                             "--corrupt-at", "3"] + FAST, tmp_path=tmp_path, timeout=120)
    assert r.rc == 3, r.stderr
    assert any("validation failed: bench=p2p size=1K mode=bibw" in line and "iteration=3" in line
               and "rank=1" in line for line in r.stderr.splitlines())
