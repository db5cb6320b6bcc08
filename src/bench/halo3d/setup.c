/* halo3d's set-up: option checks, points, the memory a point needs, MPI everywhere's groups
 * (--everywhere-ranks: at --threads 1 on R x T ranks, the T consecutive ranks of group g stand in
 * for the T threads of rank g), and the state of a point: its block and faces, its modes with their
 * communicators, and the persistent and partitioned requests. The exchanges: pattern.c; send data
 * and checks: verify.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "halo3d.h"

/* ------------------------------------------------------------------ MPI everywhere */

/* --everywhere-ranks R: the threads T each group of ranks stands in for (ranks / R); 0 when off. */
static int everywhere_threads(const hmb_ctx *ctx)
{
    long long groups = HMB_OPTS(halo_opts, ctx)->everywhere_ranks;
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
    const halo_opts *o = HMB_OPTS(halo_opts, ctx);
    const long long groups = o->everywhere_ranks;
    if (groups == 0)
        return;
    const char *with = o->given.thread_comm ? "thread-comm" : o->given.mode ? "mode"
                       : hmb_common(ctx)->given.face_partitions ? "face-partitions" : NULL;
    if (with)
        hmb_usage_error(ctx, "--everywhere-ranks and --%s both given: MPI everywhere runs one thread's share of "
                             "the threadcomm exchange per rank", with);
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

/* st->rank and st->threads: this rank and --threads, or the group and T it stands in for (its
 * communicator per thread index made; threadcomm on shared's tags). Collective: before any way out
 * of set-up. */
static void everywhere_setup(hmb_ctx *ctx, halo_state *st)
{
    st->ev_threads = everywhere_threads(ctx);
    st->ev_comm = MPI_COMM_NULL;
    st->ev_tid = 0;
    st->rank = hmb_rank(ctx);
    st->threads = hmb_threads(ctx);
    if (!st->ev_threads)
        return;
    st->ev_tid = hmb_rank(ctx) % st->ev_threads;
    MPI_Comm_split(hmb_comm(ctx), st->ev_tid, hmb_rank(ctx) / st->ev_threads, &st->ev_comm);
    st->rank = hmb_rank(ctx) / st->ev_threads; /* the group: the rank it stands in for */
    st->threads = st->ev_threads;
    st->tc = TC_SHARED; /* one thread's share per rank, on its group's communicator (shared's tags) */
}

/* ------------------------------------------------------------------ options, points, memory */

/* The thread grid of every rank: --tgrid, or balanced over --threads or --everywhere-ranks' T (what
 * halo_topo builds, without the process grid: no MPI needed). */
static void thread_dims(hmb_ctx *ctx, int tdims[3])
{
    const hmb_common_opts *c = hmb_common(ctx);
    const int ev = everywhere_threads(ctx);
    for (int a = 0; a < 3; a++)
        tdims[a] = c->given.tgrid && c->tgrid.n == 3 ? (int)c->tgrid.v[a] : 0;
    if (hmb_dims_balanced(ev ? ev : hmb_threads(ctx), 3, tdims) != 0)
        tdims[0] = tdims[1] = tdims[2] = 1;
}

/* Cells per axis must split evenly into the thread tiles: partitions of a face are equal. */
static int axis_multiple(const int tdims[3])
{
    int m = 1;
    for (int a = 0; a < 3; a++) {
        int x = m, y = tdims[a];
        while (y) {
            int r = x % y;
            x = y;
            y = r;
        }
        m = m / x * tdims[a];
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

/* What setup_faces allocates for an nx x ny x nz block: the block with its halo layer, and for
 * each of the six faces a send and a receive buffer, and two buffers of the largest face to check
 * the halo (8-byte cells). */
static double block_bytes(long long nx, long long ny, long long nz)
{
    double xy = (double)nx * (double)ny, yz = (double)ny * (double)nz, xz = (double)nx * (double)nz;
    double largest = fmax(xy, fmax(yz, xz));
    return ((double)(nx + 2) * (double)(ny + 2) * (double)(nz + 2) + 4.0 * (xy + yz + xz) + 2.0 * largest) * 8.0;
}

double halo_rank_bytes(hmb_ctx *ctx, size_t size_bytes)
{
    const halo_opts *o = HMB_OPTS(halo_opts, ctx);
    if (o->given.domain && o->domain.n == 3)
        return block_bytes(o->domain.v[0], o->domain.v[1], o->domain.v[2]);
    int tdims[3];
    thread_dims(ctx, tdims);
    long long side = cube_side(size_bytes, axis_multiple(tdims));
    return block_bytes(side, side, side);
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

/* --thread-comm, --everywhere-ranks: every face (n[b] x n[c] cells) must split into T equal thread
 * shares. */
static void check_thread_shares(hmb_ctx *ctx, int threads, const long long n[3])
{
    for (int a = 0; a < 3; a++) {
        long long cells = n[(a + 1) % 3] * n[(a + 2) % 3];
        if (cells % threads != 0)
            hmb_usage_error(ctx, "--thread-comm: the %c face of a %lldx%lldx%lld block has %lld cells, which do not "
                                 "split into %d equal thread shares", "xyz"[a], n[0], n[1], n[2], cells, threads);
    }
}

void halo_check(hmb_ctx *ctx)
{
    const halo_opts *o = HMB_OPTS(halo_opts, ctx);
    const hmb_common_opts *c = hmb_common(ctx);
    check_everywhere(ctx);
    hmb_topo t;
    halo_topo(ctx, 1, &t);
    const int ev = everywhere_threads(ctx), shares = ev ? ev : hmb_threads(ctx);
    int parts = hmb_face_partitions(ctx), tc = o->given.thread_comm || ev;
    if (tc && o->given.mode)
        hmb_usage_error(ctx, "--thread-comm and --mode both given: --thread-comm runs its own exchange (threadcomm)");
    if (tc && c->given.face_partitions)
        hmb_usage_error(ctx, "--thread-comm and --face-partitions both given: threadcomm cuts each face into one "
                             "share per thread");
    if (o->given.domain) {
        const long long *dom = o->domain.v;
        if (c->given.sizes)
            hmb_usage_error(ctx, "--domain and --sizes both given: give the block or its face size, not both");
        if (o->domain.n != 3)
            hmb_usage_error(ctx, "--domain: %d values, give nx,ny,nz", o->domain.n);
        for (int a = 0; a < 3; a++)
            if (dom[a] % t.tdims[a] != 0)
                hmb_usage_error(ctx, "--domain: %lld cells on axis %c do not split into %d thread tiles (--tgrid)",
                                dom[a], "xyz"[a], t.tdims[a]);
        check_face_partitions(ctx, &t, parts, dom);
        hmb_require_memory(ctx, block_bytes(dom[0], dom[1], dom[2]), "--domain: the block");
        if (tc)
            check_thread_shares(ctx, shares, dom);
        return;
    }
    for (int s = 0; s < c->sizes.n; s++) { /* the block is a cube whose face is the size */
        long long side = cube_side(c->sizes.v[s], axis_multiple(t.tdims)), n[3] = {side, side, side};
        char what[96];
        if (tc)
            check_thread_shares(ctx, shares, n);
        snprintf(what, sizeof what, "--sizes %zu: a %lldx%lldx%lld block", c->sizes.v[s], side, side, side);
        hmb_require_memory(ctx, block_bytes(side, side, side), what);
        check_face_partitions(ctx, &t, parts, n);
    }
}

/* One point per --sizes face (a cube whose face is that size, size_bytes = its real face), or one
 * for --domain (size_bytes = its mean face); with --thread-comm, that for each of its values. A
 * --thread-comm or --everywhere-ranks point says its layout (the value, or everywhere) and the
 * cores in use, ranks x threads (where R ranks x T threads and everywhere's R x T ranks meet). */
void halo_points(hmb_ctx *ctx, hmb_point_list *out)
{
    const halo_opts *o = HMB_OPTS(halo_opts, ctx);
    const hmb_common_opts *c = hmb_common(ctx);
    hmb_topo t;
    halo_topo(ctx, 0, &t);
    const int ev = everywhere_threads(ctx) > 0;
    unsigned long long tcs = o->given.thread_comm ? o->thread_comm : 0;
    const long long *dom = o->domain.v;
    for (int tc = -1; tc < NTC; tc++) { /* -1: --mode's exchanges (no --thread-comm) */
        if (tc < 0 ? tcs != 0 : !(tcs & (1ull << tc)))
            continue;
        for (int s = 0; s < (o->given.domain ? 1 : c->sizes.n); s++) {
            int side = o->given.domain ? 0 : cube_side(c->sizes.v[s], axis_multiple(t.tdims));
            halo_point *p = hmb_points_new(out, o->given.domain ? (size_t)(8 * (dom[0] * dom[1] + dom[1] * dom[2] +
                                                                                 dom[0] * dom[2]) / 3)
                                                                : (size_t)side * side * 8);
            if (tc < 0 && !ev)
                continue;
            p->thread_comm = tc; /* -1 (unset) for --everywhere-ranks */
            p->layout = ev ? "everywhere" : halo_tc_names[tc];
            p->ranks_x_threads = (long long)hmb_size(ctx) * hmb_threads(ctx);
        }
    }
}

/* The block of a point: --domain, or the cube of the point's face. */
static void point_domain(const hmb_ctx *ctx, const hmb_point *pt, int n[3])
{
    const halo_opts *o = HMB_OPTS(halo_opts, ctx);
    int side = (int)llround(sqrt((double)pt->size_bytes / 8.0));
    for (int a = 0; a < 3; a++)
        n[a] = o->given.domain ? (int)o->domain.v[a] : side;
}

/* ------------------------------------------------------------------ set-up and teardown */

/* --thread-comm: thread t's communicator (and tag scheme), created once per point. */
static MPI_Comm tc_new_comm(halo_state *st, MPI_Comm comm)
{
    st->tc_created[st->tc_ncomms++] = comm;
    return comm;
}

/* The --thread-comm kinds, in TC_* order (halo_tc_names). */
const halo_tc_kind halo_tc_kinds[NTC] = {
    [TC_SHARED] = {.one_comm = 1}, [TC_COMM] = {0}, [TC_TAG] = {.one_comm = 1, .asserts = 1}, [TC_STREAM] = {.streams = 1}};

static void threadcomm_setup(hmb_ctx *ctx, halo_state *st)
{
    const halo_tc_kind *kind = &halo_tc_kinds[st->tc];
    MPI_Comm base = st->ev_threads ? st->ev_comm : hmb_comm(ctx), one = MPI_COMM_NULL;
    st->tc_tag_per_thread = kind->one_comm;
    if (kind->one_comm && kind->asserts) {
        one = tc_new_comm(st, hmb_comm_dup_asserting(base, halo_tc_info_keys, TC_NINFO, st->tc_info));
    } else if (kind->one_comm) {
        MPI_Comm_dup(base, &one);
        tc_new_comm(st, one);
    }
    for (int t = 0; t < st->threads; t++) {
        MPI_Comm comm = one;
        if (kind->streams) {
            hmb_stream_create(&st->tc_streams[st->tc_nstreams++]);
            hmb_stream_comm(base, st->tc_streams[t], &comm);
        } else if (!kind->one_comm) {
            MPI_Comm_dup(base, &comm);
        }
        st->tc_comm[t] = one != MPI_COMM_NULL ? one : tc_new_comm(st, comm);
    }
}

/* The point's modes (threadcomm with --thread-comm, else --mode's), each with its communicator;
 * 1 when one of them is unsupported here (reported). */
static int choose_modes(hmb_ctx *ctx, halo_state *st)
{
    if (st->tc >= 0) {
        char why[160];
        const char *reason =
            halo_tc_kinds[st->tc].streams ? hmb_streams_unsupported(ctx, st->threads, why, sizeof why) : NULL;
        if (reason)
            hmb_unsupported(ctx, "%s", reason);
        if (reason || hmb_modes_select(ctx, 1ull << MODE_THREADCOMM, st->mock, st->modes) < 0)
            return 1;
        st->nmodes = 1;
        threadcomm_setup(ctx, st);
        return 0;
    }
    if ((st->nmodes = hmb_modes_select(ctx, HMB_OPTS(halo_opts, ctx)->mode, st->mock, st->modes)) < 0)
        return 1;
    for (int k = 0; k < st->nmodes; k++)
        MPI_Comm_dup(hmb_comm(ctx), &st->comm[st->modes[k]]);
    return 0;
}

/* The persistent and partitioned requests of the modes chosen, once per point. */
static void create_requests(halo_state *st)
{
    const hmb_comm_ops *ops = st->ops;
    MPI_Comm persistent = st->comm[MODE_PERSISTENT], partitioned = st->comm[MODE_PARTITIONED];
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        int count = (int)halo_face_cells(f), part_cells = (int)(f->piece_cells / (size_t)f->sub);
        if (persistent != MPI_COMM_NULL && f->to != MPI_PROC_NULL)
            ops->send_init(f->send, count, MPI_UINT64_T, f->to, d, persistent, &st->persist_send[d]);
        if (persistent != MPI_COMM_NULL && f->from != MPI_PROC_NULL)
            ops->recv_init(f->recv, count, MPI_UINT64_T, f->from, d, persistent, &st->persist_recv[d]);
        if (partitioned != MPI_COMM_NULL && f->to != MPI_PROC_NULL)
            ops->psend_init(f->send, f->nparts, part_cells, MPI_UINT64_T, f->to, d, partitioned, &st->psend[d]);
        if (partitioned != MPI_COMM_NULL && f->from != MPI_PROC_NULL)
            ops->precv_init(f->recv, f->nparts, part_cells, MPI_UINT64_T, f->from, d, partitioned, &st->precv[d]);
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
    size_t most = 0;
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
        f->send = hmb_buffer_alloc(ctx, halo_face_cells(f) * sizeof(uint64_t));
        f->recv = hmb_buffer_alloc(ctx, halo_face_cells(f) * sizeof(uint64_t));
        if (!f->send || !f->recv)
            return -1;
        most = halo_face_cells(f) > most ? halo_face_cells(f) : most;
    }
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

void *halo_setup(hmb_ctx *ctx, const hmb_point *pt)
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
    st->compute_ns = hmb_common(ctx)->compute;
    st->face_parts = hmb_face_partitions(ctx);
    st->mock = st->ops->mock;
    for (int d = 0; d < NDIRS; d++)
        st->psend[d] = st->precv[d] = st->persist_send[d] = st->persist_recv[d] = MPI_REQUEST_NULL;
    for (int m = 0; m < HMB_MAX_MODES; m++)
        st->comm[m] = MPI_COMM_NULL;
    st->tc = HMB_POINT(halo_point, pt)->thread_comm; /* -1 without --thread-comm */
    everywhere_setup(ctx, st); /* rank and threads; collective: before any way out of set-up */
    st->vmrss_kib = st->vmhwm_kib = -1;
    if (choose_modes(ctx, st))
        return st;
    if (setup_faces(ctx, st) != 0) {
        hmb_unsupported(ctx, "cannot allocate a block of %s cells with its face buffers", st->domain);
        return st;
    }
    halo_register_checks(ctx, st);
    create_requests(st);
    hmb_memory_kB(&st->vmrss_kib, &st->vmhwm_kib); /* resident memory after set-up (resources per mode) */
    return st;
}

void halo_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    (void)ctx, (void)pt;
    halo_state *st = state;
    if (!st)
        return;
    for (int d = 0; d < NDIRS; d++) {
        st->ops->request_free(&st->psend[d]);
        st->ops->request_free(&st->precv[d]);
        st->ops->request_free(&st->persist_send[d]);
        st->ops->request_free(&st->persist_recv[d]);
    }
    for (int m = 0; m < HMB_MAX_MODES; m++)
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
