/* async's options, the library's progress thread, the calc-factor calibration, points, set-up,
 * teardown and the record. The phases and metrics: async.c. */
#define _GNU_SOURCE
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
    for (int i = 0; i < n && i < MAX_MODES; i++) {
        modes[i] = (progress_spec){(progress_kind)choice[i], choice[i] == PROG_TEST ? arg[i] : 0.0};
        if (modes[i].kind == PROG_TEST)
            snprintf(label[i], sizeof label[i], "test:%g", arg[i]);
        else
            snprintf(label[i], sizeof label[i], "%s", (const char *[]){"none", "test", "thread", "impl"}[choice[i]]);
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

static async_baseline baseline_option(const hmb_ctx *ctx)
{
    return (async_baseline)HMB_OPTS(async_opts, ctx)->baseline;
}

static int grid2d(const hmb_ctx *ctx) { return HMB_OPTS(async_opts, ctx)->topology == TOPOLOGY_GRID2D; }

static int effective_neighbors(hmb_ctx *ctx)
{
    const async_opts *o = HMB_OPTS(async_opts, ctx);
    int k = (int)o->neighbors;
    /* The 2-D grid's natural neighbourhood is its 4 faces. */
    if (grid2d(ctx) && !o->given.neighbors)
        k = 4;
    return k;
}

void async_check(hmb_ctx *ctx)
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
        if (!async_size_fits(sizes[i], err, sizeof err))
            hmb_usage_error(ctx, "%s", err);
    }
    int k = effective_neighbors(ctx);
    int grid = grid2d(ctx);
    if (grid && k != 4 && k != 8)
        hmb_usage_error(ctx, "--neighbors: %d on grid2d (choose 4 or 8)", k);
    if (!grid && k % 2 != 0)
        hmb_usage_error(ctx, "--neighbors: %d on a ring must be even (k/2 on each side)", k);
    int has_pt2pt = 0;
    for (int i = 0; i < nops; i++)
        has_pt2pt |= ops[i] == OP_PT2PT;
    if (has_pt2pt && hmb_size(ctx) % 2 != 0)
        hmb_usage_error(ctx, "--op pt2pt pairs rank i with i+n/2: needs an even number of ranks, got %d", hmb_size(ctx));
    if (hmb_common(ctx)->given.compute && hmb_common(ctx)->compute <= 0)
        hmb_usage_error(ctx, "--compute: must be > 0 (or leave it out: C = --calc-factor x T_sync)");
    library_progress lp = detect_library_progress(hmb_thread_level_provided(ctx));
    hmb_header_add_num(ctx, "library_progress_thread", lp.on);
    hmb_header_add_str(ctx, "library_progress_control", lp.has_facility ? lp.control : "none");
    if (has_pt2pt) /* T_sync of pt2pt means a different operation under each baseline */
        hmb_header_add_str(ctx, "pt2pt_baseline", baseline_option(ctx) == ASYNC_BASELINE_SENDRECV ? "sendrecv" : "pingpong");
}

static void blocking_run(void *ex) { async_blocking(ex); }

/* C = calc-factor x the blocking time: the fastest of a few blocking runs (interference
 * only slows a run down), the slowest rank of each run counting. Done once per (op, size)
 * before any point, so every progress mode of an op and size computes the same C, and no
 * progress thread (HMB's or a mode's) is running while it is measured. 0: op unsupported. */
static int64_t calibrate_compute_ns(hmb_ctx *ctx, async_op op, size_t size_bytes)
{
    if (hmb_common(ctx)->given.compute)
        return hmb_common(ctx)->compute;
    char why[256];
    if (!async_op_supported(op, why, sizeof why))
        return 0;
    hmb_point calib_pt; /* names the op in a failure message */
    hmb_point_init(&calib_pt, async_point_params, size_bytes);
    async_point *cp = (async_point *)calib_pt.data.bytes;
    cp->op = op;
    cp->phase = "calibration";
    async_exchange ex;
    async_exchange_init(&ex, ctx, &calib_pt, op, size_bytes, effective_neighbors(ctx),
                        grid2d(ctx), baseline_option(ctx));
    async_fill(&ex, 0, 0); /* the reductions' operands */
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

void async_points(hmb_ctx *ctx, hmb_point_list *out)
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
            cal->c_ns[o * nsizes + s] = calibrate_compute_ns(ctx, ops[o], sizes[s]);
    }
    hmb_set_run_data(ctx, cal);
    for (int o = 0; o < nops; o++)
        for (int m = 0; m < nmodes; m++)
            for (int s = 0; s < nsizes; s++) {
                async_point *p = hmb_points_new(out, sizes[s]);
                p->op = ops[o];
                p->progress = kept[m];
                p->progress_item = m;
                if (async_op_uses_neighbors(ops[o]))
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
static void local_unsupported_reason(hmb_ctx *ctx, async_op op, progress_spec mode, const library_progress *lp,
                                     char *why, size_t whylen)
{
    why[0] = '\0';
    int provided = hmb_thread_level_provided(ctx);
    if (!async_op_supported(op, why, whylen))
        return;
    if (mode.kind == PROG_IMPL && !lp->on)
        snprintf(why, whylen, "%s", lp->why_not);
    else if (mode.kind == PROG_THREAD && provided < MPI_THREAD_MULTIPLE)
        snprintf(why, whylen, "thread: needs MPI_THREAD_MULTIPLE, the library provides MPI_THREAD_%s",
                 hmb_thread_level_name(provided));
}

/* Before measuring, every rank at once probes its rate with the point's work (at most
 * PROBE_MAX_NS a request, ~10 ms in all). A rate measured at start-up during another process's
 * burst reads low: once the core is free every kernel run comes out shorter than C, and every
 * sample would be left out as too fast (seen with a neighbour's load on 2 cores). The probe judges
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

void *async_setup(hmb_ctx *ctx, const hmb_point *pt)
{
    async_op op = (async_op)HMB_POINT(async_point, pt)->op;
    progress_spec mode = point_mode(ctx, pt);
    library_progress lp = detect_library_progress(hmb_thread_level_provided(ctx));
    char why[320];
    local_unsupported_reason(ctx, op, mode, &lp, why, sizeof why);
    hmb_progress *thread = NULL;
    if (!why[0] && mode.kind == PROG_THREAD && !(thread = hmb_progress_start(ctx)))
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
    s->library_thread = lp.on;
    s->thread = thread;
    async_exchange_init(&s->ex, ctx, pt, op, pt->size_bytes, effective_neighbors(ctx), grid2d(ctx),
                        baseline_option(ctx));
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

void async_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    async_state *s = state;
    const async_point *p = HMB_POINT(async_point, pt);
    hmb_result_add_str(ctx, "op", async_op_name((async_op)p->op));
    hmb_result_add_str(ctx, "progress", p->progress);
    if (async_op_uses_neighbors(s->ex.op)) {
        hmb_result_add_num(ctx, "neighbors", s->ex.nneighbors);
        hmb_result_add_str(ctx, "topology", grid2d(ctx) ? "grid2d" : "ring");
    }
    if (s->ex.op == OP_PT2PT)
        hmb_result_add_str(ctx, "baseline", baseline_option(ctx) == ASYNC_BASELINE_SENDRECV ? "sendrecv" : "pingpong");
    hmb_result_add_num(ctx, "c_request_ns", (double)s->c_ns);
    hmb_result_add_str(ctx, "c_source", hmb_common(ctx)->given.compute ? "--compute" : "calc-factor x T_sync");
    /* No E from the medians here: the result has the t_total_us, t_sync_us and c_us medians,
     * from which a report derives it (metrics.h: hmb_async_efficiency_pct). */
    hmb_result_add_num(ctx, "library_progress_thread", s->library_thread);
    hmb_result_add_str(ctx, "phase_order", "counterbalanced");
    char orders[64] = "";
    for (int row = 0, n = hmb_phase_orders(ASYNC_NPHASES); row < n; row++) {
        int order[ASYNC_NPHASES];
        hmb_phase_order(ASYNC_NPHASES, row, order);
        size_t len = strlen(orders);
        snprintf(orders + len, sizeof orders - len, "%s%c%c%c", row ? "," : "", async_phase_letters[order[0]],
                 async_phase_letters[order[1]], async_phase_letters[order[2]]);
    }
    hmb_result_add_str(ctx, "phase_orders", orders);
    double c_s = (double)s->c_ns * 1e-9;
    hmb_result_add_num(ctx, "calibration_error", s->calibration_error);
    hmb_result_add_num(ctx, "compute_tolerance", hmb_async_compute_tolerance(c_s, s->calibration_error));
    hmb_result_add_num(ctx, "invalid_compute_too_fast", (double)s->too_fast_samples);
    hmb_result_add_num(ctx, "rate_probe_ratio", s->rate_probe[1]);
    hmb_result_add_num(ctx, "rate_remeasured_ranks", s->rate_probe[0]);
    if (s->too_fast_samples > 0) {
        char why[400];
        snprintf(why, sizeof why,
                 "compute ran faster than calibrated in %ld measured iteration(s) (fastest kernel run %.3f x C on "
                 "some rank; allowed down to %.3f x C by rank 0's calibration error): C is not the undisturbed "
                 "compute time there and E would be impossible, so those samples are left out; bind ranks to "
                 "cores, do not oversubscribe",
                 s->too_fast_samples, s->fastest_kernel_ratio, 1.0 - hmb_async_compute_tolerance(c_s, s->calibration_error));
        hmb_result_add_str(ctx, "invalid_reason", why);
    }
}
