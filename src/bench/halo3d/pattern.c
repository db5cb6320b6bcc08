/* halo3d — 7-point halo exchange on a 3-D process grid (SPEC §3.5, seed 000 §3.2: Ember's Halo3D;
 * docs/metrics.md, "halo3d").
 *
 * Every rank owns a block of 8-byte cells with a one-cell halo, split into one tile per thread;
 * each face is cut into one piece per thread tile touching it (--face-partitions N: N partitions).
 * Each iteration the threads compute, then the six faces are packed, exchanged and unpacked, in
 * every selected mode (a row of halo_modes, its own iterate) back to back on the same compute
 * draws, counterbalanced; every operation goes through the communication policy (--comm off: the
 * mock). A cell's value encodes (source rank, iteration, cell): a wrong face fails validation.
 * Here: packing, the exchanges (threadcomm's too, and MPI everywhere's share of it: one rank per
 * thread, --everywhere-ranks), the mode table, the metrics, the record, the descriptor; setup.c:
 * checks, points, memory, the state of a point; verify.c: send data and validation. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "halo3d.h"

/* The metrics each mode adds ("{mode}": its name), bits of hmb_mode.metrics. */
enum { MT_ITER, MT_COMM, MT_THROUGHPUT, MT_RATIO, MT_SPEEDUP };
#define EXCHANGE_METRICS (HMB_METRIC_BIT(MT_ITER) | HMB_METRIC_BIT(MT_COMM) | HMB_METRIC_BIT(MT_THROUGHPUT))
static const hmb_metric halo_mode_metrics[] = {
    [MT_ITER] = {.name = "t_iter_{mode}_us", .unit = "us", .higher_is_better = 0, .set_by = "compute", .in_table = 0,
                 .description = "{mode}: time per iteration (compute and exchange), slowest rank"},
    [MT_COMM] = {.name = "t_comm_{mode}_us", .unit = "us", .higher_is_better = 0, .in_table = 0,
                 .description = "{mode}: last thread's compute end to exchange complete, slowest rank"},
    [MT_THROUGHPUT] = {.name = "throughput_{mode}_MBps", .unit = "MB/s", .higher_is_better = 1, .set_by = "compute", .in_table = 1,
                       .description = "{mode}: bytes exchanged per process per second (MB = 1e6 B)"},
    [MT_RATIO] = {.name = "ratio_{mode}", .unit = "ratio", .higher_is_better = 1, .in_table = 1,
                  .description = "throughput {mode} / throughput single, same iterations"},
    [MT_SPEEDUP] = {.name = "speedup_{mode}_vs_serial", .unit = "ratio", .higher_is_better = 1, .in_table = 1,
                    .description = "throughput {mode} / throughput serial (one thread, the whole block), same "
                                   "iterations"},
    HMB_METRIC_END};

/* ------------------------------------------------------------------ packing */

/* A box of the block to buf (to_block 0) or buf into it (1), z, y, x order; a one-cell row (the
 * x faces) is an assignment, not a memcpy call per cell. */
static inline void box_copy(uint64_t *block, const int n[3], const int lo[3], const int cnt[3], uint64_t *buf,
                            int to_block)
{
    size_t k = 0, row = (size_t)cnt[0];
    for (int z = lo[2]; z < lo[2] + cnt[2]; z++)
        for (int y = lo[1]; y < lo[1] + cnt[1]; y++, k += row) {
            uint64_t *cells = block + halo_cell_index(n, lo[0], y, z);
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

/* Cells [first, first + count) of face d in its packed order between the block and buf: the
 * boundary layer's send boxes (halo 0) or the halo's receive boxes (halo 1), into the block
 * (to_block) or out of it. A face's packed order is piece by piece, each box in z, y, x order
 * (buf[k]: cell k). */
static void halo_face_range(halo_state *st, int d, size_t first, size_t count, uint64_t *buf, int halo, int to_block)
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
                uint64_t *cells = st->block + halo_cell_index(st->n, lo[0] + (int)(a - k), y, z);
                memcpy(to_block ? cells : buf + a, to_block ? buf + a : cells, (b - a) * sizeof(uint64_t));
            }
    }
}

static void pack_piece(halo_state *st, int d, int p)
{
    size_t cells = st->face[d].piece_cells;
    halo_face_range(st, d, (size_t)p * cells, cells, st->face[d].send, 0, 0);
}

/* Piece p of the message of direction d into the halo. */
static void unpack_piece(halo_state *st, int d, int p)
{
    size_t cells = st->face[d].piece_cells;
    halo_face_range(st, d, (size_t)p * cells, cells, st->face[d].recv, 1, 1);
}

static long long piece_bytes(const halo_state *st, int d) { return (long long)(st->face[d].piece_cells * 8); }

/* ------------------------------------------------------------------ the exchanges */

/* Thread tid's compute, its end on this rank's clock (MPI everywhere: the rank draws as a rank). */
static void halo_compute(hmb_ctx *ctx, halo_state *st, int tid, long iter)
{
    hmb_compute_ns(ctx, hmb_noise_ns(ctx, st->ev_threads ? 0 : tid, iter, st->compute_ns));
    st->compute_end[tid] = hmb_now();
}

/* single, persistent and serial: after the join, this one thread exchanges all six faces
 * (Irecv/Isend, or MPI_Start of the face's persistent requests). Returns bytes it sent. */
static long long exchange_joined(halo_state *st, int mode, int persistent)
{
    MPI_Request req[2 * NDIRS];
    int nreq = 0;
    long long bytes = 0;
    MPI_Comm comm = st->comm[mode];
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

/* multiple / partitioned, thread tid after its compute: pack each piece it owns and post(st, d, q)
 * each of its partitions (Isend or Pready). Returns bytes it sent. */
static long long thread_send(halo_state *st, int tid, void (*post)(halo_state *st, int d, int q))
{
    long long bytes = 0;
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        int p = hmb_topo_thread_piece(&st->topo, d, tid);
        if (p < 0 || f->to == MPI_PROC_NULL)
            continue;
        pack_piece(st, d, p);
        bytes += piece_bytes(st, d);
        for (int q = p * f->sub; q < (p + 1) * f->sub; q++) /* the piece's partitions */
            post(st, d, q);
    }
    return bytes;
}

/* Thread tid: arrive(st, d, q) for, then unpack, every piece landing in the halo next to its tile
 * (piece p of direction d lands beside the tile owning piece p of the opposite direction). */
static void thread_receive(halo_state *st, int tid, void (*arrive)(halo_state *st, int d, int q))
{
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        int p = hmb_topo_thread_piece(&st->topo, d ^ 1, tid);
        if (p < 0 || f->from == MPI_PROC_NULL)
            continue;
        for (int q = p * f->sub; q < (p + 1) * f->sub; q++)
            arrive(st, d, q);
        unpack_piece(st, d, p);
    }
}

static void isend_partition(halo_state *st, int d, int q)
{
    halo_face *f = &st->face[d];
    size_t part_cells = f->piece_cells / (size_t)f->sub;
    st->ops->isend(f->send + (size_t)q * part_cells, (int)part_cells, MPI_UINT64_T, f->to, d * HMB_MAX_THREADS + q,
                   st->comm[MODE_MULTIPLE], &st->piece_sreq[f->flat + q]);
}

static void wait_partition(halo_state *st, int d, int q) { st->ops->wait(&st->piece_rreq[st->face[d].flat + q]); }
static void pready_partition(halo_state *st, int d, int q) { st->ops->pready(q, st->psend[d]); }

static void parrived_partition(halo_state *st, int d, int q)
{
    hmb_parrived_bounded(st->ctx, st->pt, st->iter, st->ops, st->precv[d], q, st->wait_since,
                         "the face from direction %d (partitioned mode)", d);
}

/* threadcomm (--thread-comm), thread tid on its own communicator, tag or stream: posts the
 * receives of its share of every face, computes, packs and sends its share of every face, waits,
 * unpacks; returns the bytes it sent. MPI everywhere: this rank, the share of the thread it plays. */
static long long threadcomm_exchange(hmb_ctx *ctx, halo_state *st, int tid, long iter)
{
    MPI_Request *req = st->tc_req + (size_t)tid * 2 * NDIRS;
    MPI_Comm comm = st->tc_comm[tid];
    int n = 0;
    long long bytes = 0;
    for (int d = 0; d < NDIRS; d++) {
        const halo_face *f = &st->face[d];
        size_t share = halo_face_cells(f) / (size_t)st->threads;
        int tag = st->tc_tag_per_thread ? d * HMB_MAX_THREADS + tid : d;
        if (f->from != MPI_PROC_NULL)
            st->ops->irecv(f->recv + (size_t)tid * share, (int)share, MPI_UINT64_T, f->from, tag, comm, &req[n++]);
    }
    halo_compute(ctx, st, tid, iter);
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        size_t share = halo_face_cells(f) / (size_t)st->threads;
        int tag = st->tc_tag_per_thread ? d * HMB_MAX_THREADS + tid : d;
        if (f->to == MPI_PROC_NULL)
            continue;
        halo_face_range(st, d, (size_t)tid * share, share, f->send, 0, 0);
        st->ops->isend(f->send + (size_t)tid * share, (int)share, MPI_UINT64_T, f->to, tag, comm, &req[n++]);
        bytes += (long long)(share * sizeof(uint64_t));
    }
    if (n > 0)
        st->ops->waitall(n, req);
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        size_t share = halo_face_cells(f) / (size_t)st->threads;
        if (f->from != MPI_PROC_NULL)
            halo_face_range(st, d, (size_t)tid * share, share, f->recv, 1, 1);
    }
    return bytes;
}

/* ------------------------------------------------------------------ the modes */

/* A mode's start and end (timed by the harness from its barrier): times[1] = t_comm, the last
 * thread's compute end to exchange complete (this rank's clock). */
static halo_state *mode_begin(hmb_ctx *ctx, void *state, long iter)
{
    halo_state *st = state;
    /* The bounds start after any compute the mode waits for (a neighbour's draw; serial: the
     * rank's T draws in turn): a --compute of 10 s or more must not fail a healthy run. */
    st->ctx = ctx, st->iter = iter;
    st->wait_since = hmb_now() + (double)st->threads * 1e-9 * (double)hmb_noise_max_ns(ctx, st->compute_ns);
    return st;
}

static void mode_end(halo_state *st, int mode, double *times, long long bytes)
{
    double t_end = hmb_now(), last_compute = st->compute_end[st->ev_tid];
    for (int t = 1; t < st->threads && !st->ev_threads; t++) /* everywhere: this rank's one thread */
        last_compute = st->compute_end[t] > last_compute ? st->compute_end[t] : last_compute;
    times[1] = t_end - last_compute;
    atomic_store(&st->bytes_sent[mode], bytes);
}

/* Fork-join: the threads compute, join, then this thread exchanges all six faces. */
static void fork_join(hmb_ctx *ctx, void *state, int mode, long iter, double *times, const char *phase, int persistent)
{
    halo_state *st = mode_begin(ctx, state, iter);
#pragma omp parallel num_threads(st->threads)
    halo_compute(ctx, st, omp_get_thread_num(), iter);
    hmb_phase(ctx, phase);
    mode_end(st, mode, times, exchange_joined(st, mode, persistent));
}

/* single: fork-join, then one thread exchanges (Irecv, pack, Isend, Waitall, unpack). */
static void iterate_single(hmb_ctx *ctx, void *state, int mode, long iter, double *times)
{
    fork_join(ctx, state, mode, iter, times, "single exchange", 0);
}

/* persistent: as single, on one MPI_Send_init / MPI_Recv_init per face (MPI_Start each). */
static void iterate_persistent(hmb_ctx *ctx, void *state, int mode, long iter, double *times)
{
    fork_join(ctx, state, mode, iter, times, "persistent exchange", 1);
}

/* serial: one thread computes every thread's draw in turn, then exchanges as single. */
static void iterate_serial(hmb_ctx *ctx, void *state, int mode, long iter, double *times)
{
    halo_state *st = mode_begin(ctx, state, iter);
    for (int tid = 0; tid < st->threads; tid++)
        halo_compute(ctx, st, tid, iter);
    hmb_phase(ctx, "serial exchange");
    mode_end(st, mode, times, exchange_joined(st, mode, 0));
}

/* multiple: receives posted per partition before the barrier (setup_multiple); each thread packs
 * and Isends its pieces after its compute, waits for and unpacks the pieces beside its tile, then
 * completes its sends. */
static void setup_multiple(hmb_ctx *ctx, void *state, int mode, long iter)
{
    (void)ctx, (void)iter;
    halo_state *st = state;
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        size_t part_cells = f->piece_cells / (size_t)f->sub;
        for (int q = 0; f->from != MPI_PROC_NULL && q < f->nparts; q++)
            st->ops->irecv(f->recv + (size_t)q * part_cells, (int)part_cells, MPI_UINT64_T, f->from,
                           d * HMB_MAX_THREADS + q, st->comm[mode], &st->piece_rreq[f->flat + q]);
    }
}

/* Every thread: compute, pack and post its pieces, receive and unpack those beside its tile, then
 * done(st, tid) if given. Returns the bytes the threads sent. */
static long long each_thread(hmb_ctx *ctx, halo_state *st, long iter, void (*post)(halo_state *st, int d, int q),
                             void (*arrive)(halo_state *st, int d, int q), void (*done)(halo_state *st, int tid))
{
    long long bytes = 0;
#pragma omp parallel num_threads(st->threads) reduction(+ : bytes)
    {
        int tid = omp_get_thread_num();
        halo_compute(ctx, st, tid, iter);
        bytes += thread_send(st, tid, post);
        thread_receive(st, tid, arrive);
        if (done)
            done(st, tid);
    }
    return bytes;
}

/* multiple: thread tid completes the Isends of its own pieces. */
static void wait_own_sends(halo_state *st, int tid)
{
    for (int d = 0; d < NDIRS; d++) {
        const halo_face *f = &st->face[d];
        int p = hmb_topo_thread_piece(&st->topo, d, tid);
        for (int q = p * f->sub; p >= 0 && f->to != MPI_PROC_NULL && q < (p + 1) * f->sub; q++)
            st->ops->wait(&st->piece_sreq[f->flat + q]);
    }
}

static void iterate_multiple(hmb_ctx *ctx, void *state, int mode, long iter, double *times)
{
    halo_state *st = mode_begin(ctx, state, iter);
    hmb_phase(ctx, "multiple exchange");
    mode_end(st, mode, times, each_thread(ctx, st, iter, isend_partition, wait_partition, wait_own_sends));
}

/* partitioned: the partitioned requests of every face started before the barrier; each thread
 * packs and MPI_Preadys its pieces after its compute, polls MPI_Parrived (bounded) for those beside
 * its tile and unpacks them; the requests are then completed, bounded. */
static void setup_partitioned(hmb_ctx *ctx, void *state, int mode, long iter)
{
    (void)ctx, (void)mode, (void)iter;
    halo_state *st = state;
    st->npreq = 0;
    for (int d = 0; d < NDIRS; d++) {
        if (st->psend[d] != MPI_REQUEST_NULL)
            st->preq[st->npreq++] = st->psend[d];
        if (st->precv[d] != MPI_REQUEST_NULL)
            st->preq[st->npreq++] = st->precv[d];
    }
    if (st->npreq > 0)
        st->ops->startall(st->npreq, st->preq);
}

static void iterate_partitioned(hmb_ctx *ctx, void *state, int mode, long iter, double *times)
{
    halo_state *st = mode_begin(ctx, state, iter);
    hmb_phase(ctx, "partitioned exchange (Parrived)");
    long long bytes = each_thread(ctx, st, iter, pready_partition, parrived_partition, NULL);
    if (st->npreq > 0) /* bounded: a library may never complete them (exit 3, not the watchdog) */
        hmb_waitall_bounded(st->ctx, st->pt, st->iter, st->ops, st->npreq, st->preq, st->wait_since,
                            "the partitioned halo exchange");
    mode_end(st, mode, times, bytes);
}

/* threadcomm (--thread-comm): every thread posts, computes, sends and waits on its own share;
 * --everywhere-ranks: this rank, the share of the thread it plays. */
static void iterate_threadcomm(hmb_ctx *ctx, void *state, int mode, long iter, double *times)
{
    halo_state *st = mode_begin(ctx, state, iter);
    long long bytes = 0;
    hmb_phase(ctx, st->ev_threads ? "threadcomm exchange (MPI everywhere: one thread's share)" : "threadcomm exchange");
    if (st->ev_threads) {
        bytes = threadcomm_exchange(ctx, st, st->ev_tid, iter);
    } else {
#pragma omp parallel num_threads(st->threads) reduction(+ : bytes)
        bytes += threadcomm_exchange(ctx, st, omp_get_thread_num(), iter);
    }
    mode_end(st, mode, times, bytes);
}

static const hmb_mode halo_modes[NMODES + 1] = {
    [MODE_SINGLE] = {.name = "single", .iterate = iterate_single, .verify = halo_mode_verify,
                     .metrics = EXCHANGE_METRICS | HMB_METRIC_BIT(MT_SPEEDUP)},
    [MODE_MULTIPLE] = {.name = "multiple", .setup = setup_multiple, .iterate = iterate_multiple, .verify = halo_mode_verify,
                       .metrics = EXCHANGE_METRICS | HMB_METRIC_BIT(MT_RATIO) | HMB_METRIC_BIT(MT_SPEEDUP),
                       .flags = HMB_MODE_MPI_THREADS},
    [MODE_PARTITIONED] = {.name = "partitioned", .setup = setup_partitioned, .iterate = iterate_partitioned,
                          .verify = halo_mode_verify, .flags = HMB_MODE_PARTITIONED,
                          .metrics = EXCHANGE_METRICS | HMB_METRIC_BIT(MT_RATIO) | HMB_METRIC_BIT(MT_SPEEDUP)},
    [MODE_PERSISTENT] = {.name = "persistent", .iterate = iterate_persistent, .verify = halo_mode_verify,
                         .metrics = EXCHANGE_METRICS | HMB_METRIC_BIT(MT_RATIO) | HMB_METRIC_BIT(MT_SPEEDUP)},
    [MODE_SERIAL] = {.name = "serial", .iterate = iterate_serial, .verify = halo_mode_verify, .metrics = EXCHANGE_METRICS,
                     .flags = HMB_MODE_OPT_IN},
    [MODE_THREADCOMM] = {.name = "threadcomm", .iterate = iterate_threadcomm, .verify = halo_mode_verify,
                         .metrics = EXCHANGE_METRICS, .flags = HMB_MODE_HIDDEN | HMB_MODE_MPI_THREADS},
    [NMODES] = {.name = NULL}};

/* ------------------------------------------------------------------ the point's modes, one iteration */

static int halo_iterate(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter, hmb_sample *out)
{
    halo_state *st = state;
    st->pt = pt;
    hmb_mode_results r;
    if (!hmb_modes_run(ctx, st, st->modes, st->nmodes, iter, &r))
        return 0;
    double t_iter[NMODES], throughput[NMODES], ratio[NMODES];
    const int ranks = st->ev_threads ? hmb_size(ctx) / st->ev_threads : hmb_size(ctx); /* everywhere: groups */
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
        const unsigned declared = halo_modes[m].metrics; /* the ratios a mode has: its row says */
        if ((declared & HMB_METRIC_BIT(MT_RATIO)) && !isnan(t_iter[MODE_SINGLE]))
            hmb_record_mode(ctx, out, MT_RATIO, m, ratio[m]);
        if ((declared & HMB_METRIC_BIT(MT_SPEEDUP)) && !isnan(t_iter[MODE_SERIAL]))
            hmb_record_mode(ctx, out, MT_SPEEDUP, m, throughput[m] / throughput[MODE_SERIAL]);
    }
    out->valid = 1;
    return 0;
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
    hmb_result_add_str(ctx, "noise", hmb_common(ctx)->noise);
    hmb_result_add_num(ctx, "mock", st->mock);
    for (int k = 0; k < st->nmodes; k++) {
        snprintf(key, sizeof key, "bytes_per_rank_iter_%s", halo_modes[st->modes[k]].name);
        hmb_result_add_num(ctx, key, st->bytes_per_rank_iter[st->modes[k]]);
    }
    for (int a = 0; a < 3; a++) {
        snprintf(key, sizeof key, "partitions_face_%c", "xyz"[a]);
        hmb_result_add_num(ctx, key, st->face[2 * a].nparts);
    }
    hmb_result_add_str(ctx, "face_partitions", hmb_common(ctx)->face_partitions);
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
    if (halo_tc_kinds[st->tc].asserts)
        for (int k = 0; k < TC_NINFO; k++)
            hmb_result_add_str(ctx, halo_tc_info_keys[k], st->tc_info[k]);
}

static const hmb_bench halo_bench = {
    .name = "halo3d",
    .group = "patterns",
    .summary = "7-point 3-D halo exchange, threads: single (fork-join), multiple, partitioned, persistent, mock mode",
    HMB_BENCH_OPTIONS(halo_opts),
    HMB_BENCH_PARAMS(halo_point),
    .uses = HMB_OPTS_FACE_PARTITIONS | HMB_OPTS_COMM | HMB_OPTS_TOPO,
    .defaults = (const hmb_default[]){{"sizes", "4K:1M:x4"}, {"compute", "1ms"}, {NULL, NULL}},
    .rules = (const hmb_option_rule[]){HMB_VCI_RULES("thread-comm", "shared,comm,tag"), {.option = NULL}},
    .modes = halo_modes,
    .mode_metrics = halo_mode_metrics,
    .thread_level = MPI_THREAD_MULTIPLE,
    .min_ranks = 1,
    .check = halo_check,
    .points = halo_points,
    .rank_bytes = halo_rank_bytes,
    .setup = halo_setup,
    .prepare = halo_prepare,
    .iterate = halo_iterate,
    .verify = NULL, /* each mode's verify checks its halo right after the mode, outside its timing */
    .teardown = halo_teardown,
    .annotate = halo_annotate,
    .pivot_metrics = "throughput_{mode}_MBps,ratio_{mode},speedup_{mode}_vs_serial", /* every mode's */
};
HMB_REGISTER(halo_bench);
