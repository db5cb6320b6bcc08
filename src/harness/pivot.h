/* The seed-style summary table (bench->pivot_metrics; pivot.c). */
#ifndef HMB_PIVOT_H
#define HMB_PIVOT_H

#include "core.h"

typedef struct hmb_pivot hmb_pivot;
void hmb_pivot_add(hmb_ctx *ctx, const hmb_point *pt, const hmb_summary *summaries); /* NULL: unsupported */
void hmb_pivot_print(hmb_ctx *ctx);
void hmb_pivot_free(hmb_ctx *ctx);

#endif
