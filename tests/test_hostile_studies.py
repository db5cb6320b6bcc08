"""Hostile study files and study directories (issue 31): nothing injected, nothing overwritten, no
verdict from a non-number.

Study text never becomes TOML (config.toml is tomli_w's), markdown (study.md escapes it) or a path
(path_name) unescaped; a study directory holds one study's run; a NaN or infinite number makes no
verdict. No test launches anything: refusals come before the first launch, and reports read
planted records.
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
import os
from pathlib import Path

import pandas as pd
import pytest
import tomli_w

import hmb
from hmb import cli
from hmb import study as hstudy
from hmb.study import claims, fit
from hmb.study import cli as study_cli
from _planted import metric, result, run, write

try:
    import tomllib
except ModuleNotFoundError:   # Python < 3.11
    import tomli as tomllib

BASE = tomllib.loads((hstudy.studies_dir() / "seed004-async.toml").read_text())
BASE["sweep"]["args"] = {"calc-factor": 2, "sizes": "1K", "iters": 5, "budget": "0.2s"}
BASE["bench"] = [{**BASE["bench"][0], "args": {"op": "pt2pt", "progress": "none"}}]
BASE["sweep"]["repeats"] = 1
# Three claims and one missing statement are enough to be hostile with; the full lists made each
# of the 140 bad-file tests parse and validate a study five times its size.
BASE["claim"] = BASE["claim"][:3]
BASE["study"]["missing"] = BASE["study"]["missing"][:1]


def study_file(path: Path, change=None, text: str | bytes | None = None) -> Path:
    """A small valid study (seed004's, one bench), changed by `change(data)`, or raw text."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is not None:
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
        return path
    data = copy.deepcopy(BASE)
    if change:
        change(data)
    path.write_text(tomli_w.dumps(data))
    return path


def one_line(capsys, rc, want_rc=2) -> str:
    out, err = capsys.readouterr()
    assert rc == want_rc, (rc, out, err)
    lines = [ln for ln in err.splitlines() if ln.startswith("hmb:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _claims_with_value(d, **kw):
    for c in d["claim"]:
        if "value" in c:
            if "tolerance" in kw:       # a claim has one tolerance: relative or absolute
                c.pop("tolerance_abs", None)
            c.update(kw)


def _set(section, **kw):
    return lambda d: d[section].update(kw) if isinstance(d[section], dict) else d[section][0].update(kw)


# (id, change or raw text, what the one line says)
BAD_STUDIES = [
    ("title-newline-injects-benches", _set("study", title='x\n[[bench]]\nname = "p2p"\nfigures = ["fig1"]\nrepeats = 7'),
     "study.title: holds a control character (\\n)"),
    ("title-nul", _set("study", title="a\x00b"), "study.title: holds a control character (\\x00)"),
    ("title-cr", _set("study", title="a\rb"), "holds a control character (\\r)"),
    ("title-u2028", _set("study", title="a\u2028b"), "holds a control character (\\u2028)"),
    ("title-bidi-override", _set("study", title="a\u202eb"), "holds a control character (\\u202e)"),
    ("title-100k", _set("study", title="t" * 100_000), "study.title: 100000 characters, more than 2000"),
    ("note-newline", lambda d: d["figure"][0].update(note="# h\n- x"), "figure[0].note: holds a control character"),
    ("tolerance-inf", lambda d: _claims_with_value(d, tolerance=math.inf), "tolerance: inf is not a finite number"),
    ("value-inf", lambda d: _claims_with_value(d, value=math.inf, op="<="), "value: inf is not a finite number"),
    ("value-nan", lambda d: _claims_with_value(d, value=math.nan), "value: nan is not a finite number"),
    ("value-minus-inf", lambda d: _claims_with_value(d, value=-math.inf), "value: -inf is not a finite number"),
    ("ref-nan", lambda d: d["figure"][0].update(ref=[{"y": math.nan}]), "figure[0].ref[0].y: nan is not a finite"),
    ("seed-speedup-inf", lambda d: d["figure"][0].update(seed_speedup=math.inf), "seed_speedup: inf is not a finite"),
    ("args-inf", lambda d: d["sweep"]["args"].update({"calc-factor": math.inf}), "calc-factor: inf is not a finite"),
    ("where-nan", lambda d: d["claim"][1].update(where={"size_bytes": math.nan}), "where.size_bytes: nan is not a finite"),
    ("sizes-nul", lambda d: d["sweep"]["args"].update(sizes="1K\x00"), "sweep.args.sizes: holds a control character"),
    ("key-newline", lambda d: d["sweep"]["args"].update({"a\nb": 1}), "is not a name (printable"),
    ("mpip-dotdot", lambda d: d["figure"][0].update(mpip=["../x"]), "figure[0].mpip[0]: '../x' does not match"),
    ("mpip-absolute", lambda d: d["figure"][0].update(mpip=["/etc/passwd"]), "figure[0].mpip[0]"),
    ("mpip-dot-segments", lambda d: d["figure"][0].update(mpip=["mpip/../../x"]), "figure[0].mpip[0]"),
    ("threads-10^8", lambda d: d["bench"][0].update(threads=[100000007], partition_per_thread=True),
     "bench[0].threads: [100000007] is not valid"),
    ("ranks-10^12", lambda d: d["bench"][0].update(ranks=[10 ** 12]), "bench[0].ranks"),
    ("figure-id-path", lambda d: d["figure"][0].update(id="../../x"), "figure[0].id: '../../x' does not match"),
    ("bench-name-path", lambda d: d["bench"][0].update(name="../x"), "bench[0].name: '../x' does not match"),
    ("ids-repeat", lambda d: d["figure"].append(copy.deepcopy(d["figure"][0])), "figure and table ids repeat"),
    ("no-bench", lambda d: d.update(bench=[]), "bench: [] should be non-empty"),
    ("headline-missing", _set("study", headline="nosuch"), "study.headline: no figure 'nosuch'"),
    ("deep-arrays", "[study]\nx = " + "[" * 20000 + "]" * 20000 + "\n", "bad TOML: nested too deeply"),
    ("deep-inline-tables", "x = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n", "bad TOML: nested too deeply"),
    ("deep-dotted-tables", "[" + ".".join(["a"] * 5000) + "]\nx = 1\n", "Additional properties are not allowed"),
    ("not-utf8", b'[study]\ntitle = "caf\xe9"\n', "not UTF-8 text"),
    ("binary", bytes(range(256)), "not UTF-8 text"),
    ("over-1-MiB", "# " + "x" * (2 << 20) + "\n", "a study file is at most 1 MiB"),
    ("surrogate-escape", '[study]\ntitle = "\\udfff"\n', "bad TOML"),
    ("empty", "", "'study' is a required property"),
]


def _bad_study(tmp_path, change) -> Path:
    if isinstance(change, (str, bytes)):
        return study_file(tmp_path / "bad.toml", text=change)
    return study_file(tmp_path / "bad.toml", change)


@pytest.mark.parametrize("change, why", [c[1:] for c in BAD_STUDIES], ids=[c[0] for c in BAD_STUDIES])
@pytest.mark.parametrize("command", ["study run --dry-run", "study run", "slurm --study", "study report --study"])
def test_a_bad_study_file_is_one_line_before_anything_is_written(tmp_path, capsys, monkeypatch, change, why, command):
    monkeypatch.chdir(tmp_path)
    f = _bad_study(tmp_path, change)
    rdir = tmp_path / "rdir"
    rdir.mkdir()
    write(rdir / "results.jsonl", [run("a", "async"), result("a", "async", {"size_bytes": 1024, "op": "pt2pt",
                                                                               "progress": "none"},
                                                             {"efficiency_pct": metric(50.0, unit="%")})])
    argv = {"study run --dry-run": ["study", "run", str(f), "--dry-run", "--mpi", "mpich"],
            "study run": ["study", "run", str(f), "--mpi", "mpich", "-o", str(tmp_path / "out")],
            "slurm --study": ["slurm", "--study", str(f), "--nodes", "64", "--ranks-per-node", "14", "--threads", "1"],
            "study report --study": ["study", "report", str(rdir), "--study", str(f)]}[command]
    line = one_line(capsys, cli.main(argv))
    assert why in line, line
    assert not (tmp_path / "out").exists() and not (tmp_path / "results").exists()
    assert sorted(p.name for p in rdir.iterdir()) == ["results.jsonl"]


def test_config_toml_is_written_by_tomli_w_only(tmp_path, monkeypatch):
    """A title holding TOML's own characters stays a string: config.toml has the study's one bench
    and a comment made by hmb (the study file's text is in study.toml beside it)."""
    monkeypatch.chdir(tmp_path)
    title = '" ] [[bench]] name = "p2p" # x = \\ \' """'
    f = study_file(tmp_path / "quoted.toml", _set("study", title=title, authors="a\\b", venue="[[bench]]"))
    path = study_cli.slurm_config(str(f))
    text = Path(path).read_text()
    cfg = tomllib.loads(text)
    assert [b["name"] for b in cfg["bench"]] == ["async"]
    assert text.splitlines()[0] == ("# hmb slurm --study quoted (as published): the grid of study.toml beside "
                                    "this file")
    assert title not in text and Path(path).with_name("study.toml").read_bytes() == f.read_bytes()


@pytest.mark.parametrize("name, path_name", [("new\nline", "new_line"), ("spa ce", "spa_ce"), ("-dash", "_-dash"),
                                             (".hidden", "_.hidden"), ("semi;rm -rf x", "semi_rm_-rf_x"),
                                             ("$(touch x)", "__touch_x_"), ("x" * 200, "x" * 64)])
def test_a_file_name_becomes_a_path_through_path_name(tmp_path, monkeypatch, capsys, name, path_name):
    """A newline in the study's file name left a directory named with one in results/."""
    monkeypatch.chdir(tmp_path)
    f = study_file(tmp_path / f"{name}.toml")
    assert cli.main(["study", "run", str(f), "--dry-run", "--mpi", "mpich"]) == 0
    assert f"a run would write results/study-{path_name})" in capsys.readouterr().err
    assert cli.main(["slurm", "--study", str(f), "--nodes", "64", "--ranks-per-node", "14", "--threads", "1"]) == 0
    capsys.readouterr()
    assert os.listdir(tmp_path / "results") == [f"study-{path_name}-slurm"]


# ---------------------------------------------------------------- a study's directory

def _finished(tmp_path, study: Path, budget: str | None = "0.5s") -> Path:
    """A directory as `hmb study run STUDY --budget 0.5s` leaves it, with planted results."""
    s = hstudy.load(str(study))
    data, changes = fit.config(s, "fit")
    if budget:
        changes += study_cli.with_budget(data, budget)
    out = tmp_path / "done"
    data["sweep"]["output"] = str(out / "results.jsonl")
    study_cli._write_config(out, data, "planted")
    study_cli.write_file(out / "study.toml", study.read_bytes())
    study_cli.write_file(out / "fit.txt", "\n".join(["planted"] + changes) + "\n")
    recs = []
    for rid, eff in (("a", 40.0), ("b", 44.0), ("c", 42.0)):
        recs.append(run(rid, "async"))
        recs.append(result(rid, "async", {"size_bytes": 1024, "op": "pt2pt", "progress": "none"},
                           {"efficiency_pct": metric(eff, unit="%", higher=True),
                            "efficiency_mean_pct": metric(eff, unit="%", higher=True),   # as hmb-bench async writes
                            "t_over_us": metric(3.0), "t_sync_us": metric(5.0)}))
    write(out / "results.jsonl", recs)
    return out


def _digest(d: Path) -> dict:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*")) if p.is_file()}


def test_a_dry_run_writes_nothing(tmp_path, capsys):
    """`study run OTHER --dry-run -o DIR` replaced study.toml, config.toml and fit.txt of a
    finished run (the next report gave other verdicts)."""
    mine = study_file(tmp_path / "mine.toml")
    other = study_file(tmp_path / "other.toml", lambda d: _claims_with_value(d, tolerance=1000.0))
    done = _finished(tmp_path, mine)
    before = _digest(done)
    assert cli.main(["study", "run", str(other), "--dry-run", "--mpi", "mpich", "-o", str(done)]) == 0
    assert f"--dry-run: nothing written (a run would write {done})" in capsys.readouterr().err
    assert _digest(done) == before


@pytest.mark.parametrize("argv, why", [
    (["study", "run", "{other}", "--mpi", "mpich", "-o", "{done}"], "holds the run of another study"),
    (["study", "run", "{other}", "--mpi", "mpich", "-o", "{done}", "--resume"], "holds the run of another study"),
    (["study", "run", "{mine}", "--mpi", "mpich", "-o", "{done}", "--resume"],
     "with another grid (sweep.args.budget: '0.5s' there, '0.2s' now)"),
    (["study", "run", "{mine}", "--mpi", "mpich", "-o", "{done}", "--resume", "--budget", "1s"],
     "with another grid (sweep.args.budget: '0.5s' there, '1s' now)"),
    (["study", "run", "{mine}", "--mpi", "mpich", "-o", "{done}", "--resume", "--budget", "0.5s", "--repeats", "2"],
     "with another grid"),
    (["study", "demo", "--mpi", "mpich", "-o", "{done}"], "holds a study run (study.toml)"),
])
def test_a_finished_run_is_never_rewritten_by_another_study_or_grid(tmp_path, capsys, argv, why):
    """Re-run without --budget, the same study rewrote fit.txt to '0 changes' and lost the budget
    record; another study replaced the run's study.toml."""
    mine = study_file(tmp_path / "mine.toml")
    other = study_file(tmp_path / "other.toml", lambda d: _claims_with_value(d, tolerance=1000.0))
    done = _finished(tmp_path, mine)
    before = _digest(done)
    line = one_line(capsys, cli.main([a.format(mine=mine, other=other, done=done) for a in argv]))
    assert why in line, line
    assert _digest(done) == before


def test_slurm_study_has_its_own_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    mine = study_file(tmp_path / "mine.toml")
    other = study_file(tmp_path / "results" / "x" / "mine.toml", lambda d: _claims_with_value(d, tolerance=1000.0))
    done = tmp_path / "results" / "study-mine"
    done.mkdir(parents=True)
    (done / "study.toml").write_bytes(mine.read_bytes())
    before = _digest(done)
    assert cli.main(["slurm", "--study", str(mine), "--nodes", "64", "--ranks-per-node", "14", "--threads", "1"]) == 0
    assert "results/study-mine-slurm/config.toml --resume" in capsys.readouterr().out
    assert _digest(done) == before
    # another study of the same file name: its slurm directory is refused, not rewritten
    line = one_line(capsys, cli.main(["slurm", "--study", str(other), "--nodes", "64", "--ranks-per-node", "14",
                                      "--threads", "1"]))
    assert "results/study-mine-slurm holds the run of another study" in line


def test_report_against_another_study_writes_beside_the_run(tmp_path, capsys):
    mine = study_file(tmp_path / "mine.toml")
    other = study_file(tmp_path / "other.toml", lambda d: _claims_with_value(d, tolerance=1000.0))
    done = _finished(tmp_path, mine)
    before = _digest(done)
    assert cli.main(["study", "report", str(done), "--study", str(other)]) == 0
    err = capsys.readouterr().err
    assert f"the report against other goes to {done / 'report-other'}" in err
    assert (done / "report-other" / "study.md").is_file()
    assert {k: v for k, v in _digest(done).items() if not k.startswith("report-other/")} == before


def test_report_replaces_links_and_never_writes_through_them(tmp_path, capsys):
    """A study.md or figures/*.png linking outside DIR was overwritten there."""
    done = _finished(tmp_path, study_file(tmp_path / "mine.toml"))
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("precious.md", "precious.png"):
        (outside / name).write_text("precious")
    (done / "figures").mkdir()
    os.symlink(outside / "precious.md", done / "study.md")
    os.symlink(outside / "precious.png", done / "figures" / "fig1.png")
    assert cli.main(["study", "report", str(done)]) == 0
    capsys.readouterr()
    assert [(outside / n).read_text() for n in ("precious.md", "precious.png")] == ["precious", "precious"]
    assert not (done / "study.md").is_symlink() and (done / "study.md").read_text().startswith("# ")
    assert not (done / "figures" / "fig1.png").is_symlink()
    # a figures/ directory that is a link elsewhere is refused
    os.rename(done / "figures", tmp_path / "figs")
    os.symlink(tmp_path / "figs", done / "figures")
    line = one_line(capsys, cli.main(["study", "report", str(done)]))
    assert "figures is a symbolic link" in line


def test_a_fit_txt_that_is_not_utf8_is_shown_not_a_traceback(tmp_path, capsys):
    done = _finished(tmp_path, study_file(tmp_path / "mine.toml"))
    (done / "fit.txt").write_bytes(b"\xff\xfe changes ``` [x](y)\n")
    assert cli.main(["study", "report", str(done)]) == 0
    md = capsys.readouterr().out
    assert "````\n\ufffd\ufffd changes ``` [x](y)\n````" in md


@pytest.mark.parametrize("change, why", [
    (lambda d: d["figure"][0].update(hue="nosuch"), "Fig. 1 (fig1): its hue 'nosuch' is not a column"),
    (lambda d: d["figure"][0].update(panels="nosuch"), "Fig. 1 (fig1): its panels 'nosuch' is not a column"),
    (lambda d: d["figure"][0].update(x="nosuch"), "Fig. 1 (fig1): its x 'nosuch' is not a column"),
    (lambda d: d["figure"][0].update(y="nosuch"), "Fig. 1 (fig1): its y 'nosuch' is no metric"),
    (lambda d: d["table"][0].update(columns="nosuch"), "Table 1 (table1): its columns 'nosuch' is not a column"),
    (lambda d: d["table"][0].update(panels="nosuch"), "Table 1 (table1): its panels 'nosuch' is not a column"),
    (lambda d: d["table"][0].update(rows=["nosuch"]), "Table 1 (table1): its rows 'nosuch' is no metric"),
])
def test_a_figure_naming_a_missing_column_is_named_and_study_md_is_written(tmp_path, capsys, change, why):
    """After the launches, KeyError/ValueError left no study.md."""
    f = study_file(tmp_path / "cols.toml", change)
    done = _finished(tmp_path, f)
    line = one_line(capsys, cli.main(["study", "report", str(done)]))
    assert f"{done / 'study.md'} written, but {why}" in line, line
    md = (done / "study.md").read_text()
    assert "not drawn: its" in md and "## Claims beside HMB's readings" in md


def test_a_misspelt_metric_is_refused_before_any_launch(tmp_path, capsys):
    f = study_file(tmp_path / "y.toml", lambda d: d["figure"][0].update(y="efficiency_pc"))
    line = one_line(capsys, cli.main(["study", "run", str(f), "--dry-run", "--mpi", "mpich"]))
    assert "Fig. 1 (figure fig1): y 'efficiency_pc' is not a metric of async" in line


@pytest.mark.parametrize("name", hstudy.names())
def test_every_shipped_study_passes_the_check_before_its_launches(name, capsys):
    """seed000's Figs. 11-12 read the report's halo3d figure, y 'throughput_{mode}_MBps': the check
    took the '{mode}' name itself for a metric and refused the study before any launch."""
    from conftest import get_mpi
    get_mpi("mpich")            # a built hmb-bench: the check reads its descriptors
    assert cli.main(["study", "run", name, "--dry-run", "--mpi", "mpich"]) == 0, capsys.readouterr().err


def test_study_text_and_results_text_stay_text_in_study_md(tmp_path, capsys):
    """A figure number injected a markdown link into study.md."""
    def change(d):
        d["figure"][0]["number"] = "Fig. 1](http://evil)"
        d["study"]["authors"] = "[click](http://evil) <script>x</script>"
        d["study"]["venue"] = "a | b"
        d["claim"][0]["quote"] = "q | ](x) <i>"
    done = _finished(tmp_path, study_file(tmp_path / "md.toml", change))
    assert cli.main(["study", "report", str(done)]) == 0
    md = (done / "study.md").read_text()
    capsys.readouterr()
    assert "![Fig. 1\\](http://evil)](figures/fig1.png)" in md
    assert "\\[click\\](http://evil) \\<script\\>x\\</script\\>" in md and "a \\| b" in md
    assert '"q \\| \\](x) \\<i\\>"' in md
    assert "](http://evil)" not in md.replace("\\](http://evil)", "")


# ---------------------------------------------------------------- no verdict from a non-number

def _launches(tmp_path, medians) -> pd.DataFrame:
    """The tidy table of one launch per median, each with two points whose median it is (NaN:
    hmb-bench's null, as the reader gives it)."""
    recs = []
    for i, med in enumerate(medians):
        recs.append(run(f"r{i}", "part"))
        for size in (1024, 4096):
            recs.append(result(f"r{i}", "part", {"size_bytes": size, "partitions": 1},
                               {"overhead": {**metric(1.0, unit="ratio"), "median": None if math.isnan(med) else 1.0}}))
    df = hmb.load(write(tmp_path / "n.jsonl", recs), warn=False)
    for i, med in enumerate(medians):
        df.loc[df["run_id"] == f"r{i}", "median"] = med
    return df


CLAIM = {"figure": "Fig. 4", "quote": "planted", "bench": "part", "metric": "overhead", "value": 1.0,
         "tolerance": 0.1, "op": "~"}


def test_a_launch_whose_median_is_nan_is_dropped_counted_and_named(tmp_path):
    """A NaN median dropped out of a claim silently while the reading said '3 launches'."""
    df = _launches(tmp_path, [1.0, 1.02, 1.01, math.nan])
    v = claims.judge(CLAIM, df)
    assert v.verdict == claims.AGREES and v.launches == [1.0, 1.02, 1.01]
    assert v.reading == "1.01 (median of 2 points, 3 of 4 launches; launch 4 dropped: median NaN)", v.reading


def test_an_infinite_median_is_no_reading(tmp_path):
    """An Infinity median counted as a reading."""
    df = _launches(tmp_path, [1.0, math.inf, 1.0])
    v = claims.judge(CLAIM, df)
    assert "launch 2 dropped: median Infinity" in v.reading and "2 of 3 launches" in v.reading
    v = claims.judge(CLAIM, _launches(tmp_path, [math.inf, math.nan]))
    assert v.verdict == claims.NOT_COMPARABLE and v.reason == ("no reading: launch 1 dropped: median Infinity; "
                                                               "launch 2 dropped: median NaN")


def test_part_of_a_launch_dropped_is_named(tmp_path):
    df = _launches(tmp_path, [1.0, 1.0])
    df.loc[(df["run_id"] == "r1") & (df["size_bytes"] == 4096), "median"] = math.nan
    v = claims.judge(CLAIM, df)
    assert v.reading.endswith("2 launches; 1 point of launch 2 dropped: median NaN)"), v.reading


@pytest.mark.parametrize("claim", [{**CLAIM, "tolerance": math.inf}, {**CLAIM, "value": math.inf, "op": "<="},
                                   {**CLAIM, "value": math.nan}])
def test_a_non_finite_seed_value_makes_no_verdict(tmp_path, claim):
    """tolerance = inf gave 'agrees', value = inf with <= 'agrees', nan 'differs'."""
    v = claims.judge(claim, _launches(tmp_path, [1.0]))
    assert v.verdict == claims.NOT_COMPARABLE and "not a finite number" in v.reason


def test_a_non_finite_reading_makes_no_verdict(tmp_path):
    """A ratio of two finite readings that overflows (1e300 / 1e-300) is no reading."""
    one = _launches(tmp_path, [1e-300])
    df = pd.concat([one, one.assign(partitions=4, median=1e300)], ignore_index=True)
    v = claims.judge({**CLAIM, "where": {"partitions": 4}, "over": {"partitions": 1}}, df)
    assert v.verdict == claims.NOT_COMPARABLE and v.reason == "the reading is not a finite number", v


# ---------------------------------------------------------------- --fit, --budget, slow inputs

def test_fit_leaves_out_sweep_args_sizes_beyond_memory():
    """sizes = "1K,64G" under [sweep].args gave '0 changes' and was launched."""
    s = hstudy.Study("s", Path("s.toml"), {**copy.deepcopy(BASE), "sweep": {**BASE["sweep"],
                                                                          "args": {"sizes": "1K,64G"}}})
    data, changes = fit.config(s, "fit", memory=16 << 30)
    assert data["bench"][0]["args"]["sizes"] == "1K" and data["sweep"]["args"]["sizes"] == "1K,64G"
    assert any("sizes 1K–64G → 1K–1K" in c for c in changes), changes
    s.data["sweep"]["args"]["sizes"] = "64G"
    with pytest.raises(hstudy.StudyError, match="sizes from 68719476736 bytes need about"):
        fit.config(s, "fit", memory=16 << 30)


@pytest.mark.parametrize("args, why", [({"iters": "5x"}, "sweep.args.iters: '5x' is not a whole number"),
                                       ({"iters": True}, "sweep.args.iters: True is not a whole number"),
                                       ({"warmup": 2.5}, "sweep.args.warmup: 2.5 is not a whole number"),
                                       ({"iters": "-5"}, "'-5' is not a whole number"),
                                       ({"iters": 10 ** 30}, "is not a whole number")])
def test_budget_refuses_what_is_no_count_in_one_line(args, why):
    """--budget converted iters and warm-up with int(): '5x' and nan raised."""
    data = {"sweep": {"args": dict(args)}, "bench": [{"name": "part", "args": {}}]}
    with pytest.raises(hstudy.StudyError, match=why.replace("(", r"\(")):
        study_cli.with_budget(data, "0.5s")


def test_budget_caps_an_axis_and_text_as_the_study_wrote_them():
    """A legal axis warmup = [1, 2] raised in int()."""
    data = {"sweep": {"args": {"warmup": [1, 2], "iters": "30"}},
            "bench": [{"name": "part", "args": {"iters": "10,40"}}]}
    changes = study_cli.with_budget(data, "0.5s")
    assert data["sweep"]["args"] == {"warmup": 1, "iters": 5, "budget": "0.5s"}
    assert data["bench"][0]["args"] == {"iters": 5}
    assert changes[1:] == ["minimum iterations per point 10/30/40 → at most 5 (--budget)",
                           "warm-up iterations per point 1/2 → at most 1 (--budget)"]


def test_partition_per_thread_divisors_take_sqrt_steps():
    """T = 100000007 took 7 s; the schema now bounds T at 65536, and the search is sqrt(T)."""
    import time
    t0 = time.perf_counter()
    assert fit._largest_divisor(1_000_000_000_039, 1_000_000_000_039) == 1_000_000_000_039   # a prime
    assert fit._largest_divisor(1_000_000_000_039, 64) == 1 and fit._largest_divisor(36, 5) == 4
    assert time.perf_counter() - t0 < 30      # 10^6 steps; the old search took 10^12
    s = hstudy.Study("s", Path("s.toml"), copy.deepcopy(BASE))
    s.data["bench"][0].update(name="part", threads=[65536], partition_per_thread=True)
    data, _ = fit.config(s, "as-published")
    assert data["bench"][0]["threads"] == 65536 and data["bench"][0]["args"]["partitions"] == "65536"


# ---------------------------------------------------------------- the other arguments

@pytest.mark.parametrize("argv, why", [
    (["conform", "--mpi", "mpich", "--check", ","], "--check ',': names no check"),
    (["conform", "--mpi", "mpich", "--check", " "], "names no check"),
    (["conform", "--mpi", "mpich", "--check", "restarts,,x"], "an empty name in the list"),
    (["conform", "--mpi", "mpich", "--check", "restarts,restarts"], "'restarts' named twice"),
    (["conform", "--mpi", "mpich", "--check", "nosuch"], "no check named 'nosuch'"),
    (["conform", "--mpi", "mpich", "--check", "\x00"], "no check named '\\x00'"),
    (["study", "run", "seed004-async", "--dry-run", "--budget", "1e999s"], "'1e999s' is not a finite duration"),
    (["study", "run", "seed004-async", "--dry-run", "--budget", "1s\n"], "'1s\\n' is not a duration"),
    (["study", "run", "seed004-async", "--dry-run", "--figure", ""], "no figure or table ''"),
    (["study", "run", "seed004-async", "--dry-run", "--out", ""], "--out: an empty directory name"),
    (["study", "run", "seed004-async", "--dry-run", "--repeats", "1000000000"], "the grid has at least"),
    (["study", "run", "seed004-async\n", "--dry-run"], "no study 'seed004-async\\n'"),
    (["study", "run", "/dev/null"], "not a regular file"),
    (["slurm", "--study", "seed004-async", "--nodes", "64", "--ranks-per-node", "14", "--threads", "1",
      "--time", "01:00:00\n"], "--time '01:00:00\\n'"),
    (["slurm", "--study", "seed004-async", "--nodes", str(10 ** 30), "--ranks-per-node", "14", "--threads", "1"],
     "must be at most 1,048,576"),
    (["settings", "--threshold", "99999999999999999999999"], "is not a byte count"),
    (["settings", "--threshold", "1099511627777"], "1099511627777 bytes is no eager threshold"),
    (["settings", "--threshold", "16K\n"], "is not a byte count"),
])
def test_arguments_are_one_line(tmp_path, monkeypatch, capsys, argv, why):
    monkeypatch.chdir(tmp_path)
    line = one_line(capsys, cli.main(argv))
    assert why in line, line
    assert not (tmp_path / "results").exists()


def test_durations_refuse_what_is_not_finite():
    from hmb.data.units import parse_duration
    for bad in ("1e999s", "1e308h", math.inf, "30s\n"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    assert parse_duration(" 30s ") == 30.0
