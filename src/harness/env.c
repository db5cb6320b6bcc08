/* Environment record: compute calibration and CPU sets (before MPI_Init), the spare CPU for
 * progress threads (around MPI_Init and in hmb_pin_progress_thread), then the run header — MPI
 * library, thread levels, layout, CPU sets, oversubscription, variables, build, timer,
 * calibration, clock offsets, noise, cache, options (docs/output-schema.md, "run"). */
#define _GNU_SOURCE /* sched_getaffinity, sched_getcpu, CPU_* */
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"
#include "env.h"
#include "output.h"
#include "hmb_buildinfo.h"

extern char **environ;

enum { CALIBRATION_TARGET_MS = 40, CALIBRATION_TRIES = 3 };

/* Whether the run computes: --compute > 0, a benchmark that derives compute (derived_compute), or
 * --compute-check full (hmb check). One that does not still measures the kernel's rate (the start-up
 * check's 10 us and 1 ms requests use it), but not the verification (30 ms), the interruption probe
 * (25 ms) or the rate again after MPI_Init (30 ms): 85 ms of each rank's start-up that described a
 * compute it never runs (a third of a short p2p launch). The header says so. */
static int run_computes(const hmb_ctx *ctx)
{
    const hmb_common_opts *o = &ctx->opt.common;
    return o->compute_check == HMB_COMPUTE_CHECK_FULL || o->compute > 0 || ctx->bench->derived_compute;
}

void hmb_env_calibrate(hmb_ctx *ctx)
{
    hmb_timer_measure(&ctx->run.timer_resolution_ns, &ctx->run.timer_overhead_ns);
    ctx->run.calibrated_fully = run_computes(ctx);
    /* Every thread calibrates itself at once, as the threads will later compute together (and
     * the ranks, started together, calibrate at the same time). */
#pragma omp parallel num_threads(ctx->run.threads)
    {
        int tid = omp_get_thread_num();
        hmb_calib *c = &ctx->run.calib[tid];
        ctx->run.calibrations[tid] =
            ctx->run.calibrated_fully ? hmb_compute_calibrate_verified(c, CALIBRATION_TARGET_MS * 1e-3, CALIBRATION_TRIES)
                                      : hmb_compute_calibrate_rate(c, CALIBRATION_TARGET_MS * 1e-3);
    }
}

/* CPU time (ns) the threads the library started inside MPI_Init have had, summed over those
 * allowed on a CPU of this rank's compute threads: /proc's schedstat (ns), else stat's ticks. */
static double library_ns_on_compute_cpus(const hmb_ctx *ctx)
{
    double sum_ns = 0.0;
    for (int i = 0; i < ctx->run.n_init_tids; i++) {
        hmb_cpus allowed;
        int tid = ctx->run.init_tids[i];
        if (hmb_cpus_of_thread(tid, &allowed) != 0 || !hmb_cpus_intersect(&allowed, &ctx->run.compute_cpus))
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
        FILE *f = fopen(path, "r");
        long long ns = -1, ticks;
        if (f) {
            if (fscanf(f, "%lld", &ns) != 1)
                ns = -1;
            fclose(f);
        }
        if (ns < 0 && hmb_task_stat(tid, NULL, &ticks) == 0)
            ns = ticks * (1000000000LL / sysconf(_SC_CLK_TCK));
        sum_ns += ns > 0 ? (double)ns : 0.0;
    }
    return sum_ns;
}

/* The start-up check's 100 ms request (a TIME and a WORK request: 0.3 s of every launch, half of a
 * short one's time) runs when the run may request compute nearer to 100 ms than to 1 ms (from
 * their log midpoint, 10 ms: --compute with the largest noise draw), when the benchmark derives a
 * compute it judges by the request nearest to it (full_compute_check without --compute: async's
 * --calc-factor), or with --compute-check full (hmb check). The header lists the requests that ran. */
#define LONG_CHECK_FROM_NS 10000000

static int compute_checks_wanted(const hmb_ctx *ctx)
{
    const hmb_common_opts *o = &ctx->opt.common;
    int full = o->compute_check == HMB_COMPUTE_CHECK_FULL ||
               (ctx->bench->derived_compute == HMB_DERIVED_WORK && !o->given.compute) ||
               hmb_noise_max_ns(ctx, o->compute) >= LONG_CHECK_FROM_NS; /* --compute itself without noise */
    return full ? HMB_COMPUTE_CHECKS : HMB_COMPUTE_CHECKS - 1;
}

/* Runs of the concurrent rate measurement (each ~10 ms). */
enum { CONCURRENT_RUNS = 3 };

/* The start-up check, under the run's concurrency: every thread of every rank starts each request
 * at once (a barrier between requests), the TIME kind then the WORK kind. */
static void check_requests(hmb_ctx *ctx)
{
    ctx->run.compute_checks = compute_checks_wanted(ctx);
    for (int i = 0; i < ctx->run.compute_checks; i++) {
        for (int kind = 0; kind < 2; kind++) {
            MPI_Barrier(ctx->run.comm);
#pragma omp parallel num_threads(ctx->run.threads)
            {
                int tid = omp_get_thread_num();
                const hmb_calib *c = &ctx->run.calib[tid];
                if (kind == 0)
                    ctx->run.compute_check_time_ns[tid][i] = hmb_compute_for(c, hmb_compute_check_ns[i]);
                else
                    ctx->run.compute_check_work_ns[tid][i] = hmb_compute_work_on_core(
                        c, hmb_compute_check_ns[i], &ctx->run.compute_check_work_core_ns[tid][i]);
            }
        }
    }
}

/* The sustained rate under the run's own concurrency: from a barrier, every thread of every rank
 * measures it at once (turbo and power limits depend on how many cores compute), and it replaces
 * the rate measured before MPI_Init, this rank's threads alone. Unless a thread the library started
 * inside MPI_Init (MPICH's progress thread, when there is no spare core to move it to) ran on the
 * compute CPUs meanwhile: its time would be in the rate, and async could no longer see it steal
 * compute; the rate before MPI_Init stays then. */
static void measure_concurrent_rate(hmb_ctx *ctx)
{
    double library_before_ns = library_ns_on_compute_cpus(ctx);
    MPI_Barrier(ctx->run.comm);
    double t_start = hmb_now();
    double concurrent[HMB_MAX_THREADS];
#pragma omp parallel num_threads(ctx->run.threads)
    {
        int tid = omp_get_thread_num();
        concurrent[tid] = hmb_compute_sustained_rate(&ctx->run.calib[tid], CONCURRENT_RUNS);
    }
    double wall_ns = (hmb_now() - t_start) * 1e9;
    int disturbed = library_ns_on_compute_cpus(ctx) - library_before_ns > 0.01 * wall_ns;
    for (int t = 0; t < ctx->run.threads; t++) {
        hmb_calib *c = &ctx->run.calib[t];
        c->concurrent = !disturbed && concurrent[t] > 0.0;
        if (c->concurrent)
            c->iters_per_ns = concurrent[t];
    }
}

void hmb_env_check_compute(hmb_ctx *ctx)
{
    for (int t = 0; t < ctx->run.threads; t++) {
        ctx->run.calib[t].alone_iters_per_ns = ctx->run.calib[t].iters_per_ns;
        ctx->run.calib[t].concurrent = 0;
    }
    if (ctx->run.calibrated_fully) /* a run that computes nothing keeps the rate before MPI_Init */
        measure_concurrent_rate(ctx);
    check_requests(ctx);
}

/* ------------------------------------------------------------------ placement */

void hmb_env_probe_cpus(hmb_ctx *ctx)
{
    hmb_cpus rank = {0}, compute = {0};
    hmb_cpus_of_thread(0, &ctx->run.main_cpus);
    hmb_cpus_or(&rank, &ctx->run.main_cpus);
    for (int place = 0; place < omp_get_num_places(); place++) {
        int n = omp_get_place_num_procs(place);
        int *ids = n > 0 ? malloc((size_t)n * sizeof *ids) : NULL;
        if (!ids)
            continue;
        omp_get_place_proc_ids(place, ids);
        for (int i = 0; i < n; i++)
            hmb_cpus_set(&rank, ids[i]);
        free(ids);
    }
#pragma omp parallel num_threads(ctx->run.threads)
    {
        hmb_cpus mine;
        if (hmb_cpus_of_thread(0, &mine) == 0) {
#pragma omp critical(hmb_probe_cpus)
            hmb_cpus_or(&compute, &mine);
        }
    }
    hmb_cpus_or(&rank, &compute);
    ctx->run.rank_cpus = rank;
    ctx->run.compute_cpus = compute;
    hmb_cpus_minus(&ctx->run.spare_cpus, &rank, &compute);
    hmb_cpulist_format(&rank, ctx->run.cpuset, sizeof ctx->run.cpuset);
    ctx->run.spare_cores_needed = hmb_env_spare_cores_needed(ctx);
}

/* The text of the option named by spare_core_when ("progress=impl,thread" -> --progress). */
static const char *spare_rule_values(const hmb_ctx *ctx, const hmb_point *pt)
{
    char option[64];
    const char *rule = ctx->bench ? ctx->bench->spare_core_when : NULL;
    if (!rule)
        return NULL;
    if (hmb_spare_rule_option(rule, option, sizeof option) != 0) {
        fprintf(stderr, "hmb-bench %s: spare_core_when \"%s\" is not \"option=value,...\"\n", ctx->bench->name, rule);
        abort();
    }
    const char *name, *sval;
    long long ival;
    for (int i = 0; pt && (i = hmb_point_param_next(pt, i, &name, &ival, &sval));)
        if (strcmp(name, option) == 0 && sval)
            return sval;
    const hmb_optval *v = hmb_options_find(&ctx->opt.set, option);
    if (!v || !v->sval) {
        fprintf(stderr, "hmb-bench %s: spare_core_when names --%s, which is no string option\n", ctx->bench->name,
                option);
        abort();
    }
    return v->sval;
}

int hmb_env_spare_cores_needed(const hmb_ctx *ctx)
{
    const char *values = spare_rule_values(ctx, NULL);
    return values && hmb_spare_rule_matches(ctx->bench->spare_core_when, values) ? 1 : 0;
}

void hmb_env_before_init(hmb_ctx *ctx)
{
    ctx->run.n_init_tids = hmb_task_list(ctx->run.init_tids, (int)(sizeof ctx->run.init_tids / sizeof ctx->run.init_tids[0]));
    if (hmb_cpus_count(&ctx->run.spare_cpus) > 0)
        hmb_cpus_apply(0, &ctx->run.spare_cpus);
}

void hmb_env_after_init(hmb_ctx *ctx)
{
    if (hmb_cpus_count(&ctx->run.spare_cpus) > 0)
        hmb_cpus_apply(0, &ctx->run.main_cpus);
    enum { MAX_TIDS = sizeof ctx->run.init_tids / sizeof ctx->run.init_tids[0] };
    int before[MAX_TIDS], now[MAX_TIDS];
    int n_before = ctx->run.n_init_tids, n_now = hmb_task_list(now, MAX_TIDS);
    memcpy(before, ctx->run.init_tids, sizeof before);
    ctx->run.n_init_tids = 0;
    for (int i = 0; i < n_now; i++) {
        int existed = 0;
        for (int k = 0; k < n_before && !existed; k++)
            existed = before[k] == now[i];
        if (!existed)
            ctx->run.init_tids[ctx->run.n_init_tids++] = now[i];
    }
}

int hmb_pin_progress_thread(hmb_ctx *ctx)
{
    atomic_store(&ctx->run.progress_tid, (int)syscall(SYS_gettid));
    int cpu = hmb_cpus_first(&ctx->run.spare_cpus);
    hmb_cpus one = {0};
    hmb_cpus_set(&one, cpu);
    if (hmb_cpus_apply(0, cpu >= 0 ? &one : &ctx->run.rank_cpus) != 0)
        return -1;
    return cpu;
}

/* The library's progress thread: of the threads it started in MPI_Init, the busiest. */
static int library_progress_tid(const hmb_ctx *ctx)
{
    int best = 0;
    long long best_ticks = -1, ticks;
    for (int i = 0; i < ctx->run.n_init_tids; i++)
        if (hmb_task_stat(ctx->run.init_tids[i], NULL, &ticks) == 0 && ticks > best_ticks) {
            best = ctx->run.init_tids[i];
            best_ticks = ticks;
        }
    return best;
}

void hmb_env_progress_annotate(hmb_ctx *ctx, const hmb_point *pt)
{
    const char *values = spare_rule_values(ctx, pt);
    if (!values || !hmb_spare_rule_matches(ctx->bench->spare_core_when, values))
        return;
    /* HMB's own thread while it lives (it is joined in teardown, after this); else the library's. */
    int tid = atomic_load(&ctx->run.progress_tid), last_cpu = -1;
    if (tid && hmb_task_stat(tid, NULL, NULL) != 0)
        tid = 0;
    if (!tid)
        tid = library_progress_tid(ctx);
    hmb_cpus allowed = {0};
    char text[256] = "";
    int known = tid && hmb_task_stat(tid, &last_cpu, NULL) == 0 && hmb_cpus_of_thread(tid, &allowed) == 0;
    if (known)
        hmb_cpulist_format(&allowed, text, sizeof text);
    hmb_result_add_str(ctx, "progress_cpus_allowed", text);
    hmb_result_add_num(ctx, "progress_last_cpu", known ? last_cpu : -1);
    hmb_result_add_num(ctx, "progress_shares_compute_core",
                       known ? hmb_cpus_intersect(&allowed, &ctx->run.compute_cpus) : NAN);
}

typedef struct {
    char host[MPI_MAX_PROCESSOR_NAME];
    char cpuset[256], compute_cpus[256], spare_cpus[256], library_thread_cpus[256];
    int library_threads;
    int thread_cpu[HMB_MAX_THREADS];
    int calib_cpu[HMB_MAX_THREADS];
    double iters_per_ns[HMB_MAX_THREADS];
    double interrupt_lost_frac[HMB_MAX_THREADS], interrupts_per_s[HMB_MAX_THREADS];
    double rate_spread[HMB_MAX_THREADS], verify_error[HMB_MAX_THREADS], alone_iters_per_ns[HMB_MAX_THREADS];
    int concurrent[HMB_MAX_THREADS];
    int calibrations[HMB_MAX_THREADS];
    int64_t check_time_ns[HMB_MAX_THREADS][HMB_COMPUTE_CHECKS], check_work_ns[HMB_MAX_THREADS][HMB_COMPUTE_CHECKS];
    int64_t check_work_core_ns[HMB_MAX_THREADS][HMB_COMPUTE_CHECKS];
} rank_info;

static const char *impl_name(const char *library)
{
    if (strstr(library, "Intel"))
        return "Intel MPI";
    if (strstr(library, "Open MPI"))
        return "Open MPI";
    if (strstr(library, "MPICH"))
        return "MPICH";
    return "unknown";
}

static int has_env_prefix(const char *var)
{
    static const char *prefixes[] = {"MPIR_CVAR_", "MPICH_", "OMPI_MCA_", "PRTE_MCA_", "I_MPI_",
                                     "UCX_",       "FI_",    "OMP_",      "HMB_"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(var, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

/* Node layout: ranks per node, CPUs of their masks; oversubscribed when the node's compute
 * threads outnumber the CPUs their masks allow (all ranks of the node together). */
static void node_layout(hmb_ctx *ctx)
{
    MPI_Comm node;
    int node_ranks = 1, node_threads = 0;
    MPI_Comm_split_type(ctx->run.comm, MPI_COMM_TYPE_SHARED, ctx->run.rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_ranks);
    hmb_cpus node_cpus, node_compute;
    MPI_Allreduce(ctx->run.rank_cpus.bits, node_cpus.bits, HMB_CPUS_WORDS, MPI_UINT64_T, MPI_BOR, node);
    MPI_Allreduce(ctx->run.compute_cpus.bits, node_compute.bits, HMB_CPUS_WORDS, MPI_UINT64_T, MPI_BOR, node);
    MPI_Allreduce(&ctx->run.threads, &node_threads, 1, MPI_INT, MPI_SUM, node);
    MPI_Comm_free(&node);
    ctx->run.node_compute_cpus = hmb_cpus_count(&node_compute);
    int oversub = hmb_cpus_oversubscribed(node_threads, &node_compute);
    /* The busiest node (most ranks; among equals the fewest CPUs) is the one reported. */
    int busiest_in[2] = {node_ranks, -hmb_cpus_count(&node_cpus)}, busiest[2];
    MPI_Allreduce(busiest_in, busiest, 1, MPI_2INT, MPI_MAXLOC, ctx->run.comm);
    MPI_Allreduce(&oversub, &ctx->run.oversubscribed, 1, MPI_INT, MPI_LOR, ctx->run.comm);
    ctx->run.ranks_per_node = busiest[0];
    ctx->run.cpus_available = -busiest[1];
    /* A launch by hand leaves ranks or threads unbound: a rank whose mask holds more than its
     * share of the node's CPUs (all of them, typically), or threads with OMP_PROC_BIND unset.
     * Oversubscription is warned about on its own (hmb run leaves such ranks unbound). */
    int share = hmb_cpus_count(&node_cpus) / node_ranks;
    int loose = (node_ranks > 1 && hmb_cpus_count(&ctx->run.rank_cpus) > (share > 1 ? share : 1))
                | (ctx->run.threads > 1 && omp_get_proc_bind() == omp_proc_bind_false) << 1;
    MPI_Allreduce(&loose, &ctx->run.unbound, 1, MPI_INT, MPI_BOR, ctx->run.comm);
    if (ctx->run.oversubscribed)
        ctx->run.unbound = 0;
}

/* Every rank's placement gathered on rank 0 (returned there; NULL elsewhere), node layout
 * and a missing spare core decided on every rank. */
static rank_info *gather_placement(hmb_ctx *ctx, rank_info *mine)
{
    rank_info *all = ctx->run.rank == 0 ? calloc((size_t)ctx->run.size, sizeof *all) : NULL;
    if (ctx->run.rank == 0 && !all)
        abort();
    int name_len = 0;
    MPI_Get_processor_name(mine->host, &name_len);
    snprintf(mine->cpuset, sizeof mine->cpuset, "%s", ctx->run.cpuset);
    hmb_cpulist_format(&ctx->run.compute_cpus, mine->compute_cpus, sizeof mine->compute_cpus);
    hmb_cpulist_format(&ctx->run.spare_cpus, mine->spare_cpus, sizeof mine->spare_cpus);
    hmb_cpus library = {0}, one;
    for (int i = 0; i < ctx->run.n_init_tids; i++)
        if (hmb_cpus_of_thread(ctx->run.init_tids[i], &one) == 0)
            hmb_cpus_or(&library, &one);
    hmb_cpulist_format(&library, mine->library_thread_cpus, sizeof mine->library_thread_cpus);
    mine->library_threads = ctx->run.n_init_tids;
#pragma omp parallel num_threads(ctx->run.threads)
    mine->thread_cpu[omp_get_thread_num()] = sched_getcpu();
    MPI_Gather(mine, (int)sizeof *mine, MPI_BYTE, all, (int)sizeof *mine, MPI_BYTE, 0, ctx->run.comm);
    return all;
}

/* Collective: the node layout, and whether any rank lacks the spare core its run needs. */
static void layout(hmb_ctx *ctx)
{
    node_layout(ctx);
    int spare_missing = ctx->run.spare_cores_needed && hmb_cpus_count(&ctx->run.spare_cpus) == 0, any_missing = 0;
    MPI_Allreduce(&spare_missing, &any_missing, 1, MPI_INT, MPI_LOR, ctx->run.comm);
    ctx->run.spare_core_missing = any_missing;
}

void hmb_env_check_options(hmb_ctx *ctx)
{
    layout(ctx);
    if (ctx->bench->check)
        ctx->bench->check(ctx);
}

/* Rank 0, once placement is gathered and the options are known to be good. */
static void warn_placement(const hmb_ctx *ctx, const rank_info *all)
{
    if (ctx->run.oversubscribed)
        fprintf(stderr,
                "hmb-bench: warning: oversubscribed: %d ranks per node x %d threads > %d CPUs their threads may "
                "run on; timings will be distorted\n",
                ctx->run.ranks_per_node, ctx->run.threads, ctx->run.node_compute_cpus);
    for (int r = 0; r < ctx->run.size && ctx->run.spare_core_missing; r++)
        if (!all[r].spare_cpus[0]) {
            fprintf(stderr,
                    "hmb-bench: warning: no spare core for the progress thread (%s): rank %d's CPUs %s are all "
                    "taken by its %d compute thread(s), so the progress thread shares a compute core\n",
                    ctx->bench->spare_core_when, r, all[r].cpuset, ctx->run.threads);
            break;
        }
}

static void write_placement(hmb_json *j, const hmb_ctx *ctx, const rank_info *all)
{
    hmb_json_int(j, "ranks_per_node", ctx->run.ranks_per_node);
    hmb_json_int(j, "threads", ctx->run.threads);
    hmb_json_int(j, "cpus_available", ctx->run.cpus_available);
    hmb_json_bool(j, "oversubscribed", ctx->run.oversubscribed);
    hmb_json_int(j, "spare_cores_per_rank", ctx->run.spare_cores_needed);
    hmb_json_bool(j, "spare_core_missing", ctx->run.spare_core_missing);
    hmb_json_open_arr(j, "placement");
    for (int r = 0; r < ctx->run.size; r++) {
        hmb_json_open_obj(j, NULL);
        hmb_json_int(j, "rank", r);
        hmb_json_str(j, "host", all[r].host);
        hmb_json_str(j, "cpuset", all[r].cpuset);
        hmb_json_str(j, "compute_cpus", all[r].compute_cpus);
        hmb_json_str(j, "spare_cpus", all[r].spare_cpus);
        hmb_json_int(j, "library_threads", all[r].library_threads);
        hmb_json_str(j, "library_thread_cpus", all[r].library_thread_cpus);
        hmb_json_open_arr(j, "thread_cpus");
        for (int t = 0; t < ctx->run.threads; t++)
            hmb_json_int(j, NULL, all[r].thread_cpu[t]);
        hmb_json_close_arr(j);
        hmb_json_close_obj(j);
    }
    hmb_json_close_arr(j);
}

/* One check request over every thread of every rank: the median measured, and the thread
 * furthest from the request (its rank, thread, measured). */
static void write_check_kind(hmb_json *j, const char *prefix, int64_t request_ns, int ranks, int threads,
                             const int64_t *(*measured_of)(const rank_info *, int), const rank_info *all, int i)
{
    const int n = ranks * threads;
    double *values = malloc((size_t)n * sizeof(double));
    if (!values)
        abort();
    int worst = 0;
    double worst_off = -1.0;
    for (int k = 0; k < n; k++) {
        values[k] = (double)measured_of(&all[k / threads], k % threads)[i];
        double off = fabs(values[k] - (double)request_ns);
        if (off > worst_off)
            worst_off = off, worst = k;
    }
    double worst_ns = values[worst];
    qsort(values, (size_t)n, sizeof values[0], hmb_cmp_double);
    char key[48];
    snprintf(key, sizeof key, "%smeasured_ns", prefix);
    hmb_json_num(j, key, hmb_quantile_sorted(values, n, 0.5));
    snprintf(key, sizeof key, "%sworst_measured_ns", prefix);
    hmb_json_int(j, key, (long long)worst_ns);
    snprintf(key, sizeof key, "%sworst_rank", prefix);
    hmb_json_int(j, key, worst / threads);
    snprintf(key, sizeof key, "%sworst_thread", prefix);
    hmb_json_int(j, key, worst % threads);
    free(values);
}

static const int64_t *time_checks(const rank_info *r, int t) { return r->check_time_ns[t]; }
static const int64_t *work_checks(const rank_info *r, int t) { return r->check_work_ns[t]; }
static const int64_t *work_core_checks(const rank_info *r, int t) { return r->check_work_core_ns[t]; }

/* The run header's "calibration": every thread's sustained rate and start-up check, and per
 * check request the median over threads and ranks and the worst thread, for the TIME compute
 * (measured_ns, worst_*) and the WORK compute in wall time (work_measured_ns, work_worst_*) and
 * on its core (work_on_core_measured_ns, work_on_core_worst_*: the rate's own error, without the
 * time other processes took the core, which a wall time includes). */
static void write_calibration(hmb_json *j, const hmb_ctx *ctx, const rank_info *all)
{
    hmb_json_open_obj(j, "calibration");
    hmb_json_str(j, "rate", "sustained"); /* docs/methodology.md, "Compute load and noise" */
    hmb_json_int(j, "ranks", ctx->run.size);
    hmb_json_int(j, "threads", ctx->run.threads);
    hmb_json_open_arr(j, "per_thread");
    for (int r = 0; r < ctx->run.size; r++) {
        for (int t = 0; t < ctx->run.threads; t++) {
            hmb_json_open_obj(j, NULL);
            hmb_json_int(j, "rank", r);
            hmb_json_int(j, "thread", t);
            hmb_json_num(j, "iters_per_ns", all[r].iters_per_ns[t]);
            hmb_json_str(j, "measured", all[r].concurrent[t] ? "concurrent" : "alone");
            hmb_json_num(j, "alone_iters_per_ns", all[r].alone_iters_per_ns[t]);
            hmb_json_num(j, "rate_spread", all[r].rate_spread[t]);
            hmb_json_num(j, "verify_error", all[r].verify_error[t]);
            hmb_json_int(j, "cpu", all[r].calib_cpu[t]);
            hmb_json_num(j, "interrupt_lost_frac", all[r].interrupt_lost_frac[t]);
            hmb_json_num(j, "interrupts_per_s", all[r].interrupts_per_s[t]);
            hmb_json_int(j, "calibrations", all[r].calibrations[t]);
            hmb_json_open_arr(j, "check_measured_ns");
            for (int i = 0; i < ctx->run.compute_checks; i++)
                hmb_json_int(j, NULL, all[r].check_time_ns[t][i]);
            hmb_json_close_arr(j);
            hmb_json_open_arr(j, "check_work_measured_ns");
            for (int i = 0; i < ctx->run.compute_checks; i++)
                hmb_json_int(j, NULL, all[r].check_work_ns[t][i]);
            hmb_json_close_arr(j);
            hmb_json_open_arr(j, "check_work_on_core_ns");
            for (int i = 0; i < ctx->run.compute_checks; i++)
                hmb_json_int(j, NULL, all[r].check_work_core_ns[t][i]);
            hmb_json_close_arr(j);
            hmb_json_close_obj(j);
        }
    }
    hmb_json_close_arr(j);
    if (!ctx->run.calibrated_fully)
        hmb_json_str(j, "calibration_skipped", "the verification, the interruption probe and the rate with every rank "
                                               "at once: the run computes nothing (--compute-check full does them)");
    if (ctx->run.compute_checks < HMB_COMPUTE_CHECKS)
        hmb_json_str(j, "check_skipped", "100 ms: the run requests no compute of 10 ms or more (--compute-check full "
                                         "runs it)");
    hmb_json_open_arr(j, "check");
    for (int i = 0; i < ctx->run.compute_checks; i++) {
        hmb_json_open_obj(j, NULL);
        hmb_json_int(j, "request_ns", hmb_compute_check_ns[i]);
        write_check_kind(j, "", hmb_compute_check_ns[i], ctx->run.size, ctx->run.threads, time_checks, all, i);
        write_check_kind(j, "work_", hmb_compute_check_ns[i], ctx->run.size, ctx->run.threads, work_checks, all, i);
        write_check_kind(j, "work_on_core_", hmb_compute_check_ns[i], ctx->run.size, ctx->run.threads, work_core_checks,
                         all, i);
        hmb_json_close_obj(j);
    }
    hmb_json_close_arr(j);
    hmb_json_close_obj(j);
}

static void write_header_json(hmb_ctx *ctx, const rank_info *all, const char *library_full)
{
    hmb_json j;
    hmb_output_begin_record(ctx, &j, "run");
    hmb_json_str(&j, "bench", ctx->bench->name);
    hmb_json_str(&j, "hmb_version", HMB_VERSION);
    hmb_json_str(&j, "git_revision", HMB_GIT_REVISION);
    hmb_json_str(&j, "compiler", HMB_COMPILER);
    hmb_json_str(&j, "cflags", HMB_CFLAGS);
    hmb_json_open_arr(&j, "argv");
    for (int i = 0; i < ctx->run.argc; i++)
        hmb_json_str(&j, NULL, ctx->run.argv[i]);
    hmb_json_close_arr(&j);
    hmb_json_str(&j, "tag", getenv("HMB_TAG"));
    hmb_json_str(&j, "start_time", ctx->run.start_time);

    int major = 0, minor = 0;
    char standard[16];
    MPI_Get_version(&major, &minor);
    snprintf(standard, sizeof standard, "%d.%d", major, minor);
    hmb_json_open_obj(&j, "mpi");
    hmb_json_str(&j, "library", ctx->run.mpi_library_line);
    hmb_json_str(&j, "library_full", library_full);
    hmb_json_str(&j, "impl", impl_name(library_full));
    hmb_json_str(&j, "standard", standard);
    hmb_json_close_obj(&j);
    hmb_json_open_obj(&j, "thread_level");
    hmb_json_str(&j, "requested", hmb_thread_level_name(ctx->run.thread_level_requested));
    hmb_json_str(&j, "provided", hmb_thread_level_name(ctx->run.thread_level_provided));
    hmb_json_close_obj(&j);

    hmb_json_int(&j, "ranks", ctx->run.size);
    hmb_json_open_arr(&j, "hosts");
    for (int r = 0; r < ctx->run.size; r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++)
            seen = strcmp(all[q].host, all[r].host) == 0;
        if (!seen)
            hmb_json_str(&j, NULL, all[r].host);
    }
    hmb_json_close_arr(&j);
    write_placement(&j, ctx, all);

    hmb_json_open_obj(&j, "env");
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || !has_env_prefix(*e))
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
        hmb_json_str(&j, name, eq + 1);
    }
    hmb_json_close_obj(&j);

    hmb_json_open_obj(&j, "timer");
    hmb_json_str(&j, "clock", "CLOCK_MONOTONIC");
    hmb_json_num(&j, "resolution_ns", ctx->run.timer_resolution_ns);
    hmb_json_num(&j, "overhead_ns", ctx->run.timer_overhead_ns);
    hmb_json_close_obj(&j);
    hmb_json_open_arr(&j, "clock_offsets_s");
    for (int r = 0; r < ctx->run.size; r++)
        hmb_json_num(&j, NULL, ctx->run.clock_offsets_s[r]);
    hmb_json_close_arr(&j);
    hmb_json_open_arr(&j, "clock_offsets_estimated_s");
    for (int r = 0; r < ctx->run.size; r++)
        hmb_json_num(&j, NULL, ctx->run.clock_offsets_estimated_s[r]);
    hmb_json_close_arr(&j);

    write_calibration(&j, ctx, all);

    hmb_json_open_obj(&j, "noise");
    hmb_json_str(&j, "model", ctx->opt.common.noise);
    hmb_json_str(&j, "thread", hmb_option_text(ctx, "noise-thread"));
    hmb_json_int(&j, "seed", ctx->opt.common.seed);
    hmb_json_close_obj(&j);
    hmb_json_open_obj(&j, "cache");
    hmb_json_str(&j, "mode", ctx->cache.cold ? "cold" : "hot");
    hmb_json_int(&j, "llc_bytes", (long long)ctx->cache.llc_bytes);
    if (ctx->cache.probe_bytes) {
        hmb_json_int(&j, "probe_bytes", (long long)ctx->cache.probe_bytes);
        hmb_json_int(&j, "probe_hot_ns", ctx->cache.probe_hot_ns);
        hmb_json_int(&j, "probe_cold_ns", ctx->cache.probe_cold_ns);
    }
    hmb_json_close_obj(&j);
    hmb_json_str(&j, "data", hmb_option_text(ctx, "data"));
    hmb_json_open_obj(&j, "options");
    for (int i = 0; i < ctx->opt.set.count; i++)
        hmb_json_option_value(&j, &ctx->opt.set.vals[i]);
    hmb_json_close_obj(&j);
    hmb_extras_write(&j, "extra", &ctx->out.header_extra);
    hmb_json_close_obj(&j);
    hmb_output_record(ctx, &j);
    hmb_json_free(&j);
}

void hmb_env_record(hmb_ctx *ctx)
{
    rank_info *mine = calloc(1, sizeof *mine);
    if (!mine)
        abort();
    for (int t = 0; t < ctx->run.threads; t++) {
        mine->iters_per_ns[t] = ctx->run.calib[t].iters_per_ns;
        mine->calib_cpu[t] = ctx->run.calib[t].cpu;
        mine->interrupt_lost_frac[t] = ctx->run.calib[t].interrupt_lost_frac;
        mine->interrupts_per_s[t] = ctx->run.calib[t].interrupts_per_ns * 1e9;
        mine->rate_spread[t] = ctx->run.calib[t].rate_spread;
        mine->verify_error[t] = ctx->run.calib[t].verify_error;
        mine->alone_iters_per_ns[t] = ctx->run.calib[t].alone_iters_per_ns;
        mine->concurrent[t] = ctx->run.calib[t].concurrent;
        mine->calibrations[t] = ctx->run.calibrations[t];
        for (int i = 0; i < HMB_COMPUTE_CHECKS; i++) {
            mine->check_time_ns[t][i] = ctx->run.compute_check_time_ns[t][i];
            mine->check_work_ns[t][i] = ctx->run.compute_check_work_ns[t][i];
            mine->check_work_core_ns[t][i] = ctx->run.compute_check_work_core_ns[t][i];
        }
    }
    rank_info *all = gather_placement(ctx, mine);

    char library_full[MPI_MAX_LIBRARY_VERSION_STRING];
    int lib_len = 0;
    MPI_Get_library_version(library_full, &lib_len);
    size_t first_line = strcspn(library_full, "\n");
    snprintf(ctx->run.mpi_library_line, sizeof ctx->run.mpi_library_line, "%.*s", (int)first_line, library_full);

    if (ctx->run.rank == 0) {
        warn_placement(ctx, all);
        write_header_json(ctx, all, library_full);
    }
    free(mine);
    free(all);
}

int hmb_env_placement_main(hmb_ctx *ctx, int *argc, char ***argv)
{
    hmb_env_probe_cpus(ctx);
    hmb_env_before_init(ctx);
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &ctx->run.thread_level_provided);
    hmb_env_after_init(ctx);
    ctx->run.mpi_initialized = 1;
    MPI_Comm_dup(MPI_COMM_WORLD, &ctx->run.comm);
    MPI_Comm_rank(ctx->run.comm, &ctx->run.rank);
    MPI_Comm_size(ctx->run.comm, &ctx->run.size);
    rank_info *mine = calloc(1, sizeof *mine);
    if (!mine)
        abort();
    layout(ctx);
    rank_info *all = gather_placement(ctx, mine);
    if (ctx->run.rank == 0) {
        warn_placement(ctx, all);
        hmb_json j;
        hmb_json_init(&j);
        hmb_json_open_obj(&j, NULL);
        hmb_json_str(&j, "type", "placement");
        hmb_json_int(&j, "ranks", ctx->run.size);
        write_placement(&j, ctx, all);
        hmb_json_close_obj(&j);
        printf("%s\n", j.data);
        hmb_json_free(&j);
    }
    free(mine);
    free(all);
    MPI_Comm_free(&ctx->run.comm);
    MPI_Finalize();
    return HMB_EXIT_OK;
}
