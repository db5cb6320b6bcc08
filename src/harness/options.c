/* The one option parser (IMB-style, table-driven): an option is declared once with its
 * type, default, range and help line; parsing, validation and help all come from the
 * declaration. Every problem becomes one line naming the option and the bad piece.
 *
 * Conventions:
 *  - A benchmark option with the same name as a common one replaces it (another range,
 *    help or default); hmb_default entries replace only the default text.
 *  - min/max (when not both 0) bound every element of a list; for DURATION they are in
 *    SECONDS (min 1e-6 = 1 µs).
 *  - Every present value also keeps its text in sval (the effective value as written), so
 *    the run record can list all options uniformly.
 *  - A value may start with '-' (negative numbers: --corrupt-at -1), but never with "--":
 *    "--iters --warmup 1" is "--iters needs a value", not iters = "--warmup". */
#include "core.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const hmb_option hmb_common_options[] = {
    {"sizes", HMB_OPT_SIZES, "8:4M", "message sizes (total message size per point)", 0, 0, NULL},
    {"threads", HMB_OPT_INT, "1", "OpenMP threads per rank", 1, 256, NULL},
    {"iters", HMB_OPT_INT, "20", "minimum measured iterations per point (N_min)", 1, 1e9, NULL, HMB_ROLE_RUN_CONTROL},
    {"max-iters", HMB_OPT_INT, "100000", "maximum measured iterations per point", 1, 1e9, NULL, HMB_ROLE_RUN_CONTROL},
    {"warmup", HMB_OPT_INT, "3", "warm-up iterations per point (discarded, counted)", 0, 1e6, NULL, HMB_ROLE_RUN_CONTROL},
    {"ci-target", HMB_OPT_DOUBLE, "5",
     "stop when the 95% CI half-width of the median is within this % of it (0 = run exactly --iters)",
     0, 100, NULL, HMB_ROLE_RUN_CONTROL},
    {"budget", HMB_OPT_DURATION, "2s", "time budget per point for adaptive repetitions", 0, 0, NULL, HMB_ROLE_RUN_CONTROL},
    {"compute", HMB_OPT_DURATION, "0", "compute time per iteration per thread (benchmarks that compute)",
     0, 0, NULL},
    {"noise", HMB_OPT_STRING, "none", "compute noise model: none | single:P | uniform:P | gaussian:P",
     0, 0, NULL},
    {"noise-thread", HMB_OPT_CHOICE, "fixed",
     "single:P noise hits the same thread every iteration (fixed) or one drawn per iteration (rand)",
     0, 0, "fixed|rand"},
    {"seed", HMB_OPT_INT, "1", "seed of the noise generator (recorded; same seed, same draws)", 0,
     4611686018427387904.0 /* 2^62 */, NULL, HMB_ROLE_RUN_CONTROL},
    {"cache", HMB_OPT_CHOICE, "hot",
     "hot: buffers stay cached; cold: evict the caches before every timed iteration", 0, 0, "hot|cold"},
    {"data", HMB_OPT_CHOICE, "fresh",
     "send data: fresh = written before every send, as an application does; reuse = written once per "
     "point in two generations by iteration parity, as OSU/IMB (p2p's default; other benchmarks: fresh only)",
     0, 0, "reuse|fresh"},
    {"llc-size", HMB_OPT_SIZES, "0", "last-level cache size: --cache cold eviction, p2p window slots (0 = sysfs)", 0,
     0, NULL, HMB_ROLE_RUN_CONTROL},
    {"no-validate", HMB_OPT_FLAG, "0", "do not check received data (checked every iteration by default)",
     0, 0, NULL, HMB_ROLE_RUN_CONTROL},
    {"corrupt-at", HMB_OPT_INT, "-1",
     "TEST ONLY: corrupt one received byte in this iteration (validation must catch it)", -1, 1e9, NULL, HMB_ROLE_RUN_CONTROL},
    {"timeout", HMB_OPT_DURATION, "300s", "watchdog: abort if one point runs longer than this", 0, 0,
     NULL, HMB_ROLE_RUN_CONTROL},
    {"wait-bound", HMB_OPT_DURATION, "10s",
     "a partition never reported arrived, or a request never completed, this long after its wait began ends the "
     "point (exit 3)", 0, 0, NULL, HMB_ROLE_RUN_CONTROL},
    {"never-complete-at", HMB_OPT_INT, "-1",
     "TEST ONLY: in this iteration bounded waits see nothing arrive or complete (must end with exit 3 within "
     "--wait-bound)", -1, 1e9, NULL, HMB_ROLE_RUN_CONTROL},
    {"json", HMB_OPT_STRING, NULL, "append JSON Lines results to this file", 0, 0, NULL, HMB_ROLE_RUN_CONTROL},
    {"raw", HMB_OPT_FLAG, "0", "also write every sample to the JSON", 0, 0, NULL, HMB_ROLE_RUN_CONTROL},
    {"metric", HMB_OPT_STRING, NULL,
     "table columns: only these metrics, in this order (comma list; default: the table's that fit 120 columns)", 0, 0,
     NULL, HMB_ROLE_RUN_CONTROL},
    {"wide", HMB_OPT_FLAG, "0", "table: every metric's columns, however wide (the JSON always has all)", 0, 0, NULL,
     HMB_ROLE_RUN_CONTROL},
    {"thread-level", HMB_OPT_CHOICE, NULL,
     "MPI thread level to request (default: the benchmark's own); modes the provided level cannot run are reported unsupported",
     0, 0, "single|funneled|serialized|multiple"},
    HMB_OPTION_END,
};


/* Integers print as integers (1000000000, not 1e+09). */
static void format_number(double x, char *buf, size_t len)
{
    if (x == floor(x) && fabs(x) < 9e18)
        snprintf(buf, len, "%lld", (long long)x);
    else
        snprintf(buf, len, "%g", x);
}

/* Seconds in the unit that reads best: 1e-06 -> "1us", 0.25 -> "250ms", 2 -> "2s". */
static void format_duration(double seconds, char *buf, size_t len)
{
    static const struct {
        double scale;
        const char *unit;
    } units[] = {{1.0, "s"}, {1e-3, "ms"}, {1e-6, "us"}, {1e-9, "ns"}};
    for (int i = 0; i < 4; i++)
        if (fabs(seconds) >= units[i].scale || i == 3) {
            snprintf(buf, len, "%.10g%s", seconds / units[i].scale, units[i].unit);
            return;
        }
}

static int has_range(const hmb_option *o) { return !(o->min == 0.0 && o->max == 0.0); }

/* DOUBLE values, and DURATION values in seconds (printed with a time unit). */
static int check_range(const hmb_option *o, double value, char *err, size_t errlen)
{
    if (!has_range(o) || (value >= o->min && value <= o->max))
        return 0;
    char v[40], bound[40];
    int below = value < o->min;
    double limit = below ? o->min : o->max;
    if (o->type == HMB_OPT_DURATION) {
        format_duration(value, v, sizeof v);
        format_duration(limit, bound, sizeof bound);
    } else {
        format_number(value, v, sizeof v);
        format_number(limit, bound, sizeof bound);
    }
    hmb_set_err(err, errlen, "--%s: %s is %s the %s %s", o->name, v, below ? "below" : "above",
            below ? "minimum" : "maximum", bound);
    return -1;
}

/* Integers are compared exactly: as doubles, 2^62 + 1 would pass a maximum of 2^62. */
static int check_range_int(const hmb_option *o, long long value, char *err, size_t errlen)
{
    if (!has_range(o))
        return 0;
    const double limit = 9.2e18; /* bounds beyond this cannot be a long long */
    int below = o->min > -limit ? value < (long long)ceil(o->min) : 0;
    int above = o->max < limit ? value > (long long)floor(o->max) : 0;
    if (!below && !above)
        return 0;
    char bound[40];
    format_number(below ? o->min : o->max, bound, sizeof bound);
    hmb_set_err(err, errlen, "--%s: %lld is %s the %s %s", o->name, value, below ? "below" : "above",
            below ? "minimum" : "maximum", bound);
    return -1;
}

/* Index of text[0..len) among "a|b|c", or -1; *count gets the number of choices. */
static int choice_index(const char *choices, const char *text, size_t len, int *count)
{
    int index = 0, found = -1;
    for (const char *p = choices; p && *p; index++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (found < 0 && n == len && !strncmp(p, text, n))
            found = index;
        p = bar ? bar + 1 : NULL;
    }
    if (count)
        *count = index;
    return found;
}

static int is_choice(const char *choices, const char *text)
{
    return choice_index(choices, text, strlen(text), NULL) >= 0;
}

/* "bw,latency" -> bit mask over the declared choices; "all" -> every one. */
static int parse_choices(const hmb_option *o, const char *text, long long *mask, char *err, size_t errlen)
{
    int count = 0;
    choice_index(o->choices, "", 0, &count);
    if (strcmp(text, "all") == 0) {
        *mask = count >= 63 ? -1 : (1LL << count) - 1;
        return 0;
    }
    *mask = 0;
    for (const char *p = text;;) {
        size_t len = strcspn(p, ",");
        int i = choice_index(o->choices, p, len, NULL);
        if (len == 0) {
            hmb_set_err(err, errlen, "--%s: empty item in \"%s\"", o->name, text);
            return -1;
        }
        if (i < 0 || i > 62) {
            hmb_set_err(err, errlen, "--%s: \"%.*s\" is not one of %s (a comma list, or all)", o->name, (int)len, p,
                        o->choices);
            return -1;
        }
        if (*mask & (1LL << i)) {
            hmb_set_err(err, errlen, "--%s: \"%.*s\" is listed twice", o->name, (int)len, p);
            return -1;
        }
        *mask |= 1LL << i;
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

/* "none,test:10,thread" against "none|test:|thread|impl": the items in the order given, each
 * with its choice index and number (a choice declared "name:" takes one, within the range). */
static int parse_choice_args(hmb_optval *v, const char *text, char *err, size_t errlen)
{
    const hmb_option *o = v->opt;
    size_t n = 1;
    for (const char *c = text; *c; c++)
        n += *c == ',';
    v->ints = calloc(n, sizeof *v->ints);
    v->args = calloc(n, sizeof *v->args);
    if (!v->ints || !v->args)
        abort();
    for (const char *p = text;; p++) {
        size_t len = strcspn(p, ","), name_len = strcspn(p, ":,");
        int takes_arg = name_len < len, i = choice_index(o->choices, p, name_len + (size_t)takes_arg, NULL);
        double x = NAN;
        if (len == 0) {
            hmb_set_err(err, errlen, "--%s: empty item in \"%s\"", o->name, text);
            return -1;
        }
        if (i < 0) {
            hmb_set_err(err, errlen, "--%s: \"%.*s\" is not one of %s (a comma list; NAME:NUMBER where a name ends in :)",
                        o->name, (int)len, p, o->choices);
            return -1;
        }
        if (takes_arg) {
            char num[64], *end = NULL;
            snprintf(num, sizeof num, "%.*s", (int)(len - name_len - 1), p + name_len + 1);
            x = strtod(num, &end);
            if (!num[0] || *end || !isfinite(x)) {
                hmb_set_err(err, errlen, "--%s: \"%.*s\": \"%s\" is not a number", o->name, (int)len, p, num);
                return -1;
            }
            if (check_range(o, x, err, errlen))
                return -1;
        }
        for (int k = 0; k < v->count; k++)
            if (v->ints[k] == i && (v->args[k] == x || (isnan(x) && isnan(v->args[k])))) {
                hmb_set_err(err, errlen, "--%s: \"%.*s\" is listed twice", o->name, (int)len, p);
                return -1;
            }
        v->ints[v->count] = i;
        v->args[v->count++] = x;
        p += len;
        if (!*p)
            return 0;
    }
}

static void free_value(hmb_optval *v)
{
    free(v->sizes);
    free(v->ints);
    free(v->args);
    v->sizes = NULL;
    v->ints = NULL;
    v->args = NULL;
    v->count = 0;
}

/* Parse text into v according to v->opt; errors are "--name: ..." lines. */
static int parse_value(hmb_optval *v, const char *text, char *err, size_t errlen)
{
    const hmb_option *o = v->opt;
    char why[200];
    free_value(v);
    switch (o->type) {
    case HMB_OPT_FLAG:
        if (!strcmp(text, "1") || !strcmp(text, "true") || !strcmp(text, "yes"))
            v->ival = 1;
        else if (!strcmp(text, "0") || !strcmp(text, "false") || !strcmp(text, "no"))
            v->ival = 0;
        else {
            hmb_set_err(err, errlen, "--%s: \"%s\" is not 0 or 1", o->name, text);
            return -1;
        }
        break;
    case HMB_OPT_INT: {
        long long *vals = NULL;
        int n = 0;
        if (strchr(text, ':') || strchr(text, ',')) {
            hmb_set_err(err, errlen, "--%s: \"%s\": one integer expected, not a list or range", o->name, text);
            return -1;
        }
        if (hmb_parse_int_list(text, &vals, &n, why, sizeof why)) {
            hmb_set_err(err, errlen, "--%s: %s", o->name, why);
            return -1;
        }
        v->ival = vals[0];
        free(vals);
        if (check_range_int(o, v->ival, err, errlen))
            return -1;
        break;
    }
    case HMB_OPT_DOUBLE: {
        char *end;
        double x = strtod(text, &end);
        if (end == text || *end || !isfinite(x)) {
            hmb_set_err(err, errlen, "--%s: \"%s\" is not a number", o->name, text);
            return -1;
        }
        v->dval = x;
        if (check_range(o, x, err, errlen))
            return -1;
        break;
    }
    case HMB_OPT_SIZES:
        if (hmb_parse_size_list(text, &v->sizes, &v->count, why, sizeof why)) {
            hmb_set_err(err, errlen, "--%s: %s", o->name, why);
            return -1;
        }
        for (int i = 0; i < v->count; i++)
            if (check_range_int(o, (long long)v->sizes[i], err, errlen))
                return -1;
        break;
    case HMB_OPT_INTS:
        if (hmb_parse_int_list(text, &v->ints, &v->count, why, sizeof why)) {
            hmb_set_err(err, errlen, "--%s: %s", o->name, why);
            return -1;
        }
        for (int i = 0; i < v->count; i++)
            if (check_range_int(o, v->ints[i], err, errlen))
                return -1;
        break;
    case HMB_OPT_DURATION:
        if (hmb_parse_duration_ns(text, &v->ns, why, sizeof why)) {
            hmb_set_err(err, errlen, "--%s: %s", o->name, why);
            return -1;
        }
        if (check_range(o, (double)v->ns * 1e-9, err, errlen))
            return -1;
        break;
    case HMB_OPT_STRING:
        break;
    case HMB_OPT_CHOICE:
        if (!is_choice(o->choices, text)) {
            hmb_set_err(err, errlen, "--%s: \"%s\" is not one of %s", o->name, text, o->choices);
            return -1;
        }
        break;
    case HMB_OPT_CHOICES:
        if (parse_choices(o, text, &v->ival, err, errlen))
            return -1;
        break;
    case HMB_OPT_CHOICE_ARGS:
        if (parse_choice_args(v, text, err, errlen))
            return -1;
        break;
    }
    v->sval = text;
    v->present = 1;
    return 0;
}

static const hmb_option *find_in_table(const hmb_option *table, const char *name, size_t len)
{
    for (const hmb_option *o = table; o && o->name; o++)
        if (strlen(o->name) == len && !strncmp(o->name, name, len))
            return o;
    return NULL;
}

/* The effective table: benchmark options first, then the common ones it does not replace. */
static int merge_tables(hmb_optset *set, const hmb_option *bench_options, char *err, size_t errlen)
{
    const hmb_option *tables[2] = {bench_options, hmb_common_options};
    memset(set, 0, sizeof *set);
    for (int t = 0; t < 2; t++) {
        for (const hmb_option *o = tables[t]; o && o->name; o++) {
            if (t == 1 && find_in_table(bench_options, o->name, strlen(o->name)))
                continue;
            if (set->count == HMB_MAX_OPTIONS) {
                hmb_set_err(err, errlen, "too many options (more than %d)", HMB_MAX_OPTIONS);
                return -1;
            }
            set->vals[set->count++].opt = o;
        }
    }
    return 0;
}

static hmb_optval *find_val(hmb_optset *set, const char *name, size_t len)
{
    for (int i = 0; i < set->count; i++)
        if (strlen(set->vals[i].opt->name) == len && !strncmp(set->vals[i].opt->name, name, len))
            return &set->vals[i];
    return NULL;
}

static const char *default_text(const hmb_option *o, const hmb_default *defaults)
{
    for (const hmb_default *d = defaults; d && d->name; d++)
        if (!strcmp(d->name, o->name))
            return d->value;
    return o->default_value;
}

int hmb_options_parse(hmb_optset *set, const hmb_option *bench_options,
                      const hmb_default *defaults, int argc, char **argv,
                      char *err, size_t errlen)
{
    if (merge_tables(set, bench_options, err, errlen))
        return -1;
    for (const hmb_default *d = defaults; d && d->name; d++)
        if (!find_val(set, d->name, strlen(d->name))) {
            hmb_set_err(err, errlen, "default given for unknown option --%s", d->name);
            return -1;
        }
    /* Help wins over everything else on the line, as users expect. */
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help-all"))
            return 2;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return 1;

    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            if (arg[0] == '-' && arg[1] != '\0')
                hmb_set_err(err, errlen, "unknown option %s", arg);
            else
                hmb_set_err(err, errlen, "unexpected argument '%s'", arg);
            goto fail;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
        hmb_optval *v = find_val(set, name, name_len);
        if (!v) {
            hmb_set_err(err, errlen, "unknown option --%.*s", (int)name_len, name);
            goto fail;
        }
        const char *text;
        if (v->opt->type == HMB_OPT_FLAG) {
            if (eq) {
                hmb_set_err(err, errlen, "--%s takes no value", v->opt->name);
                goto fail;
            }
            text = "1";
        } else if (eq) {
            text = eq + 1;
        } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
            text = argv[++i];
        } else {
            hmb_set_err(err, errlen, "--%s needs a value", v->opt->name);
            goto fail;
        }
        if (parse_value(v, text, err, errlen))
            goto fail;
        v->given = 1; /* given twice: the last one wins */
    }

    for (int i = 0; i < set->count; i++) {
        hmb_optval *v = &set->vals[i];
        if (v->given)
            continue;
        const char *text = default_text(v->opt, defaults);
        if (!text)
            continue; /* no default: present stays 0 */
        char why[256];
        if (parse_value(v, text, why, sizeof why)) {
            hmb_set_err(err, errlen, "bad default for --%s: %s", v->opt->name, why);
            goto fail;
        }
    }
    return 0;
fail:
    hmb_options_free(set);
    return -1;
}

const hmb_optval *hmb_options_find(const hmb_optset *set, const char *name)
{
    for (int i = 0; i < set->count; i++)
        if (!strcmp(set->vals[i].opt->name, name))
            return &set->vals[i];
    return NULL;
}

void hmb_options_free(hmb_optset *set)
{
    for (int i = 0; i < set->count; i++)
        free_value(&set->vals[i]);
}

static const char *type_name(const hmb_option *o)
{
    switch (o->type) {
    case HMB_OPT_FLAG: return "";
    case HMB_OPT_INT: return "INT";
    case HMB_OPT_DOUBLE: return "NUM";
    case HMB_OPT_SIZES: return "SIZES";
    case HMB_OPT_INTS: return "INTS";
    case HMB_OPT_DURATION: return "TIME";
    case HMB_OPT_STRING: return "STR";
    case HMB_OPT_CHOICE: return o->choices ? o->choices : "CHOICE";
    case HMB_OPT_CHOICES: return "LIST";
    case HMB_OPT_CHOICE_ARGS: return "LIST";
    }
    return "?";
}

static void help_line(FILE *out, const hmb_option *o, const hmb_default *defaults, int width)
{
    char head[160];
    const char *type = type_name(o);
    snprintf(head, sizeof head, "--%s%s%s", o->name, *type ? " " : "", type);
    fprintf(out, "  %-*s  %s", width, head, o->help ? o->help : "");
    const char *def = default_text(o, defaults);
    if (def && o->type != HMB_OPT_FLAG)
        fprintf(out, " (default: %s)", def);
    if (o->type == HMB_OPT_CHOICES)
        fprintf(out, " [comma list of %s, or all]", o->choices);
    if (o->type == HMB_OPT_CHOICE_ARGS)
        fprintf(out, " [comma list of %s; NAME:NUMBER where a name ends in :]", o->choices);
    if (has_range(o) && o->type != HMB_OPT_FLAG && o->type != HMB_OPT_STRING &&
        o->type != HMB_OPT_CHOICE && o->type != HMB_OPT_CHOICES) {
        char lo[40], hi[40];
        if (o->type == HMB_OPT_DURATION) {
            format_duration(o->min, lo, sizeof lo);
            format_duration(o->max, hi, sizeof hi);
        } else {
            format_number(o->min, lo, sizeof lo);
            format_number(o->max, hi, sizeof hi);
        }
        fprintf(out, " [%s..%s]", lo, hi);
    }
    fputc('\n', out);
}

/* Options for tests of the harness itself (planted faults): help says "TEST ONLY" first. */
static int test_only(const hmb_option *o) { return o->help && !strncmp(o->help, "TEST ONLY", 9); }

void hmb_options_help(FILE *out, const hmb_option *bench_options, const hmb_default *defaults, int all)
{
    hmb_optset *set = malloc(sizeof *set);
    if (!set || merge_tables(set, bench_options, NULL, 0)) {
        free(set);
        return;
    }
    int width = 0, nbench = 0;
    for (int i = 0; i < set->count; i++) {
        const hmb_option *o = set->vals[i].opt;
        int w = (int)(strlen(o->name) + 2 + (*type_name(o) ? 1 + strlen(type_name(o)) : 0));
        if (w > width && w <= 24) /* a long head (many choices) just pushes its help right */
            width = w;
        if (find_in_table(bench_options, o->name, strlen(o->name)))
            nbench++;
    }
    int hidden = 0;
    for (int i = 0; i < set->count; i++)
        hidden += !all && test_only(set->vals[i].opt);
    if (nbench) {
        fprintf(out, "Benchmark options:\n");
        for (int i = 0; i < nbench; i++)
            if (all || !test_only(set->vals[i].opt))
                help_line(out, set->vals[i].opt, defaults, width);
        fputc('\n', out);
    }
    fprintf(out, "Common options (every benchmark):\n");
    for (int i = nbench; i < set->count; i++)
        if (all || !test_only(set->vals[i].opt))
            help_line(out, set->vals[i].opt, defaults, width);
    fprintf(out, "\nSIZES: 8, 4K, 1M, 1K:16M (doubling), 1K:16M:x4, 2:8:+2, lists 1K,64K. "
                 "TIME: 500ns, 10us, 1.5ms, 2s (bare number = us).\n");
    if (hidden)
        fprintf(out, "(%d TEST ONLY option%s for testing hmb-bench itself not shown: --help-all lists them)\n", hidden,
                hidden == 1 ? "" : "s");
    free(set);
}
