/* Output: the JSON Lines records and the stdout table (output.c), the point loop (measure.c). */
#ifndef HMB_OUTPUT_H
#define HMB_OUTPUT_H

#include "core.h"
#include "json.h"

/* output.c */
void hmb_output_open(hmb_ctx *ctx); /* rank 0; ctx->out.json stays NULL if it cannot open */
void hmb_output_close(hmb_ctx *ctx);
void hmb_output_record(hmb_ctx *ctx, hmb_json *record); /* rank 0: one line, fflush+fsync */
/* Any rank: append one record line with a single write (failure records). */
void hmb_output_record_any_rank(hmb_ctx *ctx, hmb_json *record);
void hmb_output_begin_record(hmb_ctx *ctx, hmb_json *j, const char *type);
void hmb_output_failure(hmb_ctx *ctx, const char *kind, int partition, const char *message);
void hmb_output_plan(hmb_ctx *ctx, int points); /* rank 0: the result records this run will write */
void hmb_table_header(hmb_ctx *ctx);
void hmb_table_row(hmb_ctx *ctx, const hmb_point *pt, const hmb_summary *summaries, long iterations);
void hmb_table_unsupported(hmb_ctx *ctx, const hmb_point *pt, const char *reason);
/* Whether the summary tables (pivot) show this metric: all unless --metric names others. */
int hmb_table_metric_selected(const hmb_ctx *ctx, const char *name);
enum { HMB_TABLE_COLUMNS = 120 };
void hmb_json_option_value(hmb_json *j, const hmb_optval *v);
/* The point's set parameters as JSON fields (name: number or text). */
void hmb_json_point_params(hmb_json *j, const hmb_point *pt);

/* measure.c */
void hmb_measure_point(hmb_ctx *ctx, const hmb_point *pt);

#endif
