"""async formulas (metrics.c) on synthetic numbers whose answers are worked out by hand in the
comments: the rule that marks a sample invalid when its compute ran faster than the
undisturbed calibration allows, and E_loaded (E with the compute-only phase's C_loaded)."""
from __future__ import annotations

import ctypes as C

import pytest

import _corelib as cl


@pytest.fixture(scope="module")
def lib():
    return cl.load()


def test_tolerance_is_the_calibration_error_with_floors(lib):
    # C = 1 ms, error 3 %: the error itself (above the 1 % floor and 1 µs / 1 ms = 0.1 %).
    assert lib.hmb_async_compute_tolerance(1e-3, 0.03) == pytest.approx(0.03)
    # C = 1 ms, error 0.2 %: the 1 % floor.
    assert lib.hmb_async_compute_tolerance(1e-3, 0.002) == pytest.approx(0.01)
    # C = 20 µs, error 2 %: 1 µs / 20 µs = 5 % is the larger.
    assert lib.hmb_async_compute_tolerance(20e-6, 0.02) == pytest.approx(0.05)


@pytest.mark.parametrize("c_kernel,c,err,too_fast", [
    # C = 1 ms, error 2 %: the threshold is 0.98 ms.
    (0.95e-3, 1e-3, 0.02, 1),    # 5 % faster than calibrated: impossible
    (0.985e-3, 1e-3, 0.02, 0),   # 1.5 % faster: within the calibration error
    (1.30e-3, 1e-3, 0.02, 0),    # slower (a disturbed core): possible, counted as overhead
    # Same run with error 0: the 1 % floor makes the threshold 0.99 ms.
    (0.985e-3, 1e-3, 0.0, 1),
    (0.9905e-3, 1e-3, 0.0, 0),
    # C = 10 µs: the 1 µs floor (10 %) makes the threshold 9 µs.
    (9.2e-6, 10e-6, 0.0, 0),
    (8.9e-6, 10e-6, 0.0, 1),
    # The 168 % case: T_over < 0 because the kernel ran at 0.6 of the calibrated time.
    (0.6e-3, 1e-3, 0.01, 1),
])
def test_compute_faster_than_calibrated_is_flagged(lib, c_kernel, c, err, too_fast):
    assert lib.hmb_async_compute_too_fast(c_kernel, c, err) == too_fast


def test_unusable_inputs_are_not_flagged(lib):
    assert lib.hmb_async_compute_too_fast(float("nan"), 1e-3, 0.0) == 0
    assert lib.hmb_async_compute_too_fast(0.5e-3, 0.0, 0.0) == 0


def test_efficiency_against_loaded_compute(lib):
    """E_loaded = E with C_loaded in place of C. T_sync = 100 µs, T_total = 1130 µs, C = 1000 µs,
    C_loaded = 1100 µs (every rank computing at once ran 10 % slower): E = 100 (1 - 130/100) =
    -30 %, E_loaded = 100 (1 - 30/100) = 70 %: the load, not the communication, cost 100 µs."""
    assert lib.hmb_async_efficiency_pct(1130e-6, 1000e-6, 100e-6) == pytest.approx(-30.0)
    assert lib.hmb_async_efficiency_pct(1130e-6, 1100e-6, 100e-6) == pytest.approx(70.0)
    assert lib.hmb_async_overhead(1130e-6, 1100e-6) == pytest.approx(30e-6)


def ranks_e(lib, t_total, c, t_sync):
    fn = lib.hmb_async_efficiency_ranks
    worst, mean = C.c_double(), C.c_double()
    rc = fn(len(t_total), cl.doubles(t_total), cl.doubles(c), cl.doubles(t_sync), C.byref(worst), C.byref(mean))
    return rc, worst.value, mean.value


def test_efficiency_per_rank_then_aggregated(lib):
    """Rank 0: T_total 1050 µs, C 1000, T_sync 100 -> E = 100 (1 - 50/100) = 50 %.
    Rank 1: T_total 1010 µs, C 1000, T_sync 200 -> E = 100 (1 - 10/200) = 95 %.
    Worst 50 %, mean 72.5 %. The max of each quantity separately (T_total 1050, T_sync 200)
    would have combined rank 0's T_total with rank 1's T_sync: E = 75 %, no rank's E."""
    rc, worst, mean = ranks_e(lib, [1050e-6, 1010e-6], [1000e-6, 1000e-6], [100e-6, 200e-6])
    assert rc == 0
    assert worst == pytest.approx(50.0) and mean == pytest.approx(72.5)


def test_efficiency_ranks_unusable_inputs(lib):
    import math
    rc, worst, mean = ranks_e(lib, [1e-3, 1e-3], [1e-3, 1e-3], [1e-4, 0.0])  # a rank without T_sync
    assert rc == -1 and math.isnan(worst) and math.isnan(mean)
