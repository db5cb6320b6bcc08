"""Descriptors exported by hmb-bench (`--list --json`, `BENCH --describe --json`) — the only
place the toolkit learns benchmarks from — and the toolkit's duration parsing."""
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import get_mpi
from hmb.data.units import parse_duration


@pytest.fixture(scope="module")
def described():
    bench = get_mpi("mpich").bench
    listed = subprocess.run([str(bench), "--list"], capture_output=True, text=True, check=True).stdout
    doc = json.loads(subprocess.run([str(bench), "--list", "--json"], capture_output=True, text=True,
                                    check=True).stdout)
    return bench, listed, doc


def test_every_listed_benchmark_is_described(described):
    bench, listed, doc = described
    names = [b["name"] for b in doc["benchmarks"]]
    table = [line.split()[0] for line in listed.splitlines()[1:] if line.strip()]
    assert sorted(names) == sorted(table) and len(names) == len(set(names))
    for b in doc["benchmarks"]:
        assert b["min_ranks"] >= 1 and b["summary"] and b["metrics"], b["name"]
        roles = {o["name"]: o["role"] for o in b["options"]}
        assert set(roles.values()) <= {"parameter", "run-control"}
        # options that only steer the run never define a result point
        for name in ("iters", "max-iters", "warmup", "timeout", "json", "raw"):
            assert roles[name] == "run-control", (b["name"], name)
        assert roles["sizes"] == "parameter" and roles["threads"] == "parameter", b["name"]
        for m in b["metrics"]:
            assert {"name", "unit", "higher_is_better", "signed", "in_table"} <= set(m), (b["name"], m)


def test_signed_and_spare_core_come_from_the_benchmark(described):
    _, _, doc = described
    by = {b["name"]: b for b in doc["benchmarks"]}
    metric = {(b, m["name"]): m for b, d in by.items() for m in d["metrics"]}
    assert metric[("async", "efficiency_pct")]["signed"] and metric[("part", "availability")]["signed"]
    assert not metric[("p2p", "latency_us")]["signed"] and not metric[("p2p", "latency_us")]["higher_is_better"]
    assert by["p2p"]["spare_core_when"] is None and by["async"]["spare_core_when"] == "progress=impl,thread"
    # --data: p2p reuses send buffers by default (as OSU); the others write fresh data only
    default = {b: next(o["default"] for o in d["options"] if o["name"] == "data") for b, d in by.items()}
    assert by["p2p"]["data_reuse"] and default["p2p"] == "reuse"
    assert not by["part"]["data_reuse"] and default["part"] == "fresh"


def test_describe_one_benchmark_and_reject_unknown(described):
    bench, _, doc = described
    one = json.loads(subprocess.run([str(bench), "part", "--describe", "--json"], capture_output=True, text=True,
                                    check=True).stdout)
    (part,) = one["benchmarks"]
    assert part == next(b for b in doc["benchmarks"] if b["name"] == "part")
    r = subprocess.run([str(bench), "nosuch", "--describe", "--json"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "nosuch" in r.stderr


@pytest.mark.parametrize("text,seconds", [("30s", 30), ("250ms", 0.25), ("1.5min", 90), ("2h", 7200),
                                          ("500us", 5e-4), ("0", 0), (0, 0), ("10ns", 1e-8)])
def test_durations_with_units(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["600", 600, "1.5", "10 parsecs", "s", "-1s", True, ""])
def test_durations_without_a_unit_are_refused(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_every_benchmark_says_whether_it_runs_without_mpi(described):
    """--comm off (the mock communication policy) where the pattern allows it, else the reason why
    not, in the benchmark's own words."""
    _, _, doc = described
    for b in doc["benchmarks"]:
        off = b["comm_off"]
        takes = any(o["name"] == "comm" for o in b["options"])
        assert off is True if takes else (isinstance(off, str) and len(off) > 30 and "not declared" not in off), b
    assert {b["name"] for b in doc["benchmarks"] if b["comm_off"] is True} >= {"halo3d", "sweep3d", "stencil3d"}
