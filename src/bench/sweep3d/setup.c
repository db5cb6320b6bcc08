/* sweep3d's set-up: option checks, points, the block, faces and requests of a point, and its
 * teardown. The wavefront in each mode: pattern.c; what is checked: verify.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep3d.h"

void sweep_check(hmb_ctx *ctx)
{
    hmb_topo t;
    const sweep_opts *o = HMB_OPTS(sweep_opts, ctx);
    const hmb_common_opts *c = hmb_common(ctx);
    if (c->boundary == HMB_BOUNDARY_PERIODIC)
        hmb_usage_error(ctx, "--boundary periodic: a KBA wavefront starts at a grid corner and a periodic grid has "
                             "none; use --boundary open");
    hmb_topo_from_options(ctx, 2, 4, 1, &t);
    long long kb = o->kblock;
    int parts = hmb_face_partitions(ctx);
    if (o->given.domain) {
        const long long *d = o->domain.v;
        if (c->given.sizes || o->given.kblocks)
            hmb_usage_error(ctx, "--domain sets the block and its k-blocks: do not give --sizes or --kblocks with it");
        if (o->domain.n != 3)
            hmb_usage_error(ctx, "--domain: %d values, give nx,ny,nz", o->domain.n);
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
    for (int i = 0; i < c->sizes.n; i++) {
        size_t m = c->sizes.v[i];
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

void sweep_points(hmb_ctx *ctx, hmb_point_list *out)
{
    const sweep_opts *o = HMB_OPTS(sweep_opts, ctx);
    long long kb = o->kblock;
    if (o->given.domain) {
        const long long *d = o->domain.v;
        sweep_point *p = hmb_points_new(out, (size_t)d[1] * (size_t)kb * 8); /* the x face */
        p->nx = d[0];
        p->ny = d[1];
        p->kblock = kb;
        p->kblocks = d[2] / kb;
        return;
    }
    const hmb_sizes sizes = hmb_common(ctx)->sizes;
    for (int i = 0; i < sizes.n; i++) { /* a square face: nx = ny = size / 8 / kblock */
        sweep_point *p = hmb_points_new(out, sizes.v[i]);
        p->kblock = kb;
        p->kblocks = o->kblocks;
    }
}

/* The block of point pt: nx, ny, kblock and K from --domain, or a square face of the point's size. */
static void point_block(const hmb_point *pt, int n[3], int *kblocks)
{
    const sweep_point *p = HMB_POINT(sweep_point, pt);
    n[2] = (int)p->kblock;
    *kblocks = (int)p->kblocks;
    n[0] = n[1] = (int)(pt->size_bytes / 8 / (size_t)n[2]);
    if (p->nx != HMB_PARAM_UNSET) {
        n[0] = (int)p->nx;
        n[1] = (int)p->ny;
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

void *sweep_setup(hmb_ctx *ctx, const hmb_point *pt)
{
    unsigned long long selected = HMB_OPTS(sweep_opts, ctx)->mode;
    const hmb_comm_ops *ops = hmb_comm_policy(ctx);
    int run[HMB_MAX_MODES], nrun = hmb_modes_select(ctx, selected, ops->mock, run);
    if (nrun < 0)
        return NULL;
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
    st->compute_ns = hmb_common(ctx)->compute;
    st->face_parts = hmb_face_partitions(ctx);
    point_block(pt, st->n, &st->kblocks);
    for (int i = 0; i < nrun; i++)
        st->modes[st->nmodes++] = run[i];
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
    sweep_register_checks(ctx, st);
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

void sweep_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
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
