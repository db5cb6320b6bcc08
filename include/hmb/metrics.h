/* HMB metric formulas: every formula lives here, once, and is unit-tested on synthetic
 * timelines (tests/test_metrics.py through the pure library). No MPI in this file.
 * Times are in seconds in one time base; sizes in bytes. docs/metrics.md is the reference. */
#ifndef HMB_METRICS_H
#define HMB_METRICS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Length of the union of the n intervals [lo[i], hi[i]] intersected with [clip_lo, clip_hi].
 * Intervals with hi < lo are treated as empty. Correct for nested/overlapping intervals. */
double hmb_interval_union_length(int n, const double *lo, const double *hi,
                                 double clip_lo, double clip_hi);

/* Partitioned point-to-point metrics of one iteration (SPEC §3.2). */
typedef struct {
    double t_part_s;         /* max_i a_i - min_i s_i */
    double t_pt2pt_s;        /* single-send one-way time of the paired phase */
    double overhead;         /* t_part / t_pt2pt */
    double perceived_bw_Bps; /* m / (a_L - s_L), L = partition made ready last (ties: arrived last) */
    double t_after_join_s;   /* max(0, max_i a_i - t_join) */
    double availability;     /* 1 - t_after_join / t_pt2pt */
    double early_bird;       /* |U ∩ [min s, t_join]| / |U|, U = union of [s_i, a_i] */
    double early_arrival;    /* fraction of partitions (= of bytes: equal sizes) with a_i <= t_join */
} hmb_part_metrics;

/* early_bird follows SPEC §3.2: it measures how much of the ready-to-arrival windows lies before
 * the join, which also counts time a ready partition merely waits inside the library (a library
 * that sends nothing before the last MPI_Pready still scores high when threads finish far apart).
 * early_arrival measures the transfer itself: the share of the message already delivered when a
 * fork-join code would only be starting its send — 0 for a library without early-bird transfer.
 *
 * s[i]: time just before MPI_Pready of partition i; a[i]: first MPI_Parrived success for
 * partition i (same time base); n partitions (the receiver's partitions, with s mapped to
 * the sender partition that completes them). Returns 0, or -1 if inputs are unusable
 * (n < 1, t_pt2pt <= 0, an arrival before its ready time is allowed and reported as is). */
int hmb_part_metrics_compute(int n, const double *s, const double *a, double t_join_s,
                             double t_pt2pt_s, size_t m_bytes, hmb_part_metrics *out);

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

#ifdef __cplusplus
}
#endif
#endif
