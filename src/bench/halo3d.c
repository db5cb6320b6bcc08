/* halo3d — 7-point halo exchange on a 3-D process grid (SPEC §3.5, seed 000 §3.2: Ember's Halo3D).
 *
 * Every rank owns a block of nx x ny x nz 8-byte cells with a one-cell halo; T threads split it
 * into tiles (--tgrid), and each face is cut into one piece per thread tile touching it (the
 * topology module's pieces; --face-partitions N cuts each piece into N / pieces equal partitions,
 * all packed and sent by the piece's thread). Each iteration the threads compute (harness compute + noise), then
 * the six faces are packed from the block into contiguous buffers, exchanged, and unpacked into
 * the halo, in up to three modes run back to back on the same compute draws, in counterbalanced
 * order (hmb_phase_order):
 *   single       fork-join: join, then one thread posts 6 Irecv, packs and Isends each face,
 *                Waitall, unpacks;
 *   multiple     receives posted per piece beforehand; each thread packs and Isends its pieces as
 *                soon as its own compute ends (tag = direction and piece), then waits for and
 *                unpacks the pieces landing next to its tile;
 *   partitioned  one MPI_Psend_init / MPI_Precv_init per face, partitions = its pieces; a thread
 *                packs and MPI_Preadys its pieces after its compute, then polls MPI_Parrived for
 *                the pieces landing next to its tile and unpacks them;
 *   persistent   fork-join as single, on one MPI_Send_init / MPI_Recv_init per face created once
 *                per point: MPI_Start of the receives, pack, MPI_Start of each send, Waitall;
 *   serial       the single-threaded baseline (seed 000): as single without the fork, the main
 *                thread computing every thread's draw in turn (opt-in: not in the default --mode).
 *   threadcomm   --thread-comm shared|comm|tag|stream (seed 003, Category 1; replaces --mode): every
 *                face cut into T equal shares in its packed order, thread t posts the receives of
 *                share t of every face, computes, packs and sends share t of every face, waits and
 *                unpacks, all threads at once (MPI_THREAD_MULTIPLE). Thread t talks to thread t of
 *                each neighbour on: shared, one communicator for all threads (tag = direction and
 *                thread); comm, a duplicated communicator per thread; tag, one communicator with
 *                the MPI 4.0 assertions (no_any_tag, no_any_source, exact_length,
 *                allow_overtaking), a tag per (direction, thread); stream, an MPIX stream and its
 *                communicator per thread (MPICH; elsewhere "unsupported"). One point per value.
 *   everywhere   --everywhere-ranks R, at --threads 1 on R x T ranks (instead of --thread-comm): MPI
 *                everywhere for the threadcomm exchange of R ranks of T threads. The T consecutive
 *                ranks of group g stand in for the threads of rank g: rank gT + t holds rank g's
 *                block and exchanges thread t's share of every face with rank t of each
 *                neighbouring group (a communicator per t, MPI_Comm_split), so every process sends
 *                and receives the messages thread t does, of the same sizes, to the same neighbours:
 *                at R = 2, 2 of 6 faces go to the other group and 4 wrap to itself, as for 2 ranks
 *                x T threads. What differs is the model: T processes (T copies of the block, T
 *                library instances) where the threads share one. The record says layout =
 *                everywhere; bytes per rank are per group (the rank it stands in for).
 * Every operation goes through the communication policy (hmb_comm_ops): --comm off (mock,
 * after LLNL Comb) runs the same modes without any MPI call, each message copied into this
 * rank's own receive buffers, so packing, unpacking and compute are measured alone and
 * validation still runs.
 * A cell's value encodes (source rank, iteration, cell): a received face names the face of the
 * sender it must come from, so a message from the wrong direction, rank or iteration fails.
 * The harness checks every mode's received faces right after the mode (outside its timed
 * region), against the sender's cells (face_received), and poisons the sends (validation as
 * data: register_faces). */
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmb/hmb.h"
#include "hmb/metrics.h"

enum { MODE_SINGLE, MODE_MULTIPLE, MODE_PARTITIONED, MODE_PERSISTENT, MODE_SERIAL, MODE_THREADCOMM, NMODES };
static const char *const mode_names[NMODES] = {"single", "multiple", "partitioned", "persistent", "serial",
                                               "threadcomm"};
#define NDIRS 6
/* --thread-comm: how the threads of the threadcomm mode express their parallelism. */
enum { TC_SHARED, TC_COMM, TC_TAG, TC_STREAM, NTC };
static const char *const tc_names[NTC] = {"shared", "comm", "tag", "stream"};
#define TC_NINFO 4
static const char *const tc_info_keys[TC_NINFO] = {"mpi_assert_no_any_tag", "mpi_assert_no_any_source",
                                                   "mpi_assert_exact_length", "mpi_assert_allow_overtaking"};

typedef struct {
    int to, from;         /* MPI_PROC_NULL past an open boundary */
    int npieces;          /* tile pieces: one per thread tile touching the face */
    size_t piece_cells;   /* every piece of a face has the same size (tiles divide the block) */
    int sub;              /* partitions per tile piece (--face-partitions N: N / npieces; else 1) */
    int nparts;           /* partitions (multiple: messages) of the face: npieces * sub */
    uint64_t *send, *recv; /* npieces * piece_cells, piece p at p * piece_cells */
    int flat;             /* index of partition 0 in the per-(direction, partition) arrays */
    const void *state;    /* its halo_state, d its direction: the validation patterns' argument */
    int d;
} halo_face;

typedef struct {
    hmb_topo topo;
    int n[3];
    uint64_t *block; /* (nx+2)(ny+2)(nz+2) cells, x fastest, halo included */
    halo_face face[NDIRS];
    int nparts_total;
    int face_parts;       /* --face-partitions: N, or 0 (tiles) */
    int modes[NMODES], nmodes; /* selected modes, canonical order */
    int mock;
    int rank, threads;
    int64_t compute_ns;
    MPI_Comm comm[NMODES]; /* one per mode: no mode's message can match another's */
    MPI_Request *piece_rreq, *piece_sreq; /* multiple: per (direction, piece) */
    MPI_Request psend[NDIRS], precv[NDIRS];
    MPI_Request persist_send[NDIRS], persist_recv[NDIRS]; /* persistent: per face */
    const hmb_comm_ops *ops; /* --comm: MPI or the mock */
    double *compute_end;                    /* per thread, local clock */
    atomic_llong bytes_sent[NMODES];        /* this rank, this iteration */
    double bytes_per_rank_iter[NMODES];     /* rank 0: mean over ranks, last iteration */
    MPI_Request preq[2 * NDIRS];            /* the partitioned requests started for this mode */
    int npreq;
    const hmb_point *pt;                    /* the point being run (validation messages) */
    hmb_ctx *ctx;                           /* ... and its context and iteration */
    long iter;
    double wait_since;                      /* where the running mode's wait bounds start: after its compute */
    char domain[64];
    uint64_t *halo_seen, *halo_want;        /* the halo after unpack and its pattern, one face (check_halo) */
    /* --thread-comm (threadcomm mode): thread t's communicator and tags; what set-up created */
    int tc;                                 /* TC_*, or -1 */
    MPI_Comm tc_comm[HMB_MAX_THREADS];      /* thread t's communicator (shared, tag: one for all) */
    int tc_tag_per_thread;                  /* shared, tag: tag = direction * HMB_MAX_THREADS + thread */
    MPI_Comm tc_created[HMB_MAX_THREADS];   /* communicators to free */
    int tc_ncomms;
    hmb_stream tc_streams[HMB_MAX_THREADS];
    int tc_nstreams;
    char tc_info[TC_NINFO][64];             /* tag: the assertions as the library kept them */
    int ev_threads, ev_tid;                 /* --everywhere-ranks: T, and the thread this rank plays; 0 */
    MPI_Comm ev_comm;                       /* ... ranks playing thread ev_tid, ranked by group */
    uint64_t *share_want;                   /* ... a received face's pattern (this rank checks its share) */
    long vmrss_kib, vmhwm_kib;              /* after set-up; -1: unknown */
    MPI_Request *tc_req;                    /* per thread, 2 * NDIRS */
} halo_state;

static const hmb_option halo_options[] = {
    {"mode", HMB_OPT_CHOICES, "single,multiple,partitioned,persistent",
     "exchange modes run in one iteration, paired and counterbalanced (serial: one thread computes and exchanges "
     "the whole block; all: every mode)", 0, 0, "single|multiple|partitioned|persistent|serial"},
    {"domain", HMB_OPT_INTS, NULL, "cells per rank nx,ny,nz (8 bytes each; default: a cube per --sizes face)", 1,
     1 << 20, NULL},
    HMB_FACE_PARTITIONS_OPTION,
    {"thread-comm", HMB_OPT_CHOICES, NULL,
     "instead of --mode: the threadcomm exchange, every thread sending its share of every face at once, one point "
     "per value: shared (one communicator), comm (one per thread), tag (one, tag per thread, MPI 4 assertions), "
     "stream (an MPIX stream per thread, MPICH: MPIR_CVAR_CH4_RESERVE_VCIS=T). MPI everywhere: --everywhere-ranks",
     0, 0, "shared|comm|tag|stream"},
    {"everywhere-ranks", HMB_OPT_INT, "0",
     "MPI everywhere for --thread-comm's exchange of R ranks x T threads, run at --threads 1 on R x T ranks: rank "
     "g*T+t holds rank g's block and exchanges thread t's share of every face with rank t of each neighbouring "
     "group (the same messages and neighbours as thread t); 0: off", 0, 1 << 20, NULL},
    HMB_COMM_OPTION,
    HMB_TOPO_OPTIONS,
    HMB_OPTION_END};

static const hmb_default halo_defaults[] = {{"sizes", "4K:1M:x4"}, {"compute", "1ms"}, {NULL, NULL}};

/* The metrics each mode adds ("{mode}": its name), bits of hmb_mode.metrics. */
enum { MT_ITER, MT_COMM, MT_THROUGHPUT, MT_RATIO, MT_SPEEDUP };
#define EXCHANGE_METRICS (HMB_METRIC_BIT(MT_ITER) | HMB_METRIC_BIT(MT_COMM) | HMB_METRIC_BIT(MT_THROUGHPUT))
static const hmb_metric halo_mode_metrics[] = {
    [MT_ITER] = {.name = "t_iter_{mode}_us", .unit = "us", .higher_is_better = 0, .in_table = 0,
                 .description = "{mode}: time per iteration (compute and exchange), slowest rank"},
    [MT_COMM] = {.name = "t_comm_{mode}_us", .unit = "us", .higher_is_better = 0, .in_table = 0,
                 .description = "{mode}: last thread's compute end to exchange complete, slowest rank"},
    [MT_THROUGHPUT] = {.name = "throughput_{mode}_MBps", .unit = "MB/s", .higher_is_better = 1, .in_table = 1,
                       .description = "{mode}: bytes exchanged per process per second (MB = 1e6 B)"},
    [MT_RATIO] = {.name = "ratio_{mode}", .unit = "ratio", .higher_is_better = 1, .in_table = 1,
                  .description = "throughput {mode} / throughput single, same iterations"},
    [MT_SPEEDUP] = {.name = "speedup_{mode}_vs_serial", .unit = "ratio", .higher_is_better = 1, .in_table = 1,
                    .description = "throughput {mode} / throughput serial (one thread, the whole block), same "
                                   "iterations"},
    HMB_METRIC_END};

/* ------------------------------------------------------------------ block geometry */

static size_t cell_index(const int n[3], int x, int y, int z)
{
    return (size_t)(x + 1) + (size_t)(n[0] + 2) * ((size_t)(y + 1) + (size_t)(n[1] + 2) * (size_t)(z + 1));
}

/* Value of interior cell (x, y, z) of rank's block in iteration iter. */
static uint64_t cell_value(int rank, long iter, const int n[3], int x, int y, int z)
{
    uint64_t cell = (uint64_t)x + (uint64_t)n[0] * ((uint64_t)y + (uint64_t)n[1] * (uint64_t)z);
    return hmb_mix64(hmb_mix64(hmb_mix64((uint64_t)rank) ^ (uint64_t)iter) ^ cell);
}

/* A box of the block to buf (to_block 0) or buf into it (1), z, y, x order; a one-cell row (the
 * x faces) is an assignment, not a memcpy call per cell. */
static inline void box_copy(uint64_t *block, const int n[3], const int lo[3], const int cnt[3], uint64_t *buf,
                            int to_block)
{
    size_t k = 0, row = (size_t)cnt[0];
    for (int z = lo[2]; z < lo[2] + cnt[2]; z++)
        for (int y = lo[1]; y < lo[1] + cnt[1]; y++, k += row) {
            uint64_t *cells = block + cell_index(n, lo[0], y, z);
            if (row == 1) {
                if (to_block)
                    *cells = buf[k];
                else
                    buf[k] = *cells;
            } else {
                memcpy(to_block ? cells : buf + k, to_block ? buf + k : cells, row * sizeof(uint64_t));
            }
        }
}

/* Cells [first, first + count) of face d in its packed order (piece by piece, each box in z, y, x
 * order) between the block and buf (buf[k] is cell k): the boundary layer's send boxes
 * (halo 0) or the halo's receive boxes (halo 1), copied into the block (to_block) or out of it. */
static void face_range(halo_state *st, int d, size_t first, size_t count, uint64_t *buf, int halo, int to_block)
{
    const halo_face *f = &st->face[d];
    size_t end = first + count, k = first / f->piece_cells * f->piece_cells;
    for (int p = (int)(first / f->piece_cells); p < f->npieces && k < end; p++) {
        int lo[3], cnt[3];
        if (halo)
            hmb_topo_recv_box(&st->topo, st->n, d, p, lo, cnt);
        else
            hmb_topo_send_box(&st->topo, st->n, d, p, lo, cnt);
        size_t box = (size_t)cnt[0] * (size_t)cnt[1] * (size_t)cnt[2];
        if (k >= first && k + box <= end) { /* the whole box (every pack and unpack): rows, no clipping */
            box_copy(st->block, st->n, lo, cnt, buf + k, to_block);
            k += box;
            continue;
        }
        for (int z = lo[2]; z < lo[2] + cnt[2] && k < end; z++)
            for (int y = lo[1]; y < lo[1] + cnt[1] && k < end; y++, k += (size_t)cnt[0]) {
                size_t a = k > first ? k : first, b = k + (size_t)cnt[0] < end ? k + (size_t)cnt[0] : end;
                if (a >= b)
                    continue;
                uint64_t *cells = st->block + cell_index(st->n, lo[0] + (int)(a - k), y, z);
                memcpy(to_block ? cells : buf + a, to_block ? buf + a : cells, (b - a) * sizeof(uint64_t));
            }
    }
}

static void pack_piece(halo_state *st, int d, int p)
{
    size_t cells = st->face[d].piece_cells;
    face_range(st, d, (size_t)p * cells, cells, st->face[d].send, 0, 0);
}

/* Piece p of the message of direction d into the halo. */
static void unpack_piece(halo_state *st, int d, int p)
{
    size_t cells = st->face[d].piece_cells;
    face_range(st, d, (size_t)p * cells, cells, st->face[d].recv, 1, 1);
}

/* Cells of face d, and how many validation pieces it has: threadcomm, one share per thread; else
 * its partitions (messages). */
static size_t face_cells(const halo_face *f) { return (size_t)f->npieces * f->piece_cells; }
static int face_pieces(const halo_state *st, const halo_face *f) { return st->tc >= 0 ? st->threads : f->nparts; }

/* The mode's name in validation messages: "threadcomm/tag" names the --thread-comm value. */
static const char *mode_label(const halo_state *st, int mode, char *buf, size_t len)
{
    if (mode != MODE_THREADCOMM)
        return mode_names[mode];
    snprintf(buf, len, "threadcomm/%s", st->ev_threads ? "everywhere" : tc_names[st->tc]);
    return buf;
}

/* Who sends and receives faces in messages: ranks, or with --everywhere-ranks the groups of ranks
 * standing in for them. */
static const char *rank_word(const halo_state *st) { return st->ev_threads ? "group" : "rank"; }

static long long piece_bytes(const halo_state *st, int d) { return (long long)(st->face[d].piece_cells * 8); }

/* ------------------------------------------------------------------ options and points */

/* Cells per axis must split evenly into the thread tiles: partitions of a face are equal. */
static int axis_multiple(const hmb_topo *t)
{
    int m = 1;
    for (int a = 0; a < 3; a++) {
        int x = m, y = t->tdims[a];
        while (y) {
            int r = x % y;
            x = y;
            y = r;
        }
        m = m / x * t->tdims[a];
    }
    return m;
}

/* The cube side, a multiple of m, whose face (side^2 * 8 bytes) is closest to face_bytes. */
static int cube_side(size_t face_bytes, int m)
{
    int side = m;
    while ((double)(side + m) * (side + m) * 8.0 <= (double)face_bytes)
        side += m;
    double below = (double)face_bytes - (double)side * side * 8.0;
    double above = (double)(side + m) * (side + m) * 8.0 - (double)face_bytes;
    return above < below ? side + m : side;
}

/* What setup_faces allocates for an nx x ny x nz block: the block with its halo layer, 8-byte
 * cells (its faces, a few of its face sizes, are small beside it). */
static double block_bytes(long long nx, long long ny, long long nz)
{
    return (double)(nx + 2) * (double)(ny + 2) * (double)(nz + 2) * 8.0;
}

/* --face-partitions N: every tile piece of every face (n[b]/tdims[b] x n[c]/tdims[c] cells) must
 * split into N / (its face's tile pieces) equal partitions. */
static void check_face_partitions(hmb_ctx *ctx, const hmb_topo *t, int parts, const long long n[3])
{
    for (int a = 0; parts > 0 && a < 3; a++) {
        int b = (a + 1) % 3, c = (a + 2) % 3, pieces = t->tdims[b] * t->tdims[c];
        long long cells = n[b] / t->tdims[b] * (n[c] / t->tdims[c]);
        if (cells % (parts / pieces) != 0)
            hmb_usage_error(ctx, "--face-partitions %d: the %c face of a %lldx%lldx%lld block has %d tile pieces of "
                                 "%lld cells, which do not split into %d equal partitions each", parts, "xyz"[a],
                            n[0], n[1], n[2], pieces, cells, parts / pieces);
    }
}

/* --thread-comm: every face (n[b] x n[c] cells) must split into T equal thread shares. */
static void check_thread_shares(hmb_ctx *ctx, int threads, const long long n[3])
{
    for (int a = 0; a < 3; a++) {
        long long cells = n[(a + 1) % 3] * n[(a + 2) % 3];
        if (cells % threads != 0)
            hmb_usage_error(ctx, "--thread-comm: the %c face of a %lldx%lldx%lld block has %lld cells, which do not "
                                 "split into %d equal thread shares", "xyz"[a], n[0], n[1], n[2], cells, threads);
    }
}

/* --everywhere-ranks R: the threads T each group of ranks stands in for (ranks / R); 0 when off. */
static int everywhere_threads(hmb_ctx *ctx)
{
    long long groups = hmb_opt_int(ctx, "everywhere-ranks");
    return groups > 0 ? hmb_size(ctx) / (int)groups : 0;
}

/* The grid of the exchange: over the ranks and --threads, or with --everywhere-ranks over the R
 * groups (this rank's) and their T threads. */
static void halo_topo(hmb_ctx *ctx, int record, hmb_topo *t)
{
    int ev = everywhere_threads(ctx);
    if (ev)
        hmb_topo_from_options_as(ctx, 3, NDIRS, record, hmb_size(ctx) / ev, hmb_rank(ctx) / ev, ev, t);
    else
        hmb_topo_from_options(ctx, 3, NDIRS, record, t);
}

static void check_everywhere(hmb_ctx *ctx)
{
    long long groups = hmb_opt_int(ctx, "everywhere-ranks");
    if (groups == 0)
        return;
    const char *with[] = {"thread-comm", "mode", "face-partitions"};
    for (int k = 0; k < 3; k++)
        if (hmb_opt_given(ctx, with[k]))
            hmb_usage_error(ctx, "--everywhere-ranks and --%s both given: MPI everywhere runs one thread's share of "
                                 "the threadcomm exchange per rank", with[k]);
    if (hmb_threads(ctx) != 1)
        hmb_usage_error(ctx, "--everywhere-ranks runs single-threaded ranks: give --threads 1 (got %d)",
                        hmb_threads(ctx));
    if (hmb_size(ctx) % groups != 0 || hmb_size(ctx) / groups > HMB_MAX_THREADS)
        hmb_usage_error(ctx, "--everywhere-ranks %lld: the %d ranks do not form %lld groups of at most %d ranks",
                        groups, hmb_size(ctx), groups, HMB_MAX_THREADS);
    if (hmb_comm_policy(ctx)->mock)
        hmb_usage_error(ctx, "--everywhere-ranks and --comm off both given: the mock has no processes to stand in "
                             "for threads");
}

static void halo_check(hmb_ctx *ctx)
{
    check_everywhere(ctx);
    hmb_topo t;
    halo_topo(ctx, 1, &t);
    int parts = hmb_face_partitions(ctx), tc = hmb_opt_given(ctx, "thread-comm") || everywhere_threads(ctx);
    int shares = everywhere_threads(ctx) ? everywhere_threads(ctx) : hmb_threads(ctx);
    if (tc && hmb_opt_given(ctx, "mode"))
        hmb_usage_error(ctx, "--thread-comm and --mode both given: --thread-comm runs its own exchange (threadcomm)");
    if (tc && hmb_opt_given(ctx, "face-partitions"))
        hmb_usage_error(ctx, "--thread-comm and --face-partitions both given: threadcomm cuts each face into one "
                             "share per thread");
    if (tc && !hmb_opt_given(ctx, "domain")) {
        int nsizes;
        const size_t *sizes = hmb_opt_sizes(ctx, "sizes", &nsizes);
        for (int s = 0; s < nsizes; s++) {
            long long side = cube_side(sizes[s], axis_multiple(&t)), n[3] = {side, side, side};
            check_thread_shares(ctx, shares, n);
        }
    }
    if (!hmb_opt_given(ctx, "domain")) { /* the block is a cube whose face is the size */
        int nsizes;
        const size_t *sizes = hmb_opt_sizes(ctx, "sizes", &nsizes);
        for (int s = 0; s < nsizes; s++) {
            long long side = cube_side(sizes[s], axis_multiple(&t));
            char what[96];
            snprintf(what, sizeof what, "--sizes %zu: a %lldx%lldx%lld block", sizes[s], side, side, side);
            hmb_require_memory(ctx, block_bytes(side, side, side), what);
        }
    }
    if (parts > 0 && !hmb_opt_given(ctx, "domain")) {
        int nsizes;
        const size_t *sizes = hmb_opt_sizes(ctx, "sizes", &nsizes);
        for (int s = 0; s < nsizes; s++) {
            long long side = cube_side(sizes[s], axis_multiple(&t)), n[3] = {side, side, side};
            check_face_partitions(ctx, &t, parts, n);
        }
    }
    if (hmb_opt_given(ctx, "domain")) {
        int count;
        const long long *dom = hmb_opt_ints(ctx, "domain", &count);
        if (hmb_opt_given(ctx, "sizes"))
            hmb_usage_error(ctx, "--domain and --sizes both given: give the block or its face size, not both");
        if (count != 3)
            hmb_usage_error(ctx, "--domain: %d values, give nx,ny,nz", count);
        for (int a = 0; a < 3; a++)
            if (dom[a] % t.tdims[a] != 0)
                hmb_usage_error(ctx, "--domain: %lld cells on axis %c do not split into %d thread tiles (--tgrid)",
                                dom[a], "xyz"[a], t.tdims[a]);
        check_face_partitions(ctx, &t, parts, dom);
        hmb_require_memory(ctx, block_bytes(dom[0], dom[1], dom[2]), "--domain: the block");
        if (tc)
            check_thread_shares(ctx, shares, dom);
    }
}

/* One point per --sizes face (a cube whose face is that size, size_bytes = its real face), or
 * one for --domain (size_bytes = its mean face). */
/* A --thread-comm or --everywhere-ranks point's parameters: the value (layout everywhere for
 * --everywhere-ranks) and the cores in use, ranks x threads (the axis on which R ranks x T threads
 * and everywhere's R x T ranks meet). */
static void set_layout(hmb_ctx *ctx, hmb_point *p, int tc)
{
    int ev = everywhere_threads(ctx) > 0;
    if (tc < 0 && !ev)
        return;
    if (tc >= 0)
        hmb_point_set_str(p, "thread_comm", tc_names[tc]);
    hmb_point_set_str(p, "layout", ev ? "everywhere" : tc_names[tc]);
    hmb_point_set_int(p, "ranks_x_threads", (long long)hmb_size(ctx) * hmb_threads(ctx));
}

static void halo_points(hmb_ctx *ctx, hmb_point_list *out)
{
    hmb_topo t;
    halo_topo(ctx, 0, &t);
    unsigned long long tcs = hmb_opt_given(ctx, "thread-comm") ? hmb_opt_choices(ctx, "thread-comm") : 0;
    for (int tc = -1; tc < NTC; tc++) { /* -1: --mode's exchanges (no --thread-comm) */
        if (tc < 0 ? tcs != 0 : !(tcs & (1ull << tc)))
            continue;
        hmb_point *p;
        if (hmb_opt_given(ctx, "domain")) {
            int count;
            const long long *dom = hmb_opt_ints(ctx, "domain", &count);
            p = hmb_points_add(out, (size_t)(8 * (dom[0] * dom[1] + dom[1] * dom[2] + dom[0] * dom[2]) / 3));
            set_layout(ctx, p, tc);
            continue;
        }
        int nsizes;
        const size_t *sizes = hmb_opt_sizes(ctx, "sizes", &nsizes);
        for (int s = 0; s < nsizes; s++) {
            int side = cube_side(sizes[s], axis_multiple(&t));
            p = hmb_points_add(out, (size_t)side * side * 8);
            set_layout(ctx, p, tc);
        }
    }
}

/* The block of a point: --domain, or the cube of the point's face. */
static void point_domain(const hmb_ctx *ctx, const hmb_point *pt, int n[3])
{
    if (hmb_opt_given(ctx, "domain")) {
        int count;
        const long long *dom = hmb_opt_ints(ctx, "domain", &count);
        for (int a = 0; a < 3; a++)
            n[a] = (int)dom[a];
        return;
    }
    int side = (int)llround(sqrt((double)pt->size_bytes / 8.0));
    n[0] = n[1] = n[2] = side;
}

/* ------------------------------------------------------------------ set-up */

static void direction_name(const hmb_topo *t, int d, char out[8])
{
    int k = 0;
    for (int a = 0; a < 3; a++)
        if (t->dir[d].off[a] != 0) {
            out[k++] = t->dir[d].off[a] > 0 ? '+' : '-';
            out[k++] = "xyz"[a];
        }
    out[k] = '\0';
}

/* The face of direction d as sent (sender geometry, this rank's cells) or as received (the
 * sender's boundary layer on the +off side of each halo cell), piece by piece in box order. */
static void face_pattern(const halo_face *f, long iter, uint64_t *out, int received)
{
    const halo_state *st = f->state;
    const int *off = st->topo.dir[f->d].off;
    int src = received ? f->from : st->rank; /* this rank under the mock (hmb_comm_route) */
    size_t k = 0;
    for (int p = 0; p < f->npieces; p++) {
        int lo[3], cnt[3], c[3], s[3];
        if (received)
            hmb_topo_recv_box(&st->topo, st->n, f->d, p, lo, cnt);
        else
            hmb_topo_send_box(&st->topo, st->n, f->d, p, lo, cnt);
        for (c[2] = lo[2]; c[2] < lo[2] + cnt[2]; c[2]++)
            for (c[1] = lo[1]; c[1] < lo[1] + cnt[1]; c[1]++)
                for (c[0] = lo[0]; c[0] < lo[0] + cnt[0]; c[0]++) {
                    for (int a = 0; a < 3; a++)
                        s[a] = !received ? c[a] : off[a] > 0 ? st->n[a] - 1 : off[a] < 0 ? 0 : c[a];
                    out[k++] = cell_value(src, iter, st->n, s[0], s[1], s[2]);
                }
    }
}

static void face_received(const void *face, long iter, uint64_t *out) { face_pattern(face, iter, out, 1); }

/* The cells of face f this rank receives, [first, first + count) of its packed order: MPI
 * everywhere, thread ev_tid's share; else all of them. */
static void received_cells(const halo_state *st, const halo_face *f, size_t *first, size_t *count)
{
    size_t cells = face_cells(f), share = cells / (size_t)st->threads;
    *first = st->ev_threads ? (size_t)st->ev_tid * share : 0;
    *count = st->ev_threads ? share : cells;
}

/* MPI everywhere: the share of face f this rank receives, as its sender's cells. */
static void face_share_received(const void *face, long iter, uint64_t *out)
{
    const halo_face *f = face;
    const halo_state *st = f->state;
    size_t first, count;
    received_cells(st, f, &first, &count);
    face_pattern(f, iter, st->share_want, 1);
    memcpy(out, st->share_want + first, count * sizeof(uint64_t));
}

/* Validation as data: every face this rank packs (the harness poisons it before and after each
 * mode) and every face it receives, per mode, checked right after the mode. */
static void register_faces(hmb_ctx *ctx, halo_state *st)
{
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        size_t bytes = (size_t)f->npieces * f->piece_cells * sizeof(uint64_t);
        char dir[8];
        direction_name(&st->topo, d, dir);
        f->state = st, f->d = d;
        int pieces = face_pieces(st, f);
        if (f->to != MPI_PROC_NULL)
            hmb_check_register(ctx, HMB_SEND_PACKED, f->send, bytes, st->rank, d, pieces, HMB_EACH_MODE, "send");
        size_t first, count;
        received_cells(st, f, &first, &count);
        for (int k = 0; k < st->nmodes && f->from != MPI_PROC_NULL; k++) {
            char name[32], who[48] = "";
            if (st->ev_threads)
                snprintf(who, sizeof who, " (thread %d's share)", st->ev_tid);
            else if (st->tc >= 0)
                snprintf(who, sizeof who, " (piece t: thread t's share)");
            hmb_check_register_fn(ctx, HMB_RECEIVE, f->recv + first, count * sizeof(uint64_t),
                                  st->ev_threads ? face_share_received : face_received, f,
                                  st->ev_threads ? 1 : pieces, st->modes[k], "%s mode: %s %d face of direction %s "
                                  "from %s %d%s", mode_label(st, st->modes[k], name, sizeof name), rank_word(st),
                                  st->rank, dir, rank_word(st), f->from, who);
        }
    }
}

/* The halo after the mode's unpack (untimed, before the registry checks the receive buffers):
 * every received face's halo cells, in its packed order, against its sender's cells.
 * --corrupt-at flips the middle byte of the first face checked (hmb_corrupt_pick). */
static void check_halo(hmb_ctx *ctx, halo_state *st, int mode, long iter)
{
    if (!hmb_validate_enabled(ctx))
        return;
    for (int d = 0; d < NDIRS; d++) {
        const halo_face *f = &st->face[d];
        if (f->from == MPI_PROC_NULL)
            continue;
        size_t cells = face_cells(f), first, count;
        received_cells(st, f, &first, &count);
        size_t lo = first * sizeof(uint64_t), bytes = count * sizeof(uint64_t);
        face_range(st, d, first, count, st->halo_seen, 1, 0);
        face_pattern(f, iter, st->halo_want, 1);
        unsigned char *seen = (unsigned char *)st->halo_seen, *want = (unsigned char *)st->halo_want;
        if (hmb_corrupt_pick(ctx, iter))
            seen[lo + bytes / 2] ^= 0x5a;
        if (memcmp(seen + lo, want + lo, bytes) == 0)
            continue;
        size_t bad = lo;
        while (seen[bad] == want[bad])
            bad++;
        int pieces = face_pieces(st, f), piece = (int)(bad / sizeof(uint64_t) / (cells / (size_t)pieces));
        char dir[8], name[32], share[32] = "";
        direction_name(&st->topo, d, dir);
        if (st->tc >= 0)
            snprintf(share, sizeof share, " (thread %d's share)", piece);
        hmb_validation_failure(ctx, st->pt, iter, piece,
                               "%s mode: %s %d face of direction %s from %s %d, piece %d of %d%s, cell %zu of "
                               "%zu (byte %zu) in the halo after unpack is 0x%02x, expected 0x%02x",
                               mode_label(st, mode, name, sizeof name), rank_word(st), st->rank, dir, rank_word(st),
                               f->from, piece, pieces,
                               share, bad / 8, cells, bad, seen[bad], want[bad]);
    }
}


static void halo_free(halo_state *st)
{
    for (int d = 0; d < NDIRS; d++) {
        free(st->face[d].send);
        free(st->face[d].recv);
    }
    free(st->block);
    free(st->piece_rreq);
    free(st->piece_sreq);
    free(st->compute_end);
    free(st->halo_seen);
    free(st->halo_want);
    free(st->share_want);
    free(st->tc_req);
    free(st);
}

static int setup_faces(hmb_ctx *ctx, halo_state *st)
{
    size_t halo_cells = (size_t)(st->n[0] + 2) * (st->n[1] + 2) * (st->n[2] + 2);
    st->block = malloc(halo_cells * sizeof(uint64_t));
    if (!st->block)
        return -1;
    memset(st->block, 0xA5, halo_cells * sizeof(uint64_t));
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        int lo[3], cnt[3];
        hmb_topo_send_box(&st->topo, st->n, d, 0, lo, cnt);
        f->to = st->topo.dir[d].to;
        f->from = st->topo.dir[d].from;
        f->npieces = hmb_topo_pieces(&st->topo, d);
        f->piece_cells = (size_t)cnt[0] * cnt[1] * cnt[2];
        f->sub = st->face_parts > 0 ? st->face_parts / f->npieces : 1;
        f->nparts = f->npieces * f->sub;
        f->flat = st->nparts_total;
        st->nparts_total += f->nparts;
        f->send = hmb_buffer_alloc(ctx, (size_t)f->npieces * f->piece_cells * sizeof(uint64_t));
        f->recv = hmb_buffer_alloc(ctx, (size_t)f->npieces * f->piece_cells * sizeof(uint64_t));
        if (!f->send || !f->recv)
            return -1;
    }
    size_t most = 0;
    for (int d = 0; d < NDIRS; d++)
        most = face_cells(&st->face[d]) > most ? face_cells(&st->face[d]) : most;
    st->halo_seen = malloc(most * sizeof(uint64_t));
    st->halo_want = malloc(most * sizeof(uint64_t));
    st->share_want = malloc(most * sizeof(uint64_t));
    st->piece_rreq = malloc((size_t)st->nparts_total * sizeof(MPI_Request));
    st->piece_sreq = malloc((size_t)st->nparts_total * sizeof(MPI_Request));
    st->compute_end = calloc((size_t)st->threads, sizeof(double));
    st->tc_req = malloc((size_t)st->threads * 2 * NDIRS * sizeof(MPI_Request));
    return st->piece_rreq && st->piece_sreq && st->compute_end && st->halo_seen && st->halo_want && st->share_want &&
                   st->tc_req
               ? 0
               : -1;
}

/* --thread-comm: thread t's communicator (and tag scheme), created once per point. */
static MPI_Comm tc_new_comm(halo_state *st, MPI_Comm comm)
{
    st->tc_created[st->tc_ncomms++] = comm;
    return comm;
}

static void threadcomm_setup(hmb_ctx *ctx, halo_state *st)
{
    MPI_Comm base = st->ev_threads ? st->ev_comm : hmb_comm(ctx), one = MPI_COMM_NULL;
    st->tc_tag_per_thread = st->tc == TC_SHARED || st->tc == TC_TAG;
    if (st->tc == TC_SHARED) {
        MPI_Comm_dup(base, &one);
        tc_new_comm(st, one);
    } else if (st->tc == TC_TAG) {
        one = tc_new_comm(st, hmb_comm_dup_asserting(base, tc_info_keys, TC_NINFO, st->tc_info));
    }
    for (int t = 0; t < st->threads; t++) {
        MPI_Comm comm = one;
        if (st->tc == TC_COMM) {
            MPI_Comm_dup(base, &comm);
        } else if (st->tc == TC_STREAM) {
            hmb_stream_create(&st->tc_streams[st->tc_nstreams++]);
            hmb_stream_comm(base, st->tc_streams[t], &comm);
        }
        st->tc_comm[t] = one != MPI_COMM_NULL ? one : tc_new_comm(st, comm);
    }
}

static void *halo_setup(hmb_ctx *ctx, const hmb_point *pt)
{
    halo_state *st = calloc(1, sizeof *st);
    if (!st) {
        hmb_unsupported(ctx, "cannot allocate the benchmark state");
        return NULL;
    }
    halo_topo(ctx, 0, &st->topo);
    st->ops = hmb_comm_policy(ctx);
    hmb_comm_route(st->ops, ctx, &st->topo);
    point_domain(ctx, pt, st->n);
    snprintf(st->domain, sizeof st->domain, "%d,%d,%d", st->n[0], st->n[1], st->n[2]);
    st->ev_threads = everywhere_threads(ctx);
    st->ev_comm = MPI_COMM_NULL;
    if (st->ev_threads) { /* collective: before any way out of setup */
        st->ev_tid = hmb_rank(ctx) % st->ev_threads;
        MPI_Comm_split(hmb_comm(ctx), st->ev_tid, hmb_rank(ctx) / st->ev_threads, &st->ev_comm);
    }
    st->rank = st->ev_threads ? hmb_rank(ctx) / st->ev_threads : hmb_rank(ctx);
    st->threads = st->ev_threads ? st->ev_threads : hmb_threads(ctx);
    st->compute_ns = hmb_opt_duration_ns(ctx, "compute");
    st->face_parts = hmb_face_partitions(ctx);
    st->mock = st->ops->mock;
    for (int d = 0; d < NDIRS; d++)
        st->psend[d] = st->precv[d] = st->persist_send[d] = st->persist_recv[d] = MPI_REQUEST_NULL;
    for (int m = 0; m < NMODES; m++)
        st->comm[m] = MPI_COMM_NULL;
    st->tc = -1;
    st->vmrss_kib = st->vmhwm_kib = -1;
    if (st->ev_threads) { /* one thread's share per rank, on its group's communicator (shared's tags) */
        st->tc = TC_SHARED;
        st->modes[st->nmodes++] = MODE_THREADCOMM;
        threadcomm_setup(ctx, st);
    } else if (hmb_opt_given(ctx, "thread-comm")) {
        for (int tc = 0; tc < NTC; tc++)
            if (strcmp(hmb_point_str(pt, "thread_comm"), tc_names[tc]) == 0)
                st->tc = tc;
        char why[160];
        const char *reason = st->tc == TC_STREAM ? hmb_streams_unsupported(ctx, st->threads, why, sizeof why) : NULL;
        if (reason) {
            hmb_unsupported(ctx, "%s", reason);
            return st;
        }
        if (!st->mock && hmb_mode_refused(ctx, "threadcomm", st->threads > 1, 0))
            return st;
        st->modes[st->nmodes++] = MODE_THREADCOMM;
        threadcomm_setup(ctx, st);
    }
    unsigned long long chosen = st->tc >= 0 ? 0 : hmb_opt_choices(ctx, "mode");
    for (int m = 0; m < NMODES; m++) {
        if (!(chosen & (1ull << m)))
            continue;
        if (!st->mock && hmb_mode_refused(ctx, mode_names[m], m == MODE_MULTIPLE, m == MODE_PARTITIONED))
            return st;
        st->modes[st->nmodes++] = m;
        MPI_Comm_dup(hmb_comm(ctx), &st->comm[m]);
    }
    if (setup_faces(ctx, st) != 0) {
        hmb_unsupported(ctx, "cannot allocate a block of %s cells with its face buffers", st->domain);
        return st;
    }
    register_faces(ctx, st);
    const hmb_comm_ops *ops = st->ops;
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        int count = (int)(f->npieces * f->piece_cells);
        MPI_Comm persistent = st->comm[MODE_PERSISTENT], partitioned = st->comm[MODE_PARTITIONED];
        if (persistent != MPI_COMM_NULL && f->to != MPI_PROC_NULL)
            ops->send_init(f->send, count, MPI_UINT64_T, f->to, d, persistent, &st->persist_send[d]);
        if (persistent != MPI_COMM_NULL && f->from != MPI_PROC_NULL)
            ops->recv_init(f->recv, count, MPI_UINT64_T, f->from, d, persistent, &st->persist_recv[d]);
        int part_cells = (int)(f->piece_cells / (size_t)f->sub);
        if (partitioned != MPI_COMM_NULL && f->to != MPI_PROC_NULL)
            ops->psend_init(f->send, f->nparts, part_cells, MPI_UINT64_T, f->to, d, partitioned, &st->psend[d]);
        if (partitioned != MPI_COMM_NULL && f->from != MPI_PROC_NULL)
            ops->precv_init(f->recv, f->nparts, part_cells, MPI_UINT64_T, f->from, d, partitioned, &st->precv[d]);
    }
    hmb_memory_kB(&st->vmrss_kib, &st->vmhwm_kib); /* resident memory after set-up (resources per mode) */
    return st;
}

/* Outside timing, before any cold-cache flush: iteration iter's values in the block's boundary
 * layer (everything the faces send). */
static void halo_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    (void)ctx;
    (void)pt;
    halo_state *st = state;
    for (int d = 0; d < NDIRS; d++) {
        int lo[3], cnt[3];
        for (int p = 0; p < st->face[d].npieces; p++) {
            hmb_topo_send_box(&st->topo, st->n, d, p, lo, cnt);
            for (int z = lo[2]; z < lo[2] + cnt[2]; z++)
                for (int y = lo[1]; y < lo[1] + cnt[1]; y++)
                    for (int x = lo[0]; x < lo[0] + cnt[0]; x++)
                        st->block[cell_index(st->n, x, y, z)] = cell_value(st->rank, iter, st->n, x, y, z);
        }
    }
}

/* ------------------------------------------------------------------ the modes */

/* Thread tid's compute (MPI everywhere: the rank's one thread draws its noise as a rank does). */
static void compute(hmb_ctx *ctx, halo_state *st, int tid, long iter)
{
    hmb_compute_ns(ctx, hmb_noise_ns(ctx, st->ev_threads ? 0 : tid, iter, st->compute_ns));
    st->compute_end[tid] = hmb_now();
}

/* single and persistent: join, then this one thread exchanges all six faces (Irecv/Isend, or
 * MPI_Start of the face's persistent requests). Returns bytes it sent. */
static long long exchange_joined(halo_state *st, int mode)
{
    MPI_Request req[2 * NDIRS];
    int nreq = 0;
    long long bytes = 0;
    MPI_Comm comm = st->comm[mode];
    const int persistent = mode == MODE_PERSISTENT;
    const hmb_comm_ops *ops = st->ops;
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        if (f->from == MPI_PROC_NULL)
            continue;
        if (persistent) {
            ops->start(&st->persist_recv[d]);
            req[nreq++] = st->persist_recv[d];
        } else {
            ops->irecv(f->recv, (int)(f->npieces * f->piece_cells), MPI_UINT64_T, f->from, d, comm, &req[nreq++]);
        }
    }
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        if (f->to == MPI_PROC_NULL)
            continue;
        for (int p = 0; p < f->npieces; p++)
            pack_piece(st, d, p);
        bytes += f->npieces * piece_bytes(st, d);
        if (persistent) {
            ops->start(&st->persist_send[d]);
            req[nreq++] = st->persist_send[d];
        } else {
            ops->isend(f->send, (int)(f->npieces * f->piece_cells), MPI_UINT64_T, f->to, d, comm, &req[nreq++]);
        }
    }
    if (nreq > 0)
        ops->waitall(nreq, req);
    for (int d = 0; d < NDIRS; d++)
        if (st->face[d].from != MPI_PROC_NULL)
            for (int p = 0; p < st->face[d].npieces; p++)
                unpack_piece(st, d, p);
    return bytes;
}

/* multiple / partitioned, thread tid after its compute: pack and send (Isend or Pready) each
 * piece it owns. Returns bytes it sent. */
static long long thread_send(halo_state *st, int mode, int tid)
{
    long long bytes = 0;
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        int p = hmb_topo_thread_piece(&st->topo, d, tid);
        if (p < 0 || f->to == MPI_PROC_NULL)
            continue;
        pack_piece(st, d, p);
        bytes += piece_bytes(st, d);
        size_t part_cells = f->piece_cells / (size_t)f->sub;
        for (int q = p * f->sub; q < (p + 1) * f->sub; q++) { /* the piece's partitions */
            if (mode == MODE_MULTIPLE)
                st->ops->isend(f->send + (size_t)q * part_cells, (int)part_cells, MPI_UINT64_T, f->to,
                               d * HMB_MAX_THREADS + q, st->comm[mode], &st->piece_sreq[f->flat + q]);
            else
                st->ops->pready(q, st->psend[d]);
        }
    }
    return bytes;
}

/* Thread tid: wait for, then unpack, every piece landing in the halo next to its tile (piece p
 * of direction d lands beside the tile owning piece p of the opposite direction). */
static void thread_receive(halo_state *st, int mode, int tid)
{
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        int p = hmb_topo_thread_piece(&st->topo, d ^ 1, tid);
        if (p < 0 || f->from == MPI_PROC_NULL)
            continue;
        for (int q = p * f->sub; q < (p + 1) * f->sub; q++) {
            if (mode == MODE_MULTIPLE)
                st->ops->wait(&st->piece_rreq[f->flat + q]);
            else
                hmb_parrived_bounded(st->ctx, st->pt, st->iter, st->ops, st->precv[d], q, st->wait_since,
                                     "the face from direction %d (partitioned mode)", d);
        }
        unpack_piece(st, d, p);
    }
    if (mode == MODE_MULTIPLE)
        for (int d = 0; d < NDIRS; d++) {
            const halo_face *f = &st->face[d];
            int p = hmb_topo_thread_piece(&st->topo, d, tid);
            for (int q = p * f->sub; p >= 0 && f->to != MPI_PROC_NULL && q < (p + 1) * f->sub; q++)
                st->ops->wait(&st->piece_sreq[f->flat + q]);
        }
}

/* threadcomm, thread tid: post the receives of its share of every face, compute, pack and send its
 * share of every face, wait, unpack. Returns bytes it sent. */
static long long threadcomm_exchange(hmb_ctx *ctx, halo_state *st, int tid, long iter)
{
    MPI_Request *req = st->tc_req + (size_t)tid * 2 * NDIRS;
    MPI_Comm comm = st->tc_comm[tid];
    int n = 0;
    long long bytes = 0;
    for (int d = 0; d < NDIRS; d++) {
        const halo_face *f = &st->face[d];
        size_t share = face_cells(f) / (size_t)st->threads;
        int tag = st->tc_tag_per_thread ? d * HMB_MAX_THREADS + tid : d;
        if (f->from != MPI_PROC_NULL)
            st->ops->irecv(f->recv + (size_t)tid * share, (int)share, MPI_UINT64_T, f->from, tag, comm, &req[n++]);
    }
    compute(ctx, st, tid, iter);
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        size_t share = face_cells(f) / (size_t)st->threads;
        int tag = st->tc_tag_per_thread ? d * HMB_MAX_THREADS + tid : d;
        if (f->to == MPI_PROC_NULL)
            continue;
        face_range(st, d, (size_t)tid * share, share, f->send, 0, 0);
        st->ops->isend(f->send + (size_t)tid * share, (int)share, MPI_UINT64_T, f->to, tag, comm, &req[n++]);
        bytes += (long long)(share * sizeof(uint64_t));
    }
    if (n > 0)
        st->ops->waitall(n, req);
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        size_t share = face_cells(f) / (size_t)st->threads;
        if (f->from != MPI_PROC_NULL)
            face_range(st, d, (size_t)tid * share, share, f->recv, 1, 1);
    }
    return bytes;
}

/* Requests a mode starts before its barrier: per-piece receives (multiple), the persistent
 * partitioned requests (partitioned). Returns how many partitioned requests were started. */
static int start_requests(halo_state *st, int mode, MPI_Request *preq)
{
    int npreq = 0;
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        size_t part_cells = f->piece_cells / (size_t)f->sub;
        if (mode == MODE_MULTIPLE && f->from != MPI_PROC_NULL)
            for (int q = 0; q < f->nparts; q++)
                st->ops->irecv(f->recv + (size_t)q * part_cells, (int)part_cells, MPI_UINT64_T, f->from,
                               d * HMB_MAX_THREADS + q, st->comm[mode], &st->piece_rreq[f->flat + q]);
        if (mode == MODE_PARTITIONED) {
            if (st->psend[d] != MPI_REQUEST_NULL)
                preq[npreq++] = st->psend[d];
            if (st->precv[d] != MPI_REQUEST_NULL)
                preq[npreq++] = st->precv[d];
        }
    }
    if (npreq > 0)
        st->ops->startall(npreq, preq);
    return npreq;
}

/* Untimed, before the mode's barrier. */
static void mode_setup(hmb_ctx *ctx, void *state, int mode, long iter)
{
    (void)ctx, (void)iter;
    halo_state *st = state;
    st->npreq = start_requests(st, mode, st->preq);
}

/* One mode, timed by the harness from its barrier; times[1] = t_comm: last thread's compute
 * end to exchange complete (this rank's clock). */
static void mode_iterate(hmb_ctx *ctx, void *state, int mode, long iter, double *times)
{
    halo_state *st = state;
    long long bytes = 0;
    /* The bounds start after any compute the mode waits for (a neighbour's draw; serial: the
     * rank's T draws in turn): a --compute of 10 s or more must not fail a healthy run. */
    st->ctx = ctx, st->iter = iter;
    st->wait_since = hmb_now() + (double)st->threads * 1e-9 * (double)hmb_noise_max_ns(ctx, st->compute_ns);
    if (mode == MODE_SERIAL) {
        for (int tid = 0; tid < st->threads; tid++) /* one thread: every thread's draw in turn */
            compute(ctx, st, tid, iter);
        hmb_phase(ctx, "serial exchange");
        bytes = exchange_joined(st, mode);
    } else if (mode == MODE_THREADCOMM && st->ev_threads) {
        hmb_phase(ctx, "threadcomm exchange (MPI everywhere: one thread's share)");
        bytes = threadcomm_exchange(ctx, st, st->ev_tid, iter);
    } else if (mode == MODE_THREADCOMM) {
        hmb_phase(ctx, "threadcomm exchange");
#pragma omp parallel num_threads(st->threads) reduction(+ : bytes)
        {
            int tid = omp_get_thread_num();
            bytes += threadcomm_exchange(ctx, st, tid, iter);
        }
    } else if (mode == MODE_SINGLE || mode == MODE_PERSISTENT) {
#pragma omp parallel num_threads(st->threads)
        compute(ctx, st, omp_get_thread_num(), iter);
        hmb_phase(ctx, mode == MODE_SINGLE ? "single exchange" : "persistent exchange");
        bytes = exchange_joined(st, mode);
    } else {
        hmb_phase(ctx, mode == MODE_MULTIPLE ? "multiple exchange" : "partitioned exchange (Parrived)");
#pragma omp parallel num_threads(st->threads) reduction(+ : bytes)
        {
            int tid = omp_get_thread_num();
            compute(ctx, st, tid, iter);
            bytes += thread_send(st, mode, tid);
            thread_receive(st, mode, tid);
        }
        if (st->npreq > 0) /* bounded: a library may never complete them (exit 3, not the watchdog) */
            hmb_waitall_bounded(st->ctx, st->pt, st->iter, st->ops, st->npreq, st->preq, st->wait_since,
                                "the partitioned halo exchange");
    }
    double t_end = hmb_now(), last_compute = st->compute_end[st->ev_tid];
    for (int t = 1; t < st->threads && !st->ev_threads; t++)
        last_compute = st->compute_end[t] > last_compute ? st->compute_end[t] : last_compute;
    times[1] = t_end - last_compute;
    atomic_store(&st->bytes_sent[mode], bytes);
}

/* ------------------------------------------------------------------ validation */


/* ------------------------------------------------------------------ iteration */

/* Untimed, right after the mode: count its bytes, check the halo it unpacked (the harness then
 * checks its received faces). */
static void mode_verify(hmb_ctx *ctx, void *state, int mode, long iter, double *sums)
{
    halo_state *st = state;
    sums[0] = (double)atomic_load(&st->bytes_sent[mode]);
    check_halo(ctx, st, mode, iter);
}

static const hmb_mode halo_modes[NMODES + 1] = {
    {.name = "single", .setup = mode_setup, .iterate = mode_iterate, .verify = mode_verify,
     .metrics = EXCHANGE_METRICS | HMB_METRIC_BIT(MT_SPEEDUP)},
    {.name = "multiple", .setup = mode_setup, .iterate = mode_iterate, .verify = mode_verify,
     .metrics = EXCHANGE_METRICS | HMB_METRIC_BIT(MT_RATIO) | HMB_METRIC_BIT(MT_SPEEDUP)},
    {.name = "partitioned", .setup = mode_setup, .iterate = mode_iterate, .verify = mode_verify,
     .metrics = EXCHANGE_METRICS | HMB_METRIC_BIT(MT_RATIO) | HMB_METRIC_BIT(MT_SPEEDUP)},
    {.name = "persistent", .setup = mode_setup, .iterate = mode_iterate, .verify = mode_verify,
     .metrics = EXCHANGE_METRICS | HMB_METRIC_BIT(MT_RATIO) | HMB_METRIC_BIT(MT_SPEEDUP)},
    {.name = "serial", .setup = mode_setup, .iterate = mode_iterate, .verify = mode_verify,
     .metrics = EXCHANGE_METRICS, .flags = HMB_MODE_OPT_IN},
    {.name = "threadcomm", .setup = mode_setup, .iterate = mode_iterate, .verify = mode_verify,
     .metrics = EXCHANGE_METRICS, .flags = HMB_MODE_HIDDEN},
    {.name = NULL}};

static int halo_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    halo_state *st = state;
    st->pt = pt;
    hmb_mode_results r;
    if (!hmb_modes_run(ctx, st, st->modes, st->nmodes, iter, &r))
        return 0;
    double t_iter[NMODES], throughput[NMODES], ratio[NMODES];
    int ranks = st->ev_threads ? hmb_size(ctx) / st->ev_threads : hmb_size(ctx); /* everywhere: per group */
    for (int m = 0; m < NMODES; m++) {
        t_iter[m] = NAN;
        st->bytes_per_rank_iter[m] = r.sums[m][0] / ranks;
    }
    for (int k = 0; k < st->nmodes; k++)
        t_iter[st->modes[k]] = r.times[st->modes[k]][0];
    hmb_pattern_rates(NMODES, st->bytes_per_rank_iter, t_iter, throughput, ratio);
    for (int k = 0; k < st->nmodes; k++) {
        int m = st->modes[k];
        hmb_record_mode(ctx, out, MT_ITER, m, t_iter[m] * 1e6);
        hmb_record_mode(ctx, out, MT_COMM, m, r.times[m][1] * 1e6);
        if (st->mock) /* nothing was exchanged: no throughput */
            continue;
        hmb_record_mode(ctx, out, MT_THROUGHPUT, m, throughput[m] * 1e-6);
        if (m != MODE_SINGLE && m != MODE_SERIAL && !isnan(t_iter[MODE_SINGLE]))
            hmb_record_mode(ctx, out, MT_RATIO, m, ratio[m]);
        if (m != MODE_SERIAL && !isnan(t_iter[MODE_SERIAL]))
            hmb_record_mode(ctx, out, MT_SPEEDUP, m, throughput[m] / throughput[MODE_SERIAL]);
    }
    out->valid = 1;
    return 0;
}

static void halo_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    (void)pt;
    halo_state *st = state;
    if (!st)
        return;
    for (int d = 0; d < NDIRS; d++) {
        st->ops->request_free(&st->psend[d]);
        st->ops->request_free(&st->precv[d]);
        st->ops->request_free(&st->persist_send[d]);
        st->ops->request_free(&st->persist_recv[d]);
    }
    for (int m = 0; m < NMODES; m++)
        if (st->comm[m] != MPI_COMM_NULL)
            MPI_Comm_free(&st->comm[m]);
    for (int c = st->tc_ncomms - 1; c >= 0; c--)
        MPI_Comm_free(&st->tc_created[c]);
    for (int i = 0; i < st->tc_nstreams; i++)
        hmb_stream_free(&st->tc_streams[i]);
    if (st->ev_comm != MPI_COMM_NULL)
        MPI_Comm_free(&st->ev_comm);
    halo_free(st);
}

static void halo_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    (void)pt;
    halo_state *st = state;
    char key[64], tgrid[32];
    hmb_result_add_str(ctx, "domain", st->domain);
    double faces = 2.0 * ((double)st->n[0] * st->n[1] + (double)st->n[1] * st->n[2] + (double)st->n[0] * st->n[2]);
    hmb_result_add_num(ctx, "face_bytes", 8.0 * faces / NDIRS); /* the real (mean) face */
    snprintf(tgrid, sizeof tgrid, "%dx%dx%d", st->topo.tdims[0], st->topo.tdims[1], st->topo.tdims[2]);
    hmb_result_add_str(ctx, "tgrid", tgrid);
    hmb_result_add_num(ctx, "threads", hmb_threads(ctx));
    hmb_result_add_num(ctx, "compute_ns", (double)st->compute_ns);
    hmb_result_add_str(ctx, "noise", hmb_opt_str(ctx, "noise"));
    hmb_result_add_num(ctx, "mock", st->mock);
    for (int k = 0; k < st->nmodes; k++) {
        snprintf(key, sizeof key, "bytes_per_rank_iter_%s", mode_names[st->modes[k]]);
        hmb_result_add_num(ctx, key, st->bytes_per_rank_iter[st->modes[k]]);
    }
    for (int a = 0; a < 3; a++) {
        snprintf(key, sizeof key, "partitions_face_%c", "xyz"[a]);
        hmb_result_add_num(ctx, key, st->face[2 * a].nparts);
    }
    hmb_result_add_str(ctx, "face_partitions", hmb_opt_str(ctx, "face-partitions"));
    /* Resources after set-up (rank 0's view), per point: the talk's performance/resource table. */
    hmb_result_add_num(ctx, "vmrss_kib", st->vmrss_kib >= 0 ? (double)st->vmrss_kib : NAN);
    hmb_result_add_num(ctx, "vmhwm_kib", st->vmhwm_kib >= 0 ? (double)st->vmhwm_kib : NAN);
    if (st->tc < 0)
        return;
    if (st->ev_threads) { /* the communicator per thread index (MPI_Comm_split) is not counted */
        hmb_result_add_num(ctx, "everywhere_threads", st->ev_threads);
        hmb_result_add_num(ctx, "everywhere_ranks", hmb_size(ctx) / st->ev_threads);
    }
    hmb_result_add_num(ctx, "communicators", st->tc_ncomms);
    hmb_result_add_num(ctx, "streams", st->tc_nstreams);
    long long vcis;
    hmb_result_add_num(ctx, "vcis", hmb_mpit_cvar_int("MPIR_CVAR_CH4_NUM_VCIS", &vcis) ? (double)vcis : NAN);
    hmb_result_add_num(ctx, "reserve_vcis",
                       hmb_mpit_cvar_int("MPIR_CVAR_CH4_RESERVE_VCIS", &vcis) ? (double)vcis : NAN);
    if (st->tc == TC_TAG)
        for (int k = 0; k < TC_NINFO; k++)
            hmb_result_add_str(ctx, tc_info_keys[k], st->tc_info[k]);
}

static const hmb_bench halo_bench = {
    .name = "halo3d",
    .group = "patterns",
    .summary = "7-point 3-D halo exchange, threads: single (fork-join), multiple, partitioned, persistent, mock mode",
    .options = halo_options,
    .defaults = halo_defaults,
    .modes = halo_modes,
    .mode_metrics = halo_mode_metrics,
    .thread_level = MPI_THREAD_MULTIPLE,
    .min_ranks = 1,
    .check = halo_check,
    .points = halo_points,
    .setup = halo_setup,
    .prepare = halo_prepare,
    .iterate = halo_iterate,
    .verify = NULL, /* iterate() checks every mode's halo right after the mode, outside its timing */
    .teardown = halo_teardown,
    .annotate = halo_annotate,
    .pivot_metrics = "throughput_single_MBps,throughput_multiple_MBps,throughput_partitioned_MBps,"
                     "throughput_persistent_MBps,throughput_serial_MBps,throughput_threadcomm_MBps",
};
HMB_REGISTER(halo_bench);
