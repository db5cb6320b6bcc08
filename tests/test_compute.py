"""The calibrated compute kernel (compute.c) and the clock (timer.c).

Accuracy goal (SPEC §2): a requested 10 us ... 100 ms comes out within max(1 us, 1%) of the
request on an undisturbed core. A compute request is FIXED WORK at the undisturbed rate
(so a slowed-down core shows up as a longer time, which the async benchmark must see). This
2-core VM is never undisturbed: other engineers' jobs take the core away (descheduling), and
the hypervisor takes it ~1300 times a second for ~10 us (1.5-2% of the time, measured with a
clock-gap probe; thread CPU time includes these gaps). A request spanning many such gaps
legitimately runs that much longer. So the test:
  - corrects each trial for descheduling: measured - (wall - thread CPU time), when > 0;
  - judges the MEDIAN of several trials (15 at <= 1 ms, 5 at 10 ms, 3 at 100 ms);
  - below the request: at most max(1 us, 1%) short (running faster than the undisturbed
    rate is a calibration error, nothing else can cause it) -- this is the tight check;
  - above the request: at most max(1 us, 1%) plus the time the core was away, measured by a
    clock-gap probe right before and after the trials: a share `lost` of wall time stretches
    a request r to r / (1 - lost) (documented allowance);
  - retries a duration up to 3 times (re-calibrating): a burst of load from other processes
    can spoil one attempt.
Run with -s to see the measured errors.
"""
from __future__ import annotations

import ctypes as C
import math
import statistics
import time

import pytest

import _corelib as cl

REQUESTS_NS = [(10_000, 15), (100_000, 15), (1_000_000, 15), (10_000_000, 5), (100_000_000, 3)]
ATTEMPTS = 3


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
    assert 0 < res.value <= 1000          # nanosecond clock: at worst 1 us steps
    assert 0 < overhead.value < 10_000    # vDSO read: tens of ns; even a syscall is < 10 us
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
    assert 0.01 < cal.iters_per_ns < 6.0   # one step per cycle at <= 6 GHz is the ceiling
    assert 0.09 <= cal.calib_s < 2.0
    assert cal.cpu >= 0
    assert lib.hmb_compute_run(C.byref(cal), 0) == 0
    assert lib.hmb_compute_run(C.byref(cal), -5) == 0


def test_calibration_measures_interruptions(lib):
    # The clock-gap probe: a share of time lost in [0, 0.5) and a rate consistent with it
    # (each gap counted is > 1 us, so lost share >= rate * 1 us).
    cal = calibrate(lib, 0.05)
    print(f"\ninterruptions: {100 * cal.interrupt_lost_frac:.2f}% of the time, "
          f"{cal.interrupts_per_ns * 1e9:.0f} per second")
    assert 0.0 <= cal.interrupt_lost_frac < 0.5
    assert cal.interrupts_per_ns >= 0.0
    assert cal.interrupt_lost_frac >= cal.interrupts_per_ns * 1000.0 * 0.99


def test_accuracy(lib):
    """SPEC: a request of 10 us ... 100 ms comes out within max(1 us, 1%), judged on the median
    of several trials (time the thread was descheduled by the OS is taken out; the machine's
    own interruptions are not: calibration measures and compensates them)."""
    report = []
    failures = []
    cal = calibrate(lib)
    for request_ns, trials in REQUESTS_NS:
        tol_ns = max(1000.0, 0.01 * request_ns)
        for attempt in range(1, ATTEMPTS + 1):
            measured = []
            for _ in range(trials):
                cpu0_ns, wall0_ns = time.thread_time_ns(), time.monotonic_ns()
                got_ns = lib.hmb_compute_run(C.byref(cal), request_ns)
                descheduled_ns = (time.monotonic_ns() - wall0_ns) - (time.thread_time_ns() - cpu0_ns)
                measured.append(got_ns - max(0, descheduled_ns))
            median = statistics.median(measured)
            err_ns = median - request_ns
            ok = abs(err_ns) <= tol_ns
            line = (f"request {request_ns / 1e3:>9.0f} us: median {median / 1e3:11.3f} us, "
                    f"error {100 * err_ns / request_ns:+6.2f}% ({err_ns / 1e3:+8.3f} us), "
                    f"tolerance +-{tol_ns / 1e3:.3f} us (machine interruptions compensated: "
                    f"{100 * cal.interrupt_lost_frac:.2f}%), attempt {attempt}, min {min(measured) / 1e3:.3f} us")
            report.append(line)
            if ok:
                break
            cal = calibrate(lib)  # retry with a fresh calibration
        else:
            failures.append(line)
    print("\ncompute accuracy (median of trials):\n  " + "\n  ".join(report))
    assert not failures, "\n".join(failures)
