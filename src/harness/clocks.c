/* Clock offsets to rank 0 (SKaMPI / Jones-Koenig style). For each rank r, rank 0 runs a
 * series of ping-pongs with r; r answers each ping with its local clock reading. The exchange
 * with the smallest round trip bounds the error best: offset_r = t_remote - (t_send + t_recv)/2.
 * hmb_to_global(t) = t - offset. On one node with CLOCK_MONOTONIC the offsets come out ~0. */
#include <math.h>
#include <stdlib.h>

#include "ctx.h"

enum { CLOCK_EXCHANGES = 60, CLOCK_TAG = 31001 };

void hmb_clocks_sync(hmb_ctx *ctx)
{
    ctx->clock_offsets_s = calloc((size_t)ctx->size, sizeof(double));
    if (!ctx->clock_offsets_s)
        abort();
    ctx->clock_offset_s = 0;
    for (int r = 1; r < ctx->size; r++) {
        if (ctx->rank == 0) {
            double best_rtt = INFINITY, best_offset = 0;
            for (int k = 0; k < CLOCK_EXCHANGES; k++) {
                double t_remote = 0;
                double t_send = hmb_now();
                MPI_Send(&t_send, 1, MPI_DOUBLE, r, CLOCK_TAG, ctx->comm);
                MPI_Recv(&t_remote, 1, MPI_DOUBLE, r, CLOCK_TAG, ctx->comm, MPI_STATUS_IGNORE);
                double t_recv = hmb_now();
                if (t_recv - t_send < best_rtt) {
                    best_rtt = t_recv - t_send;
                    best_offset = t_remote - 0.5 * (t_send + t_recv);
                }
            }
            ctx->clock_offsets_s[r] = best_offset;
            MPI_Send(&best_offset, 1, MPI_DOUBLE, r, CLOCK_TAG, ctx->comm);
        } else if (ctx->rank == r) {
            for (int k = 0; k < CLOCK_EXCHANGES; k++) {
                double t_ping = 0;
                MPI_Recv(&t_ping, 1, MPI_DOUBLE, 0, CLOCK_TAG, ctx->comm, MPI_STATUS_IGNORE);
                double t_remote = hmb_now();
                MPI_Send(&t_remote, 1, MPI_DOUBLE, 0, CLOCK_TAG, ctx->comm);
            }
            MPI_Recv(&ctx->clock_offset_s, 1, MPI_DOUBLE, 0, CLOCK_TAG, ctx->comm, MPI_STATUS_IGNORE);
        }
    }
    /* Every rank gets the table (benchmarks may report others' offsets). */
    MPI_Bcast(ctx->clock_offsets_s, ctx->size, MPI_DOUBLE, 0, ctx->comm);
}
