/* Internal runtime state of one hmb-bench process (struct hmb_ctx) and the harness-internal
 * functions the runtime files call on each other. Benchmarks never see this header. */
#ifndef HMB_CTX_H
#define HMB_CTX_H

#include <stdatomic.h>
#include <stdio.h>

#include "core.h"
#include "hmb/hmb.h"

/* ------------------------------------------------------------------ small JSON writer */
typedef struct {
    char *data;
    size_t len, cap;
    int depth;
    int need_comma[32]; /* per nesting level: an element was already written */
} hmb_json;

void hmb_json_init(hmb_json *j);
void hmb_json_free(hmb_json *j);
/* key NULL = array element (or the top-level object). */
void hmb_json_open_obj(hmb_json *j, const char *key);
void hmb_json_close_obj(hmb_json *j);
void hmb_json_open_arr(hmb_json *j, const char *key);
void hmb_json_close_arr(hmb_json *j);
void hmb_json_str(hmb_json *j, const char *key, const char *value); /* NULL -> null */
void hmb_json_num(hmb_json *j, const char *key, double value);      /* non-finite -> null */
void hmb_json_int(hmb_json *j, const char *key, long long value);
void hmb_json_bool(hmb_json *j, const char *key, int value);
void hmb_json_null(hmb_json *j, const char *key);

/* Extra key/value fields added by a benchmark (hmb_result_add_*, hmb_header_add_*). */
typedef struct {
    char *key;
    char *str; /* NULL: numeric */
    double num;
    double *rows; /* non-NULL: a table of nrows x width numbers (hmb_result_add_rows) */
    int nrows, width;
} hmb_extra_field;

typedef struct {
    int count;
    size_t capacity;
    hmb_extra_field *items;
} hmb_extras;

void hmb_extras_add(hmb_extras *e, const char *key, const char *str, double num);
void hmb_extras_clear(hmb_extras *e);
void hmb_extras_write(hmb_json *j, const char *key, const hmb_extras *e);

/* ------------------------------------------------------------------ run context */
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

typedef struct {
    int cold;
    size_t llc_bytes;   /* detected or --llc-size */
    size_t flush_bytes; /* size of the eviction buffer (2 x LLC) */
    unsigned char *flush_buf;
    int count; /* registered benchmark buffers */
    size_t capacity;
    struct { const void *buf; size_t len; } *items;
    long flushes;         /* this point's flushes (the mechanism, recorded per result) */
    size_t flushed_bytes; /* registered bytes the last one flushed line by line */
    /* Start-up probe (--cache cold): one pass reading PROBE bytes, hot vs after a flush (ns). */
    size_t probe_bytes;
    long long probe_hot_ns, probe_cold_ns;
} hmb_cache_state;

/* validate.c: the registry's work in the point loop (measure.c) and the paired modes (modes.c). */
void hmb_checks_prepare(hmb_ctx *ctx, long iter);          /* fill sends, poison receives */
void hmb_checks_run(hmb_ctx *ctx, long iter, int group);   /* check a group's receives, poison */
void hmb_checks_clear(hmb_ctx *ctx);                       /* after teardown */

struct hmb_ctx {
    const hmb_bench *bench;
    hmb_metric_list metrics; /* the benchmark's metrics, fixed and per mode (hmb_sample.value) */
    hmb_optset opts;
    int argc;      /* full command line, for the record */
    char **argv;

    int mpi_initialized;
    int rank, size;
    MPI_Comm comm;
    int threads;
    int thread_level_requested, thread_level_provided;
    int validate;

    hmb_noise noise;
    hmb_calib calib[HMB_MAX_THREADS];
    /* How many calibrations each thread took (hmb_compute_calibrate_verified), and its start-up
     * check after MPI_Init, every thread of every rank at once (hmb_env_check_compute): the
     * hmb_compute_check_ns requests as TIME and as WORK compute, measured ns. */
    int calibrations[HMB_MAX_THREADS];
    int64_t compute_check_time_ns[HMB_MAX_THREADS][HMB_COMPUTE_CHECKS];
    int64_t compute_check_work_ns[HMB_MAX_THREADS][HMB_COMPUTE_CHECKS];
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
    int node_compute_cpus;   /* CPUs the compute threads of this rank's node may run on */
    int spare_core_missing;  /* a spare core was needed and some rank has none */
    char cpuset[256]; /* rank_cpus as a cpulist */

    /* Placement (env.c), probed before MPI_Init. OpenMP narrows the initial thread to its
     * first place, so the launcher's mask is rebuilt from the places and the threads' masks. */
    hmb_cpus rank_cpus;       /* the launcher's mask */
    hmb_cpus compute_cpus;    /* union of the OpenMP threads' masks */
    hmb_cpus spare_cpus;      /* rank_cpus - compute_cpus: where progress threads go */
    hmb_cpus main_cpus;       /* the initial thread's own mask, restored after MPI_Init */
    int spare_cores_needed;   /* per rank, by bench->spare_core_when and the options */
    int init_tids[64];        /* threads the MPI library started inside MPI_Init_thread */
    int n_init_tids;
    atomic_int progress_tid;  /* HMB's progress thread (hmb_pin_progress_thread); 0: none */

    int table_columns_printed;
    int *table_metrics; /* the stdout table's metric columns (ctx->metrics indices) */
    int table_nmetrics;
    const struct hmb_osu_block *osu_block; /* --format osu: the block of the last row printed */
    int unbound;       /* placement: 1 ranks, 2 threads not bound (a launch by hand); header warns */
    FILE *json;        /* rank 0: --json in append mode, or NULL */
    const char *json_path;
    hmb_extras header_extra, result_extra;

    /* The point in flight (for watchdog and failure messages). */
    const hmb_point *point;
    atomic_long iter;
    _Atomic(const char *) phase;
    hmb_watchdog *watchdog;

    /* --corrupt-at: rank whose first check of that iteration is corrupted (-1: any). */
    long corrupt_at;
    /* Bounded waits (modes.c): --wait-bound in seconds; --never-complete-at (test only). */
    double wait_bound_s;
    long never_complete_at;
    int corrupt_rank;
    atomic_int corrupt_done;
    atomic_int checked_this_iter;
    atomic_int failing; /* a fatal report is in progress (one thread reports) */

    /* The point's registered buffers (hmb_check_register, validate.c). */
    struct hmb_checked *checked;
    size_t nchecked, checked_cap;
    unsigned char *check_scratch; /* expected content of the buffer being checked */
    size_t check_scratch_cap;

    /* hmb_unsupported() during setup */
    int unsupported;
    char unsupported_reason[512];

    hmb_cache_state cache;
    struct hmb_pivot *pivot; /* rank 0: seed-style summary (pivot.c) */
    void *run_data;          /* hmb_set_run_data: the benchmark's per-run data */
};

/* pivot.c: the seed-style summary table (bench->pivot_metrics) */
typedef struct hmb_pivot hmb_pivot;
void hmb_pivot_add(hmb_ctx *ctx, const hmb_point *pt, const hmb_summary *summaries); /* NULL: unsupported */
void hmb_pivot_print(hmb_ctx *ctx);
void hmb_pivot_free(hmb_ctx *ctx);

/* registry.c */
/* --thread-level's value ("single" ... "multiple") as an MPI_THREAD_* level, or -1. */
int hmb_thread_level_of(const char *option);
const hmb_bench *hmb_registry_find(const char *name);
/* Sorted by group then name; returns the count, *out owned by the caller (free). */
int hmb_registry_list(const hmb_bench ***out);
/* Descriptors as one JSON line (docs/output-schema.md): every benchmark, or only `only`. */
void hmb_registry_describe_json(FILE *out, const hmb_bench *only);

/* ctx.c */
const hmb_optval *hmb_ctx_opt(const hmb_ctx *ctx, const char *name, int type_a, int type_b);
/* "size=4K mode=latency" for messages and table rows. */
void hmb_point_describe(const hmb_point *pt, char *buf, size_t len);
void hmb_point_list_free(hmb_point_list *list);

/* clocks.c (collective): offsets at start-up; at the end of the run, re-measure, fit drift and
 * write the trailing "clocks" record; then free. */
void hmb_clocks_sync(hmb_ctx *ctx);
void hmb_clocks_recheck(hmb_ctx *ctx);
void hmb_clocks_free(hmb_ctx *ctx);

/* env.c: gathers the environment and writes the run header (JSON + stdout). */
void hmb_env_record(hmb_ctx *ctx);
/* Before MPI_Init: the rank's CPU sets (needs ctx->threads). */
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

/* computelog.c (the point loop, measure.c): record a compute call of thread tid; start an
 * iteration (zero every thread's running totals); after a measured iteration keep them;
 * summarise the point (collective; rank 0 gets the summary); free. */
void hmb_compute_log_add(hmb_ctx *ctx, int tid, int kind, int64_t requested_ns, int64_t measured_ns);
void hmb_compute_log_begin_iteration(hmb_ctx *ctx);
void hmb_compute_log_keep_iteration(hmb_ctx *ctx);
void hmb_compute_log_summarize(hmb_ctx *ctx, hmb_compute_summary *out);
void hmb_compute_log_free(hmb_ctx *ctx);
/* Rank 0: the summary as the result's "compute" object (nothing when it is not present). */
void hmb_compute_summary_write(hmb_json *j, const hmb_compute_summary *s);

/* output.c */
void hmb_output_open(hmb_ctx *ctx); /* rank 0; ctx->json stays NULL if it cannot open */
void hmb_output_close(hmb_ctx *ctx);
void hmb_output_record(hmb_ctx *ctx, hmb_json *record); /* rank 0: one line, fflush+fsync */
/* Any rank: append one record line with a single write (failure records). */
void hmb_output_record_any_rank(hmb_ctx *ctx, hmb_json *record);
void hmb_output_begin_record(hmb_ctx *ctx, hmb_json *j, const char *type);
void hmb_output_failure(hmb_ctx *ctx, const char *kind, int partition, const char *message);
void hmb_table_header(hmb_ctx *ctx);
void hmb_table_row(hmb_ctx *ctx, const hmb_point *pt, const hmb_summary *summaries, long iterations);
void hmb_table_unsupported(hmb_ctx *ctx, const hmb_point *pt, const char *reason);
/* Whether the summary tables (pivot) show this metric: all unless --metric names others. */
int hmb_table_metric_selected(const hmb_ctx *ctx, const char *name);
enum { HMB_TABLE_COLUMNS = 120 };
void hmb_json_option_value(hmb_json *j, const hmb_optval *v);

/* measure.c */
void hmb_measure_point(hmb_ctx *ctx, const hmb_point *pt);

/* watchdog.c */
hmb_watchdog *hmb_watchdog_start(hmb_ctx *ctx);
void hmb_watchdog_arm(hmb_watchdog *w, int64_t timeout_ns);
void hmb_watchdog_disarm(hmb_watchdog *w);
void hmb_watchdog_stop(hmb_watchdog *w);
/* The bound of one blocking call (hmb_wait_bounded, modes.c): prepare names it (message, the
 * point's iteration) and wakes the watchdog (untimed); start sets its deadline, since_s +
 * bound_s, without waking it (cheap, in the timed path); clear ends it. Past the deadline the
 * watchdog fails the point with exit 3 (hmb_validation_failure) with the message. */
void hmb_watchdog_bound_prepare(hmb_watchdog *w, double bound_s, long iter, const char *message);
void hmb_watchdog_bound_start(hmb_watchdog *w, double since_s);
void hmb_watchdog_bound_clear(hmb_watchdog *w);

/* cache.c */
int hmb_cache_init(hmb_ctx *ctx); /* 0: cannot allocate the eviction buffer */
void hmb_cache_flush(hmb_ctx *ctx);
void hmb_cache_annotate(hmb_ctx *ctx); /* rank 0, --cache cold: the point's flushes in its result */
void hmb_cache_free(hmb_ctx *ctx);

#endif
