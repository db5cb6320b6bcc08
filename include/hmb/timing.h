/* HMB — time: the monotonic clock, rank 0's time base, the timer's own cost, and the
 * counterbalanced orders of a paired design (src/harness/timer.c, clocks.c, design.c). */
#ifndef HMB_TIMING_H
#define HMB_TIMING_H

#include "hmb/hmb.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Monotonic clock, nanosecond resolution, as seconds (double) and nanoseconds. */
double hmb_now(void);
int64_t hmb_now_ns(void);
/* Local time -> rank 0's time base (seconds), using the estimated clock offset. */
double hmb_to_global(const hmb_ctx *ctx, double t_local);
double hmb_clock_offset(const hmb_ctx *ctx); /* this rank's offset to rank 0, seconds */
/* Cost of one hmb_now()/hmb_now_ns() call, measured at start-up (ns): a timed region should
 * be long against it (e.g. batch short operations until they span 100x this). */
double hmb_timer_overhead_ns(const hmb_ctx *ctx);

/* Counterbalanced order of k phases (modes, variants) run in one iteration of a paired design:
 * iteration iter runs order[0], order[1], ... Rows of Williams' balanced Latin square, cycled:
 * over hmb_phase_orders(k) consecutive iterations (k for even k, 2k for odd k, every order of 2 or
 * 3 phases), every phase runs in every position equally often and directly after every other
 * phase equally often, so warm-up, cache and drift effects do not favour any phase.
 * Returns 0, or -1 for k < 1 or iter < 0. */
int hmb_phase_orders(int k);
int hmb_phase_order(int k, long iter, int *order);

#ifdef __cplusplus
}
#endif
#endif
