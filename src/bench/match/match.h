/* Private to match: pattern.c (the halo, its emulation, the centre's figures, the record, the
 * descriptor; the family's description is at its top), setup.c (checks, points, MPI_T variables,
 * the grid and the state of a point), verify.c (send data and the check of every message). */
#ifndef HMB_BENCH_MATCH_H
#define HMB_BENCH_MATCH_H

#include "hmb/bench.h"

enum { VARIANT_REAL, VARIANT_LOWCOST };
static const char *const match_variant_names[] = {"real", "lowcost", NULL};
/* The stencils, each a grid of 3 ranks per axis (open boundary) and its neighbourhood. */
enum { PATTERN_2D5, PATTERN_2D9, PATTERN_3D7, PATTERN_3D27, NPATTERNS };
static const char *const match_pattern_names[NPATTERNS + 1] = {"2d5", "2d9", "3d7", "3d27", NULL};
typedef struct {
    int ndims, neighbours, ranks;
} match_pattern;
static const match_pattern match_patterns[NPATTERNS] = {{2, 4, 9}, {2, 8, 9}, {3, 6, 27}, {3, 26, 27}};
static const int match_grid3[3] = {3, 3, 3};

#define MATCH_PARAMS(X) X(pattern, NAME, .names = match_pattern_names) X(variant, NAME, .names = match_variant_names) X(threads, INT)
HMB_POINT_PARAMS(match_point, MATCH_PARAMS);

/* MPI_T variables: ob1's per-peer queue lengths, MPICH's recvq variables (--enable-mpit-pvars). */
enum { PV_OB1_POSTED, PV_OB1_UNEXPECTED, PV_POSTED, PV_UNEXPECTED, PV_POSTED_ATTEMPTS, PV_UNEXPECTED_ATTEMPTS,
       PV_TIME_FAILED_POSTED, PV_TIME_UNEXPECTED, NPVARS };

enum { M_T_ITER, M_POST_PER_MSG, M_WAIT_PER_MSG, M_POSTED_Q, M_POSTED_Q_PEER_MAX, M_UNEXPECTED_Q,
       M_UNEXPECTED_Q_PEER_MAX, M_SEARCHED_PER_MSG, M_MATCH_TIME_PER_MSG, NMETRICS };

#define MATCH_OPTIONS(X)                                                                                            \
    X(pattern, CHOICES, .default_value = "2d9", .names = match_pattern_names,                                      \
      .help = "stencil: 2d5, 2d9 (3x3 ranks), 3d7, 3d27 (3x3x3); real runs need the grid's rank count")           \
    X(variant, CHOICE, .default_value = "lowcost", .names = match_variant_names,                                    \
      .help = "real: every rank runs the halo; lowcost: 2 ranks, rank 1 emulates the centre's neighbours")         \
    X(shuffle, FLAG, .default_value = "0",                                                                          \
      .help = "shuffle each thread's posting order every iteration (seeded by --seed)")                            \
    X(no_pvars, FLAG, .default_value = "0",                                                                         \
      .help = "do not read MPI_T variables (queue reads cost time inside the iteration)")
HMB_OPTIONS(match_opts, MATCH_OPTIONS);

typedef struct {
    int variant, pattern, threads, ndirs;
    int centre;         /* this rank is measured (real: grid centre; lowcost: rank 0) */
    int emulator;       /* lowcost rank 1 */
    int centre_rank;    /* the centre's MPI rank in this run (lowcost: 0) */
    int shuffle_rank;   /* grid rank seeding the shuffle: the real centre's in lowcost */
    int nrun;           /* threads this rank runs (emulator: directions x T) */
    size_t bytes;
    hmb_topo topo;      /* this rank's grid position (lowcost: the centre's) */
    int send_peer[HMB_TOPO_MAX_DIRS], recv_peer[HMB_TOPO_MAX_DIRS]; /* MPI ranks here, or MPI_PROC_NULL */
    int recv_label[HMB_TOPO_MAX_DIRS]; /* grid rank whose data receive slot d must hold */
    int send_label[HMB_TOPO_MAX_DIRS]; /* grid rank whose data send slot d carries */
    MPI_Comm comm, ctl;
    unsigned char *sbuf, *rbuf; /* slot d T + t, bytes each */
    MPI_Request *reqs;          /* 2 ndirs per running thread */
    int *order;                 /* ndirs per running thread */
    int *tag_log;               /* centre, iteration 0: per thread ndirs receive tags then ndirs send tags */
    double *begin, *posted, *done, *paused;
    hmb_pvars *pv;
    int have_posted_q, have_unexpected_q, have_searched, have_match_time;
    int oversubscribed;         /* the emulator's threads outnumber a node's CPUs */
    double *pv_values;          /* one read's values (count <= comm size) */
    double q[4];                /* posted total, posted peer max, unexpected total, unexpected peer max */
    long long seed;
} match_state;

static inline int match_tag(const match_state *st, int d, int t) { return d * st->threads + t; }
static inline unsigned char *match_slot(unsigned char *buf, const match_state *st, int d, int t)
{
    return buf + (size_t)(d * st->threads + t) * st->bytes;
}

/* setup.c */
void match_check(hmb_ctx *ctx);
void match_points(hmb_ctx *ctx, hmb_point_list *out);
void *match_setup(hmb_ctx *ctx, const hmb_point *pt);
void match_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt);
int match_centre_grid_rank(const hmb_topo *t); /* the grid rank at coordinates 1,1[,1] */

/* verify.c */
void match_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter);
void match_verify(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter);

#endif
