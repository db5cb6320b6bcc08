/* The small JSON writer of the records, and the key/value fields a benchmark adds to them (output.c). */
#ifndef HMB_JSON_H
#define HMB_JSON_H

#include <stddef.h>

typedef struct {
    char *data;
    size_t len, cap;
    int depth;
    int need_comma[32]; /* per nesting level: an element was already written */
} hmb_json;

void hmb_json_init(hmb_json *j);
void hmb_json_free(hmb_json *j);
/* key NULL = array element (or the top-level object). */
void hmb_json_open_obj(hmb_json *j, const char *key);
void hmb_json_close_obj(hmb_json *j);
void hmb_json_open_arr(hmb_json *j, const char *key);
void hmb_json_close_arr(hmb_json *j);
void hmb_json_str(hmb_json *j, const char *key, const char *value); /* NULL -> null */
void hmb_json_num(hmb_json *j, const char *key, double value);      /* non-finite -> null */
void hmb_json_int(hmb_json *j, const char *key, long long value);
void hmb_json_bool(hmb_json *j, const char *key, int value);
void hmb_json_null(hmb_json *j, const char *key);

/* Extra key/value fields added by a benchmark (hmb_result_add_*, hmb_header_add_*). */
typedef struct {
    char *key;
    char *str; /* NULL: numeric */
    double num;
    double *rows; /* non-NULL: a table of nrows x width numbers (hmb_result_add_rows) */
    int nrows, width;
} hmb_extra_field;

typedef struct {
    int count;
    size_t capacity;
    hmb_extra_field *items;
} hmb_extras;

void hmb_extras_add(hmb_extras *e, const char *key, const char *str, double num);
void hmb_extras_clear(hmb_extras *e);
void hmb_extras_write(hmb_json *j, const char *key, const hmb_extras *e);

#endif
