/* Private to async (async.c: the three phases, their metrics and the descriptor; async_setup.c:
 * options, library progress, calibration, points, set-up and the record; async_ops.c: the
 * operations). The family's description is at the top of async.c. */
#ifndef HMB_BENCH_ASYNC_H
#define HMB_BENCH_ASYNC_H

#include "async_ops.h"

#define MAX_MODES 16
typedef enum { PROG_NONE, PROG_TEST, PROG_THREAD, PROG_IMPL } progress_kind;

#define ASYNC_OPTIONS(X)                                                                                            \
    X(op, CHOICE_ARGS, .default_value = "pt2pt,allreduce", .choices = ASYNC_OP_CHOICES,                             \
      .help = "operations (comma list)")                                                                           \
    X(progress, CHOICE_ARGS, .default_value = "none,test:10,thread", .min = 0.1, .max = 1e6,                        \
      .choices = "none|test:|thread|impl", /* progress_kind order */                                               \
      .help = "progress modes (comma list): none, test:P (MPI_Testall every P µs of compute, 0.1..1e6), thread, "   \
              "impl")                                                                                               \
    X(neighbors, INT, .default_value = "2", .min = 1, .max = 64, .used_by = "op:exch,neighbor_alltoall",            \
      .help = "exch/neighbor_alltoall: neighbours per rank (ring: even; grid2d: 4 or 8)")                          \
    X(topology, CHOICE, .default_value = "ring", .choices = "ring|grid2d", .used_by = "op:exch,neighbor_alltoall",  \
      .help = "exch/neighbor_alltoall neighbourhood: ring or periodic 2-D grid")                                   \
    X(calc_factor, DOUBLE, .default_value = "2.0", .min = 0.01, .max = 1000,                                        \
      .help = "without --compute: C = factor x the blocking time of the op and size (seed: 1.5-2)")               \
    X(baseline, CHOICE, .default_value = "pingpong", .choices = ASYNC_BASELINE_CHOICES, .used_by = "op:pt2pt", /* async_baseline order */ \
      .help = "pt2pt blocking baseline: pingpong (IMB-ASYNC sync_pt2pt: Send then Recv, reversed on the partner) " \
              "or sendrecv (MPI_Sendrecv)")
HMB_OPTIONS(async_opts, ASYNC_OPTIONS);
enum { TOPOLOGY_RING, TOPOLOGY_GRID2D };

/* A point: the operation, the --progress item as given (and its place in --progress), the
 * neighbours of the neighbourhood operations; a calibration's point says so in phase. */
#define ASYNC_PARAMS(X)                                                                                             \
    X(op, NAME, .names = async_op_names) X(progress, TEXT) X(neighbors, INT) X(phase, TEXT) X(progress_item, DATA)
HMB_POINT_PARAMS(async_point, ASYNC_PARAMS);

typedef struct {
    progress_kind kind;
    double poll_us; /* test:P */
} progress_spec;

typedef struct {
    async_exchange ex;
    progress_spec mode;
    int64_t c_ns; /* calibrated compute C, the same on every rank */
    int library_thread;
    hmb_progress *thread;
    double calibration_error;    /* this rank's, for a request of C (hmb_compute_calibration_error) */
    long too_fast_samples;       /* rank 0: measured iterations with a kernel faster than calibrated */
    double fastest_kernel_ratio; /* rank 0: the smallest kernel time / C among them, any rank */
    double rate_probe[2];        /* rank 0 after the probe: [0] ranks whose rate was measured again,
                                  * [1] the shortest probe median, measured / requested, of any rank */
} async_state;

/* async_setup.c */
void async_check(hmb_ctx *ctx);
void async_points(hmb_ctx *ctx, hmb_point_list *out);
void *async_setup(hmb_ctx *ctx, const hmb_point *pt);
void async_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt);
void async_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt);
/* One progress poke on all outstanding requests; returns 1 when all are complete (async.c). */
int async_test_requests(MPI_Request *reqs, int nreq);
extern const char async_phase_letters[]; /* the phases' letters, for the record of their orders */
enum { ASYNC_NPHASES = 3 };

#endif
