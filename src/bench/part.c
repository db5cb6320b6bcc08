/* part — partitioned point-to-point (SPEC §3.2): a paired design of two baselines and the
 * partitioned request.
 *
 * Rank 0 sends, rank 1 receives, other ranks only join the collectives. Each iteration runs
 * three phases on the same per-thread compute draws (hmb_noise_ns is deterministic):
 *   single send: threads compute, join (t_join_ss), one fresh send of the whole message; the
 *      receiver's MPI_Recv returns at t_recv; t_pt2pt = t_recv - t_join_ss.
 *   persistent: the same with MPI_Send_init/MPI_Recv_init requests made once per point; the
 *      receive is started before the barrier like the partitioned one, the send at the join
 *      (a persistent send's start says its data is ready); t_persist = its t_recv - its join.
 *   partitioned: threads compute, then each marks its block of partitions ready (s_i taken
 *      just before MPI_Pready*); the receiver records the first MPI_Parrived success per
 *      partition (a_j). Metrics pair s and a over lcm(P_send, P_recv) pieces (pair_pieces)
 *      and come from hmb_part_metrics_compute (metrics.c).
 * --complete says how the sender completes its request in every phase alike: polling MPI_Test,
 * or MPI_Wait (for the fresh send, MPI_Send: its blocking form).
 * All timestamps go to rank 0's time base; the receiver ships its own to rank 0 after the
 * timed part. Libraries whose MPI_Parrived misreports arrival are caught, never waited on:
 * an arrival reported while the partition still holds poison fails the run, and so does a
 * partition never reported although the sender completed (a grace period after it) or
 * within --wait-bound, and a partitioned send never completed (the harness's bounded waits,
 * hmb_parrived_each_bounded and hmb_waitall_bounded). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "hmb/hmb.h"
#include "hmb/metrics.h"

enum { SENDER = 0, RECEIVER = 1 };
enum { TAG_SINGLE = 1, TAG_PART = 2, TAG_SENDER_DONE = 3, TAG_TIMES = 4, TAG_PERSIST = 5 };
enum { PREADY_SINGLE, PREADY_RANGE, PREADY_LIST };
enum { COMPLETE_TEST, COMPLETE_WAIT, NCOMPLETE };
static const char *const complete_names[NCOMPLETE] = {"test", "wait"};
enum { PHASE_SINGLE, PHASE_PERSISTENT, PHASE_PARTITIONED, NPHASES };
/* times_msg (receiver -> rank 0): both baselines' t_recv, then a_0 .. a_{P_recv-1} */
enum { TIMES_RECV_SINGLE, TIMES_RECV_PERSIST, TIMES_ARRIVED };

/* A partition not reported this long after the sender completed is never coming. */
#define NEVER_REPORTED_MIN_GRACE_S 1.0
#define NEVER_REPORTED_PT2PT_FACTOR 1000.0

typedef struct {
    int nparts_send, nparts_recv, threads;
    size_t size_bytes, psize_send, psize_recv;
    int pready_mode;
    int observe_poller; /* one thread polls every partition */
    int complete_wait;  /* the sender completes with MPI_Wait, else by polling MPI_Test */
    int64_t compute_ns;
    int rank;
    MPI_Comm data_comm; /* both phases' messages */
    MPI_Comm ctl_comm;  /* sender-done message and timestamps: never matches data */
    unsigned char *send_buf, *recv_buf_single, *recv_buf_persist, *recv_buf_part;
    MPI_Request part_req;
    MPI_Request persist_req; /* MPI_Send_init on the sender, MPI_Recv_init on the receiver */
    int *pready_list;     /* identity list: a thread passes its own slice to Pready_list */
    double *ready_local;  /* sender: s_i, local clock */
    double *compute_end;  /* sender: per thread, local clock */
    double *arrived;      /* receiver: a_j, local clock (then global on the wire) */
    double *times_msg;    /* receiver -> rank 0, global time base: see TIMES_* */
    int npieces;          /* lcm(P_send, P_recv): the message cut where either side cuts it */
    double *piece_ready, *piece_arrived; /* rank 0: s and a of every piece (global) */
    /* receiver's sender-done watch, shared by its polling threads (under omp critical) */
    MPI_Request done_req;
    int done_flag, done_payload;
    double done_at_s;
    double grace_s;       /* receiver: how long a partition may lag the sender's completion */
    double poll_since_s;  /* receiver: where --wait-bound of the partitioned phase starts */
    const hmb_point *pt;           /* the point being run (validation messages) */
    double t_baseline[NPHASES];    /* sender: the baseline phase's join; receiver: its t_recv (local) */
    long no_perceived_bw; /* samples whose last-ready piece arrived at or before its ready time */
} part_state;

static const hmb_option part_options[] = {
    {"partitions", HMB_OPT_INTS, NULL, "send partitions P, each a multiple of --threads (default: P = threads)",
     1, 1 << 20, NULL},
    {"recv-partitions", HMB_OPT_INT, NULL, "receive partitions (default: same as the send partitions)", 1, 1 << 20,
     NULL},
    {"pready", HMB_OPT_CHOICE, "single", "mark ready with MPI_Pready per partition, MPI_Pready_range or MPI_Pready_list",
     0, 0, "single|range|list"},
    {"observe", HMB_OPT_CHOICE, "thread", "receiver polls MPI_Parrived per thread (own partitions) or in one poller",
     0, 0, "thread|poller"},
    {"complete", HMB_OPT_CHOICES, "test",
     "how the sender completes its request in every phase: polling MPI_Test or MPI_Wait (one point each)", 0, 0,
     "test|wait"},
    HMB_OPTION_END};

static const hmb_default part_defaults[] = {{"sizes", "4K:4M:x4"}, {"compute", "1ms"}, {NULL, NULL}};

static const hmb_metric part_metrics[] = {
    {.name = "overhead", .unit = "ratio", .higher_is_better = 0, .in_table = 1,
     .description = "t_part / t_pt2pt (partitioned vs a fresh single send; ~1 for one partition)"},
    {.name = "overhead_persistent", .unit = "ratio", .higher_is_better = 0, .in_table = 1,
     .description = "t_part / t_persist (partitioned vs a pre-started persistent send/receive)"},
    {.name = "t_part_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "first Pready to last Parrived"},
    {.name = "t_pt2pt_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "single send: join to receive completion (one-way)"},
    {.name = "t_persist_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "persistent send/receive: join to receive completion (one-way)"},
    {.name = "perceived_bw_MBps", .unit = "MB/s", .higher_is_better = 1, .in_table = 1,
     .description = "m / (a_L - s_L), L = partition made ready last (MB = 1e6 B)"},
    {.name = "availability", .unit = "ratio", .higher_is_better = 1, .in_table = 1, .is_signed = 1,
     .description = "1 - t_after_join / t_pt2pt"},
    {.name = "early_bird", .unit = "ratio", .higher_is_better = 1, .in_table = 1,
     .description = "share of the message's bytes reported arrived at or before the join"},
    {.name = "t_after_join_us", .unit = "us", .higher_is_better = 0, .in_table = 0,
     .description = "max(0, last arrival - join)"},
    HMB_METRIC_END};

static int recv_partitions_of(const hmb_ctx *ctx, int nparts_send)
{
    return hmb_opt_given(ctx, "recv-partitions") ? (int)hmb_opt_int(ctx, "recv-partitions") : nparts_send;
}

/* The send partition counts to sweep: --partitions, or one point with P = threads. */
static const long long *send_partition_list(const hmb_ctx *ctx, int *count, long long *fallback)
{
    if (hmb_opt_given(ctx, "partitions"))
        return hmb_opt_ints(ctx, "partitions", count);
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

static void part_check(hmb_ctx *ctx)
{
    int threads = hmb_threads(ctx), nsizes = 0, nparts = 0;
    long long fallback;
    const size_t *sizes = hmb_opt_sizes(ctx, "sizes", &nsizes);
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

static void part_points(hmb_ctx *ctx, hmb_point_list *out)
{
    int nsizes = 0, nparts = 0;
    long long fallback;
    const size_t *sizes = hmb_opt_sizes(ctx, "sizes", &nsizes);
    const long long *parts = send_partition_list(ctx, &nparts, &fallback);
    const unsigned long long completes = hmb_opt_choices(ctx, "complete");
    for (int s = 0; s < nsizes; s++) {
        for (int p = 0; p < nparts; p++) {
            for (int c = 0; c < NCOMPLETE; c++) {
                if (!(completes & (1ull << c)))
                    continue;
                hmb_point *pt = hmb_points_add(out, sizes[s]);
                hmb_point_set_int(pt, "partitions", parts[p]);
                hmb_point_set_int(pt, "recv_partitions", recv_partitions_of(ctx, (int)parts[p]));
                hmb_point_set_str(pt, "complete", complete_names[c]);
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
    free(st->pready_list);
    free(st->ready_local);
    free(st->compute_end);
    free(st->arrived);
    free(st->times_msg);
    free(st->piece_ready);
    free(st->piece_arrived);
    free(st);
}

static void *part_setup(hmb_ctx *ctx, const hmb_point *pt)
{
    /* no partitioned communication, or several threads calling MPI_Pready/MPI_Parrived without MULTIPLE */
    if (hmb_mode_refused(ctx, NULL, 0, 1))
        return NULL;
#if !HMB_HAVE_PARTITIONED
    (void)pt;
    return NULL;
#else
    const char *pready = hmb_opt_str(ctx, "pready");
#ifndef HMB_HAVE_MPI_PREADY_RANGE
    if (strcmp(pready, "range") == 0) {
        hmb_unsupported(ctx, "this MPI library has no MPI_Pready_range");
        return NULL;
    }
#endif
#ifndef HMB_HAVE_MPI_PREADY_LIST
    if (strcmp(pready, "list") == 0) {
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
    st->nparts_send = (int)hmb_point_int(pt, "partitions");
    st->nparts_recv = (int)hmb_point_int(pt, "recv_partitions");
    st->psize_send = st->size_bytes / (size_t)st->nparts_send;
    st->psize_recv = st->size_bytes / (size_t)st->nparts_recv;
    st->pready_mode = strcmp(pready, "range") == 0 ? PREADY_RANGE : strcmp(pready, "list") == 0 ? PREADY_LIST
                                                                                                   : PREADY_SINGLE;
    st->observe_poller = strcmp(hmb_opt_str(ctx, "observe"), "poller") == 0;
    st->complete_wait = strcmp(hmb_point_str(pt, "complete"), complete_names[COMPLETE_WAIT]) == 0;
    st->compute_ns = hmb_opt_duration_ns(ctx, "compute");
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
        MPI_Send_init(st->send_buf, count_whole, MPI_UINT64_T, RECEIVER, TAG_PERSIST, st->data_comm, &st->persist_req);
        for (int i = 0; i < st->nparts_send; i++) /* validation as data: the harness writes each partition */
            hmb_check_register(ctx, HMB_SEND, st->send_buf + (size_t)i * st->psize_send, st->psize_send, SENDER, i, 1,
                               HMB_AFTER_ITERATION, "send");
    } else if (st->rank == RECEIVER) {
        st->recv_buf_single = hmb_buffer_alloc(ctx, st->size_bytes);
        st->recv_buf_persist = hmb_buffer_alloc(ctx, st->size_bytes);
        st->recv_buf_part = hmb_buffer_alloc(ctx, st->size_bytes);
        st->arrived = calloc((size_t)st->nparts_recv, sizeof(double));
        st->times_msg = calloc((size_t)st->nparts_recv + TIMES_ARRIVED, sizeof(double));
        if (!st->recv_buf_single || !st->recv_buf_persist || !st->recv_buf_part || !st->arrived || !st->times_msg) {
            hmb_unsupported(ctx, "cannot allocate 3 x %zu bytes of receive buffers on the receiver", st->size_bytes);
            return st;
        }
        MPI_Precv_init(st->recv_buf_part, st->nparts_recv, count_recv, MPI_UINT64_T, SENDER, TAG_PART, st->data_comm,
                       MPI_INFO_NULL, &st->part_req);
        MPI_Recv_init(st->recv_buf_persist, count_whole, MPI_UINT64_T, SENDER, TAG_PERSIST, st->data_comm,
                      &st->persist_req);
        /* validation as data: every send partition in every phase's buffer, checked after the
         * iteration; poisoned before it, so a reported-but-unwritten partition is visible */
        unsigned char *bufs[3] = {st->recv_buf_part, st->recv_buf_single, st->recv_buf_persist};
        static const char *const phase[3] = {"partitioned", "single-send", "persistent"};
        for (int b = 0; b < 3; b++)
            for (int i = 0; i < st->nparts_send; i++)
                hmb_check_register(ctx, HMB_RECEIVE, bufs[b] + (size_t)i * st->psize_send, st->psize_send, SENDER,
                                   i, 1, HMB_AFTER_ITERATION, "%s phase, send partition %d (%zu bytes)", phase[b], i,
                                   st->psize_send);
    }
    return st;
#endif
}

#if HMB_HAVE_PARTITIONED
/* What the receiver's poll callbacks need. */
struct arrival_arg {
    hmb_ctx *ctx;
    part_state *st;
    long iter;
};

/* Receiver: when the sender-done message was seen (hmb_now), or -1 before; tested by one
 * thread at a time (a request must not be tested concurrently); hmb_parrived_each_bounded
 * calls it at a low rate. */
static double sender_done_at(void *arg)
{
    part_state *st = ((const struct arrival_arg *)arg)->st;
    double at;
#pragma omp critical(part_sender_done)
    {
        if (!st->done_flag) {
            MPI_Test(&st->done_req, &st->done_flag, MPI_STATUS_IGNORE);
            if (st->done_flag)
                st->done_at_s = hmb_now();
        }
        at = st->done_flag ? st->done_at_s : -1.0;
    }
    return at;
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
static void check_reported_arrival(void *arg, int j)
{
    const struct arrival_arg *a = arg;
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

/* Receiver: observe receive partitions [first, last), each once, at its first report (the
 * harness's bounded poll: a partition still unreported a grace period after the sender
 * completed, or --wait-bound past poll_since_s, fails the point naming it). */
static void observe_partitions(hmb_ctx *ctx, part_state *st, long iter, int first, int last)
{
    struct arrival_arg a = {.ctx = ctx, .st = st, .iter = iter};
    hmb_arrival_watch w = {.since = st->poll_since_s,
                           .on_arrival = hmb_validate_enabled(ctx) ? check_reported_arrival : NULL,
                           .peer_done = sender_done_at, .grace_s = st->grace_s, .arg = &a};
    hmb_parrived_each_bounded(ctx, st->pt, iter, hmb_comm_mpi(), st->part_req, first, last, st->arrived, &w,
                              "the receive request (send partitions %d, receive partitions %d)", st->nparts_send,
                              st->nparts_recv);
}

static void sender_mark_ready(part_state *st, int tid, double ready_at)
{
    int per_thread = st->nparts_send / st->threads;
    int lo = tid * per_thread, hi = lo + per_thread; /* this thread's block [lo, hi) */
    switch (st->pready_mode) {
    case PREADY_SINGLE:
        for (int i = lo; i < hi; i++) {
            st->ready_local[i] = i == lo ? ready_at : hmb_now();
            MPI_Pready(i, st->part_req);
        }
        break;
    case PREADY_RANGE:
        for (int i = lo; i < hi; i++)
            st->ready_local[i] = ready_at;
#ifdef HMB_HAVE_MPI_PREADY_RANGE
        MPI_Pready_range(lo, hi - 1, st->part_req);
#endif
        break;
    case PREADY_LIST:
        for (int i = lo; i < hi; i++)
            st->ready_local[i] = ready_at;
#ifdef HMB_HAVE_MPI_PREADY_LIST
        MPI_Pready_list(hi - lo, st->pready_list + lo, st->part_req);
#endif
        break;
    }
}


/* Sender: every thread computes its draw of this iteration (the same draws in every phase);
 * with mark_ready it then records its compute end and marks its partitions ready. Returns the
 * join (local clock). */
static double sender_compute(hmb_ctx *ctx, part_state *st, long iter, int mark_ready)
{
#pragma omp parallel num_threads(st->threads)
    for (int tid = omp_get_thread_num(); tid < st->threads; tid += omp_get_num_threads()) {
        hmb_compute_ns(ctx, hmb_noise_ns(ctx, tid, iter, st->compute_ns));
        if (mark_ready) {
            st->compute_end[tid] = hmb_now();
            sender_mark_ready(st, tid, st->compute_end[tid]); /* s of its first partition */
        }
    }
    return hmb_now();
}

/* Sender: complete a send request of a baseline phase as --complete says, the same way as in
 * the partitioned phase: poll MPI_Test (an application that checks between other work) or
 * block in MPI_Wait. */
static void complete_send(const part_state *st, MPI_Request *req)
{
    if (st->complete_wait) {
        MPI_Wait(req, MPI_STATUS_IGNORE);
        return;
    }
    for (int done = 0; !done;)
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
}

/* Sender: once every partition is ready and the receiver has started (the barrier), the
 * send must complete; polled (--complete test) or blocked in MPI_Wait (--complete wait, its
 * bound prepared in partitioned_setup), a library that never completes it fails the run
 * within --wait-bound instead of hanging it (seen with Open MPI 5.0.11 when the job has ranks
 * beyond the pair). */
static void sender_bounded_wait(hmb_ctx *ctx, part_state *st, const hmb_point *pt, long iter)
{
    if (st->complete_wait)
        hmb_wait_bounded(ctx, iter, &st->part_req, hmb_now());
    else
        hmb_waitall_bounded(ctx, pt, iter, hmb_comm_mpi(), 1, &st->part_req, hmb_now(),
                            "the partitioned send (every partition marked ready, the receiver started and polling; "
                            "%d ranks in the job)",
                            hmb_size(ctx));
}

/* The persistent receive is started before the barrier (hmb_modes_run), like the partitioned
 * receive; the persistent send is started at the join, where the fresh send is posted. */
static void persistent_setup(hmb_ctx *ctx, void *state, int phase, long iter)
{
    (void)ctx, (void)phase, (void)iter;
    part_state *st = state;
    if (st->rank == RECEIVER)
        MPI_Start(&st->persist_req);
}

/* A baseline phase (single send or persistent), from the barrier. Stores (sender) its join or
 * (receiver) its t_recv, local, in t_baseline; the single send's time inside the send / receive
 * on this rank scales the hang bounds of the partitioned phase (grace_s). */
static void phase_baseline(hmb_ctx *ctx, void *state, int phase, long iter, double *times)
{
    (void)times;
    part_state *st = state;
    const int persistent = phase == PHASE_PERSISTENT;
    double t = 0.0, comm_s = 0.0;
    if (st->rank == SENDER) {
        t = sender_compute(ctx, st, iter, 0); /* t_join_ss, or the persistent phase's join */
        hmb_phase(ctx, persistent ? "persistent send" : "single send");
        int count = (int)(st->size_bytes / 8);
        if (persistent) {
            MPI_Start(&st->persist_req);
            complete_send(st, &st->persist_req);
        } else if (st->complete_wait) {
            MPI_Send(st->send_buf, count, MPI_UINT64_T, RECEIVER, TAG_SINGLE, st->data_comm);
        } else {
            MPI_Request req;
            MPI_Isend(st->send_buf, count, MPI_UINT64_T, RECEIVER, TAG_SINGLE, st->data_comm, &req);
            complete_send(st, &req);
        }
        comm_s = hmb_now() - t;
    } else if (st->rank == RECEIVER) {
        double t_posted = hmb_now();
        if (persistent) {
            hmb_phase(ctx, "persistent receiver MPI_Wait");
            MPI_Wait(&st->persist_req, MPI_STATUS_IGNORE);
        } else {
            hmb_phase(ctx, "single-send MPI_Recv");
            MPI_Recv(st->recv_buf_single, (int)(st->size_bytes / 8), MPI_UINT64_T, SENDER, TAG_SINGLE, st->data_comm,
                     MPI_STATUS_IGNORE);
        }
        t = hmb_now(); /* t_recv */
        comm_s = t - t_posted;
    }
    st->t_baseline[phase] = t;
    if (phase == PHASE_SINGLE)
        st->grace_s = fmax(NEVER_REPORTED_MIN_GRACE_S, NEVER_REPORTED_PT2PT_FACTOR * comm_s);
}

/* Before the partitioned phase's barrier: the sender-done watch, the requests started. */
static void partitioned_setup(hmb_ctx *ctx, void *state, int phase, long iter)
{
    (void)ctx, (void)phase, (void)iter;
    part_state *st = state;
    if (st->rank == SENDER && st->complete_wait)
        hmb_wait_bound_prepare(ctx, iter, "the 1 request of the partitioned send (every partition marked ready, the "
                                          "receiver started; %d ranks in the job)", hmb_size(ctx));
    if (st->rank == RECEIVER) {
        /* Pre-post the sender-done message: it bounds Parrived polling. */
        st->done_flag = 0;
        MPI_Irecv(&st->done_payload, 1, MPI_INT, SENDER, TAG_SENDER_DONE, st->ctl_comm, &st->done_req);
        memset(st->arrived, 0, (size_t)st->nparts_recv * sizeof(double));
    }
    if (st->rank == SENDER || st->rank == RECEIVER)
        MPI_Start(&st->part_req);
}

static void phase_partitioned(hmb_ctx *ctx, void *state, int phase, long iter, double *times)
{
    (void)phase, (void)times;
    part_state *st = state;
    const hmb_point *pt = st->pt;
    if (st->rank == SENDER) {
        sender_compute(ctx, st, iter, 1);
        hmb_phase(ctx, "partitioned sender completion");
        sender_bounded_wait(ctx, st, pt, iter);
        int done = 1;
        MPI_Send(&done, 1, MPI_INT, RECEIVER, TAG_SENDER_DONE, st->ctl_comm);
    } else if (st->rank == RECEIVER) {
        hmb_phase(ctx, "MPI_Parrived poll");
        /* --wait-bound starts where the sender's compute of this iteration ends (its draws
         * are deterministic) plus the sender's own bound: its report comes first */
        int64_t compute_ns = 0;
        for (int t = 0; t < st->threads; t++) {
            int64_t draw = hmb_noise_ns(ctx, t, iter, st->compute_ns);
            compute_ns = draw > compute_ns ? draw : compute_ns;
        }
        st->poll_since_s = hmb_now() + (double)compute_ns * 1e-9 + hmb_wait_bound_s(ctx);
        if (st->observe_poller) {
            observe_partitions(ctx, st, iter, 0, st->nparts_recv);
        } else {
#pragma omp parallel num_threads(st->threads)
            {
                int nth = omp_get_num_threads();
                /* Thread t observes the receive partitions [t P_recv / T, (t+1) P_recv / T). */
                int t = omp_get_thread_num();
                observe_partitions(ctx, st, iter, (int)((long long)t * st->nparts_recv / nth),
                                   (int)((long long)(t + 1) * st->nparts_recv / nth));
            }
        }
        hmb_phase(ctx, "partitioned receiver MPI_Wait");
        MPI_Wait(&st->part_req, MPI_STATUS_IGNORE);
        if (!st->done_flag)
            MPI_Wait(&st->done_req, MPI_STATUS_IGNORE);
    }
}

/* The metrics pair every ready time with the arrival of the same bytes. With different send
 * and receive partition counts the message is cut into lcm(P_send, P_recv) equal pieces: piece
 * k lies in exactly one send partition (its s) and one receive partition (its a). So t_part
 * starts at the first MPI_Pready, L is the piece made ready last, and early_bird counts bytes
 * (equal pieces). With equal counts the pieces are the partitions. */
static void pair_pieces(hmb_ctx *ctx, part_state *st)
{
    int per_send = st->npieces / st->nparts_send, per_recv = st->npieces / st->nparts_recv;
    for (int k = 0; k < st->npieces; k++) {
        st->piece_ready[k] = hmb_to_global(ctx, st->ready_local[k / per_send]);
        st->piece_arrived[k] = st->times_msg[TIMES_ARRIVED + k / per_recv];
    }
}

static const hmb_mode part_modes[NPHASES + 1] = {
    [PHASE_SINGLE] = {.name = "single send", .iterate = phase_baseline},
    [PHASE_PERSISTENT] = {.name = "persistent", .setup = persistent_setup, .iterate = phase_baseline},
    [PHASE_PARTITIONED] = {.name = "partitioned", .setup = partitioned_setup, .iterate = phase_partitioned},
};
static const int all_phases[NPHASES] = {PHASE_SINGLE, PHASE_PERSISTENT, PHASE_PARTITIONED};

/* The paired design runs on the harness's driver (hmb_modes_run: counterbalanced orders, barrier
 * before each phase). Order 0 runs the single send first: the never-reported grace comes from
 * the latest single-send time. The metrics come from the two ranks' timestamps, not the
 * driver's barrier-to-end times. */
static int part_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    part_state *st = state;
    st->pt = pt;
    hmb_mode_results r;
    hmb_modes_run(ctx, st, all_phases, NPHASES, iter, &r);
    const double *t_baseline = st->t_baseline;

    /* Untimed: the receiver's timestamps to rank 0 (this also keeps the sender from
     * refilling its buffer before the receiver has everything). */
    hmb_phase(ctx, "timestamp exchange");
    const int ntimes = st->nparts_recv + TIMES_ARRIVED;
    if (st->rank == RECEIVER) {
        st->times_msg[TIMES_RECV_SINGLE] = hmb_to_global(ctx, t_baseline[PHASE_SINGLE]);
        st->times_msg[TIMES_RECV_PERSIST] = hmb_to_global(ctx, t_baseline[PHASE_PERSISTENT]);
        for (int j = 0; j < st->nparts_recv; j++)
            st->times_msg[TIMES_ARRIVED + j] = hmb_to_global(ctx, st->arrived[j]);
        MPI_Send(st->times_msg, ntimes, MPI_DOUBLE, SENDER, TAG_TIMES, st->ctl_comm);
        return 0;
    }
    if (st->rank != SENDER)
        return 0;
    MPI_Recv(st->times_msg, ntimes, MPI_DOUBLE, RECEIVER, TAG_TIMES, st->ctl_comm, MPI_STATUS_IGNORE);

    double t_pt2pt = st->times_msg[TIMES_RECV_SINGLE] - hmb_to_global(ctx, t_baseline[PHASE_SINGLE]);
    double t_persist = st->times_msg[TIMES_RECV_PERSIST] - hmb_to_global(ctx, t_baseline[PHASE_PERSISTENT]);
    double t_join = -INFINITY;
    for (int t = 0; t < st->threads; t++)
        t_join = fmax(t_join, hmb_to_global(ctx, st->compute_end[t]));
    pair_pieces(ctx, st);
    hmb_part_metrics m;
    int rc = hmb_part_metrics_compute(st->npieces, st->piece_ready, st->piece_arrived, t_join, t_pt2pt, t_persist,
                                      st->size_bytes, &m);
    out->valid = rc == 0;
    if (rc == 1 && iter >= hmb_opt_int(ctx, "warmup")) /* counted where the harness counts invalid samples */
        st->no_perceived_bw++;
    hmb_record(ctx, out, "overhead", m.overhead);
    hmb_record(ctx, out, "overhead_persistent", m.overhead_persistent);
    hmb_record(ctx, out, "t_part_us", m.t_part_s * 1e6);
    hmb_record(ctx, out, "t_pt2pt_us", m.t_pt2pt_s * 1e6);
    hmb_record(ctx, out, "t_persist_us", m.t_persist_s * 1e6);
    hmb_record(ctx, out, "perceived_bw_MBps", m.perceived_bw_Bps * 1e-6);
    hmb_record(ctx, out, "availability", m.availability);
    hmb_record(ctx, out, "early_bird", m.early_bird);
    hmb_record(ctx, out, "t_after_join_us", m.t_after_join_s * 1e6);
    return 0;
}

#endif /* HMB_HAVE_PARTITIONED */

static void part_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
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

static void part_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    const part_state *st = state;
    if (st->no_perceived_bw > 0) {
        hmb_result_add_num(ctx, "invalid_no_perceived_bw", (double)st->no_perceived_bw);
        hmb_result_add_str(ctx, "invalid_reason", "the piece made ready last was reported arrived at or before its "
                                                  "ready time (a_L - s_L <= 0): no perceived bandwidth; a clock problem");
    }
    hmb_result_add_num(ctx, "partitions_send", (double)hmb_point_int(pt, "partitions"));
    hmb_result_add_num(ctx, "partitions_recv", (double)hmb_point_int(pt, "recv_partitions"));
    hmb_result_add_str(ctx, "pready", hmb_opt_str(ctx, "pready"));
    hmb_result_add_str(ctx, "observe", hmb_opt_str(ctx, "observe"));
    hmb_result_add_num(ctx, "threads", hmb_threads(ctx));
    hmb_result_add_num(ctx, "compute_ns", (double)hmb_opt_duration_ns(ctx, "compute"));
    hmb_result_add_str(ctx, "noise", hmb_opt_str(ctx, "noise"));
    int wait = strcmp(hmb_point_str(pt, "complete"), complete_names[COMPLETE_WAIT]) == 0;
    hmb_result_add_str(ctx, "single_send", wait ? "MPI_Send / MPI_Recv of the whole message"
                                                : "MPI_Isend + MPI_Test polling / MPI_Recv of the whole message");
    hmb_result_add_str(ctx, "persistent", wait ? "MPI_Send_init + MPI_Wait / MPI_Recv_init started before the barrier"
                                               : "MPI_Send_init + MPI_Test polling / MPI_Recv_init started before the "
                                                 "barrier");
}

#if HMB_HAVE_PARTITIONED
#define PART_ITERATE part_iterate
#else
#define PART_ITERATE NULL
#endif

static const hmb_bench part_bench = {
    .name = "part",
    .group = "partitioned",
    .summary = "partitioned point-to-point vs single and persistent send: overhead, perceived bandwidth, "
               "availability, early bird",
    .options = part_options,
    .defaults = part_defaults,
    .modes = part_modes,
    .metrics = part_metrics,
    .thread_level = MPI_THREAD_MULTIPLE,
    .min_ranks = 2,
    .rank_multiple = 0,
    .check = part_check,
    .points = part_points,
    .setup = part_setup,
    .iterate = PART_ITERATE,
    .verify = NULL, /* the harness checks the registered buffers (part_setup) */
    .teardown = part_teardown,
    .annotate = part_annotate,
    .pivot_metrics = "overhead,overhead_persistent,availability,early_bird",
};
HMB_REGISTER(part_bench);
