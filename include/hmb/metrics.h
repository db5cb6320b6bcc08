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
    double overhead;            /* t_part / t_pt2pt */
    double overhead_persistent; /* t_part / t_persist */
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
 * only overhead_persistent NaN, the other metrics do not depend on it. An arrival
 * before its ready time is allowed and reported as is (a clock problem the user must see). */
int hmb_part_metrics_compute(int n, const double *s, const double *a, double t_join_s, double t_pt2pt_s,
                             double t_persist_s, size_t m_bytes, hmb_part_metrics *out);

/* Asynchronous progress (SPEC §3.3): T_over = T_total - C; E = 100 (1 - T_over / T_sync). */
double hmb_async_overhead(double t_total_s, double c_s);
double hmb_async_efficiency_pct(double t_total_s, double c_s, double t_sync_s);

/* Stencil overlap (SPEC §3.5): 100 (T_comm + T_comp - T_overall) / T_comm, clamped [0,100]. */
double hmb_overlap_pct(double t_comm_s, double t_comp_s, double t_overall_s);

/* Amdahl projection (SPEC §3.7): 1 / ((1 - f) + f / s). */
double hmb_projected_speedup(double fraction_p2p, double speedup_p2p);

/* Adaptive eager threshold rule (seed 001): 2^ceil(log2(mean_size + header)) + 1024. */
size_t hmb_eager_threshold_rule(double mean_size_bytes, size_t header_bytes);

/* async: a kernel run that took c_kernel_s for a request of c_s, on a rank whose calibration
 * error (hmb_compute_calibration_error) is calibration_error, is impossible when it ran
 * faster than the undisturbed calibration allows: c_kernel < c (1 - tolerance), tolerance =
 * max(calibration_error, 1 %, 1 µs / c) (SPEC §2's accuracy goal is the floor). Such a
 * sample's C is not the compute time there, and its E could exceed 100 %. */
double hmb_async_compute_tolerance(double c_s, double calibration_error);
int hmb_async_compute_too_fast(double c_kernel_s, double c_s, double calibration_error);

/* Pattern benchmarks (halo3d, sweep3d; SPEC §3.5): per mode m, throughput[m] = bytes[m] / t[m]
 * (bytes exchanged per process per second; seed 000's metric) and ratio[m] = throughput[m] /
 * throughput[0], mode 0 (single, fork-join) being the reference measured in the same iterations.
 * A mode with t <= 0 or NaN (not run) gets NaN throughput and ratio; every ratio is NaN when mode 0
 * has none. */
void hmb_pattern_rates(int nmodes, const double *bytes, const double *t_s, double *throughput_Bps, double *ratio);

#ifdef __cplusplus
}
#endif
#endif
