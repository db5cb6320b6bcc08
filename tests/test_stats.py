"""Statistics (stats.c): median, rank-based CI of the median, quantiles, NaN handling and the
adaptive stopping rule, checked by hand and against numpy / scipy."""
from __future__ import annotations

import ctypes as C
import math
import random

import numpy as np
import pytest
from scipy.stats import binom

import _corelib as cl


@pytest.fixture(scope="module")
def lib():
    return cl.load()


def summarize(lib, values, conf=0.95):
    s = cl.Summary()
    lib.hmb_summarize(cl.doubles(values), len(values), conf, C.byref(s))
    return s


def ranks(lib, n, conf=0.95):
    lo, hi = C.c_long(), C.c_long()
    rc = lib.hmb_median_ci_ranks(n, conf, C.byref(lo), C.byref(hi))
    return rc, lo.value, hi.value


def test_one_to_twenty_by_hand(lib):
    # n = 20, B ~ Bin(20, 1/2). P(B <= 5) = (1+20+190+1140+4845+15504)/2^20 = 21700/1048576
    # = 0.02070, so [x(6), x(15)] (1-based, k = 6) misses the median with probability
    # 2 * 0.02070 = 0.0414 <= 0.05: coverage 95.86%. k = 7 would need P(B <= 6) = 60460/2^20
    # = 0.05766, coverage 88.5% < 95%. 0-based ranks (5, 14) -> values 6 and 15.
    assert ranks(lib, 20) == (0, 5, 14)
    s = summarize(lib, list(range(20, 0, -1)))  # unsorted input
    assert s.count == 20
    assert s.median == 10.5
    assert (s.ci_lo, s.ci_hi, s.ci_valid) == (6.0, 15.0, 1)
    assert (s.min, s.max) == (1.0, 20.0)
    assert s.p95 == pytest.approx(19.05)  # h = 19 * 0.95 = 18.05: x[18] + 0.05 (x[19] - x[18])
    assert s.mean == 10.5
    assert s.stddev == pytest.approx(math.sqrt(35.0))  # sample variance of 1..20 = 20*21/12


def test_small_n_boundaries_by_hand(lib):
    # n = 6: the whole range has coverage 1 - 2/2^6 = 0.96875 >= 0.95 -> valid, ranks (0, 5).
    assert ranks(lib, 6) == (0, 0, 5)
    # n = 5: 1 - 2/2^5 = 0.9375 < 0.95 -> too small.
    for n in range(1, 6):
        assert ranks(lib, n) == (-1, 0, n - 1)
    # n = 9: P(B <= 1) = 10/512 = 0.0195 -> coverage 0.961; P(B <= 2) = 46/512 -> 0.82. k = 2.
    assert ranks(lib, 9) == (0, 1, 7)
    # 99%: n = 8 is the first valid (1 - 2/256 = 0.992), n = 7 is not (1 - 2/128 = 0.984).
    assert ranks(lib, 7, 0.99)[0] == -1 and ranks(lib, 8, 0.99) == (0, 0, 7)


def test_small_sample_invalid_ci_is_whole_range(lib):
    s = summarize(lib, [3.0, 1.0, 2.0, 5.0, 4.0])
    assert s.count == 5 and s.median == 3.0
    assert s.ci_valid == 0 and (s.ci_lo, s.ci_hi) == (1.0, 5.0)
    assert lib.hmb_ci_target_met(C.byref(s), 1.0) == 0  # never "met" on an invalid CI


def test_single_and_empty(lib):
    s = summarize(lib, [7.0])
    assert (s.count, s.median, s.min, s.max, s.p95, s.stddev, s.ci_valid) == (1, 7.0, 7.0, 7.0, 7.0, 0.0, 0)
    s = summarize(lib, [])
    assert s.count == 0 and math.isnan(s.median) and s.ci_valid == 0
    s = summarize(lib, [math.nan, math.nan])
    assert s.count == 0 and math.isnan(s.median) and math.isnan(s.min)


def test_nan_samples_skipped(lib):
    values = [5.0, math.nan, 1.0, 3.0, math.nan, 2.0, 4.0, 6.0, math.nan]
    s = summarize(lib, values)
    clean = [v for v in values if not math.isnan(v)]
    ref = summarize(lib, clean)
    assert s.count == 6
    assert (s.median, s.min, s.max, s.p95, s.ci_lo, s.ci_hi, s.ci_valid) == \
        (ref.median, ref.min, ref.max, ref.p95, ref.ci_lo, ref.ci_hi, ref.ci_valid)
    assert s.median == 3.5 and s.ci_valid == 1


def test_input_not_modified(lib):
    arr = cl.doubles([3.0, 1.0, 2.0])
    s = cl.Summary()
    lib.hmb_summarize(arr, 3, 0.95, C.byref(s))
    assert list(arr) == [3.0, 1.0, 2.0]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 20, 101, 1000])
def test_against_numpy(lib, n):
    rng = random.Random(n)
    values = [rng.lognormvariate(0, 1) for _ in range(n)]
    s = summarize(lib, values)
    assert s.median == pytest.approx(np.median(values), rel=1e-15)
    assert s.p95 == pytest.approx(np.percentile(values, 95, method="linear"), rel=1e-14)
    assert s.mean == pytest.approx(np.mean(values), rel=1e-12)
    assert s.stddev == pytest.approx(np.std(values, ddof=1) if n > 1 else 0.0, rel=1e-10)
    assert (s.min, s.max) == (min(values), max(values))
    srt = sorted(values)
    for q in (0.0, 0.1, 0.5, 0.9, 0.95, 0.99, 1.0):
        got = lib.hmb_quantile_sorted(cl.doubles(srt), n, q)
        assert got == pytest.approx(np.quantile(srt, q, method="linear"), rel=1e-14)


@pytest.mark.parametrize("conf", [0.95, 0.99, 0.90])
def test_coverage_vs_scipy(lib, conf):
    """For every n the interval has coverage >= conf and is the tightest symmetric one."""
    for n in list(range(1, 201)) + [500, 1000, 5000, 20000]:
        rc, lo, hi = ranks(lib, n, conf)
        if rc != 0:
            # Too small: even the whole range falls short.
            assert 1 - 2 * binom.cdf(0, n, 0.5) < conf, n
            continue
        k = lo + 1  # 1-based order statistic
        assert hi == n - k, n  # symmetric
        coverage = 1 - 2 * binom.cdf(k - 1, n, 0.5)
        assert coverage >= conf, (n, k, coverage)
        tighter = 1 - 2 * binom.cdf(k, n, 0.5)
        assert k + 1 > n - k or tighter < conf, (n, k, tighter)
        if n in (10, 50, 100, 200):
            print(f"n={n} conf={conf}: ranks ({lo}, {hi}) coverage {coverage:.4f}")
    assert ranks(lib, 5, 0.95)[0] == -1 and ranks(lib, 6, 0.95)[0] == 0


def test_bad_confidence(lib):
    assert ranks(lib, 100, 1.0)[0] == -1
    assert ranks(lib, 100, 0.0)[0] == -1
    assert ranks(lib, 0, 0.95)[0] == -1


def test_ci_target_met(lib):
    # 1..20: median 10.5, CI [6, 15]: half-widths 4.5 below, 4.5 above -> 42.9% of the median.
    s = summarize(lib, list(range(1, 21)))
    assert lib.hmb_ci_target_met(C.byref(s), 0.43) == 1
    assert lib.hmb_ci_target_met(C.byref(s), 0.42) == 0
    # Asymmetric: the larger side decides. 20 samples: 19 ones and one big value; sorted
    # ranks 5 and 14 are both 1.0 -> half-width 0: met at any target >= 0.
    s = summarize(lib, [1.0] * 19 + [1000.0])
    assert (s.ci_lo, s.median, s.ci_hi) == (1.0, 1.0, 1.0)
    assert lib.hmb_ci_target_met(C.byref(s), 0.0) == 1
    # lo side far: values 1..6 then 100s: median 100, ci_lo = x[5] = 6, ci_hi = 100.
    s = summarize(lib, [1, 2, 3, 4, 5, 6] + [100.0] * 14)
    assert (s.ci_lo, s.median, s.ci_hi) == (6.0, 100.0, 100.0)
    assert lib.hmb_ci_target_met(C.byref(s), 0.93) == 0 and lib.hmb_ci_target_met(C.byref(s), 0.95) == 1
    # Negative medians use |median|.
    s = summarize(lib, [-x for x in range(1, 21)])
    assert lib.hmb_ci_target_met(C.byref(s), 0.43) == 1


def test_large_n_fast(lib):
    # The summary runs after every iteration of an adaptive point: 100k samples must be cheap.
    values = [float(i % 997) for i in range(100_000)]
    t0 = lib.hmb_now()
    s = summarize(lib, values)
    assert lib.hmb_now() - t0 < 2.0
    rc, lo, hi = ranks(lib, 100_000)
    # Normal approximation: k ~ n/2 - 1.96 sqrt(n)/2 = 50000 - 310 (exact answer within a few).
    assert rc == 0 and abs(lo - (50_000 - 310)) <= 3 and hi == 100_000 - lo - 1
    assert s.ci_valid == 1 and s.ci_lo <= s.median <= s.ci_hi
