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

#include "hmb/hmb.h"
#include "hmb/metrics.h"

enum { VARIANT_REAL, VARIANT_LOWCOST };
enum { PATTERN_2D5, PATTERN_2D9, PATTERN_3D7, PATTERN_3D27, NPATTERNS };
static const struct {
    const char *name;
    int ndims, neighbours, ranks;
} patterns[NPATTERNS] = {{"2d5", 2, 4, 9}, {"2d9", 2, 8, 9}, {"3d7", 3, 6, 27}, {"3d27", 3, 26, 27}};
static const int grid3[3] = {3, 3, 3};

/* MPI_T variables: ob1's per-peer queue lengths, MPICH's recvq variables (--enable-mpit-pvars). */
enum { PV_OB1_POSTED, PV_OB1_UNEXPECTED, PV_POSTED, PV_UNEXPECTED, PV_POSTED_ATTEMPTS, PV_UNEXPECTED_ATTEMPTS,
       PV_TIME_FAILED_POSTED, PV_TIME_UNEXPECTED, NPVARS };
static const char *const pvar_names[NPVARS] = {
    "pml_ob1_posted_recvq_length", "pml_ob1_unexpected_msgq_length", "posted_recvq_length",
    "unexpected_recvq_length",     "posted_recvq_match_attempts",    "unexpected_recvq_match_attempts",
    "time_failed_matching_postedq", "time_matching_unexpectedq"};

enum { M_T_ITER, M_POST_PER_MSG, M_WAIT_PER_MSG, M_POSTED_Q, M_POSTED_Q_PEER_MAX, M_UNEXPECTED_Q,
       M_UNEXPECTED_Q_PEER_MAX, M_SEARCHED_PER_MSG, M_MATCH_TIME_PER_MSG, NMETRICS };

static const hmb_option match_options[] = {
    {"pattern", HMB_OPT_CHOICES, "2d9",
     "stencil: 2d5, 2d9 (3x3 ranks), 3d7, 3d27 (3x3x3); real runs need the grid's rank count", 0, 0,
     "2d5|2d9|3d7|3d27", 0},
    {"variant", HMB_OPT_CHOICE, "lowcost", "real: every rank runs the halo; lowcost: 2 ranks, rank 1 emulates the "
     "centre's neighbours", 0, 0, "real|lowcost", 0},
    {"shuffle", HMB_OPT_FLAG, "0", "shuffle each thread's posting order every iteration (seeded by --seed)", 0, 0,
     NULL, 0},
    {"no-pvars", HMB_OPT_FLAG, "0", "do not read MPI_T variables (queue reads cost time inside the iteration)", 0,
     0, NULL, 0},
    HMB_OPTION_END};

static const hmb_default match_defaults[] = {{"sizes", "1K"}, {NULL, NULL}};

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

typedef struct {
    int variant, pattern, threads, ndirs;
    int centre;         /* this rank is measured (real: grid centre; lowcost: rank 0) */
    int emulator;       /* lowcost rank 1 */
    int centre_rank;    /* the centre's MPI rank in this run (lowcost: 0) */
    int shuffle_rank;   /* grid rank seeding the shuffle: the real centre's in lowcost */
    int nrun;           /* threads this rank runs (emulator: directions x T) */
    size_t bytes;
    hmb_topo topo;      /* this rank's grid position (lowcost: the centre's) */
    int send_peer[HMB_TOPO_MAX_DIRS], recv_peer[HMB_TOPO_MAX_DIRS]; /* MPI ranks here, or MPI_PROC_NULL */
    int recv_label[HMB_TOPO_MAX_DIRS]; /* grid rank whose data receive slot d must hold */
    int send_label[HMB_TOPO_MAX_DIRS]; /* grid rank whose data send slot d carries */
    MPI_Comm comm, ctl;
    unsigned char *sbuf, *rbuf; /* slot d T + t, bytes each */
    MPI_Request *reqs;          /* 2 ndirs per running thread */
    int *order;                 /* ndirs per running thread */
    int *tag_log;               /* centre, iteration 0: per thread ndirs receive tags then ndirs send tags */
    double *begin, *posted, *done, *paused;
    hmb_pvars *pv;
    int have_posted_q, have_unexpected_q, have_searched, have_match_time;
    int oversubscribed;         /* the emulator's threads outnumber a node's CPUs */
    double *pv_values;          /* one read's values (count <= comm size) */
    double q[4];                /* posted total, posted peer max, unexpected total, unexpected peer max */
    long long seed;
} match_state;

static int tag_of(const match_state *st, int d, int t) { return d * st->threads + t; }
static unsigned char *slot(unsigned char *buf, const match_state *st, int d, int t)
{
    return buf + (size_t)(d * st->threads + t) * st->bytes;
}

static int centre_grid_rank(const hmb_topo *t)
{
    int c[3] = {1, 1, t->ndims == 3 ? 1 : 0};
    return hmb_topo_rank_of(t, c);
}

/* --pattern as a list of indices; real runs need every chosen pattern's grid to match the ranks. */
static void match_check(hmb_ctx *ctx)
{
    unsigned long long chosen = hmb_opt_choices(ctx, "pattern");
    int lowcost = strcmp(hmb_opt_str(ctx, "variant"), "lowcost") == 0;
    if (lowcost && hmb_size(ctx) != 2)
        hmb_usage_error(ctx, "--variant lowcost runs on exactly 2 ranks (centre and emulator), got %d", hmb_size(ctx));
    for (int p = 0; p < NPATTERNS; p++) {
        if (!(chosen & (1ull << p)))
            continue;
        if (!lowcost && hmb_size(ctx) != patterns[p].ranks)
            hmb_usage_error(ctx, "--variant real --pattern %s needs a %s grid: %d ranks, got %d", patterns[p].name,
                            patterns[p].ndims == 2 ? "3x3" : "3x3x3", patterns[p].ranks, hmb_size(ctx));
        if (lowcost && patterns[p].neighbours * hmb_threads(ctx) > HMB_MAX_THREADS)
            hmb_usage_error(ctx, "--pattern %s with --threads %d: the emulator needs %d threads (at most %d)",
                            patterns[p].name, hmb_threads(ctx), patterns[p].neighbours * hmb_threads(ctx),
                            HMB_MAX_THREADS);
    }
    if (hmb_opt_flag(ctx, "no-pvars")) {
        hmb_header_add_str(ctx, "queue_depth", "not read (--no-pvars)");
        hmb_header_add_str(ctx, "items_searched", "not read (--no-pvars)");
        return;
    }
    /* What this library exposes, once, for the stdout header and the run record. */
    hmb_pvars *pv = hmb_pvars_open(ctx, pvar_names, NPVARS, hmb_comm(ctx));
    int ob1 = hmb_pvars_available(pv, PV_OB1_POSTED), recvq = hmb_pvars_available(pv, PV_POSTED);
    int searched = hmb_pvars_available(pv, PV_POSTED_ATTEMPTS) && hmb_pvars_available(pv, PV_UNEXPECTED_ATTEMPTS);
    hmb_header_add_str(ctx, "queue_depth", ob1 ? "pml_ob1_posted_recvq_length,pml_ob1_unexpected_msgq_length"
                                           : recvq ? "posted_recvq_length,unexpected_recvq_length" : "unavailable");
    hmb_header_add_str(ctx, "items_searched",
                       searched ? "posted_recvq_match_attempts,unexpected_recvq_match_attempts" : "unavailable");
    hmb_pvars_close(pv);
}

static void match_points(hmb_ctx *ctx, hmb_point_list *out)
{
    unsigned long long chosen = hmb_opt_choices(ctx, "pattern");
    int nsizes = 0;
    const size_t *sizes = hmb_opt_sizes(ctx, "sizes", &nsizes);
    for (int p = 0; p < NPATTERNS; p++) {
        if (!(chosen & (1ull << p)))
            continue;
        for (int s = 0; s < nsizes; s++) {
            hmb_point *pt = hmb_points_add(out, sizes[s]);
            hmb_point_set_str(pt, "pattern", patterns[p].name);
            hmb_point_set_str(pt, "variant", hmb_opt_str(ctx, "variant"));
            hmb_point_set_int(pt, "threads", hmb_threads(ctx));
        }
    }
}

static void match_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    (void)pt;
    match_state *st = state;
    if (!st)
        return;
    hmb_cache_unregister_all(ctx);
    hmb_pvars_close(st->pv);
    if (st->comm != MPI_COMM_NULL)
        MPI_Comm_free(&st->comm);
    if (st->ctl != MPI_COMM_NULL)
        MPI_Comm_free(&st->ctl);
    free(st->sbuf);
    free(st->rbuf);
    free(st->reqs);
    free(st->order);
    free(st->tag_log);
    free(st->begin);
    free(st->posted);
    free(st->done);
    free(st->paused);
    free(st->pv_values);
    free(st);
}

static void open_pvars(hmb_ctx *ctx, match_state *st)
{
    st->pv = hmb_pvars_open(ctx, pvar_names, NPVARS, st->comm);
    st->have_posted_q = hmb_pvars_available(st->pv, PV_OB1_POSTED) || hmb_pvars_available(st->pv, PV_POSTED);
    st->have_unexpected_q =
        hmb_pvars_available(st->pv, PV_OB1_UNEXPECTED) || hmb_pvars_available(st->pv, PV_UNEXPECTED);
    st->have_searched =
        hmb_pvars_available(st->pv, PV_POSTED_ATTEMPTS) && hmb_pvars_available(st->pv, PV_UNEXPECTED_ATTEMPTS);
    /* a timer in library ticks has no known unit: not converted, not reported */
    st->have_match_time = hmb_pvars_available(st->pv, PV_TIME_FAILED_POSTED) &&
                          hmb_pvars_available(st->pv, PV_TIME_UNEXPECTED) &&
                          strcmp(hmb_pvars_unit(st->pv, PV_TIME_FAILED_POSTED), "s") == 0 &&
                          strcmp(hmb_pvars_unit(st->pv, PV_TIME_UNEXPECTED), "s") == 0;
    int most = 1;
    for (int i = 0; i < NPVARS; i++)
        if (hmb_pvars_count(st->pv, i) > most)
            most = hmb_pvars_count(st->pv, i);
    st->pv_values = calloc((size_t)most, sizeof(double));
    hmb_pvars_start(st->pv);
}

static void *match_setup(hmb_ctx *ctx, const hmb_point *pt)
{
    const char *pname = hmb_point_str(pt, "pattern");
    match_state *st = calloc(1, sizeof *st);
    if (!st) { /* every rank skips the point; no collective made yet */
        hmb_unsupported(ctx, "cannot allocate the benchmark state");
        return NULL;
    }
    /* collective: before any way out of setup */
    MPI_Comm_dup(hmb_comm(ctx), &st->comm);
    MPI_Comm_dup(hmb_comm(ctx), &st->ctl);
    while (strcmp(patterns[st->pattern].name, pname) != 0)
        st->pattern++;
    st->variant = strcmp(hmb_point_str(pt, "variant"), "lowcost") == 0 ? VARIANT_LOWCOST : VARIANT_REAL;
    st->threads = hmb_threads(ctx);
    st->bytes = pt->size_bytes;
    st->seed = hmb_opt_int(ctx, "seed");
    int ndims = patterns[st->pattern].ndims, ranks = patterns[st->pattern].ranks;
    int rank = hmb_rank(ctx);
    /* lowcost: the centre's grid position; its rank in the grid comes from a first build */
    const char *err = hmb_topo_build(&st->topo, ndims, patterns[st->pattern].neighbours, grid3, ranks,
                                     st->variant == VARIANT_REAL ? rank : 0, NULL, 1, 0);
    int centre_grid = centre_grid_rank(&st->topo);
    if (!err && st->variant == VARIANT_LOWCOST)
        err = hmb_topo_build(&st->topo, ndims, patterns[st->pattern].neighbours, grid3, ranks, centre_grid, NULL, 1,
                             0);
    if (err) { /* cannot happen for the fixed grids: a bug */
        hmb_unsupported(ctx, "topology: %s", err);
        return st;
    }
    st->ndirs = st->topo.ndirs;
    st->shuffle_rank = st->variant == VARIANT_REAL ? rank : centre_grid;
    st->centre_rank = st->variant == VARIANT_REAL ? centre_grid : 0;
    st->centre = rank == st->centre_rank;
    st->emulator = st->variant == VARIANT_LOWCOST && rank == 1;
    st->nrun = st->emulator ? st->ndirs * st->threads : st->threads;
    for (int d = 0; d < st->ndirs; d++) {
        const hmb_topo_dir *dir = &st->topo.dir[d];
        if (st->variant == VARIANT_REAL) {
            st->send_peer[d] = dir->to;
            st->recv_peer[d] = dir->from;
            st->send_label[d] = rank;
            st->recv_label[d] = dir->from;
        } else if (!st->emulator) { /* the centre has every neighbour */
            st->send_peer[d] = st->recv_peer[d] = 1;
            st->send_label[d] = centre_grid;
            st->recv_label[d] = dir->from;
        } else { /* send slot d: the neighbour at dir[d].from's message to the centre */
            st->send_peer[d] = st->recv_peer[d] = 0;
            st->send_label[d] = dir->from;
            st->recv_label[d] = centre_grid;
        }
    }
    /* More threads than --threads on the emulator: OpenMP must give them all. */
    int got = 0;
#pragma omp parallel num_threads(st->nrun)
#pragma omp single
    got = omp_get_num_threads();
    st->oversubscribed = hmb_threads_oversubscribe(ctx, st->nrun); /* collective */
    if (st->nrun > 1 && hmb_thread_level_provided(ctx) < MPI_THREAD_MULTIPLE)
        hmb_unsupported(ctx, "%d threads communicate at once: needs MPI_THREAD_MULTIPLE, the library provides %s",
                        st->nrun, hmb_thread_level_name(hmb_thread_level_provided(ctx)));
    else if (got != st->nrun)
        hmb_unsupported(ctx, "OpenMP gave %d of the %d threads this rank runs (OMP_THREAD_LIMIT?)", got, st->nrun);
    size_t slots = (size_t)st->ndirs * (size_t)st->threads;
    st->sbuf = malloc(slots * st->bytes + 1);
    st->rbuf = malloc(slots * st->bytes + 1);
    st->reqs = calloc((size_t)st->nrun * 2 * (size_t)st->ndirs, sizeof(MPI_Request));
    st->order = calloc((size_t)st->nrun * (size_t)st->ndirs, sizeof(int));
    st->tag_log = malloc((size_t)st->threads * 2 * (size_t)st->ndirs * sizeof(int));
    st->begin = calloc((size_t)st->nrun, sizeof(double));
    st->posted = calloc((size_t)st->nrun, sizeof(double));
    st->done = calloc((size_t)st->nrun, sizeof(double));
    st->paused = calloc((size_t)st->nrun, sizeof(double));
    if (!st->sbuf || !st->rbuf || !st->reqs || !st->order || !st->tag_log || !st->begin || !st->posted ||
        !st->done || !st->paused) {
        hmb_unsupported(ctx, "cannot allocate 2 x %zu message slots of %zu bytes", slots, st->bytes);
        return st;
    }
    hmb_cache_register(ctx, st->sbuf, slots * st->bytes);
    hmb_cache_register(ctx, st->rbuf, slots * st->bytes);
    if (!hmb_opt_flag(ctx, "no-pvars") && (st->centre || rank == 0))
        open_pvars(ctx, st);
    return st;
}

/* Send slots hold iteration iter's data; receive slots poison (a missing message is caught). */
static void match_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    (void)pt;
    match_state *st = state;
    long gen = hmb_data_gen(ctx, iter);
    for (int d = 0; d < st->ndirs; d++) {
        if (st->send_peer[d] == MPI_PROC_NULL)
            continue;
        for (int t = 0; t < st->threads; t++)
            hmb_fill(slot(st->sbuf, st, d, t), st->bytes, st->send_label[d], tag_of(st, d, t), gen);
    }
    memset(st->rbuf, 0xA5, (size_t)st->ndirs * (size_t)st->threads * st->bytes);
}

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
        log[k] = st->recv_peer[d] == MPI_PROC_NULL ? -1 : tag_of(st, d, t);
        if (log[k] >= 0)
            MPI_Irecv(slot(st->rbuf, st, d, t), (int)st->bytes, MPI_BYTE, st->recv_peer[d], log[k], st->comm,
                      &req[n++]);
    }
    if (sample && t == 0) {
        double t0 = hmb_now();
        sample_queues(st);
        st->paused[t] = hmb_now() - t0;
    }
    for (int k = 0; k < st->ndirs; k++) {
        int d = order[k];
        log[st->ndirs + k] = st->send_peer[d] == MPI_PROC_NULL ? -1 : tag_of(st, d, t);
        if (log[st->ndirs + k] >= 0)
            MPI_Isend(slot(st->sbuf, st, d, t), (int)st->bytes, MPI_BYTE, st->send_peer[d], log[st->ndirs + k],
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
    MPI_Irecv(slot(st->rbuf, st, e, t), (int)st->bytes, MPI_BYTE, 0, tag_of(st, e, t), st->comm, &req[0]);
    MPI_Isend(slot(st->sbuf, st, d, t), (int)st->bytes, MPI_BYTE, 0, tag_of(st, d, t), st->comm, &req[1]);
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
static void centre_figures(match_state *st, long iter, int sample, double searched0, double time0, hmb_sample *out)
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
        memcpy(out->value, v, sizeof v);
    }
}

static int match_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    (void)pt;
    match_state *st = state;
    int shuffle = hmb_opt_flag(ctx, "shuffle");
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
        centre_figures(st, iter, sample, searched0, time0, out);
    if (hmb_rank(ctx) == 0 && st->centre_rank != 0) {
        hmb_phase(ctx, "centre's figures");
        MPI_Recv(out->value, NMETRICS, MPI_DOUBLE, st->centre_rank, 0, st->ctl, MPI_STATUS_IGNORE);
        if (iter == 0)
            MPI_Recv(st->tag_log, st->threads * 2 * st->ndirs, MPI_INT, st->centre_rank, 1, st->ctl,
                     MPI_STATUS_IGNORE);
    }
    return 0;
}

static void match_verify(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    match_state *st = state;
    if (!hmb_validate_enabled(ctx))
        return;
    for (int d = 0; d < st->ndirs; d++) {
        if (st->recv_peer[d] == MPI_PROC_NULL)
            continue;
        for (int t = 0; t < st->threads; t++) {
            size_t bad = 0;
            int tag = tag_of(st, d, t);
            if (!hmb_check(ctx, slot(st->rbuf, st, d, t), st->bytes, st->recv_label[d], tag, iter, &bad)) {
                const int *o = st->topo.dir[d].off;
                hmb_validation_failure(ctx, pt, iter, tag,
                                       "rank %d: message of direction %d (%+d,%+d,%+d), thread %d, tag %d from grid "
                                       "rank %d (MPI rank %d): byte %zu of %zu wrong",
                                       hmb_rank(ctx), d, o[0], o[1], o[2], t, tag, st->recv_label[d],
                                       st->recv_peer[d], bad, st->bytes);
            }
        }
    }
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
    hmb_topo_build(&centre, st->topo.ndims, patterns[st->pattern].neighbours, grid3, st->topo.size,
                   centre_grid_rank(&st->topo), NULL, 1, 0);
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
    .options = match_options,
    .defaults = match_defaults,
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
