/* Environment record: compute calibration (before MPI_Init), then the run header — MPI
 * library, thread levels, layout, CPU sets, oversubscription, variables, build, timer,
 * calibration, clock offsets, noise, cache, options (docs/output-schema.md, "run"). */
#define _GNU_SOURCE /* sched_getaffinity, sched_getcpu, CPU_* */
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"
#include "hmb_buildinfo.h"

extern char **environ;

enum { CALIBRATION_TARGET_MS = 40 };

void hmb_env_calibrate(hmb_ctx *ctx)
{
    hmb_timer_measure(&ctx->timer_resolution_ns, &ctx->timer_overhead_ns);
    /* Every thread calibrates itself at once, as the threads will later compute together. */
#pragma omp parallel num_threads(ctx->threads)
    {
        int tid = omp_get_thread_num();
        hmb_compute_calibrate(&ctx->calib[tid], CALIBRATION_TARGET_MS * 1e-3);
    }
    static const int64_t check_ns[3] = {10000, 1000000, 100000000}; /* 10 us, 1 ms, 100 ms */
    for (int i = 0; i < 3; i++) {
        ctx->compute_check_request_ns[i] = check_ns[i];
        ctx->compute_check_measured_ns[i] = hmb_compute_run(&ctx->calib[0], check_ns[i]);
    }
}

/* "0-3,6,8-9" */
static void cpuset_string(const cpu_set_t *set, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int cpu = 0; cpu < CPU_SETSIZE && used + 16 < len; cpu++) {
        if (!CPU_ISSET(cpu, set))
            continue;
        int last = cpu;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
            last++;
        if (last == cpu)
            used += (size_t)snprintf(buf + used, len - used, "%s%d", used ? "," : "", cpu);
        else
            used += (size_t)snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", cpu, last);
        cpu = last;
    }
}

typedef struct {
    char host[MPI_MAX_PROCESSOR_NAME];
    char cpuset[256];
    int thread_cpu[HMB_MAX_THREADS];
    int calib_cpu[HMB_MAX_THREADS];
    double iters_per_ns[HMB_MAX_THREADS];
    double interrupt_lost_frac[HMB_MAX_THREADS], interrupts_per_s[HMB_MAX_THREADS];
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

/* Node layout: ranks per node, CPUs in the union of their masks, oversubscription. */
static void node_layout(hmb_ctx *ctx, const cpu_set_t *mine)
{
    MPI_Comm node;
    int node_ranks = 1;
    MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_ranks);
    cpu_set_t node_set;
    MPI_Allreduce(mine, &node_set, (int)sizeof node_set, MPI_BYTE, MPI_BOR, node);
    MPI_Comm_free(&node);
    int node_cpus = CPU_COUNT(&node_set);
    int oversub = node_ranks * ctx->threads > node_cpus;
    /* The busiest node (most ranks; among equals the fewest CPUs) is the one reported. */
    int busiest_in[2] = {node_ranks, -node_cpus}, busiest[2];
    MPI_Allreduce(busiest_in, busiest, 1, MPI_2INT, MPI_MAXLOC, ctx->comm);
    MPI_Allreduce(&oversub, &ctx->oversubscribed, 1, MPI_INT, MPI_LOR, ctx->comm);
    ctx->ranks_per_node = busiest[0];
    ctx->cpus_available = -busiest[1];
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
    for (int i = 0; i < ctx->argc; i++)
        hmb_json_str(&j, NULL, ctx->argv[i]);
    hmb_json_close_arr(&j);
    hmb_json_str(&j, "tag", getenv("HMB_TAG"));
    hmb_json_str(&j, "start_time", ctx->start_time);

    int major = 0, minor = 0;
    char standard[16];
    MPI_Get_version(&major, &minor);
    snprintf(standard, sizeof standard, "%d.%d", major, minor);
    hmb_json_open_obj(&j, "mpi");
    hmb_json_str(&j, "library", ctx->mpi_library_line);
    hmb_json_str(&j, "library_full", library_full);
    hmb_json_str(&j, "impl", impl_name(library_full));
    hmb_json_str(&j, "standard", standard);
    hmb_json_close_obj(&j);
    hmb_json_open_obj(&j, "thread_level");
    hmb_json_str(&j, "requested", hmb_thread_level_name(ctx->thread_level_requested));
    hmb_json_str(&j, "provided", hmb_thread_level_name(ctx->thread_level_provided));
    hmb_json_close_obj(&j);

    hmb_json_int(&j, "ranks", ctx->size);
    hmb_json_open_arr(&j, "hosts");
    for (int r = 0; r < ctx->size; r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++)
            seen = strcmp(all[q].host, all[r].host) == 0;
        if (!seen)
            hmb_json_str(&j, NULL, all[r].host);
    }
    hmb_json_close_arr(&j);
    hmb_json_int(&j, "ranks_per_node", ctx->ranks_per_node);
    hmb_json_int(&j, "threads", ctx->threads);
    hmb_json_int(&j, "cpus_available", ctx->cpus_available);
    hmb_json_bool(&j, "oversubscribed", ctx->oversubscribed);
    hmb_json_open_arr(&j, "placement");
    for (int r = 0; r < ctx->size; r++) {
        hmb_json_open_obj(&j, NULL);
        hmb_json_int(&j, "rank", r);
        hmb_json_str(&j, "host", all[r].host);
        hmb_json_str(&j, "cpuset", all[r].cpuset);
        hmb_json_open_arr(&j, "thread_cpus");
        for (int t = 0; t < ctx->threads; t++)
            hmb_json_int(&j, NULL, all[r].thread_cpu[t]);
        hmb_json_close_arr(&j);
        hmb_json_close_obj(&j);
    }
    hmb_json_close_arr(&j);

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
    hmb_json_num(&j, "resolution_ns", ctx->timer_resolution_ns);
    hmb_json_num(&j, "overhead_ns", ctx->timer_overhead_ns);
    hmb_json_close_obj(&j);
    hmb_json_open_arr(&j, "clock_offsets_s");
    for (int r = 0; r < ctx->size; r++)
        hmb_json_num(&j, NULL, ctx->clock_offsets_s[r]);
    hmb_json_close_arr(&j);
    hmb_json_open_arr(&j, "clock_offsets_estimated_s");
    for (int r = 0; r < ctx->size; r++)
        hmb_json_num(&j, NULL, ctx->clock_offsets_estimated_s[r]);
    hmb_json_close_arr(&j);

    hmb_json_open_obj(&j, "calibration");
    hmb_json_open_arr(&j, "per_thread");
    for (int r = 0; r < ctx->size; r++) {
        for (int t = 0; t < ctx->threads; t++) {
            hmb_json_open_obj(&j, NULL);
            hmb_json_int(&j, "rank", r);
            hmb_json_int(&j, "thread", t);
            hmb_json_num(&j, "iters_per_ns", all[r].iters_per_ns[t]);
            hmb_json_int(&j, "cpu", all[r].calib_cpu[t]);
            hmb_json_num(&j, "interrupt_lost_frac", all[r].interrupt_lost_frac[t]);
            hmb_json_num(&j, "interrupts_per_s", all[r].interrupts_per_s[t]);
            hmb_json_close_obj(&j);
        }
    }
    hmb_json_close_arr(&j);
    hmb_json_open_arr(&j, "check");
    for (int i = 0; i < 3; i++) {
        hmb_json_open_obj(&j, NULL);
        hmb_json_int(&j, "request_ns", ctx->compute_check_request_ns[i]);
        hmb_json_int(&j, "measured_ns", ctx->compute_check_measured_ns[i]);
        hmb_json_close_obj(&j);
    }
    hmb_json_close_arr(&j);
    hmb_json_close_obj(&j);

    hmb_json_open_obj(&j, "noise");
    hmb_json_str(&j, "model", hmb_opt_str(ctx, "noise"));
    hmb_json_str(&j, "thread", hmb_opt_str(ctx, "noise-thread"));
    hmb_json_int(&j, "seed", hmb_opt_int(ctx, "seed"));
    hmb_json_close_obj(&j);
    hmb_json_open_obj(&j, "cache");
    hmb_json_str(&j, "mode", ctx->cache.cold ? "cold" : "hot");
    hmb_json_int(&j, "llc_bytes", (long long)ctx->cache.llc_bytes);
    hmb_json_close_obj(&j);
    hmb_json_str(&j, "data", hmb_opt_str(ctx, "data"));
    hmb_json_open_obj(&j, "options");
    for (int i = 0; i < ctx->opts.count; i++)
        hmb_json_option_value(&j, &ctx->opts.vals[i]);
    hmb_json_close_obj(&j);
    hmb_extras_write(&j, "extra", &ctx->header_extra);
    hmb_json_close_obj(&j);
    hmb_output_record(ctx, &j);
    hmb_json_free(&j);
}

void hmb_env_record(hmb_ctx *ctx)
{
    rank_info *mine = calloc(1, sizeof *mine);
    rank_info *all = ctx->rank == 0 ? calloc((size_t)ctx->size, sizeof *all) : NULL;
    if (!mine || (ctx->rank == 0 && !all))
        abort();
    int name_len = 0;
    MPI_Get_processor_name(mine->host, &name_len);

    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        CPU_SET(sched_getcpu(), &set);
    cpuset_string(&set, mine->cpuset, sizeof mine->cpuset);
    snprintf(ctx->cpuset, sizeof ctx->cpuset, "%s", mine->cpuset);
#pragma omp parallel num_threads(ctx->threads)
    mine->thread_cpu[omp_get_thread_num()] = sched_getcpu();
    for (int t = 0; t < ctx->threads; t++) {
        mine->iters_per_ns[t] = ctx->calib[t].iters_per_ns;
        mine->calib_cpu[t] = ctx->calib[t].cpu;
        mine->interrupt_lost_frac[t] = ctx->calib[t].interrupt_lost_frac;
        mine->interrupts_per_s[t] = ctx->calib[t].interrupts_per_ns * 1e9;
    }
    MPI_Gather(mine, (int)sizeof *mine, MPI_BYTE, all, (int)sizeof *mine, MPI_BYTE, 0, ctx->comm);
    node_layout(ctx, &set);

    char library_full[MPI_MAX_LIBRARY_VERSION_STRING];
    int lib_len = 0;
    MPI_Get_library_version(library_full, &lib_len);
    size_t first_line = strcspn(library_full, "\n");
    snprintf(ctx->mpi_library_line, sizeof ctx->mpi_library_line, "%.*s", (int)first_line, library_full);

    if (ctx->bench->check)
        ctx->bench->check(ctx);

    if (ctx->rank == 0) {
        if (ctx->oversubscribed)
            fprintf(stderr,
                    "hmb-bench: warning: oversubscribed: %d ranks per node x %d threads > %d CPUs available; "
                    "timings will be distorted\n",
                    ctx->ranks_per_node, ctx->threads, ctx->cpus_available);
        write_header_json(ctx, all, library_full);
    }
    free(mine);
    free(all);
}
