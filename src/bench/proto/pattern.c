/* proto — eager/rendezvous protocols (SPEC §3.7, seed 001).
 * probe: one iteration scans the --range grid with --trials trials per size and bisects every
 *   change down to --element bytes (src/harness/protocol.c); the result record carries the switch
 *   intervals most iterations found. Views:
 *   `both` (default; seed 001's overlap question): the receiver posts Irecv, barrier, the sender
 *   Isends, both compute C with no MPI call, then wait; the time the send was still outstanding
 *   once both sides had come back from the compute (hmb_probe_outstanding), per size the lower
 *   quartile of all iterations' trials, and the switch is the clearest step of that curve over the sizes
 *   (hmb_clearest_step): a handshake leaves more of the transfer to do after the compute.
 *   `sender`, `recv-early`, `recv-late`: the observed side (the sender; the receiver with the
 *   receive posted first; after the send) computes C, its peer longer; a transfer that finished
 *   before the peer's next MPI call progressed without the peer.
 *   `step`: no compute; the cost of a blocking transfer of fresh data at every grid size, and
 *   the clearest step of that curve: another protocol costs a jump, up (a handshake) or down (a
 *   single copy cheaper than a large eager copy).
 *   Views both and step bisect their step's grid interval down to --element bytes (bisect_step).
 * tradeoff: multi-pair message rate and bandwidth (windows of non-blocking messages, all pairs
 *   at once), with the ranks' resident memory after MPI_Init, after every pair communicated and
 *   after the traffic, so the memory per peer can be projected (docs/metrics.md, "proto").
 * Here: the trials of every view, the curve of views both and step, the trade-off's windows, the
 * metrics, the record, the descriptor; set-up and the transfer calibration: setup.c; the
 * trade-off's data and checks: verify.c. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

/* The compute of a trial at size: twice the fastest transfer time of the grid size at or above
 * it, at least --min-compute. */
static double proto_compute_for(const proto_state *st, size_t size)
{
    int g = 0;
    while (g < st->ngrid - 1 && st->grid[g] < size)
        g++;
    double c = 2.0 * st->transfer_s[g];
    return c > st->min_compute_s ? c : st->min_compute_s;
}

/* MPI_Wait, its start and end in the global time base. */
static void proto_timed_wait(hmb_ctx *ctx, MPI_Request *req, double *start, double *end)
{
    double t0 = hmb_now();
    MPI_Wait(req, MPI_STATUS_IGNORE);
    double t1 = hmb_now();
    *start = hmb_to_global(ctx, t0);
    *end = hmb_to_global(ctx, t1);
}

/* ------------------------------------------------------------------ the views */

typedef void (*size_costs)(proto_state *st, const size_t *sizes, int n, int rounds, double *out);

/* The per-size curve of a view that reads its switch from the clearest step of it (both, step). */
typedef struct {
    void (*scan)(proto_state *st, double *y); /* this iteration's readings into cost_s (y: scratch) */
    size_costs measure;                       /* a bisection step's three sizes */
    int (*bisect_rounds)(const proto_state *st);
    int smoothed;             /* the step is read from the running median of 3 of cost_s */
    int relative;             /* the clearest step by factor, not by jump (hmb_clearest_step) */
    int carry_slopes;         /* the bisection carries the fitted slopes (bisect_step) */
    int step_down_progressed; /* a step down means the transfer progressed after the switch */
    const char *key;          /* the curve in the record */
    const char *what;         /* the curve in the notes */
    int shares;               /* the record has its share of the transfer time */
} proto_curve;

/* A view of the probe: a row of proto_views, indexed by VIEW_*. */
typedef struct {
    int observe_sender;       /* trial views: the side observed is the sender (else the receiver) */
    int receive_late;         /* trial views: the receiver posts after the send */
    const proto_curve *curve; /* both, step; NULL: the trials' majority verdict, bisected (hmb_find_switches) */
    const char *meaning;      /* what a switch of the view says, in the notes */
} proto_view_def;

static const proto_view_def proto_views[VIEW_COUNT];

/* One trial at one size: both sides post, compute with no MPI call, then wait. The observed
 * side computes C, its peer C + lead: the peer's MPI_Wait is its first MPI call after posting,
 * so the observed side's wait that ended before the peer's began needed nothing of the peer.
 * Returns the verdict (hmb_probe_verdict) every rank agrees on. The verdict compares with the
 * peer's own clock reading, not a threshold on the wait alone: on a loaded machine the side that
 * must post second can be descheduled for longer than any lead, and an eager message arriving
 * late would read as a handshake. A single MPI_Test is no signal either: a library need not
 * complete an eager receive whose data are there, and a receiver completes a single-copy (CMA)
 * transfer inside it. */
static int probe_once(proto_state *st, size_t size)
{
    hmb_ctx *ctx = st->ctx;
    MPI_Comm comm = hmb_comm(ctx);
    const int n = (int)size, part = st->probe_no++;
    const proto_view_def *view = &proto_views[st->view];
    const int observed = view->observe_sender ? st->is_sender : !st->is_sender;
    const int64_t c_ns = (int64_t)(proto_compute_for(st, size) * 1e9);
    const int64_t lead_ns = c_ns + HMB_OPTS(proto_opts, ctx)->min_compute;
    const int64_t compute_ns = observed ? c_ns : c_ns + lead_ns;
    double wait_start = -HUGE_VAL, wait_end = -HUGE_VAL;
    MPI_Request req;
    if (st->peer >= 0 && st->is_sender)
        hmb_fill(st->send, size, hmb_rank(ctx), part, st->iter);
    else if (st->peer >= 0)
        memset(st->recv, 0, size);
    hmb_phase(ctx, "probe: trial");
    if (st->peer >= 0 && st->is_sender) {
        if (view->receive_late) {
            MPI_Isend(st->send, n, MPI_BYTE, st->peer, TAG_DATA, comm, &req);
            MPI_Send(NULL, 0, MPI_BYTE, st->peer, TAG_TOKEN, comm); /* "sent": post now */
        } else {
            MPI_Recv(NULL, 0, MPI_BYTE, st->peer, TAG_TOKEN, comm, MPI_STATUS_IGNORE); /* "posted" */
            MPI_Isend(st->send, n, MPI_BYTE, st->peer, TAG_DATA, comm, &req);
        }
        hmb_compute_ns(ctx, compute_ns);
        proto_timed_wait(ctx, &req, &wait_start, &wait_end);
    } else if (st->peer >= 0) {
        if (view->receive_late)
            MPI_Recv(NULL, 0, MPI_BYTE, st->peer, TAG_TOKEN, comm, MPI_STATUS_IGNORE);
        MPI_Irecv(st->recv, n, MPI_BYTE, st->peer, TAG_DATA, comm, &req);
        if (!view->receive_late)
            MPI_Send(NULL, 0, MPI_BYTE, st->peer, TAG_TOKEN, comm);
        hmb_compute_ns(ctx, compute_ns);
        proto_timed_wait(ctx, &req, &wait_start, &wait_end);
        if (hmb_validate_enabled(ctx))
            hmb_check_buffer(ctx, st->pt, st->recv, size, st->peer, part, st->iter);
    }
    /* {observed wait start, observed wait end, peer's call}, the others' entries -inf */
    double times[3] = {-HUGE_VAL, -HUGE_VAL, -HUGE_VAL};
    if (st->peer >= 0 && observed)
        times[0] = wait_start, times[1] = wait_end;
    else if (st->peer >= 0)
        times[2] = wait_start;
    MPI_Allreduce(MPI_IN_PLACE, times, 3, MPI_DOUBLE, MPI_MAX, comm);
    return hmb_probe_verdict(times[0], times[1], times[2]);
}

/* The predicate of the search: the majority of --trials trials with a verdict (a trial without
 * one is repeated, at most --trials times over), the same answer on every rank. */
static int probe_size(size_t size, void *arg)
{
    proto_state *st = arg;
    int progressed = 0, judged = 0;
    for (int attempt = 0; attempt < PROBE_ATTEMPTS_PER_TRIAL * st->trials && judged < st->trials; attempt++) {
        int verdict = probe_once(st, size);
        st->trials_run++;
        if (verdict < 0)
            continue;
        judged++;
        progressed += verdict;
    }
    st->trials_without_verdict += st->trials - judged;
    return hmb_probe_majority(progressed, judged);
}

/* ------------------------------------------------------------------ views both and step: the curve */

/* View both, one trial: the receiver posts its receive, barrier, the sender posts its send, both
 * compute with no MPI call (the sender C, the receiver C + C/4), then wait. Writes this rank's
 * wait times to its entries of times (both_trials exchanges them once per round and reads the
 * time the send was still outstanding once the receiver came back from its compute,
 * hmb_probe_outstanding; no reading when the receiver came back first). The receiver's
 * longer compute makes "who comes back first" a design choice, not chance: two computes of the
 * same C end up to a few microseconds apart (calibration differs between cores), and what the
 * sender's wait shows depends on it: a receiver back first finishes either protocol alone
 * (docs/findings.md, "Where the eager/rendezvous switch shows", has the readings). */
static void probe_both(proto_state *st, size_t size, double times[3])
{
    hmb_ctx *ctx = st->ctx;
    MPI_Comm comm = hmb_comm(ctx);
    const int n = (int)size, part = st->probe_no++;
    const int64_t c_ns = (int64_t)(proto_compute_for(st, size) * 1e9);
    double wait_start = 0, wait_end = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    if (st->peer >= 0 && st->is_sender)
        hmb_fill(st->send, size, hmb_rank(ctx), part, st->iter);
    else if (st->peer >= 0)
        memset(st->recv, 0, size);
    hmb_phase(ctx, "probe: trial (both compute)");
    if (st->peer >= 0 && !st->is_sender)
        MPI_Irecv(st->recv, n, MPI_BYTE, st->peer, TAG_DATA, comm, &req);
    MPI_Barrier(comm);
    if (st->peer >= 0) {
        if (st->is_sender)
            MPI_Isend(st->send, n, MPI_BYTE, st->peer, TAG_DATA, comm, &req);
        hmb_compute_ns(ctx, st->is_sender ? c_ns : c_ns + c_ns / 4);
        proto_timed_wait(ctx, &req, &wait_start, &wait_end);
        if (!st->is_sender && hmb_validate_enabled(ctx))
            hmb_check_buffer(ctx, st->pt, st->recv, size, st->peer, part, st->iter);
    }
    /* {sender's wait start, sender's wait end, receiver's wait start}: this rank's entries */
    if (st->peer >= 0 && st->is_sender)
        times[0] = wait_start, times[1] = wait_end;
    else if (st->peer >= 0)
        times[2] = wait_start;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The lower quartile of a pool's readings (sorted in place; linear between the order statistics
 * around rank (n - 1) / 4), NaN for none. Not the median: every disturbance of this shared
 * machine (either side descheduled in its wait) adds to an outstanding time, so the lower
 * readings are the protocol's; not the fastest: an eager message the receiver took in while
 * still in the trial's barrier leaves nothing outstanding. The quartile found the switch more
 * often than the median did (docs/findings.md). */
static double pool_quartile(reading_pool *p)
{
    if (p->n == 0)
        return NAN;
    qsort(p->v, (size_t)p->n, sizeof *p->v, compare_doubles);
    const double rank = (p->n - 1) / 4.0;
    const int below = (int)rank;
    return below + 1 < p->n ? p->v[below] + (rank - below) * (p->v[below + 1] - p->v[below]) : p->v[below];
}

static void pool_add(reading_pool *p, double value)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 16;
        if (!(p->v = realloc(p->v, (size_t)p->cap * sizeof *p->v)))
            abort();
    }
    p->v[p->n++] = value;
}

/* order[0..n-1]: a permutation of 0..n-1 drawn from key, the same on every rank (Fisher-Yates
 * over hmb_mix64). */
static void shuffled_order(int *order, int n, uint64_t key)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        const int j = (int)(hmb_mix64(key + (uint64_t)i) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/* View both: `trials` readings of the outstanding time of each of sizes[0..n-1], added to
 * pools[i], in rounds of one trial per size in a shuffled order (a slow spell of the shared
 * machine falls on all sizes alike, and what a trial leaves behind falls on any next size, not
 * always on the same one, as in ascending rounds); a trial without a reading is repeated, at most
 * `trials` times over per size. */
static void both_trials(proto_state *st, const size_t *sizes, int n, int trials, reading_pool *pools)
{
    MPI_Comm comm = hmb_comm(st->ctx);
    int *count = calloc((size_t)n, sizeof *count), *order = malloc((size_t)n * sizeof *order);
    double *times = malloc((size_t)n * 3 * sizeof *times);
    if (!count || !order || !times)
        abort();
    hmb_phase(st->ctx, "probe: trials (both compute)");
    for (int attempt = 0, more = 1; more && attempt < PROBE_ATTEMPTS_PER_TRIAL * trials; attempt++) {
        shuffled_order(order, n, hmb_mix64(((uint64_t)st->iter << 32) ^ (uint64_t)st->probe_no));
        for (int i = 0; i < 3 * n; i++)
            times[i] = -HUGE_VAL;
        for (int k = 0; k < n; k++)
            if (count[order[k]] < trials)
                probe_both(st, sizes[order[k]], times + 3 * order[k]);
        /* the round's wait times, exchanged once (every rank reads the same) */
        MPI_Allreduce(MPI_IN_PLACE, times, 3 * n, MPI_DOUBLE, MPI_MAX, comm);
        more = 0;
        for (int i = 0; i < n; i++) {
            if (count[i] >= trials)
                continue;
            const double o = hmb_probe_outstanding(times[3 * i], times[3 * i + 1], times[3 * i + 2]);
            st->trials_run++;
            if (!isnan(o)) {
                pool_add(&pools[i], o);
                count[i]++;
            }
            more |= count[i] < trials;
        }
    }
    for (int i = 0; i < n; i++)
        st->trials_without_verdict += trials - count[i];
    free(count);
    free(order);
    free(times);
}

/* View both, a bisection step: the lower quartile of the outstanding times of each of sizes[0..n-1] over
 * `trials` fresh trials (NaN when none read). */
static void both_costs(proto_state *st, const size_t *sizes, int n, int trials, double *out)
{
    reading_pool *pools = calloc((size_t)n, sizeof *pools);
    if (!pools)
        abort();
    both_trials(st, sizes, n, trials, pools);
    for (int i = 0; i < n; i++) {
        out[i] = pool_quartile(&pools[i]);
        free(pools[i].v);
    }
    free(pools);
}

/* View step: one-way time of a blocking transfer of each of sizes[0..n-1] whose send buffers were
 * just written on both sides (fresh data, as an application sends): the fastest of `rounds`
 * round trips per size, each after a barrier, the rounds interleaved over the sizes so that a
 * slow spell of this shared machine falls on all of them alike; rank 0's times, broadcast. With
 * hot send buffers that nobody writes, a single-copy rendezvous reads clean cache lines and costs
 * what an eager copy does; with written ones it shows the handshake's cost (docs/findings.md).
 * Each side checks the data it received. */
static void fresh_costs(proto_state *st, const size_t *sizes, int n, int rounds, double *out)
{
    hmb_ctx *ctx = st->ctx;
    MPI_Comm comm = hmb_comm(ctx);
    for (int i = 0; i < n; i++)
        out[i] = HUGE_VAL;
    hmb_phase(ctx, "probe: fresh-data round trips");
    for (int k = 0; k < rounds; k++)
        for (int i = 0; i < n; i++) {
            const int part = st->probe_no++, count = (int)sizes[i];
            if (st->peer >= 0)
                hmb_fill(st->send, sizes[i], hmb_rank(ctx), part, st->iter);
            MPI_Barrier(comm);
            double t0 = hmb_now();
            if (st->peer >= 0 && st->is_sender) {
                MPI_Send(st->send, count, MPI_BYTE, st->peer, TAG_DATA, comm);
                MPI_Recv(st->recv, count, MPI_BYTE, st->peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
            } else if (st->peer >= 0) {
                MPI_Recv(st->recv, count, MPI_BYTE, st->peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
                MPI_Send(st->send, count, MPI_BYTE, st->peer, TAG_DATA, comm);
            }
            double one_way = (hmb_now() - t0) / 2;
            out[i] = one_way < out[i] ? one_way : out[i];
            if (st->peer >= 0 && hmb_validate_enabled(ctx))
                hmb_check_buffer(ctx, st->pt, st->recv, sizes[i], st->peer, part, st->iter);
        }
    MPI_Bcast(out, n, MPI_DOUBLE, 0, comm);
}

/* The curve whose clearest step is the switch: view step, its costs as they are; view both, the
 * outstanding times through a running median of 3 (hmb_running_median3). */
static void switch_curve(const proto_state *st, double *y)
{
    if (proto_views[st->view].curve->smoothed)
        hmb_running_median3(st->ngrid, st->cost_s, y);
    else
        memcpy(y, st->cost_s, (size_t)st->ngrid * sizeof *y);
}

/* Bisection of a step's grid interval down to --element bytes: each step measures the
 * interval's ends and its middle together (`measure`, `rounds` each) and, with carry_slopes,
 * carries each side's fitted slope from its end to the middle (else each side is flat at its
 * end's reading): the middle behaves like the larger sizes when its reading lies nearer the
 * right line so placed (hmb_changepoint_side); a machine that slowed down since the scan moves
 * all three alike. View step carries the slopes (its jumps are the size of a slope over a grid
 * interval); view both does not: its jumps are several times the slope over an interval, and its
 * fitted slopes are not to be trusted next to the step (the first sizes after a switch read high
 * in a round, tilting the right line). Every rank computes the same (rank 0's readings). */
static void bisect_step(proto_state *st, const hmb_changepoint *cp, switch_list *found)
{
    const proto_curve *curve = proto_views[st->view].curve;
    const int rounds = curve->bisect_rounds(st);
    size_t lo = st->grid[cp->index - 1], hi = st->grid[cp->index];
    while (hi - lo > st->element) {
        size_t three[3] = {lo, lo + (hi - lo) / st->element / 2 * st->element, hi};
        double t[3];
        curve->measure(st, three, 3, rounds, t);
        hmb_changepoint local = *cp;
        if (!curve->carry_slopes)
            local.b_left = local.b_right = 0.0;
        local.a_left = t[0] - local.b_left * (double)lo;
        local.a_right = t[2] - local.b_right * (double)hi;
        if (hmb_changepoint_side(&local, (double)three[1], t[1]) == 1)
            hi = three[1];
        else
            lo = three[1];
    }
    found->lo_hi[0] = lo;
    found->lo_hi[1] = hi;
    /* view both: a step down leaves less outstanding after the compute above the switch */
    found->progressed_after[0] = curve->step_down_progressed && cp->jump < 0;
}

/* Views step and both, one iteration: the curve over the grid sizes (step: the fastest
 * fresh-data cost so far, this and earlier iterations, so that a slow spell of one scan does not
 * make a step; both: the lower quartile of the outstanding times of this and earlier
 * iterations' trials, so that a size where a few trials waited for a descheduled peer does not
 * make a step, and its
 * share of the fastest transfer time), its clearest step (hmb_clearest_step), bisected
 * (bisect_step). Returns the switches found (0 or 1). */
static int proto_curve_search(proto_state *st, switch_list *found)
{
    const proto_curve *curve = proto_views[st->view].curve;
    double *x = malloc((size_t)st->ngrid * sizeof *x), *y = malloc((size_t)st->ngrid * sizeof *y);
    if (!x || !y)
        abort();
    curve->scan(st, y);
    switch_curve(st, y);
    for (int g = 0; g < st->ngrid; g++)
        x[g] = (double)st->grid[g];
    hmb_changepoint cp;
    /* view both: the step that changes the outstanding time by the largest factor, not the
     * largest jump (a page step or a bend of larger sizes can be as clear against the noise as a
     * small switch) */
    const int stepped = hmb_clearest_step(st->ngrid, x, y, curve->relative, &cp) == 1;
    free(x);
    free(y);
    if (!stepped)
        return 0;
    bisect_step(st, &cp, found);
    return 1;
}

/* View step's readings of one iteration: the fastest fresh-data cost of each grid size so far. */
static void scan_fresh_costs(proto_state *st, double *y)
{
    fresh_costs(st, st->grid, st->ngrid, STEP_ROUND_TRIPS, y);
    for (int g = 0; g < st->ngrid; g++)
        st->cost_s[g] = y[g] < st->cost_s[g] ? y[g] : st->cost_s[g];
}

/* View both's readings of one iteration: the transfer times again, this iteration's trials added
 * to every size's pool, the pools' lower quartiles and their share of the transfer time. */
static void scan_outstanding(proto_state *st, double *y)
{
    (void)y;
    proto_calibrate_transfers(st);
    both_trials(st, st->grid, st->ngrid, st->trials, st->pool);
    for (int g = 0; g < st->ngrid; g++) {
        st->cost_s[g] = pool_quartile(&st->pool[g]);
        st->share_at[g] = hmb_probe_outstanding_share(st->cost_s[g], st->transfer_s[g]);
    }
}

static int step_bisect_rounds(const proto_state *st)
{
    (void)st;
    return STEP_BISECT_ROUND_TRIPS;
}

static int both_bisect_rounds(const proto_state *st) { return BOTH_BISECT_TRIALS_PER_TRIAL * st->trials; }

static const proto_curve step_curve = {.scan = scan_fresh_costs, .measure = fresh_costs,
                                       .bisect_rounds = step_bisect_rounds, .carry_slopes = 1, .key = "cost_us",
                                       .what = "fastest costs"};
static const proto_curve both_curve = {.scan = scan_outstanding, .measure = both_costs,
                                       .bisect_rounds = both_bisect_rounds, .smoothed = 1, .relative = 1,
                                       .step_down_progressed = 1, .key = "outstanding_us",
                                       .what = "outstanding times", .shares = 1};

/* The views, in VIEW_* order (proto_view_names). */
static const proto_view_def proto_views[VIEW_COUNT] = {
    [VIEW_BOTH] = {.curve = &both_curve,
                   .meaning = "both sides computed after posting: above a switch more of the transfer is left after "
                              "the compute (up: a handshake)"},
    [VIEW_SENDER] = {.observe_sender = 1,
                     .meaning = "the sender's request completes without the receiver below a switch (eager or "
                                "inline send)"},
    [VIEW_RECV_EARLY] = {.meaning = "the receiver completes without the sender below a switch (none: it copies by "
                                    "itself, e.g. CMA)"},
    [VIEW_RECV_LATE] = {.receive_late = 1,
                        .meaning = "the receiver completes without the sender below a switch (none: it copies by "
                                   "itself, e.g. CMA)"},
    [VIEW_STEP] = {.curve = &step_curve,
                   .meaning = "the cost of a blocking transfer of fresh data jumps at a switch (up: a handshake; "
                              "down: one copy, not two)"},
};

/* Views step and both: the curve (step: the fastest fresh-data cost of each grid size over all
 * iterations, `cost_us`; both: the lower quartile of the outstanding times of all iterations' trials,
 * `outstanding_us`, and its share of the transfer time) and the steps of the curve the switch is
 * read from (switch_curve): per step the break interval, the jump, both slopes and the residual
 * spread (docs/metrics.md, "proto"). */
static void proto_curve_annotate(hmb_ctx *ctx, proto_state *st)
{
    double *x = malloc((size_t)st->ngrid * sizeof *x), *rows = malloc((size_t)st->ngrid * 2 * sizeof *rows);
    double *y = malloc((size_t)st->ngrid * sizeof *y);
    if (!x || !rows || !y)
        abort();
    for (int g = 0; g < st->ngrid; g++)
        x[g] = (double)st->grid[g];
    switch_curve(st, y);
    int n = hmb_changepoint_steps(st->ngrid, x, y, st->steps, MAX_SWITCHES);
    st->nsteps = n < 0 ? 0 : n < MAX_SWITCHES ? n : MAX_SWITCHES;
    hmb_result_add_num(ctx, "step_noise_us", hmb_cost_noise(st->ngrid, y) * 1e6);
    free(y);
    for (int g = 0; g < st->ngrid; g++) {
        rows[2 * g] = x[g];
        rows[2 * g + 1] = st->cost_s[g] * 1e6;
    }
    const proto_curve *curve = proto_views[st->view].curve;
    hmb_result_add_rows(ctx, curve->key, rows, st->ngrid, 2);
    if (curve->shares) {
        for (int g = 0; g < st->ngrid; g++)
            rows[2 * g + 1] = st->share_at[g];
        hmb_result_add_rows(ctx, "outstanding_share", rows, st->ngrid, 2);
    }
    free(x);
    free(rows);
    double fit[6 * MAX_SWITCHES];
    for (int j = 0; j < st->nsteps; j++) {
        const hmb_changepoint *cp = &st->steps[j];
        double one[6] = {cp->lo, cp->hi, cp->jump * 1e6, cp->b_left * 1e6 * 1024, cp->b_right * 1e6 * 1024,
                         cp->sigma * 1e6};
        memcpy(fit + 6 * j, one, sizeof one);
    }
    /* [last grid size left of the break, first right of it, jump µs, slope left, slope right
     * (µs per KB), residual spread µs] */
    hmb_result_add_rows(ctx, "steps", fit, st->nsteps, 6);
}

/* ------------------------------------------------------------------ the trade-off */

static void tradeoff_iterate(hmb_ctx *ctx, proto_state *st, long iter, hmb_sample *out)
{
    (void)iter;
    MPI_Comm comm = hmb_comm(ctx);
    const int n = (int)st->size;
    if (!st->is_sender) {
        hmb_phase(ctx, "tradeoff: receive window");
        for (int j = 0; j < st->window; j++)
            MPI_Irecv(st->recv + (size_t)j * st->size, n, MPI_BYTE, st->peer, TAG_DATA, comm, &st->reqs[j]);
    }
    MPI_Barrier(comm); /* receives posted; all pairs start together */
    double t_start = hmb_now();
    if (st->is_sender) {
        hmb_phase(ctx, "tradeoff: send window");
        for (int j = 0; j < st->window; j++)
            MPI_Isend(st->send + (size_t)j * st->size, n, MPI_BYTE, st->peer, TAG_DATA, comm, &st->reqs[j]);
    }
    MPI_Waitall(st->window, st->reqs, MPI_STATUSES_IGNORE);
    double t_end = hmb_now();
    double bounds[2] = {-hmb_to_global(ctx, t_start), hmb_to_global(ctx, t_end)};
    hmb_reduce_max(ctx, bounds, 2);
    const double span_s = bounds[0] + bounds[1], messages = (double)st->window * (hmb_size(ctx) / 2);
    hmb_record_at(ctx, out, M_RATE, messages / span_s);
    hmb_record_at(ctx, out, M_BANDWIDTH, messages * (double)st->size / span_s / 1e6);
    hmb_record_at(ctx, out, M_ITER_TIME, span_s * 1e6);
    out->valid = span_s > 0;
    double hwm = 0;
    proto_max_memory(ctx, &st->rss_traffic_kB, &hwm);
    st->rss_traffic_kB -= 2.0 * (double)(st->size * (size_t)st->window) / 1024; /* not the library's */
    st->hwm_kB = hwm > st->hwm_kB ? hwm : st->hwm_kB;
}

/* The probe, one iteration: the switches found over the grid (the curve's clearest step, or the
 * trials' majority verdict bisected), kept for the consensus once past the warm-up. */
static void probe_iterate(hmb_ctx *ctx, proto_state *st, long iter, hmb_sample *out)
{
    st->iter = iter;
    st->probe_no = 0;
    switch_list found = {0};
    double t0 = hmb_now();
    int count = proto_views[st->view].curve ? proto_curve_search(st, &found)
                                            : hmb_find_switches(st->grid, st->ngrid, st->element, probe_size, st,
                                                                found.lo_hi, found.progressed_after, MAX_SWITCHES);
    found.count = count < MAX_SWITCHES ? count : MAX_SWITCHES;
    hmb_record_at(ctx, out, M_SWITCHES, count);
    hmb_record_at(ctx, out, M_FIRST_SWITCH, count > 0 ? (double)found.lo_hi[1] : NAN);
    hmb_record_at(ctx, out, M_ITER_TIME, (hmb_now() - t0) * 1e6);
    if (st->nfound < MAX_FOUND && iter >= hmb_common(ctx)->warmup) /* warm-up iterations do not vote */
        st->found[st->nfound++] = found;
}

static const hmb_default proto_defaults[] = {
    {"sizes", "1K:1M:x4"}, {"iters", "5"}, {"warmup", "1"}, {"budget", "1s"}, {NULL, NULL}};


static const hmb_metric proto_metrics[] = {
    {"switches", "count", "probe: switch points found in --range (this iteration)", 0, 1},
    {"first_switch_bytes", "B", "probe: first size behaving unlike the smallest (this iteration)", 0, 1},
    {"msg_rate", "msg/s", "tradeoff: messages per second, all pairs", 1, 1},
    {"bandwidth_MBps", "MB/s", "tradeoff: bytes per second over all pairs, 1 MB = 1e6 B", 1, 1},
    {"iter_time_us", "us", "probe: one search; tradeoff: one window of all pairs", 0, 0},
    HMB_METRIC_END};

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
    const proto_curve *curve = proto_views[st->view].curve;
    if (curve)
        proto_curve_annotate(ctx, st);
    char text[64 * MAX_SWITCHES] = "";
    for (int k = 0; k < count; k++) {
        size_t len = strlen(text);
        snprintf(text + len, sizeof text - len, "%s%zu-%zu%s", k ? " " : "", s->lo_hi[2 * k],
                 s->lo_hi[2 * k + 1], s->progressed_after[k] ? "(+)" : "");
    }
    hmb_result_add_str(ctx, "switches", count ? text : "none");
    hmb_note(ctx, "probe view %s: switches %s (agreement %.2f, %ld trials, %ld without verdict); %s",
             proto_view_names[st->view], count ? text : "none", st->nfound ? (double)best_votes / st->nfound : 0.0,
             st->trials_run, st->trials_without_verdict, proto_views[st->view].meaning);
    int even = 1;
    for (int g = 2; g < st->ngrid; g++)
        even &= st->grid[g] - st->grid[g - 1] == st->grid[1] - st->grid[0];
    if (!even && curve)
        hmb_note(ctx, "probe view %s: --range is not evenly spaced; the lines fitted on each side of a step "
                 "assume a linear grid (e.g. 512:96K:+512)", proto_view_names[st->view]);
    for (int j = 0; j < st->nsteps; j++)
        hmb_note(ctx, "probe view %s: the %s step at %.0f-%.0f B: jump %+.3f us, slopes %.4f | %.4f us/KB",
                 proto_view_names[st->view], curve->what,
                 st->steps[j].lo, st->steps[j].hi, st->steps[j].jump * 1e6, st->steps[j].b_left * 1e6 * 1024,
                 st->steps[j].b_right * 1e6 * 1024);
}

/* The trade-off: the resident memory at each stage and the memory per peer it implies. */
static void tradeoff_annotate(hmb_ctx *ctx, proto_state *st)
{
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

/* The tests, in TEST_* order (proto_test_names). */
static const proto_test_def proto_tests[TEST_COUNT] = {
    [TEST_PROBE] = {.state = proto_probe_state, .ready = proto_calibrate_transfers, .iterate = probe_iterate,
                    .annotate = probe_annotate},
    [TEST_TRADEOFF] = {.state = proto_tradeoff_state, .iterate = tradeoff_iterate, .annotate = tradeoff_annotate,
                       .prepare = proto_tradeoff_prepare, .verify = proto_tradeoff_verify},
};

/* ------------------------------------------------------------------ descriptor */

static void *proto_setup_cb(hmb_ctx *ctx, const hmb_point *pt) { return proto_setup(ctx, pt, proto_tests); }

static void proto_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    (void)ctx, (void)pt;
    proto_state *st = state;
    if (st->test_def->prepare)
        st->test_def->prepare(st, iter);
}

static int proto_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    (void)pt;
    proto_state *st = state;
    st->test_def->iterate(ctx, st, iter, out);
    return 0;
}

/* The probe validates inside each trial (probe_once, probe_both, fresh_costs); the trade-off checks
 * every message after the iteration. */
static void proto_verify(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    const proto_state *st = state;
    if (st->test_def->verify)
        st->test_def->verify(ctx, st, pt, iter);
}

static void proto_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    (void)pt;
    proto_state *st = state;
    st->test_def->annotate(ctx, st);
}

static const hmb_bench proto_bench = {
    .name = "proto",
    .group = "protocols",
    .summary = "eager/rendezvous switch probe (bisection) and the threshold trade-off: message rate, memory",
    HMB_BENCH_PARAMS(proto_point),
    HMB_BENCH_OPTIONS(proto_opts),
    .no_mock = "the probe judges whether the library moves a message while both sides compute, between two "
               "ranks: a loopback without MPI has no protocol to probe",
    .defaults = proto_defaults,
    .metrics = proto_metrics,
    .thread_level = MPI_THREAD_SINGLE,
    .min_ranks = 2,
    .rank_multiple = 1,
    .derived_compute = HMB_DERIVED_TIME, /* its leads and delays, from the sizes probed */
    .check = proto_check,
    .points = proto_points,
    .setup = proto_setup_cb,
    .prepare = proto_prepare,
    .iterate = proto_iterate,
    .verify = proto_verify,
    .teardown = proto_teardown,
    .annotate = proto_annotate,
};
HMB_REGISTER(proto_bench);
