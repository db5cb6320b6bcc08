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
 *   after the traffic, so the memory per peer can be projected (docs/metrics.md, "proto"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

/* One-way time of a blocking transfer of each grid size (the fastest of a few round trips),
 * broadcast from rank 0: the probe computes about twice as long. */
static double transfer_time(proto_state *st, size_t size)
{
    MPI_Comm comm = hmb_comm(st->ctx);
    const int n = (int)size;
    double best = HUGE_VAL;
    for (int k = 0; k < CALIBRATION_ROUND_TRIPS && st->peer >= 0; k++) {
        double t0 = hmb_now();
        if (st->is_sender) {
            MPI_Send(st->send, n, MPI_BYTE, st->peer, TAG_DATA, comm);
            MPI_Recv(st->recv, n, MPI_BYTE, st->peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(st->recv, n, MPI_BYTE, st->peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
            MPI_Send(st->send, n, MPI_BYTE, st->peer, TAG_DATA, comm);
        }
        double rtt = hmb_now() - t0;
        best = rtt < best ? rtt : best;
    }
    best /= 2;
    MPI_Bcast(&best, 1, MPI_DOUBLE, 0, comm);
    return best;
}

/* The fastest one-way transfer time of every grid size so far (views other than both: once, at
 * set-up; both: again in every iteration). */
void proto_calibrate_transfers(proto_state *st)
{
    hmb_phase(st->ctx, "probe: transfer calibration");
    for (int g = 0; g < st->ngrid; g++)
        st->transfer_s[g] = fmin(st->transfer_s[g], transfer_time(st, st->grid[g]));
}

double proto_compute_for(const proto_state *st, size_t size)
{
    int g = 0;
    while (g < st->ngrid - 1 && st->grid[g] < size)
        g++;
    double c = 2.0 * st->transfer_s[g];
    return c > st->min_compute_s ? c : st->min_compute_s;
}

/* MPI_Wait, its start and end in the global time base. */
void proto_timed_wait(hmb_ctx *ctx, MPI_Request *req, double *start, double *end)
{
    double t0 = hmb_now();
    MPI_Wait(req, MPI_STATUS_IGNORE);
    double t1 = hmb_now();
    *start = hmb_to_global(ctx, t0);
    *end = hmb_to_global(ctx, t1);
}

/* One trial at one size: both sides post, compute with no MPI call, then wait. The observed
 * side computes C, its peer C + lead: the peer's MPI_Wait is its first MPI call after posting,
 * so the observed side's wait that ended before the peer's began needed nothing of the peer.
 * Returns the verdict (hmb_probe_verdict) every rank agrees on. A time threshold on the wait
 * alone was tried first and is not used: on this loaded 2-core VM the side that must post
 * second is often descheduled for longer than any lead, so an eager message arrived late and
 * read as a handshake; comparing with the peer's own clock reading is immune to that.
 * A single MPI_Test is no signal either: MPICH's does not always complete an eager receive
 * whose data are there, and a receiver completes a single-copy (CMA) transfer inside it. */
static int probe_once(proto_state *st, size_t size)
{
    hmb_ctx *ctx = st->ctx;
    MPI_Comm comm = hmb_comm(ctx);
    const int n = (int)size, part = st->probe_no++;
    const int observed = st->view == VIEW_SENDER ? st->is_sender : !st->is_sender;
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
        if (st->view == VIEW_RECV_LATE) {
            MPI_Isend(st->send, n, MPI_BYTE, st->peer, TAG_DATA, comm, &req);
            MPI_Send(NULL, 0, MPI_BYTE, st->peer, TAG_TOKEN, comm); /* "sent": post now */
        } else {
            MPI_Recv(NULL, 0, MPI_BYTE, st->peer, TAG_TOKEN, comm, MPI_STATUS_IGNORE); /* "posted" */
            MPI_Isend(st->send, n, MPI_BYTE, st->peer, TAG_DATA, comm, &req);
        }
        hmb_compute_ns(ctx, compute_ns);
        proto_timed_wait(ctx, &req, &wait_start, &wait_end);
    } else if (st->peer >= 0) {
        if (st->view == VIEW_RECV_LATE)
            MPI_Recv(NULL, 0, MPI_BYTE, st->peer, TAG_TOKEN, comm, MPI_STATUS_IGNORE);
        MPI_Irecv(st->recv, n, MPI_BYTE, st->peer, TAG_DATA, comm, &req);
        if (st->view != VIEW_RECV_LATE)
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

static void tradeoff_iterate(proto_state *st, hmb_sample *out)
{
    hmb_ctx *ctx = st->ctx;
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

static int proto_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    proto_state *st = state;
    if (st->test == TEST_TRADEOFF) {
        tradeoff_iterate(st, out);
        return 0;
    }
    st->iter = iter;
    st->probe_no = 0;
    switch_list found = {0};
    double t0 = hmb_now();
    int count = st->view == VIEW_STEP || st->view == VIEW_BOTH
                    ? proto_curve_search(st, &found)
                    : hmb_find_switches(st->grid, st->ngrid, st->element, probe_size, st,
                                        found.lo_hi, found.progressed_after, MAX_SWITCHES);
    found.count = count < MAX_SWITCHES ? count : MAX_SWITCHES;
    hmb_record_at(ctx, out, M_SWITCHES, count);
    hmb_record_at(ctx, out, M_FIRST_SWITCH, count > 0 ? (double)found.lo_hi[1] : NAN);
    hmb_record_at(ctx, out, M_ITER_TIME, (hmb_now() - t0) * 1e6);
    if (st->nfound < MAX_FOUND && iter >= hmb_common(ctx)->warmup) /* warm-up iterations do not vote */
        st->found[st->nfound++] = found;
    return 0;
}

/* The probe validates inside each trial (probe_once); tradeoff checks every message here. */
static void proto_verify(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    proto_state *st = state;
    if (st->test != TEST_TRADEOFF || st->is_sender)
        return;
    for (int j = 0; j < st->window; j++)
        hmb_check_buffer(ctx, pt, st->recv + (size_t)j * st->size, st->size, st->peer, j, iter);
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
    .setup = proto_setup,
    .prepare = proto_prepare,
    .iterate = proto_iterate,
    .verify = proto_verify,
    .teardown = proto_teardown,
    .annotate = proto_annotate,
};
HMB_REGISTER(proto_bench);
