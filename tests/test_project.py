"""`hmb project` (seed 000 §4.8): f from mpiP reports written by hand to mpiP's documented text
format (tests/data/mpip, expected f worked out in their comments), s given or read from a
results file, projected speed-up through metrics.c's formula, checked against hand values."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hmb import cli
from hmb.present import project

MPIP = Path(__file__).parent / "data" / "mpip"


def hmb(capsys, *argv):
    rc = cli.main(["project", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def rows(stdout):
    """source -> (processes, f, s, projected) from the printed table."""
    out = {}
    for line in stdout.splitlines()[2:]:
        if line.startswith("hmb: wrote"):
            continue
        src, procs, f, s, proj = line.split()
        out[src] = (procs, float(f), float(s), float(proj))
    return out


def test_fraction_from_aggregate_time():
    p = project.parse_mpip(MPIP / "snap-2.mpiP")
    # Waitall 2000 + Isend 600 + Irecv 400 ms over 20 s of application time; Allreduce excluded.
    assert (p.processes, p.p2p_time_s, p.app_time_s) == (2, pytest.approx(3.0), 20.0)
    assert p.fraction == pytest.approx(0.15)
    assert "Aggregate Time" in p.from_section


def test_complete_callsite_statistics_win_over_the_top_twenty():
    p = project.parse_mpip(MPIP / "snap-4.mpiP")
    # '*' rows Count x Mean: Send 4000 x 1 + Recv 4000 x 2 = 12 s of 40 s (the aggregate section
    # would give 10 s, 0.25).
    assert (p.processes, p.fraction) == (4, pytest.approx(0.3))
    assert "Callsite Time statistics" in p.from_section


def test_table_from_reports_and_given_speedup(capsys, tmp_path):
    fig = tmp_path / "fig13.png"
    rc, out, err = hmb(capsys, "--mpip", str(MPIP / "snap-4.mpiP"), str(MPIP / "snap-2.mpiP"),
                       "--speedup", "4", "--figure", str(fig))
    assert rc == 0, err
    got = rows(out)
    # 1 / (0.85 + 0.15/4) = 1 / 0.8875 = 1.127; 1 / (0.7 + 0.3/4) = 1 / 0.775 = 1.290.
    assert got == {"snap-2.mpiP": ("2", 0.15, 4.0, 1.127), "snap-4.mpiP": ("4", 0.3, 4.0, 1.29)}
    assert list(got) == ["snap-2.mpiP", "snap-4.mpiP"]   # by process count
    assert fig.stat().st_size > 0


def test_given_fraction(capsys):
    rc, out, _ = hmb(capsys, "--fraction", "0.5", "--speedup", "4")
    # 1 / (0.5 + 0.5/4) = 1 / 0.625 = 1.6
    assert rc == 0 and rows(out)["--fraction"] == ("-", 0.5, 4.0, 1.6)


def _results(path: Path, points):
    """A results file: one run per (mpi, size, ratio) with a sweep3d result of ratio_partitioned."""
    with open(path, "w") as f:
        for i, (impl, size, ratio) in enumerate(points):
            f.write(json.dumps({"type": "run", "run_id": f"r{i}", "bench": "sweep3d", "ranks": 2,
                                "mpi": {"impl": impl}, "options": {}}) + "\n")
            f.write(json.dumps({"type": "result", "run_id": f"r{i}", "bench": "sweep3d", "status": "ok",
                                "params": {"size_bytes": size},
                                "metrics": {"ratio_partitioned": {"median": ratio, "ci_lo": ratio,
                                                                  "ci_hi": ratio}}}) + "\n")


def test_speedup_from_a_results_file(capsys, tmp_path):
    res = tmp_path / "r.jsonl"
    _results(res, [("MPICH", 65536, 2.0), ("MPICH", 1048576, 8.0)])
    rc, out, err = hmb(capsys, "--fraction", "0.5", "--results", str(res), "--bench", "sweep3d",
                       "--size", "64K", "--mode", "partitioned")
    # s = 2 at 64K: 1 / (0.5 + 0.25) = 1.333
    assert rc == 0, err
    assert rows(out)["--fraction"] == ("-", 0.5, 2.0, 1.333)


@pytest.mark.parametrize("argv,needle", [
    (["--fraction", "1.5", "--speedup", "2"], "--fraction: 1.5 is not a share"),
    (["--fraction", "0.5", "--speedup", "0"], "--speedup: 0 must be > 0"),
    (["--speedup", "2"], "exactly one of --fraction F and --mpip"),
    (["--fraction", "0.5"], "exactly one of --speedup S and --results"),
    (["--fraction", "0.5", "--mpip", "x.mpiP", "--speedup", "2"], "exactly one of --fraction F and --mpip"),
    (["--mpip", "/nonexistent.mpiP", "--speedup", "2"], "/nonexistent.mpiP"),
    (["--fraction", "0.5", "--results", "RES", "--size", "64Q"], "--size:"),
    (["--fraction", "0.5", "--results", "RES"], "--results needs --size"),
    (["--fraction", "0.5", "--results", "RES", "--size", "4K"], "no sweep3d result at 4096 bytes"),
    (["--fraction", "0.5", "--results", "TWO", "--size", "64K"], "2 different sweep3d points"),
    (["--mpip", "BROKEN", "--speedup", "2"], "does not match the header"),
    (["--mpip", "NOTMPIP", "--speedup", "2"], "no '@--- MPI Time (seconds)' section"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, argv, needle):
    _results(tmp_path / "one.jsonl", [("MPICH", 65536, 2.0)])
    _results(tmp_path / "two.jsonl", [("MPICH", 65536, 2.0), ("Open MPI", 65536, 3.0)])
    text = (MPIP / "snap-2.mpiP").read_text()
    (tmp_path / "broken.mpiP").write_text(text.replace("   0         10        1.5    15.00", "   0   10"))
    (tmp_path / "notmpip.txt").write_text("hello\n")
    subst = {"RES": tmp_path / "one.jsonl", "TWO": tmp_path / "two.jsonl", "BROKEN": tmp_path / "broken.mpiP",
             "NOTMPIP": tmp_path / "notmpip.txt"}
    rc, out, err = hmb(capsys, *[str(subst.get(a, a)) for a in argv])
    assert rc == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("hmb: ") and needle in lines[0], err


# ---- the bundled report and the study's projection figure (seed 000 Fig. 13) ----------------

BUNDLED = project.DATA_DIR / "mpip" / "snap-c.2.mpiP"


def test_bundled_snap_report_parses_to_its_hand_value():
    p = project.parse_mpip(BUNDLED)
    # Callsite '*' rows: Recv 2883 x 0.391 ms + Send 2883 x 0.438 ms = 2390.0 ms over 4.81 s
    assert p.processes == 2 and p.app_time_s == 4.81
    assert p.p2p_time_s == pytest.approx(2.390007)
    assert p.fraction == pytest.approx(2.390007 / 4.81)
    assert "Callsite" in p.from_section
    readme = (project.DATA_DIR / "mpip" / "README.md").read_text()
    assert "SNAP-C" in readme and "2 MPI ranks" in readme and "not SNAP on" in readme


def _sweep3d_records(tmp_path, values, oversubscribed=False):
    from _planted import metric, result, run, write
    recs = []
    for i, v in enumerate(values):
        r = run(f"s{i}", "sweep3d", threads=16, oversubscribed=oversubscribed)
        r["options"].update({"compute": "10ms", "face-partitions": "16"})
        recs += [r, result(f"s{i}", "sweep3d", {"size_bytes": 65536},
                           {"speedup_partitioned_vs_serial": metric(v, unit="ratio", higher=True)})]
    import hmb
    return hmb.load(write(tmp_path / "sw.jsonl", recs))


FIG13 = {"id": "fig13", "number": "Fig. 13", "title": "projection", "bench": "sweep3d", "x": "processes",
         "y": "speedup_partitioned_vs_serial", "where": {"face_partitions": 16, "compute": "10ms"},
         "mpip": ["mpip/snap-c.2.mpiP"], "seed_speedup": 15.1}


def test_study_figure_projects_the_seed_s_and_the_study_s(tmp_path):
    df = _sweep3d_records(tmp_path, [3.0, 5.0])           # two launches: median s = 4
    path, note = project.study_figure(FIG13, df, tmp_path / "figs")
    assert path.is_file() and path.stat().st_size > 1000
    f = 2.390007 / 4.81
    seed = 1 / ((1 - f) + f / 15.1)                       # 1.866
    ours = 1 / ((1 - f) + f / 4.0)                        # 1.595
    table = {line.split()[1].strip("()"): line.split() for line in note.splitlines() if "snap-c.2.mpiP" in line}
    assert float(table["seed"][-1]) == pytest.approx(seed, abs=1e-3)
    assert float(table["MPICH"][-2]) == pytest.approx(4.0) and float(table["MPICH"][-1]) == pytest.approx(ours, abs=1e-3)
    assert "not a reading" not in note


def test_study_figure_marks_oversubscribed_s_and_says_when_there_is_none(tmp_path):
    df = _sweep3d_records(tmp_path, [0.7], oversubscribed=True)
    _, note = project.study_figure(FIG13, df, tmp_path / "figs")
    assert "oversubscribed: not a reading" in note
    _, note = project.study_figure(dict(FIG13, where={"face_partitions": 4}), df, tmp_path / "figs")
    assert "HMB's own s not drawn" in note and "15.1" in note
    with pytest.raises(project.ProjectError, match="no speed-up"):
        project.study_figure({k: v for k, v in FIG13.items() if k != "seed_speedup"} | {"where": {"face_partitions": 4}},
                             df, tmp_path / "figs")
