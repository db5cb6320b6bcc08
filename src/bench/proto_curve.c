/* proto's views both and step, the probe's curve over the --range grid (proto.c has the others):
 * both's trials and their pools of outstanding times, step's fresh-data costs, the clearest step
 * of the curve and its bisection (proto_curve_search), and the curve in the record
 * (proto_curve_annotate). The family's description is at the top of proto.c. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

/* View both, one trial: the receiver posts its receive, barrier, the sender posts its send, both
 * compute with no MPI call (the sender C, the receiver C + C/4), then wait. Writes this rank's
 * wait times to its entries of times (both_trials exchanges them once per round and reads the
 * time the send was still outstanding once the receiver came back from its compute,
 * hmb_probe_outstanding; no reading when the receiver came back first). The receiver's
 * longer compute makes "who comes back first" a design choice, not chance: two computes of the
 * same C end up to a few microseconds apart (calibration differs between cores), and what the
 * sender's wait shows depends on it. Open MPI, 1-8 KB (4 KB eager limit): in a launch where the
 * receiver tended to come back last, 0.9 us (eager) against 2.0 us (rendezvous) outstanding once
 * both were back; in one where the sender did, 0.55 us at every size (the receiver had finished
 * both protocols alone). */
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
 * still in the trial's barrier leaves nothing outstanding (0 on Open MPI at any eager size).
 * Open MPI's switch was the clearest step in 85-87 % of draws of 10 readings per size (median:
 * 71-75 %) and 95 % of 14 (80-87 %), from two launches' 30 readings per size. */
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
 * always on the same: in ascending rounds MPICH's first rendezvous sizes after the eager ones
 * read 7-35 us against 5 us, and Open MPI's smallest size after the largest 2.1 against 1.2 us);
 * a trial without a reading is repeated, at most `trials` times over per size. */
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
 * slow spell of this shared machine falls on all of them alike; rank 0's times, broadcast. With hot send buffers that nobody writes, a single-copy rendezvous reads clean cache
 * lines and costs what an eager copy does (Open MPI 5.0.11 at 4032 B: 1.14 against 1.10 µs at
 * 3968 B); with written ones it shows the handshake's cost (1.73 against 1.08 µs). Each side
 * checks the data it received. */
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
    if (st->view == VIEW_BOTH)
        hmb_running_median3(st->ngrid, st->cost_s, y);
    else
        memcpy(y, st->cost_s, (size_t)st->ngrid * sizeof *y);
}

typedef void (*size_costs)(proto_state *st, const size_t *sizes, int n, int rounds, double *out);

/* Bisection of a step's grid interval down to --element bytes: each step measures the
 * interval's ends and its middle together (`measure`, `rounds` each) and, with carry_slopes,
 * carries each side's fitted slope from its end to the middle (else each side is flat at its
 * end's reading): the middle behaves like the larger sizes when its reading lies nearer the
 * right line so placed (hmb_changepoint_side); a machine that slowed down since the scan moves
 * all three alike. View step carries the slopes (its jumps, +0.3 us, are the size of a slope
 * over a grid interval); view both does not: its jumps are several times the slope over an
 * interval, and its fitted slopes are not to be trusted next to the step (MPICH: the first
 * rendezvous sizes after eager ones in a round read 7-35 us against 5 us further on, so the
 * right line fell 60 us/KB). Every rank computes the same (rank 0's readings). */
static void bisect_step(proto_state *st, const hmb_changepoint *cp, size_costs measure, int rounds,
                        int carry_slopes, switch_list *found)
{
    size_t lo = st->grid[cp->index - 1], hi = st->grid[cp->index];
    while (hi - lo > st->element) {
        size_t three[3] = {lo, lo + (hi - lo) / st->element / 2 * st->element, hi};
        double t[3];
        measure(st, three, 3, rounds, t);
        hmb_changepoint local = *cp;
        if (!carry_slopes)
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
    found->progressed_after[0] = st->view == VIEW_BOTH && cp->jump < 0;
}

/* Views step and both, one iteration: the curve over the grid sizes (step: the fastest
 * fresh-data cost so far, this and earlier iterations, so that a slow spell of one scan does not
 * make a step; both: the lower quartile of the outstanding times of this and earlier
 * iterations' trials, so that a size where a few trials waited for a descheduled peer does not
 * make a step, and its
 * share of the fastest transfer time), its clearest step (hmb_clearest_step), bisected
 * (bisect_step). Returns the switches found (0 or 1). */
int proto_curve_search(proto_state *st, switch_list *found)
{
    double *x = malloc((size_t)st->ngrid * sizeof *x), *y = malloc((size_t)st->ngrid * sizeof *y);
    if (!x || !y)
        abort();
    if (st->view == VIEW_STEP) {
        fresh_costs(st, st->grid, st->ngrid, STEP_ROUND_TRIPS, y);
        for (int g = 0; g < st->ngrid; g++)
            st->cost_s[g] = y[g] < st->cost_s[g] ? y[g] : st->cost_s[g];
    } else {
        proto_calibrate_transfers(st);
        both_trials(st, st->grid, st->ngrid, st->trials, st->pool);
        for (int g = 0; g < st->ngrid; g++) {
            st->cost_s[g] = pool_quartile(&st->pool[g]);
            st->share_at[g] = hmb_probe_outstanding_share(st->cost_s[g], st->transfer_s[g]);
        }
    }
    switch_curve(st, y);
    for (int g = 0; g < st->ngrid; g++)
        x[g] = (double)st->grid[g];
    hmb_changepoint cp;
    /* view both: the step that changes the outstanding time by the largest factor (a page step
     * or a bend at 20-96 KB, 0.5-0.8 us on 3-15 us, was as clear against the noise as Open MPI's
     * switch, +0.9 us on 1.3 us) */
    const int stepped = hmb_clearest_step(st->ngrid, x, y, st->view == VIEW_BOTH, &cp) == 1;
    free(x);
    free(y);
    if (!stepped)
        return 0;
    if (st->view == VIEW_STEP)
        bisect_step(st, &cp, fresh_costs, STEP_BISECT_ROUND_TRIPS, 1, found);
    else
        bisect_step(st, &cp, both_costs, BOTH_BISECT_TRIALS_PER_TRIAL * st->trials, 0, found);
    return 1;
}

/* Views step and both: the curve (step: the fastest fresh-data cost of each grid size over all
 * iterations, `cost_us`; both: the lower quartile of the outstanding times of all iterations' trials,
 * `outstanding_us`, and its share of the transfer time) and the steps of the curve the switch is
 * read from (switch_curve): per step the break interval, the jump, both slopes and the residual
 * spread (docs/metrics.md, "proto"). */
void proto_curve_annotate(hmb_ctx *ctx, proto_state *st)
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
    hmb_result_add_rows(ctx, st->view == VIEW_STEP ? "cost_us" : "outstanding_us", rows, st->ngrid, 2);
    if (st->view == VIEW_BOTH) {
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
