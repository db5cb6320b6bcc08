/* Private to sweep3d: pattern.c (the wavefront in each mode, the modes, their metrics, the
 * record, the descriptor; the family's description is at its top), setup.c (checks, points, faces,
 * requests, the state of a point), verify.c (what the harness fills, poisons and checks). */
#ifndef HMB_BENCH_SWEEP3D_H
#define HMB_BENCH_SWEEP3D_H

#include <stdint.h>

#include "hmb/bench.h"

/* The modes, in the order of sweep_modes (pattern.c): bit m of --mode is mode m. */
enum { MODE_SINGLE, MODE_MULTIPLE, MODE_PARTITIONED, MODE_PERSISTENT, MODE_SERIAL, NMODES };
enum { FACE_X, FACE_Y, NFACES };
enum { NOCTANTS = 8 };

#define SWEEP_OPTIONS(X)                                                                                            \
    X(mode, CHOICES, .modes = 1,                                                                                    \
      .help = "threading modes, run paired in one iteration (serial: one thread computes and sends the whole "      \
              "block; all: every mode)")                                                                            \
    X(kblock, INT, .default_value = "2", .min = 1, .max = 1 << 20,                                                  \
      .help = "cells per k-block along z (one pipeline stage)")                                                    \
    X(kblocks, INT, .default_value = "4", .min = 1, .max = 4096,                                                    \
      .help = "k-blocks per octant with --sizes (nz = kblocks x kblock)")                                          \
    X(domain, INTS, .min = 1, .max = 1 << 24,                                                                       \
      .help = "local block nx,ny,nz instead of --sizes (nz a multiple of --kblock)")
HMB_OPTIONS(sweep_opts, SWEEP_OPTIONS);

/* A point: its block's nx, ny (--domain only), k-block depth and k-blocks. */
#define SWEEP_PARAMS(X) X(nx, INT) X(ny, INT) X(kblock, INT) X(kblocks, INT)
HMB_POINT_PARAMS(sweep_point, SWEEP_PARAMS);

typedef struct {
    hmb_topo topo;
    int rank, threads;
    const hmb_comm_ops *ops; /* --comm: MPI or the mock */
    int n[3];      /* nx, ny, kblock: one k-block of the rank's block (the topology's boxes) */
    int kblocks;   /* K */
    int nmodes, modes[NMODES];
    int64_t compute_ns;
    size_t face_cells[NFACES], piece_cells[NFACES];
    int pieces[NFACES], max_pieces;
    int face_parts;                               /* --face-partitions: N, or 0 (tiles) */
    int nslots;                                   /* NOCTANTS * K * NFACES */
    uint64_t *send;                               /* slot s at send + slot_offset[s] */
    uint64_t *recv[NMODES];
    size_t *slot_offset;
    MPI_Comm comm[NMODES];
    MPI_Request *face_req;                        /* single: per slot (sends) */
    MPI_Request *piece_req;                       /* multiple: per slot and piece (sends) */
    MPI_Request *recv_req;                        /* single, persistent: per slot (receives) */
    MPI_Request *piece_rreq;                      /* multiple: per slot and piece (receives) */
    MPI_Request *part_req;                        /* partitioned: [2 slot] send, [2 slot + 1] receive */
    MPI_Request *pers_req;                        /* persistent: [2 slot] send, [2 slot + 1] receive */
    double *busy_ns;                              /* [stage * threads + tid] */
    double busy_s[NMODES];                        /* this rank's computing time in the last sweep */
    hmb_ctx *ctx;                                 /* the running sweep: point, iteration, start */
    const hmb_point *pt;
    long iter;
    double wait_since; /* where the running sweep's wait bounds start: after the compute it may wait for */
    double *bytes_sent;                           /* [tid]: bytes this thread sent in the mode */
    double bytes_per_rank[NMODES];                /* rank 0: mean over ranks of bytes sent per sweep */
} sweep_state;

/* Octant o: sweep sign +1/-1 per axis (bit 0 x, bit 1 y, bit 2 z). */
static inline int octant_sign(int o, int axis) { return (o >> axis) & 1 ? -1 : 1; }
/* The topology direction of face f's message in octant o (2-D: 0 +x, 1 -x, 2 +y, 3 -y). */
static inline int face_dir(int o, int f) { return 2 * f + (octant_sign(o, f) > 0 ? 0 : 1); }
static inline int slot_of(const sweep_state *st, int o, int k, int f) { return (o * st->kblocks + k) * NFACES + f; }

/* setup.c */
void sweep_check(hmb_ctx *ctx);
void sweep_points(hmb_ctx *ctx, hmb_point_list *out);
void *sweep_setup(hmb_ctx *ctx, const hmb_point *pt);
void sweep_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt);

/* verify.c: validation as data, every slot's send data and every mode's received faces */
void sweep_register_checks(hmb_ctx *ctx, sweep_state *st);

#endif
