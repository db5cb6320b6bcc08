/* stencil3d — the 3-D stencil overlap study of seed 001 §2.3 (SPEC §3.5).
 *
 * Ranks on a 3-D Cartesian grid, 6 face neighbours. One exchange posts 6 MPI_Irecv, then 6
 * MPI_Isend (tag = direction), completes them with one MPI_Waitall and ends with one
 * MPI_Allreduce of a double, as the seed's benchmark does at the end of each step. Each
 * iteration runs three phases, in counterbalanced order (hmb_phase_order), each after a barrier:
 *   comm:    the exchange alone                                      -> T_comm
 *   comp:    the compute alone (per thread, the iteration's draw)    -> T_comp
 *   overall: post, compute (the same draws), Waitall, Allreduce      -> T_overall, T_post, T_wait
 * overlap % = hmb_overlap_pct(T_comm, T_comp, T_overall); every time is the slowest rank's.
 * The compute is --compute, or --calc-factor x T_comm measured before the point's iterations.
 * Communication runs on the main thread outside the OpenMP region (MPI_THREAD_FUNNELED).
 * Every operation goes through the communication policy (hmb_comm_ops). --comm off (the mock, as
 * halo3d's and sweep3d's): each face is copied into this rank's own receive buffer and the
 * Allreduce is left out; the same phases, compute and validation (against this rank), no MPI.
 * Here: the exchange, the phases, the metrics, the record, the descriptor; set-up and the
 * calibration: setup.c; checks: verify.c. */
#include <math.h>
#include <omp.h>

#include "stencil3d.h"

enum { PHASE_COMM, PHASE_COMP, PHASE_OVERALL, NPHASES };
enum { T_POST = 1, T_WAIT = 2 }; /* the overall phase's sub-times (hmb_mode_results) */

static void post_exchange(hmb_ctx *ctx, stencil_state *st, int ex)
{
    MPI_Comm comm = hmb_comm(ctx);
    for (int d = 0; d < NDIRS; d++)
        st->ops->irecv(st->recv[ex][d], (int)st->size, MPI_BYTE, st->topo.dir[d].from, d, comm, &st->reqs[d]);
    for (int d = 0; d < NDIRS; d++)
        st->ops->isend(st->send[ex][d], (int)st->size, MPI_BYTE, st->topo.dir[d].to, d, comm, &st->reqs[NDIRS + d]);
}

static void wait_exchange(stencil_state *st) { st->ops->waitall(2 * NDIRS, st->reqs); }

static void allreduce(hmb_ctx *ctx, stencil_state *st, int ex, long iter)
{
    double term = allreduce_term(hmb_rank(ctx), ex, iter);
    st->ops->allreduce(&term, &st->reduced[ex], 1, MPI_DOUBLE, MPI_SUM, hmb_comm(ctx)); /* mock: left out */
}

/* Every thread computes its draw of iteration iter (the same in both phases that compute). */
static void compute(hmb_ctx *ctx, const stencil_state *st, long iter)
{
#pragma omp parallel num_threads(st->threads)
    hmb_compute_ns(ctx, hmb_noise_ns(ctx, omp_get_thread_num(), iter, st->compute_ns));
}

/* The exchange alone, as the calc-factor calibration times it (setup.c). */
static void exchange_alone(hmb_ctx *ctx, stencil_state *st)
{
    post_exchange(ctx, st, EX_COMM);
    wait_exchange(st);
    allreduce(ctx, st, EX_COMM, 0);
}

static void *setup_point(hmb_ctx *ctx, const hmb_point *pt) { return stencil_setup(ctx, pt, exchange_alone); }


/* comm: Irecv/Isend, Waitall, Allreduce -> T_comm */
static void phase_comm(hmb_ctx *ctx, void *state, int phase, long iter, double *times)
{
    (void)phase, (void)times;
    stencil_state *st = state;
    post_exchange(ctx, st, EX_COMM);
    wait_exchange(st);
    allreduce(ctx, st, EX_COMM, iter);
}

/* comp: the compute alone -> T_comp */
static void phase_comp(hmb_ctx *ctx, void *state, int phase, long iter, double *times)
{
    (void)phase, (void)times;
    compute(ctx, state, iter);
}

/* overall: post, compute (the same draws), Waitall, Allreduce -> T_overall, T_post, T_wait */
static void phase_overall(hmb_ctx *ctx, void *state, int phase, long iter, double *times)
{
    (void)phase;
    stencil_state *st = state;
    double t0 = hmb_now();
    post_exchange(ctx, st, EX_OVERALL);
    double t_posted = hmb_now();
    compute(ctx, st, iter);
    double t_computed = hmb_now();
    wait_exchange(st);
    times[T_WAIT] = hmb_now() - t_computed;
    allreduce(ctx, st, EX_OVERALL, iter);
    times[T_POST] = t_posted - t0;
}

static const hmb_mode stencil_phases[NPHASES + 1] = {
    [PHASE_COMM] = {.name = "comm", .iterate = phase_comm, .flags = HMB_MODE_HIDDEN},
    [PHASE_COMP] = {.name = "comp", .iterate = phase_comp, .flags = HMB_MODE_HIDDEN},
    [PHASE_OVERALL] = {.name = "overall", .iterate = phase_overall, .flags = HMB_MODE_HIDDEN},
    [NPHASES] = {.name = NULL}};
static const int all_phases[NPHASES] = {PHASE_COMM, PHASE_COMP, PHASE_OVERALL};

static int stencil_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    (void)pt;
    stencil_state *st = state;
    hmb_mode_results r;
    if (!hmb_modes_run(ctx, st, all_phases, NPHASES, iter, &r))
        return 0;
    const double t_comm = r.times[PHASE_COMM][0], t_comp = r.times[PHASE_COMP][0];
    const double t_overall = r.times[PHASE_OVERALL][0];
    hmb_record(ctx, out, "overlap_pct", hmb_overlap_pct(t_comm, t_comp, t_overall));
    hmb_record(ctx, out, "overlap_unclamped_pct", hmb_overlap_unclamped_pct(t_comm, t_comp, t_overall));
    hmb_record(ctx, out, "t_comm_us", t_comm * 1e6);
    hmb_record(ctx, out, "t_comp_us", t_comp * 1e6);
    hmb_record(ctx, out, "t_overall_us", t_overall * 1e6);
    hmb_record(ctx, out, "t_post_us", r.times[PHASE_OVERALL][T_POST] * 1e6);
    hmb_record(ctx, out, "t_wait_us", r.times[PHASE_OVERALL][T_WAIT] * 1e6);
    hmb_record(ctx, out, "throughput_MBps", hmb_throughput_Bps(st->bytes_per_rank, t_comm) * 1e-6);
    out->valid = t_comm > 0;
    return 0;
}

static void stencil_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    const stencil_state *st = state;
    int calc = !isnan(st->calib_t_comm_s);
    hmb_result_add_str(ctx, "compute_source", calc ? "calc-factor" : "compute");
    hmb_result_add_num(ctx, "mock", st->mock);
    hmb_result_add_num(ctx, "compute_us", (double)st->compute_ns * 1e-3);
    if (calc) {
        hmb_result_add_num(ctx, "calc_factor", HMB_OPTS(stencil_opts, ctx)->calc_factor);
        hmb_result_add_num(ctx, "t_comm_calibration_us", st->calib_t_comm_s * 1e6);
    }
}

/* Default sizes span the eager/rendezvous switch of every library we know (SPEC §3.7). */
static const hmb_default stencil_defaults[] = {{"sizes", "1K:1M"}, {NULL, NULL}};

static const hmb_metric stencil_metrics[] = {
    {.name = "overlap_pct", .unit = "%", .higher_is_better = 1, .bounds = "0..100", .in_table = 1, .is_signed = 0,
     .description = "100 (T_comm + T_comp - T_overall) / T_comm, clamped to [0, 100]"},
    {.name = "overlap_unclamped_pct", .unit = "%", .higher_is_better = 1, .bounds = "..100", .in_table = 0, .is_signed = 1,
     .description = "overlap_pct without the clamp (below 0: the overlapped phase took longer than T_comm + T_comp)"},
    {.name = "t_comm_us", .unit = "us", .higher_is_better = 0, .in_table = 1, .is_signed = 0,
     .description = "communication alone: 6 Irecv + 6 Isend, Waitall, Allreduce (slowest rank)"},
    {.name = "t_comp_us", .unit = "us", .higher_is_better = 0, .in_table = 1, .is_signed = 0,
     .description = "compute alone (slowest rank)"},
    {.name = "t_overall_us", .unit = "us", .higher_is_better = 0, .in_table = 1, .is_signed = 0,
     .description = "post, compute, Waitall, Allreduce: communication overlapped (slowest rank)"},
    {.name = "t_post_us", .unit = "us", .higher_is_better = 0, .in_table = 1, .is_signed = 0,
     .description = "overall phase: posting the 12 requests (initiation; slowest rank)"},
    {.name = "t_wait_us", .unit = "us", .higher_is_better = 0, .in_table = 1, .is_signed = 0,
     .description = "overall phase: the Waitall after the compute (slowest rank)"},
    {.name = "throughput_MBps", .unit = "MB/s", .higher_is_better = 1, .in_table = 0, .is_signed = 0,
     .description = "bytes sent per process per exchange (mean over ranks) / T_comm (1 MB = 1e6 B)"},
    HMB_METRIC_END};

static const hmb_bench stencil_bench = {
    .name = "stencil3d",
    .group = "patterns",
    .summary = "3-D 6-neighbour Irecv/Isend/Waitall + Allreduce: T_comm, T_comp, T_overall and overlap %",
    HMB_BENCH_OPTIONS(stencil_opts),
    .uses = HMB_OPTS_COMM | HMB_OPTS_TOPO,
    .defaults = stencil_defaults,
    .modes = stencil_phases,
    .metrics = stencil_metrics,
    .thread_level = MPI_THREAD_FUNNELED,
    .min_ranks = 1,
    .rank_multiple = 1,
    .derived_compute = HMB_DERIVED_TIME, /* --calc-factor x the exchange's time, without --compute */
    .check = stencil_check,
    .points = stencil_points,
    .setup = setup_point,
    .prepare = NULL, /* send data and poison: the harness's (hmb_check_register) */
    .iterate = stencil_iterate,
    .verify = stencil_verify,
    .teardown = stencil_teardown,
    .annotate = stencil_annotate,
    .pivot_metrics = "t_comm_us,t_comp_us,t_overall_us,t_post_us,t_wait_us,overlap_pct",
};
HMB_REGISTER(stencil_bench);
