/* hmb-bench: the one executable. The life of a run is described in include/hmb/bench.h. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"
#include "env.h"
#include "output.h"
#include "pivot.h"
#include "registry.h"
#include "validate.h"
#include "watchdog.h"
#include "hmb_buildinfo.h"

/* Before MPI_Init the rank is only known from the launcher's environment: print errors once. */
static int launcher_rank(void)
{
    static const char *vars[] = {"PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v);
    }
    return 0;
}

/* Exit status 2 before MPI_Init. Ranks other than 0 linger a moment: Open MPI's launcher kills
 * the job when the first process exits nonzero, which could swallow rank 0's message. */
static int usage_exit(int print_rank)
{
    if (print_rank != 0)
        usleep(500 * 1000);
    return HMB_EXIT_USAGE;
}

static void print_list(void)
{
    const hmb_bench **list = NULL;
    int n = hmb_registry_list(&list);
    int name_w = 4, group_w = 5;
    for (int i = 0; i < n; i++) {
        if ((int)strlen(list[i]->name) > name_w)
            name_w = (int)strlen(list[i]->name);
        if ((int)strlen(list[i]->group) > group_w)
            group_w = (int)strlen(list[i]->group);
    }
    printf("%-*s  %-*s  %s\n", name_w, "name", group_w, "group", "summary");
    for (int i = 0; i < n; i++)
        printf("%-*s  %-*s  %s\n", name_w, list[i]->name, group_w, list[i]->group, list[i]->summary);
    free(list);
}

static void print_usage(FILE *out)
{
    fprintf(out, "usage: mpiexec -n N hmb-bench BENCH [options]\n"
                 "       hmb-bench --list [--json] | --version | BENCH --help[-all] | BENCH --describe --json\n"
                 "       hmb-bench BENCH [options] --launch-needs   (no MPI: spare cores, memory per rank)\n"
                 "       mpiexec -n N hmb-bench --placement          (where ranks and threads run, one JSON line)\n"
                 "       hmb-bench --list-pvars                      (the MPI library's MPI_T performance variables)\n");
}

static void print_bench_help(const hmb_bench *b, int all)
{
    hmb_metric_list metrics;
    hmb_metric_list_build(&metrics, b);
    printf("hmb-bench %s — %s (group: %s)\n\n", b->name, b->summary, b->group);
    printf("usage: mpiexec -n N hmb-bench %s [options]   (needs at least %d ranks", b->name, b->min_ranks);
    if (b->rank_multiple > 1)
        printf(", a multiple of %d", b->rank_multiple);
    printf("; thread level %s)\n\n", hmb_thread_level_name(b->thread_level));
    hmb_options_help_bench(stdout, b, all);
    printf("\nmetrics:\n");
    for (int i = 0; i < metrics.count; i++)
        printf("  %-22s %-8s %s\n", metrics.items[i].name, metrics.items[i].unit, metrics.items[i].description);
    hmb_metric_list_free(&metrics);
}

/* --metric: every name one of the benchmark's metrics, none twice. */
static void check_metric_names(hmb_ctx *ctx)
{
    const char *metric = ctx->opt.common.metric;
    if (!metric)
        return;
    const hmb_metric_list *ms = &ctx->metrics;
    for (const char *p = metric;;) {
        size_t len = strcspn(p, ",");
        if (hmb_metric_list_find(ms, p, len) < 0) {
            char known[2048];
            size_t used = 0;
            known[0] = '\0';
            for (int k = 0; k < ms->count && used < sizeof known; k++)
                used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", k ? "," : "", ms->items[k].name);
            hmb_usage_error(ctx, "--metric: \"%.*s\" is not a metric of %s (it has: %s)", (int)len, p,
                            ctx->bench->name, known);
        }
        for (const char *q = metric; q < p; q += strcspn(q, ",") + 1)
            if (strcspn(q, ",") == len && !strncmp(q, p, len))
                hmb_usage_error(ctx, "--metric: \"%.*s\" is listed twice", (int)len, p);
        if (!p[len])
            return;
        p += len + 1;
    }
}

/* Parse and check everything that needs no MPI. Exits 0 (help) or 2 (bad input). */
static void parse_before_init(hmb_ctx *ctx, int argc, char **argv)
{
    char err[512] = "";
    int rc = hmb_options_parse_bench(&ctx->opt.set, ctx->bench, argc - 2, argv + 2, err, sizeof err);
    if (rc == 1 || rc == 2) {
        if (ctx->run.rank == 0)
            print_bench_help(ctx->bench, rc == 2);
        exit(HMB_EXIT_OK);
    }
    if (rc != 0)
        hmb_usage_error(ctx, "%s", err[0] ? err : "invalid command line");
    if (!(ctx->opt.bench = calloc(1, ctx->bench->options_size ? ctx->bench->options_size : 1)))
        abort();
    hmb_options_store(&ctx->opt.set, &ctx->opt.common, ctx->opt.bench);
    const hmb_common_opts *o = &ctx->opt.common;
    ctx->run.threads = (int)o->threads;
    if (ctx->run.threads < 1 || ctx->run.threads > HMB_MAX_THREADS)
        hmb_usage_error(ctx, "--threads: %d is outside 1..%d", ctx->run.threads, HMB_MAX_THREADS);
    if (hmb_noise_parse(o->noise, &ctx->run.noise, err, sizeof err) != 0)
        hmb_usage_error(ctx, "--noise: %s", err);
    ctx->run.noise.thread_random = o->noise_thread == HMB_NOISE_THREAD_RAND;
    ctx->run.noise.seed = (uint64_t)o->seed;
    if (o->timeout <= 0)
        hmb_usage_error(ctx, "--timeout: must be positive");
    if (o->wait_bound <= 0)
        hmb_usage_error(ctx, "--wait-bound: must be positive");
    if (o->max_iters < o->iters)
        hmb_usage_error(ctx, "--max-iters %lld is below --iters %lld (the minimum number of iterations)",
                        o->max_iters, o->iters);
    if (!ctx->bench->data_reuse && o->data == HMB_DATA_REUSE)
        hmb_usage_error(ctx, "--data reuse: %s writes its send data before every send (--data fresh); "
                             "reusing send data is not implemented for it",
                        ctx->bench->name);
    check_metric_names(ctx);
    ctx->val.validate = !o->no_validate;
    hmb_inject_setup(ctx);
    ctx->val.wait_bound_s = (double)o->wait_bound * 1e-9;
    ctx->out.json_path = o->json;
    omp_set_num_threads(ctx->run.threads);
}

static void init_mpi(hmb_ctx *ctx, int *argc, char ***argv)
{
    /* --thread-level overrides the benchmark's request (e.g. mt's thread-safety cost: the same
     * one-thread test at SINGLE and at MULTIPLE); the benchmark checks what was provided. */
    ctx->run.thread_level_requested = ctx->bench->thread_level;
    if (ctx->opt.common.thread_level >= 0)
        ctx->run.thread_level_requested = hmb_thread_level_at(ctx->opt.common.thread_level);
    hmb_env_before_init(ctx);
    MPI_Init_thread(argc, argv, ctx->run.thread_level_requested, &ctx->run.thread_level_provided);
    hmb_env_after_init(ctx);
    ctx->run.mpi_initialized = 1;
    MPI_Comm_dup(MPI_COMM_WORLD, &ctx->run.comm);
    MPI_Comm_rank(ctx->run.comm, &ctx->run.rank);
    MPI_Comm_size(ctx->run.comm, &ctx->run.size);
    const hmb_bench *b = ctx->bench;
    if (ctx->run.thread_level_provided < ctx->run.thread_level_requested)
        hmb_usage_error(ctx, "the MPI library provides MPI_THREAD_%s, but %s needs MPI_THREAD_%s",
                        hmb_thread_level_name(ctx->run.thread_level_provided), b->name,
                        hmb_thread_level_name(ctx->run.thread_level_requested));
    if (ctx->run.size < b->min_ranks)
        hmb_usage_error(ctx, "%s needs at least %d ranks (got %d)", b->name, b->min_ranks, ctx->run.size);
    if (b->rank_multiple > 1 && ctx->run.size % b->rank_multiple != 0)
        hmb_usage_error(ctx, "%s needs a multiple of %d ranks (got %d)", b->name, b->rank_multiple, ctx->run.size);
}

/* {"spare_cores_per_rank": N, "rank_bytes": {"SIZE": BYTES, ...}}: one JSON line. */
static void print_launch_needs(hmb_ctx *ctx)
{
    hmb_json j;
    hmb_json_init(&j);
    hmb_json_open_obj(&j, NULL);
    hmb_json_int(&j, "spare_cores_per_rank", hmb_env_spare_cores_needed(ctx));
    hmb_json_open_obj(&j, "rank_bytes");
    for (int i = 0; i < ctx->opt.common.sizes.n; i++) {
        char key[32];
        size_t size = ctx->opt.common.sizes.v[i];
        snprintf(key, sizeof key, "%zu", size);
        hmb_json_num(&j, key, ctx->bench->rank_bytes ? ctx->bench->rank_bytes(ctx, size)
                                                     : (double)HMB_RANK_BUFFERS * (double)size);
    }
    hmb_json_close_obj(&j);
    hmb_json_close_obj(&j);
    printf("%.*s\n", (int)j.len, j.data);
    hmb_json_free(&j);
}

/* run_id and start time from rank 0, shared so any rank can write a failure record. */
static void identify_run(hmb_ctx *ctx)
{
    if (ctx->run.rank == 0) {
        char host[64] = "host";
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = '\0';
        time_t now = time(NULL);
        struct tm utc;
        gmtime_r(&now, &utc);
        strftime(ctx->run.start_time, sizeof ctx->run.start_time, "%Y-%m-%dT%H:%M:%SZ", &utc);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(ctx->run.run_id, sizeof ctx->run.run_id, "%s-%ld-%lld.%06ld", host, (long)getpid(), (long long)ts.tv_sec,
                 ts.tv_nsec / 1000);
    }
    MPI_Bcast(ctx->run.run_id, (int)sizeof ctx->run.run_id, MPI_CHAR, 0, ctx->run.comm);
    MPI_Bcast(ctx->run.start_time, (int)sizeof ctx->run.start_time, MPI_CHAR, 0, ctx->run.comm);
}

int main(int argc, char **argv)
{
    const int print_rank = launcher_rank();
    if (argc < 2) {
        if (print_rank == 0) {
            fprintf(stderr, "hmb-bench: no benchmark given (usage: hmb-bench BENCH [options]; see hmb-bench --list)\n");
        }
        return usage_exit(print_rank);
    }
    if (strcmp(argv[1], "--list") == 0) {
        int json = argc > 2 && strcmp(argv[2], "--json") == 0;
        if (argc > 2 + json) {
            if (print_rank == 0)
                fprintf(stderr, "hmb-bench: --list takes only --json (got '%s')\n", argv[2 + json]);
            return usage_exit(print_rank);
        }
        if (print_rank == 0 && json)
            hmb_registry_describe_json(stdout, NULL);
        else if (print_rank == 0)
            print_list();
        return HMB_EXIT_OK;
    }
    if (strcmp(argv[1], "--init-check") == 0) {
        /* For the hmb driver: does this library start with the settings in the environment
         * (e.g. a VCI count it was not built for aborts inside MPI_Init)? */
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        char version[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(version, &len);
        if (print_rank == 0)
            printf("init ok: %.*s\n", (int)strcspn(version, "\n"), version);
        MPI_Finalize();
        return HMB_EXIT_OK;
    }
    if (strcmp(argv[1], "--list-pvars") == 0) {
        if (argc > 2) {
            if (print_rank == 0)
                fprintf(stderr, "hmb-bench: --list-pvars takes no arguments (got '%s')\n", argv[2]);
            return usage_exit(print_rank);
        }
        /* After MPI_Init: Open MPI registers its components' variables only then. */
        int provided, rank;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 0)
            hmb_pvars_list(stdout);
        MPI_Finalize();
        return HMB_EXIT_OK;
    }
    if (strcmp(argv[1], "--placement") == 0) {
        hmb_ctx *ctx = calloc(1, sizeof *ctx);
        if (!ctx)
            return 1;
        ctx->run.rank = print_rank;
        ctx->run.threads = omp_get_max_threads() < HMB_MAX_THREADS ? omp_get_max_threads() : HMB_MAX_THREADS;
        int rc = hmb_env_placement_main(ctx, &argc, &argv);
        free(ctx);
        return rc;
    }
    if (strcmp(argv[1], "--version") == 0) {
        if (print_rank == 0)
            printf("hmb-bench %s (git %s, %s)\n", HMB_VERSION, HMB_GIT_REVISION, HMB_COMPILER);
        return HMB_EXIT_OK;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        if (print_rank == 0) {
            print_usage(stdout);
            printf("\nbenchmarks:\n");
            print_list();
        }
        return HMB_EXIT_OK;
    }
    const hmb_bench *bench = hmb_registry_find(argv[1]);
    if (!bench) {
        char name[256];
        hmb_escape_controls(argv[1], name, sizeof name);
        if (print_rank == 0)
            fprintf(stderr, "hmb-bench: unknown benchmark '%s' (see hmb-bench --list)\n", name);
        return usage_exit(print_rank);
    }
    if (argc > 2 && strcmp(argv[2], "--describe") == 0) {
        /* The descriptor for the toolkit: JSON is the only form (--json is accepted for symmetry). */
        if (argc > 4 || (argc == 4 && strcmp(argv[3], "--json") != 0)) {
            char got[256];
            hmb_escape_controls(argv[argc - 1], got, sizeof got);
            if (print_rank == 0)
                fprintf(stderr, "hmb-bench: --describe takes only --json (got '%s')\n", got);
            return usage_exit(print_rank);
        }
        if (print_rank == 0)
            hmb_registry_describe_json(stdout, bench);
        return HMB_EXIT_OK;
    }

    hmb_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return 1;
    ctx->bench = bench;
    hmb_metric_list_build(&ctx->metrics, bench);
    ctx->run.rank = print_rank;
    ctx->run.size = 1;
    ctx->hooks.corrupt_rank = -1;
    for (int f = 0; f < HMB_INJECT_COUNT; f++)
        ctx->hooks.inject[f] = -1;
    /* --launch-needs: for the toolkit, what this invocation needs from the launcher (a spare
     * core per rank for a progress thread) and the machine (memory per rank for each --sizes
     * value: bench->rank_bytes), answered without MPI. */
    int launch_needs = 0;
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--launch-needs") == 0) {
            launch_needs = 1;
            memmove(&argv[i], &argv[i + 1], (size_t)(argc - i) * sizeof *argv); /* keeps argv[argc] = NULL */
            argc--;
            break;
        }
    ctx->run.argc = argc;
    ctx->run.argv = argv;
    parse_before_init(ctx, argc, argv);
    if (launch_needs) {
        if (print_rank == 0)
            print_launch_needs(ctx);
        hmb_options_free(&ctx->opt.set);
        free(ctx->opt.bench);
        hmb_metric_list_free(&ctx->metrics);
        free(ctx);
        return HMB_EXIT_OK;
    }
    hmb_env_calibrate(ctx); /* before MPI_Init: no library thread can disturb it */
    hmb_env_probe_cpus(ctx);

    init_mpi(ctx, &argc, &argv);
    hmb_inject_check_ranks(ctx);
    identify_run(ctx);
    hmb_env_check_options(ctx); /* bad input ends here, before the clock sync and the compute check */
    if (!hmb_all_agree(ctx, hmb_cache_init(ctx)))
        hmb_usage_error(ctx, "--cache cold: cannot allocate the eviction buffer (%zu bytes)", ctx->cache.flush_bytes);
    hmb_output_open(ctx);
    if (!hmb_all_agree(ctx, ctx->run.rank != 0 || !ctx->out.json_path || ctx->out.json))
        hmb_usage_error(ctx, "--json: cannot open '%s' for appending", ctx->out.json_path);
    hmb_clocks_sync(ctx);
    hmb_env_check_compute(ctx); /* every thread of every rank at once */
    ctx->watchdog = hmb_watchdog_start(ctx);
    hmb_env_record(ctx); /* the run header */
    hmb_table_header(ctx);

    hmb_point_list points = {0};
    /* points() may measure (async calibrates its compute per operation and size): guarded too. */
    hmb_watchdog_arm(ctx->watchdog, ctx->opt.common.timeout);
    hmb_phase(ctx, "points (enumeration and calibration)");
    points.params = bench->params;
    bench->points(ctx, &points);
    hmb_watchdog_disarm(ctx->watchdog);
    hmb_output_plan(ctx, points.count);
    for (int i = 0; i < points.count; i++)
        hmb_measure_point(ctx, &points.items[i]);
    hmb_watchdog_arm(ctx->watchdog, ctx->opt.common.timeout);
    hmb_phase(ctx, "clock re-check (end of run)");
    hmb_clocks_recheck(ctx);
    hmb_watchdog_disarm(ctx->watchdog);

    hmb_pivot_print(ctx);
    hmb_pivot_free(ctx);
    const int rc = hmb_inject_verdict(ctx); /* after every result is written: a fault that never fired */
    hmb_set_run_data(ctx, NULL);
    hmb_watchdog_stop(ctx->watchdog);
    ctx->watchdog = NULL;
    hmb_output_close(ctx);
    hmb_point_list_free(&points);
    hmb_cache_free(ctx);
    MPI_Comm_free(&ctx->run.comm);
    MPI_Finalize();
    hmb_options_free(&ctx->opt.set);
    free(ctx->opt.bench);
    hmb_clocks_free(ctx);
    hmb_extras_clear(&ctx->out.header_extra);
    hmb_extras_clear(&ctx->out.result_extra);
    free(ctx->out.header_extra.items);
    free(ctx->out.result_extra.items);
    free(ctx->out.table_metrics);
    hmb_metric_list_free(&ctx->metrics);
    free(ctx);
    return rc;
}
