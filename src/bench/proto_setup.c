/* proto's options, points, memory readings, set-up, send data, teardown and the record (the
 * consensus of the switches found, the step fits, the memory per peer). The probe and the trade-off:
 * proto.c. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

const char *const proto_test_names[TEST_COUNT + 1] = {"probe", "tradeoff", NULL};
const char *const proto_view_names[VIEW_COUNT + 1] = {"both", "sender", "recv-early", "recv-late", "step", NULL};

void proto_check(hmb_ctx *ctx)
{
    const proto_opts *o = HMB_OPTS(proto_opts, ctx);
    const int n = o->range.n;
    const size_t *grid = o->range.v, element = (size_t)o->element;
    for (int i = 0; i < n; i++) {
        if (grid[i] % element)
            hmb_usage_error(ctx, "--range: %zu bytes is not a multiple of --element %zu", grid[i], element);
        if (grid[i] > INT_MAX)
            hmb_usage_error(ctx, "--range: %zu bytes is more than one MPI_BYTE count can hold", grid[i]);
        if (i > 0 && grid[i] <= grid[i - 1])
            hmb_usage_error(ctx, "--range must increase (%zu after %zu)", grid[i], grid[i - 1]);
    }
    if ((o->test & (1u << TEST_PROBE)) && n < 2)
        hmb_usage_error(ctx, "--range needs at least two sizes to find a switch between (e.g. 1K:1M)");
    if ((o->test & (1u << TEST_PROBE)) && (o->view & ((1u << VIEW_STEP) | (1u << VIEW_BOTH))) &&
        n < 2 * HMB_CHANGEPOINT_MIN_SIDE)
        hmb_usage_error(ctx, "--view %s needs at least %d --range sizes to fit a line on each side of a break "
                        "(e.g. 3K:5K:+64)", (o->view & (1u << VIEW_BOTH)) ? "both" : "step",
                        2 * HMB_CHANGEPOINT_MIN_SIDE);
    const size_t *sizes = hmb_common(ctx)->sizes.v;
    for (int i = 0; i < hmb_common(ctx)->sizes.n; i++)
        if (sizes[i] > INT_MAX)
            hmb_usage_error(ctx, "--sizes: %zu bytes is more than one MPI_BYTE count can hold", sizes[i]);
    if ((o->test & (1u << TEST_TRADEOFF)) && hmb_size(ctx) % 2)
        hmb_usage_error(ctx, "--test tradeoff needs an even number of ranks (pairs), got %d", hmb_size(ctx));
}

void proto_points(hmb_ctx *ctx, hmb_point_list *out)
{
    proto_run *run = calloc(1, sizeof *run);
    long rss = -1, hwm = -1;
    hmb_memory_kB(&rss, &hwm);
    double mem[2] = {(double)rss, (double)hwm};
    hmb_reduce_max(ctx, mem, 2);
    run->rss_init_kB = mem[0];
    run->hwm_init_kB = mem[1];
    hmb_set_run_data(ctx, run);

    const proto_opts *o = HMB_OPTS(proto_opts, ctx);
    const unsigned long long tests = o->test, views = o->view;
    const int ngrid = o->range.n, nsizes = hmb_common(ctx)->sizes.n;
    const size_t *grid = o->range.v, *sizes = hmb_common(ctx)->sizes.v;
    for (int v = 0; v < VIEW_COUNT && (tests & (1u << TEST_PROBE)); v++) {
        if (!(views & (1u << v)))
            continue;
        proto_point *p = hmb_points_new(out, grid[ngrid - 1]);
        p->test = TEST_PROBE;
        p->view = v;
    }
    for (int i = 0; i < nsizes && (tests & (1u << TEST_TRADEOFF)); i++) {
        proto_point *p = hmb_points_new(out, sizes[i]);
        p->test = TEST_TRADEOFF;
        p->window = o->window;
        p->pairs = hmb_size(ctx) / 2;
    }
}

void proto_max_memory(hmb_ctx *ctx, double *rss_kB, double *hwm_kB)
{
    long rss = -1, hwm = -1;
    hmb_memory_kB(&rss, &hwm);
    double mem[2] = {(double)rss, (double)hwm};
    hmb_reduce_max(ctx, mem, 2);
    *rss_kB = mem[0];
    *hwm_kB = mem[1];
}

/* Every rank exchanges one small message with every other rank: each pair has communicated. */
static void touch_every_pair(hmb_ctx *ctx)
{
    const int size = hmb_size(ctx);
    int *out = calloc((size_t)size, sizeof *out), *in = calloc((size_t)size, sizeof *in);
    if (!out || !in)
        abort();
    hmb_phase(ctx, "tradeoff: every pair");
    MPI_Alltoall(out, 1, MPI_INT, in, 1, MPI_INT, hmb_comm(ctx));
    free(out);
    free(in);
}

void *proto_setup(hmb_ctx *ctx, const hmb_point *pt)
{
    proto_state *st = calloc(1, sizeof *st);
    st->ctx = ctx;
    st->pt = pt;
    const proto_point *p = HMB_POINT(proto_point, pt);
    st->test = p->test;
    const int rank = hmb_rank(ctx), half = hmb_size(ctx) / 2;
    size_t bytes;
    int ok = 1;
    if (st->test == TEST_PROBE) {
        st->view = p->view;
        st->is_sender = rank == 0;
        st->peer = rank == 0 ? 1 : rank == 1 ? 0 : -1;
        const proto_opts *o = HMB_OPTS(proto_opts, ctx);
        st->trials = (int)o->trials;
        st->element = (size_t)o->element;
        st->grid = o->range.v;
        st->ngrid = o->range.n;
        st->min_compute_s = (double)o->min_compute * 1e-9;
        bytes = st->grid[st->ngrid - 1];
        ok &= (st->transfer_s = calloc((size_t)st->ngrid, sizeof *st->transfer_s)) != NULL;
        ok &= (st->share_at = calloc((size_t)st->ngrid, sizeof *st->share_at)) != NULL;
        ok &= (st->cost_s = calloc((size_t)st->ngrid, sizeof *st->cost_s)) != NULL;
        ok &= (st->pool = calloc((size_t)st->ngrid, sizeof *st->pool)) != NULL;
        for (int g = 0; g < st->ngrid && st->transfer_s && st->share_at && st->cost_s; g++)
            st->transfer_s[g] = HUGE_VAL, st->share_at[g] = NAN, st->cost_s[g] = HUGE_VAL;
    } else {
        st->is_sender = rank < half;
        st->peer = st->is_sender ? rank + half : rank - half;
        st->size = pt->size_bytes;
        st->window = (int)p->window;
        bytes = st->size * (size_t)st->window;
        ok &= (st->reqs = calloc((size_t)st->window, sizeof *st->reqs)) != NULL;
        touch_every_pair(ctx); /* before the benchmark's own buffers exist */
        proto_max_memory(ctx, &st->rss_pairs_kB, &st->hwm_kB);
    }
    ok &= (st->send = hmb_buffer_alloc(ctx, bytes)) != NULL && (st->recv = hmb_buffer_alloc(ctx, bytes)) != NULL;
    if (!hmb_all_agree(ctx, ok)) {
        hmb_unsupported(ctx, "cannot allocate 2 x %zu bytes of message buffers", bytes);
        return st;
    }
    if (st->test == TEST_PROBE)
        proto_calibrate_transfers(st);
    return st;
}

static void tradeoff_prepare(proto_state *st, long iter)
{
    for (int j = 0; j < st->window && st->is_sender; j++)
        hmb_fill(st->send + (size_t)j * st->size, st->size, hmb_rank(st->ctx), j, iter);
}

void proto_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    proto_state *st = state;
    if (st->test == TEST_TRADEOFF)
        tradeoff_prepare(st, iter);
}

static int same_switches(const switch_list *a, const switch_list *b)
{
    if (a->count != b->count)
        return 0;
    for (int k = 0; k < a->count; k++)
        if (a->lo_hi[2 * k] != b->lo_hi[2 * k] || a->lo_hi[2 * k + 1] != b->lo_hi[2 * k + 1] ||
            a->progressed_after[k] != b->progressed_after[k])
            return 0;
    return 1;
}

static void probe_annotate(hmb_ctx *ctx, proto_state *st)
{
    int best = -1, best_votes = 0;
    for (int i = 0; i < st->nfound; i++) {
        int votes = 0;
        for (int k = 0; k < st->nfound; k++)
            votes += same_switches(&st->found[i], &st->found[k]);
        if (votes > best_votes)
            best = i, best_votes = votes;
    }
    double rows[2 * MAX_SWITCHES], after[MAX_SWITCHES];
    const switch_list *s = best >= 0 ? &st->found[best] : NULL;
    const int count = s ? s->count : 0;
    for (int k = 0; k < count; k++) {
        rows[2 * k] = (double)s->lo_hi[2 * k];
        rows[2 * k + 1] = (double)s->lo_hi[2 * k + 1];
        after[k] = s->progressed_after[k];
    }
    hmb_result_add_rows(ctx, "switch_bytes", rows, count, 2);
    hmb_result_add_rows(ctx, "switch_progressed_after", after, count, 1);
    hmb_result_add_num(ctx, "switch_agreement", st->nfound ? (double)best_votes / st->nfound : NAN);
    hmb_result_add_num(ctx, "trials", st->trials);
    hmb_result_add_num(ctx, "trials_run", (double)st->trials_run);
    hmb_result_add_num(ctx, "trials_without_verdict", (double)st->trials_without_verdict);
    hmb_result_add_num(ctx, "element_bytes", (double)st->element);
    double *bw = malloc((size_t)st->ngrid * 2 * sizeof *bw);
    if (!bw)
        abort();
    for (int g = 0; g < st->ngrid; g++) {
        bw[2 * g] = (double)st->grid[g];
        const double t = st->transfer_s[g];
        bw[2 * g + 1] = t > 0 && isfinite(t) ? (double)st->grid[g] / t / 1e6 : NAN;
    }
    hmb_result_add_rows(ctx, "bandwidth_MBps", bw, st->ngrid, 2);
    free(bw);
    if (st->view == VIEW_STEP || st->view == VIEW_BOTH)
        proto_curve_annotate(ctx, st);
    char text[64 * MAX_SWITCHES] = "";
    for (int k = 0; k < count; k++) {
        size_t len = strlen(text);
        snprintf(text + len, sizeof text - len, "%s%zu-%zu%s", k ? " " : "", s->lo_hi[2 * k],
                 s->lo_hi[2 * k + 1], s->progressed_after[k] ? "(+)" : "");
    }
    hmb_result_add_str(ctx, "switches", count ? text : "none");
    static const char *const meaning[VIEW_COUNT] = {
        "both sides computed after posting: above a switch more of the transfer is left after the compute "
        "(up: a handshake)",
        "the sender's request completes without the receiver below a switch (eager or inline send)",
        "the receiver completes without the sender below a switch (none: it copies by itself, e.g. CMA)",
        "the receiver completes without the sender below a switch (none: it copies by itself, e.g. CMA)",
        "the cost of a blocking transfer of fresh data jumps at a switch (up: a handshake; down: one copy, not two)"};
    hmb_note(ctx, "probe view %s: switches %s (agreement %.2f, %ld trials, %ld without verdict); %s",
             proto_view_names[st->view], count ? text : "none", st->nfound ? (double)best_votes / st->nfound : 0.0,
             st->trials_run, st->trials_without_verdict, meaning[st->view]);
    int even = 1;
    for (int g = 2; g < st->ngrid; g++)
        even &= st->grid[g] - st->grid[g - 1] == st->grid[1] - st->grid[0];
    if (!even && (st->view == VIEW_STEP || st->view == VIEW_BOTH))
        hmb_note(ctx, "probe view %s: --range is not evenly spaced; the lines fitted on each side of a step "
                 "assume a linear grid (e.g. 512:96K:+512)", proto_view_names[st->view]);
    for (int j = 0; j < st->nsteps; j++)
        hmb_note(ctx, "probe view %s: the %s step at %.0f-%.0f B: jump %+.3f us, slopes %.4f | %.4f us/KB",
                 proto_view_names[st->view], st->view == VIEW_STEP ? "fastest costs" : "outstanding times",
                 st->steps[j].lo, st->steps[j].hi, st->steps[j].jump * 1e6, st->steps[j].b_left * 1e6 * 1024,
                 st->steps[j].b_right * 1e6 * 1024);
}

void proto_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    proto_state *st = state;
    if (st->test == TEST_PROBE) {
        probe_annotate(ctx, st);
        return;
    }
    const proto_run *run = hmb_run_data(ctx);
    const int peers = hmb_size(ctx) - 1;
    const double per_peer = hmb_memory_per_peer_kB(run->rss_init_kB, st->rss_pairs_kB, peers);
    hmb_result_add_num(ctx, "rss_init_kB", run->rss_init_kB);
    hmb_result_add_num(ctx, "rss_pairs_kB", st->rss_pairs_kB);
    hmb_result_add_num(ctx, "rss_traffic_kB", st->rss_traffic_kB);
    hmb_result_add_num(ctx, "hwm_kB", st->hwm_kB);
    hmb_result_add_num(ctx, "per_peer_kB", per_peer);
    /* projections (a straight line from the peers of this run), not measurements: named so */
    hmb_result_add_num(ctx, "rss_1000_peers_projected_kB", hmb_memory_projected_kB(run->rss_init_kB, per_peer, 1000));
    hmb_result_add_num(ctx, "rss_8000_peers_projected_kB", hmb_memory_projected_kB(run->rss_init_kB, per_peer, 8000));
}

void proto_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    proto_state *st = state;
    free(st->send);
    free(st->recv);
    free(st->reqs);
    free(st->transfer_s);
    free(st->share_at);
    free(st->cost_s);
    for (int g = 0; st->pool && g < st->ngrid; g++)
        free(st->pool[g].v);
    free(st->pool);
    free(st);
}
