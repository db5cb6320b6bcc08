/* Communication policies (hmb/bench.h, hmb_comm_ops): one table of the operations a pattern uses, served
 * by MPI (--comm on) or by the mock (--comm off, after LLNL Comb's mock policy).
 *
 * The mock is a loopback without any MPI call: hmb_comm_route() makes this rank its own neighbour
 * wherever it has one to receive from, and a send is copied into this rank's own matching receive
 * (same communicator and tag, in posting order, as MPI matches) — so packing, unpacking, compute
 * and validation run as with MPI, and the data checked is the data the mock copied. Mock requests
 * live in one table (chunks, never moved) and their handles are stored in the MPI_Request the
 * pattern holds; an MPI request never reaches the mock nor a mock one MPI (one policy a run). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"

/* ------------------------------------------------------------------ MPI policy */

static void mpi_isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                      MPI_Request *req)
{
    MPI_Isend(buf, count, type, dest, tag, comm, req);
}

static void mpi_irecv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Request *req)
{
    MPI_Irecv(buf, count, type, src, tag, comm, req);
}

static void mpi_send_init(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                          MPI_Request *req)
{
    MPI_Send_init(buf, count, type, dest, tag, comm, req);
}

static void mpi_recv_init(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm,
                          MPI_Request *req)
{
    MPI_Recv_init(buf, count, type, src, tag, comm, req);
}

static void mpi_psend_init(const void *buf, int partitions, int count, MPI_Datatype type, int dest, int tag,
                           MPI_Comm comm, MPI_Request *req)
{
#if HMB_HAVE_PARTITIONED
    MPI_Psend_init(buf, partitions, (MPI_Count)count, type, dest, tag, comm, MPI_INFO_NULL, req);
#else
    (void)buf, (void)partitions, (void)count, (void)type, (void)dest, (void)tag, (void)comm;
    *req = MPI_REQUEST_NULL; /* hmb_mode_refused() keeps partitioned modes from running */
#endif
}

static void mpi_precv_init(void *buf, int partitions, int count, MPI_Datatype type, int src, int tag,
                           MPI_Comm comm, MPI_Request *req)
{
#if HMB_HAVE_PARTITIONED
    MPI_Precv_init(buf, partitions, (MPI_Count)count, type, src, tag, comm, MPI_INFO_NULL, req);
#else
    (void)buf, (void)partitions, (void)count, (void)type, (void)src, (void)tag, (void)comm;
    *req = MPI_REQUEST_NULL;
#endif
}

static void mpi_pready(int partition, MPI_Request req)
{
#if HMB_HAVE_PARTITIONED
    MPI_Pready(partition, req);
#else
    (void)partition, (void)req;
#endif
}

static int mpi_parrived(MPI_Request req, int partition)
{
    int arrived = 1;
#if HMB_HAVE_PARTITIONED
    MPI_Parrived(req, partition, &arrived);
#else
    (void)req, (void)partition;
#endif
    return arrived;
}

static void mpi_start(MPI_Request *req) { MPI_Start(req); }
static void mpi_startall(int n, MPI_Request *reqs) { MPI_Startall(n, reqs); }
static void mpi_wait(MPI_Request *req) { MPI_Wait(req, MPI_STATUS_IGNORE); }
static void mpi_waitall(int n, MPI_Request *reqs) { MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE); }
/* MPI_Test on each request, not MPI_Testall: MPICH 5.0.2's MPI_Testall fails (MPI_ERR_IN_STATUS,
 * every status MPI_SUCCESS) on partitioned requests, as on persistent collective ones
 * (src/bench/async/pattern.c). */
static int mpi_testall(int n, MPI_Request *reqs)
{
    int all = 1;
    for (int i = 0; i < n; i++) {
        int done = 0;
        MPI_Test(&reqs[i], &done, MPI_STATUS_IGNORE);
        all &= done;
    }
    return all;
}
static void mpi_request_free(MPI_Request *req)
{
    if (*req != MPI_REQUEST_NULL)
        MPI_Request_free(req);
}

static int mpi_allreduce(const void *in, void *out, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    MPI_Allreduce(in, out, count, type, op, comm);
    return 1;
}

static const hmb_comm_ops mpi_ops = {
    .name = "mpi", .mock = 0,
    .isend = mpi_isend, .irecv = mpi_irecv, .send_init = mpi_send_init, .recv_init = mpi_recv_init,
    .psend_init = mpi_psend_init, .precv_init = mpi_precv_init, .pready = mpi_pready, .parrived = mpi_parrived,
    .start = mpi_start, .startall = mpi_startall, .wait = mpi_wait, .waitall = mpi_waitall, .testall = mpi_testall,
    .request_free = mpi_request_free, .allreduce = mpi_allreduce,
};

/* ------------------------------------------------------------------ mock policy */

enum { MOCK_SEND, MOCK_RECV };
#define CHUNK 1024
#define MAX_CHUNKS 4096

typedef struct {
    int kind, persistent, partitioned, partitions;
    MPI_Comm comm;
    int tag;
    unsigned char *buf;
    size_t part_bytes;     /* bytes per partition (the whole message when partitions = 1) */
    int active;            /* started (posted), not yet waited for */
    int peer;              /* matched entry, -1 while unmatched */
    unsigned long seq;     /* posting order, for matching */
    atomic_int done;       /* partitions copied (receive) / partitions delivered (send) */
    atomic_uchar *arrived; /* receive: per partition; send: per partition marked ready */
} mock_entry;

static pthread_mutex_t mock_lock = PTHREAD_MUTEX_INITIALIZER;
static mock_entry *mock_chunks[MAX_CHUNKS];
static int mock_count, *mock_free, mock_nfree;
static size_t mock_free_cap;
static unsigned long mock_seq;

static mock_entry *entry(int idx) { return &mock_chunks[idx / CHUNK][idx % CHUNK]; }

static MPI_Request handle(int idx)
{
    MPI_Request r;
    intptr_t v = idx + 1;
    memset(&r, 0, sizeof r);
    memcpy(&r, &v, sizeof r < sizeof v ? sizeof r : sizeof v);
    return r;
}

static int index_of(MPI_Request r)
{
    intptr_t v = 0;
    memcpy(&v, &r, sizeof r < sizeof v ? sizeof r : sizeof v);
    return (int)v - 1;
}

static hmb_ctx *mock_ctx; /* the run's context: a failure names its point and iteration */

static void mock_fail(const char *what, int tag)
{
    hmb_validation_failure(mock_ctx, NULL, atomic_load(&mock_ctx->iter), -1, "mock communication: %s (tag %d)",
                           what, tag);
}

/* Under mock_lock. */
static int new_entry(int kind, int persistent, int partitioned, const void *buf, int partitions, int count,
                     MPI_Datatype type, int tag, MPI_Comm comm)
{
    int idx;
    if (mock_nfree > 0) {
        idx = mock_free[--mock_nfree];
    } else {
        if (mock_count == CHUNK * MAX_CHUNKS)
            abort();
        if (!mock_chunks[mock_count / CHUNK] && !(mock_chunks[mock_count / CHUNK] = calloc(CHUNK, sizeof(mock_entry))))
            abort();
        idx = mock_count++;
    }
    mock_entry *e = entry(idx);
    int type_size = 0;
    MPI_Type_size(type, &type_size);
    free(e->arrived);
    *e = (mock_entry){.kind = kind, .persistent = persistent, .partitioned = partitioned, .partitions = partitions, .comm = comm, .tag = tag,
                      .buf = (unsigned char *)buf, .part_bytes = (size_t)count * (size_t)type_size, .peer = -1};
    e->arrived = calloc((size_t)partitions, sizeof(atomic_uchar));
    if (!e->arrived)
        abort();
    return idx;
}

static void release(int idx)
{
    mock_free = hmb_grow(mock_free, &mock_free_cap, (size_t)mock_nfree, sizeof *mock_free);
    mock_free[mock_nfree++] = idx;
}

/* Under mock_lock: copy partition p of a matched send into its receive. */
static void deliver(mock_entry *s, int p)
{
    mock_entry *r = entry(s->peer);
    memcpy(r->buf + (size_t)p * r->part_bytes, s->buf + (size_t)p * s->part_bytes, s->part_bytes);
    atomic_store(&r->arrived[p], 1);
    atomic_fetch_add(&r->done, 1);
    atomic_fetch_add(&s->done, 1);
}

/* Under mock_lock: an entry just started meets the oldest started, unmatched entry of the other
 * kind with its communicator and tag; a whole (non-partitioned) message, or a send's partitions
 * already marked ready, are copied at once. */
static void match(int idx)
{
    mock_entry *e = entry(idx);
    int best = -1;
    for (int i = 0; i < mock_count; i++) {
        mock_entry *o = entry(i);
        if (o->active && o->peer < 0 && o->kind != e->kind && o->tag == e->tag && o->comm == e->comm &&
            (best < 0 || o->seq < entry(best)->seq))
            best = i;
    }
    if (best < 0)
        return;
    mock_entry *o = entry(best);
    mock_entry *s = e->kind == MOCK_SEND ? e : o, *r = e->kind == MOCK_SEND ? o : e;
    if (s->part_bytes != r->part_bytes || s->partitions != r->partitions || s->partitioned != r->partitioned)
        mock_fail("a send and its receive differ in size or partitions", e->tag);
    e->peer = best;
    o->peer = idx;
    for (int p = 0; p < s->partitions; p++)
        if (!s->partitioned || atomic_load(&s->arrived[p]))
            deliver(s, p);
}

static void mock_post(int kind, int persistent, int partitioned, const void *buf, int partitions, int count, MPI_Datatype type,
                      int peer, int tag, MPI_Comm comm, MPI_Request *req)
{
    if (peer == MPI_PROC_NULL) {
        *req = MPI_REQUEST_NULL;
        return;
    }
    pthread_mutex_lock(&mock_lock);
    int idx = new_entry(kind, persistent, partitioned, buf, partitions, count, type, tag, comm);
    *req = handle(idx);
    if (!persistent) {
        entry(idx)->active = 1;
        entry(idx)->seq = mock_seq++;
        match(idx);
    }
    pthread_mutex_unlock(&mock_lock);
}

static void mock_isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                       MPI_Request *req)
{
    mock_post(MOCK_SEND, 0, 0, buf, 1, count, type, dest, tag, comm, req);
}

static void mock_irecv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Request *req)
{
    mock_post(MOCK_RECV, 0, 0, buf, 1, count, type, src, tag, comm, req);
}

static void mock_send_init(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                           MPI_Request *req)
{
    mock_post(MOCK_SEND, 1, 0, buf, 1, count, type, dest, tag, comm, req);
}

static void mock_recv_init(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm,
                           MPI_Request *req)
{
    mock_post(MOCK_RECV, 1, 0, buf, 1, count, type, src, tag, comm, req);
}

static void mock_psend_init(const void *buf, int partitions, int count, MPI_Datatype type, int dest, int tag,
                            MPI_Comm comm, MPI_Request *req)
{
    mock_post(MOCK_SEND, 1, 1, buf, partitions, count, type, dest, tag, comm, req);
}

static void mock_precv_init(void *buf, int partitions, int count, MPI_Datatype type, int src, int tag,
                            MPI_Comm comm, MPI_Request *req)
{
    mock_post(MOCK_RECV, 1, 1, buf, partitions, count, type, src, tag, comm, req);
}

static void mock_start(MPI_Request *req)
{
    if (*req == MPI_REQUEST_NULL)
        return;
    pthread_mutex_lock(&mock_lock);
    int idx = index_of(*req);
    mock_entry *e = entry(idx);
    e->active = 1;
    e->peer = -1;
    e->seq = mock_seq++;
    atomic_store(&e->done, 0);
    for (int p = 0; p < e->partitions; p++)
        atomic_store(&e->arrived[p], 0);
    match(idx);
    pthread_mutex_unlock(&mock_lock);
}

static void mock_startall(int n, MPI_Request *reqs)
{
    for (int i = 0; i < n; i++)
        mock_start(&reqs[i]);
}

static void mock_pready(int partition, MPI_Request req)
{
    pthread_mutex_lock(&mock_lock);
    mock_entry *s = entry(index_of(req));
    atomic_store(&s->arrived[partition], 1);
    if (s->peer >= 0)
        deliver(s, partition);
    pthread_mutex_unlock(&mock_lock);
}

static int mock_parrived(MPI_Request req, int partition)
{
    return req == MPI_REQUEST_NULL || atomic_load(&entry(index_of(req))->arrived[partition]);
}

/* A receive completes when its data is copied, a send when it was copied: the mock's sender
 * is this rank, so waiting longer than the arrival bound means the pattern waits for a send
 * it has not posted (a pattern that feeds itself later cannot wait for it first). */
static void mock_wait(MPI_Request *req)
{
    if (*req == MPI_REQUEST_NULL)
        return;
    int idx = index_of(*req);
    mock_entry *e = entry(idx);
    double since = hmb_now();
    for (unsigned polls = 1; atomic_load(&e->done) < e->partitions; polls++)
        if (polls % 1024 == 0 && hmb_now() - since > mock_ctx->val.wait_bound_s)
            mock_fail(e->kind == MOCK_SEND ? "a send never met its receive on this rank"
                                           : "a receive never met its send on this rank (a pattern feeding itself "
                                             "later cannot wait for it first)",
                      e->tag);
    pthread_mutex_lock(&mock_lock);
    e->active = 0;
    if (!e->persistent) {
        release(idx);
        *req = MPI_REQUEST_NULL;
    }
    pthread_mutex_unlock(&mock_lock);
}

static void mock_waitall(int n, MPI_Request *reqs)
{
    for (int i = 0; i < n; i++)
        mock_wait(&reqs[i]);
}

static int mock_testall(int n, MPI_Request *reqs)
{
    for (int i = 0; i < n; i++)
        if (reqs[i] != MPI_REQUEST_NULL) {
            const mock_entry *e = entry(index_of(reqs[i]));
            if (atomic_load(&e->done) < e->partitions)
                return 0;
        }
    mock_waitall(n, reqs); /* all complete: finish them as a wait does */
    return 1;
}

static void mock_request_free(MPI_Request *req)
{
    if (*req == MPI_REQUEST_NULL)
        return;
    pthread_mutex_lock(&mock_lock);
    entry(index_of(*req))->active = 0;
    release(index_of(*req));
    pthread_mutex_unlock(&mock_lock);
    *req = MPI_REQUEST_NULL;
}

static int mock_allreduce(const void *in, void *out, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    (void)in, (void)out, (void)count, (void)type, (void)op, (void)comm;
    return 0; /* a collective has no loopback: left out */
}

static const hmb_comm_ops mock_ops = {
    .name = "mock", .mock = 1,
    .isend = mock_isend, .irecv = mock_irecv, .send_init = mock_send_init, .recv_init = mock_recv_init,
    .psend_init = mock_psend_init, .precv_init = mock_precv_init, .pready = mock_pready,
    .parrived = mock_parrived, .start = mock_start, .startall = mock_startall, .wait = mock_wait,
    .waitall = mock_waitall, .testall = mock_testall, .request_free = mock_request_free, .allreduce = mock_allreduce,
};

/* ------------------------------------------------------------------ selection and routing */

const hmb_comm_ops *hmb_comm_policy(hmb_ctx *ctx)
{
    if (ctx->opt.common.comm != HMB_COMM_OFF)
        return &mpi_ops;
    mock_ctx = ctx;
    return &mock_ops;
}

const hmb_comm_ops *hmb_comm_mpi(void) { return &mpi_ops; }

void hmb_comm_route(const hmb_comm_ops *ops, const hmb_ctx *ctx, hmb_topo *topo)
{
    if (!ops->mock)
        return;
    for (int d = 0; d < topo->ndirs; d++) {
        hmb_topo_dir *dir = &topo->dir[d];
        dir->to = dir->from = dir->from != MPI_PROC_NULL ? hmb_rank(ctx) : MPI_PROC_NULL;
    }
}
