/* sweep3d — the KBA wavefront of SST Ember's Sweep3D (seed 000 §3.2, SPEC §3.5, issue 9).
 *
 * A px x py process grid over x,y (open boundaries: a wavefront starts at a grid corner); each
 * rank's block is nx x ny x nz cells of 8 bytes, z cut into K k-blocks of --kblock cells. One
 * sweep runs the 8 octants (sweep signs of x, y, z; z the slowest bit, so consecutive octants
 * turn the sweep's corner). For each k-block in the octant's z order a rank receives its
 * upstream x face (ny x kblock cells) and y face (nx x kblock cells), computes the block, and
 * sends its downstream faces: the pipeline fills and drains as in KBA.
 *
 * Threads: the 2-D thread grid of the topology (--tgrid tx,ty) cuts each face into the pieces
 * the topology gives direction d (x face: ty pieces, y face: tx pieces). Piece p of direction
 * d is sent by the thread on the +off side that owns it and received by the thread on the -off
 * side that owns piece p of d ^ 1, so one thread handles one piece in every stage (in order).
 * --face-partitions N (threads: N = T, seed 000's one partition per thread) cuts each face into
 * N equal pieces instead, thread tid owning pieces [tid N/T, (tid + 1) N/T) on both sides.
 * Every mode computes the same per-thread draws (hmb_noise_ns keyed by iteration and stage)
 * and every thread of a stage starts only once the stage's upstream faces are in, since the
 * block's cells depend on them:
 *   single      main thread: receive both faces, then fork (compute), join, send both faces;
 *   multiple    each owner thread receives its pieces; barrier; compute; each owner sends its
 *               pieces as soon as its own compute ends (MPI_THREAD_MULTIPLE);
 *   partitioned one MPI_Psend_init / MPI_Precv_init per face and k-block stage (partitions =
 *               pieces), all started at the sweep's start; owners poll MPI_Parrived for their
 *               pieces, barrier, compute, MPI_Pready their pieces;
 *   persistent  as single, on one MPI_Recv_init / MPI_Send_init per (octant, k-block, face)
 *               created once per point: MPI_Start in place of MPI_Irecv / MPI_Isend;
 *   serial      the single-threaded implementation (seed 000's baseline of its 15.1x): as single,
 *               but the main thread alone computes every thread's draw of the stage, one after
 *               the other (the whole block's work, no fork); opt-in (not in the default --mode).
 * Every operation goes through the communication policy (hmb_comm_ops). --comm off (mock, after
 * LLNL Comb): the same stages, threads and compute without MPI, every face copied into this
 * rank's own receive buffers; the mock's upstream is this rank itself, feeding a stage only once
 * it computed it, so under the mock a stage does not wait for its upstream faces: they are
 * waited for at the sweep's end (no pipeline without neighbours).
 * Send data and received faces (the mock's copies too) are registered with the harness, which
 * fills, poisons and checks them (register_faces). */
#include <math.h>
#include <stdio.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "hmb/hmb.h"
#include "hmb/metrics.h"

enum { MODE_SINGLE, MODE_MULTIPLE, MODE_PARTITIONED, MODE_PERSISTENT, MODE_SERIAL, NMODES };
static const char *const mode_names[NMODES] = {"single", "multiple", "partitioned", "persistent", "serial"};
enum { FACE_X, FACE_Y, NFACES };
enum { NOCTANTS = 8 };
/* Metrics: per mode, indexed M_xxx + mode. */

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

static const hmb_option sweep_options[] = {
    {"mode", HMB_OPT_CHOICES, "single,multiple,partitioned,persistent",
     "threading modes, run paired in one iteration (serial: one thread computes and sends the whole block; all: "
     "every mode)", 0, 0, "single|multiple|partitioned|persistent|serial"},
    {"kblock", HMB_OPT_INT, "2", "cells per k-block along z (one pipeline stage)", 1, 1 << 20, NULL},
    {"kblocks", HMB_OPT_INT, "4", "k-blocks per octant with --sizes (nz = kblocks x kblock)", 1, 4096, NULL},
    {"domain", HMB_OPT_INTS, NULL, "local block nx,ny,nz instead of --sizes (nz a multiple of --kblock)", 1,
     1 << 24, NULL},
    HMB_FACE_PARTITIONS_OPTION,
    HMB_COMM_OPTION,
    HMB_TOPO_OPTIONS,
    HMB_OPTION_END};

/* A wavefront needs grid corners: open boundaries by default (periodic is refused in check). */
static const hmb_default sweep_defaults[] = {
    {"sizes", "4K:1M:x4"}, {"compute", "1ms"}, {"boundary", "open"}, {NULL, NULL}};

/* The metrics each mode adds ("{mode}": its name), bits of hmb_mode.metrics. */
enum { MT_SWEEP, MT_THROUGHPUT, MT_RATIO, MT_IDLE, MT_SPEEDUP };
#define SWEEP_METRICS (HMB_METRIC_BIT(MT_SWEEP) | HMB_METRIC_BIT(MT_THROUGHPUT) | HMB_METRIC_BIT(MT_IDLE))
static const hmb_metric sweep_mode_metrics[] = {
    [MT_SWEEP] = {.name = "t_sweep_{mode}_us", .unit = "us", .higher_is_better = 0, .in_table = 1,
                  .description = "{mode}: one sweep (8 octants), slowest rank"},
    [MT_THROUGHPUT] = {.name = "throughput_{mode}_MBps", .unit = "MB/s", .higher_is_better = 1, .in_table = 0,
                       .description = "{mode}: bytes sent per process per sweep / t_sweep"},
    [MT_RATIO] = {.name = "ratio_{mode}", .unit = "ratio", .higher_is_better = 1, .in_table = 1,
                  .description = "throughput_{mode} / throughput_single of the same iteration (>1: faster)"},
    [MT_IDLE] = {.name = "idle_share_{mode}", .unit = "ratio", .higher_is_better = 0, .in_table = 0,
                 .description = "{mode}: 1 - computing / sweep time, mean over ranks"},
    [MT_SPEEDUP] = {.name = "speedup_{mode}_vs_serial", .unit = "ratio", .higher_is_better = 1, .in_table = 1,
                    .description = "throughput_{mode} / throughput_serial of the same iteration (seed 000: against "
                                   "single-threaded; 15.1x for partitioned)"},
    HMB_METRIC_END};

/* ------------------------------------------------------------------ geometry */

/* Octant o: sweep sign +1/-1 per axis (bit 0 x, bit 1 y, bit 2 z). */
static int octant_sign(int o, int axis) { return (o >> axis) & 1 ? -1 : 1; }
/* The topology direction of face f's message in octant o (2-D: 0 +x, 1 -x, 2 +y, 3 -y). */
static int face_dir(int o, int f) { return 2 * f + (octant_sign(o, f) > 0 ? 0 : 1); }
static int slot_of(const sweep_state *st, int o, int k, int f) { return (o * st->kblocks + k) * NFACES + f; }
/* The k-block of stage s of octant o (z order). */
static int stage_kblock(const sweep_state *st, int o, int s)
{
    return octant_sign(o, 2) > 0 ? s : st->kblocks - 1 - s;
}

static int point_has(const hmb_point *pt, const char *name)
{
    for (int i = 0; i < pt->nparams; i++)
        if (strcmp(pt->params[i].name, name) == 0)
            return 1;
    return 0;
}

/* The block of point pt: nx, ny, kblock and K from --domain, or a square face of the point's size. */
static void point_block(const hmb_point *pt, int n[3], int *kblocks)
{
    n[2] = (int)hmb_point_int(pt, "kblock");
    *kblocks = (int)hmb_point_int(pt, "kblocks");
    n[0] = n[1] = (int)(pt->size_bytes / 8 / (size_t)n[2]);
    if (point_has(pt, "nx")) {
        n[0] = (int)hmb_point_int(pt, "nx");
        n[1] = (int)hmb_point_int(pt, "ny");
    }
}

static void sweep_check(hmb_ctx *ctx)
{
    hmb_topo t;
    if (strcmp(hmb_opt_str(ctx, "boundary"), "periodic") == 0)
        hmb_usage_error(ctx, "--boundary periodic: a KBA wavefront starts at a grid corner and a periodic grid has "
                             "none; use --boundary open");
    hmb_topo_from_options(ctx, 2, 4, 1, &t);
    long long kb = hmb_opt_int(ctx, "kblock");
    int parts = hmb_face_partitions(ctx);
    if (hmb_opt_given(ctx, "domain")) {
        int count;
        const long long *d = hmb_opt_ints(ctx, "domain", &count);
        if (hmb_opt_given(ctx, "sizes") || hmb_opt_given(ctx, "kblocks"))
            hmb_usage_error(ctx, "--domain sets the block and its k-blocks: do not give --sizes or --kblocks with it");
        if (count != 3)
            hmb_usage_error(ctx, "--domain: %d values, give nx,ny,nz", count);
        if (d[2] % kb != 0 || d[2] / kb > 4096)
            hmb_usage_error(ctx, "--domain: nz %lld is not a multiple of --kblock %lld into at most 4096 k-blocks",
                            d[2], kb);
        if (parts > 0 && ((d[0] * kb) % parts != 0 || (d[1] * kb) % parts != 0))
            hmb_usage_error(ctx, "--face-partitions %d: faces of %lld and %lld cells (--domain, --kblock) do not "
                                 "split into %d equal partitions", parts, d[1] * kb, d[0] * kb, parts);
        if (parts == 0 && (d[0] % t.tdims[0] != 0 || d[1] % t.tdims[1] != 0))
            hmb_usage_error(ctx, "--domain %lldx%lld: nx, ny must be multiples of the thread grid %dx%d (equal "
                                 "face pieces)", d[0], d[1], t.tdims[0], t.tdims[1]);
        if ((double)(d[0] > d[1] ? d[0] : d[1]) * (double)kb * 8.0 > 2147483647.0)
            hmb_usage_error(ctx, "--domain: a face of %lld x %lld cells is more than MPI int counts allow",
                            d[0] > d[1] ? d[0] : d[1], kb);
        return;
    }
    int nsizes;
    const size_t *sizes = hmb_opt_sizes(ctx, "sizes", &nsizes);
    for (int i = 0; i < nsizes; i++) {
        size_t m = sizes[i];
        if (m == 0 || m % (8 * (size_t)kb) != 0)
            hmb_usage_error(ctx, "--sizes: %zu bytes per face is not a whole number of %lld-cell (8-byte) rows "
                                 "(--kblock %lld)", m, kb, kb);
        size_t side = m / 8 / (size_t)kb;
        if (parts > 0 && (m / 8) % (size_t)parts != 0)
            hmb_usage_error(ctx, "--face-partitions %d: a face of --sizes %zu is %zu cells, not %d equal partitions",
                            parts, m, m / 8, parts);
        if (parts == 0 && (side % (size_t)t.tdims[0] != 0 || side % (size_t)t.tdims[1] != 0))
            hmb_usage_error(ctx, "--sizes %zu: a face is %zu x %lld cells; %zu does not split into the thread grid "
                                 "%dx%d (equal face pieces)", m, side, kb, side, t.tdims[0], t.tdims[1]);
        if (m / 8 > 2147483647u)
            hmb_usage_error(ctx, "--sizes: %zu bytes is more than MPI int counts of 8-byte cells allow", m);
    }
}

static void sweep_points(hmb_ctx *ctx, hmb_point_list *out)
{
    long long kb = hmb_opt_int(ctx, "kblock");
    if (hmb_opt_given(ctx, "domain")) {
        int count;
        const long long *d = hmb_opt_ints(ctx, "domain", &count);
        hmb_point *pt = hmb_points_add(out, (size_t)d[1] * (size_t)kb * 8); /* the x face */
        hmb_point_set_int(pt, "nx", d[0]);
        hmb_point_set_int(pt, "ny", d[1]);
        hmb_point_set_int(pt, "kblock", kb);
        hmb_point_set_int(pt, "kblocks", d[2] / kb);
        return;
    }
    int nsizes;
    const size_t *sizes = hmb_opt_sizes(ctx, "sizes", &nsizes);
    for (int i = 0; i < nsizes; i++) { /* a square face: nx = ny = size / 8 / kblock */
        hmb_point *pt = hmb_points_add(out, sizes[i]);
        hmb_point_set_int(pt, "kblock", kb);
        hmb_point_set_int(pt, "kblocks", hmb_opt_int(ctx, "kblocks"));
    }
}

static void sweep_free(sweep_state *st)
{
    free(st->send);
    for (int m = 0; m < NMODES; m++)
        free(st->recv[m]);
    free(st->slot_offset);
    free(st->face_req);
    free(st->piece_req);
    free(st->recv_req);
    free(st->piece_rreq);
    free(st->part_req);
    free(st->pers_req);
    free(st->busy_ns);
    free(st->bytes_sent);
    free(st);
}

static const char *face_name(int f) { return f == FACE_X ? "x" : "y"; }

/* Validation as data: the send data of every (octant, k-block, face) slot this rank sends, as
 * the values an application would have packed, and every received face of every mode, checked
 * right after the mode: the pattern of (source rank, slot, iteration), piece by piece. */
static void register_faces(hmb_ctx *ctx, sweep_state *st)
{
    for (int o = 0; o < NOCTANTS; o++)
        for (int k = 0; k < st->kblocks; k++)
            for (int f = 0; f < NFACES; f++) {
                int slot = slot_of(st, o, k, f);
                const hmb_topo_dir *dir = &st->topo.dir[face_dir(o, f)];
                size_t len = 8 * st->face_cells[f];
                if (dir->to != MPI_PROC_NULL)
                    hmb_check_register(ctx, HMB_SEND, st->send + st->slot_offset[slot], len, st->rank, slot, 1,
                                       HMB_AFTER_ITERATION, "send");
                for (int i = 0; i < st->nmodes && dir->from != MPI_PROC_NULL; i++) {
                    int m = st->modes[i];
                    hmb_check_register(ctx, HMB_RECEIVE, st->recv[m] + st->slot_offset[slot], len, dir->from, slot,
                                       st->pieces[f], m, "%s mode, octant %d (%c%c%c), k-block %d: %s face from rank %d",
                                       mode_names[m], o, octant_sign(o, 0) > 0 ? '+' : '-',
                                       octant_sign(o, 1) > 0 ? '+' : '-', octant_sign(o, 2) > 0 ? '+' : '-', k,
                                       face_name(f), dir->from);
                }
            }
}

static void *sweep_setup(hmb_ctx *ctx, const hmb_point *pt)
{
    unsigned long long selected = hmb_opt_choices(ctx, "mode");
    const hmb_comm_ops *ops = hmb_comm_policy(ctx);
    for (int m = 0; m < NMODES; m++) {
        if (!ops->mock && (selected >> m & 1) &&
            hmb_mode_refused(ctx, mode_names[m], m == MODE_MULTIPLE, m == MODE_PARTITIONED))
            return NULL;
    }
    sweep_state *st = calloc(1, sizeof *st);
    if (!st) {
        hmb_unsupported(ctx, "cannot allocate the benchmark state");
        return NULL;
    }
    for (int m = 0; m < NMODES; m++)
        st->comm[m] = MPI_COMM_NULL;
    hmb_topo_from_options(ctx, 2, 4, 0, &st->topo);
    st->ops = ops;
    hmb_comm_route(ops, ctx, &st->topo);
    st->rank = hmb_rank(ctx);
    st->threads = hmb_threads(ctx);
    st->compute_ns = hmb_opt_duration_ns(ctx, "compute");
    st->face_parts = hmb_face_partitions(ctx);
    point_block(pt, st->n, &st->kblocks);
    for (int m = 0; m < NMODES; m++)
        if (selected >> m & 1)
            st->modes[st->nmodes++] = m;
    for (int f = 0; f < NFACES; f++) {
        st->face_cells[f] = (size_t)st->n[1 - f] * (size_t)st->n[2]; /* x face: ny x kblock */
        st->pieces[f] = st->face_parts > 0 ? st->face_parts : hmb_topo_pieces(&st->topo, 2 * f);
        st->piece_cells[f] = st->face_cells[f] / (size_t)st->pieces[f];
    }
    st->nslots = NOCTANTS * st->kblocks * NFACES;
    int stages = NOCTANTS * st->kblocks;
    st->max_pieces = st->pieces[0] > st->pieces[1] ? st->pieces[0] : st->pieces[1];
    st->slot_offset = calloc((size_t)st->nslots + 1, sizeof(size_t));
    st->busy_ns = calloc((size_t)stages * (size_t)st->threads, sizeof(double));
    st->bytes_sent = calloc((size_t)st->threads, sizeof(double));
    st->face_req = malloc((size_t)st->nslots * sizeof(MPI_Request));
    st->piece_req = malloc((size_t)st->nslots * (size_t)st->max_pieces * sizeof(MPI_Request));
    st->recv_req = malloc((size_t)st->nslots * sizeof(MPI_Request));
    st->piece_rreq = malloc((size_t)st->nslots * (size_t)st->max_pieces * sizeof(MPI_Request));
    st->part_req = malloc(2 * (size_t)st->nslots * sizeof(MPI_Request));
    st->pers_req = malloc(2 * (size_t)st->nslots * sizeof(MPI_Request));
    if (!st->slot_offset || !st->busy_ns || !st->bytes_sent || !st->face_req || !st->piece_req || !st->part_req ||
        !st->pers_req || !st->recv_req || !st->piece_rreq) {
        hmb_unsupported(ctx, "cannot allocate the request tables of %d stages", stages);
        free(st->part_req); /* not initialised: teardown must not free its requests */
        st->part_req = NULL;
        free(st->pers_req);
        st->pers_req = NULL;
        return st;
    }
    for (int s = 0; s < st->nslots; s++) {
        st->slot_offset[s + 1] = st->slot_offset[s] + st->face_cells[s % NFACES];
        st->face_req[s] = st->recv_req[s] = st->part_req[2 * s] = st->part_req[2 * s + 1] = MPI_REQUEST_NULL;
        st->pers_req[2 * s] = st->pers_req[2 * s + 1] = MPI_REQUEST_NULL;
    }
    for (int i = 0; i < st->nslots * st->max_pieces; i++)
        st->piece_req[i] = st->piece_rreq[i] = MPI_REQUEST_NULL;
    size_t bytes = st->slot_offset[st->nslots] * sizeof(uint64_t);
    st->send = hmb_buffer_alloc(ctx, bytes);
    int ok = st->send != NULL;
    for (int i = 0; i < st->nmodes; i++)
        ok = ok && (st->recv[st->modes[i]] = hmb_buffer_alloc(ctx, bytes)) != NULL;
    if (!ok) {
        hmb_unsupported(ctx, "cannot allocate %d x %zu bytes of face buffers", 1 + st->nmodes, bytes);
        return st;
    }
    register_faces(ctx, st);
    for (int i = 0; i < st->nmodes; i++)
        MPI_Comm_dup(hmb_comm(ctx), &st->comm[st->modes[i]]);
    if (selected >> MODE_PERSISTENT & 1)
        for (int s = 0; s < st->nslots; s++) { /* slot order on every rank, as below */
            int f = s % NFACES, d = face_dir(s / (NFACES * st->kblocks), f);
            MPI_Comm c = st->comm[MODE_PERSISTENT];
            if (st->topo.dir[d].to != MPI_PROC_NULL)
                ops->send_init(st->send + st->slot_offset[s], (int)st->face_cells[f], MPI_UINT64_T,
                               st->topo.dir[d].to, d, c, &st->pers_req[2 * s]);
            if (st->topo.dir[d].from != MPI_PROC_NULL)
                ops->recv_init(st->recv[MODE_PERSISTENT] + st->slot_offset[s], (int)st->face_cells[f],
                               MPI_UINT64_T, st->topo.dir[d].from, d, c, &st->pers_req[2 * s + 1]);
        }
    if (selected >> MODE_PARTITIONED & 1) {
        /* Created in slot order on every rank: each (sender, receiver, tag) pair inits its
         * requests in the same order on both sides, so they match one to one. */
        for (int o = 0; o < NOCTANTS; o++)
            for (int k = 0; k < st->kblocks; k++)
                for (int f = 0; f < NFACES; f++) {
                    int s = slot_of(st, o, k, f), d = face_dir(o, f);
                    int count = (int)st->piece_cells[f];
                    MPI_Comm c = st->comm[MODE_PARTITIONED];
                    if (st->topo.dir[d].to != MPI_PROC_NULL)
                        ops->psend_init(st->send + st->slot_offset[s], st->pieces[f], count, MPI_UINT64_T,
                                        st->topo.dir[d].to, d, c, &st->part_req[2 * s]);
                    if (st->topo.dir[d].from != MPI_PROC_NULL)
                        ops->precv_init(st->recv[MODE_PARTITIONED] + st->slot_offset[s], st->pieces[f], count,
                                        MPI_UINT64_T, st->topo.dir[d].from, d, c, &st->part_req[2 * s + 1]);
                }
    }
    return st;
}

/* ------------------------------------------------------------------ one sweep per mode */

/* Thread tid computes its draw of stage `stage` (the same draws in every mode: keyed by
 * iteration and stage) and records how long it computed. */
static void compute_stage(hmb_ctx *ctx, sweep_state *st, long iter, int stage, int tid)
{
    long draw = iter * (long)(NOCTANTS * st->kblocks) + stage;
    st->busy_ns[stage * st->threads + tid] = (double)hmb_compute_ns(ctx, hmb_noise_ns(ctx, tid, draw, st->compute_ns));
}

/* Fork-join (single, persistent): the main thread receives the stage's upstream faces, all
 * threads compute, the main thread sends the downstream faces (completed at the end of the
 * sweep); persistent starts the slot's persistent requests in place of MPI_Irecv / MPI_Isend;
 * serial: as single, the main thread computing every thread's draw in turn (no fork). */
static void sweep_joined(hmb_ctx *ctx, sweep_state *st, int mode, long iter)
{
    MPI_Comm c = st->comm[mode];
    const int persistent = mode == MODE_PERSISTENT;
    const hmb_topo *t = &st->topo;
    const hmb_comm_ops *ops = st->ops;
    double sent = 0.0;
    for (int o = 0; o < NOCTANTS; o++) {
        for (int s = 0; s < st->kblocks; s++) {
            int k = stage_kblock(st, o, s), stage = o * st->kblocks + s;
            MPI_Request *rr = &st->recv_req[slot_of(st, o, k, 0)]; /* the stage's NFACES receives */
            for (int f = 0; f < NFACES; f++) {
                int d = face_dir(o, f), slot = slot_of(st, o, k, f);
                rr[f] = MPI_REQUEST_NULL;
                if (t->dir[d].from == MPI_PROC_NULL)
                    continue;
                if (persistent) {
                    ops->start(&st->pers_req[2 * slot + 1]);
                    rr[f] = st->pers_req[2 * slot + 1];
                } else {
                    ops->irecv(st->recv[mode] + st->slot_offset[slot], (int)st->face_cells[f], MPI_UINT64_T,
                               t->dir[d].from, d, c, &rr[f]);
                }
            }
            if (!ops->mock)
                ops->waitall(NFACES, rr);
            if (mode == MODE_SERIAL) {
                for (int tid = 0; tid < st->threads; tid++)
                    compute_stage(ctx, st, iter, stage, tid);
            } else {
#pragma omp parallel num_threads(st->threads)
                compute_stage(ctx, st, iter, stage, omp_get_thread_num());
            }
            for (int f = 0; f < NFACES; f++) {
                int d = face_dir(o, f), slot = slot_of(st, o, k, f);
                if (t->dir[d].to == MPI_PROC_NULL)
                    continue;
                if (persistent) {
                    ops->start(&st->pers_req[2 * slot]);
                    st->face_req[slot] = st->pers_req[2 * slot];
                } else {
                    ops->isend(st->send + st->slot_offset[slot], (int)st->face_cells[f], MPI_UINT64_T, t->dir[d].to,
                               d, c, &st->face_req[slot]);
                }
                sent += 8.0 * (double)st->face_cells[f];
            }
        }
    }
    ops->waitall(st->nslots, st->face_req);
    if (ops->mock) /* the mock's upstream faces: this rank's own sends, posted after each stage */
        ops->waitall(st->nslots, st->recv_req);
    st->bytes_sent[0] = sent;
}

/* multiple: one message per piece, tagged with its direction and piece. */
static int piece_tag(int d, int p) { return d * HMB_MAX_THREADS + p; }

static void receive_piece(sweep_state *st, int mode, int o, int k, int f, int p)
{
    int d = face_dir(o, f), slot = slot_of(st, o, k, f);
    uint64_t *buf = st->recv[mode] + st->slot_offset[slot] + (size_t)p * st->piece_cells[f];
    if (mode == MODE_MULTIPLE) {
        MPI_Request *req = &st->piece_rreq[slot * st->max_pieces + p];
        st->ops->irecv(buf, (int)st->piece_cells[f], MPI_UINT64_T, st->topo.dir[d].from, piece_tag(d, p),
                       st->comm[mode], req);
        if (!st->ops->mock) /* the mock: at the sweep's end (its upstream is this rank, later) */
            st->ops->wait(req);
        return;
    }
    if (!st->ops->mock) /* the mock: MPI_Waitall at the sweep's end */
        hmb_parrived_bounded(st->ctx, st->pt, st->iter, st->ops, st->part_req[2 * slot + 1], p, st->wait_since,
                             "octant %d, k-block %d, face %c (partitioned sweep)", o, k, f == FACE_X ? 'x' : 'y');
}

static void send_piece(sweep_state *st, int mode, int o, int k, int f, int p)
{
    int d = face_dir(o, f), slot = slot_of(st, o, k, f);
    if (mode == MODE_MULTIPLE) {
        st->ops->isend(st->send + st->slot_offset[slot] + (size_t)p * st->piece_cells[f], (int)st->piece_cells[f],
                       MPI_UINT64_T, st->topo.dir[d].to, piece_tag(d, p), st->comm[mode],
                       &st->piece_req[slot * st->max_pieces + p]);
        return;
    }
    st->ops->pready(p, st->part_req[2 * slot]);
}

/* Thread tid's pieces of face f in octant o: [*first, *first + *count). Tiles: the topology's
 * piece of the face's direction on the sender's side (sends) or the receiver's (receives);
 * --face-partitions N: N / T consecutive pieces, the same on both sides. */
static void thread_pieces(const sweep_state *st, int o, int f, int receiving, int tid, int *first, int *count)
{
    if (st->face_parts > 0) {
        hmb_face_partition_range(st->face_parts, st->threads, tid, first, count);
        return;
    }
    int d = face_dir(o, f);
    *first = hmb_topo_thread_piece(&st->topo, receiving ? d ^ 1 : d, tid);
    *count = *first >= 0;
}

/* multiple / partitioned: one parallel region
 * for the sweep; each owner thread receives its upstream pieces, all wait for the stage's data
 * (barrier), compute, and each owner sends its downstream pieces at once. */
static void sweep_threads(hmb_ctx *ctx, sweep_state *st, int mode, long iter)
{
    const hmb_topo *t = &st->topo;
    if (mode == MODE_PARTITIONED)
        for (int i = 0; i < 2 * st->nslots; i++)
            if (st->part_req[i] != MPI_REQUEST_NULL)
                st->ops->start(&st->part_req[i]);
#pragma omp parallel num_threads(st->threads)
    {
        int tid = omp_get_thread_num();
        double sent = 0.0;
        for (int o = 0; o < NOCTANTS; o++) {
            for (int s = 0; s < st->kblocks; s++) {
                int k = stage_kblock(st, o, s), stage = o * st->kblocks + s;
                for (int f = 0; f < NFACES; f++) {
                    int first, count;
                    thread_pieces(st, o, f, 1, tid, &first, &count);
                    for (int p = first; t->dir[face_dir(o, f)].from != MPI_PROC_NULL && p < first + count; p++)
                        receive_piece(st, mode, o, k, f, p);
                }
#pragma omp barrier
                compute_stage(ctx, st, iter, stage, tid);
                for (int f = 0; f < NFACES; f++) {
                    int first, count;
                    thread_pieces(st, o, f, 0, tid, &first, &count);
                    for (int p = first; t->dir[face_dir(o, f)].to != MPI_PROC_NULL && p < first + count; p++) {
                        send_piece(st, mode, o, k, f, p);
                        sent += 8.0 * (double)st->piece_cells[f];
                    }
                }
            }
        }
        st->bytes_sent[tid] = sent;
    }
    /* Sends complete at the end of the sweep (every send slot has its own buffer). */
    if (mode == MODE_MULTIPLE) {
        st->ops->waitall(st->nslots * st->max_pieces, st->piece_req);
        if (st->ops->mock) /* the mock's upstream pieces (receive_piece) */
            st->ops->waitall(st->nslots * st->max_pieces, st->piece_rreq);
    }
    if (mode == MODE_PARTITIONED) /* bounded: a library may never complete them (exit 3, not the watchdog) */
        hmb_waitall_bounded(st->ctx, st->pt, st->iter, st->ops, 2 * st->nslots, st->part_req, st->wait_since,
                            "the partitioned sweep");
}

/* ------------------------------------------------------------------ callbacks */

static void mode_setup(hmb_ctx *ctx, void *state, int mode, long iter)
{
    (void)ctx, (void)mode, (void)iter;
    sweep_state *st = state;
    memset(st->bytes_sent, 0, (size_t)st->threads * sizeof(double));
}

static void mode_iterate(hmb_ctx *ctx, void *state, int mode, long iter, double *times)
{
    (void)times;
    sweep_state *st = state;
    /* The bounds start after the compute a wait may follow: every stage of the sweep plus the
     * pipeline's fill across the grid, each stage's draws (serial: T in turn). A --compute of
     * 10 s or more must not fail a healthy run. */
    const int stages = NOCTANTS * st->kblocks + st->topo.dims[0] + st->topo.dims[1];
    st->ctx = ctx, st->iter = iter;
    st->wait_since = hmb_now() + (double)stages * st->threads * 1e-9 * (double)hmb_noise_max_ns(ctx, st->compute_ns);
    if (mode == MODE_SINGLE || mode == MODE_PERSISTENT || mode == MODE_SERIAL)
        sweep_joined(ctx, st, mode, iter);
    else
        sweep_threads(ctx, st, mode, iter);
}

/* Untimed: this rank's computing time of the sweep (its stages' slowest threads), and in
 * sums[0] the bytes it sent. */
static void mode_verify(hmb_ctx *ctx, void *state, int mode, long iter, double *sums)
{
    (void)ctx, (void)iter;
    sweep_state *st = state;
    const int stages = NOCTANTS * st->kblocks;
    double busy_ns = 0.0;
    for (int s = 0; s < stages; s++) {
        double stage_ns = 0.0; /* the stage's slowest thread: a fork-join code waits for it */
        for (int tid = 0; tid < st->threads; tid++) /* serial: one thread computed them all */
            stage_ns = mode == MODE_SERIAL ? stage_ns + st->busy_ns[s * st->threads + tid]
                                           : fmax(stage_ns, st->busy_ns[s * st->threads + tid]);
        busy_ns += stage_ns;
    }
    st->busy_s[mode] = busy_ns * 1e-9;
    for (int tid = 0; tid < st->threads; tid++)
        sums[0] += st->bytes_sent[tid];
}

static const hmb_mode sweep_modes[NMODES + 1] = {
    {.name = "single", .setup = mode_setup, .iterate = mode_iterate, .verify = mode_verify,
     .metrics = SWEEP_METRICS | HMB_METRIC_BIT(MT_SPEEDUP)},
    {.name = "multiple", .setup = mode_setup, .iterate = mode_iterate, .verify = mode_verify,
     .metrics = SWEEP_METRICS | HMB_METRIC_BIT(MT_RATIO) | HMB_METRIC_BIT(MT_SPEEDUP)},
    {.name = "partitioned", .setup = mode_setup, .iterate = mode_iterate, .verify = mode_verify,
     .metrics = SWEEP_METRICS | HMB_METRIC_BIT(MT_RATIO) | HMB_METRIC_BIT(MT_SPEEDUP)},
    {.name = "persistent", .setup = mode_setup, .iterate = mode_iterate, .verify = mode_verify,
     .metrics = SWEEP_METRICS | HMB_METRIC_BIT(MT_RATIO) | HMB_METRIC_BIT(MT_SPEEDUP)},
    {.name = "serial", .setup = mode_setup, .iterate = mode_iterate, .verify = mode_verify,
     .metrics = SWEEP_METRICS, .flags = HMB_MODE_OPT_IN},
    {.name = NULL}};

static int sweep_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    sweep_state *st = state;
    st->pt = pt;
    hmb_mode_results r;
    int rank0 = hmb_modes_run(ctx, st, st->modes, st->nmodes, iter, &r);
    /* idle share: each rank's from its own sweep time (the slowest rank's is in r), mean over ranks */
    double idle[NMODES] = {0};
    for (int i = 0; i < st->nmodes; i++)
        idle[st->modes[i]] = hmb_idle_share(st->busy_s[st->modes[i]], r.local[st->modes[i]][0]);
    hmb_reduce_sum(ctx, idle, NMODES);
    if (!rank0)
        return 0;
    const int ranks = hmb_size(ctx);
    double t_sweep[NMODES], throughput[NMODES], ratio[NMODES];
    for (int m = 0; m < NMODES; m++) {
        st->bytes_per_rank[m] = r.sums[m][0] / ranks;
        t_sweep[m] = r.times[m][0];
    }
    hmb_pattern_rates(NMODES, st->bytes_per_rank, t_sweep, throughput, ratio); /* as halo3d */
    for (int i = 0; i < st->nmodes; i++) {
        int m = st->modes[i];
        hmb_record_mode(ctx, out, MT_SWEEP, m, t_sweep[m] * 1e6);
        hmb_record_mode(ctx, out, MT_IDLE, m, idle[m] / ranks);
        if (!st->ops->mock) /* nothing was exchanged: no throughput */
            hmb_record_mode(ctx, out, MT_THROUGHPUT, m, throughput[m] * 1e-6);
        if (m != MODE_SINGLE && m != MODE_SERIAL && !st->ops->mock && t_sweep[MODE_SINGLE] > 0.0)
            hmb_record_mode(ctx, out, MT_RATIO, m, ratio[m]);
        if (m != MODE_SERIAL && !st->ops->mock && t_sweep[MODE_SERIAL] > 0.0)
            hmb_record_mode(ctx, out, MT_SPEEDUP, m, throughput[m] / throughput[MODE_SERIAL]);
    }
    return 0;
}

static void sweep_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    (void)ctx, (void)pt;
    sweep_state *st = state;
    if (!st)
        return;
    for (int i = 0; st->part_req && i < 2 * st->nslots; i++) {
        st->ops->request_free(&st->part_req[i]);
        st->ops->request_free(&st->pers_req[i]);
    }
    for (int m = 0; m < NMODES; m++)
        if (st->comm[m] != MPI_COMM_NULL)
            MPI_Comm_free(&st->comm[m]);
    sweep_free(st);
}

static void sweep_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    sweep_state *st = state;
    char key[64];
    for (int i = 0; i < st->nmodes; i++) {
        snprintf(key, sizeof key, "bytes_per_rank_sweep_%s", mode_names[st->modes[i]]);
        hmb_result_add_num(ctx, key, st->bytes_per_rank[st->modes[i]]);
    }
    hmb_result_add_str(ctx, "comm", st->ops->mock ? "off" : "on");
    if (!st->ops->mock) /* a model of the grid, not a measurement: recorded once, no statistics */
        hmb_result_add_num(ctx, "idle_share_ideal",
                           hmb_kba_ideal_idle_share(st->topo.dims[0], st->topo.dims[1], st->kblocks));
    hmb_result_add_num(ctx, "nx", st->n[0]);
    hmb_result_add_num(ctx, "ny", st->n[1]);
    hmb_result_add_num(ctx, "nz", (double)st->n[2] * st->kblocks);
    hmb_result_add_num(ctx, "face_x_bytes", 8.0 * (double)st->face_cells[FACE_X]);
    hmb_result_add_num(ctx, "face_y_bytes", 8.0 * (double)st->face_cells[FACE_Y]);
    hmb_result_add_num(ctx, "pieces_x", st->pieces[FACE_X]);
    hmb_result_add_num(ctx, "pieces_y", st->pieces[FACE_Y]);
    hmb_result_add_str(ctx, "face_partitions", hmb_opt_str(ctx, "face-partitions"));
    hmb_result_add_num(ctx, "threads", st->threads);
    hmb_result_add_num(ctx, "compute_ns", (double)st->compute_ns);
    hmb_result_add_str(ctx, "noise", hmb_opt_str(ctx, "noise"));
    (void)pt;
}

static const hmb_bench sweep_bench = {
    .name = "sweep3d",
    .group = "patterns",
    .summary = "KBA wavefront (Ember Sweep3D) on a px x py grid: single, multiple, partitioned, persistent, serial",
    .options = sweep_options,
    .defaults = sweep_defaults,
    .modes = sweep_modes,
    .mode_metrics = sweep_mode_metrics,
    .thread_level = MPI_THREAD_MULTIPLE,
    .min_ranks = 1,
    .check = sweep_check,
    .points = sweep_points,
    .setup = sweep_setup,
    .prepare = NULL, /* send data, poison and checks: the harness's (register_faces) */
    .iterate = sweep_iterate,
    .verify = NULL,
    .teardown = sweep_teardown,
    .annotate = sweep_annotate,
    .pivot_metrics = "throughput_single_MBps,throughput_multiple_MBps,throughput_partitioned_MBps,"
                     "throughput_persistent_MBps,throughput_serial_MBps",
};
HMB_REGISTER(sweep_bench);
