/* async's set-up: option checks, the library's progress thread, the calc-factor calibration,
 * points, an operation's buffers, peers and handles, the state of a point and its teardown. The
 * operations, the phases and the metrics: pattern.c; data and checks: verify.c. */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "async.h"

/* ------------------------------------------------------------------ option lists */

/* --op and --progress (CHOICE_ARGS, parsed and checked by the harness): the ops in the order
 * given; the progress modes, a choice index in progress_kind order and test:P's P. */
static int option_ops(const hmb_ctx *ctx, async_op *ops)
{
    const hmb_choice_args op = HMB_OPTS(async_opts, ctx)->op;
    for (int i = 0; i < op.n; i++)
        ops[i] = (async_op)op.choice[i];
    return op.n;
}

/* The progress modes (at most MAX_MODES: async_check) and their point labels ("test:10"). */
static int option_progress(const hmb_ctx *ctx, progress_spec *modes, char (*label)[32])
{
    const hmb_choice_args p = HMB_OPTS(async_opts, ctx)->progress;
    const long long *choice = p.choice;
    const double *arg = p.arg;
    int n = p.n;
    for (int i = 0; i < n && i < MAX_MODES; i++) { /* a mode whose name ends in ':' takes a number */
        const char *name = async_progress_names[choice[i]];
        const int takes = name[strlen(name) - 1] == ':';
        modes[i] = (progress_spec){(progress_kind)choice[i], takes ? arg[i] : 0.0};
        if (takes)
            snprintf(label[i], sizeof label[i], "%s%g", name, arg[i]);
        else
            snprintf(label[i], sizeof label[i], "%s", name);
    }
    return n;
}

/* ------------------------------------------------------------------ library progress thread */

typedef struct {
    int has_facility; /* the library has an asynchronous progress thread at all */
    int on;           /* ... and it runs in this launch */
    char control[96]; /* how it is switched on */
    char why_not[320];
} library_progress;

static int env_truthy(const char *v)
{
    return v && (strcmp(v, "1") == 0 || strcasecmp(v, "yes") == 0 || strcasecmp(v, "on") == 0 ||
                 strcasecmp(v, "true") == 0 || strcasecmp(v, "enable") == 0);
}

static library_progress detect_library_progress(int thread_level_provided)
{
    library_progress lp = {0};
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    long long cvar = 0;
    if (strstr(version, "Open MPI")) {
        snprintf(lp.why_not, sizeof lp.why_not,
                 "impl: Open MPI has no asynchronous progress thread (progress happens only inside MPI calls)");
    } else if (strstr(version, "Intel")) {
        lp.has_facility = 1;
        snprintf(lp.control, sizeof lp.control, "I_MPI_ASYNC_PROGRESS=1");
        lp.on = env_truthy(getenv("I_MPI_ASYNC_PROGRESS"));
        if (!lp.on)
            snprintf(lp.why_not, sizeof lp.why_not,
                     "impl: the library's progress thread is off (I_MPI_ASYNC_PROGRESS unset or 0); "
                     "launch with I_MPI_ASYNC_PROGRESS=1");
    } else if (hmb_mpit_cvar_int("MPIR_CVAR_ASYNC_PROGRESS", &cvar)) {
        lp.has_facility = 1;
        snprintf(lp.control, sizeof lp.control, "MPIR_CVAR_ASYNC_PROGRESS=1");
        /* MPICH starts its progress thread only at MPI_THREAD_MULTIPLE. */
        lp.on = cvar != 0 && thread_level_provided == MPI_THREAD_MULTIPLE;
        if (!lp.on)
            snprintf(lp.why_not, sizeof lp.why_not,
                     "impl: the library's progress thread is off (MPIR_CVAR_ASYNC_PROGRESS=%lld%s); "
                     "launch with MPIR_CVAR_ASYNC_PROGRESS=1 — `hmb run` does this",
                     cvar, thread_level_provided == MPI_THREAD_MULTIPLE ? "" : ", thread level below MULTIPLE");
    } else {
        snprintf(lp.why_not, sizeof lp.why_not,
                 "impl: this MPI library exposes no known asynchronous progress control "
                 "(no MPI_T cvar MPIR_CVAR_ASYNC_PROGRESS)");
    }
    return lp;
}

async_baseline async_baseline_of(const hmb_ctx *ctx) { return (async_baseline)HMB_OPTS(async_opts, ctx)->baseline; }

static int async_grid2d(const hmb_ctx *ctx) { return HMB_OPTS(async_opts, ctx)->topology == TOPOLOGY_GRID2D; }

static int effective_neighbors(hmb_ctx *ctx)
{
    const async_opts *o = HMB_OPTS(async_opts, ctx);
    int k = (int)o->neighbors;
    /* The 2-D grid's natural neighbourhood is its 4 faces. */
    if (async_grid2d(ctx) && !o->given.neighbors)
        k = 4;
    return k;
}

/* ------------------------------------------------------------------ an operation's buffers and peers */

/* 1 if a message of size_bytes fits the int element counts MPI takes (size_bytes is the
 * message, or the block per peer for alltoall and neighbourhoods); else 0 and why. */
static int size_fits(size_t size_bytes, char *why, size_t whylen)
{
    if (size_bytes / sizeof(double) <= (size_t)INT_MAX)
        return 1;
    snprintf(why, whylen,
             "--sizes: %zu bytes is %zu doubles per message (per peer block for alltoall and neighbourhoods), "
             "more than an MPI int count holds (%d)",
             size_bytes, size_bytes / sizeof(double), INT_MAX);
    return 0;
}

/* Exchange partners: direction j sends to send_to[j] and receives from recv_from[j] (the
 * rank on the opposite side), so the message of direction j always meets a receive of
 * direction j, even where a small ring or grid makes neighbours repeat. */
static void ring_neighbors(async_exchange *ex, int k)
{
    for (int j = 0; j < k; j++) {
        int distance = j / 2 + 1, sign = j % 2 == 0 ? 1 : -1;
        int offset = ((sign * distance) % ex->nranks + ex->nranks) % ex->nranks;
        ex->send_to[j] = (ex->rank + offset) % ex->nranks;
        ex->recv_from[j] = (ex->rank - offset + ex->nranks) % ex->nranks;
    }
}

static void grid_neighbors(async_exchange *ex, int k)
{
    /* The harness topology: a periodic 2-D grid, faces then diagonals (k = 4 or 8, checked). */
    hmb_topo t;
    hmb_topo_build(&t, 2, k, NULL, ex->nranks, ex->rank, NULL, 1, 1);
    for (int j = 0; j < k; j++) {
        ex->send_to[j] = t.dir[j].to;
        ex->recv_from[j] = t.dir[j].from;
    }
}

/* The longest iteration period whose largest reduction sum stays below 2^53 (exact). */
static long long reduce_period(int nranks, int count)
{
    long long n = nranks, limit = 1LL << 53;
    long long headroom = limit - n * (n + 1) / 2 - n * (long long)count; /* n, count < 2^31 */
    long long period = (headroom / (n * n) + 1) / 2;
    return period < 1 ? 1 : period;
}

void async_exchange_init(async_exchange *ex, hmb_ctx *ctx, const hmb_point *pt, async_op op, const async_op_def *def,
                         size_t size_bytes, int neighbors, int grid2d, async_baseline baseline)
{
    memset(ex, 0, sizeof *ex);
    ex->ctx = ctx;
    ex->pt = pt;
    ex->op = op;
    ex->def = def;
    ex->world = hmb_comm(ctx);
    ex->graph = MPI_COMM_NULL;
    ex->persistent = MPI_REQUEST_NULL;
    ex->rank = hmb_rank(ctx);
    ex->nranks = hmb_size(ctx);
    ex->count = (int)(size_bytes / sizeof(double)); /* fits: size_fits() in check() */
    ex->nblocks = 1;
    ex->peer = (ex->rank + ex->nranks / 2) % ex->nranks;
    ex->baseline = baseline;
    if (def->blocks == ASYNC_BLOCKS_NEIGHBORS) {
        ex->nneighbors = neighbors;
        ex->nblocks = neighbors;
        if (grid2d)
            grid_neighbors(ex, neighbors);
        else
            ring_neighbors(ex, neighbors);
    } else if (def->blocks == ASYNC_BLOCKS_RANKS) {
        ex->nblocks = ex->nranks;
    }
    ex->reduce_period = reduce_period(ex->nranks, ex->count);
    size_t bytes = (size_t)ex->nblocks * (size_t)ex->count * sizeof(double);
    int allocated = 1;
    for (int phase = 0; phase < ASYNC_PHASES; phase++) {
        ex->buf[phase].send = hmb_buffer_alloc(ctx, bytes);
        ex->buf[phase].recv = hmb_buffer_alloc(ctx, bytes);
        allocated = allocated && ex->buf[phase].send && ex->buf[phase].recv;
    }
    /* Agreed before any collective: a failure on one rank must not leave the others waiting. */
    if (!hmb_all_agree(ctx, allocated)) {
        async_exchange_free(ex);
        hmb_usage_error(ctx, "cannot allocate %d x %zu bytes of message buffers on every rank", 2 * ASYNC_PHASES,
                        bytes);
    }
    if (def->register_checks)
        def->register_checks(ex);
    if (def->create)
        def->create(ex);
}

/* neighbor_alltoall's distributed graph over the exch neighbourhood. Unit weights rather than
 * MPI_UNWEIGHTED: Open MPI's sentinel (a small integer cast to a pointer) trips GCC's
 * -Wstringop-overread; neighbour collectives ignore weights. */
void async_create_graph(async_exchange *ex)
{
#ifdef HMB_HAVE_MPI_NEIGHBOR_ALLTOALL
    int weights[ASYNC_MAX_NEIGHBORS];
    for (int j = 0; j < ex->nneighbors; j++)
        weights[j] = 1;
    MPI_Dist_graph_create_adjacent(ex->world, ex->nneighbors, ex->recv_from, weights, ex->nneighbors, ex->send_to,
                                   weights, MPI_INFO_NULL, 0, &ex->graph);
#else
    (void)ex;
#endif
}

/* allreduce_init's persistent request, bound to the non-blocking phase's buffers. */
void async_create_persistent(async_exchange *ex)
{
#ifdef HMB_HAVE_MPI_ALLREDUCE_INIT
    MPI_Allreduce_init(ex->buf[ASYNC_NONBLOCKING].send, ex->buf[ASYNC_NONBLOCKING].recv, ex->count, MPI_DOUBLE,
                       MPI_SUM, ex->world, MPI_INFO_NULL, &ex->persistent);
#else
    (void)ex;
#endif
}

void async_exchange_free(async_exchange *ex)
{
    if (ex->persistent != MPI_REQUEST_NULL)
        MPI_Request_free(&ex->persistent);
    if (ex->graph != MPI_COMM_NULL)
        MPI_Comm_free(&ex->graph);
    /* Also used by the calibration in points(), outside any point: unregister here, not
     * after teardown, or the next point's --cache cold flush touches freed memory. */
    size_t bytes = (size_t)ex->nblocks * (size_t)ex->count * sizeof(double);
    for (int phase = 0; phase < ASYNC_PHASES; phase++) {
        hmb_buffer_free(ex->ctx, ex->buf[phase].send, bytes);
        hmb_buffer_free(ex->ctx, ex->buf[phase].recv, bytes);
    }
}

/* ------------------------------------------------------------------ checks, calibration, points */

void async_check(hmb_ctx *ctx, const async_op_def *defs)
{
    char err[256];
    async_op ops[ASYNC_OP_COUNT];
    int nops = option_ops(ctx, ops);
    if (HMB_OPTS(async_opts, ctx)->progress.n > MAX_MODES)
        hmb_usage_error(ctx, "--progress: more than %d modes", MAX_MODES);
    const size_t *sizes = hmb_common(ctx)->sizes.v;
    for (int i = 0; i < hmb_common(ctx)->sizes.n; i++) {
        if (sizes[i] == 0 || sizes[i] % sizeof(double) != 0)
            hmb_usage_error(ctx, "--sizes: %zu is not a positive multiple of 8 bytes (messages are doubles)", sizes[i]);
        if (!size_fits(sizes[i], err, sizeof err))
            hmb_usage_error(ctx, "%s", err);
    }
    int k = effective_neighbors(ctx);
    int grid = async_grid2d(ctx);
    if (grid && k != 4 && k != 8)
        hmb_usage_error(ctx, "--neighbors: %d on grid2d (choose 4 or 8)", k);
    if (!grid && k % 2 != 0)
        hmb_usage_error(ctx, "--neighbors: %d on a ring must be even (k/2 on each side)", k);
    int has_pairs = 0;
    for (int i = 0; i < nops; i++) {
        has_pairs |= defs[ops[i]].pairs;
        if (defs[ops[i]].pairs && hmb_size(ctx) % 2 != 0)
            hmb_usage_error(ctx, "--op %s pairs rank i with i+n/2: needs an even number of ranks, got %d",
                            async_op_names[ops[i]], hmb_size(ctx));
    }
    if (hmb_common(ctx)->given.compute && hmb_common(ctx)->compute <= 0)
        hmb_usage_error(ctx, "--compute: must be > 0 (or leave it out: C = --calc-factor x T_sync)");
    library_progress lp = detect_library_progress(hmb_thread_level_provided(ctx));
    hmb_header_add_num(ctx, "library_progress_thread", lp.on);
    hmb_header_add_str(ctx, "library_progress_control", lp.has_facility ? lp.control : "none");
    if (has_pairs) /* T_sync of pt2pt means a different operation under each baseline */
        hmb_header_add_str(ctx, "pt2pt_baseline", async_baseline_names[async_baseline_of(ctx)]);
}

/* The operation's blocking baseline, as the calibration times it (hmb_calc_factor_ns). */
static void blocking_run(void *arg)
{
    async_exchange *ex = arg;
    ex->def->blocking(ex, &ex->buf[ASYNC_BLOCKING]);
}

/* C = calc-factor x the blocking time: the fastest of a few blocking runs (interference
 * only slows a run down), the slowest rank of each run counting. Done once per (op, size)
 * before any point, so every progress mode of an op and size computes the same C, and no
 * progress thread (HMB's or a mode's) is running while it is measured. 0: op unsupported. */
static int64_t calibrate_compute_ns(hmb_ctx *ctx, async_op op, const async_op_def *def, size_t size_bytes)
{
    if (hmb_common(ctx)->given.compute)
        return hmb_common(ctx)->compute;
    if (def->missing)
        return 0;
    hmb_point calib_pt; /* names the op in a failure message */
    hmb_point_init(&calib_pt, async_point_params, size_bytes);
    async_point *cp = (async_point *)calib_pt.data.bytes;
    cp->op = op;
    cp->phase = "calibration";
    async_exchange ex;
    async_exchange_init(&ex, ctx, &calib_pt, op, def, size_bytes, effective_neighbors(ctx), async_grid2d(ctx),
                        async_baseline_of(ctx));
    if (def->fill) /* the reductions' operands */
        def->fill(&ex, 0, 0);
    double t_sync_s;
    int64_t c_ns = hmb_calc_factor_ns(ctx, ex.world, HMB_OPTS(async_opts, ctx)->calc_factor, blocking_run, &ex,
                                      &t_sync_s);
    async_exchange_free(&ex);
    return c_ns;
}

/* Per-run data: C for each (op, size), in the order of --op and --sizes. */
typedef struct {
    int nsizes;
    int op_slot[ASYNC_OP_COUNT];
    int64_t c_ns[];
} calibration;

static int64_t calibrated_c_ns(const hmb_ctx *ctx, async_op op, size_t size_bytes)
{
    const calibration *cal = hmb_run_data(ctx);
    const hmb_sizes sizes = hmb_common(ctx)->sizes;
    for (int s = 0; s < sizes.n; s++)
        if (sizes.v[s] == size_bytes)
            return cal->c_ns[cal->op_slot[op] * cal->nsizes + s];
    return 0;
}

void async_points(hmb_ctx *ctx, hmb_point_list *out, const async_op_def *defs)
{
    async_op ops[ASYNC_OP_COUNT];
    progress_spec modes[MAX_MODES];
    char label[MAX_MODES][32];
    int nops = option_ops(ctx, ops), nmodes = option_progress(ctx, modes, label);
    const size_t *sizes = hmb_common(ctx)->sizes.v;
    const int nsizes = hmb_common(ctx)->sizes.n;
    const char *kept[MAX_MODES]; /* point labels must outlive the run */
    for (int m = 0; m < nmodes; m++)
        kept[m] = strdup(label[m]);
    calibration *cal = calloc(1, sizeof *cal + (size_t)(nops * nsizes) * sizeof cal->c_ns[0]);
    cal->nsizes = nsizes;
    for (int o = 0; o < nops; o++) {
        cal->op_slot[ops[o]] = o;
        for (int s = 0; s < nsizes; s++)
            cal->c_ns[o * nsizes + s] = calibrate_compute_ns(ctx, ops[o], &defs[ops[o]], sizes[s]);
    }
    hmb_set_run_data(ctx, cal);
    for (int o = 0; o < nops; o++)
        for (int m = 0; m < nmodes; m++)
            for (int s = 0; s < nsizes; s++) {
                async_point *p = hmb_points_new(out, sizes[s]);
                p->op = ops[o];
                p->progress = kept[m];
                p->progress_item = m;
                if (defs[ops[o]].blocks == ASYNC_BLOCKS_NEIGHBORS)
                    p->neighbors = effective_neighbors(ctx);
            }
}

/* The point's progress mode: the --progress item with its label. */
static progress_spec point_mode(const hmb_ctx *ctx, const hmb_point *pt)
{
    progress_spec modes[MAX_MODES];
    char label[MAX_MODES][32];
    option_progress(ctx, modes, label);
    return modes[HMB_POINT(async_point, pt)->progress_item];
}

/* Why this rank cannot run the point ("" if it can). Local facts only: the caller agrees
 * across ranks before any collective (an environment variable may differ per rank). */
static void local_unsupported_reason(hmb_ctx *ctx, const async_op_def *def, const async_progress_def *progress,
                                     const library_progress *lp, char *why, size_t whylen)
{
    why[0] = '\0';
    int provided = hmb_thread_level_provided(ctx);
    if (def->missing)
        snprintf(why, whylen, "%s", def->missing);
    else if (progress->library_thread && !lp->on)
        snprintf(why, whylen, "%s", lp->why_not);
    else if (progress->hmb_thread && provided < MPI_THREAD_MULTIPLE)
        snprintf(why, whylen, "thread: needs MPI_THREAD_MULTIPLE, the library provides MPI_THREAD_%s",
                 hmb_thread_level_name(provided));
}

/* Before measuring, every rank at once probes its rate with the point's work (at most
 * PROBE_MAX_NS a request, ~10 ms in all). A rate measured at start-up during another process's
 * burst reads low: once the core is free every kernel run comes out shorter than C, and every
 * sample would be left out as too fast (a neighbour's burst on a shared machine). The probe judges
 * as a sample is judged (hmb_async_compute_too_fast); the harness then measures the sustained
 * rate again and the point uses that. The result says how many ranks did. */
#define PROBE_MAX_NS 10000000
enum { PROBE_MAX_RUNS = 5 };

static void probe_rate(hmb_ctx *ctx, async_state *s)
{
    int64_t ns = s->c_ns < PROBE_MAX_NS ? s->c_ns : PROBE_MAX_NS;
    int runs = ns > 0 ? (int)(PROBE_MAX_NS / ns) : 1;
    runs = runs < 1 ? 1 : runs > PROBE_MAX_RUNS ? PROBE_MAX_RUNS : runs;
    double tolerance = hmb_async_compute_tolerance((double)ns * 1e-9, hmb_compute_calibration_error(ctx, ns));
    MPI_Barrier(hmb_comm(ctx));
    int remeasured = 0;
    double ratio = hmb_compute_probe_rate(ctx, ns, runs, tolerance, &remeasured);
    double counted[1] = {remeasured}, shortest[1] = {-ratio}; /* the shortest, through a max */
    hmb_reduce_sum(ctx, counted, 1);
    hmb_reduce_max(ctx, shortest, 1);
    s->rate_probe[0] = counted[0], s->rate_probe[1] = -shortest[0];
}

void *async_setup(hmb_ctx *ctx, const hmb_point *pt, const async_op_def *ops, const async_progress_def *progress)
{
    async_op op = (async_op)HMB_POINT(async_point, pt)->op;
    progress_spec mode = point_mode(ctx, pt);
    library_progress lp = detect_library_progress(hmb_thread_level_provided(ctx));
    char why[320];
    local_unsupported_reason(ctx, &ops[op], &progress[mode.kind], &lp, why, sizeof why);
    hmb_progress *thread = NULL;
    if (!why[0] && progress[mode.kind].hmb_thread && !(thread = hmb_progress_start(ctx)))
        snprintf(why, sizeof why, "thread: could not start HMB's progress thread on rank %d", hmb_rank(ctx));
    /* Every rank skips the point if one cannot run it; the ranks that cannot say why. */
    if (!hmb_all_agree(ctx, why[0] == '\0')) {
        if (thread)
            hmb_progress_stop(thread);
        if (why[0])
            hmb_unsupported(ctx, "%s", why);
        return NULL;
    }
    async_state *s = calloc(1, sizeof *s);
    if (!hmb_all_agree(ctx, s != NULL))
        hmb_usage_error(ctx, "cannot allocate the benchmark state on every rank");
    s->mode = mode;
    s->progress = &progress[mode.kind];
    s->library_thread = lp.on;
    s->thread = thread;
    async_exchange_init(&s->ex, ctx, pt, op, &ops[op], pt->size_bytes, effective_neighbors(ctx), async_grid2d(ctx),
                        async_baseline_of(ctx));
    s->c_ns = calibrated_c_ns(ctx, op, pt->size_bytes);
    s->calibration_error = hmb_compute_calibration_error(ctx, s->c_ns);
    s->fastest_kernel_ratio = INFINITY;
    probe_rate(ctx, s);
    return s;
}

void async_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    async_state *s = state;
    if (!s)
        return;
    if (s->thread)
        hmb_progress_stop(s->thread);
    async_exchange_free(&s->ex);
    free(s);
}
