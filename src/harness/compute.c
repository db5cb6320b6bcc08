/* The compute load (SPEC §2 "Compute load", docs/methodology.md "Compute load and noise").
 *
 * The kernel is a chain of dependent floating-point multiply-adds: each step needs the
 * previous result, so neither the compiler (no -ffast-math: no reassociation) nor the CPU
 * can overlap or vectorise the steps, and its speed depends only on the core's FP latency,
 * not on memory or the cache state. It makes no system calls.
 *
 * A request comes in two kinds:
 * - TIME (hmb_compute_for): busy work re-checked against the clock until the requested time
 *   has passed. Exact in time whatever the core's speed does (turbo, power limits, a
 *   neighbour's load): part, halo3d, sweep3d, mt and stencil3d vary a delay, and get it. It
 *   ends after the deadline by at most the last chunk (FINAL_CHUNK_NS) and a clock read,
 *   unless the thread loses its core right at the end.
 * - WORK (hmb_compute_work): a fixed number of iterations, converted from ns with the
 *   thread's SUSTAINED rate. If something slows the core down (a progress thread, steal
 *   time) the same work takes longer and the measured time shows it: that is what async
 *   reports as C_actual / C. A deadline loop would hide it.
 *
 * The rate is the sustained one: after a warm-up, the median of runs of SUSTAINED_RUN_NS,
 * with every thread of the rank calibrating at once (hmb_env_calibrate), measured again after
 * MPI_Init with every thread of every rank at once (hmb_compute_sustained_rate,
 * hmb_env_check_compute). On a core whose
 * speed moves, short bursts run faster than sustained work (turn 4, three 16-core nodes: a
 * rate from the 90th percentile of 100 us trials, only ever raised, ran requests +2..+8 % long
 * in the median); a run of ~10 ms sees the core as a long request does, interruptions
 * included. After calibrating, work runs at the rate check it in both directions; a rate off
 * by over 1 % either way is measured again and the latest kept, never the fastest. */
#define _GNU_SOURCE
#include "core.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>

/* One serial chain: every step needs the previous result, so each iteration costs the
 * core's multiply + add latency whatever the compiler does. a < 1 keeps x bounded (fixed
 * point b / (1 - a) = 1): no overflow, no denormals, whatever the iteration count. */
double hmb_compute_kernel(uint64_t iters)
{
    /* volatile: the compiler may not assume the constants, so it cannot fold the chain. */
    volatile double a_src = 0.999999, b_src = 1e-6;
    const double a = a_src, b = b_src;
    double x = 0.5;
    for (uint64_t i = 0; i < iters; i++)
        x = x * a + b;
    return x;
}

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ------------------------------------------------------------------ test only: a simulated core
 *
 * Compiled into libhmbcore.so alone (HMB_TEST_HOOKS, CMakeLists.txt), never into hmb-bench: with
 * hmb_compute_test_core() on, the kernel does no work and the clock is virtual; a kernel call of
 * n iterations advances the clock by the time a core of base_iters_per_ns x speed(t) needs for
 * them, speed(t) stepping through a schedule of segments; each clock read costs read_ns. The
 * tests use it to make a core whose speed steps up and down, deterministically, on any machine.
 * One thread at a time. */
#ifdef HMB_TEST_HOOKS
enum { SIM_MAX_SEGMENTS = 16 };
static struct {
    int on, repeat, nseg;
    double t_ns, t0_ns, base, read_ns, period_ns;
    double seg_ns[SIM_MAX_SEGMENTS], speed[SIM_MAX_SEGMENTS];
} sim;

int hmb_compute_test_core(double base_iters_per_ns, double read_ns, int nseg, const double *seg_ns,
                          const double *speed, int repeat)
{
    sim.on = 0;
    if (nseg <= 0)
        return 0; /* off: the real kernel and clock again */
    if (nseg > SIM_MAX_SEGMENTS || !(base_iters_per_ns > 0.0) || read_ns < 0.0)
        return -1;
    sim.period_ns = 0.0;
    for (int i = 0; i < nseg; i++) {
        if (!(seg_ns[i] > 0.0) || !(speed[i] > 0.0))
            return -1;
        sim.seg_ns[i] = seg_ns[i], sim.speed[i] = speed[i];
        sim.period_ns += seg_ns[i];
    }
    sim.nseg = nseg, sim.repeat = repeat, sim.base = base_iters_per_ns, sim.read_ns = read_ns;
    sim.t0_ns = sim.t_ns = 1e9;
    sim.on = 1;
    return 0;
}

/* The speed at the virtual time t and the end of its segment (INFINITY: the last segment of a
 * schedule that does not repeat). */
static double sim_speed(double t, double *seg_end)
{
    double rel = t - sim.t0_ns;
    if (sim.repeat)
        rel = fmod(rel, sim.period_ns);
    double start = 0.0;
    for (int i = 0; i < sim.nseg; i++) {
        if (rel < start + sim.seg_ns[i]) {
            *seg_end = t + (start + sim.seg_ns[i] - rel);
            return sim.speed[i];
        }
        start += sim.seg_ns[i];
    }
    *seg_end = INFINITY;
    return sim.speed[sim.nseg - 1];
}

static void sim_run(uint64_t iters)
{
    double work = (double)iters;
    while (work > 0.0) {
        double seg_end, rate = sim.base * sim_speed(sim.t_ns, &seg_end);
        if (!(seg_end > sim.t_ns)) /* a boundary closer than the clock's rounding: step over it */
            seg_end = nextafter(sim.t_ns, INFINITY);
        double fits = (seg_end - sim.t_ns) * rate;
        if (work <= fits) {
            sim.t_ns += work / rate;
            break;
        }
        work -= fits;
        sim.t_ns = seg_end;
    }
}

static int64_t clock_ns(void)
{
    if (!sim.on)
        return hmb_now_ns();
    sim.t_ns += sim.read_ns;
    return (int64_t)sim.t_ns;
}

static double run_kernel(uint64_t iters)
{
    if (!sim.on)
        return hmb_compute_kernel(iters);
    sim_run(iters);
    return 1.0;
}

static int64_t cpu_ns(void) { return sim.on ? (int64_t)sim.t_ns : thread_cpu_ns(); }
#else
#define clock_ns hmb_now_ns
#define run_kernel hmb_compute_kernel
#define cpu_ns thread_cpu_ns
#endif

/* ------------------------------------------------------------------ running */

/* Makes a kernel result observable so the call is not optimised away (a per-call local:
 * thread-safe). */
static void keep(double x)
{
    volatile double sink = x;
    (void)sink;
}

int64_t hmb_compute_run_iters(uint64_t iters)
{
    if (iters == 0)
        return 0;
    int64_t t_begin_ns = clock_ns();
    keep(run_kernel(iters));
    return clock_ns() - t_begin_ns;
}

uint64_t hmb_compute_iters(const hmb_calib *c, int64_t ns)
{
    if (ns <= 0 || !c || !(c->iters_per_ns > 0.0))
        return 0;
    return (uint64_t)llround((double)ns * c->iters_per_ns);
}

int64_t hmb_compute_work(const hmb_calib *c, int64_t ns) { return hmb_compute_run_iters(hmb_compute_iters(c, ns)); }

int64_t hmb_compute_work_on_core(const hmb_calib *c, int64_t ns, int64_t *on_core_ns)
{
    int64_t cpu_begin_ns = cpu_ns();
    int64_t wall_ns = hmb_compute_work(c, ns);
    int64_t on_core = cpu_ns() - cpu_begin_ns;
    if (on_core_ns)
        *on_core_ns = on_core > 0 && on_core < wall_ns ? on_core : wall_ns;
    return wall_ns;
}

/* The TIME kind re-reads the clock after every chunk of work. A chunk is at most MAX_CHUNK_NS
 * long: a thread that loses its core for D (another process, the hypervisor) overshoots only
 * when that happens within D of the deadline, not whenever D exceeds a large chunk. Once less
 * than two final chunks are left it steps FINAL_CHUNK_NS at a time, so the deadline is passed
 * by at most one of them and a clock read (~0.15 us: within SPEC's 1 us at 10 us). In between,
 * each chunk is half of what is left: a rate off by up to 2x still does not overshoot. The
 * clock reads (~25 ns each, every 20 us: 0.1 %) are part of the busy time. */
#define MAX_CHUNK_NS 20000.0
#define FINAL_CHUNK_NS 100.0

int64_t hmb_compute_for(const hmb_calib *c, int64_t ns)
{
    if (ns <= 0)
        return 0;
    /* Without a rate (the calibration failed) one iteration per ns, about a 1 GHz core's:
     * chunks only get shorter or longer, the deadline holds. */
    const double rate = c && c->iters_per_ns > 0.0 ? c->iters_per_ns : 1.0;
    const int64_t t_begin_ns = clock_ns(), t_end_ns = t_begin_ns + ns;
    int64_t now_ns = t_begin_ns;
    while (now_ns < t_end_ns) {
        double left_ns = (double)(t_end_ns - now_ns);
        double chunk_ns = left_ns > 2.0 * FINAL_CHUNK_NS ? 0.5 * left_ns : FINAL_CHUNK_NS;
        uint64_t iters = (uint64_t)((chunk_ns < MAX_CHUNK_NS ? chunk_ns : MAX_CHUNK_NS) * rate);
        keep(run_kernel(iters > 0 ? iters : 1));
        now_ns = clock_ns();
    }
    return now_ns - t_begin_ns;
}

/* ------------------------------------------------------------------ calibration */

/* Clock-gap probe: spin on the clock; a gap between consecutive readings far above the cost
 * of a reading (~30 ns) is time the core was taken away. Gaps while this thread was
 * descheduled (another process ran: wall minus thread CPU time) are scheduling, not the
 * machine's baseline, and are taken out. The median of several chunks resists a burst (a
 * launcher starting processes at the same moment). */
#define PROBE_CHUNK_NS 5e6
enum { PROBE_CHUNKS = 5 };

static void probe_interruptions(hmb_calib *out, double chunk_ns, int chunks)
{
    enum { MAX_CHUNKS = 15 };
    const int64_t gap_threshold_ns = 1000;
    double lost_frac[MAX_CHUNKS], gap_rate[MAX_CHUNKS];
    chunks = chunks > MAX_CHUNKS ? MAX_CHUNKS : chunks < 1 ? 1 : chunks;
    for (int c = 0; c < chunks; c++) {
        int64_t cpu_begin_ns = cpu_ns();
        int64_t t_begin_ns = clock_ns(), prev_ns = t_begin_ns, gap_ns = 0, gaps = 0;
        for (;;) {
            int64_t now_ns = clock_ns();
            if (now_ns - prev_ns > gap_threshold_ns) {
                gap_ns += now_ns - prev_ns;
                gaps++;
            }
            prev_ns = now_ns;
            if ((double)(now_ns - t_begin_ns) >= chunk_ns)
                break;
        }
        double wall_ns = (double)(prev_ns - t_begin_ns);
        double on_core_ns = (double)(cpu_ns() - cpu_begin_ns);
        double descheduled_ns = wall_ns > on_core_ns ? wall_ns - on_core_ns : 0.0;
        double lost_ns = (double)gap_ns > descheduled_ns ? (double)gap_ns - descheduled_ns : 0.0;
        lost_frac[c] = on_core_ns > 0.0 ? lost_ns / on_core_ns : 0.0;
        gap_rate[c] = wall_ns > 0.0 ? (double)gaps / wall_ns : 0.0;
    }
    qsort(lost_frac, (size_t)chunks, sizeof lost_frac[0], hmb_cmp_double);
    qsort(gap_rate, (size_t)chunks, sizeof gap_rate[0], hmb_cmp_double);
    out->interrupt_lost_frac = hmb_quantile_sorted(lost_frac, chunks, 0.5);
    out->interrupts_per_ns = hmb_quantile_sorted(gap_rate, chunks, 0.5);
}

/* A sustained run: long enough to see the core as a long request does (its speed level after
 * a burst, the machine's interruptions at their usual share), short enough for several in a
 * calibration. */
#define SUSTAINED_RUN_NS 10e6
enum { MIN_SUSTAINED_RUNS = 3, MAX_SUSTAINED_RUNS = 64 };

/* Run iters and return the time the thread was on its core for them: the wall time, less any
 * time it was descheduled (another process on its core: a busy machine's scheduling, not the
 * core's speed; the thread's CPU time shows it). Interruptions that do not deschedule the
 * thread (ticks, IRQs, VM exits) stay in: a long request meets them too. */
static double on_core_run_ns(uint64_t iters)
{
    int64_t cpu_begin_ns = cpu_ns();
    double wall = (double)hmb_compute_run_iters(iters);
    double on_core = (double)(cpu_ns() - cpu_begin_ns);
    return on_core > 0.0 && on_core < wall ? on_core : wall;
}

/* The median of n run rates (sorted in place) and their spread, into out. */
static void keep_rate(hmb_calib *out, double *rates, int n)
{
    qsort(rates, (size_t)n, sizeof rates[0], hmb_cmp_double);
    double rate = hmb_quantile_sorted(rates, n, 0.5);
    out->iters_per_ns = rate;
    out->rate_spread = rate > 0.0 ? (rates[n - 1] - rates[0]) / rate : 0.0;
}

/* Warm-up, then sustained runs for about target_s: the rate into out. */
static void measure_rate(hmb_calib *out, double target_s, int64_t t_start_ns)
{
    /* Warm-up: grow the run until it lasts SUSTAINED_RUN_NS (~20 ms of work in all: the core
     * reaches the speed it keeps under load). */
    uint64_t iters = 1024;
    double elapsed_ns = on_core_run_ns(iters);
    while (elapsed_ns < SUSTAINED_RUN_NS && iters < (UINT64_C(1) << 40)) {
        double grow = elapsed_ns > 0.0 ? 1.05 * SUSTAINED_RUN_NS / elapsed_ns : 16.0;
        iters = (uint64_t)((double)iters * (grow > 16.0 ? 16.0 : grow < 1.2 ? 1.2 : grow));
        elapsed_ns = on_core_run_ns(iters);
    }
    /* Then sustained runs until the budget is spent (at least MIN_SUSTAINED_RUNS): the
     * median, so one run disturbed beyond the usual does not count. */
    double rates[MAX_SUSTAINED_RUNS];
    int nruns = 0;
    double spent_s = 0.0;
    while (nruns < MAX_SUSTAINED_RUNS && (nruns < MIN_SUSTAINED_RUNS || spent_s < target_s)) {
        double run_ns = on_core_run_ns(iters);
        rates[nruns++] = run_ns > 0.0 ? (double)iters / run_ns : 0.0;
        spent_s = (double)(clock_ns() - t_start_ns) * 1e-9;
    }
    keep_rate(out, rates, nruns);
}

int hmb_compute_calibrate(hmb_calib *out, double target_s)
{
    int64_t t_start_ns = clock_ns();
    out->cpu = sched_getcpu();
    measure_rate(out, target_s > 0.0 ? target_s : 0.04, t_start_ns);
    out->verify_error = 0.0;
    probe_interruptions(out, PROBE_CHUNK_NS, PROBE_CHUNKS);
    out->calib_s = (double)(clock_ns() - t_start_ns) * 1e-9;
    return out->iters_per_ns > 0.0 && isfinite(out->iters_per_ns) ? 0 : -1;
}

int hmb_compute_calibrate_rate(hmb_calib *out, double target_s)
{
    int64_t t_start_ns = clock_ns();
    out->cpu = sched_getcpu();
    measure_rate(out, target_s > 0.0 ? target_s : 0.04, t_start_ns);
    out->verify_error = NAN; /* not verified, no interruption probe: JSON null */
    out->interrupt_lost_frac = out->interrupts_per_ns = NAN;
    out->calib_s = (double)(clock_ns() - t_start_ns) * 1e-9;
    return out->iters_per_ns > 0.0 && isfinite(out->iters_per_ns) ? 1 : -1;
}

double hmb_compute_rate_error(double calibrated_iters_per_ns, uint64_t iters, int64_t measured_ns)
{
    /* A run at the rate takes iters / rate; > 0: it took longer (the rate is too high). */
    if (!(calibrated_iters_per_ns > 0.0) || iters == 0 || measured_ns <= 0)
        return 0.0;
    return (double)measured_ns * calibrated_iters_per_ns / (double)iters - 1.0;
}

/* The verification: VERIFY_RUNS work requests of VERIFY_NS at the rate, their median error. */
#define VERIFY_NS 10000000
enum { VERIFY_RUNS = 3 };

int hmb_compute_calibrate_verified(hmb_calib *out, double target_s, int max_tries)
{
    /* A core's speed moves between levels a few % apart (on the 2-core dev VM 0.632, 0.665,
     * 0.682, 0.699 iterations/ns), each lasting longer than one calibration: a calibration
     * that straddled a change is off for the level that follows. Work requests at the rate
     * then come out long or short; beyond SPEC's 1 % either way the verification's own runs,
     * sustained runs too, are the new measurement: the rate becomes theirs (the latest, never
     * the fastest) and is verified again, at most max_tries measurements in all. */
    int64_t t_start_ns = clock_ns();
    out->cpu = sched_getcpu();
    measure_rate(out, target_s > 0.0 ? target_s : 0.04, t_start_ns);
    if (!(out->iters_per_ns > 0.0 && isfinite(out->iters_per_ns)))
        return -1;
    int tries = 1;
    for (;;) {
        uint64_t iters = hmb_compute_iters(out, VERIFY_NS);
        double errors[VERIFY_RUNS], rates[VERIFY_RUNS];
        for (int k = 0; k < VERIFY_RUNS; k++) { /* on-core time, as the rate: descheduling is not speed */
            double run_ns = on_core_run_ns(iters);
            errors[k] = hmb_compute_rate_error(out->iters_per_ns, iters, (int64_t)run_ns);
            rates[k] = run_ns > 0.0 ? (double)iters / run_ns : 0.0;
        }
        qsort(errors, VERIFY_RUNS, sizeof errors[0], hmb_cmp_double);
        out->verify_error = errors[VERIFY_RUNS / 2];
        if (fabs(out->verify_error) <= HMB_COMPUTE_TOLERANCE || tries >= max_tries)
            break;
        keep_rate(out, rates, VERIFY_RUNS);
        tries++;
    }
    probe_interruptions(out, PROBE_CHUNK_NS, PROBE_CHUNKS);
    out->calib_s = (double)(clock_ns() - t_start_ns) * 1e-9;
    return tries;
}

double hmb_compute_sustained_rate(const hmb_calib *c, int runs)
{
    enum { MAX_RUNS = 16 };
    runs = runs < 1 ? 1 : runs > MAX_RUNS ? MAX_RUNS : runs;
    uint64_t iters = hmb_compute_iters(c, (int64_t)SUSTAINED_RUN_NS);
    if (iters == 0)
        return 0.0;
    double rates[MAX_RUNS];
    for (int k = 0; k < runs; k++) {
        double run_ns = on_core_run_ns(iters);
        rates[k] = run_ns > 0.0 ? (double)iters / run_ns : 0.0;
    }
    qsort(rates, (size_t)runs, sizeof rates[0], hmb_cmp_double);
    return hmb_quantile_sorted(rates, runs, 0.5);
}

double hmb_compute_probe(hmb_calib *c, int64_t ns, int runs, double tolerance, int *remeasured)
{
    enum { MAX_PROBE_RUNS = 16, RERATE_RUNS = 3 };
    *remeasured = 0;
    if (ns <= 0)
        return NAN;
    runs = runs < 1 ? 1 : runs > MAX_PROBE_RUNS ? MAX_PROBE_RUNS : runs;
    double ratios[MAX_PROBE_RUNS];
    for (int k = 0; k < runs; k++)
        ratios[k] = (double)hmb_compute_work(c, ns) / (double)ns;
    qsort(ratios, (size_t)runs, sizeof ratios[0], hmb_cmp_double);
    double ratio = hmb_quantile_sorted(ratios, runs, 0.5);
    if (ratio < 1.0 - tolerance) { /* short: the rate is stale (a kernel run is never short by chance) */
        double rate = hmb_compute_sustained_rate(c, RERATE_RUNS);
        if (rate > 0.0 && isfinite(rate)) {
            c->iters_per_ns = rate;
            *remeasured = 1;
        }
    }
    return ratio;
}

const int64_t hmb_compute_check_ns[HMB_COMPUTE_CHECKS] = {10000, 1000000, 100000000};

double hmb_compute_allowed_error_ns(int64_t request_ns)
{
    double one_pct = HMB_COMPUTE_TOLERANCE * (double)request_ns;
    return one_pct > 1000.0 ? one_pct : 1000.0;
}

/* ------------------------------------------------------------------ the measured compute of a point */

static double median_sorting(double *v, long n)
{
    qsort(v, (size_t)n, sizeof v[0], hmb_cmp_double);
    return hmb_quantile_sorted(v, n, 0.5);
}

void hmb_compute_thread_medians(long n, double *requested_ns, double *measured_ns, double out[3])
{
    out[0] = out[1] = out[2] = NAN;
    if (n <= 0)
        return;
    double *errors = malloc((size_t)n * sizeof(double));
    if (!errors)
        abort();
    for (long i = 0; i < n; i++)
        errors[i] = measured_ns[i] / requested_ns[i] - 1.0;
    out[2] = median_sorting(errors, n);
    out[0] = median_sorting(requested_ns, n);
    out[1] = median_sorting(measured_ns, n);
    free(errors);
}

void hmb_compute_summarize(int ranks, int threads, const double *rows, hmb_compute_summary *out)
{
    enum { F_REQUESTED, F_MEASURED, F_ERROR, F_KINDS, NFIELDS };
    memset(out, 0, sizeof *out);
    const int n = ranks * threads;
    if (n <= 0)
        return;
    double *requested = malloc(3 * (size_t)n * sizeof(double));
    if (!requested)
        abort();
    double *measured = requested + n, *error = measured + n;
    int kept = 0, worst = -1;
    for (int k = 0; k < n; k++) {
        const double *f = rows + k * NFIELDS;
        out->kinds |= (int)f[F_KINDS];
        if (isnan(f[F_ERROR]))
            continue;
        requested[kept] = f[F_REQUESTED], measured[kept] = f[F_MEASURED], error[kept] = f[F_ERROR];
        kept++;
        if (worst < 0 || fabs(f[F_ERROR]) > fabs(rows[worst * NFIELDS + F_ERROR]))
            worst = k;
    }
    if (kept > 0) {
        const double *w = rows + worst * NFIELDS;
        out->present = 1;
        out->threads = kept;
        out->worst_rank = worst / threads, out->worst_thread = worst % threads;
        out->worst_requested_ns = w[F_REQUESTED], out->worst_measured_ns = w[F_MEASURED];
        out->worst_error = w[F_ERROR];
        out->requested_ns = median_sorting(requested, kept);
        out->measured_ns = median_sorting(measured, kept);
        out->error = median_sorting(error, kept);
    }
    free(requested);
}
