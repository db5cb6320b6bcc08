/* HMB — Hybrid MPI Benchmarks. The one header a benchmark author needs.
 *
 * A benchmark is a descriptor (hmb_bench) plus callbacks in one file under src/bench/.
 * The harness owns options, timing, clocks, statistics, compute/noise, cache, validation,
 * watchdog and output. A benchmark owns its communication pattern only.
 *
 * Life of a run (src/harness/main.c):
 *   parse options (before MPI_Init: bad input -> one line, exit 2)
 *   calibrate the compute kernel per thread (before MPI_Init, undisturbed); probe CPU sets
 *   MPI_Init_thread(bench->thread_level)  -> check ranks/thread level (exit 2 on failure)
 *       (called from the rank's spare CPUs, if any, so library threads start there)
 *   timer + clock-offset estimation, environment record, JSON "run" header
 *   bench->check()                         -> more option checks that need MPI (exit 2)
 *   bench->points()                        -> list of parameter points
 *   for each point:
 *       state = bench->setup(ctx, point)
 *       warm-up iterations, then adaptive repetitions:
 *           [cold cache: hmb_cache_flush]  bench->iterate(...)  bench->verify(...)
 *       one "result" record (JSON line, flushed) + one stdout table row
 *       bench->teardown(ctx, point, state)
 */
#ifndef HMB_HMB_H
#define HMB_HMB_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HMB_VERSION "0.1.0"
#define HMB_SCHEMA_VERSION 1

/* Exit statuses. */
#define HMB_EXIT_OK 0
#define HMB_EXIT_USAGE 2      /* bad input, too few ranks, thread level not provided */
#define HMB_EXIT_VALIDATION 3 /* received data wrong (or library reported arrival wrongly) */
#define HMB_EXIT_TIMEOUT 4    /* watchdog fired */

#define HMB_MAX_PARAMS 10
#define HMB_MAX_THREADS 256

/* ------------------------------------------------------------------ options */

typedef enum {
    HMB_OPT_FLAG,     /* --name (no value); value "0"/"1" in defaults */
    HMB_OPT_INT,      /* integer, accepts unit suffixes K/M/G (powers of 2) */
    HMB_OPT_DOUBLE,   /* floating point */
    HMB_OPT_SIZES,    /* byte sizes: 8, 4K, 1M, 1K:16M (doubling), 1K:16M:x4, lists 1K,64K */
    HMB_OPT_INTS,     /* integer list: 1,2,4 or 1:16 (doubling) or 1:16:x4 or 2:8:+2 */
    HMB_OPT_DURATION, /* time: 10us, 1.5ms, 2s, 500ns; a unit is required (bare 0 only); ns */
    HMB_OPT_STRING,   /* free string (validated by the benchmark's check()) */
    HMB_OPT_CHOICE,   /* one of "a|b|c" */
    HMB_OPT_CHOICES,  /* comma list of names from "a|b|c", or "all"; read as a bit mask */
    HMB_OPT_CHOICE_ARGS /* ordered comma list of names from "a|b:|c"; a name declared with a
                           trailing ':' takes a number (b:2.5) within [min, max]; read with
                           hmb_opt_choice_args; a repeated item is a usage error */
} hmb_opt_type;

typedef struct {
    const char *name;          /* long name without "--", e.g. "partitions" */
    hmb_opt_type type;
    const char *default_value; /* textual default, parsed like user input; NULL = unset */
    const char *help;          /* one line */
    double min, max;           /* inclusive range for numeric types (each list element);
                                  min == max == 0 means unchecked */
    const char *choices;       /* HMB_OPT_CHOICE(S), HMB_OPT_CHOICE_ARGS: "a|b|c" */
    int role;                  /* HMB_ROLE_PARAMETER (0, default) or HMB_ROLE_RUN_CONTROL */
} hmb_option;

/* What an option is to the toolkit (hmb-bench --describe --json): a parameter defines what is
 * measured (a result point); run control only steers how (iterations, timeout, output). */
enum { HMB_ROLE_PARAMETER = 0, HMB_ROLE_RUN_CONTROL = 1 };

/* Terminates an option table. */
#define HMB_OPTION_END {NULL, HMB_OPT_FLAG, NULL, NULL, 0, 0, NULL}

/* An override of a common option's default by a benchmark: {"sizes", "1K:16M"}. */
typedef struct {
    const char *name;
    const char *value;
} hmb_default;

typedef struct hmb_ctx hmb_ctx;
typedef struct hmb_mode hmb_mode;

/* Accessors (valid for common and benchmark options). Calling with an unknown name or
 * the wrong type is a programming error: the harness aborts with a message. */
int hmb_opt_flag(const hmb_ctx *ctx, const char *name);
long long hmb_opt_int(const hmb_ctx *ctx, const char *name);
double hmb_opt_double(const hmb_ctx *ctx, const char *name);
int64_t hmb_opt_duration_ns(const hmb_ctx *ctx, const char *name);
const char *hmb_opt_str(const hmb_ctx *ctx, const char *name); /* STRING, CHOICE(S): the text */
/* CHOICES: bit i set when the i-th name of the option's "a|b|c" was listed (unknown and
 * repeated names are usage errors, caught by the parser). */
unsigned long long hmb_opt_choices(const hmb_ctx *ctx, const char *name);
/* CHOICE_ARGS: the number of items; (*choice)[i] is the index of item i among the declared
 * names, (*arg)[i] its number (NAN for a name without ':'). */
int hmb_opt_choice_args(const hmb_ctx *ctx, const char *name, const long long **choice, const double **arg);
const size_t *hmb_opt_sizes(const hmb_ctx *ctx, const char *name, int *count);
const long long *hmb_opt_ints(const hmb_ctx *ctx, const char *name, int *count);
int hmb_opt_given(const hmb_ctx *ctx, const char *name); /* given on the command line */

/* Report a usage problem found after parsing (e.g. in check()): rank 0 prints
 * "hmb-bench BENCH: <message>" as one line on stderr; every rank must call it with the
 * same decision (use hmb_all_agree for rank-local conditions). Does not return: exit 2. */
void hmb_usage_error(hmb_ctx *ctx, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
/* A usage error (exit 2) unless bytes_per_rank fits this rank's share of its node's physical
 * memory (the node's memory over the ranks on it): a size too large for the machine is refused
 * at start-up, in one line, instead of the kernel killing the rank part-way through. */
void hmb_require_memory(hmb_ctx *ctx, double bytes_per_rank, const char *what);
/* Collective: whether a point that runs threads_here threads on this rank (not --threads: match's
 * emulator runs one per emulated neighbour thread) outnumbers the CPUs of any node, or of any
 * rank's compute mask (a bound rank runs them all on its own cores). The run
 * header's `oversubscribed` counts --threads; a benchmark records this one per point
 * (extra `oversubscribed_threads`, read by results.py like the header's). */
int hmb_threads_oversubscribe(hmb_ctx *ctx, int threads_here);

/* Report "unsupported" for this benchmark/point: one line on stdout and in JSON
 * ("status":"unsupported","reason":...), then the harness goes on with the next point. */
void hmb_unsupported(hmb_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A '# ' comment line on rank 0's stdout (other ranks: nothing), wrapped at the table width
 * (120 columns) on spaces, continuation lines indented. For findings a benchmark reports
 * beside its table. */
void hmb_note(hmb_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------ points */

typedef struct {
    const char *name;
    long long ival;
    const char *sval; /* non-NULL: string parameter (pointer must outlive the run) */
} hmb_param;

typedef struct {
    size_t size_bytes; /* message size of this point (0 if not applicable) */
    int nparams;
    hmb_param params[HMB_MAX_PARAMS];
} hmb_point;

typedef struct {
    int count;
    size_t capacity;
    hmb_point *items;
} hmb_point_list;

/* Append a point of the given size; returns it so params can be set. */
hmb_point *hmb_points_add(hmb_point_list *list, size_t size_bytes);
void hmb_point_set_int(hmb_point *p, const char *name, long long value);
void hmb_point_set_str(hmb_point *p, const char *name, const char *value);
long long hmb_point_int(const hmb_point *p, const char *name);   /* aborts if absent */
const char *hmb_point_str(const hmb_point *p, const char *name); /* aborts if absent */

/* ------------------------------------------------------------------ metrics */

/* A metric. In bench->mode_metrics it is a template: "{mode}" in its name and description stands
 * for the name of each mode that declares it (hmb_mode.metrics), e.g. "t_iter_{mode}_us". */
typedef struct {
    const char *name;        /* e.g. "latency_us", "overhead", "bandwidth_MBps" */
    const char *unit;        /* "us", "MB/s", "ratio", "%", "msg/s", ... */
    const char *description; /* one line */
    int higher_is_better;    /* 1 for bandwidth/rate/efficiency, 0 for times */
    int in_table;            /* shown in the stdout table (the JSON always has all) */
    int is_signed;           /* can be negative (efficiency, availability): compared by difference */
} hmb_metric;

#define HMB_METRIC_END {NULL, NULL, NULL, 0, 0}

/* One iteration's outcome, filled by iterate() on rank 0 (other ranks: ignored).
 * value[i] is metric i of the benchmark's metric list: its fixed metrics (bench->metrics) first,
 * then each mode metric (bench->mode_metrics) of every mode that declares it (hmb_mode.metrics),
 * template by template, modes in their declared order. The harness sizes value[] at run time
 * (nvalues); record through hmb_record / hmb_record_at / hmb_record_mode, which check the bound
 * and abort naming the metric. The first metric is the primary one: the adaptive stopping rule
 * watches its CI (or the first that has values). Set valid = 0 to mark the sample invalid (it is
 * counted, not summarised), e.g. when a timestamp could not be taken. */
typedef struct {
    double *value;
    int nvalues;
    int valid;
} hmb_sample;

/* ------------------------------------------------------------------ descriptor */

typedef struct hmb_bench {
    const char *name;    /* "part" */
    const char *group;   /* "partitioned", "baseline", "async", "threads", ... */
    const char *summary; /* one line for --list */
    const hmb_option *options;   /* benchmark-specific options, HMB_OPTION_END-terminated */
    const hmb_default *defaults; /* overrides of common defaults, {NULL,NULL}-terminated; may be NULL */
    const hmb_metric *metrics;   /* fixed metrics, HMB_METRIC_END-terminated; may be NULL with modes */
    /* Paired modes (hmb_modes_run), {.name = NULL}-terminated; NULL: none. A mode's name is written
     * once, here: --mode (an option row with .modes = 1) lists the modes without HMB_MODE_HIDDEN,
     * its default those without HMB_MODE_OPT_IN either, in this order (bit i of the mask: mode i). */
    const struct hmb_mode *modes;
    /* Metric templates of the modes ("t_iter_{mode}_us"), HMB_METRIC_END-terminated; bit k of a
     * mode's .metrics instantiates template k for it. May be NULL. */
    const hmb_metric *mode_metrics;
    int thread_level;            /* MPI_THREAD_SINGLE ... MPI_THREAD_MULTIPLE requested */
    int min_ranks;               /* fewer -> usage error, exit 2 */
    int rank_multiple;           /* ranks must be a multiple of this (0/1: any) */

    /* Extra option checks needing MPI (sizes divisible by partitions, ...). May be NULL.
     * Call hmb_usage_error() to reject. Runs on every rank with the same inputs. */
    void (*check)(hmb_ctx *ctx);
    /* Enumerate parameter points (same list on every rank). */
    void (*points)(hmb_ctx *ctx, hmb_point_list *out);
    /* Allocate buffers/requests for a point; returns the benchmark's state (or NULL).
     * May call hmb_unsupported() and return NULL: the point is then skipped. */
    void *(*setup)(hmb_ctx *ctx, const hmb_point *pt);
    /* Untimed preparation of iteration iter (fill send buffers with its pattern, poison receive
     * buffers), called BEFORE the --cache cold flush, so the data a timed iteration moves is
     * really evicted. Writing send data inside iterate() would pull it back into the cache.
     * May be NULL. */
    void (*prepare)(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter);
    /* One timed iteration. Rank 0 fills *out. Must not print. Returns 0, or nonzero after
     * the benchmark already reported a fatal problem with hmb_validation_failure(). */
    int (*iterate)(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out);
    /* Check every received byte of this iteration (outside timing). May be NULL only if
     * iterate() validates itself. Call hmb_check_buffer() / hmb_validation_failure(). */
    void (*verify)(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter);
    void (*teardown)(hmb_ctx *ctx, void *state, const hmb_point *pt);
    /* Extra table columns/metadata per point, optional: called on rank 0 after the point's
     * statistics are final, may add JSON fields via hmb_result_add_*(). May be NULL. */
    void (*annotate)(hmb_ctx *ctx, void *state, const hmb_point *pt);
    /* Optional seed-style summary printed on stdout after all points: a comma list of metric
     * names (e.g. "t_sync_us,c_us,t_over_us,efficiency_pct"). For each combination of the
     * points' non-size parameters, one row per listed metric, message sizes as columns, cells
     * the medians. NULL: no pivot table. */
    const char *pivot_metrics;
    const char *spare_core_when; /* "option=value,value": runs with one of these values need one spare core per rank for a progress thread; NULL: never */
    /* 1: honours --data reuse (send data through hmb_data_gen/hmb_data_refill, see below) and
     * its "data" default should be "reuse" (set it in .defaults); 0: the harness refuses
     * --data reuse with a usage error (the benchmark writes its data before every send). */
    int data_reuse;
    /* --format osu (a CHOICE option "format" with "table|osu" the benchmark declares): stdout in
     * the OSU micro-benchmarks' layout, one block per listed point parameter value. NULL: none. */
    const struct hmb_osu_block *osu;
} hmb_bench;

/* One block of --format osu output: the points with param=value print "SIZE VALUE..." rows
 * (size in bytes) under "# Size  <header>", as osu_latency / osu_bw / osu_mbw_mr print them. */
typedef struct hmb_osu_block {
    const char *param, *value; /* "mode", "latency" */
    const char *title;         /* "osu_latency layout" (the block's first comment line) */
    const char *header;        /* "Latency (us)", or "MB/s,Messages/s": one name per value column */
    const char *metrics;       /* "latency_us", or "bandwidth_MBps,msg_rate" for two value columns */
} hmb_osu_block;

/* Registration: each benchmark file ends with HMB_REGISTER(descriptor_variable). The
 * registry collects them through a linker section (no central list to edit). */
#define HMB_REGISTER(desc) \
    __attribute__((used, section("hmb_benchmarks"))) const hmb_bench *const hmb_reg_##desc = &desc

/* ------------------------------------------------------------------ context */

int hmb_rank(const hmb_ctx *ctx);
int hmb_size(const hmb_ctx *ctx);
MPI_Comm hmb_comm(const hmb_ctx *ctx);          /* a duplicate of MPI_COMM_WORLD */
int hmb_threads(const hmb_ctx *ctx);            /* --threads (OpenMP threads per rank) */
int hmb_thread_level_provided(const hmb_ctx *ctx);
const char *hmb_thread_level_name(int level); /* "SINGLE" ... "MULTIPLE" */

/* Read an integer MPI_T control variable not bound to an object (e.g. MPICH's
 * MPIR_CVAR_ASYNC_PROGRESS, MPIR_CVAR_CH4_NUM_VCIS). Returns 1 and *value if this library
 * exposes it, 0 otherwise. Callable after MPI_Init from the main thread. */
int hmb_mpit_cvar_int(const char *name, long long *value);
int hmb_validate_enabled(const hmb_ctx *ctx);   /* !--no-validate */
const char *hmb_bench_name(const hmb_ctx *ctx);

/* Phase label shown by the watchdog if this rank hangs ("Parrived poll", "Waitall"). */
void hmb_phase(hmb_ctx *ctx, const char *phase);

/* Per-run benchmark data that outlives single points (e.g. a calibration shared by several
 * points), set typically in points(); the harness free()s it at the end of the run. Explicit
 * state instead of a global in the benchmark file. */
void hmb_set_run_data(hmb_ctx *ctx, void *data);
void *hmb_run_data(const hmb_ctx *ctx);

/* Call first thing in a progress thread the benchmark starts itself: pins the calling thread
 * to the rank's spare CPU (one in its mask that no compute thread is bound to) and returns
 * it, or, with no spare CPU, lets it run anywhere in the rank's mask and returns -1. The
 * harness records where it ran (progress_* fields of points that need a spare core). */
int hmb_pin_progress_thread(hmb_ctx *ctx);

/* A progress thread of the benchmark's own (async's progress modes, mt's get target), started
 * once per point and pinned (hmb_pin_progress_thread); idle, it sleeps and costs the compute
 * nothing. hmb_progress_publish hands it poke(arg), which it calls in a loop until poke returns
 * 1 or the caller withdraws; after hmb_progress_withdraw returns it no longer calls poke (the
 * caller may touch what poke touches, e.g. wait on its requests). start: NULL if no thread. */
typedef struct hmb_progress hmb_progress;
hmb_progress *hmb_progress_start(hmb_ctx *ctx);
void hmb_progress_publish(hmb_progress *p, int (*poke)(void *arg), void *arg);
void hmb_progress_withdraw(hmb_progress *p);
void hmb_progress_stop(hmb_progress *p); /* NULL: nothing */

/* All ranks agree that cond holds on every rank (an MPI_Allreduce LAND). */
int hmb_all_agree(hmb_ctx *ctx, int cond);

/* ------------------------------------------------------------------ timing */

/* Monotonic clock, nanosecond resolution, as seconds (double) and nanoseconds. */
double hmb_now(void);
int64_t hmb_now_ns(void);
/* Local time -> rank 0's time base (seconds), using the estimated clock offset. */
double hmb_to_global(const hmb_ctx *ctx, double t_local);
double hmb_clock_offset(const hmb_ctx *ctx); /* this rank's offset to rank 0, seconds */
/* Cost of one hmb_now()/hmb_now_ns() call, measured at start-up (ns): a timed region should
 * be long against it (e.g. batch short operations until they span 100x this). */
double hmb_timer_overhead_ns(const hmb_ctx *ctx);

/* Counterbalanced order of k phases (modes, variants) run in one iteration of a paired design:
 * iteration iter runs order[0], order[1], ... Rows of Williams' balanced Latin square, cycled:
 * over hmb_phase_orders(k) consecutive iterations (k for even k, 2k for odd k, every order of 2 or
 * 3 phases), every phase runs in every position equally often and directly after every other
 * phase equally often, so warm-up, cache and drift effects do not favour any phase.
 * Returns 0, or -1 for k < 1 or iter < 0. */
int hmb_phase_orders(int k);
int hmb_phase_order(int k, long iter, int *order);

/* ------------------------------------------------------------------ paired modes */

/* A library with partitioned point-to-point communication (MPI 4.0). */
#if defined(HMB_HAVE_MPI_PSEND_INIT) && defined(HMB_HAVE_MPI_PARRIVED)
#define HMB_HAVE_PARTITIONED 1
#else
#define HMB_HAVE_PARTITIONED 0
#endif

/* A mode this library or thread level cannot run: threads_call_mpi (several threads call MPI at
 * once) needs MPI_THREAD_MULTIPLE when there is more than one thread, partitioned also needs a
 * library with MPI_Psend_init/MPI_Parrived. Says "unsupported" naming the mode and why
 * (hmb_unsupported) and returns 1, or returns 0. mode NULL: a benchmark without --mode (part). */
int hmb_mode_refused(hmb_ctx *ctx, const char *mode, int threads_call_mpi, int partitioned);

/* The calc-factor calibration (async, stencil3d): run(arg) from a barrier on comm, once to warm
 * up and then HMB_CALC_REPS times; *t_s = the fastest run's slowest rank (interference only
 * slows a run down). Returns the compute to request, factor x *t_s in ns, at least
 * HMB_MIN_COMPUTE_NS (the compute kernel's accuracy floor, the seed's smallest calc time).
 * Collective on comm; outside every timed region (setup or points()). */
#define HMB_CALC_REPS 7
#define HMB_MIN_COMPUTE_NS 10000
int64_t hmb_calc_factor_ns(hmb_ctx *ctx, MPI_Comm comm, double factor, void (*run)(void *arg), void *arg,
                           double *t_s);

/* Bounded MPI_Parrived polling for the patterns (ops: the communication policy, hmb_comm_ops): poll partition `partition` of the started
 * partitioned receive req until the library reports it arrived. A library that never reports
 * it does not hang the run until the watchdog: --wait-bound (default 10 s, hmb_wait_bound_s) past
 * `since` (the mode's start, hmb_now()) the point fails with exit 3 (hmb_validation_failure)
 * naming the request (fmt: formatted only then, never in the timed path) and the partition
 * as a library conformance problem. --never-complete-at ITER (test only) makes every bounded
 * wait of iteration ITER see nothing arrive, so that this failure is tested. */
typedef struct hmb_comm_ops_s hmb_comm_ops;
void hmb_parrived_bounded(hmb_ctx *ctx, const hmb_point *pt, long iter, const hmb_comm_ops *ops, MPI_Request req,
                          int partition, double since, const char *fmt, ...) __attribute__((format(printf, 8, 9)));
/* The same bound for completing requests a library may never complete (partitioned ones: Open
 * MPI 5.0.11, docs/findings.md): poll ops->testall on the n requests reqs until all complete;
 * --wait-bound past `since` the point fails with exit 3 naming them (fmt) as a library
 * conformance problem (under the mock: a pattern that waits for a request it never feeds). */
void hmb_waitall_bounded(hmb_ctx *ctx, const hmb_point *pt, long iter, const hmb_comm_ops *ops, int n,
                         MPI_Request *reqs, double since, const char *fmt, ...) __attribute__((format(printf, 8, 9)));
/* hmb_parrived_bounded over partitions [first, last) of req at once, each seen when it first
 * arrives (part: a receiver thread per block of partitions): polls them in turn until each has
 * been reported once; arrived[j] (0.0: not yet) = hmb_now() at partition j's first report, then
 * w->on_arrival(w->arg, j) if given. Bounded by --wait-bound past w->since and, with
 * w->peer_done (hmb_now() at which the peer completed its side, < 0 before; looked at every
 * millisecond, possibly by several threads at once), by w->grace_s after it: a partition still
 * unreported then fails the point (exit 3) naming it and the request (fmt). */
double hmb_wait_bound_s(const hmb_ctx *ctx); /* --wait-bound, seconds */
/* The same bound for a blocking MPI_Wait the harness cannot poll (part --complete wait: the
 * application blocks): hmb_wait_bound_prepare, untimed and before the wait's region, names the
 * request (fmt) for iteration iter; hmb_wait_bounded then blocks in MPI_Wait on req, and if it
 * has not returned --wait-bound past `since` (hmb_now()), the watchdog thread fails the point
 * with exit 3 naming it as a library conformance problem. Costs a lock and no system call in
 * the timed path. Without a watchdog thread the wait is unbounded. */
void hmb_wait_bound_prepare(hmb_ctx *ctx, long iter, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void hmb_wait_bounded(hmb_ctx *ctx, long iter, MPI_Request *req, double since);
typedef struct {
    double since;
    void (*on_arrival)(void *arg, int partition);
    double (*peer_done)(void *arg);
    double grace_s;
    void *arg;
} hmb_arrival_watch;
void hmb_parrived_each_bounded(hmb_ctx *ctx, const hmb_point *pt, long iter, const hmb_comm_ops *ops,
                               MPI_Request req, int first, int last, double *arrived, const hmb_arrival_watch *w,
                               const char *fmt, ...) __attribute__((format(printf, 10, 11)));

#define HMB_MAX_MODES 8
#define HMB_MODE_MAX_TIMES 4
#define HMB_MODE_MAX_SUMS 2

/* One mode (phase, variant) of a paired design, as a benchmark declares it (bench->modes). */
enum {
    HMB_MODE_OPT_IN = 1, /* a --mode choice, but not in its default (halo3d's serial) */
    HMB_MODE_HIDDEN = 2, /* not a --mode choice: run by another option (halo3d's threadcomm) or always */
};
struct hmb_mode {
    const char *name; /* the --mode name and the phase label: "single", "comm", ... */
    /* untimed, before the mode's barrier (start persistent requests, zero counters); may be NULL */
    void (*setup)(hmb_ctx *ctx, void *state, int mode, long iter);
    /* one timed iteration of the mode; it may store sub-times (s) in times[1..] */
    void (*iterate)(hmb_ctx *ctx, void *state, int mode, long iter, double *times);
    /* untimed, right after the mode: check it, and store per-rank values summed over ranks
     * (bytes sent, ...) in sums[]; may be NULL */
    void (*verify)(hmb_ctx *ctx, void *state, int mode, long iter, double *sums);
    unsigned metrics; /* bit k: bench->mode_metrics[k] is a metric of this mode */
    int flags;        /* HMB_MODE_OPT_IN, HMB_MODE_HIDDEN */
};
/* Bit k of hmb_mode.metrics. */
#define HMB_METRIC_BIT(k) (1u << (k))

/* The slowest rank's times of each mode run (times[m][0]: barrier to end of iterate, seconds;
 * [1..]: the mode's own sub-times) and the per-mode sums over ranks; 0 for modes not run. */
typedef struct {
    double times[HMB_MAX_MODES][HMB_MODE_MAX_TIMES];
    double sums[HMB_MAX_MODES][HMB_MODE_MAX_SUMS];
    double local[HMB_MAX_MODES][HMB_MODE_MAX_TIMES]; /* this rank's times, before the reduction */
} hmb_mode_results;

/* One rank's times of every mode, times[m][j] as in hmb_mode_results. */
typedef double hmb_mode_times[HMB_MAX_MODES][HMB_MODE_MAX_TIMES];

/* Run one iteration of a paired design: the nrun modes run[] (ids into bench->modes) in the
 * counterbalanced order of iteration iter (hmb_phase_order); before each but the first the
 * cache is evicted (--cache cold), then setup, a barrier, the timed iterate, verify. Times are
 * reduced by maximum, sums by sum. Returns 1 on rank 0 (which records the sample), 0 elsewhere. */
int hmb_modes_run(hmb_ctx *ctx, void *state, const int *run, int nrun, long iter, hmb_mode_results *out);
/* For a metric formed per rank from its own times and then aggregated (async: E of each rank,
 * worst and mean; never one rank's time with another's): every rank's res->local gathered on
 * rank 0, all[r][m][j] (free() it); NULL on the other ranks. Collective, untimed. */
hmb_mode_times *hmb_modes_gather(hmb_ctx *ctx, const hmb_mode_results *res);

/* Record a metric of this iteration's sample: by its name, by its index in the metric list (a
 * benchmark's enum over its fixed metrics), or as mode metric template k of mode `mode`. A name
 * the list lacks, an index past it, or a template the mode does not declare is a programming
 * error: the harness aborts naming the metric. */
void hmb_record(hmb_ctx *ctx, hmb_sample *out, const char *metric, double value);
void hmb_record_at(hmb_ctx *ctx, hmb_sample *out, int metric, double value);
void hmb_record_mode(hmb_ctx *ctx, hmb_sample *out, int k, int mode, double value);
/* The same, for a metric named printf-style ("t_iter_%s_us", mode name). */
void hmb_recordf(hmb_ctx *ctx, hmb_sample *out, double value, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* ------------------------------------------------------------------ compute & noise */

/* Compute loads (SPEC §2 "Compute load", docs/methodology.md). Both kinds run the same busy
 * floating-point kernel with the calling OpenMP thread's calibration, make no system call, and
 * return the measured duration in ns; the harness records every call in the point's result
 * ("compute": measured per iteration, median and worst thread).
 *
 * TIME: exact in time, busy work re-checked against the clock until ns have passed, whatever
 * the core's speed does. For benchmarks that vary a delay (part, halo3d, sweep3d, mt,
 * stencil3d): the result is >= ns, and over by about 0.1 us unless the thread loses its core
 * at the very end. */
int64_t hmb_compute_ns(hmb_ctx *ctx, int64_t ns);
/* WORK: the fixed work a request of ns is at the thread's sustained rate (calibrated before
 * MPI_Init and checked in both directions, then measured again with every thread of every rank
 * computing at once: docs/methodology.md). A core slowed down by anything (a progress thread,
 * steal) takes longer: the returned C_actual shows it (async). */
int64_t hmb_compute_work_ns(hmb_ctx *ctx, int64_t ns);
/* WORK in slices of about slice_ns, calling poll(arg) between slices (poll time is NOT counted
 * in the returned compute time). Returns the total time inside the kernel (C_actual), ns. */
int64_t hmb_compute_work_sliced_ns(hmb_ctx *ctx, int64_t ns, int64_t slice_ns, void (*poll)(void *), void *arg);
/* The sustained kernel rate, iterations per ns, for thread tid (from calibration). */
double hmb_compute_rate(const hmb_ctx *ctx, int tid);
/* Calibration error of this rank for a WORK request of ns, as a fraction: how much shorter than
 * requested an undisturbed request may come out — the shortfall of the start-up check's WORK
 * request nearest to ns (run header "calibration", worst thread of this rank) plus the share of
 * machine interruptions the sustained rate includes (a run that meets none is that much short). */
double hmb_compute_calibration_error(const hmb_ctx *ctx, int64_t ns);

/* Compute amount (ns) for OpenMP thread tid in iteration iter under the run's noise model
 * (--noise, --noise-thread, --seed) around base_ns (--compute or the benchmark's own).
 * Deterministic for (seed, rank, tid, iter): the same draw for both phases of a paired
 * design. Thread-safe. */
int64_t hmb_noise_ns(const hmb_ctx *ctx, int tid, long iter, int64_t base_ns);
/* The largest compute hmb_noise_ns can draw around base_ns on any rank, thread and iteration
 * (hmb_noise_max_draw): for wait bounds that must start after any peer's compute. */
int64_t hmb_noise_max_ns(const hmb_ctx *ctx, int64_t base_ns);

/* splitmix64's step: a bijective 64-bit mixer with full avalanche. hmb_mix64(counter++) over a
 * caller-owned counter is a per-thread random stream; hashing coordinates (seed, rank, tid,
 * iteration) through it gives reproducible draws. */
uint64_t hmb_mix64(uint64_t z);

/* ------------------------------------------------------------------ cache */

/* Register a buffer of the benchmark so --cache cold evicts it before every iteration.
 * Whoever frees a registered buffer unregisters it first (the flush touches every registered
 * byte); the harness drops a point's remaining registrations after teardown(). */
void hmb_cache_register(hmb_ctx *ctx, const void *buf, size_t len);
void hmb_cache_unregister(hmb_ctx *ctx, const void *buf); /* every registration of buf */
void hmb_cache_unregister_all(hmb_ctx *ctx);
/* A message buffer: page-aligned, zeroed (its pages faulted in now, not inside a timed region)
 * and registered for --cache cold. NULL if it cannot be allocated. Teardown frees it with free()
 * (the harness drops a point's registrations after teardown). */
void *hmb_buffer_alloc(hmb_ctx *ctx, size_t bytes);
/* Frees a buffer of hmb_buffer_alloc before the point ends (or outside a point): drops its
 * --cache cold registration and every validation registration inside it first. */
void hmb_buffer_free(hmb_ctx *ctx, void *buf, size_t bytes);
/* Last-level cache size in bytes (sysfs or --llc-size): e.g. to keep a --cache hot working
 * set cache-resident. */
size_t hmb_cache_llc_bytes(const hmb_ctx *ctx);
/* Between the modes (phases) of one paired iteration, outside their timed regions: under --cache
 * cold, evict the registered buffers again, so every mode starts cold (the harness evicts only
 * before an iteration); under --cache hot nothing. Collective: every rank calls it at the same
 * point (it ends with a barrier under cold). */
void hmb_cache_evict(hmb_ctx *ctx);

/* ------------------------------------------------------------------ validation */

/* Pattern depending on (rank, part, iter) — part is a partition or thread index. */
void hmb_fill(void *buf, size_t len, int rank, int part, long iter);
/* Returns 1 if buf holds the pattern (and applies the test-only --corrupt-at switch
 * first). On mismatch returns 0 and stores the first bad byte offset in *bad_offset. */
int hmb_check(hmb_ctx *ctx, void *buf, size_t len, int rank, int part, long iter, size_t *bad_offset);
/* hmb_check + on mismatch hmb_validation_failure naming the place. Returns 1 if good. */
int hmb_check_buffer(hmb_ctx *ctx, const hmb_point *pt, void *buf, size_t len,
                     int src_rank, int part, long iter);
/* Send data regime, --data reuse|fresh. fresh: like an application that writes its data before
 * every send, send buffers are rewritten every iteration (generation = iter). reuse (default):
 * like osu_bw, which sends one buffer again and again, send data is written once per point; to
 * still catch stale data, a benchmark keeps two send-buffer sets, uses set (iter & 1) in
 * iteration iter, and writes generation iter & 1 into it, so data of the previous iteration
 * always differs. Two lines adopt it:
 *   prepare():  if (hmb_data_refill(ctx, iter))
 *                   hmb_fill(send_set[iter & 1], len, rank, part, hmb_data_gen(ctx, iter));
 *   verify():   hmb_check_data(ctx, pt, recv_buf, len, src_rank, part, iter);
 * hmb_data_gen: the generation whose pattern iteration iter sends (iter, or iter & 1 under reuse).
 * hmb_data_refill: 1 when prepare() must write iteration iter's set (always under fresh; in
 * iterations 0 and 1 of a point under reuse — iterations are numbered from 0 per point).
 * hmb_check_data: hmb_check_buffer expecting generation hmb_data_gen(ctx, iter); --corrupt-at
 * and a failure name the iteration iter. */
long hmb_data_gen(const hmb_ctx *ctx, long iter);
int hmb_data_refill(const hmb_ctx *ctx, long iter);
int hmb_check_data(hmb_ctx *ctx, const hmb_point *pt, void *buf, size_t len, int src_rank, int part, long iter);
/* Poison a receive buffer without dirtying it: one 8-byte word of HMB_POISON_BYTE at the start
 * of every 4 KB page of buf and in its last 8 bytes (all of it when shorter than 16 bytes). For a
 * benchmark whose send data do not change between samples (p2p's hot-cache latency: one send
 * set, as osu_latency), poisoning is what catches a message that did not arrive; a full memset
 * would leave the whole buffer dirty in this core's cache, and writing it back would be timed
 * in the next sample (4 MB: +18 % latency on MPICH). A missing message, or a missing page of
 * one, leaves poison the check finds; every byte is still compared with the pattern. */
void hmb_poison_pages(void *buf, size_t len);
/* hmb_check_buffer expecting generation gen (a benchmark that keeps one send set, e.g. p2p's
 * hot-cache latency); --corrupt-at and a failure name the iteration iter. */
int hmb_check_gen(hmb_ctx *ctx, const hmb_point *pt, void *buf, size_t len, int src_rank, int part, long iter,
                  long gen);
/* Validation as data: a benchmark registers each buffer with its pattern identity in setup();
 * the harness does the rest, every iteration, while validation is on (not --no-validate):
 *   HMB_SEND         before prepare() (and the --cache cold flush) the harness writes the
 *                    pattern of (this rank, part, iteration) into it, as hmb_fill does;
 *   HMB_SEND_PACKED  the benchmark writes it inside the iteration (packs it); before prepare()
 *                    the harness fills it with the sender's poison (HMB_SENT_BYTE);
 *   HMB_RECEIVE      before prepare() the harness poisons it (HMB_POISON_BYTE).
 * After the iteration (group HMB_AFTER_ITERATION: after verify()), or right after paired mode
 * `group` (hmb_modes_run: the mode's id; HMB_EACH_MODE: after every mode), the harness writes
 * the sender's poison into the group's sends (the application's buffers again: a library that
 * still reads them delivers the poison), then checks that each receive holds the pattern of
 * (rank, part, iteration) and poisons it again. A mismatch fails the point (exit 3,
 * hmb_validation_failure) naming label, piece (the buffer cut into `pieces` equal pieces; the
 * failure's partition), 8-byte cell and byte, the byte found and expected, and what the piece
 * holds instead when it is recognisable: either poison, or the data of iteration - 1 / + 1
 * (never delivered / written after its requests completed). --corrupt-at flips a byte of the
 * first buffer checked in that iteration, so tests prove a mismatch is caught and named.
 * hmb_check_register_fn: the pattern is computed by the benchmark (a halo is its sender's cells):
 * fn(arg, iter, out) writes the len / 8 words the buffer holds in iteration iter.
 * label is printf-style (copied). Registrations end with the point (after teardown()); whoever
 * frees a registered buffer earlier calls hmb_check_unregister (or hmb_buffer_free) first. */
enum { HMB_SEND = 0, HMB_RECEIVE = 1, HMB_SEND_PACKED = 2 };
#define HMB_AFTER_ITERATION (-1)
#define HMB_EACH_MODE (-2)
#define HMB_POISON_BYTE 0xA5
#define HMB_SENT_BYTE 0x5E
typedef void (*hmb_pattern_fn)(const void *arg, long iter, uint64_t *out);
void hmb_check_register(hmb_ctx *ctx, int role, void *buf, size_t len, int rank, int part, int pieces, int group,
                        const char *label, ...) __attribute__((format(printf, 9, 10)));
void hmb_check_register_fn(hmb_ctx *ctx, int role, void *buf, size_t len, hmb_pattern_fn fn, const void *arg,
                           int pieces, int group, const char *label, ...) __attribute__((format(printf, 9, 10)));
void hmb_check_unregister(hmb_ctx *ctx, const void *buf, size_t len); /* every one inside [buf, buf+len) */
/* --corrupt-at for data a benchmark checks itself (a reduction's result, a halo it unpacked):
 * 1 exactly once, when this is the check --corrupt-at picks (the first check of the picked rank
 * in that iteration); the caller then flips a byte of what it is about to check. */
int hmb_corrupt_pick(hmb_ctx *ctx, long iter);

/* Fatal data/conformance problem: prints benchmark, point params, iteration, rank,
 * partition and the message on one line to stderr, writes it to JSON, aborts (exit 3). */
void hmb_validation_failure(hmb_ctx *ctx, const hmb_point *pt, long iter, int part,
                            const char *fmt, ...) __attribute__((noreturn, format(printf, 5, 6)));

/* ------------------------------------------------------------------ output */

/* Extra fields on the current point's JSON result record (call from annotate()). */
void hmb_result_add_num(hmb_ctx *ctx, const char *key, double value);
void hmb_result_add_str(hmb_ctx *ctx, const char *key, const char *value);
/* A table of numbers: nrows rows of width values each (row-major), written as [[a, b], ...]
 * ([a, b, ...] for width 1; [] for no rows), e.g. proto's "switch_bytes" intervals. */
void hmb_result_add_rows(hmb_ctx *ctx, const char *key, const double *values, int nrows, int width);
/* Extra fields on the run header (call from check()): e.g. MPI_T cvars a mode needs. */
void hmb_header_add_num(hmb_ctx *ctx, const char *key, double value);
void hmb_header_add_str(hmb_ctx *ctx, const char *key, const char *value);

/* A conformance verdict (hmb-bench conform): rank 0 writes one "conformance" record (library,
 * check, verdict "PASS"/"FAIL"/"UNSUPPORTED", reason, the clause of the MPI standard, seconds the
 * check took, the one-line command that reproduces it alone) and prints it on stdout. */
void hmb_conformance_record(hmb_ctx *ctx, const char *check, const char *verdict, const char *reason,
                            const char *clause, const char *reproducer, double seconds);

/* This process's resident memory now (VmRSS) and its peak (VmHWM), kB, from /proc/self/status.
 * Returns 1, or 0 (values -1) where the system does not say. */
int hmb_memory_kB(long *rss_kB, long *hwm_kB);

/* ------------------------------------------------------------------ MPI + threads resources */

/* The communication resources of MPI + threads (seed 003; src/harness/threadcomm.c), shared by
 * mt's lanes and halo3d --thread-comm. MPIX streams are an MPICH extension: without them
 * hmb_stream is a placeholder and hmb_streams_unsupported says why. */
#if defined(HMB_HAVE_MPIX_STREAM_CREATE) && defined(HMB_HAVE_MPIX_STREAM_COMM_CREATE)
#define HMB_HAVE_STREAMS 1
typedef MPIX_Stream hmb_stream;
#else
#define HMB_HAVE_STREAMS 0
typedef int hmb_stream;
#endif
/* A duplicate of base carrying the info assertions keys[0..n-1] = "true" (MPI 4.0:
 * mpi_assert_no_any_tag, ...); kept[k] gets the value the library kept, or "(not kept)". */
MPI_Comm hmb_comm_dup_asserting(MPI_Comm base, const char *const *keys, int n, char (*kept)[64]);
/* Why nstreams MPIX streams per process cannot be created here (no MPIX streams, or MPICH's
 * MPIR_CVAR_CH4_RESERVE_VCIS below nstreams on some rank), or NULL. Collective. */
const char *hmb_streams_unsupported(hmb_ctx *ctx, int nstreams, char *buf, size_t len);
/* A new MPIX stream; a communicator over base attaching this rank's stream (collective over
 * base: every rank creates its stream communicators in the same order). Only after
 * hmb_streams_unsupported said NULL. */
void hmb_stream_create(hmb_stream *stream);
void hmb_stream_comm(MPI_Comm base, hmb_stream stream, MPI_Comm *comm);
void hmb_stream_free(hmb_stream *stream);

/* Reduce helpers for iterate(): element-wise max/sum of n doubles onto rank 0. */
void hmb_reduce_max(hmb_ctx *ctx, double *vals, int n);
void hmb_reduce_sum(hmb_ctx *ctx, double *vals, int n);

/* ------------------------------------------------------------------ topology */

/* A Cartesian process grid (2-D or 3-D) with its neighbourhood, and a thread grid inside every
 * rank that splits the rank's block of cells into one tile per OpenMP thread. Ranks are laid out
 * as MPI_Cart_create(reorder = 0) lays them: row-major, the last axis fastest; threads x fastest
 * (tid = tx + tdims[0] (ty + tdims[1] tz)).
 *
 * Directions: the neighbourhood's offsets (each component -1, 0 or +1), faces first, then edges,
 * then corners; directions 2k and 2k+1 are opposite (opposite(d) = d ^ 1). The message of
 * direction d goes to the rank at +off ("to") and is received from the rank at -off ("from"),
 * tagged with d on both sides: on a small periodic grid, where +off and -off name the same rank
 * (or this rank itself), each message still meets the one receive meant for it.
 *
 * Faces and threads: the boundary layer of the block on the +off side of direction d is cut into
 * pieces, one per thread tile touching it (for a face, the threads on that side of the thread
 * grid: tdims of the two other axes multiplied; for an edge, the tdims of its free axis; a
 * corner is one piece). The neighbour receives piece p of direction d into its halo on the -off
 * side; both sides number pieces alike, so piece p is one (send, receive) pair, e.g. one
 * partition of a partitioned face. */
#define HMB_TOPO_MAX_DIRS 26

typedef struct {
    int off[3]; /* -1, 0, +1 per axis (off[2] = 0 in 2-D) */
    int to;     /* rank at +off, MPI_PROC_NULL past an open boundary */
    int from;   /* rank at -off, MPI_PROC_NULL past an open boundary */
} hmb_topo_dir;

typedef struct {
    int ndims;      /* 2 or 3 */
    int dims[3];    /* process grid (dims[2] = 1 in 2-D) */
    int periodic;   /* 1: the grid wraps around on every axis */
    int coords[3];  /* this rank's coordinates */
    int rank, size; /* this rank, ranks in the grid */
    int tdims[3];   /* thread grid of every rank (tdims[2] = 1 in 2-D) */
    int nthreads;   /* tdims multiplied */
    int ndirs;      /* 2-D: 4 (faces) or 8; 3-D: 6 (faces) or 26 */
    hmb_topo_dir dir[HMB_TOPO_MAX_DIRS];
} hmb_topo;

/* Options of a benchmark on a grid: put HMB_TOPO_OPTIONS in its option table, then call
 * hmb_topo_from_options() (in check() and again in setup(): it is cheap and deterministic).
 *   --grid px,py[,pz]    process grid (default: balanced, as MPI_Dims_create)
 *   --tgrid tx,ty[,tz]   thread grid per rank (default: balanced over --threads)
 *   --boundary periodic|open */
#define HMB_TOPO_OPTIONS                                                                                          \
    {"grid", HMB_OPT_INTS, NULL, "process grid px,py[,pz] (default: balanced over the ranks)", 1, 1 << 20, NULL,  \
     0},                                                                                                          \
    {"tgrid", HMB_OPT_INTS, NULL, "thread grid per rank tx,ty[,tz] (default: balanced over --threads)", 1,       \
     HMB_MAX_THREADS, NULL, 0},                                                                                   \
    {"boundary", HMB_OPT_CHOICE, "periodic", "grid boundary: periodic (every rank has every neighbour) or open",  \
     0, 0, "periodic|open", 0}

/* Fill dims[0..ndims) with a balanced factorisation of n (non-increasing, as MPI_Dims_create);
 * entries already > 0 are kept. Returns 0, or -1 when the kept entries do not divide n. */
int hmb_dims_balanced(int n, int ndims, int *dims);
/* The directions of a neighbourhood: 2-D 4 or 8, 3-D 6 or 26. Writes off[d][3]; returns the count
 * or -1 for another combination. */
int hmb_topo_directions(int ndims, int neighbours, int (*off)[3]);
/* Build a topology without MPI: grid (NULL or entries 0 = balanced) over size ranks, this rank,
 * thread grid (NULL = balanced) over nthreads. Returns NULL, or a one-line reason (static text)
 * when the grid does not fit. */
const char *hmb_topo_build(hmb_topo *t, int ndims, int neighbours, const int *grid, int size, int rank,
                           const int *tgrid, int nthreads, int periodic);
int hmb_topo_rank_of(const hmb_topo *t, const int coords[3]); /* MPI_PROC_NULL outside an open grid */
int hmb_topo_pieces(const hmb_topo *t, int d);                /* pieces of direction d's boundary */
int hmb_topo_piece_thread(const hmb_topo *t, int d, int piece); /* the thread owning piece */
int hmb_topo_thread_piece(const hmb_topo *t, int d, int tid);   /* tid's piece of direction d, or -1 */
/* Boxes in cell coordinates of a block of n[0] x n[1] x n[2] interior cells (0 .. n-1; the halo
 * is -1 and n): thread tid's tile; the cells piece p of direction d sends (interior boundary
 * layer, depth 1); the halo cells where piece p of the message of direction d lands. */
void hmb_topo_tile(const hmb_topo *t, const int n[3], int tid, int lo[3], int cnt[3]);
void hmb_topo_send_box(const hmb_topo *t, const int n[3], int d, int piece, int lo[3], int cnt[3]);
void hmb_topo_recv_box(const hmb_topo *t, const int n[3], int d, int piece, int lo[3], int cnt[3]);

/* hmb_topo_build from the options (HMB_TOPO_OPTIONS), hmb_size/hmb_rank and --threads; a grid
 * that does not fit the ranks, or a thread grid that does not fit the threads, is a usage error
 * (exit 2). With record = 1 (call it so from check()), the run header gets topology_grid
 * ("2x2x2"), topology_tgrid, topology_boundary and topology_neighbours. */
void hmb_topo_from_options(hmb_ctx *ctx, int ndims, int neighbours, int record, hmb_topo *t);
/* The same over a grid of `size` ranks (this one `rank`) with `threads` per rank: a benchmark whose
 * ranks stand in for another layout's (halo3d --everywhere-ranks: groups of ranks play threads). */
void hmb_topo_from_options_as(hmb_ctx *ctx, int ndims, int neighbours, int record, int size, int rank, int threads,
                              hmb_topo *t);

/* --face-partitions tiles|threads|N (HMB_FACE_PARTITIONS_OPTION; sweep3d, halo3d): how many
 * partitions (pieces) each face is cut into in the modes where every thread sends its own part
 * (multiple, partitioned). hmb_face_partitions returns 0 for "tiles" (the topology's pieces: one
 * per thread tile touching the face), --threads for "threads" (seed 000: one partition per
 * thread), or N; N not a positive multiple of --threads up to HMB_MAX_THREADS is a usage error
 * naming the option. hmb_face_partition_range: with N partitions, thread tid owns partitions
 * [*first, *first + N / threads). */
#define HMB_FACE_PARTITIONS_OPTION                                                                                \
    {"face-partitions", HMB_OPT_STRING, "tiles",                                                                  \
     "partitions per face in multiple/partitioned: tiles (one per thread tile on the face), threads (one per "  \
     "thread), or N (a multiple of --threads; each thread owns N/T)", 0, 0, NULL, 0}
int hmb_face_partitions(hmb_ctx *ctx);
void hmb_face_partition_range(int n, int threads, int tid, int *first, int *count);

/* ------------------------------------------------------------------ communication policies */

/* One table of the communication operations a pattern uses (halo3d, sweep3d, stencil3d), served
 * by a policy chosen with --comm (HMB_COMM_OPTION; src/harness/comm.c):
 *   on   MPI: each operation is its MPI call (MPI_Isend, MPI_Psend_init, MPI_Pready, ...);
 *   off  mock (after LLNL Comb): a loopback without any MPI call. hmb_comm_route() makes this
 *        rank its own neighbour in every direction it receives from, and every send is copied
 *        into this rank's own matching receive (communicator and tag, in posting order, as MPI
 *        matches), partition by partition for partitioned requests (copied at MPI_Pready once
 *        both are started). Packing, unpacking, compute and validation run as with MPI, the data
 *        checked is what the mock copied. A wait on a mock request lasts until its counterpart
 *        on this rank is posted; past --wait-bound the point fails (exit 3) naming the
 *        tag: a pattern that receives, then feeds itself later, must wait for it later too.
 *        Collectives have no loopback: allreduce returns 0 (not run), MPI returns 1.
 * Requests are MPI_Request values either way (a mock request never reaches MPI); the null
 * request is MPI_REQUEST_NULL, and a peer MPI_PROC_NULL gives one, as in MPI. */
struct hmb_comm_ops_s {
    const char *name; /* "mpi", "mock" */
    int mock;
    void (*isend)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req);
    void (*irecv)(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Request *req);
    void (*send_init)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                      MPI_Request *req);
    void (*recv_init)(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Request *req);
    /* partitioned (MPI 4.0): count elements per partition; MPI_INFO_NULL */
    void (*psend_init)(const void *buf, int partitions, int count, MPI_Datatype type, int dest, int tag,
                       MPI_Comm comm, MPI_Request *req);
    void (*precv_init)(void *buf, int partitions, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm,
                       MPI_Request *req);
    void (*pready)(int partition, MPI_Request req);
    int (*parrived)(MPI_Request req, int partition); /* 1 once arrived */
    void (*start)(MPI_Request *req);
    void (*startall)(int n, MPI_Request *reqs);
    void (*wait)(MPI_Request *req);
    void (*waitall)(int n, MPI_Request *reqs);
    int (*testall)(int n, MPI_Request *reqs); /* 1 once all are complete (then as after waitall) */
    void (*request_free)(MPI_Request *req); /* MPI_REQUEST_NULL is fine */
    int (*allreduce)(const void *in, void *out, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
};

#define HMB_COMM_OPTION                                                                                           \
    {"comm", HMB_OPT_CHOICE, "on",                                                                                \
     "off: mock mode, the same pattern without MPI (a loopback: sends copied into this rank's receives)", 0, 0,  \
     "on|off", 0}

/* The policy of --comm (HMB_COMM_OPTION in the benchmark's option table). */
const hmb_comm_ops *hmb_comm_policy(hmb_ctx *ctx);
/* The MPI policy itself, for a benchmark without --comm (part). */
const hmb_comm_ops *hmb_comm_mpi(void);
/* Under the mock, route topo's neighbourhood onto this rank (to = from = this rank where from is a
 * rank, MPI_PROC_NULL elsewhere); MPI: unchanged. Call once in setup, after hmb_topo_from_options. */
void hmb_comm_route(const hmb_comm_ops *ops, const hmb_ctx *ctx, hmb_topo *topo);

/* ------------------------------------------------------------------ MPI_T performance variables */

/* Library-internal counters (queue lengths, match attempts, time spent matching) read through
 * MPI_T (src/harness/pvar.c; docs/methodology.md, "MPI_T performance variables"). A name this
 * library does not expose is kept as "unavailable", never an error: report "unavailable", never
 * invent a value. Main thread only; sample outside timed regions (a read is a library call). */
typedef struct hmb_pvars hmb_pvars;
/* Start a pvar session (MPI_T_init_thread inside) and look up each name: "name" is the first
 * variable of that name in any class, "class:name" (e.g. "counter:time_matching_unexpectedq")
 * the one of that class (hmb_pvars_class() names). The names are copied.
 * Variables bound to a communicator are bound to comm, MPI_T_BIND_NO_OBJECT ones to nothing;
 * other bindings and non-numeric types count as unavailable. Call after MPI_Init: libraries
 * register some variables only then (Open MPI's ob1 queues). ctx may be NULL. */
hmb_pvars *hmb_pvars_open(hmb_ctx *ctx, const char *const *names, int n, MPI_Comm comm);
int hmb_pvars_available(const hmb_pvars *pv, int i); /* 1 if names[i] can be read here */
int hmb_pvars_count(const hmb_pvars *pv, int i);     /* values per read (one per peer, ...); 0 if unavailable */
/* "level", "counter", "timer", "highwatermark", "lowwatermark", "size", "percentage", "state",
 * "aggregate", "generic"; "unavailable" when the library has no such name. */
const char *hmb_pvars_class(const hmb_pvars *pv, int i);
/* Unit of the values read: "s" (timers of type double, MPI_Wtime's unit), "ticks" (integer timers:
 * the unit is the library's, see --list-pvars), "count", "fraction" (percentage), "" otherwise. */
const char *hmb_pvars_unit(const hmb_pvars *pv, int i);
void hmb_pvars_start(hmb_pvars *pv); /* starts those that are not continuous (continuous ones always run) */
void hmb_pvars_stop(hmb_pvars *pv);
void hmb_pvars_reset(hmb_pvars *pv); /* those that are not read-only (counters, timers, watermarks) */
/* Current values of names[i] as doubles (integers above 2^53 lose precision): writes
 * hmb_pvars_count() values and returns that count; 0 if unavailable or the read failed.
 * A counter or timer is cumulative: sample it before and after and take the difference (MPICH
 * 4.0.2's timers read as total minus a constant near -1.8e9 s: only differences mean anything). */
int hmb_pvars_read(hmb_pvars *pv, int i, double *values);
/* Onto the current result record (call from annotate()), for each name, keys
 * "<prefix><name>.available" (1/0), and either ".reason" or ".class", ".type", ".binding"
 * ("communicator"/"none"), ".count", ".unit", ".continuous". The values are the benchmark's
 * to record (as metrics or hmb_result_add_num). */
void hmb_pvars_record(hmb_ctx *ctx, const hmb_pvars *pv, const char *prefix);
void hmb_pvars_close(hmb_pvars *pv); /* frees handles and session, MPI_T_finalize; NULL is fine */

#ifdef __cplusplus
}
#endif
#endif
