/* Private to async: pattern.c (the operations' table with their blocking and non-blocking forms,
 * the progress modes, the three phases, their metrics, the record, the descriptor; the family's
 * description is at its top), setup.c (checks, the library's progress thread, the calc-factor
 * calibration, points, an operation's buffers, peers and handles), verify.c (send data, the
 * harness's checks, the reductions' results). */
#ifndef HMB_BENCH_ASYNC_H
#define HMB_BENCH_ASYNC_H

#include <stddef.h>

#include "hmb/bench.h"

/* The operations, in the order of the table (pattern.c) and of their names. */
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
/* --op's names (and the point's op), in async_op order. */
static const char *const async_op_names[ASYNC_OP_COUNT + 1] = {
    "pt2pt", "exch", "allreduce", "ialltoall", "ibcast", "neighbor_alltoall", "allreduce_init", NULL};

/* pt2pt's blocking baseline: IMB-ASYNC's sync_pt2pt (MPI_Send then MPI_Recv, reversed on the
 * partner: one round trip) or MPI_Sendrecv (both directions at once). */
typedef enum { ASYNC_BASELINE_PINGPONG, ASYNC_BASELINE_SENDRECV } async_baseline;
static const char *const async_baseline_names[] = {"pingpong", "sendrecv", NULL};

/* --topology's names, in TOPOLOGY_* order. */
enum { TOPOLOGY_RING, TOPOLOGY_GRID2D };
static const char *const async_topology_names[] = {"ring", "grid2d", NULL};

/* The progress modes, in the order of their table (pattern.c) and of their names (test takes P). */
#define MAX_MODES 16
typedef enum { PROG_NONE, PROG_TEST, PROG_THREAD, PROG_IMPL, PROG_COUNT } progress_kind;
static const char *const async_progress_names[PROG_COUNT + 1] = {"none", "test:", "thread", "impl", NULL};

#define ASYNC_OPTIONS(X)                                                                                            \
    X(op, CHOICE_ARGS, .default_value = "pt2pt,allreduce", .names = async_op_names,                                 \
      .help = "operations (comma list)")                                                                           \
    X(progress, CHOICE_ARGS, .default_value = "none,test:10,thread", .min = 0.1, .max = 1e6,                        \
      .names = async_progress_names,                                                                                \
      .help = "progress modes (comma list): none, test:P (MPI_Testall every P µs of compute, 0.1..1e6), thread, "   \
              "impl")                                                                                               \
    X(neighbors, INT, .default_value = "2", .min = 1, .max = 64, .used_by = "op:exch,neighbor_alltoall",            \
      .help = "exch/neighbor_alltoall: neighbours per rank (ring: even; grid2d: 4 or 8)")                          \
    X(topology, CHOICE, .default_value = "ring", .names = async_topology_names,                                   \
      .used_by = "op:exch,neighbor_alltoall",                                                                       \
      .help = "exch/neighbor_alltoall neighbourhood: ring or periodic 2-D grid")                                   \
    X(calc_factor, DOUBLE, .default_value = "2.0", .min = 0.01, .max = 1000,                                        \
      .help = "without --compute: C = factor x the blocking time of the op and size (seed: 1.5-2)")               \
    X(baseline, CHOICE, .default_value = "pingpong", .names = async_baseline_names, .used_by = "op:pt2pt",          \
      .help = "pt2pt blocking baseline: pingpong (IMB-ASYNC sync_pt2pt: Send then Recv, reversed on the partner) " \
              "or sendrecv (MPI_Sendrecv)")
HMB_OPTIONS(async_opts, ASYNC_OPTIONS);

/* A point: the operation, the --progress item as given (and its place in --progress), the
 * neighbours of the neighbourhood operations; a calibration's point says so in phase. */
#define ASYNC_PARAMS(X)                                                                                             \
    X(op, NAME, .names = async_op_names) X(progress, TEXT) X(neighbors, INT) X(phase, TEXT) X(progress_item, DATA)
HMB_POINT_PARAMS(async_point, ASYNC_PARAMS);

#define ASYNC_MAX_NEIGHBORS 64

/* The two phases of an iteration that communicate. Each has its own buffers, so prepare() can fill
 * both before the --cache cold flush and neither phase's data can pass for the other's. */
enum { ASYNC_BLOCKING = 0, ASYNC_NONBLOCKING = 1, ASYNC_PHASES = 2 };

typedef struct {
    double *send, *recv;
} async_buffers;

typedef struct async_op_def async_op_def;

/* One operation of one point (or of a calibration): its buffers, peers and handles. */
typedef struct {
    hmb_ctx *ctx;
    const hmb_point *pt;
    async_op op;
    const async_op_def *def; /* its row of the table */
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

/* The blocks of an operation's buffers: one message, one per neighbour (--neighbors), one per rank. */
enum { ASYNC_BLOCKS_ONE, ASYNC_BLOCKS_NEIGHBORS, ASYNC_BLOCKS_RANKS };

/* An operation: a row of the table (pattern.c), indexed by async_op. */
struct async_op_def {
    /* The blocking baseline (T_sync), and the non-blocking form that leaves its requests in
     * ex->reqs[0 .. nreq); each on the buffers it is given (its phase's). */
    void (*blocking)(async_exchange *ex, const async_buffers *b);
    void (*post)(async_exchange *ex, const async_buffers *b);
    int blocks;          /* ASYNC_BLOCKS_* */
    int pairs;           /* pairs rank i with i + n/2: needs an even number of ranks; takes --baseline */
    const char *missing; /* why this library cannot run it (a function the build did not find), or NULL */
    /* setup.c: a handle it needs beyond the buffers (a graph communicator, a persistent request),
     * created after the buffers on every rank alike; may be NULL */
    void (*create)(async_exchange *ex);
    /* verify.c: its blocks registered with the harness, which fills, poisons and checks them every
     * iteration (NULL: checked by value); a reduction's operands, written before each iteration,
     * and its result, checked after (NULL: none) */
    void (*register_checks)(async_exchange *ex);
    void (*fill)(async_exchange *ex, long iter, int phase);
    void (*check)(async_exchange *ex, long iter, int phase);
};

/* A progress mode: a row of its table (pattern.c), indexed by progress_kind. */
typedef struct async_state async_state;
typedef struct {
    /* computes C under the mode; returns the time inside the kernel, ns */
    int64_t (*compute)(hmb_ctx *ctx, async_state *s);
    int hmb_thread;     /* HMB's progress thread tests the requests (needs MPI_THREAD_MULTIPLE) */
    int library_thread; /* the library's own progress thread (it must be on in this launch) */
} async_progress_def;

typedef struct {
    progress_kind kind;
    double poll_us; /* test:P */
} progress_spec;

struct async_state {
    async_exchange ex;
    progress_spec mode;
    const async_progress_def *progress; /* the mode's row */
    int64_t c_ns; /* calibrated compute C, the same on every rank */
    int library_thread;
    hmb_progress *thread;
    double calibration_error;    /* this rank's, for a request of C (hmb_compute_calibration_error) */
    long too_fast_samples;       /* rank 0: measured iterations with a kernel faster than calibrated */
    double fastest_kernel_ratio; /* rank 0: the smallest kernel time / C among them, any rank */
    double rate_probe[2];        /* rank 0 after the probe: [0] ranks whose rate was measured again,
                                  * [1] the shortest probe median, measured / requested, of any rank */
};

/* setup.c; ops: the operations' table, progress: the progress modes' (pattern.c) */
void async_check(hmb_ctx *ctx, const async_op_def *ops);
void async_points(hmb_ctx *ctx, hmb_point_list *out, const async_op_def *ops);
void *async_setup(hmb_ctx *ctx, const hmb_point *pt, const async_op_def *ops, const async_progress_def *progress);
void async_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt);
async_baseline async_baseline_of(const hmb_ctx *ctx); /* --baseline */
/* An allocation failure on any rank is a usage error on every rank (exit 2); collective. */
void async_exchange_init(async_exchange *ex, hmb_ctx *ctx, const hmb_point *pt, async_op op, const async_op_def *def,
                         size_t size_bytes, int neighbors, int grid2d, async_baseline baseline);
void async_exchange_free(async_exchange *ex);
void async_create_graph(async_exchange *ex);      /* neighbor_alltoall */
void async_create_persistent(async_exchange *ex); /* allreduce_init */

/* verify.c */
void async_register_pair(async_exchange *ex);
void async_register_neighbors(async_exchange *ex);
void async_register_alltoall(async_exchange *ex);
void async_register_broadcast(async_exchange *ex);
/* The reductions: operands and a NaN result (all-ones bytes) for iteration iter; the result checked. */
void async_fill_operands(async_exchange *ex, long iter, int phase);
void async_check_sum(async_exchange *ex, long iter, int phase);
/* hmb_bench.prepare and .verify: both phases' operands, both phases' results */
void async_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter);
void async_verify(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter);

#endif
