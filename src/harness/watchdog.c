/* Watchdog: one pthread per rank sleeps until the current point's deadline (--timeout). If a
 * point is still in flight then, it names the benchmark, point, rank and phase on stderr,
 * writes a failure record and aborts the job, instead of hanging an allocation.
 * It also keeps the --wait-bound of a blocking call the harness cannot poll (hmb_wait_bounded:
 * MPI_Wait): past that bound it fails the point with exit 3 naming the call. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"

struct hmb_watchdog {
    hmb_ctx *ctx;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int armed, stopping;
    int64_t timeout_ns;
    struct timespec deadline; /* CLOCK_MONOTONIC */
    /* The bounded blocking call: prepared (named, its bound not started yet: the watchdog looks
     * again every bound_s) or started (fails at bound_deadline); bound_wake: when to look next. */
    enum { BOUND_NONE, BOUND_PREPARED, BOUND_STARTED } bound;
    double bound_s;
    struct timespec bound_deadline, bound_wake;
    long bound_iter;
    char bound_message[600];
};

static struct timespec timespec_of(double s)
{
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000)
        ts.tv_sec++, ts.tv_nsec -= 1000000000;
    return ts;
}

static int before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void fire(hmb_watchdog *w)
{
    hmb_ctx *ctx = w->ctx;
    char where[512], msg[1024];
    hmb_point_describe(ctx->point, where, sizeof where);
    const char *phase = atomic_load(&ctx->phase);
    snprintf(msg, sizeof msg, "%s %s rank %d phase '%s' did not finish within %.6g s", ctx->bench->name, where,
             ctx->rank, phase ? phase : "", (double)w->timeout_ns * 1e-9);
    fprintf(stderr, "hmb-bench: timeout: %s\n", msg);
    fflush(stderr);
    /* Whichever rank fires first aborts the others, so each writes its own record. */
    hmb_output_failure(ctx, "timeout", -1, msg);
    fflush(stdout);
    MPI_Abort(ctx->comm, HMB_EXIT_TIMEOUT);
    _exit(HMB_EXIT_TIMEOUT);
}

/* The bounded call did not return within its bound: exit 3 (hmb_validation_failure). */
static void fire_bound(hmb_watchdog *w)
{
    hmb_validation_failure(w->ctx, w->ctx->point, w->bound_iter, -1, "%s", w->bound_message);
}

static void *watch(void *arg)
{
    hmb_watchdog *w = arg;
    pthread_mutex_lock(&w->lock);
    while (!w->stopping) {
        if (!w->armed && w->bound == BOUND_NONE) {
            pthread_cond_wait(&w->changed, &w->lock);
            continue;
        }
        struct timespec wake = w->armed ? w->deadline : w->bound_wake;
        if (w->bound != BOUND_NONE && before(&w->bound_wake, &wake))
            wake = w->bound_wake;
        int rc = pthread_cond_timedwait(&w->changed, &w->lock, &wake);
        if (w->stopping)
            break;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (rc == ETIMEDOUT && w->armed && !before(&now, &w->deadline)) {
            pthread_mutex_unlock(&w->lock);
            fire(w);
        }
        if (w->bound == BOUND_STARTED && !before(&now, &w->bound_deadline)) {
            pthread_mutex_unlock(&w->lock);
            fire_bound(w);
        }
        if (w->bound != BOUND_NONE && !before(&now, &w->bound_wake)) /* started: its deadline; else look again */
            w->bound_wake = w->bound == BOUND_STARTED ? w->bound_deadline
                                                      : timespec_of((double)now.tv_sec + 1e-9 * (double)now.tv_nsec + w->bound_s);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

void hmb_watchdog_bound_prepare(hmb_watchdog *w, double bound_s, long iter, const char *message)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->bound = BOUND_PREPARED;
    w->bound_s = bound_s;
    w->bound_iter = iter;
    snprintf(w->bound_message, sizeof w->bound_message, "%s", message);
    w->bound_wake = timespec_of(hmb_now() + bound_s);
    pthread_cond_signal(&w->changed); /* its wake-up may be earlier than the one waited for */
    pthread_mutex_unlock(&w->lock);
}

void hmb_watchdog_bound_start(hmb_watchdog *w, double since_s)
{
    if (!w)
        return;
    /* No signal: the deadline is never earlier than the wake-up the watchdog already has (the
     * prepared bound looks again every bound_s, and since_s is after the latest look). */
    pthread_mutex_lock(&w->lock);
    if (w->bound == BOUND_PREPARED) {
        w->bound = BOUND_STARTED;
        w->bound_deadline = timespec_of(since_s + w->bound_s);
    }
    pthread_mutex_unlock(&w->lock);
}

void hmb_watchdog_bound_clear(hmb_watchdog *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->bound = BOUND_NONE; /* no signal: the watchdog wakes at its planned time and finds nothing */
    pthread_mutex_unlock(&w->lock);
}

hmb_watchdog *hmb_watchdog_start(hmb_ctx *ctx)
{
    hmb_watchdog *w = calloc(1, sizeof *w);
    if (!w)
        abort();
    w->ctx = ctx;
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->changed, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&w->thread, NULL, watch, w) != 0) {
        fprintf(stderr, "hmb-bench: warning: cannot start the watchdog thread; --timeout is off\n");
        free(w);
        return NULL;
    }
    return w;
}

void hmb_watchdog_arm(hmb_watchdog *w, int64_t timeout_ns)
{
    if (!w || timeout_ns <= 0)
        return;
    pthread_mutex_lock(&w->lock);
    clock_gettime(CLOCK_MONOTONIC, &w->deadline);
    int64_t ns = w->deadline.tv_nsec + timeout_ns % 1000000000;
    w->deadline.tv_sec += timeout_ns / 1000000000 + ns / 1000000000;
    w->deadline.tv_nsec = ns % 1000000000;
    w->timeout_ns = timeout_ns;
    w->armed = 1;
    pthread_cond_signal(&w->changed);
    pthread_mutex_unlock(&w->lock);
}

void hmb_watchdog_disarm(hmb_watchdog *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->armed = 0;
    pthread_cond_signal(&w->changed);
    pthread_mutex_unlock(&w->lock);
}

void hmb_watchdog_stop(hmb_watchdog *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = 1;
    pthread_cond_signal(&w->changed);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->changed);
    free(w);
}
