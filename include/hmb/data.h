/* HMB — data patterns and the checks a benchmark makes by hand (src/harness/poison.c,
 * validate.c): the pattern of (rank, part, iteration), the send data regime (--data), poison, and
 * --inject corrupt for data a benchmark checks itself. The harness's own validation, by
 * registration, is in hmb/bench.h ("validation"). */
#ifndef HMB_DATA_H
#define HMB_DATA_H

#include "hmb/hmb.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Pattern depending on (rank, part, iter) — part is a partition or thread index. */
void hmb_fill(void *buf, size_t len, int rank, int part, long iter);
/* Returns 1 if buf holds the pattern (and applies the test-only --inject corrupt switch
 * first). On mismatch returns 0 and stores the first bad byte offset in *bad_offset. */
int hmb_check(hmb_ctx *ctx, void *buf, size_t len, int rank, int part, long iter, size_t *bad_offset);
/* hmb_check + on mismatch hmb_validation_failure naming the place. Returns 1 if good. */
int hmb_check_buffer(hmb_ctx *ctx, const hmb_point *pt, void *buf, size_t len,
                     int src_rank, int part, long iter);
/* Send data regime, --data reuse|fresh. fresh: like an application that writes its data before
 * every send, send buffers are rewritten every iteration (generation = iter). reuse (default):
 * like osu_bw, which sends one buffer again and again, send data is written once per point; to
 * still catch stale data, a benchmark keeps two send-buffer sets, uses set (iter & 1) in
 * iteration iter, and writes generation iter & 1 into it, so data of the previous iteration
 * always differs. Two lines adopt it:
 *   prepare():  if (hmb_data_refill(ctx, iter))
 *                   hmb_fill(send_set[iter & 1], len, rank, part, hmb_data_gen(ctx, iter));
 *   verify():   hmb_check_data(ctx, pt, recv_buf, len, src_rank, part, iter);
 * hmb_data_gen: the generation whose pattern iteration iter sends (iter, or iter & 1 under reuse).
 * hmb_data_refill: 1 when prepare() must write iteration iter's set (always under fresh; in
 * iterations 0 and 1 of a point under reuse — iterations are numbered from 0 per point).
 * hmb_check_data: hmb_check_buffer expecting generation hmb_data_gen(ctx, iter); --inject corrupt
 * and a failure name the iteration iter. */
long hmb_data_gen(const hmb_ctx *ctx, long iter);
int hmb_data_refill(const hmb_ctx *ctx, long iter);
int hmb_check_data(hmb_ctx *ctx, const hmb_point *pt, void *buf, size_t len, int src_rank, int part, long iter);
/* Poison a receive buffer without dirtying it: one 8-byte word of HMB_POISON_BYTE at the start
 * of every 4 KB page of buf and in its last 8 bytes (all of it when shorter than 16 bytes). For a
 * benchmark whose send data do not change between samples (p2p's hot-cache latency: one send
 * set, as osu_latency), poisoning is what catches a message that did not arrive; a full memset
 * would leave the whole buffer dirty in this core's cache, and writing it back would be timed
 * in the next sample (4 MB: +18 % latency on MPICH). A missing message, or a missing page of
 * one, leaves poison the check finds; every byte is still compared with the pattern. */
void hmb_poison_pages(void *buf, size_t len);
/* hmb_check_buffer expecting generation gen (a benchmark that keeps one send set, e.g. p2p's
 * hot-cache latency); --inject corrupt and a failure name the iteration iter. */
int hmb_check_gen(hmb_ctx *ctx, const hmb_point *pt, void *buf, size_t len, int src_rank, int part, long iter,
                  long gen);
#define HMB_POISON_BYTE 0xA5
#define HMB_SENT_BYTE 0x5E
/* Why got (len bytes, want: what it should hold) is wrong, when the poison says: the receive poison
 * (never written) or the sender's (its send buffer read after the send completed), whole or in the
 * wrong bytes alone, each a library conformance problem; why is " (...)", or "" when it does not. */
void hmb_poison_why(const unsigned char *got, const unsigned char *want, size_t len, char *why, size_t whylen);
/* --inject corrupt for data a benchmark checks itself (a reduction's result, a halo it unpacked):
 * 1 exactly once, when this is the check --inject corrupt picks (the first check of the picked rank
 * in that iteration); the caller then flips a byte of what it is about to check. */
int hmb_corrupt_pick(hmb_ctx *ctx, long iter);

#ifdef __cplusplus
}
#endif
#endif
