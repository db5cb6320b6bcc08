/* sweep3d — the KBA wavefront of SST Ember's Sweep3D (seed 000 §3.2, SPEC §3.5, issue 9;
 * docs/metrics.md, "sweep3d").
 *
 * A px x py process grid over x,y (open boundaries: a wavefront starts at a grid corner); each
 * rank's block is nx x ny x nz cells of 8 bytes, z cut into K k-blocks of --kblock cells. One
 * sweep runs the 8 octants; for each k-block in the octant's z order a rank receives its upstream
 * x and y faces, computes the block, and sends its downstream faces: the pipeline fills and
 * drains as in KBA. Threads split each face into pieces (the topology's tiles, or --face-partitions
 * N); every mode computes the same per-thread draws, and every thread of a stage starts only once
 * the stage's upstream faces are in. Each mode below is a row of sweep_modes with its own iterate.
 * Every operation goes through the communication policy: under --comm off (the mock) a rank's
 * upstream is itself, feeding a stage only once it computed it, so the upstream faces are waited
 * for at the sweep's end (no pipeline without neighbours). Send data and received faces are
 * registered with the harness, which fills, poisons and checks them (verify.c). Set-up: setup.c. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "sweep3d.h"

/* The metrics each mode adds ("{mode}": its name), bits of hmb_mode.metrics. */
enum { MT_SWEEP, MT_THROUGHPUT, MT_RATIO, MT_IDLE, MT_SPEEDUP };
#define SWEEP_METRICS (HMB_METRIC_BIT(MT_SWEEP) | HMB_METRIC_BIT(MT_THROUGHPUT) | HMB_METRIC_BIT(MT_IDLE))
static const hmb_metric sweep_mode_metrics[] = {
    [MT_SWEEP] = {.name = "t_sweep_{mode}_us", .unit = "us", .higher_is_better = 0, .set_by = "compute", .in_table = 1,
                  .description = "{mode}: one sweep (8 octants), slowest rank"},
    [MT_THROUGHPUT] = {.name = "throughput_{mode}_MBps", .unit = "MB/s", .higher_is_better = 1, .set_by = "compute", .in_table = 0,
                       .description = "{mode}: bytes sent per process per sweep / t_sweep"},
    [MT_RATIO] = {.name = "ratio_{mode}", .unit = "ratio", .higher_is_better = 1, .in_table = 1,
                  .description = "throughput_{mode} / throughput_single of the same iteration (>1: faster)"},
    [MT_IDLE] = {.name = "idle_share_{mode}", .unit = "ratio", .higher_is_better = 0, .bounds = "0..1", .in_table = 0,
                 .description = "{mode}: 1 - computing / sweep time, mean over ranks"},
    [MT_SPEEDUP] = {.name = "speedup_{mode}_vs_serial", .unit = "ratio", .higher_is_better = 1, .in_table = 1,
                    .description = "throughput_{mode} / throughput_serial of the same iteration (seed 000: against "
                                   "single-threaded)"},
    HMB_METRIC_END};

/* The k-block of stage s of octant o (z order). */
static int stage_kblock(const sweep_state *st, int o, int s)
{
    return octant_sign(o, 2) > 0 ? s : st->kblocks - 1 - s;
}

/* ------------------------------------------------------------------ one sweep */

/* Thread tid computes its draw of stage `stage` (the same draws in every mode: keyed by
 * iteration and stage) and records how long it computed. */
static void compute_stage(hmb_ctx *ctx, sweep_state *st, long iter, int stage, int tid)
{
    long draw = iter * (long)(NOCTANTS * st->kblocks) + stage;
    st->busy_ns[stage * st->threads + tid] = (double)hmb_compute_ns(ctx, hmb_noise_ns(ctx, tid, draw, st->compute_ns));
}

/* Fork-join (single, persistent, serial): the main thread receives the stage's upstream faces,
 * the threads compute (serial: the main thread computes every thread's draw in turn), the main
 * thread sends the downstream faces (completed at the end of the sweep); persistent starts the
 * slot's persistent requests in place of MPI_Irecv / MPI_Isend. */
static void sweep_joined(hmb_ctx *ctx, sweep_state *st, int mode, long iter, int persistent, int serial)
{
    MPI_Comm c = st->comm[mode];
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
            if (serial) {
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

static void receive_message(sweep_state *st, int o, int k, int f, int p)
{
    int d = face_dir(o, f), slot = slot_of(st, o, k, f);
    uint64_t *buf = st->recv[MODE_MULTIPLE] + st->slot_offset[slot] + (size_t)p * st->piece_cells[f];
    MPI_Request *req = &st->piece_rreq[slot * st->max_pieces + p];
    st->ops->irecv(buf, (int)st->piece_cells[f], MPI_UINT64_T, st->topo.dir[d].from, piece_tag(d, p),
                   st->comm[MODE_MULTIPLE], req);
    if (!st->ops->mock) /* the mock: at the sweep's end (its upstream is this rank, later) */
        st->ops->wait(req);
}

static void send_message(sweep_state *st, int o, int k, int f, int p)
{
    int d = face_dir(o, f), slot = slot_of(st, o, k, f);
    st->ops->isend(st->send + st->slot_offset[slot] + (size_t)p * st->piece_cells[f], (int)st->piece_cells[f],
                   MPI_UINT64_T, st->topo.dir[d].to, piece_tag(d, p), st->comm[MODE_MULTIPLE],
                   &st->piece_req[slot * st->max_pieces + p]);
}

static void receive_partition(sweep_state *st, int o, int k, int f, int p)
{
    if (!st->ops->mock) /* the mock: MPI_Waitall at the sweep's end */
        hmb_parrived_bounded(st->ctx, st->pt, st->iter, st->ops, st->part_req[2 * slot_of(st, o, k, f) + 1], p,
                             st->wait_since, "octant %d, k-block %d, face %c (partitioned sweep)", o, k,
                             f == FACE_X ? 'x' : 'y');
}

static void send_partition(sweep_state *st, int o, int k, int f, int p)
{
    st->ops->pready(p, st->part_req[2 * slot_of(st, o, k, f)]);
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

typedef void (*piece_fn)(sweep_state *st, int o, int k, int f, int p);

/* multiple / partitioned: one parallel region for the sweep; each owner thread receives its
 * upstream pieces, all wait for the stage's data (barrier), compute, and each owner sends its
 * downstream pieces at once. */
static void sweep_threads(hmb_ctx *ctx, sweep_state *st, long iter, piece_fn receive, piece_fn send)
{
    const hmb_topo *t = &st->topo;
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
                        receive(st, o, k, f, p);
                }
#pragma omp barrier
                compute_stage(ctx, st, iter, stage, tid);
                for (int f = 0; f < NFACES; f++) {
                    int first, count;
                    thread_pieces(st, o, f, 0, tid, &first, &count);
                    for (int p = first; t->dir[face_dir(o, f)].to != MPI_PROC_NULL && p < first + count; p++) {
                        send(st, o, k, f, p);
                        sent += 8.0 * (double)st->piece_cells[f];
                    }
                }
            }
        }
        st->bytes_sent[tid] = sent;
    }
}

/* ------------------------------------------------------------------ the modes */

static sweep_state *mode_begin(hmb_ctx *ctx, void *state, long iter)
{
    sweep_state *st = state;
    /* The bounds start after the compute a wait may follow: every stage of the sweep plus the
     * pipeline's fill across the grid, each stage's draws (serial: T in turn). A --compute of
     * 10 s or more must not fail a healthy run. */
    const int stages = NOCTANTS * st->kblocks + st->topo.dims[0] + st->topo.dims[1];
    st->ctx = ctx, st->iter = iter;
    st->wait_since = hmb_now() + (double)stages * st->threads * 1e-9 * (double)hmb_noise_max_ns(ctx, st->compute_ns);
    return st;
}

/* single: receive both faces, fork (compute), join, send both faces. */
static void iterate_single(hmb_ctx *ctx, void *state, int mode, long iter, double *times)
{
    (void)times;
    sweep_joined(ctx, mode_begin(ctx, state, iter), mode, iter, 0, 0);
}

/* persistent: as single, on one MPI_Recv_init / MPI_Send_init per (octant, k-block, face). */
static void iterate_persistent(hmb_ctx *ctx, void *state, int mode, long iter, double *times)
{
    (void)times;
    sweep_joined(ctx, mode_begin(ctx, state, iter), mode, iter, 1, 0);
}

/* serial: as single, the main thread alone computing every thread's draw of the stage (seed 000's
 * single-threaded baseline, against which speedup_{mode}_vs_serial compares). */
static void iterate_serial(hmb_ctx *ctx, void *state, int mode, long iter, double *times)
{
    (void)times;
    sweep_joined(ctx, mode_begin(ctx, state, iter), mode, iter, 0, 1);
}

/* multiple: each owner thread receives its pieces (MPI_Irecv, wait), computes after the stage's
 * barrier and MPI_Isends its pieces as soon as its compute ends; the sends complete at the end
 * of the sweep (every send slot has its own buffer). */
static void iterate_multiple(hmb_ctx *ctx, void *state, int mode, long iter, double *times)
{
    (void)mode, (void)times;
    sweep_state *st = mode_begin(ctx, state, iter);
    sweep_threads(ctx, st, iter, receive_message, send_message);
    st->ops->waitall(st->nslots * st->max_pieces, st->piece_req);
    if (st->ops->mock) /* the mock's upstream pieces (receive_message) */
        st->ops->waitall(st->nslots * st->max_pieces, st->piece_rreq);
}

/* partitioned: one partitioned request per face and k-block stage, all started at the sweep's
 * start; owners poll MPI_Parrived for their pieces, compute, MPI_Pready theirs; then every
 * request is completed, bounded (a library may never complete them: exit 3, not the watchdog). */
static void iterate_partitioned(hmb_ctx *ctx, void *state, int mode, long iter, double *times)
{
    (void)mode, (void)times;
    sweep_state *st = mode_begin(ctx, state, iter);
    for (int i = 0; i < 2 * st->nslots; i++)
        if (st->part_req[i] != MPI_REQUEST_NULL)
            st->ops->start(&st->part_req[i]);
    sweep_threads(ctx, st, iter, receive_partition, send_partition);
    hmb_waitall_bounded(st->ctx, st->pt, st->iter, st->ops, 2 * st->nslots, st->part_req, st->wait_since,
                        "the partitioned sweep");
}

static void mode_setup(hmb_ctx *ctx, void *state, int mode, long iter)
{
    (void)ctx, (void)mode, (void)iter;
    sweep_state *st = state;
    memset(st->bytes_sent, 0, (size_t)st->threads * sizeof(double));
}

/* Untimed: this rank's computing time of the sweep, and in sums[0] the bytes it sent. A stage
 * took its slowest thread's time where the threads computed at once (a fork-join code waits for
 * it), the sum of its threads' times where one thread computed them all (serial). */
static void account(sweep_state *st, int mode, double *sums, int one_thread)
{
    const int stages = NOCTANTS * st->kblocks;
    double busy_ns = 0.0;
    for (int s = 0; s < stages; s++) {
        double stage_ns = 0.0;
        for (int tid = 0; tid < st->threads; tid++)
            stage_ns = one_thread ? stage_ns + st->busy_ns[s * st->threads + tid]
                                  : fmax(stage_ns, st->busy_ns[s * st->threads + tid]);
        busy_ns += stage_ns;
    }
    st->busy_s[mode] = busy_ns * 1e-9;
    for (int tid = 0; tid < st->threads; tid++)
        sums[0] += st->bytes_sent[tid];
}

static void mode_verify(hmb_ctx *ctx, void *state, int mode, long iter, double *sums)
{
    (void)ctx, (void)iter;
    account(state, mode, sums, 0);
}

static void serial_verify(hmb_ctx *ctx, void *state, int mode, long iter, double *sums)
{
    (void)ctx, (void)iter;
    account(state, mode, sums, 1);
}

static const hmb_mode sweep_modes[NMODES + 1] = {
    [MODE_SINGLE] = {.name = "single", .setup = mode_setup, .iterate = iterate_single, .verify = mode_verify,
                     .metrics = SWEEP_METRICS | HMB_METRIC_BIT(MT_SPEEDUP)},
    [MODE_MULTIPLE] = {.name = "multiple", .setup = mode_setup, .iterate = iterate_multiple, .verify = mode_verify,
                       .metrics = SWEEP_METRICS | HMB_METRIC_BIT(MT_RATIO) | HMB_METRIC_BIT(MT_SPEEDUP),
                       .flags = HMB_MODE_MPI_THREADS},
    [MODE_PARTITIONED] = {.name = "partitioned", .setup = mode_setup, .iterate = iterate_partitioned,
                          .verify = mode_verify, .flags = HMB_MODE_PARTITIONED,
                          .metrics = SWEEP_METRICS | HMB_METRIC_BIT(MT_RATIO) | HMB_METRIC_BIT(MT_SPEEDUP)},
    [MODE_PERSISTENT] = {.name = "persistent", .setup = mode_setup, .iterate = iterate_persistent,
                         .verify = mode_verify,
                         .metrics = SWEEP_METRICS | HMB_METRIC_BIT(MT_RATIO) | HMB_METRIC_BIT(MT_SPEEDUP)},
    [MODE_SERIAL] = {.name = "serial", .setup = mode_setup, .iterate = iterate_serial, .verify = serial_verify,
                     .metrics = SWEEP_METRICS, .flags = HMB_MODE_OPT_IN},
    [NMODES] = {.name = NULL}};

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
        const unsigned declared = sweep_modes[m].metrics; /* the ratios a mode has: its row says */
        if ((declared & HMB_METRIC_BIT(MT_RATIO)) && !st->ops->mock && t_sweep[MODE_SINGLE] > 0.0)
            hmb_record_mode(ctx, out, MT_RATIO, m, ratio[m]);
        if ((declared & HMB_METRIC_BIT(MT_SPEEDUP)) && !st->ops->mock && t_sweep[MODE_SERIAL] > 0.0)
            hmb_record_mode(ctx, out, MT_SPEEDUP, m, throughput[m] / throughput[MODE_SERIAL]);
    }
    return 0;
}

static void sweep_annotate(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    sweep_state *st = state;
    char key[64];
    for (int i = 0; i < st->nmodes; i++) {
        snprintf(key, sizeof key, "bytes_per_rank_sweep_%s", sweep_modes[st->modes[i]].name);
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
    hmb_result_add_str(ctx, "face_partitions", hmb_common(ctx)->face_partitions);
    hmb_result_add_num(ctx, "threads", st->threads);
    hmb_result_add_num(ctx, "compute_ns", (double)st->compute_ns);
    hmb_result_add_str(ctx, "noise", hmb_common(ctx)->noise);
    (void)pt;
}

static const hmb_bench sweep_bench = {
    .name = "sweep3d",
    .group = "patterns",
    .summary = "KBA wavefront (Ember Sweep3D) on a px x py grid: single, multiple, partitioned, persistent, serial",
    HMB_BENCH_OPTIONS(sweep_opts),
    HMB_BENCH_PARAMS(sweep_point),
    .uses = HMB_OPTS_FACE_PARTITIONS | HMB_OPTS_COMM | HMB_OPTS_TOPO,
    /* A wavefront needs grid corners: open boundaries by default (periodic is refused in check). */
    .defaults = (const hmb_default[]){{"sizes", "4K:1M:x4"}, {"compute", "1ms"}, {"boundary", "open"}, {NULL, NULL}},
    .modes = sweep_modes,
    .mode_metrics = sweep_mode_metrics,
    .thread_level = MPI_THREAD_MULTIPLE,
    .min_ranks = 1,
    .check = sweep_check,
    .points = sweep_points,
    .setup = sweep_setup,
    .prepare = NULL, /* send data, poison and checks: the harness's (verify.c) */
    .iterate = sweep_iterate,
    .verify = NULL,
    .teardown = sweep_teardown,
    .annotate = sweep_annotate,
    .pivot_metrics = "throughput_{mode}_MBps,speedup_{mode}_vs_serial", /* every mode's */
};
HMB_REGISTER(sweep_bench);
