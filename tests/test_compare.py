"""hmb compare: finds exactly the planted differences in two synthetic result sets.

tests/data/compare_{a,b}.jsonl (written by tests/data/make_synthetic.py): 10 latency points
with raw samples, 5% noise; in B the sizes 64, 4K and 64K are 30% slower; B has one extra
point (4M).
"""
from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

from hmb import compare, results

DATA = Path(__file__).parent / "data"
PLANTED = {64, 4096, 65536}


def _sizes(rows):
    return {int(r.point.split("size_bytes=")[1].split()[0].replace("K", "")) * (1024 if "K" in r.point.split("size_bytes=")[1].split()[0] else 1)
            for r in rows}


def test_finds_exactly_the_planted_differences_with_raw_samples():
    a = results.load([DATA / "compare_a.jsonl"])
    b = results.load([DATA / "compare_b.jsonl"])
    c = compare.compare(a, b)
    assert len(c.rows) == 10
    assert all(r.method == "bootstrap+MWU" for r in c.rows)
    sig = [r for r in c.rows if r.significant]
    assert _sizes(sig) == PLANTED
    for r in sig:
        assert 1.2 < r.ratio < 1.4 and r.ci_lo < r.ratio < r.ci_hi and r.ci_lo > 1.05
        assert r.verdict == "worse"                          # latency: lower is better
    for r in c.rows:
        if not r.significant:
            assert r.ci_lo <= 1.0 + 0.05 and abs(r.ratio - 1) < 0.05
    assert c.only_b == ["mode=latency size_bytes=4M threads=1"] and c.only_a == []


def _strip_samples(rs):
    rs = copy.deepcopy(rs)
    for r in rs.results:
        r.record.pop("samples", None)
    return rs


def test_summary_ci_path_without_raw_samples():
    a = _strip_samples(results.load([DATA / "compare_a.jsonl"]))
    b = _strip_samples(results.load([DATA / "compare_b.jsonl"]))
    c = compare.compare(a, b)
    assert all(r.method == "summary CIs" for r in c.rows)
    assert _sizes([r for r in c.rows if r.significant]) == PLANTED


def test_identical_sets_change_nothing():
    a = results.load([DATA / "compare_a.jsonl"])
    c = compare.compare(a, a)
    assert not any(r.significant for r in c.rows)
    assert all(math.isclose(r.ratio, 1.0) for r in c.rows)


def test_holm_correction():
    adj = compare.holm([0.01, 0.04, 0.03, float("nan")])
    assert [round(x, 6) for x in adj[:3]] == [0.03, 0.06, 0.06] and math.isnan(adj[3])


def test_cli_table_and_summary(tmp_path):
    out = tmp_path / "cmp.txt"
    r = subprocess.run([sys.executable, "-m", "hmb.cli", "compare", str(DATA / "compare_a.jsonl"),
                        str(DATA / "compare_b.jsonl"), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Significant changes (Holm p < 0.05 and |B/A - 1| > 5%): 3 of 10" in r.stdout
    assert "Only in B (1)" in r.stdout and out.read_text() == r.stdout
    assert r.stdout.count("* worse") == 3


def test_matches_across_libraries(tmp_path):
    # A and B each from one library (MPICH vs "Open MPI"): points match across them.
    b = tmp_path / "b.jsonl"
    lines = [json.loads(x) for x in (DATA / "compare_a.jsonl").read_text().splitlines()]
    for rec in lines:
        if rec["type"] == "run":
            rec["mpi"]["impl"] = "Open MPI"
    b.write_text("".join(json.dumps(x) + "\n" for x in lines))
    c = compare.compare(results.load([DATA / "compare_a.jsonl"]), results.load([b]))
    assert len(c.rows) == 10 and not c.only_a and not c.only_b
