/* stencil3d's set-up: option checks, points, the grid, the buffers and the compute of a point
 * (--compute, or --calc-factor x the exchange's time, measured here before the point), and its
 * teardown. The phases: pattern.c; what is checked: verify.c. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "stencil3d.h"

void stencil_check(hmb_ctx *ctx)
{
    hmb_topo topo;
    hmb_topo_from_options(ctx, 3, NDIRS, 1, &topo);
    const hmb_common_opts *c = hmb_common(ctx);
    for (int i = 0; i < c->sizes.n; i++)
        if (c->sizes.v[i] == 0 || c->sizes.v[i] > INT_MAX)
            hmb_usage_error(ctx, "--sizes: %zu bytes per neighbour (give 1 byte .. 2 GB - 1)", c->sizes.v[i]);
    if (c->given.compute && c->compute <= 0)
        hmb_usage_error(ctx, "--compute: must be > 0 (or leave it out: compute = --calc-factor x T_comm)");
    if (c->given.compute && HMB_OPTS(stencil_opts, ctx)->given.calc_factor)
        hmb_usage_error(ctx, "--compute and --calc-factor both given: choose one");
}

void stencil_points(hmb_ctx *ctx, hmb_point_list *out)
{
    for (int i = 0; i < hmb_common(ctx)->sizes.n; i++)
        hmb_points_new(out, hmb_common(ctx)->sizes.v[i]);
}

/* The exchange alone, as the calc-factor calibration runs it (hmb_calc_factor_ns). */
typedef struct {
    hmb_ctx *ctx;
    stencil_state *st;
    void (*exchange)(hmb_ctx *ctx, stencil_state *st);
} calib_arg;

static void run_exchange(void *arg)
{
    calib_arg *c = arg;
    c->exchange(c->ctx, c->st);
}

void *stencil_setup(hmb_ctx *ctx, const hmb_point *pt, void (*exchange_alone)(hmb_ctx *ctx, stencil_state *st))
{
    stencil_state *st = calloc(1, sizeof *st);
    if (!st)
        abort();
    hmb_topo_from_options(ctx, 3, NDIRS, 0, &st->topo);
    st->ops = hmb_comm_policy(ctx);
    hmb_comm_route(st->ops, ctx, &st->topo);
    st->mock = st->ops->mock;
    st->size = pt->size_bytes;
    st->threads = hmb_threads(ctx);
    const size_t total = 2 * NEXCHANGES * NDIRS * st->size;
    st->buffers = hmb_buffer_alloc(ctx, total);
    if (!hmb_all_agree(ctx, st->buffers != NULL)) {
        hmb_unsupported(ctx, "cannot allocate %zu bytes of send and receive buffers", total);
        return st;
    }
    for (int ex = 0; ex < NEXCHANGES; ex++)
        for (int d = 0; d < NDIRS; d++) {
            st->send[ex][d] = st->buffers + ((size_t)ex * NDIRS + d) * st->size;
            st->recv[ex][d] = st->buffers + ((size_t)(NEXCHANGES + ex) * NDIRS + d) * st->size;
        }
    stencil_register_checks(ctx, st);
    double sent = 0.0; /* bytes this rank sends per exchange; the mean over ranks (none in mock mode) */
    for (int d = 0; d < NDIRS; d++)
        sent += st->topo.dir[d].to != MPI_PROC_NULL && !st->mock ? (double)st->size : 0.0;
    hmb_reduce_sum(ctx, &sent, 1);
    st->bytes_per_rank = sent / hmb_size(ctx);
    st->calib_t_comm_s = NAN;
    if (hmb_common(ctx)->given.compute) {
        st->compute_ns = hmb_common(ctx)->compute;
    } else {
        calib_arg arg = {ctx, st, exchange_alone};
        st->compute_ns = hmb_calc_factor_ns(ctx, hmb_comm(ctx), HMB_OPTS(stencil_opts, ctx)->calc_factor,
                                            run_exchange, &arg, &st->calib_t_comm_s);
    }
    return st;
}

void stencil_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    stencil_state *st = state;
    free(st->buffers); /* the harness drops its registrations after teardown */
    free(st);
}
