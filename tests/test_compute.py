"""The calibrated compute kernel (compute.c) and the clock (timer.c): correctness only.

How accurate the calibration comes out, the timer's resolution and cost, and how often the
machine interrupts a core are machine physics: `hmb check` measures them (calibration_error_*,
timer_*, interrupt_lost_pct). Here: the clock is one monotonic clock in two units, the kernel
is real work, a calibration is well-formed, and a request converts into iterations exactly as
documented (hmb_compute_iters on synthetic calibrations computed by hand).
"""
from __future__ import annotations

import ctypes as C
import math

import pytest

import _corelib as cl

@pytest.fixture(scope="module")
def lib():
    return cl.load()


def calibrate(lib, target_s=0.2):
    cal = cl.Calib()
    assert lib.hmb_compute_calibrate(C.byref(cal), target_s) == 0
    return cal


def test_timer(lib):
    res, overhead = C.c_double(), C.c_double()
    lib.hmb_timer_measure(C.byref(res), C.byref(overhead))
    print(f"\ntimer: resolution {res.value:.0f} ns, overhead {overhead.value:.1f} ns per call")
    assert res.value > 0 and overhead.value > 0  # how small: hmb check (timer_*)
    a_ns, a_s = lib.hmb_now_ns(), lib.hmb_now()
    b_ns, b_s = lib.hmb_now_ns(), lib.hmb_now()
    assert b_ns >= a_ns and b_s >= a_s
    assert abs(a_s - a_ns * 1e-9) < 0.01  # the same clock in two units
    seq = [lib.hmb_now_ns() for _ in range(10_000)]
    assert all(y >= x for x, y in zip(seq, seq[1:]))  # monotonic


def test_kernel_is_real_work(lib):
    # A dependent multiply-add chain cannot run faster than one step per cycle; at <= 6 GHz
    # 20M steps take >= 3.3 ms. A removed or vectorised-away loop would be far faster.
    t0 = lib.hmb_now_ns()
    x = lib.hmb_compute_kernel(20_000_000)
    elapsed_ns = lib.hmb_now_ns() - t0
    assert math.isfinite(x) and x != 0.0
    assert elapsed_ns > 20_000_000 / 6.0
    assert lib.hmb_compute_kernel(1000) == lib.hmb_compute_kernel(1000)  # deterministic
    assert math.isfinite(lib.hmb_compute_kernel(0))


def test_calibration(lib):
    cal = calibrate(lib, 0.1)
    print(f"\ncalibration: {cal.iters_per_ns:.4f} iters/ns in {cal.calib_s:.3f} s on cpu {cal.cpu}")
    assert 0.0 < cal.iters_per_ns < 6.0    # one step per cycle at <= 6 GHz is the ceiling
    assert cal.calib_s >= 0.09             # the budget is spent (~0.1 s of trials)
    assert cal.cpu >= 0
    assert lib.hmb_compute_run(C.byref(cal), 0) == 0
    assert lib.hmb_compute_run(C.byref(cal), -5) == 0


def test_calibration_measures_interruptions(lib):
    # The clock-gap probe yields a share of time in [0, 1) and a non-negative rate (their size
    # is hmb check's interrupt_lost_pct).
    cal = calibrate(lib, 0.05)
    assert 0.0 <= cal.interrupt_lost_frac < 1.0
    assert cal.interrupts_per_ns >= 0.0


@pytest.mark.parametrize("rate,lost,per_ns,ns,iters", [
    (2.0, 0.0, 0.0, 1_000_000, 2_000_000),          # no interruptions: ns x rate
    (2.0, 0.1, 1e-3, 1_000_000, 1_800_000),         # 1000 gaps expected: the full 10% share off
    (2.0, 0.1, 1e-9, 1_000, 2_000),                 # 1e-6 gaps expected: 2000 x (1 - 1e-7) rounds to 2000
    (0.5, 0.0, 0.0, 0, 0), (0.5, 0.0, 0.0, -5, 0),  # nothing to do
    (2.0, 0.7, 1.0, 1_000, 2_000),                  # an absurd share (>= 0.5) is ignored
])
def test_compute_iters_by_hand(lib, rate, lost, per_ns, ns, iters):
    cal = cl.Calib(iters_per_ns=rate, interrupt_lost_frac=lost, interrupts_per_ns=per_ns)
    assert lib.hmb_compute_iters(C.byref(cal), ns) == iters


@pytest.mark.parametrize("rate,iters,ns,low", [
    (1.0, 1000, 990, 1),     # 1000 / 990 = 1.0101 iters/ns: over 1 % faster, the rate is low
    (1.0, 1000, 991, 0),     # 1.0091: within 1 %
    (1.0, 1000, 1200, 0),    # slower: a disturbed run says nothing
    (0.0, 1000, 990, 0), (1.0, 0, 990, 0), (1.0, 1000, 0, 0),  # nothing to judge
])
def test_rate_too_low_by_hand(lib, rate, iters, ns, low):
    assert lib.hmb_compute_rate_too_low(rate, iters, ns) == low


def test_observe_raises_on_proof(lib):
    cal = cl.Calib(iters_per_ns=1.0, start_iters_per_ns=1.0)
    lib.hmb_compute_observe(C.byref(cal), 200_000, 200_000)        # on the rate: no change
    lib.hmb_compute_observe(C.byref(cal), 200_000, 250_000)        # slower: no change
    lib.hmb_compute_observe(C.byref(cal), 90_000, 80_000)          # < 100 us: too short to judge
    assert cal.iters_per_ns == 1.0
    lib.hmb_compute_observe(C.byref(cal), 200_000, 195_000)        # 1.0256 iters/ns: proof
    assert cal.iters_per_ns == pytest.approx(200_000 / 195_000)
    lib.hmb_compute_observe(C.byref(cal), 200_000, 196_000)        # slower than the new rate
    assert cal.iters_per_ns == pytest.approx(200_000 / 195_000) and cal.start_iters_per_ns == 1.0


def test_calibrate_verified(lib):
    cal, checks = cl.Calib(), (C.c_int64 * 3)()
    tries = lib.hmb_compute_calibrate_verified(C.byref(cal), 0.02, 3, checks)
    assert 1 <= tries <= 3
    assert cal.iters_per_ns > 0 and cal.start_iters_per_ns == cal.iters_per_ns
    assert all(c > 0 for c in checks)  # the 10 us, 1 ms, 100 ms requests ran at the kept rate
