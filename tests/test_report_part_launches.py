"""The part report's launch spread (reports/part.py, launch_spread) on planted records, through
the figure engine's lines: a point run in several launches shows every launch's median; a point
run once says it is not a claim."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

import hmb
from hmb.present.reports import part
from hmb.present import figures
from hmb.study import report_figures

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(DATA))
import make_synthetic as synth  # noqa: E402


def around(median: float) -> np.ndarray:
    return median + np.linspace(-0.01, 0.01, 11) * median


def load(tmp_path: Path, launches: dict) -> list:
    """launches: list per launch of {partitions: overhead median} at 1 MB."""
    w = synth.Writer()
    for points in launches:
        run_id = w.run("part", "MPICH", "MPICH Version: 5.0.2", 2, 1)
        for p, overhead in points.items():
            w.result(run_id, "part", {"size_bytes": 1 << 20, "partitions": p, "threads": 1},
                     {"overhead": (around(overhead), "ratio", False)})
    path = tmp_path / "part.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in w.lines))
    plan = figures.plan(report_figures()["part_overhead"], hmb.load(path))
    return plan.lines()


def test_bimodal_launches_are_shown(tmp_path):
    res = load(tmp_path, [{1: 0.74, 2: 1.0}, {1: 1.86}, {1: 0.88}])
    text = part.launch_spread(res)
    # P=1 ran in 3 launches (planted 0.74, 1.86, 0.88); P=2 in one
    assert "1 of 2 points in 2+ launches" in text
    assert "widest at P=1 1M" in text and "(3 launches)" in text
    for v in ("0.74", "1.86", "0.88"):
        assert v in text
    assert "1 in 1 launch: not a claim" in text


def test_one_launch_is_not_a_claim(tmp_path):
    res = load(tmp_path, [{1: 1.86, 4: 2.0}])
    text = part.launch_spread(res)
    assert "1 launch: not a claim" in text and "widest" not in text
