"""hmb.load: results files → tidy DataFrame (one row per point and metric); hmb export --csv."""
import math

import pandas as pd
import pytest

import hmb
from hmb import cli
from _planted import metric, result, run, write


@pytest.fixture
def planted(tmp_path):
    return write(tmp_path / "r.jsonl", [
        run("a", "part", threads=2, noise="uniform:4"),
        result("a", "part", {"size_bytes": 65536, "partitions": 4, "threads": 2},
               {"overhead": metric(1.5, 1.25, 1.75, unit="ratio", count=12),
                "t_part_us": metric(300.0)}),
        result("a", "part", {"size_bytes": 1048576, "partitions": 4, "threads": 2},
               {"overhead": metric(2.0, unit="ratio")}),
        run("b", "p2p", impl="Open MPI", library="Open MPI v5.0.5", oversubscribed=True),
        result("b", "p2p", {"size_bytes": 8, "mode": "latency"}, {"latency_us": metric(0.5)}),
        {"type": "result", "schema": 1, "run_id": "b", "bench": "p2p", "params": {"size_bytes": 16,
         "mode": "bw"}, "status": "unsupported", "reason": "planted"},
    ])


def test_one_row_per_point_and_metric(planted):
    df = hmb.load(planted)
    assert isinstance(df, pd.DataFrame)
    assert len(df) == 4          # 2 + 1 metrics of part, 1 of p2p; the unsupported point has none
    row = df[(df.metric == "overhead") & (df.size_bytes == 65536)].iloc[0]
    assert (row["median"], row.ci_lo, row.ci_hi, row["count"], row.unit) == (1.5, 1.25, 1.75, 12, "ratio")
    assert (row.partitions, row.threads, row.mpi, row.noise, row.run_id) == (4, 2, "MPICH", "uniform:4", "a")
    assert row.library == "MPICH Version: 4.2.0" and row.settings == "default" and not row.oversubscribed
    p2p = df[df.bench == "p2p"].iloc[0]
    assert p2p.mpi == "Open MPI" and p2p.oversubscribed and p2p["mode"] == "latency"
    assert math.isnan(p2p.partitions)   # a parameter another benchmark has: empty here


def test_invalid_ci_reads_as_nan(tmp_path):
    m = metric(3.0)
    m["ci_valid"] = False
    f = write(tmp_path / "r.jsonl", [run("a", "p2p"), result("a", "p2p", {"size_bytes": 8}, {"latency_us": m})])
    row = hmb.load([f]).iloc[0]
    assert row["median"] == 3.0 and math.isnan(row.ci_lo) and math.isnan(row.ci_hi)


def test_export_csv(planted, tmp_path, capsys):
    out = tmp_path / "t.csv"
    assert cli.main(["export", "--csv", str(out), str(planted)]) == 0
    back = pd.read_csv(out)
    assert len(back) == 4 and {"median", "ci_lo", "ci_hi", "count", "unit", "size_bytes"} <= set(back.columns)
    assert back[back.metric == "latency_us"].iloc[0]["median"] == 0.5


def test_export_missing_file_is_one_line(tmp_path, capsys):
    assert cli.main(["export", "--csv", str(tmp_path / "t.csv"), str(tmp_path / "nope.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope.jsonl" in err


def _proto(tmp_path, launches):
    """launches: [(run_id, rss_traffic_kB at 1K)]; each result has two metrics."""
    from _planted import metric, result, run, write
    recs = []
    for rid, rss in launches:
        recs.append(run(rid, "proto"))
        res = result(rid, "proto", {"size_bytes": 1024, "test": "tradeoff"},
                     {"msg_rate": metric(1e6, unit="msg/s", higher=True), "bandwidth_MBps": metric(1000.0, unit="MB/s")},
                     extra={"rss_traffic_kB": rss, "hwm_kB": rss + 50, "cache_flushes": 3, "view": "x",
                            "bad_kB": "n/a"})
        recs.append(res)
    return write(tmp_path / "p.jsonl", recs)


def test_memory_readings_are_columns_not_other_extras(tmp_path):
    df = hmb.load(_proto(tmp_path, [("a", 1000.0)]))
    assert len(df) == 2                      # still one row per metric
    assert (df["rss_traffic_kB"] == 1000.0).all() and (df["hwm_kB"] == 1050.0).all()
    assert "cache_flushes" not in df.columns and "view" not in df.columns and "bad_kB" not in df.columns


def test_reading_as_metric_one_row_per_result_and_launches_still_one_point(tmp_path):
    from hmb.data import tidy
    df = hmb.load(_proto(tmp_path, [("a", 1000.0), ("b", 3000.0)]))
    mem = tidy.readings_as_metric(df, "rss_traffic_kB")
    assert len(mem) == 2 and set(mem["median"]) == {1000.0, 3000.0}
    assert set(mem["metric"]) == {"rss_traffic_kB"} and (mem["unit"] == "kB").all() and mem["ci_lo"].isna().all()
    rows = tidy.select(df, "proto", "rss_traffic_kB", {"size_bytes": 1024})
    assert len(rows) == 2
    meds = tidy.point_medians(rows)        # the two launches are one point despite their readings
    assert len(meds) == 1 and meds.iloc[0] == 2000.0
    assert tidy.point_medians(tidy.select(df, "proto", "msg_rate", None)).size == 1
    assert tidy.readings_as_metric(df, "msg_rate").empty   # a metric is no reading
