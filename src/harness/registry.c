/* Benchmark registry: every src/bench file puts a pointer to its descriptor into the linker
 * section "hmb_benchmarks" (HMB_REGISTER); GNU ld provides the section's bounds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "registry.h"

extern const hmb_bench *const __start_hmb_benchmarks[] __attribute__((weak));
extern const hmb_bench *const __stop_hmb_benchmarks[] __attribute__((weak));

const hmb_bench *hmb_registry_find(const char *name)
{
    if (!__start_hmb_benchmarks)
        return NULL;
    for (const hmb_bench *const *b = __start_hmb_benchmarks; b < __stop_hmb_benchmarks; b++)
        if (*b && strcmp((*b)->name, name) == 0)
            return *b;
    return NULL;
}

static int by_group_then_name(const void *a, const void *b)
{
    const hmb_bench *x = *(const hmb_bench *const *)a, *y = *(const hmb_bench *const *)b;
    int g = strcmp(x->group, y->group);
    return g ? g : strcmp(x->name, y->name);
}

int hmb_registry_list(const hmb_bench ***out)
{
    int n = 0;
    if (__start_hmb_benchmarks)
        n = (int)(__stop_hmb_benchmarks - __start_hmb_benchmarks);
    const hmb_bench **list = calloc((size_t)(n ? n : 1), sizeof *list);
    if (!list)
        abort();
    int count = 0;
    for (int i = 0; i < n; i++)
        if (__start_hmb_benchmarks[i])
            list[count++] = __start_hmb_benchmarks[i];
    qsort(list, (size_t)count, sizeof *list, by_group_then_name);
    *out = list;
    return count;
}

static const char *option_type_name(hmb_opt_type type)
{
    static const char *const names[] = {"flag",   "int",    "double",  "sizes",      "ints",
                                        "duration", "string", "choice", "choices", "choice_args"};
    return (unsigned)type < sizeof names / sizeof names[0] ? names[type] : "unknown";
}

/* "a|b|c" (sep '|') or "a,b,c" as a JSON array of names under key. */
static void write_names(hmb_json *j, const char *key, const char *text, char sep)
{
    const char seps[2] = {sep, '\0'};
    hmb_json_open_arr(j, key);
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, seps);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        hmb_json_str(j, NULL, name);
        p += n + (p[n] == sep);
    }
    hmb_json_close_arr(j);
}

/* The effective option table (benchmark options, then the common ones it does not replace) with
 * the effective defaults: parsing an empty command line gives exactly what a run would use. */
static void write_options(hmb_json *j, const hmb_bench *b)
{
    hmb_optset *set = calloc(1, sizeof *set);
    if (!set || hmb_options_parse_bench(set, b, 0, NULL, NULL, 0) != 0)
        abort(); /* a descriptor whose own defaults do not parse is a programming error */
    hmb_json_open_arr(j, "options");
    for (int i = 0; i < set->count; i++) {
        const hmb_optval *v = &set->vals[i];
        const hmb_option *o = v->opt;
        hmb_json_open_obj(j, NULL);
        hmb_json_str(j, "name", o->name);
        hmb_json_str(j, "type", option_type_name(o->type));
        hmb_json_str(j, "default", v->present ? v->sval : NULL);
        if (o->min != 0 || o->max != 0) {
            hmb_json_open_arr(j, "range");
            hmb_json_num(j, NULL, o->min);
            hmb_json_num(j, NULL, o->max);
            hmb_json_close_arr(j);
        } else {
            hmb_json_null(j, "range");
        }
        if (o->choices)
            write_names(j, "choices", o->choices, '|');
        else
            hmb_json_null(j, "choices");
        hmb_json_str(j, "help", o->help);
        hmb_json_str(j, "role", o->role == HMB_ROLE_RUN_CONTROL ? "run-control" : "parameter");
        hmb_json_close_obj(j);
    }
    hmb_json_close_arr(j);
    hmb_options_free(set);
    free(set);
}

/* rules: [{"option", "values": [...], "env": {"mpich": {"VAR": "template"}}, "layout", "why"}] */
static void write_rules(hmb_json *j, const hmb_option_rule *rules)
{
    hmb_json_open_arr(j, "rules");
    for (const hmb_option_rule *r = rules; r && r->option; r++) {
        hmb_json_open_obj(j, NULL);
        hmb_json_str(j, "option", r->option);
        write_names(j, "values", r->values, ',');
        hmb_json_open_obj(j, "env");
        const char *flavors[] = {"mpich", "openmpi", "impi"};
        for (int f = 0; f < 3; f++) {
            size_t flen = strlen(flavors[f]);
            int opened = 0;
            for (const char *p = r->env ? r->env : ""; *p;) {
                size_t n = strcspn(p, " ");
                const char *colon = memchr(p, ':', n), *eq = colon ? memchr(colon, '=', n - (size_t)(colon - p)) : NULL;
                if (!colon || !eq) {
                    fprintf(stderr, "hmb-bench: rule of --%s: \"%.*s\" is not FLAVOR:VAR=TEMPLATE\n", r->option, (int)n, p);
                    abort();
                }
                if ((size_t)(colon - p) == flen && strncmp(p, flavors[f], flen) == 0) {
                    char var[96], tmpl[96];
                    snprintf(var, sizeof var, "%.*s", (int)(eq - colon - 1), colon + 1);
                    snprintf(tmpl, sizeof tmpl, "%.*s", (int)(p + n - eq - 1), eq + 1);
                    if (!opened++)
                        hmb_json_open_obj(j, flavors[f]);
                    hmb_json_str(j, var, tmpl);
                }
                p += n + (p[n] == ' ');
            }
            if (opened)
                hmb_json_close_obj(j);
        }
        hmb_json_close_obj(j);
        hmb_json_str(j, "layout", r->layout ? r->layout : "");
        hmb_json_str(j, "why", r->why);
        hmb_json_close_obj(j);
    }
    hmb_json_close_arr(j);
}

static void write_descriptor(hmb_json *j, const hmb_bench *b)
{
    hmb_json_open_obj(j, NULL);
    hmb_json_str(j, "name", b->name);
    hmb_json_str(j, "group", b->group);
    hmb_json_str(j, "summary", b->summary);
    hmb_json_int(j, "min_ranks", b->min_ranks);
    hmb_json_int(j, "rank_multiple", b->rank_multiple > 1 ? b->rank_multiple : 1);
    hmb_json_str(j, "thread_level", hmb_thread_level_name(b->thread_level));
    hmb_json_str(j, "spare_core_when", b->spare_core_when);
    hmb_json_bool(j, "data_reuse", b->data_reuse);
    if (b->uses & HMB_OPTS_COMM) /* --comm off: the mock runs the pattern */
        hmb_json_bool(j, "comm_off", 1);
    else
        hmb_json_str(j, "comm_off", b->no_mock ? b->no_mock : "not declared (hmb_bench.no_mock)");
    write_options(j, b);
    write_rules(j, b->rules);
    hmb_metric_list list;
    hmb_metric_list_build(&list, b);
    hmb_json_open_arr(j, "metrics");
    for (int i = 0; i < list.count; i++) {
        const hmb_metric *m = &list.items[i];
        hmb_json_open_obj(j, NULL);
        hmb_json_str(j, "name", m->name);
        hmb_json_str(j, "unit", m->unit);
        hmb_json_str(j, "description", m->description);
        hmb_json_bool(j, "higher_is_better", m->higher_is_better);
        hmb_json_bool(j, "signed", m->is_signed);
        hmb_json_bool(j, "in_table", m->in_table);
        if (m->bounds)
            hmb_json_str(j, "bounds", m->bounds);
        if (m->fixed)
            hmb_json_str(j, "fixed", m->fixed);
        if (m->set_by)
            hmb_json_str(j, "set_by", m->set_by);
        hmb_json_close_obj(j);
    }
    hmb_json_close_arr(j);
    /* The paired modes: each one's metrics, whether --mode offers it and runs it by default. */
    hmb_json_open_arr(j, "modes");
    for (int m = 0; m < list.nmodes; m++) {
        hmb_json_open_obj(j, NULL);
        hmb_json_str(j, "name", b->modes[m].name);
        hmb_json_bool(j, "choice", !(b->modes[m].flags & HMB_MODE_HIDDEN));
        hmb_json_bool(j, "default", !(b->modes[m].flags & (HMB_MODE_HIDDEN | HMB_MODE_OPT_IN)));
        hmb_json_open_arr(j, "metrics");
        for (int k = 0; k < list.ntemplates; k++) {
            int i = hmb_metric_list_slot(&list, k, m);
            if (i >= 0)
                hmb_json_str(j, NULL, list.items[i].name);
        }
        hmb_json_close_arr(j);
        hmb_json_close_obj(j);
    }
    hmb_json_close_arr(j);
    hmb_metric_list_free(&list);
    hmb_json_close_obj(j);
}

void hmb_registry_describe_json(FILE *out, const hmb_bench *only)
{
    hmb_json j;
    hmb_json_init(&j);
    hmb_json_open_obj(&j, NULL);
    hmb_json_int(&j, "schema_version", HMB_SCHEMA_VERSION);
    hmb_json_str(&j, "hmb_version", HMB_VERSION);
    hmb_json_open_arr(&j, "benchmarks");
    if (only) {
        write_descriptor(&j, only);
    } else {
        const hmb_bench **list = NULL;
        int n = hmb_registry_list(&list);
        for (int i = 0; i < n; i++)
            write_descriptor(&j, list[i]);
        free(list);
    }
    hmb_json_close_arr(&j);
    hmb_json_close_obj(&j);
    fprintf(out, "%.*s\n", (int)j.len, j.data ? j.data : "");
    hmb_json_free(&j);
}
