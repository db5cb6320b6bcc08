/* The environment of a run: clocks (clocks.c), placement, calibration and the run header (env.c), MPI_T (mpit.c, pvar.c). */
#ifndef HMB_ENV_H
#define HMB_ENV_H

#include <stdio.h>

#include "hmb/bench.h"

/* clocks.c (collective): offsets at start-up; at the end of the run, re-measure, fit drift and
 * write the trailing "clocks" record; then free. */
void hmb_clocks_sync(hmb_ctx *ctx);
void hmb_clocks_recheck(hmb_ctx *ctx);
void hmb_clocks_free(hmb_ctx *ctx);

/* env.c: right after MPI_Init, the node layout (ranks per node, oversubscription, a missing spare
 * core) and the benchmark's own option checks (bench->check, which may need the layout: memory per
 * rank), before the start-up measurements: bad input ends the run before it pays for them. */
void hmb_env_check_options(hmb_ctx *ctx);
/* env.c: gathers the environment and writes the run header (JSON + stdout). */
void hmb_env_record(hmb_ctx *ctx);
/* Before MPI_Init: the rank's CPU sets (needs ctx->run.threads). */
void hmb_env_probe_cpus(hmb_ctx *ctx);
/* Around MPI_Init_thread: the initial thread moves onto the spare CPUs (so the library's
 * progress thread, created inside, inherits them) and back; records the threads created. */
void hmb_env_before_init(hmb_ctx *ctx);
void hmb_env_after_init(hmb_ctx *ctx);
/* 1 if the run's option values call for a spare core per rank (bench->spare_core_when). */
int hmb_env_spare_cores_needed(const hmb_ctx *ctx);
/* Rank 0, before annotate(): where the point's progress thread ran, if the point needs one
 * (result fields progress_cpus_allowed, progress_last_cpu, progress_shares_compute_core). */
void hmb_env_progress_annotate(hmb_ctx *ctx, const hmb_point *pt);
/* hmb-bench --placement: start MPI, print where ranks and threads are (one JSON line). */
int hmb_env_placement_main(hmb_ctx *ctx, int *argc, char ***argv);
/* hmb-bench --list-pvars (after MPI_Init): every MPI_T performance variable of the library,
 * one line each, after a line with their count; returns the count. */
int hmb_pvars_list(FILE *out);
/* MPI_T_init_thread once per process, never finalised (mpit.c): 1 when the tool interface is up. */
int hmb_mpit_hold(void);
/* Calibration of every thread at once, before MPI_Init. */
void hmb_env_calibrate(hmb_ctx *ctx);
/* The start-up compute check, after MPI_Init (collective): every thread of every rank runs the
 * check requests at once, as TIME and as WORK compute. */
void hmb_env_check_compute(hmb_ctx *ctx);

#endif
