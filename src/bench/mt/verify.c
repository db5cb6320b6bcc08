/* mt's data and checks, outside the timed region: the rate test's send slots (hmb_fill's pattern
 * of the lane and iteration; the stamp is written as each message is posted) and its receive slots'
 * poison, the get test's target windows; then every received message and every got slot checked. */
#include <string.h>

#include "mt.h"

void mt_rate_prepare(hmb_ctx *ctx, mt_state *s, long iter)
{
    if (s->sending && iter == s->stale_at)
        hmb_inject_fired(ctx, HMB_INJECT_STALE); /* lane 0's slot 0 below, and its stamp in rate_thread, pattern.c */
    if (s->sending) {
        for (int l = 0; l < s->nlanes; l++)
            for (int i = 0; i < s->window; i++)
                hmb_fill(mt_send_slot(s, l, i), s->size, hmb_rank(ctx), l,
                         l == 0 && i == 0 && iter == s->stale_at ? iter - 1 : iter);
    } else {
        /* Poison: a slot no message reached carries an impossible stamp (lane 0xFFFF), never
         * an earlier iteration's data or calloc's zeros (a valid stamp at iteration 0). */
        memset(s->recvbuf, 0xFF, (size_t)s->nlanes * s->windows * s->window * s->size);
    }
}

/* Every message: stamp of this iteration, a legal (lane, seq), exactly once, on its own lane
 * unless the mode shares one (comm, tag), in order unless the mode allows overtaking; then
 * every byte against the pattern of the lane (sending thread) and iteration it claims. So in
 * `shared`, where any receive may take any lane's message, exactly the messages sent this
 * iteration are accepted. Order holds there too, per (sending lane, receiving lane): one
 * thread's sends are ordered, one thread's receives are ordered, and MPI's non-overtaking
 * rule forbids a later receive taking an earlier message while an earlier receive that
 * matches it is pending. */
void mt_rate_verify(hmb_ctx *ctx, mt_state *s, const hmb_point *pt, long iter)
{
    if (s->sending || !hmb_validate_enabled(ctx))
        return;
    int per_lane = s->windows * s->window;
    /* Order is promised unless the library kept an asserting mode's mpi_assert_allow_overtaking. */
    int ordered = !s->mode_def->asserts || strcmp(s->tag_info[MT_INFO_ALLOW_OVERTAKING], "true") != 0;
    memset(s->seen, 0, (size_t)s->nlanes * per_lane);
    int last_seq[HMB_MAX_THREADS];
    for (int r = 0; r < s->nlanes; r++) {
        for (int l = 0; l < s->nlanes; l++)
            last_seq[l] = -1;
        /* Slots of lane r in the order its receives were posted (by one thread). */
        for (int k = 0; k < per_lane; k++) {
            unsigned char *msg = mt_recv_slot(s, r, k);
            uint64_t stamp;
            memcpy(&stamp, msg, sizeof stamp);
            long stamp_iter = (long)(stamp >> 40);
            int lane = (int)(stamp >> 24 & 0xFFFF), seq = (int)(stamp & MT_SEQ_MASK);
            if (stamp_iter != (iter & MT_SEQ_MASK))
                hmb_validation_failure(ctx, pt, iter, r, "receive %d of lane %d holds a message stamped for "
                                       "iteration %ld (mod 2^24), expected %ld", k, r, stamp_iter, iter & MT_SEQ_MASK);
            if (lane >= s->nlanes || seq >= per_lane)
                hmb_validation_failure(ctx, pt, iter, r, "receive %d of lane %d holds an impossible stamp "
                                       "(lane %d, seq %d)", k, r, lane, seq);
            if (!s->mode_def->any_lane && lane != r)
                hmb_validation_failure(ctx, pt, iter, r, "a message of lane %d arrived on lane %d's "
                                       "communicator/tag", lane, r);
            if (s->seen[(size_t)lane * per_lane + seq]++)
                hmb_validation_failure(ctx, pt, iter, lane, "message %d of lane %d received twice", seq, lane);
            if (ordered && seq <= last_seq[lane])
                hmb_validation_failure(ctx, pt, iter, lane, "message %d of lane %d overtook message %d "
                                       "(mode %s promises order)", last_seq[lane], lane, seq,
                                       mt_mode_names[s->mode]);
            last_seq[lane] = seq;
            /* The stamp checked, restore the pattern's first word and check every byte. */
            unsigned char prefix[MT_STAMP_BYTES];
            hmb_fill(prefix, sizeof prefix, s->peer, lane, iter);
            memcpy(msg, prefix, sizeof prefix);
            hmb_check_buffer(ctx, pt, msg, s->size, s->peer, lane, iter);
        }
    }
    for (int l = 0; l < s->nlanes; l++)
        for (int q = 0; q < per_lane; q++)
            if (!s->seen[(size_t)l * per_lane + q])
                hmb_validation_failure(ctx, pt, iter, l, "message %d of lane %d never arrived", q, l);
}

void mt_get_prepare(hmb_ctx *ctx, mt_state *s, long iter)
{
    if (!s->sending) {
        for (int l = 0; l < s->nlanes; l++)
            hmb_fill(s->lanes[l].target_mem, s->size, hmb_rank(ctx), l, iter);
        for (int w = 0; w < s->nwins; w++)
            MPI_Win_sync(s->wins[w]);
    }
}

void mt_get_verify(hmb_ctx *ctx, mt_state *s, const hmb_point *pt, long iter)
{
    if (!s->sending)
        return;
    for (int l = 0; l < s->nlanes; l++)
        for (int op = 0; op < s->window; op++)
            hmb_check_buffer(ctx, pt, mt_get_slot(s, l, op), s->size, s->peer, l, iter);
}
