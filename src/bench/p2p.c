/* p2p — the baselines: ping-pong latency, windowed uni-/bi-directional bandwidth and
 * multi-pair message rate (osu_latency / osu_bw / osu_bibw / osu_mbw_mr, with one sample per
 * iteration). Before every timed region the receiver pre-posts its receives and says so with a
 * zero-byte "ready" message (a barrier for msgrate), so the previous iteration's validation
 * never leaks into the timing; the timed region is the communication only. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hmb/hmb.h"

enum { MODE_LATENCY, MODE_BW, MODE_BIBW, MODE_MSGRATE, MODE_COUNT };
static const char *const mode_names[MODE_COUNT] = {"latency", "bw", "bibw", "msgrate"};

enum { TAG_DATA = 1, TAG_READY = 2, TAG_ACK = 3 };
enum { M_LATENCY, M_BANDWIDTH, M_RATE, M_ITER_TIME }; /* indices into p2p_metrics */

typedef struct {
    int mode;
    size_t size;
    int window;      /* messages in flight per iteration (1 for latency) */
    int peer;        /* -1: idle in this mode */
    int is_sender;   /* latency: the pinger (rank 0) */
    unsigned char *send_buf;
    unsigned char *recv_slots; /* window receive buffers, one per slot */
    MPI_Request *reqs;         /* 2 * window */
} p2p_state;

static void p2p_check(hmb_ctx *ctx)
{
    if ((hmb_opt_choices(ctx, "mode") & (1u << MODE_MSGRATE)) && hmb_size(ctx) % 2 != 0)
        hmb_usage_error(ctx, "--mode msgrate needs an even number of ranks (got %d); "
                             "choose --mode latency,bw,bibw or add a rank", hmb_size(ctx));
    int nsizes = 0;
    const size_t *sizes = hmb_opt_sizes(ctx, "sizes", &nsizes);
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] > INT_MAX)
            hmb_usage_error(ctx, "--sizes: %zu bytes is more than one MPI_BYTE count can hold", sizes[i]);
}

static void p2p_points(hmb_ctx *ctx, hmb_point_list *out)
{
    int nsizes = 0;
    const size_t *sizes = hmb_opt_sizes(ctx, "sizes", &nsizes);
    const unsigned long long modes = hmb_opt_choices(ctx, "mode");
    for (int m = 0; m < MODE_COUNT; m++) {
        if (!(modes & (1u << m)))
            continue;
        for (int i = 0; i < nsizes; i++) {
            hmb_point *pt = hmb_points_add(out, sizes[i]);
            hmb_point_set_str(pt, "mode", mode_names[m]);
            hmb_point_set_int(pt, "window", m == MODE_LATENCY ? 1 : hmb_opt_int(ctx, "window"));
            hmb_point_set_int(pt, "pairs", m == MODE_MSGRATE ? hmb_size(ctx) / 2 : 1);
        }
    }
}

static unsigned char *alloc_buffer(hmb_ctx *ctx, size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0)
        return NULL;
    memset(p, 0, bytes); /* fault the pages in now, not inside a timed region */
    hmb_cache_register(ctx, p, bytes);
    return p;
}

static void *p2p_setup(hmb_ctx *ctx, const hmb_point *pt)
{
    p2p_state *st = calloc(1, sizeof *st);
    const char *mode = hmb_point_str(pt, "mode");
    while (st->mode < MODE_COUNT && strcmp(mode_names[st->mode], mode) != 0)
        st->mode++;
    st->size = pt->size_bytes;
    st->window = (int)hmb_point_int(pt, "window");
    int rank = hmb_rank(ctx), half = hmb_size(ctx) / 2;
    if (st->mode == MODE_MSGRATE) {
        st->is_sender = rank < half;
        st->peer = st->is_sender ? rank + half : rank - half;
    } else {
        st->is_sender = rank == 0;
        st->peer = rank == 0 ? 1 : rank == 1 ? 0 : -1;
    }
    int sends = st->peer >= 0 && (st->is_sender || st->mode == MODE_LATENCY || st->mode == MODE_BIBW);
    int recvs = st->peer >= 0 && (!st->is_sender || st->mode == MODE_LATENCY || st->mode == MODE_BIBW);
    int ok = 1;
    if (sends)
        ok &= (st->send_buf = alloc_buffer(ctx, st->size)) != NULL;
    if (recvs)
        ok &= (st->recv_slots = alloc_buffer(ctx, st->size * (size_t)st->window)) != NULL;
    st->reqs = calloc(2 * (size_t)st->window, sizeof *st->reqs);
    if (!hmb_all_agree(ctx, ok && st->reqs))
        hmb_unsupported(ctx, "cannot allocate %d x %zu bytes of receive buffers", st->window, st->size);
    return st;
}

/* Send data of this iteration, written before the harness's cold-cache flush. */
static void p2p_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    p2p_state *st = state;
    if (st->send_buf)
        hmb_fill(st->send_buf, st->size, hmb_rank(ctx), 0, iter);
}

static int p2p_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    p2p_state *st = state;
    MPI_Comm comm = hmb_comm(ctx);
    const int rank = hmb_rank(ctx), w = st->window;
    const size_t size = st->size;
    if (iter == hmb_opt_int(ctx, "hang-at") && rank == 1) {
        hmb_phase(ctx, "hang-at (test: rank 1 stopped participating)");
        for (;;)
            sleep(1);
    }
    double t_start_s = 0, t_end_s = 0;

    switch (st->mode) {
    case MODE_LATENCY:
        if (st->peer < 0)
            return 0;
        if (st->is_sender) {
            hmb_phase(ctx, "latency: wait for ready");
            MPI_Recv(NULL, 0, MPI_BYTE, st->peer, TAG_READY, comm, MPI_STATUS_IGNORE);
            hmb_phase(ctx, "latency: ping-pong");
            t_start_s = hmb_now();
            MPI_Send(st->send_buf, (int)size, MPI_BYTE, st->peer, TAG_DATA, comm);
            MPI_Recv(st->recv_slots, (int)size, MPI_BYTE, st->peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
            t_end_s = hmb_now();
            out->value[M_LATENCY] = 0.5 * (t_end_s - t_start_s) * 1e6;
        } else {
            hmb_phase(ctx, "latency: pong");
            MPI_Irecv(st->recv_slots, (int)size, MPI_BYTE, st->peer, TAG_DATA, comm, &st->reqs[0]);
            MPI_Send(NULL, 0, MPI_BYTE, st->peer, TAG_READY, comm);
            MPI_Wait(&st->reqs[0], MPI_STATUS_IGNORE);
            MPI_Send(st->send_buf, (int)size, MPI_BYTE, st->peer, TAG_DATA, comm);
        }
        break;

    case MODE_BW:
    case MODE_MSGRATE:
        if (st->mode == MODE_BW && st->peer < 0)
            return 0;
        if (!st->is_sender) {
            hmb_phase(ctx, "window: receive");
            for (int k = 0; k < w; k++)
                MPI_Irecv(st->recv_slots + (size_t)k * size, (int)size, MPI_BYTE, st->peer, TAG_DATA, comm,
                          &st->reqs[k]);
        }
        if (st->mode == MODE_MSGRATE) {
            hmb_phase(ctx, "msgrate: barrier");
            MPI_Barrier(comm); /* all receives posted; all pairs start together */
        } else if (st->is_sender) {
            hmb_phase(ctx, "bw: wait for ready");
            MPI_Recv(NULL, 0, MPI_BYTE, st->peer, TAG_READY, comm, MPI_STATUS_IGNORE);
        } else {
            MPI_Send(NULL, 0, MPI_BYTE, st->peer, TAG_READY, comm);
        }
        if (st->is_sender) {
            hmb_phase(ctx, "window: send");
            t_start_s = hmb_now();
            for (int k = 0; k < w; k++)
                MPI_Isend(st->send_buf, (int)size, MPI_BYTE, st->peer, TAG_DATA, comm, &st->reqs[k]);
            MPI_Waitall(w, st->reqs, MPI_STATUSES_IGNORE);
            MPI_Recv(NULL, 0, MPI_BYTE, st->peer, TAG_ACK, comm, MPI_STATUS_IGNORE);
            t_end_s = hmb_now();
        } else {
            MPI_Waitall(w, st->reqs, MPI_STATUSES_IGNORE);
            MPI_Send(NULL, 0, MPI_BYTE, st->peer, TAG_ACK, comm);
        }
        break;

    case MODE_BIBW:
        if (st->peer < 0)
            return 0;
        hmb_phase(ctx, "bibw: exchange windows");
        for (int k = 0; k < w; k++)
            MPI_Irecv(st->recv_slots + (size_t)k * size, (int)size, MPI_BYTE, st->peer, TAG_DATA, comm,
                      &st->reqs[w + k]);
        MPI_Sendrecv(NULL, 0, MPI_BYTE, st->peer, TAG_READY, NULL, 0, MPI_BYTE, st->peer, TAG_READY, comm,
                     MPI_STATUS_IGNORE);
        t_start_s = hmb_now();
        for (int k = 0; k < w; k++)
            MPI_Isend(st->send_buf, (int)size, MPI_BYTE, st->peer, TAG_DATA, comm, &st->reqs[k]);
        MPI_Waitall(2 * w, st->reqs, MPI_STATUSES_IGNORE);
        if (st->is_sender)
            MPI_Recv(NULL, 0, MPI_BYTE, st->peer, TAG_ACK, comm, MPI_STATUS_IGNORE);
        else
            MPI_Send(NULL, 0, MPI_BYTE, st->peer, TAG_ACK, comm);
        t_end_s = hmb_now();
        break;
    }

    /* Messages and bytes of this iteration, over the span it took (rank 0's view, or for
     * msgrate the first start to the last end over all senders in rank 0's time base). */
    double messages = (double)w * (st->mode == MODE_BIBW ? 2 : 1);
    double span_s = t_end_s - t_start_s;
    if (st->mode == MODE_MSGRATE) {
        double bounds[2] = {-HUGE_VAL, -HUGE_VAL};
        if (st->is_sender) {
            bounds[0] = -hmb_to_global(ctx, t_start_s);
            bounds[1] = hmb_to_global(ctx, t_end_s);
        }
        hmb_reduce_max(ctx, bounds, 2);
        span_s = bounds[1] + bounds[0];
        messages *= hmb_size(ctx) / 2;
    }
    out->value[M_ITER_TIME] = span_s * 1e6;
    if (st->mode != MODE_LATENCY) {
        out->value[M_BANDWIDTH] = messages * (double)size / span_s / 1e6;
        out->value[M_RATE] = messages / span_s;
    }
    out->valid = span_s > 0;
    return 0;
}

static void p2p_verify(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    p2p_state *st = state;
    if (!st->recv_slots)
        return;
    int slots = st->mode == MODE_LATENCY ? 1 : st->window;
    for (int k = 0; k < slots; k++)
        hmb_check_buffer(ctx, pt, st->recv_slots + (size_t)k * st->size, st->size, st->peer, 0, iter);
}

static void p2p_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    p2p_state *st = state;
    free(st->send_buf);
    free(st->recv_slots);
    free(st->reqs);
    free(st);
}

static const hmb_option p2p_options[] = {
    {"mode", HMB_OPT_CHOICES, "all", "what to measure", 0, 0, "latency|bw|bibw|msgrate"},
    {"window", HMB_OPT_INT, "64", "messages in flight per iteration for bw, bibw, msgrate (osu: 64)", 1, 4096, NULL},
    {"hang-at", HMB_OPT_INT, "-1", "TEST ONLY: rank 1 stops participating at this iteration (watchdog test)", -1, 1e9,
     NULL},
    HMB_OPTION_END};

static const hmb_metric p2p_metrics[] = {
    {"latency_us", "us", "half the round trip of one ping-pong (latency)", 0, 1},
    {"bandwidth_MBps", "MB/s", "bytes per second, 1 MB = 1e6 B (bw: one way; bibw: both ways; msgrate: all pairs)", 1, 1},
    {"msg_rate", "msg/s", "messages per second (bw, bibw, msgrate: all pairs)", 1, 1},
    {"iter_time_us", "us", "timed region of one iteration (round trip, or window + ack)", 0, 0},
    HMB_METRIC_END};

static const hmb_bench p2p_bench = {
    .name = "p2p",
    .group = "baseline",
    .summary = "ping-pong latency, windowed uni/bi-directional bandwidth, multi-pair message rate",
    .options = p2p_options,
    .defaults = NULL,
    .metrics = p2p_metrics,
    .thread_level = MPI_THREAD_SINGLE,
    .min_ranks = 2,
    .rank_multiple = 1,
    .check = p2p_check,
    .points = p2p_points,
    .setup = p2p_setup,
    .prepare = p2p_prepare,
    .iterate = p2p_iterate,
    .verify = p2p_verify,
    .teardown = p2p_teardown,
    .annotate = NULL,
};
HMB_REGISTER(p2p_bench);
