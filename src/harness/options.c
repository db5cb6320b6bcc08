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
 *  - A value may start with '-' (negative numbers: --min -1), but never with "--":
 *    "--iters --warmup 1" is "--iters needs a value", not iters = "--warmup". */
#include "core.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *const hmb_thread_level_choices[] = {"single", "funneled", "serialized", "multiple", NULL};

typedef hmb_common_opts hmb_opts_self_;
const hmb_option hmb_common_options[] = {HMB_COMMON_OPTIONS(HMB_OPT_ROW_) HMB_OPTION_END};

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
            char num[64];
            snprintf(num, sizeof num, "%.*s", (int)(len - name_len - 1), p + name_len + 1);
            if (hmb_parse_number(num, &x)) {
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
        double x;
        if (hmb_parse_number(text, &x)) {
            hmb_set_err(err, errlen, "--%s: \"%s\" is not a number (plain decimal, e.g. 2.5 or 1e-3)", o->name, text);
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
        v->ival = choice_index(o->choices, text, strlen(text), NULL);
        if (v->ival < 0) {
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

static char *own(hmb_optset *set, char *text)
{
    if (!text || set->nowned == (int)(sizeof set->owned / sizeof set->owned[0]))
        abort();
    return set->owned[set->nowned++] = text;
}

/* "a|b|c" from a NULL-terminated array of names, or from the modes a --mode row lists (not
 * HMB_MODE_HIDDEN; those must come last, so bit i of the mask is mode i). */
static char *join_names(const char *const *names, const hmb_mode *modes, int defaults_only, char sep)
{
    size_t len = 1;
    for (int i = 0; names ? names[i] != NULL : modes && modes[i].name != NULL; i++)
        len += strlen(names ? names[i] : modes[i].name) + 1;
    char *out = calloc(len, 1);
    if (!out)
        abort();
    int hidden_seen = 0;
    for (int i = 0; names ? names[i] != NULL : modes && modes[i].name != NULL; i++) {
        if (!names && (modes[i].flags & HMB_MODE_HIDDEN)) {
            hidden_seen = 1;
            continue;
        }
        if (!names && hidden_seen)
            abort(); /* a --mode choice after a hidden mode: the mask's bits would not be the modes' */
        if (defaults_only && (modes[i].flags & HMB_MODE_OPT_IN))
            continue;
        if (*out)
            strncat(out, &sep, 1);
        strcat(out, names ? names[i] : modes[i].name);
    }
    return out;
}

/* Row o as the parser sees it: the name spelled with '-', choices written out. */
static void effective_row(hmb_optset *set, int i, const hmb_option *o, const hmb_mode *modes)
{
    hmb_option *r = &set->rows[i];
    *r = *o;
    if (strchr(o->name, '_')) {
        char *name = own(set, strdup(o->name));
        for (char *c = name; *c; c++)
            *c = *c == '_' ? '-' : *c;
        r->name = name;
    }
    if (o->names)
        r->choices = own(set, join_names(o->names, NULL, 0, '|'));
    if (o->modes) {
        r->choices = own(set, join_names(NULL, modes, 0, '|'));
        r->default_value = own(set, join_names(NULL, modes, 1, ','));
    }
    set->vals[i].opt = r;
}

/* o's name equals name[0..len), '_' and '-' alike. */
static int same_name(const char *o, const char *name, size_t len)
{
    for (size_t k = 0; k < len; k++, o++)
        if (!*o || (*o != name[k] && !(*o == '_' && name[k] == '-') && !(*o == '-' && name[k] == '_')))
            return 0;
    return *o == '\0';
}

static const hmb_option *find_in_table(const hmb_option *table, const char *name, size_t len)
{
    for (const hmb_option *o = table; o && o->name; o++)
        if (same_name(o->name, name, len))
            return o;
    return NULL;
}

/* The effective table: benchmark options first, then the harness groups it uses (hmb_option.group),
 * then the common ones it does not replace. */
static int merge_tables(hmb_optset *set, const hmb_option *bench_options, const hmb_mode *modes, int uses,
                        char *err, size_t errlen)
{
    memset(set, 0, sizeof *set);
    for (int pass = 0; pass < 3; pass++) {
        for (const hmb_option *o = pass == 0 ? bench_options : hmb_common_options; o && o->name; o++) {
            if (pass > 0 && (find_in_table(bench_options, o->name, strlen(o->name)) ||
                             (pass == 1) != (o->group != 0) || (o->group && !(o->group & uses))))
                continue;
            if (set->count == HMB_MAX_OPTIONS) {
                hmb_set_err(err, errlen, "too many options (more than %d)", HMB_MAX_OPTIONS);
                return -1;
            }
            set->common[set->count] = (unsigned char)(pass == 0 ? 0 : pass == 1 ? 2 : 1); /* own, group, common */
            effective_row(set, set->count++, o, modes);
        }
    }
    return 0;
}

static hmb_optval *find_val(hmb_optset *set, const char *name, size_t len)
{
    for (int i = 0; i < set->count; i++)
        if (same_name(set->vals[i].opt->name, name, len))
            return &set->vals[i];
    return NULL;
}

/* The choices v selects, as a bit mask over its declared names (CHOICE, CHOICES, CHOICE_ARGS). */
static long long selected_mask(const hmb_optval *v)
{
    if (!v->present)
        return 0;
    switch (v->opt->type) {
    case HMB_OPT_CHOICE: return v->ival >= 0 && v->ival < 63 ? 1LL << v->ival : 0;
    case HMB_OPT_CHOICES: return v->ival;
    case HMB_OPT_CHOICE_ARGS: {
        long long mask = 0;
        for (int k = 0; k < v->count; k++)
            mask |= v->ints[k] >= 0 && v->ints[k] < 63 ? 1LL << v->ints[k] : 0;
        return mask;
    }
    default: return 0;
    }
}

/* An option given while none of the values of the option that selects its readers is chosen
 * (hmb_option.used_by: p2p --post with --mode latency) is refused, not silently ignored. */
static int check_used_by(hmb_optset *set, char *err, size_t errlen)
{
    for (int i = 0; i < set->count; i++) {
        const hmb_optval *v = &set->vals[i];
        const char *spec = v->opt->used_by, *colon = spec ? strchr(spec, ':') : NULL;
        if (!spec || !v->given)
            continue;
        const hmb_optval *sel = colon ? find_val(set, spec, (size_t)(colon - spec)) : NULL;
        if (!sel || (sel->opt->type != HMB_OPT_CHOICE && sel->opt->type != HMB_OPT_CHOICES &&
                     sel->opt->type != HMB_OPT_CHOICE_ARGS)) {
            hmb_set_err(err, errlen, "--%s: declared used by \"%s\", which names no choice option", v->opt->name, spec);
            return -1;
        }
        long long readers = 0;
        for (const char *p = colon + 1; *p;) {
            size_t len = strcspn(p, ",");
            int k = choice_index(sel->opt->choices, p, len, NULL);
            if (k < 0 || k > 62) {
                hmb_set_err(err, errlen, "--%s: declared used by --%s %.*s, which is not one of %s", v->opt->name,
                            sel->opt->name, (int)len, p, sel->opt->choices);
                return -1;
            }
            readers |= 1LL << k;
            p += len + (p[len] == ',');
        }
        if (selected_mask(sel) & readers)
            continue;
        char users[256] = "";
        for (const char *p = colon + 1; *p;) {
            size_t len = strcspn(p, ",");
            snprintf(users + strlen(users), sizeof users - strlen(users), "%s%.*s", *users ? ", " : "", (int)len, p);
            p += len + (p[len] == ',');
        }
        hmb_set_err(err, errlen, "--%s: --%s %s does not use it (only --%s %s %s)", v->opt->name, sel->opt->name,
                    sel->sval, sel->opt->name, users, strchr(users, ',') ? "do" : "does");
        return -1;
    }
    return 0;
}

static const char *default_text(const hmb_option *o, const hmb_default *defaults)
{
    for (const hmb_default *d = defaults; d && d->name; d++)
        if (same_name(o->name, d->name, strlen(d->name)))
            return d->value;
    return o->default_value;
}

static int parse_impl(hmb_optset *set, const hmb_option *bench_options, const hmb_default *defaults,
                      const hmb_mode *modes, int uses, int argc, char **argv, char *err, size_t errlen);

int hmb_options_parse(hmb_optset *set, const hmb_option *bench_options,
                      const hmb_default *defaults, int argc, char **argv,
                      char *err, size_t errlen)
{
    return parse_impl(set, bench_options, defaults, NULL, 0, argc, argv, err, errlen);
}

int hmb_options_parse_bench(hmb_optset *set, const hmb_bench *b, int argc, char **argv, char *err, size_t errlen)
{
    return parse_impl(set, b->options, b->defaults, b->modes, b->uses, argc, argv, err, errlen);
}

static int parse_impl(hmb_optset *set, const hmb_option *bench_options, const hmb_default *defaults,
                      const hmb_mode *modes, int uses, int argc, char **argv, char *err, size_t errlen)
{
    if (merge_tables(set, bench_options, modes, uses, err, errlen))
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
    if (check_used_by(set, err, errlen))
        goto fail;
    return 0;
fail:
    hmb_options_free(set);
    return -1;
}

const hmb_optval *hmb_options_find(const hmb_optset *set, const char *name)
{
    for (int i = 0; i < set->count; i++)
        if (same_name(set->vals[i].opt->name, name, strlen(name)))
            return &set->vals[i];
    return NULL;
}

void hmb_options_free(hmb_optset *set)
{
    for (int i = 0; i < set->count; i++)
        free_value(&set->vals[i]);
    for (int i = 0; i < set->nowned; i++)
        free(set->owned[i]);
    set->nowned = 0;
}

/* v's value into the typed field at base + o->slot - 1 (and its given flag). */
static void store_value(const hmb_optval *v, const hmb_option *o, void *base)
{
    if (!base || !o->slot)
        return;
    void *at = (char *)base + o->slot - 1;
    if (o->given_slot)
        *((unsigned char *)base + o->given_slot - 1) = (unsigned char)v->given;
    switch (o->type) {
    case HMB_OPT_FLAG: *(int *)at = (int)v->ival; break;
    case HMB_OPT_INT: *(long long *)at = v->ival; break;
    case HMB_OPT_DOUBLE: *(double *)at = v->dval; break;
    case HMB_OPT_SIZES: *(hmb_sizes *)at = (hmb_sizes){v->present ? v->sizes : NULL, v->present ? v->count : 0}; break;
    case HMB_OPT_INTS: *(hmb_ints *)at = (hmb_ints){v->present ? v->ints : NULL, v->present ? v->count : 0}; break;
    case HMB_OPT_DURATION: *(int64_t *)at = v->ns; break;
    case HMB_OPT_STRING: *(const char **)at = v->present ? v->sval : NULL; break;
    case HMB_OPT_CHOICE: *(int *)at = v->present ? (int)v->ival : -1; break;
    case HMB_OPT_CHOICES: *(unsigned long long *)at = v->present ? (unsigned long long)v->ival : 0; break;
    case HMB_OPT_CHOICE_ARGS:
        *(hmb_choice_args *)at = (hmb_choice_args){v->ints, v->args, v->present ? v->count : 0};
        break;
    }
}

void hmb_options_store(const hmb_optset *set, hmb_common_opts *common, void *bench)
{
    for (int i = 0; i < set->count; i++)
        store_value(&set->vals[i], set->vals[i].opt, set->common[i] ? (void *)common : bench);
    /* a common option the benchmark re-declares: its value in the common struct too */
    for (const hmb_option *o = hmb_common_options; o->name; o++) {
        const hmb_optval *v = hmb_options_find(set, o->name);
        if (v && v->opt->type == o->type && !set->common[v - set->vals])
            store_value(v, o, common);
    }
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

static void help_impl(FILE *out, const hmb_option *bench_options, const hmb_default *defaults,
                      const hmb_mode *modes, int uses, int all);

void hmb_options_help(FILE *out, const hmb_option *bench_options, const hmb_default *defaults, int all)
{
    help_impl(out, bench_options, defaults, NULL, 0, all);
}

void hmb_options_help_bench(FILE *out, const hmb_bench *b, int all)
{
    help_impl(out, b->options, b->defaults, b->modes, b->uses, all);
}

static void help_impl(FILE *out, const hmb_option *bench_options, const hmb_default *defaults,
                      const hmb_mode *modes, int uses, int all)
{
    hmb_optset *set = malloc(sizeof *set);
    if (!set || merge_tables(set, bench_options, modes, uses, NULL, 0)) {
        free(set);
        return;
    }
    int width = 0, nbench = 0;
    for (int i = 0; i < set->count; i++) {
        const hmb_option *o = set->vals[i].opt;
        int w = (int)(strlen(o->name) + 2 + (*type_name(o) ? 1 + strlen(type_name(o)) : 0));
        if (w > width && w <= 24) /* a long head (many choices) just pushes its help right */
            width = w;
        nbench += set->common[i] != 1; /* its own, and the harness groups it uses */
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
    hmb_options_free(set);
    free(set);
}
