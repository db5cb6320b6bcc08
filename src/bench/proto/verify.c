/* proto's data and checks outside the timed region: the trade-off's send data, written before
 * every iteration, and every message it received, checked after. The probe writes and checks its
 * data inside each trial (pattern.c), outside the waits it times. */
#include "proto.h"

static void tradeoff_prepare(proto_state *st, long iter)
{
    for (int j = 0; j < st->window && st->is_sender; j++)
        hmb_fill(st->send + (size_t)j * st->size, st->size, hmb_rank(st->ctx), j, iter);
}

void proto_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    proto_state *st = state;
    if (st->test == TEST_TRADEOFF)
        tradeoff_prepare(st, iter);
}

/* The probe validates inside each trial (probe_once); tradeoff checks every message here. */
void proto_verify(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    proto_state *st = state;
    if (st->test != TEST_TRADEOFF || st->is_sender)
        return;
    for (int j = 0; j < st->window; j++)
        hmb_check_buffer(ctx, pt, st->recv + (size_t)j * st->size, st->size, st->peer, j, iter);
}
