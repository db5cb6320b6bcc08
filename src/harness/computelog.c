/* The measured compute of every result (SPEC §2 "Compute load": record the measured compute per
 * iteration, median and worst thread). Each thread adds its compute calls of the running
 * iteration to its own slot (hmb_compute_ns and friends, ctx.c); between iterations the point
 * loop keeps the totals of measured iterations; at the end of the point every rank reduces its
 * threads to medians and rank 0 gathers them: the median over threads and ranks, and the thread
 * whose compute was furthest from its request. */
#include <stdlib.h>
#include <string.h>

#include "ctx.h"

void hmb_compute_log_add(hmb_ctx *ctx, int tid, int kind, int64_t requested_ns, int64_t measured_ns)
{
    if (tid < 0 || tid >= HMB_MAX_THREADS || requested_ns <= 0)
        return;
    hmb_compute_log *log = &ctx->compute_log[tid];
    log->requested_ns += requested_ns;
    log->measured_ns += measured_ns;
    log->kinds |= kind;
}

void hmb_compute_log_begin_iteration(hmb_ctx *ctx)
{
    for (int t = 0; t < ctx->threads; t++)
        ctx->compute_log[t].requested_ns = ctx->compute_log[t].measured_ns = 0;
}

void hmb_compute_log_keep_iteration(hmb_ctx *ctx)
{
    for (int t = 0; t < ctx->threads; t++) {
        hmb_compute_log *log = &ctx->compute_log[t];
        if (log->requested_ns <= 0)
            continue;
        size_t cap = log->capacity;
        log->iter_requested_ns = hmb_grow(log->iter_requested_ns, &cap, log->count, sizeof(double));
        cap = log->capacity;
        log->iter_measured_ns = hmb_grow(log->iter_measured_ns, &cap, log->count, sizeof(double));
        log->capacity = cap;
        log->iter_requested_ns[log->count] = (double)log->requested_ns;
        log->iter_measured_ns[log->count] = (double)log->measured_ns;
        log->count++;
    }
}

void hmb_compute_log_free(hmb_ctx *ctx)
{
    for (int t = 0; t < HMB_MAX_THREADS; t++) {
        hmb_compute_log *log = &ctx->compute_log[t];
        free(log->iter_requested_ns);
        free(log->iter_measured_ns);
        memset(log, 0, sizeof *log);
    }
}

void hmb_compute_log_summarize(hmb_ctx *ctx, hmb_compute_summary *out)
{
    enum { NFIELDS = 4 }; /* hmb_compute_summarize's rows */
    const int threads = ctx->threads;
    double *mine = malloc((size_t)threads * NFIELDS * sizeof(double));
    double *all = ctx->rank == 0 ? malloc((size_t)ctx->size * threads * NFIELDS * sizeof(double)) : NULL;
    if (!mine || (ctx->rank == 0 && !all))
        abort();
    for (int t = 0; t < threads; t++) {
        hmb_compute_log *log = &ctx->compute_log[t];
        hmb_compute_thread_medians((long)log->count, log->iter_requested_ns, log->iter_measured_ns, mine + t * NFIELDS);
        mine[t * NFIELDS + 3] = log->kinds;
    }
    MPI_Gather(mine, threads * NFIELDS, MPI_DOUBLE, all, threads * NFIELDS, MPI_DOUBLE, 0, ctx->comm);
    free(mine);
    memset(out, 0, sizeof *out);
    if (ctx->rank == 0)
        hmb_compute_summarize(ctx->size, threads, all, out);
    free(all);
}

void hmb_compute_summary_write(hmb_json *j, const hmb_compute_summary *s)
{
    if (!s->present)
        return;
    hmb_json_open_obj(j, "compute");
    const char *kind = s->kinds == (HMB_COMPUTE_TIME | HMB_COMPUTE_WORK) ? "time+work"
                       : s->kinds == HMB_COMPUTE_WORK                     ? "work"
                                                                          : "time";
    hmb_json_str(j, "kind", kind);
    hmb_json_int(j, "threads", s->threads);
    hmb_json_num(j, "requested_ns", s->requested_ns);
    hmb_json_num(j, "measured_ns", s->measured_ns);
    hmb_json_num(j, "error", s->error);
    hmb_json_open_obj(j, "worst");
    hmb_json_int(j, "rank", s->worst_rank);
    hmb_json_int(j, "thread", s->worst_thread);
    hmb_json_num(j, "requested_ns", s->worst_requested_ns);
    hmb_json_num(j, "measured_ns", s->worst_measured_ns);
    hmb_json_num(j, "error", s->worst_error);
    hmb_json_close_obj(j);
    hmb_json_close_obj(j);
}
