/* part — partitioned point-to-point (SPEC §3.2): a paired design of three baselines and the
 * partitioned request.
 *
 * Rank 0 sends, rank 1 receives, other ranks only join the collectives. Each iteration runs
 * four phases (one fewer under each of --no-polled and --no-persistent) on the same per-thread
 * compute draws (hmb_noise_ns is deterministic):
 *   single send: threads compute, join (t_join_ss), one fresh send of the whole message; the
 *      receiver's MPI_Recv returns at t_recv; t_pt2pt = t_recv - t_join_ss.
 *   polled receive: the single send again, the sender's side identical, but the receiver posts
 *      MPI_Irecv where the single send's receiver calls MPI_Recv and polls MPI_Test, t_recv taken
 *      at its first success (as the partitioned receiver polls MPI_Parrived); t_polled. It tells
 *      a receiver's blocking wait apart from what the partitioned request itself costs.
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

#include "part.h"

static const hmb_metric part_metrics[] = {
    {.name = "overhead", .unit = "ratio", .higher_is_better = 0, .in_table = 1,
     .description = "t_part / t_pt2pt (partitioned vs a fresh single send; ~1 for one partition)"},
    {.name = "overhead_persistent", .unit = "ratio", .higher_is_better = 0, .in_table = 1,
     .description = "t_part / t_persist (partitioned vs a pre-started persistent send/receive)"},
    {.name = "overhead_polled", .unit = "ratio", .higher_is_better = 0, .in_table = 1,
     .description = "t_part / t_pt2pt_polled (partitioned vs the single send with a receiver polling MPI_Test)"},
    {.name = "t_part_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "first Pready to last Parrived"},
    {.name = "t_pt2pt_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "single send: join to receive completion (one-way)"},
    {.name = "t_persist_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "persistent send/receive: join to receive completion (one-way)"},
    {.name = "t_pt2pt_polled_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "single send, receiver polling MPI_Test on an MPI_Irecv: join to the first completion (one-way)"},
    {.name = "polled_over_blocking", .unit = "ratio", .higher_is_better = 0, .in_table = 0,
     .description = "t_pt2pt_polled / t_pt2pt (< 1: the receiver's blocking MPI_Recv costs the difference)"},
    {.name = "perceived_bw_MBps", .unit = "MB/s", .higher_is_better = 1, .in_table = 1,
     .description = "m / (a_L - s_L), L = partition made ready last (MB = 1e6 B)"},
    {.name = "availability", .unit = "ratio", .higher_is_better = 1, .bounds = "..1", .in_table = 1, .is_signed = 1,
     .description = "1 - t_after_join / t_pt2pt"},
    {.name = "early_bird", .unit = "ratio", .higher_is_better = 1, .bounds = "0..1", .fixed = "0 at partitions=1; 0 at threads=1", .in_table = 1,
     .description = "share of the message's bytes reported arrived at or before the join"},
    {.name = "t_after_join_us", .unit = "us", .higher_is_better = 0, .in_table = 0,
     .description = "max(0, last arrival - join)"},
    HMB_METRIC_END};

#if HMB_HAVE_PARTITIONED
/* Receiver: when the sender-done message was seen (hmb_now), or -1 before; tested by one
 * thread at a time (a request must not be tested concurrently); hmb_parrived_each_bounded
 * calls it at a low rate. */
static double sender_done_at(void *arg)
{
    part_state *st = ((const part_arrival *)arg)->st;
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

/* Receiver: observe receive partitions [first, last), each once, at its first report (the
 * harness's bounded poll: a partition still unreported a grace period after the sender
 * completed, or --wait-bound past poll_since_s, fails the point naming it). */
static void observe_partitions(hmb_ctx *ctx, part_state *st, long iter, int first, int last)
{
    part_arrival a = {.ctx = ctx, .st = st, .iter = iter};
    hmb_arrival_watch w = {.since = st->poll_since_s,
                           .on_arrival = hmb_validate_enabled(ctx) ? part_check_reported_arrival : NULL,
                           .peer_done = sender_done_at, .grace_s = st->grace_s, .arg = &a};
    hmb_parrived_each_bounded(ctx, st->pt, iter, hmb_comm_mpi(), st->part_req, first, last, st->arrived, &w,
                              "the receive request (send partitions %d, receive partitions %d)", st->nparts_send,
                              st->nparts_recv);
}

/* --pready: how a sender thread marks its block of partitions [lo, hi) ready, recording each
 * one's s (ready_at for the first), one function per PREADY_* (part_pready_names). */
typedef void (*pready_fn)(part_state *st, int lo, int hi, double ready_at);

static void pready_each(part_state *st, int lo, int hi, double ready_at)
{
    for (int i = lo; i < hi; i++) {
        st->ready_local[i] = i == lo ? ready_at : hmb_now();
        MPI_Pready(i, st->part_req);
    }
}

static void pready_range(part_state *st, int lo, int hi, double ready_at)
{
    for (int i = lo; i < hi; i++)
        st->ready_local[i] = ready_at;
#ifdef HMB_HAVE_MPI_PREADY_RANGE
    MPI_Pready_range(lo, hi - 1, st->part_req);
#endif
}

static void pready_list(part_state *st, int lo, int hi, double ready_at)
{
    for (int i = lo; i < hi; i++)
        st->ready_local[i] = ready_at;
#ifdef HMB_HAVE_MPI_PREADY_LIST
    MPI_Pready_list(hi - lo, st->pready_list + lo, st->part_req);
#endif
}

static const pready_fn mark_ready[NPREADY] = {
    [PREADY_SINGLE] = pready_each, [PREADY_RANGE] = pready_range, [PREADY_LIST] = pready_list};

static void sender_mark_ready(part_state *st, int tid, double ready_at)
{
    int per_thread = st->nparts_send / st->threads;
    int lo = tid * per_thread; /* this thread's block [lo, lo + per_thread) */
    mark_ready[st->pready_mode](st, lo, lo + per_thread, ready_at);
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

/* A baseline phase (single send, persistent, or the single send with a polling receiver), from
 * the barrier. Stores (sender) its join or (receiver) its t_recv, local, in t_baseline; the
 * single send's time inside the send / receive on this rank scales the hang bounds of the
 * partitioned phase (grace_s). */
static void phase_baseline(hmb_ctx *ctx, void *state, int phase, long iter, double *times)
{
    (void)times;
    part_state *st = state;
    const int persistent = phase == PHASE_PERSISTENT, polled = phase == PHASE_POLLED;
    const int count = (int)(st->size_bytes / 8), tag = polled ? TAG_POLLED : TAG_SINGLE;
    double t = 0.0, comm_s = 0.0;
    if (st->rank == SENDER) {
        /* t_join_ss, or the persistent or polled phase's join */
        t = sender_compute(ctx, st, iter, 0);
        hmb_phase(ctx, persistent ? "persistent send" : polled ? "single send (receiver polling)" : "single send");
        if (persistent) {
            MPI_Start(&st->persist_req);
            complete_send(st, &st->persist_req);
        } else if (st->complete_wait) { /* the single and the polled phases send alike */
            MPI_Send(st->send_buf, count, MPI_UINT64_T, RECEIVER, tag, st->data_comm);
        } else {
            MPI_Request req;
            MPI_Isend(st->send_buf, count, MPI_UINT64_T, RECEIVER, tag, st->data_comm, &req);
            complete_send(st, &req);
        }
        comm_s = hmb_now() - t;
    } else if (st->rank == RECEIVER) {
        double t_posted = hmb_now();
        if (persistent) {
            hmb_phase(ctx, "persistent receiver MPI_Wait");
            MPI_Wait(&st->persist_req, MPI_STATUS_IGNORE);
        } else if (polled) {
            /* posted where the single send's receiver calls MPI_Recv; t_recv at the first
             * MPI_Test success, as the partitioned receiver takes a_j at MPI_Parrived's */
            hmb_phase(ctx, "polled-receive MPI_Test");
            MPI_Request req;
            MPI_Irecv(st->recv_buf_polled, count, MPI_UINT64_T, SENDER, TAG_POLLED, st->data_comm, &req);
            for (int done = 0; !done;)
                MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        } else {
            hmb_phase(ctx, "single-send MPI_Recv");
            MPI_Recv(st->recv_buf_single, count, MPI_UINT64_T, SENDER, TAG_SINGLE, st->data_comm, MPI_STATUS_IGNORE);
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
    [PHASE_SINGLE] = {.name = "single send", .iterate = phase_baseline, .flags = HMB_MODE_HIDDEN},
    [PHASE_PERSISTENT] = {.name = "persistent", .setup = persistent_setup, .iterate = phase_baseline,
                          .flags = HMB_MODE_HIDDEN},
    [PHASE_PARTITIONED] = {.name = "partitioned", .setup = partitioned_setup, .iterate = phase_partitioned,
                           .flags = HMB_MODE_HIDDEN},
    [PHASE_POLLED] = {.name = "polled receive", .iterate = phase_baseline, .flags = HMB_MODE_HIDDEN},
};
/* The phases an iteration runs: the single send and the partitioned request always, the
 * persistent and the polled baselines unless left out (--no-persistent, --no-polled). */
static int run_phases(const part_state *st, int *phases)
{
    int n = 0;
    phases[n++] = PHASE_SINGLE;
    if (st->persistent)
        phases[n++] = PHASE_PERSISTENT;
    phases[n++] = PHASE_PARTITIONED;
    if (st->polled)
        phases[n++] = PHASE_POLLED;
    return n;
}

/* The paired design runs on the harness's driver (hmb_modes_run: counterbalanced orders, barrier
 * before each phase). Order 0 runs the single send first: the never-reported grace comes from
 * the latest single-send time. The metrics come from the two ranks' timestamps, not the
 * driver's barrier-to-end times. */
static int part_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    part_state *st = state;
    st->pt = pt;
    hmb_mode_results r;
    int phases[NPHASES];
    hmb_modes_run(ctx, st, phases, run_phases(st, phases), iter, &r);
    const double *t_baseline = st->t_baseline;

    /* Untimed: the receiver's timestamps to rank 0 (this also keeps the sender from
     * refilling its buffer before the receiver has everything). */
    hmb_phase(ctx, "timestamp exchange");
    const int ntimes = st->nparts_recv + TIMES_ARRIVED;
    if (st->rank == RECEIVER) {
        st->times_msg[TIMES_RECV_SINGLE] = hmb_to_global(ctx, t_baseline[PHASE_SINGLE]);
        st->times_msg[TIMES_RECV_PERSIST] = st->persistent ? hmb_to_global(ctx, t_baseline[PHASE_PERSISTENT]) : NAN;
        st->times_msg[TIMES_RECV_POLLED] = st->polled ? hmb_to_global(ctx, t_baseline[PHASE_POLLED]) : NAN;
        for (int j = 0; j < st->nparts_recv; j++)
            st->times_msg[TIMES_ARRIVED + j] = hmb_to_global(ctx, st->arrived[j]);
        MPI_Send(st->times_msg, ntimes, MPI_DOUBLE, SENDER, TAG_TIMES, st->ctl_comm);
        return 0;
    }
    if (st->rank != SENDER)
        return 0;
    MPI_Recv(st->times_msg, ntimes, MPI_DOUBLE, RECEIVER, TAG_TIMES, st->ctl_comm, MPI_STATUS_IGNORE);

    double t_pt2pt = st->times_msg[TIMES_RECV_SINGLE] - hmb_to_global(ctx, t_baseline[PHASE_SINGLE]);
    double t_persist = st->persistent ? st->times_msg[TIMES_RECV_PERSIST] - hmb_to_global(ctx, t_baseline[PHASE_PERSISTENT])
                                      : NAN;
    double t_polled = st->polled ? st->times_msg[TIMES_RECV_POLLED] - hmb_to_global(ctx, t_baseline[PHASE_POLLED])
                                 : NAN;
    double t_join = -INFINITY;
    for (int t = 0; t < st->threads; t++)
        t_join = fmax(t_join, hmb_to_global(ctx, st->compute_end[t]));
    pair_pieces(ctx, st);
    hmb_part_metrics m;
    int rc = hmb_part_metrics_compute(st->npieces, st->piece_ready, st->piece_arrived, t_join, t_pt2pt, t_persist, t_polled,
                                      st->size_bytes, &m);
    out->valid = rc == 0;
    if (rc == 1 && iter >= hmb_common(ctx)->warmup) /* counted where the harness counts invalid samples */
        st->no_perceived_bw++;
    hmb_record(ctx, out, "overhead", m.overhead);
    hmb_record(ctx, out, "overhead_persistent", m.overhead_persistent);
    hmb_record(ctx, out, "overhead_polled", m.overhead_polled);
    hmb_record(ctx, out, "t_part_us", m.t_part_s * 1e6);
    hmb_record(ctx, out, "t_pt2pt_us", m.t_pt2pt_s * 1e6);
    hmb_record(ctx, out, "t_persist_us", m.t_persist_s * 1e6);
    hmb_record(ctx, out, "t_pt2pt_polled_us", m.t_polled_s * 1e6);
    hmb_record(ctx, out, "polled_over_blocking", m.polled_over_blocking);
    hmb_record(ctx, out, "perceived_bw_MBps", m.perceived_bw_Bps * 1e-6);
    hmb_record(ctx, out, "availability", m.availability);
    hmb_record(ctx, out, "early_bird", m.early_bird);
    hmb_record(ctx, out, "t_after_join_us", m.t_after_join_s * 1e6);
    return 0;
}

#endif /* HMB_HAVE_PARTITIONED */

static void part_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    const part_state *st = state;
    if (st->no_perceived_bw > 0) {
        hmb_result_add_num(ctx, "invalid_no_perceived_bw", (double)st->no_perceived_bw);
        hmb_result_add_str(ctx, "invalid_reason", "the piece made ready last was reported arrived at or before its "
                                                  "ready time (a_L - s_L <= 0): no perceived bandwidth; a clock problem");
    }
    const part_point *pp = HMB_POINT(part_point, pt);
    hmb_result_add_num(ctx, "partitions_send", (double)pp->partitions);
    hmb_result_add_num(ctx, "partitions_recv", (double)pp->recv_partitions);
    hmb_result_add_str(ctx, "pready", part_pready_names[st->pready_mode]);
    hmb_result_add_str(ctx, "observe", st->observe_poller ? "poller" : "thread");
    hmb_result_add_num(ctx, "threads", hmb_threads(ctx));
    hmb_result_add_num(ctx, "compute_ns", (double)hmb_common(ctx)->compute);
    hmb_result_add_str(ctx, "noise", hmb_common(ctx)->noise);
    int wait = pp->complete == COMPLETE_WAIT;
    hmb_result_add_str(ctx, "single_send", wait ? "MPI_Send / MPI_Recv of the whole message"
                                                : "MPI_Isend + MPI_Test polling / MPI_Recv of the whole message");
    hmb_result_add_str(ctx, "polled_receive", !st->polled ? "not run (--no-polled)"
                                              : wait ? "MPI_Send / MPI_Irecv + MPI_Test polling of the whole message"
                                                     : "MPI_Isend + MPI_Test polling / MPI_Irecv + MPI_Test polling of "
                                                       "the whole message");
    hmb_result_add_str(ctx, "persistent", !st->persistent ? "not run (--no-persistent)"
                                          : wait ? "MPI_Send_init + MPI_Wait / MPI_Recv_init started before the barrier"
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
    .summary = "partitioned point-to-point vs single (blocking or polled receive) and persistent send: overhead, "
               "perceived bandwidth, availability, early bird",
    HMB_BENCH_PARAMS(part_point),
    HMB_BENCH_OPTIONS(part_opts),
    .defaults = (const hmb_default[]){{"sizes", "4K:4M:x4"}, {"compute", "1ms"}, {NULL, NULL}},
    .no_mock = "rank 0 sends and rank 1 receives, each timing its own side (the sender's ready times against the "
               "receiver's arrivals): one rank alone has no receiver to time",
    .modes = part_modes,
    .metrics = part_metrics,
    .thread_level = MPI_THREAD_MULTIPLE,
    .min_ranks = 2,
    .rank_multiple = 0,
    .check = part_check,
    .points = part_points,
    .setup = part_setup,
    .iterate = PART_ITERATE,
    .verify = NULL, /* the harness checks the registered buffers (verify.c) */
    .teardown = part_teardown,
    .annotate = part_annotate,
    .pivot_metrics = "overhead,overhead_persistent,overhead_polled,availability,early_bird",
};
HMB_REGISTER(part_bench);
