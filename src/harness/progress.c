/* A benchmark's own progress thread (hmb/threads.h, hmb_progress_*): async's progress modes and mt's
 * get target. Hand-off: the caller publishes a poke and raises `run`; the thread calls the poke
 * until it returns 1 or `run` drops. Before the caller touches what the poke touches (waits on
 * its requests itself) it withdraws: drops `run` and waits until the thread has left its loop,
 * so the two never touch them at the same time. Idle, the thread sleeps on a condition
 * variable and costs the compute nothing. Pinned to the rank's spare CPU where there is one. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "ctx.h"

struct hmb_progress {
    hmb_ctx *ctx;
    pthread_t tid;
    pthread_mutex_t lock;
    pthread_cond_t wake, idle;
    atomic_int run;
    long published, finished; /* poke generations (under lock) */
    int testing, exit;        /* under lock */
    int (*poke)(void *arg);
    void *arg;
};

static void *progress_main(void *arg)
{
    hmb_progress *p = arg;
    hmb_pin_progress_thread(p->ctx);
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->exit && !(atomic_load(&p->run) && p->published != p->finished))
            pthread_cond_wait(&p->wake, &p->lock);
        if (p->exit)
            break;
        long generation = p->published;
        p->testing = 1;
        pthread_mutex_unlock(&p->lock);
        int done = 0;
        while (!done && atomic_load(&p->run))
            done = p->poke(p->arg);
        pthread_mutex_lock(&p->lock);
        p->testing = 0;
        p->finished = generation;
        pthread_cond_signal(&p->idle);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

hmb_progress *hmb_progress_start(hmb_ctx *ctx)
{
    hmb_progress *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->ctx = ctx;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->idle, NULL);
    atomic_init(&p->run, 0);
    if (pthread_create(&p->tid, NULL, progress_main, p) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

void hmb_progress_publish(hmb_progress *p, int (*poke)(void *arg), void *arg)
{
    pthread_mutex_lock(&p->lock);
    p->poke = poke;
    p->arg = arg;
    p->published++;
    atomic_store(&p->run, 1);
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
}

void hmb_progress_withdraw(hmb_progress *p)
{
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->run, 0);
    while (p->testing)
        pthread_cond_wait(&p->idle, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

void hmb_progress_stop(hmb_progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->exit = 1;
    atomic_store(&p->run, 0);
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->tid, NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->idle);
    free(p);
}
