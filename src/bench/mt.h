/* Private to the mt benchmark (mt.c: descriptor and options; mt_lanes.c: set-up and the
 * message-rate/contention pattern; mt_rma.c: the shared-progress get test). */
#ifndef HMB_BENCH_MT_H
#define HMB_BENCH_MT_H

#include <stddef.h>
#include <stdint.h>

#include "hmb/bench.h"

enum { MT_RATE, MT_CONTENTION, MT_GET, MT_NTESTS };
enum { MT_SHARED, MT_COMM, MT_TAG, MT_STREAM, MT_FUNNELED, MT_EVERYWHERE, MT_NMODES };
enum { MT_PROGRESS_NONE, MT_PROGRESS_THREAD, MT_NPROGRESS };
#define MT_NINFO 3
extern const char *const mt_test_names[MT_NTESTS + 1], *const mt_mode_names[MT_NMODES + 1],
    *const mt_progress_names[MT_NPROGRESS + 1];

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
    X(get_window, CHOICE, .default_value = "create", .choices = "create|allocate", .used_by = "test:get",           \
      .help = "get test: window memory from MPI_Win_create (malloc) or MPI_Win_allocate")                          \
    X(shuffle_delay, DURATION, .default_value = "0", .max = 1,                                                      \
      .help = "TEST ONLY (distorts every rate): before each post a thread may yield or sleep up to this long, at "  \
              "random, so cross-thread matching orders vary")
HMB_OPTIONS(mt_opts, MT_OPTIONS);
enum { MT_WINDOW_CREATE, MT_WINDOW_ALLOCATE };

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

typedef struct {
    int test, mode, progress;
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
    char tag_info[MT_NINFO][64];      /* tag mode: the assertions as the library kept them */
} mt_state;

/* Test only: a thread's random pauses before its posts (--shuffle-delay), so that on few
 * cores cross-thread matching orders still vary. A pure function of (rank, thread, iteration). */
typedef struct {
    uint64_t state;
    int64_t max_ns; /* 0: off */
} mt_shuffle;
void mt_shuffle_init(mt_shuffle *sh, const mt_state *s, int rank, int tid, long iter);
void mt_shuffle_pause(mt_shuffle *sh);

/* mt_lanes.c */
mt_state *mt_state_create(hmb_ctx *ctx, const hmb_point *pt, const char *const *tag_info_keys);
void mt_state_free(mt_state *s);
/* Untimed, before the cold-cache flush: this iteration's send data / target window. */
void mt_rate_prepare(hmb_ctx *ctx, mt_state *s, long iter);
void mt_get_prepare(hmb_ctx *ctx, mt_state *s, long iter);
double mt_rate_iteration(hmb_ctx *ctx, mt_state *s, long iter); /* returns elapsed s */
void mt_rate_verify(hmb_ctx *ctx, mt_state *s, const hmb_point *pt, long iter);

/* mt_rma.c */
void mt_get_setup(hmb_ctx *ctx, mt_state *s);
void mt_get_free(mt_state *s);
double mt_get_iteration(hmb_ctx *ctx, mt_state *s, long iter);
void mt_get_verify(hmb_ctx *ctx, mt_state *s, const hmb_point *pt, long iter);

#endif
