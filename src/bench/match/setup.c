/* match's set-up: option checks, points, the MPI_T variables, the grid and the state of a point,
 * its teardown. The halo and its emulation: pattern.c; data and checks: verify.c. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "match.h"

/* MPI_T variables: ob1's per-peer queue lengths, MPICH's recvq variables (--enable-mpit-pvars). */
static const char *const match_pvar_names[NPVARS] = {
    "pml_ob1_posted_recvq_length", "pml_ob1_unexpected_msgq_length", "posted_recvq_length",
    "unexpected_recvq_length",     "posted_recvq_match_attempts",    "unexpected_recvq_match_attempts",
    "time_failed_matching_postedq", "time_matching_unexpectedq"};

int match_centre_grid_rank(const hmb_topo *t)
{
    int c[3] = {1, 1, t->ndims == 3 ? 1 : 0};
    return hmb_topo_rank_of(t, c);
}

/* --pattern as a list of indices; real runs need every chosen pattern's grid to match the ranks. */
void match_check(hmb_ctx *ctx)
{
    const match_opts *o = HMB_OPTS(match_opts, ctx);
    unsigned long long chosen = o->pattern;
    int lowcost = o->variant == VARIANT_LOWCOST;
    if (lowcost && hmb_size(ctx) != 2)
        hmb_usage_error(ctx, "--variant lowcost runs on exactly 2 ranks (centre and emulator), got %d", hmb_size(ctx));
    for (int p = 0; p < NPATTERNS; p++) {
        if (!(chosen & (1ull << p)))
            continue;
        if (!lowcost && hmb_size(ctx) != match_patterns[p].ranks)
            hmb_usage_error(ctx, "--variant real --pattern %s needs a %s grid: %d ranks, got %d", match_pattern_names[p],
                            match_patterns[p].ndims == 2 ? "3x3" : "3x3x3", match_patterns[p].ranks, hmb_size(ctx));
        if (lowcost && match_patterns[p].neighbours * hmb_threads(ctx) > HMB_MAX_THREADS)
            hmb_usage_error(ctx, "--pattern %s with --threads %d: the emulator needs %d threads (at most %d)",
                            match_pattern_names[p], hmb_threads(ctx), match_patterns[p].neighbours * hmb_threads(ctx),
                            HMB_MAX_THREADS);
    }
    if (o->no_pvars) {
        hmb_header_add_str(ctx, "queue_depth", "not read (--no-pvars)");
        hmb_header_add_str(ctx, "items_searched", "not read (--no-pvars)");
        return;
    }
    /* What this library exposes, once, for the stdout header and the run record. */
    hmb_pvars *pv = hmb_pvars_open(ctx, match_pvar_names, NPVARS, hmb_comm(ctx));
    int ob1 = hmb_pvars_available(pv, PV_OB1_POSTED), recvq = hmb_pvars_available(pv, PV_POSTED);
    int searched = hmb_pvars_available(pv, PV_POSTED_ATTEMPTS) && hmb_pvars_available(pv, PV_UNEXPECTED_ATTEMPTS);
    hmb_header_add_str(ctx, "queue_depth", ob1 ? "pml_ob1_posted_recvq_length,pml_ob1_unexpected_msgq_length"
                                           : recvq ? "posted_recvq_length,unexpected_recvq_length" : "unavailable");
    hmb_header_add_str(ctx, "items_searched",
                       searched ? "posted_recvq_match_attempts,unexpected_recvq_match_attempts" : "unavailable");
    hmb_pvars_close(pv);
}

void match_points(hmb_ctx *ctx, hmb_point_list *out)
{
    unsigned long long chosen = HMB_OPTS(match_opts, ctx)->pattern;
    const size_t *sizes = hmb_common(ctx)->sizes.v;
    const int nsizes = hmb_common(ctx)->sizes.n;
    for (int p = 0; p < NPATTERNS; p++) {
        if (!(chosen & (1ull << p)))
            continue;
        for (int s = 0; s < nsizes; s++) {
            match_point *mp = hmb_points_new(out, sizes[s]);
            mp->pattern = p;
            mp->variant = HMB_OPTS(match_opts, ctx)->variant;
            mp->threads = hmb_threads(ctx);
        }
    }
}

void match_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt)
{
    (void)pt;
    match_state *st = state;
    if (!st)
        return;
    hmb_cache_unregister_all(ctx);
    hmb_pvars_close(st->pv);
    if (st->comm != MPI_COMM_NULL)
        MPI_Comm_free(&st->comm);
    if (st->ctl != MPI_COMM_NULL)
        MPI_Comm_free(&st->ctl);
    free(st->sbuf);
    free(st->rbuf);
    free(st->reqs);
    free(st->order);
    free(st->tag_log);
    free(st->begin);
    free(st->posted);
    free(st->done);
    free(st->paused);
    free(st->pv_values);
    free(st);
}

static void open_pvars(hmb_ctx *ctx, match_state *st)
{
    st->pv = hmb_pvars_open(ctx, match_pvar_names, NPVARS, st->comm);
    st->have_posted_q = hmb_pvars_available(st->pv, PV_OB1_POSTED) || hmb_pvars_available(st->pv, PV_POSTED);
    st->have_unexpected_q =
        hmb_pvars_available(st->pv, PV_OB1_UNEXPECTED) || hmb_pvars_available(st->pv, PV_UNEXPECTED);
    st->have_searched =
        hmb_pvars_available(st->pv, PV_POSTED_ATTEMPTS) && hmb_pvars_available(st->pv, PV_UNEXPECTED_ATTEMPTS);
    /* a timer in library ticks has no known unit: not converted, not reported */
    st->have_match_time = hmb_pvars_available(st->pv, PV_TIME_FAILED_POSTED) &&
                          hmb_pvars_available(st->pv, PV_TIME_UNEXPECTED) &&
                          strcmp(hmb_pvars_unit(st->pv, PV_TIME_FAILED_POSTED), "s") == 0 &&
                          strcmp(hmb_pvars_unit(st->pv, PV_TIME_UNEXPECTED), "s") == 0;
    int most = 1;
    for (int i = 0; i < NPVARS; i++)
        if (hmb_pvars_count(st->pv, i) > most)
            most = hmb_pvars_count(st->pv, i);
    st->pv_values = calloc((size_t)most, sizeof(double));
    hmb_pvars_start(st->pv);
}

void *match_setup(hmb_ctx *ctx, const hmb_point *pt)
{
    const match_point *mp = HMB_POINT(match_point, pt);
    match_state *st = calloc(1, sizeof *st);
    if (!st) { /* every rank skips the point; no collective made yet */
        hmb_unsupported(ctx, "cannot allocate the benchmark state");
        return NULL;
    }
    /* collective: before any way out of setup */
    MPI_Comm_dup(hmb_comm(ctx), &st->comm);
    MPI_Comm_dup(hmb_comm(ctx), &st->ctl);
    st->pattern = mp->pattern;
    st->variant = mp->variant;
    st->threads = hmb_threads(ctx);
    st->bytes = pt->size_bytes;
    st->seed = hmb_common(ctx)->seed;
    int ndims = match_patterns[st->pattern].ndims, ranks = match_patterns[st->pattern].ranks;
    int rank = hmb_rank(ctx);
    /* lowcost: the centre's grid position; its rank in the grid comes from a first build */
    const char *err = hmb_topo_build(&st->topo, ndims, match_patterns[st->pattern].neighbours, match_grid3, ranks,
                                     st->variant == VARIANT_REAL ? rank : 0, NULL, 1, 0);
    int centre_grid = match_centre_grid_rank(&st->topo);
    if (!err && st->variant == VARIANT_LOWCOST)
        err = hmb_topo_build(&st->topo, ndims, match_patterns[st->pattern].neighbours, match_grid3, ranks, centre_grid, NULL, 1,
                             0);
    if (err) { /* cannot happen for the fixed grids: a bug */
        hmb_unsupported(ctx, "topology: %s", err);
        return st;
    }
    st->ndirs = st->topo.ndirs;
    st->shuffle_rank = st->variant == VARIANT_REAL ? rank : centre_grid;
    st->centre_rank = st->variant == VARIANT_REAL ? centre_grid : 0;
    st->centre = rank == st->centre_rank;
    st->emulator = st->variant == VARIANT_LOWCOST && rank == 1;
    st->nrun = st->emulator ? st->ndirs * st->threads : st->threads;
    for (int d = 0; d < st->ndirs; d++) {
        const hmb_topo_dir *dir = &st->topo.dir[d];
        if (st->variant == VARIANT_REAL) {
            st->send_peer[d] = dir->to;
            st->recv_peer[d] = dir->from;
            st->send_label[d] = rank;
            st->recv_label[d] = dir->from;
        } else if (!st->emulator) { /* the centre has every neighbour */
            st->send_peer[d] = st->recv_peer[d] = 1;
            st->send_label[d] = centre_grid;
            st->recv_label[d] = dir->from;
        } else { /* send slot d: the neighbour at dir[d].from's message to the centre */
            st->send_peer[d] = st->recv_peer[d] = 0;
            st->send_label[d] = dir->from;
            st->recv_label[d] = centre_grid;
        }
    }
    /* More threads than --threads on the emulator: OpenMP must give them all. */
    int got = 0;
#pragma omp parallel num_threads(st->nrun)
#pragma omp single
    got = omp_get_num_threads();
    st->oversubscribed = hmb_threads_oversubscribe(ctx, st->nrun); /* collective */
    if (st->nrun > 1 && hmb_thread_level_provided(ctx) < MPI_THREAD_MULTIPLE)
        hmb_unsupported(ctx, "%d threads communicate at once: needs MPI_THREAD_MULTIPLE, the library provides %s",
                        st->nrun, hmb_thread_level_name(hmb_thread_level_provided(ctx)));
    else if (got != st->nrun)
        hmb_unsupported(ctx, "OpenMP gave %d of the %d threads this rank runs (OMP_THREAD_LIMIT?)", got, st->nrun);
    size_t slots = (size_t)st->ndirs * (size_t)st->threads;
    st->sbuf = malloc(slots * st->bytes + 1);
    st->rbuf = malloc(slots * st->bytes + 1);
    st->reqs = calloc((size_t)st->nrun * 2 * (size_t)st->ndirs, sizeof(MPI_Request));
    st->order = calloc((size_t)st->nrun * (size_t)st->ndirs, sizeof(int));
    st->tag_log = malloc((size_t)st->threads * 2 * (size_t)st->ndirs * sizeof(int));
    st->begin = calloc((size_t)st->nrun, sizeof(double));
    st->posted = calloc((size_t)st->nrun, sizeof(double));
    st->done = calloc((size_t)st->nrun, sizeof(double));
    st->paused = calloc((size_t)st->nrun, sizeof(double));
    if (!st->sbuf || !st->rbuf || !st->reqs || !st->order || !st->tag_log || !st->begin || !st->posted ||
        !st->done || !st->paused) {
        hmb_unsupported(ctx, "cannot allocate 2 x %zu message slots of %zu bytes", slots, st->bytes);
        return st;
    }
    hmb_cache_register(ctx, st->sbuf, slots * st->bytes);
    hmb_cache_register(ctx, st->rbuf, slots * st->bytes);
    if (!HMB_OPTS(match_opts, ctx)->no_pvars && (st->centre || rank == 0))
        open_pvars(ctx, st);
    return st;
}
