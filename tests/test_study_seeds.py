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


def three(rows) -> pd.DataFrame:
    """Planted rows of launch "a" in three launches alike (a verdict rests on three)."""
    return pd.DataFrame([{**r, "run_id": rid} for rid in ("a", "b", "c") for r in rows])


def test_a_metric_the_library_does_not_record_reads_nothing():
    """match on the MPICH wheels: posted_q has no samples (median null). The claim is not
    comparable with the reason, never "differs" on a reading of nan."""
    df = pd.DataFrame([row("posted_q", math.nan, variant=v, pattern="2d5") for v in ("lowcost", "real")])
    c = {"figure": "Abstract", "quote": "q", "bench": "match", "metric": "posted_q", "where": {"variant": "lowcost"},
         "over": {"variant": "real"}, "pair_on": ["threads"], "value": 1.0, "tolerance": 0.25,
         "null_agrees": "equality", "tolerance_from": "planted"}
    v = claims.judge(c, df)
    assert v.verdict == claims.NOT_COMPARABLE and "median NaN" in v.reason, v


def test_a_point_whose_own_threads_oversubscribe_is_no_reading(tmp_path):
    """match's low-cost emulator runs neighbours x T threads on one rank: the run header's
    oversubscribed counts --threads only, the result's oversubscribed_threads the emulator's.
    results.py reads either, so tidy marks the point and no claim reads it."""
    import json

    from hmb.data import tidy
    run = {"type": "run", "schema_version": 1, "bench": "match", "oversubscribed": False, "ranks": 2, "threads": 1}
    base = {"type": "result", "bench": "match", "status": "ok", "size_bytes": 1024, "params": {"size_bytes": 1024},
            "metrics": {"wait_us_per_msg": {"median": 3.0, "count": 5}}}
    recs = [run, {**base, "params": {"size_bytes": 1024, "pattern": "2d5"}, "extra": {"oversubscribed_threads": 0}},
            {**base, "params": {"size_bytes": 1024, "pattern": "3d27"}, "extra": {"oversubscribed_threads": 1}}]
    f = tmp_path / "m.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    t = tidy.read([f], warn=False)
    assert [r.oversubscribed for r, _ in t.records(t.df)] == [False, True]
    df = t.df
    assert dict(zip(df["pattern"], df["oversubscribed"])) == {"2d5": False, "3d27": True}


def test_a_cell_keeps_the_reference_its_over_fixes():
    """seed003's table cells (mode = comm, tag, stream) against over mode = everywhere: each cell
    reads its mode over everywhere (2000/1000 = 2, 1000/1000 = 1), not its mode over itself."""
    df = three([row("msg_rate", v, bench="mt", mode=m, ranks_x_threads=4)
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


# ---------------------------------------------------------------- shipped claims on planted records

def _records(tmp_path, launches):
    """launches: (run_id, bench, ranks, threads, [(params, {metric: value})]) -> a results file
    in hmb-bench's format, read back through hmb.load (the tidy table the report uses); each
    launch three times alike, as a sweep's repeats (tags ...-r0, -r1, -r2: a verdict rests on three
    launches, paired by repeat index across the claim's selections)."""
    from _planted import metric, result, run, write

    from hmb.data import tidy
    recs = []
    for k in range(3):
        for rid, bench, ranks, threads, points in launches:
            r = run(f"{rid}{k}", bench, ranks=ranks, threads=threads)
            r["hosts"] = ["node1", "node2"]          # the paper's network: a verdict, not 'one node'
            r["tag"] = f"{rid}-r{k}"
            recs.append(r)
            for params, values in points:
                recs.append(result(f"{rid}{k}", bench, params, {k2: metric(v) for k2, v in values.items()}))
    return tidy.load(write(tmp_path / "r.jsonl", recs))


def _claim(study: str, cid: str) -> dict:
    (c,) = [c for c in hstudy.load(study).claims if c.get("id") == cid]
    return c


def test_seed003_rate_claims_pair_threads_with_processes_at_equal_cores(tmp_path):
    """mt's everywhere launches 2T single-threaded ranks: at 4 cores, shared at 2 ranks x 2
    threads (1e6 msg/s) against everywhere at 4 ranks x 1 (4e6): 0.25 <= 0.5, 'dismal' agrees; at
    8 cores 3e6 / 4e6 = 0.75 differs. The 2-core points (T = 1, where the two are the same
    program) are no reading of it."""
    rate = {"test": "rate", "size_bytes": 8}
    df = _records(tmp_path, [
        ("a", "mt", 2, 1, [({**rate, "mode": "shared", "ranks_x_threads": 2}, {"msg_rate": 2e6})]),
        ("b", "mt", 2, 2, [({**rate, "mode": "shared", "ranks_x_threads": 4}, {"msg_rate": 1e6})]),
        ("c", "mt", 4, 1, [({**rate, "mode": "everywhere", "ranks_x_threads": 4}, {"msg_rate": 4e6})]),
        ("d", "mt", 2, 4, [({**rate, "mode": "shared", "ranks_x_threads": 8}, {"msg_rate": 3e6})]),
        ("e", "mt", 8, 1, [({**rate, "mode": "everywhere", "ranks_x_threads": 8}, {"msg_rate": 4e6})]),
        ("f", "mt", 2, 1, [({**rate, "mode": "everywhere", "ranks_x_threads": 2}, {"msg_rate": 2e6})]),
    ])
    got = claims.judge_all(_claim("seed003-threads", "dismal"), df)
    assert [(v.claim["label"], v.value, v.verdict) for v in got] == [
        ("ranks_x_threads = 4", 0.25, claims.AGREES), ("ranks_x_threads = 8", 0.75, claims.DIFFERS)]


def test_seed003_category1_reads_the_halo_at_the_talks_scale(tmp_path):
    """halo3d at 2 ranks x 16 threads (32 cores) against --everywhere-ranks 2 on 32 ranks: comm
    86 us, tag 90 us, stream 82 us against everywhere 100 us -> the median 0.86 is the talk's 16 %;
    against shared 120 us the median 86/120 = 0.717 is its 38 % (0.725 +- 0.1). Each face size
    apart. At 2 x 8 threads the run is below the talk's scale: read, not judged."""
    def pts(size, **t):
        return [({"size_bytes": size, "layout": k, "ranks_x_threads": 32}, {"t_comm_threadcomm_us": v})
                for k, v in t.items()]
    df = _records(tmp_path, [
        ("a", "halo3d", 2, 16, pts(2048, comm=86.0, tag=90.0, stream=82.0, shared=120.0)),
        ("b", "halo3d", 32, 1, pts(2048, everywhere=100.0)),
    ])
    (v,) = claims.judge_all(_claim("seed003-threads", "cat1-vs-everywhere"), df)
    assert v.verdict == claims.AGREES and math.isclose(v.value, 0.86) and v.claim["label"] == "size_bytes = 2048"
    (v,) = claims.judge_all(_claim("seed003-threads", "cat1-vs-shared"), df)
    assert v.verdict == claims.AGREES and math.isclose(v.value, 86 / 120)
    cells = claims.judge_all(_claim("seed003-threads", "cat1-summary"), df)
    assert [(c.value, c.verdict) for c in cells] == [(0.86, claims.AGREES), (0.9, claims.AGREES),
                                                     (0.82, claims.AGREES)]
    small = _records(tmp_path, [("a", "halo3d", 2, 8, [({"size_bytes": 2048, "layout": "comm",
                                                        "ranks_x_threads": 16}, {"t_comm_threadcomm_us": 86.0})]),
                                ("b", "halo3d", 16, 1, [({"size_bytes": 2048, "layout": "everywhere",
                                                         "ranks_x_threads": 16}, {"t_comm_threadcomm_us": 100.0})])])
    (v,) = claims.judge_all(_claim("seed003-threads", "cat1-vs-everywhere"), small)
    assert v.verdict == claims.NOT_COMPARABLE and "the seed's scale is threads = 16" in v.reason


def test_seed003_contention_reads_two_senders_and_more(tmp_path):
    """mt contention: T-1 senders into one receiving thread. At T = 2 one sender contends with
    no one (tags 2e5 against a communicator per sender's 1e5 would read 2.0): not read. At T = 3
    tags 1.2e5 / 1e5 = 1.2 >= 1.1 agrees, at T = 4 1.05e5 / 1e5 = 1.05 < 1.1 differs; MPIX
    streams 1.25e5 and 2e5 over 1e5: 1.25 and 2.0 agree. Against the streams (summary row), at
    T = 3 a communicator per sender reads 1e5 / 1.25e5 = 0.8 <= 0.9 (a fraction: agrees) and tags
    1.2e5 / 1.25e5 = 0.96 >= 0.8 (nearly as good: agrees)."""
    def pts(**rate):
        return [({"test": "contention", "size_bytes": 8, "mode": m}, {"msg_rate": v}) for m, v in rate.items()]
    df = _records(tmp_path, [("a", "mt", 2, 2, pts(comm=1e5, tag=2e5, stream=2e5)),
                             ("b", "mt", 2, 3, pts(comm=1e5, tag=1.2e5, stream=1.25e5)),
                             ("c", "mt", 2, 4, pts(comm=1e5, tag=1.05e5, stream=2e5))])
    got = [(v.claim["label"], round(v.value, 6), v.verdict)
           for v in claims.judge_all(_claim("seed003-threads", "cat3-hints"), df)]
    assert got == [("MPI-3.1 with hints (tags): no contention; threads = 3", 1.2, claims.AGREES),
                   ("MPI-3.1 with hints (tags): no contention; threads = 4", 1.05, claims.DIFFERS),
                   ("endpoints (MPIX streams): no contention; threads = 3", 1.25, claims.AGREES),
                   ("endpoints (MPIX streams): no contention; threads = 4", 2.0, claims.AGREES)]
    got = [(round(v.value, 6), v.verdict) for v in claims.judge_all(_claim("seed003-threads", "cat3-summary"), df)
           if v.claim["label"].endswith("threads = 3")]
    assert got == [(0.8, claims.AGREES), (0.96, claims.AGREES)]
    assert claims.not_here(claims.expand(_claim("seed003-threads", "cat3-hints"))[0], cores=2) == "needs 6 cores"


def test_seed003_rma_reads_threads_against_processes_from_two_threads(tmp_path):
    """mt get with the target's progress thread: at 1 thread (2 cores) a window per thread and
    MPI everywhere are one program (1e4 against 5e4 would read 0.2): not read. At 2 ranks x 2
    threads 4.6e4 against 4 single-threaded ranks' 5e4: 0.92 >= 0.9 agrees."""
    get = {"test": "get", "size_bytes": 8, "target_progress": "thread"}
    df = _records(tmp_path, [
        ("a", "mt", 2, 1, [({**get, "mode": "comm", "ranks_x_threads": 2}, {"msg_rate": 1e4})]),
        ("b", "mt", 2, 1, [({**get, "mode": "everywhere", "ranks_x_threads": 2}, {"msg_rate": 5e4})]),
        ("c", "mt", 2, 2, [({**get, "mode": "comm", "ranks_x_threads": 4}, {"msg_rate": 4.6e4})]),
        ("d", "mt", 4, 1, [({**get, "mode": "everywhere", "ranks_x_threads": 4}, {"msg_rate": 5e4})]),
    ])
    got = [(v.claim["label"], round(v.value, 6), v.verdict)
           for v in claims.judge_all(_claim("seed003-threads", "cat2-rma"), df)]
    assert got == [("ranks_x_threads = 4", 0.92, claims.AGREES)]


def test_seed001_reads_17k_against_1m_per_size_and_unclamped(tmp_path):
    """stencil3d at 17 KB and 1 MB, 64 KB: T_comm 80 / 100 = 0.8 (in [0.5, 0.9]: agrees); the
    overlap at 17 KB -30 % (a negative overlap, which the clamp shows as 0) is <= 10: agrees, and
    at 1 MB 45 %: +75 points >= 10 agrees; the wait holds 72 of T_comm's 80 us at 17 KB: 0.9 >= 0.8."""
    launches = []
    for rid, setting, m in (("a", "17K", {"t_comm_us": 80.0, "overlap_unclamped_pct": -30.0, "t_wait_us": 72.0}),
                            ("b", "1M", {"t_comm_us": 100.0, "overlap_unclamped_pct": 45.0, "t_wait_us": 10.0})):
        launches.append((rid, "stencil3d", 2, 1, [({"size_bytes": 65536}, m)]))
    df = _records(tmp_path, launches)
    df["settings"] = df["run_id"].str[0].map({"a": "17K", "b": "1M"})   # the sweep's launch record names it
    s = "seed001-protocol"
    assert [(v.value, v.verdict) for v in claims.judge_all(_claim(s, "fig1a-comm"), df)] == [(0.8, claims.AGREES)]
    (v,) = claims.judge_all(_claim(s, "fig1b-rendezvous"), df)
    assert (v.value, v.verdict) == (-30.0, claims.AGREES)
    (v,) = claims.judge_all(_claim(s, "fig1b-overlap"), df)
    assert (v.value, v.verdict) == (75.0, claims.AGREES)
    (v,) = claims.judge_all(_claim(s, "sec52-in-wait"), df)
    assert (v.value, v.verdict) == (0.9, claims.AGREES)
