"""hmb compare: finds exactly the planted differences in two synthetic result sets.

tests/data/compare_{a,b}.jsonl (written by tests/data/make_synthetic.py): 10 latency points
with raw samples, 5% noise; in B the sizes 64, 4K and 64K are 30% slower; B has one extra
point (4M).
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from hmb.data import tidy
from hmb.present import compare

from conftest import hmb_cli

DATA = Path(__file__).parent / "data"
PLANTED = {64, 4096, 65536}


def _sizes(rows):
    return {int(r.point.split("size_bytes=")[1].split()[0].replace("K", "")) * (1024 if "K" in r.point.split("size_bytes=")[1].split()[0] else 1)
            for r in rows}


def test_finds_exactly_the_planted_differences_with_raw_samples():
    a = tidy.read([DATA / "compare_a.jsonl"], samples=True)
    b = tidy.read([DATA / "compare_b.jsonl"], samples=True)
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


def test_summary_ci_path_without_raw_samples():
    a = tidy.read([DATA / "compare_a.jsonl"])      # read without the --raw samples
    b = tidy.read([DATA / "compare_b.jsonl"])
    c = compare.compare(a, b)
    assert all(r.method == "summary CIs" for r in c.rows)
    assert _sizes([r for r in c.rows if r.significant]) == PLANTED


def test_identical_sets_change_nothing():
    a = tidy.read([DATA / "compare_a.jsonl"], samples=True)
    c = compare.compare(a, a)
    assert not any(r.significant for r in c.rows)
    assert all(math.isclose(r.ratio, 1.0) for r in c.rows)


def test_holm_correction():
    adj = compare.holm([0.01, 0.04, 0.03, float("nan")])
    assert [round(x, 6) for x in adj[:3]] == [0.03, 0.06, 0.06] and math.isnan(adj[3])


def test_cli_table_and_summary(tmp_path):
    out = tmp_path / "cmp.txt"
    r = hmb_cli(["compare", DATA / "compare_a.jsonl", DATA / "compare_b.jsonl", "-o", out])
    assert r.returncode == 0, r.stderr
    assert "Significant changes (Holm p < 0.05, CI excludes no change, and |B/A - 1| > 5% " in r.stdout
    assert "of scale): 3 of 10" in r.stdout and "basis" in r.stdout
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
    c = compare.compare(tidy.read([DATA / "compare_a.jsonl"], samples=True), tidy.read([b], samples=True))
    assert len(c.rows) == 10 and not c.only_a and not c.only_b


# ---- point identity, launch-to-launch drift, signed metrics, invalid CIs

sys.path.insert(0, str(DATA))
import make_synthetic as synth  # noqa: E402


def _write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _side(path: Path, points: list[tuple], raw: bool = True, ci_valid: bool = True) -> tidy.Table:
    """points: (ranks, metric, unit, higher_is_better, [repeat medians]); one run per repeat,
    41 samples per repeat spread ±2% (±0.02 absolute around 0) around the planted median."""
    w = synth.Writer()
    for ranks, metric, unit, hib, medians in points:
        for med in medians:
            run_id = w.run("async", "MPICH", "MPICH Version: 5.0.2", ranks, 1)
            spread = max(abs(med) * 0.02, 0.02)
            w.result(run_id, "async", {"size_bytes": 65536, "op": "pt2pt", "progress": "none", "threads": 1},
                     {metric: (med + np.linspace(-spread, spread, 41), unit, hib)}, raw=raw)
            w.lines[-1]["metrics"][metric]["ci_valid"] = ci_valid
    return tidy.read([_write(path, w.lines)], samples=True)


def test_different_rank_counts_are_not_pooled(tmp_path):
    a = _side(tmp_path / "a.jsonl", [(2, "t_us", "us", False, [10.0]), (4, "t_us", "us", False, [20.0])])
    b = _side(tmp_path / "b.jsonl", [(2, "t_us", "us", False, [10.0]), (4, "t_us", "us", False, [20.0])])
    c = compare.compare(a, b)
    assert len(c.rows) == 2 and {r.point.split("ranks=")[1].split()[0] for r in c.rows} == {"2", "4"}
    assert all(math.isclose(r.change, 1.0) for r in c.rows)
    only = compare.compare(a, _side(tmp_path / "c.jsonl", [(2, "t_us", "us", False, [10.0])]))
    assert len(only.rows) == 1 and len(only.only_a) == 1 and "ranks=4" in only.only_a[0]


@pytest.mark.parametrize("raw", [True, False], ids=["samples", "summaries"])
def test_launch_to_launch_drift_is_not_significant(tmp_path, raw):
    # Repeat medians A 1.0, 1.2 and B 1.1, 1.3: within-launch noise is tiny, but launches
    # drift by 20%, so B/A = 1.09 is no finding; the test is on the repeats.
    a = _side(tmp_path / "a.jsonl", [(2, "t_us", "us", False, [1.0, 1.2])], raw=raw)
    b = _side(tmp_path / "b.jsonl", [(2, "t_us", "us", False, [1.1, 1.3])], raw=raw)
    (row,) = compare.compare(a, b).rows
    assert row.basis == "repeats" and row.scale == "ratio"
    assert row.ci_lo < 1.0 < row.ci_hi and row.p_holm > 0.05 and not row.significant
    # A real shift well beyond the drift is found (three repeats a side: with two, a t-test on
    # the repeats has one or two degrees of freedom and finds little).
    a3 = _side(tmp_path / "a3.jsonl", [(2, "t_us", "us", False, [1.0, 1.1, 1.2])], raw=raw)
    far = _side(tmp_path / "far.jsonl", [(2, "t_us", "us", False, [3.0, 3.1, 3.2])], raw=raw)
    (row,) = compare.compare(a3, far).rows
    assert row.significant and row.verdict == "worse" and row.ci_lo > 1.0


def test_one_repeat_per_side_tests_iterations_and_says_so(tmp_path):
    a = _side(tmp_path / "a.jsonl", [(2, "t_us", "us", False, [1.0])])
    b = _side(tmp_path / "b.jsonl", [(2, "t_us", "us", False, [1.3])])
    c = compare.compare(a, b)
    (row,) = c.rows
    assert row.basis == "iterations" and row.significant
    assert "iterations" in compare.render(c)


def test_signed_metrics_compare_by_difference(tmp_path):
    # efficiency -10% -> -30%: worse (a ratio of 3 would read "better"); early bird 0 -> 0.4:
    # better (a ratio from 0 is undefined).
    a = _side(tmp_path / "a.jsonl", [(2, "efficiency_pct", "%", True, [-10.0]),
                                     (4, "early_bird", "ratio", True, [0.0])])
    b = _side(tmp_path / "b.jsonl", [(2, "efficiency_pct", "%", True, [-30.0]),
                                     (4, "early_bird", "ratio", True, [0.4])])
    rows = {r.metric: r for r in compare.compare(a, b).rows}
    eff, early = rows["efficiency_pct"], rows["early_bird"]
    assert eff.scale == "difference" and eff.change == pytest.approx(-20.0)
    assert eff.significant and eff.verdict == "worse" and eff.ci_hi < 0
    assert early.scale == "difference" and early.change == pytest.approx(0.4)
    assert early.significant and early.verdict == "better" and early.ci_lo > 0
    text = compare.render(compare.compare(a, b))
    assert "B-A -20" in text and "B-A +0.4" in text


def test_invalid_cis_are_not_used_for_tests(tmp_path):
    a = _side(tmp_path / "a.jsonl", [(2, "t_us", "us", False, [1.0])], raw=False, ci_valid=False)
    b = _side(tmp_path / "b.jsonl", [(2, "t_us", "us", False, [1.3])], raw=False, ci_valid=False)
    (row,) = compare.compare(a, b).rows
    assert math.isnan(row.ci_lo) and math.isnan(row.p) and not row.significant


def test_verdict_never_contradicts_the_ci(tmp_path):
    a = tidy.read([DATA / "compare_a.jsonl"], samples=True)
    b = tidy.read([DATA / "compare_b.jsonl"], samples=True)
    for row in compare.compare(a, b).rows:
        if row.significant:
            assert not (row.ci_lo <= row.no_change <= row.ci_hi)


def test_one_setting_per_side_matches_across_settings(tmp_path):
    # A: the default threshold, B: 16K (a sweep's `settings`): the same point on each side is
    # matched and compared. With both settings on one side, points match only within a setting.
    sys.path.insert(0, str(DATA))
    import make_synthetic as synth

    def write(name, runs):
        w = synth.Writer()
        for k, (setting, median) in enumerate(runs):
            tag = f"{name}-{k}"
            run_id = w.run("async", "MPICH", "MPICH Version: 5.0.2", 2, 1, tag=tag, thread_level="MULTIPLE")
            samples = median + np.linspace(-1, 1, 21)
            w.result(run_id, "async", {"size_bytes": 65536, "op": "pt2pt", "threads": 1},
                     {"efficiency_pct": (samples, "%", True)})
            w.lines.append({"type": "launch", "tag": tag, "status": "done", "rc": 0,
                            "point": {"bench": "async", "mpi": "mpich", "settings": setting}})
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in w.lines))
        return tidy.read([path], samples=True)

    c = compare.compare(write("a", [("default", 40.0)]), write("b", [("16K", 80.0)]))
    assert len(c.rows) == 1 and c.rows[0].ratio == pytest.approx(2.0) and not c.only_a and not c.only_b
    mixed = compare.compare(write("c", [("default", 40.0), ("16K", 80.0)]),
                            write("d", [("default", 40.0), ("16K", 40.0)]))
    ratios = sorted(round(r.ratio, 3) for r in mixed.rows)
    assert ratios == [0.5, 1.0]
