/* conform: the partitioned checks of ordering, scale and request life: MPI_Pready's order, an
 * uninvolved rank, many partitions, restarts, freeing, multiple completion (docs/conformance.md;
 * the family's description is at the top of pattern.c). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conform.h"

#if HMB_HAVE_PARTITIONED
void check_pready_order(cf *c, const hmb_point *pt)
{
    ready_order order = (ready_order)(HMB_POINT(cf_point, pt)->order + 1); /* cf_order_names */
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
    int parts = (int)HMB_POINT(cf_point, pt)->partitions;
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

/* Median of n samples (the harness's statistics, hmb/stats.h). */
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
    int rounds = (int)HMB_OPTS(conform_opts, c->ctx)->restarts;
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
