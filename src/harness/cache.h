/* --cache cold: the eviction buffer and the benchmark buffers it evicts (cache.c). */
#ifndef HMB_CACHE_H
#define HMB_CACHE_H

#include <stddef.h>

#include "hmb/bench.h"

typedef struct {
    int cold;
    size_t llc_bytes;   /* detected or --llc-size */
    size_t flush_bytes; /* size of the eviction buffer (2 x LLC) */
    unsigned char *flush_buf;
    int count; /* registered benchmark buffers */
    size_t capacity;
    struct { const void *buf; size_t len; } *items;
    long flushes;         /* this point's flushes (the mechanism, recorded per result) */
    size_t flushed_bytes; /* registered bytes the last one flushed line by line */
    /* Start-up probe (--cache cold): one pass reading PROBE bytes, hot vs after a flush (ns). */
    size_t probe_bytes;
    long long probe_hot_ns, probe_cold_ns;
} hmb_cache_state;

int hmb_cache_init(hmb_ctx *ctx); /* 0: cannot allocate the eviction buffer */
void hmb_cache_flush(hmb_ctx *ctx);
void hmb_cache_annotate(hmb_ctx *ctx); /* rank 0, --cache cold: the point's flushes in its result */
void hmb_cache_free(hmb_ctx *ctx);

#endif
