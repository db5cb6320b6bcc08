/* libhmbprof.so: a PMPI interposition library for any MPI program (LD_PRELOAD, no recompiling).
 *
 * Per pair of processes (world ranks) and direction it records message counts, bytes, a size
 * histogram (power-of-2 bins), blocking vs non-blocking operations and, for non-blocking ones,
 * the post-to-wait time (post -> entry of the Wait/Test call that completes the request) per
 * message size; per rank the time spent inside point-to-point calls and VmHWM. At MPI_Finalize
 * rank 0 gathers everything and writes one JSON profile (docs/toolkit.md, "Profiler and advisor").
 *
 * For each completed non-blocking operation it also records the time its thread spent outside MPI
 * between the post and the wait (post-to-wait minus the thread's time inside wrapped calls): the
 * part of the wait that computation could hide.
 *
 * Cost per call: two clock reads and a few uncontended atomics (time inside calls, call counts);
 * the tables are updated under one mutex, taken at most once per call and only when the program
 * runs MPI_THREAD_MULTIPLE (below it, MPI calls never run concurrently). The MPI calls themselves
 * run outside the mutex.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SIZE_BINS 66          /* bin 0: 0 bytes; bin k (k >= 1): [2^(k-1), 2^k) bytes */
#define P2W_PER_OCTAVE 8      /* post-to-wait histogram resolution: 1/8 octave (9 % wide bins) */
#define P2W_BINS (P2W_PER_OCTAVE * 45)  /* bin b: [2^(b/8), 2^((b+1)/8)) ns; up to ~9.8 hours */
#define MAX_EXACT_SIZES 32    /* distinct non-blocking sizes per peer and direction kept exactly */
#define SMALL_BATCH 64        /* request arrays up to this length are copied on the stack */

enum { DIR_SEND, DIR_RECV, NDIR };
enum { CALL_SEND, CALL_SSEND, CALL_RSEND, CALL_BSEND, CALL_RECV, CALL_SENDRECV, CALL_ISEND, CALL_ISSEND,
       CALL_IRECV, CALL_WAIT, CALL_WAITALL, CALL_WAITANY, CALL_WAITSOME, CALL_TEST, CALL_TESTALL,
       CALL_TESTANY, CALL_TESTSOME, CALL_REQUEST_FREE, NCALLS };
static const char *const call_names[NCALLS] = {
    "MPI_Send", "MPI_Ssend", "MPI_Rsend", "MPI_Bsend", "MPI_Recv", "MPI_Sendrecv", "MPI_Isend",
    "MPI_Issend", "MPI_Irecv", "MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome", "MPI_Test",
    "MPI_Testall", "MPI_Testany", "MPI_Testsome", "MPI_Request_free"};

/* Non-blocking messages of one size (or, past MAX_EXACT_SIZES, of one power-of-2 bin). */
typedef struct {
    uint64_t size_key;   /* the size, or the bin's lower edge when !exact */
    int exact;
    uint64_t messages, bytes, waited, outside_known;
    double post_to_wait_sum_s, outside_mpi_sum_s;
    uint64_t *p2w_hist;     /* P2W_BINS counters, allocated on the first completion */
    uint64_t *outside_hist; /* the same for the time outside MPI (completions on the posting thread) */
} nb_size_t;

typedef struct {
    uint64_t messages, bytes, blocking, nonblocking;
    uint64_t size_hist[SIZE_BINS];
    nb_size_t *nb;
    int n_nb, cap_nb;
} dir_stats_t;

typedef struct {
    int used;
    dir_stats_t dir[NDIR];
} peer_stats_t;

/* An outstanding non-blocking operation. */
typedef struct {
    uint64_t key;        /* the request handle's bytes; 0 = empty slot */
    int state;           /* 0 empty, 1 live, 2 deleted */
    int dir;
    int peer;            /* world rank; -1 = MPI_ANY_SOURCE, resolved from the status */
    MPI_Comm comm;       /* for translating the status' source */
    uint64_t bytes;      /* posted size (a receive uses the received size from its status) */
    uint64_t t_post_ns;
    uint64_t in_mpi_at_post_ns; /* the posting thread's time inside wrapped calls before the post */
    pthread_t owner;     /* the posting thread */
} pending_t;

/* Rank translation of a communicator other than MPI_COMM_WORLD. */
typedef struct {
    MPI_Comm comm;
    int size;
    int *to_world;
} comm_map_t;
#define COMM_CACHE 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int need_lock;              /* MPI_THREAD_MULTIPLE: calls may run concurrently */
static int active;                 /* between MPI_Init and MPI_Finalize */
static int world_rank, world_size, thread_provided = -1;
static uint64_t t_init_ns;
/* Threads inside a wrapped call (low BUSY_COUNT_BITS) and, while any is, when the first of them
 * entered (ns since t_init_ns, the high bits): one word, so entering and leaving need no lock. */
#define BUSY_COUNT_BITS 16
static _Atomic uint64_t busy;
static _Atomic uint64_t p2p_ns;        /* wall time with at least one thread inside a point-to-point call */
static _Atomic uint64_t p2p_thread_ns; /* the same summed over threads */
static _Atomic uint64_t calls[NCALLS];
static _Thread_local uint64_t thread_in_mpi_ns; /* this thread's time inside wrapped calls */
static peer_stats_t *peers;        /* indexed by world rank */
static pending_t *pending;
static size_t pending_cap, pending_live, pending_used;
static comm_map_t comm_cache[COMM_CACHE];
static int comm_cached;
static uint64_t untracked_peer_msgs; /* messages whose peer could not be translated */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void lock_tables(void)
{
    if (need_lock)
        pthread_mutex_lock(&lock);
}

static void unlock_tables(void)
{
    if (need_lock)
        pthread_mutex_unlock(&lock);
}

static uint64_t req_key(MPI_Request r)
{
    uint64_t k = 0;
    memcpy(&k, &r, sizeof r < sizeof k ? sizeof r : sizeof k);
    return k;
}

static int size_bin(uint64_t bytes)
{
    int b = 0;
    while (bytes) {
        b++;
        bytes >>= 1;
    }
    return b < SIZE_BINS ? b : SIZE_BINS - 1;
}

static int p2w_bin(uint64_t ns)
{
    if (ns < 1)
        return 0;
    int b = (int)floor(P2W_PER_OCTAVE * log2((double)ns));
    return b < P2W_BINS ? b : P2W_BINS - 1;
}

static uint64_t type_bytes(int count, MPI_Datatype type)
{
    int sz = 0;
    PMPI_Type_size(type, &sz);
    return (uint64_t)(count > 0 ? count : 0) * (uint64_t)sz;
}

/* ------------------------------------------------------------------ rank translation (under lock) */

static int translate_uncached(MPI_Comm comm, int rank, comm_map_t *fill)
{
    MPI_Group grp, world_grp;
    int inter = 0, size, result = -1;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter)
        PMPI_Comm_remote_group(comm, &grp);
    else
        PMPI_Comm_group(comm, &grp);
    PMPI_Comm_group(MPI_COMM_WORLD, &world_grp);
    PMPI_Group_size(grp, &size);
    if (fill) {
        int *ranks = malloc(sizeof(int) * (size_t)size);
        fill->to_world = malloc(sizeof(int) * (size_t)size);
        if (ranks && fill->to_world) {
            for (int i = 0; i < size; i++)
                ranks[i] = i;
            PMPI_Group_translate_ranks(grp, size, ranks, world_grp, fill->to_world);
            fill->size = size;
            fill->comm = comm;
            result = rank >= 0 && rank < size ? fill->to_world[rank] : -1;
        } else {
            free(fill->to_world);
            fill->to_world = NULL;
        }
        free(ranks);
    }
    if (!fill || !fill->to_world) {
        if (rank >= 0 && rank < size)
            PMPI_Group_translate_ranks(grp, 1, &rank, world_grp, &result);
    }
    PMPI_Group_free(&grp);
    PMPI_Group_free(&world_grp);
    return result == MPI_UNDEFINED ? -1 : result;
}

static int to_world(MPI_Comm comm, int rank)
{
    if (rank < 0)
        return -1;
    if (comm == MPI_COMM_WORLD)
        return rank < world_size ? rank : -1;
    for (int i = 0; i < comm_cached; i++)
        if (comm_cache[i].comm == comm)
            return rank < comm_cache[i].size ? comm_cache[i].to_world[rank] : -1;
    if (comm_cached < COMM_CACHE) {
        int r = translate_uncached(comm, rank, &comm_cache[comm_cached]);
        if (comm_cache[comm_cached].to_world)
            comm_cached++;
        return r;
    }
    return translate_uncached(comm, rank, NULL);
}

static void forget_comm(MPI_Comm comm)
{
    lock_tables();
    for (int i = 0; i < comm_cached; i++)
        if (comm_cache[i].comm == comm) {
            free(comm_cache[i].to_world);
            comm_cache[i] = comm_cache[--comm_cached];
            break;
        }
    unlock_tables();
}

/* ------------------------------------------------------------------ statistics (under lock) */

static dir_stats_t *dir_of(int peer, int dir)
{
    if (peer < 0 || peer >= world_size || !peers) {
        untracked_peer_msgs++;
        return NULL;
    }
    peers[peer].used = 1;
    return &peers[peer].dir[dir];
}

static void count_message(int peer, int dir, uint64_t bytes, int blocking)
{
    dir_stats_t *d = dir_of(peer, dir);
    if (!d)
        return;
    d->messages++;
    d->bytes += bytes;
    d->size_hist[size_bin(bytes)]++;
    if (blocking)
        d->blocking++;
    else
        d->nonblocking++;
}

static nb_size_t *nb_entry(dir_stats_t *d, uint64_t bytes)
{
    uint64_t bin_lo = bytes ? (uint64_t)1 << (size_bin(bytes) - 1) : 0;
    for (int i = 0; i < d->n_nb; i++) {
        nb_size_t *e = &d->nb[i];
        if ((e->exact && e->size_key == bytes) || (!e->exact && e->size_key == bin_lo))
            return e;
    }
    int exact = 1;
    uint64_t key = bytes;
    if (d->n_nb >= MAX_EXACT_SIZES) { /* too many distinct sizes: fold into power-of-2 bins */
        exact = 0;
        key = bin_lo;
    }
    if (d->n_nb == d->cap_nb) {
        int cap = d->cap_nb ? 2 * d->cap_nb : 4;
        nb_size_t *nb = realloc(d->nb, sizeof *nb * (size_t)cap);
        if (!nb)
            return NULL;
        d->nb = nb;
        d->cap_nb = cap;
    }
    nb_size_t *e = &d->nb[d->n_nb++];
    memset(e, 0, sizeof *e);
    e->size_key = key;
    e->exact = exact;
    return e;
}

static void histogram_add(uint64_t **hist, uint64_t ns)
{
    if (!*hist)
        *hist = calloc(P2W_BINS, sizeof(uint64_t));
    if (*hist)
        (*hist)[p2w_bin(ns)]++;
}

/* outside_ns < 0: unknown (completed on another thread than the one that posted it). */
static void count_nonblocking(int peer, int dir, uint64_t bytes, uint64_t post_to_wait_ns, int64_t outside_ns)
{
    dir_stats_t *d = dir_of(peer, dir);
    nb_size_t *e = d ? nb_entry(d, bytes) : NULL;
    if (!e)
        return;
    e->messages++;
    e->bytes += bytes;
    histogram_add(&e->p2w_hist, post_to_wait_ns);
    e->waited++;
    e->post_to_wait_sum_s += 1e-9 * (double)post_to_wait_ns;
    if (outside_ns >= 0) {
        histogram_add(&e->outside_hist, (uint64_t)outside_ns);
        e->outside_known++;
        e->outside_mpi_sum_s += 1e-9 * (double)outside_ns;
    }
}

/* ------------------------------------------------------------------ pending requests (under lock) */

static size_t slot_of(uint64_t key) { return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (pending_cap - 1); }

/* Rehash: twice the size when at least a quarter of the slots hold live requests, else the same
 * size (deleted slots are dropped): the table follows the requests in flight, not the run's length. */
static void pending_rehash(void)
{
    size_t old_cap = pending_cap;
    pending_t *old = pending;
    pending_cap = !old_cap ? 1024 : 4 * pending_live >= old_cap ? 2 * old_cap : old_cap;
    pending = calloc(pending_cap, sizeof *pending);
    if (!pending) {   /* out of memory: keep the old table */
        pending = old;
        pending_cap = old_cap;
        return;
    }
    pending_live = pending_used = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].state == 1) {
            size_t s = slot_of(old[i].key);
            while (pending[s].state)
                s = (s + 1) & (pending_cap - 1);
            pending[s] = old[i];
            pending_live++;
            pending_used++;
        }
    free(old);
}

static void pending_add(MPI_Request req, int dir, int peer, MPI_Comm comm, uint64_t bytes, uint64_t t_post_ns,
                        uint64_t in_mpi_at_post_ns)
{
    if (req == MPI_REQUEST_NULL)
        return;
    if (2 * (pending_used + 1) > pending_cap)
        pending_rehash();
    if (!pending || 2 * (pending_used + 1) > pending_cap)
        return;
    uint64_t key = req_key(req);
    size_t s = slot_of(key);
    while (pending[s].state == 1)
        s = (s + 1) & (pending_cap - 1);
    if (pending[s].state == 0)
        pending_used++;
    pending[s] = (pending_t){key, 1, dir, peer, comm, bytes, t_post_ns, in_mpi_at_post_ns, pthread_self()};
    pending_live++;
}

/* Remove and return the request posted under this handle. Handles are not unique while requests
 * are outstanding in several threads (MPICH hands out one built-in handle for sends that completed
 * at once; a freed handle may be reused before its completion is recorded), so prefer a request
 * posted by the calling thread, then one posted before the completing call was entered, the oldest. */
static int pending_take(uint64_t key, uint64_t t_entry_ns, pending_t *out)
{
    if (!pending_live)
        return 0;
    size_t s = slot_of(key), best = (size_t)-1;
    int best_rank = -1;
    pthread_t self = pthread_self();
    for (size_t n = 0; n < pending_cap && pending[s].state; n++, s = (s + 1) & (pending_cap - 1)) {
        const pending_t *p = &pending[s];
        if (p->state != 1 || p->key != key)
            continue;
        int rank = 2 * (pthread_equal(p->owner, self) != 0) + (p->t_post_ns <= t_entry_ns);
        if (rank > best_rank || (rank == best_rank && p->t_post_ns < pending[best].t_post_ns)) {
            best = s;
            best_rank = rank;
        }
    }
    if (best == (size_t)-1)
        return 0;
    *out = pending[best];
    pending[best].state = 2;
    pending_live--;
    return 1;
}

/* ------------------------------------------------------------------ calls */

/* One wrapped call on one thread: its entry time and the thread's time inside MPI before it. */
typedef struct {
    uint64_t t_entry_ns;
    uint64_t in_mpi_ns;
    int on;   /* MPI is initialised and the profiler records */
    int id;
} call_t;

static call_t enter(int id)
{
    call_t c = {now_ns(), thread_in_mpi_ns, active, id};
    if (!c.on)
        return c;
    uint64_t old = atomic_load_explicit(&busy, memory_order_relaxed), new;
    do
        new = (old & ((1u << BUSY_COUNT_BITS) - 1)) ? old + 1 : ((c.t_entry_ns - t_init_ns) << BUSY_COUNT_BITS) + 1;
    while (!atomic_compare_exchange_weak(&busy, &old, new));
    return c;
}

static void leave(const call_t *c)
{
    if (!c->on)
        return;
    uint64_t t_exit_ns = now_ns(), spent_ns = t_exit_ns - c->t_entry_ns;
    thread_in_mpi_ns += spent_ns;
    atomic_fetch_add_explicit(&calls[c->id], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p2p_thread_ns, spent_ns, memory_order_relaxed);
    uint64_t old = atomic_load_explicit(&busy, memory_order_relaxed), new;
    do
        new = (old & ((1u << BUSY_COUNT_BITS) - 1)) == 1 ? 0 : old - 1;
    while (!atomic_compare_exchange_weak(&busy, &old, new));
    if (!new)   /* the last thread out ends the busy period that began at old's entry time */
        atomic_fetch_add_explicit(&p2p_ns, t_exit_ns - t_init_ns - (old >> BUSY_COUNT_BITS), memory_order_relaxed);
}

/* A tracked request completed (status valid) in call c. */
static void completed(uint64_t key, MPI_Status *status, const call_t *c)
{
    pending_t p;
    if (!pending_take(key, c->t_entry_ns, &p))
        return;
    if (p.dir == DIR_RECV) {
        int cancelled = 0, count = MPI_UNDEFINED;
        PMPI_Test_cancelled(status, &cancelled);
        if (cancelled || status->MPI_SOURCE == MPI_PROC_NULL)
            return;
        PMPI_Get_count(status, MPI_BYTE, &count);
        if (count != MPI_UNDEFINED)
            p.bytes = (uint64_t)count;
        p.peer = to_world(p.comm, status->MPI_SOURCE);
        count_message(p.peer, DIR_RECV, p.bytes, 0);
    }
    uint64_t post_to_wait_ns = c->t_entry_ns - p.t_post_ns;
    int64_t outside_ns = -1;
    if (pthread_equal(p.owner, pthread_self())) {
        uint64_t in_mpi_between_ns = c->in_mpi_ns - p.in_mpi_at_post_ns;   /* the post itself included */
        outside_ns = in_mpi_between_ns < post_to_wait_ns ? (int64_t)(post_to_wait_ns - in_mpi_between_ns) : 0;
    }
    count_nonblocking(p.peer, p.dir, p.bytes, post_to_wait_ns, outside_ns);
}

/* A blocking receive completed. */
static void received(MPI_Comm comm, MPI_Status *status)
{
    int count = 0;
    if (status->MPI_SOURCE == MPI_PROC_NULL)
        return;
    PMPI_Get_count(status, MPI_BYTE, &count);
    count_message(to_world(comm, status->MPI_SOURCE), DIR_RECV, count == MPI_UNDEFINED ? 0 : (uint64_t)count, 1);
}

/* ------------------------------------------------------------------ wrappers */

static void on_send(MPI_Comm comm, int dest, int count, MPI_Datatype type, int blocking)
{
    if (dest == MPI_PROC_NULL)
        return;
    uint64_t bytes = type_bytes(count, type);
    lock_tables();
    count_message(to_world(comm, dest), DIR_SEND, bytes, blocking);
    unlock_tables();
}

static int blocking_send(int (*fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm), int call,
                         const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    call_t c = enter(call);
    int rc = fn(buf, count, type, dest, tag, comm);
    if (c.on && rc == MPI_SUCCESS)
        on_send(comm, dest, count, type, 1);
    leave(&c);
    return rc;
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    return blocking_send(PMPI_Send, CALL_SEND, buf, count, type, dest, tag, comm);
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    return blocking_send(PMPI_Ssend, CALL_SSEND, buf, count, type, dest, tag, comm);
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    return blocking_send(PMPI_Rsend, CALL_RSEND, buf, count, type, dest, tag, comm);
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    return blocking_send(PMPI_Bsend, CALL_BSEND, buf, count, type, dest, tag, comm);
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    call_t c = enter(CALL_RECV);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Recv(buf, count, type, source, tag, comm, st);
    if (c.on && rc == MPI_SUCCESS) {
        lock_tables();
        received(comm, st);
        unlock_tables();
    }
    leave(&c);
    return rc;
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status)
{
    call_t c = enter(CALL_SENDRECV);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                           source, recvtag, comm, st);
    if (c.on && rc == MPI_SUCCESS) {
        uint64_t bytes = type_bytes(sendcount, sendtype);
        lock_tables();
        if (dest != MPI_PROC_NULL)
            count_message(to_world(comm, dest), DIR_SEND, bytes, 1);
        received(comm, st);
        unlock_tables();
    }
    leave(&c);
    return rc;
}

static int nonblocking_send(int (*fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *),
                            int call, const void *buf, int count, MPI_Datatype type, int dest, int tag,
                            MPI_Comm comm, MPI_Request *req)
{
    call_t c = enter(call);
    int rc = fn(buf, count, type, dest, tag, comm, req);
    if (c.on && rc == MPI_SUCCESS && dest != MPI_PROC_NULL) {
        uint64_t bytes = type_bytes(count, type);
        lock_tables();
        int peer = to_world(comm, dest);
        count_message(peer, DIR_SEND, bytes, 0);
        pending_add(*req, DIR_SEND, peer, comm, bytes, c.t_entry_ns, c.in_mpi_ns);
        unlock_tables();
    }
    leave(&c);
    return rc;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    return nonblocking_send(PMPI_Isend, CALL_ISEND, buf, count, type, dest, tag, comm, req);
}

int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    return nonblocking_send(PMPI_Issend, CALL_ISSEND, buf, count, type, dest, tag, comm, req);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req)
{
    call_t c = enter(CALL_IRECV);
    int rc = PMPI_Irecv(buf, count, type, source, tag, comm, req);
    if (c.on && rc == MPI_SUCCESS && source != MPI_PROC_NULL) {
        uint64_t bytes = type_bytes(count, type);
        lock_tables();
        pending_add(*req, DIR_RECV, -1, comm, bytes, c.t_entry_ns, c.in_mpi_ns);
        unlock_tables();
    }
    leave(&c);
    return rc;
}

/* Handles are copied before the call (completion sets them to MPI_REQUEST_NULL); statuses are
 * needed for receives even when the caller ignores them. */
typedef struct {
    uint64_t small_keys[SMALL_BATCH];
    MPI_Status small_st[SMALL_BATCH];
    uint64_t *keys;
    MPI_Status *st;
} batch_t;

static MPI_Status *batch_open(batch_t *b, int n, const MPI_Request *reqs, MPI_Status *user)
{
    b->keys = n <= SMALL_BATCH ? b->small_keys : malloc(sizeof(uint64_t) * (size_t)n);
    b->st = user;
    if (user == MPI_STATUSES_IGNORE)
        b->st = n <= SMALL_BATCH ? b->small_st : malloc(sizeof(MPI_Status) * (size_t)n);
    if (!b->keys || !b->st) { /* out of memory: let the call through unprofiled */
        if (b->keys != b->small_keys)
            free(b->keys);
        if (b->st != user && b->st != b->small_st)
            free(b->st);
        b->keys = NULL;
        return user;
    }
    for (int i = 0; i < n; i++)
        b->keys[i] = req_key(reqs[i]);
    return b->st;
}

static void batch_close(batch_t *b, MPI_Status *user)
{
    if (b->keys && b->keys != b->small_keys)
        free(b->keys);
    if (b->keys && b->st != user && b->st != b->small_st)
        free(b->st);
}

/* Completions of one call: request keys[indices[i]] (keys[i] without indices) has status st[i]. */
static void completed_list(const call_t *c, const uint64_t *keys, int n, const int *indices, MPI_Status *st)
{
    if (n == MPI_UNDEFINED || (pending_live == 0 && !need_lock))
        return;
    lock_tables();
    for (int i = 0; i < n; i++)
        completed(keys[indices ? indices[i] : i], &st[i], c);
    unlock_tables();
}

int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
    call_t c = enter(CALL_WAIT);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    uint64_t key = req_key(*req);
    int rc = PMPI_Wait(req, st);
    if (c.on && rc == MPI_SUCCESS)
        completed_list(&c, &key, 1, NULL, st);
    leave(&c);
    return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    call_t c = enter(CALL_TEST);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    uint64_t key = req_key(*req);
    int rc = PMPI_Test(req, flag, st);
    if (c.on && rc == MPI_SUCCESS && *flag)
        completed_list(&c, &key, 1, NULL, st);
    leave(&c);
    return rc;
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
    call_t c = enter(CALL_WAITALL);
    batch_t b;   /* no initialiser: zeroing the inline arrays would cost more than the call */
    b.keys = NULL;
    MPI_Status *st = c.on ? batch_open(&b, n, reqs, statuses) : statuses;
    int rc = PMPI_Waitall(n, reqs, st);
    if (c.on && b.keys && rc == MPI_SUCCESS)
        completed_list(&c, b.keys, n, NULL, st);
    batch_close(&b, statuses);
    leave(&c);
    return rc;
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    call_t c = enter(CALL_TESTALL);
    batch_t b;   /* no initialiser: zeroing the inline arrays would cost more than the call */
    b.keys = NULL;
    MPI_Status *st = c.on ? batch_open(&b, n, reqs, statuses) : statuses;
    int rc = PMPI_Testall(n, reqs, flag, st);
    if (c.on && b.keys && rc == MPI_SUCCESS && *flag)
        completed_list(&c, b.keys, n, NULL, st);
    batch_close(&b, statuses);
    leave(&c);
    return rc;
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
    call_t c = enter(CALL_WAITANY);
    batch_t b;   /* no initialiser: zeroing the inline arrays would cost more than the call */
    b.keys = NULL;
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    if (c.on)
        batch_open(&b, n, reqs, st);
    int rc = PMPI_Waitany(n, reqs, index, st);
    if (c.on && b.keys && rc == MPI_SUCCESS && *index != MPI_UNDEFINED)
        completed_list(&c, b.keys, 1, index, st);
    batch_close(&b, st);
    leave(&c);
    return rc;
}

int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    call_t c = enter(CALL_TESTANY);
    batch_t b;   /* no initialiser: zeroing the inline arrays would cost more than the call */
    b.keys = NULL;
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    if (c.on)
        batch_open(&b, n, reqs, st);
    int rc = PMPI_Testany(n, reqs, index, flag, st);
    if (c.on && b.keys && rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED)
        completed_list(&c, b.keys, 1, index, st);
    batch_close(&b, st);
    leave(&c);
    return rc;
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    call_t c = enter(CALL_WAITSOME);
    batch_t b;   /* no initialiser: zeroing the inline arrays would cost more than the call */
    b.keys = NULL;
    MPI_Status *st = c.on ? batch_open(&b, n, reqs, statuses) : statuses;
    int rc = PMPI_Waitsome(n, reqs, outcount, indices, st);
    if (c.on && b.keys && rc == MPI_SUCCESS)
        completed_list(&c, b.keys, *outcount, indices, st);
    batch_close(&b, statuses);
    leave(&c);
    return rc;
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    call_t c = enter(CALL_TESTSOME);
    batch_t b;   /* no initialiser: zeroing the inline arrays would cost more than the call */
    b.keys = NULL;
    MPI_Status *st = c.on ? batch_open(&b, n, reqs, statuses) : statuses;
    int rc = PMPI_Testsome(n, reqs, outcount, indices, st);
    if (c.on && b.keys && rc == MPI_SUCCESS)
        completed_list(&c, b.keys, *outcount, indices, st);
    batch_close(&b, statuses);
    leave(&c);
    return rc;
}

int MPI_Request_free(MPI_Request *req)
{
    call_t c = enter(CALL_REQUEST_FREE);
    uint64_t key = req_key(*req);
    int rc = PMPI_Request_free(req);
    if (c.on && rc == MPI_SUCCESS) {
        /* A freed send still went out (counted at its post); a freed receive is never seen. */
        pending_t p;
        lock_tables();
        pending_take(key, c.t_entry_ns, &p);
        unlock_tables();
    }
    leave(&c);
    return rc;
}

int MPI_Comm_free(MPI_Comm *comm)
{
    if (active)
        forget_comm(*comm);
    return PMPI_Comm_free(comm);
}

/* ------------------------------------------------------------------ init, finalize, output */

static void start(void)
{
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    peers = calloc((size_t)world_size, sizeof *peers);
    need_lock = thread_provided == MPI_THREAD_MULTIPLE;
    t_init_ns = now_ns();
    active = 1;
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) {
        PMPI_Query_thread(&thread_provided);
        start();
    }
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) {
        thread_provided = *provided;
        start();
    }
    return rc;
}

/* A growable string for the JSON text. */
typedef struct {
    char *s;
    size_t len, cap;
} text_t;

static void out(text_t *t, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (t->s && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap : 4096;
        while (cap <= t->len + (size_t)n)
            cap *= 2;
        char *s = realloc(t->s, cap);
        if (!s)
            return;
        t->s = s;
        t->cap = cap;
    }
}

static void out_json_string(text_t *t, const char *s)
{
    out(t, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            out(t, "\\%c", c);
        else if (c < 0x20)
            out(t, "\\u%04x", c);
        else
            out(t, "%c", c);
    }
    out(t, "\"");
}

static long proc_status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':') {
            kib = strtol(line + n + 1, NULL, 10);
            break;
        }
    if (f)
        fclose(f);
    return kib;
}

/* [[lo_s, hi_s, count], ...] over the non-empty bins */
static void out_time_hist(text_t *t, const uint64_t *hist)
{
    const char *sep = "";
    out(t, "[");
    for (int b = 0; hist && b < P2W_BINS; b++)
        if (hist[b]) {
            double lo_s = b ? 1e-9 * exp2((double)b / P2W_PER_OCTAVE) : 0.0;
            double hi_s = 1e-9 * exp2((double)(b + 1) / P2W_PER_OCTAVE);
            out(t, "%s[%.6g,%.6g,%llu]", sep, lo_s, hi_s, (unsigned long long)hist[b]);
            sep = ",";
        }
    out(t, "]");
}

static void out_dir(text_t *t, const dir_stats_t *d)
{
    out(t, "{\"messages\":%llu,\"bytes\":%llu,\"blocking\":%llu,\"nonblocking\":%llu,\"size_hist\":[",
        (unsigned long long)d->messages, (unsigned long long)d->bytes, (unsigned long long)d->blocking,
        (unsigned long long)d->nonblocking);
    const char *sep = "";
    for (int b = 0; b < SIZE_BINS; b++)
        if (d->size_hist[b]) {
            unsigned long long lo = b ? 1ull << (b - 1) : 0, hi = b ? 1ull << b : 1;
            out(t, "%s[%llu,%llu,%llu]", sep, lo, hi, (unsigned long long)d->size_hist[b]);
            sep = ",";
        }
    out(t, "],\"nonblocking_sizes\":[");
    for (int i = 0; i < d->n_nb; i++) {
        const nb_size_t *e = &d->nb[i];
        out(t, "%s{\"size\":%llu,\"exact\":%s,\"messages\":%llu,\"bytes\":%llu,\"waited\":%llu,"
               "\"post_to_wait_sum_s\":%.9g,\"post_to_wait_hist\":",
            i ? "," : "", (unsigned long long)e->size_key, e->exact ? "true" : "false",
            (unsigned long long)e->messages, (unsigned long long)e->bytes, (unsigned long long)e->waited,
            e->post_to_wait_sum_s);
        out_time_hist(t, e->p2w_hist);
        out(t, ",\"outside_mpi_known\":%llu,\"outside_mpi_sum_s\":%.9g,\"outside_mpi_hist\":",
            (unsigned long long)e->outside_known, e->outside_mpi_sum_s);
        out_time_hist(t, e->outside_hist);
        out(t, "}");
    }
    out(t, "]}");
}

/* This rank's part of the profile: one JSON object. */
static void out_rank(text_t *t, double wall_s)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    double p2p_s = 1e-9 * (double)atomic_load(&p2p_ns), p2p_thread_s = 1e-9 * (double)atomic_load(&p2p_thread_ns);
    out(t, "{\"rank\":%d,\"host\":", world_rank);
    out_json_string(t, host);
    out(t, ",\"pid\":%ld,\"wall_s\":%.9g,\"p2p_s\":%.9g,\"p2p_thread_s\":%.9g,\"p2p_fraction\":%.6g,"
           "\"vmhwm_kib\":%ld,\"vmrss_kib\":%ld,\"untracked_peer_messages\":%llu,\"pending_at_finalize\":%zu,"
           "\"calls\":{",
        (long)getpid(), wall_s, p2p_s, p2p_thread_s, wall_s > 0 ? p2p_s / wall_s : 0.0, proc_status_kib("VmHWM"),
        proc_status_kib("VmRSS"), (unsigned long long)untracked_peer_msgs, pending_live);
    for (int c = 0; c < NCALLS; c++)
        out(t, "%s\"%s\":%llu", c ? "," : "", call_names[c], (unsigned long long)atomic_load(&calls[c]));
    out(t, "},\"peers\":[");
    const char *sep = "";
    for (int p = 0; p < world_size; p++)
        if (peers[p].used) {
            out(t, "%s{\"peer\":%d,\"send\":", sep, p);
            out_dir(t, &peers[p].dir[DIR_SEND]);
            out(t, ",\"recv\":");
            out_dir(t, &peers[p].dir[DIR_RECV]);
            out(t, "}");
            sep = ",";
        }
    out(t, "]}");
}

static const char *thread_level_name(int level)
{
    return level == MPI_THREAD_SINGLE ? "SINGLE" : level == MPI_THREAD_FUNNELED ? "FUNNELED"
         : level == MPI_THREAD_SERIALIZED ? "SERIALIZED" : level == MPI_THREAD_MULTIPLE ? "MULTIPLE" : "unknown";
}

static void write_profile(const char *ranks_json, size_t len)
{
    char path[4096];
    const char *given = getenv("HMB_PROF_OUT");
    const char *job = getenv("SLURM_JOB_ID");
    if (given && *given)
        snprintf(path, sizeof path, "%s", given);
    else if (job && *job)
        snprintf(path, sizeof path, "hmbprof-%s.json", job);
    else
        snprintf(path, sizeof path, "hmbprof-%ld.json", (long)getpid());
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int liblen = 0;
    PMPI_Get_library_version(lib, &liblen);
    lib[strcspn(lib, "\r\n")] = '\0';
    char cmd[1024] = "";
    FILE *f = fopen("/proc/self/cmdline", "r");
    size_t n = f ? fread(cmd, 1, sizeof cmd - 1, f) : 0;
    if (f)
        fclose(f);
    for (size_t i = 0; i + 1 < n; i++)
        if (!cmd[i])
            cmd[i] = ' ';
    text_t head = {0};
    out(&head, "{\"type\":\"hmbprof\",\"schema\":1,\"mpi_library\":");
    out_json_string(&head, lib);
    out(&head, ",\"command\":");
    out_json_string(&head, cmd);
    out(&head, ",\"world_size\":%d,\"thread_level\":\"%s\",\"post_to_wait_bins_per_octave\":%d,\"ranks\":[",
        world_size, thread_level_name(thread_provided), P2W_PER_OCTAVE);
    FILE *o = fopen(path, "w");
    if (!o || !head.s) {
        fprintf(stderr, "hmbprof: cannot write the profile to %s\n", path);
        if (o)
            fclose(o);
        free(head.s);
        return;
    }
    fwrite(head.s, 1, head.len, o);
    fwrite(ranks_json, 1, len, o);
    fputs("]}\n", o);
    if (fclose(o) != 0)
        fprintf(stderr, "hmbprof: cannot write the profile to %s\n", path);
    else if (!getenv("HMB_PROF_QUIET"))
        fprintf(stderr, "hmbprof: wrote %s\n", path);
    free(head.s);
}

int MPI_Finalize(void)
{
    if (!active)
        return PMPI_Finalize();
    lock_tables();
    active = 0;
    double wall_s = 1e-9 * (double)(now_ns() - t_init_ns);
    text_t mine = {0};
    out_rank(&mine, wall_s);
    unlock_tables();
    int len = mine.s ? (int)mine.len : 0;
    int *lens = NULL, *displs = NULL;
    char *all = NULL;
    if (world_rank == 0) {
        lens = calloc((size_t)world_size, sizeof(int));
        displs = calloc((size_t)world_size, sizeof(int));
    }
    PMPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
    /* rank r's text lands at displs[r], one byte after rank r-1's: room for the separating comma */
    size_t total = 0;
    if (world_rank == 0 && lens && displs) {
        for (int r = 0; r < world_size; r++) {
            displs[r] = (int)total + (r ? 1 : 0);
            total = (size_t)displs[r] + (size_t)lens[r];
        }
        all = malloc(total + 1);
    }
    PMPI_Gatherv(mine.s, len, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (world_rank == 0 && all) {
        for (int r = 1; r < world_size; r++)
            all[displs[r] - 1] = ',';
        write_profile(all, total);
    }
    free(all);
    free(lens);
    free(displs);
    free(mine.s);
    return PMPI_Finalize();
}
