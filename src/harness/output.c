/* Output: a small JSON writer, JSON Lines records (rank 0, appended, flushed and synced per
 * record) and the human-readable stdout table. All stdout printing of the runtime lives here. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"
#include "output.h"

/* ------------------------------------------------------------------ JSON writer */

static void json_reserve(hmb_json *j, size_t extra)
{
    if (j->len + extra + 1 <= j->cap)
        return;
    size_t cap = j->cap ? j->cap : 256;
    while (cap < j->len + extra + 1)
        cap *= 2;
    char *p = realloc(j->data, cap);
    if (!p) {
        fprintf(stderr, "hmb-bench: out of memory in the JSON writer\n");
        abort();
    }
    j->data = p;
    j->cap = cap;
}

static void json_put(hmb_json *j, const char *s, size_t n)
{
    json_reserve(j, n);
    memcpy(j->data + j->len, s, n);
    j->len += n;
    j->data[j->len] = '\0';
}

static void json_puts(hmb_json *j, const char *s) { json_put(j, s, strlen(s)); }

static void json_printf(hmb_json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void json_printf(hmb_json *j, const char *fmt, ...)
{
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    json_put(j, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void json_string_literal(hmb_json *j, const char *s)
{
    json_puts(j, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': json_puts(j, "\\\""); break;
        case '\\': json_puts(j, "\\\\"); break;
        case '\n': json_puts(j, "\\n"); break;
        case '\r': json_puts(j, "\\r"); break;
        case '\t': json_puts(j, "\\t"); break;
        case '\b': json_puts(j, "\\b"); break;
        case '\f': json_puts(j, "\\f"); break;
        default:
            if (*p < 0x20)
                json_printf(j, "\\u%04x", *p);
            else
                json_put(j, (const char *)p, 1);
        }
    }
    json_puts(j, "\"");
}

/* Comma and key before a new element at the current level. */
static void json_element(hmb_json *j, const char *key)
{
    if (j->depth > 0) {
        if (j->need_comma[j->depth])
            json_puts(j, ",");
        j->need_comma[j->depth] = 1;
    }
    if (key) {
        json_string_literal(j, key);
        json_puts(j, ":");
    }
}

void hmb_json_init(hmb_json *j) { memset(j, 0, sizeof *j); }
void hmb_json_free(hmb_json *j) { free(j->data); memset(j, 0, sizeof *j); }

static void json_open(hmb_json *j, const char *key, const char *bracket)
{
    json_element(j, key);
    json_puts(j, bracket);
    if (j->depth + 1 < (int)(sizeof j->need_comma / sizeof j->need_comma[0]))
        j->depth++;
    j->need_comma[j->depth] = 0;
}

static void json_close(hmb_json *j, const char *bracket)
{
    json_puts(j, bracket);
    if (j->depth > 0)
        j->depth--;
}

void hmb_json_open_obj(hmb_json *j, const char *key) { json_open(j, key, "{"); }
void hmb_json_close_obj(hmb_json *j) { json_close(j, "}"); }
void hmb_json_open_arr(hmb_json *j, const char *key) { json_open(j, key, "["); }
void hmb_json_close_arr(hmb_json *j) { json_close(j, "]"); }

void hmb_json_str(hmb_json *j, const char *key, const char *value)
{
    json_element(j, key);
    if (value)
        json_string_literal(j, value);
    else
        json_puts(j, "null");
}

void hmb_json_num(hmb_json *j, const char *key, double value)
{
    json_element(j, key);
    if (isfinite(value)) {
        /* Shortest of 15 or 17 significant digits that reads back exactly. */
        char buf[40];
        snprintf(buf, sizeof buf, "%.15g", value);
        if (strtod(buf, NULL) != value)
            snprintf(buf, sizeof buf, "%.17g", value);
        json_puts(j, buf);
    }
    else
        json_puts(j, "null");
}

void hmb_json_int(hmb_json *j, const char *key, long long value)
{
    json_element(j, key);
    json_printf(j, "%lld", value);
}

void hmb_json_bool(hmb_json *j, const char *key, int value)
{
    json_element(j, key);
    json_puts(j, value ? "true" : "false");
}

void hmb_json_null(hmb_json *j, const char *key)
{
    json_element(j, key);
    json_puts(j, "null");
}

/* ------------------------------------------------------------------ extras */

void hmb_extras_add(hmb_extras *e, const char *key, const char *str, double num)
{
    e->items = hmb_grow(e->items, &e->capacity, (size_t)e->count, sizeof *e->items);
    hmb_extra_field *f = &e->items[e->count++];
    f->key = strdup(key);
    f->str = str ? strdup(str) : NULL;
    f->num = num;
    f->rows = NULL;
    f->nrows = f->width = 0;
}

void hmb_extras_clear(hmb_extras *e)
{
    for (int i = 0; i < e->count; i++) {
        free(e->items[i].key);
        free(e->items[i].str);
        free(e->items[i].rows);
    }
    e->count = 0;
}

void hmb_extras_write(hmb_json *j, const char *key, const hmb_extras *e)
{
    hmb_json_open_obj(j, key);
    for (int i = 0; i < e->count; i++) {
        const hmb_extra_field *f = &e->items[i];
        if (f->rows) { /* [[a, b], ...], or [a, b, ...] for width 1 */
            hmb_json_open_arr(j, f->key);
            for (int r = 0; r < f->nrows; r++) {
                if (f->width > 1)
                    hmb_json_open_arr(j, NULL);
                for (int c = 0; c < f->width; c++)
                    hmb_json_num(j, NULL, f->rows[(size_t)r * f->width + c]);
                if (f->width > 1)
                    hmb_json_close_arr(j);
            }
            hmb_json_close_arr(j);
        } else if (f->str)
            hmb_json_str(j, e->items[i].key, e->items[i].str);
        else
            hmb_json_num(j, e->items[i].key, e->items[i].num);
    }
    hmb_json_close_obj(j);
}

void hmb_result_add_num(hmb_ctx *ctx, const char *key, double value)
{
    hmb_extras_add(&ctx->out.result_extra, key, NULL, value);
}

void hmb_result_add_str(hmb_ctx *ctx, const char *key, const char *value)
{
    hmb_extras_add(&ctx->out.result_extra, key, value ? value : "", 0);
}

void hmb_result_add_rows(hmb_ctx *ctx, const char *key, const double *values, int nrows, int width)
{
    hmb_extras_add(&ctx->out.result_extra, key, NULL, 0);
    hmb_extra_field *f = &ctx->out.result_extra.items[ctx->out.result_extra.count - 1];
    size_t n = (size_t)(nrows > 0 ? nrows : 0) * (size_t)(width > 0 ? width : 1);
    if (!(f->rows = malloc(n ? n * sizeof(double) : 1)))
        abort();
    if (n)
        memcpy(f->rows, values, n * sizeof(double));
    f->nrows = nrows > 0 ? nrows : 0;
    f->width = width > 0 ? width : 1;
}

void hmb_header_add_num(hmb_ctx *ctx, const char *key, double value)
{
    hmb_extras_add(&ctx->out.header_extra, key, NULL, value);
}

void hmb_header_add_str(hmb_ctx *ctx, const char *key, const char *value)
{
    hmb_extras_add(&ctx->out.header_extra, key, value ? value : "", 0);
}

/* ------------------------------------------------------------------ records */

/* A failed write, flush, sync or close of the results file: one line naming the file and the
 * cause, then a non-zero exit (records written before stay in the file). */
static int json_created;  /* --json named a file that did not exist before this run */
static off_t json_good;   /* its size after the last record rank 0 wrote completely */

static void output_failed(hmb_ctx *ctx, const char *path, int err)
{
    struct stat st;
    int removed = 0;
    if (path == ctx->out.json_path && ctx->run.rank == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        /* no half-written line, and no empty file this run created */
        if (st.st_size > json_good && truncate(path, json_good) != 0)
            json_good = -1;
        removed = json_created && json_good == 0 && unlink(path) == 0;
    }
    fprintf(stderr, "hmb-bench: cannot write results to '%s': %s%s\n", path, strerror(err ? err : EIO),
            removed ? " (removed the empty file this run created)" : "");
    fflush(stderr);
    MPI_Abort(ctx->run.comm, 1);
}

void hmb_output_open(hmb_ctx *ctx)
{
    if (ctx->run.rank != 0 || !ctx->out.json_path)
        return;
    struct stat st;
    json_created = stat(ctx->out.json_path, &st) != 0;
    json_good = json_created ? 0 : st.st_size;
    ctx->out.json = fopen(ctx->out.json_path, "a");
}

void hmb_output_close(hmb_ctx *ctx)
{
    if (ctx->out.json) {
        errno = 0;
        int failed = fflush(ctx->out.json) != 0 || ferror(ctx->out.json);
        int err = errno;
        if (fclose(ctx->out.json) != 0 && !failed) {
            failed = 1;
            err = errno;
        }
        ctx->out.json = NULL;
        if (failed)
            output_failed(ctx, ctx->out.json_path, err);
    }
    if (fflush(stdout) != 0 && errno != EPIPE)
        output_failed(ctx, "stdout", errno);
}

void hmb_output_begin_record(hmb_ctx *ctx, hmb_json *j, const char *type)
{
    hmb_json_init(j);
    hmb_json_open_obj(j, NULL);
    hmb_json_str(j, "type", type);
    hmb_json_int(j, "schema", HMB_SCHEMA_VERSION);
    hmb_json_str(j, "run_id", ctx->run.run_id);
}

void hmb_output_record(hmb_ctx *ctx, hmb_json *record)
{
    if (ctx->run.rank == 0 && ctx->out.json) {
        errno = 0;
        if (fputs(record->data, ctx->out.json) == EOF || fputc('\n', ctx->out.json) == EOF
            || fflush(ctx->out.json) != 0
            || (fsync(fileno(ctx->out.json)) != 0 && errno != EINVAL)) /* an interrupted run keeps every finished point; EINVAL: a device or pipe */
            output_failed(ctx, ctx->out.json_path, errno);
        json_good = ftello(ctx->out.json);
    }
}

void hmb_output_record_any_rank(hmb_ctx *ctx, hmb_json *record)
{
    if (!ctx->out.json_path)
        return;
    if (ctx->out.json && fflush(ctx->out.json) != 0) /* rank 0: keep the stdio stream's order */
        output_failed(ctx, ctx->out.json_path, errno);
    int fd = open(ctx->out.json_path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0)
        output_failed(ctx, ctx->out.json_path, errno);
    json_puts(record, "\n");
    /* One write() with O_APPEND: lines of several ranks never interleave. */
    ssize_t written = write(fd, record->data, record->len);
    int err = written < 0 ? errno : ENOSPC;
    if (written != (ssize_t)record->len || (fsync(fd) != 0 && errno != EINVAL)) {
        if (written == (ssize_t)record->len)
            err = errno;
        close(fd);
        output_failed(ctx, ctx->out.json_path, err);
    }
    struct stat st;
    if (ctx->run.rank == 0 && fstat(fd, &st) == 0)
        json_good = st.st_size;
    if (close(fd) != 0)
        output_failed(ctx, ctx->out.json_path, errno);
}

void hmb_conformance_record(hmb_ctx *ctx, const char *check, const char *verdict, const char *reason,
                            const char *clause, const char *reproducer, double seconds)
{
    if (ctx->run.rank != 0)
        return;
    char when[40];
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
    hmb_json j;
    hmb_output_begin_record(ctx, &j, "conformance");
    hmb_json_str(&j, "library", ctx->run.mpi_library_line);
    hmb_json_str(&j, "check", check);
    hmb_json_str(&j, "verdict", verdict);
    hmb_json_str(&j, "reason", reason && *reason ? reason : NULL);
    hmb_json_str(&j, "time", when);
    hmb_json_str(&j, "reproducer", reproducer);
    hmb_json_str(&j, "clause", clause);
    hmb_json_num(&j, "seconds", seconds);
    hmb_json_close_obj(&j);
    hmb_output_record(ctx, &j);
    hmb_json_free(&j);
    printf("%-11s %s (%.2f s)%s%s\n            clause: %s\n            reproduce: %s\n", verdict, check, seconds,
           reason && *reason ? ": " : "", reason && *reason ? reason : "", clause, reproducer);
    fflush(stdout);
}

void hmb_json_point_params(hmb_json *j, const hmb_point *pt)
{
    const char *name, *sval;
    long long ival;
    for (int i = 0; (i = hmb_point_param_next(pt, i, &name, &ival, &sval));) {
        if (sval)
            hmb_json_str(j, name, sval);
        else
            hmb_json_int(j, name, ival);
    }
}

static void write_params(hmb_ctx *ctx, hmb_json *j, const hmb_point *pt)
{
    hmb_json_open_obj(j, "params");
    if (pt) {
        hmb_json_int(j, "size_bytes", (long long)pt->size_bytes);
        hmb_json_point_params(j, pt);
    }
    hmb_json_int(j, "threads", ctx->run.threads);
    hmb_json_close_obj(j);
}

/* {"type":"plan","points":N}: how many result records this run will write, once its points are
 * known (before the first is measured), so a reader (hmb sweep) can tell a run that was cut, or a
 * launcher that returned 0 for a run it lost, from a finished one. */
void hmb_output_plan(hmb_ctx *ctx, int points)
{
    hmb_json j;
    hmb_output_begin_record(ctx, &j, "plan");
    hmb_json_str(&j, "bench", ctx->bench->name);
    hmb_json_int(&j, "points", points);
    hmb_json_close_obj(&j);
    hmb_output_record(ctx, &j);
    hmb_json_free(&j);
}

void hmb_output_failure(hmb_ctx *ctx, const char *kind, int partition, const char *message)
{
    hmb_json j;
    hmb_output_begin_record(ctx, &j, "failure");
    hmb_json_str(&j, "kind", kind);
    hmb_json_str(&j, "bench", ctx->bench->name);
    write_params(ctx, &j, ctx->point);
    hmb_json_int(&j, "iteration", atomic_load(&ctx->iter));
    hmb_json_int(&j, "rank", ctx->run.rank);
    if (partition >= 0)
        hmb_json_int(&j, "partition", partition);
    else
        hmb_json_null(&j, "partition");
    hmb_json_str(&j, "phase", atomic_load(&ctx->phase));
    hmb_json_str(&j, "message", message);
    hmb_json_close_obj(&j);
    hmb_output_record_any_rank(ctx, &j);
    hmb_json_free(&j);
}

/* Option value as JSON text: the effective value in the same notation the user types. */
void hmb_json_option_value(hmb_json *j, const hmb_optval *v)
{
    const char *key = v->opt->name;
    if (!v->present) {
        hmb_json_null(j, key);
        return;
    }
    char buf[1024];
    buf[0] = '\0';
    size_t used = 0;
    switch (v->opt->type) {
    case HMB_OPT_FLAG:
        snprintf(buf, sizeof buf, "%s", v->ival ? "1" : "0");
        break;
    case HMB_OPT_INT:
        snprintf(buf, sizeof buf, "%lld", v->ival);
        break;
    case HMB_OPT_DOUBLE:
        snprintf(buf, sizeof buf, "%g", v->dval);
        break;
    case HMB_OPT_DURATION: {
        static const struct { const char *unit; int64_t ns; } units[] = {
            {"s", 1000000000}, {"ms", 1000000}, {"us", 1000}, {"ns", 1}};
        for (size_t u = 0; u < 4; u++) {
            if (v->ns % units[u].ns == 0 || u == 3) {
                snprintf(buf, sizeof buf, "%lld%s", (long long)(v->ns / units[u].ns), units[u].unit);
                break;
            }
        }
        break;
    }
    case HMB_OPT_SIZES:
        for (int i = 0; i < v->count && used + 32 < sizeof buf; i++) {
            char s[32];
            hmb_format_size(v->sizes[i], s, sizeof s);
            used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", i ? "," : "", s);
        }
        break;
    case HMB_OPT_INTS:
        for (int i = 0; i < v->count && used + 32 < sizeof buf; i++)
            used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%lld", i ? "," : "", v->ints[i]);
        break;
    case HMB_OPT_STRING:
    case HMB_OPT_CHOICE:
    case HMB_OPT_CHOICES:
    case HMB_OPT_CHOICE_ARGS:
        hmb_json_str(j, key, v->sval);
        return;
    }
    hmb_json_str(j, key, buf);
}

/* ------------------------------------------------------------------ stdout table */

/* The table fits HMB_TABLE_COLUMNS by default: metric columns, in the benchmark's order, that do
 * not fit are left out and named in one line (--wide shows them all, --metric picks columns, the
 * JSON always has every metric). Header lines wrap at the same width. */
enum { SIZE_WIDTH = 7, PARAM_WIDTH = 7, MEDIAN_WIDTH = 9, CI_WIDTH = 17, ITERS_WIDTH = 7 };
enum { HIDDEN_NAMES_ROOM = 44 }; /* the names in the one "not shown" line; the rest are counted */

/* Compact number: enough digits to compare, no exponent for everyday magnitudes. */
static void format_value(double v, char *buf, size_t len)
{
    double a = fabs(v);
    if (!isfinite(v))
        snprintf(buf, len, "-");
    else if (a >= 1e7)
        snprintf(buf, len, "%.4g", v);
    else if (a >= 1000)
        snprintf(buf, len, "%.0f", v);
    else if (a >= 100)
        snprintf(buf, len, "%.1f", v);
    else if (a >= 1 || a == 0)
        snprintf(buf, len, "%.3f", v);
    else
        snprintf(buf, len, "%.4g", v);
}

static int param_width(const char *name)
{
    int w = (int)strlen(name);
    return w > PARAM_WIDTH ? w : PARAM_WIDTH;
}

static int median_width(const hmb_metric *m)
{
    int w = (int)strlen(m->name);
    return w > MEDIAN_WIDTH ? w : MEDIAN_WIDTH;
}

static void ci_header(const hmb_metric *m, char *buf, size_t len) { snprintf(buf, len, "95%% CI [%s]", m->unit); }

static int ci_width(const hmb_metric *m)
{
    char head[64];
    ci_header(m, head, sizeof head);
    return (int)strlen(head) > CI_WIDTH ? (int)strlen(head) : CI_WIDTH;
}

/* "# " + text on stdout, wrapped at the table width on spaces ("#   " before continuations). */
static void print_comment(const char *text)
{
    const int width = HMB_TABLE_COLUMNS - 2;
    int indent = 0;
    while (*text) {
        int room = width - indent, n = (int)strlen(text);
        if (n > room) {
            n = room;
            while (n > room / 2 && text[n] != ' ')
                n--;
            if (text[n] != ' ')
                n = room; /* no space in reach: cut the word */
        }
        printf("#%*s %.*s\n", indent, "", n, text);
        text += n;
        while (*text == ' ')
            text++;
        indent = 2;
    }
}

static void comment_vline(const char *fmt, va_list ap)
{
    char text[4096];
    vsnprintf(text, sizeof text, fmt, ap);
    print_comment(text);
}

static void comment_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void comment_line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    comment_vline(fmt, ap);
    va_end(ap);
}

void hmb_note(hmb_ctx *ctx, const char *fmt, ...)
{
    if (ctx->run.rank != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    comment_vline(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* Whether NAME is in the comma list LIST. */
static int in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, name, n))
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

int hmb_table_metric_selected(const hmb_ctx *ctx, const char *name)
{
    return !ctx->opt.common.metric || in_list(ctx->opt.common.metric, name);
}

/* The metric columns: --metric's, in its order, else the benchmark's in_table ones; those that
 * fit the width (all with --wide). hidden gets the names of those left out, comma-separated. */
static void choose_columns(hmb_ctx *ctx, const hmb_point *pt, char *hidden, size_t hidden_len)
{
    const hmb_metric *ms = ctx->metrics.items;
    const char *chosen = ctx->opt.common.metric;
    int *wanted = calloc((size_t)ctx->metrics.count + 1, sizeof *wanted), nwanted = 0;
    free(ctx->out.table_metrics);
    ctx->out.table_metrics = calloc((size_t)ctx->metrics.count + 1, sizeof *ctx->out.table_metrics);
    if (!wanted || !ctx->out.table_metrics)
        abort();
    if (chosen) {
        for (const char *p = chosen; *p;) {
            size_t len = strcspn(p, ",");
            int k = hmb_metric_list_find(&ctx->metrics, p, len);
            if (k >= 0) /* --metric names each once (checked at start-up) */
                wanted[nwanted++] = k;
            p += len + (p[len] == ',');
        }
    } else {
        for (int k = 0; k < ctx->metrics.count; k++)
            if (ms[k].in_table)
                wanted[nwanted++] = k;
    }
    int used = SIZE_WIDTH + 1 + ITERS_WIDTH;
    const char *name, *sval;
    long long ival;
    for (int i = 0; (i = hmb_point_param_next(pt, i, &name, &ival, &sval));)
        used += 1 + param_width(name);
    const int wide = ctx->opt.common.wide;
    const size_t names_room = HIDDEN_NAMES_ROOM < hidden_len ? HIDDEN_NAMES_ROOM : hidden_len - 1;
    size_t hl = 0;
    int more = 0;
    hidden[0] = '\0';
    ctx->out.table_nmetrics = 0;
    for (int i = 0; i < nwanted; i++) {
        const hmb_metric *m = &ms[wanted[i]];
        int w = 1 + median_width(m) + 1 + ci_width(m);
        if (wide || used + w <= HMB_TABLE_COLUMNS) {
            used += w;
            ctx->out.table_metrics[ctx->out.table_nmetrics++] = wanted[i];
        } else if (hl + 2 + strlen(m->name) <= names_room)
            hl += (size_t)snprintf(hidden + hl, hidden_len - hl, "%s%s", hl ? ", " : "", m->name);
        else
            more++;
    }
    if (more) /* the note stays one line */
        snprintf(hidden + hl, hidden_len - hl, " and %d more", more);
    free(wanted);
}

void hmb_table_header(hmb_ctx *ctx)
{
    if (ctx->run.rank != 0)
        return;
    comment_line("hmb-bench %s — %s", ctx->bench->name, ctx->bench->summary);
    comment_line("MPI: %s", ctx->run.mpi_library_line);
    comment_line("ranks: %d (%d per node), threads: %d, thread level: %s (requested %s)", ctx->run.size,
                 ctx->run.ranks_per_node, ctx->run.threads, hmb_thread_level_name(ctx->run.thread_level_provided),
                 hmb_thread_level_name(ctx->run.thread_level_requested));
    comment_line("cpus: rank 0 cpuset %s, %d available per node, oversubscribed: %s", ctx->run.cpuset,
                 ctx->run.cpus_available, ctx->run.oversubscribed ? "YES" : "no");
    static const char *const bind_how[4] = {
        NULL, "ranks not bound: hmb run binds them; by hand: mpiexec -bind-to core (MPICH) or --bind-to core (Open MPI)",
        "threads not bound: hmb run binds them; by hand: OMP_PLACES=cores OMP_PROC_BIND=close",
        "ranks and threads not bound: hmb run binds them; by hand: -bind-to core / --bind-to core, OMP_PROC_BIND=close"};
    if (ctx->run.unbound > 0 && ctx->run.unbound < 4) /* one line: the scheduler moves unbound ranks, and the timings */
        comment_line("warning: %s", bind_how[ctx->run.unbound]);
    comment_line("cache: %s (llc %zu bytes), data: %s, noise: %s, validation: %s", ctx->cache.cold ? "cold" : "hot",
                 ctx->cache.llc_bytes, hmb_option_text(ctx, "data"), ctx->opt.common.noise, ctx->val.validate ? "on" : "off");
    double max_offset = 0;
    for (int r = 0; r < ctx->run.size; r++)
        if (fabs(ctx->run.clock_offsets_estimated_s[r]) > max_offset)
            max_offset = fabs(ctx->run.clock_offsets_estimated_s[r]);
    comment_line("timer: %.0f ns resolution, %.1f ns per call, clock offset estimate max %.3f us (0 applied on rank 0's "
                 "host)", ctx->run.timer_resolution_ns, ctx->run.timer_overhead_ns, max_offset * 1e6);
    comment_line("run_id: %s", ctx->run.run_id);
    if (ctx->out.header_extra.count > 0) { /* what the benchmark's check() recorded (run header "extra") */
        char text[4096];
        size_t used = (size_t)snprintf(text, sizeof text, "%s:", ctx->bench->name);
        for (int i = 0; i < ctx->out.header_extra.count && used < sizeof text; i++) {
            const hmb_extra_field *f = &ctx->out.header_extra.items[i];
            if (f->str)
                used += (size_t)snprintf(text + used, sizeof text - used, "%s %s=%s", i ? "," : "", f->key, f->str);
            else
                used += (size_t)snprintf(text + used, sizeof text - used, "%s %s=%g", i ? "," : "", f->key, f->num);
        }
        print_comment(text);
    }
    fflush(stdout);
}

/* Column header, printed once before the first row (needs the first point's params). */
static void table_columns(hmb_ctx *ctx, const hmb_point *pt)
{
    char hidden[1024];
    choose_columns(ctx, pt, hidden, sizeof hidden);
    if (hidden[0])
        comment_line("not shown (%d columns): %s; see --wide, --metric or --json FILE", HMB_TABLE_COLUMNS, hidden);
    char line[4096];
    size_t used = 0;
    used += (size_t)snprintf(line + used, sizeof line - used, "%*s", SIZE_WIDTH, "size");
    const char *name, *sval;
    long long ival;
    for (int i = 0; used < sizeof line && (i = hmb_point_param_next(pt, i, &name, &ival, &sval));)
        used += (size_t)snprintf(line + used, sizeof line - used, " %*s", param_width(name), name);
    for (int c = 0; c < ctx->out.table_nmetrics && used < sizeof line; c++) {
        const hmb_metric *m = &ctx->metrics.items[ctx->out.table_metrics[c]];
        char ci[64];
        ci_header(m, ci, sizeof ci);
        used += (size_t)snprintf(line + used, sizeof line - used, " %*s %*s", median_width(m), m->name, ci_width(m), ci);
    }
    if (used < sizeof line)
        snprintf(line + used, sizeof line - used, " %*s", ITERS_WIDTH, "iters");
    printf("#%s\n", line + 1); /* the leading '#' keeps the header greppable as a comment */
}

/* --format osu: the block of the benchmark's layout this point belongs to, or NULL. */
static const hmb_osu_block *osu_block_of(const hmb_ctx *ctx, const hmb_point *pt)
{
    if (!ctx->bench->osu || !(ctx->bench->uses & HMB_OPTS_FORMAT) || ctx->opt.common.format != HMB_FORMAT_OSU)
        return NULL;
    for (const hmb_osu_block *b = ctx->bench->osu; b->param; b++)
        if (hmb_point_param_is(pt, b->param, b->value))
            return b;
    return NULL;
}

/* osu_latency's "%-10d%18.2f" rows: size in bytes, then each value with two decimals. */
static void osu_row(hmb_ctx *ctx, const hmb_osu_block *b, const hmb_point *pt, const hmb_summary *summaries)
{
    if (ctx->out.osu_block != b) {
        comment_line("%s", b->title);
        printf("# %-8s", "Size");
        for (const char *p = b->header; *p;) {
            size_t len = strcspn(p, ",");
            printf("%18.*s", (int)len, p);
            p += len + (p[len] == ',');
        }
        printf("\n");
        ctx->out.osu_block = b;
    }
    printf("%-10zu", pt->size_bytes);
    for (const char *p = b->metrics; *p;) {
        size_t len = strcspn(p, ",");
        int k = hmb_metric_list_find(&ctx->metrics, p, len);
        double v = k >= 0 && summaries[k].count ? summaries[k].median : NAN;
        printf("%18.2f", v);
        p += len + (p[len] == ',');
    }
    printf("\n");
    fflush(stdout);
}

void hmb_table_row(hmb_ctx *ctx, const hmb_point *pt, const hmb_summary *summaries, long iterations)
{
    if (ctx->run.rank != 0)
        return;
    const hmb_osu_block *osu = osu_block_of(ctx, pt);
    if (osu) {
        osu_row(ctx, osu, pt, summaries);
        return;
    }
    if (!ctx->out.table_columns_printed) {
        table_columns(ctx, pt);
        ctx->out.table_columns_printed = 1;
    }
    char sz[32];
    hmb_format_size(pt->size_bytes, sz, sizeof sz);
    printf("%*s", SIZE_WIDTH, sz);
    const char *name, *sval;
    long long ival;
    for (int i = 0; (i = hmb_point_param_next(pt, i, &name, &ival, &sval));) {
        if (sval)
            printf(" %*s", param_width(name), sval);
        else
            printf(" %*lld", param_width(name), ival);
    }
    for (int c = 0; c < ctx->out.table_nmetrics; c++) {
        const hmb_metric *m = &ctx->metrics.items[ctx->out.table_metrics[c]];
        const hmb_summary *s = &summaries[ctx->out.table_metrics[c]];
        char med[32], lo[32], hi[32], ci[80];
        format_value(s->count ? s->median : NAN, med, sizeof med);
        format_value(s->ci_lo, lo, sizeof lo);
        format_value(s->ci_hi, hi, sizeof hi);
        if (s->count == 0)
            snprintf(ci, sizeof ci, "-");
        else
            snprintf(ci, sizeof ci, "[%s,%s]%s", lo, hi, s->ci_valid ? "" : "?");
        printf(" %*s %*s", median_width(m), med, ci_width(m), ci);
    }
    printf(" %*ld\n", ITERS_WIDTH, iterations);
    fflush(stdout);
}

void hmb_table_unsupported(hmb_ctx *ctx, const hmb_point *pt, const char *reason)
{
    if (ctx->run.rank != 0)
        return;
    char where[512];
    hmb_point_describe(pt, where, sizeof where);
    comment_line("unsupported: %s (%s)", reason, where);
    fflush(stdout);
}
