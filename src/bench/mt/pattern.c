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
 * Each test and each mode is a row of a table below with its functions and what it needs; a
 * point's state holds its rows (setup.c), so no code asks which test or mode it runs.
 */
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mt.h"

/* --compute: the get test's target computes this long per iteration (rate/contention ignore it). */
static const hmb_default mt_defaults[] = {{"sizes", "8"}, {"compute", "1ms"}, {NULL, NULL}};

/* ------------------------------------------------------------------ test only: pauses before posts */

/* --shuffle-delay (test only): a thread's random pauses before its posts, so that on few cores
 * cross-thread matching orders still vary. A pure function of (rank, thread, iteration): the
 * thread's own state, nothing shared. */
typedef struct {
    uint64_t state;
    int64_t max_ns; /* 0: off */
} mt_shuffle;

/* splitmix64 over a state that is the thread's own (no shared state). */
static uint64_t mt_shuffle_next(mt_shuffle *sh)
{
    return hmb_mix64(sh->state++);
}

static void mt_shuffle_init(mt_shuffle *sh, const mt_state *s, int rank, int tid, long iter)
{
    sh->max_ns = s->shuffle_delay_ns;
    sh->state = (uint64_t)rank << 48 ^ (uint64_t)tid << 32 ^ (uint64_t)iter;
}

/* A quarter of the posts yield the core, a quarter sleep up to max_ns, the rest go on. */
static void mt_shuffle_pause(mt_shuffle *sh)
{
    if (sh->max_ns <= 0)
        return;
    uint64_t r = mt_shuffle_next(sh);
    if ((r & 3) == 0) {
        sched_yield();
    } else if ((r & 3) == 1) {
        int64_t ns = (int64_t)((r >> 2) % (uint64_t)sh->max_ns);
        struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
        nanosleep(&ts, NULL);
    }
}

/* ------------------------------------------------------------------ rate and contention */

/* One thread's share of an iteration: for each window, W messages on each of its lanes,
 * completed together, then the zero-byte ack (the sender may not run ahead of the
 * receiver's posted receives — osu_mbw_mr's pattern).
 *
 * Why this makes progress under ANY cross-thread matching order (in `shared` a data message
 * may match any receiving thread's receive): ack w of lane l goes only from the thread that
 * receives lane l to the thread that sends it (a tag of the lane's own in every mode), and
 * is sent after that receiver posted and completed its window w of lane l. Invariant: on
 * every lane, receives posted >= sends posted. Suppose every unfinished thread were stuck.
 * A stuck receiver holds an unmatched receive, which any unmatched message of its (comm,
 * tag) would match, so every posted send is matched and no sender is stuck in its data
 * Waitall. A sender stuck on ack w has sent w+1 windows of lane l and got ack w-1, so its
 * receiver is inside window w of lane l with exactly w+1 windows posted; a finished sender
 * means a finished receiver. Hence receives posted == sends posted on every lane, all sends
 * are matched, so all receives are: no receiver is stuck, a contradiction. (With one ack tag
 * shared by all lanes, both acks of a window could reach one sender, whose next window the
 * receivers then split between them, while the other sender waited for an ack that never
 * came: a hang, which --shuffle-delay provokes on few cores.) The contention and
 * funneled layouts, where one thread drives several lanes, obey the same per-lane argument. */
static void rate_thread(hmb_ctx *ctx, mt_state *s, int tid, long iter)
{
    MPI_Request *reqs = s->reqs + (size_t)tid * s->reqs_per_thread;
    mt_shuffle shuffle;
    mt_shuffle_init(&shuffle, s, hmb_rank(ctx), tid, iter);
    long slot0_iter = iter == s->stale_at ? iter - 1 : iter; /* --inject stale: lane 0, slot 0 */
    for (int w = 0; w < s->windows; w++) {
        int n = 0;
        for (int l = 0; l < s->nlanes; l++) {
            const mt_lane *lane = &s->lanes[l];
            if (lane->thread != tid)
                continue;
            for (int i = 0; i < s->window; i++) {
                int seq = w * s->window + i;
                mt_shuffle_pause(&shuffle);
                if (s->sending) {
                    unsigned char *msg = mt_send_slot(s, l, i);
                    uint64_t stamp = mt_stamp(l == 0 && i == 0 ? slot0_iter : iter, l, seq);
                    memcpy(msg, &stamp, sizeof stamp);
                    MPI_Isend(msg, (int)s->size, MPI_BYTE, s->peer, lane->data_tag, lane->comm, &reqs[n++]);
                } else {
                    MPI_Irecv(mt_recv_slot(s, l, seq), (int)s->size, MPI_BYTE, s->peer, lane->data_tag, lane->comm,
                              &reqs[n++]);
                }
            }
        }
        MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
        n = 0;
        for (int l = 0; l < s->nlanes; l++) {
            const mt_lane *lane = &s->lanes[l];
            if (lane->thread != tid)
                continue;
            mt_shuffle_pause(&shuffle);
            if (s->sending)
                MPI_Irecv(NULL, 0, MPI_BYTE, s->peer, lane->ack_tag, lane->comm, &reqs[n++]);
            else
                MPI_Isend(NULL, 0, MPI_BYTE, s->peer, lane->ack_tag, lane->comm, &reqs[n++]);
        }
        MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    }
}

static double rate_iteration(hmb_ctx *ctx, mt_state *s, long iter)
{
    hmb_phase(ctx, "barrier before the windows");
    MPI_Barrier(s->base);
    hmb_phase(ctx, s->sending ? "Isend windows / ack" : "Irecv windows / ack");
    double t_start_s = hmb_now();
    if (s->threads == 1) {
        rate_thread(ctx, s, 0, iter); /* no OpenMP region: valid at MPI_THREAD_SINGLE */
    } else {
#pragma omp parallel num_threads(s->threads)
        rate_thread(ctx, s, omp_get_thread_num(), iter);
    }
    return hmb_now() - t_start_s;
}

/* ------------------------------------------------------------------ get */

/* One origin thread's gets; returns the summed Get+flush time. */
static double get_thread(hmb_ctx *ctx, mt_state *s, int tid, long iter)
{
    double op_time_s = 0;
    mt_shuffle shuffle;
    mt_shuffle_init(&shuffle, s, hmb_rank(ctx), tid, iter);
    for (int op = 0; op < s->window; op++) {
        for (int l = 0; l < s->nlanes; l++) {
            const mt_lane *lane = &s->lanes[l];
            if (lane->thread != tid)
                continue;
            mt_shuffle_pause(&shuffle);
            double t_issue_s = hmb_now();
            MPI_Get(mt_get_slot(s, l, op), (int)s->size, MPI_BYTE, s->peer, lane->disp, (int)s->size, MPI_BYTE,
                    lane->win);
            MPI_Win_flush(s->peer, lane->win);
            op_time_s += hmb_now() - t_issue_s;
        }
    }
    return op_time_s;
}

/* The target's helper (hmb_progress): one MPI_Iprobe, so the library can progress the gets. */
static int iprobe_poke(void *arg)
{
    int flag;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, ((mt_state *)arg)->base, &flag, MPI_STATUS_IGNORE);
    return 0;
}

static double get_iteration(hmb_ctx *ctx, mt_state *s, long iter)
{
    s->op_time_sum_s = 0;
    s->target_compute_s = 0;
    hmb_phase(ctx, "barrier: target window filled");
    MPI_Barrier(s->base);
    double elapsed_s = 0;
    if (s->sending) {
        hmb_phase(ctx, "MPI_Get + MPI_Win_flush");
        double t_start_s = hmb_now(), op_time_s = 0;
        if (s->threads == 1) {
            op_time_s = get_thread(ctx, s, 0, iter);
        } else {
#pragma omp parallel num_threads(s->threads) reduction(+ : op_time_s)
            op_time_s += get_thread(ctx, s, omp_get_thread_num(), iter);
        }
        elapsed_s = hmb_now() - t_start_s;
        s->op_time_sum_s = op_time_s;
    } else if (!s->progress_def->helper) {
        hmb_phase(ctx, "target compute (no MPI calls)");
        s->target_compute_s = (double)hmb_compute_ns(ctx, s->compute_ns) / 1e9;
    } else {
        hmb_phase(ctx, "target compute + MPI_Iprobe helper thread");
        hmb_progress_publish(s->helper, iprobe_poke, s);
        s->target_compute_s = (double)hmb_compute_ns(ctx, s->compute_ns) / 1e9;
        hmb_progress_withdraw(s->helper);
    }
    /* The target rewrites its window only after every get of this iteration completed. */
    hmb_phase(ctx, "barrier: gets done");
    MPI_Barrier(s->base);
    return elapsed_s;
}

/* ------------------------------------------------------------------ the tests' metrics and record */

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

/* get: the mean Get+flush time over every get of every origin, and the target's compute. */
static void record_gets(hmb_ctx *ctx, hmb_sample *out, double op_time_sum_s, double messages,
                        double target_compute_s)
{
    (void)ctx;
    out->value[M_OP_LAT] = op_time_sum_s / messages * 1e6;
    out->value[M_TARGET_COMPUTE] = target_compute_s * 1e6;
}

static void annotate_gets(hmb_ctx *ctx, const mt_state *s)
{
    hmb_result_add_str(ctx, "get_window", mt_window_names[HMB_OPTS(mt_opts, ctx)->get_window]);
    hmb_result_add_num(ctx, "target_compute_request_us", (double)s->compute_ns / 1e3);
}

/* ------------------------------------------------------------------ the tables */

/* The tests, in MT_* order (mt_test_names). */
static const mt_test_def mt_tests[MT_NTESTS] = {
    [MT_RATE] = {.iteration = rate_iteration, .setup = mt_rate_buffers, .lane_thread = mt_thread_per_lane,
                 .prepare = mt_rate_prepare, .verify = mt_rate_verify, .stamped = 1, .level = MPI_THREAD_SINGLE},
    [MT_CONTENTION] = {.iteration = rate_iteration, .setup = mt_rate_buffers,
                       .lane_thread = mt_thread_contended, .prepare = mt_rate_prepare, .verify = mt_rate_verify,
                       .spare_threads = 1, .stamped = 1, .level = MPI_THREAD_MULTIPLE, .min_threads = 2,
                       .layout = "T-1 sending threads on the sender rank, 1 receiving thread on the receiver",
                       .few_threads = "contention needs --threads >= 2 (one receiving thread, at least one "
                                      "sending thread)",
                       .refuses = {[MT_FUNNELED] = "contention: funneled has one communicating thread, so no "
                                                   "sender/receiver thread contention",
                                   [MT_EVERYWHERE] = "contention is a within-process effect; the process baseline "
                                                     "is the rate test's everywhere mode"}},
    [MT_GET] = {.iteration = get_iteration, .record = record_gets, .annotate = annotate_gets,
                .setup = mt_get_windows, .release = mt_get_release, .lane_thread = mt_thread_per_lane,
                .prepare = mt_get_prepare, .verify = mt_get_verify, .one_window = 1, .target_progress = 1,
                .level = MPI_THREAD_SINGLE,
                .refuses = {[MT_TAG] = "get: the tag mode is about message matching; MPI_Get has no tags",
                            [MT_STREAM] = "get: HMB does not create RMA windows on MPIX stream communicators"}},
};

/* The modes, in MT_* order (mt_mode_names). */
static const mt_mode_def mt_modes[MT_NMODES] = {
    [MT_SHARED] = {.lane_comms = mt_comms_shared, .level = MPI_THREAD_MULTIPLE, .any_lane = 1},
    [MT_COMM] = {.lane_comms = mt_comms_own, .level = MPI_THREAD_MULTIPLE, .window_per_lane = 1},
    [MT_TAG] = {.lane_comms = mt_comms_asserted, .level = MPI_THREAD_MULTIPLE, .tag_per_lane = 1, .asserts = 1},
    [MT_STREAM] = {.lane_comms = mt_comms_streams, .level = MPI_THREAD_MULTIPLE, .streams = 1},
    [MT_FUNNELED] = {.lane_comms = mt_comms_shared, .level = MPI_THREAD_FUNNELED, .one_thread = 1,
                     .tag_per_lane = 1},
    [MT_EVERYWHERE] = {.lane_comms = mt_comms_own, .level = MPI_THREAD_MULTIPLE, .window_per_lane = 1,
                       .processes = 1, .max_threads = 1,
                       .many_threads = "everywhere is the process baseline: launch it with --threads 1 on 2T ranks"},
};

/* The get test's target progress, in MT_PROGRESS_* order (mt_progress_names). */
static const mt_progress_def mt_progress[MT_NPROGRESS] = {
    [MT_PROGRESS_NONE] = {.level = MPI_THREAD_SINGLE},
    [MT_PROGRESS_THREAD] = {.helper = 1, .level = MPI_THREAD_MULTIPLE, .who = "a target progress thread"},
};

/* ------------------------------------------------------------------ descriptor */

static void mt_check_cb(hmb_ctx *ctx) { mt_check(ctx, mt_tests); }
static void mt_points_cb(hmb_ctx *ctx, hmb_point_list *out) { mt_points(ctx, out, mt_tests); }
static void *mt_setup(hmb_ctx *ctx, const hmb_point *pt)
{
    return mt_state_create(ctx, pt, mt_tests, mt_modes, mt_progress);
}

static void mt_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    (void)pt;
    mt_state *s = state;
    s->test_def->prepare(ctx, s, iter);
}

static int mt_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    (void)pt;
    mt_state *s = state;
    double elapsed_s = s->test_def->iteration(ctx, s, iter);

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
    if (s->test_def->record)
        s->test_def->record(ctx, out, vsum[0], msgs, vmax[1]);
    return 0;
}

static void mt_verify(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    mt_state *s = state;
    s->test_def->verify(ctx, s, pt, iter);
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
    if (s->mode_def->processes)
        hmb_result_add_num(ctx, "everywhere_processes", hmb_size(ctx) / 2);
    /* Resources (rank 0's view): the performance/resource trade-off of the talk. */
    hmb_result_add_num(ctx, "vcis", s->num_vcis >= 0 ? (double)s->num_vcis : NAN);
    hmb_result_add_num(ctx, "reserve_vcis", s->reserve_vcis >= 0 ? (double)s->reserve_vcis : NAN);
    hmb_result_add_num(ctx, "streams", s->nstreams);
    hmb_result_add_num(ctx, "communicators", s->ncomms);
    hmb_result_add_num(ctx, "rma_windows", s->nwins);
    hmb_result_add_num(ctx, "vmrss_kib", s->vmrss_kib >= 0 ? (double)s->vmrss_kib : NAN);
    hmb_result_add_num(ctx, "vmhwm_kib", s->vmhwm_kib >= 0 ? (double)s->vmhwm_kib : NAN);
    if (s->mode_def->asserts)
        for (int k = 0; k < MT_NINFO; k++)
            hmb_result_add_str(ctx, mt_tag_info_keys[k], s->tag_info[k]);
    if (s->test_def->annotate)
        s->test_def->annotate(ctx, s);
    if (s->shuffle_delay_ns > 0)
        hmb_result_add_num(ctx, "shuffle_delay_us", (double)s->shuffle_delay_ns / 1e3);
    if (s->test_def->layout)
        hmb_result_add_str(ctx, "layout", s->test_def->layout);
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
    .check = mt_check_cb,
    .points = mt_points_cb,
    .setup = mt_setup,
    .prepare = mt_prepare,
    .iterate = mt_iterate,
    .verify = mt_verify,
    .teardown = mt_teardown,
    .annotate = mt_annotate,
    .pivot_metrics = NULL,
};
HMB_REGISTER(mt_bench);
