/* proto's data and checks outside the timed region: the trade-off's send data, written before
 * every iteration, and every message it received, checked after. The probe writes and checks its
 * data inside each trial (pattern.c), outside the waits it times. */
#include "proto.h"

void proto_tradeoff_prepare(proto_state *st, long iter)
{
    for (int j = 0; j < st->window && st->is_sender; j++)
        hmb_fill(st->send + (size_t)j * st->size, st->size, hmb_rank(st->ctx), j, iter);
}

void proto_tradeoff_verify(hmb_ctx *ctx, const proto_state *st, const hmb_point *pt, long iter)
{
    if (st->is_sender)
        return;
    for (int j = 0; j < st->window; j++)
        hmb_check_buffer(ctx, pt, st->recv + (size_t)j * st->size, st->size, st->peer, j, iter);
}
