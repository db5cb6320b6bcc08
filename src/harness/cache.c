/* --cache cold: before every timed iteration, stream a buffer twice the last-level cache
 * through the core and flush the benchmark's registered buffers line by line, so message
 * data starts out of cache. --cache hot (default) does nothing. */
#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HMB_HAVE_CLFLUSH 1
#endif

/* Size of the highest-level cache of cpu0 from sysfs; 0 if unknown. */
static size_t llc_from_sysfs(void)
{
    glob_t g;
    size_t best_bytes = 0;
    int best_level = -1;
    if (glob("/sys/devices/system/cpu/cpu0/cache/index*", 0, NULL, &g) != 0)
        return 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        char path[512];
        int level = -1;
        unsigned long size = 0;
        char unit = 0;
        snprintf(path, sizeof path, "%s/level", g.gl_pathv[i]);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fscanf(f, "%d", &level) != 1)
            level = -1;
        fclose(f);
        snprintf(path, sizeof path, "%s/size", g.gl_pathv[i]);
        f = fopen(path, "r");
        if (!f)
            continue;
        int n = fscanf(f, "%lu%c", &size, &unit);
        fclose(f);
        if (n < 1)
            continue;
        size_t bytes = size;
        if (n == 2 && (unit == 'K' || unit == 'k'))
            bytes = size << 10;
        else if (n == 2 && unit == 'M')
            bytes = size << 20;
        if (level > best_level || (level == best_level && bytes > best_bytes)) {
            best_level = level;
            best_bytes = bytes;
        }
    }
    globfree(&g);
    return best_bytes;
}

/* One pass reading every 8-byte word of buf: its time in ns. */
static long long read_pass_ns(const uint64_t *buf, size_t words)
{
    int64_t t0 = hmb_now_ns();
    uint64_t sum = 0;
    for (size_t k = 0; k < words; k++)
        sum += ((const volatile uint64_t *)buf)[k];
    int64_t t1 = hmb_now_ns();
    __asm__ volatile("" : : "r"(sum));
    return (long long)(t1 - t0);
}

/* Does a flush evict? A buffer that fits in the caches, read hot (just read) and right after
 * hmb_cache_flush (registered like a message buffer): the fastest of PROBE_REPS passes each.
 * `hmb check` judges the ratio (machine physics); the run header records both. */
#define PROBE_BYTES (1u << 20)
#define PROBE_REPS 3
static void probe(hmb_ctx *ctx)
{
    hmb_cache_state *c = &ctx->cache;
    size_t bytes = PROBE_BYTES < c->llc_bytes / 4 ? PROBE_BYTES : c->llc_bytes / 4;
    uint64_t *buf = NULL;
    if (bytes < 4096 || posix_memalign((void **)&buf, 4096, bytes) != 0)
        return;
    memset(buf, 1, bytes);
    long long hot = -1, cold = -1;
    for (int r = 0; r < PROBE_REPS; r++) {
        read_pass_ns(buf, bytes / 8); /* now hot */
        long long t = read_pass_ns(buf, bytes / 8);
        hot = hot < 0 || t < hot ? t : hot;
    }
    hmb_cache_register(ctx, buf, bytes);
    for (int r = 0; r < PROBE_REPS; r++) {
        hmb_cache_flush(ctx);
        long long t = read_pass_ns(buf, bytes / 8);
        cold = cold < 0 || t < cold ? t : cold;
    }
    hmb_cache_unregister(ctx, buf);
    free(buf);
    c->flushes = 0;
    c->probe_bytes = bytes;
    c->probe_hot_ns = hot;
    c->probe_cold_ns = cold;
}

int hmb_cache_init(hmb_ctx *ctx)
{
    hmb_cache_state *c = &ctx->cache;
    c->cold = ctx->opt.common.cache == HMB_CACHE_COLD;
    const hmb_sizes llc = ctx->opt.common.llc_size;
    c->llc_bytes = llc.n > 0 && llc.v[0] > 0 ? llc.v[0] : llc_from_sysfs();
    if (c->llc_bytes == 0)
        c->llc_bytes = 64u << 20; /* unknown: assume a large LLC rather than a too-small flush */
    if (!c->cold)
        return 1;
    c->flush_bytes = 2 * c->llc_bytes;
    c->flush_buf = malloc(c->flush_bytes);
    if (!c->flush_buf)
        return 0;
    memset(c->flush_buf, 1, c->flush_bytes);
    probe(ctx);
    return 1;
}

void hmb_cache_register(hmb_ctx *ctx, const void *buf, size_t len)
{
    hmb_cache_state *c = &ctx->cache;
    if (!buf || len == 0)
        return;
    c->items = hmb_grow(c->items, &c->capacity, (size_t)c->count, sizeof *c->items);
    c->items[c->count].buf = buf;
    c->items[c->count].len = len;
    c->count++;
}

/* A registration must end before its buffer is freed: the flush touches every registered
 * byte, and a freed large buffer is unmapped (SIGSEGV), a small one belongs to someone else. */
void hmb_cache_unregister(hmb_ctx *ctx, const void *buf)
{
    hmb_cache_state *c = &ctx->cache;
    int kept = 0;
    for (int b = 0; b < c->count; b++)
        if (c->items[b].buf != buf)
            c->items[kept++] = c->items[b];
    c->count = kept;
}

void hmb_cache_unregister_all(hmb_ctx *ctx) { ctx->cache.count = 0; }

size_t hmb_cache_llc_bytes(const hmb_ctx *ctx) { return ctx->cache.llc_bytes; }

void hmb_cache_flush(hmb_ctx *ctx)
{
    hmb_cache_state *c = &ctx->cache;
    if (!c->cold)
        return;
    /* Write then read the big buffer: evicts everything else from every level. */
    volatile unsigned char *big = c->flush_buf;
    for (size_t i = 0; i < c->flush_bytes; i += 64)
        big[i] = (unsigned char)(big[i] + 1);
    unsigned sum = 0;
    for (size_t i = 0; i < c->flush_bytes; i += 64)
        sum += big[i];
    (void)sum;
    c->flushes++;
    c->flushed_bytes = 0;
    for (int b = 0; b < c->count; b++)
        c->flushed_bytes += c->items[b].len;
#ifdef HMB_HAVE_CLFLUSH
    for (int b = 0; b < c->count; b++) {
        const char *p = c->items[b].buf;
        for (size_t off = 0; off < c->items[b].len; off += 64)
            _mm_clflush(p + off);
        _mm_clflush(p + c->items[b].len - 1);
    }
    _mm_mfence();
#endif
}

void *hmb_buffer_alloc(hmb_ctx *ctx, size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0)
        return NULL;
    memset(p, 0, bytes ? bytes : 1);
    hmb_cache_register(ctx, p, bytes);
    return p;
}

void hmb_buffer_free(hmb_ctx *ctx, void *buf, size_t bytes)
{
    if (!buf)
        return;
    hmb_cache_unregister(ctx, buf);
    hmb_check_unregister(ctx, buf, bytes);
    free(buf);
}

void hmb_cache_annotate(hmb_ctx *ctx)
{
    if (!ctx->cache.cold)
        return;
    hmb_result_add_num(ctx, "cache_flushes", (double)ctx->cache.flushes);
    hmb_result_add_num(ctx, "cache_flushed_bytes", (double)ctx->cache.flushed_bytes);
}

void hmb_cache_evict(hmb_ctx *ctx)
{
    if (!ctx->cache.cold)
        return;
    hmb_phase(ctx, "cache flush between modes");
    hmb_cache_flush(ctx);
    MPI_Barrier(ctx->run.comm);
}

void hmb_cache_free(hmb_ctx *ctx)
{
    free(ctx->cache.flush_buf);
    free(ctx->cache.items);
    memset(&ctx->cache, 0, sizeof ctx->cache);
}
