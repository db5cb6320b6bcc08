/* mt's set-up: option checks, points, and the state of a point: which thread drives which lane
 * (the test's row), on which communicator, tag or stream (the mode's row), the rate test's message
 * slots and the get test's windows. The patterns: pattern.c; data and checks: verify.c. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt.h"

/* ------------------------------------------------------------------ options and points */

void mt_check(hmb_ctx *ctx, const mt_test_def *tests)
{
    const mt_opts *o = HMB_OPTS(mt_opts, ctx);
    long long window = o->window, windows = o->windows_per_iter;
    if (window * windows > MT_SEQ_MASK + 1)
        hmb_usage_error(ctx, "--window x --windows-per-iter must be at most %d (sequence numbers carried in each "
                        "message), got %lld", MT_SEQ_MASK + 1, window * windows);
    int stamped = 0;
    for (int t = 0; t < MT_NTESTS; t++)
        stamped |= (o->test & (1u << t)) && tests[t].stamped;
    const size_t *sizes = hmb_common(ctx)->sizes.v;
    const int nsizes = hmb_common(ctx)->sizes.n;
    for (int i = 0; i < nsizes; i++) {
        if (stamped && sizes[i] < MT_STAMP_BYTES)
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

/* One point per test, mode and size; a test that takes --target-progress, one per value too. */
void mt_points(hmb_ctx *ctx, hmb_point_list *out, const mt_test_def *tests)
{
    const mt_opts *o = HMB_OPTS(mt_opts, ctx);
    unsigned long long chosen_tests = o->test, modes = o->mode, progress = o->target_progress;
    const size_t *sizes = hmb_common(ctx)->sizes.v;
    const int nsizes = hmb_common(ctx)->sizes.n;
    for (int test = 0; test < MT_NTESTS; test++) {
        if (!(chosen_tests & (1u << test)))
            continue;
        for (int mode = 0; mode < MT_NMODES; mode++) {
            if (!(modes & (1u << mode)))
                continue;
            for (int prog = 0; prog < MT_NPROGRESS; prog++) {
                if (!tests[test].target_progress && prog > 0)
                    break;
                if (tests[test].target_progress && !(progress & (1u << prog)))
                    continue;
                for (int i = 0; i < nsizes; i++) {
                    mt_point *p = hmb_points_new(out, sizes[i]);
                    p->test = test;
                    p->mode = mode;
                    /* cores in use: where T threads per rank and everywhere's 2T ranks meet */
                    p->ranks_x_threads = (long long)hmb_size(ctx) * hmb_threads(ctx);
                    if (tests[test].target_progress)
                        p->target_progress = prog;
                }
            }
        }
    }
}

/* ------------------------------------------------------------------ which thread, which communicator */

/* Why this point cannot run here, or NULL. The same answer on every rank. */
static const char *unsupported_reason(hmb_ctx *ctx, const mt_state *s, char *buf, size_t len)
{
    const mt_test_def *test = s->test_def;
    const mt_mode_def *mode = s->mode_def;
    int T = s->threads, provided = hmb_thread_level_provided(ctx);
    if (test->refuses[s->mode])
        return test->refuses[s->mode];
    if (T < test->min_threads)
        return test->few_threads;
    if (mode->max_threads && T > mode->max_threads)
        return mode->many_threads;
    /* Threads other than the master call MPI in every threaded mode but a funnelled one. */
    int needed = T > 1 ? mode->level : MPI_THREAD_SINGLE;
    needed = test->level > needed ? test->level : needed;
    needed = s->progress_def->level > needed ? s->progress_def->level : needed;
    if (provided < needed) {
        snprintf(buf, len, "%s with %d thread(s) needs MPI_THREAD_%s, the library provided MPI_THREAD_%s",
                 s->progress_def->who ? s->progress_def->who : "this mode", T, hmb_thread_level_name(needed),
                 hmb_thread_level_name(provided));
        return buf;
    }
    if (mode->streams) {
        const char *why = hmb_streams_unsupported(ctx, s->nlanes, buf, len);
        if (why)
            return why;
    }
    if (T > 1) {
        int got = 0;
#pragma omp parallel num_threads(T)
#pragma omp single
        got = omp_get_num_threads();
        if (!hmb_all_agree(ctx, got == T)) {
            snprintf(buf, len, "OpenMP gave %d threads instead of %d (OMP_THREAD_LIMIT / OMP_DYNAMIC?)", got, T);
            return buf;
        }
    }
    return NULL;
}

int mt_thread_per_lane(const mt_state *s, int lane) { return s->mode_def->one_thread ? 0 : lane; }

int mt_thread_contended(const mt_state *s, int lane) { return s->sending ? lane + 1 : 0; }

static MPI_Comm new_comm(mt_state *s, MPI_Comm comm)
{
    s->comms[s->ncomms++] = comm;
    return comm;
}

void mt_comms_shared(mt_state *s)
{
    for (int l = 0; l < s->nlanes; l++)
        s->lanes[l].comm = s->base;
}

void mt_comms_own(mt_state *s)
{
    for (int l = 0; l < s->nlanes; l++) {
        MPI_Comm comm;
        MPI_Comm_dup(s->base, &comm);
        s->lanes[l].comm = new_comm(s, comm);
    }
}

void mt_comms_asserted(mt_state *s)
{
    MPI_Comm comm = new_comm(s, hmb_comm_dup_asserting(s->base, mt_tag_info_keys, MT_NINFO, s->tag_info));
    for (int l = 0; l < s->nlanes; l++)
        s->lanes[l].comm = comm;
}

/* A stream per driving thread; lane l's communicator attaches, on each side, the stream of the
 * thread that drives lane l there (collective: same order everywhere). */
void mt_comms_streams(mt_state *s)
{
    int stream_of_thread[HMB_MAX_THREADS];
    for (int t = 0; t < s->threads; t++)
        stream_of_thread[t] = -1;
    for (int l = 0; l < s->nlanes; l++) {
        int t = s->lanes[l].thread;
        if (stream_of_thread[t] < 0) {
            hmb_stream_create(&s->streams[s->nstreams]);
            stream_of_thread[t] = s->nstreams++;
        }
        MPI_Comm comm;
        hmb_stream_comm(s->base, s->streams[stream_of_thread[t]], &comm);
        s->lanes[l].comm = new_comm(s, comm);
    }
}

/* ------------------------------------------------------------------ buffers and windows */

void mt_rate_buffers(hmb_ctx *ctx, mt_state *s)
{
    size_t per_lane = (size_t)s->windows * s->window;
    s->sendbuf = calloc((size_t)s->nlanes * s->window, s->size);
    s->recvbuf = calloc((size_t)s->nlanes * per_lane, s->size);
    s->seen = calloc((size_t)s->nlanes, per_lane);
    hmb_cache_register(ctx, s->sendbuf, (size_t)s->nlanes * s->window * s->size);
    hmb_cache_register(ctx, s->recvbuf, (size_t)s->nlanes * per_lane * s->size);
}

/* --get-window: the window's memory, `bytes` at winmem + offset on the target (nothing on the
 * origin), from MPI_Win_create or MPI_Win_allocate; *mem: where the target's bytes lie. */
static MPI_Win window_created(mt_state *s, MPI_Comm comm, MPI_Aint len, size_t offset, unsigned char **mem)
{
    MPI_Win win;
    *mem = len ? s->winmem + offset : NULL;
    MPI_Win_create(*mem, len, 1, MPI_INFO_NULL, comm, &win);
    return win;
}

static MPI_Win window_allocated(mt_state *s, MPI_Comm comm, MPI_Aint len, size_t offset, unsigned char **mem)
{
    (void)s, (void)offset;
    MPI_Win win;
    *mem = NULL;
    MPI_Win_allocate(len, 1, MPI_INFO_NULL, comm, mem, &win);
    return win;
}

static MPI_Win (*const window_memory[MT_NWINDOWS])(mt_state *, MPI_Comm, MPI_Aint, size_t, unsigned char **) = {
    [MT_WINDOW_CREATE] = window_created, [MT_WINDOW_ALLOCATE] = window_allocated};

/* A window exposing `bytes` on the target; locked once for the whole point. */
static MPI_Win make_window(hmb_ctx *ctx, mt_state *s, MPI_Comm comm, size_t bytes, size_t offset,
                           unsigned char **mem)
{
    MPI_Aint len = s->sending ? 0 : (MPI_Aint)bytes;
    MPI_Win win = window_memory[HMB_OPTS(mt_opts, ctx)->get_window](s, comm, len, offset, mem);
    if (!len)
        *mem = NULL;
    MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
    s->wins[s->nwins++] = win;
    return win;
}

/* Windows: one shared by every lane, or one per lane on the lane's own communicator (the mode's
 * row says). */
void mt_get_windows(hmb_ctx *ctx, mt_state *s)
{
    s->compute_ns = hmb_common(ctx)->compute;
    if (!s->sending)
        s->winmem = calloc((size_t)s->nlanes, s->size);
    if (!s->mode_def->window_per_lane) {
        unsigned char *mem;
        MPI_Win win = make_window(ctx, s, s->base, (size_t)s->nlanes * s->size, 0, &mem);
        for (int l = 0; l < s->nlanes; l++) {
            s->lanes[l].win = win;
            s->lanes[l].disp = (MPI_Aint)(l * s->size);
            s->lanes[l].target_mem = mem ? mem + l * s->size : NULL;
        }
    } else {
        for (int l = 0; l < s->nlanes; l++) {
            unsigned char *mem;
            s->lanes[l].win = make_window(ctx, s, s->lanes[l].comm, s->size, (size_t)l * s->size, &mem);
            s->lanes[l].disp = 0;
            s->lanes[l].target_mem = mem;
        }
    }
    if (!s->sending && s->progress_def->helper && !(s->helper = hmb_progress_start(ctx)))
        hmb_unsupported(ctx, "cannot start the target's MPI_Iprobe helper thread");
    s->recvbuf = calloc((size_t)s->nlanes * s->window, s->size);
    hmb_cache_register(ctx, s->recvbuf, (size_t)s->nlanes * s->window * s->size);
}

void mt_get_release(mt_state *s)
{
    hmb_progress_stop(s->helper);
    for (int w = 0; w < s->nwins; w++) {
        MPI_Win_unlock_all(s->wins[w]);
        MPI_Win_free(&s->wins[w]);
    }
    free(s->winmem);
}

/* ------------------------------------------------------------------ the state of a point */

mt_state *mt_state_create(hmb_ctx *ctx, const hmb_point *pt, const mt_test_def *tests, const mt_mode_def *modes,
                          const mt_progress_def *progress)
{
    const mt_point *p = HMB_POINT(mt_point, pt);
    mt_state *s = calloc(1, sizeof *s);
    s->test = p->test;
    s->mode = p->mode;
    s->test_def = &tests[s->test];
    s->mode_def = &modes[s->mode];
    s->progress = s->test_def->target_progress ? p->target_progress : MT_PROGRESS_NONE;
    s->progress_def = &progress[s->progress];
    s->threads = hmb_threads(ctx);
    s->nlanes = s->threads - s->test_def->spare_threads;
    s->size = pt->size_bytes;
    const mt_opts *o = HMB_OPTS(mt_opts, ctx);
    s->window = (int)o->window;
    s->windows = s->test_def->one_window ? 1 : (int)o->windows_per_iter;
    s->shuffle_delay_ns = o->shuffle_delay;
    s->stale_at = hmb_inject_at(ctx, HMB_INJECT_STALE);
    if (!hmb_mpit_cvar_int("MPIR_CVAR_CH4_NUM_VCIS", &s->num_vcis))
        s->num_vcis = -1;
    if (!hmb_mpit_cvar_int("MPIR_CVAR_CH4_RESERVE_VCIS", &s->reserve_vcis))
        s->reserve_vcis = -1;
    char why[256];
    const char *reason = unsupported_reason(ctx, s, why, sizeof why);
    if (reason) {
        hmb_unsupported(ctx, "%s", reason);
        free(s);
        return NULL;
    }

    int half = hmb_size(ctx) / 2, rank = hmb_rank(ctx);
    s->sending = rank < half;
    s->peer = s->sending ? rank + half : rank - half;
    MPI_Comm base;
    MPI_Comm_dup(hmb_comm(ctx), &base);
    s->base = new_comm(s, base);
    for (int l = 0; l < s->nlanes; l++) {
        mt_lane *lane = &s->lanes[l];
        lane->thread = s->test_def->lane_thread(s, l);
        /* one data tag for every lane, or a tag pair per lane. The ack (flow control, not measured
         * traffic) is the lane's own in every mode: see rate_thread (pattern.c). */
        lane->data_tag = s->mode_def->tag_per_lane ? 2 * l : 0;
        lane->ack_tag = s->mode_def->tag_per_lane ? 2 * l + 1 : 1 + l;
    }
    s->mode_def->lane_comms(s);
    s->test_def->setup(ctx, s);
    int lanes_per_thread[HMB_MAX_THREADS] = {0};
    for (int l = 0; l < s->nlanes; l++)
        if (++lanes_per_thread[s->lanes[l].thread] > s->reqs_per_thread)
            s->reqs_per_thread = lanes_per_thread[s->lanes[l].thread];
    s->reqs_per_thread *= s->window + 1;
    s->reqs = calloc((size_t)s->threads * s->reqs_per_thread, sizeof *s->reqs);
    hmb_memory_kB(&s->vmrss_kib, &s->vmhwm_kib); /* -1 each where /proc cannot be read */
    return s;
}

void mt_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    (void)ctx, (void)pt;
    mt_state *s = state;
    if (!s)
        return;
    if (s->test_def->release)
        s->test_def->release(s);
    for (int c = s->ncomms - 1; c >= 0; c--)
        MPI_Comm_free(&s->comms[c]);
    for (int i = 0; i < s->nstreams; i++)
        hmb_stream_free(&s->streams[i]);
    free(s->sendbuf);
    free(s->recvbuf);
    free(s->seen);
    free(s->reqs);
    free(s);
}
