/* mt: per-point set-up (which thread drives which lane, on which communicator/tag/stream),
 * the windowed message-rate pattern shared by the rate and contention tests, and its
 * validation. See mt.c for the layout. */
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hmb/bench.h"
#include "mt.h"

/* Why this point cannot run here, or NULL. The same answer on every rank. */
static const char *mt_unsupported_reason(hmb_ctx *ctx, const mt_state *s, char *buf, size_t len)
{
    int T = s->threads, provided = hmb_thread_level_provided(ctx);
    if (s->test == MT_CONTENTION) {
        if (s->mode == MT_FUNNELED)
            return "contention: funneled has one communicating thread, so no sender/receiver thread contention";
        if (s->mode == MT_EVERYWHERE)
            return "contention is a within-process effect; the process baseline is the rate test's everywhere mode";
        if (T < 2)
            return "contention needs --threads >= 2 (one receiving thread, at least one sending thread)";
    }
    if (s->mode == MT_EVERYWHERE && T > 1)
        return "everywhere is the process baseline: launch it with --threads 1 on 2T ranks";
    if (s->test == MT_GET && s->mode == MT_TAG)
        return "get: the tag mode is about message matching; MPI_Get has no tags";
    if (s->test == MT_GET && s->mode == MT_STREAM)
        return "get: HMB does not create RMA windows on MPIX stream communicators";
    /* Threads other than the master call MPI in every threaded mode but funneled. */
    int needed = MPI_THREAD_SINGLE;
    if (T > 1)
        needed = s->mode == MT_FUNNELED ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE;
    if (s->test == MT_CONTENTION || (s->test == MT_GET && s->progress == MT_PROGRESS_THREAD))
        needed = MPI_THREAD_MULTIPLE;
    if (provided < needed) {
        snprintf(buf, len, "%s with %d thread(s) needs MPI_THREAD_%s, the library provided MPI_THREAD_%s",
                 s->test == MT_GET && s->progress == MT_PROGRESS_THREAD ? "a target progress thread" : "this mode",
                 T, hmb_thread_level_name(needed), hmb_thread_level_name(provided));
        return buf;
    }
    if (s->mode == MT_STREAM) {
        const char *why = hmb_streams_unsupported(ctx, s->test == MT_CONTENTION ? T - 1 : T, buf, len);
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

static MPI_Comm mt_new_comm(mt_state *s, MPI_Comm comm)
{
    s->comms[s->ncomms++] = comm;
    return comm;
}

/* Stream mode: a stream per driving thread; lane l's communicator attaches, on each side,
 * the stream of the thread that drives lane l there (collective: same order everywhere). */
static void mt_stream_comms(mt_state *s)
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
        s->lanes[l].comm = mt_new_comm(s, comm);
    }
}

mt_state *mt_state_create(hmb_ctx *ctx, const hmb_point *pt, const char *const *tag_info_keys)
{
    const mt_point *p = HMB_POINT(mt_point, pt);
    mt_state *s = calloc(1, sizeof *s);
    s->test = p->test;
    s->mode = p->mode;
    s->progress = s->test == MT_GET ? p->target_progress : MT_PROGRESS_NONE;
    s->threads = hmb_threads(ctx);
    s->size = pt->size_bytes;
    const mt_opts *o = HMB_OPTS(mt_opts, ctx);
    s->window = (int)o->window;
    s->windows = s->test == MT_GET ? 1 : (int)o->windows_per_iter;
    s->shuffle_delay_ns = o->shuffle_delay;
    s->stale_at = hmb_inject_at(ctx, HMB_INJECT_STALE);
    if (!hmb_mpit_cvar_int("MPIR_CVAR_CH4_NUM_VCIS", &s->num_vcis))
        s->num_vcis = -1;
    if (!hmb_mpit_cvar_int("MPIR_CVAR_CH4_RESERVE_VCIS", &s->reserve_vcis))
        s->reserve_vcis = -1;
    char why[256];
    const char *reason = mt_unsupported_reason(ctx, s, why, sizeof why);
    if (reason) {
        hmb_unsupported(ctx, "%s", reason);
        free(s);
        return NULL;
    }

    int half = hmb_size(ctx) / 2, rank = hmb_rank(ctx);
    s->sending = rank < half;
    s->peer = s->sending ? rank + half : rank - half;
    s->nlanes = s->test == MT_CONTENTION ? s->threads - 1 : s->threads;
    MPI_Comm base;
    MPI_Comm_dup(hmb_comm(ctx), &base);
    s->base = mt_new_comm(s, base);
    MPI_Comm tag_comm = MPI_COMM_NULL;
    if (s->mode == MT_TAG)
        tag_comm = mt_new_comm(s, hmb_comm_dup_asserting(s->base, tag_info_keys, MT_NINFO, s->tag_info));
    for (int l = 0; l < s->nlanes; l++) {
        mt_lane *lane = &s->lanes[l];
        if (s->test == MT_CONTENTION)
            lane->thread = s->sending ? l + 1 : 0;
        else
            lane->thread = s->mode == MT_FUNNELED ? 0 : l;
        /* shared: one (comm, data tag) for every lane; tag/funneled: a tag pair per lane. The ack
         * (flow control, not measured traffic) is the lane's own in every mode: see mt_rate_thread. */
        lane->comm = s->base;
        lane->data_tag = 0;
        lane->ack_tag = 1 + l;
        if (s->mode == MT_TAG || s->mode == MT_FUNNELED) {
            lane->data_tag = 2 * l;
            lane->ack_tag = 2 * l + 1;
        }
        if (s->mode == MT_TAG)
            lane->comm = tag_comm;
        if (s->mode == MT_COMM || s->mode == MT_EVERYWHERE) {
            MPI_Comm comm;
            MPI_Comm_dup(s->base, &comm);
            lane->comm = mt_new_comm(s, comm);
        }
    }
    if (s->mode == MT_STREAM)
        mt_stream_comms(s);

    if (s->test == MT_GET) {
        mt_get_setup(ctx, s);
    } else {
        size_t per_lane = (size_t)s->windows * s->window;
        s->sendbuf = calloc((size_t)s->nlanes * s->window, s->size);
        s->recvbuf = calloc((size_t)s->nlanes * per_lane, s->size);
        s->seen = calloc((size_t)s->nlanes, per_lane);
        hmb_cache_register(ctx, s->sendbuf, (size_t)s->nlanes * s->window * s->size);
        hmb_cache_register(ctx, s->recvbuf, (size_t)s->nlanes * per_lane * s->size);
    }
    int lanes_per_thread[HMB_MAX_THREADS] = {0};
    for (int l = 0; l < s->nlanes; l++)
        if (++lanes_per_thread[s->lanes[l].thread] > s->reqs_per_thread)
            s->reqs_per_thread = lanes_per_thread[s->lanes[l].thread];
    s->reqs_per_thread *= s->window + 1;
    s->reqs = calloc((size_t)s->threads * s->reqs_per_thread, sizeof *s->reqs);
    hmb_memory_kB(&s->vmrss_kib, &s->vmhwm_kib); /* -1 each where /proc cannot be read */
    return s;
}

void mt_state_free(mt_state *s)
{
    if (!s)
        return;
    if (s->test == MT_GET)
        mt_get_free(s);
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

/* splitmix64 over a state that is the thread's own (no shared state). */
static uint64_t mt_shuffle_next(mt_shuffle *sh)
{
    return hmb_mix64(sh->state++);
}

void mt_shuffle_init(mt_shuffle *sh, const mt_state *s, int rank, int tid, long iter)
{
    sh->max_ns = s->shuffle_delay_ns;
    sh->state = (uint64_t)rank << 48 ^ (uint64_t)tid << 32 ^ (uint64_t)iter;
}

/* A quarter of the posts yield the core, a quarter sleep up to max_ns, the rest go on. */
void mt_shuffle_pause(mt_shuffle *sh)
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

static unsigned char *mt_send_slot(const mt_state *s, int lane, int i)
{
    return s->sendbuf + ((size_t)lane * s->window + i) * s->size;
}

static unsigned char *mt_recv_slot(const mt_state *s, int lane, int seq)
{
    return s->recvbuf + ((size_t)lane * s->windows * s->window + seq) * s->size;
}

static void mt_stamp_write(unsigned char *msg, long iter, int lane, int seq)
{
    uint64_t stamp = ((uint64_t)iter & MT_SEQ_MASK) << 40 | (uint64_t)(lane & 0xFFFF) << 24 | (uint64_t)seq;
    memcpy(msg, &stamp, sizeof stamp);
}

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
 * came: the hang seen on 16 cores, provoked on 2 by --shuffle-delay.) The contention and
 * funneled layouts, where one thread drives several lanes, obey the same per-lane argument. */
static void mt_rate_thread(hmb_ctx *ctx, mt_state *s, int tid, long iter)
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
                    mt_stamp_write(msg, l == 0 && i == 0 ? slot0_iter : iter, l, seq);
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

void mt_rate_prepare(hmb_ctx *ctx, mt_state *s, long iter)
{
    if (s->sending && iter == s->stale_at)
        hmb_inject_fired(ctx, HMB_INJECT_STALE); /* lane 0's slot 0 below, and its stamp in mt_rate_thread */
    if (s->sending) {
        for (int l = 0; l < s->nlanes; l++)
            for (int i = 0; i < s->window; i++)
                hmb_fill(mt_send_slot(s, l, i), s->size, hmb_rank(ctx), l,
                         l == 0 && i == 0 && iter == s->stale_at ? iter - 1 : iter);
    } else {
        /* Poison: a slot no message reached carries an impossible stamp (lane 0xFFFF), never
         * an earlier iteration's data or calloc's zeros (a valid stamp at iteration 0). */
        memset(s->recvbuf, 0xFF, (size_t)s->nlanes * s->windows * s->window * s->size);
    }
}

double mt_rate_iteration(hmb_ctx *ctx, mt_state *s, long iter)
{
    hmb_phase(ctx, "barrier before the windows");
    MPI_Barrier(s->base);
    hmb_phase(ctx, s->sending ? "Isend windows / ack" : "Irecv windows / ack");
    double t_start_s = hmb_now();
    if (s->threads == 1) {
        mt_rate_thread(ctx, s, 0, iter); /* no OpenMP region: valid at MPI_THREAD_SINGLE */
    } else {
#pragma omp parallel num_threads(s->threads)
        mt_rate_thread(ctx, s, omp_get_thread_num(), iter);
    }
    return hmb_now() - t_start_s;
}

/* Every message: stamp of this iteration, a legal (lane, seq), exactly once, on its own lane
 * unless the mode shares one (comm, tag), in order unless the mode allows overtaking; then
 * every byte against the pattern of the lane (sending thread) and iteration it claims. So in
 * `shared`, where any receive may take any lane's message, exactly the messages sent this
 * iteration are accepted. Order holds there too, per (sending lane, receiving lane): one
 * thread's sends are ordered, one thread's receives are ordered, and MPI's non-overtaking
 * rule forbids a later receive taking an earlier message while an earlier receive that
 * matches it is pending. */
void mt_rate_verify(hmb_ctx *ctx, mt_state *s, const hmb_point *pt, long iter)
{
    if (s->sending || !hmb_validate_enabled(ctx))
        return;
    int per_lane = s->windows * s->window;
    /* Order is promised unless the library kept the tag mode's mpi_assert_allow_overtaking. */
    int ordered = s->mode != MT_TAG || strcmp(s->tag_info[2], "true") != 0;
    memset(s->seen, 0, (size_t)s->nlanes * per_lane);
    int last_seq[HMB_MAX_THREADS];
    for (int r = 0; r < s->nlanes; r++) {
        for (int l = 0; l < s->nlanes; l++)
            last_seq[l] = -1;
        /* Slots of lane r in the order its receives were posted (by one thread). */
        for (int k = 0; k < per_lane; k++) {
            unsigned char *msg = mt_recv_slot(s, r, k);
            uint64_t stamp;
            memcpy(&stamp, msg, sizeof stamp);
            long stamp_iter = (long)(stamp >> 40);
            int lane = (int)(stamp >> 24 & 0xFFFF), seq = (int)(stamp & MT_SEQ_MASK);
            if (stamp_iter != (iter & MT_SEQ_MASK))
                hmb_validation_failure(ctx, pt, iter, r, "receive %d of lane %d holds a message stamped for "
                                       "iteration %ld (mod 2^24), expected %ld", k, r, stamp_iter, iter & MT_SEQ_MASK);
            if (lane >= s->nlanes || seq >= per_lane)
                hmb_validation_failure(ctx, pt, iter, r, "receive %d of lane %d holds an impossible stamp "
                                       "(lane %d, seq %d)", k, r, lane, seq);
            if (s->mode != MT_SHARED && lane != r)
                hmb_validation_failure(ctx, pt, iter, r, "a message of lane %d arrived on lane %d's "
                                       "communicator/tag", lane, r);
            if (s->seen[(size_t)lane * per_lane + seq]++)
                hmb_validation_failure(ctx, pt, iter, lane, "message %d of lane %d received twice", seq, lane);
            if (ordered && seq <= last_seq[lane])
                hmb_validation_failure(ctx, pt, iter, lane, "message %d of lane %d overtook message %d "
                                       "(mode %s promises order)", last_seq[lane], lane, seq,
                                       mt_mode_names[HMB_POINT(mt_point, pt)->mode]);
            last_seq[lane] = seq;
            /* The stamp checked, restore the pattern's first word and check every byte. */
            unsigned char prefix[MT_STAMP_BYTES];
            hmb_fill(prefix, sizeof prefix, s->peer, lane, iter);
            memcpy(msg, prefix, sizeof prefix);
            hmb_check_buffer(ctx, pt, msg, s->size, s->peer, lane, iter);
        }
    }
    for (int l = 0; l < s->nlanes; l++)
        for (int q = 0; q < per_lane; q++)
            if (!s->seen[(size_t)l * per_lane + q])
                hmb_validation_failure(ctx, pt, iter, l, "message %d of lane %d never arrived", q, l);
}
