/* --inject (TEST ONLY): the faults a test plants, and the rule that a planted fault either fires
 * or fails the run. A fault that fires ends the run by itself (validation: exit 3; the watchdog:
 * exit 4), so a run that reaches its end with a fault given either never planted it (the point
 * never reached its iteration, or nothing in this benchmark and mode has a place for it: exit 2)
 * or planted it and nothing caught it (a validation bug: exit 3). Nothing here runs in a timed
 * region: benchmarks mark a planted fault where they choose their send data (hmb_inject_fired). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ctx.h"
#include "validate.h"

/* HMB_INJECT_* order (the choices of --inject in HMB_COMMON_OPTIONS). */
static const char *const fault_names[HMB_INJECT_COUNT] = {"corrupt", "never-complete", "stale",
                                                          "wrong-slot", "hang", "silent-partner", "invalid"};

/* "corrupt:5", or "silent-partner" for the fault that takes no iteration. */
static void fault_text(const hmb_ctx *ctx, int f, char *buf, size_t len)
{
    if (f == HMB_INJECT_SILENT_PARTNER)
        snprintf(buf, len, "%s", fault_names[f]);
    else
        snprintf(buf, len, "%s:%ld", fault_names[f], ctx->hooks.inject[f]);
}

/* The faults a planted wrong byte makes visible only to validation. */
static int needs_validation(int f)
{
    return f == HMB_INJECT_CORRUPT || f == HMB_INJECT_STALE || f == HMB_INJECT_WRONG_SLOT;
}

void hmb_inject_setup(hmb_ctx *ctx)
{
    const hmb_common_opts *o = &ctx->opt.common;
    for (int f = 0; f < HMB_INJECT_COUNT; f++)
        ctx->hooks.inject[f] = -1;
    ctx->hooks.last_iter_run = -1;
    /* Iterations count from 0 within each point, warm-up first: with --ci-target 0 every point
     * runs exactly --warmup + --iters of them, else at most --warmup + --max-iters. */
    const long long fixed = o->ci_target <= 0, runs = o->warmup + (fixed ? o->iters : o->max_iters);
    for (int i = 0; i < o->inject.n; i++) { /* --inject corrupt:2,hang:3,silent-partner */
        const int f = (int)o->inject.choice[i];
        const double at = isnan(o->inject.arg[i]) ? 0.0 : o->inject.arg[i];
        if (at != floor(at))
            hmb_usage_error(ctx, "--inject %s:%g: the iteration is not a whole number", fault_names[f], at);
        ctx->hooks.inject[f] = (long)at;
        char text[64];
        fault_text(ctx, f, text, sizeof text);
        if (f != HMB_INJECT_SILENT_PARTNER && (long long)at >= runs)
            hmb_usage_error(ctx, "--inject %s: never fires: each point runs iterations 0..%lld (--warmup %lld + %s "
                                 "%lld%s; warm-up iterations count from 0)", text, runs - 1, (long long)o->warmup,
                            fixed ? "--iters" : "at most --max-iters", fixed ? (long long)o->iters : (long long)o->max_iters,
                            fixed ? " with --ci-target 0" : "");
        if (needs_validation(f) && o->no_validate)
            hmb_usage_error(ctx, "--inject %s: never caught: --no-validate turns off the check that must catch it",
                            text);
    }
}

void hmb_inject_check_ranks(hmb_ctx *ctx)
{
    if (ctx->hooks.inject[HMB_INJECT_HANG] >= 0 && ctx->run.size < 2)
        hmb_usage_error(ctx, "--inject hang:%ld: never fires: it stops rank 1, and this run has 1 rank",
                        ctx->hooks.inject[HMB_INJECT_HANG]);
}

void hmb_inject_fired(hmb_ctx *ctx, int fault)
{
    if (fault >= 0 && fault < HMB_INJECT_COUNT)
        atomic_store(&ctx->hooks.fired[fault], 1);
}

void hmb_inject_point_ran(hmb_ctx *ctx, long iterations)
{
    if (iterations > 0 && iterations - 1 > ctx->hooks.last_iter_run)
        ctx->hooks.last_iter_run = iterations - 1;
}

int hmb_inject_verdict(hmb_ctx *ctx)
{
    int given = 0, fired[HMB_INJECT_COUNT], any[HMB_INJECT_COUNT];
    for (int f = 0; f < HMB_INJECT_COUNT; f++) {
        given |= ctx->hooks.inject[f] >= 0;
        fired[f] = atomic_load(&ctx->hooks.fired[f]);
    }
    if (!given)
        return HMB_EXIT_OK;
    MPI_Allreduce(fired, any, HMB_INJECT_COUNT, MPI_INT, MPI_MAX, ctx->run.comm);
    for (int f = 0; f < HMB_INJECT_COUNT; f++) {
        if (ctx->hooks.inject[f] < 0)
            continue;
        char text[64], why[256];
        fault_text(ctx, f, text, sizeof text);
        const long at = ctx->hooks.inject[f], last = ctx->hooks.last_iter_run;
        int rc = HMB_EXIT_USAGE;
        if (any[f] && f == HMB_INJECT_INVALID)
            continue; /* caught by design: the sample was left out (and replaced) */
        if (any[f]) {
            snprintf(why, sizeof why, "fired, but the run ended normally: nothing caught the planted fault "
                                      "(a validation bug)");
            rc = HMB_EXIT_VALIDATION;
        } else if (last < 0) {
            snprintf(why, sizeof why, "never fired: no point ran an iteration");
        } else if (f != HMB_INJECT_SILENT_PARTNER && at > last) {
            snprintf(why, sizeof why, "never fired: no point reached iteration %ld (the longest ran iterations "
                                      "0..%ld, warm-up included)", at, last);
        } else {
            snprintf(why, sizeof why, "never fired: %s ran %s, but no rank planted it (this benchmark, or its "
                                      "modes and options in this run, have no place for it)",
                     ctx->bench->name, f == HMB_INJECT_SILENT_PARTNER ? "its points" : "that iteration");
        }
        if (ctx->run.rank == 0) {
            fprintf(stderr, "hmb-bench %s: --inject %s %s\n", ctx->bench->name, text, why);
            fflush(stderr);
        }
        return rc;
    }
    return HMB_EXIT_OK;
}
