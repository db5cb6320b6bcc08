/* The operations of the `async` benchmark: blocking baselines, non-blocking posts, data
 * patterns and checks. See async_ops.h. */
#include "async_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[ASYNC_OP_COUNT] = {
    "pt2pt", "exch", "allreduce", "ialltoall", "ibcast", "neighbor_alltoall", "allreduce_init",
};

const char *async_op_name(async_op op) { return op_names[op]; }

int async_op_from_name(const char *name)
{
    for (int i = 0; i < ASYNC_OP_COUNT; i++)
        if (strcmp(name, op_names[i]) == 0)
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
    static const int dx[8] = {1, -1, 0, 0, 1, -1, 1, -1}, dy[8] = {0, 0, 1, -1, 1, -1, -1, 1};
    int dims[2] = {0, 0};
    MPI_Dims_create(ex->nranks, 2, dims);
    int x = ex->rank / dims[1], y = ex->rank % dims[1];
    for (int j = 0; j < k; j++) {
        int tx = ((x + dx[j]) % dims[0] + dims[0]) % dims[0], ty = ((y + dy[j]) % dims[1] + dims[1]) % dims[1];
        int fx = ((x - dx[j]) % dims[0] + dims[0]) % dims[0], fy = ((y - dy[j]) % dims[1] + dims[1]) % dims[1];
        ex->send_to[j] = tx * dims[1] + ty;
        ex->recv_from[j] = fx * dims[1] + fy;
    }
}

void async_exchange_init(async_exchange *ex, hmb_ctx *ctx, const hmb_point *pt, async_op op, size_t size_bytes,
                         int neighbors, int grid2d)
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
    ex->count = (int)(size_bytes / sizeof(double));
    ex->nblocks = 1;
    ex->peer = (ex->rank + ex->nranks / 2) % ex->nranks;
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
    size_t bytes = (size_t)ex->nblocks * (size_t)ex->count * sizeof(double);
    ex->sendbuf = calloc(1, bytes);
    ex->recvbuf = calloc(1, bytes);
    if (!ex->sendbuf || !ex->recvbuf)
        hmb_usage_error(ctx, "cannot allocate 2 x %zu bytes of message buffers", bytes);
    hmb_cache_register(ctx, ex->sendbuf, bytes);
    hmb_cache_register(ctx, ex->recvbuf, bytes);
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
        MPI_Allreduce_init(ex->sendbuf, ex->recvbuf, ex->count, MPI_DOUBLE, MPI_SUM, ex->world, MPI_INFO_NULL,
                           &ex->persistent);
#endif
}

void async_exchange_free(async_exchange *ex)
{
    if (ex->persistent != MPI_REQUEST_NULL)
        MPI_Request_free(&ex->persistent);
    if (ex->graph != MPI_COMM_NULL)
        MPI_Comm_free(&ex->graph);
    hmb_cache_unregister_all(ex->ctx);
    free(ex->sendbuf);
    free(ex->recvbuf);
}

/* Reduction operand: small integers, so every partial sum of doubles is exact in any order. */
static double reduce_value(int rank, long index, long iter, int phase)
{
    return (double)(((long)rank * 131 + index * 7 + iter * 3 + phase) % 64);
}

/* Pattern part of block j in a phase: distinct per direction/destination and phase. */
static int pattern_part(int block, int phase) { return 2 * block + phase; }

void async_fill(async_exchange *ex, long iter, int phase)
{
    size_t block_bytes = (size_t)ex->count * sizeof(double);
    switch (ex->op) {
    case OP_ALLREDUCE:
    case OP_ALLREDUCE_INIT:
        for (long i = 0; i < ex->count; i++)
            ex->sendbuf[i] = reduce_value(ex->rank, i, iter, phase);
        break;
    case OP_IBCAST: /* one buffer, in place: the root's data is the message */
        if (ex->rank == 0)
            hmb_fill(ex->recvbuf, block_bytes, 0, pattern_part(0, phase), iter);
        break;
    default: /* block j: direction j (exch), or the block addressed to rank j (alltoall) */
        for (int j = 0; j < ex->nblocks; j++)
            hmb_fill(ex->sendbuf + (size_t)j * ex->count, block_bytes, ex->rank, pattern_part(j, phase), iter);
    }
}

static void post_exchange(async_exchange *ex)
{
    ex->nreq = 0;
    for (int j = 0; j < ex->nneighbors; j++)
        MPI_Irecv(ex->recvbuf + (size_t)j * ex->count, ex->count, MPI_DOUBLE, ex->recv_from[j], j, ex->world,
                  &ex->reqs[ex->nreq++]);
    for (int j = 0; j < ex->nneighbors; j++)
        MPI_Isend(ex->sendbuf + (size_t)j * ex->count, ex->count, MPI_DOUBLE, ex->send_to[j], j, ex->world,
                  &ex->reqs[ex->nreq++]);
}

void async_blocking(async_exchange *ex)
{
    switch (ex->op) {
    case OP_PT2PT:
        MPI_Sendrecv(ex->sendbuf, ex->count, MPI_DOUBLE, ex->peer, 0, ex->recvbuf, ex->count, MPI_DOUBLE, ex->peer,
                     0, ex->world, MPI_STATUS_IGNORE);
        break;
    case OP_EXCH: /* the pure communication time of the same pattern: post, then wait at once */
        post_exchange(ex);
        MPI_Waitall(ex->nreq, ex->reqs, MPI_STATUSES_IGNORE);
        break;
    case OP_ALLREDUCE:
    case OP_ALLREDUCE_INIT:
        MPI_Allreduce(ex->sendbuf, ex->recvbuf, ex->count, MPI_DOUBLE, MPI_SUM, ex->world);
        break;
    case OP_IALLTOALL:
        MPI_Alltoall(ex->sendbuf, ex->count, MPI_DOUBLE, ex->recvbuf, ex->count, MPI_DOUBLE, ex->world);
        break;
    case OP_IBCAST:
        MPI_Bcast(ex->recvbuf, ex->count, MPI_DOUBLE, 0, ex->world);
        break;
    case OP_NEIGHBOR_ALLTOALL:
#ifdef HMB_HAVE_MPI_NEIGHBOR_ALLTOALL
        MPI_Neighbor_alltoall(ex->sendbuf, ex->count, MPI_DOUBLE, ex->recvbuf, ex->count, MPI_DOUBLE, ex->graph);
#endif
        break;
    case ASYNC_OP_COUNT:
        break;
    }
}

void async_post(async_exchange *ex)
{
    ex->nreq = 1;
    switch (ex->op) {
    case OP_PT2PT:
        MPI_Irecv(ex->recvbuf, ex->count, MPI_DOUBLE, ex->peer, 0, ex->world, &ex->reqs[0]);
        MPI_Isend(ex->sendbuf, ex->count, MPI_DOUBLE, ex->peer, 0, ex->world, &ex->reqs[1]);
        ex->nreq = 2;
        break;
    case OP_EXCH:
        post_exchange(ex);
        break;
    case OP_ALLREDUCE:
        MPI_Iallreduce(ex->sendbuf, ex->recvbuf, ex->count, MPI_DOUBLE, MPI_SUM, ex->world, &ex->reqs[0]);
        break;
    case OP_IALLTOALL:
        MPI_Ialltoall(ex->sendbuf, ex->count, MPI_DOUBLE, ex->recvbuf, ex->count, MPI_DOUBLE, ex->world,
                      &ex->reqs[0]);
        break;
    case OP_IBCAST:
        MPI_Ibcast(ex->recvbuf, ex->count, MPI_DOUBLE, 0, ex->world, &ex->reqs[0]);
        break;
    case OP_NEIGHBOR_ALLTOALL:
#ifdef HMB_HAVE_MPI_NEIGHBOR_ALLTOALL
        MPI_Ineighbor_alltoall(ex->sendbuf, ex->count, MPI_DOUBLE, ex->recvbuf, ex->count, MPI_DOUBLE, ex->graph,
                               &ex->reqs[0]);
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

static void verify_reduction(async_exchange *ex, long iter, int phase)
{
    for (long i = 0; i < ex->count; i++) {
        double expected = 0.0;
        for (int r = 0; r < ex->nranks; r++)
            expected += reduce_value(r, i, iter, phase);
        if (ex->recvbuf[i] != expected)
            hmb_validation_failure(ex->ctx, ex->pt, iter, -1, "%s element %ld of %d is %.17g, expected %.17g (%s)",
                                   async_op_name(ex->op), i, ex->count, ex->recvbuf[i], expected,
                                   phase ? "non-blocking run" : "blocking baseline");
    }
}

void async_verify(async_exchange *ex, long iter, int phase)
{
    size_t block_bytes = (size_t)ex->count * sizeof(double);
    switch (ex->op) {
    case OP_ALLREDUCE:
    case OP_ALLREDUCE_INIT:
        if (hmb_validate_enabled(ex->ctx))
            verify_reduction(ex, iter, phase);
        break;
    case OP_IBCAST:
        if (ex->rank != 0)
            hmb_check_buffer(ex->ctx, ex->pt, ex->recvbuf, block_bytes, 0, pattern_part(0, phase), iter);
        break;
    case OP_PT2PT:
        hmb_check_buffer(ex->ctx, ex->pt, ex->recvbuf, block_bytes, ex->peer, pattern_part(0, phase), iter);
        break;
    case OP_IALLTOALL: /* block s came from rank s, which addressed it to this rank */
        for (int s = 0; s < ex->nranks; s++)
            hmb_check_buffer(ex->ctx, ex->pt, ex->recvbuf + (size_t)s * ex->count, block_bytes, s,
                             pattern_part(ex->rank, phase), iter);
        break;
    case OP_EXCH:
    case OP_NEIGHBOR_ALLTOALL:
        for (int j = 0; j < ex->nneighbors; j++)
            hmb_check_buffer(ex->ctx, ex->pt, ex->recvbuf + (size_t)j * ex->count, block_bytes, ex->recv_from[j],
                             pattern_part(j, phase), iter);
        break;
    case ASYNC_OP_COUNT:
        break;
    }
}
