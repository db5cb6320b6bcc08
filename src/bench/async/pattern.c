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
 * when it is really on).
 *
 * Here: the operations, one row each of one table (their blocking and non-blocking forms; their
 * set-up in setup.c, their data and checks in verify.c), the progress modes, the phases, the
 * metrics, the record and the descriptor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"

/* ------------------------------------------------------------------ the operations */

/* The requests of the posted exchange of every neighbour direction j: receive from recv_from[j],
 * send to send_to[j], both tagged j. */
static void post_neighbors(async_exchange *ex, const async_buffers *b)
{
    ex->nreq = 0;
    for (int j = 0; j < ex->nneighbors; j++)
        MPI_Irecv(b->recv + (size_t)j * ex->count, ex->count, MPI_DOUBLE, ex->recv_from[j], j, ex->world,
                  &ex->reqs[ex->nreq++]);
    for (int j = 0; j < ex->nneighbors; j++)
        MPI_Isend(b->send + (size_t)j * ex->count, ex->count, MPI_DOUBLE, ex->send_to[j], j, ex->world,
                  &ex->reqs[ex->nreq++]);
}

/* pt2pt: IMB-ASYNC's ping-pong (the lower rank of the pair sends first) or MPI_Sendrecv. */
static void blocking_pair(async_exchange *ex, const async_buffers *b)
{
    if (ex->baseline == ASYNC_BASELINE_SENDRECV) {
        MPI_Sendrecv(b->send, ex->count, MPI_DOUBLE, ex->peer, 0, b->recv, ex->count, MPI_DOUBLE, ex->peer, 0,
                     ex->world, MPI_STATUS_IGNORE);
    } else if (ex->rank < ex->peer) {
        MPI_Send(b->send, ex->count, MPI_DOUBLE, ex->peer, 0, ex->world);
        MPI_Recv(b->recv, ex->count, MPI_DOUBLE, ex->peer, 0, ex->world, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(b->recv, ex->count, MPI_DOUBLE, ex->peer, 0, ex->world, MPI_STATUS_IGNORE);
        MPI_Send(b->send, ex->count, MPI_DOUBLE, ex->peer, 0, ex->world);
    }
}

static void post_pair(async_exchange *ex, const async_buffers *b)
{
    MPI_Irecv(b->recv, ex->count, MPI_DOUBLE, ex->peer, 0, ex->world, &ex->reqs[0]);
    MPI_Isend(b->send, ex->count, MPI_DOUBLE, ex->peer, 0, ex->world, &ex->reqs[1]);
    ex->nreq = 2;
}

/* exch: the pure communication time of the same pattern: post, then wait at once. */
static void blocking_neighbors(async_exchange *ex, const async_buffers *b)
{
    post_neighbors(ex, b);
    MPI_Waitall(ex->nreq, ex->reqs, MPI_STATUSES_IGNORE);
}

static void blocking_allreduce(async_exchange *ex, const async_buffers *b)
{
    MPI_Allreduce(b->send, b->recv, ex->count, MPI_DOUBLE, MPI_SUM, ex->world);
}

static void post_allreduce(async_exchange *ex, const async_buffers *b)
{
    MPI_Iallreduce(b->send, b->recv, ex->count, MPI_DOUBLE, MPI_SUM, ex->world, &ex->reqs[0]);
    ex->nreq = 1;
}

/* allreduce_init: MPI_Start of the persistent request, made once (setup.c) on the non-blocking
 * phase's buffers. Testall/Waitall leave a persistent handle in place (inactive), so a copy is fine. */
static void post_persistent(async_exchange *ex, const async_buffers *b)
{
    (void)b;
    MPI_Start(&ex->persistent);
    ex->reqs[0] = ex->persistent;
    ex->nreq = 1;
}

static void blocking_alltoall(async_exchange *ex, const async_buffers *b)
{
    MPI_Alltoall(b->send, ex->count, MPI_DOUBLE, b->recv, ex->count, MPI_DOUBLE, ex->world);
}

static void post_alltoall(async_exchange *ex, const async_buffers *b)
{
    MPI_Ialltoall(b->send, ex->count, MPI_DOUBLE, b->recv, ex->count, MPI_DOUBLE, ex->world, &ex->reqs[0]);
    ex->nreq = 1;
}

/* ibcast: in place, the root's receive buffer is the message. */
static void blocking_bcast(async_exchange *ex, const async_buffers *b)
{
    MPI_Bcast(b->recv, ex->count, MPI_DOUBLE, 0, ex->world);
}

static void post_bcast(async_exchange *ex, const async_buffers *b)
{
    MPI_Ibcast(b->recv, ex->count, MPI_DOUBLE, 0, ex->world, &ex->reqs[0]);
    ex->nreq = 1;
}

static void blocking_neighbor_alltoall(async_exchange *ex, const async_buffers *b)
{
#ifdef HMB_HAVE_MPI_NEIGHBOR_ALLTOALL
    MPI_Neighbor_alltoall(b->send, ex->count, MPI_DOUBLE, b->recv, ex->count, MPI_DOUBLE, ex->graph);
#else
    (void)ex, (void)b;
#endif
}

static void post_neighbor_alltoall(async_exchange *ex, const async_buffers *b)
{
    ex->nreq = 1;
#ifdef HMB_HAVE_MPI_NEIGHBOR_ALLTOALL
    MPI_Ineighbor_alltoall(b->send, ex->count, MPI_DOUBLE, b->recv, ex->count, MPI_DOUBLE, ex->graph, &ex->reqs[0]);
#else
    (void)b;
#endif
}

#ifdef HMB_HAVE_MPI_NEIGHBOR_ALLTOALL
#define NO_NEIGHBOR_ALLTOALL NULL
#else
#define NO_NEIGHBOR_ALLTOALL "neighbor_alltoall: this MPI library has no MPI_Neighbor_alltoall (MPI 3.0)"
#endif
#ifdef HMB_HAVE_MPI_ALLREDUCE_INIT
#define NO_ALLREDUCE_INIT NULL
#else
#define NO_ALLREDUCE_INIT "allreduce_init: this MPI library has no MPI_Allreduce_init (persistent collectives, MPI 4.0)"
#endif

/* The operations, in async_op order (their names: async_op_names). */
static const async_op_def async_ops[ASYNC_OP_COUNT] = {
    [OP_PT2PT] = {.blocking = blocking_pair, .post = post_pair, .blocks = ASYNC_BLOCKS_ONE, .pairs = 1,
                  .register_checks = async_register_pair},
    [OP_EXCH] = {.blocking = blocking_neighbors, .post = post_neighbors, .blocks = ASYNC_BLOCKS_NEIGHBORS,
                 .register_checks = async_register_neighbors},
    [OP_ALLREDUCE] = {.blocking = blocking_allreduce, .post = post_allreduce, .blocks = ASYNC_BLOCKS_ONE,
                      .fill = async_fill_operands, .check = async_check_sum},
    [OP_IALLTOALL] = {.blocking = blocking_alltoall, .post = post_alltoall, .blocks = ASYNC_BLOCKS_RANKS,
                      .register_checks = async_register_alltoall},
    [OP_IBCAST] = {.blocking = blocking_bcast, .post = post_bcast, .blocks = ASYNC_BLOCKS_ONE,
                   .register_checks = async_register_broadcast},
    [OP_NEIGHBOR_ALLTOALL] = {.blocking = blocking_neighbor_alltoall, .post = post_neighbor_alltoall,
                              .blocks = ASYNC_BLOCKS_NEIGHBORS, .missing = NO_NEIGHBOR_ALLTOALL,
                              .create = async_create_graph, .register_checks = async_register_neighbors},
    [OP_ALLREDUCE_INIT] = {.blocking = blocking_allreduce, .post = post_persistent, .blocks = ASYNC_BLOCKS_ONE,
                           .missing = NO_ALLREDUCE_INIT, .create = async_create_persistent,
                           .fill = async_fill_operands, .check = async_check_sum},
};

/* ------------------------------------------------------------------ the progress modes */

/* One progress poke on all outstanding requests; returns 1 when all are complete. A single
 * request goes through MPI_Test: MPICH 5.0.2's MPI_Testall fails (MPI_ERR_IN_STATUS with
 * every status MPI_SUCCESS) on a persistent collective request from MPI_Allreduce_init. */
static int test_requests(MPI_Request *reqs, int nreq)
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
    return test_requests(((async_exchange *)ex)->reqs, ((async_exchange *)ex)->nreq);
}

static void testall_poll(void *arg)
{
    async_exchange *ex = arg;
    test_requests(ex->reqs, ex->nreq);
}

/* none, impl: C computed without an MPI call (impl: the library's thread works on its own). */
static int64_t compute_alone(hmb_ctx *ctx, async_state *s) { return hmb_compute_work_ns(ctx, s->c_ns); }

/* test:P: C in slices of P us, MPI_Testall between them (not counted as compute). */
static int64_t compute_polling(hmb_ctx *ctx, async_state *s)
{
    return hmb_compute_work_sliced_ns(ctx, s->c_ns, (int64_t)(s->mode.poll_us * 1e3), testall_poll, &s->ex);
}

/* thread: HMB's progress thread tests the requests while this one computes C. */
static int64_t compute_beside_thread(hmb_ctx *ctx, async_state *s)
{
    hmb_progress_publish(s->thread, test_exchange, &s->ex);
    int64_t inside_ns = hmb_compute_work_ns(ctx, s->c_ns);
    hmb_progress_withdraw(s->thread);
    return inside_ns;
}

/* The progress modes, in progress_kind order (their names: async_progress_names). */
static const async_progress_def progress_modes[PROG_COUNT] = {
    [PROG_NONE] = {.compute = compute_alone},
    [PROG_TEST] = {.compute = compute_polling},
    [PROG_THREAD] = {.compute = compute_beside_thread, .hmb_thread = 1},
    [PROG_IMPL] = {.compute = compute_alone, .library_thread = 1},
};

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

/* The three phases of an iteration, run in the counterbalanced orders of hmb_phase_order: each
 * runs first, second and last equally often, and directly after each other phase equally often:
 * none systematically inherits another's cache or progress-engine state. */
typedef enum { PHASE_BLOCKING, PHASE_NONBLOCKING, PHASE_COMPUTE_ONLY, NPHASES } phase_id;
static const char phase_letters[NPHASES] = {'b', 'n', 'c'}; /* the orders in the result record */

/* Sub-times of the phases (hmb_mode_results times[phase][j], seconds; [0]: barrier to end). */
enum { T_KERNEL = 1, T_WAIT = 2 }; /* kernel: C_actual (non-blocking), C_loaded (compute only) */

static void run_blocking(hmb_ctx *ctx, void *state, int phase, long iter, double *times)
{
    (void)ctx, (void)phase, (void)iter, (void)times;
    async_exchange *ex = &((async_state *)state)->ex;
    ex->def->blocking(ex, &ex->buf[ASYNC_BLOCKING]); /* T_sync */
}

static void run_nonblocking(hmb_ctx *ctx, void *state, int phase, long iter, double *times)
{
    (void)phase, (void)iter;
    async_state *s = state;
    async_exchange *ex = &s->ex;
    hmb_phase(ctx, "post");
    ex->def->post(ex, &ex->buf[ASYNC_NONBLOCKING]);
    hmb_phase(ctx, "compute");
    times[T_KERNEL] = (double)s->progress->compute(ctx, s) * 1e-9;
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

static void async_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    async_state *s = state;
    const async_point *p = HMB_POINT(async_point, pt);
    hmb_result_add_str(ctx, "op", async_op_names[p->op]);
    hmb_result_add_str(ctx, "progress", p->progress);
    if (s->ex.def->blocks == ASYNC_BLOCKS_NEIGHBORS) {
        hmb_result_add_num(ctx, "neighbors", s->ex.nneighbors);
        hmb_result_add_str(ctx, "topology", async_topology_names[HMB_OPTS(async_opts, ctx)->topology]);
    }
    if (s->ex.def->pairs)
        hmb_result_add_str(ctx, "baseline", async_baseline_names[async_baseline_of(ctx)]);
    hmb_result_add_num(ctx, "c_request_ns", (double)s->c_ns);
    hmb_result_add_str(ctx, "c_source", hmb_common(ctx)->given.compute ? "--compute" : "calc-factor x T_sync");
    /* No E from the medians here: the result has the t_total_us, t_sync_us and c_us medians,
     * from which a report derives it (metrics.h: hmb_async_efficiency_pct). */
    hmb_result_add_num(ctx, "library_progress_thread", s->library_thread);
    hmb_result_add_str(ctx, "phase_order", "counterbalanced");
    char orders[64] = "";
    for (int row = 0, n = hmb_phase_orders(NPHASES); row < n; row++) {
        int order[NPHASES];
        hmb_phase_order(NPHASES, row, order);
        size_t len = strlen(orders);
        snprintf(orders + len, sizeof orders - len, "%s%c%c%c", row ? "," : "", phase_letters[order[0]],
                 phase_letters[order[1]], phase_letters[order[2]]);
    }
    hmb_result_add_str(ctx, "phase_orders", orders);
    double c_s = (double)s->c_ns * 1e-9;
    hmb_result_add_num(ctx, "calibration_error", s->calibration_error);
    hmb_result_add_num(ctx, "compute_tolerance", hmb_async_compute_tolerance(c_s, s->calibration_error));
    hmb_result_add_num(ctx, "invalid_compute_too_fast", (double)s->too_fast_samples);
    hmb_result_add_num(ctx, "rate_probe_ratio", s->rate_probe[1]);
    hmb_result_add_num(ctx, "rate_remeasured_ranks", s->rate_probe[0]);
    if (s->too_fast_samples > 0) {
        char why[400];
        snprintf(why, sizeof why,
                 "compute ran faster than calibrated in %ld measured iteration(s) (fastest kernel run %.3f x C on "
                 "some rank; allowed down to %.3f x C by rank 0's calibration error): C is not the undisturbed "
                 "compute time there and E would be impossible, so those samples are left out; bind ranks to "
                 "cores, do not oversubscribe",
                 s->too_fast_samples, s->fastest_kernel_ratio, 1.0 - hmb_async_compute_tolerance(c_s, s->calibration_error));
        hmb_result_add_str(ctx, "invalid_reason", why);
    }
}

/* The set-up's callbacks (setup.c), handed this file's tables. */
static void async_check_cb(hmb_ctx *ctx) { async_check(ctx, async_ops); }
static void async_points_cb(hmb_ctx *ctx, hmb_point_list *out) { async_points(ctx, out, async_ops); }
static void *async_setup_cb(hmb_ctx *ctx, const hmb_point *pt)
{
    return async_setup(ctx, pt, async_ops, progress_modes);
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
    .check = async_check_cb,
    .points = async_points_cb,
    .setup = async_setup_cb,
    .prepare = async_prepare,
    .iterate = async_iterate,
    .verify = async_verify,
    .teardown = async_teardown,
    .annotate = async_annotate,
    .pivot_metrics = "t_sync_us,c_us,c_loaded_us,t_over_us,efficiency_pct,efficiency_loaded_pct",
    .spare_core_when = "progress=impl,thread",
};
HMB_REGISTER(async_bench);
