"""hmb report from a stored small results file: every figure, its question and reading.

tests/data/report_small.jsonl (tests/data/make_synthetic.py): part/async/mt/p2p on MPICH and
"Open MPI", two repeats; early-bird transfer (early_arrival) planted on Open MPI from 64K on, SPEC's interval
early_bird also on MPICH (it counts waiting); mt T>=2 oversubscribed;
async impl unsupported on Open MPI; one failed launch.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hmb import report, results

DATA = Path(__file__).parent / "data"
FIGURES = ["part_overhead", "part_perceived_bw", "part_availability", "part_early_arrival", "part_early_bird",
           "async_efficiency", "mt_rate", "p2p_latency", "p2p_bandwidth"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    r = subprocess.run([sys.executable, "-m", "hmb.cli", "report", str(DATA / "report_small.jsonl"),
                        "-o", str(out)], capture_output=True, text=True, timeout=240)
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
    eb = r["part_early_arrival"]
    assert "Early-bird transfer seen on Open MPI from 64K on" in eb
    assert "at 4M" in eb and "MPICH shows none (max 0.00)" in eb
    assert "MPICH: P=1 median 1.0" in r["part_overhead"]
    assert "Unsupported: impl on Open MPI" in r["async_efficiency"]
    assert r["async_efficiency"].index("thread") < r["async_efficiency"].index("none")  # best first
    assert "T=4" in r["mt_rate"] and "everywhere" in r["mt_rate"]
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


def test_combine_repeats_median_of_medians():
    rs = results.load([DATA / "report_small.jsonl"])
    pts = [r for r in rs.results if r.bench == "part" and r.mpi == "MPICH" and r.noise == "none"
           and r.params["size_bytes"] == 4096 and r.params["partitions"] == 4]
    assert len(pts) == 2
    c = results.combine(pts, "overhead")
    meds = sorted(p.metric("overhead")["median"] for p in pts)
    assert c.repeats == 2 and c.median == pytest.approx(sum(meds) / 2)
    assert (c.spread_lo, c.spread_hi) == (meds[0], meds[1])


def test_redone_launch_counts_once(tmp_path):
    # Same tag twice (a launch interrupted, then redone by --resume): only the last run counts.
    lines = (DATA / "compare_a.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    first = [dict(r, run_id="old") for r in recs[:4]]       # header + 3 results of a cut launch
    for r in [first[0]] + recs[:1]:
        r["tag"] = "p2p-x-r0"
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in first + recs) + '{"type": "res')
    rs = results.load([path])
    assert len(rs.results) == 10 and all(r.record["run_id"] != "old" for r in rs.results)


def test_embed_makes_one_file(tmp_path):
    rs = results.load([DATA / "compare_a.jsonl"])
    out = report.build(rs, tmp_path, embed=True)
    html = out["html"].read_text()
    assert "data:image/png;base64," in html and out["figures"]
