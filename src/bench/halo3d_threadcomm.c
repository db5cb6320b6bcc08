/* halo3d's threadcomm exchange (--thread-comm: every thread exchanges its share of every face on
 * its own communicator, tag or stream) and MPI everywhere (--everywhere-ranks R: at --threads 1 on
 * R x T ranks, the T consecutive ranks of group g stand in for the T threads of rank g). The other
 * modes: halo3d.c. */
#include "halo3d.h"

/* --everywhere-ranks R: the threads T each group of ranks stands in for (ranks / R); 0 when off. */
int halo_everywhere_threads(const hmb_ctx *ctx)
{
    long long groups = HMB_OPTS(halo_opts, ctx)->everywhere_ranks;
    return groups > 0 ? hmb_size(ctx) / (int)groups : 0;
}

/* halo3d.h: the grid over the ranks and --threads, or over the R groups and their T threads. */
void halo_topo(hmb_ctx *ctx, int record, hmb_topo *t)
{
    int ev = halo_everywhere_threads(ctx);
    if (ev)
        hmb_topo_from_options_as(ctx, 3, NDIRS, record, hmb_size(ctx) / ev, hmb_rank(ctx) / ev, ev, t);
    else
        hmb_topo_from_options(ctx, 3, NDIRS, record, t);
}

void halo_check_everywhere(hmb_ctx *ctx)
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

/* halo3d.h. Collective: before any way out of set-up. */
void halo_everywhere_setup(hmb_ctx *ctx, halo_state *st)
{
    st->ev_threads = halo_everywhere_threads(ctx);
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

/* --thread-comm: thread t's communicator (and tag scheme), created once per point. */
static MPI_Comm tc_new_comm(halo_state *st, MPI_Comm comm)
{
    st->tc_created[st->tc_ncomms++] = comm;
    return comm;
}

void halo_threadcomm_setup(hmb_ctx *ctx, halo_state *st)
{
    MPI_Comm base = st->ev_threads ? st->ev_comm : hmb_comm(ctx), one = MPI_COMM_NULL;
    st->tc_tag_per_thread = st->tc == TC_SHARED || st->tc == TC_TAG;
    if (st->tc == TC_SHARED) {
        MPI_Comm_dup(base, &one);
        tc_new_comm(st, one);
    } else if (st->tc == TC_TAG) {
        one = tc_new_comm(st, hmb_comm_dup_asserting(base, halo_tc_info_keys, TC_NINFO, st->tc_info));
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

/* halo3d.h: thread tid posts the receives of its share of every face, computes, packs and sends
 * its share of every face, waits, unpacks. */
long long halo_threadcomm_exchange(hmb_ctx *ctx, halo_state *st, int tid, long iter)
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
