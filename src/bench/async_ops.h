/* The operations of the `async` benchmark (src/bench/async.c): for each, a blocking form
 * (the baseline), a non-blocking post that leaves requests to complete, and the data
 * pattern and its check. Kept apart from the driver (modes, timing, metrics). */
#ifndef HMB_ASYNC_OPS_H
#define HMB_ASYNC_OPS_H

#include <stddef.h>

#include "hmb/bench.h"

typedef enum {
    OP_PT2PT,             /* pair exchange, rank i with i + n/2 */
    OP_EXCH,              /* k neighbours on a ring or a periodic 2-D grid, Isend/Irecv */
    OP_ALLREDUCE,         /* MPI_Allreduce / MPI_Iallreduce, sum of doubles */
    OP_IALLTOALL,         /* MPI_Alltoall / MPI_Ialltoall, size = block per peer */
    OP_IBCAST,            /* MPI_Bcast / MPI_Ibcast from rank 0 */
    OP_NEIGHBOR_ALLTOALL, /* MPI_(I)neighbor_alltoall on the exch neighbourhood */
    OP_ALLREDUCE_INIT,    /* persistent: MPI_Allreduce_init once, MPI_Start per iteration */
    ASYNC_OP_COUNT
} async_op;

#define ASYNC_OP_CHOICES "pt2pt|exch|allreduce|ialltoall|ibcast|neighbor_alltoall|allreduce_init" /* enum order */
#define ASYNC_MAX_NEIGHBORS 64

/* The two phases of an iteration. Each has its own buffers, so prepare() can fill both
 * before the --cache cold flush and neither phase's data can pass for the other's. */
enum { ASYNC_BLOCKING = 0, ASYNC_NONBLOCKING = 1, ASYNC_PHASES = 2 };

/* pt2pt's blocking baseline: IMB-ASYNC's sync_pt2pt (MPI_Send then MPI_Recv, reversed on the
 * partner: one round trip) or MPI_Sendrecv (both directions at once). */
typedef enum { ASYNC_BASELINE_PINGPONG, ASYNC_BASELINE_SENDRECV } async_baseline;
#define ASYNC_BASELINE_CHOICES "pingpong|sendrecv"

typedef struct {
    double *send, *recv;
} async_buffers;

typedef struct {
    hmb_ctx *ctx;
    const hmb_point *pt;
    async_op op;
    MPI_Comm world;  /* hmb_comm() */
    MPI_Comm graph;  /* neighbor_alltoall's distributed graph, else MPI_COMM_NULL */
    int rank, nranks;
    int count;       /* doubles per message (per block for alltoall and neighbourhoods) */
    int nblocks;     /* blocks in the send and in the receive buffer */
    long long reduce_period; /* iterations after which the reduction operands repeat */
    async_buffers buf[ASYNC_PHASES];
    int peer;        /* pt2pt */
    async_baseline baseline; /* pt2pt */
    int nneighbors;  /* exch / neighbor_alltoall */
    int send_to[ASYNC_MAX_NEIGHBORS], recv_from[ASYNC_MAX_NEIGHBORS];
    MPI_Request persistent; /* allreduce_init, bound to the non-blocking phase's buffers */
    MPI_Request reqs[2 * ASYNC_MAX_NEIGHBORS];
    int nreq;        /* requests of the posted non-blocking operation */
} async_exchange;

extern const char *const async_op_names[]; /* NULL-terminated, in async_op order */
const char *async_op_name(async_op op);
int async_op_from_name(const char *name); /* -1 if unknown */
int async_op_uses_neighbors(async_op op);
/* 1 if this MPI library has the operation; else 0 and the reason in why. */
int async_op_supported(async_op op, char *why, size_t whylen);
/* 1 if a message of size_bytes fits the int element counts MPI takes (size_bytes is the
 * message, or the block per peer for alltoall and neighbourhoods); else 0 and why. */
int async_size_fits(size_t size_bytes, char *why, size_t whylen);

/* Buffers, peers, graph communicator, persistent request (collective over hmb_comm). An
 * allocation failure on any rank is a usage error on every rank (exit 2). */
void async_exchange_init(async_exchange *ex, hmb_ctx *ctx, const hmb_point *pt, async_op op, size_t size_bytes,
                         int neighbors, int grid2d, async_baseline baseline);
void async_exchange_free(async_exchange *ex);

/* Untimed: fill the send data of iteration iter for a phase and poison its receive buffer.
 * The two phases carry different patterns, so data left from the other phase cannot pass. */
void async_fill(async_exchange *ex, long iter, int phase);
/* The blocking baseline, on the ASYNC_BLOCKING buffers. */
void async_blocking(async_exchange *ex);
/* Starts the non-blocking operation on the ASYNC_NONBLOCKING buffers; its requests are
 * ex->reqs[0 .. nreq-1]. */
void async_post(async_exchange *ex);
/* Checks every received element of a phase; a mismatch is fatal (exit 3). Honours the
 * test-only --inject corrupt like every hmb_check. */
void async_verify(async_exchange *ex, long iter, int phase);

#endif
