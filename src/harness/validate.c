/* Data validation: a pattern that depends on (rank, part, iteration) and on every 8-byte
 * word's position, so a swapped, misplaced, missing or stale (previous-iteration) byte is
 * caught; the test-only --inject corrupt switch; the fatal validation report. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "ctx.h"
#include "output.h"
#include "validate.h"

static uint64_t pattern_base(int rank, int part, long iter)
{
    return hmb_mix64(((uint64_t)(uint32_t)rank << 40) ^ ((uint64_t)(uint32_t)part << 20) ^
                 hmb_mix64((uint64_t)iter));
}

/* Word k of the pattern: one multiply-xorshift per word keeps fill/check cheap. */
static inline uint64_t pattern_word(uint64_t base, uint64_t k)
{
    uint64_t x = base + k * 0x9e3779b97f4a7c15ULL;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 32;
    return x;
}

void hmb_fill(void *buf, size_t len, int rank, int part, long iter)
{
    unsigned char *p = buf;
    uint64_t base = pattern_base(rank, part, iter);
    size_t words = len / 8;
    for (size_t k = 0; k < words; k++) {
        uint64_t w = pattern_word(base, k);
        memcpy(p + 8 * k, &w, 8);
    }
    if (len % 8) {
        uint64_t w = pattern_word(base, words);
        memcpy(p + 8 * words, &w, len % 8);
    }
}

static int find_mismatch(const unsigned char *p, size_t len, uint64_t base, size_t *bad_offset)
{
    size_t words = len / 8;
    for (size_t k = 0; k < words; k++) {
        uint64_t want = pattern_word(base, k), got;
        memcpy(&got, p + 8 * k, 8);
        if (got != want) {
            const unsigned char *w = (const unsigned char *)&want;
            size_t b = 0;
            while (b < 8 && p[8 * k + b] == w[b])
                b++;
            *bad_offset = 8 * k + b;
            return 0;
        }
    }
    if (len % 8) {
        uint64_t want = pattern_word(base, words);
        const unsigned char *w = (const unsigned char *)&want;
        for (size_t b = 0; b < len % 8; b++) {
            if (p[8 * words + b] != w[b]) {
                *bad_offset = 8 * words + b;
                return 0;
            }
        }
    }
    return 1;
}

/* Test-only: the first check of iteration --inject corrupt:I on the chosen rank is corrupted, to
 * prove that validation catches it. Every check calls it (so the harness learns which ranks check). */
int hmb_corrupt_pick(hmb_ctx *ctx, long iter)
{
    if (!ctx->val.validate)
        return 0;
    atomic_store(&ctx->hooks.checked_this_iter, 1);
    if (iter == ctx->hooks.inject[HMB_INJECT_CORRUPT] && (ctx->hooks.corrupt_rank < 0 || ctx->hooks.corrupt_rank == ctx->run.rank) &&
        atomic_exchange(&ctx->hooks.corrupt_done, 1) == 0) {
        hmb_inject_fired(ctx, HMB_INJECT_CORRUPT);
        return 1;
    }
    return 0;
}

/* hmb_check against the pattern of generation gen while --inject corrupt keys on the iteration. */
static int check_pattern(hmb_ctx *ctx, void *buf, size_t len, int rank, int part, long iter, long gen,
                         size_t *bad_offset)
{
    if (!ctx->val.validate)
        return 1;
    if (len > 0 && hmb_corrupt_pick(ctx, iter))
        ((unsigned char *)buf)[len / 2] ^= 0x5a;
    size_t bad = 0;
    int ok = find_mismatch(buf, len, pattern_base(rank, part, gen), &bad);
    if (!ok && bad_offset)
        *bad_offset = bad;
    return ok;
}

int hmb_check(hmb_ctx *ctx, void *buf, size_t len, int rank, int part, long iter, size_t *bad_offset)
{
    return check_pattern(ctx, buf, len, rank, part, iter, iter, bad_offset);
}

/* hmb_check_buffer for generation gen: a failure names the iteration iter. */
static int check_generation(hmb_ctx *ctx, const hmb_point *pt, void *buf, size_t len, int src_rank, int part,
                            long iter, long gen)
{
    size_t bad = 0;
    if (check_pattern(ctx, buf, len, src_rank, part, iter, gen, &bad))
        return 1;
    unsigned char want_bytes[8];
    uint64_t want = pattern_word(pattern_base(src_rank, part, gen), bad / 8);
    memcpy(want_bytes, &want, 8);
    char generation[48] = "";
    if (gen != iter)
        snprintf(generation, sizeof generation, " (--data reuse generation %ld)", gen);
    hmb_validation_failure(ctx, pt, iter, part, "byte %zu of %zu from rank %d is 0x%02x, expected 0x%02x%s", bad,
                           len, src_rank, ((unsigned char *)buf)[bad], want_bytes[bad % 8], generation);
}

int hmb_check_buffer(hmb_ctx *ctx, const hmb_point *pt, void *buf, size_t len, int src_rank, int part, long iter)
{
    return check_generation(ctx, pt, buf, len, src_rank, part, iter, iter);
}

/* --data: reuse writes send data once per point in two generations (iteration parity), so data
 * left over from the previous iteration still differs; fresh writes it before every send. */
static int data_reuse(const hmb_ctx *ctx) { return ctx->opt.common.data == HMB_DATA_REUSE; }

long hmb_data_gen(const hmb_ctx *ctx, long iter) { return data_reuse(ctx) ? (iter & 1) : iter; }

int hmb_data_refill(const hmb_ctx *ctx, long iter) { return !data_reuse(ctx) || iter < 2; }

int hmb_check_gen(hmb_ctx *ctx, const hmb_point *pt, void *buf, size_t len, int src_rank, int part, long iter,
                  long gen)
{
    return check_generation(ctx, pt, buf, len, src_rank, part, iter, gen);
}

int hmb_check_data(hmb_ctx *ctx, const hmb_point *pt, void *buf, size_t len, int src_rank, int part, long iter)
{
    return check_generation(ctx, pt, buf, len, src_rank, part, iter, hmb_data_gen(ctx, iter));
}

void hmb_validation_failure(hmb_ctx *ctx, const hmb_point *pt, long iter, int part, const char *fmt, ...)
{
    /* Several threads may detect problems at once: one reports, the others wait for the abort. */
    if (atomic_exchange(&ctx->failing, 1) != 0) {
        for (;;)
            pause();
    }
    char msg[1024], where[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    atomic_store(&ctx->iter, iter);
    hmb_point_describe(pt ? pt : ctx->point, where, sizeof where);
    char partition[32] = "";
    if (part >= 0)
        snprintf(partition, sizeof partition, " partition=%d", part);
    fprintf(stderr, "hmb-bench: validation failed: bench=%s %s iteration=%ld rank=%d%s: %s\n", ctx->bench->name,
            where, iter, ctx->run.rank, partition, msg);
    fflush(stderr);
    hmb_output_failure(ctx, "validation", part, msg);
    fflush(stdout);
    MPI_Abort(ctx->run.comm, HMB_EXIT_VALIDATION);
    _exit(HMB_EXIT_VALIDATION);
}

/* ------------------------------------------------------------------ the registry */

struct hmb_checked {
    int role, rank, part, pieces, group;
    hmb_pattern_fn fn; /* NULL: the pattern of (rank, part, iteration) */
    const void *arg;
    unsigned char *buf;
    size_t len;
    char label[192];
};

static void add_entry(hmb_ctx *ctx, const struct hmb_checked *entry, const char *label, va_list ap)
{
    ctx->val.checked = hmb_grow(ctx->val.checked, &ctx->val.checked_cap, ctx->val.nchecked, sizeof *ctx->val.checked);
    struct hmb_checked *c = &ctx->val.checked[ctx->val.nchecked++];
    *c = *entry;
    c->pieces = c->pieces > 0 ? c->pieces : 1;
    vsnprintf(c->label, sizeof c->label, label, ap);
}

void hmb_check_register(hmb_ctx *ctx, int role, void *buf, size_t len, int rank, int part, int pieces, int group,
                        const char *label, ...)
{
    va_list ap;
    va_start(ap, label);
    add_entry(ctx,
              &(struct hmb_checked){.role = role, .rank = rank, .part = part, .pieces = pieces, .group = group,
                                    .buf = buf, .len = len},
              label, ap);
    va_end(ap);
}

void hmb_check_register_fn(hmb_ctx *ctx, int role, void *buf, size_t len, hmb_pattern_fn fn, const void *arg,
                           int pieces, int group, const char *label, ...)
{
    va_list ap;
    va_start(ap, label);
    add_entry(ctx,
              &(struct hmb_checked){.role = role, .rank = -1, .part = -1, .pieces = pieces, .group = group,
                                    .fn = fn, .arg = arg, .buf = buf, .len = len & ~(size_t)7},
              label, ap);
    va_end(ap);
}

void hmb_check_unregister(hmb_ctx *ctx, const void *buf, size_t len)
{
    const unsigned char *lo = buf, *hi = lo + len;
    size_t k = 0;
    for (size_t i = 0; i < ctx->val.nchecked; i++)
        if (ctx->val.checked[i].buf < lo || ctx->val.checked[i].buf >= hi)
            ctx->val.checked[k++] = ctx->val.checked[i];
    ctx->val.nchecked = k;
}

void hmb_checks_clear(hmb_ctx *ctx)
{
    ctx->val.nchecked = 0;
    free(ctx->val.check_scratch);
    ctx->val.check_scratch = NULL;
    ctx->val.check_scratch_cap = 0;
}

/* The content c must hold in iteration iter, into out (c->len bytes). */
static void expected(const struct hmb_checked *c, long iter, unsigned char *out)
{
    if (c->fn)
        c->fn(c->arg, iter, (uint64_t *)(void *)out);
    else
        hmb_fill(out, c->len, c->rank, c->part, iter);
}

static unsigned char *scratch(hmb_ctx *ctx, size_t len)
{
    if (len > ctx->val.check_scratch_cap) {
        free(ctx->val.check_scratch);
        ctx->val.check_scratch = malloc(len);
        if (!ctx->val.check_scratch)
            abort(); /* the size of a buffer the benchmark holds: nothing sensible to report */
        ctx->val.check_scratch_cap = len;
    }
    return ctx->val.check_scratch;
}

void hmb_checks_prepare(hmb_ctx *ctx, long iter)
{
    if (!ctx->val.validate)
        return;
    for (size_t i = 0; i < ctx->val.nchecked; i++) {
        struct hmb_checked *c = &ctx->val.checked[i];
        if (c->role == HMB_SEND)
            expected(c, iter, c->buf);
        else
            memset(c->buf, c->role == HMB_RECEIVE ? HMB_POISON_BYTE : HMB_SENT_BYTE, c->len);
    }
}

/* Check a registered receive buffer (then poison it); on a mismatch name the piece and what it
 * holds instead: another iteration's data (at the piece's place), the receive poison or the
 * sender's poison. */
static void check_one(hmb_ctx *ctx, struct hmb_checked *c, long iter)
{
    size_t bad = 0;
    if (!c->fn) {
        if (check_pattern(ctx, c->buf, c->len, c->rank, c->part, iter, iter, &bad)) {
            memset(c->buf, HMB_POISON_BYTE, c->len);
            return;
        }
    } else {
        if (c->len > 0 && hmb_corrupt_pick(ctx, iter))
            c->buf[c->len / 2] ^= 0x5a;
        unsigned char *want = scratch(ctx, c->len);
        expected(c, iter, want);
        if (memcmp(want, c->buf, c->len) == 0 || !ctx->val.validate) {
            memset(c->buf, HMB_POISON_BYTE, c->len);
            return;
        }
        while (want[bad] == c->buf[bad])
            bad++;
    }
    unsigned char *want = scratch(ctx, c->len);
    size_t piece_len = c->len / (size_t)c->pieces;
    int piece = piece_len ? (int)(bad / piece_len) : 0;
    if (piece >= c->pieces)
        piece = c->pieces - 1;
    char why[192] = "";
    size_t start = (size_t)piece * piece_len, plen = piece == c->pieces - 1 ? c->len - start : piece_len;
    for (long g = iter - 1; g <= iter + 1 && !why[0]; g += 2) {
        if (g < 0)
            continue;
        expected(c, g, want); /* the buffer as iteration g wrote it, this piece compared */
        if (memcmp(want + start, c->buf + start, plen) == 0)
            snprintf(why, sizeof why, " (the piece holds iteration %ld's data: %s)", g,
                     g < iter ? "never delivered" : "written after its requests completed, library conformance problem");
    }
    expected(c, iter, want);
    if (!why[0])
        hmb_poison_why(c->buf + start, want + start, plen, why, sizeof why);
    hmb_validation_failure(ctx, ctx->point, iter, c->pieces > 1 ? piece : c->part,
                           "%s, piece %d of %d, cell %zu of %zu (byte %zu) is 0x%02x, expected 0x%02x%s", c->label,
                           piece, c->pieces, bad / 8, c->len / 8, bad, c->buf[bad], want[bad], why);
}

static int in_group(const struct hmb_checked *c, int group)
{
    return c->group == group || (c->group == HMB_EACH_MODE && group >= 0);
}

void hmb_checks_run(hmb_ctx *ctx, long iter, int group)
{
    if (!ctx->val.validate)
        return;
    /* The sends first: the application's buffers again, as it may reuse them; a library that
     * still reads them sends the sender's poison, named by the receiver's check. */
    for (size_t i = 0; i < ctx->val.nchecked; i++)
        if (ctx->val.checked[i].role != HMB_RECEIVE && in_group(&ctx->val.checked[i], group))
            memset(ctx->val.checked[i].buf, HMB_SENT_BYTE, ctx->val.checked[i].len);
    for (size_t i = 0; i < ctx->val.nchecked; i++)
        if (ctx->val.checked[i].role == HMB_RECEIVE && in_group(&ctx->val.checked[i], group))
            check_one(ctx, &ctx->val.checked[i], iter);
}
