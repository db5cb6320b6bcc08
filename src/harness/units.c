/* Sizes, integer lists and durations as users type them (see core.h for the grammar).
 * Every error names the offending piece of text, e.g.
 *   "4Q": unknown unit suffix "Q" (use K, M or G)
 * so the option parser can prefix it with the option name and print one line. */
#include "core.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A list that expands to more values than this is almost certainly a typo ("1:1G:+1"). */
#define MAX_LIST_VALUES 100000

/* A control character in a user's value ("1\nms") would break the one-line error in two: it is
 * written as an escape (\n, \t, \r, or \xNN), so the line shows what was typed. */
void hmb_escape_controls(const char *in, char *out, size_t outlen)
{
    if (!out || outlen == 0)
        return;
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        char esc[8];
        if (*p >= 0x20 && *p != 0x7f) {
            esc[0] = (char)*p;
            esc[1] = '\0';
        } else if (*p == '\n' || *p == '\t' || *p == '\r') {
            snprintf(esc, sizeof esc, "\\%c", *p == '\n' ? 'n' : *p == '\t' ? 't' : 'r');
        } else {
            snprintf(esc, sizeof esc, "\\x%02X", *p);
        }
        size_t len = strlen(esc);
        if (n + len >= outlen)
            break;
        memcpy(out + n, esc, len);
        n += len;
    }
    out[n] = '\0';
}

void hmb_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    char raw[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    hmb_escape_controls(raw, err, errlen);
}

/* The end of the plain decimal number at the start of s: [+-] digits [. digits] [(e|E) [+-] digits],
 * at least one digit before the exponent; s itself when there is none. strtod also reads hex
 * ("0x10"), inf, nan and leading spaces: no number a user types here is meant that way. */
static const char *plain_decimal_end(const char *s)
{
    const char *p = s;
    int digits = 0;
    if (*p == '+' || *p == '-')
        p++;
    for (; isdigit((unsigned char)*p); p++)
        digits++;
    if (*p == '.')
        for (p++; isdigit((unsigned char)*p); p++)
            digits++;
    if (!digits)
        return s;
    if (*p == 'e' || *p == 'E') {
        const char *e = p + 1;
        if (*e == '+' || *e == '-')
            e++;
        if (isdigit((unsigned char)*e)) {
            while (isdigit((unsigned char)*e))
                e++;
            p = e;
        }
    }
    return p;
}

int hmb_parse_decimal(const char *s, double *out, const char **end)
{
    const char *stop = plain_decimal_end(s);
    *end = stop;
    if (stop == s || (size_t)(stop - s) >= 64)
        return -1;
    char num[64];
    memcpy(num, s, (size_t)(stop - s));
    num[stop - s] = '\0';
    errno = 0;
    double x = strtod(num, NULL);
    if (errno == ERANGE || !isfinite(x)) /* overflow, or a nonzero value below the smallest double */
        return -1;
    *out = x;
    return 0;
}

int hmb_parse_number(const char *s, double *out)
{
    const char *end;
    return s && !hmb_parse_decimal(s, out, &end) && *end == '\0' ? 0 : -1;
}

/* Parse one integer with an optional binary unit suffix from s[0..len). The piece is
 * quoted in errors as the user wrote it. Negative values only when allow_negative. */
static int parse_scaled_int(const char *s, size_t len, int allow_negative, long long *out,
                            char *err, size_t errlen)
{
    char piece[128];
    if (len >= sizeof piece) {
        hmb_set_err(err, errlen, "\"%.40s...\": value too long", s);
        return -1;
    }
    memcpy(piece, s, len);
    piece[len] = '\0';
    if (len == 0) {
        hmb_set_err(err, errlen, "empty value");
        return -1;
    }
    const char *p = piece;
    int negative = 0;
    if (*p == '-' || *p == '+') {
        negative = *p == '-';
        p++;
    }
    if (negative && !allow_negative) {
        hmb_set_err(err, errlen, "\"%s\": must not be negative", piece);
        return -1;
    }
    if (!isdigit((unsigned char)*p)) {
        hmb_set_err(err, errlen, "\"%s\": not a number", piece);
        return -1;
    }
    unsigned long long value = 0;
    while (isdigit((unsigned char)*p)) {
        unsigned digit = (unsigned)(*p - '0');
        if (value > (ULLONG_MAX - digit) / 10) {
            hmb_set_err(err, errlen, "\"%s\": too large", piece);
            return -1;
        }
        value = value * 10 + digit;
        p++;
    }
    if (*p == '.' || *p == 'e' || *p == 'E') {
        hmb_set_err(err, errlen, "\"%s\": must be a whole number", piece);
        return -1;
    }
    unsigned shift = 0;
    if (*p) {
        char unit = (char)toupper((unsigned char)*p);
        const char *rest = p + 1;
        if (unit == 'K')
            shift = 10;
        else if (unit == 'M')
            shift = 20;
        else if (unit == 'G')
            shift = 30;
        else if (unit == 'B' && *rest == '\0')
            shift = 0; /* "8B" */
        else {
            hmb_set_err(err, errlen, "\"%s\": unknown unit suffix \"%s\" (use K, M or G)", piece, p);
            return -1;
        }
        if (unit != 'B' && *rest && strcmp(rest, "B") && strcmp(rest, "b") &&
            strcmp(rest, "iB") && strcmp(rest, "ib") && strcmp(rest, "IB") && strcmp(rest, "Ib")) {
            hmb_set_err(err, errlen, "\"%s\": unknown unit suffix \"%s\" (use K, M or G)", piece, p);
            return -1;
        }
    }
    if (shift && value > (ULLONG_MAX >> shift)) {
        hmb_set_err(err, errlen, "\"%s\": too large", piece);
        return -1;
    }
    value <<= shift;
    if (value > (unsigned long long)LLONG_MAX + (negative ? 1ull : 0ull)) {
        hmb_set_err(err, errlen, "\"%s\": too large", piece);
        return -1;
    }
    *out = negative ? (long long)(0 - value) : (long long)value;
    return 0;
}

/* A growable array of long long. */
typedef struct {
    long long *v;
    int n;
    size_t cap;
} ll_vec;

static int vec_push(ll_vec *vec, long long x, const char *item, char *err, size_t errlen)
{
    if (vec->n >= MAX_LIST_VALUES) {
        hmb_set_err(err, errlen, "\"%s\": expands to more than %d values", item, MAX_LIST_VALUES);
        return -1;
    }
    vec->v = hmb_grow(vec->v, &vec->cap, (size_t)vec->n, sizeof *vec->v);
    vec->v[vec->n++] = x;
    return 0;
}

/* One list item: a value, or a range "a:b", "a:b:xF", "a:b:+S". */
static int parse_item(const char *item, int allow_negative, ll_vec *vec, char *err, size_t errlen)
{
    const char *c1 = strchr(item, ':');
    if (!c1) {
        long long x;
        if (parse_scaled_int(item, strlen(item), allow_negative, &x, err, errlen))
            return -1;
        return vec_push(vec, x, item, err, errlen);
    }
    const char *c2 = strchr(c1 + 1, ':');
    if (c2 && strchr(c2 + 1, ':')) {
        hmb_set_err(err, errlen, "\"%s\": a range is start:end or start:end:xF or start:end:+S", item);
        return -1;
    }
    size_t end_len = (size_t)((c2 ? c2 : c1 + strlen(c1)) - (c1 + 1));
    if (c1 == item || end_len == 0 || (c2 && c2[1] == '\0')) {
        hmb_set_err(err, errlen, "\"%s\": incomplete range (use start:end, start:end:xF or start:end:+S)", item);
        return -1;
    }
    long long start, end;
    if (parse_scaled_int(item, (size_t)(c1 - item), allow_negative, &start, err, errlen) ||
        parse_scaled_int(c1 + 1, end_len, allow_negative, &end, err, errlen))
        return -1;
    if (end < start) {
        hmb_set_err(err, errlen, "\"%s\": range end is below its start", item);
        return -1;
    }
    int geometric = 1;
    long long step = 2;
    if (c2) {
        const char *s = c2 + 1;
        if (*s == 'x' || *s == 'X' || *s == '*')
            geometric = 1;
        else if (*s == '+')
            geometric = 0;
        else {
            hmb_set_err(err, errlen, "\"%s\": step \"%s\" must be xF (factor) or +S (increment)", item, s);
            return -1;
        }
        if (parse_scaled_int(s + 1, strlen(s + 1), 0, &step, err, errlen))
            return -1;
        if (geometric && step < 2) {
            hmb_set_err(err, errlen, "\"%s\": factor must be at least 2", item);
            return -1;
        }
        if (!geometric && step < 1) {
            hmb_set_err(err, errlen, "\"%s\": increment must be at least 1", item);
            return -1;
        }
    }
    if (geometric && start <= 0) {
        hmb_set_err(err, errlen, "\"%s\": a geometric range must start above 0 (use start:end:+S)", item);
        return -1;
    }
    for (long long x = start;;) {
        if (vec_push(vec, x, item, err, errlen))
            return -1;
        /* Advance without overflowing; stop past the end. */
        if (geometric) {
            if (x > end / step)
                break;
            x *= step;
        } else {
            if ((unsigned long long)end - (unsigned long long)x < (unsigned long long)step)
                break; /* end - x computed without overflow: x <= end here */
            x += step;
        }
        if (x > end)
            break;
    }
    return 0;
}

static int parse_list(const char *s, int allow_negative, ll_vec *vec, char *err, size_t errlen)
{
    if (!s || !*s) {
        hmb_set_err(err, errlen, "empty value");
        return -1;
    }
    const char *p = s;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[128];
        if (len == 0) {
            hmb_set_err(err, errlen, "\"%s\": empty list item", s);
            return -1;
        }
        if (len >= sizeof item) {
            hmb_set_err(err, errlen, "\"%.40s...\": list item too long", p);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        if (parse_item(item, allow_negative, vec, err, errlen))
            return -1;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

int hmb_parse_size(const char *s, size_t *out, char *err, size_t errlen)
{
    if (!s || !*s) {
        hmb_set_err(err, errlen, "empty size");
        return -1;
    }
    if (strchr(s, ':') || strchr(s, ',')) {
        hmb_set_err(err, errlen, "\"%s\": one size expected, not a list or range", s);
        return -1;
    }
    long long x;
    if (parse_scaled_int(s, strlen(s), 0, &x, err, errlen))
        return -1;
    if ((unsigned long long)x > SIZE_MAX) {
        hmb_set_err(err, errlen, "\"%s\": too large", s);
        return -1;
    }
    *out = (size_t)x;
    return 0;
}

int hmb_parse_size_list(const char *s, size_t **out, int *count, char *err, size_t errlen)
{
    ll_vec vec = {0};
    if (parse_list(s, 0, &vec, err, errlen)) {
        free(vec.v);
        return -1;
    }
    size_t *sizes = malloc((size_t)vec.n * sizeof *sizes);
    if (!sizes) {
        free(vec.v);
        hmb_set_err(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < vec.n; i++)
        sizes[i] = (size_t)vec.v[i];
    *out = sizes;
    *count = vec.n;
    free(vec.v);
    return 0;
}

int hmb_parse_int_list(const char *s, long long **out, int *count, char *err, size_t errlen)
{
    ll_vec vec = {0};
    if (parse_list(s, 1, &vec, err, errlen)) {
        free(vec.v);
        return -1;
    }
    *out = vec.v;
    *count = vec.n;
    return 0;
}

int hmb_parse_duration_ns(const char *s, int64_t *out, char *err, size_t errlen)
{
    if (!s || !*s) {
        hmb_set_err(err, errlen, "empty duration");
        return -1;
    }
    const char *p = s;
    if (*p == '-') {
        hmb_set_err(err, errlen, "\"%s\": a duration must not be negative", s);
        return -1;
    }
    /* plain decimal only: no sign, spaces, hex ("0x10ms"), inf or nan */
    const char *end;
    double value;
    if (!isdigit((unsigned char)*p) && *p != '.') {
        hmb_set_err(err, errlen, "\"%s\": not a duration (e.g. 500ns, 10us, 1.5ms, 2s)", s);
        return -1;
    }
    if (hmb_parse_decimal(p, &value, &end)) {
        hmb_set_err(err, errlen, "\"%s\": %s", s,
                    end == p ? "not a duration (e.g. 500ns, 10us, 1.5ms, 2s)" : "too large or too small a number");
        return -1;
    }
    double scale_ns;
    if (*end == '\0') {
        /* "--timeout 60" once meant 60 us and fired at once: only 0 needs no unit. */
        if (value != 0.0) {
            hmb_set_err(err, errlen, "\"%s\": a duration needs a unit (e.g. %sus, %sms or %ss)", s, p, p, p);
            return -1;
        }
        scale_ns = 0.0;
    } else if (!strcmp(end, "us") || !strcmp(end, "\xc2\xb5s") /* µs */)
        scale_ns = 1e3;
    else if (!strcmp(end, "ns"))
        scale_ns = 1.0;
    else if (!strcmp(end, "ms"))
        scale_ns = 1e6;
    else if (!strcmp(end, "s"))
        scale_ns = 1e9;
    else {
        hmb_set_err(err, errlen, "\"%s\": unknown time unit \"%s\" (use ns, us, ms or s)", s, end);
        return -1;
    }
    double ns = value * scale_ns;
    if (ns >= 9.2e18) {
        hmb_set_err(err, errlen, "\"%s\": too large", s);
        return -1;
    }
    if (value > 0.0 && llround(ns) == 0) { /* "1e-9ns" would silently be no time at all */
        hmb_set_err(err, errlen, "\"%s\": below the resolution of 1 ns (rounds to 0; write 0 for none)", s);
        return -1;
    }
    *out = (int64_t)llround(ns);
    return 0;
}

void hmb_format_size(size_t bytes, char *buf, size_t len)
{
    static const char units[] = {'G', 'M', 'K'};
    static const unsigned shifts[] = {30, 20, 10};
    for (int i = 0; i < 3; i++) {
        size_t unit = (size_t)1 << shifts[i];
        if (bytes >= unit && bytes % unit == 0) {
            snprintf(buf, len, "%zu%c", bytes / unit, units[i]);
            return;
        }
    }
    snprintf(buf, len, "%zu", bytes);
}
