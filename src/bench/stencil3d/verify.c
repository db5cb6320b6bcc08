/* stencil3d's checks: every face the harness fills, poisons and checks (registered per exchange
 * and direction), and each exchange's Allreduce result, checked here after the iteration. */
#include "stencil3d.h"

/* Validation as data: send data of (this rank, exchange x 6 + direction), checked on arrival. */
void stencil_register_checks(hmb_ctx *ctx, stencil_state *st)
{
    for (int ex = 0; ex < NEXCHANGES; ex++)
        for (int d = 0; d < NDIRS; d++) {
            const hmb_topo_dir *dir = &st->topo.dir[d];
            hmb_check_register(ctx, HMB_SEND, st->send[ex][d], st->size, hmb_rank(ctx), ex * NDIRS + d, 1,
                               HMB_AFTER_ITERATION, "send");
            if (dir->from != MPI_PROC_NULL)
                hmb_check_register(ctx, HMB_RECEIVE, st->recv[ex][d], st->size, dir->from, ex * NDIRS + d, 1,
                                   HMB_AFTER_ITERATION, "%s, direction %d (offset %+d,%+d,%+d) from rank %d",
                                   exchange_names[ex], d, dir->off[0], dir->off[1], dir->off[2], dir->from);
        }
}

/* The faces are checked by the harness (registered above); the Allreduce results here. */
void stencil_verify(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    stencil_state *st = state;
    const int n = hmb_size(ctx);
    for (int ex = 0; ex < NEXCHANGES; ex++) {
        if (st->mock)
            continue;
        double want = 0;
        for (int r = 0; r < n; r++)
            want += allreduce_term(r, ex, iter);
        if (hmb_validate_enabled(ctx) && st->reduced[ex] != want)
            hmb_validation_failure(ctx, pt, iter, -1, "%s: MPI_Allreduce gave %.17g, expected %.17g",
                                   exchange_names[ex], st->reduced[ex], want);
    }
}
