"""The clock model across processes (clockfit.c, clocks.c): the line fit on injected skews
computed by hand, and the trailing "clocks" record of a real run (its shape and the exact
offset 0 applied on rank 0's host; how close the estimates come to 0 is `hmb check`'s)."""
from __future__ import annotations

import ctypes as C

import pytest

import _corelib as cl
from conftest import run_bench


@pytest.fixture(scope="module")
def lib():
    return cl.load()


def fit(lib, t, y, t_ref):
    m = cl.ClockModel()
    rc = lib.hmb_clock_fit(len(t), cl.doubles(t), cl.doubles(y), t_ref, C.byref(m))
    return rc, m


def test_exchange_offset(lib):
    # Sent at 10.0, answered at remote 15.5, received at 11.0: midpoint 10.5, offset 5.0.
    assert lib.hmb_clock_exchange_offset(10.0, 15.5, 11.0) == 5.0


def test_fit_recovers_injected_skew(lib):
    # Remote clock = t * (1 + 50 ppm) + 2 ms (to 1 ps: rounding). Exchanges of 2 us round trip centred on rank 0's
    # t = 0, 1, 2, 10 s read the remote at the midpoint: offsets 2 ms + 50e-6 t exactly.
    points = [0.0, 1.0, 2.0, 10.0]
    offsets = []
    for t in points:
        remote = t * (1 + 50e-6) + 2e-3
        offsets.append(lib.hmb_clock_exchange_offset(t - 1e-6, remote, t + 1e-6))
    rc, m = fit(lib, points, offsets, 0.0)
    assert rc == 0
    assert m.drift * 1e6 == pytest.approx(50.0, rel=1e-9)
    assert m.offset_s == pytest.approx(2e-3, abs=1e-12)
    assert m.residual_max_s == pytest.approx(0.0, abs=1e-12)
    # Expressed at 10 s: 2 ms + 500 us.
    rc, m10 = fit(lib, points, offsets, 10.0)
    assert m10.offset_s == pytest.approx(2.5e-3, abs=1e-12) and m10.t_ref_s == 10.0
    assert lib.hmb_clock_model_offset(C.byref(m), 4.0) == pytest.approx(2.2e-3, abs=1e-12)


def test_fit_least_squares_by_hand(lib):
    # (0, 1), (1, 3), (2, 2): mean t 1, mean y 2, slope ((-1)(-1) + 0 + (1)(0)) / 2 = 0.5,
    # at t = 0: 2 - 0.5 = 1.5; residuals -0.5, +1.0, -0.5.
    rc, m = fit(lib, [0.0, 1.0, 2.0], [1.0, 3.0, 2.0], 0.0)
    assert rc == 0
    assert (m.offset_s, m.drift, m.residual_max_s) == (1.5, 0.5, 1.0)


def test_fit_degenerate(lib):
    # One point in time: no drift can be told; the offset is the mean.
    rc, m = fit(lib, [3.0, 3.0], [1.0, 2.0], 7.0)
    assert rc == 0 and (m.offset_s, m.drift, m.residual_max_s) == (1.5, 0.0, 0.5)
    rc, m = fit(lib, [3.0], [4.0], 0.0)
    assert rc == 0 and (m.offset_s, m.drift) == (4.0, 0.0)
    assert fit(lib, [], [], 0.0)[0] == -1


@pytest.mark.mpi
def test_trailing_clocks_record(mpi_name, tmp_path):
    r = run_bench(mpi_name, ["p2p", "--mode", "latency", "--sizes", "8", "--iters", "5", "--warmup", "1",
                             "--ci-target", "0"], ranks=3, tmp_path=tmp_path, timeout=240)
    assert r.rc == 0, r.stderr
    kinds = [x["type"] for x in r.records]
    assert kinds[0] == "run" and kinds[-1] == "clocks", kinds
    rec = r.records[-1]
    assert rec["run_id"] == r.header()["run_id"]
    for key in ("offsets_applied_s", "offsets_start_s", "offsets_end_s", "drift_ppm", "end_residual_s",
                "fit_residual_max_s"):
        assert len(rec[key]) == 3, key
        assert rec[key][0] == 0, key  # rank 0 against itself
    # One host: the exact offset 0 is applied, so the end residual is the end estimate itself.
    assert rec["offsets_applied_s"] == [0, 0, 0]
    assert rec["end_residual_s"] == rec["offsets_end_s"]
    assert rec["span_s"] > 0 and rec["groups"] >= 2
