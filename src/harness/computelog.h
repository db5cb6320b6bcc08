/* The measured compute of the point in flight, per thread (computelog.c; the point loop, measure.c). */
#ifndef HMB_COMPUTELOG_H
#define HMB_COMPUTELOG_H

#include <stdint.h>

#include "core.h"
#include "hmb/bench.h"
#include "json.h"

/* Record a compute call of thread tid; start an iteration (zero every thread's running totals);
 * after a measured iteration keep them; summarise the point (collective; rank 0 gets the
 * summary); free. */
void hmb_compute_log_add(hmb_ctx *ctx, int tid, int kind, int64_t requested_ns, int64_t measured_ns);
void hmb_compute_log_begin_iteration(hmb_ctx *ctx);
void hmb_compute_log_keep_iteration(hmb_ctx *ctx);
void hmb_compute_log_summarize(hmb_ctx *ctx, hmb_compute_summary *out);
void hmb_compute_log_free(hmb_ctx *ctx);
/* Rank 0: the summary as the result's "compute" object (nothing when it is not present). */
void hmb_compute_summary_write(hmb_json *j, const hmb_compute_summary *s);

#endif
