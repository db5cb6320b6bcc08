/* Context accessors, option accessors, parameter points, usage errors, "unsupported",
 * reduce helpers, and the thin per-thread wrappers over compute and noise. */
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctx.h"

/* ------------------------------------------------------------------ context */

int hmb_rank(const hmb_ctx *ctx) { return ctx->rank; }
int hmb_size(const hmb_ctx *ctx) { return ctx->size; }
MPI_Comm hmb_comm(const hmb_ctx *ctx) { return ctx->comm; }
int hmb_threads(const hmb_ctx *ctx) { return ctx->threads; }
int hmb_thread_level_provided(const hmb_ctx *ctx) { return ctx->thread_level_provided; }
int hmb_validate_enabled(const hmb_ctx *ctx) { return ctx->validate; }
const char *hmb_bench_name(const hmb_ctx *ctx) { return ctx->bench->name; }

void hmb_phase(hmb_ctx *ctx, const char *phase) { atomic_store(&ctx->phase, phase); }

int hmb_all_agree(hmb_ctx *ctx, int cond)
{
    int local = cond ? 1 : 0, all = 0;
    MPI_Allreduce(&local, &all, 1, MPI_INT, MPI_LAND, ctx->comm);
    return all;
}

void hmb_require_memory(hmb_ctx *ctx, double bytes_per_rank, const char *what)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    int on_node = ctx->ranks_per_node > 0 ? ctx->ranks_per_node : 1;
    double share = pages > 0 && page > 0 ? (double)pages * (double)page / on_node : INFINITY;
    if (hmb_all_agree(ctx, bytes_per_rank <= share))
        return;
    hmb_usage_error(ctx, "%s needs %.3g GB per rank, more than a rank's share of this node's memory "
                         "(%.3g GB over %d ranks: %.3g GB)",
                    what, bytes_per_rank / 1e9, share * on_node / 1e9, on_node, share / 1e9);
}

double hmb_to_global(const hmb_ctx *ctx, double t_local) { return t_local - ctx->clock_offset_s; }
double hmb_clock_offset(const hmb_ctx *ctx) { return ctx->clock_offset_s; }
double hmb_timer_overhead_ns(const hmb_ctx *ctx) { return ctx->timer_overhead_ns; }

/* The thread levels, once: their names for the table and the JSON, and --thread-level's. */
static const struct {
    int level;
    const char *name, *option;
} thread_levels[] = {
    {MPI_THREAD_SINGLE, "SINGLE", "single"},
    {MPI_THREAD_FUNNELED, "FUNNELED", "funneled"},
    {MPI_THREAD_SERIALIZED, "SERIALIZED", "serialized"},
    {MPI_THREAD_MULTIPLE, "MULTIPLE", "multiple"},
};

const char *hmb_thread_level_name(int level)
{
    for (size_t i = 0; i < sizeof thread_levels / sizeof thread_levels[0]; i++)
        if (thread_levels[i].level == level)
            return thread_levels[i].name;
    return "UNKNOWN";
}

int hmb_thread_level_of(const char *option)
{
    for (size_t i = 0; i < sizeof thread_levels / sizeof thread_levels[0]; i++)
        if (strcmp(thread_levels[i].option, option) == 0)
            return thread_levels[i].level;
    return -1;
}

/* ------------------------------------------------------------------ options */

static const char *type_name(int type)
{
    static const char *names[] = {"FLAG",     "INT",    "DOUBLE", "SIZES",  "INTS",
                                  "DURATION", "STRING", "CHOICE", "CHOICES", "CHOICE_ARGS"};
    return type >= 0 && type < (int)(sizeof names / sizeof names[0]) ? names[type] : "?";
}

const hmb_optval *hmb_ctx_opt(const hmb_ctx *ctx, const char *name, int type_a, int type_b)
{
    const hmb_optval *v = hmb_options_find(&ctx->opts, name);
    if (!v) {
        fprintf(stderr, "hmb-bench %s: internal error: no option --%s\n", ctx->bench->name, name);
        abort();
    }
    if ((int)v->opt->type != type_a && (int)v->opt->type != type_b) {
        fprintf(stderr, "hmb-bench %s: internal error: option --%s is %s, read as %s\n", ctx->bench->name,
                name, type_name(v->opt->type), type_name(type_a));
        abort();
    }
    return v;
}

int hmb_opt_flag(const hmb_ctx *ctx, const char *name)
{
    return (int)hmb_ctx_opt(ctx, name, HMB_OPT_FLAG, HMB_OPT_FLAG)->ival;
}

long long hmb_opt_int(const hmb_ctx *ctx, const char *name)
{
    return hmb_ctx_opt(ctx, name, HMB_OPT_INT, HMB_OPT_INT)->ival;
}

double hmb_opt_double(const hmb_ctx *ctx, const char *name)
{
    return hmb_ctx_opt(ctx, name, HMB_OPT_DOUBLE, HMB_OPT_DOUBLE)->dval;
}

int64_t hmb_opt_duration_ns(const hmb_ctx *ctx, const char *name)
{
    return hmb_ctx_opt(ctx, name, HMB_OPT_DURATION, HMB_OPT_DURATION)->ns;
}

const char *hmb_opt_str(const hmb_ctx *ctx, const char *name)
{
    const hmb_optval *v = hmb_options_find(&ctx->opts, name);
    int listed = v && v->opt->type == HMB_OPT_CHOICE_ARGS; /* its text too (point labels) */
    return hmb_ctx_opt(ctx, name, listed ? HMB_OPT_CHOICE_ARGS : HMB_OPT_STRING, HMB_OPT_CHOICE)->sval;
}

unsigned long long hmb_opt_choices(const hmb_ctx *ctx, const char *name)
{
    return (unsigned long long)hmb_ctx_opt(ctx, name, HMB_OPT_CHOICES, HMB_OPT_CHOICES)->ival;
}

int hmb_opt_choice_args(const hmb_ctx *ctx, const char *name, const long long **choice, const double **arg)
{
    const hmb_optval *v = hmb_ctx_opt(ctx, name, HMB_OPT_CHOICE_ARGS, HMB_OPT_CHOICE_ARGS);
    *choice = v->ints;
    *arg = v->args;
    return v->count;
}

const size_t *hmb_opt_sizes(const hmb_ctx *ctx, const char *name, int *count)
{
    const hmb_optval *v = hmb_ctx_opt(ctx, name, HMB_OPT_SIZES, HMB_OPT_SIZES);
    *count = v->present ? v->count : 0;
    return v->sizes;
}

const long long *hmb_opt_ints(const hmb_ctx *ctx, const char *name, int *count)
{
    const hmb_optval *v = hmb_ctx_opt(ctx, name, HMB_OPT_INTS, HMB_OPT_INTS);
    *count = v->present ? v->count : 0;
    return v->ints;
}

int hmb_opt_given(const hmb_ctx *ctx, const char *name)
{
    const hmb_optval *v = hmb_options_find(&ctx->opts, name);
    return v && v->given;
}

/* ------------------------------------------------------------------ errors */

void hmb_usage_error(hmb_ctx *ctx, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ctx->rank == 0) {
        fprintf(stderr, "hmb-bench %s: %s\n", ctx->bench->name, msg);
        fflush(stderr);
    }
    if (ctx->watchdog) {
        hmb_watchdog_stop(ctx->watchdog);
        ctx->watchdog = NULL;
    }
    if (ctx->mpi_initialized) {
        fflush(stdout);
        MPI_Finalize();
    } else if (ctx->rank != 0 && getenv("OMPI_COMM_WORLD_RANK")) {
        /* Before MPI_Init nothing synchronises the ranks, and Open MPI's launcher kills the job
         * when the first process exits nonzero: let rank 0 print its line first. Rank 0 reaches
         * the same decision, and its exit makes the launcher end this process; the wait is long
         * because on a loaded machine rank 0 may start seconds later (half a second lost its
         * line under load). Hydra and srun wait for every process: no need to wait there. */
        for (int i = 0; i < 200; i++)
            usleep(100 * 1000);
    }
    exit(HMB_EXIT_USAGE);
}

void hmb_unsupported(hmb_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->unsupported_reason, sizeof ctx->unsupported_reason, fmt, ap);
    va_end(ap);
    ctx->unsupported = 1;
}

/* ------------------------------------------------------------------ points */

hmb_point *hmb_points_add(hmb_point_list *list, size_t size_bytes)
{
    list->items = hmb_grow(list->items, &list->capacity, (size_t)list->count, sizeof *list->items);
    hmb_point *pt = &list->items[list->count++];
    memset(pt, 0, sizeof *pt);
    pt->size_bytes = size_bytes;
    return pt;
}

static hmb_param *point_slot(hmb_point *p, const char *name)
{
    for (int i = 0; i < p->nparams; i++)
        if (strcmp(p->params[i].name, name) == 0)
            return &p->params[i];
    if (p->nparams == HMB_MAX_PARAMS) {
        fprintf(stderr, "hmb-bench: internal error: more than %d point parameters\n", HMB_MAX_PARAMS);
        abort();
    }
    hmb_param *slot = &p->params[p->nparams++];
    slot->name = name;
    return slot;
}

void hmb_point_set_int(hmb_point *p, const char *name, long long value)
{
    hmb_param *slot = point_slot(p, name);
    slot->ival = value;
    slot->sval = NULL;
}

void hmb_point_set_str(hmb_point *p, const char *name, const char *value)
{
    hmb_param *slot = point_slot(p, name);
    slot->ival = 0;
    slot->sval = value;
}

static const hmb_param *point_find(const hmb_point *p, const char *name)
{
    for (int i = 0; i < p->nparams; i++)
        if (strcmp(p->params[i].name, name) == 0)
            return &p->params[i];
    fprintf(stderr, "hmb-bench: internal error: point has no parameter '%s'\n", name);
    abort();
}

long long hmb_point_int(const hmb_point *p, const char *name) { return point_find(p, name)->ival; }
const char *hmb_point_str(const hmb_point *p, const char *name)
{
    const hmb_param *prm = point_find(p, name);
    if (!prm->sval) {
        fprintf(stderr, "hmb-bench: internal error: point parameter '%s' is not a string\n", name);
        abort();
    }
    return prm->sval;
}

void hmb_point_describe(const hmb_point *pt, char *buf, size_t len)
{
    char sz[32];
    if (!pt) {
        snprintf(buf, len, "(no point)");
        return;
    }
    hmb_format_size(pt->size_bytes, sz, sizeof sz);
    size_t used = (size_t)snprintf(buf, len, "size=%s", sz);
    for (int i = 0; i < pt->nparams && used < len; i++) {
        if (pt->params[i].sval)
            used += (size_t)snprintf(buf + used, len - used, " %s=%s", pt->params[i].name, pt->params[i].sval);
        else
            used += (size_t)snprintf(buf + used, len - used, " %s=%lld", pt->params[i].name, pt->params[i].ival);
    }
}

void hmb_point_list_free(hmb_point_list *list)
{
    free(list->items);
    memset(list, 0, sizeof *list);
}

void hmb_set_run_data(hmb_ctx *ctx, void *data)
{
    free(ctx->run_data);
    ctx->run_data = data;
}

void *hmb_run_data(const hmb_ctx *ctx) { return ctx->run_data; }

/* ------------------------------------------------------------------ reduce helpers */

/* The harness's reductions of results (between timed regions) use operations of its own, plain
 * scalar loops, not the library's MPI_MAX / MPI_SUM: Open MPI 5's reduction operations use
 * AVX-512 from 8 doubles on, and on a core that lowers its clock for AVX-512 the next timed region
 * ran slower (async, Open MPI, 1 KB, C = 10 us: the compute kernel 10.8 us instead of 10.0 and the
 * final Waitall 1.6 us instead of 0.8 in 10 of 10 launches; with OMPI_MCA_op=^avx, or these
 * operations, 10.0 and 0.8). */
static void op_max(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const double *a = in;
    double *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = a[i] > b[i] ? a[i] : b[i];
}

static void op_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const double *a = in;
    double *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] += a[i];
}

static void reduce_to_root(hmb_ctx *ctx, double *vals, int n, MPI_User_function *fn, MPI_Op *op)
{
    if (*op == MPI_OP_NULL) /* created on first use, after MPI_Init; released by MPI_Finalize */
        MPI_Op_create(fn, 1, op);
    if (ctx->rank == 0)
        MPI_Reduce(MPI_IN_PLACE, vals, n, MPI_DOUBLE, *op, 0, ctx->comm);
    else
        MPI_Reduce(vals, NULL, n, MPI_DOUBLE, *op, 0, ctx->comm);
}

static MPI_Op scalar_max = MPI_OP_NULL, scalar_sum = MPI_OP_NULL;
void hmb_reduce_max(hmb_ctx *ctx, double *vals, int n) { reduce_to_root(ctx, vals, n, op_max, &scalar_max); }
void hmb_reduce_sum(hmb_ctx *ctx, double *vals, int n) { reduce_to_root(ctx, vals, n, op_sum, &scalar_sum); }

/* ------------------------------------------------------------------ compute and noise */

/* The calling OpenMP thread's index into the per-thread calibrations and compute logs; a thread
 * outside the team counts as thread 0 (no harness helper thread computes). */
static int compute_tid(const hmb_ctx *ctx)
{
    int tid = omp_get_thread_num();
    return tid < 0 || tid >= ctx->threads ? 0 : tid;
}

/* One compute request of either kind on the calling thread, recorded in the point's log. */
static int64_t compute_logged(hmb_ctx *ctx, int64_t ns, int kind)
{
    if (ns <= 0)
        return 0;
    int tid = compute_tid(ctx);
    const hmb_calib *c = &ctx->calib[tid];
    int64_t measured_ns = kind == HMB_COMPUTE_TIME ? hmb_compute_for(c, ns) : hmb_compute_work(c, ns);
    hmb_compute_log_add(ctx, tid, kind, ns, measured_ns);
    return measured_ns;
}

int64_t hmb_compute_ns(hmb_ctx *ctx, int64_t ns) { return compute_logged(ctx, ns, HMB_COMPUTE_TIME); }

int64_t hmb_compute_work_ns(hmb_ctx *ctx, int64_t ns) { return compute_logged(ctx, ns, HMB_COMPUTE_WORK); }

int64_t hmb_compute_work_sliced_ns(hmb_ctx *ctx, int64_t ns, int64_t slice_ns, void (*poll)(void *), void *arg)
{
    /* The work of one request of ns (so test:P does exactly what none does for the same C),
     * split into slices of about slice_ns. A slowed-down core makes the measured total
     * (C_actual) exceed ns: that slow-down is what is measured. */
    if (ns <= 0)
        return 0;
    int tid = compute_tid(ctx);
    uint64_t total = hmb_compute_iters(&ctx->calib[tid], ns), left = total;
    uint64_t per_slice = slice_ns <= 0 || slice_ns >= ns ? total : (uint64_t)((double)total * slice_ns / ns);
    if (per_slice == 0)
        per_slice = 1;
    int64_t inside_ns = 0;
    while (left > 0) {
        uint64_t iters = left < per_slice ? left : per_slice;
        inside_ns += hmb_compute_run_iters(iters);
        left -= iters;
        if (poll && left > 0)
            poll(arg);
    }
    hmb_compute_log_add(ctx, tid, HMB_COMPUTE_WORK, ns, inside_ns);
    return inside_ns;
}

double hmb_compute_calibration_error(const hmb_ctx *ctx, int64_t ns)
{
    /* How much shorter than requested an undisturbed WORK request of ns may come out: the
     * shortfall of this rank's start-up check (its worst thread) at the check request nearest
     * to ns (log scale), plus the interruption share the sustained rate includes (a run that
     * meets no interruption is that much short). A check that ran long was disturbed, which
     * says nothing about how fast an undisturbed run can be. */
    int nearest = 0;
    for (int i = 1; i < HMB_COMPUTE_CHECKS; i++)
        if (fabs(log((double)hmb_compute_check_ns[i] / (double)ns)) <
            fabs(log((double)hmb_compute_check_ns[nearest] / (double)ns)))
            nearest = i;
    double shortfall = 0.0, lost = 0.0;
    const double request_ns = (double)hmb_compute_check_ns[nearest];
    for (int t = 0; t < ctx->threads; t++) {
        double measured_ns = (double)ctx->compute_check_work_ns[t][nearest];
        if (measured_ns > 0.0 && measured_ns < request_ns)
            shortfall = fmax(shortfall, (request_ns - measured_ns) / request_ns);
        lost = fmax(lost, ctx->calib[t].interrupt_lost_frac);
    }
    return shortfall + (lost < 0.5 ? lost : 0.0);
}

double hmb_compute_rate(const hmb_ctx *ctx, int tid)
{
    if (tid < 0 || tid >= ctx->threads)
        return NAN;
    return ctx->calib[tid].iters_per_ns;
}

int64_t hmb_noise_ns(const hmb_ctx *ctx, int tid, long iter, int64_t base_ns)
{
    return hmb_noise_draw(&ctx->noise, ctx->rank, tid, ctx->threads, iter, base_ns);
}

int64_t hmb_noise_max_ns(const hmb_ctx *ctx, int64_t base_ns) { return hmb_noise_max_draw(&ctx->noise, base_ns); }
