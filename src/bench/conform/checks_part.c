/* conform: a partitioned pair and the partitioned checks of data and arrival (docs/conformance.md;
 * the family's description is at the top of pattern.c). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conform.h"

/* ------------------------------------------------------------------ a partitioned pair */

#if HMB_HAVE_PARTITIONED
void pair_init(cf *c, pside *p, int send_parts, int recv_parts, size_t words, int tag)
{
    memset(p, 0, sizeof *p);
    p->req = MPI_REQUEST_NULL;
    p->words = words;
    if (c->rank != SENDER && c->rank != RECEIVER)
        return;
    p->buf = malloc(words * sizeof *p->buf);
    if (!p->buf)
        abort();
    cf_poison(p->buf, words);
    if (c->rank == SENDER) {
        p->parts = send_parts;
        MPI_Psend_init(p->buf, send_parts, (MPI_Count)(words / (size_t)send_parts), MPI_UINT64_T, RECEIVER, tag,
                       c->comm, MPI_INFO_NULL, &p->req);
    } else {
        p->parts = recv_parts;
        MPI_Precv_init(p->buf, recv_parts, (MPI_Count)(words / (size_t)recv_parts), MPI_UINT64_T, SENDER, tag,
                       c->comm, MPI_INFO_NULL, &p->req);
    }
}

/* Free a pair's requests unless the check left them outstanding. */
void pair_free(cf *c, pside *p, int n)
{
    for (int i = 0; i < n; i++) {
        if (!c->wedged && p[i].req != MPI_REQUEST_NULL)
            MPI_Request_free(&p[i].req);
        if (!c->wedged)
            free(p[i].buf);
    }
}

/* Mark every send partition ready in the given order (the sender's side of a round). */
void ready_all(cf *c, pside *p, ready_order order, long round)
{
    int n = p->parts;
    int *idx = malloc((size_t)n * sizeof *idx);
    for (int i = 0; i < n; i++)
        idx[i] = order == ORDER_REVERSE ? n - 1 - i : i;
    if (order == ORDER_RANDOM) {
        uint64_t z = (uint64_t)round * 7919u + 17u;
        for (int i = n - 1; i > 0; i--) {
            int j = (int)(hmb_mix64(z++) % (uint64_t)(i + 1));
            int t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
        }
    }
    switch (order) {
    case ORDER_THREADS: {
        /* T threads each mark an interleaved share (partition i by thread i mod T), all at once */
        int threads = hmb_threads(c->ctx);
#pragma omp parallel num_threads(threads)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            for (int i = n - 1 - t; i >= 0; i -= nt)
                MPI_Pready(i, p->req);
        }
        break;
    }
    case ORDER_RANGE:
#ifdef HMB_HAVE_MPI_PREADY_RANGE
        /* two ranges, the upper half first */
        MPI_Pready_range(n / 2, n - 1, p->req);
        if (n / 2 > 0)
            MPI_Pready_range(0, n / 2 - 1, p->req);
#endif
        break;
    case ORDER_LIST:
#ifdef HMB_HAVE_MPI_PREADY_LIST
        for (int i = 0; i < n; i++)
            idx[i] = (i % 2 == 0) ? i / 2 : n - 1 - i / 2; /* 0, n-1, 1, n-2, ... */
        MPI_Pready_list(n, idx, p->req);
#endif
        break;
    default:
        for (int i = 0; i < n; i++)
            MPI_Pready(idx[i], p->req);
    }
    free(idx);
}

/* One round of K pairs, not synchronised with the partner: the sender fills, starts, marks
 * ready and completes; the receiver poisons, starts, completes and checks every word.
 * Returns 1 when the round completed with the right data. */
int pairs_round(cf *c, pside *p, int k, long round, ready_order order)
{
    if (c->rank != SENDER && c->rank != RECEIVER)
        return 1;
    MPI_Request *reqs = malloc((size_t)k * sizeof *reqs);
    for (int i = 0; i < k; i++) {
        if (c->rank == SENDER)
            cf_fill(p[i].buf, 0, p[i].words, round * k + i);
        else
            cf_poison(p[i].buf, p[i].words);
    }
    for (int i = 0; i < k; i++)
        reqs[i] = p[i].req;
    MPI_Startall(k, reqs);
    if (c->rank == SENDER)
        for (int i = 0; i < k; i++)
            ready_all(c, &p[i], order, round);
    char what[96];
    snprintf(what, sizeof what, "round %ld, partitioned %s", round, c->rank == SENDER ? "send" : "receive");
    int ok = cf_complete(c, k, reqs, what);
    for (int i = 0; i < k; i++)
        p[i].req = reqs[i];
    free(reqs);
    if (!ok || c->rank == SENDER)
        return ok;
    for (int i = 0; i < k; i++) {
        long w = cf_bad_word(p[i].buf, 0, p[i].words, round * k + i);
        if (w >= 0) {
            size_t per = p[i].words / (size_t)p[i].parts;
            cf_set(c, V_FAIL, "round %ld request %d: receive partition %ld word %ld holds %s after completion", round,
                   i, w / (long)per, w, cf_word_story_k(p[i].buf[w], round * k + i, (size_t)w, k));
            if (p[i].buf[w] == cf_word_of((round + 1) * k + i, (size_t)w))
                c->wedged = 1; /* the sender is a round ahead: its requests may never complete now */
            return 0;
        }
    }
    return 1;
}
#endif

/* ------------------------------------------------------------------ partitioned checks */

#if HMB_HAVE_PARTITIONED
#define INACTIVE_WORDS 128 /* 1 KB per request, as scripts/repro/partitioned_rounds.c */

void check_inactive_buffer(cf *c, const hmb_point *pt)
{
    int k = (int)HMB_POINT(cf_point, pt)->requests;
    pside *p = calloc((size_t)k, sizeof *p);
    for (int i = 0; i < k; i++)
        pair_init(c, &p[i], 1, 1, INACTIVE_WORDS, TAG_DATA + i);
    if (c->silent && c->rank == RECEIVER) { /* TEST ONLY: the partner never posts its side */
        hmb_inject_fired(c->ctx, HMB_INJECT_SILENT_PARTNER);
        for (int i = 0; i < k; i++)
            MPI_Request_free(&p[i].req);
        free(p);
        return;
    }
    for (long r = 0; r < ROUNDS; r++) {
        if (!pairs_round(c, p, k, r, ORDER_FORWARD))
            break;
        if (c->rank == RECEIVER) {
            usleep(5000); /* inactive now: the sender may run ahead into round r + 1 meanwhile */
            int bad = 0;
            for (int i = 0; i < k && !bad; i++) {
                long w = cf_bad_word(p[i].buf, 0, p[i].words, r * k + i);
                if (w >= 0) {
                    cf_set(c, V_FAIL, "round %ld request %d: word %ld of the inactive receive buffer holds %s "
                                      "(written after completion, before the next MPI_Start)",
                           r, i, w, cf_word_story_k(p[i].buf[w], r * k + i, (size_t)w, k));
                    bad = 1;
                }
            }
            if (bad) {
                c->wedged = 1; /* the sender's next round may be half delivered */
                break;
            }
        }
    }
    pair_free(c, p, k);
    free(p);
}

void check_pready_nonblocking(cf *c, const hmb_point *pt)
{
    (void)pt;
    const int parts = 4;
    const size_t words = 64 * 1024; /* 512 KB: large enough for a rendezvous protocol */
    const double delay_s = (double)HMB_OPTS(conform_opts, c->ctx)->delay * 1e-9;
    pside p;
    pair_init(c, &p, parts, parts, words, TAG_DATA);
    MPI_Barrier(c->comm);
    if (c->rank == SENDER) {
        cf_fill(p.buf, 0, words, 0);
        MPI_Start(&p.req);
        double worst = 0;
        int worst_i = 0;
        for (int i = 0; i < parts; i++) {
            double t = hmb_now();
            MPI_Pready(i, p.req);
            t = hmb_now() - t;
            if (t > worst) {
                worst = t;
                worst_i = i;
            }
        }
        if (cf_complete(c, 1, &p.req, "partitioned send") && worst > delay_s / 2)
            cf_set(c, V_FAIL, "MPI_Pready(%d) took %.1f ms while the receiver delayed its MPI_Start by %.0f ms "
                              "(it waited for the receiver)", worst_i, worst * 1e3, delay_s * 1e3);
        else if (!c->wedged)
            cf_set(c, V_PASS, "longest MPI_Pready %.3f ms while the receiver delayed MPI_Start by %.0f ms", worst * 1e3,
                   delay_s * 1e3);
    } else if (c->rank == RECEIVER) {
        usleep((useconds_t)(delay_s * 1e6));
        MPI_Start(&p.req);
        if (cf_complete(c, 1, &p.req, "partitioned receive")) {
            long w = cf_bad_word(p.buf, 0, words, 0);
            if (w >= 0)
                cf_set(c, V_FAIL, "word %ld holds %s after completion", w, cf_word_story(p.buf[w], 0, (size_t)w));
        }
    }
    pair_free(c, &p, 1);
}

/* Receiver: poll MPI_Parrived on every partition until all reported (bounded). A partition
 * reported arrived must hold its data then; one never reported is a FAIL. */
static int poll_arrivals(cf *c, pside *p, long round)
{
    int n = p->parts;
    size_t per = p->words / (size_t)n;
    char *seen = calloc((size_t)n, 1);
    int left = n, ok = 1;
    while (left > 0 && ok) {
        for (int j = 0; j < n; j++) {
            if (seen[j])
                continue;
            int flag = 0;
            MPI_Parrived(p->req, j, &flag);
            if (!flag)
                continue;
            seen[j] = 1;
            left--;
            long w = cf_bad_word(p->buf, (size_t)j * per, (size_t)(j + 1) * per, round);
            if (w >= 0) {
                cf_set(c, V_FAIL, "MPI_Parrived reported receive partition %d arrived while its word %ld held %s "
                                  "(reported early)", j, w, cf_word_story(p->buf[w], round, (size_t)w));
                ok = 0;
                break;
            }
        }
        if (ok && left > 0 && cf_expired(c)) {
            int first = 0;
            while (seen[first])
                first++;
            cf_set(c, V_FAIL, "MPI_Parrived never reported %d of %d receive partitions (first: %d) within %.1f s "
                              "although the sender marked all ready: a polling loop would hang", left, n, first,
                   c->bound_s);
            c->wedged = 1;
            ok = 0;
        }
    }
    free(seen);
    return ok;
}

#define EARLY_WATCH_S 0.1

void check_parrived_truth(cf *c, const hmb_point *pt)
{
    (void)pt;
    const int parts = 4;
    const size_t words = 4 * 512;
    pside p;
    pair_init(c, &p, parts, parts, words, TAG_DATA);
    if (c->rank == SENDER) {
        cf_fill(p.buf, 0, words, 0);
        MPI_Start(&p.req);
        if (!cf_ctl_recv(c, RECEIVER, 1)) /* the receiver saw nothing arrive before any Pready */
            goto out;
        MPI_Pready(0, p.req);
        if (!cf_ctl_recv(c, RECEIVER, 2)) /* it saw partition 0, and only that */
            goto out;
        for (int i = 1; i < parts; i++)
            MPI_Pready(i, p.req);
        cf_complete(c, 1, &p.req, "partitioned send");
    } else if (c->rank == RECEIVER) {
        MPI_Start(&p.req);
        usleep(2000);
        for (int j = 0; j < parts; j++) {
            int flag = 0;
            MPI_Parrived(p.req, j, &flag);
            if (flag)
                cf_set(c, V_FAIL, "MPI_Parrived(%d) = true before the sender called any MPI_Pready", j);
        }
        if (!cf_ctl_send(c, SENDER, 1))
            goto out;
        /* partition 0 only, while the sender waits for our word before readying the others. The
         * standard does not require it to arrive before the rest is ready (no early delivery
         * guarantee): watch it for a while; if reported, its data must be there. */
        size_t per = words / parts;
        int early = 0;
        for (double until = hmb_now() + EARLY_WATCH_S; hmb_now() < until && !early;)
            MPI_Parrived(p.req, 0, &early);
        long w = early ? cf_bad_word(p.buf, 0, per, 0) : -1;
        if (w >= 0)
            cf_set(c, V_FAIL, "MPI_Parrived(0) = true while word %ld held %s", w, cf_word_story(p.buf[w], 0, (size_t)w));
        for (int j = 1; j < parts; j++) {
            int flag = 0;
            MPI_Parrived(p.req, j, &flag);
            if (flag)
                cf_set(c, V_FAIL, "MPI_Parrived(%d) = true before the sender's MPI_Pready(%d)", j, j);
        }
        if (!cf_ctl_send(c, SENDER, 2))
            goto out;
        if (poll_arrivals(c, &p, 0) && cf_complete(c, 1, &p.req, "partitioned receive")) {
            w = cf_bad_word(p.buf, 0, words, 0);
            if (w >= 0)
                cf_set(c, V_FAIL, "word %ld holds %s after completion", w, cf_word_story(p.buf[w], 0, (size_t)w));
        }
        cf_set(c, V_PASS, "false before MPI_Pready, true with the data after; partition 0 readied alone was %s "
                          "within %.0f ms (early delivery is allowed, not required)",
               early ? "reported" : "not reported", EARLY_WATCH_S * 1e3);
    }
out:
    pair_free(c, &p, 1);
}

/* MPI_Parrived on an inactive request: one never started, MPI_REQUEST_NULL, or one completed.
 * One state per point: a library that crashes on one still answers the others. */
void check_parrived_inactive(cf *c, const hmb_point *pt)
{
    const int state = HMB_POINT(cf_point, pt)->state;
    const char *what = state == STATE_UNSTARTED ? "never-started" : state == STATE_NULL ? "null (MPI_REQUEST_NULL)" : "completed";
    pside p;
    pair_init(c, &p, 2, 2, 64, TAG_DATA);
    int completed = state == STATE_COMPLETED;
    if (completed && !pairs_round(c, &p, 1, 0, ORDER_FORWARD)) {
        pair_free(c, &p, 1);
        return;
    }
    if (c->rank == RECEIVER) {
        MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Request null = MPI_REQUEST_NULL;
        int flag = 0, rc = MPI_Parrived(state == STATE_NULL ? null : p.req, 0, &flag);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        char text[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        if (rc != MPI_SUCCESS)
            MPI_Error_string(rc, text, &len);
        if (rc != MPI_SUCCESS)
            cf_set(c, V_FAIL, "MPI_Parrived on a %s request returned an error (%.200s); the standard says flag = true",
                   what, text);
        else
            cf_set(c, flag ? V_PASS : V_FAIL, "MPI_Parrived on a %s request: flag = %s (want true)", what,
                   flag ? "true" : "false");
    }
    /* a never-started pair is started once so nothing is left pending on either side */
    if (!completed)
        pairs_round(c, &p, 1, 0, ORDER_FORWARD);
    pair_free(c, &p, 1);
}

void check_part_counts(cf *c, const hmb_point *pt)
{
    int sp = (int)HMB_POINT(cf_point, pt)->send_partitions, rp = (int)HMB_POINT(cf_point, pt)->recv_partitions;
    /* whole words per partition on both sides */
    size_t words = (size_t)sp * (size_t)rp * 64;
    pside p;
    pair_init(c, &p, sp, rp, words, TAG_DATA);
    if (c->rank == SENDER) {
        cf_fill(p.buf, 0, words, 0);
        MPI_Start(&p.req);
        for (int i = 0; i < sp; i++) { /* gaps, so an early report meets missing data */
            usleep(2000);
            MPI_Pready(i, p.req);
        }
        cf_complete(c, 1, &p.req, "partitioned send");
    } else if (c->rank == RECEIVER) {
        MPI_Start(&p.req);
        if (poll_arrivals(c, &p, 0) && cf_complete(c, 1, &p.req, "partitioned receive")) {
            long w = cf_bad_word(p.buf, 0, words, 0);
            if (w >= 0)
                cf_set(c, V_FAIL, "word %ld holds %s after completion", w, cf_word_story(p.buf[w], 0, (size_t)w));
        }
    }
    pair_free(c, &p, 1);
}

#endif /* HMB_HAVE_PARTITIONED */
