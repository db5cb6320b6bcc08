"""Reading results: a point's identity, loading several files, malformed records, a point's value
over its launches (the tidy table: hmb.data.tidy).

Records are written with tests/data/make_synthetic.py's Writer, with medians planted.
"""
from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from hmb.data import results, tidy

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(DATA))
import make_synthetic as synth  # noqa: E402


def write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def records(t: tidy.Table) -> list:
    """The ok result records of a Table, as results.Result."""
    return [r for r, _ in t.records(t.df)]


def over(t: tidy.Table, rows=None, metric: str = "efficiency_pct") -> tidy.Launches:
    rows = t.df if rows is None else rows
    return tidy.over_launches(rows[rows["metric"] == metric])


def async_run(w, ranks: int, median: float, options: dict | None = None, level="MULTIPLE", tag=None):
    run_id = w.run("async", "MPICH", "MPICH Version: 5.0.2", ranks, 1, tag=tag, thread_level=level)
    w.lines[-1]["options"].update({"sizes": "64K", "op": "allreduce", "progress": "none", "iters": "5",
                                   "budget": "0.2s", "seed": "1", "json": "x.jsonl", **(options or {})})
    samples = median + np.linspace(-1, 1, 21)
    w.result(run_id, "async", {"size_bytes": 65536, "op": "allreduce", "progress": "none", "threads": 1},
             {"efficiency_pct": (samples, "%", True)})
    return run_id


def test_identity_has_layout_and_run_options_but_not_run_control(tmp_path, built_bench):
    w = synth.Writer()
    async_run(w, 2, 80.0, {"compute": "1ms", "cache": "cold", "llc-size": "32M", "noise-thread": "fixed"})
    t = tidy.read([write(tmp_path / "a.jsonl", w.lines)])
    r = records(t)[0]
    ident = tidy.identity(r)
    # keys are the tidy table's column names (option dashes read as underscores), values as recorded
    assert ident["ranks"] == 2 and ident["thread_level"] == "MULTIPLE" and ident["threads"] == 1
    assert ident["compute"] == "1ms" and ident["cache"] == "cold" and ident["noise_thread"] == "fixed"
    for control in ("iters", "budget", "seed", "json", "llc_size", "llc-size"):
        assert control not in ident
    # expanded into params: not repeated as options
    assert "sizes" not in ident and ident["op"] == "allreduce" and ident["size_bytes"] == 65536
    # the same identity is the tidy table's point: its columns, and what Table.keys compares
    import hmb
    df = hmb.load(tmp_path / "a.jsonl")
    assert set(ident) - {"ranks", "threads"} <= set(tidy.point_columns(df))
    assert dict(t.keys(t.df)[0][1])["ranks"] == "2"


def test_different_ranks_options_and_thread_levels_are_different_points(tmp_path, built_bench):
    w = synth.Writer()
    async_run(w, 2, 80.0)
    async_run(w, 4, 20.0)
    async_run(w, 2, 50.0, {"compute": "10ms"})
    async_run(w, 2, 60.0, level="SINGLE")
    async_run(w, 2, 81.0, {"iters": "50", "seed": "7"})     # run control only: a repeat of the first
    t = tidy.read([write(tmp_path / "a.jsonl", w.lines)])
    keys = t.keys(t.df)
    assert len(set(keys)) == 4
    c = over(t, t.df[[k == keys[0] for k in keys]])
    assert c.launches == 2 and c.median == pytest.approx(80.5)


def test_combined_band_shows_the_spread_of_repeats(tmp_path):
    # Two repeats with medians 80 and 20 (each CI about ±1): the band must cover 20..80,
    # not the median of the repeats' CI bounds (about 49..51).
    w = synth.Writer()
    async_run(w, 2, 80.0)
    async_run(w, 2, 20.0)
    t = tidy.read([write(tmp_path / "a.jsonl", w.lines)])
    c = over(t)
    assert c.median == pytest.approx(50.0)
    assert c.lo <= 20.0 and c.hi >= 80.0
    # One repeat: its own CI.
    one = over(t, t.df.iloc[:1])
    assert one.lo < 80.0 < one.hi and one.hi - one.lo < 3


def test_invalid_ci_is_no_band(tmp_path):
    w = synth.Writer()
    async_run(w, 2, 80.0)
    w.lines[-1]["metrics"]["efficiency_pct"]["ci_valid"] = False
    c = over(tidy.read([write(tmp_path / "a.jsonl", w.lines)]))
    assert c.median == pytest.approx(80.0) and math.isnan(c.lo) and math.isnan(c.hi)


def _tagged_sweep(path: Path, median: float) -> Path:
    w = synth.Writer()
    async_run(w, 2, median, tag="async-mpich-abc-r0")
    w.lines.append({"type": "launch", "tag": "async-mpich-abc-r0", "status": "done", "rc": 0})
    return write(path, w.lines)


def test_two_sweeps_of_one_config_in_two_files_are_two_data_sets(tmp_path):
    a = _tagged_sweep(tmp_path / "day1.jsonl", 80.0)
    b = _tagged_sweep(tmp_path / "day2.jsonl", 70.0)       # same tags, same run ids
    t = tidy.read([a, b])
    assert t.results == 2 and len(t.launches) == 2 and len(t.runs) == 2
    assert sorted(t.df["median"]) == [70.0, 80.0]


def test_a_file_named_twice_is_read_once(tmp_path):
    a = _tagged_sweep(tmp_path / "day1.jsonl", 80.0)
    assert tidy.read([a, a]).results == 1
    assert tidy.read([tmp_path, a]).results == 1
    link = tmp_path / "sub"
    link.mkdir()
    shutil.copy(a, link / "copy.jsonl")                 # a copy is another data set
    assert tidy.read([a, link / "copy.jsonl"]).results == 2


def test_redone_launch_within_a_file_counts_once(tmp_path):
    w = synth.Writer()
    async_run(w, 2, 10.0, tag="t-r0")                  # interrupted, then redone by --resume
    async_run(w, 2, 80.0, tag="t-r0")
    t = tidy.read([write(tmp_path / "a.jsonl", w.lines)])
    assert list(t.df["median"]) == [80.0]


@pytest.mark.parametrize("record, what", [
    ({"type": "result", "bench": "part", "params": {"size_bytes": 8}, "metrics": {"overhead": 5}},
     "metric 'overhead' must be an object"),
    ({"type": "result", "bench": "part", "params": [1, 2], "metrics": {}}, "'params' must be an object"),
    ({"type": "result", "bench": "part", "params": {"size_bytes": "8K"}, "metrics": {"overhead": {"median": 1}}},
     "size_bytes must be an integer"),
    ({"type": "result", "bench": "part", "params": {}, "metrics": {"overhead": {"median": "1"}}},
     "overhead.median must be a number"),
    ({"type": "result", "bench": "part", "params": {}, "samples": {"overhead": 3}}, "samples.overhead"),
    ({"type": "run", "bench": "part", "options": ["a"]}, "'options' must be an object"),
])
@pytest.mark.planted_json("bad.jsonl")
def test_malformed_records_name_file_and_line(tmp_path, record, what):
    path = write(tmp_path / "bad.jsonl", [{"type": "sweep"}, record])
    with pytest.raises(results.ResultsError) as e:
        tidy.read([path])
    assert f"{path}:2: " in str(e.value) and what in str(e.value)


def _with_settings(w, median: float, setting: str, tag: str):
    """A run launched by a sweep with this `settings` entry (its launch record names it)."""
    async_run(w, 2, median, tag=tag)
    w.lines.append({"type": "launch", "tag": tag, "status": "done", "rc": 0,
                    "point": {"bench": "async", "mpi": "mpich", "settings": setting}})


def test_library_settings_are_part_of_a_points_identity(tmp_path):
    # An eager threshold of 16K measures something else than the default: never repeats of one
    # point. "default" (or no sweep at all) sets no variable, so those two are one point.
    w = synth.Writer()
    _with_settings(w, 80.0, "default", "a-r0")
    _with_settings(w, 40.0, "16K", "b-r0")
    _with_settings(w, 42.0, "16K", "b-r1")
    async_run(w, 2, 78.0)                                   # outside a sweep
    t = tidy.read([write(tmp_path / "a.jsonl", w.lines)])
    by_median = {r.metric("efficiency_pct")["median"]: r for r in records(t)}
    assert [by_median[m].settings for m in (80.0, 40.0, 78.0)] == ["default", "16K", "default"]
    assert "settings" not in tidy.identity(by_median[80.0])
    assert tidy.identity(by_median[40.0])["settings"] == "16K"
    keys = t.keys(t.df)
    combined = sorted((over(t, t.df[[k == key for k in keys]]).median, keys.count(key)) for key in set(keys))
    assert combined == [(pytest.approx(41.0), 2), (pytest.approx(79.0), 2)]
    assert len(set(t.keys(t.df, with_settings=False))) == 1


def test_figure_lines_are_split_and_labelled_by_settings(tmp_path):
    """The figure engine never merges two points of one line at one x: a 16K threshold and the
    default split into two lines, each named by its setting."""
    import hmb
    from hmb.present import figures
    w = synth.Writer()
    _with_settings(w, 80.0, "default", "a-r0")
    _with_settings(w, 40.0, "16K", "b-r0")
    df = hmb.load(write(tmp_path / "a.jsonl", w.lines))
    plan = figures.plan({"id": "e", "title": "E", "bench": "async", "x": "size_bytes", "y": "efficiency_pct",
                         "hue": "op", "hue_format": "{}"}, df, {})
    got = sorted((ln.name, ln.points[0].median) for ln in plan.lines())
    assert got == [("allreduce, settings=16K", 40.0), ("allreduce, settings=default", 80.0)]
