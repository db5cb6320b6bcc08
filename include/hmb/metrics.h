/* HMB metric formulas: every formula lives here, once, and is unit-tested on synthetic
 * timelines (tests/test_metrics.py through the pure library). No MPI in this file.
 * Times are in seconds in one time base; sizes in bytes. docs/metrics.md is the reference. */
#ifndef HMB_METRICS_H
#define HMB_METRICS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Partitioned point-to-point metrics of one iteration (SPEC §3.2). */
typedef struct {
    double t_part_s;            /* max_k a_k - min_k s_k */
    double t_pt2pt_s;           /* single-send (fresh send) one-way time of the paired phase */
    double t_persist_s;         /* persistent send/receive one-way time of the paired phase */
    double t_polled_s;          /* the single send with a polling receiver (MPI_Irecv + MPI_Test) */
    double overhead;            /* t_part / t_pt2pt */
    double overhead_persistent; /* t_part / t_persist */
    double overhead_polled;     /* t_part / t_polled */
    double polled_over_blocking; /* t_polled / t_pt2pt: what the receiver's blocking wait costs */
    double perceived_bw_Bps;    /* m / (a_L - s_L), L = piece made ready last (ties: arrived last) */
    double t_after_join_s;      /* max(0, max_k a_k - t_join) */
    double availability;        /* 1 - t_after_join / t_pt2pt */
    double early_bird;          /* share of the bytes with a_k <= t_join */
} hmb_part_metrics;

/* The message is cut into n equal pieces, each lying in exactly one send partition and one
 * receive partition (n = lcm(P_send, P_recv); n = P when both sides cut alike). s[k]: time
 * just before MPI_Pready of the send partition holding piece k; a[k]: first MPI_Parrived
 * success for the receive partition holding it (same time base). early_bird is the share of
 * the message's bytes reported arrived at or before t_join: a library that transfers nothing
 * before the join scores 0, and so does P = 1 (its only s is at or after the join).
 * Returns 0, or -1 if inputs are unusable (n < 1, t_pt2pt <= 0); t_persist <= 0 (or NaN) leaves
 * only overhead_persistent NaN, and t_polled <= 0 (or NaN: the polled phase did not run) only
 * overhead_polled and polled_over_blocking; the other metrics do not depend on them. An arrival
 * before its ready time is reported as is (a clock problem the user must see), except where it
 * leaves the piece made ready last with a_L - s_L <= 0: no bandwidth is defined, perceived_bw
 * is NaN and the function returns 1 (the caller marks the sample invalid, saying why). */
int hmb_part_metrics_compute(int n, const double *s, const double *a, double t_join_s, double t_pt2pt_s,
                             double t_persist_s, double t_polled_s, size_t m_bytes, hmb_part_metrics *out);

/* Asynchronous progress (SPEC §3.3): T_over = T_total - C; E = 100 (1 - T_over / T_sync). */
double hmb_async_overhead(double t_total_s, double c_s);
double hmb_async_efficiency_pct(double t_total_s, double c_s, double t_sync_s);
/* E of each of n ranks from its own times (c_s[r]: the compute it is charged with, C or
 * C_loaded), then aggregated: *worst the lowest rank's E, *mean the mean over ranks (seed 004
 * averages over all pairs; every rank of a pair counts once). Never E from times of different
 * ranks. Returns 0, or -1 for n < 1 or a rank with t_sync <= 0 (both outputs NaN). */
int hmb_async_efficiency_ranks(int n, const double *t_total_s, const double *c_s, const double *t_sync_s,
                               double *worst_pct, double *mean_pct);

/* Stencil overlap (SPEC §3.5): 100 (T_comm + T_comp - T_overall) / T_comm, clamped [0,100];
 * unclamped: the same without the clamp (below 0: the overlapped phase took longer than
 * communication and compute one after the other), 0 without communication. */
double hmb_overlap_pct(double t_comm_s, double t_comp_s, double t_overall_s);
double hmb_overlap_unclamped_pct(double t_comm_s, double t_comp_s, double t_overall_s);

/* Amdahl projection (SPEC §3.7): 1 / ((1 - f) + f / s). */
double hmb_projected_speedup(double fraction_p2p, double speedup_p2p);

/* Adaptive eager threshold rule (seed 001): 2^ceil(log2(mean_size + header)) + 1024. */
size_t hmb_eager_threshold_rule(double mean_size_bytes, size_t header_bytes);

/* ---- proto probe (SPEC §3.7), src/harness/metrics.c ---- */

/* proto probe (SPEC §3.7): a size progressed when more than half of its trials completed
 * during the compute (a tie counts as not progressed). */
int hmb_probe_majority(int progressed, int trials);

/* proto probe, one trial in one time base: the observed side's MPI_Wait ran from wait_start to
 * wait_end, the peer's next MPI call after posting began at peer_call. Returns 1 (progressed:
 * the transfer finished before the peer made any MPI call), 0 (it needed the peer), or -1 (no
 * verdict: the observed side began waiting only after the peer's call, its lead was lost). */
int hmb_probe_verdict(double wait_start, double wait_end, double peer_call);

/* proto probe, view `both` (both sides compute after posting, the receiver longer, then wait),
 * one trial in one time base: the sender's MPI_Wait ran from sender_wait_start to
 * sender_wait_end, the receiver's began at receiver_wait_start. Returns the time the send was
 * still outstanding once the receiver came back from its compute, sender_wait_end -
 * receiver_wait_start, 0 when the send completed before that (an eager send completed locally),
 * NaN when the receiver came back first (no reading: the receiver may have done the protocol's
 * work alone before the sender looked), for a non-finite input or a wait that ends before it
 * starts. The sender's wait for a late receiver is not counted: it is the compute, not the
 * protocol. */
double hmb_probe_outstanding(double sender_wait_start, double sender_wait_end, double receiver_wait_start);

/* The share of the no-compute transfer time that outstanding time is, outstanding / transfer,
 * where transfer is the one-way time of a blocking transfer of that size with no compute. NaN
 * when transfer <= 0 or the outstanding time is negative/NaN. Recorded, not judged: Open MPI's
 * eager sends keep ~0.5-1 of a transfer outstanding, its rendezvous 1.2-2.5, MPICH's eager ~0
 * and its rendezvous ~0.5-1, so no one share threshold separates eager from rendezvous
 * (docs/findings.md); the switch is the clearest step of the outstanding time over the sizes
 * (hmb_clearest_step). */
double hmb_probe_outstanding_share(double outstanding_s, double transfer_s);

/* proto probe: evaluate progressed(size) at every grid size (strictly increasing, multiples of
 * element); where two neighbours differ, bisect in steps of element until the interval is one
 * element wide. Each switch k is stored as lo_hi[2k] (last size behaving like the smaller
 * sizes), lo_hi[2k+1] (first size behaving like the larger ones) and progressed_after[k] (the
 * predicate at lo_hi[2k+1]: 0 for eager -> handshake). The bisection assumes one switch inside
 * an interval of the grid. Returns the number of switches (only max_switches are stored), or
 * -1 for an unusable grid. */
typedef int (*hmb_size_predicate)(size_t size_bytes, void *arg);
int hmb_find_switches(const size_t *grid, int n, size_t element, hmb_size_predicate progressed, void *arg,
                      size_t *lo_hi, int *progressed_after, int max_switches);

/* proto probe, view `step`: the change point of a per-size cost curve y(x) (x: sizes, strictly
 * increasing; y: the cost of a blocking transfer of that size). For every break k (the left
 * segment x[0..k-1], the right x[k..n-1], each at least HMB_CHANGEPOINT_MIN_SIDE points) a least
 * squares line y = a + b x is fitted to each side; the break with the smallest total residual sum
 * wins (the first on a tie). jump = (a_right + b_right m) - (a_left + b_left m) at the break's
 * midpoint m = (x[k-1] + x[k]) / 2; sigma = sqrt(rss / (n - 4)), the residual spread of the two
 * lines (4 fitted parameters); step = 1 when the cost jumps, up or down, by at least
 * HMB_CHANGEPOINT_MIN_SIGMAS times the larger of sigma and `noise` (the curve's measurement noise,
 * hmb_cost_noise; 0 to judge by sigma alone): another protocol (a handshake added, or, above a
 * large eager limit, a single copy cheaper than two); else 0 (a bend or noise, not a switch). rss_line: the residual of one line over all points, for comparison. Returns 0, or -1
 * (index -1, every number NaN) for fewer than 2 HMB_CHANGEPOINT_MIN_SIDE points, a non-finite
 * value or x not increasing. */
#define HMB_CHANGEPOINT_MIN_SIDE 3
#define HMB_CHANGEPOINT_MIN_SIGMAS 3.0
typedef struct {
    int index;                /* first point of the right segment, -1 without a fit */
    double lo, hi;            /* x[index - 1], x[index]: the break lies between them */
    double a_left, b_left, a_right, b_right;
    double jump, rss, rss_line, sigma;
    int step;
} hmb_changepoint;
int hmb_changepoint_fit(int n, const double *x, const double *y, double noise, hmb_changepoint *out);
/* The measurement noise of a curve y[0..n-1] sampled on a regular grid, robust to a few steps
 * and to a straight trend: the median absolute deviation of the first differences from their
 * median, times 1.4826 / sqrt(2) (a difference of two values carries twice the variance). NaN
 * for n < 3. */
double hmb_cost_noise(int n, const double *y);
/* Every step of the curve. Binary segmentation: the best break of the whole curve
 * (hmb_changepoint_fit), then of each side of it, as long as the split lowers the residual sum by
 * more than 3 ln(points) noise^2 (a BIC penalty; noise = hmb_cost_noise of the whole curve, at
 * least 1e-9 of its largest value). Then each break is judged between its neighbouring breaks
 * (the lines of the segments on either side of it): a step when |jump| >=
 * HMB_CHANGEPOINT_MIN_SIGMAS max(noise, sigma). So a bend of a wide range's curve (where
 * bandwidth changes) splits the curve but is no step, and another step does not spoil a step's
 * lines. Writes the steps in increasing size (index: into x; rss_line: one line over the two
 * neighbouring segments) to out[0..max_out-1]; returns how many there are, or -1 as
 * hmb_changepoint_fit. */
int hmb_changepoint_steps(int n, const double *x, const double *y, hmb_changepoint *out, int max_out);
/* Tukey's running median of 3: out[i] = median(y[i-1], y[i], y[i+1]), out[0] = y[0] and
 * out[n-1] = y[n-1] (out may not alias y). It removes a spike one grid size wide and keeps a
 * step where it is: view both reads its switch from the outstanding times so smoothed (the first
 * rendezvous size after eager ones in a round can read high and bend the step's lines towards it;
 * docs/findings.md). A window holding a NaN gives NaN. */
void hmb_running_median3(int n, const double *y, double *out);

/* The clearest step of a per-size curve (the probe's switch in views `both` and `step`): of the
 * steps hmb_changepoint_steps finds, the one with the largest score. relative = 0: |jump| /
 * max(noise, sigma), noise as hmb_changepoint_steps uses it (view step). relative = 1: the
 * factor by which the curve changes, |jump| / (|L| + |R|), L and R the left and right lines at
 * the break's midpoint (R = L + jump; 1 for a step from or to 0): a protocol switch changes how
 * much of a transfer is left by a factor (a local completion or not, a handshake or not), a page
 * step or a bend by a fraction of a copy (the scores measured: docs/findings.md, "Where the
 * eager/rendezvous switch shows"). A wide range has small steps besides the protocol's (a single
 * copy's page steps). Returns 1 and the
 * step in *out, 0 when the curve has no step (*out index -1), -1 for an unusable curve (as
 * hmb_changepoint_fit). */
int hmb_clearest_step(int n, const double *x, const double *y, int relative, hmb_changepoint *out);
/* Which side's line a cost y measured at size x lies nearer: 0 left (like the smaller sizes),
 * 1 right (strictly nearer the right line), -1 without a fit or for a non-finite input. The
 * probe bisects the break interval with it, down to --element bytes. */
int hmb_changepoint_side(const hmb_changepoint *cp, double x, double y);

/* proto trade-off: the library's resident memory per peer, (rss_pairs - rss_init) / peers, and
 * projected to a job with `peers` peers: rss_init + per_peer * peers (kB). */
double hmb_memory_per_peer_kB(double rss_init_kB, double rss_pairs_kB, int peers);
double hmb_memory_projected_kB(double rss_init_kB, double per_peer_kB, int peers);

/* async: a kernel run that took c_kernel_s for a request of c_s, on a rank whose calibration
 * error (hmb_compute_calibration_error) is calibration_error, is impossible when it ran
 * faster than the undisturbed calibration allows: c_kernel < c (1 - tolerance), tolerance =
 * max(calibration_error, 1 %, 1 µs / c) (SPEC §2's accuracy goal is the floor). Such a
 * sample's C is not the compute time there, and its E could exceed 100 %. */
double hmb_async_compute_tolerance(double c_s, double calibration_error);
int hmb_async_compute_too_fast(double c_kernel_s, double c_s, double calibration_error);

/* KBA wavefront pipeline (sweep3d, SPEC §3.5). Ideal fill/drain share of one octant sweep on a
 * px x py process grid with K k-blocks per octant: a sweep takes stages = K + (px - 1) + (py - 1)
 * steps of one k-block each and every rank computes in K of them, so idle = 1 - K / stages.
 * NaN for px, py or K below 1. */
double hmb_kba_ideal_idle_share(int px, int py, int kblocks);
/* Measured idle share of a rank: 1 - busy / elapsed (busy: time it computed, elapsed: its sweep
 * time). NaN for elapsed <= 0. */
double hmb_idle_share(double busy_s, double elapsed_s);
/* match (SPEC §3.6): one halo iteration seen by the centre rank's nthreads threads. Thread k
 * posted its first operation at begin[k], returned from its last post at posted[k] and from its
 * wait at done[k]; paused[k] is time inside [begin, posted] spent on something other than posting
 * (reading MPI_T variables; 0 otherwise). ops: the messages the figures are per (match passes
 * the messages received by all threads, SPEC §3.6). t_iter = max done - min begin (wall time of
 * the exchange); post_per_msg = sum (posted - begin - paused) / ops; wait_per_msg =
 * sum (done - posted) / ops. Returns 0, or -1 for nthreads < 1 or ops < 1. */
typedef struct {
    double t_iter_s, post_per_msg_s, wait_per_msg_s;
} hmb_match_times;
int hmb_match_times_compute(int nthreads, const double *begin, const double *posted, const double *done,
                            const double *paused, int ops, hmb_match_times *out);

/* A queue-length variable read as one value per peer (Open MPI ob1) or one value (no object):
 * *total = sum over the n values (every item a search could meet), *peer_max = the largest
 * (the longest per-peer queue). n < 1: both NaN. */
void hmb_match_queue_depth(int n, const double *values, double *total, double *peer_max);
/* Pattern benchmarks (halo3d, sweep3d; SPEC §3.5): per mode m, throughput[m] = bytes[m] / t[m]
 * (bytes exchanged per process per second; seed 000's metric) and ratio[m] = throughput[m] /
 * throughput[0], mode 0 (single, fork-join) being the reference measured in the same iterations.
 * A mode with t <= 0 or NaN (not run) gets NaN throughput and ratio; every ratio is NaN when mode 0
 * has none. */
/* The one throughput of the patterns (SPEC §3.5): bytes exchanged per process (mean over ranks)
 * divided by the timed region's time (t_iter, t_sweep, T_comm: the slowest rank's), in B/s.
 * NaN when nothing was exchanged (bytes <= 0: --comm off) or the time is not positive. */
double hmb_throughput_Bps(double bytes_per_process, double t_region_s);
void hmb_pattern_rates(int nmodes, const double *bytes, const double *t_s, double *throughput_Bps, double *ratio);

#ifdef __cplusplus
}
#endif
#endif
