"""Integration tests of `stencil3d` (SPEC §3.5, seed 001 §2.3): the 6-neighbour exchange runs and
validates on 2 ranks (2x1x1: ±x the other rank, ±y ±z the rank itself) and on 8 (2x2x2,
oversubscribed), periodic and open; the compute is what was asked for or --calc-factor x T_comm;
corrupted data exits 3 naming its place; bad options exit 2 with one line.

Correctness only. How much a library overlaps (eager vs rendezvous) is machine physics."""
from __future__ import annotations

import pytest

import _corelib as cl
from conftest import TEST_MPIS, compute_floor_us, run_bench

mpich_only = pytest.mark.skipif("mpich" not in TEST_MPIS, reason="MPICH not selected (HMB_TEST_MPIS)")

METRICS = ["overlap_pct", "overlap_unclamped_pct", "t_comm_us", "t_comp_us", "t_overall_us", "t_post_us", "t_wait_us", "throughput_MBps"]
FAST = ["--iters", "6", "--warmup", "1", "--ci-target", "0"]


@pytest.fixture(scope="module")
def lib():
    return cl.load()


@pytest.mark.mpi
@pytest.mark.parametrize("boundary", ["periodic", "open"])
def test_two_ranks_measure_what_they_promise(mpi_name, boundary, lib, tmp_path):
    run = run_bench(mpi_name, ["stencil3d", "--sizes", "1K,16K", "--compute", "30us", "--boundary", boundary,
                               "--raw", *FAST], tmp_path=tmp_path)
    assert run.rc == 0, run.stderr
    hdr = run.header()["extra"]
    assert (hdr["topology_grid"], hdr["topology_boundary"], hdr["topology_neighbours"]) == ("2x1x1", boundary, 6)
    res = run.results()
    assert [r["params"]["size_bytes"] for r in res] == [1024, 16384]
    for r in res:
        assert list(r["metrics"]) == METRICS
        assert r["extra"]["compute_source"] == "compute" and r["extra"]["compute_us"] == 30
        assert "calc_factor" not in r["extra"]
        s = r["samples"]
        assert all(len(s[m]) == r["iterations"] == 6 for m in METRICS)
        # Every compute-alone phase ran the requested compute.
        floor_us = compute_floor_us(run, 30)
        assert min(s["t_comp_us"]) >= floor_us
        # On every rank the post and the wait are parts of the overlapped phase, beside the compute (at least floor_us)
        # compute: the slowest post and the slowest wait are each shorter than the slowest phase.
        for post, wait, overall in zip(s["t_post_us"], s["t_wait_us"], s["t_overall_us"]):
            assert post + floor_us <= overall and wait + floor_us <= overall
        # the overlap, per iteration, from that iteration's times; clamped to [0, 100] or not
        for pct, raw, comm, comp, overall in zip(s["overlap_pct"], s["overlap_unclamped_pct"], s["t_comm_us"],
                                                 s["t_comp_us"], s["t_overall_us"]):
            assert raw == pytest.approx(100 * (comm + comp - overall) / comm, rel=1e-6, abs=1e-6)
            assert pct == pytest.approx(min(100.0, max(0.0, raw)), abs=1e-9)


@pytest.mark.mpi
def test_calc_factor_sets_the_compute_from_t_comm(mpi_name, tmp_path):
    run = run_bench(mpi_name, ["stencil3d", "--sizes", "4K", "--calc-factor", "3", *FAST], tmp_path=tmp_path)
    assert run.rc == 0, run.stderr
    (r,) = run.results()
    x = r["extra"]
    assert x["compute_source"] == "calc-factor" and x["calc_factor"] == 3
    assert x["t_comm_calibration_us"] > 0
    assert x["compute_us"] == pytest.approx(max(10.0, 3 * x["t_comm_calibration_us"]), abs=1e-3)
    assert r["metrics"]["t_comp_us"]["min"] >= compute_floor_us(run, x["compute_us"])


@pytest.mark.mpi
def test_eight_ranks_on_a_2x2x2_grid(mpi_name, tmp_path):
    """Oversubscribed: correctness only (Open MPI yields, or 8 spinning ranks starve each other)."""
    env = {"OMPI_MCA_mpi_yield_when_idle": "1"} if mpi_name == "openmpi" else None
    run = run_bench(mpi_name, ["stencil3d", "--sizes", "64", "--compute", "5us", "--iters", "2", "--warmup", "0",
                               "--ci-target", "0", "--timeout", "60s"], ranks=8, env=env, tmp_path=tmp_path,
                    timeout=120)
    assert run.rc == 0, run.stderr
    hdr = run.header()
    assert hdr["extra"]["topology_grid"] == "2x2x2" and hdr["oversubscribed"] is True
    (r,) = run.results()
    assert r["iterations"] == 2


@pytest.mark.mpi
def test_mock_mode_validates_without_communication(mpi_name, tmp_path):
    """--comm off: faces copied into the rank's own halo, validated against the rank itself; no
    throughput (nothing was exchanged); a corrupted copy still exits 3."""
    run = run_bench(mpi_name, ["stencil3d", "--sizes", "4K", "--compute", "10us", "--comm", "off", *FAST],
                    tmp_path=tmp_path)
    assert run.rc == 0, run.stderr
    (r,) = run.results()
    assert r["extra"]["mock"] == 1 and r["iterations"] == 6 and r["invalid"] == 0
    rate = r["metrics"]["throughput_MBps"]["median"]
    assert rate is None or rate != rate  # NaN or absent: no bytes exchanged
    assert r["metrics"]["t_comm_us"]["median"] > 0
    bad = run_bench(mpi_name, ["stencil3d", "--sizes", "1K", "--compute", "10us", "--comm", "off", "--inject", "corrupt:2", *FAST], tmp_path=tmp_path)
    assert bad.rc == 3, (bad.rc, bad.stderr)
    line = next(ln for ln in bad.stderr.splitlines() if "validation failed" in ln)
    assert "direction 0 (offset +1,+0,+0) from rank" in line


@pytest.mark.mpi
def test_corrupted_data_exits_3_naming_the_place(mpi_name, tmp_path):
    run = run_bench(mpi_name, ["stencil3d", "--sizes", "1K", "--compute", "10us", "--inject", "corrupt:2", *FAST],
                    tmp_path=tmp_path)
    assert run.rc == 3, (run.rc, run.stderr)
    line = next(ln for ln in run.stderr.splitlines() if "validation failed" in ln)
    assert "bench=stencil3d" in line and "iteration=2" in line
    assert "direction 0 (offset +1,+0,+0) from rank" in line
    failures = [r for r in run.records if r.get("type") == "failure"]
    assert failures and failures[0]["kind"] == "validation"


@pytest.mark.mpi
@mpich_only
@pytest.mark.parametrize("args,needle", [
    (["--grid", "3,1,1"], "--grid 3x1x1"),
    (["--grid", "2,1"], "--grid: 2 values for a 3-D grid"),
    (["--boundary", "wrap"], "--boundary"),
    (["--compute", "0"], "--compute: must be > 0"),
    (["--compute", "10us", "--calc-factor", "2"], "--compute and --calc-factor both given"),
    (["--calc-factor", "0"], "--calc-factor"),
    (["--sizes", "4G"], "--sizes: 4294967296 bytes per neighbour"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    run = run_bench("mpich", ["stencil3d", *args, *FAST])
    assert run.rc == 2, (run.rc, run.stderr)
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], run.stderr
