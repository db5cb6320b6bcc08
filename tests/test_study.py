"""hmb study: study files against their schema, the figure engine on planted records, claim
verdicts on planted values, --fit on a planted machine size, the CLI's one-line errors, and one
small real run."""
import json
from pathlib import Path
import math
import shutil

import pytest

import hmb
from hmb import cli
from hmb.run import requirements
from hmb.present import figures as engine
from hmb import study as hstudy
from hmb.study import claims, figures, fit, history
from hmb.study import cli as study_cli
from _planted import metric, result, run, write

import tomllib


def _run(run_id, bench, ranks=2, threads=1, oversubscribed=False, host="node1", options=None, **kw):
    r = run(run_id, bench, ranks=ranks, threads=threads, oversubscribed=oversubscribed, host=host, **kw)
    r["options"].update(options or {})
    return r


@pytest.fixture
def part_records(tmp_path):
    """Three launches of part at 10 ms: P = 1 and 4 at 64 KB and 1 MB, and one oversubscribed
    launch (T = 2 on a planted 2-core machine) at P = 16."""
    recs = []
    for rid, p1 in (("a", 1.28), ("b", 1.32), ("d", 1.3)):
        recs.append(_run(rid, "part", options={"compute": "10ms", "cache": "hot"}))
        for size in (65536, 1048576):
            for p, val in ((1, p1), (4, 2.0)):
                recs.append(result(rid, "part", {"size_bytes": size, "partitions": p},
                                   {"overhead": metric(val, unit="ratio"),
                                    "availability": metric(0.5 if p == 1 else 0.8, unit="ratio", higher=True)}))
    recs.append(_run("c", "part", threads=2, oversubscribed=True, options={"compute": "10ms", "cache": "hot"}))
    recs.append(result("c", "part", {"size_bytes": 65536, "partitions": 16}, {"overhead": metric(60.0, unit="ratio")}))
    return hmb.load(write(tmp_path / "part.jsonl", recs))


FIG = {"id": "fig4", "number": "Fig. 4", "title": "Overhead, 10 ms", "bench": "part", "x": "size_bytes",
       "y": "overhead", "hue": "partitions", "where": {"compute": "10ms"}, "logy": True,
       "ref": [{"y": 1.0, "label": "no overhead"}], "ylabel": "overhead t_part / t_pt2pt"}


# ---------------------------------------------------------------- study files and schema

@pytest.mark.parametrize("name", hstudy.names())
def test_every_shipped_study_is_valid(name):
    s = hstudy.load(name)       # schema + cross-references (raises StudyError naming where)
    assert s.meta["title"] and s.meta["authors"] and s.meta["seed"]
    assert s.meta["headline"] in [f["id"] for f in s.figures + s.tables]
    assert s.claims, f"{name} checks no claim"
    for c in s.claims:         # a numeric claim names what it reads; a qualitative one says why not
        assert "metric" in c or c.get("needs") or c.get("reason") or c.get("figure_id"), c


@pytest.mark.mpi
@pytest.mark.parametrize("name", hstudy.names())
@pytest.mark.parametrize("mode", ["fit", "as-published"])
def test_every_launch_of_every_study_is_one_hmb_bench_takes(name, mode, mpi_name, tmp_path):
    """Each launch a study expands to, checked against the built hmb-bench's descriptors as a
    sweep checks them before its first launch (seed000's halo3d `mode = "all"` was refused there,
    an hour into a run): options, values, ranks. The layout against this machine's cores is
    the sweep's own check (as-published is for a cluster)."""
    from conftest import get_mpi
    from hmb.run import launch as hlaunch, sweep
    study = hstudy.load(name)
    data, _ = fit.config(study, mode)
    data["sweep"]["output"] = str(tmp_path / "r.jsonl")
    config = study_cli._write_config(tmp_path, data, name)
    cfg = sweep.load(str(config), mpis_override=[mpi_name])
    specs = sweep.expand(cfg)
    assert specs, name
    impl = get_mpi(mpi_name)
    described = hlaunch.available_benches(hlaunch.Target(mpi_name, impl.flavor, impl))
    assert described and {s.bench for s in specs} <= set(described), sorted(described or ())
    sweep.check_launches(specs, described, "srun", None)


def test_five_studies_one_per_seed():
    seeds = sorted(hstudy.load(n).meta["seed"][:3] for n in hstudy.names())
    assert seeds == ["000", "001", "002", "003", "004"]


def test_schema_rejects_a_claim_without_its_quote(tmp_path):
    p = hstudy.studies_dir() / "seed004-async.toml"
    bad = p.read_text().replace('quote = "iii) There is no way', 'unquoted = "iii) There is no way', 1)
    f = tmp_path / "bad.toml"
    f.write_text(bad)
    with pytest.raises(hstudy.StudyError) as e:
        hstudy.load_file(f)
    msg = str(e.value)
    assert "\n" not in msg and "claim[4]" in msg


def test_figure_reference_to_nothing_is_named(tmp_path):
    p = hstudy.studies_dir() / "seed004-async.toml"
    f = tmp_path / "bad.toml"
    f.write_text(p.read_text().replace('figures = ["table1", "fig1"]', 'figures = ["table1", "fig99"]'))
    with pytest.raises(hstudy.StudyError, match=r"bench\[0\].figures: no figure or table 'fig99'"):
        hstudy.load_file(f)


# ---------------------------------------------------------------- the figure engine

def test_figure_draws_declared_axes_lines_and_context(part_records):
    f, note = engine.render(FIG, part_records)
    ax = f.axes[0]
    assert ax.get_xlabel() == "message size (bytes)"
    assert ax.get_ylabel() == "overhead t_part / t_pt2pt"
    assert ax.get_yscale() == "log" and ax.get_xscale() == "log"
    assert "Fig. 4: Overhead, 10 ms" in f._suptitle.get_text()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["64K", "1M"]
    # one line per partition count with the median over the two launches at each size
    lines = {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}
    assert set(lines) == {"partitions=1", "partitions=4", "partitions=16"}
    assert list(lines["partitions=1"].get_ydata()) == [pytest.approx(1.3), pytest.approx(1.3)]
    assert list(lines["partitions=4"].get_xdata()) == [65536, 1048576]
    # the oversubscribed point is hollow and dashed, and the legend says why
    assert lines["partitions=16"].get_linestyle() == "--"
    hollow = [ln for ln in ax.get_lines() if ln.get_marker() == "o" and ln.get_markerfacecolor() == "white"]
    assert len(hollow) == 1 and list(hollow[0].get_ydata()) == [60.0]
    legend = [t.get_text() for t in f.legends[0].get_texts()]
    assert any("oversubscribed" in t for t in legend)
    assert "band: 95% CI, lowest to highest bound over launches" in legend   # the shading is named
    assert any(ln.get_ydata()[0] == 1.0 for ln in ax.get_lines() if ln.get_linestyle() == ":")  # reference line
    footer = [t.get_text() for t in f.texts]
    assert any("MPICH Version: 4.2.0" in t and "node1" in t for t in footer)
    assert "4 launches" in note


def test_a_figure_with_one_x_value_gives_each_line_its_own_slot(part_records):
    """A --fit run that kept one x value (seed003's T = 1): each line has its own named slot on the
    x axis instead of every point stacked on one tick, and the axis says the value."""
    fig = {**FIG, "where": {"compute": "10ms", "size_bytes": 65536}, "logy": False}
    f, _ = engine.render(fig, part_records)
    ax = f.axes[0]
    f.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["partitions=1", "partitions=4", "partitions=16"]
    assert ax.get_xlabel() == "message size (bytes): 64K (the only value in this run)"
    lines = {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}
    assert list(lines["partitions=4"].get_xdata()) == [1.0] and list(lines["partitions=4"].get_ydata()) == [2.0]


def test_a_point_that_is_no_reading_does_not_set_the_scale(part_records):
    """The oversubscribed 60x would squeeze the readings (1.2-2.0) to a line: the shared y range
    covers the readings and the reference line; the hollow point sits at the edge as a triangle
    with its value."""
    f, _ = engine.render(FIG, part_records)
    ax = f.axes[0]
    lo, hi = ax.get_ylim()
    assert 0.9 < lo < 1.0 and 2.0 < hi < 2.2
    edge = [ln for ln in ax.get_lines() if ln.get_marker() == "^"]
    assert len(edge) == 1 and list(edge[0].get_xdata()) == [65536] and list(edge[0].get_ydata()) == [hi]
    assert "60.0" in [t.get_text() for t in ax.texts]


def test_figure_filters_and_labels(part_records):
    fig = {**FIG, "where": {"compute": "10ms", "partitions": 1}, "labels": {"1": "one partition"}}
    f, _ = engine.render(fig, part_records)
    assert [ln.get_label() for ln in f.axes[0].get_lines() if not ln.get_label().startswith("_")] == ["one partition"]
    none, why = engine.render({**FIG, "where": {"compute": "100ms"}}, part_records)
    assert none is None and "no results" in why


def test_table_layout_marks_points_that_are_not_readings(tmp_path):
    recs = [_run("a", "async")]
    for size, prog, e in ((32, "none", 10.0), (1024, "none", 40.0), (32, "thread", -200.0)):
        recs.append(result("a", "async", {"size_bytes": size, "progress": prog},
                           {"efficiency_mean_pct": metric(e, unit="%"), "t_sync_us": metric(7.0)},
                           extra={"progress_shares_compute_core": prog == "thread"}))
    df = hmb.load(write(tmp_path / "a.jsonl", recs))
    decl = {"id": "t1", "number": "Table 1", "title": "E", "bench": "async", "columns": "size_bytes",
            "rows": ["t_sync_us", "efficiency_mean_pct"], "panels": "progress",
            "labels": {"efficiency_mean_pct": "E, mean over pairs"}}
    text = figures.table(decl, df)
    assert "| size_bytes | 32 | 1K |" in text
    assert "| E, mean over pairs (%) | 10.0 | 40.0 |" in text
    assert "| E, mean over pairs (%) | -200† | – |" in text
    assert "† oversubscribed" in text


def test_table_resources_are_rows_of_recorded_fields(tmp_path):
    """`resources`: fields a point recorded (not metrics) as rows under the metrics, the median
    over the column's launches; none recorded: –."""
    recs = [_run("a", "halo3d"), _run("b", "halo3d"), _run("c", "halo3d")]
    for rid, rss in (("a", 1000), ("b", 3000), ("c", 2000)):
        for layout, comms in (("shared", 1), ("comm", 2)):
            recs.append(result(rid, "halo3d", {"size_bytes": 2048, "layout": layout},
                               {"t_comm_threadcomm_us": metric(10.0 * comms)},
                               extra={"communicators": comms, "vmrss_kib": rss + comms}))
    df = hmb.load(write(tmp_path / "h.jsonl", recs))
    decl = {"id": "t", "number": "Slide Summary", "title": "resources", "bench": "halo3d", "columns": "layout",
            "rows": ["t_comm_threadcomm_us"], "resources": ["communicators", "vmrss_kib", "streams"],
            "labels": {"communicators": "communicators created"}}
    text = figures.table(decl, df)
    assert "| layout | comm | shared |" in text
    assert "| t_comm_threadcomm_us (us) | 20.0 | 10.0 |" in text
    assert "| communicators created | 2 | 1 |" in text
    assert "| vmrss_kib | 2002 | 2001 |" in text        # medians of 1002, 3002, 2002 and 1001, 3001, 2001
    assert "| streams | – | – |" in text
    # resources vary from launch to launch: a claim still reads the two launches as one point
    v = claims.judge({"figure": "Slide S", "quote": "q", "bench": "halo3d", "metric": "t_comm_threadcomm_us",
                      "where": {"layout": "comm"}, "over": {"layout": "shared"}, "value": 2.0}, df)
    assert v.verdict == claims.AGREES, v


def test_oversubscribed_ratio_claim_shows_the_ratio_not_a_verdict(tmp_path):
    recs = [_run("a", "halo3d", threads=2, oversubscribed=True)]
    for layout, t in (("shared", 30.0), ("comm", 15.0)):
        recs.append(result("a", "halo3d", {"size_bytes": 2048, "layout": layout}, {"t_comm_threadcomm_us": metric(t)}))
    df = hmb.load(write(tmp_path / "o.jsonl", recs))
    v = claims.judge({"figure": "Slide S", "quote": "q", "bench": "halo3d", "metric": "t_comm_threadcomm_us",
                      "where": {"layout": "comm"}, "over": {"layout": "shared"}, "value": 0.72}, df)
    assert v.verdict == claims.NOT_COMPARABLE and v.reading == "0.50 (oversubscribed)", v


def test_seed003_category1_runs_the_thread_modes_beside_everywhere():
    s = hstudy.load("seed003-threads")
    assert not any("Category 1" in line for line in s.not_run())
    data, changes = fit.config(s, "fit", figure="cat1", ncores=2, memory=8 << 30)
    modes, everywhere = data["bench"]
    assert (modes["name"], modes["ranks"], modes["threads"]) == ("halo3d", [2], [2])
    assert modes["args"]["thread-comm"] == "shared,comm,tag,stream"
    # everywhere: the same halo on 2T single-threaded ranks, the same faces
    assert (everywhere["ranks"], everywhere["threads"]) == ([4], [1])
    assert everywhere["args"]["sizes"] == modes["args"]["sizes"]
    assert any("halo3d[4]: ranks 4–32 → 4" in c and "oversubscribed" in c for c in changes), changes
    assert any("one share per thread" in c for c in changes), changes
    # MPICH: T VCIs for shared/comm/tag, T reserved VCIs for stream (its own launch); Open MPI: none
    launches = requirements.plan("halo3d", {"thread-comm": "shared,comm,tag,stream"}, 2, 2, "mpich")
    got = {lc.args["thread-comm"]: lc.env_added for lc in launches}
    assert got == {"shared,comm,tag": {"MPIR_CVAR_CH4_NUM_VCIS": "2"},
                   "stream": {"MPIR_CVAR_CH4_NUM_VCIS": "3", "MPIR_CVAR_CH4_RESERVE_VCIS": "2"}}
    (one,) = requirements.plan("halo3d", {"thread-comm": "shared,comm,tag,stream"}, 2, 2, "openmpi")
    assert one.env_added == {} and (one.ranks, one.threads) == (2, 2)


# ---------------------------------------------------------------- claims

def _claim(**kw):
    return {"figure": "Fig. 4", "quote": "planted", "bench": "part", "metric": "overhead",
            "where": {"partitions": 1}, **kw}


def test_claim_agrees_differs_and_reads_medians(part_records):
    # launches 1.28, 1.32, 1.30: 1.3 ± 0.072 (97.5 %: t = 6.205, s = 0.02)
    v = claims.judge(_claim(value=1.3, tolerance=0.231), part_records)
    assert v.verdict == claims.AGREES and v.reading.startswith("1.30")
    assert "3 launches" in v.reading and v.launches == [1.28, 1.32, 1.3]
    v = claims.judge(_claim(value=2.0, tolerance=0.1), part_records)
    assert v.verdict == claims.DIFFERS
    # the interval 1.228-1.372 reaches across 1.25: no launch alone agrees, yet the launches do
    # not rule it out; undecided, never forced
    v = claims.judge(_claim(value=1.25, op="<="), part_records)
    assert v.verdict == claims.UNDECIDED and "across the edge 1.25" in v.reason


def test_claim_ratio_over_reference_points(part_records):
    v = claims.judge(_claim(metric="availability", where={"partitions": 4}, over={"partitions": 1},
                            value=1.6, tolerance=0.01), part_records)
    assert v.verdict == claims.AGREES and v.reading.startswith("1.60")


def test_claim_not_comparable_with_reasons(part_records):
    v = claims.judge(_claim(needs="a single-threaded baseline", value=1.0), part_records)
    assert (v.verdict, v.reason) == (claims.NOT_COMPARABLE, "HMB lacks a single-threaded baseline")
    v = claims.judge(_claim(where={"partitions": 16}, value=1.0), part_records)
    assert v.verdict == claims.NOT_COMPARABLE and "oversubscribed" in v.reason
    v = claims.judge(_claim(scope="network", value=1.3, tolerance=0.5), part_records, "EDR InfiniBand")
    assert v.verdict == claims.NOT_COMPARABLE and "the seed ran EDR InfiniBand" in v.reason
    assert v.reason.endswith("; here the reading meets the seed's value")      # 1.30 within 1.3 ± 50 %
    v = claims.judge(_claim(scope="network", value=2.0, tolerance=0.1), part_records, "EDR InfiniBand")
    assert v.reason.endswith("; here the reading does not meet the seed's value")
    v = claims.judge(_claim(where={"partitions": 64}, value=1.0), part_records)
    assert v.verdict == claims.NOT_COMPARABLE
    assert v.reason == "partitions = 64 is not in this run (it ran partitions = 1, 4, 16)"
    v = claims.judge(_claim(bench="async", value=1.0), part_records)
    assert v.reason == "this run has no async results"
    v = claims.judge(_claim(metric="no_such_metric", value=1.0), part_records)
    assert v.reason.startswith("the claim's points ran but gave no result")
    v = claims.judge({"figure": "Fig. 5", "quote": "a shape", "reason": "read the figure"}, part_records)
    assert (v.verdict, v.reason) == (claims.NOT_COMPARABLE, "read the figure")


def test_claim_of_a_figure_hmb_cannot_draw_is_not_comparable(part_records):
    s = hstudy.load("seed001-protocol")
    [lacks] = [x for x in claims.table(s, part_records) if x.claim.get("needs")]
    assert lacks.verdict == claims.NOT_COMPARABLE
    assert lacks.reason.startswith("HMB lacks the seed's dynamic threshold design"), lacks.reason


def test_numeric_filters_match_float_columns(part_records):
    assert len(claims.select(part_records, "part", "overhead", {"partitions": 1})) == 6   # 1.0 in the table
    assert len(claims.select(part_records, "part", "overhead", {"partitions": [1, 4]})) == 12


# ---------------------------------------------------------------- --fit

def test_fit_two_cores_keeps_partitions_and_says_so():
    s = hstudy.load("seed000-partitioned")
    data, changes = fit.config(s, "fit", figure="fig4", ncores=2, memory=8 << 30)
    [b] = data["bench"]
    assert (b["threads"], b["args"]["partitions"]) == (1, "1,2,4,8,16,32")
    assert changes == ["part[0]: threads 1–32 → 1 (at most 1 per rank on 2 cores); partitions 1–32 kept, "
                       "each thread owns P/T (T = 1 for P = 1–32)"]


def test_fit_keeps_sweep3d_face_partitions_and_says_so():
    """Figs. 9-10: one partition per thread as published (4 and 16 threads); on 2 cores with 2
    ranks one thread per rank fits, and the face partition counts stay the seed's."""
    s = hstudy.load("seed000-partitioned")
    data, changes = fit.config(s, "fit", figure="fig9", ncores=2, memory=8 << 30)
    assert sorted((b["threads"], b["args"]["face-partitions"]) for b in data["bench"]) == [([1], 4), ([1], 16)]
    assert changes == ["sweep3d[4]: threads 4 → 1; face partitions 4 kept, each thread owns 4/T",
                       "sweep3d[5]: threads 16 → 1; face partitions 16 kept, each thread owns 16/T"]


def test_fit_sixteen_cores_groups_partitions_by_the_threads_that_fit():
    s = hstudy.load("seed000-partitioned")
    data, changes = fit.config(s, "fit", figure="fig4", ncores=16, memory=8 << 30)
    layout = sorted((b["threads"], b["args"]["partitions"]) for b in data["bench"])
    assert layout == [(1, "1"), (2, "2"), (4, "4"), (8, "8,16,32")]
    assert "T = 8 for P = 8–32" in changes[0]


def test_as_published_is_one_partition_per_thread():
    s = hstudy.load("seed000-partitioned")
    data, changes = fit.config(s, "as-published", figure="fig4", ncores=2)
    assert sorted((b["threads"], b["args"]["partitions"]) for b in data["bench"]) == \
        [(1, "1"), (2, "2"), (4, "4"), (8, "8"), (16, "16"), (32, "32")]
    assert changes == []


def test_fit_ranks_and_threads_a_pattern_needs_are_kept_and_marked():
    data, changes = fit.config(hstudy.load("seed002-matching"), "fit", ncores=2, memory=8 << 30)
    assert [b["ranks"] for b in data["bench"]] == [[9], [27], [2]]
    assert "match[0]: ranks 9 kept (the pattern needs them): more than the 2 cores, oversubscribed" in changes[0]
    _, changes = fit.config(hstudy.load("seed003-threads"), "fit", ncores=2, memory=8 << 30)
    assert "mt[2]: threads 2–16 → 2 (the benchmark needs them: more than the 2 cores, oversubscribed" in changes[2]


def test_fit_leaves_out_sizes_beyond_memory_and_says_so():
    # part: 8 buffers of the size on each of 2 ranks within a quarter of 64 MiB: up to 1M
    data, changes = fit.config(hstudy.load("seed000-partitioned"), "fit", figure="fig4", ncores=2, memory=64 << 20)
    assert {b["args"]["sizes"] for b in data["bench"]} == {"4K,16K,64K,256K,1M"}
    assert any("sizes 4K–16M → 4K–1M (from 4M the ranks need about 64 MiB, more than a quarter of this "
               "machine's 64 MiB)" in c for c in changes), changes
    # halo3d's size is a face of a cubic block, as hmb-bench says (--launch-needs): a 16M face is a
    # side of 1448 cells (1448^2 x 8 B = 16,773,632 B), a 1450^3-cell block with its halo beside 14
    # face buffers (send and receive of 6 faces, 2 to check the halo): 24.6 GB a rank
    assert fit.rank_bytes("halo3d", [16 << 20]) == {16 << 20: (1450 ** 3 + 14 * 1448 ** 2) * 8}
    assert fit.rank_bytes("part", [1 << 20]) == {1 << 20: 8 << 20}   # no model of its own: 8 buffers
    data, changes = fit.config(hstudy.load("seed000-partitioned"), "fit", figure="fig11", ncores=2, memory=24 << 30)
    assert [b["args"]["sizes"] for b in data["bench"]] == ["64K,256K,1M,4M"]
    assert any("halo3d[6]: sizes 64K–16M → 64K–4M" in c for c in changes), changes
    with pytest.raises(hstudy.StudyError, match="sizes from 4096 bytes need about"):
        fit.config(hstudy.load("seed000-partitioned"), "fit", figure="fig4", ncores=2, memory=64 << 10)


def test_demo_runs_the_points_its_claims_read_and_nothing_it_cannot_judge():
    """Each study's demo claims are claims a 2-core machine can judge (claims.not_here), and the
    demo's launches hold every selection each of them reads: no demo row is 'not comparable'
    because of the demo's own choice of points."""
    from hmb.study import claims as hclaims
    from hmb.study import rounds
    for n in hstudy.names():
        s = hstudy.load(n)
        data, _ = fit.config(s, "fit", ncores=2, memory=8 << 30)
        unit = study_cli.claim_unit(s, data, only_demo=True)
        judged = {(c["figure"], c["quote"]) for c in unit.judged}
        for c in s.claims:
            if c.get("demo"):     # at least one of its cells is judged here (cells of more threads are not)
                assert (c["figure"], c["quote"]) in judged, f"{n} {c['figure']}: a demo claim this machine cannot judge"
        for c in unit.judged:     # a demo's own cells (demo = {cache = "hot"}) narrow what it reads
            demo = next(x.get("demo") for x in s.claims if (x["figure"], x["quote"]) == (c["figure"], c["quote"]))
            if isinstance(demo, dict):
                assert all(c["where"][k] == v for k, v in demo.items()), c["where"]
        for c in unit.judged:
            feeding = [d for d in unit.driven if history.claim_key(n, c) in d.keys]
            for sel in rounds.selections(c):
                assert any(rounds.narrow(d.bench, sel) is not None for d in feeding), \
                    f"{n} {c['figure']}: no demo launch holds {sel}"


# ---------------------------------------------------------------- the CLI

@pytest.mark.parametrize("argv, where", [
    (["study", "run", "nosuch"], "no study 'nosuch'"),
    (["study", "run", "seed004-async", "--repeats", "0"], "--repeats"),
    (["study", "run", "seed004-async", "--mpi", "bogus"], "unknown MPI 'bogus'"),
    (["study", "run", "seed004-async", "--figure", "fig99"], "no figure or table 'fig99'"),
    (["study", "report", "/nonexistent-dir"], "not a directory"),
])
def test_cli_errors_are_one_line_exit_2(argv, where, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and where in err and "Traceback" not in err


def test_list_names_every_paper(capsys):
    assert cli.main(["study", "list"]) == 0
    out = capsys.readouterr().out
    for n in hstudy.names():
        assert n in out
    assert "ICPP '22" in out and "Medvedev" in out


def test_run_of_a_figure_hmb_lacks_says_not_run(capsys, tmp_path):
    assert cli.main(["study", "run", "seed001-protocol", "--figure", "fig3", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "not run: Fig. 3" in err and "needs a measurement of 'productivity'" in err


@pytest.mark.mpi   # run for real under MPICH
def test_small_fit_run_through_the_sweep_and_report(tmp_path, capsys):
    """One tiny study (async pt2pt, one size) run for real with --fit, then reported again."""
    text = (hstudy.studies_dir() / "seed004-async.toml").read_text()
    data = tomllib.loads(text)
    data["sweep"]["args"] = {"calc-factor": 2, "sizes": "1K", "iters": 5, "ci-target": 0, "budget": "0.2s"}
    data["bench"] = [{**data["bench"][0], "args": {"op": "pt2pt", "progress": "none,test:10"}}]
    import tomli_w
    f = tmp_path / "tiny.toml"
    f.write_text(tomli_w.dumps(data))
    out = tmp_path / "out"
    rc = cli.main(["study", "run", str(f), "--fit", "--mpi", "mpich", "--out", str(out)])
    assert rc == 0
    assert "async[0]: ranks 28–896 → 2" in (out / "fit.txt").read_text()
    md = (out / "study.md").read_text()
    assert "Table 1" in md and "E, mean over pairs (the seed's)" in md and "(figures/fig1.png)" in md
    assert (out / "figures" / "fig1.png").stat().st_size > 0
    capsys.readouterr()
    assert cli.main(["study", "report", str(out)]) == 0
    assert "Claims beside HMB's readings" in capsys.readouterr().out
    # a second run into the same directory keeps the first one's results
    before = (out / "results.jsonl").read_bytes()
    assert cli.main(["study", "run", str(f), "--fit", "--mpi", "mpich", "--out", str(out)]) == 2
    assert "already has results: pass --resume" in capsys.readouterr().err
    assert (out / "results.jsonl").read_bytes() == before


def test_slurm_study_writes_the_published_grid(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["slurm", "--study", "seed004-async", "--nodes", "64", "--ranks-per-node", "14", "--threads", "1"]
    assert cli.main(argv) == 0
    # its own directory: results/study-NAME is hmb study run's
    assert "sweep results/study-seed004-async-slurm/config.toml --resume" in capsys.readouterr().out
    cfg = tomllib.loads((tmp_path / "results/study-seed004-async-slurm/config.toml").read_text())
    assert cfg["bench"][0]["ranks"] == [28, 224, 896]            # as published, not fitted
    assert cli.main(["slurm", "--study", "seed004-async", "--nodes", "1", "--ranks-per-node", "14",
                     "--threads", "1"]) == 2                     # 896 ranks do not fit one node
    assert "needs more than" in capsys.readouterr().err


def test_claims_are_judged_per_library(tmp_path):
    recs = []
    for k in range(3):
        for rid, impl, val in (("a", "MPICH", 1.2), ("b", "Open MPI", 3.0)):
            recs.append(_run(f"{rid}{k}", "part", impl=impl, library=f"{impl} x", options={"compute": "10ms"}))
            recs.append(result(f"{rid}{k}", "part", {"size_bytes": 65536, "partitions": 1},
                               {"overhead": metric(val + 0.01 * k, unit="ratio")}))
    df = hmb.load(write(tmp_path / "two.jsonl", recs))
    s = hstudy.load("seed000-partitioned")
    first = [v for v in claims.table(s, df) if v.claim["quote"].startswith("With one thread")]
    assert [(v.mpi, v.verdict) for v in first] == [("MPICH", claims.AGREES), ("Open MPI", claims.DIFFERS)]
    assert "| MPICH | 1.21" in claims.markdown(first) and first[0].library == "MPICH x"


def test_a_claim_driven_report_reads_each_claim_on_its_own_launches(tmp_path):
    """A claim-driven run's report judges a claim on the launches its rounds judged it on
    (rounds.json's tags per claim and library), not on another bench's launches of the same
    points: those launches stop when that bench's own claims are decided, so pooling them would
    pair fewer launches than the rounds counted. A run without the tags reads every launch."""
    recs = []
    for k in range(3):
        for rid, val in (("a", 1.2), ("b", 3.0)):       # a: the claim's bench; b: another's
            r = _run(f"{rid}{k}", "part", options={"compute": "10ms"})
            r["tag"] = f"part-mpich-{rid * 10}-r{k}"
            recs += [r, result(f"{rid}{k}", "part", {"size_bytes": 65536, "partitions": 1},
                               {"overhead": metric(val + 0.01 * k, unit="ratio")})]
    path = write(tmp_path / "results.jsonl", recs)
    s = hstudy.load("seed000-partitioned")
    (claim,) = [c for c in s.claims if c["quote"].startswith("With one thread")]
    key = history.claim_key(s.name, claim)
    mine = [f"part-mpich-{'a' * 10}-r{k}" for k in range(3)]

    def verdict():
        _, verdicts = study_cli.report(s, [path], tmp_path, claims_only=[claim], strict=False)
        (v,) = verdicts
        return v
    v = verdict()                                       # 1.2 and 3.0 pooled per launch: 2.1, above 1.76
    assert v.verdict == claims.DIFFERS and v.reading.startswith("2.1"), v.reading
    (tmp_path / "rounds.json").write_text(json.dumps({"type": "rounds", "schema": 1, "run_id": "x", "figure_tags": [],
                                                      "rounds": 1, "seconds": 1.0,
                                                      "claims": {f"{key}|mpich": {"tags": mine, "launches": 3}}}))
    v = verdict()
    assert v.verdict == claims.AGREES and v.reading.startswith("1.2"), v.reading


def test_claim_needing_threads_and_signed_differences(part_records):
    v = claims.judge(_claim(min_threads=2, value=1.0), part_records)
    assert v.verdict == claims.NOT_COMPARABLE and "needs at least 2 threads" in v.reason and "T = 1" in v.reason
    # availability 0.8 (P=4) - 0.5 (P=1) = 0.3: a difference, not a ratio, for a signed metric
    v = claims.judge(_claim(metric="availability", where={"partitions": 4}, over={"partitions": 1},
                            compare="difference", op=">=", value=0.0), part_records)
    assert v.verdict == claims.AGREES and v.reading.startswith("0.30")


def test_seed000_report_draws_fig13_projection_from_the_bundled_mpip(tmp_path):
    """Fig. 13 is `hmb project` on the bundled SNAP-C mpiP report with the seed's s and the
    study's own sweep3d speed-up (planted: 2.0 at 16 partitions, 10 ms); its claim is not
    comparable (the report is 2 ranks of one node)."""
    from hmb.present import project
    r = _run("s", "sweep3d", threads=2, options={"compute": "10ms", "face-partitions": "16"})
    f = write(tmp_path / "sw.jsonl", [r, result("s", "sweep3d", {"size_bytes": 65536},
                                                {"speedup_partitioned_vs_serial": metric(2.0, unit="ratio", higher=True)})])
    s = hstudy.load("seed000-partitioned")
    text, verdicts = study_cli.report(s, [f], tmp_path, figures_only=["fig13"])
    assert (tmp_path / "figures" / "fig13.png").is_file()
    frac = project.parse_mpip(project.DATA_DIR / "mpip" / "snap-c.2.mpiP").fraction
    assert f"{1 / ((1 - frac) + frac / 2.0):.3f}" in text and f"{1 / ((1 - frac) + frac / 15.1):.3f}" in text
    assert {v.verdict for v in verdicts} == {claims.NOT_COMPARABLE}
    assert any("2 ranks of one node" in v.reason for v in verdicts)


def test_seed001_fig2_memory_beside_the_rate_and_its_claim(tmp_path):
    """proto's memory reading (rss_traffic_kB, in each result's extra) is drawn by settings and
    read by the Sec. 1.1 memory claim: forced 1 MB / the paper's 17 KB = 30000 / 20000 = 1.5 ≥ 1.1
    agrees."""
    recs = []
    for k in range(3):        # three launches of each, alternated (tags ...-r0, -r1, -r2)
        for rid, setting, rss in (("a", "17K", 20000.0), ("b", "1M", 30000.0)):
            r = _run(f"{rid}{k}", "proto")
            r["tag"] = f"t-{rid}-r{k}"
            recs.append(r)
            for size in (1024, 4096):
                recs.append(result(f"{rid}{k}", "proto", {"size_bytes": size, "test": "tradeoff"},
                                   {"msg_rate": metric(1e6 if setting == "17K" else 8e5, unit="msg/s", higher=True)},
                                   extra={"rss_traffic_kB": rss, "per_peer_kB": 10.0}))
            recs.append({"type": "launch", "tag": f"t-{rid}-r{k}", "status": "done", "rc": 0,
                         "point": {"bench": "proto", "mpi": "mpich", "settings": setting}})
    f = write(tmp_path / "p.jsonl", recs)
    s = hstudy.load("seed001-protocol")
    text, verdicts = study_cli.report(s, [f], tmp_path, figures_only=["fig2", "fig2_memory"])
    assert (tmp_path / "figures" / "fig2.png").is_file() and (tmp_path / "figures" / "fig2_memory.png").is_file()
    by = {}
    for v in verdicts:
        by.setdefault(v.claim["figure_id"], []).append(v)
    (mem,) = by["fig2_memory"]
    assert mem.verdict == claims.AGREES and "1.5" in mem.reading
    # rate 8e5 / 1e6 = 0.8 ≤ 0.9 at each small size apart (1 and 4 KB)
    assert [(v.claim["label"], v.verdict) for v in by["fig2"]] == [("size_bytes = 1024", claims.AGREES),
                                                                   ("size_bytes = 4096", claims.AGREES)]
    assert not any("memory footprint beside" in hstudy.missing_text(m) for m in s.missing)


def test_budget_replaces_every_bench_budget_and_is_recorded():
    """hmb study run --budget: the sweep's and each bench's own budget give way to it, and the
    change names what it replaced; a budget without a unit is refused (exit 2 through the CLI)."""
    from hmb.study.cli import StudyError, with_budget
    data = {"sweep": {"args": {"budget": "10s"}}, "bench": [{"name": "part", "args": {"budget": "2s", "sizes": "4K"}},
                                                           {"name": "async"}]}
    data["bench"][1]["args"] = {"iters": 10, "warmup": 0}
    assert with_budget(data, "0.5s") == ["budget per point 10s/2s → 0.5s (--budget: fewer iterations, "
                                         "wider confidence intervals)",
                                         "minimum iterations per point 10/20 → at most 5 (--budget)",
                                         "warm-up iterations per point 0/3 → at most 1 (--budget)"]
    assert data["sweep"]["args"] == {"budget": "0.5s", "iters": 5, "warmup": 1}
    assert data["bench"][0]["args"] == {"sizes": "4K"} and data["bench"][1]["args"] == {"iters": 5, "warmup": 0}
    with pytest.raises(StudyError, match="has no unit"):
        with_budget(data, "5")
    assert cli.main(["study", "run", "seed004-async", "--budget", "0", "--dry-run"]) == 2


def test_a_claim_on_points_the_library_did_not_run_says_why(tmp_path):
    """A claim whose points the library reported unsupported says so with the benchmark's
    reason (Open MPI has no progress thread of its own); a claim whose filter value the run
    never had says what it ran instead."""
    recs = [_run("o", "async", impl="Open MPI", library="Open MPI v5.0.11", options={"progress": "none,impl"})]
    recs.append(result("o", "async", {"size_bytes": 32, "op": "pt2pt", "progress": "none"},
                       {"efficiency_pct": metric(40.0, unit="%", higher=True)}))
    recs.append({"type": "result", "schema": 1, "run_id": "o", "bench": "async",
                 "params": {"size_bytes": 32, "op": "pt2pt", "progress": "impl"}, "status": "unsupported",
                 "reason": "impl: Open MPI has no asynchronous progress thread", "extra": {}})
    path = write(tmp_path / "o.jsonl", recs)
    from hmb.data import tidy
    t = tidy.read([str(path)])
    df, un = t.df, t.unsupported
    assert list(un["reason"]) == ["impl: Open MPI has no asynchronous progress thread"]
    c = {"figure": "Fig. 1", "quote": "planted", "bench": "async", "metric": "efficiency_pct",
         "where": {"op": "pt2pt", "progress": "impl"}, "op": "<=", "value": 0.0}
    v = claims.judge(c, df, unsupported=un)
    assert (v.verdict, v.reason) == (claims.NOT_COMPARABLE, "unsupported by this library: impl: Open MPI "
                                     "has no asynchronous progress thread")
    v = claims.judge({**c, "where": {"op": "pt2pt", "progress": "thread"}}, df, unsupported=un)
    assert v.reason == "progress = thread is not in this run (it ran progress = none)"


def test_demo_lines_fold_to_the_terminal_width():
    line = "    HMB (MPICH): 1.01 (median of 1 points, 3 launches) → not comparable (the seed ran " + "x " * 60
    out = study_cli.wrap_line(line, 80).split("\n")
    assert len(out) > 1 and all(len(x) <= 80 for x in out)
    assert out[0].startswith("    HMB (MPICH): 1.01") and all(x.startswith("      ") for x in out[1:])
    assert " ".join(x.strip() for x in out) == line.strip()        # nothing lost, nothing split mid-word


def test_table_panels_by_several_columns(tmp_path):
    """`panels` naming several columns: one block per combination (seed004's tables per scale and
    progress mode), in numeric order (28 before 224), each cell its own point's median."""
    recs = []
    for rid, ranks in (("a", 28), ("b", 224)):
        recs.append(_run(rid, "async", ranks=ranks))
        for prog, e in (("none", 10.0), ("test:10", 20.0)):
            recs.append(result(rid, "async", {"size_bytes": 32, "progress": prog},
                               {"efficiency_mean_pct": metric(e + ranks, unit="%")}))
    df = hmb.load(write(tmp_path / "a.jsonl", recs))
    decl = {"id": "t1", "number": "Table 1", "title": "E", "bench": "async", "columns": "size_bytes",
            "rows": ["efficiency_mean_pct"], "panels": ["ranks", "progress"], "labels": {"none": "E_0"}}
    text = figures.table(decl, df)
    blocks = [line for line in text.splitlines() if line.startswith("*MPICH")]
    assert blocks == ["*MPICH, ranks=28, E_0*", "*MPICH, ranks=28, progress=test:10*",
                      "*MPICH, ranks=224, E_0*", "*MPICH, ranks=224, progress=test:10*"]
    assert "| efficiency_mean_pct (%) | 234 |" in text and "| efficiency_mean_pct (%) | 38.0 |" in text
    f, _ = figures.render({"id": "f", "number": "Fig. 1", "title": "E", "bench": "async", "x": "size_bytes",
                           "y": "efficiency_mean_pct", "hue": "progress", "panels": ["ranks"]}, df)
    assert [ax.get_title() for ax in f.axes] == ["ranks=28", "ranks=224"]


def _planted_part_run(overhead: float, calls: list | None = None):
    """A stand-in for sweep.run in the demo's tests: each launch the sweep would run writes its
    run record, one part result at 64K (one partition) reading `overhead`, and its launch record;
    each call is appended to `calls`."""
    from hmb.run import sweep

    def planted_run(cfg, **kw):
        if calls is not None:
            calls.append(True)
        recs = []
        for spec in sweep.expand(cfg, probe_mpi=False):
            r = _run(spec.tag, "part", options={"compute": "10ms", "cache": "hot"})
            r["tag"] = spec.tag
            recs += [r, result(spec.tag, "part", {"size_bytes": 65536, "partitions": 1, "noise": "none"},
                               {"overhead": metric(overhead, unit="ratio")})]
            recs.append({"type": "launch", "tag": spec.tag, "status": "done", "rc": 0, "elapsed_s": 0.5,
                         "point": spec.point()})
        with open(cfg.output, "a") as f:
            f.write("".join(json.dumps(x) + "\n" for x in recs))
        return 0
    return planted_run


def test_demo_names_the_cell_or_per_value_of_each_verdict(tmp_path, monkeypatch, capsys):
    """A claim judged per value or per cell prints which one beside its figure (seed000's
    one-partition claims per cache, seed004's per size): three identical quotes were unreadable.
    The demo's launches are planted (each launch the sweep would run writes its point)."""
    from hmb.run import sweep
    from hmb.study import cli as scli

    planted_run = _planted_part_run(1.1)
    seed000 = hstudy.load("seed000-partitioned")
    for c in seed000.claims:
        c["demo"] = c["quote"].startswith("With one thread")
    monkeypatch.setattr(sweep, "run", planted_run)
    others = {n: hstudy.load(n) for n in ("seed002-matching", "seed003-threads")}
    monkeypatch.setattr(scli, "names", lambda: ["seed000-partitioned", *others])
    monkeypatch.setattr(scli, "load", lambda name: seed000 if name == seed000.name else others[name])
    real_elsewhere = scli.elsewhere    # seed003 as on a machine where hmb study run judges some of it

    def elsewhere(study, *a):
        return (["judged by hmb study run seed003-threads: 2 (Slide Category 3)"] if study.name == "seed003-threads"
                else real_elsewhere(study, *a))
    monkeypatch.setattr(scli, "elsewhere", elsewhere)
    assert study_cli.demo("mpich", tmp_path / "demo") == 0
    out = " ".join((tmp_path / "demo" / "demo.md").read_text().split())   # lines fold to the terminal
    # a study the demo judges nothing of is named in the closing lines: nowhere here, or by study run
    closing = out.split("hmb study demo:")[-1]
    assert "from 1 study," in closing and "seed002-matching: no claim of this study can be judged" in closing
    assert "seed003-threads: no claim in the demo; hmb study run NAME judges" in closing
    assert "Fig. 4 [cache = hot]: \"With one thread" in out
    assert "→ agrees" in out and "3 launches" in out
    assert "not in the demo: needs 4 cores:" in out
    # kept in the history beside the demo directory, and read back by the next demo
    assert (tmp_path / "history.jsonl").is_file()
    assert study_cli.demo("mpich", tmp_path / "demo") == 0
    assert "agrees in 2 of 2 runs" in " ".join((tmp_path / "demo" / "demo.md").read_text().split())

def test_a_study_directory_of_an_earlier_hmb_is_reported_with_the_current_claims(tmp_path, capsys):
    """A study.toml without tolerance_from (written before the fidelity rules) was refused by
    study report: it is reported with the current study of the same seed paper, and says so."""
    import re
    old = re.sub(r'\ntolerance_from = "[^"]*"', "", (hstudy.studies_dir() / "seed000-partitioned.toml").read_text())
    (tmp_path / "study.toml").write_text(old)
    recs = [_run("a", "part", options={"compute": "10ms", "cache": "hot"}),
            result("a", "part", {"size_bytes": 65536, "partitions": 1}, {"overhead": metric(1.0, unit="ratio")})]
    write(tmp_path / "results.jsonl", recs)
    cli.main(["study", "report", str(tmp_path)])      # 2: the figures this one point cannot draw are named
    err = capsys.readouterr().err
    assert "written by an earlier HMB" in err and "seed000-partitioned's claims" in err
    assert "Claims beside HMB's readings" in (tmp_path / "study.md").read_text()


def test_demo_reads_the_benchmarks_after_its_rounds_built_them(tmp_path, monkeypatch):
    """In a fresh clone nothing is built before the demo's rounds, and the demo read the
    benchmarks' descriptors before them: without async's spare-core rule its progress-thread claims
    were summarised as "judged by hmb study run" on 2 cores. The descriptors are read after the
    rounds (here: none before the planted launches, async's after them)."""
    import types
    from hmb.data import descriptors
    from hmb.run import sweep
    from hmb.study import cli as scli
    built = []

    planted_run = _planted_part_run(1.0, built)
    seed000, seed004 = hstudy.load("seed000-partitioned"), hstudy.load("seed004-async")
    for c in seed000.claims:
        c["demo"] = c["quote"].startswith("With one thread")
    async_bench = descriptors.Bench("async", "", "", (), (), spare_core_when="progress=impl,thread")
    monkeypatch.setattr(scli, "descriptors",
                        types.SimpleNamespace(local=lambda: {"async": async_bench} if built else {}))
    monkeypatch.setattr(sweep, "run", planted_run)
    monkeypatch.setattr(scli, "names", lambda: ["seed000-partitioned", "seed004-async"])
    monkeypatch.setattr(scli, "load", lambda name: seed000 if name == seed000.name else seed004)
    monkeypatch.setattr(scli.fit, "cores", lambda: 2)
    assert study_cli.demo("mpich", tmp_path / "demo") == 0
    out = " ".join((tmp_path / "demo" / "demo.md").read_text().split())   # lines fold to the terminal
    assert "not in the demo: needs 4 cores (a spare core per rank for the progress thread)" in out
    assert "judged by hmb study run seed004-async" not in out
    assert "seed004-async: no claim of this study can be judged on this 2-core machine" in out
