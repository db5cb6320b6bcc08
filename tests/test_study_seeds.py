"""Seeds 001, 002 and 003 (issue 27): how their claims read the paper's comparisons, on planted
tidy rows whose readings were worked out by hand. tests/test_claims.py plants agreeing and
differing readings for every declared claim of every study; this file checks what is particular
to these seeds (a library without the metric, threads against processes at equal cores,
low-cost against real at equal threads per stencil, the unclamped overlap)."""
from __future__ import annotations

import math

import pandas as pd

from hmb import study as hstudy
from hmb.study import claims


def row(metric, value, run_id="a", bench="match", **cols):
    r = {"bench": bench, "metric": metric, "median": value, "ci_lo": value, "ci_hi": value,
         "count": 0 if math.isnan(value) else 10, "unit": "", "higher_is_better": None, "mpi": "planted",
         "library": "planted 1.0", "settings": "default", "noise": "none", "ranks": 2, "threads": 1,
         "oversubscribed": False, "spare_core_missing": False, "progress_shares_core": None, "host": "node1",
         "cpus": 64, "run_id": run_id, "tag": "", "source": "planted"}
    r.update(cols)
    return r


def test_a_metric_the_library_does_not_record_reads_nothing():
    """match on the MPICH wheels: posted_q has no samples (median null). The claim is not
    comparable with the reason, never "differs" on a reading of nan."""
    df = pd.DataFrame([row("posted_q", math.nan, variant=v, pattern="2d5") for v in ("lowcost", "real")])
    c = {"figure": "Abstract", "quote": "q", "bench": "match", "metric": "posted_q", "where": {"variant": "lowcost"},
         "over": {"variant": "real"}, "pair_on": ["threads"], "value": 1.0, "tolerance": 0.25,
         "null_agrees": "equality", "tolerance_from": "planted"}
    v = claims.judge(c, df)
    assert v.verdict == claims.NOT_COMPARABLE and "no result for its metric" in v.reason, v


def test_a_point_whose_own_threads_oversubscribe_is_no_reading(tmp_path):
    """match's low-cost emulator runs neighbours x T threads on one rank: the run header's
    oversubscribed counts --threads only, the result's oversubscribed_threads the emulator's.
    results.py reads either, so tidy marks the point and no claim reads it."""
    import json

    from hmb import results as hresults
    from hmb import tidy
    run = {"type": "run", "schema_version": 1, "bench": "match", "oversubscribed": False, "ranks": 2, "threads": 1}
    base = {"type": "result", "bench": "match", "status": "ok", "size_bytes": 1024, "params": {"size_bytes": 1024},
            "metrics": {"wait_us_per_msg": {"median": 3.0, "count": 5}}}
    recs = [run, {**base, "params": {"size_bytes": 1024, "pattern": "2d5"}, "extra": {"oversubscribed_threads": 0}},
            {**base, "params": {"size_bytes": 1024, "pattern": "3d27"}, "extra": {"oversubscribed_threads": 1}}]
    f = tmp_path / "m.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    rs = hresults.load([f], warn=False)
    assert [r.oversubscribed for r in rs.results] == [False, True]
    df = tidy.frame(rs)
    assert dict(zip(df["pattern"], df["oversubscribed"])) == {"2d5": False, "3d27": True}


def test_a_cell_keeps_the_reference_its_over_fixes():
    """seed003's table cells (mode = comm, tag, stream) against over mode = everywhere: each cell
    reads its mode over everywhere (2000/1000 = 2, 1000/1000 = 1), not its mode over itself."""
    df = pd.DataFrame([row("msg_rate", v, bench="mt", mode=m, ranks_x_threads=4)
                       for m, v in (("comm", 2000.0), ("tag", 1000.0), ("everywhere", 1000.0))])
    c = {"figure": "Slide X", "quote": "q", "bench": "mt", "metric": "msg_rate", "over": {"mode": "everywhere"},
         "pair_on": ["ranks_x_threads"], "op": ">=", "value": 1.5, "tolerance_from": "planted",
         "cells": [{"where": {"mode": "comm"}}, {"where": {"mode": "tag"}}]}
    got = claims.judge_all(c, df)
    assert [(v.claim["label"], v.value, v.verdict) for v in got] == [
        ("mode = comm", 2.0, claims.AGREES), ("mode = tag", 1.0, claims.DIFFERS)]
    # per on a column the reference fixes: the same
    p = {k: v for k, v in c.items() if k != "cells"} | {"where": {"mode": ["comm", "tag"]}, "per": "mode"}
    assert [v.value for v in claims.judge_all(p, df)] == [2.0, 1.0]
