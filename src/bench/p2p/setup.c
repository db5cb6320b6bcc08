/* p2p's set-up: option checks, points, the message slots of a window, the latency batch, the
 * state of a point and its teardown. The timed exchanges: pattern.c; send data and checks: verify.c. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p2p.h"

void p2p_check(hmb_ctx *ctx, const p2p_mode_def *modes)
{
    const p2p_opts *o = HMB_OPTS(p2p_opts, ctx);
    for (int m = 0; m < MODE_COUNT; m++) {
        if (!(o->mode & (1u << m)) || !modes[m].all_pairs || hmb_size(ctx) % 2 == 0)
            continue;
        char others[64] = ""; /* the modes that pair rank 0 with rank 1 alone */
        for (int k = 0; k < MODE_COUNT; k++)
            if (!modes[k].all_pairs)
                snprintf(others + strlen(others), sizeof others - strlen(others), "%s%s", others[0] ? "," : "",
                         p2p_mode_names[k]);
        hmb_usage_error(ctx, "--mode %s needs an even number of ranks (got %d); choose --mode %s or add a rank",
                        p2p_mode_names[m], hmb_size(ctx), others);
    }
    const size_t *sizes = hmb_common(ctx)->sizes.v;
    const int nsizes = hmb_common(ctx)->sizes.n;
    const long long batch = o->batch;
    int batched = 0;
    for (int m = 0; m < MODE_COUNT; m++)
        batched |= (o->mode & (1u << m)) && modes[m].batched;
    for (int i = 0; i < nsizes; i++) {
        if (sizes[i] > INT_MAX)
            hmb_usage_error(ctx, "--sizes: %zu bytes is more than one MPI_BYTE count can hold", sizes[i]);
        if (batched && (double)batch * (double)sizes[i] > (1u << 28))
            hmb_usage_error(ctx, "--batch %lld x %zu bytes: more than 256 MB of ping-pong slots; "
                                 "use a smaller --batch or 0 (auto)", batch, sizes[i]);
    }
}

void p2p_points(hmb_ctx *ctx, hmb_point_list *out, const p2p_mode_def *modes)
{
    const size_t *sizes = hmb_common(ctx)->sizes.v;
    const int nsizes = hmb_common(ctx)->sizes.n;
    const unsigned long long chosen = HMB_OPTS(p2p_opts, ctx)->mode;
    for (int m = 0; m < MODE_COUNT; m++) {
        if (!(chosen & (1u << m)))
            continue;
        for (int i = 0; i < nsizes; i++) {
            p2p_point *p = hmb_points_new(out, sizes[i]);
            p->mode = m;
            p->window = modes[m].batched ? 1 : HMB_OPTS(p2p_opts, ctx)->window;
            p->pairs = modes[m].all_pairs ? hmb_size(ctx) / 2 : 1;
        }
    }
}

/* Window slots: --cache cold gives every message its own slot (what a window of distinct
 * application buffers touches). --cache hot keeps the window near osu_bw's one reused buffer: the
 * receive slots take at most 1/SLOTS_LLC_FRACTION of the LLC and at most WINDOW_HOT_MAX_BYTES, so
 * that with the sender's two generations the window stays in a core's L1; slots are reused once the
 * window would exceed it, and a message larger than that gets one slot. Slots beyond L1 already
 * cost bandwidth, and a VM may report its host's whole L3, whose share alone would no longer fit
 * any core's cache (the measurements: docs/findings.md, "Small-message bandwidth against osu_bw").
 * The same count on every rank (LLCs may differ between hosts): the smallest. */
static int window_slots(hmb_ctx *ctx, size_t size, int window)
{
    long long slots = window;
    if (hmb_common(ctx)->cache == HMB_CACHE_HOT && size > 0) {
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
    int batch = (int)HMB_OPTS(p2p_opts, ctx)->batch;
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

void *p2p_setup(hmb_ctx *ctx, const hmb_point *pt, const p2p_mode_def *modes)
{
    p2p_state *st = calloc(1, sizeof *st);
    const p2p_point *p = HMB_POINT(p2p_point, pt);
    st->mode = p->mode;
    st->def = &modes[st->mode];
    st->size = pt->size_bytes;
    int rank = hmb_rank(ctx), half = hmb_size(ctx) / 2;
    if (st->def->all_pairs) {
        st->is_sender = rank < half;
        st->peer = st->is_sender ? rank + half : rank - half;
    } else {
        st->is_sender = rank == 0;
        st->peer = rank == 0 ? 1 : rank == 1 ? 0 : -1;
    }
    st->stale_at = hmb_inject_at(ctx, HMB_INJECT_STALE);
    st->wrong_slot_at = hmb_inject_at(ctx, HMB_INJECT_WRONG_SLOT);
    st->racing = HMB_OPTS(p2p_opts, ctx)->post == POST_RACING;
    if (st->def->batched) {
        st->count = latency_batch(ctx, st);
        st->slots = st->count; /* a batch is small: every round trip its own slot */
    } else {
        st->count = (int)p->window;
        st->slots = window_slots(ctx, st->size, st->count);
    }
    /* Latency under --cache hot measures what osu_latency measures: one send set per side, written
     * once per point (--data reuse) and never again, and the receive slots. A second send set
     * (generations by parity) would add the message to the working set, and rewriting the one set
     * before every sample would leave its lines dirty in the sender's cache: either slows the
     * round trip osu_latency times. Stale data are caught instead by poisoning the receive slots
     * before every sample (the receiver's own writes, as its previous receive left them). */
    st->nsets = st->def->batched && hmb_common(ctx)->cache == HMB_CACHE_HOT ? 1 : 2;
    /* The check reads every received byte after the sample; above the hot-slot cap that read
     * displaces what the library's own copy left in this core's caches, and the next sample would
     * pay for it (osu_latency -c does untimed round trips before each timed one for the same
     * reason). So under --cache hot with validation on, one untimed round trip of the batch's
     * slots restores the state the library leaves, the receive slots are poisoned again
     * (hmb_poison_pages: not dirtying them), then the sample is timed. The measurements:
     * docs/metrics.md, "Latency buffers". */
    st->rewarm = st->def->batched && st->nsets == 1 && hmb_validate_enabled(ctx) &&
                 st->size * (size_t)st->slots > SLOTS_HOT_MAX_BYTES;
    int sends = st->peer >= 0 && (st->is_sender || st->def->both_ways);
    int recvs = st->peer >= 0 && (!st->is_sender || st->def->both_ways);
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

void p2p_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    p2p_state *st = state;
    free(st->send_sets);
    free(st->recv_slots);
    free(st->send_msg);
    free(st->recv_msg);
    free(st->reqs);
    free(st);
}
