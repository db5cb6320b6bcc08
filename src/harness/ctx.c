/* Context accessors, option accessors, parameter points, usage errors, "unsupported",
 * reduce helpers, and the thin per-thread wrappers over compute and noise. */
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "computelog.h"
#include "ctx.h"

/* ------------------------------------------------------------------ context */

int hmb_rank(const hmb_ctx *ctx) { return ctx->run.rank; }
const hmb_common_opts *hmb_common(const hmb_ctx *ctx) { return &ctx->opt.common; }
const void *hmb_bench_options(const hmb_ctx *ctx) { return ctx->opt.bench; }
long hmb_inject_at(const hmb_ctx *ctx, int fault)
{
    return fault >= 0 && fault < HMB_INJECT_COUNT ? ctx->hooks.inject[fault] : -1;
}
int hmb_size(const hmb_ctx *ctx) { return ctx->run.size; }
MPI_Comm hmb_comm(const hmb_ctx *ctx) { return ctx->run.comm; }
int hmb_threads(const hmb_ctx *ctx) { return ctx->run.threads; }
int hmb_thread_level_provided(const hmb_ctx *ctx) { return ctx->run.thread_level_provided; }
int hmb_validate_enabled(const hmb_ctx *ctx) { return ctx->val.validate; }
const char *hmb_bench_name(const hmb_ctx *ctx) { return ctx->bench->name; }

void hmb_phase(hmb_ctx *ctx, const char *phase) { atomic_store(&ctx->phase, phase); }

int hmb_all_agree(hmb_ctx *ctx, int cond)
{
    int local = cond ? 1 : 0, all = 0;
    MPI_Allreduce(&local, &all, 1, MPI_INT, MPI_LAND, ctx->run.comm);
    return all;
}

double hmb_to_global(const hmb_ctx *ctx, double t_local) { return t_local - ctx->run.clock_offset_s; }
double hmb_clock_offset(const hmb_ctx *ctx) { return ctx->run.clock_offset_s; }
double hmb_timer_overhead_ns(const hmb_ctx *ctx) { return ctx->run.timer_overhead_ns; }

int hmb_threads_oversubscribe(hmb_ctx *ctx, int threads_here)
{
    MPI_Comm node;
    int node_threads = 0, over, any = 0;
    MPI_Comm_split_type(ctx->run.comm, MPI_COMM_TYPE_SHARED, ctx->run.rank, MPI_INFO_NULL, &node);
    MPI_Allreduce(&threads_here, &node_threads, 1, MPI_INT, MPI_SUM, node);
    MPI_Comm_free(&node);
    over = node_threads > ctx->run.node_compute_cpus || threads_here > hmb_cpus_count(&ctx->run.rank_cpus);
    MPI_Allreduce(&over, &any, 1, MPI_INT, MPI_LOR, ctx->run.comm);
    return any;
}

/* The thread levels, once, in the order of --thread-level's choices: their names for the table and
 * the JSON. */
static const struct {
    int level;
    const char *name;
} thread_levels[] = {
    {MPI_THREAD_SINGLE, "SINGLE"},
    {MPI_THREAD_FUNNELED, "FUNNELED"},
    {MPI_THREAD_SERIALIZED, "SERIALIZED"},
    {MPI_THREAD_MULTIPLE, "MULTIPLE"},
};

const char *hmb_thread_level_name(int level)
{
    for (size_t i = 0; i < sizeof thread_levels / sizeof thread_levels[0]; i++)
        if (thread_levels[i].level == level)
            return thread_levels[i].name;
    return "UNKNOWN";
}

int hmb_thread_level_at(int choice)
{
    const int n = (int)(sizeof thread_levels / sizeof thread_levels[0]);
    return choice >= 0 && choice < n ? thread_levels[choice].level : -1;
}

/* ------------------------------------------------------------------ options */

const char *hmb_option_text(const hmb_ctx *ctx, const char *name)
{
    const hmb_optval *v = hmb_options_find(&ctx->opt.set, name);
    if (!v) {
        fprintf(stderr, "hmb-bench %s: internal error: no option --%s\n", ctx->bench->name, name);
        abort();
    }
    return v->present ? v->sval : NULL;
}

/* ------------------------------------------------------------------ errors */

void hmb_unsupported(hmb_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->unsupported_reason, sizeof ctx->unsupported_reason, fmt, ap);
    va_end(ap);
    ctx->unsupported = 1;
}

/* ------------------------------------------------------------------ points */

void hmb_point_init(hmb_point *pt, const hmb_param *params, size_t size_bytes)
{
    memset(pt, 0, sizeof *pt);
    pt->size_bytes = size_bytes;
    pt->params = params;
    for (const hmb_param *p = params; p && p->name; p++) {
        void *at = pt->data.bytes + p->offset;
        switch (p->kind) {
        case HMB_PARAM_INT: *(long long *)at = HMB_PARAM_UNSET; break;
        case HMB_PARAM_NAME: *(int *)at = -1; break;
        case HMB_PARAM_TEXT: *(const char **)at = NULL; break;
        case HMB_PARAM_DATA: *(long long *)at = 0; break;
        }
    }
}

void *hmb_points_new(hmb_point_list *list, size_t size_bytes)
{
    list->items = hmb_grow(list->items, &list->capacity, (size_t)list->count, sizeof *list->items);
    hmb_point *pt = &list->items[list->count++];
    hmb_point_init(pt, list->params, size_bytes);
    return pt->data.bytes;
}

const void *hmb_point_params(const hmb_point *pt) { return pt->data.bytes; }

int hmb_point_param_next(const hmb_point *pt, int i, const char **name, long long *ival, const char **sval)
{
    for (const hmb_param *p = pt && pt->params ? &pt->params[i] : NULL; p && p->name; p++, i++) {
        const void *at = pt->data.bytes + p->offset;
        *name = p->name;
        *sval = NULL;
        *ival = 0;
        if (p->kind == HMB_PARAM_INT && (*ival = *(const long long *)at) != HMB_PARAM_UNSET)
            return i + 1;
        if (p->kind == HMB_PARAM_NAME && *(const int *)at >= 0) {
            *sval = p->names[*(const int *)at];
            return i + 1;
        }
        if (p->kind == HMB_PARAM_TEXT && (*sval = *(const char *const *)at) != NULL)
            return i + 1;
    }
    return 0;
}

int hmb_point_param_is(const hmb_point *pt, const char *name, const char *value)
{
    const char *n, *sval;
    long long ival;
    for (int i = 0; (i = hmb_point_param_next(pt, i, &n, &ival, &sval));)
        if (strcmp(n, name) == 0 && sval && strcmp(sval, value) == 0)
            return 1;
    return 0;
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
    const char *name, *sval;
    long long ival;
    for (int i = 0; used < len && (i = hmb_point_param_next(pt, i, &name, &ival, &sval));) {
        if (sval)
            used += (size_t)snprintf(buf + used, len - used, " %s=%s", name, sval);
        else
            used += (size_t)snprintf(buf + used, len - used, " %s=%lld", name, ival);
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
 * runs slower (docs/findings.md, "Open MPI 5: an AVX-512 reduction slows the next timed region"). */
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
    if (ctx->run.rank == 0)
        MPI_Reduce(MPI_IN_PLACE, vals, n, MPI_DOUBLE, *op, 0, ctx->run.comm);
    else
        MPI_Reduce(vals, NULL, n, MPI_DOUBLE, *op, 0, ctx->run.comm);
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
    return tid < 0 || tid >= ctx->run.threads ? 0 : tid;
}

/* One compute request of either kind on the calling thread, recorded in the point's log. */
static int64_t compute_logged(hmb_ctx *ctx, int64_t ns, int kind)
{
    if (ns <= 0)
        return 0;
    int tid = compute_tid(ctx);
    const hmb_calib *c = &ctx->run.calib[tid];
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
    uint64_t total = hmb_compute_iters(&ctx->run.calib[tid], ns), left = total;
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
     * says nothing about how fast an undisturbed run can be. On-core time, as the rate. */
    int nearest = 0;
    for (int i = 1; i < ctx->run.compute_checks; i++)
        if (fabs(log((double)hmb_compute_check_ns[i] / (double)ns)) <
            fabs(log((double)hmb_compute_check_ns[nearest] / (double)ns)))
            nearest = i;
    double shortfall = 0.0, lost = 0.0;
    const double request_ns = (double)hmb_compute_check_ns[nearest];
    for (int t = 0; t < ctx->run.threads; t++) {
        double measured_ns = (double)ctx->run.compute_check_work_core_ns[t][nearest];
        if (measured_ns > 0.0 && measured_ns < request_ns)
            shortfall = fmax(shortfall, (request_ns - measured_ns) / request_ns);
        lost = fmax(lost, ctx->run.calib[t].interrupt_lost_frac);
    }
    return shortfall + (lost < 0.5 ? lost : 0.0);
}

double hmb_compute_probe_rate(hmb_ctx *ctx, int64_t ns, int runs, double tolerance, int *remeasured)
{
    return hmb_compute_probe(&ctx->run.calib[compute_tid(ctx)], ns, runs, tolerance, remeasured);
}

double hmb_compute_rate(const hmb_ctx *ctx, int tid)
{
    if (tid < 0 || tid >= ctx->run.threads)
        return NAN;
    return ctx->run.calib[tid].iters_per_ns;
}

int64_t hmb_noise_ns(const hmb_ctx *ctx, int tid, long iter, int64_t base_ns)
{
    return hmb_noise_draw(&ctx->run.noise, ctx->run.rank, tid, ctx->run.threads, iter, base_ns);
}

int64_t hmb_noise_max_ns(const hmb_ctx *ctx, int64_t base_ns) { return hmb_noise_max_draw(&ctx->run.noise, base_ns); }
