/* mt get test: shared progress (seed 003, category 2). The origin's threads each issue
 * MPI_Get + MPI_Win_flush (passive target, one MPI_Win_lock_all per point) while the target
 * computes without MPI calls — with or without a helper thread that polls MPI_Iprobe so the
 * library can progress the target side. Windows: one shared by every lane (shared,
 * funneled) or one per lane on the lane's own communicator (comm, everywhere). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "hmb/bench.h"
#include "mt.h"

static unsigned char *mt_get_slot(const mt_state *s, int lane, int op)
{
    return s->recvbuf + ((size_t)lane * s->window + op) * s->size;
}

/* A window exposing `bytes` at winmem + offset on the target (nothing on the origin); sets
 * *mem to where the target's bytes lie. Locked once for the whole point. */
static MPI_Win mt_make_window(hmb_ctx *ctx, mt_state *s, MPI_Comm comm, size_t bytes, size_t offset,
                              unsigned char **mem)
{
    MPI_Win win;
    MPI_Aint len = s->sending ? 0 : (MPI_Aint)bytes;
    *mem = NULL;
    if (HMB_OPTS(mt_opts, ctx)->get_window == MT_WINDOW_ALLOCATE) {
        MPI_Win_allocate(len, 1, MPI_INFO_NULL, comm, mem, &win);
    } else {
        if (len)
            *mem = s->winmem + offset;
        MPI_Win_create(*mem, len, 1, MPI_INFO_NULL, comm, &win);
    }
    if (!len)
        *mem = NULL;
    MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
    s->wins[s->nwins++] = win;
    return win;
}

void mt_get_setup(hmb_ctx *ctx, mt_state *s)
{
    s->compute_ns = hmb_common(ctx)->compute;
    if (!s->sending)
        s->winmem = calloc((size_t)s->nlanes, s->size);
    int per_lane_window = s->mode == MT_COMM || s->mode == MT_EVERYWHERE;
    if (!per_lane_window) {
        unsigned char *mem;
        MPI_Win win = mt_make_window(ctx, s, s->base, (size_t)s->nlanes * s->size, 0, &mem);
        for (int l = 0; l < s->nlanes; l++) {
            s->lanes[l].win = win;
            s->lanes[l].disp = (MPI_Aint)(l * s->size);
            s->lanes[l].target_mem = mem ? mem + l * s->size : NULL;
        }
    } else {
        for (int l = 0; l < s->nlanes; l++) {
            unsigned char *mem;
            s->lanes[l].win = mt_make_window(ctx, s, s->lanes[l].comm, s->size, (size_t)l * s->size, &mem);
            s->lanes[l].disp = 0;
            s->lanes[l].target_mem = mem;
        }
    }
    if (!s->sending && s->progress != MT_PROGRESS_NONE && !(s->helper = hmb_progress_start(ctx)))
        hmb_unsupported(ctx, "cannot start the target's MPI_Iprobe helper thread");
    s->recvbuf = calloc((size_t)s->nlanes * s->window, s->size);
    hmb_cache_register(ctx, s->recvbuf, (size_t)s->nlanes * s->window * s->size);
}

void mt_get_free(mt_state *s)
{
    hmb_progress_stop(s->helper);
    for (int w = 0; w < s->nwins; w++) {
        MPI_Win_unlock_all(s->wins[w]);
        MPI_Win_free(&s->wins[w]);
    }
    free(s->winmem);
}

/* One origin thread's gets; returns the summed Get+flush time. */
static double mt_get_thread(hmb_ctx *ctx, mt_state *s, int tid, long iter)
{
    double op_time_s = 0;
    mt_shuffle shuffle;
    mt_shuffle_init(&shuffle, s, hmb_rank(ctx), tid, iter);
    for (int op = 0; op < s->window; op++) {
        for (int l = 0; l < s->nlanes; l++) {
            const mt_lane *lane = &s->lanes[l];
            if (lane->thread != tid)
                continue;
            mt_shuffle_pause(&shuffle);
            double t_issue_s = hmb_now();
            MPI_Get(mt_get_slot(s, l, op), (int)s->size, MPI_BYTE, s->peer, lane->disp, (int)s->size, MPI_BYTE,
                    lane->win);
            MPI_Win_flush(s->peer, lane->win);
            op_time_s += hmb_now() - t_issue_s;
        }
    }
    return op_time_s;
}

void mt_get_prepare(hmb_ctx *ctx, mt_state *s, long iter)
{
    if (!s->sending) {
        for (int l = 0; l < s->nlanes; l++)
            hmb_fill(s->lanes[l].target_mem, s->size, hmb_rank(ctx), l, iter);
        for (int w = 0; w < s->nwins; w++)
            MPI_Win_sync(s->wins[w]);
    }
}

/* The target's helper (hmb_progress): one MPI_Iprobe, so the library can progress the gets. */
static int iprobe_poke(void *arg)
{
    int flag;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, ((mt_state *)arg)->base, &flag, MPI_STATUS_IGNORE);
    return 0;
}

double mt_get_iteration(hmb_ctx *ctx, mt_state *s, long iter)
{
    s->op_time_sum_s = 0;
    s->target_compute_s = 0;
    hmb_phase(ctx, "barrier: target window filled");
    MPI_Barrier(s->base);
    double elapsed_s = 0;
    if (s->sending) {
        hmb_phase(ctx, "MPI_Get + MPI_Win_flush");
        double t_start_s = hmb_now(), op_time_s = 0;
        if (s->threads == 1) {
            op_time_s = mt_get_thread(ctx, s, 0, iter);
        } else {
#pragma omp parallel num_threads(s->threads) reduction(+ : op_time_s)
            op_time_s += mt_get_thread(ctx, s, omp_get_thread_num(), iter);
        }
        elapsed_s = hmb_now() - t_start_s;
        s->op_time_sum_s = op_time_s;
    } else if (s->progress == MT_PROGRESS_NONE) {
        hmb_phase(ctx, "target compute (no MPI calls)");
        s->target_compute_s = (double)hmb_compute_ns(ctx, s->compute_ns) / 1e9;
    } else {
        hmb_phase(ctx, "target compute + MPI_Iprobe helper thread");
        hmb_progress_publish(s->helper, iprobe_poke, s);
        s->target_compute_s = (double)hmb_compute_ns(ctx, s->compute_ns) / 1e9;
        hmb_progress_withdraw(s->helper);
    }
    /* The target rewrites its window only after every get of this iteration completed. */
    hmb_phase(ctx, "barrier: gets done");
    MPI_Barrier(s->base);
    return elapsed_s;
}

void mt_get_verify(hmb_ctx *ctx, mt_state *s, const hmb_point *pt, long iter)
{
    if (!s->sending)
        return;
    for (int l = 0; l < s->nlanes; l++)
        for (int op = 0; op < s->window; op++)
            hmb_check_buffer(ctx, pt, mt_get_slot(s, l, op), s->size, s->peer, l, iter);
}
