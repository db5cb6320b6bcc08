/* The paired-mode driver (hmb/bench.h, hmb_modes_run): a benchmark declares its modes, the harness
 * orders them, evicts, barriers, times, reduces across ranks; metrics are recorded by name. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "ctx.h"
#include "validate.h"
#include "watchdog.h"

int hmb_mode_refused(hmb_ctx *ctx, const char *mode, int threads_call_mpi, int partitioned)
{
    const char *why = NULL;
    if (partitioned && !HMB_HAVE_PARTITIONED)
        why = "this MPI library has no partitioned communication (MPI_Psend_init/MPI_Parrived)";
    else if ((threads_call_mpi || partitioned) && hmb_threads(ctx) > 1 &&
             hmb_thread_level_provided(ctx) < MPI_THREAD_MULTIPLE)
        why = "threads call MPI concurrently: needs MPI_THREAD_MULTIPLE";
    const char *level = hmb_thread_level_name(hmb_thread_level_provided(ctx));
    if (why && mode)
        hmb_unsupported(ctx, "--mode %s: %s (the library provides MPI_THREAD_%s); leave it out of --mode to run the others",
                        mode, why, level);
    else if (why) /* a benchmark of one mode */
        hmb_unsupported(ctx, "%s (the library provides MPI_THREAD_%s)", why, level);
    return why != NULL;
}

int64_t hmb_calc_factor_ns(hmb_ctx *ctx, MPI_Comm comm, double factor, void (*run)(void *arg), void *arg,
                           double *t_s)
{
    hmb_phase(ctx, "calc-factor calibration");
    double best_s = INFINITY;
    for (int rep = -1; rep < HMB_CALC_REPS; rep++) {
        MPI_Barrier(comm);
        double t0 = hmb_now();
        run(arg);
        double mine_s = hmb_now() - t0, slowest_s;
        MPI_Allreduce(&mine_s, &slowest_s, 1, MPI_DOUBLE, MPI_MAX, comm);
        if (rep >= 0 && slowest_s < best_s)
            best_s = slowest_s;
    }
    *t_s = best_s;
    double c_ns = factor * best_s * 1e9;
    return c_ns < HMB_MIN_COMPUTE_NS ? HMB_MIN_COMPUTE_NS : (int64_t)c_ns;
}

int hmb_modes_select(hmb_ctx *ctx, unsigned long long mask, int mock, int *run)
{
    int n = 0;
    for (int m = 0; ctx->bench->modes && ctx->bench->modes[m].name && m < HMB_MAX_MODES; m++) {
        const hmb_mode *mode = &ctx->bench->modes[m];
        if (!(mask >> m & 1ull))
            continue;
        if (!mock && hmb_mode_refused(ctx, mode->name, (mode->flags & HMB_MODE_MPI_THREADS) != 0,
                                      (mode->flags & HMB_MODE_PARTITIONED) != 0))
            return -1;
        run[n++] = m;
    }
    return n;
}

int hmb_modes_run(hmb_ctx *ctx, void *state, const int *run, int nrun, long iter, hmb_mode_results *out)
{
    const hmb_mode *modes = ctx->bench->modes;
    if (nrun < 1 || nrun > HMB_MAX_MODES || !modes || ctx->metrics.nmodes > HMB_MAX_MODES)
        abort();
    int order[HMB_MAX_MODES];
    hmb_phase_order(nrun, iter, order);
    for (int m = 0; m < HMB_MAX_MODES; m++) {
        for (int j = 0; j < HMB_MODE_MAX_TIMES; j++)
            out->times[m][j] = 0.0;
        for (int j = 0; j < HMB_MODE_MAX_SUMS; j++)
            out->sums[m][j] = 0.0;
    }
    char label[96];
    for (int k = 0; k < nrun; k++) {
        int m = run[order[k]];
        const hmb_mode *mode = &modes[m];
        if (k > 0)
            hmb_cache_evict(ctx); /* --cache cold: every mode starts cold */
        if (mode->setup)
            mode->setup(ctx, state, m, iter);
        snprintf(label, sizeof label, "barrier before %s", mode->name);
        hmb_phase(ctx, label);
        MPI_Barrier(hmb_comm(ctx));
        hmb_phase(ctx, mode->name);
        double t0 = hmb_now();
        mode->iterate(ctx, state, m, iter, out->times[m]);
        out->times[m][0] = hmb_now() - t0;
        if (mode->verify) {
            snprintf(label, sizeof label, "%s: verify", mode->name);
            hmb_phase(ctx, label);
            mode->verify(ctx, state, m, iter, out->sums[m]);
        }
        hmb_checks_run(ctx, iter, m); /* the buffers registered for this mode */
    }
    memcpy(out->local, out->times, sizeof out->local);
    hmb_phase(ctx, "reduce");
    hmb_reduce_max(ctx, &out->times[0][0], HMB_MAX_MODES * HMB_MODE_MAX_TIMES);
    hmb_reduce_sum(ctx, &out->sums[0][0], HMB_MAX_MODES * HMB_MODE_MAX_SUMS);
    return hmb_rank(ctx) == 0;
}

hmb_mode_times *hmb_modes_gather(hmb_ctx *ctx, const hmb_mode_results *res)
{
    hmb_mode_times *all = NULL;
    if (hmb_rank(ctx) == 0 && !(all = malloc((size_t)hmb_size(ctx) * sizeof *all)))
        abort();
    hmb_phase(ctx, "gather per-rank mode times");
    MPI_Gather(res->local, HMB_MAX_MODES * HMB_MODE_MAX_TIMES, MPI_DOUBLE, all, HMB_MAX_MODES * HMB_MODE_MAX_TIMES,
               MPI_DOUBLE, 0, hmb_comm(ctx));
    return all;
}

const char *hmb_mode_name(const hmb_ctx *ctx, int mode)
{
    return ctx->bench->modes[mode].name;
}

/* The bound check of every record: the index must lie within the sample the harness sized. */
static void record_checked(hmb_ctx *ctx, hmb_sample *out, int i, const char *what, double value)
{
    if (i < 0 || i >= out->nvalues || i >= ctx->metrics.count) {
        fprintf(stderr, "hmb-bench %s: internal error: metric %s is not in the sample's %d metrics\n",
                ctx->bench->name, what, out->nvalues);
        abort();
    }
    out->value[i] = value;
}

void hmb_record(hmb_ctx *ctx, hmb_sample *out, const char *metric, double value)
{
    record_checked(ctx, out, hmb_metric_list_find(&ctx->metrics, metric, strlen(metric)), metric, value);
}

void hmb_recordf(hmb_ctx *ctx, hmb_sample *out, double value, const char *fmt, ...)
{
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    hmb_record(ctx, out, name, value);
}

void hmb_record_at(hmb_ctx *ctx, hmb_sample *out, int metric, double value)
{
    char what[160];
    snprintf(what, sizeof what, "#%d (%s)", metric,
             metric >= 0 && metric < ctx->metrics.count ? ctx->metrics.items[metric].name : "past the list");
    record_checked(ctx, out, metric, what, value);
}

void hmb_record_mode(hmb_ctx *ctx, hmb_sample *out, int k, int mode, double value)
{
    int i = hmb_metric_list_slot(&ctx->metrics, k, mode);
    if (i < 0) {
        const hmb_bench *b = ctx->bench;
        int ok = k >= 0 && k < ctx->metrics.ntemplates && mode >= 0 && mode < ctx->metrics.nmodes;
        fprintf(stderr, "hmb-bench %s: internal error: mode %s does not declare metric %s\n", b->name,
                ok ? b->modes[mode].name : "?", ok ? b->mode_metrics[k].name : "(no such template)");
        abort();
    }
    record_checked(ctx, out, i, ctx->metrics.items[i].name, value);
}

double hmb_wait_bound_s(const hmb_ctx *ctx) { return ctx->val.wait_bound_s; }

/* --inject never-complete:ITER (test only): in that iteration every bounded wait sees nothing arrive. */
static int never_completes(const hmb_ctx *ctx, long iter) { return iter == ctx->hooks.inject[HMB_INJECT_NEVER_COMPLETE]; }

/* Poll done(arg, partition) until it reports completion (1), or --wait-bound past since (0). */
static int poll_bounded(const hmb_ctx *ctx, long iter, double since, int (*done)(void *arg, int partition),
                        void *arg, int partition)
{
    const int blocked = never_completes(ctx, iter);
    for (unsigned polls = 1;; polls++) {
        if (!blocked && done(arg, partition))
            return 1;
        if (polls % 256 == 0 && hmb_now() - since > ctx->val.wait_bound_s)
            return 0;
    }
}

/* A bounded wait that ran out: exit 3 with "<never> <what> <when>: <problem>", what formatted
 * from fmt only now (never in the timed path). */
static void bound_failure(hmb_ctx *ctx, const hmb_point *pt, long iter, int partition, const char *never,
                          const char *when, const char *problem, const char *fmt, va_list ap)
{
    char what[200];
    vsnprintf(what, sizeof what, fmt, ap);
    hmb_validation_failure(ctx, pt, iter, partition, "%s %s %s%s: %s", never, what, when,
                           never_completes(ctx, iter) ? " (--inject never-complete: planted by the test)" : "", problem);
}

/* "within N s" of a wait bounded by --wait-bound */
static const char *within_bound(const hmb_ctx *ctx, char *buf, size_t len)
{
    snprintf(buf, len, "within %g s (--wait-bound)", ctx->val.wait_bound_s);
    return buf;
}

typedef struct {
    const hmb_comm_ops *ops;
    MPI_Request req, *reqs;
    int n;
} bounded_arg;

static int partition_arrived(void *arg, int partition)
{
    const bounded_arg *a = arg;
    return a->ops->parrived(a->req, partition);
}

static int all_complete(void *arg, int partition)
{
    (void)partition;
    const bounded_arg *a = arg;
    return a->ops->testall(a->n, a->reqs);
}

void hmb_parrived_bounded(hmb_ctx *ctx, const hmb_point *pt, long iter, const hmb_comm_ops *ops, MPI_Request req,
                          int partition, double since, const char *fmt, ...)
{
    if (poll_bounded(ctx, iter, since, partition_arrived, &(bounded_arg){.ops = ops, .req = req}, partition))
        return;
    char never[64], when[64];
    snprintf(never, sizeof never, "MPI_Parrived never reported partition %d of", partition);
    va_list ap;
    va_start(ap, fmt);
    bound_failure(ctx, pt, iter, partition, never, within_bound(ctx, when, sizeof when),
                  "library conformance problem", fmt, ap);
    va_end(ap);
}

/* How often hmb_parrived_each_bounded looks at the clock's bounds and the peer. */
#define EACH_CHECK_INTERVAL_S 1e-3

void hmb_parrived_each_bounded(hmb_ctx *ctx, const hmb_point *pt, long iter, const hmb_comm_ops *ops,
                               MPI_Request req, int first, int last, double *arrived, const hmb_arrival_watch *w,
                               const char *fmt, ...)
{
    const int blocked = never_completes(ctx, iter);
    int left = last - first, overdue = 0;
    double next_check = hmb_now() + EACH_CHECK_INTERVAL_S;
    while (left > 0) {
        for (int j = first; j < last && !blocked; j++) {
            if (arrived[j] != 0.0 || !ops->parrived(req, j))
                continue;
            arrived[j] = hmb_now();
            left--;
            if (w->on_arrival)
                w->on_arrival(w->arg, j);
        }
        double now = hmb_now();
        if (left == 0 || now < next_check)
            continue;
        next_check = now + EACH_CHECK_INTERVAL_S;
        double done_at = w->peer_done ? w->peer_done(w->arg) : -1.0;
        overdue = done_at >= 0.0 && now - done_at > w->grace_s;
        if (overdue || now - w->since > ctx->val.wait_bound_s)
            break;
    }
    for (int j = first; j < last; j++) {
        if (arrived[j] != 0.0)
            continue;
        char never[64], when[96];
        snprintf(never, sizeof never, "MPI_Parrived never reported partition %d of", j);
        if (overdue)
            snprintf(when, sizeof when, "%g s after the peer completed its side", w->grace_s);
        else
            within_bound(ctx, when, sizeof when);
        va_list ap;
        va_start(ap, fmt);
        bound_failure(ctx, pt, iter, j, never, when, "library conformance problem", fmt, ap);
        va_end(ap);
    }
}

void hmb_waitall_bounded(hmb_ctx *ctx, const hmb_point *pt, long iter, const hmb_comm_ops *ops, int n,
                         MPI_Request *reqs, double since, const char *fmt, ...)
{
    if (poll_bounded(ctx, iter, since, all_complete, &(bounded_arg){.ops = ops, .reqs = reqs, .n = n}, -1))
        return;
    char never[80], when[64];
    snprintf(never, sizeof never, "%s never completed the %d request%s of", ops->mock ? "the mock" : "MPI_Test", n,
             n == 1 ? "" : "s");
    va_list ap;
    va_start(ap, fmt);
    bound_failure(ctx, pt, iter, -1, never, within_bound(ctx, when, sizeof when),
                  ops->mock ? "a request waits for one this rank never posted (a pattern bug)"
                            : "library conformance problem",
                  fmt, ap);
    va_end(ap);
}

void hmb_wait_bound_prepare(hmb_ctx *ctx, long iter, const char *fmt, ...)
{
    char what[200], message[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(message, sizeof message, "MPI_Wait never completed %s within %g s (--wait-bound)%s: library conformance problem",
             what, ctx->val.wait_bound_s, never_completes(ctx, iter) ? " (--inject never-complete: planted by the test)" : "");
    hmb_watchdog_bound_prepare(ctx->watchdog, ctx->val.wait_bound_s, iter, message);
}

void hmb_wait_bounded(hmb_ctx *ctx, long iter, MPI_Request *req, double since)
{
    hmb_watchdog_bound_start(ctx->watchdog, since);
    if (never_completes(ctx, iter)) /* planted: a wait that never returns, ended by the bound */
        for (;;)
            pause();
    MPI_Wait(req, MPI_STATUS_IGNORE);
    hmb_watchdog_bound_clear(ctx->watchdog);
}
