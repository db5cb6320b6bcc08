/* Watchdog: one pthread per rank sleeps until the current point's deadline (--timeout). If a
 * point is still in flight then, it names the benchmark, point, rank and phase on stderr,
 * writes a failure record and aborts the job, instead of hanging an allocation. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"
#include "output.h"
#include "watchdog.h"

struct hmb_watchdog {
    hmb_ctx *ctx;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int armed, stopping;
    int64_t timeout_ns;
    struct timespec deadline; /* CLOCK_MONOTONIC */
};

static void fire(hmb_watchdog *w)
{
    hmb_ctx *ctx = w->ctx;
    char where[512], msg[1024];
    hmb_point_describe(ctx->point, where, sizeof where);
    const char *phase = atomic_load(&ctx->phase);
    snprintf(msg, sizeof msg, "%s %s rank %d phase '%s' did not finish within %.6g s", ctx->bench->name, where,
             ctx->run.rank, phase ? phase : "", (double)w->timeout_ns * 1e-9);
    fprintf(stderr, "hmb-bench: timeout: %s\n", msg);
    fflush(stderr);
    /* Whichever rank fires first aborts the others, so each writes its own record. */
    hmb_output_failure(ctx, "timeout", -1, msg);
    fflush(stdout);
    MPI_Abort(ctx->run.comm, HMB_EXIT_TIMEOUT);
    _exit(HMB_EXIT_TIMEOUT);
}

static void *watch(void *arg)
{
    hmb_watchdog *w = arg;
    pthread_mutex_lock(&w->lock);
    while (!w->stopping) {
        if (!w->armed) {
            pthread_cond_wait(&w->changed, &w->lock);
            continue;
        }
        int rc = pthread_cond_timedwait(&w->changed, &w->lock, &w->deadline);
        if (rc == ETIMEDOUT && w->armed && !w->stopping) {
            pthread_mutex_unlock(&w->lock);
            fire(w);
        }
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
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
