/* The point loop: setup, warm-up, adaptive repetitions, summary, result record, teardown.
 * Iterations are numbered consecutively from 0 within a point, warm-up first, so a pattern or
 * a noise draw never repeats between warm-up and measured iterations. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "computelog.h"
#include "ctx.h"
#include "env.h"
#include "output.h"
#include "pivot.h"
#include "validate.h"
#include "watchdog.h"

typedef enum { STOP_NONE, STOP_CI, STOP_BUDGET, STOP_MAX_ITERS, STOP_FIXED } stop_reason;

static const char *stop_name(stop_reason r)
{
    switch (r) {
    case STOP_CI: return "ci";
    case STOP_BUDGET: return "budget";
    case STOP_MAX_ITERS: return "max_iters";
    case STOP_FIXED: return "fixed";
    default: return "none";
    }
}

/* Every valid sample of every metric, in growable arrays (rank 0). */
typedef struct {
    int nmetrics;
    long count;
    size_t capacity;
    double **values; /* nmetrics arrays */
} sample_store;

static void store_add(sample_store *st, const hmb_sample *s)
{
    size_t cap = st->capacity; /* one capacity for every metric's array */
    for (int m = 0; m < st->nmetrics; m++) {
        cap = st->capacity;
        st->values[m] = hmb_grow(st->values[m], &cap, (size_t)st->count, sizeof(double));
    }
    st->capacity = cap;
    for (int m = 0; m < st->nmetrics; m++)
        st->values[m][st->count] = s->value[m];
    st->count++;
}

static void store_free(sample_store *st)
{
    for (int m = 0; m < st->nmetrics; m++)
        free(st->values[m]);
    free(st->values);
}

/* The primary metric is metric 0, or, for points that do not produce it (NaN: e.g. a latency
 * metric at a bandwidth point), the first metric that has values. */
static int primary_metric(const sample_store *st)
{
    for (int m = 0; m < st->nmetrics; m++)
        for (long i = 0; i < st->count; i++)
            if (!isnan(st->values[m][i]))
                return m;
    return 0;
}

/* --inject hang:ITER (test only): rank 1 stops participating before iteration ITER, outside every
 * timed region; the watchdog must end the run naming the phase. */
static void inject_hang(hmb_ctx *ctx, long iter)
{
    if (iter != ctx->hooks.inject[HMB_INJECT_HANG] || ctx->run.rank != 1)
        return;
    hmb_phase(ctx, "inject hang (test: rank 1 stopped participating)");
    for (;;)
        sleep(1);
}

static int run_iteration(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *sample)
{
    inject_hang(ctx, iter);
    atomic_store(&ctx->iter, iter);
    atomic_store(&ctx->hooks.checked_this_iter, 0);
    hmb_compute_log_begin_iteration(ctx);
    hmb_checks_prepare(ctx, iter); /* registered buffers: sends filled, receives poisoned */
    if (ctx->bench->prepare) {
        hmb_phase(ctx, "prepare");
        ctx->bench->prepare(ctx, state, pt, iter);
    }
    if (ctx->cache.cold) {
        hmb_phase(ctx, "cache flush");
        hmb_cache_flush(ctx);
        MPI_Barrier(ctx->run.comm);
    }
    for (int m = 0; m < sample->nvalues; m++)
        sample->value[m] = NAN;
    sample->valid = 1;
    hmb_phase(ctx, "iterate");
    int rc = ctx->bench->iterate(ctx, state, pt, iter, sample);
    if (rc != 0) {
        fprintf(stderr, "hmb-bench: %s: iteration %ld failed on rank %d\n", ctx->bench->name, iter, ctx->run.rank);
        MPI_Abort(ctx->run.comm, HMB_EXIT_VALIDATION);
    }
    if (ctx->bench->verify) {
        hmb_phase(ctx, "verify");
        ctx->bench->verify(ctx, state, pt, iter);
    }
    hmb_checks_run(ctx, iter, HMB_AFTER_ITERATION);
    /* --inject corrupt (test only): learn, one iteration ahead, the highest rank that checks. */
    if (ctx->hooks.inject[HMB_INJECT_CORRUPT] >= 0 && iter == ctx->hooks.inject[HMB_INJECT_CORRUPT] - 1) {
        int mine = atomic_load(&ctx->hooks.checked_this_iter) ? ctx->run.rank : -1;
        MPI_Allreduce(&mine, &ctx->hooks.corrupt_rank, 1, MPI_INT, MPI_MAX, ctx->run.comm);
    }
    /* --inject invalid (test only): rank 0, which judges validity, leaves this sample out. */
    if (ctx->run.rank == 0 && iter == ctx->hooks.inject[HMB_INJECT_INVALID]) {
        sample->valid = 0;
        hmb_inject_fired(ctx, HMB_INJECT_INVALID);
    }
    return sample->valid;
}

/* Skip the point on every rank if any rank called hmb_unsupported(); rank 0 gets the reason. */
static int agree_unsupported(hmb_ctx *ctx)
{
    int mine = ctx->unsupported ? ctx->run.rank : ctx->run.size, first = ctx->run.size;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, ctx->run.comm);
    if (first == ctx->run.size)
        return 0;
    MPI_Bcast(ctx->unsupported_reason, (int)sizeof ctx->unsupported_reason, MPI_CHAR, first, ctx->run.comm);
    return 1;
}

static void write_result(hmb_ctx *ctx, const hmb_point *pt, const char *status, const hmb_summary *summaries,
                         const sample_store *st, long warmup, long iterations, long invalid, stop_reason why,
                         int ci_met, double elapsed_s, const hmb_compute_summary *compute)
{
    hmb_json j;
    hmb_output_begin_record(ctx, &j, "result");
    hmb_json_str(&j, "bench", ctx->bench->name);
    hmb_json_open_obj(&j, "params");
    hmb_json_int(&j, "size_bytes", (long long)pt->size_bytes);
    hmb_json_point_params(&j, pt);
    hmb_json_int(&j, "threads", ctx->run.threads);
    hmb_json_close_obj(&j);
    hmb_json_str(&j, "status", status);
    if (strcmp(status, "ok") != 0) {
        hmb_json_str(&j, "reason", ctx->unsupported_reason);
    } else {
        hmb_json_int(&j, "warmup", warmup);
        hmb_json_int(&j, "iterations", iterations);
        hmb_json_int(&j, "invalid", invalid);
        hmb_json_num(&j, "ci_target", ctx->opt.common.ci_target / 100.0);
        hmb_json_bool(&j, "ci_target_met", ci_met);
        hmb_json_str(&j, "stop_reason", stop_name(why));
        hmb_json_num(&j, "elapsed_s", elapsed_s);
        hmb_json_open_obj(&j, "metrics");
        for (int m = 0; m < st->nmetrics; m++) {
            const hmb_metric *mt = &ctx->metrics.items[m];
            const hmb_summary *s = &summaries[m];
            hmb_json_open_obj(&j, mt->name);
            hmb_json_str(&j, "unit", mt->unit);
            hmb_json_num(&j, "median", s->count ? s->median : NAN);
            hmb_json_num(&j, "ci_lo", s->count ? s->ci_lo : NAN);
            hmb_json_num(&j, "ci_hi", s->count ? s->ci_hi : NAN);
            hmb_json_bool(&j, "ci_valid", s->ci_valid);
            hmb_json_num(&j, "min", s->count ? s->min : NAN);
            hmb_json_num(&j, "p95", s->count ? s->p95 : NAN);
            hmb_json_num(&j, "max", s->count ? s->max : NAN);
            hmb_json_num(&j, "mean", s->count ? s->mean : NAN);
            hmb_json_num(&j, "stddev", s->count ? s->stddev : NAN);
            hmb_json_int(&j, "count", s->count);
            hmb_json_bool(&j, "higher_is_better", mt->higher_is_better);
            hmb_json_close_obj(&j);
        }
        hmb_json_close_obj(&j);
        if (ctx->opt.common.raw) {
            hmb_json_open_obj(&j, "samples");
            for (int m = 0; m < st->nmetrics; m++) {
                hmb_json_open_arr(&j, ctx->metrics.items[m].name);
                for (long i = 0; i < st->count; i++)
                    if (!isnan(st->values[m][i]))
                        hmb_json_num(&j, NULL, st->values[m][i]);
                hmb_json_close_arr(&j);
            }
            hmb_json_close_obj(&j);
        }
    }
    if (compute)
        hmb_compute_summary_write(&j, compute);
    hmb_extras_write(&j, "extra", &ctx->out.result_extra);
    hmb_json_close_obj(&j);
    hmb_output_record(ctx, &j);
    hmb_json_free(&j);
}

void hmb_measure_point(hmb_ctx *ctx, const hmb_point *pt)
{
    const hmb_bench *b = ctx->bench;
    ctx->point = pt;
    ctx->unsupported = 0;
    ctx->unsupported_reason[0] = '\0';
    ctx->hooks.corrupt_rank = -1;
    atomic_store(&ctx->hooks.corrupt_done, 0);
    atomic_store(&ctx->iter, 0);
    hmb_extras_clear(&ctx->out.result_extra);
    hmb_watchdog_arm(ctx->watchdog, ctx->opt.common.timeout);
    double t_point_start_s = hmb_now();

    /* A registration left from outside a point (a calibration in points()) would make the
     * flush touch a buffer that is probably freed: say which bug it is instead of crashing. */
    if (ctx->cache.count != 0) {
        fprintf(stderr, "hmb-bench: %s: %d buffer(s) still registered for --cache cold before setup() "
                "(freed without hmb_cache_unregister?)\n", b->name, ctx->cache.count);
        MPI_Abort(ctx->run.comm, 1);
    }
    hmb_phase(ctx, "setup");
    void *state = b->setup ? b->setup(ctx, pt) : NULL;
    if (agree_unsupported(ctx)) {
        if (state && b->teardown)
            b->teardown(ctx, state, pt);
        hmb_cache_unregister_all(ctx);
        hmb_checks_clear(ctx);
        if (ctx->run.rank == 0) {
            write_result(ctx, pt, "unsupported", NULL, NULL, 0, 0, 0, STOP_NONE, 0, 0, NULL);
            hmb_table_unsupported(ctx, pt, ctx->unsupported_reason);
            hmb_pivot_add(ctx, pt, NULL);
        }
        hmb_watchdog_disarm(ctx->watchdog);
        ctx->point = NULL;
        return;
    }

    const long warmup = ctx->opt.common.warmup;
    const long min_iters = ctx->opt.common.iters;
    const long max_iters = ctx->opt.common.max_iters;
    const double ci_target = ctx->opt.common.ci_target / 100.0;
    const double budget_s = (double)ctx->opt.common.budget * 1e-9;

    ctx->cache.flushes = 0; /* counted from the point's first iteration */
    sample_store st = {.nmetrics = ctx->metrics.count};
    hmb_sample sample = {.nvalues = ctx->metrics.count};
    st.values = calloc((size_t)st.nmetrics + 1, sizeof *st.values);
    sample.value = calloc((size_t)sample.nvalues + 1, sizeof *sample.value);
    if (!st.values || !sample.value)
        abort();
    long iter = 0;
    hmb_compute_log_free(ctx); /* the measured compute of this point's measured iterations */
    for (long w = 0; w < warmup; w++, iter++)
        run_iteration(ctx, state, pt, iter, &sample);

    double t_measure_start_s = hmb_now();
    long measured = 0, invalid = 0, next_check = min_iters;
    stop_reason why = STOP_NONE;
    while (why == STOP_NONE) {
        if (run_iteration(ctx, state, pt, iter, &sample)) {
            if (ctx->run.rank == 0)
                store_add(&st, &sample);
        } else {
            invalid++;
        }
        hmb_compute_log_keep_iteration(ctx);
        iter++;
        measured++;
        /* max_iters: every rank alone; the other stops: rank 0 decides and broadcasts. */
        if (measured >= max_iters) {
            why = STOP_MAX_ITERS;
        } else if (ci_target <= 0 && measured >= min_iters) {
            /* --iters N with --ci-target 0: N valid samples. An invalid one (async's kernel faster
             * than calibrated, when another process's load ends mid-run) is replaced while the
             * budget lasts. Only rank 0 judges validity: it decides, outside every timed region. */
            int decision = STOP_FIXED;
            if (ctx->run.rank == 0 && measured - invalid < min_iters)
                decision = hmb_now() - t_measure_start_s >= budget_s ? STOP_BUDGET : STOP_NONE;
            MPI_Bcast(&decision, 1, MPI_INT, 0, ctx->run.comm);
            why = (stop_reason)decision;
        } else if (ci_target > 0 && measured >= next_check) {
            /* Rank 0 decides; checked every ~1/16 of the iterations so far, so the broadcast
             * costs next to nothing per iteration (and is never inside a timed region). */
            int decision = STOP_NONE;
            if (ctx->run.rank == 0) {
                hmb_summary s;
                hmb_summarize(st.values[primary_metric(&st)], st.count, 0.95, &s);
                if (st.count > 0 && hmb_ci_target_met(&s, ci_target))
                    decision = STOP_CI;
                else if (hmb_now() - t_measure_start_s >= budget_s)
                    decision = STOP_BUDGET;
            }
            MPI_Bcast(&decision, 1, MPI_INT, 0, ctx->run.comm);
            why = (stop_reason)decision;
            next_check = measured + (measured / 16 > 1 ? measured / 16 : 1);
        }
    }
    double elapsed_s = hmb_now() - t_point_start_s;
    hmb_inject_point_ran(ctx, iter);
    hmb_compute_summary compute;
    hmb_compute_log_summarize(ctx, &compute); /* collective */
    hmb_compute_log_free(ctx);

    if (ctx->run.rank == 0) {
        hmb_summary *summaries = calloc((size_t)st.nmetrics + 1, sizeof *summaries);
        if (!summaries)
            abort();
        for (int m = 0; m < st.nmetrics; m++)
            hmb_summarize(st.values[m], st.count, 0.95, &summaries[m]);
        hmb_phase(ctx, "annotate");
        hmb_env_progress_annotate(ctx, pt);
        hmb_cache_annotate(ctx);
        if (b->annotate)
            b->annotate(ctx, state, pt);
        /* Judged on the final CI: a point stopped by the budget may still have met the target. */
        int target_met = ci_target > 0 && hmb_ci_target_met(&summaries[primary_metric(&st)], ci_target);
        write_result(ctx, pt, "ok", summaries, &st, warmup, measured, invalid, why, target_met, elapsed_s, &compute);
        hmb_table_row(ctx, pt, summaries, measured);
        hmb_pivot_add(ctx, pt, summaries);
        free(summaries);
    }
    store_free(&st);
    free(sample.value);
    hmb_phase(ctx, "teardown");
    if (b->teardown)
        b->teardown(ctx, state, pt);
    hmb_cache_unregister_all(ctx);
    hmb_checks_clear(ctx);
    hmb_watchdog_disarm(ctx->watchdog);
    ctx->point = NULL;
}
