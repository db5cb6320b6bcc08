/* part's validation: what the harness checks after every iteration (the sender's partitions,
 * written by the harness, and every phase's receive buffer, poisoned before the iteration), and,
 * during the partitioned phase, the data behind each arrival MPI_Parrived reports. */
#include <string.h>

#include "part.h"

void part_register_checks(hmb_ctx *ctx, part_state *st)
{
    if (st->rank == SENDER) /* the harness writes each partition's pattern */
        for (int i = 0; i < st->nparts_send; i++)
            hmb_check_register(ctx, HMB_SEND, st->send_buf + (size_t)i * st->psize_send, st->psize_send, SENDER, i, 1,
                               HMB_AFTER_ITERATION, "send");
    if (st->rank != RECEIVER)
        return;
    /* every send partition in every phase's buffer, checked after the iteration; poisoned before
     * it, so a reported-but-unwritten partition is visible. The polled phase's comes first when it
     * runs: --inject corrupt hits the first check, so the tests see that this buffer is checked
     * too. */
    unsigned char *bufs[4] = {st->recv_buf_polled, st->recv_buf_part, st->recv_buf_single, st->recv_buf_persist};
    static const char *const phase[4] = {"polled-receive", "partitioned", "single-send", "persistent"};
    for (int b = st->polled ? 0 : 1; b < 4 - !st->persistent; b++)
        for (int i = 0; i < st->nparts_send; i++)
            hmb_check_register(ctx, HMB_RECEIVE, bufs[b] + (size_t)i * st->psize_send, st->psize_send, SENDER, i,
                               1, HMB_AFTER_ITERATION, "%s phase, send partition %d (%zu bytes)", phase[b], i,
                               st->psize_send);
}

static int still_poison(const unsigned char *p)
{
    static const unsigned char poison[8] = {HMB_POISON_BYTE, HMB_POISON_BYTE, HMB_POISON_BYTE, HMB_POISON_BYTE,
                                            HMB_POISON_BYTE, HMB_POISON_BYTE, HMB_POISON_BYTE, HMB_POISON_BYTE};
    return memcmp(p, poison, 8) == 0;
}

/* Called right after MPI_Parrived first reports receive partition j: every send partition
 * that overlaps j must have landed, so the first and last word of each overlapping piece
 * must have lost its poison. (The harness checks every byte afterwards.) */
void part_check_reported_arrival(void *arg, int j)
{
    const part_arrival *a = arg;
    const part_state *st = a->st;
    size_t lo = (size_t)j * st->psize_recv, hi = lo + st->psize_recv; /* bytes [lo, hi) */
    for (size_t piece = lo; piece < hi;) {
        size_t send_part_end = (piece / st->psize_send + 1) * st->psize_send;
        size_t piece_end = send_part_end < hi ? send_part_end : hi;
        if (still_poison(st->recv_buf_part + piece) || still_poison(st->recv_buf_part + piece_end - 8))
            hmb_validation_failure(a->ctx, st->pt, a->iter, j,
                                   "MPI_Parrived reported receive partition %d of %d arrived but its data had not "
                                   "(bytes %zu..%zu still unwritten; send partitions %d, receive partitions %d): "
                                   "library conformance problem",
                                   j, st->nparts_recv, piece, piece_end - 1, st->nparts_send, st->nparts_recv);
        piece = piece_end;
    }
}
