/* conform: the partitioned checks (docs/conformance.md; the family's description is at the top
 * of conform.c). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conform.h"
#include "core.h" /* hmb_summarize */

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
#define ROUNDS 5
#define INACTIVE_WORDS 128 /* 1 KB per request, as scripts/repro/partitioned_rounds.c */

void check_inactive_buffer(cf *c, const hmb_point *pt)
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
    const double delay_s = (double)hmb_opt_duration_ns(c->ctx, "delay") * 1e-9;
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

void check_part_counts(cf *c, const hmb_point *pt)
{
    int sp = (int)hmb_point_int(pt, "send_partitions"), rp = (int)hmb_point_int(pt, "recv_partitions");
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

void check_pready_order(cf *c, const hmb_point *pt)
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

void check_third_rank(cf *c, const hmb_point *pt)
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

void check_many_partitions(cf *c, const hmb_point *pt)
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
#define SLOWDOWN_MIN_S 20e-6 /* below this difference a ratio of two tiny medians is noise */
#define TREND_WINDOW 100

void check_restarts(cf *c, const hmb_point *pt)
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
            cf_fill(p.buf, 0, p.words, r);
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
        else if (late > SLOWDOWN_BOUND * early && late - early > SLOWDOWN_MIN_S)
            cf_set(c, V_FAIL, "rank %d: the last %d rounds took %.1f us (median), the first %.1f us: %.1fx slower "
                              "(bound %.0fx and %.0f us)", c->rank, TREND_WINDOW, late * 1e6, early * 1e6, late / early,
                   SLOWDOWN_BOUND, SLOWDOWN_MIN_S * 1e6);
        else if (c->rank == RECEIVER)
            cf_set(c, V_PASS, "%d restarts; median round %.1f us early, %.1f us late; resident memory %+ld kB", rounds,
                   early * 1e6, late * 1e6, growth);
    }
    free(t);
    pair_free(c, &p, 1);
}

void check_request_free(cf *c, const hmb_point *pt)
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
                 "pair on the same tag failed: %.480s", was);
    }
    pair_free(c, &p, 1); /* frees the completed (inactive) one */
}
/* MPI 4.1 §3.7.5: the multiple-completion calls complete any active requests, partitioned ones
 * among them. Rounds of a partitioned pair and a plain message, each round completed on both
 * sides by one call (MPI_Testall, then MPI_Testany, then MPI_Testsome), errors returned. */
#define MULTI_K 2
static const char *const multi_calls[] = {"MPI_Testall", "MPI_Testany", "MPI_Testsome"};

static void multi_error(cf *c, int call, int rc, const MPI_Status *st, int n, const char *side)
{
    char text[MPI_MAX_ERROR_STRING] = "", in[MPI_MAX_ERROR_STRING + 48] = "";
    int len = 0, cls = 0;
    MPI_Error_string(rc, text, &len);
    MPI_Error_class(rc, &cls);
    if (cls == MPI_ERR_IN_STATUS) {
        int j = 0;
        while (j < n && st[j].MPI_ERROR == MPI_SUCCESS)
            j++;
        if (j == n)
            snprintf(in, sizeof in, "; every status's MPI_ERROR is MPI_SUCCESS");
        else {
            char e[MPI_MAX_ERROR_STRING] = "";
            MPI_Error_string(st[j].MPI_ERROR, e, &len);
            snprintf(in, sizeof in, "; status %d: %.200s", j, e);
        }
    }
    cf_set(c, V_FAIL, "rank %d: %s on %d active %s requests (one partitioned) returned an error (%.200s%s)", c->rank,
           multi_calls[call], n, side, text, in);
}

/* Complete reqs with multi_calls[call], bounded; 1 when all completed. */
static int multi_complete(cf *c, int call, MPI_Request *reqs, const char *side)
{
    MPI_Status st[MULTI_K];
    int idx[MULTI_K], left = MULTI_K;
    for (int j = 0; j < MULTI_K; j++)
        st[j].MPI_ERROR = MPI_SUCCESS;
    while (left > 0) {
        int rc, flag = 0, n = 0, i = 0;
        if (call == 0) {
            rc = MPI_Testall(MULTI_K, reqs, &flag, st);
            if (rc == MPI_SUCCESS && flag)
                left = 0;
        } else if (call == 1) {
            rc = MPI_Testany(MULTI_K, reqs, &i, &flag, st);
            if (rc == MPI_SUCCESS && flag && i == MPI_UNDEFINED) {
                cf_set(c, V_FAIL, "rank %d: MPI_Testany answered 'no active request' while %d %s requests "
                                  "were active", c->rank, left, side);
                return 0;
            }
            if (rc == MPI_SUCCESS && flag)
                left--;
        } else {
            rc = MPI_Testsome(MULTI_K, reqs, &n, idx, st);
            if (rc == MPI_SUCCESS && n == MPI_UNDEFINED) {
                cf_set(c, V_FAIL, "rank %d: MPI_Testsome answered 'no active request' while %d %s requests "
                                  "were active", c->rank, left, side);
                return 0;
            }
            if (rc == MPI_SUCCESS)
                left -= n;
        }
        if (rc != MPI_SUCCESS) {
            multi_error(c, call, rc, st, MULTI_K, side);
            c->wedged = 1; /* which requests completed is unknown */
            return 0;
        }
        if (left > 0 && cf_expired(c)) {
            cf_set(c, V_FAIL, "rank %d: %s: %d of %d %s requests (one partitioned) not complete after %.1f s", c->rank,
                   multi_calls[call], left, MULTI_K, side, c->bound_s);
            c->wedged = 1;
            return 0;
        }
    }
    return 1;
}

void check_multi_completion(cf *c, const hmb_point *pt)
{
    (void)pt;
    /* one partitioned pair and one plain message per round: two partitioned pairs between the
     * same ranks meet Open MPI's inactive-buffer defect, which is not this check's business */
    pside p;
    pair_init(c, &p, 4, 4, 256, TAG_DATA);
    if (c->rank != SENDER && c->rank != RECEIVER)
        return;
    const char *side = c->rank == SENDER ? "send" : "receive";
    uint64_t plain[64];
    /* errors return (MPICH raises a partitioned request's error on MPI_COMM_WORLD, not its communicator) */
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int ok = 1;
    for (int call = 0; call < 3 && ok; call++) {
        MPI_Request reqs[MULTI_K];
        if (c->rank == SENDER) {
            cf_fill(p.buf, 0, p.words, 2 * call);
            cf_fill(plain, 0, 64, 2 * call + 1);
        } else {
            cf_poison(p.buf, p.words);
            cf_poison(plain, 64);
        }
        reqs[0] = p.req;
        MPI_Start(&reqs[0]);
        if (c->rank == SENDER) {
            ready_all(c, &p, ORDER_FORWARD, call);
            MPI_Isend(plain, 64, MPI_UINT64_T, RECEIVER, TAG_DATA + 1, c->comm, &reqs[1]);
        } else {
            MPI_Irecv(plain, 64, MPI_UINT64_T, SENDER, TAG_DATA + 1, c->comm, &reqs[1]);
        }
        ok = multi_complete(c, call, reqs, side);
        p.req = reqs[0];
        if (ok && c->rank == RECEIVER) {
            long w = cf_bad_word(p.buf, 0, p.words, 2 * call), v = cf_bad_word(plain, 0, 64, 2 * call + 1);
            if (w >= 0 || v >= 0) {
                cf_set(c, V_FAIL, "completed by %s: the %s message's word %ld holds %s", multi_calls[call],
                       w >= 0 ? "partitioned" : "plain", w >= 0 ? w : v,
                       w >= 0 ? cf_word_story(p.buf[w], 2 * call, (size_t)w) : cf_word_story(plain[v], 2 * call + 1, (size_t)v));
                ok = 0;
            }
        }
        /* the sender starts the next round only after the receiver checked this one */
        if (ok)
            ok = c->rank == RECEIVER ? cf_ctl_send(c, SENDER, call) : cf_ctl_recv(c, RECEIVER, call);
    }
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    if (ok && c->rank == RECEIVER)
        cf_set(c, V_PASS, "MPI_Testall, MPI_Testany and MPI_Testsome each completed a partitioned and a plain request "
                          "per side, data checked");
    pair_free(c, &p, 1);
}
#endif /* HMB_HAVE_PARTITIONED */
