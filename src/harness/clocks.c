/* Clock offsets to rank 0 (SKaMPI / Jones-Koenig exchanges, ReproMPI HCA linear model).
 *
 * A group is a series of ping-pongs between rank 0 and rank r; r answers each ping with its
 * local clock reading, and the exchange with the smallest round trip gives the group's point:
 * (midpoint on rank 0's clock, offset). Groups are measured at start-up and again at the end of
 * the run; a least-squares line through all of them (clockfit.c) gives offset and drift.
 *
 * During the run the start-up offset is applied, without drift: start-up groups lie
 * microseconds apart, far too close to resolve a drift of a few ppm. The end-of-run groups
 * re-check that offset: the trailing "clocks" record holds the drift fitted over the whole run
 * and the end residual (offset measured at the end minus the one applied), i.e. how far the
 * run's cross-process timestamps had drifted by its end.
 *
 * On rank 0's own host CLOCK_MONOTONIC is one system-wide clock, so the true offset is exactly
 * 0: that is what is applied there, while the estimate is still made and recorded (it must come
 * out ~0, which checks the estimator). An oversubscribed node would otherwise turn the
 * estimate's few-microsecond error into one-way times that arrive before they were sent. */
#include <math.h>
#include <stdlib.h>

#include "ctx.h"
#include "env.h"
#include "output.h"

enum { CLOCK_GROUPS = 4, CLOCK_EXCHANGES = 15, CLOCK_TAG = 31001 };

/* Rank 0's measurements: per rank, CLOCK_GROUPS points at start-up, then CLOCK_GROUPS at the end. */
struct hmb_clocks {
    double *t_s, *offset_s; /* [rank * 2 * CLOCK_GROUPS + k] */
};

static double *point_slot(double *base, int rank, int k) { return base + (size_t)rank * 2 * CLOCK_GROUPS + k; }

/* Rank 0 side of one group with rank r: the best exchange's (midpoint, offset). */
static void measure_group(hmb_ctx *ctx, int r, double *t_mid_s, double *offset_s)
{
    double best_rtt = INFINITY;
    for (int k = 0; k < CLOCK_EXCHANGES; k++) {
        double t_remote = 0;
        double t_send = hmb_now();
        MPI_Send(&t_send, 1, MPI_DOUBLE, r, CLOCK_TAG, ctx->run.comm);
        MPI_Recv(&t_remote, 1, MPI_DOUBLE, r, CLOCK_TAG, ctx->run.comm, MPI_STATUS_IGNORE);
        double t_recv = hmb_now();
        if (t_recv - t_send < best_rtt) {
            best_rtt = t_recv - t_send;
            *t_mid_s = 0.5 * (t_send + t_recv);
            *offset_s = hmb_clock_exchange_offset(t_send, t_remote, t_recv);
        }
    }
}

/* Rank r side of one group. */
static void answer_group(hmb_ctx *ctx)
{
    for (int k = 0; k < CLOCK_EXCHANGES; k++) {
        double t_ping = 0;
        MPI_Recv(&t_ping, 1, MPI_DOUBLE, 0, CLOCK_TAG, ctx->run.comm, MPI_STATUS_IGNORE);
        double t_remote = hmb_now();
        MPI_Send(&t_remote, 1, MPI_DOUBLE, 0, CLOCK_TAG, ctx->run.comm);
    }
}

/* CLOCK_GROUPS groups with every rank, stored from index first (0: start-up, CLOCK_GROUPS: end). */
static void measure_all(hmb_ctx *ctx, int first)
{
    for (int r = 1; r < ctx->run.size; r++)
        for (int g = 0; g < CLOCK_GROUPS; g++) {
            if (ctx->run.rank == 0)
                measure_group(ctx, r, point_slot(ctx->run.clocks->t_s, r, first + g),
                              point_slot(ctx->run.clocks->offset_s, r, first + g));
            else if (ctx->run.rank == r)
                answer_group(ctx);
        }
}

/* Line through n of rank r's points starting at index first, expressed at t_ref_s. */
static void fit_points(const hmb_ctx *ctx, int r, int first, int n, double t_ref_s, hmb_clock_model *m)
{
    hmb_clock_fit(n, point_slot(ctx->run.clocks->t_s, r, first), point_slot(ctx->run.clocks->offset_s, r, first),
                  t_ref_s, m);
}

static double mean(const double *x, int n)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += x[i];
    return sum / n;
}

void hmb_clocks_sync(hmb_ctx *ctx)
{
    ctx->run.clocks = calloc(1, sizeof *ctx->run.clocks);
    ctx->run.clock_offsets_s = calloc((size_t)ctx->run.size, sizeof(double));
    ctx->run.clock_offsets_estimated_s = calloc((size_t)ctx->run.size, sizeof(double));
    if (!ctx->run.clocks || !ctx->run.clock_offsets_s || !ctx->run.clock_offsets_estimated_s)
        abort();
    if (ctx->run.rank == 0) {
        ctx->run.clocks->t_s = calloc((size_t)ctx->run.size * 2 * CLOCK_GROUPS, sizeof(double));
        ctx->run.clocks->offset_s = calloc((size_t)ctx->run.size * 2 * CLOCK_GROUPS, sizeof(double));
        if (!ctx->run.clocks->t_s || !ctx->run.clocks->offset_s)
            abort();
    }
    ctx->run.clock_offset_s = 0;
    measure_all(ctx, 0);
    if (ctx->run.rank == 0)
        for (int r = 1; r < ctx->run.size; r++) {
            /* Applied offset: the median of the groups' best exchanges, so one group hit by a
             * steal burst (a long best round trip) cannot shift it. At start-up the groups are
             * microseconds apart: the line fit's drift is for the end-of-run record only. */
            hmb_summary med;
            hmb_summarize(point_slot(ctx->run.clocks->offset_s, r, 0), CLOCK_GROUPS, 0.95, &med);
            ctx->run.clock_offsets_s[r] = med.median;
        }
    /* Every rank gets the table (benchmarks may report others' offsets). */
    MPI_Bcast(ctx->run.clock_offsets_s, ctx->run.size, MPI_DOUBLE, 0, ctx->run.comm);
    for (int r = 0; r < ctx->run.size; r++)
        ctx->run.clock_offsets_estimated_s[r] = ctx->run.clock_offsets_s[r];
    ctx->run.clock_offset_s = ctx->run.clock_offsets_s[ctx->run.rank];

    /* Ranks on rank 0's host (shared-memory neighbours of rank 0) apply the exact offset 0. */
    MPI_Comm node;
    MPI_Comm_split_type(ctx->run.comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int lowest_world_rank = 0;
    MPI_Allreduce(&ctx->run.rank, &lowest_world_rank, 1, MPI_INT, MPI_MIN, node);
    MPI_Comm_free(&node);
    int on_root_host = lowest_world_rank == 0;
    int *on_root_host_all = malloc((size_t)ctx->run.size * sizeof(int));
    if (!on_root_host_all)
        abort();
    MPI_Allgather(&on_root_host, 1, MPI_INT, on_root_host_all, 1, MPI_INT, ctx->run.comm);
    for (int r = 0; r < ctx->run.size; r++)
        if (on_root_host_all[r])
            ctx->run.clock_offsets_s[r] = 0.0;
    if (on_root_host)
        ctx->run.clock_offset_s = 0.0;
    free(on_root_host_all);
}

void hmb_clocks_recheck(hmb_ctx *ctx)
{
    measure_all(ctx, CLOCK_GROUPS);
    if (ctx->run.rank != 0)
        return;
    double span_s = 0;
    hmb_json j;
    hmb_output_begin_record(ctx, &j, "clocks");
    hmb_json_int(&j, "groups", CLOCK_GROUPS);
    hmb_json_int(&j, "exchanges_per_group", CLOCK_EXCHANGES);
    /* Rank 0 itself: offset 0, drift 0 (calloc). */
    hmb_clock_model *whole = calloc((size_t)ctx->run.size, sizeof *whole);
    hmb_clock_model *end = calloc((size_t)ctx->run.size, sizeof *end);
    if (!whole || !end)
        abort();
    for (int r = 1; r < ctx->run.size; r++) {
        double t_start_s = mean(point_slot(ctx->run.clocks->t_s, r, 0), CLOCK_GROUPS);
        double t_end_s = mean(point_slot(ctx->run.clocks->t_s, r, CLOCK_GROUPS), CLOCK_GROUPS);
        fit_points(ctx, r, 0, 2 * CLOCK_GROUPS, t_start_s, &whole[r]);
        fit_points(ctx, r, CLOCK_GROUPS, CLOCK_GROUPS, t_end_s, &end[r]);
        span_s = fmax(span_s, t_end_s - t_start_s);
    }
    hmb_json_num(&j, "span_s", span_s);
    hmb_json_open_arr(&j, "offsets_applied_s");
    for (int r = 0; r < ctx->run.size; r++)
        hmb_json_num(&j, NULL, ctx->run.clock_offsets_s[r]);
    hmb_json_close_arr(&j);
    hmb_json_open_arr(&j, "offsets_start_s"); /* the whole-run line at the start-up groups */
    for (int r = 0; r < ctx->run.size; r++)
        hmb_json_num(&j, NULL, whole[r].offset_s);
    hmb_json_close_arr(&j);
    hmb_json_open_arr(&j, "offsets_end_s");
    for (int r = 0; r < ctx->run.size; r++)
        hmb_json_num(&j, NULL, end[r].offset_s);
    hmb_json_close_arr(&j);
    hmb_json_open_arr(&j, "drift_ppm");
    for (int r = 0; r < ctx->run.size; r++)
        hmb_json_num(&j, NULL, whole[r].drift * 1e6);
    hmb_json_close_arr(&j);
    hmb_json_open_arr(&j, "end_residual_s"); /* measured at the end minus applied */
    for (int r = 0; r < ctx->run.size; r++)
        hmb_json_num(&j, NULL, end[r].offset_s - ctx->run.clock_offsets_s[r]);
    hmb_json_close_arr(&j);
    hmb_json_open_arr(&j, "fit_residual_max_s");
    for (int r = 0; r < ctx->run.size; r++)
        hmb_json_num(&j, NULL, whole[r].residual_max_s);
    hmb_json_close_arr(&j);
    hmb_json_close_obj(&j);
    hmb_output_record(ctx, &j);
    hmb_json_free(&j);
    free(whole);
    free(end);
}

void hmb_clocks_free(hmb_ctx *ctx)
{
    if (ctx->run.clocks) {
        free(ctx->run.clocks->t_s);
        free(ctx->run.clocks->offset_s);
        free(ctx->run.clocks);
        ctx->run.clocks = NULL;
    }
    free(ctx->run.clock_offsets_s);
    free(ctx->run.clock_offsets_estimated_s);
    ctx->run.clock_offsets_s = ctx->run.clock_offsets_estimated_s = NULL;
}
