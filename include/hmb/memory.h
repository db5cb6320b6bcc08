/* HMB — memory: message buffers and the --cache cold registry (src/harness/cache.c), this
 * process's resident memory, and the start-up check that a point fits the node. */
#ifndef HMB_MEMORY_H
#define HMB_MEMORY_H

#include "hmb/hmb.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Register a buffer of the benchmark so --cache cold evicts it before every iteration.
 * Whoever frees a registered buffer unregisters it first (the flush touches every registered
 * byte); the harness drops a point's remaining registrations after teardown(). */
void hmb_cache_register(hmb_ctx *ctx, const void *buf, size_t len);
void hmb_cache_unregister(hmb_ctx *ctx, const void *buf); /* every registration of buf */
void hmb_cache_unregister_all(hmb_ctx *ctx);
/* A message buffer: page-aligned, zeroed (its pages faulted in now, not inside a timed region)
 * and registered for --cache cold. NULL if it cannot be allocated. Teardown frees it with free()
 * (the harness drops a point's registrations after teardown). */
void *hmb_buffer_alloc(hmb_ctx *ctx, size_t bytes);
/* Frees a buffer of hmb_buffer_alloc before the point ends (or outside a point): drops its
 * --cache cold registration and every validation registration inside it first. */
void hmb_buffer_free(hmb_ctx *ctx, void *buf, size_t bytes);
/* Last-level cache size in bytes (sysfs or --llc-size): e.g. to keep a --cache hot working
 * set cache-resident. */
size_t hmb_cache_llc_bytes(const hmb_ctx *ctx);
/* Between the modes (phases) of one paired iteration, outside their timed regions: under --cache
 * cold, evict the registered buffers again, so every mode starts cold (the harness evicts only
 * before an iteration); under --cache hot nothing. Collective: every rank calls it at the same
 * point (it ends with a barrier under cold). */
void hmb_cache_evict(hmb_ctx *ctx);

/* This process's resident memory now (VmRSS) and its peak (VmHWM), kB, from /proc/self/status.
 * Returns 1, or 0 (values -1) where the system does not say. */
int hmb_memory_kB(long *rss_kB, long *hwm_kB);

/* A usage error (exit 2) unless bytes_per_rank fits this rank's share of its node's physical
 * memory (the node's memory over the ranks on it): a size too large for the machine is refused
 * at start-up, in one line, instead of the kernel killing the rank part-way through. */
void hmb_require_memory(hmb_ctx *ctx, double bytes_per_rank, const char *what);

#ifdef __cplusplus
}
#endif
#endif
