/* part's set-up: option checks, points, the buffers and requests of a point, and its teardown.
 * The phases and the metrics: pattern.c; what is checked: verify.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "part.h"

static int recv_partitions_of(const hmb_ctx *ctx, int nparts_send)
{
    const part_opts *o = HMB_OPTS(part_opts, ctx);
    return o->given.recv_partitions ? (int)o->recv_partitions : nparts_send;
}

/* The send partition counts to sweep: --partitions, or one point with P = threads. */
static const long long *send_partition_list(const hmb_ctx *ctx, int *count, long long *fallback)
{
    const part_opts *o = HMB_OPTS(part_opts, ctx);
    if (o->given.partitions) {
        *count = o->partitions.n;
        return o->partitions.v;
    }
    *fallback = hmb_threads(ctx);
    *count = 1;
    return fallback;
}

/* Metrics pair each ready time with the arrival of the same bytes (see pair_pieces). */
#define MAX_PIECES (1 << 20)

static long long lcm_ll(long long a, long long b)
{
    long long x = a, y = b;
    while (y != 0) {
        long long r = x % y;
        x = y;
        y = r;
    }
    return a / x * b;
}

void part_check(hmb_ctx *ctx)
{
    int threads = hmb_threads(ctx), nsizes = hmb_common(ctx)->sizes.n, nparts = 0;
    long long fallback;
    const size_t *sizes = hmb_common(ctx)->sizes.v;
    const long long *parts = send_partition_list(ctx, &nparts, &fallback);
    for (int p = 0; p < nparts; p++) {
        if (parts[p] < 1)
            hmb_usage_error(ctx, "--partitions: %lld is below 1", parts[p]);
        if (parts[p] % threads != 0)
            hmb_usage_error(ctx, "--partitions: %lld is not a multiple of --threads %d (each thread owns P/T partitions)",
                            parts[p], threads);
    }
    for (int s = 0; s < nsizes; s++) {
        size_t m = sizes[s];
        if (m / 8 > (size_t)2147483647)
            hmb_usage_error(ctx, "--sizes: %zu bytes is more than MPI int counts of 8-byte elements allow", m);
        for (int p = 0; p < nparts; p++) {
            long long counts[2] = {parts[p], recv_partitions_of(ctx, (int)parts[p])};
            for (int side = 0; side < 2; side++) {
                size_t n = (size_t)counts[side];
                if (m == 0 || m % n != 0 || (m / n) % 8 != 0)
                    hmb_usage_error(ctx,
                                    "size %zu bytes does not split into %zu %s partitions of whole 8-byte elements",
                                    m, n, side == 0 ? "send" : "receive");
            }
            if (lcm_ll(counts[0], counts[1]) > MAX_PIECES)
                hmb_usage_error(ctx, "--partitions %lld with --recv-partitions %lld: lcm %lld exceeds %d pieces",
                                counts[0], counts[1], lcm_ll(counts[0], counts[1]), MAX_PIECES);
        }
    }
}

void part_points(hmb_ctx *ctx, hmb_point_list *out)
{
    int nsizes = hmb_common(ctx)->sizes.n, nparts = 0;
    long long fallback;
    const size_t *sizes = hmb_common(ctx)->sizes.v;
    const long long *parts = send_partition_list(ctx, &nparts, &fallback);
    const unsigned long long completes = HMB_OPTS(part_opts, ctx)->complete;
    for (int s = 0; s < nsizes; s++) {
        for (int p = 0; p < nparts; p++) {
            for (int c = 0; c < NCOMPLETE; c++) {
                if (!(completes & (1ull << c)))
                    continue;
                part_point *pp = hmb_points_new(out, sizes[s]);
                pp->partitions = parts[p];
                pp->recv_partitions = recv_partitions_of(ctx, (int)parts[p]);
                pp->complete = c;
            }
        }
    }
}

static void part_free(part_state *st)
{
    free(st->send_buf);
    free(st->recv_buf_single);
    free(st->recv_buf_persist);
    free(st->recv_buf_part);
    free(st->recv_buf_polled);
    free(st->pready_list);
    free(st->ready_local);
    free(st->compute_end);
    free(st->arrived);
    free(st->times_msg);
    free(st->piece_ready);
    free(st->piece_arrived);
    free(st);
}

void *part_setup(hmb_ctx *ctx, const hmb_point *pt)
{
    /* no partitioned communication, or several threads calling MPI_Pready/MPI_Parrived without MULTIPLE */
    if (hmb_mode_refused(ctx, NULL, 0, 1))
        return NULL;
#if !HMB_HAVE_PARTITIONED
    (void)pt;
    return NULL;
#else
    const int pready = HMB_OPTS(part_opts, ctx)->pready;
#ifndef HMB_HAVE_MPI_PREADY_RANGE
    if (pready == PREADY_RANGE) {
        hmb_unsupported(ctx, "this MPI library has no MPI_Pready_range");
        return NULL;
    }
#endif
#ifndef HMB_HAVE_MPI_PREADY_LIST
    if (pready == PREADY_LIST) {
        hmb_unsupported(ctx, "this MPI library has no MPI_Pready_list");
        return NULL;
    }
#endif
    part_state *st = calloc(1, sizeof *st);
    if (!st) {
        hmb_unsupported(ctx, "cannot allocate the benchmark state");
        return NULL;
    }
    st->part_req = MPI_REQUEST_NULL;
    st->persist_req = MPI_REQUEST_NULL;
    st->rank = hmb_rank(ctx);
    st->threads = hmb_threads(ctx);
    st->size_bytes = pt->size_bytes;
    const part_point *pp = HMB_POINT(part_point, pt);
    st->nparts_send = (int)pp->partitions;
    st->nparts_recv = (int)pp->recv_partitions;
    st->psize_send = st->size_bytes / (size_t)st->nparts_send;
    st->psize_recv = st->size_bytes / (size_t)st->nparts_recv;
    st->pready_mode = pready;
    st->observe_poller = HMB_OPTS(part_opts, ctx)->observe == OBSERVE_POLLER;
    st->complete_wait = pp->complete == COMPLETE_WAIT;
    st->polled = !HMB_OPTS(part_opts, ctx)->no_polled;
    st->persistent = !HMB_OPTS(part_opts, ctx)->no_persistent;
    st->compute_ns = hmb_common(ctx)->compute;
    MPI_Comm_dup(hmb_comm(ctx), &st->data_comm);
    MPI_Comm_dup(hmb_comm(ctx), &st->ctl_comm);

    int count_send = (int)(st->psize_send / 8), count_recv = (int)(st->psize_recv / 8);
    int count_whole = (int)(st->size_bytes / 8);
    if (st->rank == SENDER) {
        st->send_buf = hmb_buffer_alloc(ctx, st->size_bytes);
        st->ready_local = calloc((size_t)st->nparts_send, sizeof(double));
        st->compute_end = calloc((size_t)st->threads, sizeof(double));
        st->times_msg = calloc((size_t)st->nparts_recv + TIMES_ARRIVED, sizeof(double));
        st->npieces = (int)lcm_ll(st->nparts_send, st->nparts_recv);
        st->piece_ready = calloc((size_t)st->npieces, sizeof(double));
        st->piece_arrived = calloc((size_t)st->npieces, sizeof(double));
        st->pready_list = malloc((size_t)st->nparts_send * sizeof(int));
        if (!st->send_buf || !st->ready_local || !st->compute_end || !st->times_msg || !st->piece_ready ||
            !st->piece_arrived || !st->pready_list) {
            hmb_unsupported(ctx, "cannot allocate %zu bytes of message buffer and timestamps on the sender",
                            st->size_bytes);
            return st; /* every rank skips the point; teardown frees what exists */
        }
        for (int i = 0; i < st->nparts_send; i++)
            st->pready_list[i] = i;
        MPI_Psend_init(st->send_buf, st->nparts_send, count_send, MPI_UINT64_T, RECEIVER, TAG_PART, st->data_comm,
                       MPI_INFO_NULL, &st->part_req);
        if (st->persistent)
            MPI_Send_init(st->send_buf, count_whole, MPI_UINT64_T, RECEIVER, TAG_PERSIST, st->data_comm,
                          &st->persist_req);
    } else if (st->rank == RECEIVER) {
        st->recv_buf_single = hmb_buffer_alloc(ctx, st->size_bytes);
        if (st->persistent)
            st->recv_buf_persist = hmb_buffer_alloc(ctx, st->size_bytes);
        st->recv_buf_part = hmb_buffer_alloc(ctx, st->size_bytes);
        if (st->polled)
            st->recv_buf_polled = hmb_buffer_alloc(ctx, st->size_bytes);
        st->arrived = calloc((size_t)st->nparts_recv, sizeof(double));
        st->times_msg = calloc((size_t)st->nparts_recv + TIMES_ARRIVED, sizeof(double));
        if (!st->recv_buf_single || (st->persistent && !st->recv_buf_persist) || !st->recv_buf_part ||
            (st->polled && !st->recv_buf_polled) || !st->arrived || !st->times_msg) {
            hmb_unsupported(ctx, "cannot allocate %d x %zu bytes of receive buffers on the receiver",
                            2 + st->persistent + st->polled, st->size_bytes);
            return st;
        }
        MPI_Precv_init(st->recv_buf_part, st->nparts_recv, count_recv, MPI_UINT64_T, SENDER, TAG_PART, st->data_comm,
                       MPI_INFO_NULL, &st->part_req);
        if (st->persistent)
            MPI_Recv_init(st->recv_buf_persist, count_whole, MPI_UINT64_T, SENDER, TAG_PERSIST, st->data_comm,
                          &st->persist_req);
    }
    part_register_checks(ctx, st);
    return st;
#endif
}

void part_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    (void)pt;
    part_state *st = state;
    if (!st)
        return;
    if (st->part_req != MPI_REQUEST_NULL)
        MPI_Request_free(&st->part_req);
    if (st->persist_req != MPI_REQUEST_NULL)
        MPI_Request_free(&st->persist_req);
    MPI_Comm_free(&st->data_comm);
    MPI_Comm_free(&st->ctl_comm);
    part_free(st);
}
