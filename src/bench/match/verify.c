/* match's data and checks, outside the timed region: every message's send data, the pattern of
 * (its real sender's grid rank, its tag, the iteration), written before the iteration with the
 * receive slots poisoned, and every received message checked against it after. */
#include <string.h>

#include "match.h"

/* Send slots hold iteration iter's data; receive slots poison (a missing message is caught). */
void match_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    (void)pt;
    match_state *st = state;
    long gen = hmb_data_gen(ctx, iter);
    for (int d = 0; d < st->ndirs; d++) {
        if (st->send_peer[d] == MPI_PROC_NULL)
            continue;
        for (int t = 0; t < st->threads; t++)
            hmb_fill(match_slot(st->sbuf, st, d, t), st->bytes, st->send_label[d], match_tag(st, d, t), gen);
    }
    memset(st->rbuf, 0xA5, (size_t)st->ndirs * (size_t)st->threads * st->bytes);
}

void match_verify(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    match_state *st = state;
    if (!hmb_validate_enabled(ctx))
        return;
    for (int d = 0; d < st->ndirs; d++) {
        if (st->recv_peer[d] == MPI_PROC_NULL)
            continue;
        for (int t = 0; t < st->threads; t++) {
            size_t bad = 0;
            int tag = match_tag(st, d, t);
            if (!hmb_check(ctx, match_slot(st->rbuf, st, d, t), st->bytes, st->recv_label[d], tag, iter, &bad)) {
                const int *o = st->topo.dir[d].off;
                hmb_validation_failure(ctx, pt, iter, tag,
                                       "rank %d: message of direction %d (%+d,%+d,%+d), thread %d, tag %d from grid "
                                       "rank %d (MPI rank %d): byte %zu of %zu wrong",
                                       hmb_rank(ctx), d, o[0], o[1], o[2], t, tag, st->recv_label[d],
                                       st->recv_peer[d], bad, st->bytes);
            }
        }
    }
}

/* "t0:3,1,...;t1:..." — one thread's tags in posting order, -1 (no neighbour) left out. */
