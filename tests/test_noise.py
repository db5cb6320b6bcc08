"""Noise models (noise.c): distributions, the single-thread choice, reproducibility and
thread independence of the counter-based generator."""
from __future__ import annotations

import ctypes as C
import statistics
import threading

import pytest

import _corelib as cl

BASE = 1_000_000  # 1 ms in ns
DRAWS = 20_000


@pytest.fixture(scope="module")
def lib():
    return cl.load()


def model(lib, spec, seed=1, thread_random=False):
    nz, err = cl.Noise(), C.create_string_buffer(256)
    assert lib.hmb_noise_parse(spec.encode(), C.byref(nz), err, len(err)) == 0, err.value
    nz.seed = seed
    nz.thread_random = int(thread_random)
    return nz


def draws(lib, nz, n=DRAWS, rank=0, tid=0, nthreads=1, base=BASE):
    return [lib.hmb_noise_draw(C.byref(nz), rank, tid, nthreads, it, base) for it in range(n)]


@pytest.mark.parametrize("spec,kind,percent", [
    ("none", cl.NOISE_NONE, 0.0), ("single:50", cl.NOISE_SINGLE, 50.0),
    ("uniform:4", cl.NOISE_UNIFORM, 4.0), ("gaussian:12.5", cl.NOISE_GAUSSIAN, 12.5),
    ("uniform:0", cl.NOISE_UNIFORM, 0.0),
])
def test_parse_good(lib, spec, kind, percent):
    nz = model(lib, spec)
    assert (nz.kind, nz.percent) == (kind, percent)


@pytest.mark.parametrize("spec,needle", [
    ("", "empty"), ("bogus", '"bogus": unknown noise model'), ("uniform", "needs a percentage"),
    ("uniform:", "needs a percentage"), ("uniform:-3", "must not be negative"),
    ("gaussian:abc", "is not a number"), ("none:5", "takes no percentage"),
    ("Uniform:4", "unknown noise model"), ("uniform:4%", "is not a number"),
])
def test_parse_bad(lib, spec, needle):
    nz, err = cl.Noise(), C.create_string_buffer(256)
    assert lib.hmb_noise_parse(spec.encode(), C.byref(nz), err, len(err)) == -1
    assert needle in err.value.decode()


def test_none_is_base(lib):
    nz = model(lib, "none")
    assert set(draws(lib, nz, 1000)) == {BASE}
    assert lib.hmb_noise_draw(C.byref(nz), 0, 0, 1, 0, 0) == 0


def test_uniform(lib):
    p = 10.0
    values = draws(lib, model(lib, f"uniform:{p:g}"))
    assert min(values) >= BASE and max(values) <= BASE * (1 + p / 100)
    # Mean of U[0, P/100] is P/200: 1.05 ms. Its sd is 0.1 ms / sqrt(12) = 28.9 us; over
    # 20k draws the mean's sd is 0.2 us, so 2 us is a 10-sigma bound.
    assert statistics.fmean(values) == pytest.approx(BASE * (1 + p / 200), abs=2000)
    assert statistics.pstdev(values) == pytest.approx(BASE * p / 100 / 12 ** 0.5, rel=0.03)
    # Covers the whole range (not stuck in a corner).
    assert min(values) < BASE * 1.001 and max(values) > BASE * 1.099


def test_gaussian(lib):
    p = 10.0
    values = draws(lib, model(lib, f"gaussian:{p:g}"))
    # N(1 ms, (0.1 ms)^2): the mean's sd over 20k draws is 0.7 us -> 5 us is a 7-sigma bound.
    assert statistics.fmean(values) == pytest.approx(BASE, abs=5000)
    assert statistics.pstdev(values) == pytest.approx(BASE * p / 100, rel=0.03)
    # Shape: ~68.3% within one sd, ~95.4% within two.
    within1 = sum(abs(v - BASE) <= BASE * p / 100 for v in values) / len(values)
    within2 = sum(abs(v - BASE) <= 2 * BASE * p / 100 for v in values) / len(values)
    assert within1 == pytest.approx(0.683, abs=0.02) and within2 == pytest.approx(0.954, abs=0.01)


def test_gaussian_truncated_at_zero(lib):
    # P = 300: sd is 3x the mean, so P(N < 0) = P(Z < -1/3) = 37%: those are clamped to 0.
    values = draws(lib, model(lib, "gaussian:300"))
    assert min(values) == 0
    assert all(v >= 0 for v in values)
    zeros = sum(v == 0 for v in values) / len(values)
    assert zeros == pytest.approx(0.3694, abs=0.02)


@pytest.mark.parametrize("nthreads", [1, 4, 7])
def test_single_fixed(lib, nthreads):
    p = 50.0
    for seed in (1, 2, 12345):
        nz = model(lib, f"single:{p:g}", seed=seed)
        noisy = lib.hmb_noise_single_thread(C.byref(nz), 0, nthreads, 0)
        assert noisy == seed % nthreads
        for it in range(200):
            row = [lib.hmb_noise_draw(C.byref(nz), 0, t, nthreads, it, BASE) for t in range(nthreads)]
            # Exactly one thread computes base (1 + P/100), always the same one.
            assert row[noisy] == BASE * (1 + p / 100)
            assert sorted(row) == [BASE] * (nthreads - 1) + [BASE * (1 + p / 100)]


def test_single_rand_varies(lib):
    nthreads, p = 8, 20.0
    nz = model(lib, f"single:{p:g}", seed=7, thread_random=True)
    chosen = []
    for it in range(2000):
        row = [lib.hmb_noise_draw(C.byref(nz), 3, t, nthreads, it, BASE) for t in range(nthreads)]
        noisy = lib.hmb_noise_single_thread(C.byref(nz), 3, nthreads, it)
        assert row.count(BASE * (1 + p / 100)) == 1 and row[noisy] == BASE * (1 + p / 100)
        chosen.append(noisy)
    counts = [chosen.count(t) for t in range(nthreads)]
    # Every thread is chosen, roughly uniformly (expected 250 each, sd ~15).
    assert min(counts) > 170 and max(counts) < 330, counts
    assert sum(a != b for a, b in zip(chosen, chosen[1:])) > 1500  # varies between iterations


def test_reproducible_and_seeded(lib):
    for spec in ("uniform:10", "gaussian:10"):
        a = draws(lib, model(lib, spec, seed=42), 1000, rank=1, tid=2, nthreads=4)
        b = draws(lib, model(lib, spec, seed=42), 1000, rank=1, tid=2, nthreads=4)
        c = draws(lib, model(lib, spec, seed=43), 1000, rank=1, tid=2, nthreads=4)
        assert a == b
        assert sum(x != y for x, y in zip(a, c)) > 990
    nz = model(lib, "single:10", seed=42, thread_random=True)
    other = model(lib, "single:10", seed=43, thread_random=True)
    picks = [lib.hmb_noise_single_thread(C.byref(nz), 0, 16, it) for it in range(500)]
    assert picks == [lib.hmb_noise_single_thread(C.byref(nz), 0, 16, it) for it in range(500)]
    assert picks != [lib.hmb_noise_single_thread(C.byref(other), 0, 16, it) for it in range(500)]


def test_streams_independent(lib):
    # Different ranks, threads and iterations draw different numbers, uncorrelated.
    nz = model(lib, "uniform:100")
    by_tid = [draws(lib, nz, 2000, tid=t, nthreads=4) for t in range(4)]
    by_rank = [draws(lib, nz, 2000, rank=r, tid=0, nthreads=4) for r in range(3)]
    for series in (by_tid, by_rank):
        for i in range(len(series)):
            for j in range(i + 1, len(series)):
                assert abs(statistics.correlation(series[i], series[j])) < 0.1
    lag = by_tid[0]
    assert abs(statistics.correlation(lag[:-1], lag[1:])) < 0.1


def test_thread_independence(lib):
    """A draw depends only on its coordinates: drawing from many threads at once, in any
    order, gives exactly the sequential answer (no shared generator state)."""
    nz = model(lib, "gaussian:25", seed=99)
    nthreads, iters = 6, 3000
    expected = {t: [lib.hmb_noise_draw(C.byref(nz), 0, t, nthreads, it, BASE) for it in range(iters)]
                for t in range(nthreads)}
    got = {}

    def worker(t):
        # Reverse order and interleaved with other threads' draws.
        got[t] = [lib.hmb_noise_draw(C.byref(nz), 0, t, nthreads, it, BASE)
                  for it in reversed(range(iters))][::-1]

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(nthreads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert got == expected
