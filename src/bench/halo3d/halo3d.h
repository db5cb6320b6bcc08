/* Private to halo3d: pattern.c (the exchanges and their packing, the mode table, the metrics, the
 * record, the descriptor; the family's description is at its top), setup.c (checks, points,
 * memory, MPI everywhere's groups, the state of a point with its modes' communicators and
 * requests), verify.c (send data, the registered faces, the halo after every mode's unpack). */
#ifndef HMB_BENCH_HALO3D_H
#define HMB_BENCH_HALO3D_H

#include <stdatomic.h>
#include <stdint.h>

#include "hmb/bench.h"

#define NDIRS 6
/* The modes, in the order of halo_modes (pattern.c): bit m of --mode is mode m (hidden modes last). */
enum { MODE_SINGLE, MODE_MULTIPLE, MODE_PARTITIONED, MODE_PERSISTENT, MODE_SERIAL, MODE_THREADCOMM, NMODES };
/* --thread-comm: how the threads of the threadcomm mode express their parallelism, in TC_* order;
 * tag's communicator carries the MPI 4 assertions halo_tc_info_keys. */
enum { TC_SHARED, TC_COMM, TC_TAG, TC_STREAM, NTC };
static const char *const halo_tc_names[NTC + 1] = {"shared", "comm", "tag", "stream", NULL};
#define TC_NINFO 4
static const char *const halo_tc_info_keys[TC_NINFO] = {"mpi_assert_no_any_tag", "mpi_assert_no_any_source",
                                                        "mpi_assert_exact_length", "mpi_assert_allow_overtaking"};
/* A --thread-comm kind: a row of halo_tc_kinds (setup.c), indexed by TC_*. */
typedef struct {
    int one_comm; /* one communicator for every thread, a tag per thread (else a communicator each) */
    int asserts;  /* that communicator carries halo_tc_info_keys */
    int streams;  /* each thread's communicator attaches an MPIX stream of its own */
} halo_tc_kind;
extern const halo_tc_kind halo_tc_kinds[NTC];

#define HALO_OPTIONS(X)                                                                                             \
    X(mode, CHOICES, .modes = 1,                                                                                    \
      .help = "exchange modes run in one iteration, paired and counterbalanced (serial: one thread computes and "   \
              "exchanges the whole block; all: every mode)")                                                        \
    X(domain, INTS, .min = 1, .max = 1 << 20,                                                                       \
      .help = "cells per rank nx,ny,nz (8 bytes each; default: a cube per --sizes face)")                          \
    X(thread_comm, CHOICES, .names = halo_tc_names,                                                                 \
      .help = "instead of --mode: the threadcomm exchange, every thread sending its share of every face at once, " \
              "one point per value: shared (one communicator), comm (one per thread), tag (one, tag per thread, "   \
              "MPI 4 assertions), stream (an MPIX stream per thread, MPICH: MPIR_CVAR_CH4_RESERVE_VCIS=T). MPI "     \
              "everywhere: --everywhere-ranks")                                                                    \
    X(everywhere_ranks, INT, .default_value = "0", .min = 0, .max = 1 << 20,                                        \
      .help = "MPI everywhere for --thread-comm's exchange of R ranks x T threads, run at --threads 1 on R x T "    \
              "ranks: rank g*T+t holds rank g's block and exchanges thread t's share of every face with rank t of " \
              "each neighbouring group (the same messages and neighbours as thread t); 0: off")
HMB_OPTIONS(halo_opts, HALO_OPTIONS);

/* A point: the --thread-comm value, its layout (the value, or everywhere for --everywhere-ranks)
 * and the cores in use; none of them without --thread-comm or --everywhere-ranks. */
#define HALO_PARAMS(X) X(thread_comm, NAME, .names = halo_tc_names) X(layout, TEXT) X(ranks_x_threads, INT)
HMB_POINT_PARAMS(halo_point, HALO_PARAMS);

typedef struct {
    int to, from;          /* MPI_PROC_NULL past an open boundary */
    int npieces;           /* tile pieces: one per thread tile touching the face */
    size_t piece_cells;    /* every piece of a face has the same size (tiles divide the block) */
    int sub;               /* partitions per tile piece (--face-partitions N: N / npieces; else 1) */
    int nparts;            /* partitions (multiple: messages) of the face: npieces * sub */
    uint64_t *send, *recv; /* npieces * piece_cells, piece p at p * piece_cells */
    int flat;              /* index of partition 0 in the per-(direction, partition) arrays */
    const void *state;     /* its halo_state, d its direction: the validation patterns' argument */
    int d;
} halo_face;

typedef struct {
    hmb_topo topo;
    int n[3];
    uint64_t *block; /* (nx+2)(ny+2)(nz+2) cells, x fastest, halo included */
    halo_face face[NDIRS];
    int nparts_total;
    int face_parts;            /* --face-partitions: N, or 0 (tiles) */
    int modes[HMB_MAX_MODES], nmodes; /* selected modes (ids into halo_modes, pattern.c), canonical order */
    int mock;
    int rank, threads;
    int64_t compute_ns;
    MPI_Comm comm[HMB_MAX_MODES]; /* one per mode: no mode's message can match another's */
    MPI_Request *piece_rreq, *piece_sreq; /* multiple: per (direction, piece) */
    MPI_Request psend[NDIRS], precv[NDIRS];
    MPI_Request persist_send[NDIRS], persist_recv[NDIRS]; /* persistent: per face */
    const hmb_comm_ops *ops;                /* --comm: MPI or the mock */
    double *compute_end;                    /* per thread, local clock */
    atomic_llong bytes_sent[HMB_MAX_MODES]; /* this rank, this iteration */
    double bytes_per_rank_iter[HMB_MAX_MODES]; /* rank 0: mean over ranks, last iteration */
    MPI_Request preq[2 * NDIRS];            /* the partitioned requests started for this mode */
    int npreq;
    const hmb_point *pt;                    /* the point being run (validation messages) */
    hmb_ctx *ctx;                           /* ... and its context and iteration */
    long iter;
    double wait_since;                      /* where the running mode's wait bounds start: after its compute */
    char domain[64];
    uint64_t *halo_seen, *halo_want;        /* the halo after unpack and its pattern, one face (verify.c) */
    /* --thread-comm (threadcomm mode): thread t's communicator and tags; what set-up created */
    int tc;                                 /* TC_*, or -1 */
    MPI_Comm tc_comm[HMB_MAX_THREADS];      /* thread t's communicator (shared, tag: one for all) */
    int tc_tag_per_thread;                  /* shared, tag: tag = direction * HMB_MAX_THREADS + thread */
    MPI_Comm tc_created[HMB_MAX_THREADS];   /* communicators to free */
    int tc_ncomms;
    hmb_stream tc_streams[HMB_MAX_THREADS];
    int tc_nstreams;
    char tc_info[TC_NINFO][64];             /* tag: the assertions as the library kept them */
    long vmrss_kib, vmhwm_kib;              /* after set-up; -1: unknown */
    MPI_Request *tc_req;                    /* per thread, 2 * NDIRS */
    int ev_threads, ev_tid;                 /* --everywhere-ranks: T, and the thread this rank plays; 0 */
    MPI_Comm ev_comm;                       /* ... ranks playing thread ev_tid, ranked by group */
    uint64_t *share_want;                   /* ... a received face's pattern (this rank checks its share) */
} halo_state;

/* Index of cell (x, y, z) of a block of n interior cells (the halo at -1 and n), x fastest. */
static inline size_t halo_cell_index(const int n[3], int x, int y, int z)
{
    return (size_t)(x + 1) + (size_t)(n[0] + 2) * ((size_t)(y + 1) + (size_t)(n[1] + 2) * (size_t)(z + 1));
}
static inline size_t halo_face_cells(const halo_face *f) { return (size_t)f->npieces * f->piece_cells; }

/* setup.c */
void halo_check(hmb_ctx *ctx);
void halo_points(hmb_ctx *ctx, hmb_point_list *out);
double halo_rank_bytes(hmb_ctx *ctx, size_t size_bytes);
/* The state of a point, its modes chosen (threadcomm with --thread-comm, else --mode's, each with
 * its communicator) and their persistent and partitioned requests created; NULL (or a state after
 * hmb_unsupported) as hmb_bench.setup. */
void *halo_setup(hmb_ctx *ctx, const hmb_point *pt);
void halo_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt);

/* verify.c */
void halo_register_checks(hmb_ctx *ctx, halo_state *st); /* validation as data: every face, every mode */
void halo_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter);
/* Every mode's verify: untimed, right after the mode, its bytes (sums[0]) and the halo it unpacked
 * against the senders' cells (the harness then checks its received faces). */
void halo_mode_verify(hmb_ctx *ctx, void *state, int mode, long iter, double *sums);

#endif
