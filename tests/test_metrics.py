"""Metric formulas (metrics.c) on synthetic timelines whose answers are computed by hand in
the comments. Times are in seconds (the formulas are unit-agnostic except bandwidth, B/s)."""
from __future__ import annotations

import ctypes as C
import math

import pytest

import _corelib as cl


@pytest.fixture(scope="module")
def lib():
    return cl.load()


def part(lib, s, a, t_join, t_pt2pt, t_persist, m_bytes, t_polled=math.nan):
    """t_polled NaN: a run whose polled-receive phase is off (--no-polled)."""
    out = cl.PartMetrics()
    rc = lib.hmb_part_metrics_compute(len(s), cl.doubles(s), cl.doubles(a), t_join, t_pt2pt, t_persist, t_polled,
                                      m_bytes, C.byref(out))
    return rc, out


# ------------------------------------------------------------------ partitioned metrics

def test_part_four_partitions(lib):
    # s = [1, 2, 3, 4], a = [1.5, 2.5, 3.5, 5], t_join = 4, t_pt2pt = 2, t_persist = 4, m = 1000
    #   t_part = max a - min s = 5 - 1 = 4;  overhead = 4 / 2 = 2;  overhead_persistent = 4 / 4 = 1
    #   L = partition made ready last = #3 (s = 4): a_L - s_L = 1 -> bw = 1000 B / 1 s
    #   t_after_join = 5 - 4 = 1 -> availability = 1 - 1/2 = 0.5
    #   early_bird: a <= 4 for #0, #1, #2 -> 3 of 4 equal partitions = 0.75 of the bytes
    rc, m = part(lib, [1.0, 2.0, 3.0, 4.0], [1.5, 2.5, 3.5, 5.0], 4.0, 2.0, 4.0, 1000)
    assert rc == 0
    assert (m.t_part_s, m.t_pt2pt_s, m.t_persist_s) == (4.0, 2.0, 4.0)
    assert (m.overhead, m.overhead_persistent) == (2.0, 1.0)
    assert m.perceived_bw_Bps == 1000.0
    assert (m.t_after_join_s, m.availability, m.early_bird) == (1.0, 0.5, 0.75)


def test_part_single_partition_no_early_bird(lib):
    # P = 1: s = t_join = 2, a = 3; t_pt2pt = 1, t_persist = 0.5, m = 8
    #   t_part = 1, overhead = 1, overhead_persistent = 1 / 0.5 = 2, bw = 8 B / 1 s,
    #   t_after_join = 1, availability 0; a = 3 > t_join -> early_bird 0 (the ICPP'22 suite
    #   showed 50% here by taking the join from the other phase)
    rc, m = part(lib, [2.0], [3.0], 2.0, 1.0, 0.5, 8)
    assert rc == 0
    assert (m.t_part_s, m.overhead, m.overhead_persistent, m.perceived_bw_Bps) == (1.0, 1.0, 2.0, 8.0)
    assert (m.t_after_join_s, m.availability, m.early_bird) == (1.0, 0.0, 0.0)


def test_part_no_early_transfer_scores_zero(lib):
    # A library that sends nothing before the last Pready (MPICH): thread 0 readies partition 0
    # at 1, thread 1 computes until t_join = 10 and readies partition 1 at 10; both arrive at 11.
    # Nothing arrived by the join -> early_bird 0. (The first spec's interval union
    # |U n [1, 10]| / |U|, U = [1, 11], scored this 0.9: it counted partition 0 waiting.)
    #   t_part = 11 - 1 = 10 -> overhead 10 / 1 = 10, overhead_persistent 10 / 2 = 5
    rc, m = part(lib, [1.0, 10.0], [11.0, 11.0], 10.0, 1.0, 2.0, 2000)
    assert rc == 0
    assert m.early_bird == 0.0
    assert (m.overhead, m.overhead_persistent) == (10.0, 5.0)


def test_part_early_transfer_counts_delivered_bytes(lib):
    # The same threads on a library that sends early: partition 0 arrives at 1.5, while
    # thread 1 still computes; partition 1 arrives at 10.5 -> 1 of 2 partitions by the join.
    rc, m = part(lib, [1.0, 10.0], [1.5, 10.5], 10.0, 1.0, 1.0, 2000)
    assert rc == 0 and m.early_bird == 0.5
    # An arrival exactly at the join counts as before it (a <= t_join); four partitions, one
    # arrived at 2 < 4, one exactly at 4, two after -> 2 / 4.
    rc, m = part(lib, [1.0, 2.0, 4.0, 4.0], [2.0, 4.0, 5.0, 6.0], 4.0, 1.0, 1.0, 4000)
    assert rc == 0 and m.early_bird == 0.5


def test_part_late_partition(lib):
    # Three partitions ready at 1 and arrived at 1.5; one late thread readies its partition
    # at 3 (= t_join) and it arrives at 3.5. t_pt2pt = 0.5, t_persist = 0.25, m = 4000.
    #   t_part = 3.5 - 1 = 2.5 -> overhead 5, overhead_persistent 10;  L = #3: bw = 4000 / 0.5
    #   t_after_join = 0.5 -> availability 1 - 0.5/0.5 = 0;  early_bird 3 / 4
    rc, m = part(lib, [1.0, 1.0, 1.0, 3.0], [1.5, 1.5, 1.5, 3.5], 3.0, 0.5, 0.25, 4000)
    assert rc == 0
    assert (m.t_part_s, m.overhead, m.overhead_persistent, m.perceived_bw_Bps) == (2.5, 5.0, 10.0, 8000.0)
    assert (m.t_after_join_s, m.availability, m.early_bird) == (0.5, 0.0, 0.75)


def test_part_after_join_clamped_at_zero(lib):
    # Everything arrived (1.5) before the join (3): t_after_join = max(0, 1.5 - 3) = 0, so
    # availability = 1, and every byte arrived by the join -> early_bird 1.
    rc, m = part(lib, [0.0, 0.5], [1.0, 1.5], 3.0, 1.0, 1.0, 64)
    assert rc == 0
    assert m.t_after_join_s == 0.0 and m.availability == 1.0 and m.early_bird == 1.0
    assert m.perceived_bw_Bps == 64.0  # L = #1: 64 B / (1.5 - 0.5) s


def test_part_realistic_microseconds(lib):
    # 1 MiB in 4 partitions, us-scale timeline; the first case scaled by 1e-6.
    s = [1e-6, 2e-6, 3e-6, 4e-6]
    a = [1.5e-6, 2.5e-6, 3.5e-6, 5e-6]
    rc, m = part(lib, s, a, 4e-6, 2e-6, 4e-6, 1 << 20)
    assert rc == 0
    assert m.overhead == pytest.approx(2.0) and m.overhead_persistent == pytest.approx(1.0)
    assert m.perceived_bw_Bps == pytest.approx((1 << 20) / 1e-6)   # 1.05e12 B/s
    assert m.availability == pytest.approx(0.5) and m.early_bird == 0.75


def test_part_pieces_of_mismatched_partitions(lib):
    # 2 send partitions, 1 receive partition -> lcm 2 pieces: piece k has its own send
    # partition's s and the (only) receive partition's a. Thread 0 readies at 1, thread 1
    # (late) at 3 = t_join; the receive partition arrives at 4. m = 100.
    #   t_part = 4 - 1 = 3 (from the FIRST Pready, not the latest one overlapping the receive
    #   partition) -> overhead 3 / 1.5 = 2, overhead_persistent 3 / 3 = 1
    #   L = piece 1 (s = 3): bw = 100 / (4 - 3) = 100;  nothing arrived by 3 -> early_bird 0
    rc, m = part(lib, [1.0, 3.0], [4.0, 4.0], 3.0, 1.5, 3.0, 100)
    assert rc == 0
    assert (m.t_part_s, m.overhead, m.overhead_persistent, m.perceived_bw_Bps) == (3.0, 2.0, 1.0, 100.0)
    assert m.early_bird == 0.0


def test_part_early_bird_counts_bytes_across_partition_counts(lib):
    # 2 send partitions over 3 receive partitions of m = 600 B -> lcm 6 pieces of 100 B.
    # Send partition 0 (pieces 0-2) ready at 1, send partition 1 (pieces 3-5) at 2 = t_join.
    # Receive partition 0 (pieces 0, 1) arrives at 1.5, 1 (pieces 2, 3) at 2, 2 (pieces 4, 5) at 3.
    #   bytes arrived by the join: receive partitions 0 and 1 = 400 B of 600 -> early_bird 2/3
    #   t_part = 3 - 1 = 2;  L: max s = 2 (pieces 3-5), the last of them to arrive (3) -> 600 / 1
    s = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
    a = [1.5, 1.5, 2.0, 2.0, 3.0, 3.0]
    rc, m = part(lib, s, a, 2.0, 1.0, 1.0, 600)
    assert rc == 0
    assert m.early_bird == pytest.approx(2 / 3)
    assert (m.t_part_s, m.perceived_bw_Bps) == (2.0, 600.0)


def test_part_last_ready_ties_take_the_last_arrival(lib):
    # 1 send partition split over 2 receive partitions -> 2 pieces with the same s = 2 but
    # arrivals 3 and 5: L must be the piece that arrived last: bw = 10 / (5 - 2).
    rc, m = part(lib, [2.0, 2.0], [3.0, 5.0], 2.0, 1.0, 1.0, 10)
    assert rc == 0 and m.perceived_bw_Bps == pytest.approx(10 / 3)
    rc, m = part(lib, [2.0, 2.0], [5.0, 3.0], 2.0, 1.0, 1.0, 10)   # order does not matter
    assert rc == 0 and m.perceived_bw_Bps == pytest.approx(10 / 3)


def test_part_polled_baseline_the_blocking_wait_is_the_difference(lib):
    # One partition, the partitioned receiver polling: s = t_join = 2, a = 2.0001 -> t_part =
    # 100 us. The blocking MPI_Recv baseline took t_pt2pt = 200 us, the same send with a receiver
    # polling MPI_Test t_polled = 100 us, the persistent one t_persist = 250 us.
    #   overhead = 100 / 200 = 0.5 (below the paper's ~1), overhead_persistent = 100 / 250 = 0.4
    #   overhead_polled = 100 / 100 = 1: against a polling receiver the partitioned request costs
    #   what a send costs; polled_over_blocking = 100 / 200 = 0.5: the blocking wait is the gap
    rc, m = part(lib, [2.0], [2.0001], 2.0, 200e-6, 250e-6, 4096, t_polled=100e-6)
    assert rc == 0
    assert m.t_polled_s == 100e-6 and m.t_pt2pt_s == 200e-6
    assert m.overhead == pytest.approx(0.5) and m.overhead_persistent == pytest.approx(0.4)
    assert m.overhead_polled == pytest.approx(1.0)
    assert m.polled_over_blocking == pytest.approx(0.5)


def test_part_polled_baseline_the_partitioned_request_is_the_difference(lib):
    # The other reading: polling the receive changes nothing (t_polled = t_pt2pt = 4) while the
    # partitioned request is faster. Two partitions, both readied at the join: s = [5, 5],
    # a = [6, 7], t_join = 5 -> t_part = 7 - 5 = 2.
    #   overhead = overhead_polled = 2 / 4 = 0.5; polled_over_blocking = 4 / 4 = 1
    #   (the other metrics do not move: availability = 1 - (7 - 5) / 4 = 0.5)
    rc, m = part(lib, [5.0, 5.0], [6.0, 7.0], 5.0, 4.0, 4.0, 64, t_polled=4.0)
    assert rc == 0
    assert (m.overhead, m.overhead_polled, m.polled_over_blocking) == (0.5, 0.5, 1.0)
    assert m.availability == 0.5


def test_part_polled_baseline_against_a_slower_blocking_receive(lib):
    # Four partitions: s = [1, 1, 1, 3], a = [1.5, 1.5, 1.5, 3.5] -> t_part = 3.5 - 1 = 2.5.
    # t_pt2pt = 0.5 (blocking), t_polled = 0.25, t_persist = 1:
    #   overhead = 5, overhead_persistent = 2.5, overhead_polled = 2.5 / 0.25 = 10,
    #   polled_over_blocking = 0.25 / 0.5 = 0.5
    rc, m = part(lib, [1.0, 1.0, 1.0, 3.0], [1.5, 1.5, 1.5, 3.5], 3.0, 0.5, 1.0, 4000, t_polled=0.25)
    assert rc == 0
    assert (m.overhead, m.overhead_persistent, m.overhead_polled, m.polled_over_blocking) == (5.0, 2.5, 10.0, 0.5)


def test_part_polled_baseline_absent_or_unusable(lib):
    # The polled phase off (NaN) or a non-positive time: only overhead_polled and
    # polled_over_blocking are NaN; t_part 1, overhead 1 / 1, overhead_persistent 1 / 2 remain.
    for bad in (math.nan, 0.0, -1.0):
        rc, m = part(lib, [1.0], [2.0], 1.0, 1.0, 2.0, 8, t_polled=bad)
        assert rc == 0
        assert math.isnan(m.overhead_polled) and math.isnan(m.polled_over_blocking)
        assert (m.t_part_s, m.overhead, m.overhead_persistent) == (1.0, 1.0, 0.5)
    # and an unusable blocking baseline still makes the whole sample unusable, polled or not
    assert part(lib, [1.0], [2.0], 1.0, 0.0, 1.0, 8, t_polled=1.0)[0] == -1


def test_part_bad_inputs(lib):
    assert part(lib, [], [], 0.0, 1.0, 1.0, 8)[0] == -1          # no partitions
    for bad in (0.0, -1.0, math.nan):                            # the MPI_Send baseline must be > 0
        assert part(lib, [1.0], [2.0], 1.0, bad, 1.0, 8)[0] == -1
        # a bad persistent baseline loses overhead_persistent only: t_part 1, overhead 1 / 1
        rc, m = part(lib, [1.0], [2.0], 1.0, 1.0, bad, 8)
        assert rc == 0 and math.isnan(m.overhead_persistent) and m.overhead == 1.0 and m.t_part_s == 1.0
    # An arrival before its ready time is reported as is (a clock problem the user must see):
    # t_part = 0.5 - 1 < 0, and the arrival (0.5) precedes the join (1) -> early_bird 1.
    # a_L - s_L = -0.5 <= 0: no bandwidth is defined; NaN and rc 1 (the sample is invalid), not +inf.
    rc, m = part(lib, [1.0], [0.5], 1.0, 1.0, 1.0, 8)
    assert rc == 1 and m.t_part_s == -0.5 and m.early_bird == 1.0
    assert math.isnan(m.perceived_bw_Bps)
    # a_L - s_L = 0 exactly: the same
    rc, m = part(lib, [1.0], [1.0], 1.0, 1.0, 1.0, 8)
    assert rc == 1 and math.isnan(m.perceived_bw_Bps)


# ------------------------------------------------------------------ async, overlap, projection, eager

def test_async_efficiency(lib):
    # T_over = T_total - C. E = 100 (1 - T_over / T_sync).
    assert lib.hmb_async_overhead(1.5, 1.0) == 0.5
    assert lib.hmb_async_efficiency_pct(1.5, 1.0, 1.0) == 50.0     # half the comm hidden
    assert lib.hmb_async_efficiency_pct(1.0, 1.0, 1.0) == 100.0    # all hidden
    assert lib.hmb_async_efficiency_pct(2.0, 1.0, 1.0) == 0.0      # nothing hidden
    assert lib.hmb_async_efficiency_pct(3.0, 1.0, 1.0) == -100.0   # worse than blocking: negative
    assert lib.hmb_async_efficiency_pct(9e-6, 8e-6, 4e-6) == pytest.approx(75.0)


@pytest.mark.parametrize("comm,comp,overall,pct", [
    (2.0, 3.0, 4.0, 50.0),    # (2 + 3 - 4) / 2
    (2.0, 3.0, 3.0, 100.0),   # comm fully hidden
    (2.0, 3.0, 5.0, 0.0),     # serial
    (2.0, 3.0, 6.0, 0.0),     # slower than serial: -50 clamped to 0
    (2.0, 3.0, 2.0, 100.0),   # faster than the compute alone: 150 clamped to 100
    (0.0, 3.0, 3.0, 0.0),     # no communication: 0, not a division by zero
])
def test_overlap_pct(lib, comm, comp, overall, pct):
    assert lib.hmb_overlap_pct(comm, comp, overall) == pct


@pytest.mark.parametrize("comm,comp,overall,pct", [
    (2.0, 3.0, 4.0, 50.0),    # (2 + 3 - 4) / 2, as clamped
    (2.0, 3.0, 6.0, -50.0),   # slower than serial: (2 + 3 - 6) / 2, kept (seed 001's "overlap ≤ 10 %")
    (2.0, 3.0, 2.0, 150.0),   # faster than the compute alone, kept
    (0.0, 3.0, 3.0, 0.0),     # no communication: 0
])
def test_overlap_unclamped_pct(lib, comm, comp, overall, pct):
    assert lib.hmb_overlap_unclamped_pct(comm, comp, overall) == pct


@pytest.mark.parametrize("f,s,speedup", [
    (0.5, 2.0, 4 / 3),        # 1 / (0.5 + 0.25)
    (0.0, 10.0, 1.0),         # no p2p time: nothing to gain
    (1.0, 3.0, 3.0),          # all p2p: the full speed-up
    (0.2, 0.5, 1 / 1.2),      # a slow-down projects to < 1: 1 / (0.8 + 0.4)
])
def test_projected_speedup(lib, f, s, speedup):
    assert lib.hmb_projected_speedup(f, s) == pytest.approx(speedup)


@pytest.mark.parametrize("mean,header,threshold", [
    (3000.0, 0, 4096 + 1024),     # log2(3000) = 11.55 -> 2^12 + 1024
    (4096.0, 0, 4096 + 1024),     # exact power of two stays
    (4000.0, 96, 4096 + 1024),    # 4000 + 96 = 4096
    (4097.0, 0, 8192 + 1024),
    (3000.0, 2000, 8192 + 1024),  # 5000 -> 2^13
    (1.0, 0, 1 + 1024),
    (1.5, 0, 2 + 1024),
    (0.0, 0, 1 + 1024),
    (1e6, 64, (1 << 20) + 1024),
])
def test_eager_threshold_rule(lib, mean, header, threshold):
    assert lib.hmb_eager_threshold_rule(mean, header) == threshold


# ------------------------------------------------------------------ sweep3d (KBA pipeline)

@pytest.fixture(scope="module")
def kba(lib):
    return lib


@pytest.mark.parametrize("px,py,k,idle", [
    (2, 1, 4, 0.2),           # stages 4 + 1 + 0 = 5: computing 4 of 5
    (2, 2, 4, 1 / 3),         # 4 + 1 + 1 = 6: 1 - 4/6
    (3, 3, 2, 2 / 3),         # 2 + 2 + 2 = 6: 1 - 2/6
    (1, 1, 8, 0.0),           # one rank: no pipeline to fill
    (4, 1, 1, 0.75),          # one k-block: 1 + 3 = 4 stages, 1 busy
    (8, 8, 50, 14 / 64),      # 50 + 7 + 7 = 64
])
def test_kba_ideal_idle_share(kba, px, py, k, idle):
    assert kba.hmb_kba_ideal_idle_share(px, py, k) == pytest.approx(idle)


@pytest.mark.parametrize("px,py,k", [(0, 1, 4), (2, 0, 4), (2, 2, 0), (-1, 2, 2)])
def test_kba_ideal_idle_share_rejects_empty_grids(kba, px, py, k):
    assert math.isnan(kba.hmb_kba_ideal_idle_share(px, py, k))


def test_idle_share(kba):
    # a rank that computed 3 ms of a 4 ms sweep was idle a quarter of it
    assert kba.hmb_idle_share(3e-3, 4e-3) == pytest.approx(0.25)
    assert kba.hmb_idle_share(4e-3, 4e-3) == 0.0
    assert kba.hmb_idle_share(0.0, 2.0) == 1.0
    for bad in (0.0, -1.0, math.nan):                 # no elapsed time: no share
        assert math.isnan(kba.hmb_idle_share(1.0, bad))
# ------------------------------------------------------------------ pattern throughput (halo3d, sweep3d)

def pattern_rates(lib, nbytes, t_s):
    fn = lib.hmb_pattern_rates
    n = len(t_s)
    thr, ratio = (C.c_double * n)(), (C.c_double * n)()
    fn(n, cl.doubles(nbytes), cl.doubles(t_s), thr, ratio)
    return list(thr), list(ratio)


def test_throughput_divides_bytes_per_process_by_the_region(lib):
    fn = lib.hmb_throughput_Bps
    # 6 faces of 1 KiB per process per exchange in a 1.024 ms T_comm: 6144 B / 1.024e-3 s = 6e6 B/s
    assert fn(6144.0, 1.024e-3) == pytest.approx(6e6)
    # nothing exchanged (--comm off): no throughput, not 0 B/s; nor without a positive time
    for nbytes, t in ((0.0, 1e-3), (6144.0, 0.0), (6144.0, -1e-3)):
        assert math.isnan(fn(nbytes, t)), (nbytes, t)


def test_pattern_rates_three_modes(lib):
    # 6 MB per rank per iteration in every mode; single 2 ms, multiple 1 ms, partitioned 4 ms:
    #   throughput = 6e6 / 2e-3 = 3e9, 6e6 / 1e-3 = 6e9, 6e6 / 4e-3 = 1.5e9 B/s;  ratio = 1, 2, 0.5
    thr, ratio = pattern_rates(lib, [6e6, 6e6, 6e6], [2e-3, 1e-3, 4e-3])
    assert thr == [3e9, 6e9, 1.5e9]
    assert ratio == [1.0, 2.0, 0.5]


def test_pattern_rates_modes_not_run(lib):
    # single not run (NaN): throughputs of the others stand, every ratio is NaN;
    # a mode with no time (0) has no throughput and no ratio
    thr, ratio = pattern_rates(lib, [1e3, 1e3, 1e3], [math.nan, 5e-4, 0.0])
    assert math.isnan(thr[0]) and thr[1] == 2e6 and math.isnan(thr[2])
    assert all(math.isnan(r) for r in ratio)


# ---- proto probe, view both: the transfer outstanding after the compute ----
@pytest.fixture
def probe(lib):
    return lib


@pytest.mark.parametrize("sender_start, sender_end, receiver_start, outstanding", [
    (60e-6, 102.5e-6, 100e-6, 2.5e-6),   # the receiver came back at 100 us, the send completed 2.5 us later
    (60e-6, 60.03e-6, 75e-6, 0.0),       # an eager send completed locally, before the receiver came back
    (60e-6, 61e-6, 60e-6, 1e-6),         # both came back at once: the whole wait
])
def test_probe_outstanding(probe, sender_start, sender_end, receiver_start, outstanding):
    assert probe.hmb_probe_outstanding(sender_start, sender_end, receiver_start) == pytest.approx(outstanding)


@pytest.mark.parametrize("sender_start, sender_end, receiver_start", [
    (60e-6, 70e-6, 58e-6),               # the receiver came back first: it may have done the work alone
    (60e-6, 59e-6, 65e-6),               # a wait that ends before it starts
    (60e-6, math.inf, 65e-6), (math.nan, 70e-6, 65e-6), (60e-6, 70e-6, -math.inf),
])
def test_probe_outstanding_no_reading(probe, sender_start, sender_end, receiver_start):
    assert math.isnan(probe.hmb_probe_outstanding(sender_start, sender_end, receiver_start))


@pytest.mark.parametrize("outstanding, transfer, share", [
    (0.0, 2.07e-6, 0.0),                 # MPICH 8112 B eager: completed locally
    (4.6e-6, 2.69e-6, 4.6 / 2.69),       # MPICH 8128 B rendezvous: handshake and the receiver's copy
    (3e-6, 1e-6, 3.0),                   # more than the whole no-compute transfer: kept as is
])
def test_probe_outstanding_share(probe, outstanding, transfer, share):
    assert probe.hmb_probe_outstanding_share(outstanding, transfer) == pytest.approx(share)


@pytest.mark.parametrize("outstanding, transfer", [(1e-6, 0.0), (1e-6, -1e-6), (-1e-9, 1e-6), (math.nan, 1e-6),
                                                   (1e-6, math.nan)])
def test_probe_outstanding_share_unusable(probe, outstanding, transfer):
    assert math.isnan(probe.hmb_probe_outstanding_share(outstanding, transfer))


# ---- proto probe, view step: change point of the per-size cost curve (hmb_changepoint_fit) ----
def changepoint(lib, x, y, noise=0.0):
    out = cl.Changepoint()
    rc = lib.hmb_changepoint_fit(len(x), cl.doubles(x), cl.doubles(y), noise, C.byref(out))
    return rc, out


def test_changepoint_clean_step(lib):
    # x = 1..6, y = 1,1,1,3,3,3: only k = 3 leaves 3 points a side; both lines flat and exact
    #   left a=1 b=0, right a=3 b=0, rss 0, sigma 0; jump at m = 3.5: 3 - 1 = 2 -> a step
    #   one line: mean x 3.5, mean y 2, Sxx 17.5, Sxy 9, Syy 6 -> rss_line = 6 - 81/17.5
    rc, cp = changepoint(lib, [1, 2, 3, 4, 5, 6], [1, 1, 1, 3, 3, 3])
    assert rc == 0
    assert (cp.index, cp.lo, cp.hi) == (3, 3.0, 4.0)
    assert (cp.a_left, cp.b_left, cp.a_right, cp.b_right) == pytest.approx((1, 0, 3, 0), abs=1e-12)
    assert cp.jump == pytest.approx(2.0)
    assert cp.rss == pytest.approx(0.0, abs=1e-12) and cp.sigma == pytest.approx(0.0, abs=1e-6)
    assert cp.rss_line == pytest.approx(6 - 81 / 17.5)
    assert cp.step == 1


def test_changepoint_picks_the_break_with_least_residual(lib):
    # x = 1..7, y = 0,0,0,0,5,5,5: k = 3 leaves right x=4..7 y=0,5,5,5 (mean 5.5, 3.75; Sxx 5,
    # Sxy 7.5, Syy 18.75 -> rss 18.75 - 7.5^2/5 = 7.5); k = 4: both sides exact (rss 0) -> k = 4
    rc, cp = changepoint(lib, [1, 2, 3, 4, 5, 6, 7], [0, 0, 0, 0, 5, 5, 5])
    assert rc == 0 and (cp.index, cp.lo, cp.hi) == (4, 4.0, 5.0)
    assert cp.jump == pytest.approx(5.0) and cp.step == 1


def test_changepoint_slopes_and_jump_at_the_midpoint(lib):
    # left y = 1 + 0.5 x (x = 1..4), right y = 4 + x (x = 5..8): k = 4 exact;
    # at m = 4.5: right 8.5, left 3.25 -> jump 5.25; slopes 0.5 and 1
    x = [1, 2, 3, 4, 5, 6, 7, 8]
    y = [1.5, 2, 2.5, 3, 9, 10, 11, 12]
    rc, cp = changepoint(lib, x, y)
    assert rc == 0 and (cp.index, cp.lo, cp.hi) == (4, 4.0, 5.0)
    assert (cp.a_left, cp.b_left, cp.a_right, cp.b_right) == pytest.approx((1, 0.5, 4, 1))
    assert cp.jump == pytest.approx(5.25) and cp.step == 1
    # sides: at x = 4.5 the left line is 3.25, the right 8.5; the midpoint 5.875 goes left (not strictly nearer)
    assert lib.hmb_changepoint_side(C.byref(cp), 4.5, 3.3) == 0
    assert lib.hmb_changepoint_side(C.byref(cp), 4.5, 8.0) == 1
    assert lib.hmb_changepoint_side(C.byref(cp), 4.5, 5.875) == 0
    assert lib.hmb_changepoint_side(C.byref(cp), 4.5, math.nan) == -1


def test_changepoint_noise_is_not_a_step(lib):
    # y = x + (-1, +1, -1, +1, -1, +1): only k = 3
    #   left (1,0) (2,3) (3,2): b = 1, a = -1/3, residuals -2/3, 4/3, -2/3 -> rss 8/3
    #   right (4,5) (5,4) (6,7): b = 1, a = 1/3, residuals 2/3, -4/3, 2/3 -> rss 8/3
    #   jump at 3.5: (1/3 + 3.5) - (-1/3 + 3.5) = 2/3, sigma = sqrt((16/3) / 2) = 1.633:
    #   2/3 < 3 sigma -> no step
    rc, cp = changepoint(lib, [1, 2, 3, 4, 5, 6], [0, 3, 2, 5, 4, 7])
    assert rc == 0 and cp.index == 3
    assert cp.jump == pytest.approx(2 / 3) and cp.rss == pytest.approx(16 / 3)
    assert cp.sigma == pytest.approx(math.sqrt(8 / 3))
    assert cp.step == 0
    # a clean step is judged against the curve's noise when that is larger than the lines' spread:
    # jump 2 >= 3 x 0.6 is a step, 2 < 3 x 0.7 is not
    assert changepoint(lib, [1, 2, 3, 4, 5, 6], [1, 1, 1, 3, 3, 3], noise=0.6)[1].step == 1
    assert changepoint(lib, [1, 2, 3, 4, 5, 6], [1, 1, 1, 3, 3, 3], noise=0.7)[1].step == 0
    # a step down (cheaper above the break: MPICH's single copy above a 64 KB eager limit) is a step
    rc, cp = changepoint(lib, [1, 2, 3, 4, 5, 6], [3, 3, 3, 1, 1, 1])
    assert rc == 0 and cp.jump == pytest.approx(-2.0) and cp.step == 1


@pytest.mark.parametrize("x, y", [
    ([1, 2, 3, 4, 5], [0, 0, 0, 1, 1]),                 # fewer than 3 points a side
    ([1, 2, 3, 3, 5, 6], [0, 0, 0, 1, 1, 1]),           # x not increasing
    ([1, 2, 3, 4, 5, 6], [0, 0, math.nan, 1, 1, 1]),    # a size without a cost
])
def test_changepoint_unusable(lib, x, y):
    rc, cp = changepoint(lib, x, y)
    assert rc == -1 and cp.index == -1 and math.isnan(cp.jump) and cp.step == 0
    assert lib.hmb_changepoint_side(C.byref(cp), 3.0, 1.0) == -1


def test_cost_noise(lib):
    # y = 0,1,0,1,0,1,0: differences +1,-1,+1,-1,+1,-1, median 0, absolute deviations all 1 ->
    # MAD 1 -> 1.4826 / sqrt(2); a trend adds a constant to every difference and changes nothing;
    # one step (5) among 6 differences moves neither median
    assert lib.hmb_cost_noise(7, cl.doubles([0, 1, 0, 1, 0, 1, 0])) == pytest.approx(1.4826 / math.sqrt(2))
    assert lib.hmb_cost_noise(7, cl.doubles([0, 3, 4, 7, 8, 11, 12])) == pytest.approx(1.4826 / math.sqrt(2))
    assert lib.hmb_cost_noise(7, cl.doubles([0, 0, 0, 5, 5, 5, 5])) == 0.0
    assert math.isnan(lib.hmb_cost_noise(2, cl.doubles([0, 1])))


def steps(lib, x, y, max_out=8):
    out = (cl.Changepoint * max_out)()
    n = lib.hmb_changepoint_steps(len(x), cl.doubles(x), cl.doubles(y), out, max_out)
    return n, [out[i] for i in range(max(0, min(n, max_out)))]


def test_changepoint_steps_two_steps(lib):
    # y = 0 (x 1..3), 5 (x 4..9), 10 (x 10..12); differences all 0 but two 5s -> noise 0. Whichever
    # break the whole curve takes first (3|4 or 9|10), the other side still holds the other step,
    # exact on both lines (jump 5 each); flat sub-segments break with jump 0, not steps.
    x = list(range(1, 13))
    y = [0, 0, 0, 5, 5, 5, 5, 5, 5, 10, 10, 10]
    n, found = steps(lib, x, y)
    assert n == 2
    assert [(c.lo, c.hi) for c in found] == [(3.0, 4.0), (9.0, 10.0)]
    assert [c.jump for c in found] == pytest.approx([5.0, 5.0])
    n, found = steps(lib, x, y, max_out=1)       # counted, only max_out stored
    assert n == 2 and (found[0].lo, found[0].hi) == (3.0, 4.0)


def test_changepoint_steps_bend_is_not_a_step(lib):
    # y = x up to x = 7, then 7 + 3 (x - 7): the slope changes at the grid point 7, no jump. Noise:
    # differences 1 (x6) and 3 (x6), median 2, deviations all 1 -> 1.4826 / sqrt(2) = 1.048.
    # Every break the segmentation keeps lies where both lines are exact and meet: jump 0, no step.
    x = list(range(1, 14))
    y = [float(v) if v <= 7 else 7 + 3.0 * (v - 7) for v in x]
    assert steps(lib, x, y)[0] == 0
    # the same bend with a step of 10 at 3|4: y = 1, 2, 3, 14, 15, 16, 17, 20, ... 35. Noise still
    # 1.048 (differences 1 x5, 11, 3 x6: median 3; deviations 0 x6, 2 x5, 8: median 1). The whole curve splits
    # at 3|4 (residual 15.95 against 47.3, more than 3 ln 13 x 1.048^2 = 8.5 less), its right side
    # at the bend (exact lines: 15.95 less, more than 3 ln 10 x 1.1 = 7.6). Between its neighbouring
    # breaks the step at 3|4 has exact lines: jump 10 >= 3 x 1.048; the bend's jump is 0.
    y2 = [v + (10 if i >= 3 else 0) for i, v in enumerate(y)]
    n, found = steps(lib, x, y2)
    assert n == 1 and (found[0].lo, found[0].hi) == (3.0, 4.0) and found[0].jump == pytest.approx(10.0)


def test_changepoint_steps_unusable(lib):
    assert steps(lib, [1, 2, 3, 4, 5], [0, 0, 0, 1, 1])[0] == -1
    assert steps(lib, [1, 2, 3, 4, 5, 6], [0, 0, math.nan, 1, 1, 1])[0] == -1
