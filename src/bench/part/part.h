/* Private to part: pattern.c (the phases, their metrics, the record, the descriptor; the
 * family's description is at its top), setup.c (checks, points, buffers and requests, teardown),
 * verify.c (what the harness checks, and the check of every reported arrival). */
#ifndef HMB_BENCH_PART_H
#define HMB_BENCH_PART_H

#include "hmb/bench.h"

enum { SENDER = 0, RECEIVER = 1 };
enum { TAG_SINGLE = 1, TAG_PART = 2, TAG_SENDER_DONE = 3, TAG_TIMES = 4, TAG_PERSIST = 5, TAG_POLLED = 6 };
enum { PREADY_SINGLE, PREADY_RANGE, PREADY_LIST, NPREADY };
enum { COMPLETE_TEST, COMPLETE_WAIT, NCOMPLETE };
/* --pready's and --complete's names, in PREADY_* and COMPLETE_* order. */
static const char *const part_pready_names[NPREADY + 1] = {"single", "range", "list", NULL};
static const char *const part_complete_names[NCOMPLETE + 1] = {"test", "wait", NULL};

#define PART_PARAMS(X) X(partitions, INT) X(recv_partitions, INT) X(complete, NAME, .names = part_complete_names)
HMB_POINT_PARAMS(part_point, PART_PARAMS);
enum { PHASE_SINGLE, PHASE_PERSISTENT, PHASE_PARTITIONED, PHASE_POLLED, NPHASES };
/* times_msg (receiver -> rank 0): the baselines' t_recv (NaN for one left out: --no-polled,
 * --no-persistent),
 * then a_0 .. a_{P_recv-1} */
enum { TIMES_RECV_SINGLE, TIMES_RECV_PERSIST, TIMES_RECV_POLLED, TIMES_ARRIVED };

/* A partition not reported this long after the sender completed is never coming. */
#define NEVER_REPORTED_MIN_GRACE_S 1.0
#define NEVER_REPORTED_PT2PT_FACTOR 1000.0

typedef struct {
    int nparts_send, nparts_recv, threads;
    size_t size_bytes, psize_send, psize_recv;
    int pready_mode;
    int observe_poller; /* one thread polls every partition */
    int complete_wait;  /* the sender completes with MPI_Wait, else by polling MPI_Test */
    int polled;         /* the polled-receive phase runs (not --no-polled) */
    int persistent;     /* the persistent phase runs (not --no-persistent) */
    int64_t compute_ns;
    int rank;
    MPI_Comm data_comm; /* both phases' messages */
    MPI_Comm ctl_comm;  /* sender-done message and timestamps: never matches data */
    unsigned char *send_buf, *recv_buf_single, *recv_buf_persist, *recv_buf_part, *recv_buf_polled;
    MPI_Request part_req;
    MPI_Request persist_req; /* MPI_Send_init on the sender, MPI_Recv_init on the receiver */
    int *pready_list;     /* identity list: a thread passes its own slice to Pready_list */
    double *ready_local;  /* sender: s_i, local clock */
    double *compute_end;  /* sender: per thread, local clock */
    double *arrived;      /* receiver: a_j, local clock (then global on the wire) */
    double *times_msg;    /* receiver -> rank 0, global time base: see TIMES_* */
    int npieces;          /* lcm(P_send, P_recv): the message cut where either side cuts it */
    double *piece_ready, *piece_arrived; /* rank 0: s and a of every piece (global) */
    /* receiver's sender-done watch, shared by its polling threads (under omp critical) */
    MPI_Request done_req;
    int done_flag, done_payload;
    double done_at_s;
    double grace_s;       /* receiver: how long a partition may lag the sender's completion */
    double poll_since_s;  /* receiver: where --wait-bound of the partitioned phase starts */
    const hmb_point *pt;           /* the point being run (validation messages) */
    double t_baseline[NPHASES];    /* sender: the baseline phase's join; receiver: its t_recv (local) */
    long no_perceived_bw; /* samples whose last-ready piece arrived at or before its ready time */
} part_state;

#define PART_OPTIONS(X)                                                                                             \
    X(partitions, INTS, .min = 1, .max = 1 << 20,                                                                   \
      .help = "send partitions P, each a multiple of --threads (default: P = threads)")                           \
    X(recv_partitions, INT, .min = 1, .max = 1 << 20,                                                               \
      .help = "receive partitions (default: same as the send partitions)")                                         \
    X(pready, CHOICE, .default_value = "single", .names = part_pready_names,                                        \
      .help = "mark ready with MPI_Pready per partition, MPI_Pready_range or MPI_Pready_list")                     \
    X(observe, CHOICE, .default_value = "thread", .choices = "thread|poller",                                       \
      .help = "receiver polls MPI_Parrived per thread (own partitions) or in one poller")                          \
    X(complete, CHOICES, .default_value = "test", .names = part_complete_names,                                    \
      .help = "how the sender completes its request in every phase: polling MPI_Test or MPI_Wait (one point each)") \
    X(no_polled, FLAG, .default_value = "0",                                                                        \
      .help = "leave out the baseline whose receiver polls MPI_Test (overhead_polled): 3 phases an iteration, not 4") \
    X(no_persistent, FLAG, .default_value = "0",                                                                    \
      .help = "leave out the persistent baseline (overhead_persistent, t_persist_us): one phase an iteration fewer")
HMB_OPTIONS(part_opts, PART_OPTIONS);
enum { OBSERVE_THREAD, OBSERVE_POLLER };

/* setup.c */
void part_check(hmb_ctx *ctx);
void part_points(hmb_ctx *ctx, hmb_point_list *out);
void *part_setup(hmb_ctx *ctx, const hmb_point *pt);
void part_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt);

/* verify.c */
/* Validation as data: the sender's partitions and every phase's receive buffer, checked after the
 * iteration. */
void part_register_checks(hmb_ctx *ctx, part_state *st);
/* What the receiver's arrival callbacks get (hmb_arrival_watch.arg). */
typedef struct {
    hmb_ctx *ctx;
    part_state *st;
    long iter;
} part_arrival;
/* hmb_arrival_watch.on_arrival (arg: a part_arrival), right after MPI_Parrived first reports
 * receive partition j: its data must have landed. */
void part_check_reported_arrival(void *arg, int j);

#endif
