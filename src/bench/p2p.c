/* p2p — the baselines: ping-pong latency, windowed uni-/bi-directional bandwidth and
 * multi-pair message rate (osu_latency / osu_bw / osu_bibw / osu_mbw_mr, with one sample per
 * iteration: a window, or a batch of back-to-back round trips for short latencies). Every timed
 * region starts at a zero-byte "ready" message from the receiver (a barrier for msgrate), so the
 * previous iteration's validation never leaks into the timing: latency and --post ahead send it
 * after posting the first receive(s); --post racing (bw, msgrate, the default) before posting
 * the window, as osu_bw's receiver posts after its ack. The timed region is the communication
 * only. Slots, batches, the posting and the send data regime (--data): docs/methodology.md,
 * "Point-to-point baselines". */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hmb/hmb.h"

enum { MODE_LATENCY, MODE_BW, MODE_BIBW, MODE_MSGRATE, MODE_COUNT };
static const char *const mode_names[MODE_COUNT] = {"latency", "bw", "bibw", "msgrate"};

enum { TAG_DATA = 1, TAG_READY = 2, TAG_ACK = 3, TAG_REWARM = 4 };
enum { M_LATENCY, M_BANDWIDTH, M_RATE, M_ITER_TIME }; /* indices into p2p_metrics */

/* Latency batching: a sample lasts at least BATCH_SAMPLE_NS (and 100 timer calls), so the
 * ~0.1 us the harness spends around a sample (ready handshake, phase marks, checks) stays
 * below 0.5% of it; at most BATCH_MAX round trips. */
#define BATCH_SAMPLE_NS 20000.0
#define BATCH_TIMER_CALLS 100.0
#define BATCH_MAX 256
#define BATCH_PROBE_ROUND_TRIPS 8
#define BATCH_PROBE_REPEATS 3
/* --cache hot: the receive slots of a window take at most this fraction of the LLC, and at most
 * WINDOW_HOT_MAX_BYTES (window_slots); latency rewarms a batch's slots after the check above
 * SLOTS_HOT_MAX_BYTES (p2p_setup). */
#define SLOTS_LLC_FRACTION 256
#define WINDOW_HOT_MAX_BYTES (16u << 10)
#define SLOTS_HOT_MAX_BYTES (128u << 10)

typedef struct {
    int mode;
    size_t size;
    int count;       /* messages per direction per iteration: window, or latency round trips (batch) */
    int slots;       /* distinct receive slots (and send patterns); message j uses slot j % slots */
    int peer;        /* -1: idle in this mode */
    int is_sender;   /* latency: the pinger (rank 0) */
    long stale_at, wrong_slot_at; /* test-only faults (-1: none) */
    int rewarm;      /* latency: one untimed round trip after the check, before the sample (see p2p_setup) */
    int racing;      /* bw, msgrate: --post racing (the start signal before the receives, as osu_bw's ack) */
    int nsets;                 /* send sets: 2 (generations, set iter & 1), or 1 (latency, --cache hot) */
    unsigned char *send_sets;  /* nsets sets of slots x size */
    unsigned char *recv_slots; /* slots x size */
    unsigned char **send_msg, **recv_msg; /* per message of this iteration: its send data, its slot */
    MPI_Request *reqs;         /* 2 * count */
} p2p_state;

static void p2p_check(hmb_ctx *ctx)
{
    if ((hmb_opt_choices(ctx, "mode") & (1u << MODE_MSGRATE)) && hmb_size(ctx) % 2 != 0)
        hmb_usage_error(ctx, "--mode msgrate needs an even number of ranks (got %d); "
                             "choose --mode latency,bw,bibw or add a rank", hmb_size(ctx));
    int nsizes = 0;
    const size_t *sizes = hmb_opt_sizes(ctx, "sizes", &nsizes);
    const long long batch = hmb_opt_int(ctx, "batch");
    for (int i = 0; i < nsizes; i++) {
        if (sizes[i] > INT_MAX)
            hmb_usage_error(ctx, "--sizes: %zu bytes is more than one MPI_BYTE count can hold", sizes[i]);
        if ((hmb_opt_choices(ctx, "mode") & (1u << MODE_LATENCY)) && (double)batch * (double)sizes[i] > (1u << 28))
            hmb_usage_error(ctx, "--batch %lld x %zu bytes: more than 256 MB of ping-pong slots; "
                                 "use a smaller --batch or 0 (auto)", batch, sizes[i]);
    }
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

/* Window slots: --cache cold gives every message its own slot (what a window of distinct
 * application buffers touches). --cache hot keeps the window near osu_bw's one reused buffer:
 * the receive slots take at most 1/SLOTS_LLC_FRACTION of the LLC and at most 16 KB (with the
 * sender's two generations that stays within a core's L1: 48 KB here), so slots are reused once
 * the window would exceed it; a message larger than that gets one slot. Slots in L2 already cost:
 * at 64 KB 8 slots were ~20% slower than one on Open MPI, and at 512 B-4 KB a 128 KB cap (64 and
 * 32 slots) read 0.88-0.90 of osu_bw's protocol on Open MPI where 16 KB read 0.93-0.99 (window
 * study, 3-6 launches each, 2026-11-27; MPICH 0.97-1.04 either way). The LLC share: a VM may
 * report its host's whole L3 (480 MB here), and 1/256 of it no longer fits any core's cache. The
 * same count on every rank (LLCs may differ between hosts): the smallest. */
static int window_slots(hmb_ctx *ctx, size_t size, int window)
{
    long long slots = window;
    if (strcmp(hmb_opt_str(ctx, "cache"), "hot") == 0 && size > 0) {
        size_t budget = hmb_cache_llc_bytes(ctx) / SLOTS_LLC_FRACTION;
        budget = budget < WINDOW_HOT_MAX_BYTES ? budget : WINDOW_HOT_MAX_BYTES;
        long long fit = (long long)(budget / size);
        slots = fit < 1 ? 1 : fit < window ? fit : window;
    }
    int mine = (int)slots, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, hmb_comm(ctx));
    return all;
}

/* Round trips per latency sample: --batch, or enough that a sample spans BATCH_SAMPLE_NS and
 * BATCH_TIMER_CALLS timer calls, from the fastest of a few back-to-back probes (rank 0
 * decides; the untimed probe data are not part of any sample). */
static int latency_batch(hmb_ctx *ctx, const p2p_state *st)
{
    int batch = (int)hmb_opt_int(ctx, "batch");
    if (batch > 0)
        return batch;
    MPI_Comm comm = hmb_comm(ctx);
    unsigned char *buf = NULL;
    if (st->peer >= 0 && !(buf = calloc(st->size ? st->size : 1, 1)))
        abort();
    double best_rtt_s = HUGE_VAL;
    hmb_phase(ctx, "latency: batch probe");
    for (int rep = 0; rep <= BATCH_PROBE_REPEATS && st->peer >= 0; rep++) {
        int trips = rep == 0 ? 1 : BATCH_PROBE_ROUND_TRIPS; /* rep 0: warm-up */
        double t_start_s = hmb_now();
        for (int k = 0; k < trips; k++) {
            if (st->is_sender) {
                MPI_Send(buf, (int)st->size, MPI_BYTE, st->peer, TAG_DATA, comm);
                MPI_Recv(buf, (int)st->size, MPI_BYTE, st->peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, (int)st->size, MPI_BYTE, st->peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)st->size, MPI_BYTE, st->peer, TAG_DATA, comm);
            }
        }
        double rtt_s = (hmb_now() - t_start_s) / trips;
        if (rep > 0 && rtt_s < best_rtt_s)
            best_rtt_s = rtt_s;
    }
    free(buf);
    if (hmb_rank(ctx) == 0) {
        double sample_ns = fmax(BATCH_SAMPLE_NS, BATCH_TIMER_CALLS * hmb_timer_overhead_ns(ctx));
        double want = ceil(sample_ns / (best_rtt_s * 1e9));
        batch = want < 1 ? 1 : want > BATCH_MAX ? BATCH_MAX : (int)want;
    }
    MPI_Bcast(&batch, 1, MPI_INT, 0, comm);
    return batch;
}

static void *p2p_setup(hmb_ctx *ctx, const hmb_point *pt)
{
    p2p_state *st = calloc(1, sizeof *st);
    const char *mode = hmb_point_str(pt, "mode");
    while (st->mode < MODE_COUNT && strcmp(mode_names[st->mode], mode) != 0)
        st->mode++;
    st->size = pt->size_bytes;
    int rank = hmb_rank(ctx), half = hmb_size(ctx) / 2;
    if (st->mode == MODE_MSGRATE) {
        st->is_sender = rank < half;
        st->peer = st->is_sender ? rank + half : rank - half;
    } else {
        st->is_sender = rank == 0;
        st->peer = rank == 0 ? 1 : rank == 1 ? 0 : -1;
    }
    st->stale_at = hmb_opt_int(ctx, "stale-at");
    st->racing = strcmp(hmb_opt_str(ctx, "post"), "racing") == 0;
    st->wrong_slot_at = hmb_opt_int(ctx, "wrong-slot-at");
    if (st->mode == MODE_LATENCY) {
        st->count = latency_batch(ctx, st);
        st->slots = st->count; /* a batch is small: every round trip its own slot */
    } else {
        st->count = (int)hmb_point_int(pt, "window");
        st->slots = window_slots(ctx, st->size, st->count);
    }
    /* Latency under --cache hot measures what osu_latency measures: one send buffer per side,
     * written once per point (--data reuse) and never again, and the receive slots. A second
     * send set (generations by parity) adds m bytes per side to the working set (at 1 MB: 3 MB
     * against a 2 MB L2: 1.32x slower on MPICH, alternating launches); rewriting the one set
     * before every sample leaves its lines dirty in the sender's cache (2.1x at 64 KB, 1.2x at
     * 1 MB). Stale data are caught instead by poisoning the receive slots before every sample
     * (the receiver's own writes, as its previous receive left them). */
    st->nsets = st->mode == MODE_LATENCY && strcmp(hmb_opt_str(ctx, "cache"), "hot") == 0 ? 1 : 2;
    /* The check reads every received byte after the sample; above the hot-slot cap that read
     * displaces what the library's own copy left in this core's caches, and the next sample paid
     * for it (MPICH 4 MB: +18 %, 491 against 411 us; osu_latency -c does 5 untimed round trips
     * before each timed one for the same reason). So under --cache hot with validation on, one
     * untimed round trip of the batch's slots restores the state the library leaves, the receive
     * slots are poisoned again (hmb_poison_pages: not dirtying them), then the sample is timed. */
    st->rewarm = st->mode == MODE_LATENCY && st->nsets == 1 && hmb_validate_enabled(ctx) &&
                 st->size * (size_t)st->slots > SLOTS_HOT_MAX_BYTES;
    int sends = st->peer >= 0 && (st->is_sender || st->mode == MODE_LATENCY || st->mode == MODE_BIBW);
    int recvs = st->peer >= 0 && (!st->is_sender || st->mode == MODE_LATENCY || st->mode == MODE_BIBW);
    const size_t slots_bytes = st->size * (size_t)st->slots;
    int ok = 1;
    if (sends)
        ok &= (st->send_sets = hmb_buffer_alloc(ctx, (size_t)st->nsets * slots_bytes)) != NULL;
    if (recvs)
        ok &= (st->recv_slots = hmb_buffer_alloc(ctx, slots_bytes)) != NULL;
    st->send_msg = calloc((size_t)st->count, sizeof *st->send_msg);
    st->recv_msg = calloc((size_t)st->count, sizeof *st->recv_msg);
    st->reqs = calloc(2 * (size_t)st->count, sizeof *st->reqs);
    ok &= st->send_msg && st->recv_msg && st->reqs;
    if (!hmb_all_agree(ctx, ok))
        hmb_unsupported(ctx, "cannot allocate %d x %zu bytes of message slots", st->slots, st->size);
    else if (st->recv_slots)
        for (int j = 0; j < st->count; j++)
            st->recv_msg[j] = st->recv_slots + (size_t)(j % st->slots) * st->size;
    return st;
}

/* The generation iteration iter's messages carry with one send set: 0 under --data reuse
 * (written once), iter under --data fresh (written before every sample). */
static long one_set_gen(const hmb_ctx *ctx, long iter)
{
    return strcmp(hmb_opt_str(ctx, "data"), "reuse") == 0 ? 0 : iter;
}

/* One send set: (re)write it when its generation changes (the test-only --stale-at fault sends
 * another generation in that iteration and restores it in the next), poison the receive slots. */
static void one_set_prepare(hmb_ctx *ctx, p2p_state *st, long iter)
{
    if (st->send_sets) {
        const int stale = iter == st->stale_at && st->is_sender;
        const long gen = stale ? one_set_gen(ctx, iter) ^ 1 : one_set_gen(ctx, iter);
        if (iter == 0 || stale || iter == st->stale_at + 1 || gen != one_set_gen(ctx, iter - 1))
            for (int k = 0; k < st->slots; k++)
                hmb_fill(st->send_sets + (size_t)k * st->size, st->size, hmb_rank(ctx), k, gen);
    }
    if (st->recv_slots && hmb_validate_enabled(ctx))
        for (int k = 0; k < st->slots; k++)
            hmb_poison_pages(st->recv_slots + (size_t)k * st->size, st->size);
}

/* Send data: slot k of a set holds the pattern (rank, k, generation). Written before the
 * harness's cold-cache flush, and under --data reuse only in a point's first two iterations
 * (one set: one_set_prepare). */
static void p2p_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    p2p_state *st = state;
    if (st->nsets == 1) {
        one_set_prepare(ctx, st, iter);
        return;
    }
    if (!st->send_sets || !hmb_data_refill(ctx, iter))
        return;
    unsigned char *set = st->send_sets + (size_t)(iter & 1) * st->size * (size_t)st->slots;
    for (int k = 0; k < st->slots; k++)
        hmb_fill(set + (size_t)k * st->size, st->size, hmb_rank(ctx), k, hmb_data_gen(ctx, iter));
}

/* Each message's send data for iteration iter, chosen outside the timed region: message j
 * sends slot j % slots of set iter & 1 (the test-only faults send the other set, or give the
 * last message the next slot's data). */
static void pick_send_data(p2p_state *st, long iter)
{
    if (!st->send_sets)
        return;
    long set = iter == st->stale_at && st->is_sender ? (iter + 1) & 1 : iter & 1;
    if (st->nsets == 1)
        set = 0;
    for (int j = 0; j < st->count; j++) {
        int slot = j % st->slots;
        if (iter == st->wrong_slot_at && st->is_sender && j == st->count - 1)
            slot = (slot + 1) % st->slots;
        st->send_msg[j] = st->send_sets + ((size_t)set * st->slots + (size_t)slot) * st->size;
    }
}

/* bw, msgrate: the signal that starts a window's timed region (see MODE_BW in p2p_iterate). */
static void start_signal(hmb_ctx *ctx, const p2p_state *st)
{
    MPI_Comm comm = hmb_comm(ctx);
    if (st->mode == MODE_MSGRATE) {
        hmb_phase(ctx, "msgrate: barrier");
        MPI_Barrier(comm);
    } else if (st->is_sender) {
        hmb_phase(ctx, "bw: wait for ready");
        MPI_Recv(NULL, 0, MPI_BYTE, st->peer, TAG_READY, comm, MPI_STATUS_IGNORE);
    } else {
        MPI_Send(NULL, 0, MPI_BYTE, st->peer, TAG_READY, comm);
    }
}

static int p2p_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    p2p_state *st = state;
    MPI_Comm comm = hmb_comm(ctx);
    const int rank = hmb_rank(ctx), n = st->count, size = (int)st->size;
    if (iter == hmb_opt_int(ctx, "hang-at") && rank == 1) {
        hmb_phase(ctx, "hang-at (test: rank 1 stopped participating)");
        for (;;)
            sleep(1);
    }
    if (st->mode != MODE_MSGRATE && st->peer < 0)
        return 0;
    pick_send_data(st, iter);
    unsigned char *const *send = st->send_msg, *const *recv = st->recv_msg;
    double t_start_s = 0, t_end_s = 0;

    switch (st->mode) {
    case MODE_LATENCY: /* a batch of n back-to-back round trips, each into its own slot */
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
            t_start_s = hmb_now();
            for (int j = 0; j < n; j++) {
                MPI_Send(send[j], size, MPI_BYTE, st->peer, TAG_DATA, comm);
                MPI_Recv(recv[j], size, MPI_BYTE, st->peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
            }
            t_end_s = hmb_now();
            out->value[M_LATENCY] = (t_end_s - t_start_s) / (2.0 * n) * 1e6;
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
        break;

    case MODE_BW:
    case MODE_MSGRATE:
        /* The start signal (bw: a zero-byte ready message to the sender; msgrate: a barrier, all
         * pairs start together) after the receiver posted the window (--post ahead), or before
         * it posts (--post racing: the sender's first messages race the receiver's posting, as
         * after osu_bw's and osu_mbw_mr's ack) */
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
            t_start_s = hmb_now();
            for (int j = 0; j < n; j++)
                MPI_Isend(send[j], size, MPI_BYTE, st->peer, TAG_DATA, comm, &st->reqs[j]);
            MPI_Waitall(n, st->reqs, MPI_STATUSES_IGNORE);
            MPI_Recv(NULL, 0, MPI_BYTE, st->peer, TAG_ACK, comm, MPI_STATUS_IGNORE);
            t_end_s = hmb_now();
        } else {
            MPI_Waitall(n, st->reqs, MPI_STATUSES_IGNORE);
            MPI_Send(NULL, 0, MPI_BYTE, st->peer, TAG_ACK, comm);
        }
        break;

    case MODE_BIBW:
        hmb_phase(ctx, "bibw: exchange windows");
        for (int j = 0; j < n; j++)
            MPI_Irecv(recv[j], size, MPI_BYTE, st->peer, TAG_DATA, comm, &st->reqs[n + j]);
        MPI_Sendrecv(NULL, 0, MPI_BYTE, st->peer, TAG_READY, NULL, 0, MPI_BYTE, st->peer, TAG_READY, comm,
                     MPI_STATUS_IGNORE);
        t_start_s = hmb_now();
        for (int j = 0; j < n; j++)
            MPI_Isend(send[j], size, MPI_BYTE, st->peer, TAG_DATA, comm, &st->reqs[j]);
        MPI_Waitall(2 * n, st->reqs, MPI_STATUSES_IGNORE);
        if (st->is_sender)
            MPI_Recv(NULL, 0, MPI_BYTE, st->peer, TAG_ACK, comm, MPI_STATUS_IGNORE);
        else
            MPI_Send(NULL, 0, MPI_BYTE, st->peer, TAG_ACK, comm);
        t_end_s = hmb_now();
        break;
    }

    /* Messages and bytes of this iteration, over the span it took (rank 0's view, or for
     * msgrate the first start to the last end over all senders in rank 0's time base). */
    double messages = (double)n * (st->mode == MODE_BIBW ? 2 : 1);
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
        out->value[M_BANDWIDTH] = messages * (double)st->size / span_s / 1e6;
        out->value[M_RATE] = messages / span_s;
    }
    out->valid = span_s > 0;
    return 0;
}

/* Every slot's last message of the iteration (in a cache-sized window, earlier messages into
 * the same slot are overwritten by it before they can be checked). */
static void p2p_verify(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    p2p_state *st = state;
    if (!st->recv_slots)
        return;
    for (int k = 0; k < st->slots; k++)
        if (st->nsets == 1)
            hmb_check_gen(ctx, pt, st->recv_slots + (size_t)k * st->size, st->size, st->peer, k, iter,
                          one_set_gen(ctx, iter));
        else
            hmb_check_data(ctx, pt, st->recv_slots + (size_t)k * st->size, st->size, st->peer, k, iter);
}

static void p2p_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    const p2p_state *st = state;
    if (st->mode == MODE_LATENCY)
        hmb_result_add_num(ctx, "batch", st->count);
    hmb_result_add_num(ctx, "slots", st->slots);
}

static void p2p_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    p2p_state *st = state;
    free(st->send_sets);
    free(st->recv_slots);
    free(st->send_msg);
    free(st->recv_msg);
    free(st->reqs);
    free(st);
}

/* OSU and IMB move the same send buffer every time: p2p measures that regime by default. */
static const hmb_default p2p_defaults[] = {{"data", "reuse"}, {NULL, NULL}};

static const hmb_option p2p_options[] = {
    {"mode", HMB_OPT_CHOICES, "all", "what to measure", 0, 0, "latency|bw|bibw|msgrate"},
    {"window", HMB_OPT_INT, "64", "messages in flight per iteration for bw, bibw, msgrate (osu: 64)", 1, 4096, NULL},
    {"post", HMB_OPT_CHOICE, "racing",
     "bw, msgrate: the receiver posts a window's receives after the start signal, racing the sender's first "
     "messages as after osu_bw's and osu_mbw_mr's ack (racing), or before it (ahead: all pre-posted)", 0, 0,
     "racing|ahead"},
    {"batch", HMB_OPT_INT, "0",
     "latency: round trips timed back-to-back per sample (0 = auto: a sample of >= 20 us, at most 256)", 0, 4096,
     NULL},
    {"stale-at", HMB_OPT_INT, "-1", "TEST ONLY: in this iteration senders send the other generation's data", -1, 1e9,
     NULL, HMB_ROLE_RUN_CONTROL},
    {"wrong-slot-at", HMB_OPT_INT, "-1",
     "TEST ONLY: in this iteration the last message carries the next slot's data", -1, 1e9, NULL,
     HMB_ROLE_RUN_CONTROL},
    {"hang-at", HMB_OPT_INT, "-1", "TEST ONLY: rank 1 stops participating at this iteration (watchdog test)", -1, 1e9,
     NULL, HMB_ROLE_RUN_CONTROL},
    {"format", HMB_OPT_CHOICE, "table",
     "stdout layout: table, or osu: '# Size  Latency (us)' rows per mode as osu_latency, osu_bw, osu_bibw, osu_mbw_mr "
     "print them (sizes in bytes, medians)", 0, 0, "table|osu", HMB_ROLE_RUN_CONTROL},
    HMB_OPTION_END};

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

static const hmb_bench p2p_bench = {
    .name = "p2p",
    .group = "baseline",
    .summary = "ping-pong latency, windowed uni/bi-directional bandwidth, multi-pair message rate",
    .options = p2p_options,
    .defaults = p2p_defaults,
    .data_reuse = 1,
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
    .annotate = p2p_annotate,
    .osu = p2p_osu,
};
HMB_REGISTER(p2p_bench);
