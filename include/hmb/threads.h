/* HMB — threads and their MPI resources: progress threads a benchmark starts (src/harness/
 * progress.c), MPIX streams and communicators carrying MPI 4 assertions (threadcomm.c), the
 * library's control variables (mpit.c) and oversubscription. */
#ifndef HMB_THREADS_H
#define HMB_THREADS_H

#include "hmb/hmb.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Call first thing in a progress thread the benchmark starts itself: pins the calling thread
 * to the rank's spare CPU (one in its mask that no compute thread is bound to) and returns
 * it, or, with no spare CPU, lets it run anywhere in the rank's mask and returns -1. The
 * harness records where it ran (progress_* fields of points that need a spare core). */
int hmb_pin_progress_thread(hmb_ctx *ctx);

/* A progress thread of the benchmark's own (async's progress modes, mt's get target), started
 * once per point and pinned (hmb_pin_progress_thread); idle, it sleeps and costs the compute
 * nothing. hmb_progress_publish hands it poke(arg), which it calls in a loop until poke returns
 * 1 or the caller withdraws; after hmb_progress_withdraw returns it no longer calls poke (the
 * caller may touch what poke touches, e.g. wait on its requests). start: NULL if no thread. */
typedef struct hmb_progress hmb_progress;
hmb_progress *hmb_progress_start(hmb_ctx *ctx);
void hmb_progress_publish(hmb_progress *p, int (*poke)(void *arg), void *arg);
void hmb_progress_withdraw(hmb_progress *p);
void hmb_progress_stop(hmb_progress *p); /* NULL: nothing */

/* Read an integer MPI_T control variable not bound to an object (e.g. MPICH's
 * MPIR_CVAR_ASYNC_PROGRESS, MPIR_CVAR_CH4_NUM_VCIS). Returns 1 and *value if this library
 * exposes it, 0 otherwise. Callable after MPI_Init from the main thread. */
int hmb_mpit_cvar_int(const char *name, long long *value);

/* Collective: whether a point that runs threads_here threads on this rank (not --threads: match's
 * emulator runs one per emulated neighbour thread) outnumbers the CPUs of any node, or of any
 * rank's compute mask (a bound rank runs them all on its own cores). The run
 * header's `oversubscribed` counts --threads; a benchmark records this one per point
 * (extra `oversubscribed_threads`, read by results.py like the header's). */
int hmb_threads_oversubscribe(hmb_ctx *ctx, int threads_here);

/* The communication resources of MPI + threads (seed 003; src/harness/threadcomm.c), shared by
 * mt's lanes and halo3d --thread-comm. MPIX streams are an MPICH extension: without them
 * hmb_stream is a placeholder and hmb_streams_unsupported says why. */
#if defined(HMB_HAVE_MPIX_STREAM_CREATE) && defined(HMB_HAVE_MPIX_STREAM_COMM_CREATE)
#define HMB_HAVE_STREAMS 1
typedef MPIX_Stream hmb_stream;
#else
#define HMB_HAVE_STREAMS 0
typedef int hmb_stream;
#endif
/* The launch needs (hmb_option_rule rows) of an option whose values name these resources: MPICH
 * maps threads to distinct VCIs only with one VCI per thread (the per_thread values: shared, comm,
 * tag), and MPIX_Stream_create needs a reserved VCI per stream beside the default one ("stream":
 * RESERVE_VCIS = T, NUM_VCIS = T + 1). */
#define HMB_VCI_RULES(opt, per_thread)                                                                              \
    {.option = opt, .values = per_thread, .env = "mpich:MPIR_CVAR_CH4_NUM_VCIS={threads}",                         \
     .why = "one VCI per thread so threads can map to distinct VCIs"},                                             \
    {.option = opt, .values = "stream",                                                                             \
     .env = "mpich:MPIR_CVAR_CH4_RESERVE_VCIS={threads} mpich:MPIR_CVAR_CH4_NUM_VCIS={threads_plus_one}",           \
     .why = "MPIX_Stream_create needs a reserved VCI per stream, beside the default one"}
/* A duplicate of base carrying the info assertions keys[0..n-1] = "true" (MPI 4.0:
 * mpi_assert_no_any_tag, ...); kept[k] gets the value the library kept, or "(not kept)". */
MPI_Comm hmb_comm_dup_asserting(MPI_Comm base, const char *const *keys, int n, char (*kept)[64]);
/* Why nstreams MPIX streams per process cannot be created here (no MPIX streams, or MPICH's
 * MPIR_CVAR_CH4_RESERVE_VCIS below nstreams on some rank), or NULL. Collective. */
const char *hmb_streams_unsupported(hmb_ctx *ctx, int nstreams, char *buf, size_t len);
/* A new MPIX stream; a communicator over base attaching this rank's stream (collective over
 * base: every rank creates its stream communicators in the same order). Only after
 * hmb_streams_unsupported said NULL. */
void hmb_stream_create(hmb_stream *stream);
void hmb_stream_comm(MPI_Comm base, hmb_stream stream, MPI_Comm *comm);
void hmb_stream_free(hmb_stream *stream);

#ifdef __cplusplus
}
#endif
#endif
