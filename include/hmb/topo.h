/* HMB — process and thread grids (src/harness/topology.c, topology_opts.c). */
#ifndef HMB_TOPO_H
#define HMB_TOPO_H

#include "hmb/hmb.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A Cartesian process grid (2-D or 3-D) with its neighbourhood, and a thread grid inside every
 * rank that splits the rank's block of cells into one tile per OpenMP thread. Ranks are laid out
 * as MPI_Cart_create(reorder = 0) lays them: row-major, the last axis fastest; threads x fastest
 * (tid = tx + tdims[0] (ty + tdims[1] tz)).
 *
 * Directions: the neighbourhood's offsets (each component -1, 0 or +1), faces first, then edges,
 * then corners; directions 2k and 2k+1 are opposite (opposite(d) = d ^ 1). The message of
 * direction d goes to the rank at +off ("to") and is received from the rank at -off ("from"),
 * tagged with d on both sides: on a small periodic grid, where +off and -off name the same rank
 * (or this rank itself), each message still meets the one receive meant for it.
 *
 * Faces and threads: the boundary layer of the block on the +off side of direction d is cut into
 * pieces, one per thread tile touching it (for a face, the threads on that side of the thread
 * grid: tdims of the two other axes multiplied; for an edge, the tdims of its free axis; a
 * corner is one piece). The neighbour receives piece p of direction d into its halo on the -off
 * side; both sides number pieces alike, so piece p is one (send, receive) pair, e.g. one
 * partition of a partitioned face. */
#define HMB_TOPO_MAX_DIRS 26

typedef struct {
    int off[3]; /* -1, 0, +1 per axis (off[2] = 0 in 2-D) */
    int to;     /* rank at +off, MPI_PROC_NULL past an open boundary */
    int from;   /* rank at -off, MPI_PROC_NULL past an open boundary */
} hmb_topo_dir;

typedef struct {
    int ndims;      /* 2 or 3 */
    int dims[3];    /* process grid (dims[2] = 1 in 2-D) */
    int periodic;   /* 1: the grid wraps around on every axis */
    int coords[3];  /* this rank's coordinates */
    int rank, size; /* this rank, ranks in the grid */
    int tdims[3];   /* thread grid of every rank (tdims[2] = 1 in 2-D) */
    int nthreads;   /* tdims multiplied */
    int ndirs;      /* 2-D: 4 (faces) or 8; 3-D: 6 (faces) or 26 */
    hmb_topo_dir dir[HMB_TOPO_MAX_DIRS];
} hmb_topo;

/* Options of a benchmark on a grid: .uses = HMB_OPTS_TOPO in its descriptor gives it (hmb_common)
 *   --grid px,py[,pz]    process grid (default: balanced, as MPI_Dims_create)
 *   --tgrid tx,ty[,tz]   thread grid per rank (default: balanced over --threads)
 *   --boundary periodic|open
 * then call hmb_topo_from_options() (in check() and again in setup(): it is cheap and deterministic). */

/* Fill dims[0..ndims) with a balanced factorisation of n (non-increasing, as MPI_Dims_create);
 * entries already > 0 are kept. Returns 0, or -1 when the kept entries do not divide n. */
int hmb_dims_balanced(int n, int ndims, int *dims);
/* The directions of a neighbourhood: 2-D 4 or 8, 3-D 6 or 26. Writes off[d][3]; returns the count
 * or -1 for another combination. */
int hmb_topo_directions(int ndims, int neighbours, int (*off)[3]);
/* Build a topology without MPI: grid (NULL or entries 0 = balanced) over size ranks, this rank,
 * thread grid (NULL = balanced) over nthreads. Returns NULL, or a one-line reason (static text)
 * when the grid does not fit. */
const char *hmb_topo_build(hmb_topo *t, int ndims, int neighbours, const int *grid, int size, int rank,
                           const int *tgrid, int nthreads, int periodic);
int hmb_topo_rank_of(const hmb_topo *t, const int coords[3]); /* MPI_PROC_NULL outside an open grid */
int hmb_topo_pieces(const hmb_topo *t, int d);                /* pieces of direction d's boundary */
int hmb_topo_piece_thread(const hmb_topo *t, int d, int piece); /* the thread owning piece */
int hmb_topo_thread_piece(const hmb_topo *t, int d, int tid);   /* tid's piece of direction d, or -1 */
/* Boxes in cell coordinates of a block of n[0] x n[1] x n[2] interior cells (0 .. n-1; the halo
 * is -1 and n): thread tid's tile; the cells piece p of direction d sends (interior boundary
 * layer, depth 1); the halo cells where piece p of the message of direction d lands. */
void hmb_topo_tile(const hmb_topo *t, const int n[3], int tid, int lo[3], int cnt[3]);
void hmb_topo_send_box(const hmb_topo *t, const int n[3], int d, int piece, int lo[3], int cnt[3]);
void hmb_topo_recv_box(const hmb_topo *t, const int n[3], int d, int piece, int lo[3], int cnt[3]);

/* hmb_topo_build from the options (HMB_OPTS_TOPO), hmb_size/hmb_rank and --threads; a grid
 * that does not fit the ranks, or a thread grid that does not fit the threads, is a usage error
 * (exit 2). With record = 1 (call it so from check()), the run header gets topology_grid
 * ("2x2x2"), topology_tgrid, topology_boundary and topology_neighbours. */
void hmb_topo_from_options(hmb_ctx *ctx, int ndims, int neighbours, int record, hmb_topo *t);
/* The same over a grid of `size` ranks (this one `rank`) with `threads` per rank: a benchmark whose
 * ranks stand in for another layout's (halo3d --everywhere-ranks: groups of ranks play threads). */
void hmb_topo_from_options_as(hmb_ctx *ctx, int ndims, int neighbours, int record, int size, int rank, int threads,
                              hmb_topo *t);

/* --face-partitions tiles|threads|N (.uses = HMB_OPTS_FACE_PARTITIONS; sweep3d, halo3d): how many
 * partitions (pieces) each face is cut into in the modes where every thread sends its own part
 * (multiple, partitioned). hmb_face_partitions returns 0 for "tiles" (the topology's pieces: one
 * per thread tile touching the face), --threads for "threads" (seed 000: one partition per
 * thread), or N; N not a positive multiple of --threads up to HMB_MAX_THREADS is a usage error
 * naming the option. hmb_face_partition_range: with N partitions, thread tid owns partitions
 * [*first, *first + N / threads). */
int hmb_face_partitions(hmb_ctx *ctx);
void hmb_face_partition_range(int n, int threads, int tid, int *first, int *count);

#ifdef __cplusplus
}
#endif
#endif
