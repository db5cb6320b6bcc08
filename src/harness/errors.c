/* Usage errors: one line, exit 2, on every rank alike — after the watchdog is stopped and MPI
 * finalised. Kept apart from ctx.c so the context's accessors call no other module (ctx <- output
 * <- watchdog <- errors). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ctx.h"
#include "watchdog.h"

void hmb_usage_error(hmb_ctx *ctx, const char *fmt, ...)
{
    char raw[1024], msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    hmb_escape_controls(raw, msg, sizeof msg); /* a newline inside a value keeps the error one line */
    if (ctx->run.rank == 0) {
        fprintf(stderr, "hmb-bench %s: %s\n", ctx->bench->name, msg);
        fflush(stderr);
    }
    if (ctx->watchdog) {
        hmb_watchdog_stop(ctx->watchdog);
        ctx->watchdog = NULL;
    }
    if (ctx->run.mpi_initialized) {
        fflush(stdout);
        MPI_Finalize();
    } else if (ctx->run.rank != 0 && getenv("OMPI_COMM_WORLD_RANK")) {
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

void hmb_require_memory(hmb_ctx *ctx, double bytes_per_rank, const char *what)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    int on_node = ctx->run.ranks_per_node > 0 ? ctx->run.ranks_per_node : 1;
    double share = pages > 0 && page > 0 ? (double)pages * (double)page / on_node : INFINITY;
    if (hmb_all_agree(ctx, bytes_per_rank <= share))
        return;
    hmb_usage_error(ctx, "%s needs %.3g GB per rank, more than a rank's share of this node's memory "
                         "(%.3g GB over %d ranks: %.3g GB)",
                    what, bytes_per_rank / 1e9, share * on_node / 1e9, on_node, share / 1e9);
}
