/* proto's set-up: option checks, points, memory readings, the probe's transfer calibration, the
 * state of a point and its teardown. The probe and the trade-off: pattern.c; the trade-off's data
 * and checks: verify.c. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

void proto_check(hmb_ctx *ctx)
{
    const proto_opts *o = HMB_OPTS(proto_opts, ctx);
    const int n = o->range.n;
    const size_t *grid = o->range.v, element = (size_t)o->element;
    for (int i = 0; i < n; i++) {
        if (grid[i] % element)
            hmb_usage_error(ctx, "--range: %zu bytes is not a multiple of --element %zu", grid[i], element);
        if (grid[i] > INT_MAX)
            hmb_usage_error(ctx, "--range: %zu bytes is more than one MPI_BYTE count can hold", grid[i]);
        if (i > 0 && grid[i] <= grid[i - 1])
            hmb_usage_error(ctx, "--range must increase (%zu after %zu)", grid[i], grid[i - 1]);
    }
    if ((o->test & (1u << TEST_PROBE)) && n < 2)
        hmb_usage_error(ctx, "--range needs at least two sizes to find a switch between (e.g. 1K:1M)");
    if ((o->test & (1u << TEST_PROBE)) && (o->view & ((1u << VIEW_STEP) | (1u << VIEW_BOTH))) &&
        n < 2 * HMB_CHANGEPOINT_MIN_SIDE)
        hmb_usage_error(ctx, "--view %s needs at least %d --range sizes to fit a line on each side of a break "
                        "(e.g. 3K:5K:+64)", (o->view & (1u << VIEW_BOTH)) ? "both" : "step",
                        2 * HMB_CHANGEPOINT_MIN_SIDE);
    const size_t *sizes = hmb_common(ctx)->sizes.v;
    for (int i = 0; i < hmb_common(ctx)->sizes.n; i++)
        if (sizes[i] > INT_MAX)
            hmb_usage_error(ctx, "--sizes: %zu bytes is more than one MPI_BYTE count can hold", sizes[i]);
    if ((o->test & (1u << TEST_TRADEOFF)) && hmb_size(ctx) % 2)
        hmb_usage_error(ctx, "--test tradeoff needs an even number of ranks (pairs), got %d", hmb_size(ctx));
}

void proto_points(hmb_ctx *ctx, hmb_point_list *out)
{
    proto_run *run = calloc(1, sizeof *run);
    long rss = -1, hwm = -1;
    hmb_memory_kB(&rss, &hwm);
    double mem[2] = {(double)rss, (double)hwm};
    hmb_reduce_max(ctx, mem, 2);
    run->rss_init_kB = mem[0];
    run->hwm_init_kB = mem[1];
    hmb_set_run_data(ctx, run);

    const proto_opts *o = HMB_OPTS(proto_opts, ctx);
    const unsigned long long tests = o->test, views = o->view;
    const int ngrid = o->range.n, nsizes = hmb_common(ctx)->sizes.n;
    const size_t *grid = o->range.v, *sizes = hmb_common(ctx)->sizes.v;
    for (int v = 0; v < VIEW_COUNT && (tests & (1u << TEST_PROBE)); v++) {
        if (!(views & (1u << v)))
            continue;
        proto_point *p = hmb_points_new(out, grid[ngrid - 1]);
        p->test = TEST_PROBE;
        p->view = v;
    }
    for (int i = 0; i < nsizes && (tests & (1u << TEST_TRADEOFF)); i++) {
        proto_point *p = hmb_points_new(out, sizes[i]);
        p->test = TEST_TRADEOFF;
        p->window = o->window;
        p->pairs = hmb_size(ctx) / 2;
    }
}

void proto_max_memory(hmb_ctx *ctx, double *rss_kB, double *hwm_kB)
{
    long rss = -1, hwm = -1;
    hmb_memory_kB(&rss, &hwm);
    double mem[2] = {(double)rss, (double)hwm};
    hmb_reduce_max(ctx, mem, 2);
    *rss_kB = mem[0];
    *hwm_kB = mem[1];
}

/* ------------------------------------------------------------------ the probe's transfer times */

/* One-way time of a blocking transfer of each grid size (the fastest of a few round trips),
 * broadcast from rank 0: the probe computes about twice as long. */
static double transfer_time(proto_state *st, size_t size)
{
    MPI_Comm comm = hmb_comm(st->ctx);
    const int n = (int)size;
    double best = HUGE_VAL;
    for (int k = 0; k < CALIBRATION_ROUND_TRIPS && st->peer >= 0; k++) {
        double t0 = hmb_now();
        if (st->is_sender) {
            MPI_Send(st->send, n, MPI_BYTE, st->peer, TAG_DATA, comm);
            MPI_Recv(st->recv, n, MPI_BYTE, st->peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(st->recv, n, MPI_BYTE, st->peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
            MPI_Send(st->send, n, MPI_BYTE, st->peer, TAG_DATA, comm);
        }
        double rtt = hmb_now() - t0;
        best = rtt < best ? rtt : best;
    }
    best /= 2;
    MPI_Bcast(&best, 1, MPI_DOUBLE, 0, comm);
    return best;
}

void proto_calibrate_transfers(proto_state *st)
{
    hmb_phase(st->ctx, "probe: transfer calibration");
    for (int g = 0; g < st->ngrid; g++)
        st->transfer_s[g] = fmin(st->transfer_s[g], transfer_time(st, st->grid[g]));
}

/* Every rank exchanges one small message with every other rank: each pair has communicated. */
static void touch_every_pair(hmb_ctx *ctx)
{
    const int size = hmb_size(ctx);
    int *out = calloc((size_t)size, sizeof *out), *in = calloc((size_t)size, sizeof *in);
    if (!out || !in)
        abort();
    hmb_phase(ctx, "tradeoff: every pair");
    MPI_Alltoall(out, 1, MPI_INT, in, 1, MPI_INT, hmb_comm(ctx));
    free(out);
    free(in);
}

/* The probe: rank 0 against rank 1 over the --range grid (other ranks only join the collectives). */
size_t proto_probe_state(hmb_ctx *ctx, proto_state *st, const hmb_point *pt, int *ok)
{
    const int rank = hmb_rank(ctx);
    st->view = HMB_POINT(proto_point, pt)->view;
    st->is_sender = rank == 0;
    st->peer = rank == 0 ? 1 : rank == 1 ? 0 : -1;
    const proto_opts *o = HMB_OPTS(proto_opts, ctx);
    st->trials = (int)o->trials;
    st->element = (size_t)o->element;
    st->grid = o->range.v;
    st->ngrid = o->range.n;
    st->min_compute_s = (double)o->min_compute * 1e-9;
    *ok &= (st->transfer_s = calloc((size_t)st->ngrid, sizeof *st->transfer_s)) != NULL;
    *ok &= (st->share_at = calloc((size_t)st->ngrid, sizeof *st->share_at)) != NULL;
    *ok &= (st->cost_s = calloc((size_t)st->ngrid, sizeof *st->cost_s)) != NULL;
    *ok &= (st->pool = calloc((size_t)st->ngrid, sizeof *st->pool)) != NULL;
    for (int g = 0; g < st->ngrid && st->transfer_s && st->share_at && st->cost_s; g++)
        st->transfer_s[g] = HUGE_VAL, st->share_at[g] = NAN, st->cost_s[g] = HUGE_VAL;
    return st->grid[st->ngrid - 1];
}

/* The trade-off: rank i with i + n/2, a window each; the memory once every pair has communicated,
 * read before the benchmark's own buffers exist. */
size_t proto_tradeoff_state(hmb_ctx *ctx, proto_state *st, const hmb_point *pt, int *ok)
{
    const int rank = hmb_rank(ctx), half = hmb_size(ctx) / 2;
    st->is_sender = rank < half;
    st->peer = st->is_sender ? rank + half : rank - half;
    st->size = pt->size_bytes;
    st->window = (int)HMB_POINT(proto_point, pt)->window;
    *ok &= (st->reqs = calloc((size_t)st->window, sizeof *st->reqs)) != NULL;
    touch_every_pair(ctx);
    proto_max_memory(ctx, &st->rss_pairs_kB, &st->hwm_kB);
    return st->size * (size_t)st->window;
}

void *proto_setup(hmb_ctx *ctx, const hmb_point *pt, const proto_test_def *tests)
{
    proto_state *st = calloc(1, sizeof *st);
    st->ctx = ctx;
    st->pt = pt;
    st->test = HMB_POINT(proto_point, pt)->test;
    st->test_def = &tests[st->test];
    int ok = 1;
    size_t bytes = st->test_def->state(ctx, st, pt, &ok);
    ok &= (st->send = hmb_buffer_alloc(ctx, bytes)) != NULL && (st->recv = hmb_buffer_alloc(ctx, bytes)) != NULL;
    if (!hmb_all_agree(ctx, ok)) {
        hmb_unsupported(ctx, "cannot allocate 2 x %zu bytes of message buffers", bytes);
        return st;
    }
    if (st->test_def->ready)
        st->test_def->ready(st);
    return st;
}

void proto_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    proto_state *st = state;
    free(st->send);
    free(st->recv);
    free(st->reqs);
    free(st->transfer_s);
    free(st->share_at);
    free(st->cost_s);
    for (int g = 0; st->pool && g < st->ngrid; g++)
        free(st->pool[g].v);
    free(st->pool);
    free(st);
}
