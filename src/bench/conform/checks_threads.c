/* conform: the MPI + threads checks (docs/conformance.md; the family's description is at the top
 * of pattern.c). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conform.h"

/* ------------------------------------------------------------------ MPI + threads */

#define MT_MSGS 200

void check_mt_order(cf *c, const hmb_point *pt)
{
    (void)pt;
    int threads = hmb_threads(c->ctx);
    if (hmb_thread_level_provided(c->ctx) < MPI_THREAD_MULTIPLE) {
        cf_set(c, V_UNSUPPORTED, "needs MPI_THREAD_MULTIPLE, granted %s",
               hmb_thread_level_name(hmb_thread_level_provided(c->ctx)));
        return;
    }
    if (c->rank != SENDER && c->rank != RECEIVER)
        return;
    const int n = threads * MT_MSGS;
    int (*msg)[2] = calloc((size_t)n, sizeof *msg);
    MPI_Request *req = malloc((size_t)n * sizeof *req);
    int ok = 1;
    if (c->rank == SENDER) {
        /* T threads send MT_MSGS each on one communicator and tag, concurrently */
#pragma omp parallel num_threads(threads)
        {
            int t = omp_get_thread_num();
            for (int s = 0; s < MT_MSGS; s++) {
                int i = t * MT_MSGS + s;
                msg[i][0] = t;
                msg[i][1] = s;
                MPI_Isend(msg[i], 2, MPI_INT, RECEIVER, TAG_DATA, c->comm, &req[i]);
            }
        }
        ok = cf_complete(c, n, req, "sends of T threads");
    } else {
        /* receives posted in order on one thread: every sender thread's messages must arrive
         * once each and in that thread's order (non-overtaking, same source, comm and tag) */
        for (int i = 0; i < n; i++)
            MPI_Irecv(msg[i], 2, MPI_INT, SENDER, TAG_DATA, c->comm, &req[i]);
        ok = cf_complete(c, n, req, "receives");
        if (ok) {
            int *next = calloc((size_t)threads, sizeof *next);
            for (int i = 0; i < n && ok; i++) {
                int t = msg[i][0], s = msg[i][1];
                if (t < 0 || t >= threads || s < 0 || s >= MT_MSGS) {
                    cf_set(c, V_FAIL, "receive %d holds thread %d message %d: not a message that was sent", i, t, s);
                    ok = 0;
                } else if (s != next[t]) {
                    cf_set(c, V_FAIL, "receive %d: thread %d's message %d arrived where its message %d was due "
                                      "(%s)", i, t, s, next[t], s < next[t] ? "delivered twice" : "overtaken");
                    ok = 0;
                } else {
                    next[t]++;
                }
            }
            free(next);
        }
    }
    /* second part: T receiving threads as well, each receives MT_MSGS of any sender thread */
    if (ok) {
        int *count = calloc((size_t)n, sizeof *count);
        if (c->rank == SENDER) {
#pragma omp parallel num_threads(threads)
            {
                int t = omp_get_thread_num();
                for (int s = 0; s < MT_MSGS; s++)
                    MPI_Isend(msg[t * MT_MSGS + s], 2, MPI_INT, RECEIVER, TAG_DATA + 1, c->comm,
                              &req[t * MT_MSGS + s]);
            }
            cf_complete(c, n, req, "sends of T threads (T receiving threads)");
        } else {
#pragma omp parallel num_threads(threads)
            {
                int t = omp_get_thread_num();
                for (int s = 0; s < MT_MSGS; s++)
                    MPI_Irecv(msg[t * MT_MSGS + s], 2, MPI_INT, SENDER, TAG_DATA + 1, c->comm, &req[t * MT_MSGS + s]);
            }
            if (cf_complete(c, n, req, "receives of T threads")) {
                for (int i = 0; i < n; i++) {
                    int t = msg[i][0], s = msg[i][1];
                    if (t >= 0 && t < threads && s >= 0 && s < MT_MSGS)
                        count[t * MT_MSGS + s]++;
                }
                for (int i = 0; i < n; i++)
                    if (count[i] != 1) {
                        cf_set(c, V_FAIL, "with %d receiving threads, thread %d's message %d was delivered %d times",
                               threads, i / MT_MSGS, i % MT_MSGS, count[i]);
                        break;
                    }
            }
        }
        free(count);
    }
    if (c->rank == RECEIVER)
        cf_set(c, V_PASS, "%d threads x %d messages, one tag: each delivered once, per-thread order kept", threads,
               MT_MSGS);
    free(msg);
    free(req);
}

/* One message of 64 words from the sender to the receiver on comm, bounded and validated. */
static void exchange_one(cf *c, MPI_Comm comm, const char *what)
{
    if (c->rank != SENDER && c->rank != RECEIVER)
        return;
    uint64_t buf[64];
    MPI_Request r;
    if (c->rank == SENDER) {
        cf_fill(buf, 0, 64, 3);
        MPI_Isend(buf, 64, MPI_UINT64_T, RECEIVER, TAG_DATA, comm, &r);
    } else {
        cf_poison(buf, 64);
        MPI_Irecv(buf, 64, MPI_UINT64_T, SENDER, TAG_DATA, comm, &r);
    }
    char label[96];
    snprintf(label, sizeof label, "message on %s", what);
    long w = -1;
    if (cf_complete(c, 1, &r, label) && c->rank == RECEIVER && (w = cf_bad_word(buf, 0, 64, 3)) >= 0)
        cf_set(c, V_FAIL, "message on %s: word %ld holds %s", what, w, cf_word_story(buf[w], 3, (size_t)w));
}

void check_info_assertions(cf *c, const hmb_point *pt)
{
    (void)pt;
    static const char *const keys[] = {"mpi_assert_no_any_tag", "mpi_assert_no_any_source",
                                       "mpi_assert_allow_overtaking"};
    MPI_Info info;
    MPI_Info_create(&info);
    for (int i = 0; i < 3; i++)
        MPI_Info_set(info, keys[i], "true");
    MPI_Comm comm;
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    int rc = MPI_Comm_dup_with_info(c->comm, info, &comm);
    MPI_Info_free(&info);
    if (rc != MPI_SUCCESS) {
        cf_set(c, V_FAIL, "MPI_Comm_dup_with_info with the three assertions failed (error %d)", rc);
        return;
    }
    char got[400] = "";
    size_t len = 0;
    MPI_Info out;
    MPI_Comm_get_info(comm, &out);
    for (int i = 0; i < 3; i++) {
        char value[64] = "";
        int vlen = sizeof value - 1, flag = 0;
        MPI_Info_get_valuelen(out, keys[i], &vlen, &flag);
        if (flag)
            MPI_Info_get(out, keys[i], sizeof value - 1, value, &flag);
        len += (size_t)snprintf(got + len, sizeof got - len, "%s%s=%s", i ? ", " : "", keys[i] + 11,
                                flag ? value : "(not returned)");
    }
    MPI_Info_free(&out);
    /* a message with a named source and tag works on the asserted communicator */
    exchange_one(c, comm, "the asserted communicator");
    if (!c->wedged)
        MPI_Comm_free(&comm);
    cf_set(c, V_PASS, "accepted; MPI_Comm_get_info returns %s", got);
}

void check_streams(cf *c, const hmb_point *pt)
{
    (void)pt;
#if defined(HMB_HAVE_MPIX_STREAM_CREATE) && defined(HMB_HAVE_MPIX_STREAM_COMM_CREATE)
    long long reserve = 0;
    if (!hmb_mpit_cvar_int("MPIR_CVAR_CH4_RESERVE_VCIS", &reserve) || reserve < 1) {
        cf_set(c, V_UNSUPPORTED, "MPIX_Stream_create needs MPIR_CVAR_CH4_RESERVE_VCIS >= 1 (it is %lld): run with "
                                 "MPIR_CVAR_CH4_RESERVE_VCIS=1", reserve);
        return;
    }
    int local_ok = 1;
    MPIX_Stream stream = MPIX_STREAM_NULL;
    MPI_Comm scomm = MPI_COMM_NULL;
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int rc = MPIX_Stream_create(MPI_INFO_NULL, &stream);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    local_ok = rc == MPI_SUCCESS;
    if (!hmb_all_agree(c->ctx, local_ok)) {
        cf_set(c, V_FAIL, "MPIX_Stream_create failed (error %d) with MPIR_CVAR_CH4_RESERVE_VCIS=%lld", rc, reserve);
        return;
    }
    rc = MPIX_Stream_comm_create(c->comm, stream, &scomm);
    if (!hmb_all_agree(c->ctx, rc == MPI_SUCCESS)) {
        cf_set(c, V_FAIL, "MPIX_Stream_comm_create failed (error %d)", rc);
        return;
    }
    exchange_one(c, scomm, "the stream communicator");
    if (!c->wedged) {
        MPI_Comm_free(&scomm);
        MPIX_Stream_free(&stream);
    }
    cf_set(c, V_PASS, "MPIX_Stream_comm_create with MPIR_CVAR_CH4_RESERVE_VCIS=%lld: a message on the stream "
                      "communicator arrived intact", reserve);
#else
    cf_set(c, V_UNSUPPORTED, "this MPI library has no MPIX_Stream_create/MPIX_Stream_comm_create (MPICH extension)");
#endif
}

void check_thread_level(cf *c, const hmb_point *pt)
{
    (void)pt;
    int provided = hmb_thread_level_provided(c->ctx), query = -1, main_thread = 0;
    const hmb_common_opts *co = hmb_common(c->ctx);
    const char *requested = co->given.thread_level ? hmb_thread_level_choices[co->thread_level] : "multiple";
    MPI_Query_thread(&query);
    MPI_Is_thread_main(&main_thread);
    if (query != provided)
        cf_set(c, V_FAIL, "requested %s, MPI_Init_thread granted %s, but MPI_Query_thread says %s", requested,
               hmb_thread_level_name(provided), hmb_thread_level_name(query));
    else if (!main_thread)
        cf_set(c, V_FAIL, "MPI_Is_thread_main is false on the thread that called MPI_Init_thread");
    else
        cf_set(c, V_PASS, "requested %s, granted %s, MPI_Query_thread %s", requested, hmb_thread_level_name(provided),
               hmb_thread_level_name(query));
}
