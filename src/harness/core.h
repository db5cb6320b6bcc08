/* Pure harness modules (no MPI): units, options, statistics, noise, compute, timer.
 * Built into hmb-bench and into libhmbcore.so, which tests/ loads with ctypes so unit
 * tests run the exact code the benchmarks use. Every function here is deterministic given
 * its inputs (except the clock and the compute kernel's timing). */
#ifndef HMB_CORE_H
#define HMB_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hmb/bench.h"
#include "hmb/stats.h"

/* The growable array: returns items (elem bytes each) with room for at least count + 1 of them,
 * doubling *capacity (from 16) when count has reached it; aborts when memory runs out. Usage:
 *   list = hmb_grow(list, &cap, n, sizeof *list); list[n++] = item; */
void *hmb_grow(void *items, size_t *capacity, size_t count, size_t elem);

/* The layouts of the structures tests/_corelib.py mirrors (layout.c): row i's type, field
 * (NULL: the structure's size), offset and size; returns 0 past the last row. */
int hmb_layout(int i, const char **type, const char **field, size_t *offset, size_t *size);

/* One-line error message into err (when err != NULL); shared by the parsers. Control characters
 * (a newline inside a value) are escaped (hmb_escape_controls), so the message stays one line. */
void hmb_set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* in into out (at most outlen bytes with the NUL) with \n, \t, \r and other control bytes as \xNN. */
void hmb_escape_controls(const char *in, char *out, size_t outlen);

/* ------------------------------------------------------------------ metriclist.c
 * A benchmark's metric list (hmb_sample.value's layout): the fixed metrics, then every mode
 * metric template instantiated per mode that declares it, template by template. */
typedef struct {
    int count;          /* metrics in the list */
    hmb_metric *items;  /* names and descriptions of instantiated templates are owned */
    char **owned;
    int nfixed, nowned;
    int ntemplates, nmodes;
    int *slot;          /* [template * nmodes + mode]: index in items, -1: the mode lacks it */
} hmb_metric_list;

int hmb_bench_nmodes(const hmb_bench *b);
/* text with every "{mode}" replaced by mode, as a new string (free it). */
char *hmb_metric_name_for(const char *text, const char *mode);
void hmb_metric_list_build(hmb_metric_list *l, const hmb_bench *b);
void hmb_metric_list_free(hmb_metric_list *l);
/* Index of the metric named name[0..len), or -1. */
int hmb_metric_list_find(const hmb_metric_list *l, const char *name, size_t len);
/* Index of template k's metric of mode `mode`, or -1. */
int hmb_metric_list_slot(const hmb_metric_list *l, int k, int mode);

/* ------------------------------------------------------------------ units.c
 * All return 0 on success, -1 on malformed input (and write a one-line reason into err
 * when err != NULL). Suffixes K, M, G are binary (1K = 1024), case-insensitive, optional
 * trailing "B"/"iB" (4KB, 4KiB). Ranges: "a:b" doubling, "a:b:xF" geometric factor F,
 * "a:b:+S" arithmetic step S; lists are comma-separated items each of which may be a range.
 * Lists keep the user's order and drop nothing; a range whose end is below its start is an
 * error; overflow is an error. */
int hmb_parse_size(const char *s, size_t *out, char *err, size_t errlen);
int hmb_parse_size_list(const char *s, size_t **out, int *count, char *err, size_t errlen);
int hmb_parse_int_list(const char *s, long long **out, int *count, char *err, size_t errlen);
/* "10us", "1.5ms", "2s", "500ns"; "1m" is NOT accepted (ambiguous); a bare number other than
 * 0 is an error (a unit is required). */
int hmb_parse_duration_ns(const char *s, int64_t *out, char *err, size_t errlen);
/* Every number the parsers read as a double: plain decimal only ([+-]digits[.digits][e[+-]digits]),
 * never what strtod also takes (hex "0x10", inf, nan, leading spaces). hmb_parse_decimal reads the
 * number at the start of s (*end: where it stopped; -1 when there is none, or when it overflows or
 * underflows a double); hmb_parse_number wants all of s. */
int hmb_parse_decimal(const char *s, double *out, const char **end);
int hmb_parse_number(const char *s, double *out);
/* 4096 -> "4K", 1048576 -> "1M", 1000 -> "1000" (exact binary units only). */
void hmb_format_size(size_t bytes, char *buf, size_t len);

/* ------------------------------------------------------------------ options.c */
typedef struct {
    const hmb_option *opt;
    int given;          /* set on the command line */
    int present;        /* has a value (given or default) */
    long long ival;     /* FLAG (0/1), INT */
    double dval;        /* DOUBLE */
    int64_t ns;         /* DURATION */
    const char *sval;   /* STRING, CHOICE (points into argv or the default string) */
    size_t *sizes;      /* SIZES */
    long long *ints;    /* INTS; CHOICE_ARGS: each item's choice index */
    int count;          /* elements in sizes/ints */
    double *args;       /* CHOICE_ARGS: each item's number (NAN: none) */
} hmb_optval;

#define HMB_MAX_OPTIONS 160
typedef struct {
    int count;
    hmb_optval vals[HMB_MAX_OPTIONS];
    /* The effective rows vals[i].opt points to: the declarations with the name spelled with '-'
     * and the choices of .names / .modes written out. */
    hmb_option rows[HMB_MAX_OPTIONS];
    unsigned char common[HMB_MAX_OPTIONS]; /* row i: 0 the benchmark's, 1 common, 2 a group (hmb_common_opts) */
    char *owned[2 * HMB_MAX_OPTIONS];      /* names and choices built for rows */
    int nowned;
} hmb_optset;

/* The options every benchmark has (harness-owned, HMB_COMMON_OPTIONS), HMB_OPTION_END-terminated. */
extern const hmb_option hmb_common_options[];

/* Parse argv (argv[0] = first option, NOT the program/benchmark name) against the benchmark's
 * table (may be NULL) plus the common table, with the benchmark's default overrides (may be NULL).
 * Accepts "--name value" and "--name=value"; flags take no value.
 * Returns 0 ok, 1 if --help/-h was given, 2 if --help-all, -1 on error with a one-line message in err such
 * as "--partitions: 0 is below the minimum 1" or "unknown option --foo". Common options of a group
 * (hmb_option.group) are left out. */
int hmb_options_parse(hmb_optset *set, const hmb_option *bench_options,
                      const hmb_default *defaults, int argc, char **argv,
                      char *err, size_t errlen);
/* The same for a benchmark's descriptor: its groups (bench->uses) and --mode from bench->modes. */
int hmb_options_parse_bench(hmb_optset *set, const hmb_bench *bench, int argc, char **argv, char *err,
                            size_t errlen);
/* Copy the parsed values into the typed structs (the rows' slots): common into *common, the
 * benchmark's own into *bench (may be NULL). A common option a benchmark re-declares lands in both. */
void hmb_options_store(const hmb_optset *set, hmb_common_opts *common, void *bench);
const hmb_optval *hmb_options_find(const hmb_optset *set, const char *name);
void hmb_options_free(hmb_optset *set);
/* Help text: one line per option with type, default and range, common options last; options
 * whose help starts with "TEST ONLY" only with all (--help-all), else one line counting them. */
void hmb_options_help(FILE *out, const hmb_option *bench_options, const hmb_default *defaults, int all);
void hmb_options_help_bench(FILE *out, const hmb_bench *bench, int all);

/* ------------------------------------------------------------------ stats.c: hmb/stats.h */

/* ------------------------------------------------------------------ noise.c */
typedef enum { HMB_NOISE_NONE, HMB_NOISE_SINGLE, HMB_NOISE_UNIFORM, HMB_NOISE_GAUSSIAN } hmb_noise_kind;
typedef struct {
    hmb_noise_kind kind;
    double percent;      /* P */
    int thread_random;   /* single: --noise-thread rand */
    uint64_t seed;
} hmb_noise;

/* "none", "single:P", "uniform:P", "gaussian:P" (P >= 0, a number). */
int hmb_noise_parse(const char *spec, hmb_noise *out, char *err, size_t errlen);
/* Compute amount (ns) for (rank, tid of nthreads, iter) around base_ns. Counter-based:
 * a pure function of (seed, rank, tid, iter) — reproducible and thread-safe.
 *   none:     base
 *   single:   base * (1 + P/100) for the noisy thread, base for the others; the noisy
 *             thread is (seed mod nthreads) in every iteration, or, with thread_random, drawn
 *             per (seed, rank, iter) — the same answer for every thread of the rank
 *   uniform:  base * (1 + U[0, P/100])
 *   gaussian: max(0, N(base, (base P/100)^2)) */
int64_t hmb_noise_draw(const hmb_noise *nz, int rank, int tid, int nthreads, long iter, int64_t base_ns);
/* The largest draw hmb_noise_draw can give around base_ns, for any rank, thread and iteration:
 * base for none, base (1 + P/100) for single and uniform, base (1 + P/100 sqrt(106 ln 2)) for
 * gaussian (Box-Muller's |z| with u1 >= 2^-53). For bounds that must cover any compute. */
int64_t hmb_noise_max_draw(const hmb_noise *nz, int64_t base_ns);
/* The noisy thread of `single` for this iteration (for tests and the record). */
int hmb_noise_single_thread(const hmb_noise *nz, int rank, int nthreads, long iter);

/* ------------------------------------------------------------------ compute.c */
typedef struct {
    double iters_per_ns; /* SUSTAINED kernel rate of the calibrating thread: the median of ~10 ms runs */
    double calib_s;      /* wall time spent calibrating (the last calibration) */
    int cpu;             /* CPU the thread ran on while calibrating */
    /* Interruptions of the core seen by a clock-gap probe (timer ticks, VM exits, IRQs):
     * share of time lost and how often. The sustained rate includes them: a work request that
     * meets none comes out short by up to interrupt_lost_frac. */
    double interrupt_lost_frac;
    double interrupts_per_ns;
    double rate_spread;  /* (fastest - slowest) / median of the sustained runs */
    double verify_error; /* median error of the work runs that verified the rate (signed fraction) */
    double alone_iters_per_ns; /* the rate before MPI_Init, this rank's threads alone computing */
    int concurrent;            /* 1: iters_per_ns was measured with every thread of every rank at once */
} hmb_calib;

/* SPEC's compute accuracy: max(1 us, 1 %) of the request. */
#define HMB_COMPUTE_TOLERANCE 0.01
/* The allowed error of a request of request_ns: max(1 us, 1 %), ns. */
double hmb_compute_allowed_error_ns(int64_t request_ns);

/* The kernel: floating-point work, no system calls; returns a value to keep it alive. */
double hmb_compute_kernel(uint64_t iters);
/* Calibrate the calling thread's sustained rate (about target_s seconds of work, plus the
 * interruption probe). Returns 0, or -1 if no rate came out. */
int hmb_compute_calibrate(hmb_calib *out, double target_s);
/* Measure the rate as hmb_compute_calibrate does, then verify it with three work runs of 10 ms:
 * while their median is off by over 1 % in either direction, their own rate becomes the rate
 * (the LATEST measurement, never the fastest) and is verified again, at most max_tries
 * measurements in all; then the interruption probe. Returns the measurements made, -1 if the
 * first found no rate. */
int hmb_compute_calibrate_verified(hmb_calib *out, double target_s, int max_tries);
/* The rate alone, as hmb_compute_calibrate measures it, without verification or interruption probe
 * (verify_error and the interruption fields NaN), for a run that computes nothing. Returns 1, or -1
 * if no rate came out. */
int hmb_compute_calibrate_rate(hmb_calib *out, double target_s);
/* The sustained rate of the calling thread now: the median of `runs` runs of ~10 ms (sized
 * with c's rate) in on-core time, as the calibration measures it. 0 without a rate in c. */
double hmb_compute_sustained_rate(const hmb_calib *c, int runs);
/* hmb_compute_probe_rate (hmb/compute.h) on the calibration c. */
double hmb_compute_probe(hmb_calib *c, int64_t ns, int runs, double tolerance, int *remeasured);
/* Signed error of iters run in measured_ns against calibrated_iters_per_ns: measured / expected
 * - 1 (> 0: ran long, the rate is too high; < 0: ran short, the rate is too low); 0 when there
 * is nothing to judge. */
double hmb_compute_rate_error(double calibrated_iters_per_ns, uint64_t iters, int64_t measured_ns);
/* The start-up check requests: 10 us, 1 ms, 100 ms (SPEC §2's range and its middle). */
enum { HMB_COMPUTE_CHECKS = 3 };
extern const int64_t hmb_compute_check_ns[HMB_COMPUTE_CHECKS];
/* TIME compute: busy kernel work until ns have passed on the clock (re-checked in chunks
 * sized with c's rate); returns the measured ns (>= ns). */
int64_t hmb_compute_for(const hmb_calib *c, int64_t ns);
/* WORK compute: the kernel iterations of a request of ns at c's sustained rate
 * (hmb_compute_iters); returns the measured ns. */
int64_t hmb_compute_work(const hmb_calib *c, int64_t ns);
/* hmb_compute_work, also giving the time the thread was on its core for it (on_core_ns: the
 * wall time less any time it was descheduled, as the sustained rate is measured): the rate's
 * own error, apart from the time other processes took the core. Returns the wall ns. */
int64_t hmb_compute_work_on_core(const hmb_calib *c, int64_t ns, int64_t *on_core_ns);
/* The kernel iterations of a WORK request of ns: ns x the sustained rate, rounded. */
uint64_t hmb_compute_iters(const hmb_calib *c, int64_t ns);
/* Run exactly iters kernel iterations; returns the measured ns. */
int64_t hmb_compute_run_iters(uint64_t iters);
/* The measured compute of a point (SPEC: per iteration, median and worst thread). */
enum { HMB_COMPUTE_TIME = 1, HMB_COMPUTE_WORK = 2 }; /* kinds of compute, as bits */
/* One thread's compute over a point's n measured iterations (its requested and measured
 * totals per iteration, ns; requested > 0): out[0] the median requested, out[1] the median
 * measured, out[2] the median of measured / requested - 1 (NaN all three when n = 0). Sorts
 * the arrays in place. */
void hmb_compute_thread_medians(long n, double *requested_ns, double *measured_ns, double out[3]);
/* Over every thread of every rank (rank-major, threads per rank; rows of 4: the three medians
 * of hmb_compute_thread_medians and the kinds bits; NaN rows: the thread did not compute):
 * the median over threads and ranks of each, and the thread whose median error is largest in
 * size. present = 0: nobody computed. */
typedef struct {
    int present, kinds, threads;
    double requested_ns, measured_ns, error;
    int worst_rank, worst_thread;
    double worst_requested_ns, worst_measured_ns, worst_error;
} hmb_compute_summary;
void hmb_compute_summarize(int ranks, int threads, const double *rows, hmb_compute_summary *out);
/* TEST ONLY, in libhmbcore.so alone (never in hmb-bench): a simulated core. nseg > 0: the
 * kernel does no work and the clock is virtual; n iterations take n / (base_iters_per_ns x
 * speed) with speed stepping through seg_ns[i] long segments at speed[i] (cycled if repeat,
 * else the last speed stays), and each clock read takes read_ns. nseg = 0: off. Returns 0, -1
 * on bad input. */
int hmb_compute_test_core(double base_iters_per_ns, double read_ns, int nseg, const double *seg_ns,
                          const double *speed, int repeat);

/* ------------------------------------------------------------------ timer.c */
/* (hmb_now / hmb_now_ns are declared in hmb/timing.h) */
/* Smallest nonzero difference between consecutive readings, and mean cost of one call. */
void hmb_timer_measure(double *resolution_ns, double *overhead_ns);

/* ------------------------------------------------------------------ clockfit.c
 * A remote clock's offset to rank 0 as a line: offset(t) = offset_s + drift (t - t_ref_s),
 * t in rank 0's time (ReproMPI HCA). drift in s/s (x 1e6 = ppm). */
typedef struct {
    double offset_s;       /* offset at t_ref_s */
    double drift;          /* d offset / dt */
    double t_ref_s;
    double residual_max_s; /* largest |point - line| of the fit */
} hmb_clock_model;

/* Offset of the remote clock from one ping-pong: rank 0 sends at t_send, the remote reads
 * t_remote, rank 0 receives the answer at t_recv: t_remote - (t_send + t_recv) / 2. */
double hmb_clock_exchange_offset(double t_send_s, double t_remote_s, double t_recv_s);
/* Least-squares line through n (t, offset) points, expressed at t_ref_s. n = 1, or all t
 * equal: drift 0 and the mean offset. Returns 0, or -1 if n < 1. */
int hmb_clock_fit(int n, const double *t_s, const double *offset_s, double t_ref_s, hmb_clock_model *out);
double hmb_clock_model_offset(const hmb_clock_model *m, double t_s);

/* ------------------------------------------------------------------ affinity.c
 * CPU sets as plain bit masks (cpu_set_t needs _GNU_SOURCE in every includer). */
#define HMB_MAX_CPUS 1024
#define HMB_CPUS_WORDS (HMB_MAX_CPUS / 64)
typedef struct {
    uint64_t bits[HMB_CPUS_WORDS];
} hmb_cpus;

void hmb_cpus_set(hmb_cpus *s, int cpu);
int hmb_cpus_has(const hmb_cpus *s, int cpu);
int hmb_cpus_count(const hmb_cpus *s);
int hmb_cpus_first(const hmb_cpus *s); /* -1: empty */
void hmb_cpus_or(hmb_cpus *into, const hmb_cpus *s);
int hmb_cpus_intersect(const hmb_cpus *a, const hmb_cpus *b); /* 1 if they share a CPU */
void hmb_cpus_minus(hmb_cpus *out, const hmb_cpus *a, const hmb_cpus *b);
/* Kernel cpulist text "0-3,6"; "" is the empty set. parse: 0, or -1 if malformed. */
void hmb_cpulist_format(const hmb_cpus *s, char *buf, size_t len);
int hmb_cpulist_parse(const char *text, hmb_cpus *out);
/* The rank's CPUs not used by its compute threads, as a cpulist; returns how many (-1: bad input). */
int hmb_spare_cpulist(const char *rank_cpus, const char *compute_cpus, char *spare, size_t len);
/* threads compute threads whose masks together allow only `occupied`: more threads than CPUs? */
int hmb_cpus_oversubscribed(int threads, const hmb_cpus *occupied);
/* hmb_bench.spare_core_when "option=v1,v2": the option's name (0, or -1 if malformed), and
 * whether a value list ("none,test:10,thread"; text before ':' compared) holds one of the values. */
int hmb_spare_rule_option(const char *rule, char *option, size_t len);
int hmb_spare_rule_matches(const char *rule, const char *values);
/* Threads of this process: affinity get/set (tid 0: the caller), /proc/self/task ids, and a
 * thread's last CPU and CPU time (utime + stime, clock ticks) from its stat. -1 on failure. */
int hmb_cpus_of_thread(int tid, hmb_cpus *out);
int hmb_cpus_apply(int tid, const hmb_cpus *s);
int hmb_task_list(int *tids, int max); /* returns the count */
int hmb_task_stat(int tid, int *last_cpu, long long *cpu_ticks);

#endif
