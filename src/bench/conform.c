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

/* ------------------------------------------------------------------ verdicts and bounded waits */

void cf_set(cf *c, int verdict, const char *fmt, ...)
{
    if (verdict < c->verdict || (verdict == c->verdict && c->reason[0]))
        return; /* the first reason of the worst verdict stays */
    c->verdict = verdict;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof c->reason, fmt, ap);
    va_end(ap);
}

int cf_expired(const cf *c) { return hmb_now() > c->deadline; }

/* Poll n requests until all completed or the deadline: 1, or 0 after a FAIL naming what was
 * outstanding (the run is then wedged: its requests cannot be freed). */
int cf_complete(cf *c, int n, MPI_Request *req, const char *what)
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
        if (left > 0 && cf_expired(c)) {
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
int cf_ctl_send(cf *c, int peer, int tag)
{
    int one = 1;
    MPI_Request r;
    MPI_Isend(&one, 1, MPI_INT, peer, TAG_GO + tag, c->comm, &r);
    return cf_complete(c, 1, &r, "control message send");
}

int cf_ctl_recv(cf *c, int peer, int tag)
{
    int v = 0;
    MPI_Request r;
    MPI_Irecv(&v, 1, MPI_INT, peer, TAG_GO + tag, c->comm, &r);
    return cf_complete(c, 1, &r, "control message receive (the partner did not reach its step)");
}

/* ------------------------------------------------------------------ data */

uint64_t cf_word_of(long round, size_t w) { return hmb_mix64(((uint64_t)round << 40) ^ (uint64_t)w ^ 0x5eedull); }

void cf_fill(uint64_t *b, size_t lo, size_t hi, long round)
{
    for (size_t w = lo; w < hi; w++)
        b[w] = cf_word_of(round, w);
}

void cf_poison(uint64_t *b, size_t n)
{
    for (size_t w = 0; w < n; w++)
        b[w] = POISON;
}

/* First word of [lo, hi) that does not hold round's data, or -1. */
long cf_bad_word(const uint64_t *b, size_t lo, size_t hi, long round)
{
    for (size_t w = lo; w < hi; w++)
        if (b[w] != cf_word_of(round, w))
            return (long)w;
    return -1;
}

/* What a wrong word holds, for the message: gen is the data generation expected, stride the
 * step between one round's generation and the next (the requests per pair). */
const char *cf_word_story_k(uint64_t v, long gen, size_t w, long stride)
{
    if (v == POISON)
        return "the poison (nothing arrived)";
    if (v == cf_word_of(gen + stride, w))
        return "the next round's data";
    if (gen >= stride && v == cf_word_of(gen - stride, w))
        return "the previous round's data";
    return "other bytes";
}

const char *cf_word_story(uint64_t v, long gen, size_t w) { return cf_word_story_k(v, gen, w, 1); }

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

static const hmb_option conform_options[] = {
    {"check", HMB_OPT_CHOICES, "all", "checks to run (one point each per variant)", 0, 0,
     "inactive-buffer|pready-nonblocking|parrived-truth|parrived-inactive|part-counts|pready-order|third-rank|"
     "many-partitions|restarts|request-free|multi-completion|mt-order|info-assertions|streams|thread-level"},
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

/* Points in check order, except parrived-inactive on MPI_REQUEST_NULL, which goes last: it
 * crashes some libraries (MPICH 5.0.2, Intel MPI: SIGSEGV), and in one launch of several checks
 * a crash must not keep the others from running. `hmb conform` runs each check in its own launch. */
static void conform_points(hmb_ctx *ctx, hmb_point_list *out)
{
    unsigned long long chosen = hmb_opt_choices(ctx, "check");
    int null_state = 0;
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
                if (!is_order && k == 1 && (o & (1ull << k)))
                    null_state = 1;
                else if (o & (1ull << k)) {
                    hmb_point *pt = hmb_points_add(out, 0);
                    hmb_point_set_str(pt, "check", d->name);
                    hmb_point_set_str(pt, d->variant, is_order ? orders[k] : states[k]);
                }
        }
    }
    if (null_state) {
        hmb_point *pt = hmb_points_add(out, 0);
        hmb_point_set_str(pt, "check", "parrived-inactive");
        hmb_point_set_str(pt, "state", "null");
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
