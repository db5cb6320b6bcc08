"""A terminal that reads well (issue 20, item 4): hmb-bench's tables fit 120 columns unless
--wide, --metric picks columns in every table, p2p --format osu prints OSU's two columns,
TEST ONLY options stay out of --help, and a launch by hand with unbound ranks gets one warning
line. The sweep's closing line is tested in test_reliability.py."""
from __future__ import annotations

import re
import subprocess

import pytest

from conftest import get_mpi, hmb_lines, pattern_modes, run_bench

WIDTH = 120
TINY = ["--iters", "3", "--ci-target", "0", "--budget", "5ms", "--warmup", "1"]
# Each benchmark's default run, at a tiny size (pattern modes as their tests run them on each MPI).
BENCHES = ["p2p", "part", "async", "halo3d", "stencil3d", "sweep3d", "proto", "match", "mt"]


def _args(bench: str, mpi_name: str) -> list:
    args = [bench, "--sizes", "1K"] + TINY
    if bench in ("halo3d", "sweep3d"):
        args += ["--mode", ",".join(pattern_modes(mpi_name) + ("persistent",))]
    return args


def _table(stdout: str) -> tuple[str, list]:
    """The column header line and the data rows of hmb-bench's table."""
    lines = stdout.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("#  size") or ln.startswith("#   size"))
    rows = []
    for ln in lines[head + 1:]:
        if not ln.strip():
            break          # the pivot summary follows a blank line
        if not ln.startswith("#"):
            rows.append(ln)
    return lines[head], rows


@pytest.mark.parametrize("bench", BENCHES)
def test_every_stdout_line_fits_120_columns_by_default(mpi_name, bench):
    r = run_bench(mpi_name, _args(bench, mpi_name))
    assert r.rc == 0, r.stderr
    long = [ln for ln in r.stdout.splitlines() if len(ln) > WIDTH]
    assert not long, f"{bench}: lines wider than {WIDTH}:\n" + "\n".join(long)
    head, rows = _table(r.stdout)
    assert rows and all(len(row.split()) >= 3 for row in rows), r.stdout


def test_left_out_columns_are_named_in_one_line_and_wide_shows_them(mpi_name):
    args = ["p2p", "--sizes", "8", "--mode", "bw"] + TINY
    narrow = run_bench(mpi_name, args)
    assert narrow.rc == 0, narrow.stderr
    notes = [ln for ln in narrow.stdout.splitlines() if ln.startswith("# not shown")]
    assert len(notes) == 1 and "msg_rate" in notes[0] and "--wide" in notes[0], narrow.stdout
    head, _ = _table(narrow.stdout)
    assert "msg_rate" not in head.split() and "bandwidth_MBps" in head.split()
    wide = run_bench(mpi_name, args + ["--wide"])
    assert wide.rc == 0, wide.stderr
    head, (row,) = _table(wide.stdout)
    assert "msg_rate" in head.split() and len(head) > WIDTH and len(row) > WIDTH
    assert not any(ln.startswith("# not shown") for ln in wide.stdout.splitlines())


def test_metric_picks_the_columns_of_the_launch_table(mpi_name, tmp_path):
    r = run_bench(mpi_name, ["p2p", "--sizes", "8", "--mode", "bw", "--metric", "msg_rate,iter_time_us"] + TINY,
                  tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    head, (row,) = _table(r.stdout)
    names = [w for w in head.lstrip("#").split() if "_" in w]
    assert names == ["msg_rate", "iter_time_us"], head   # in the order asked, iter_time_us not in_table
    assert "bandwidth_MBps" not in head and "latency_us" not in head
    (res,) = r.results()
    assert float(row.split()[4]) == pytest.approx(res["metrics"]["msg_rate"]["median"], rel=1e-3)
    assert set(res["metrics"]) >= {"bandwidth_MBps", "msg_rate", "latency_us"}   # the JSON keeps all


@pytest.mark.parametrize("value,why", [("bogus_us", "is not a metric of p2p"),
                                       ("msg_rate,msg_rate", "listed twice")])
def test_metric_names_are_checked(mpi_name, value, why):
    r = run_bench(mpi_name, ["p2p", "--sizes", "8", "--metric", value] + TINY)
    line, = hmb_lines(r.stderr)
    assert r.rc == 2 and "--metric" in line and why in line, r.stderr


def test_metric_selects_the_async_summary_rows(mpi_name):
    r = run_bench(mpi_name, ["async", "--sizes", "1K", "--op", "pt2pt", "--progress", "none",
                             "--metric", "t_total_us,efficiency_pct"] + TINY)
    assert r.rc == 0, r.stderr
    summary = r.stdout.split("# summary", 1)[1].splitlines()[1:]
    labels = {ln.split()[0] for ln in summary if ln.strip() and not ln.startswith("#")}
    assert labels == {"1K", "efficiency_pct"}, r.stdout   # t_total_us is no summary row; t_over_us not asked


def test_format_osu_prints_two_columns_per_mode(mpi_name, tmp_path):
    r = run_bench(mpi_name, ["p2p", "--sizes", "8,1K", "--mode", "latency,bw", "--format", "osu"] + TINY,
                  tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    data = [ln for ln in r.stdout.splitlines() if not ln.startswith("#")]
    assert [ln.split()[0] for ln in data] == ["8", "1024", "8", "1024"]
    assert all(len(ln.split()) == 2 and re.fullmatch(r"\d+\.\d\d", ln.split()[1]) for ln in data), data
    heads = [ln for ln in r.stdout.splitlines() if ln.startswith("# Size")]
    assert [h.split(None, 2)[2] for h in heads] == ["Latency (us)", "Bandwidth (MB/s)"]
    medians = {(x["params"]["mode"], x["params"]["size_bytes"]): x["metrics"] for x in r.results()}
    assert float(data[1].split()[1]) == pytest.approx(medians[("latency", 1024)]["latency_us"]["median"], abs=0.006)
    assert float(data[2].split()[1]) == pytest.approx(medians[("bw", 8)]["bandwidth_MBps"]["median"], abs=0.006)


def test_format_osu_is_p2p_only(mpi_name):
    r = run_bench(mpi_name, ["part", "--sizes", "1K", "--format", "osu"] + TINY)
    assert r.rc == 2 and "unknown option --format" in hmb_lines(r.stderr)[0]


def test_test_only_options_are_hidden_from_help():
    exe = str(get_mpi("mpich").bench)
    short = subprocess.run([exe, "p2p", "--help"], capture_output=True, text=True)
    full = subprocess.run([exe, "p2p", "--help-all"], capture_output=True, text=True)
    assert short.returncode == 0 and full.returncode == 0
    # every planted fault sits behind the one TEST ONLY option, --inject
    assert "--inject" not in short.stdout and "--inject" in full.stdout
    for name in ("corrupt", "never-complete", "stale", "wrong-slot", "hang"):
        assert any(ln.startswith("  --inject") and name in ln for ln in full.stdout.splitlines()), name
    options = [ln for ln in short.stdout.splitlines() if ln.startswith("  --")]
    assert not [ln for ln in options if "TEST ONLY" in ln] and "1 TEST ONLY option for" in short.stdout
    assert "--help-all lists them" in short.stdout
    assert "--format table|osu" in short.stdout and "--wide" in short.stdout and "--metric" in short.stdout
    mt = subprocess.run([exe, "mt", "--help"], capture_output=True, text=True).stdout
    assert not [ln for ln in mt.splitlines() if ln.startswith("  --") and "TEST ONLY" in ln]


def test_unbound_launch_warns_once_in_the_header(mpi_name):
    args = ["p2p", "--sizes", "8", "--mode", "latency"] + TINY
    loose = run_bench(mpi_name, args, bind=False)
    bound = run_bench(mpi_name, args, bind=True)
    assert loose.rc == 0 and bound.rc == 0, loose.stderr + bound.stderr
    warnings = [ln for ln in loose.stdout.splitlines() if ln.startswith("# warning")]
    cpus = next(ln for ln in loose.stdout.splitlines() if ln.startswith("# cpus:"))
    if re.search(r"cpuset \d+,|cpuset \d+-", cpus):    # the launcher left rank 0 on several CPUs
        assert len(warnings) == 1 and "ranks not bound" in warnings[0] and "hmb run" in warnings[0]
        assert "-bind-to core" in warnings[0] and "--bind-to core" in warnings[0] and len(warnings[0]) <= WIDTH
    assert not [ln for ln in bound.stdout.splitlines() if ln.startswith("# warning")], bound.stdout
