"""hmb report from a stored small results file: every figure, its question and reading.

tests/data/report_small.jsonl (tests/data/make_synthetic.py): part/async/mt/p2p on MPICH and
"Open MPI", two repeats; early-bird transfer (early_bird) planted on Open MPI from 64K on; mt T>=2
oversubscribed, mode rates planted as
MT_BASE · T^gain against everywhere MT_EVERYWHERE · T, a SINGLE vs MULTIPLE pair at T=1;
async impl unsupported on Open MPI; one failed launch.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from hmb.data import tidy
from hmb.present import report

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(DATA))
import make_synthetic as synth  # noqa: E402  (the planted values)

from conftest import hmb_cli

FIGURES = ["part_overhead", "part_overhead_persistent", "part_perceived_bw", "part_availability", "part_early_bird",
           "async_efficiency", "mt_rate", "mt_rate_vs_everywhere", "p2p_latency", "p2p_bandwidth"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    r = hmb_cli(["report", DATA / "report_small.jsonl", "-o", out])
    assert r.returncode == 0, r.stderr
    return out


def test_every_figure_exists_and_is_referenced(built):
    html = (built / "report.html").read_text()
    md = (built / "report.md").read_text()
    for name in FIGURES:
        png = built / "figures" / f"{name}.png"
        svg = built / "figures" / f"{name}.svg"
        assert png.stat().st_size > 10_000, name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert svg.stat().st_size > 1000 and b"<svg" in svg.read_bytes()[:2000]
        assert f"figures/{name}.png" in html and f"figures/{name}.png" in md
    assert html.count("<img ") == len(FIGURES)
    # every figure has a question above it and a reading below it
    assert md.count("**Question:**") == len(FIGURES) and md.count("**Reading:**") == len(FIGURES)
    assert html.count("class='q'") == len(FIGURES) and html.count("class='reading'") == len(FIGURES)


def test_every_figure_names_its_libraries_and_machine(built):
    """A figure copied into slides keeps its context: the footer names each library version and
    the machine of the results drawn (SVG text is kept as text, so it can be read back)."""
    for name in FIGURES:
        svg = (built / "figures" / f"{name}.svg").read_text()
        assert "MPICH Version: 5.0.2" in svg and "Open MPI v5.0.11" in svg, name
        cpus = synth.MT_CPUS if name.startswith("mt") else 2     # the planted machines
        assert f"node1 ({cpus} CPUs)" in svg, name


def readings(md: str) -> dict:
    out, current = {}, None
    for line in md.splitlines():
        m = re.match(r"!\[.*\]\(figures/(\w+)\.png\)", line)
        if m:
            current = m.group(1)
        elif line.startswith("**Reading:**") and current:
            out[current] = line[len("**Reading:** "):]
    return out


def test_readings_are_computed_from_the_data(built):
    r = readings((built / "report.md").read_text())
    assert set(r) == set(FIGURES)
    eb = r["part_early_bird"]
    assert "Early-bird transfer seen on Open MPI from 64K on" in eb
    # planted under uniform:4 only: the reading names the noise model of each panel
    assert "Noise uniform:4: Early-bird transfer seen on Open MPI" in eb
    assert "Noise none: No early-bird transfer" in eb
    assert "at 4M" in eb and "MPICH shows none (max 0.00)" in eb
    assert "MPICH: P=1 median 1.0" in r["part_overhead"]
    assert "Unsupported: impl on Open MPI" in r["async_efficiency"]
    assert r["async_efficiency"].index("thread") < r["async_efficiency"].index("none")  # best first
    # at the largest T that is a reading (T = 4 is oversubscribed: named, not read)
    assert "MPICH at T=2: " in r["mt_rate"] and "(T=4: no reading)" in r["mt_rate"]
    assert "stream" in r["mt_rate"] and "everywhere" in r["mt_rate"]
    assert "M," in r["mt_rate"] and "e+0" not in r["mt_rate"]                           # 8.8M, not 8.8e+06
    # a reading never quotes a point that is no reading: nothing at T=4 is read
    assert "at T=4" not in r["mt_rate"] and "At T=4" not in r["mt_rate_vs_everywhere"]
    assert "µs at 8" in r["p2p_latency"]


def test_tables_environment_unsupported_failures(built):
    md = (built / "report.md").read_text()
    env = md.split("## Environment")[1].split("## Unsupported")[0]
    assert "MPICH Version: 5.0.2" in env and "Open MPI v5.0.11" in env
    assert "| yes |" in env                                 # oversubscribed runs flagged
    assert "abc1234def56" in env and "node1" in env
    unsup = md.split("## Unsupported")[1].split("## Failures")[0]
    assert "Open MPI has no asynchronous progress thread" in unsup and "MPIX streams are MPICH-only" in unsup
    fails = md.split("## Failures")[1].split("## All results")[0]
    assert "launch failed (exit 3)" in fails and "mt-bad-r0" in fails
    # repeats are combined: every part point shows 2 repeats
    part = md.split("### part\n")[-1]
    rows = [ln for ln in part.splitlines() if ln.startswith("| MPICH") or ln.startswith("| Open MPI")]
    assert rows and all(ln.rstrip().endswith("| 2 |") for ln in rows[:10])


def test_repeats_combine_as_the_median_of_medians():
    t = tidy.read([DATA / "report_small.jsonl"])
    df = t.df
    rows = df[(df["bench"] == "part") & (df["mpi"] == "MPICH") & (df["noise"] == "none") & (df["size_bytes"] == 4096)
              & (df["partitions"] == 4) & (df["metric"] == "overhead")]
    assert len(rows) == 2
    c = tidy.over_launches(rows)
    meds = sorted(rows["median"])
    assert c.launches == 2 and c.median == pytest.approx(sum(meds) / 2)
    assert (c.spread_lo, c.spread_hi) == (meds[0], meds[1])


@pytest.mark.planted_json("r.jsonl")   # ends with a line cut short by a kill
def test_redone_launch_counts_once(tmp_path):
    # Same tag twice (a launch interrupted, then redone by --resume): only the last run counts.
    lines = (DATA / "compare_a.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    first = [dict(r, run_id="old") for r in recs[:4]]       # header + 3 results of a cut launch
    for r in [first[0]] + recs[:1]:
        r["tag"] = "p2p-x-r0"
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in first + recs) + '{"type": "res')
    rs = tidy.read([path])
    assert rs.results == 10 and all(r.record["run_id"] != "old" for r, _ in rs.records(rs.df))


def test_embed_makes_one_file(tmp_path):
    rs = tidy.read([DATA / "compare_a.jsonl"])
    out = report.build(rs, tmp_path, embed=True)
    html = out["html"].read_text()
    assert "data:image/png;base64," in html and out["figures"]


def planted_ratio(mode: str, threads: int) -> float:
    return synth.MT_BASE / synth.MT_EVERYWHERE * threads ** (synth.MT_GAIN[mode] - 1)


def test_mt_ratio_to_everywhere_reading(built):
    reading = readings((built / "report.md").read_text())["mt_rate_vs_everywhere"]
    for mpi, modes in (("MPICH", ["stream", "comm", "tag", "shared", "funneled"]),
                       ("Open MPI", ["comm", "tag", "shared", "funneled"])):
        part = reading.split(f"At T=2 on {mpi}, ")[1].split(";")[0]   # T = 4 is oversubscribed: no reading
        assert part.startswith(f"{modes[0]} reaches ") and " of everywhere" in part
        assert "(T=4: no reading)" in part
        found = dict((m, float(v)) for m, v in re.findall(r"(\w+) (?:reaches )?(\d+\.\d+)", part))
        assert list(found) == modes                                  # best first, stream absent on Open MPI
        for mode, value in found.items():
            assert value == pytest.approx(planted_ratio(mode, 2), rel=0.08), (mpi, mode)
    assert "oversubscribed" in reading


def _section(md: str, title: str) -> str:
    return md.split(f"### {title}")[1].split("\n### ")[0].split("\n## ")[0]


def _row(table: str, *cells: str) -> list[str]:
    prefix = "| " + " | ".join(cells) + " |"
    rows = [ln for ln in table.splitlines() if ln.startswith(prefix)]
    assert len(rows) == 1, (prefix, table)
    return [c.strip() for c in rows[0].strip("|").split("|")]


def test_mt_performance_resources_table(built):
    md = (built / "report.md").read_text()
    table = _section(md, "Performance and resources per mode")
    first = next(ln for ln in table.splitlines() if ln.startswith("|"))
    header = [c.strip() for c in first.strip("|").split("|")]
    assert header == ["MPI", "T", "mode", "msg/s", "% of everywhere", "VCIs", "streams", "communicators",
                      "RSS MiB", "RSS % of everywhere", "repeats"]
    col = {name: i for i, name in enumerate(header)}
    ev = _row(table, "MPICH", "4", "everywhere")
    assert ev[col["% of everywhere"]] == "100%" and ev[col["msg/s"]].endswith("*")    # oversubscribed
    assert ev[col["VCIs"]] == "4" and ev[col["communicators"]] == "8"                 # 4 processes per side
    assert ev[col["RSS MiB"]] == f"{4 * synth.mt_extra('MPICH', 'everywhere', 1)['vmrss_kib'] / 1024:.1f}"
    stream = _row(table, "MPICH", "4", "stream")
    assert stream[col["VCIs"]] == "5 (4 reserved)" and stream[col["streams"]] == "4"
    assert float(stream[col["% of everywhere"]].rstrip("%")) == pytest.approx(100 * planted_ratio("stream", 4), abs=8)
    shared = _row(table, "MPICH", "4", "shared")
    rss_everywhere = 4 * synth.mt_extra("MPICH", "everywhere", 1)["vmrss_kib"]
    rss_pct = 100 * synth.mt_extra("MPICH", "shared", 4)["vmrss_kib"] / rss_everywhere
    assert shared[col["RSS % of everywhere"]] == f"{rss_pct:.0f}%"
    # The SINGLE runs of the thread-safety pair are not mixed into the MULTIPLE rates.
    one = _row(table, "MPICH", "1", "shared")
    assert one[col["repeats"]] == "2" and not one[col["msg/s"]].endswith("*")
    assert float(one[col["% of everywhere"]].rstrip("%")) == pytest.approx(100 * planted_ratio("shared", 1), abs=8)
    assert _row(table, "Open MPI", "2", "stream")[col["msg/s"]] == "unsupported"
    assert _row(table, "Open MPI", "2", "comm")[col["VCIs"]] == "–"                   # not exposed


def test_mt_thread_safety_table(built):
    md = (built / "report.md").read_text()
    table = _section(md, "Cost of thread safety")
    for mpi, planted in synth.MT_SAFETY.items():
        row = _row(table, mpi, "8", "shared")
        assert float(row[5]) == pytest.approx(planted, rel=0.08)
        assert row[6] == "2 / 2"
    said = re.search(r"MPICH shared: MULTIPLE runs at ([0-9.]+) of SINGLE's rate", table)
    assert said and float(said.group(1)) == pytest.approx(synth.MT_SAFETY["MPICH"], rel=0.08)


def _async_runs(tmp_path, layouts) -> tidy.Table:
    """One async point per (ranks, compute, median) in layouts."""
    w = synth.Writer()
    for ranks, compute, median in layouts:
        run_id = w.run("async", "MPICH", "MPICH Version: 5.0.2", ranks, 1)
        w.lines[-1]["options"].update({"compute": compute, "iters": "5", "sizes": "64K"})
        for size in (4096, 65536):
            w.result(run_id, "async", {"size_bytes": size, "op": "allreduce", "progress": "none", "threads": 1},
                     {"efficiency_pct": (median + np.linspace(-1, 1, 21), "%", True)})
    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in w.lines))
    return tidy.read([path])


def test_runs_that_differ_in_layout_or_options_are_separate_lines(tmp_path):
    # Allreduce at 2 ranks (E=80) and at 4 ranks (E=20) must not merge into one point at 50.
    rs = _async_runs(tmp_path, [(2, "1ms", 80.0), (4, "1ms", 20.0), (2, "10ms", 60.0)])
    (fig,) = report.bench_figures(rs, tmp_path, "async")
    reading = fig.reading
    assert "none, ranks=2, compute=1ms 80.0%" in reading and "none, ranks=4, compute=1ms 20.0%" in reading
    assert "none, ranks=2, compute=10ms 60.0%" in reading and " 50" not in reading
    header, rows = report.results_rows(rs)["async"]
    assert len(rows) == 6 and all(row[-1] == "1" for row in rows)
    assert any("compute=10ms" in row[2] and "ranks=2" in row[2] for row in rows)


def test_identical_layouts_still_combine_and_hide_constant_items(tmp_path):
    rs = _async_runs(tmp_path, [(2, "1ms", 80.0), (2, "1ms", 82.0)])
    (fig,) = report.bench_figures(rs, tmp_path, "async")
    assert "MPICH at 64K: none 81.0%" in fig.reading and "ranks=" not in fig.reading
    header, rows = report.results_rows(rs)["async"]
    assert len(rows) == 2 and rows[0][-1] == "2" and "ranks" not in rows[0][2]


def test_all_results_table_skips_metrics_no_point_measured(tmp_path):
    """halo3d --thread-comm records only the threadcomm metrics: the other modes' (null) metrics
    take no column, so the measured ones are the table's."""
    from _planted import metric, result, run, write
    empty = {"unit": "us", "median": None}
    recs = [run("a", "halo3d"),
            result("a", "halo3d", {"size_bytes": 2048, "thread_comm": "comm"},
                   {"t_iter_single_us": empty, "t_comm_single_us": empty, "t_iter_threadcomm_us": metric(227.0),
                    "t_comm_threadcomm_us": metric(19.9)})]
    header, rows = report.results_rows(tidy.read([write(tmp_path / "h.jsonl", recs)]))["halo3d"]
    assert header == ["MPI", "noise", "parameters", "t_iter_threadcomm_us", "t_comm_threadcomm_us", "repeats"]
    assert rows[0][3].startswith("227") and rows[0][4].startswith("19.9")
