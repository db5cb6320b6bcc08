/* conform — a conformance suite (issue 19, docs/conformance.md): each point is one check of a
 * semantic rule of the MPI standard (partitioned communication, MPI + threads), answered PASS,
 * FAIL or UNSUPPORTED with the reason, the clause it tests and the one-line command that
 * reproduces it alone (hmb_conformance_record).
 *
 * Every check is bounded: a library that stops progressing is never waited on. Requests are
 * completed by polling MPI_Test / MPI_Parrived against the check's deadline (--bound); past it
 * the check FAILs naming what was outstanding. A check that leaves requests outstanding cannot
 * clean up (freeing or finalising could hang): after its record is written the run ends with
 * MPI_Abort. The verdicts of all ranks meet on rank 0 by a nonblocking gather, bounded too.
 *
 * Rank 0 sends, rank 1 receives; other ranks only take part in the gather (the third-rank check
 * needs one that creates no partitioned request). Data is validated word by word: word w of
 * round r holds hmb_mix64(r, w), receive buffers are poisoned before every start. */
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h" /* hmb_summarize */
#include "hmb/hmb.h"

enum { SENDER = 1, RECEIVER = 0 }; /* as scripts/repro/partitioned_rounds.c */
enum { V_PASS, V_UNSUPPORTED, V_FAIL }; /* ordered: the worst verdict of the ranks wins */
static const char *const verdict_names[] = {"PASS", "UNSUPPORTED", "FAIL"};
enum { TAG_DATA = 7, TAG_GO = 100 };
#define POISON 0xA5A5A5A5A5A5A5A5ull
#define REASON_LEN 600

typedef enum { ORDER_FORWARD, ORDER_REVERSE, ORDER_RANDOM, ORDER_THREADS, ORDER_RANGE, ORDER_LIST } ready_order;

typedef struct {
    hmb_ctx *ctx;
    MPI_Comm comm; /* the check's messages (a fresh duplicate per point) */
    MPI_Comm ctl;  /* verdict gather: never matches a check's message */
    int rank, size, silent;
    double t0, deadline, bound_s;
    int verdict, wedged;
    char reason[REASON_LEN];
    /* rank 0, the worst outcome over the point's iterations */
    int final_verdict;
    double final_s;
    char final_reason[4 * REASON_LEN];
    char name[128], reproducer[512];
} cf;

typedef struct {
    const char *name;
    const char *clause;
    const char *variant; /* the option whose values make one point each, or NULL */
    int partitioned;     /* needs MPI_Psend_init/MPI_Parrived */
    void (*run)(cf *c, const hmb_point *pt);
} check_def;

/* ------------------------------------------------------------------ verdicts and bounded waits */

static void cf_set(cf *c, int verdict, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void cf_set(cf *c, int verdict, const char *fmt, ...)
{
    if (verdict < c->verdict || (verdict == c->verdict && c->reason[0]))
        return; /* the first reason of the worst verdict stays */
    c->verdict = verdict;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof c->reason, fmt, ap);
    va_end(ap);
}

static int expired(const cf *c) { return hmb_now() > c->deadline; }

/* Poll n requests until all completed or the deadline: 1, or 0 after a FAIL naming what was
 * outstanding (the run is then wedged: its requests cannot be freed). */
static int cf_complete(cf *c, int n, MPI_Request *req, const char *what)
{
    int left = n;
    char *done = calloc((size_t)n, 1);
    while (left > 0) {
        for (int i = 0; i < n; i++) {
            if (done[i])
                continue;
            int flag = 0;
            MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE);
            if (flag) {
                done[i] = 1;
                left--;
            }
        }
        if (left > 0 && expired(c)) {
            char list[160] = "";
            size_t len = 0;
            for (int i = 0; i < n && len < sizeof list - 12; i++)
                if (!done[i])
                    len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? "," : "", i);
            cf_set(c, V_FAIL, "rank %d: %s: %d of %d request(s) not complete after %.1f s (outstanding: %s); "
                              "the library stopped progressing", c->rank, what, left, n, c->bound_s, list);
            c->wedged = 1;
            free(done);
            return 0;
        }
    }
    free(done);
    return 1;
}

/* A control message between the pair (bounded both ways). */
static int ctl_send(cf *c, int peer, int tag)
{
    int one = 1;
    MPI_Request r;
    MPI_Isend(&one, 1, MPI_INT, peer, TAG_GO + tag, c->comm, &r);
    return cf_complete(c, 1, &r, "control message send");
}

static int ctl_recv(cf *c, int peer, int tag)
{
    int v = 0;
    MPI_Request r;
    MPI_Irecv(&v, 1, MPI_INT, peer, TAG_GO + tag, c->comm, &r);
    return cf_complete(c, 1, &r, "control message receive (the partner did not reach its step)");
}

/* ------------------------------------------------------------------ data */

static uint64_t word_of(long round, size_t w) { return hmb_mix64(((uint64_t)round << 40) ^ (uint64_t)w ^ 0x5eedull); }

static void fill_words(uint64_t *b, size_t lo, size_t hi, long round)
{
    for (size_t w = lo; w < hi; w++)
        b[w] = word_of(round, w);
}

static void poison_words(uint64_t *b, size_t n)
{
    for (size_t w = 0; w < n; w++)
        b[w] = POISON;
}

/* First word of [lo, hi) that does not hold round's data, or -1. */
static long bad_word(const uint64_t *b, size_t lo, size_t hi, long round)
{
    for (size_t w = lo; w < hi; w++)
        if (b[w] != word_of(round, w))
            return (long)w;
    return -1;
}

/* What a wrong word holds, for the message: gen is the data generation expected, stride the
 * step between one round's generation and the next (the requests per pair). */
static const char *word_story_k(uint64_t v, long gen, size_t w, long stride)
{
    if (v == POISON)
        return "the poison (nothing arrived)";
    if (v == word_of(gen + stride, w))
        return "the next round's data";
    if (gen >= stride && v == word_of(gen - stride, w))
        return "the previous round's data";
    return "other bytes";
}

static const char *word_story(uint64_t v, long gen, size_t w) { return word_story_k(v, gen, w, 1); }

/* ------------------------------------------------------------------ a partitioned pair */

typedef struct {
    MPI_Request req;
    uint64_t *buf;
    int parts;    /* this side's partition count */
    size_t words; /* whole message */
    int active;
} pside;

#if HMB_HAVE_PARTITIONED
static void pair_init(cf *c, pside *p, int send_parts, int recv_parts, size_t words, int tag)
{
    memset(p, 0, sizeof *p);
    p->req = MPI_REQUEST_NULL;
    p->words = words;
    if (c->rank != SENDER && c->rank != RECEIVER)
        return;
    p->buf = malloc(words * sizeof *p->buf);
    if (!p->buf)
        abort();
    poison_words(p->buf, words);
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
static void pair_free(cf *c, pside *p, int n)
{
    for (int i = 0; i < n; i++) {
        if (!c->wedged && p[i].req != MPI_REQUEST_NULL)
            MPI_Request_free(&p[i].req);
        if (!c->wedged)
            free(p[i].buf);
    }
}

/* Mark every send partition ready in the given order (the sender's side of a round). */
static void ready_all(cf *c, pside *p, ready_order order, long round)
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
static int pairs_round(cf *c, pside *p, int k, long round, ready_order order)
{
    if (c->rank != SENDER && c->rank != RECEIVER)
        return 1;
    MPI_Request *reqs = malloc((size_t)k * sizeof *reqs);
    for (int i = 0; i < k; i++) {
        if (c->rank == SENDER)
            fill_words(p[i].buf, 0, p[i].words, round * k + i);
        else
            poison_words(p[i].buf, p[i].words);
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
        long w = bad_word(p[i].buf, 0, p[i].words, round * k + i);
        if (w >= 0) {
            size_t per = p[i].words / (size_t)p[i].parts;
            cf_set(c, V_FAIL, "round %ld request %d: receive partition %ld word %ld holds %s after completion", round,
                   i, w / (long)per, w, word_story_k(p[i].buf[w], round * k + i, (size_t)w, k));
            if (p[i].buf[w] == word_of((round + 1) * k + i, (size_t)w))
                c->wedged = 1; /* the sender is a round ahead: its requests may never complete now */
            return 0;
        }
    }
    return 1;
}
#endif

/* ------------------------------------------------------------------ partitioned checks */

#if HMB_HAVE_PARTITIONED
#define ROUNDS 5
#define INACTIVE_WORDS 128 /* 1 KB per request, as scripts/repro/partitioned_rounds.c */

static void check_inactive_buffer(cf *c, const hmb_point *pt)
{
    int k = (int)hmb_point_int(pt, "requests");
    pside *p = calloc((size_t)k, sizeof *p);
    for (int i = 0; i < k; i++)
        pair_init(c, &p[i], 1, 1, INACTIVE_WORDS, TAG_DATA + i);
    if (c->silent && c->rank == RECEIVER) { /* TEST ONLY: the partner never posts its side */
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
                long w = bad_word(p[i].buf, 0, p[i].words, r * k + i);
                if (w >= 0) {
                    cf_set(c, V_FAIL, "round %ld request %d: word %ld of the inactive receive buffer holds %s "
                                      "(written after completion, before the next MPI_Start)",
                           r, i, w, word_story_k(p[i].buf[w], r * k + i, (size_t)w, k));
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

static void check_pready_nonblocking(cf *c, const hmb_point *pt)
{
    (void)pt;
    const int parts = 4;
    const size_t words = 64 * 1024; /* 512 KB: large enough for a rendezvous protocol */
    const double delay_s = (double)hmb_opt_duration_ns(c->ctx, "delay") * 1e-9;
    pside p;
    pair_init(c, &p, parts, parts, words, TAG_DATA);
    MPI_Barrier(c->comm);
    if (c->rank == SENDER) {
        fill_words(p.buf, 0, words, 0);
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
            long w = bad_word(p.buf, 0, words, 0);
            if (w >= 0)
                cf_set(c, V_FAIL, "word %ld holds %s after completion", w, word_story(p.buf[w], 0, (size_t)w));
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
            long w = bad_word(p->buf, (size_t)j * per, (size_t)(j + 1) * per, round);
            if (w >= 0) {
                cf_set(c, V_FAIL, "MPI_Parrived reported receive partition %d arrived while its word %ld held %s "
                                  "(reported early)", j, w, word_story(p->buf[w], round, (size_t)w));
                ok = 0;
                break;
            }
        }
        if (ok && left > 0 && expired(c)) {
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

static void check_parrived_truth(cf *c, const hmb_point *pt)
{
    (void)pt;
    const int parts = 4;
    const size_t words = 4 * 512;
    pside p;
    pair_init(c, &p, parts, parts, words, TAG_DATA);
    if (c->rank == SENDER) {
        fill_words(p.buf, 0, words, 0);
        MPI_Start(&p.req);
        if (!ctl_recv(c, RECEIVER, 1)) /* the receiver saw nothing arrive before any Pready */
            goto out;
        MPI_Pready(0, p.req);
        if (!ctl_recv(c, RECEIVER, 2)) /* it saw partition 0, and only that */
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
        if (!ctl_send(c, SENDER, 1))
            goto out;
        /* partition 0 only, while the sender waits for our word before readying the others. The
         * standard does not require it to arrive before the rest is ready (no early delivery
         * guarantee): watch it for a while; if reported, its data must be there. */
        size_t per = words / parts;
        int early = 0;
        for (double until = hmb_now() + EARLY_WATCH_S; hmb_now() < until && !early;)
            MPI_Parrived(p.req, 0, &early);
        long w = early ? bad_word(p.buf, 0, per, 0) : -1;
        if (w >= 0)
            cf_set(c, V_FAIL, "MPI_Parrived(0) = true while word %ld held %s", w, word_story(p.buf[w], 0, (size_t)w));
        for (int j = 1; j < parts; j++) {
            int flag = 0;
            MPI_Parrived(p.req, j, &flag);
            if (flag)
                cf_set(c, V_FAIL, "MPI_Parrived(%d) = true before the sender's MPI_Pready(%d)", j, j);
        }
        if (!ctl_send(c, SENDER, 2))
            goto out;
        if (poll_arrivals(c, &p, 0) && cf_complete(c, 1, &p.req, "partitioned receive")) {
            w = bad_word(p.buf, 0, words, 0);
            if (w >= 0)
                cf_set(c, V_FAIL, "word %ld holds %s after completion", w, word_story(p.buf[w], 0, (size_t)w));
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
static void check_parrived_inactive(cf *c, const hmb_point *pt)
{
    const char *state = hmb_point_str(pt, "state");
    const char *what = strcmp(state, "unstarted") == 0 ? "never-started" : strcmp(state, "null") == 0 ? "null (MPI_REQUEST_NULL)" : "completed";
    pside p;
    pair_init(c, &p, 2, 2, 64, TAG_DATA);
    int completed = strcmp(state, "completed") == 0;
    if (completed && !pairs_round(c, &p, 1, 0, ORDER_FORWARD)) {
        pair_free(c, &p, 1);
        return;
    }
    if (c->rank == RECEIVER) {
        MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Request null = MPI_REQUEST_NULL;
        int flag = 0, rc = MPI_Parrived(strcmp(state, "null") == 0 ? null : p.req, 0, &flag);
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

static void check_part_counts(cf *c, const hmb_point *pt)
{
    int sp = (int)hmb_point_int(pt, "send_partitions"), rp = (int)hmb_point_int(pt, "recv_partitions");
    /* whole words per partition on both sides */
    size_t words = (size_t)sp * (size_t)rp * 64;
    pside p;
    pair_init(c, &p, sp, rp, words, TAG_DATA);
    if (c->rank == SENDER) {
        fill_words(p.buf, 0, words, 0);
        MPI_Start(&p.req);
        for (int i = 0; i < sp; i++) { /* gaps, so an early report meets missing data */
            usleep(2000);
            MPI_Pready(i, p.req);
        }
        cf_complete(c, 1, &p.req, "partitioned send");
    } else if (c->rank == RECEIVER) {
        MPI_Start(&p.req);
        if (poll_arrivals(c, &p, 0) && cf_complete(c, 1, &p.req, "partitioned receive")) {
            long w = bad_word(p.buf, 0, words, 0);
            if (w >= 0)
                cf_set(c, V_FAIL, "word %ld holds %s after completion", w, word_story(p.buf[w], 0, (size_t)w));
        }
    }
    pair_free(c, &p, 1);
}

static ready_order order_of(const char *name)
{
    if (strcmp(name, "reverse") == 0)
        return ORDER_REVERSE;
    if (strcmp(name, "random") == 0)
        return ORDER_RANDOM;
    if (strcmp(name, "range") == 0)
        return ORDER_RANGE;
    if (strcmp(name, "list") == 0)
        return ORDER_LIST;
    return ORDER_THREADS;
}

static void check_pready_order(cf *c, const hmb_point *pt)
{
    ready_order order = order_of(hmb_point_str(pt, "order"));
    int threads = hmb_threads(c->ctx);
    if (order == ORDER_THREADS && threads > 1 && hmb_thread_level_provided(c->ctx) < MPI_THREAD_MULTIPLE) {
        cf_set(c, V_UNSUPPORTED, "%d threads call MPI_Pready at once: needs MPI_THREAD_MULTIPLE, granted %s", threads,
               hmb_thread_level_name(hmb_thread_level_provided(c->ctx)));
        return;
    }
#ifndef HMB_HAVE_MPI_PREADY_RANGE
    if (order == ORDER_RANGE) {
        cf_set(c, V_UNSUPPORTED, "this MPI library has no MPI_Pready_range");
        return;
    }
#endif
#ifndef HMB_HAVE_MPI_PREADY_LIST
    if (order == ORDER_LIST) {
        cf_set(c, V_UNSUPPORTED, "this MPI library has no MPI_Pready_list");
        return;
    }
#endif
    const int parts = 64;
    pside p;
    pair_init(c, &p, parts, parts, (size_t)parts * 16, TAG_DATA);
    for (long r = 0; r < ROUNDS; r++)
        if (!pairs_round(c, &p, 1, r, order))
            break;
    pair_free(c, &p, 1);
}

static void check_third_rank(cf *c, const hmb_point *pt)
{
    (void)pt;
    if (c->size < 3) {
        cf_set(c, V_UNSUPPORTED, "needs 3 ranks (got %d): run it with -n 3", c->size);
        return;
    }
    pside p;
    pair_init(c, &p, 4, 4, 4 * 128, TAG_DATA); /* ranks 2.. create nothing */
    for (long r = 0; r < 2; r++)
        if (!pairs_round(c, &p, 1, r, ORDER_FORWARD))
            break;
    pair_free(c, &p, 1);
}

static void check_many_partitions(cf *c, const hmb_point *pt)
{
    int parts = (int)hmb_point_int(pt, "partitions");
    pside p;
    double t = hmb_now();
    pair_init(c, &p, parts, parts, (size_t)parts, TAG_DATA); /* one word per partition */
    for (long r = 0; r < 2; r++)
        if (!pairs_round(c, &p, 1, r, ORDER_FORWARD))
            break;
    if (c->rank == RECEIVER)
        cf_set(c, V_PASS, "%d partitions, 2 rounds in %.3f s", parts, hmb_now() - t);
    pair_free(c, &p, 1);
}

/* Median of n samples (the harness's statistics, core.h). */
static double median_of(const double *x, int n)
{
    hmb_summary sm;
    hmb_summarize(x, n, 0.95, &sm);
    return sm.median;
}

#define RSS_GROWTH_BOUND_KB (16 * 1024)
#define SLOWDOWN_BOUND 3.0
#define TREND_WINDOW 100

static void check_restarts(cf *c, const hmb_point *pt)
{
    (void)pt;
    int rounds = (int)hmb_opt_int(c->ctx, "restarts");
    pside p;
    pair_init(c, &p, 4, 4, 4 * 512, TAG_DATA);
    double *t = calloc((size_t)rounds, sizeof *t);
    long rss_early = -1, rss_end = -1, hwm;
    int done = 0;
    for (int r = 0; r < rounds; r++) {
        if (r == TREND_WINDOW / 2)
            hmb_memory_kB(&rss_early, &hwm);
        double t0 = hmb_now();
        if (c->rank == SENDER && r > 0) {
            /* before any MPI_Pready the send cannot be complete (MPI 4.1 §4.1) */
            fill_words(p.buf, 0, p.words, r);
            MPI_Start(&p.req);
            int flag = 0;
            MPI_Test(&p.req, &flag, MPI_STATUS_IGNORE);
            if (flag) {
                cf_set(c, V_FAIL, "round %d: MPI_Test reported the partitioned send complete after MPI_Start, "
                                  "before any MPI_Pready", r);
                c->wedged = 1;
                break;
            }
            ready_all(c, &p, ORDER_FORWARD, r);
            if (!cf_complete(c, 1, &p.req, "partitioned send (restarts)"))
                break;
        } else if (!pairs_round(c, &p, 1, r, ORDER_FORWARD)) {
            break;
        }
        t[r] = hmb_now() - t0;
        done++;
    }
    hmb_memory_kB(&rss_end, &hwm);
    if (done == rounds && (c->rank == SENDER || c->rank == RECEIVER) && rounds >= 3 * TREND_WINDOW) {
        double early = median_of(t + TREND_WINDOW / 2, TREND_WINDOW);
        double late = median_of(t + rounds - TREND_WINDOW, TREND_WINDOW);
        long growth = rss_end - rss_early;
        if (rss_early >= 0 && growth > RSS_GROWTH_BOUND_KB)
            cf_set(c, V_FAIL, "rank %d: resident memory grew by %ld kB over %d restarts (bound %d kB)", c->rank,
                   growth, rounds - TREND_WINDOW / 2, RSS_GROWTH_BOUND_KB);
        else if (late > SLOWDOWN_BOUND * early)
            cf_set(c, V_FAIL, "rank %d: the last %d rounds took %.1f us (median), the first %.1f us: %.1fx slower "
                              "(bound %.0fx)", c->rank, TREND_WINDOW, late * 1e6, early * 1e6, late / early,
                   SLOWDOWN_BOUND);
        else if (c->rank == RECEIVER)
            cf_set(c, V_PASS, "%d restarts; median round %.1f us early, %.1f us late; resident memory %+ld kB", rounds,
                   early * 1e6, late * 1e6, growth);
    }
    free(t);
    pair_free(c, &p, 1);
}

static void check_request_free(cf *c, const hmb_point *pt)
{
    (void)pt;
    pside p;
    /* never started, freed; then a new pair on the same tag must still work */
    pair_init(c, &p, 2, 2, 64, TAG_DATA);
    if (p.req != MPI_REQUEST_NULL)
        MPI_Request_free(&p.req);
    free(p.buf);
    pair_init(c, &p, 2, 2, 64, TAG_DATA);
    if (!pairs_round(c, &p, 1, 0, ORDER_FORWARD) && c->verdict == V_FAIL) {
        char was[REASON_LEN];
        snprintf(was, sizeof was, "%s", c->reason);
        snprintf(c->reason, sizeof c->reason, "after MPI_Request_free of a never-started partitioned request, a new "
                 "pair on the same tag failed: %s", was);
    }
    pair_free(c, &p, 1); /* frees the completed (inactive) one */
}
#endif /* HMB_HAVE_PARTITIONED */

/* ------------------------------------------------------------------ MPI + threads */

#define MT_MSGS 200

static void check_mt_order(cf *c, const hmb_point *pt)
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

static void check_info_assertions(cf *c, const hmb_point *pt)
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
    if (c->rank == SENDER || c->rank == RECEIVER) {
        uint64_t buf[64];
        MPI_Request r;
        if (c->rank == SENDER) {
            fill_words(buf, 0, 64, 3);
            MPI_Isend(buf, 64, MPI_UINT64_T, RECEIVER, TAG_DATA, comm, &r);
        } else {
            poison_words(buf, 64);
            MPI_Irecv(buf, 64, MPI_UINT64_T, SENDER, TAG_DATA, comm, &r);
        }
        if (cf_complete(c, 1, &r, "message on the asserted communicator") && c->rank == RECEIVER) {
            long w = bad_word(buf, 0, 64, 3);
            if (w >= 0)
                cf_set(c, V_FAIL, "message on the asserted communicator: word %ld wrong", w);
        }
    }
    if (!c->wedged)
        MPI_Comm_free(&comm);
    cf_set(c, V_PASS, "accepted; MPI_Comm_get_info returns %s", got);
}

static void check_streams(cf *c, const hmb_point *pt)
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
    if (c->rank == SENDER || c->rank == RECEIVER) {
        uint64_t buf[64];
        MPI_Request r;
        if (c->rank == SENDER) {
            fill_words(buf, 0, 64, 5);
            MPI_Isend(buf, 64, MPI_UINT64_T, RECEIVER, TAG_DATA, scomm, &r);
        } else {
            poison_words(buf, 64);
            MPI_Irecv(buf, 64, MPI_UINT64_T, SENDER, TAG_DATA, scomm, &r);
        }
        if (cf_complete(c, 1, &r, "message on the stream communicator") && c->rank == RECEIVER &&
            bad_word(buf, 0, 64, 5) >= 0)
            cf_set(c, V_FAIL, "message on the stream communicator arrived wrong");
    }
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

static void check_thread_level(cf *c, const hmb_point *pt)
{
    (void)pt;
    int provided = hmb_thread_level_provided(c->ctx), query = -1, main_thread = 0;
    const char *requested = hmb_opt_given(c->ctx, "thread-level") ? hmb_opt_str(c->ctx, "thread-level") : "multiple";
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

/* ------------------------------------------------------------------ the table of checks */

#if HMB_HAVE_PARTITIONED
#define PART(fn) fn
#else
#define PART(fn) NULL
#endif

static const check_def checks[] = {
    {"inactive-buffer", "MPI 4.1 §4.1 and §3.9: a completed partitioned receive is inactive until the next MPI_Start; "
                        "its buffer belongs to the application and the library must not write it",
     "requests", 1, PART(check_inactive_buffer)},
    {"pready-nonblocking", "MPI 4.1 §4.2.1: MPI_PREADY is a local procedure (it returns without waiting for the "
                           "receiver to start)",
     NULL, 1, PART(check_pready_nonblocking)},
    {"parrived-truth", "MPI 4.1 §4.2.2: MPI_PARRIVED sets flag = true only when the partition's data has arrived, "
                       "and, called repeatedly after the send started and the partition was marked ready, eventually",
     NULL, 1, PART(check_parrived_truth)},
    {"parrived-inactive", "MPI 4.0/4.1 §4.2.2: MPI_PARRIVED may be called with a null or inactive request; in either "
                          "case it returns flag = true",
     "state", 1, PART(check_parrived_inactive)},
    {"part-counts", "MPI 4.1 §4.1: send and receive partition counts may differ when the type signatures of the "
                    "whole messages match; MPI_PARRIVED answers for the receive partitions (§4.2.2)",
     "counts", 1, PART(check_part_counts)},
    {"pready-order", "MPI 4.1 §4.2.1: partitions may be marked ready in any order, and under MPI_THREAD_MULTIPLE "
                     "from several threads at once; MPI_PREADY_RANGE/LIST act as MPI_PREADY on each listed partition",
     "order", 1, PART(check_pready_order)},
    {"third-rank", "MPI 4.1 §4.1 and §2.9 (progress): a partitioned operation involves its two processes only; a "
                   "process that creates no partitioned request cannot be required for it to complete",
     NULL, 1, PART(check_third_rank)},
    {"many-partitions", "MPI 4.1 §4.2: partitions is any non-negative int; every count transfers the data",
     "many", 1, PART(check_many_partitions)},
    {"restarts", "MPI 4.1 §3.9 and §4.1: a persistent partitioned request may be started any number of times; a "
                 "started send is not complete before all its MPI_PREADY calls",
     NULL, 1, PART(check_restarts)},
    {"request-free", "MPI 4.1 §3.7.3: MPI_REQUEST_FREE of an inactive (never started, or completed) persistent "
                     "request is allowed and leaves later operations unaffected",
     NULL, 1, PART(check_request_free)},
    {"mt-order", "MPI 4.1 §3.5 (non-overtaking: one thread's messages with the same source, communicator and tag "
                 "match in order) and §11.6 (MPI_THREAD_MULTIPLE: concurrent calls as in some serial order)",
     NULL, 0, check_mt_order},
    {"info-assertions", "MPI 4.1 §7.4.4: mpi_assert_no_any_tag, mpi_assert_no_any_source, "
                        "mpi_assert_allow_overtaking are valid communicator info keys; MPI_COMM_GET_INFO returns the "
                        "hints in use",
     NULL, 0, check_info_assertions},
    {"streams", "MPICH extension MPIX_Stream_comm_create (MPI 4.1 has no streams: UNSUPPORTED elsewhere)", NULL, 0,
     check_streams},
    {"thread-level", "MPI 4.1 §11.6.2: MPI_INIT_THREAD grants a level; MPI_QUERY_THREAD returns the level granted",
     NULL, 0, check_thread_level},
};
#define NCHECKS ((int)(sizeof checks / sizeof checks[0]))

static const hmb_option conform_options[] = {
    {"check", HMB_OPT_CHOICES, "all", "checks to run (one point each per variant)", 0, 0,
     "inactive-buffer|pready-nonblocking|parrived-truth|parrived-inactive|part-counts|pready-order|third-rank|"
     "many-partitions|restarts|request-free|mt-order|info-assertions|streams|thread-level"},
    {"requests", HMB_OPT_INTS, "1,2,8", "inactive-buffer: partitioned requests per pair of ranks", 1, 64, NULL},
    {"counts", HMB_OPT_STRING, "4:8,8:2,3:6,6:4", "part-counts: send:receive partition counts", 0, 0, NULL},
    {"order", HMB_OPT_CHOICES, "reverse,random,threads,range,list",
     "pready-order: reverse, random, from all --threads at once, MPI_Pready_range, MPI_Pready_list", 0, 0,
     "reverse|random|threads|range|list"},
    {"state", HMB_OPT_CHOICES, "unstarted,null,completed",
     "parrived-inactive: a request never started, MPI_REQUEST_NULL, a completed request", 0, 0,
     "unstarted|null|completed"},
    {"many", HMB_OPT_INTS, "1024,65536", "many-partitions: partition counts", 1, 1 << 20, NULL},
    {"restarts", HMB_OPT_INT, "1000", "restarts: MPI_Start/complete rounds", 300, 1000000, NULL},
    {"delay", HMB_OPT_DURATION, "50ms", "pready-nonblocking: the receiver's delay before MPI_Start", 0, 0, NULL},
    {"bound", HMB_OPT_DURATION, "3s", "deadline of one check: past it a check still waiting FAILs", 0, 0, NULL,
     HMB_ROLE_RUN_CONTROL},
    {"test-silent-partner", HMB_OPT_FLAG, "0",
     "TEST ONLY: in inactive-buffer the receiver never posts its side (the check must FAIL within --bound)", 0, 0,
     NULL, HMB_ROLE_RUN_CONTROL},
    HMB_OPTION_END};

static const hmb_default conform_defaults[] = {{"sizes", "0"},   {"warmup", "0"},   {"iters", "1"},
                                               {"max-iters", "1"}, {"ci-target", "0"}, {"timeout", "30s"},
                                               {NULL, NULL}};

static const hmb_metric conform_metrics[] = {
    {.name = "check_s", .unit = "s", .higher_is_better = 0, .in_table = 1, .description = "time the check took"},
    {.name = "pass", .unit = "ratio", .higher_is_better = 1, .in_table = 1,
     .description = "1 when the check passed, 0 when it failed (no sample when unsupported)"},
    HMB_METRIC_END};

/* part-counts: "4:8,8:2" into pairs; -1 on a malformed list. */
static int parse_counts(const char *text, int (*out)[2], int max)
{
    int n = 0;
    for (const char *p = text; *p;) {
        int a, b, used = 0;
        if (n == max || sscanf(p, "%d:%d%n", &a, &b, &used) != 2 || a < 1 || b < 1 || a > 65536 || b > 65536)
            return -1;
        out[n][0] = a;
        out[n][1] = b;
        n++;
        p += used;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return n;
}

#define MAX_COUNTS 16

static void conform_check(hmb_ctx *ctx)
{
    int pairs[MAX_COUNTS][2];
    if (parse_counts(hmb_opt_str(ctx, "counts"), pairs, MAX_COUNTS) < 1)
        hmb_usage_error(ctx, "--counts: \"%s\" is not a list of SEND:RECV partition counts (e.g. 4:8,8:2)",
                        hmb_opt_str(ctx, "counts"));
    if (hmb_opt_duration_ns(ctx, "bound") <= 0)
        hmb_usage_error(ctx, "--bound: must be positive");
}

static int check_index(const char *name)
{
    for (int i = 0; i < NCHECKS; i++)
        if (strcmp(checks[i].name, name) == 0)
            return i;
    abort();
}

static void conform_points(hmb_ctx *ctx, hmb_point_list *out)
{
    unsigned long long chosen = hmb_opt_choices(ctx, "check");
    for (int i = 0; i < NCHECKS; i++) {
        if (!(chosen & (1ull << i)))
            continue;
        const check_def *d = &checks[i];
        if (!d->variant) {
            hmb_point_set_str(hmb_points_add(out, 0), "check", d->name);
        } else if (strcmp(d->variant, "requests") == 0 || strcmp(d->variant, "many") == 0) {
            int n = 0;
            const long long *v = hmb_opt_ints(ctx, d->variant, &n);
            for (int k = 0; k < n; k++) {
                hmb_point *pt = hmb_points_add(out, 0);
                hmb_point_set_str(pt, "check", d->name);
                hmb_point_set_int(pt, strcmp(d->variant, "many") == 0 ? "partitions" : "requests", v[k]);
            }
        } else if (strcmp(d->variant, "counts") == 0) {
            int pairs[MAX_COUNTS][2];
            int n = parse_counts(hmb_opt_str(ctx, "counts"), pairs, MAX_COUNTS);
            for (int k = 0; k < n; k++) {
                hmb_point *pt = hmb_points_add(out, 0);
                hmb_point_set_str(pt, "check", d->name);
                hmb_point_set_int(pt, "send_partitions", pairs[k][0]);
                hmb_point_set_int(pt, "recv_partitions", pairs[k][1]);
            }
        } else { /* a CHOICES option: order, state */
            static const char *const orders[] = {"reverse", "random", "threads", "range", "list"};
            static const char *const states[] = {"unstarted", "null", "completed"};
            int is_order = strcmp(d->variant, "order") == 0;
            unsigned long long o = hmb_opt_choices(ctx, d->variant);
            for (int k = 0; k < (is_order ? 5 : 3); k++)
                if (o & (1ull << k)) {
                    hmb_point *pt = hmb_points_add(out, 0);
                    hmb_point_set_str(pt, "check", d->name);
                    hmb_point_set_str(pt, d->variant, is_order ? orders[k] : states[k]);
                }
        }
    }
}

/* The check's name with its variant, and the command that runs it alone. */
static void describe(cf *c, const hmb_point *pt)
{
    const char *name = hmb_point_str(pt, "check");
    char variant[96] = "", args[160] = "";
    if (strcmp(name, "inactive-buffer") == 0) {
        snprintf(variant, sizeof variant, " requests=%lld", hmb_point_int(pt, "requests"));
        snprintf(args, sizeof args, " --requests %lld", hmb_point_int(pt, "requests"));
    } else if (strcmp(name, "many-partitions") == 0) {
        snprintf(variant, sizeof variant, " partitions=%lld", hmb_point_int(pt, "partitions"));
        snprintf(args, sizeof args, " --many %lld", hmb_point_int(pt, "partitions"));
    } else if (strcmp(name, "part-counts") == 0) {
        snprintf(variant, sizeof variant, " %lld->%lld", hmb_point_int(pt, "send_partitions"),
                 hmb_point_int(pt, "recv_partitions"));
        snprintf(args, sizeof args, " --counts %lld:%lld", hmb_point_int(pt, "send_partitions"),
                 hmb_point_int(pt, "recv_partitions"));
    } else if (strcmp(name, "pready-order") == 0 || strcmp(name, "parrived-inactive") == 0) {
        const char *opt = name[1] == 'r' ? "order" : "state";
        snprintf(variant, sizeof variant, " %s", hmb_point_str(pt, opt));
        snprintf(args, sizeof args, " --%s %s", opt, hmb_point_str(pt, opt));
    } else if (strcmp(name, "thread-level") == 0) {
        const char *lvl = hmb_opt_given(c->ctx, "thread-level") ? hmb_opt_str(c->ctx, "thread-level") : "multiple";
        snprintf(variant, sizeof variant, " %s", lvl);
        snprintf(args, sizeof args, " --thread-level %s", lvl);
    }
    char extra[128] = "";
    if (hmb_threads(c->ctx) > 1)
        snprintf(extra, sizeof extra, " --threads %d", hmb_threads(c->ctx));
    if (hmb_opt_given(c->ctx, "bound"))
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --bound %gs",
                 (double)hmb_opt_duration_ns(c->ctx, "bound") * 1e-9);
    if (hmb_opt_flag(c->ctx, "test-silent-partner"))
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --test-silent-partner");
    snprintf(c->name, sizeof c->name, "%s%s", name, variant);
    snprintf(c->reproducer, sizeof c->reproducer, "mpiexec -n %d hmb-bench conform --check %s%s%s", c->size, name,
             args, extra);
}

static void *conform_setup(hmb_ctx *ctx, const hmb_point *pt)
{
    cf *c = calloc(1, sizeof *c);
    if (!c)
        abort();
    c->ctx = ctx;
    c->rank = hmb_rank(ctx);
    c->size = hmb_size(ctx);
    c->silent = hmb_opt_flag(ctx, "test-silent-partner");
    c->bound_s = (double)hmb_opt_duration_ns(ctx, "bound") * 1e-9;
    c->final_verdict = -1;
    MPI_Comm_dup(hmb_comm(ctx), &c->ctl);
    describe(c, pt);
    return c;
}

typedef struct {
    int verdict, wedged;
    char reason[REASON_LEN];
} rank_outcome;

/* Every rank's outcome onto rank 0 (bounded): the worst verdict, its reasons, wedged if any
 * rank is. Returns 0 when the gather itself did not finish in time (then wedged). */
static int gather_outcomes(cf *c, int *verdict, int *wedged, char *reason, size_t len)
{
    rank_outcome mine = {c->verdict, c->wedged, ""}, *all = NULL;
    snprintf(mine.reason, sizeof mine.reason, "%s", c->reason);
    if (c->rank == 0)
        all = calloc((size_t)c->size, sizeof *all);
    MPI_Request r;
    MPI_Igather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, 0, c->ctl, &r);
    double until = hmb_now() + c->bound_s + 2.0;
    int flag = 0;
    while (!flag && hmb_now() < until)
        MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    *verdict = c->verdict;
    *wedged = c->wedged || !flag;
    snprintf(reason, len, "%s", c->reason);
    if (!flag) {
        snprintf(reason, len, "rank %d: the ranks' verdicts did not meet within %.1f s (a rank is stuck in the "
                 "library)%s%s", c->rank, c->bound_s + 2.0, c->reason[0] ? "; " : "", c->reason);
        *verdict = V_FAIL;
        free(all);
        return 0;
    }
    if (c->rank == 0) {
        int worst = V_PASS;
        for (int i = 0; i < c->size; i++) {
            worst = all[i].verdict > worst ? all[i].verdict : worst;
            *wedged |= all[i].wedged;
        }
        size_t n = 0;
        reason[0] = '\0';
        for (int i = 0; i < c->size && n < len; i++)
            if (all[i].verdict == worst && all[i].reason[0] && !strstr(reason, all[i].reason))
                n += (size_t)snprintf(reason + n, len - n, "%s%s", n ? "; " : "", all[i].reason);
        *verdict = worst;
    }
    free(all);
    return 1;
}

static int conform_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    (void)iter;
    cf *c = state;
    const check_def *d = &checks[check_index(hmb_point_str(pt, "check"))];
    c->verdict = V_PASS;
    c->wedged = 0;
    c->reason[0] = '\0';
    MPI_Comm_dup(hmb_comm(ctx), &c->comm); /* a fresh one: nothing left from another check can match */
    hmb_phase(ctx, d->name);
    c->t0 = hmb_now();
    c->deadline = c->t0 + c->bound_s;
    if (!d->run)
        cf_set(c, V_UNSUPPORTED, "this MPI library has no partitioned communication (MPI_Psend_init/MPI_Parrived)");
    else
        d->run(c, pt);
    double seconds = hmb_now() - c->t0;
    int verdict, wedged;
    char reason[sizeof c->final_reason];
    int met = gather_outcomes(c, &verdict, &wedged, reason, sizeof reason);
    if (wedged) {
        /* requests are outstanding: record, then end the run (freeing or finalising could hang).
         * Rank 0 writes the record and aborts; the others wait for that abort (a rank that aborts
         * first could kill rank 0 before its record is written), bounded in case rank 0 is stuck. */
        if (c->rank == 0 || !met) {
            if (c->rank != 0)
                fprintf(stderr, "hmb-bench conform: %s: FAIL: %s\n", c->name, reason);
            hmb_conformance_record(ctx, c->name, "FAIL", reason, d->clause, c->reproducer, seconds);
            fprintf(stderr, "hmb-bench conform: %s left requests outstanding: ending the run with MPI_Abort\n",
                    c->name);
            fflush(stderr);
        } else {
            for (double until = hmb_now() + c->bound_s + 5.0; hmb_now() < until;)
                usleep(10 * 1000);
        }
        MPI_Abort(MPI_COMM_WORLD, HMB_EXIT_VALIDATION);
    }
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_free(&c->comm);
    if (c->rank == 0 && verdict >= c->final_verdict) {
        c->final_verdict = verdict;
        c->final_s = seconds;
        snprintf(c->final_reason, sizeof c->final_reason, "%s", reason);
    }
    hmb_record(ctx, out, "check_s", seconds);
    if (verdict != V_UNSUPPORTED)
        hmb_record(ctx, out, "pass", verdict == V_PASS);
    return 0;
}

static void conform_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    cf *c = state;
    const check_def *d = &checks[check_index(hmb_point_str(pt, "check"))];
    hmb_result_add_str(ctx, "verdict", verdict_names[c->final_verdict]);
    hmb_conformance_record(ctx, c->name, verdict_names[c->final_verdict], c->final_reason, d->clause, c->reproducer,
                           c->final_s);
}

static void conform_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    (void)ctx;
    (void)pt;
    cf *c = state;
    MPI_Comm_free(&c->ctl);
    free(c);
}

static const hmb_bench conform_bench = {
    .name = "conform",
    .group = "conformance",
    .summary = "conformance checks of partitioned communication and MPI + threads: PASS / FAIL / UNSUPPORTED "
               "with the clause and a one-line reproducer",
    .options = conform_options,
    .defaults = conform_defaults,
    .metrics = conform_metrics,
    .thread_level = MPI_THREAD_MULTIPLE,
    .min_ranks = 2,
    .rank_multiple = 0,
    .check = conform_check,
    .points = conform_points,
    .setup = conform_setup,
    .iterate = conform_iterate,
    .verify = NULL,
    .teardown = conform_teardown,
    .annotate = conform_annotate,
};
HMB_REGISTER(conform_bench);
