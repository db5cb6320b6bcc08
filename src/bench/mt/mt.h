/* Private to mt: pattern.c (the tests' and the modes' tables, the message-rate windows and the
 * gets, the metrics, the record, the descriptor; the family's description is at its top),
 * setup.c (checks, points, which thread drives which lane on which communicator, tag, stream or
 * window, the state of a point), verify.c (send data and target windows, the checks). */
#ifndef HMB_BENCH_MT_H
#define HMB_BENCH_MT_H

#include <stddef.h>
#include <stdint.h>

#include "hmb/bench.h"

/* The tests, the modes, the target's progress and the get window's memory, each in the order of
 * its names (and of its table's rows, pattern.c). */
enum { MT_RATE, MT_CONTENTION, MT_GET, MT_NTESTS };
enum { MT_SHARED, MT_COMM, MT_TAG, MT_STREAM, MT_FUNNELED, MT_EVERYWHERE, MT_NMODES };
enum { MT_PROGRESS_NONE, MT_PROGRESS_THREAD, MT_NPROGRESS };
enum { MT_WINDOW_CREATE, MT_WINDOW_ALLOCATE, MT_NWINDOWS };
static const char *const mt_test_names[MT_NTESTS + 1] = {"rate", "contention", "get", NULL};
static const char *const mt_mode_names[MT_NMODES + 1] = {"shared", "comm",     "tag",        "stream",
                                                         "funneled", "everywhere", NULL};
static const char *const mt_progress_names[MT_NPROGRESS + 1] = {"none", "thread", NULL};
static const char *const mt_window_names[MT_NWINDOWS + 1] = {"create", "allocate", NULL};
/* The MPI 4 assertions the tag mode sets on its communicator (and reads back); the last one
 * lets the library deliver a lane's messages out of order. */
#define MT_NINFO 3
enum { MT_INFO_ALLOW_OVERTAKING = 2 };
static const char *const mt_tag_info_keys[MT_NINFO] = {"mpi_assert_no_any_tag", "mpi_assert_no_any_source",
                                                       "mpi_assert_allow_overtaking"};

#define MT_OPTIONS(X)                                                                                               \
    X(test, CHOICES, .default_value = "rate", .names = mt_test_names, .help = "what to measure")                    \
    X(mode, CHOICES, .default_value = "shared,comm,tag,stream,funneled", .names = mt_mode_names,                    \
      .help = "how threads express parallelism (everywhere: run with --threads 1 on 2T ranks; stream on MPICH: "    \
              "export MPIR_CVAR_CH4_RESERVE_VCIS=T, and MPIR_CVAR_CH4_NUM_VCIS=T+1 for per-thread VCIs)")          \
    X(window, INT, .default_value = "64", .min = 1, .max = 65536,                                                   \
      .help = "messages (or gets) in flight per lane before the window is completed")                              \
    X(windows_per_iter, INT, .default_value = "4", .min = 1, .max = 4096, .used_by = "test:rate,contention",        \
      .help = "windows per lane in one timed iteration")                                                           \
    X(target_progress, CHOICES, .default_value = "none,thread", .names = mt_progress_names, .used_by = "test:get",  \
      .help = "get test: none (target computes without MPI calls), thread (a helper thread polls MPI_Iprobe)")     \
    X(get_window, CHOICE, .default_value = "create", .names = mt_window_names, .used_by = "test:get",               \
      .help = "get test: window memory from MPI_Win_create (malloc) or MPI_Win_allocate")                          \
    X(shuffle_delay, DURATION, .default_value = "0", .max = 1,                                                      \
      .help = "TEST ONLY (distorts every rate): before each post a thread may yield or sleep up to this long, at "  \
              "random, so cross-thread matching orders vary")
HMB_OPTIONS(mt_opts, MT_OPTIONS);

/* A point: the test, the mode, and for get the target's progress. */
#define MT_PARAMS(X)                                                                                                \
    X(test, NAME, .names = mt_test_names) X(mode, NAME, .names = mt_mode_names)                                    \
    X(target_progress, NAME, .names = mt_progress_names) X(ranks_x_threads, INT)
HMB_POINT_PARAMS(mt_point, MT_PARAMS);

/* Every rate/contention message starts with a 64-bit stamp: iteration (low 24 bits), lane
 * (16 bits), sequence within the iteration (24 bits); the rest is hmb_fill's pattern. */
#define MT_STAMP_BYTES 8
#define MT_SEQ_MASK 0xFFFFFF
#define MT_MAX_HELD_BYTES (1024.0 * 1024.0 * 1024.0)

static inline uint64_t mt_stamp(long iter, int lane, int seq)
{
    return ((uint64_t)iter & MT_SEQ_MASK) << 40 | (uint64_t)(lane & 0xFFFF) << 24 | (uint64_t)seq;
}

/* One stream of messages between a sender thread and a receiver thread (or origin thread
 * and target window). */
typedef struct {
    MPI_Comm comm;
    int data_tag, ack_tag;
    int thread; /* OpenMP thread of this rank that drives the lane */
    MPI_Win win;
    MPI_Aint disp; /* get: where the lane's data lies in win on the target */
    unsigned char *target_mem; /* get target: the lane's bytes in this process's window */
} mt_lane;

typedef struct mt_state mt_state;

/* A test: a row of the tests' table (pattern.c), indexed by MT_RATE ... MT_GET. */
typedef struct {
    double (*iteration)(hmb_ctx *ctx, mt_state *s, long iter); /* pattern.c: timed; this rank's seconds */
    /* pattern.c: its metrics beyond the rates, from the summed Get+flush time of the origins and
     * the slowest target's compute (s); NULL: none */
    void (*record)(hmb_ctx *ctx, hmb_sample *out, double op_time_sum_s, double messages, double target_compute_s);
    void (*annotate)(hmb_ctx *ctx, const mt_state *s); /* pattern.c: its fields of the record; may be NULL */
    const char *layout;  /* the record's layout field: which threads communicate; NULL: none */
    void (*setup)(hmb_ctx *ctx, mt_state *s);          /* setup.c: the lanes' buffers or windows */
    void (*release)(mt_state *s);                      /* setup.c: what setup made beyond buffers; may be NULL */
    int (*lane_thread)(const mt_state *s, int lane);   /* setup.c: the thread of this rank driving a lane */
    void (*prepare)(hmb_ctx *ctx, mt_state *s, long iter); /* verify.c: send data or target window */
    void (*verify)(hmb_ctx *ctx, mt_state *s, const hmb_point *pt, long iter); /* verify.c */
    int spare_threads;   /* threads that drive no lane of their own: lanes = threads - this */
    int stamped;         /* its messages carry a stamp: at least MT_STAMP_BYTES each */
    int one_window;      /* one window per iteration (else --windows-per-iter) */
    int target_progress; /* takes --target-progress, one point per value */
    int level;           /* the thread level it needs at any thread count */
    int min_threads;     /* fewer threads: refused, saying few_threads */
    const char *few_threads;
    const char *refuses[MT_NMODES]; /* the modes it cannot run with, and why */
} mt_test_def;

/* A mode: a row of the modes' table (pattern.c), indexed by MT_SHARED ... MT_EVERYWHERE. */
typedef struct {
    void (*lane_comms)(mt_state *s); /* setup.c: each lane's communicator, after the lanes' threads */
    int level;            /* the thread level it needs with more than one thread */
    int one_thread;       /* the master thread drives every lane */
    int tag_per_lane;     /* every lane its own data and ack tags (else one data tag) */
    int any_lane;         /* one (communicator, tag) for every lane: a message may land on any lane */
    int asserts;          /* its communicator carries mt_tag_info_keys; order holds unless overtaking was kept */
    int streams;          /* an MPIX stream per driving thread */
    int window_per_lane;  /* get: an RMA window per lane, on the lane's communicator */
    int processes;        /* the process baseline: T single-threaded processes per side */
    int max_threads;      /* more threads: refused, saying many_threads; 0: any */
    const char *many_threads;
} mt_mode_def;

/* The target's progress in the get test: a row of its table (pattern.c). */
typedef struct {
    int helper;      /* a helper thread polls MPI_Iprobe while the target computes */
    int level;       /* the thread level it needs */
    const char *who; /* what needs that level, in the refusal ("a target progress thread") */
} mt_progress_def;

struct mt_state {
    int test, mode, progress; /* indices into the tables (and names) */
    const mt_test_def *test_def;
    const mt_mode_def *mode_def;
    const mt_progress_def *progress_def;
    int threads; /* OpenMP threads in the parallel region */
    int nlanes;
    int sending; /* rate/contention: sender half; get: origin half */
    int peer;
    size_t size;
    int window, windows;
    mt_lane lanes[HMB_MAX_THREADS];

    MPI_Comm base; /* dup of hmb_comm for this point */
    MPI_Comm comms[2 * HMB_MAX_THREADS];
    int ncomms; /* communicators created for this point (base included) */
    MPI_Win wins[HMB_MAX_THREADS];
    int nwins;
    hmb_stream streams[HMB_MAX_THREADS];
    int nstreams;

    unsigned char *sendbuf;  /* rate: per lane, window slots */
    unsigned char *recvbuf;  /* rate: per lane, windows x window slots; get: per lane, window slots */
    unsigned char *winmem;   /* get target: lanes x size (MPI_Win_create) */
    MPI_Request *reqs;       /* per thread, reqs_per_thread */
    int reqs_per_thread;
    unsigned char *seen;     /* verify: per lane, one flag per sequence number */

    int64_t compute_ns;       /* get: the target's compute per iteration */
    int64_t shuffle_delay_ns; /* test only (--shuffle-delay): random pauses before each post */
    long stale_at;            /* test only (--inject stale): iteration whose lane-0 slot 0 is stale */
    double target_compute_s;  /* get: measured compute of the last iteration (target) */
    double op_time_sum_s;     /* get: sum of Get+flush times of the last iteration (origin) */
    hmb_progress *helper;     /* get target with a helper: the MPI_Iprobe progress thread */

    long long num_vcis, reserve_vcis; /* -1: not exposed */
    long vmrss_kib, vmhwm_kib;        /* after set-up; -1: unknown */
    char tag_info[MT_NINFO][64];      /* a mode that asserts: the assertions as the library kept them */
};

/* Message slots: rate's send slot i of a lane, its receive slot of sequence number seq; get's
 * slot of the lane's op-th get. */
static inline unsigned char *mt_send_slot(const mt_state *s, int lane, int i)
{
    return s->sendbuf + ((size_t)lane * s->window + i) * s->size;
}
static inline unsigned char *mt_recv_slot(const mt_state *s, int lane, int seq)
{
    return s->recvbuf + ((size_t)lane * s->windows * s->window + seq) * s->size;
}
static inline unsigned char *mt_get_slot(const mt_state *s, int lane, int op)
{
    return s->recvbuf + ((size_t)lane * s->window + op) * s->size;
}

/* setup.c; tests, modes, progress: the tables (pattern.c) */
void mt_check(hmb_ctx *ctx, const mt_test_def *tests);
void mt_points(hmb_ctx *ctx, hmb_point_list *out, const mt_test_def *tests);
mt_state *mt_state_create(hmb_ctx *ctx, const hmb_point *pt, const mt_test_def *tests, const mt_mode_def *modes,
                          const mt_progress_def *progress);
void mt_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt);
void mt_rate_buffers(hmb_ctx *ctx, mt_state *s); /* rate, contention: the lanes' slots */
void mt_get_windows(hmb_ctx *ctx, mt_state *s);  /* get: the target's windows, the origin's slots, the helper */
void mt_get_release(mt_state *s);
int mt_thread_per_lane(const mt_state *s, int lane);  /* lane l: thread l (the master, if the mode has one) */
int mt_thread_contended(const mt_state *s, int lane); /* sender thread l + 1, receiver thread 0 */
void mt_comms_shared(mt_state *s);   /* every lane on the point's communicator */
void mt_comms_own(mt_state *s);      /* a communicator per lane */
void mt_comms_asserted(mt_state *s); /* one communicator carrying mt_tag_info_keys */
void mt_comms_streams(mt_state *s);  /* a stream per driving thread, a communicator per lane */

/* verify.c */
void mt_rate_prepare(hmb_ctx *ctx, mt_state *s, long iter);
void mt_get_prepare(hmb_ctx *ctx, mt_state *s, long iter);
void mt_rate_verify(hmb_ctx *ctx, mt_state *s, const hmb_point *pt, long iter);
void mt_get_verify(hmb_ctx *ctx, mt_state *s, const hmb_point *pt, long iter);

#endif
