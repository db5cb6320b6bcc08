/* HMB — Hybrid MPI Benchmarks: what the benchmarks and the harness both name. The version and
 * exit statuses, the thread limit, the handles every other header passes around (the run's
 * context, a point, a communication policy) and the optional MPI features the build found.
 *
 * A benchmark includes hmb/bench.h, which includes this and the headers of the harness's
 * services it may use; the harness's own modules include the headers of what they implement. */
#ifndef HMB_HMB_H
#define HMB_HMB_H

#include <limits.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HMB_VERSION "0.1.0"
#define HMB_SCHEMA_VERSION 1

/* Exit statuses. */
#define HMB_EXIT_OK 0
#define HMB_EXIT_USAGE 2      /* bad input, too few ranks, thread level not provided */
#define HMB_EXIT_VALIDATION 3 /* received data wrong (or library reported arrival wrongly) */
#define HMB_EXIT_TIMEOUT 4    /* watchdog fired */

#define HMB_MAX_THREADS 256

/* The handles: the run's context (the harness's, opaque to a benchmark), one point of the run
 * (hmb/bench.h), and a communication policy (hmb/bench.h, "communication policies"). */
typedef struct hmb_ctx hmb_ctx;
typedef struct hmb_point hmb_point;
typedef struct hmb_comm_ops_s hmb_comm_ops;

/* A library with partitioned point-to-point communication (MPI 4.0). */
#if defined(HMB_HAVE_MPI_PSEND_INIT) && defined(HMB_HAVE_MPI_PARRIVED)
#define HMB_HAVE_PARTITIONED 1
#else
#define HMB_HAVE_PARTITIONED 0
#endif

#ifdef __cplusplus
}
#endif
#endif
