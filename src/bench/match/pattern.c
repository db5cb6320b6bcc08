/* match — multithreaded message matching (SPEC §3.6, seed 002): a real 9/27-process halo against
 * a 2-process low-cost emulation of what its centre rank sees.
 *
 * Patterns: 2d5/2d9 on a 3x3 grid, 3d7/3d27 on 3x3x3, open boundary (hmb_topo_build). Every
 * thread t exchanges one message of the point's size with thread t of every neighbour: per
 * direction d (message to dir[d].to, from dir[d].from) tag = d T + t on both sides. A thread posts
 * its receives, then its sends, then waits; --shuffle permutes each thread's direction order per
 * iteration, seeded by (--seed, the centre's grid rank, thread, iteration).
 *   real     every rank runs the pattern; the centre (coordinates 1,1[,1]) is measured.
 *   lowcost  2 ranks. Rank 0 runs the centre's code: same receives (count, tags, sizes, order,
 *            threads), only the source of every receive and destination of every send is rank 1.
 *            Rank 1 runs one thread per emulated neighbour thread (directions x T): thread (d, t)
 *            plays thread t of the neighbour at dir[d].from, receives the centre's message of
 *            direction d^1 (the one that neighbour would get) and sends direction d's message.
 * Tags are unique per (direction, thread), so (source, tag) picks one receive in both variants;
 * MPI_ANY_SOURCE would change what the centre posts. Effect on queues: docs/metrics.md, "match".
 * Data of the message of direction d, thread t in iteration i is hmb_fill(grid rank of the real
 * sender, tag, i): the low-cost centre checks exactly what the real one checks.
 * Queues (MPI_T, where the library has the variables) are read by the centre's main thread right
 * after it posted its own receives; counters of searches and matching time around the iteration. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "match.h"

static const hmb_metric match_metrics[] = {
    {.name = "t_iter_us", .unit = "us", .higher_is_better = 0, .in_table = 1, .is_signed = 0,
     .description = "centre: first post to last completion of one halo iteration"},
    {.name = "post_us_per_msg", .unit = "us/recv msg", .higher_is_better = 0, .in_table = 1, .is_signed = 0,
     .description = "centre: thread time in Irecv/Isend per received message (SPEC §3.6)"},
    {.name = "wait_us_per_msg", .unit = "us/recv msg", .higher_is_better = 0, .in_table = 1, .is_signed = 0,
     .description = "centre: thread time in Waitall per received message"},
    {.name = "posted_q", .unit = "items", .higher_is_better = 0, .in_table = 1, .is_signed = 0,
     .description = "centre: posted-receive queue length summed over peers (MPI_T), after its main thread posted "
                     "its receives"},
    {.name = "posted_q_peer_max", .unit = "items", .higher_is_better = 0, .in_table = 0, .is_signed = 0,
     .description = "centre: longest per-peer posted-receive queue at that moment"},
    {.name = "unexpected_q", .unit = "items", .higher_is_better = 0, .in_table = 1, .is_signed = 0,
     .description = "centre: unexpected-message queue length summed over peers at that moment"},
    {.name = "unexpected_q_peer_max", .unit = "items", .higher_is_better = 0, .in_table = 0, .is_signed = 0,
     .description = "centre: longest per-peer unexpected queue at that moment"},
    {.name = "searched_per_msg", .unit = "items/recv msg", .higher_is_better = 0, .in_table = 1, .is_signed = 0,
     .description = "centre: queue items searched (match attempts, MPI_T counters) per received message"},
    {.name = "match_time_us_per_msg", .unit = "us/recv msg", .higher_is_better = 0, .in_table = 0, .is_signed = 0,
     .description = "centre: time spent matching (MPI_T timers) per received message"},
    HMB_METRIC_END};

/* Thread t's direction order in iteration iter: identity, or a Fisher-Yates shuffle seeded by
 * (--seed, grid rank, thread, iteration), the same on the real and the low-cost centre. */
static void posting_order(const match_state *st, int t, long iter, int *order, int shuffle)
{
    for (int d = 0; d < st->ndirs; d++)
        order[d] = d;
    if (!shuffle)
        return;
    uint64_t s = hmb_mix64((uint64_t)st->seed ^ hmb_mix64(((uint64_t)st->shuffle_rank << 32) ^ (uint64_t)t) ^
                           hmb_mix64((uint64_t)iter + 0x5bd1e995u));
    for (int i = st->ndirs - 1; i > 0; i--) {
        s = hmb_mix64(s);
        int j = (int)(s % (uint64_t)(i + 1)), tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
}

/* Main thread of the centre, between its receives and its sends: both queue lengths. */
static void sample_queues(match_state *st)
{
    int pvs[2][2] = {{PV_OB1_POSTED, PV_POSTED}, {PV_OB1_UNEXPECTED, PV_UNEXPECTED}};
    for (int k = 0; k < 2; k++) {
        st->q[2 * k] = st->q[2 * k + 1] = NAN;
        int i = hmb_pvars_available(st->pv, pvs[k][0]) ? pvs[k][0] : pvs[k][1];
        int n = hmb_pvars_read(st->pv, i, st->pv_values);
        if (n > 0)
            hmb_match_queue_depth(n, st->pv_values, &st->q[2 * k], &st->q[2 * k + 1]);
    }
}

/* One halo thread (real ranks, low-cost centre): receives, then sends, then wait. */
static void halo_thread(match_state *st, int t, long iter, int shuffle, int sample)
{
    int *order = st->order + (size_t)t * st->ndirs;
    MPI_Request *req = st->reqs + (size_t)t * 2 * st->ndirs;
    int scratch[2 * HMB_TOPO_MAX_DIRS], n = 0;
    int *log = iter == 0 ? st->tag_log + (size_t)t * 2 * st->ndirs : scratch; /* what iteration 0 posted */
    posting_order(st, t, iter, order, shuffle);
    st->paused[t] = 0.0;
    st->begin[t] = hmb_now();
    for (int k = 0; k < st->ndirs; k++) {
        int d = order[k];
        log[k] = st->recv_peer[d] == MPI_PROC_NULL ? -1 : match_tag(st, d, t);
        if (log[k] >= 0)
            MPI_Irecv(match_slot(st->rbuf, st, d, t), (int)st->bytes, MPI_BYTE, st->recv_peer[d], log[k], st->comm,
                      &req[n++]);
    }
    if (sample && t == 0) {
        double t0 = hmb_now();
        sample_queues(st);
        st->paused[t] = hmb_now() - t0;
    }
    for (int k = 0; k < st->ndirs; k++) {
        int d = order[k];
        log[st->ndirs + k] = st->send_peer[d] == MPI_PROC_NULL ? -1 : match_tag(st, d, t);
        if (log[st->ndirs + k] >= 0)
            MPI_Isend(match_slot(st->sbuf, st, d, t), (int)st->bytes, MPI_BYTE, st->send_peer[d], log[st->ndirs + k],
                      st->comm, &req[n++]);
    }
    st->posted[t] = hmb_now();
    MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
    st->done[t] = hmb_now();
}

/* Emulator thread k = (d, t): thread t of the neighbour at dir[d].from. It receives the centre's
 * message of direction d^1 (sent towards that neighbour) and sends the centre direction d's. */
static void emulator_thread(match_state *st, int k)
{
    int d = k / st->threads, t = k % st->threads, e = d ^ 1;
    MPI_Request *req = st->reqs + (size_t)k * 2;
    MPI_Irecv(match_slot(st->rbuf, st, e, t), (int)st->bytes, MPI_BYTE, 0, match_tag(st, e, t), st->comm, &req[0]);
    MPI_Isend(match_slot(st->sbuf, st, d, t), (int)st->bytes, MPI_BYTE, 0, match_tag(st, d, t), st->comm, &req[1]);
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
}

/* Sum of a cumulative pair of variables (counters or timers), NaN when either read fails. */
static double read_pair(match_state *st, int a, int b)
{
    double sum = 0.0;
    int ids[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        if (hmb_pvars_read(st->pv, ids[k], st->pv_values) < 1)
            return NAN;
        sum += st->pv_values[0];
    }
    return sum;
}

/* The centre's sample of one iteration: to rank 0's out, or shipped to rank 0 (with iteration 0's
 * posted tags) when the centre is another rank. */
static void centre_figures(hmb_ctx *ctx, match_state *st, long iter, int sample, double searched0, double time0,
                           hmb_sample *out)
{
    double v[NMETRICS];
    for (int m = 0; m < NMETRICS; m++)
        v[m] = NAN;
    int recvs = 0; /* every per-message figure divides by the received messages (SPEC §3.6) */
    for (int d = 0; d < st->ndirs; d++)
        recvs += st->recv_peer[d] != MPI_PROC_NULL;
    recvs *= st->threads;
    hmb_match_times times;
    hmb_match_times_compute(st->threads, st->begin, st->posted, st->done, st->paused, recvs, &times);
    v[M_T_ITER] = times.t_iter_s * 1e6;
    v[M_POST_PER_MSG] = times.post_per_msg_s * 1e6;
    v[M_WAIT_PER_MSG] = times.wait_per_msg_s * 1e6;
    if (sample) {
        v[M_POSTED_Q] = st->q[0];
        v[M_POSTED_Q_PEER_MAX] = st->q[1];
        v[M_UNEXPECTED_Q] = st->q[2];
        v[M_UNEXPECTED_Q_PEER_MAX] = st->q[3];
    }
    if (st->have_searched)
        v[M_SEARCHED_PER_MSG] = (read_pair(st, PV_POSTED_ATTEMPTS, PV_UNEXPECTED_ATTEMPTS) - searched0) / recvs;
    if (st->have_match_time)
        v[M_MATCH_TIME_PER_MSG] = (read_pair(st, PV_TIME_FAILED_POSTED, PV_TIME_UNEXPECTED) - time0) / recvs * 1e6;
    if (st->centre_rank != 0) {
        MPI_Send(v, NMETRICS, MPI_DOUBLE, 0, 0, st->ctl);
        if (iter == 0)
            MPI_Send(st->tag_log, st->threads * 2 * st->ndirs, MPI_INT, 0, 1, st->ctl);
    } else {
        for (int m = 0; m < NMETRICS; m++)
            hmb_record_at(ctx, out, m, v[m]);
    }
}

static int match_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    (void)pt;
    match_state *st = state;
    int shuffle = HMB_OPTS(match_opts, ctx)->shuffle;
    int sample = st->centre && st->pv && (st->have_posted_q || st->have_unexpected_q);
    double searched0 = NAN, time0 = NAN;
    hmb_phase(ctx, "barrier");
    MPI_Barrier(st->ctl);
    if (st->centre && st->have_searched)
        searched0 = read_pair(st, PV_POSTED_ATTEMPTS, PV_UNEXPECTED_ATTEMPTS);
    if (st->centre && st->have_match_time)
        time0 = read_pair(st, PV_TIME_FAILED_POSTED, PV_TIME_UNEXPECTED);
    hmb_phase(ctx, st->emulator ? "emulate neighbours" : "halo exchange");
#pragma omp parallel num_threads(st->nrun)
    {
        int t = omp_get_thread_num();
        if (st->emulator)
            emulator_thread(st, t);
        else
            halo_thread(st, t, iter, shuffle, sample);
    }
    if (st->centre)
        centre_figures(ctx, st, iter, sample, searched0, time0, out);
    if (hmb_rank(ctx) == 0 && st->centre_rank != 0) {
        hmb_phase(ctx, "centre's figures");
        double v[NMETRICS];
        MPI_Recv(v, NMETRICS, MPI_DOUBLE, st->centre_rank, 0, st->ctl, MPI_STATUS_IGNORE);
        for (int m = 0; m < NMETRICS; m++)
            hmb_record_at(ctx, out, m, v[m]);
        if (iter == 0)
            MPI_Recv(st->tag_log, st->threads * 2 * st->ndirs, MPI_INT, st->centre_rank, 1, st->ctl,
                     MPI_STATUS_IGNORE);
    }
    return 0;
}

/* "t0:3,1,...;t1:..." — one thread's tags in posting order, -1 (no neighbour) left out. */
static void tags_string(const match_state *st, int sends, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int t = 0; t < st->threads && at < len; t++) {
        at += (size_t)snprintf(buf + at, len - at, "%st%d:", t ? ";" : "", t);
        const int *log = st->tag_log + (size_t)t * 2 * st->ndirs + (sends ? st->ndirs : 0);
        int first = 1;
        for (int k = 0; k < st->ndirs && at < len; k++) {
            if (log[k] < 0)
                continue;
            at += (size_t)snprintf(buf + at, len - at, "%s%d", first ? "" : ",", log[k]);
            first = 0;
        }
    }
}

static void match_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    (void)pt;
    match_state *st = state;
    int recvs = 0, sends = 0;
    /* rank 0 of a real run is a corner: count the centre's links from the centre's topology */
    hmb_topo centre;
    hmb_topo_build(&centre, st->topo.ndims, match_patterns[st->pattern].neighbours, match_grid3, st->topo.size,
                   match_centre_grid_rank(&st->topo), NULL, 1, 0);
    for (int d = 0; d < st->ndirs; d++) {
        recvs += centre.dir[d].from != MPI_PROC_NULL;
        sends += centre.dir[d].to != MPI_PROC_NULL;
    }
    hmb_result_add_str(ctx, "topology_grid", st->topo.ndims == 2 ? "3x3" : "3x3x3");
    hmb_result_add_str(ctx, "topology_boundary", "open");
    hmb_result_add_num(ctx, "centre_rank", st->centre_rank);
    hmb_result_add_num(ctx, "centre_recvs_per_iter", recvs * st->threads);
    hmb_result_add_num(ctx, "centre_sends_per_iter", sends * st->threads);
    hmb_result_add_num(ctx, "centre_sources", st->variant == VARIANT_REAL ? recvs : 1);
    hmb_result_add_num(ctx, "emulator_threads", st->variant == VARIANT_LOWCOST ? st->ndirs * st->threads : 0);
    hmb_result_add_num(ctx, "oversubscribed_threads", st->oversubscribed);
    size_t len = (size_t)st->threads * 2 * (size_t)st->ndirs * 8 + 64;
    char *buf = malloc(len);
    if (buf) {
        tags_string(st, 0, buf, len);
        hmb_result_add_str(ctx, "centre_recv_tags_iter0", buf);
        tags_string(st, 1, buf, len);
        hmb_result_add_str(ctx, "centre_send_tags_iter0", buf);
        free(buf);
    }
    if (!st->pv) {
        hmb_result_add_str(ctx, "queue_depth", "not read (--no-pvars)");
        return;
    }
    hmb_pvars_record(ctx, st->pv, "pvar.");
    hmb_result_add_str(ctx, "queue_depth", st->have_posted_q ? "MPI_T" : "unavailable");
    hmb_result_add_str(ctx, "items_searched", st->have_searched ? "MPI_T" : "unavailable");
    hmb_result_add_str(ctx, "match_time", st->have_match_time ? "MPI_T" : "unavailable");
}

static const hmb_bench match_bench = {
    .name = "match",
    .group = "threads",
    .summary = "multithreaded message matching: real 9/27-rank halo vs 2-rank low-cost emulation (seed 002)",
    HMB_BENCH_PARAMS(match_point),
    HMB_BENCH_OPTIONS(match_opts),
    .defaults = (const hmb_default[]){{"sizes", "1K"}, {NULL, NULL}},
    .no_mock = "the centre's receives are matched against its neighbours' sends (or the emulator's): a rank "
               "alone would match only its own, which is not the queue the benchmark measures",
    .metrics = match_metrics,
    .thread_level = MPI_THREAD_MULTIPLE,
    .min_ranks = 2,
    .check = match_check,
    .points = match_points,
    .setup = match_setup,
    .prepare = match_prepare,
    .iterate = match_iterate,
    .verify = match_verify,
    .teardown = match_teardown,
    .annotate = match_annotate,
};
HMB_REGISTER(match_bench);
