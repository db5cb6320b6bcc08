"""The protocol lab's report (reports/proto.py) on synthetic records with planted medians: the
switch table, and the trade-off figure's reading (its declaration in reports/figures.toml drawn by
the figure engine) of each setting against the same MPI's default, computed by hand."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from hmb.data import tidy
from hmb.present import report
from hmb.present.reports import proto

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(DATA))
import make_synthetic as synth  # noqa: E402

# setting -> size -> (msg/s, kB per peer); overlap E (%) from async pt2pt per setting and size
RATE_MEM = {"default": {1024: (1000.0, 100.0), 16384: (400.0, 200.0)},
            "16K": {1024: (500.0, 100.0), 16384: (800.0, 300.0)}}
OVERLAP = {"default": {1024: 50.0, 16384: 10.0}, "16K": {1024: 45.0, 16384: 40.0}}


def around(median: float) -> np.ndarray:
    return median + np.linspace(-0.01, 0.01, 11) * max(abs(median), 1.0)


def launched(w, tag: str, setting: str, bench: str) -> None:
    w.lines.append({"type": "launch", "tag": tag, "status": "done", "rc": 0,
                    "point": {"bench": bench, "mpi": "mpich", "settings": setting}})


def write(tmp_path: Path) -> tidy.Table:
    w = synth.Writer()
    for setting, by_size in RATE_MEM.items():
        tag = f"proto-{setting}"
        run_id = w.run("proto", "MPICH", "MPICH Version: 5.0.2", 2, 1, tag=tag, thread_level="SINGLE")
        w.result(run_id, "proto", {"size_bytes": 262144, "test": "probe", "view": "sender", "threads": 1},
                 {"switches": (around(1.0), "count", None)},
                 extra={"switches": "8112-8120" if setting == "default" else "16304-16312",
                        "switch_agreement": 1.0, "trials_without_verdict": 0, "trials_run": 600})
        for size, (rate, mem) in by_size.items():
            w.result(run_id, "proto", {"size_bytes": size, "test": "tradeoff", "threads": 1},
                     {"msg_rate": (around(rate), "msg/s", True), "per_peer_kB": (around(mem), "kB", False)})
        launched(w, tag, setting, "proto")
        tag = f"async-{setting}"
        run_id = w.run("async", "MPICH", "MPICH Version: 5.0.2", 2, 1, tag=tag)
        for size, e in OVERLAP[setting].items():
            w.result(run_id, "async", {"size_bytes": size, "op": "pt2pt", "progress": "none", "threads": 1},
                     {"efficiency_pct": (around(e), "%", True)})
        launched(w, tag, setting, "async")
    path = tmp_path / "proto.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in w.lines))
    return tidy.read([path])


def test_switch_table_names_each_setting(tmp_path):
    (title, header, rows, _note), = proto.switch_table(write(tmp_path))
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [("MPICH", "16K", "sender", "16304-16312"),
                                                        ("MPICH", "default", "sender", "8112-8120")]


def test_tradeoff_figure_reads_each_setting_against_the_default(tmp_path):
    (fig,) = report.bench_figures(write(tmp_path), tmp_path, "proto")
    assert fig.name == "proto_tradeoff"
    assert (tmp_path / fig.png).is_file() and (tmp_path / fig.svg).is_file()
    # msg/s 500/1000 and 800/400; overlap 45-50 and 40-10 points; memory 100/100 and 300/200
    assert "message rate (times the default) — MPICH setting 16K: 1K ×0.50, 16K ×2.00." in fig.reading
    assert "overlap E (points against the default) — MPICH setting 16K: 1K -5.0, 16K +30.0." in fig.reading
    assert "library memory per peer (times the default) — MPICH setting 16K: 1K ×1.00, 16K ×1.50." in fig.reading
    assert "setting default:" not in fig.reading


def test_no_tradeoff_runs_no_figure(tmp_path):
    rs = write(tmp_path)
    rs.df = rs.df[rs.df["test"] == "probe"]
    assert report.bench_figures(rs, tmp_path, "proto") == []
