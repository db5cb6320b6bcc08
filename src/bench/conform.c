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
 * conform.c: the framework (verdicts, bounded waits, data, the table of checks, the descriptor);
 * conform_part.c: partitioned checks; conform_threads.c: MPI + threads checks; conform.h: shared. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conform.h"

static const char *const verdict_names[] = {"PASS", "UNSUPPORTED", "FAIL"};

typedef struct {
    const char *name;
    const char *clause;
    const char *variant; /* the option whose values make one point each, or NULL */
    void (*run)(cf *c, const hmb_point *pt);
} check_def;

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
#define NCHECKS ((int)(sizeof checks / sizeof checks[0]))

static const hmb_default conform_defaults[] = {{"sizes", "0"},   {"warmup", "0"},   {"iters", "1"},
                                               {"max-iters", "1"}, {"ci-target", "0"}, {"timeout", "30s"},
                                               {NULL, NULL}};

static const hmb_metric conform_metrics[] = {
    {.name = "check_s", .unit = "s", .higher_is_better = 0, .in_table = 1, .description = "time the check took"},
    {.name = "pass", .unit = "ratio", .higher_is_better = 1, .bounds = "0..1", .in_table = 1,
     .description = "1 when the check passed, 0 when it failed (no sample when unsupported)"},
    HMB_METRIC_END};

/* One count of part-counts at *p (digits only: no sign or space), 1..65536; -1 when malformed. */
static int parse_count(const char **p)
{
    long v = 0;
    const char *q = *p;
    for (; isdigit((unsigned char)*q) && v <= 65536; q++)
        v = v * 10 + (*q - '0');
    if (q == *p || v < 1 || v > 65536)
        return -1;
    *p = q;
    return (int)v;
}

/* part-counts: "4:8,8:2" into pairs; -1 on a malformed list. */
static int parse_counts(const char *text, int (*out)[2], int max)
{
    int n = 0;
    for (const char *p = text; *p;) {
        int a = n == max ? -1 : parse_count(&p), b = a > 0 && *p++ == ':' ? parse_count(&p) : -1;
        if (b < 0)
            return -1;
        out[n][0] = a;
        out[n][1] = b;
        n++;
        if (*p == ',' && p[1])
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
    const conform_opts *o = HMB_OPTS(conform_opts, ctx);
    if (parse_counts(o->counts, pairs, MAX_COUNTS) < 1)
        hmb_usage_error(ctx, "--counts: \"%s\" is not a list of SEND:RECV partition counts (e.g. 4:8,8:2)", o->counts);
    if (o->bound <= 0)
        hmb_usage_error(ctx, "--bound: must be positive");
}

const char *const cf_order_names[] = {"reverse", "random", "threads", "range", "list", NULL};
const char *const cf_state_names[] = {"unstarted", "null", "completed", NULL};

static cf_point *add_check(hmb_point_list *out, int i)
{
    cf_point *p = hmb_points_new(out, 0);
    p->check = checks[i].name;
    p->check_index = i;
    return p;
}

/* Points in check order, except parrived-inactive on MPI_REQUEST_NULL, which goes last: it
 * crashes some libraries (MPICH 5.0.2, Intel MPI: SIGSEGV), and in one launch of several checks
 * a crash must not keep the others from running. `hmb conform` runs each check in its own launch. */
static void conform_points(hmb_ctx *ctx, hmb_point_list *out)
{
    const conform_opts *o = HMB_OPTS(conform_opts, ctx);
    unsigned long long chosen = o->check;
    int null_state = 0;
    for (int i = 0; i < NCHECKS; i++) {
        if (!(chosen & (1ull << i)))
            continue;
        const check_def *d = &checks[i];
        if (!d->variant) {
            add_check(out, i);
        } else if (strcmp(d->variant, "requests") == 0 || strcmp(d->variant, "many") == 0) {
            const hmb_ints v = strcmp(d->variant, "many") == 0 ? o->many : o->requests;
            for (int k = 0; k < v.n; k++)
                *(strcmp(d->variant, "many") == 0 ? &add_check(out, i)->partitions : &add_check(out, i)->requests) =
                    v.v[k];
        } else if (strcmp(d->variant, "counts") == 0) {
            int pairs[MAX_COUNTS][2];
            int n = parse_counts(o->counts, pairs, MAX_COUNTS);
            for (int k = 0; k < n; k++) {
                cf_point *p = add_check(out, i);
                p->send_partitions = pairs[k][0];
                p->recv_partitions = pairs[k][1];
            }
        } else { /* a CHOICES option: order, state */
            int is_order = strcmp(d->variant, "order") == 0;
            unsigned long long mask = is_order ? o->order : o->state;
            for (int k = 0; (is_order ? cf_order_names : cf_state_names)[k]; k++)
                if (!is_order && k == STATE_NULL && (mask & (1ull << k)))
                    null_state = i + 1;
                else if (mask & (1ull << k))
                    *(is_order ? &add_check(out, i)->order : &add_check(out, i)->state) = k;
        }
    }
    if (null_state)
        add_check(out, null_state - 1)->state = STATE_NULL;
}

/* The check's name with its variant, and the command that runs it alone. */
static void describe(cf *c, const hmb_point *pt)
{
    const cf_point *p = HMB_POINT(cf_point, pt);
    const char *name = p->check;
    char variant[96] = "", args[160] = "";
    if (strcmp(name, "inactive-buffer") == 0) {
        snprintf(variant, sizeof variant, " requests=%lld", p->requests);
        snprintf(args, sizeof args, " --requests %lld", p->requests);
    } else if (strcmp(name, "many-partitions") == 0) {
        snprintf(variant, sizeof variant, " partitions=%lld", p->partitions);
        snprintf(args, sizeof args, " --many %lld", p->partitions);
    } else if (strcmp(name, "part-counts") == 0) {
        snprintf(variant, sizeof variant, " %lld->%lld", p->send_partitions, p->recv_partitions);
        snprintf(args, sizeof args, " --counts %lld:%lld", p->send_partitions, p->recv_partitions);
    } else if (strcmp(name, "pready-order") == 0 || strcmp(name, "parrived-inactive") == 0) {
        const char *opt = name[1] == 'r' ? "order" : "state";
        const char *value = name[1] == 'r' ? cf_order_names[p->order] : cf_state_names[p->state];
        snprintf(variant, sizeof variant, " %s", value);
        snprintf(args, sizeof args, " --%s %s", opt, value);
    } else if (strcmp(name, "thread-level") == 0) {
        const hmb_common_opts *co = hmb_common(c->ctx);
        const char *lvl = co->given.thread_level ? hmb_thread_level_choices[co->thread_level] : "multiple";
        snprintf(variant, sizeof variant, " %s", lvl);
        snprintf(args, sizeof args, " --thread-level %s", lvl);
    }
    char extra[128] = "";
    if (hmb_threads(c->ctx) > 1)
        snprintf(extra, sizeof extra, " --threads %d", hmb_threads(c->ctx));
    if (HMB_OPTS(conform_opts, c->ctx)->given.bound)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --bound %gs",
                 (double)HMB_OPTS(conform_opts, c->ctx)->bound * 1e-9);
    if (c->silent)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --inject silent-partner");
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
    c->silent = hmb_inject_at(ctx, HMB_INJECT_SILENT_PARTNER) >= 0;
    c->bound_s = (double)HMB_OPTS(conform_opts, ctx)->bound * 1e-9;
    c->final_verdict = -1;
    MPI_Comm_dup(hmb_comm(ctx), &c->ctl);
    describe(c, pt);
    return c;
}

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
            /* hydra forwards a rank's stdout through its proxy: an abort right after the write
             * lost the whole launch's output in 2 of 5 MPICH launches; give it time */
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
    .points = conform_points,
    .setup = conform_setup,
    .iterate = conform_iterate,
    .verify = NULL,
    .teardown = conform_teardown,
    .annotate = conform_annotate,
};
HMB_REGISTER(conform_bench);
