/* HMB — the options every benchmark has, owned by the harness (hmb_common(ctx) in hmb/bench.h
 * gives their typed values): one X-macro list, HMB_COMMON_OPTIONS, with the enums of their choices.
 * Options of a group (.group = HMB_OPTS_*) reach only a benchmark whose descriptor's .uses takes
 * the group. Included by hmb/bench.h, whose option machinery expands the list. */
#ifndef HMB_COMMON_H
#define HMB_COMMON_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { HMB_CACHE_HOT, HMB_CACHE_COLD };
enum { HMB_COMPUTE_CHECK_AUTO, HMB_COMPUTE_CHECK_FULL };
enum { HMB_DERIVED_NONE, HMB_DERIVED_TIME, HMB_DERIVED_WORK }; /* hmb_bench.derived_compute */
enum { HMB_DATA_REUSE, HMB_DATA_FRESH };
enum { HMB_NOISE_THREAD_FIXED, HMB_NOISE_THREAD_RAND };
enum { HMB_BOUNDARY_PERIODIC, HMB_BOUNDARY_OPEN };
enum { HMB_COMM_ON, HMB_COMM_OFF };
/* --inject (TEST ONLY): the faults a test plants, each at one iteration (hmb_inject_at). */
enum { HMB_INJECT_CORRUPT, HMB_INJECT_NEVER_COMPLETE, HMB_INJECT_STALE, HMB_INJECT_WRONG_SLOT, HMB_INJECT_HANG,
       HMB_INJECT_SILENT_PARTNER, HMB_INJECT_INVALID, HMB_INJECT_COUNT };

/* Upper bounds of the common durations (docs/methodology.md, "Options"): a typo such as
 * --compute 1e6s must not hold an allocation for days. One compute call (or one bounded wait) within
 * an hour; a point's adaptive budget within a day; the watchdog's --timeout within a week. */
#define HMB_MAX_COMPUTE_S 3600.0
#define HMB_MAX_BUDGET_S 86400.0
#define HMB_MAX_TIMEOUT_S 604800.0

/* The options every benchmark has (and the groups some take), owned by the harness. */
#define HMB_COMMON_OPTIONS(X)                                                                                       \
    X(sizes, SIZES, .default_value = "8:4M", .help = "message sizes (total message size per point)")              \
    X(threads, INT, .default_value = "1", .help = "OpenMP threads per rank", .min = 1, .max = 256)                 \
    X(iters, INT, .default_value = "20", .help = "minimum measured iterations per point (N_min)", .min = 1,       \
      .max = 1e9, HMB_RUN_CONTROL)                                                                                  \
    X(max_iters, INT, .default_value = "100000", .help = "maximum measured iterations per point", .min = 1,        \
      .max = 1e9, HMB_RUN_CONTROL)                                                                                  \
    X(warmup, INT, .default_value = "3", .help = "warm-up iterations per point (discarded, counted)", .min = 0,    \
      .max = 1e6, HMB_RUN_CONTROL)                                                                                  \
    X(ci_target, DOUBLE, .default_value = "5",                                                                      \
      .help = "stop when the 95% CI half-width of the median is within this % of it (0 = run exactly --iters)",    \
      .min = 0, .max = 100, HMB_RUN_CONTROL)                                                                        \
    X(budget, DURATION, .default_value = "2s", .help = "time budget per point for adaptive repetitions",           \
      .max = HMB_MAX_BUDGET_S, HMB_RUN_CONTROL)                                                                     \
    X(compute, DURATION, .default_value = "0", .max = HMB_MAX_COMPUTE_S,                                            \
      .help = "compute time per iteration per thread (benchmarks that compute)")                                  \
    X(noise, STRING, .default_value = "none", .help = "compute noise model: none | single:P | uniform:P | gaussian:P") \
    X(noise_thread, CHOICE, .default_value = "fixed", .choices = "fixed|rand",                                      \
      .help = "single:P noise hits the same thread every iteration (fixed) or one drawn per iteration (rand)")     \
    X(seed, INT, .default_value = "1", .help = "seed of the noise generator (recorded; same seed, same draws)",    \
      .min = 0, .max = 4611686018427387904.0 /* 2^62 */, HMB_RUN_CONTROL)                                           \
    X(compute_check, CHOICE, .default_value = "auto", .choices = "auto|full",                                      \
      .help = "start-up compute check: auto = 10 us and 1 ms, and 100 ms when the run may compute 10 ms or more "  \
              "(or async derives C from --calc-factor), a run that computes nothing calibrating the rate alone; "  \
              "full = all three requests and the full calibration (hmb check)",                                     \
      HMB_RUN_CONTROL)                                                                                              \
    X(cache, CHOICE, .default_value = "hot", .choices = "hot|cold",                                                 \
      .help = "hot: buffers stay cached; cold: evict the caches before every timed iteration")                     \
    X(data, CHOICE, .default_value = "fresh", .choices = "reuse|fresh",                                             \
      .help = "send data: fresh = written before every send, as an application does; reuse = written once per "   \
              "point in two generations by iteration parity, as OSU/IMB (p2p's default; other benchmarks: fresh "  \
              "only)")                                                                                              \
    X(llc_size, SIZES, .default_value = "0",                                                                        \
      .help = "last-level cache size: --cache cold eviction, p2p window slots (0 = sysfs)", HMB_RUN_CONTROL)        \
    X(no_validate, FLAG, .default_value = "0", .help = "do not check received data (checked every iteration by "   \
                                                       "default)", HMB_RUN_CONTROL)                                 \
    X(inject, CHOICE_ARGS, .choices = "corrupt:|never-complete:|stale:|wrong-slot:|hang:|silent-partner|invalid:", \
      .min = 0, .max = 1e9,                                                                                         \
      .help = "TEST ONLY: plant faults, each at an iteration: corrupt (one received byte flipped: validation must " \
              "catch it), never-complete (bounded waits see nothing arrive: exit 3 within --wait-bound), stale "   \
              "(senders send the other generation's data), wrong-slot (the last message carries the next slot's "  \
              "data), hang (rank 1 stops before the iteration: the watchdog's test); silent-partner (conform: the " \
              "receiver never posts its side); invalid (that iteration's sample left out, as an impossible one is: " \
              "with --ci-target 0 another replaces it)",                                                             \
      HMB_RUN_CONTROL)                                                                                              \
    X(timeout, DURATION, .default_value = "300s", .help = "watchdog: abort if one point runs longer than this",     \
      .max = HMB_MAX_TIMEOUT_S, HMB_RUN_CONTROL)                                                                    \
    X(wait_bound, DURATION, .default_value = "10s",                                                                 \
      .help = "a partition never reported arrived, or a request never completed, this long after its wait began "  \
              "ends the point (exit 3)",                                                                            \
      .max = HMB_MAX_COMPUTE_S, HMB_RUN_CONTROL)                                                                    \
    X(json, STRING, .help = "append JSON Lines results to this file", HMB_RUN_CONTROL)                              \
    X(raw, FLAG, .default_value = "0", .help = "also write every sample to the JSON", HMB_RUN_CONTROL)              \
    X(metric, STRING,                                                                                               \
      .help = "table columns: only these metrics, in this order (comma list; default: the table's that fit 120 "   \
              "columns)",                                                                                           \
      HMB_RUN_CONTROL)                                                                                              \
    X(wide, FLAG, .default_value = "0", .help = "table: every metric's columns, however wide (the JSON always "    \
                                                "has all)", HMB_RUN_CONTROL)                                        \
    X(thread_level, CHOICE, .names = hmb_thread_level_choices,                                                      \
      .help = "MPI thread level to request (default: the benchmark's own); modes the provided level cannot run "   \
              "are reported unsupported")                                                                           \
    X(grid, INTS, .group = HMB_OPTS_TOPO, .min = 1, .max = 1 << 20,                                                 \
      .help = "process grid px,py[,pz] (default: balanced over the ranks)")                                        \
    X(tgrid, INTS, .group = HMB_OPTS_TOPO, .min = 1, .max = HMB_MAX_THREADS,                                        \
      .help = "thread grid per rank tx,ty[,tz] (default: balanced over --threads)")                                \
    X(boundary, CHOICE, .group = HMB_OPTS_TOPO, .default_value = "periodic", .choices = "periodic|open",           \
      .help = "grid boundary: periodic (every rank has every neighbour) or open")                                  \
    X(face_partitions, STRING, .group = HMB_OPTS_FACE_PARTITIONS, .default_value = "tiles",                         \
      .help = "partitions per face in multiple/partitioned: tiles (one per thread tile on the face), threads (one " \
              "per thread), or N (a multiple of --threads; each thread owns N/T)")                                 \
    X(comm, CHOICE, .group = HMB_OPTS_COMM, .default_value = "on", .choices = "on|off",                             \
      .help = "off: mock mode, the same pattern without MPI (a loopback: sends copied into this rank's receives)") \
    X(format, CHOICE, .group = HMB_OPTS_FORMAT, .default_value = "table", .choices = "table|osu", HMB_RUN_CONTROL,  \
      .help = "stdout layout: table, or osu: the OSU micro-benchmarks' rows (bench->osu: '# Size  Latency (us)' "  \
              "per block, sizes in bytes, medians)")
enum { HMB_FORMAT_TABLE, HMB_FORMAT_OSU };

/* --thread-level's names, in MPI_THREAD_* order (NULL-terminated). */
extern const char *const hmb_thread_level_choices[];

#ifdef __cplusplus
}
#endif
#endif
