/* conform's set-up: option checks, points (one per check and variant, in the table's order), a
 * check's name with its variant and the one-line command that reproduces it, the state of a
 * point and its teardown. The table of checks and their run: pattern.c. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conform.h"

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

void conform_check(hmb_ctx *ctx)
{
    int pairs[MAX_COUNTS][2];
    const conform_opts *o = HMB_OPTS(conform_opts, ctx);
    if (parse_counts(o->counts, pairs, MAX_COUNTS) < 1)
        hmb_usage_error(ctx, "--counts: \"%s\" is not a list of SEND:RECV partition counts (e.g. 4:8,8:2)", o->counts);
    if (o->bound <= 0)
        hmb_usage_error(ctx, "--bound: must be positive");
}

static cf_point *add_check(hmb_point_list *out, const check_def *checks, int i)
{
    cf_point *p = hmb_points_new(out, 0);
    p->check = checks[i].name;
    p->check_index = i;
    return p;
}

/* Points in check order, except parrived-inactive on MPI_REQUEST_NULL, which goes last: it
 * crashes some libraries (MPICH 5.0.2, Intel MPI: SIGSEGV), and in one launch of several checks
 * a crash must not keep the others from running. `hmb conform` runs each check in its own launch. */
void conform_points(hmb_ctx *ctx, hmb_point_list *out, const check_def *checks)
{
    const conform_opts *o = HMB_OPTS(conform_opts, ctx);
    unsigned long long chosen = o->check;
    int null_state = 0;
    for (int i = 0; i < NCHECKS; i++) {
        if (!(chosen & (1ull << i)))
            continue;
        const check_def *d = &checks[i];
        if (!d->variant) {
            add_check(out, checks, i);
        } else if (strcmp(d->variant, "requests") == 0 || strcmp(d->variant, "many") == 0) {
            const hmb_ints v = strcmp(d->variant, "many") == 0 ? o->many : o->requests;
            for (int k = 0; k < v.n; k++)
                *(strcmp(d->variant, "many") == 0 ? &add_check(out, checks, i)->partitions : &add_check(out, checks, i)->requests) =
                    v.v[k];
        } else if (strcmp(d->variant, "counts") == 0) {
            int pairs[MAX_COUNTS][2];
            int n = parse_counts(o->counts, pairs, MAX_COUNTS);
            for (int k = 0; k < n; k++) {
                cf_point *p = add_check(out, checks, i);
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
                    *(is_order ? &add_check(out, checks, i)->order : &add_check(out, checks, i)->state) = k;
        }
    }
    if (null_state)
        add_check(out, checks, null_state - 1)->state = STATE_NULL;
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

void *conform_setup(hmb_ctx *ctx, const hmb_point *pt)
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

void conform_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    (void)ctx;
    (void)pt;
    cf *c = state;
    MPI_Comm_free(&c->ctl);
    free(c);
}
