/* Clock offsets to rank 0 (SKaMPI / Jones-Koenig style). For each rank r, rank 0 runs a
 * series of ping-pongs with r; r answers each ping with its local clock reading. The exchange
 * with the smallest round trip bounds the error best: offset_r = t_remote - (t_send + t_recv)/2.
 * hmb_to_global(t) = t - offset.
 *
 * On rank 0's own host CLOCK_MONOTONIC is one system-wide clock, so the true offset is exactly
 * 0: that is what is applied there, while the estimate is still made and recorded (it must come
 * out ~0, which checks the estimator). An oversubscribed node would otherwise turn the
 * estimate's few-microsecond error into one-way times that arrive before they were sent. */
#include <math.h>
#include <stdlib.h>

#include "ctx.h"

enum { CLOCK_EXCHANGES = 60, CLOCK_TAG = 31001 };

void hmb_clocks_sync(hmb_ctx *ctx)
{
    ctx->clock_offsets_s = calloc((size_t)ctx->size, sizeof(double));
    ctx->clock_offsets_estimated_s = calloc((size_t)ctx->size, sizeof(double));
    if (!ctx->clock_offsets_s || !ctx->clock_offsets_estimated_s)
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
    for (int r = 0; r < ctx->size; r++)
        ctx->clock_offsets_estimated_s[r] = ctx->clock_offsets_s[r];

    /* Ranks on rank 0's host (shared-memory neighbours of rank 0) apply the exact offset 0. */
    MPI_Comm node;
    MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int lowest_world_rank = 0;
    MPI_Allreduce(&ctx->rank, &lowest_world_rank, 1, MPI_INT, MPI_MIN, node);
    MPI_Comm_free(&node);
    int on_root_host = lowest_world_rank == 0;
    int *on_root_host_all = malloc((size_t)ctx->size * sizeof(int));
    if (!on_root_host_all)
        abort();
    MPI_Allgather(&on_root_host, 1, MPI_INT, on_root_host_all, 1, MPI_INT, ctx->comm);
    for (int r = 0; r < ctx->size; r++)
        if (on_root_host_all[r])
            ctx->clock_offsets_s[r] = 0.0;
    if (on_root_host)
        ctx->clock_offset_s = 0.0;
    free(on_root_host_all);
}
