/* The operations of the `async` benchmark: blocking baselines, non-blocking posts, data
 * patterns and checks. See async_ops.h. */
#include "async_ops.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const async_op_names[ASYNC_OP_COUNT + 1] = {
    "pt2pt", "exch", "allreduce", "ialltoall", "ibcast", "neighbor_alltoall", "allreduce_init", NULL,
};

const char *async_op_name(async_op op) { return async_op_names[op]; }

int async_op_from_name(const char *name)
{
    for (int i = 0; i < ASYNC_OP_COUNT; i++)
        if (strcmp(name, async_op_names[i]) == 0)
            return i;
    return -1;
}

int async_op_uses_neighbors(async_op op) { return op == OP_EXCH || op == OP_NEIGHBOR_ALLTOALL; }

int async_op_supported(async_op op, char *why, size_t whylen)
{
#ifndef HMB_HAVE_MPI_NEIGHBOR_ALLTOALL
    if (op == OP_NEIGHBOR_ALLTOALL) {
        snprintf(why, whylen, "neighbor_alltoall: this MPI library has no MPI_Neighbor_alltoall (MPI 3.0)");
        return 0;
    }
#endif
#ifndef HMB_HAVE_MPI_ALLREDUCE_INIT
    if (op == OP_ALLREDUCE_INIT) {
        snprintf(why, whylen,
                 "allreduce_init: this MPI library has no MPI_Allreduce_init (persistent collectives, MPI 4.0)");
        return 0;
    }
#endif
    (void)op, (void)why, (void)whylen;
    return 1;
}

int async_size_fits(size_t size_bytes, char *why, size_t whylen)
{
    if (size_bytes / sizeof(double) <= (size_t)INT_MAX)
        return 1;
    snprintf(why, whylen,
             "--sizes: %zu bytes is %zu doubles per message (per peer block for alltoall and neighbourhoods), "
             "more than an MPI int count holds (%d)",
             size_bytes, size_bytes / sizeof(double), INT_MAX);
    return 0;
}

/* Exchange partners: direction j sends to send_to[j] and receives from recv_from[j] (the
 * rank on the opposite side), so the message of direction j always meets a receive of
 * direction j, even where a small ring or grid makes neighbours repeat. */
static void ring_neighbors(async_exchange *ex, int k)
{
    for (int j = 0; j < k; j++) {
        int distance = j / 2 + 1, sign = j % 2 == 0 ? 1 : -1;
        int offset = ((sign * distance) % ex->nranks + ex->nranks) % ex->nranks;
        ex->send_to[j] = (ex->rank + offset) % ex->nranks;
        ex->recv_from[j] = (ex->rank - offset + ex->nranks) % ex->nranks;
    }
}

static void grid_neighbors(async_exchange *ex, int k)
{
    /* The harness topology: a periodic 2-D grid, faces then diagonals (k = 4 or 8, checked). */
    hmb_topo t;
    hmb_topo_build(&t, 2, k, NULL, ex->nranks, ex->rank, NULL, 1, 1);
    for (int j = 0; j < k; j++) {
        ex->send_to[j] = t.dir[j].to;
        ex->recv_from[j] = t.dir[j].from;
    }
}

/* The longest iteration period whose largest reduction sum stays below 2^53 (exact). */
static void register_blocks(async_exchange *ex);

static long long reduce_period(int nranks, int count)
{
    long long n = nranks, limit = 1LL << 53;
    long long headroom = limit - n * (n + 1) / 2 - n * (long long)count; /* n, count < 2^31 */
    long long period = (headroom / (n * n) + 1) / 2;
    return period < 1 ? 1 : period;
}

void async_exchange_init(async_exchange *ex, hmb_ctx *ctx, const hmb_point *pt, async_op op, size_t size_bytes,
                         int neighbors, int grid2d, async_baseline baseline)
{
    memset(ex, 0, sizeof *ex);
    ex->ctx = ctx;
    ex->pt = pt;
    ex->op = op;
    ex->world = hmb_comm(ctx);
    ex->graph = MPI_COMM_NULL;
    ex->persistent = MPI_REQUEST_NULL;
    ex->rank = hmb_rank(ctx);
    ex->nranks = hmb_size(ctx);
    ex->count = (int)(size_bytes / sizeof(double)); /* fits: async_size_fits() in check() */
    ex->nblocks = 1;
    ex->peer = (ex->rank + ex->nranks / 2) % ex->nranks;
    ex->baseline = baseline;
    if (async_op_uses_neighbors(op)) {
        ex->nneighbors = neighbors;
        ex->nblocks = neighbors;
        if (grid2d)
            grid_neighbors(ex, neighbors);
        else
            ring_neighbors(ex, neighbors);
    } else if (op == OP_IALLTOALL) {
        ex->nblocks = ex->nranks;
    }
    ex->reduce_period = reduce_period(ex->nranks, ex->count);
    size_t bytes = (size_t)ex->nblocks * (size_t)ex->count * sizeof(double);
    int allocated = 1;
    for (int phase = 0; phase < ASYNC_PHASES; phase++) {
        ex->buf[phase].send = hmb_buffer_alloc(ctx, bytes);
        ex->buf[phase].recv = hmb_buffer_alloc(ctx, bytes);
        allocated = allocated && ex->buf[phase].send && ex->buf[phase].recv;
    }
    /* Agreed before any collective: a failure on one rank must not leave the others waiting. */
    if (!hmb_all_agree(ctx, allocated)) {
        async_exchange_free(ex);
        hmb_usage_error(ctx, "cannot allocate %d x %zu bytes of message buffers on every rank", 2 * ASYNC_PHASES,
                        bytes);
    }
    register_blocks(ex);
#ifdef HMB_HAVE_MPI_NEIGHBOR_ALLTOALL
    if (op == OP_NEIGHBOR_ALLTOALL) {
        /* Unit weights rather than MPI_UNWEIGHTED: Open MPI's sentinel (a small integer cast
         * to a pointer) trips GCC's -Wstringop-overread; neighbour collectives ignore weights. */
        int weights[ASYNC_MAX_NEIGHBORS];
        for (int j = 0; j < neighbors; j++)
            weights[j] = 1;
        MPI_Dist_graph_create_adjacent(ex->world, neighbors, ex->recv_from, weights, neighbors, ex->send_to, weights,
                                       MPI_INFO_NULL, 0, &ex->graph);
    }
#endif
#ifdef HMB_HAVE_MPI_ALLREDUCE_INIT
    if (op == OP_ALLREDUCE_INIT)
        MPI_Allreduce_init(ex->buf[ASYNC_NONBLOCKING].send, ex->buf[ASYNC_NONBLOCKING].recv, ex->count, MPI_DOUBLE,
                           MPI_SUM, ex->world, MPI_INFO_NULL, &ex->persistent);
#endif
}

void async_exchange_free(async_exchange *ex)
{
    if (ex->persistent != MPI_REQUEST_NULL)
        MPI_Request_free(&ex->persistent);
    if (ex->graph != MPI_COMM_NULL)
        MPI_Comm_free(&ex->graph);
    /* Also used by the calibration in points(), outside any point: unregister here, not
     * after teardown, or the next point's --cache cold flush touches freed memory. */
    size_t bytes = (size_t)ex->nblocks * (size_t)ex->count * sizeof(double);
    for (int phase = 0; phase < ASYNC_PHASES; phase++) {
        hmb_buffer_free(ex->ctx, ex->buf[phase].send, bytes);
        hmb_buffer_free(ex->ctx, ex->buf[phase].recv, bytes);
    }
}

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

/* Pattern part of block j in a phase: distinct per direction/destination and phase. */
static int pattern_part(int block, int phase) { return 2 * block + phase; }

static const char *phase_name(int phase) { return phase == ASYNC_BLOCKING ? "blocking baseline" : "non-blocking run"; }

/* The reductions' operands and a NaN result (all-ones bytes) for iteration iter; the other
 * operations' blocks are filled, poisoned and checked by the harness (register_blocks). */
void async_fill(async_exchange *ex, long iter, int phase)
{
    if (ex->op != OP_ALLREDUCE && ex->op != OP_ALLREDUCE_INIT)
        return;
    double *send = ex->buf[phase].send, *recv = ex->buf[phase].recv;
    memset(recv, 0xff, (size_t)ex->count * sizeof(double));
    for (long i = 0; i < ex->count; i++)
        send[i] = reduce_value(ex, i, iter, phase);
}

/* Validation as data: every block this rank sends (HMB_SEND) and receives (HMB_RECEIVE) with
 * its pattern identity (source rank, pattern_part); the harness fills, poisons and checks them
 * every iteration. The reductions' results are checked by value (async_verify). */
static void register_blocks(async_exchange *ex)
{
    size_t block_bytes = (size_t)ex->count * sizeof(double);
    const char *op = async_op_name(ex->op);
    for (int phase = 0; phase < ASYNC_PHASES; phase++) {
        double *send = ex->buf[phase].send, *recv = ex->buf[phase].recv;
        switch (ex->op) {
        case OP_ALLREDUCE:
        case OP_ALLREDUCE_INIT:
        case ASYNC_OP_COUNT:
            break;
        case OP_IBCAST: /* one buffer, in place: the root's data is the message */
            hmb_check_register(ex->ctx, ex->rank == 0 ? HMB_SEND : HMB_RECEIVE, recv, block_bytes, 0,
                               pattern_part(0, phase), 1, HMB_AFTER_ITERATION, "%s: the block from rank 0 (%s)", op,
                               phase_name(phase));
            break;
        default: /* block j: direction j (exch), or the block addressed to rank j (alltoall) */
            for (int j = 0; j < ex->nblocks; j++) {
                /* alltoall: block s came from rank s, which addressed it to this rank */
                int from = ex->op == OP_IALLTOALL ? j : ex->op == OP_PT2PT ? ex->peer : ex->recv_from[j];
                int part = pattern_part(ex->op == OP_IALLTOALL ? ex->rank : j, phase);
                hmb_check_register(ex->ctx, HMB_SEND, send + (size_t)j * ex->count, block_bytes, ex->rank,
                                   pattern_part(j, phase), 1, HMB_AFTER_ITERATION, "send");
                hmb_check_register(ex->ctx, HMB_RECEIVE, recv + (size_t)j * ex->count, block_bytes, from, part, 1,
                                   HMB_AFTER_ITERATION, "%s: block %d from rank %d (%s)", op, j, from,
                                   phase_name(phase));
            }
        }
    }
}


static void post_exchange(async_exchange *ex, const async_buffers *b)
{
    ex->nreq = 0;
    for (int j = 0; j < ex->nneighbors; j++)
        MPI_Irecv(b->recv + (size_t)j * ex->count, ex->count, MPI_DOUBLE, ex->recv_from[j], j, ex->world,
                  &ex->reqs[ex->nreq++]);
    for (int j = 0; j < ex->nneighbors; j++)
        MPI_Isend(b->send + (size_t)j * ex->count, ex->count, MPI_DOUBLE, ex->send_to[j], j, ex->world,
                  &ex->reqs[ex->nreq++]);
}

void async_blocking(async_exchange *ex)
{
    double *send = ex->buf[ASYNC_BLOCKING].send, *recv = ex->buf[ASYNC_BLOCKING].recv;
    switch (ex->op) {
    case OP_PT2PT:
        if (ex->baseline == ASYNC_BASELINE_SENDRECV) {
            MPI_Sendrecv(send, ex->count, MPI_DOUBLE, ex->peer, 0, recv, ex->count, MPI_DOUBLE, ex->peer, 0,
                         ex->world, MPI_STATUS_IGNORE);
        } else if (ex->rank < ex->peer) { /* ping: the lower rank of the pair sends first */
            MPI_Send(send, ex->count, MPI_DOUBLE, ex->peer, 0, ex->world);
            MPI_Recv(recv, ex->count, MPI_DOUBLE, ex->peer, 0, ex->world, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(recv, ex->count, MPI_DOUBLE, ex->peer, 0, ex->world, MPI_STATUS_IGNORE);
            MPI_Send(send, ex->count, MPI_DOUBLE, ex->peer, 0, ex->world);
        }
        break;
    case OP_EXCH: /* the pure communication time of the same pattern: post, then wait at once */
        post_exchange(ex, &ex->buf[ASYNC_BLOCKING]);
        MPI_Waitall(ex->nreq, ex->reqs, MPI_STATUSES_IGNORE);
        break;
    case OP_ALLREDUCE:
    case OP_ALLREDUCE_INIT:
        MPI_Allreduce(send, recv, ex->count, MPI_DOUBLE, MPI_SUM, ex->world);
        break;
    case OP_IALLTOALL:
        MPI_Alltoall(send, ex->count, MPI_DOUBLE, recv, ex->count, MPI_DOUBLE, ex->world);
        break;
    case OP_IBCAST:
        MPI_Bcast(recv, ex->count, MPI_DOUBLE, 0, ex->world);
        break;
    case OP_NEIGHBOR_ALLTOALL:
#ifdef HMB_HAVE_MPI_NEIGHBOR_ALLTOALL
        MPI_Neighbor_alltoall(send, ex->count, MPI_DOUBLE, recv, ex->count, MPI_DOUBLE, ex->graph);
#endif
        break;
    case ASYNC_OP_COUNT:
        break;
    }
}

void async_post(async_exchange *ex)
{
    double *send = ex->buf[ASYNC_NONBLOCKING].send, *recv = ex->buf[ASYNC_NONBLOCKING].recv;
    ex->nreq = 1;
    switch (ex->op) {
    case OP_PT2PT:
        MPI_Irecv(recv, ex->count, MPI_DOUBLE, ex->peer, 0, ex->world, &ex->reqs[0]);
        MPI_Isend(send, ex->count, MPI_DOUBLE, ex->peer, 0, ex->world, &ex->reqs[1]);
        ex->nreq = 2;
        break;
    case OP_EXCH:
        post_exchange(ex, &ex->buf[ASYNC_NONBLOCKING]);
        break;
    case OP_ALLREDUCE:
        MPI_Iallreduce(send, recv, ex->count, MPI_DOUBLE, MPI_SUM, ex->world, &ex->reqs[0]);
        break;
    case OP_IALLTOALL:
        MPI_Ialltoall(send, ex->count, MPI_DOUBLE, recv, ex->count, MPI_DOUBLE, ex->world, &ex->reqs[0]);
        break;
    case OP_IBCAST:
        MPI_Ibcast(recv, ex->count, MPI_DOUBLE, 0, ex->world, &ex->reqs[0]);
        break;
    case OP_NEIGHBOR_ALLTOALL:
#ifdef HMB_HAVE_MPI_NEIGHBOR_ALLTOALL
        MPI_Ineighbor_alltoall(send, ex->count, MPI_DOUBLE, recv, ex->count, MPI_DOUBLE, ex->graph, &ex->reqs[0]);
#endif
        break;
    case OP_ALLREDUCE_INIT:
        /* Testall/Waitall leave a persistent handle in place (inactive), so a copy is fine. */
        MPI_Start(&ex->persistent);
        ex->reqs[0] = ex->persistent;
        break;
    case ASYNC_OP_COUNT:
        break;
    }
}

/* --inject corrupt: when the harness picks this check, the result gets one flipped byte (its middle
 * byte), so tests prove that the reduction check catches it. */
static void corrupt_if_picked(async_exchange *ex, double *result, long iter)
{
    if (hmb_corrupt_pick(ex->ctx, iter))
        ((unsigned char *)result)[(size_t)ex->count * sizeof(double) / 2] ^= 0x5a;
}

static void verify_reduction(async_exchange *ex, long iter, int phase)
{
    double *result = ex->buf[phase].recv;
    corrupt_if_picked(ex, result, iter);
    for (long i = 0; i < ex->count; i++) {
        double expected = reduce_sum(ex, i, iter, phase);
        if (result[i] != expected)
            hmb_validation_failure(ex->ctx, ex->pt, iter, -1, "%s element %ld of %d is %.17g, expected %.17g (%s)",
                                   async_op_name(ex->op), i, ex->count, result[i], expected, phase_name(phase));
    }
}

void async_verify(async_exchange *ex, long iter, int phase)
{
    if (hmb_validate_enabled(ex->ctx) && (ex->op == OP_ALLREDUCE || ex->op == OP_ALLREDUCE_INIT))
        verify_reduction(ex, iter, phase);
}
