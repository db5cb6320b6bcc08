/* conform — a conformance suite (issue 19, docs/conformance.md): each point is one check of a
 * semantic rule of the MPI standard (partitioned communication, MPI + threads), answered PASS,
 * FAIL or UNSUPPORTED with the reason, the clause it tests and the one-line command that
 * reproduces it alone (hmb_conformance_record).
 *
 * Every check is bounded: a library that stops progressing is never waited on. Requests are
 * completed by polling MPI_Test / MPI_Parrived against the check's deadline (--bound); past it
 * the check FAILs naming what was outstanding. A check that leaves requests outstanding cannot
 * clean up (freeing or finalising could hang): after its record is written the run ends with
 * MPI_Abort. The verdicts of all ranks meet on rank 0 by nonblocking messages, bounded too.
 *
 * Rank 1 sends, rank 0 receives (as scripts/repro/partitioned_rounds.c); other ranks only report
 * their verdict (the third-rank check needs one that creates no partitioned request). Data is
 * validated word by word: word w of round r holds hmb_mix64(r, w), receive buffers are poisoned
 * before every start.
 *
 * Here: the table of checks, running one and gathering every rank's verdict, the record and the
 * descriptor; setup.c: option checks, points, a check's name and reproducer; verify.c: verdicts,
 * bounded waits, the data; checks_part.c, checks_rounds.c, checks_threads.c: the checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conform.h"

static const char *const verdict_names[] = {"PASS", "UNSUPPORTED", "FAIL"};

/* ------------------------------------------------------------------ the table of checks */

#if HMB_HAVE_PARTITIONED
#define PART(fn) fn
#else
#define PART(fn) NULL
#endif

static const check_def checks[] = {
    {"inactive-buffer", "MPI 4.1 §4.1 and §3.9: a completed partitioned receive is inactive until the next MPI_Start; "
                        "its buffer belongs to the application and the library must not write it",
     "requests", PART(check_inactive_buffer)},
    {"pready-nonblocking", "MPI 4.1 §4.2.1: MPI_PREADY is a local procedure (it returns without waiting for the "
                           "receiver to start)",
     NULL, PART(check_pready_nonblocking)},
    {"parrived-truth", "MPI 4.1 §4.2.2: MPI_PARRIVED sets flag = true only when the partition's data has arrived, "
                       "and, called repeatedly after the send started and the partition was marked ready, eventually",
     NULL, PART(check_parrived_truth)},
    {"parrived-inactive", "MPI 4.0/4.1 §4.2.2: MPI_PARRIVED may be called with a null or inactive request; in either "
                          "case it returns flag = true",
     "state", PART(check_parrived_inactive)},
    {"part-counts", "MPI 4.1 §4.1: send and receive partition counts may differ when the type signatures of the "
                    "whole messages match; MPI_PARRIVED answers for the receive partitions (§4.2.2)",
     "counts", PART(check_part_counts)},
    {"pready-order", "MPI 4.1 §4.2.1: partitions may be marked ready in any order, and under MPI_THREAD_MULTIPLE "
                     "from several threads at once; MPI_PREADY_RANGE/LIST act as MPI_PREADY on each listed partition",
     "order", PART(check_pready_order)},
    {"third-rank", "MPI 4.1 §4.1 and §2.9 (progress): a partitioned operation involves its two processes only; a "
                   "process that creates no partitioned request cannot be required for it to complete",
     NULL, PART(check_third_rank)},
    {"many-partitions", "MPI 4.1 §4.2: partitions is any non-negative int; every count transfers the data",
     "many", PART(check_many_partitions)},
    {"restarts", "MPI 4.1 §3.9 and §4.1: a persistent partitioned request may be started any number of times; a "
                 "started send is not complete before all its MPI_PREADY calls",
     NULL, PART(check_restarts)},
    {"request-free", "MPI 4.1 §3.7.3: MPI_REQUEST_FREE of an inactive (never started, or completed) persistent "
                     "request is allowed and leaves later operations unaffected",
     NULL, PART(check_request_free)},
    {"multi-completion", "MPI 4.1 §3.7.5: MPI_TESTALL, MPI_TESTANY and MPI_TESTSOME complete any active requests, "
                         "persistent partitioned ones among them",
     NULL, PART(check_multi_completion)},
    {"mt-order", "MPI 4.1 §3.5 (non-overtaking: one thread's messages with the same source, communicator and tag "
                 "match in order) and §11.6 (MPI_THREAD_MULTIPLE: concurrent calls as in some serial order)",
     NULL, check_mt_order},
    {"info-assertions", "MPI 4.1 §7.4.4: mpi_assert_no_any_tag, mpi_assert_no_any_source, "
                        "mpi_assert_allow_overtaking are valid communicator info keys; MPI_COMM_GET_INFO returns the "
                        "hints in use",
     NULL, check_info_assertions},
    {"streams", "MPICH extension MPIX_Stream_comm_create (MPI 4.1 has no streams: UNSUPPORTED elsewhere)", NULL,
     check_streams},
    {"thread-level", "MPI 4.1 §11.6.2: MPI_INIT_THREAD grants a level; MPI_QUERY_THREAD returns the level granted",
     NULL, check_thread_level},
};
_Static_assert(sizeof checks / sizeof checks[0] == NCHECKS, "one row per --check name");

static const hmb_default conform_defaults[] = {{"sizes", "0"},   {"warmup", "0"},   {"iters", "1"},
                                               {"max-iters", "1"}, {"ci-target", "0"}, {"timeout", "30s"},
                                               {NULL, NULL}};

static const hmb_metric conform_metrics[] = {
    {.name = "check_s", .unit = "s", .higher_is_better = 0, .in_table = 1, .description = "time the check took"},
    {.name = "pass", .unit = "ratio", .higher_is_better = 1, .bounds = "0..1", .in_table = 1,
     .description = "1 when the check passed, 0 when it failed (no sample when unsupported)"},
    HMB_METRIC_END};

typedef struct {
    int verdict, wedged;
    char reason[REASON_LEN];
} rank_outcome;

/* Every rank's outcome onto rank 0 (bounded, point to point so rank 0 can name a rank that never
 * reported): the worst verdict, its reasons, wedged if any rank is. Returns 0 when the outcomes
 * did not all arrive in time (then wedged). */
static int gather_outcomes(cf *c, int *verdict, int *wedged, char *reason, size_t len)
{
    enum { TAG_OUTCOME = 1 };
    rank_outcome mine = {c->verdict, c->wedged, ""}, *all = NULL;
    snprintf(mine.reason, sizeof mine.reason, "%s", c->reason);
    int n = c->rank == 0 ? c->size : 1;
    MPI_Request *req = malloc((size_t)n * sizeof *req);
    if (c->rank == 0) {
        all = calloc((size_t)c->size, sizeof *all);
        all[0] = mine;
        req[0] = MPI_REQUEST_NULL;
        for (int i = 1; i < c->size; i++)
            MPI_Irecv(&all[i], (int)sizeof mine, MPI_BYTE, i, TAG_OUTCOME, c->ctl, &req[i]);
    } else {
        MPI_Isend(&mine, (int)sizeof mine, MPI_BYTE, 0, TAG_OUTCOME, c->ctl, &req[0]);
    }
    char *done = calloc((size_t)n, 1);
    int left = n;
    for (double until = hmb_now() + c->bound_s + 2.0; left > 0 && hmb_now() < until;)
        for (int i = 0; i < n; i++) {
            int flag = 0;
            if (!done[i])
                MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE);
            if (!done[i] && flag) {
                done[i] = 1;
                left--;
            }
        }
    *verdict = c->verdict;
    *wedged = c->wedged || left > 0;
    snprintf(reason, len, "%s", c->reason);
    if (left > 0) {
        char who[64] = "";
        size_t w = 0;
        for (int i = 0; c->rank == 0 && i < n && w < sizeof who - 8; i++)
            if (!done[i])
                w += (size_t)snprintf(who + w, sizeof who - w, "%s%d", w ? "," : "", i);
        snprintf(reason, len, "rank %d: %s%s did not report within %.1f s (stuck inside the library)%s%s", c->rank,
                 c->rank == 0 ? "rank(s) " : "rank 0", who, c->bound_s + 2.0, c->reason[0] ? "; " : "", c->reason);
        *verdict = V_FAIL;
    } else if (c->rank == 0) {
        int worst = V_PASS;
        for (int i = 0; i < c->size; i++) {
            worst = all[i].verdict > worst ? all[i].verdict : worst;
            *wedged |= all[i].wedged;
        }
        size_t k = 0;
        reason[0] = '\0';
        for (int i = 0; i < c->size && k < len; i++)
            if (all[i].verdict == worst && all[i].reason[0] && !strstr(reason, all[i].reason))
                k += (size_t)snprintf(reason + k, len - k, "%s%s", k ? "; " : "", all[i].reason);
        *verdict = worst;
    }
    free(done);
    free(req);
    free(all);
    return left == 0;
}

static int conform_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    (void)iter;
    cf *c = state;
    const check_def *d = &checks[HMB_POINT(cf_point, pt)->check_index];
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
            /* hydra forwards a rank's stdout through its proxy, and an abort right after the write
             * can lose the launch's output (docs/findings.md): give it time */
            usleep(300 * 1000);
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
    const check_def *d = &checks[HMB_POINT(cf_point, pt)->check_index];
    hmb_result_add_str(ctx, "verdict", verdict_names[c->final_verdict]);
    hmb_conformance_record(ctx, c->name, verdict_names[c->final_verdict], c->final_reason, d->clause, c->reproducer,
                           c->final_s);
}

static void conform_points_cb(hmb_ctx *ctx, hmb_point_list *out) { conform_points(ctx, out, checks); }

static const hmb_bench conform_bench = {
    .name = "conform",
    .group = "conformance",
    .summary = "conformance checks of partitioned communication and MPI + threads: PASS / FAIL / UNSUPPORTED "
               "with the clause and a one-line reproducer",
    HMB_BENCH_PARAMS(cf_point),
    HMB_BENCH_OPTIONS(conform_opts),
    .no_mock = "a check judges what the library does between two ranks (rank 1 sends, rank 0 receives): a "
               "loopback without MPI has nothing to judge",
    .defaults = conform_defaults,
    .metrics = conform_metrics,
    .thread_level = MPI_THREAD_MULTIPLE,
    .min_ranks = 2,
    .rank_multiple = 0,
    .check = conform_check,
    .points = conform_points_cb,
    .setup = conform_setup,
    .iterate = conform_iterate,
    .verify = NULL,
    .teardown = conform_teardown,
    .annotate = conform_annotate,
};
HMB_REGISTER(conform_bench);
