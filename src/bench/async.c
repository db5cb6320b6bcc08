/* async — asynchronous progress and computation/communication overlap (SPEC §3.3, seed 004).
 *
 * Every iteration is a paired design of three phases, so the ratios survive a noisy machine:
 *   blocking baseline: barrier, blocking op                          -> T_sync
 *   non-blocking run:  barrier, post, compute C with a progress
 *                      mode, complete                                -> T_total, C_actual
 *   compute only:      barrier, every rank computes C, no MPI call   -> C_loaded
 * in counterbalanced order (iteration i runs the (i mod 6)-th of the six orders). The two
 * communicating phases have their own buffers, filled by prepare() before any --cache cold
 * flush; verify() checks both phases' received data every iteration.
 * The slowest rank defines each time. E = 100 (1 - (T_total - C) / T_sync), where C is the
 * calibrated, undisturbed compute time that was requested (so a slower kernel under a
 * progress thread counts as overhead); E_loaded puts C_loaded, the same work computed by
 * every rank at once in this iteration, in C's place. A sample in which a kernel ran faster
 * than its calibration allows is invalid (its E could exceed 100 %). Formulas and the rule:
 * include/hmb/metrics.h; meaning: docs/metrics.md.
 *
 * Progress modes: none (no MPI call while computing), test:P (MPI_Testall on the op's
 * requests every P µs of compute), thread (HMB's own progress thread looping on
 * MPI_Testall; needs MPI_THREAD_MULTIPLE), impl (the library's own progress thread, only
 * when it is really on). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"

/* ------------------------------------------------------------------ HMB's progress thread */

/* One progress poke on all outstanding requests; returns 1 when all are complete. A single
 * request goes through MPI_Test: MPICH 5.0.2's MPI_Testall fails (MPI_ERR_IN_STATUS with
 * every status MPI_SUCCESS) on a persistent collective request from MPI_Allreduce_init. */
int async_test_requests(MPI_Request *reqs, int nreq)
{
    int all_done = 0;
    if (nreq == 1)
        MPI_Test(&reqs[0], &all_done, MPI_STATUS_IGNORE);
    else
        MPI_Testall(nreq, reqs, &all_done, MPI_STATUSES_IGNORE);
    return all_done;
}

/* HMB's progress thread's poke (hmb_progress): test the published exchange's requests. */
static int test_exchange(void *ex)
{
    return async_test_requests(((async_exchange *)ex)->reqs, ((async_exchange *)ex)->nreq);
}

/* T_total first: the adaptive stopping rule watches the first metric's relative CI, which
 * is meaningless for E (near 0 or negative without progress). */
static const hmb_metric async_metrics[] = {
    {.name = "t_total_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "post + compute + completion time of the non-blocking run"},
    {.name = "efficiency_pct", .unit = "%", .higher_is_better = 1, .bounds = "..100", .in_table = 1, .is_signed = 1,
     .description = "E = 100 (1 - T_over / T_sync) of each rank from its own times: the worst rank's"},
    {.name = "efficiency_loaded_pct", .unit = "%", .higher_is_better = 1, .bounds = "..100", .in_table = 1, .is_signed = 1,
     .description = "E_loaded = 100 (1 - (T_total - C_loaded) / T_sync) of each rank: the worst rank's (E against "
                    "the compute time measured with every rank computing at once)"},
    {.name = "efficiency_mean_pct", .unit = "%", .higher_is_better = 1, .bounds = "..100", .in_table = 0, .is_signed = 1,
     .description = "E of each rank, mean over ranks (seed 004: over all pairs)"},
    {.name = "efficiency_loaded_mean_pct", .unit = "%", .higher_is_better = 1, .bounds = "..100", .in_table = 0, .is_signed = 1,
     .description = "E_loaded of each rank, mean over ranks"},
    {.name = "t_sync_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "blocking operation time (baseline)"},
    {.name = "c_actual_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "time inside the compute kernel (excluding progress calls)"},
    {.name = "c_loaded_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "compute-only phase: C computed by every rank at once, no MPI call"},
    {.name = "t_over_us", .unit = "us", .higher_is_better = 0, .in_table = 1, .is_signed = 1,
     .description = "T_over = T_total - C"},
    {.name = "t_over_loaded_us", .unit = "us", .higher_is_better = 0, .in_table = 0, .is_signed = 1,
     .description = "T_over_loaded = T_total - C_loaded"},
    {.name = "slowdown", .unit = "ratio", .higher_is_better = 0, .in_table = 1,
     .description = "compute slow-down C_actual / C caused by the progress method"},
    {.name = "load_slowdown", .unit = "ratio", .higher_is_better = 0, .in_table = 0,
     .description = "C_loaded / C: slow-down of the kernel when every rank computes"},
    {.name = "t_wait_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "time in the final MPI_Waitall: the communication progress during compute left"},
    HMB_METRIC_END,
};

/* Both phases' reduction operands before the --cache cold flush (the other ops' blocks: the
 * harness's, registered in async_exchange_init); nothing inside iterate() touches them first. */
static void async_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    (void)ctx, (void)pt;
    async_state *s = state;
    async_fill(&s->ex, iter, ASYNC_BLOCKING);
    async_fill(&s->ex, iter, ASYNC_NONBLOCKING);
}

static void testall_poll(void *arg)
{
    async_exchange *ex = arg;
    async_test_requests(ex->reqs, ex->nreq);
}

/* Computes C under the point's progress mode; returns the time inside the kernel, ns. */
static int64_t compute_with_progress(hmb_ctx *ctx, async_state *s)
{
    switch (s->mode.kind) {
    case PROG_TEST:
        return hmb_compute_work_sliced_ns(ctx, s->c_ns, (int64_t)(s->mode.poll_us * 1e3), testall_poll, &s->ex);
    case PROG_THREAD: {
        hmb_progress_publish(s->thread, test_exchange, &s->ex);
        int64_t inside_ns = hmb_compute_work_ns(ctx, s->c_ns);
        hmb_progress_withdraw(s->thread);
        return inside_ns;
    }
    default: /* none; impl: the library's thread works on its own */
        return hmb_compute_work_ns(ctx, s->c_ns);
    }
}

/* The three phases of an iteration, run in the counterbalanced orders of hmb_phase_order: each
 * runs first, second and last equally often, and directly after each other phase equally often:
 * none systematically inherits another's cache or progress-engine state. */
typedef enum { PHASE_BLOCKING, PHASE_NONBLOCKING, PHASE_COMPUTE_ONLY, NPHASES } phase_id;
_Static_assert((int)NPHASES == (int)ASYNC_NPHASES, "async.h: ASYNC_NPHASES");
const char async_phase_letters[NPHASES] = {'b', 'n', 'c'}; /* the orders in the result record */

/* Sub-times of the phases (hmb_mode_results times[phase][j], seconds; [0]: barrier to end). */
enum { T_KERNEL = 1, T_WAIT = 2 }; /* kernel: C_actual (non-blocking), C_loaded (compute only) */

static void run_blocking(hmb_ctx *ctx, void *state, int phase, long iter, double *times)
{
    (void)ctx, (void)phase, (void)iter, (void)times;
    async_blocking(&((async_state *)state)->ex); /* T_sync */
}

static void run_nonblocking(hmb_ctx *ctx, void *state, int phase, long iter, double *times)
{
    (void)phase, (void)iter;
    async_state *s = state;
    async_exchange *ex = &s->ex;
    hmb_phase(ctx, "post");
    async_post(ex);
    hmb_phase(ctx, "compute");
    times[T_KERNEL] = (double)compute_with_progress(ctx, s) * 1e-9;
    hmb_phase(ctx, "Waitall");
    double t_wait_start_s = hmb_now();
    MPI_Waitall(ex->nreq, ex->reqs, MPI_STATUSES_IGNORE);
    times[T_WAIT] = hmb_now() - t_wait_start_s; /* times[0], to the same end: T_total */
}

/* Every rank computes C at once and nothing communicates: what the kernel costs under the
 * load of the whole job, without any progress method. */
static void run_compute_only(hmb_ctx *ctx, void *state, int phase, long iter, double *times)
{
    (void)phase, (void)iter;
    times[T_KERNEL] = (double)hmb_compute_work_ns(ctx, ((async_state *)state)->c_ns) * 1e-9;
}

static const hmb_mode async_phases[NPHASES + 1] = {
    [PHASE_BLOCKING] = {.name = "blocking", .iterate = run_blocking, .flags = HMB_MODE_HIDDEN},
    [PHASE_NONBLOCKING] = {.name = "nonblocking", .iterate = run_nonblocking, .flags = HMB_MODE_HIDDEN},
    [PHASE_COMPUTE_ONLY] = {.name = "compute_only", .iterate = run_compute_only, .flags = HMB_MODE_HIDDEN},
    [NPHASES] = {.name = NULL}};
static const int all_phases[NPHASES] = {PHASE_BLOCKING, PHASE_NONBLOCKING, PHASE_COMPUTE_ONLY};

static int async_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    (void)pt;
    async_state *s = state;
    hmb_mode_results r;
    hmb_modes_run(ctx, s, all_phases, NPHASES, iter, &r); /* the slowest rank's times */

    /* Each rank judges its own kernel runs against its own calibration error; one impossible
     * run anywhere invalidates the sample. */
    const double c_s = (double)s->c_ns * 1e-9;
    double fastest_kernel_s = fmin(r.local[PHASE_NONBLOCKING][T_KERNEL], r.local[PHASE_COMPUTE_ONLY][T_KERNEL]);
    enum { R_TOO_FAST, R_MINUS_FASTEST_RATIO, R_COUNT };
    double slowest[R_COUNT] = {[R_TOO_FAST] = hmb_async_compute_too_fast(fastest_kernel_s, c_s, s->calibration_error),
                               [R_MINUS_FASTEST_RATIO] = -fastest_kernel_s / c_s};
    hmb_reduce_max(ctx, slowest, R_COUNT);
    /* E per rank from its own times, aggregated on rank 0: never one rank's T_total with another's T_sync */
    hmb_mode_times *all = hmb_modes_gather(ctx, &r);
    if (hmb_rank(ctx) != 0)
        return 0;
    const int n = hmb_size(ctx);
    double *t_total = malloc(4 * sizeof(double) * (size_t)n); /* by quantity */
    if (!t_total)
        abort();
    double *c_loaded = t_total + n, *t_sync = c_loaded + n, *c = t_sync + n;
    for (int k = 0; k < n; k++) {
        t_total[k] = all[k][PHASE_NONBLOCKING][0], c_loaded[k] = all[k][PHASE_COMPUTE_ONLY][T_KERNEL];
        t_sync[k] = all[k][PHASE_BLOCKING][0], c[k] = c_s;
    }
    double e_worst, e_mean, el_worst, el_mean;
    hmb_async_efficiency_ranks(n, t_total, c, t_sync, &e_worst, &e_mean);
    hmb_async_efficiency_ranks(n, t_total, c_loaded, t_sync, &el_worst, &el_mean);
    free(t_total);
    free(all);
    double t_sync_s = r.times[PHASE_BLOCKING][0], t_total_s = r.times[PHASE_NONBLOCKING][0];
    double c_actual_s = r.times[PHASE_NONBLOCKING][T_KERNEL], c_loaded_s = r.times[PHASE_COMPUTE_ONLY][T_KERNEL];
    hmb_record(ctx, out, "t_total_us", t_total_s * 1e6);
    hmb_record(ctx, out, "efficiency_pct", e_worst);
    hmb_record(ctx, out, "efficiency_loaded_pct", el_worst);
    hmb_record(ctx, out, "efficiency_mean_pct", e_mean);
    hmb_record(ctx, out, "efficiency_loaded_mean_pct", el_mean);
    hmb_record(ctx, out, "t_sync_us", t_sync_s * 1e6);
    hmb_record(ctx, out, "c_actual_us", c_actual_s * 1e6);
    hmb_record(ctx, out, "c_loaded_us", c_loaded_s * 1e6);
    hmb_record(ctx, out, "t_over_us", hmb_async_overhead(t_total_s, c_s) * 1e6);
    hmb_record(ctx, out, "t_over_loaded_us", hmb_async_overhead(t_total_s, c_loaded_s) * 1e6);
    hmb_record(ctx, out, "slowdown", c_actual_s / c_s);
    hmb_record(ctx, out, "load_slowdown", c_loaded_s / c_s);
    hmb_record(ctx, out, "t_wait_us", r.times[PHASE_NONBLOCKING][T_WAIT] * 1e6);
    out->valid = slowest[R_TOO_FAST] == 0.0;
    if (!out->valid && iter >= hmb_common(ctx)->warmup) { /* warm-up samples are not counted */
        s->too_fast_samples++;
        s->fastest_kernel_ratio = fmin(s->fastest_kernel_ratio, -slowest[R_MINUS_FASTEST_RATIO]);
    }
    return 0;
}

static void async_verify_cb(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    (void)ctx, (void)pt;
    async_state *s = state;
    async_verify(&s->ex, iter, ASYNC_BLOCKING);
    async_verify(&s->ex, iter, ASYNC_NONBLOCKING);
}

static const hmb_bench async_bench = {
    .name = "async",
    .group = "async",
    .summary = "overlap of non-blocking communication with compute, per progress mode (IMB-ASYNC style)",
    HMB_BENCH_PARAMS(async_point),
    HMB_BENCH_OPTIONS(async_opts),
    .no_mock = "it measures how much of a transfer the library progresses while ranks compute: a loopback "
               "without MPI has no progress to measure, and its collectives have no loopback",
    .rules = (const hmb_option_rule[]){{.option = "progress", .values = "impl",
                                        .env = "mpich:MPIR_CVAR_ASYNC_PROGRESS=1 impi:I_MPI_ASYNC_PROGRESS=1",
                                        .why = "the library's own progress thread (Open MPI has none: the benchmark "
                                               "reports it)"},
                                       {.option = NULL}},
    .defaults = (const hmb_default[]){{"sizes", "32,1K,16K,256K,4M"}, {NULL, NULL}}, /* the seed's 4 .. 524288 doubles */
    .modes = async_phases,
    .metrics = async_metrics,
    .thread_level = MPI_THREAD_MULTIPLE, /* the `thread` mode tests from a second thread */
    .min_ranks = 2,
    .rank_multiple = 1,
    .derived_compute = HMB_DERIVED_WORK, /* C from --calc-factor, judged by the check request nearest C */
    .check = async_check,
    .points = async_points,
    .setup = async_setup,
    .prepare = async_prepare,
    .iterate = async_iterate,
    .verify = async_verify_cb,
    .teardown = async_teardown,
    .annotate = async_annotate,
    .pivot_metrics = "t_sync_us,c_us,c_loaded_us,t_over_us,efficiency_pct,efficiency_loaded_pct",
    .spare_core_when = "progress=impl,thread",
};
HMB_REGISTER(async_bench);
