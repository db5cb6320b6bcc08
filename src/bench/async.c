/* async — asynchronous progress and computation/communication overlap (SPEC §3.3, seed 004).
 *
 * Every iteration is a paired design of three phases, so the ratios survive a noisy machine:
 *   blocking baseline: barrier, blocking op                          -> T_sync
 *   non-blocking run:  barrier, post, compute C with a progress
 *                      mode, complete                                -> T_total, C_actual
 *   compute only:      barrier, every rank computes C, no MPI call   -> C_loaded
 * in counterbalanced order (iteration i runs the (i mod 6)-th of the six orders). The two
 * communicating phases have their own buffers, filled by prepare() before any --cache cold
 * flush; verify() checks both phases' received data every iteration.
 * The slowest rank defines each time. E = 100 (1 - (T_total - C) / T_sync), where C is the
 * calibrated, undisturbed compute time that was requested (so a slower kernel under a
 * progress thread counts as overhead); E_loaded puts C_loaded, the same work computed by
 * every rank at once in this iteration, in C's place. A sample in which a kernel ran faster
 * than its calibration allows is invalid (its E could exceed 100 %). Formulas and the rule:
 * include/hmb/metrics.h; meaning: docs/metrics.md.
 *
 * Progress modes: none (no MPI call while computing), test:P (MPI_Testall on the op's
 * requests every P µs of compute), thread (HMB's own progress thread looping on
 * MPI_Testall; needs MPI_THREAD_MULTIPLE), impl (the library's own progress thread, only
 * when it is really on). */
#define _GNU_SOURCE
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "async_ops.h"
#include "hmb/metrics.h"

#define MAX_MODES 16

typedef enum { PROG_NONE, PROG_TEST, PROG_THREAD, PROG_IMPL } progress_kind;

typedef struct {
    progress_kind kind;
    double poll_us; /* test:P */
} progress_spec;

/* ------------------------------------------------------------------ option lists */

/* --op and --progress (HMB_OPT_CHOICE_ARGS, parsed and checked by the harness): the ops in the
 * order given; the progress modes, a choice index in progress_kind order and test:P's P. */
#define PROGRESS_CHOICES "none|test:|thread|impl"

static int option_ops(const hmb_ctx *ctx, async_op *ops)
{
    const long long *choice;
    const double *arg;
    int n = hmb_opt_choice_args(ctx, "op", &choice, &arg);
    for (int i = 0; i < n; i++)
        ops[i] = (async_op)choice[i];
    return n;
}

/* The progress modes (at most MAX_MODES: async_check) and their point labels ("test:10"). */
static int option_progress(const hmb_ctx *ctx, progress_spec *modes, char (*label)[32])
{
    const long long *choice;
    const double *arg;
    int n = hmb_opt_choice_args(ctx, "progress", &choice, &arg);
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

/* ------------------------------------------------------------------ HMB's progress thread */

/* One progress poke on all outstanding requests; returns 1 when all are complete. A single
 * request goes through MPI_Test: MPICH 5.0.2's MPI_Testall fails (MPI_ERR_IN_STATUS with
 * every status MPI_SUCCESS) on a persistent collective request from MPI_Allreduce_init. */
static int test_requests(MPI_Request *reqs, int nreq)
{
    int all_done = 0;
    if (nreq == 1)
        MPI_Test(&reqs[0], &all_done, MPI_STATUS_IGNORE);
    else
        MPI_Testall(nreq, reqs, &all_done, MPI_STATUSES_IGNORE);
    return all_done;
}

/* HMB's progress thread's poke (hmb_progress): test the published exchange's requests. */
static int test_exchange(void *ex)
{
    return test_requests(((async_exchange *)ex)->reqs, ((async_exchange *)ex)->nreq);
}

/* ------------------------------------------------------------------ benchmark */

typedef struct {
    async_exchange ex;
    progress_spec mode;
    int64_t c_ns; /* calibrated compute C, the same on every rank */
    int library_thread;
    hmb_progress *thread;
    double calibration_error;    /* this rank's, for a request of C (hmb_compute_calibration_error) */
    long too_fast_samples;       /* rank 0: measured iterations with a kernel faster than calibrated */
    double fastest_kernel_ratio; /* rank 0: the smallest kernel time / C among them, any rank */
} async_state;

static const hmb_option async_options[] = {
    {"op", HMB_OPT_CHOICE_ARGS, "pt2pt,allreduce", "operations (comma list)", 0, 0, ASYNC_OP_CHOICES},
    {"progress", HMB_OPT_CHOICE_ARGS, "none,test:10,thread",
     "progress modes (comma list): none, test:P (MPI_Testall every P µs of compute, 0.1..1e6), thread, impl", 0.1,
     1e6, PROGRESS_CHOICES},
    {"neighbors", HMB_OPT_INT, "2", "exch/neighbor_alltoall: neighbours per rank (ring: even; grid2d: 4 or 8)",
     1, 64, NULL},
    {"topology", HMB_OPT_CHOICE, "ring", "exch/neighbor_alltoall neighbourhood: ring or periodic 2-D grid", 0, 0,
     "ring|grid2d"},
    {"calc-factor", HMB_OPT_DOUBLE, "2.0",
     "without --compute: C = factor x the blocking time of the op and size (seed: 1.5-2)", 0.01, 1000, NULL},
    {"baseline", HMB_OPT_CHOICE, "pingpong",
     "pt2pt blocking baseline: pingpong (IMB-ASYNC sync_pt2pt: Send then Recv, reversed on the partner) "
     "or sendrecv (MPI_Sendrecv)", 0, 0, ASYNC_BASELINE_CHOICES},
    HMB_OPTION_END,
};

/* The seed's 4, 128, 2048, 32768, 524288 doubles. */
static const hmb_default async_defaults[] = {{"sizes", "32,1K,16K,256K,4M"}, {NULL, NULL}};

/* T_total first: the adaptive stopping rule watches the first metric's relative CI, which
 * is meaningless for E (near 0 or negative without progress). */
static const hmb_metric async_metrics[] = {
    {.name = "t_total_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "post + compute + completion time of the non-blocking run"},
    {.name = "efficiency_pct", .unit = "%", .higher_is_better = 1, .in_table = 1, .is_signed = 1,
     .description = "E = 100 (1 - T_over / T_sync) of each rank from its own times: the worst rank's"},
    {.name = "efficiency_loaded_pct", .unit = "%", .higher_is_better = 1, .in_table = 1, .is_signed = 1,
     .description = "E_loaded = 100 (1 - (T_total - C_loaded) / T_sync) of each rank: the worst rank's (E against "
                    "the compute time measured with every rank computing at once)"},
    {.name = "efficiency_mean_pct", .unit = "%", .higher_is_better = 1, .in_table = 0, .is_signed = 1,
     .description = "E of each rank, mean over ranks (seed 004: over all pairs)"},
    {.name = "efficiency_loaded_mean_pct", .unit = "%", .higher_is_better = 1, .in_table = 0, .is_signed = 1,
     .description = "E_loaded of each rank, mean over ranks"},
    {.name = "t_sync_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "blocking operation time (baseline)"},
    {.name = "c_actual_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "time inside the compute kernel (excluding progress calls)"},
    {.name = "c_loaded_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "compute-only phase: C computed by every rank at once, no MPI call"},
    {.name = "t_over_us", .unit = "us", .higher_is_better = 0, .in_table = 1, .is_signed = 1,
     .description = "T_over = T_total - C"},
    {.name = "t_over_loaded_us", .unit = "us", .higher_is_better = 0, .in_table = 0, .is_signed = 1,
     .description = "T_over_loaded = T_total - C_loaded"},
    {.name = "slowdown", .unit = "ratio", .higher_is_better = 0, .in_table = 1,
     .description = "compute slow-down C_actual / C caused by the progress method"},
    {.name = "load_slowdown", .unit = "ratio", .higher_is_better = 0, .in_table = 0,
     .description = "C_loaded / C: slow-down of the kernel when every rank computes"},
    {.name = "t_wait_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "time in the final MPI_Waitall: the communication progress during compute left"},
    HMB_METRIC_END,
};

static async_baseline baseline_option(const hmb_ctx *ctx)
{
    return strcmp(hmb_opt_str(ctx, "baseline"), "sendrecv") == 0 ? ASYNC_BASELINE_SENDRECV : ASYNC_BASELINE_PINGPONG;
}

static int effective_neighbors(hmb_ctx *ctx)
{
    int k = (int)hmb_opt_int(ctx, "neighbors");
    /* The 2-D grid's natural neighbourhood is its 4 faces. */
    if (strcmp(hmb_opt_str(ctx, "topology"), "grid2d") == 0 && !hmb_opt_given(ctx, "neighbors"))
        k = 4;
    return k;
}

static void async_check(hmb_ctx *ctx)
{
    char err[256];
    async_op ops[ASYNC_OP_COUNT];
    int nops = option_ops(ctx, ops);
    const long long *choice;
    const double *arg;
    if (hmb_opt_choice_args(ctx, "progress", &choice, &arg) > MAX_MODES)
        hmb_usage_error(ctx, "--progress: more than %d modes", MAX_MODES);
    int nsizes;
    const size_t *sizes = hmb_opt_sizes(ctx, "sizes", &nsizes);
    for (int i = 0; i < nsizes; i++) {
        if (sizes[i] == 0 || sizes[i] % sizeof(double) != 0)
            hmb_usage_error(ctx, "--sizes: %zu is not a positive multiple of 8 bytes (messages are doubles)", sizes[i]);
        if (!async_size_fits(sizes[i], err, sizeof err))
            hmb_usage_error(ctx, "%s", err);
    }
    int k = effective_neighbors(ctx);
    int grid = strcmp(hmb_opt_str(ctx, "topology"), "grid2d") == 0;
    if (grid && k != 4 && k != 8)
        hmb_usage_error(ctx, "--neighbors: %d on grid2d (choose 4 or 8)", k);
    if (!grid && k % 2 != 0)
        hmb_usage_error(ctx, "--neighbors: %d on a ring must be even (k/2 on each side)", k);
    int has_pt2pt = 0;
    for (int i = 0; i < nops; i++)
        has_pt2pt |= ops[i] == OP_PT2PT;
    if (has_pt2pt && hmb_size(ctx) % 2 != 0)
        hmb_usage_error(ctx, "--op pt2pt pairs rank i with i+n/2: needs an even number of ranks, got %d", hmb_size(ctx));
    if (hmb_opt_given(ctx, "compute") && hmb_opt_duration_ns(ctx, "compute") <= 0)
        hmb_usage_error(ctx, "--compute: must be > 0 (or leave it out: C = --calc-factor x T_sync)");
    library_progress lp = detect_library_progress(hmb_thread_level_provided(ctx));
    hmb_header_add_num(ctx, "library_progress_thread", lp.on);
    hmb_header_add_str(ctx, "library_progress_control", lp.has_facility ? lp.control : "none");
    if (has_pt2pt) /* T_sync of pt2pt means a different operation under each baseline */
        hmb_header_add_str(ctx, "pt2pt_baseline", hmb_opt_str(ctx, "baseline"));
}

static void blocking_run(void *ex) { async_blocking(ex); }

/* C = calc-factor x the blocking time: the fastest of a few blocking runs (interference
 * only slows a run down), the slowest rank of each run counting. Done once per (op, size)
 * before any point, so every progress mode of an op and size computes the same C, and no
 * progress thread (HMB's or a mode's) is running while it is measured. 0: op unsupported. */
static int64_t calibrate_compute_ns(hmb_ctx *ctx, async_op op, size_t size_bytes)
{
    if (hmb_opt_given(ctx, "compute"))
        return hmb_opt_duration_ns(ctx, "compute");
    char why[256];
    if (!async_op_supported(op, why, sizeof why))
        return 0;
    hmb_point calib_pt = {.size_bytes = size_bytes}; /* names the op in a failure message */
    hmb_point_set_str(&calib_pt, "op", async_op_name(op));
    hmb_point_set_str(&calib_pt, "phase", "calibration");
    async_exchange ex;
    async_exchange_init(&ex, ctx, &calib_pt, op, size_bytes, effective_neighbors(ctx),
                        strcmp(hmb_opt_str(ctx, "topology"), "grid2d") == 0, baseline_option(ctx));
    async_fill(&ex, 0, 0); /* the reductions' operands */
    double t_sync_s;
    int64_t c_ns = hmb_calc_factor_ns(ctx, ex.world, hmb_opt_double(ctx, "calc-factor"), blocking_run, &ex, &t_sync_s);
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
    int nsizes;
    const size_t *sizes = hmb_opt_sizes(ctx, "sizes", &nsizes);
    for (int s = 0; s < nsizes; s++)
        if (sizes[s] == size_bytes)
            return cal->c_ns[cal->op_slot[op] * cal->nsizes + s];
    return 0;
}

static void async_points(hmb_ctx *ctx, hmb_point_list *out)
{
    async_op ops[ASYNC_OP_COUNT];
    progress_spec modes[MAX_MODES];
    char label[MAX_MODES][32];
    int nops = option_ops(ctx, ops), nmodes = option_progress(ctx, modes, label), nsizes;
    const size_t *sizes = hmb_opt_sizes(ctx, "sizes", &nsizes);
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
                hmb_point *p = hmb_points_add(out, sizes[s]);
                hmb_point_set_str(p, "op", async_op_name(ops[o]));
                hmb_point_set_str(p, "progress", kept[m]);
                if (async_op_uses_neighbors(ops[o]))
                    hmb_point_set_int(p, "neighbors", effective_neighbors(ctx));
            }
}

/* The point's progress mode: the --progress item with its label. */
static progress_spec point_mode(const hmb_ctx *ctx, const hmb_point *pt)
{
    progress_spec modes[MAX_MODES];
    char label[MAX_MODES][32];
    int n = option_progress(ctx, modes, label);
    for (int i = 0; i < n; i++)
        if (strcmp(label[i], hmb_point_str(pt, "progress")) == 0)
            return modes[i];
    return modes[0];
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

static void *async_setup(hmb_ctx *ctx, const hmb_point *pt)
{
    async_op op = (async_op)async_op_from_name(hmb_point_str(pt, "op"));
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
    int grid = strcmp(hmb_opt_str(ctx, "topology"), "grid2d") == 0;
    async_exchange_init(&s->ex, ctx, pt, op, pt->size_bytes, effective_neighbors(ctx), grid, baseline_option(ctx));
    s->c_ns = calibrated_c_ns(ctx, op, pt->size_bytes);
    s->calibration_error = hmb_compute_calibration_error(ctx, s->c_ns);
    s->fastest_kernel_ratio = INFINITY;
    return s;
}

/* Both phases' reduction operands before the --cache cold flush (the other ops' blocks: the
 * harness's, registered in async_exchange_init); nothing inside iterate() touches them first. */
static void async_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    (void)ctx, (void)pt;
    async_state *s = state;
    async_fill(&s->ex, iter, ASYNC_BLOCKING);
    async_fill(&s->ex, iter, ASYNC_NONBLOCKING);
}

static void testall_poll(void *arg)
{
    async_exchange *ex = arg;
    test_requests(ex->reqs, ex->nreq);
}

/* Computes C under the point's progress mode; returns the time inside the kernel, ns. */
static int64_t compute_with_progress(hmb_ctx *ctx, async_state *s)
{
    switch (s->mode.kind) {
    case PROG_TEST:
        return hmb_compute_work_sliced_ns(ctx, s->c_ns, (int64_t)(s->mode.poll_us * 1e3), testall_poll, &s->ex);
    case PROG_THREAD: {
        hmb_progress_publish(s->thread, test_exchange, &s->ex);
        int64_t inside_ns = hmb_compute_work_ns(ctx, s->c_ns);
        hmb_progress_withdraw(s->thread);
        return inside_ns;
    }
    default: /* none; impl: the library's thread works on its own */
        return hmb_compute_work_ns(ctx, s->c_ns);
    }
}

/* The three phases of an iteration, run in the counterbalanced orders of hmb_phase_order: each
 * runs first, second and last equally often, and directly after each other phase equally often:
 * none systematically inherits another's cache or progress-engine state. */
typedef enum { PHASE_BLOCKING, PHASE_NONBLOCKING, PHASE_COMPUTE_ONLY, NPHASES } phase_id;
static const char phase_letters[NPHASES] = {'b', 'n', 'c'}; /* the orders in the result record */

/* Sub-times of the phases (hmb_mode_results times[phase][j], seconds; [0]: barrier to end). */
enum { T_KERNEL = 1, T_WAIT = 2 }; /* kernel: C_actual (non-blocking), C_loaded (compute only) */

static void run_blocking(hmb_ctx *ctx, void *state, int phase, long iter, double *times)
{
    (void)ctx, (void)phase, (void)iter, (void)times;
    async_blocking(&((async_state *)state)->ex); /* T_sync */
}

static void run_nonblocking(hmb_ctx *ctx, void *state, int phase, long iter, double *times)
{
    (void)phase, (void)iter;
    async_state *s = state;
    async_exchange *ex = &s->ex;
    hmb_phase(ctx, "post");
    async_post(ex);
    hmb_phase(ctx, "compute");
    times[T_KERNEL] = (double)compute_with_progress(ctx, s) * 1e-9;
    hmb_phase(ctx, "Waitall");
    double t_wait_start_s = hmb_now();
    MPI_Waitall(ex->nreq, ex->reqs, MPI_STATUSES_IGNORE);
    times[T_WAIT] = hmb_now() - t_wait_start_s; /* times[0], to the same end: T_total */
}

/* Every rank computes C at once and nothing communicates: what the kernel costs under the
 * load of the whole job, without any progress method. */
static void run_compute_only(hmb_ctx *ctx, void *state, int phase, long iter, double *times)
{
    (void)phase, (void)iter;
    times[T_KERNEL] = (double)hmb_compute_work_ns(ctx, ((async_state *)state)->c_ns) * 1e-9;
}

static const hmb_mode async_phases[NPHASES + 1] = {
    [PHASE_BLOCKING] = {.name = "blocking op", .iterate = run_blocking},
    [PHASE_NONBLOCKING] = {.name = "non-blocking op", .iterate = run_nonblocking},
    [PHASE_COMPUTE_ONLY] = {.name = "compute-only phase", .iterate = run_compute_only},
};
static const int all_phases[NPHASES] = {PHASE_BLOCKING, PHASE_NONBLOCKING, PHASE_COMPUTE_ONLY};

static int async_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    (void)pt;
    async_state *s = state;
    hmb_mode_results r;
    hmb_modes_run(ctx, s, all_phases, NPHASES, iter, &r); /* the slowest rank's times */

    /* Each rank judges its own kernel runs against its own calibration error; one impossible
     * run anywhere invalidates the sample. */
    const double c_s = (double)s->c_ns * 1e-9;
    double fastest_kernel_s = fmin(r.local[PHASE_NONBLOCKING][T_KERNEL], r.local[PHASE_COMPUTE_ONLY][T_KERNEL]);
    enum { R_TOO_FAST, R_MINUS_FASTEST_RATIO, R_COUNT };
    double slowest[R_COUNT] = {[R_TOO_FAST] = hmb_async_compute_too_fast(fastest_kernel_s, c_s, s->calibration_error),
                               [R_MINUS_FASTEST_RATIO] = -fastest_kernel_s / c_s};
    hmb_reduce_max(ctx, slowest, R_COUNT);
    /* E per rank from its own times, aggregated on rank 0: never one rank's T_total with another's T_sync */
    hmb_mode_times *all = hmb_modes_gather(ctx, &r);
    if (hmb_rank(ctx) != 0)
        return 0;
    const int n = hmb_size(ctx);
    double *t_total = malloc(4 * sizeof(double) * (size_t)n); /* by quantity */
    if (!t_total)
        abort();
    double *c_loaded = t_total + n, *t_sync = c_loaded + n, *c = t_sync + n;
    for (int k = 0; k < n; k++) {
        t_total[k] = all[k][PHASE_NONBLOCKING][0], c_loaded[k] = all[k][PHASE_COMPUTE_ONLY][T_KERNEL];
        t_sync[k] = all[k][PHASE_BLOCKING][0], c[k] = c_s;
    }
    double e_worst, e_mean, el_worst, el_mean;
    hmb_async_efficiency_ranks(n, t_total, c, t_sync, &e_worst, &e_mean);
    hmb_async_efficiency_ranks(n, t_total, c_loaded, t_sync, &el_worst, &el_mean);
    free(t_total);
    free(all);
    double t_sync_s = r.times[PHASE_BLOCKING][0], t_total_s = r.times[PHASE_NONBLOCKING][0];
    double c_actual_s = r.times[PHASE_NONBLOCKING][T_KERNEL], c_loaded_s = r.times[PHASE_COMPUTE_ONLY][T_KERNEL];
    hmb_record(ctx, out, "t_total_us", t_total_s * 1e6);
    hmb_record(ctx, out, "efficiency_pct", e_worst);
    hmb_record(ctx, out, "efficiency_loaded_pct", el_worst);
    hmb_record(ctx, out, "efficiency_mean_pct", e_mean);
    hmb_record(ctx, out, "efficiency_loaded_mean_pct", el_mean);
    hmb_record(ctx, out, "t_sync_us", t_sync_s * 1e6);
    hmb_record(ctx, out, "c_actual_us", c_actual_s * 1e6);
    hmb_record(ctx, out, "c_loaded_us", c_loaded_s * 1e6);
    hmb_record(ctx, out, "t_over_us", hmb_async_overhead(t_total_s, c_s) * 1e6);
    hmb_record(ctx, out, "t_over_loaded_us", hmb_async_overhead(t_total_s, c_loaded_s) * 1e6);
    hmb_record(ctx, out, "slowdown", c_actual_s / c_s);
    hmb_record(ctx, out, "load_slowdown", c_loaded_s / c_s);
    hmb_record(ctx, out, "t_wait_us", r.times[PHASE_NONBLOCKING][T_WAIT] * 1e6);
    out->valid = slowest[R_TOO_FAST] == 0.0;
    if (!out->valid && iter >= hmb_opt_int(ctx, "warmup")) { /* warm-up samples are not counted */
        s->too_fast_samples++;
        s->fastest_kernel_ratio = fmin(s->fastest_kernel_ratio, -slowest[R_MINUS_FASTEST_RATIO]);
    }
    return 0;
}

static void async_verify_cb(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    (void)ctx, (void)pt;
    async_state *s = state;
    async_verify(&s->ex, iter, ASYNC_BLOCKING);
    async_verify(&s->ex, iter, ASYNC_NONBLOCKING);
}

static void async_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    async_state *s = state;
    hmb_result_add_str(ctx, "op", hmb_point_str(pt, "op"));
    hmb_result_add_str(ctx, "progress", hmb_point_str(pt, "progress"));
    if (async_op_uses_neighbors(s->ex.op)) {
        hmb_result_add_num(ctx, "neighbors", s->ex.nneighbors);
        hmb_result_add_str(ctx, "topology", hmb_opt_str(ctx, "topology"));
    }
    if (s->ex.op == OP_PT2PT)
        hmb_result_add_str(ctx, "baseline", hmb_opt_str(ctx, "baseline"));
    hmb_result_add_num(ctx, "c_request_ns", (double)s->c_ns);
    hmb_result_add_str(ctx, "c_source", hmb_opt_given(ctx, "compute") ? "--compute" : "calc-factor x T_sync");
    /* No E from the medians here: the result has the t_total_us, t_sync_us and c_us medians,
     * from which a report derives it (metrics.h: hmb_async_efficiency_pct). */
    hmb_result_add_num(ctx, "library_progress_thread", s->library_thread);
    hmb_result_add_str(ctx, "phase_order", "counterbalanced");
    char orders[64] = "";
    for (int row = 0, n = hmb_phase_orders(NPHASES); row < n; row++) {
        int order[NPHASES];
        hmb_phase_order(NPHASES, row, order);
        size_t len = strlen(orders);
        snprintf(orders + len, sizeof orders - len, "%s%c%c%c", row ? "," : "", phase_letters[order[0]],
                 phase_letters[order[1]], phase_letters[order[2]]);
    }
    hmb_result_add_str(ctx, "phase_orders", orders);
    double c_s = (double)s->c_ns * 1e-9;
    hmb_result_add_num(ctx, "calibration_error", s->calibration_error);
    hmb_result_add_num(ctx, "compute_tolerance", hmb_async_compute_tolerance(c_s, s->calibration_error));
    hmb_result_add_num(ctx, "invalid_compute_too_fast", (double)s->too_fast_samples);
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

static void async_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    async_state *s = state;
    if (!s)
        return;
    if (s->thread)
        hmb_progress_stop(s->thread);
    async_exchange_free(&s->ex);
    free(s);
}

static const hmb_bench async_bench = {
    .name = "async",
    .group = "async",
    .summary = "overlap of non-blocking communication with compute, per progress mode (IMB-ASYNC style)",
    .options = async_options,
    .defaults = async_defaults,
    .modes = async_phases,
    .metrics = async_metrics,
    .thread_level = MPI_THREAD_MULTIPLE, /* the `thread` mode tests from a second thread */
    .min_ranks = 2,
    .rank_multiple = 1,
    .check = async_check,
    .points = async_points,
    .setup = async_setup,
    .prepare = async_prepare,
    .iterate = async_iterate,
    .verify = async_verify_cb,
    .teardown = async_teardown,
    .annotate = async_annotate,
    .pivot_metrics = "t_sync_us,c_us,c_loaded_us,t_over_us,efficiency_pct,efficiency_loaded_pct",
    .spare_core_when = "progress=impl,thread",
};
HMB_REGISTER(async_bench);
