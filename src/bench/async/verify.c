/* async's data and checks, outside every timed region: the blocks the harness fills, poisons and
 * checks (registered per operation), and the reductions' operands and results, which this file
 * writes and checks itself. */
#include <string.h>

#include "async.h"

/* Pattern part of block j in a phase: distinct per direction/destination and phase. */
static int pattern_part(int block, int phase) { return 2 * block + phase; }

static const char *phase_name(int phase) { return phase == ASYNC_BLOCKING ? "blocking baseline" : "non-blocking run"; }

/* ------------------------------------------------------------------ registered blocks */

/* Validation as data: block j of this rank's send buffer, with its pattern identity (this rank,
 * pattern_part(j)), and block j of its receive buffer, which rank `from` sent as its part `part`;
 * the harness fills, poisons and checks them every iteration. */
static void register_block(async_exchange *ex, int phase, int j, int from, int part)
{
    size_t block_bytes = (size_t)ex->count * sizeof(double);
    const char *op = async_op_names[ex->op];
    double *send = ex->buf[phase].send, *recv = ex->buf[phase].recv;
    hmb_check_register(ex->ctx, HMB_SEND, send + (size_t)j * ex->count, block_bytes, ex->rank, pattern_part(j, phase),
                       1, HMB_AFTER_ITERATION, "send");
    hmb_check_register(ex->ctx, HMB_RECEIVE, recv + (size_t)j * ex->count, block_bytes, from,
                       pattern_part(part, phase), 1, HMB_AFTER_ITERATION, "%s: block %d from rank %d (%s)", op, j,
                       from, phase_name(phase));
}

/* pt2pt: the one block goes to the peer and comes from it. */
void async_register_pair(async_exchange *ex)
{
    for (int phase = 0; phase < ASYNC_PHASES; phase++)
        register_block(ex, phase, 0, ex->peer, 0);
}

/* exch, neighbor_alltoall: block j goes in direction j and comes from the rank opposite. */
void async_register_neighbors(async_exchange *ex)
{
    for (int phase = 0; phase < ASYNC_PHASES; phase++)
        for (int j = 0; j < ex->nblocks; j++)
            register_block(ex, phase, j, ex->recv_from[j], j);
}

/* alltoall: block j is addressed to rank j; received block s came from rank s, which addressed it
 * to this rank. */
void async_register_alltoall(async_exchange *ex)
{
    for (int phase = 0; phase < ASYNC_PHASES; phase++)
        for (int j = 0; j < ex->nblocks; j++)
            register_block(ex, phase, j, j, ex->rank);
}

/* ibcast: one buffer, in place; the root's data is the message. */
void async_register_broadcast(async_exchange *ex)
{
    size_t block_bytes = (size_t)ex->count * sizeof(double);
    for (int phase = 0; phase < ASYNC_PHASES; phase++)
        hmb_check_register(ex->ctx, ex->rank == 0 ? HMB_SEND : HMB_RECEIVE, ex->buf[phase].recv, block_bytes, 0,
                           pattern_part(0, phase), 1, HMB_AFTER_ITERATION, "%s: the block from rank 0 (%s)",
                           async_op_names[ex->op], phase_name(phase));
}

/* ------------------------------------------------------------------ reductions */

/* Reduction operand of element index: rank + 1 + (2 cycle + phase) n + index, cycle = iter
 * mod the period. Operands and sums are integers below 2^53, so sums are exact in any order;
 * at one element every phase and iteration (within the period) has its own sum, and within
 * one phase every element has its own: a stale, other-phase or permuted result cannot pass.
 * Sum over the n ranks: n(n+1)/2 + n^2 (2 cycle + phase) + n index. */
static long long reduce_cycle(const async_exchange *ex, long iter)
{
    return ((long long)iter % ex->reduce_period + ex->reduce_period) % ex->reduce_period;
}

static double reduce_value(const async_exchange *ex, long index, long iter, int phase)
{
    return (double)(ex->rank + 1 + (2 * reduce_cycle(ex, iter) + phase) * ex->nranks + index);
}

static double reduce_sum(const async_exchange *ex, long index, long iter, int phase)
{
    long long n = ex->nranks;
    return (double)(n * (n + 1) / 2 + n * n * (2 * reduce_cycle(ex, iter) + phase) + n * index);
}

void async_fill_operands(async_exchange *ex, long iter, int phase)
{
    double *send = ex->buf[phase].send, *recv = ex->buf[phase].recv;
    memset(recv, 0xff, (size_t)ex->count * sizeof(double));
    for (long i = 0; i < ex->count; i++)
        send[i] = reduce_value(ex, i, iter, phase);
}

/* --inject corrupt: when the harness picks this check, the result gets one flipped byte (its middle
 * byte), so tests prove that the reduction check catches it. */
static void corrupt_if_picked(async_exchange *ex, double *result, long iter)
{
    if (hmb_corrupt_pick(ex->ctx, iter))
        ((unsigned char *)result)[(size_t)ex->count * sizeof(double) / 2] ^= 0x5a;
}

void async_check_sum(async_exchange *ex, long iter, int phase)
{
    if (!hmb_validate_enabled(ex->ctx))
        return;
    double *result = ex->buf[phase].recv;
    corrupt_if_picked(ex, result, iter);
    for (long i = 0; i < ex->count; i++) {
        double expected = reduce_sum(ex, i, iter, phase);
        if (result[i] != expected)
            hmb_validation_failure(ex->ctx, ex->pt, iter, -1, "%s element %ld of %d is %.17g, expected %.17g (%s)",
                                   async_op_names[ex->op], i, ex->count, result[i], expected, phase_name(phase));
    }
}

/* ------------------------------------------------------------------ the descriptor's callbacks */

/* Both phases' reduction operands before the --cache cold flush (the other operations' blocks: the
 * harness's); nothing inside iterate() touches them first. */
void async_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    (void)ctx, (void)pt;
    async_exchange *ex = &((async_state *)state)->ex;
    for (int phase = 0; ex->def->fill && phase < ASYNC_PHASES; phase++)
        ex->def->fill(ex, iter, phase);
}

void async_verify(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    (void)ctx, (void)pt;
    async_exchange *ex = &((async_state *)state)->ex;
    for (int phase = 0; ex->def->check && phase < ASYNC_PHASES; phase++)
        ex->def->check(ex, iter, phase);
}
