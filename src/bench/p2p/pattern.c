/* p2p — the baselines: ping-pong latency, windowed uni-/bi-directional bandwidth and
 * multi-pair message rate (osu_latency / osu_bw / osu_bibw / osu_mbw_mr, with one sample per
 * iteration: a window, or a batch of back-to-back round trips for short latencies). Every timed
 * region starts at a zero-byte "ready" message from the receiver (a barrier for msgrate), so the
 * previous iteration's validation never leaks into the timing: latency and --post ahead send it
 * after posting the first receive(s); --post racing (bw, msgrate, the default) before posting
 * the window, as osu_bw's receiver posts after its ack. The timed region is the communication
 * only. Slots, batches, the posting and the send data regime (--data): docs/methodology.md,
 * "Point-to-point baselines". */
#include <math.h>

#include "p2p.h"

/* Each message's send data for iteration iter, chosen outside the timed region: message j
 * sends slot j % slots of set iter & 1 (the test-only faults send the other set, or give the
 * last message the next slot's data). */
static void pick_send_data(hmb_ctx *ctx, p2p_state *st, long iter)
{
    if (!st->send_sets)
        return;
    long set = iter == st->stale_at && st->is_sender ? (iter + 1) & 1 : iter & 1;
    if (st->nsets == 1)
        set = 0;
    else if (set != (iter & 1))
        hmb_inject_fired(ctx, HMB_INJECT_STALE);
    for (int j = 0; j < st->count; j++) {
        int slot = j % st->slots;
        if (iter == st->wrong_slot_at && st->is_sender && j == st->count - 1 && st->slots > 1) {
            slot = (slot + 1) % st->slots;
            hmb_inject_fired(ctx, HMB_INJECT_WRONG_SLOT);
        }
        st->send_msg[j] = st->send_sets + ((size_t)set * st->slots + (size_t)slot) * st->size;
    }
}

/* ------------------------------------------------------------------ the modes' exchanges */

/* One timed exchange of a mode: its messages from send[] into recv[] (n of size bytes each), the
 * timed region's start and end on this rank's clock (0 where this rank times nothing). */
typedef void (*exchange_fn)(hmb_ctx *ctx, p2p_state *st, long iter, double *t_start_s, double *t_end_s);

/* latency: a batch of n back-to-back round trips, each into its own slot. */
static void ping_pong(hmb_ctx *ctx, p2p_state *st, long iter, double *t_start_s, double *t_end_s)
{
    (void)iter;
    MPI_Comm comm = hmb_comm(ctx);
    const int n = st->count, size = (int)st->size;
    unsigned char *const *send = st->send_msg, *const *recv = st->recv_msg;
    if (st->rewarm) {
        hmb_phase(ctx, "latency: rewarm after the check");
        for (int j = 0; j < n; j++)
            if (st->is_sender) {
                MPI_Send(send[j], size, MPI_BYTE, st->peer, TAG_REWARM, comm);
                MPI_Recv(recv[j], size, MPI_BYTE, st->peer, TAG_REWARM, comm, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(recv[j], size, MPI_BYTE, st->peer, TAG_REWARM, comm, MPI_STATUS_IGNORE);
                MPI_Send(send[j], size, MPI_BYTE, st->peer, TAG_REWARM, comm);
            }
        for (int k = 0; k < st->slots; k++)
            hmb_poison_pages(st->recv_slots + (size_t)k * st->size, st->size);
    }
    if (st->is_sender) {
        hmb_phase(ctx, "latency: wait for ready");
        MPI_Recv(NULL, 0, MPI_BYTE, st->peer, TAG_READY, comm, MPI_STATUS_IGNORE);
        hmb_phase(ctx, "latency: ping-pong");
        *t_start_s = hmb_now();
        for (int j = 0; j < n; j++) {
            MPI_Send(send[j], size, MPI_BYTE, st->peer, TAG_DATA, comm);
            MPI_Recv(recv[j], size, MPI_BYTE, st->peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
        }
        *t_end_s = hmb_now();
    } else {
        hmb_phase(ctx, "latency: pong");
        MPI_Irecv(recv[0], size, MPI_BYTE, st->peer, TAG_DATA, comm, &st->reqs[0]);
        MPI_Send(NULL, 0, MPI_BYTE, st->peer, TAG_READY, comm);
        MPI_Wait(&st->reqs[0], MPI_STATUS_IGNORE);
        MPI_Send(send[0], size, MPI_BYTE, st->peer, TAG_DATA, comm);
        for (int j = 1; j < n; j++) {
            MPI_Recv(recv[j], size, MPI_BYTE, st->peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
            MPI_Send(send[j], size, MPI_BYTE, st->peer, TAG_DATA, comm);
        }
    }
}

/* bw, msgrate: the signal that starts a window's timed region: a zero-byte ready message to the
 * sender, or a barrier where every pair starts together (the mode's row: all_pairs). */
static void start_signal(hmb_ctx *ctx, const p2p_state *st)
{
    MPI_Comm comm = hmb_comm(ctx);
    if (st->def->all_pairs) {
        hmb_phase(ctx, "msgrate: barrier");
        MPI_Barrier(comm);
    } else if (st->is_sender) {
        hmb_phase(ctx, "bw: wait for ready");
        MPI_Recv(NULL, 0, MPI_BYTE, st->peer, TAG_READY, comm, MPI_STATUS_IGNORE);
    } else {
        MPI_Send(NULL, 0, MPI_BYTE, st->peer, TAG_READY, comm);
    }
}

/* bw, msgrate: one way, a window of n messages and an ack. The start signal comes after the
 * receiver posted the window (--post ahead), or before it posts (--post racing: the sender's first
 * messages race the receiver's posting, as after osu_bw's and osu_mbw_mr's ack). */
static void window_one_way(hmb_ctx *ctx, p2p_state *st, long iter, double *t_start_s, double *t_end_s)
{
    (void)iter;
    MPI_Comm comm = hmb_comm(ctx);
    const int n = st->count, size = (int)st->size;
    unsigned char *const *send = st->send_msg, *const *recv = st->recv_msg;
    if (st->racing)
        start_signal(ctx, st);
    if (!st->is_sender) {
        hmb_phase(ctx, "window: receive");
        for (int j = 0; j < n; j++)
            MPI_Irecv(recv[j], size, MPI_BYTE, st->peer, TAG_DATA, comm, &st->reqs[j]);
    }
    if (!st->racing)
        start_signal(ctx, st);
    if (st->is_sender) {
        hmb_phase(ctx, "window: send");
        *t_start_s = hmb_now();
        for (int j = 0; j < n; j++)
            MPI_Isend(send[j], size, MPI_BYTE, st->peer, TAG_DATA, comm, &st->reqs[j]);
        MPI_Waitall(n, st->reqs, MPI_STATUSES_IGNORE);
        MPI_Recv(NULL, 0, MPI_BYTE, st->peer, TAG_ACK, comm, MPI_STATUS_IGNORE);
        *t_end_s = hmb_now();
    } else {
        MPI_Waitall(n, st->reqs, MPI_STATUSES_IGNORE);
        MPI_Send(NULL, 0, MPI_BYTE, st->peer, TAG_ACK, comm);
    }
}

/* bibw: both ways at once, a window each, then the ack. */
static void window_both_ways(hmb_ctx *ctx, p2p_state *st, long iter, double *t_start_s, double *t_end_s)
{
    (void)iter;
    MPI_Comm comm = hmb_comm(ctx);
    const int n = st->count, size = (int)st->size;
    unsigned char *const *send = st->send_msg, *const *recv = st->recv_msg;
    hmb_phase(ctx, "bibw: exchange windows");
    for (int j = 0; j < n; j++)
        MPI_Irecv(recv[j], size, MPI_BYTE, st->peer, TAG_DATA, comm, &st->reqs[n + j]);
    MPI_Sendrecv(NULL, 0, MPI_BYTE, st->peer, TAG_READY, NULL, 0, MPI_BYTE, st->peer, TAG_READY, comm,
                 MPI_STATUS_IGNORE);
    *t_start_s = hmb_now();
    for (int j = 0; j < n; j++)
        MPI_Isend(send[j], size, MPI_BYTE, st->peer, TAG_DATA, comm, &st->reqs[j]);
    MPI_Waitall(2 * n, st->reqs, MPI_STATUSES_IGNORE);
    if (st->is_sender)
        MPI_Recv(NULL, 0, MPI_BYTE, st->peer, TAG_ACK, comm, MPI_STATUS_IGNORE);
    else
        MPI_Send(NULL, 0, MPI_BYTE, st->peer, TAG_ACK, comm);
    *t_end_s = hmb_now();
}

/* The modes, in MODE_* order (their names: p2p_mode_names). */
static const p2p_mode_def p2p_modes[MODE_COUNT] = {
    [MODE_LATENCY] = {.exchange = ping_pong, .batched = 1, .both_ways = 1, .directions = 1},
    [MODE_BW] = {.exchange = window_one_way, .directions = 1, .rates = 1},
    [MODE_BIBW] = {.exchange = window_both_ways, .both_ways = 1, .directions = 2, .rates = 1},
    [MODE_MSGRATE] = {.exchange = window_one_way, .all_pairs = 1, .directions = 1, .rates = 1},
};

/* ------------------------------------------------------------------ one sample */

static int p2p_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    (void)pt;
    p2p_state *st = state;
    const p2p_mode_def *mode = st->def;
    if (!mode->all_pairs && st->peer < 0)
        return 0;
    pick_send_data(ctx, st, iter);
    double t_start_s = 0, t_end_s = 0;
    mode->exchange(ctx, st, iter, &t_start_s, &t_end_s);

    /* Messages and bytes of this iteration, over the span it took (rank 0's view, or with every
     * pair at once the first start to the last end over all senders in rank 0's time base). */
    double messages = (double)st->count * mode->directions;
    double span_s = t_end_s - t_start_s;
    if (mode->all_pairs) {
        double bounds[2] = {-HUGE_VAL, -HUGE_VAL};
        if (st->is_sender) {
            bounds[0] = -hmb_to_global(ctx, t_start_s);
            bounds[1] = hmb_to_global(ctx, t_end_s);
        }
        hmb_reduce_max(ctx, bounds, 2);
        span_s = bounds[1] + bounds[0];
        messages *= hmb_size(ctx) / 2;
    }
    if (mode->batched && st->is_sender) /* half a round trip, averaged over the batch */
        out->value[M_LATENCY] = span_s / (2.0 * st->count) * 1e6;
    out->value[M_ITER_TIME] = span_s * 1e6;
    if (mode->rates) {
        out->value[M_BANDWIDTH] = messages * (double)st->size / span_s / 1e6;
        out->value[M_RATE] = messages / span_s;
    }
    out->valid = span_s > 0;
    return 0;
}

static void p2p_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    const p2p_state *st = state;
    if (st->def->batched)
        hmb_result_add_num(ctx, "batch", st->count);
    hmb_result_add_num(ctx, "slots", st->slots);
}

/* OSU and IMB move the same send buffer every time: p2p measures that regime by default. */
static const hmb_default p2p_defaults[] = {{"data", "reuse"}, {NULL, NULL}};

/* --format osu: the columns the OSU micro-benchmarks print for each mode. */
static const hmb_osu_block p2p_osu[] = {
    {"mode", "latency", "p2p --mode latency (osu_latency layout)", "Latency (us)", "latency_us"},
    {"mode", "bw", "p2p --mode bw (osu_bw layout)", "Bandwidth (MB/s)", "bandwidth_MBps"},
    {"mode", "bibw", "p2p --mode bibw (osu_bibw layout)", "Bandwidth (MB/s)", "bandwidth_MBps"},
    {"mode", "msgrate", "p2p --mode msgrate (osu_mbw_mr layout)", "MB/s,Messages/s", "bandwidth_MBps,msg_rate"},
    {NULL, NULL, NULL, NULL, NULL}};

static const hmb_metric p2p_metrics[] = {
    {"latency_us", "us", "half the round trip of one ping-pong, averaged over the sample's batch (latency)", 0, 1},
    {"bandwidth_MBps", "MB/s", "bytes per second, 1 MB = 1e6 B (bw: one way; bibw: both ways; msgrate: all pairs)", 1, 1},
    {"msg_rate", "msg/s", "messages per second (bw, bibw, msgrate: all pairs)", 1, 1},
    {"iter_time_us", "us", "timed region of one sample (latency: the batch of round trips; else window + ack)", 0, 0},
    HMB_METRIC_END};

/* The set-up's callbacks (setup.c), handed the modes' table. */
static void p2p_check_cb(hmb_ctx *ctx) { p2p_check(ctx, p2p_modes); }
static void p2p_points_cb(hmb_ctx *ctx, hmb_point_list *out) { p2p_points(ctx, out, p2p_modes); }
static void *p2p_setup_cb(hmb_ctx *ctx, const hmb_point *pt) { return p2p_setup(ctx, pt, p2p_modes); }

static const hmb_bench p2p_bench = {
    .name = "p2p",
    .group = "baseline",
    .summary = "ping-pong latency, windowed uni/bi-directional bandwidth, multi-pair message rate",
    HMB_BENCH_PARAMS(p2p_point),
    HMB_BENCH_OPTIONS(p2p_opts),
    .no_mock = "a ping-pong's receiver waits for the ping before it answers, and a window's sender for the "
               "receiver's ready message: one rank cannot play both sides of a blocking exchange",
    .uses = HMB_OPTS_FORMAT,
    .defaults = p2p_defaults,
    .data_reuse = 1,
    .metrics = p2p_metrics,
    .thread_level = MPI_THREAD_SINGLE,
    .min_ranks = 2,
    .rank_multiple = 1,
    .check = p2p_check_cb,
    .points = p2p_points_cb,
    .setup = p2p_setup_cb,
    .prepare = p2p_prepare,
    .iterate = p2p_iterate,
    .verify = p2p_verify,
    .teardown = p2p_teardown,
    .annotate = p2p_annotate,
    .osu = p2p_osu,
};
HMB_REGISTER(p2p_bench);
