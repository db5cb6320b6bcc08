/* mt — multithreaded communication (SPEC §3.4, seed 003).
 *
 * Ranks split in halves: rank i (sender/origin) pairs with rank i + n/2 (receiver/target).
 * Traffic is organised in "lanes": a lane is one stream of messages (one sender thread's
 * traffic in the talk's terms) with its own communicator/tag. Each lane is driven by one
 * OpenMP thread on each side; which thread drives which lane is what distinguishes the modes:
 *   rate       lane l <-> thread l (funneled: every lane on the master thread)
 *   contention T-1 lanes, sender thread l+1 each, all received by the receiver's thread 0
 *   get        origin thread l issues MPI_Get on lane l's window (funneled: master for all)
 * The message-rate pattern is osu_mbw_mr's: a window of W Isend/Irecv, then a zero-byte ack.
 */
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmb/bench.h"
#include "mt.h"

const char *const mt_test_names[MT_NTESTS + 1] = {"rate", "contention", "get", NULL};
const char *const mt_mode_names[MT_NMODES + 1] = {"shared", "comm", "tag", "stream", "funneled", "everywhere", NULL};
const char *const mt_progress_names[MT_NPROGRESS + 1] = {"none", "thread", NULL};
/* The MPI 4 assertions the tag mode sets on its communicator (and reads back). */
static const char *const mt_tag_info_keys[MT_NINFO] = {"mpi_assert_no_any_tag", "mpi_assert_no_any_source",
                                                       "mpi_assert_allow_overtaking"};


/* --compute: the get test's target computes this long per iteration (rate/contention ignore it). */
static const hmb_default mt_defaults[] = {{"sizes", "8"}, {"compute", "1ms"}, {NULL, NULL}};

static const hmb_metric mt_metrics[] = {
    {.name = "msg_rate", .unit = "msg/s", .higher_is_better = 1, .in_table = 1,
     .description = "messages (get test: completed MPI_Get) per second, all lanes of all pairs"},
    {.name = "per_thread_rate", .unit = "msg/s", .higher_is_better = 1, .in_table = 1,
     .description = "msg_rate per lane (a lane is one thread's traffic; funneled: the master carries all T)"},
    {.name = "bandwidth_MBps", .unit = "MB/s", .higher_is_better = 1, .in_table = 1,
     .description = "payload bytes per second, all lanes of all pairs (1 MB = 1e6 B)"},
    {.name = "op_latency_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "get test: mean time of one MPI_Get + MPI_Win_flush seen by an origin thread"},
    {.name = "target_compute_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
     .description = "get test: time the target spent in its compute kernel (a delay exact in time)"},
    HMB_METRIC_END,
};

enum { M_RATE, M_PER_THREAD, M_BW, M_OP_LAT, M_TARGET_COMPUTE };

/* ------------------------------------------------------------------ option parsing */

static void mt_check(hmb_ctx *ctx)
{
    const mt_opts *o = HMB_OPTS(mt_opts, ctx);
    unsigned long long tests = o->test;
    long long window = o->window, windows = o->windows_per_iter;
    if (window * windows > MT_SEQ_MASK + 1)
        hmb_usage_error(ctx, "--window x --windows-per-iter must be at most %d (sequence numbers carried in each "
                        "message), got %lld", MT_SEQ_MASK + 1, window * windows);
    const size_t *sizes = hmb_common(ctx)->sizes.v;
    const int nsizes = hmb_common(ctx)->sizes.n;
    for (int i = 0; i < nsizes; i++) {
        if ((tests & ~(1u << MT_GET)) && sizes[i] < MT_STAMP_BYTES)
            hmb_usage_error(ctx, "--sizes: %zu B is below %d B: every rate/contention message carries its (thread, "
                            "iteration, sequence) stamp", sizes[i], MT_STAMP_BYTES);
        if (sizes[i] == 0)
            hmb_usage_error(ctx, "--sizes: 0 B gets carry nothing to validate");
        /* Every received message is kept for validation until the iteration ends. */
        double held = (double)sizes[i] * (double)window * (double)windows * hmb_threads(ctx);
        if (held > MT_MAX_HELD_BYTES)
            hmb_usage_error(ctx, "--sizes: %zu B x window %lld x windows-per-iter %lld x %d threads needs more than "
                            "1 GiB of receive buffers; use smaller sizes or windows", sizes[i], window, windows,
                            hmb_threads(ctx));
    }
    /* The MPICH VCI configuration every mode depends on, in the run header. */
    long long vcis, reserve;
    if (hmb_mpit_cvar_int("MPIR_CVAR_CH4_NUM_VCIS", &vcis))
        hmb_header_add_num(ctx, "MPIR_CVAR_CH4_NUM_VCIS", (double)vcis);
    else
        hmb_header_add_str(ctx, "MPIR_CVAR_CH4_NUM_VCIS", "not exposed by this library");
    if (hmb_mpit_cvar_int("MPIR_CVAR_CH4_RESERVE_VCIS", &reserve))
        hmb_header_add_num(ctx, "MPIR_CVAR_CH4_RESERVE_VCIS", (double)reserve);
    else
        hmb_header_add_str(ctx, "MPIR_CVAR_CH4_RESERVE_VCIS", "not exposed by this library");
    /* The one-sided component the rma test measures: `hmb run` excludes Open MPI's UCX one
     * (docs/metrics.md, mt): shown where the user reads the table. */
    const char *osc = getenv("OMPI_MCA_osc");
    if (osc)
        hmb_header_add_str(ctx, "OMPI_MCA_osc", osc);
}

static void mt_points(hmb_ctx *ctx, hmb_point_list *out)
{
    const mt_opts *o = HMB_OPTS(mt_opts, ctx);
    unsigned long long tests = o->test, modes = o->mode, progress = o->target_progress;
    const size_t *sizes = hmb_common(ctx)->sizes.v;
    const int nsizes = hmb_common(ctx)->sizes.n;
    for (int test = 0; test < MT_NTESTS; test++) {
        if (!(tests & (1u << test)))
            continue;
        for (int mode = 0; mode < MT_NMODES; mode++) {
            if (!(modes & (1u << mode)))
                continue;
            for (int prog = 0; prog < MT_NPROGRESS; prog++) {
                if (test != MT_GET && prog > 0)
                    break;
                if (test == MT_GET && !(progress & (1u << prog)))
                    continue;
                for (int i = 0; i < nsizes; i++) {
                    mt_point *p = hmb_points_new(out, sizes[i]);
                    p->test = test;
                    p->mode = mode;
                    /* cores in use: where T threads per rank and everywhere's 2T ranks meet */
                    p->ranks_x_threads = (long long)hmb_size(ctx) * hmb_threads(ctx);
                    if (test == MT_GET)
                        p->target_progress = prog;
                }
            }
        }
    }
}

/* ------------------------------------------------------------------ descriptor */

static void *mt_setup(hmb_ctx *ctx, const hmb_point *pt)
{
    return mt_state_create(ctx, pt, mt_tag_info_keys);
}

static void mt_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    (void)pt;
    mt_state *s = state;
    if (s->test == MT_GET)
        mt_get_prepare(ctx, s, iter);
    else
        mt_rate_prepare(ctx, s, iter);
}

static int mt_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    (void)pt;
    mt_state *s = state;
    double elapsed_s = s->test == MT_GET ? mt_get_iteration(ctx, s, iter) : mt_rate_iteration(ctx, s, iter);

    /* The slowest rank's view of the iteration sets the rate; get latency sums over origins. */
    double vmax[2] = {elapsed_s, s->target_compute_s}, vsum[1] = {s->op_time_sum_s};
    hmb_reduce_max(ctx, vmax, 2);
    hmb_reduce_sum(ctx, vsum, 1);
    if (hmb_rank(ctx) != 0)
        return 0;
    double lanes_total = (double)s->nlanes * (hmb_size(ctx) / 2);
    double msgs = lanes_total * s->windows * s->window;
    out->valid = vmax[0] > 0;
    out->value[M_RATE] = msgs / vmax[0];
    out->value[M_PER_THREAD] = out->value[M_RATE] / lanes_total;
    out->value[M_BW] = out->value[M_RATE] * (double)s->size / 1e6;
    if (s->test == MT_GET) {
        out->value[M_OP_LAT] = vsum[0] / msgs * 1e6;
        out->value[M_TARGET_COMPUTE] = vmax[1] * 1e6;
    }
    return 0;
}

static void mt_verify(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    mt_state *s = state;
    if (s->test == MT_GET)
        mt_get_verify(ctx, s, pt, iter);
    else
        mt_rate_verify(ctx, s, pt, iter);
}

static void mt_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    (void)ctx, (void)pt;
    mt_state_free(state);
}

static void mt_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    (void)pt;
    mt_state *s = state;
    hmb_result_add_str(ctx, "mode", mt_mode_names[s->mode]);
    hmb_result_add_num(ctx, "threads", s->threads);
    hmb_result_add_num(ctx, "lanes", s->nlanes);
    hmb_result_add_num(ctx, "pairs", hmb_size(ctx) / 2);
    hmb_result_add_num(ctx, "window", s->window);
    hmb_result_add_num(ctx, "windows_per_iter", s->windows);
    hmb_result_add_str(ctx, "thread_level_provided", hmb_thread_level_name(hmb_thread_level_provided(ctx)));
    if (s->mode == MT_EVERYWHERE)
        hmb_result_add_num(ctx, "everywhere_processes", hmb_size(ctx) / 2);
    /* Resources (rank 0's view): the performance/resource trade-off of the talk. */
    hmb_result_add_num(ctx, "vcis", s->num_vcis >= 0 ? (double)s->num_vcis : NAN);
    hmb_result_add_num(ctx, "reserve_vcis", s->reserve_vcis >= 0 ? (double)s->reserve_vcis : NAN);
    hmb_result_add_num(ctx, "streams", s->nstreams);
    hmb_result_add_num(ctx, "communicators", s->ncomms);
    hmb_result_add_num(ctx, "rma_windows", s->nwins);
    hmb_result_add_num(ctx, "vmrss_kib", s->vmrss_kib >= 0 ? (double)s->vmrss_kib : NAN);
    hmb_result_add_num(ctx, "vmhwm_kib", s->vmhwm_kib >= 0 ? (double)s->vmhwm_kib : NAN);
    if (s->mode == MT_TAG && s->test != MT_GET)
        for (int k = 0; k < MT_NINFO; k++)
            hmb_result_add_str(ctx, mt_tag_info_keys[k], s->tag_info[k]);
    if (s->test == MT_GET) {
        hmb_result_add_str(ctx, "get_window",
                           HMB_OPTS(mt_opts, ctx)->get_window == MT_WINDOW_ALLOCATE ? "allocate" : "create");
        hmb_result_add_num(ctx, "target_compute_request_us", (double)s->compute_ns / 1e3);
    }
    if (s->shuffle_delay_ns > 0)
        hmb_result_add_num(ctx, "shuffle_delay_us", (double)s->shuffle_delay_ns / 1e3);
    if (s->test == MT_CONTENTION)
        hmb_result_add_str(ctx, "layout", "T-1 sending threads on the sender rank, 1 receiving thread on the receiver");
}

static const hmb_bench mt_bench = {
    .name = "mt",
    .group = "threads",
    .summary = "multithreaded message rate (shared/comm/tag/stream/funneled/everywhere), contention, shared-progress get",
    HMB_BENCH_PARAMS(mt_point),
    HMB_BENCH_OPTIONS(mt_opts),
    .no_mock = "a lane's sender and receiver are threads of two ranks (rank i and i + n/2): a rank alone has no "
               "receiver to loop its window back to",
    .rules = (const hmb_option_rule[]){HMB_VCI_RULES("mode", "shared,comm,tag"),
                                       {.option = "mode", .values = "everywhere", .layout = "everywhere",
                                        .why = "T single-threaded processes per side: the MPI-everywhere baseline"},
                                       {.option = NULL}},
    .defaults = mt_defaults,
    .metrics = mt_metrics,
    .thread_level = MPI_THREAD_MULTIPLE,
    .min_ranks = 2,
    .rank_multiple = 2,
    .check = mt_check,
    .points = mt_points,
    .setup = mt_setup,
    .prepare = mt_prepare,
    .iterate = mt_iterate,
    .verify = mt_verify,
    .teardown = mt_teardown,
    .annotate = mt_annotate,
    .pivot_metrics = NULL,
};
HMB_REGISTER(mt_bench);
