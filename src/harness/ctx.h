/* The runtime state of one hmb-bench process (struct hmb_ctx, in its parts: run, options, output,
 * validation, test hooks) and ctx.c's accessors. Benchmarks never see this header. The harness's
 * other modules have their own headers, included where used: json.h, cache.h <- ctx.h (types);
 * output.h, validate.h, pivot.h, registry.h, env.h, watchdog.h, computelog.h (functions). No header includes
 * another module's functions, and ctx.c calls only computelog.c's (which calls none):
 * ctx <- computelog, ctx <- output <- watchdog <- errors. */
#ifndef HMB_CTX_H
#define HMB_CTX_H

#include <stdatomic.h>
#include <stdio.h>

#include "cache.h"
#include "core.h"
#include "hmb/bench.h"
#include "json.h"

typedef struct hmb_watchdog hmb_watchdog;

/* computelog.c: one thread's compute in the point in flight. requested_ns / measured_ns: its
 * compute calls of the running iteration (written by that thread only); iter_requested_ns /
 * iter_measured_ns: their totals per measured iteration, appended between iterations. */
typedef struct {
    int64_t requested_ns, measured_ns;
    int kinds;
    char pad[64 - 2 * sizeof(int64_t) - sizeof(int)]; /* one cache line per thread */
    double *iter_requested_ns, *iter_measured_ns;
    size_t count, capacity;
} hmb_compute_log;

/* The parts of one hmb-bench process's state. */

/* The run: this process and its MPI job — ranks, threads, thread level, clocks, calibration,
 * placement, identity (main.c, env.c, clocks.c). */
typedef struct {
    int argc; /* full command line, for the record */
    char **argv;
    int mpi_initialized;
    int rank, size;
    MPI_Comm comm;
    int threads;
    int thread_level_requested, thread_level_provided;

    hmb_noise noise;
    hmb_calib calib[HMB_MAX_THREADS];
    /* How many calibrations each thread took (hmb_compute_calibrate_verified), and its start-up
     * check after MPI_Init, every thread of every rank at once (hmb_env_check_compute): the
     * hmb_compute_check_ns requests as TIME and as WORK compute, measured ns (WORK: wall, and
     * on its core: the wall less the time the thread was descheduled). */
    int calibrations[HMB_MAX_THREADS];
    int64_t compute_check_time_ns[HMB_MAX_THREADS][HMB_COMPUTE_CHECKS];
    int64_t compute_check_work_ns[HMB_MAX_THREADS][HMB_COMPUTE_CHECKS];
    int64_t compute_check_work_core_ns[HMB_MAX_THREADS][HMB_COMPUTE_CHECKS];
    int compute_checks; /* how many of hmb_compute_check_ns the start-up check ran (hmb_env_check_compute) */
    int calibrated_fully; /* the run computes: rate verified, interruptions probed, rate measured again */
    /* The measured compute of the point in flight, per thread (computelog.c). */
    hmb_compute_log compute_log[HMB_MAX_THREADS];
    double timer_resolution_ns, timer_overhead_ns;

    double clock_offset_s;
    double *clock_offsets_s;           /* every rank's applied offset (0 on rank 0's host) */
    double *clock_offsets_estimated_s; /* every rank's estimate (recorded; ~0 on one host) */
    struct hmb_clocks *clocks;         /* clocks.c: rank 0's measurements for the end-of-run fit */

    char run_id[160];
    char start_time[40];
    char mpi_library_line[256];
    int cpus_available, ranks_per_node, oversubscribed;
    int node_compute_cpus;  /* CPUs the compute threads of this rank's node may run on */
    int spare_core_missing; /* a spare core was needed and some rank has none */
    char cpuset[256];       /* rank_cpus as a cpulist */

    /* Placement (env.c), probed before MPI_Init. OpenMP narrows the initial thread to its
     * first place, so the launcher's mask is rebuilt from the places and the threads' masks. */
    hmb_cpus rank_cpus;      /* the launcher's mask */
    hmb_cpus compute_cpus;   /* union of the OpenMP threads' masks */
    hmb_cpus spare_cpus;     /* rank_cpus - compute_cpus: where progress threads go */
    hmb_cpus main_cpus;      /* the initial thread's own mask, restored after MPI_Init */
    int spare_cores_needed;  /* per rank, by bench->spare_core_when and the options */
    int init_tids[64];       /* threads the MPI library started inside MPI_Init_thread */
    int n_init_tids;
    atomic_int progress_tid; /* HMB's progress thread (hmb_pin_progress_thread); 0: none */
    int unbound;             /* placement: 1 ranks, 2 threads not bound (a launch by hand); header warns */
} hmb_run;

/* The options: the parser's set and the typed values read from it (options.c). */
typedef struct {
    hmb_optset set;
    hmb_common_opts common; /* hmb_common */
    void *bench;            /* the benchmark's options struct (HMB_OPTS), bench->options_size bytes */
} hmb_opt_state;

/* The output: the JSON file, fields benchmarks add, the stdout table (output.c, pivot.c). */
typedef struct {
    FILE *json; /* rank 0: --json in append mode, or NULL */
    const char *json_path;
    hmb_extras header_extra, result_extra;
    int table_columns_printed;
    int *table_metrics; /* the stdout table's metric columns (ctx->metrics indices) */
    int table_nmetrics;
    const struct hmb_osu_block *osu_block; /* --format osu: the block of the last row printed */
    struct hmb_pivot *pivot;               /* rank 0: seed-style summary (pivot.c) */
} hmb_output_state;

/* Validation: on or off, the point's registered buffers, the bound of waits (validate.c, modes.c). */
typedef struct {
    int validate;
    struct hmb_checked *checked; /* hmb_check_register */
    size_t nchecked, checked_cap;
    unsigned char *check_scratch; /* expected content of the buffer being checked */
    size_t check_scratch_cap;
    double wait_bound_s; /* --wait-bound in seconds: bounded waits fail the point past it */
} hmb_validation;

/* Test hooks: the faults --inject plants (TEST ONLY; measure.c, validate.c, modes.c). */
typedef struct {
    long inject[HMB_INJECT_COUNT]; /* the iteration of each planted fault, -1: none (hmb_inject_at) */
    int corrupt_rank;              /* corrupt: rank whose first check of that iteration is corrupted (-1: any) */
    atomic_int corrupt_done;
    atomic_int checked_this_iter;
    atomic_int fired[HMB_INJECT_COUNT]; /* this rank planted the fault (hmb_inject_fired; inject.c) */
    long last_iter_run;                 /* the highest iteration any point ran, -1: none */
} hmb_test_hooks;

struct hmb_ctx {
    const hmb_bench *bench;
    hmb_metric_list metrics; /* the benchmark's metrics, fixed and per mode (hmb_sample.value) */
    hmb_run run;
    hmb_opt_state opt;
    hmb_output_state out;
    hmb_validation val;
    hmb_test_hooks hooks;

    /* The point in flight (for watchdog and failure messages). */
    const hmb_point *point;
    atomic_long iter;
    _Atomic(const char *) phase;
    hmb_watchdog *watchdog;
    atomic_int failing; /* a fatal report is in progress (one thread reports) */
    int unsupported;    /* hmb_unsupported() during setup */
    char unsupported_reason[512];

    hmb_cache_state cache;
    void *run_data; /* hmb_set_run_data: the benchmark's per-run data */
};

/* ctx.c */
/* --thread-level's choice (its index among single|funneled|serialized|multiple) as an MPI_THREAD_*
 * level, or -1. */
int hmb_thread_level_at(int choice);
/* An option's effective text as given or defaulted (NULL: unset), for records and messages. */
const char *hmb_option_text(const hmb_ctx *ctx, const char *name);
/* Whether pt has the text parameter name = value. */
int hmb_point_param_is(const hmb_point *pt, const char *name, const char *value);
/* "size=4K mode=latency" for messages and table rows. */
void hmb_point_describe(const hmb_point *pt, char *buf, size_t len);
void hmb_point_list_free(hmb_point_list *list);

#endif
