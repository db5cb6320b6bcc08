/* Private to stencil3d: pattern.c (the exchange, the three phases, the metrics, the record, the
 * descriptor; the family's description is at its top), setup.c (checks, points, buffers, the
 * calc-factor calibration, the state of a point), verify.c (what the harness checks, and the
 * Allreduce results). */
#ifndef HMB_BENCH_STENCIL3D_H
#define HMB_BENCH_STENCIL3D_H

#include <stdint.h>

#include "hmb/bench.h"

enum { NDIRS = 6 };
enum { EX_COMM, EX_OVERALL, NEXCHANGES }; /* the two phases that exchange: separate buffers */
static const char *const exchange_names[NEXCHANGES] = {"communication-only exchange", "overlapped exchange"};

#define STENCIL_OPTIONS(X)                                                                                          \
    X(calc_factor, DOUBLE, .default_value = "2.0", .min = 0.01, .max = 1000,                                        \
      .help = "without --compute: compute = this factor x T_comm, the fastest of 5 exchanges measured before the "  \
              "point")
HMB_OPTIONS(stencil_opts, STENCIL_OPTIONS);

typedef struct {
    hmb_topo topo;
    size_t size;
    int threads;
    int64_t compute_ns;
    double calib_t_comm_s; /* calc-factor: the T_comm it multiplied; NAN with --compute */
    unsigned char *buffers; /* all send and receive buffers, one allocation */
    unsigned char *send[NEXCHANGES][NDIRS], *recv[NEXCHANGES][NDIRS];
    MPI_Request reqs[2 * NDIRS];
    double reduced[NEXCHANGES]; /* each exchange's Allreduce result */
    double bytes_per_rank;      /* bytes sent per exchange, mean over ranks (0 in mock mode) */
    int mock;                   /* --comm off */
    const hmb_comm_ops *ops;    /* --comm: MPI or the mock */
} stencil_state;

/* Each rank's Allreduce contribution: exact in a double, differs by exchange and iteration. */
static inline double allreduce_term(int rank, int exchange, long iter)
{
    return (double)(rank + 1) * (double)(1 + (iter % 1024)) + 0.5 * exchange;
}

/* setup.c; exchange_alone: the communication-only exchange (pattern.c), which the calc-factor
 * calibration times */
void stencil_check(hmb_ctx *ctx);
void stencil_points(hmb_ctx *ctx, hmb_point_list *out);
void *stencil_setup(hmb_ctx *ctx, const hmb_point *pt, void (*exchange_alone)(hmb_ctx *ctx, stencil_state *st));
void stencil_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt);

/* verify.c */
void stencil_register_checks(hmb_ctx *ctx, stencil_state *st); /* the faces, checked on arrival */
void stencil_verify(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter);

#endif
