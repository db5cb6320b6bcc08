/* p2p's send data and checks, outside the timed region: slot k of a send set holds the pattern
 * (rank, k, generation) under either data regime (--data reuse: two sets by iteration parity,
 * or latency's one set under --cache hot; --data fresh: written before every sample), and every
 * slot's last message is checked after the sample. */
#include "p2p.h"

/* The generation iteration iter's messages carry with one send set: 0 under --data reuse
 * (written once), iter under --data fresh (written before every sample). */
static long one_set_gen(const hmb_ctx *ctx, long iter)
{
    return hmb_common(ctx)->data == HMB_DATA_REUSE ? 0 : iter;
}

/* One send set: (re)write it when its generation changes (the test-only --inject stale fault sends
 * another generation in that iteration and restores it in the next), poison the receive slots. */
static void one_set_prepare(hmb_ctx *ctx, p2p_state *st, long iter)
{
    if (st->send_sets) {
        const int stale = iter == st->stale_at && st->is_sender;
        const long gen = stale ? one_set_gen(ctx, iter) ^ 1 : one_set_gen(ctx, iter);
        if (iter == 0 || stale || iter == st->stale_at + 1 || gen != one_set_gen(ctx, iter - 1))
            for (int k = 0; k < st->slots; k++)
                hmb_fill(st->send_sets + (size_t)k * st->size, st->size, hmb_rank(ctx), k, gen);
    }
    if (st->recv_slots && hmb_validate_enabled(ctx))
        for (int k = 0; k < st->slots; k++)
            hmb_poison_pages(st->recv_slots + (size_t)k * st->size, st->size);
}

/* Send data: slot k of a set holds the pattern (rank, k, generation). Written before the
 * harness's cold-cache flush, and under --data reuse only in a point's first two iterations
 * (one set: one_set_prepare). */
void p2p_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    p2p_state *st = state;
    if (st->nsets == 1) {
        one_set_prepare(ctx, st, iter);
        return;
    }
    if (!st->send_sets || !hmb_data_refill(ctx, iter))
        return;
    unsigned char *set = st->send_sets + (size_t)(iter & 1) * st->size * (size_t)st->slots;
    for (int k = 0; k < st->slots; k++)
        hmb_fill(set + (size_t)k * st->size, st->size, hmb_rank(ctx), k, hmb_data_gen(ctx, iter));
}

/* Every slot's last message of the iteration (in a cache-sized window, earlier messages into
 * the same slot are overwritten by it before they can be checked). */
void p2p_verify(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    p2p_state *st = state;
    if (!st->recv_slots)
        return;
    for (int k = 0; k < st->slots; k++)
        if (st->nsets == 1)
            hmb_check_gen(ctx, pt, st->recv_slots + (size_t)k * st->size, st->size, st->peer, k, iter,
                          one_set_gen(ctx, iter));
        else
            hmb_check_data(ctx, pt, st->recv_slots + (size_t)k * st->size, st->size, st->peer, k, iter);
}
