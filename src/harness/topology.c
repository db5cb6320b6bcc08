/* Cartesian process grid, neighbourhoods and the thread grid inside a rank (hmb/topo.h).
 * Pure: no MPI call, so tests/test_topology.py checks every function through libhmbcore. */
#include <stdlib.h>
#include <string.h>

#include "hmb/topo.h"

int hmb_dims_balanced(int n, int ndims, int *dims)
{
    if (n < 1 || ndims < 1 || ndims > 3)
        return -1;
    int rest = n, free_axes = 0;
    for (int a = 0; a < ndims; a++) {
        if (dims[a] < 0)
            return -1;
        if (dims[a] > 0) {
            if (rest % dims[a] != 0)
                return -1;
            rest /= dims[a];
        } else {
            free_axes++;
        }
    }
    if (free_axes == 0)
        return rest == 1 ? 0 : -1;
    /* Prime factors of rest, largest first, each onto the free axis with the smallest product
     * so far: the balanced split MPI_Dims_create aims at. */
    int factors[32], nf = 0;
    for (int p = 2; (long long)p * p <= rest; p++)
        while (rest % p == 0) {
            factors[nf++] = p;
            rest /= p;
        }
    if (rest > 1)
        factors[nf++] = rest;
    int prod[3] = {1, 1, 1};
    for (int i = nf - 1; i >= 0; i--) {
        int best = -1;
        for (int k = 0; k < free_axes; k++)
            if (best < 0 || prod[k] < prod[best])
                best = k;
        prod[best] *= factors[i];
    }
    /* Non-increasing over the free axes, as MPI_Dims_create returns them. */
    for (int i = 0; i < free_axes; i++)
        for (int j = i + 1; j < free_axes; j++)
            if (prod[j] > prod[i]) {
                int x = prod[i];
                prod[i] = prod[j];
                prod[j] = x;
            }
    for (int a = 0, k = 0; a < ndims; a++)
        if (dims[a] == 0)
            dims[a] = prod[k++];
    return 0;
}

int hmb_topo_directions(int ndims, int neighbours, int (*off)[3])
{
    int full = ndims == 2 ? 8 : 26, faces = 2 * ndims;
    if ((ndims != 2 && ndims != 3) || (neighbours != faces && neighbours != full))
        return -1;
    /* Faces, then edges (two non-zero components), then corners; each direction followed by its
     * opposite, so opposite(d) = d ^ 1. */
    int n = 0;
    for (int nonzero = 1; nonzero <= ndims; nonzero++) {
        if (nonzero > 1 && neighbours == faces)
            break;
        int span = 1;
        for (int a = 0; a < ndims; a++)
            span *= 3;
        for (int code = 0; code < span; code++) {
            int o[3] = {0, 0, 0}, c = code, nz = 0, first = 0;
            for (int a = ndims - 1; a >= 0; a--, c /= 3) /* x the slowest digit: x, y, z order */
                o[a] = c % 3 - 1;
            for (int a = 0; a < ndims; a++) {
                if (o[a] != 0 && nz++ == 0)
                    first = o[a];
            }
            if (nz != nonzero || first != -1)
                continue; /* take each pair once, from the member whose first non-zero is -1 */
            for (int sign = 1; sign >= -1; sign -= 2) {
                for (int a = 0; a < 3; a++)
                    off[n][a] = -sign * o[a];
                n++;
            }
        }
    }
    return n;
}

int hmb_topo_rank_of(const hmb_topo *t, const int coords[3])
{
    int c[3], r = 0;
    for (int a = 0; a < 3; a++) {
        c[a] = coords[a];
        if (c[a] < 0 || c[a] >= t->dims[a]) {
            if (!t->periodic)
                return MPI_PROC_NULL;
            c[a] = ((c[a] % t->dims[a]) + t->dims[a]) % t->dims[a];
        }
        r = r * t->dims[a] + c[a];
    }
    return r;
}

const char *hmb_topo_build(hmb_topo *t, int ndims, int neighbours, const int *grid, int size, int rank,
                           const int *tgrid, int nthreads, int periodic)
{
    memset(t, 0, sizeof *t);
    if (ndims != 2 && ndims != 3)
        return "a grid has 2 or 3 dimensions";
    t->ndims = ndims;
    t->periodic = periodic ? 1 : 0;
    t->size = size;
    t->rank = rank;
    t->nthreads = nthreads;
    for (int a = 0; a < 3; a++)
        t->dims[a] = t->tdims[a] = 1;
    for (int a = 0; a < ndims; a++) {
        t->dims[a] = grid ? grid[a] : 0;
        t->tdims[a] = tgrid ? tgrid[a] : 0;
    }
    if (hmb_dims_balanced(size, ndims, t->dims) != 0)
        return "the process grid does not multiply to the number of ranks";
    if (hmb_dims_balanced(nthreads, ndims, t->tdims) != 0)
        return "the thread grid does not multiply to the number of threads";
    int offs[HMB_TOPO_MAX_DIRS][3];
    t->ndirs = hmb_topo_directions(ndims, neighbours, offs);
    if (t->ndirs < 0)
        return "neighbours: 4 or 8 in 2-D, 6 or 26 in 3-D";
    for (int d = 0; d < t->ndirs; d++)
        memcpy(t->dir[d].off, offs[d], sizeof offs[d]);
    for (int a = 2, r = rank; a >= 0; a--) {
        t->coords[a] = r % t->dims[a];
        r /= t->dims[a];
    }
    for (int d = 0; d < t->ndirs; d++) {
        int up[3], down[3];
        for (int a = 0; a < 3; a++) {
            up[a] = t->coords[a] + t->dir[d].off[a];
            down[a] = t->coords[a] - t->dir[d].off[a];
        }
        t->dir[d].to = hmb_topo_rank_of(t, up);
        t->dir[d].from = hmb_topo_rank_of(t, down);
    }
    return NULL;
}

/* Thread tid's coordinates in the thread grid (x fastest). */
static void thread_coords(const hmb_topo *t, int tid, int tc[3])
{
    tc[0] = tid % t->tdims[0];
    tc[1] = tid / t->tdims[0] % t->tdims[1];
    tc[2] = tid / (t->tdims[0] * t->tdims[1]);
}

int hmb_topo_pieces(const hmb_topo *t, int d)
{
    int p = 1;
    for (int a = 0; a < 3; a++)
        if (t->dir[d].off[a] == 0)
            p *= t->tdims[a];
    return p;
}

int hmb_topo_piece_thread(const hmb_topo *t, int d, int piece)
{
    int tc[3];
    for (int a = 0; a < 3; a++) {
        int o = t->dir[d].off[a];
        if (o == 0) {
            tc[a] = piece % t->tdims[a];
            piece /= t->tdims[a];
        } else {
            tc[a] = o > 0 ? t->tdims[a] - 1 : 0;
        }
    }
    return tc[0] + t->tdims[0] * (tc[1] + t->tdims[1] * tc[2]);
}

int hmb_topo_thread_piece(const hmb_topo *t, int d, int tid)
{
    int tc[3], piece = 0, scale = 1;
    thread_coords(t, tid, tc);
    for (int a = 0; a < 3; a++) {
        int o = t->dir[d].off[a];
        if (o == 0) {
            piece += tc[a] * scale;
            scale *= t->tdims[a];
        } else if (tc[a] != (o > 0 ? t->tdims[a] - 1 : 0)) {
            return -1;
        }
    }
    return piece;
}

/* Cells [lo, lo + cnt) of tile coordinate c of k tiles over n cells: the first n % k tiles one
 * longer, so tiles differ by at most one cell. */
static void split(int n, int k, int c, int *lo, int *cnt)
{
    int base = n / k, extra = n % k;
    *lo = c * base + (c < extra ? c : extra);
    *cnt = base + (c < extra ? 1 : 0);
}

void hmb_topo_tile(const hmb_topo *t, const int n[3], int tid, int lo[3], int cnt[3])
{
    int tc[3];
    thread_coords(t, tid, tc);
    for (int a = 0; a < 3; a++)
        split(n[a], t->tdims[a], tc[a], &lo[a], &cnt[a]);
}

void hmb_topo_send_box(const hmb_topo *t, const int n[3], int d, int piece, int lo[3], int cnt[3])
{
    hmb_topo_tile(t, n, hmb_topo_piece_thread(t, d, piece), lo, cnt);
    for (int a = 0; a < 3; a++) {
        int o = t->dir[d].off[a];
        if (o != 0) {
            lo[a] = o > 0 ? n[a] - 1 : 0;
            cnt[a] = 1;
        }
    }
}

void hmb_topo_recv_box(const hmb_topo *t, const int n[3], int d, int piece, int lo[3], int cnt[3])
{
    hmb_topo_send_box(t, n, d, piece, lo, cnt);
    for (int a = 0; a < 3; a++) {
        int o = t->dir[d].off[a];
        if (o != 0)
            lo[a] = o > 0 ? -1 : n[a]; /* sent across the +off side: lands in the -off halo */
    }
}
