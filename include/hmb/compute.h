/* HMB — compute loads and noise (src/harness/compute.c, noise.c; docs/methodology.md, "Compute
 * load"), the calc-factor calibration, and the counter-based random mixer. */
#ifndef HMB_COMPUTE_H
#define HMB_COMPUTE_H

#include "hmb/hmb.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Compute loads (SPEC §2 "Compute load", docs/methodology.md). Both kinds run the same busy
 * floating-point kernel with the calling OpenMP thread's calibration, make no system call, and
 * return the measured duration in ns; the harness records every call in the point's result
 * ("compute": measured per iteration, median and worst thread).
 *
 * TIME: exact in time, busy work re-checked against the clock until ns have passed, whatever
 * the core's speed does. For benchmarks that vary a delay (part, halo3d, sweep3d, mt,
 * stencil3d): the result is >= ns, and over by about 0.1 us unless the thread loses its core
 * at the very end. */
int64_t hmb_compute_ns(hmb_ctx *ctx, int64_t ns);
/* WORK: the fixed work a request of ns is at the thread's sustained rate (calibrated before
 * MPI_Init and checked in both directions, then measured again with every thread of every rank
 * computing at once: docs/methodology.md). A core slowed down by anything (a progress thread,
 * steal) takes longer: the returned C_actual shows it (async). */
int64_t hmb_compute_work_ns(hmb_ctx *ctx, int64_t ns);
/* WORK in slices of about slice_ns, calling poll(arg) between slices (poll time is NOT counted
 * in the returned compute time). Returns the total time inside the kernel (C_actual), ns. */
int64_t hmb_compute_work_sliced_ns(hmb_ctx *ctx, int64_t ns, int64_t slice_ns, void (*poll)(void *), void *arg);
/* The sustained kernel rate, iterations per ns, for thread tid (from calibration). */
double hmb_compute_rate(const hmb_ctx *ctx, int tid);
/* Calibration error of this rank for a WORK request of ns, as a fraction: how much shorter than
 * requested an undisturbed request may come out — the shortfall of the start-up check's WORK
 * request nearest to ns (run header "calibration", worst thread of this rank) plus the share of
 * machine interruptions the sustained rate includes (a run that meets none is that much short). */
double hmb_compute_calibration_error(const hmb_ctx *ctx, int64_t ns);
/* The calling thread's rate, probed before a point: `runs` WORK requests of ns (not logged as the
 * point's compute). When their median comes out shorter than (1 - tolerance) x ns, the rate was
 * measured while something slowed the core (another process's burst, steal) and every request at
 * it now runs short: the sustained rate is measured again (hmb_compute_sustained_rate, ~30 ms) and
 * replaces it; never otherwise, so the rate is no ratchet of lucky runs. Returns the probe's
 * median measured / ns; *remeasured is 1 when the rate was replaced. */
double hmb_compute_probe_rate(hmb_ctx *ctx, int64_t ns, int runs, double tolerance, int *remeasured);

/* Compute amount (ns) for OpenMP thread tid in iteration iter under the run's noise model
 * (--noise, --noise-thread, --seed) around base_ns (--compute or the benchmark's own).
 * Deterministic for (seed, rank, tid, iter): the same draw for both phases of a paired
 * design. Thread-safe. */
int64_t hmb_noise_ns(const hmb_ctx *ctx, int tid, long iter, int64_t base_ns);
/* The largest compute hmb_noise_ns can draw around base_ns on any rank, thread and iteration
 * (hmb_noise_max_draw): for wait bounds that must start after any peer's compute. */
int64_t hmb_noise_max_ns(const hmb_ctx *ctx, int64_t base_ns);

/* splitmix64's step: a bijective 64-bit mixer with full avalanche. hmb_mix64(counter++) over a
 * caller-owned counter is a per-thread random stream; hashing coordinates (seed, rank, tid,
 * iteration) through it gives reproducible draws. */
uint64_t hmb_mix64(uint64_t z);


/* The calc-factor calibration (async, stencil3d): run(arg) from a barrier on comm, once to warm
 * up and then HMB_CALC_REPS times; *t_s = the fastest run's slowest rank (interference only
 * slows a run down). Returns the compute to request, factor x *t_s in ns, at least
 * HMB_MIN_COMPUTE_NS (the compute kernel's accuracy floor, the seed's smallest calc time).
 * Collective on comm; outside every timed region (setup or points()). */
#define HMB_CALC_REPS 7
#define HMB_MIN_COMPUTE_NS 10000
int64_t hmb_calc_factor_ns(hmb_ctx *ctx, MPI_Comm comm, double factor, void (*run)(void *arg), void *arg,
                           double *t_s);

#ifdef __cplusplus
}
#endif
#endif
