/* hmb_topo_from_options: the topology options (HMB_OPTS_TOPO) -> hmb_topo, usage errors and the
 * run-header record. The grid arithmetic itself is pure (topology.c). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmb/bench.h"

/* An INTS option (--name) of exactly ndims entries, or NULL when not given. */
static const int *axes_option(hmb_ctx *ctx, const char *name, hmb_ints v, int given, int ndims, int out[3])
{
    if (!given)
        return NULL;
    if (v.n != ndims)
        hmb_usage_error(ctx, "--%s: %d values for a %d-D grid (give %d, e.g. %s)", name, v.n, ndims, ndims,
                        ndims == 2 ? "2,2" : "2,2,2");
    for (int a = 0; a < ndims; a++)
        out[a] = (int)v.v[a];
    return out;
}

static void format_dims(char *buf, size_t len, const int *dims, int ndims)
{
    snprintf(buf, len, ndims == 2 ? "%dx%d" : "%dx%dx%d", dims[0], dims[1], dims[2]);
}

void hmb_topo_from_options(hmb_ctx *ctx, int ndims, int neighbours, int record, hmb_topo *t)
{
    hmb_topo_from_options_as(ctx, ndims, neighbours, record, hmb_size(ctx), hmb_rank(ctx), hmb_threads(ctx), t);
}

void hmb_topo_from_options_as(hmb_ctx *ctx, int ndims, int neighbours, int record, int size, int rank, int threads,
                              hmb_topo *t)
{
    int grid_v[3], tgrid_v[3];
    const hmb_common_opts *o = hmb_common(ctx);
    const int *grid = axes_option(ctx, "grid", o->grid, o->given.grid, ndims, grid_v);
    const int *tgrid = axes_option(ctx, "tgrid", o->tgrid, o->given.tgrid, ndims, tgrid_v);
    int periodic = o->boundary == HMB_BOUNDARY_PERIODIC;
    const char *err = hmb_topo_build(t, ndims, neighbours, grid, size, rank, tgrid, threads, periodic);
    if (err) {
        char want[64];
        int given[3] = {1, 1, 1};
        const int *shown = strstr(err, "thread") ? tgrid : grid;
        if (shown)
            memcpy(given, shown, ndims * sizeof(int));
        format_dims(want, sizeof want, given, ndims);
        if (strstr(err, "thread"))
            hmb_usage_error(ctx, "--tgrid %s: %s (%d threads)", want, err, threads);
        if (grid)
            hmb_usage_error(ctx, "--grid %s: %s (%d ranks)", want, err, size);
        hmb_usage_error(ctx, "%s (%d ranks)", err, size);
    }
    if (record) {
        char buf[64];
        format_dims(buf, sizeof buf, t->dims, ndims);
        hmb_header_add_str(ctx, "topology_grid", buf);
        format_dims(buf, sizeof buf, t->tdims, ndims);
        hmb_header_add_str(ctx, "topology_tgrid", buf);
        hmb_header_add_str(ctx, "topology_boundary", t->periodic ? "periodic" : "open");
        hmb_header_add_num(ctx, "topology_neighbours", t->ndirs);
    }
}

int hmb_face_partitions(hmb_ctx *ctx)
{
    const char *v = hmb_common(ctx)->face_partitions;
    int threads = hmb_threads(ctx);
    if (strcmp(v, "tiles") == 0)
        return 0;
    if (strcmp(v, "threads") == 0)
        return threads;
    char *end;
    long n = isdigit((unsigned char)v[0]) ? strtol(v, &end, 10) : 0; /* digits only: no sign or spaces */
    if (n == 0 || *end != '\0' || n < 1 || n > HMB_MAX_THREADS || n % threads != 0)
        hmb_usage_error(ctx, "--face-partitions %s: give tiles, threads, or a number of partitions per face that "
                             "is a multiple of --threads %d, at most %d", v, threads, HMB_MAX_THREADS);
    return (int)n;
}

void hmb_face_partition_range(int n, int threads, int tid, int *first, int *count)
{
    *count = n / threads;
    *first = tid * *count;
}
