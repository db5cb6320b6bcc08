/* Private to proto: pattern.c (the probe's trials in every view, the curve of views both and step
 * and its clearest step, the trade-off's windows, the metrics, the record, the descriptor; the
 * family's description is at its top), setup.c (checks, points, memory readings, the transfer
 * calibration, the state of a point), verify.c (the trade-off's send data and checks; the probe
 * checks inside each trial). */
#ifndef HMB_BENCH_PROTO_H
#define HMB_BENCH_PROTO_H

#include "hmb/bench.h"

enum { TEST_PROBE, TEST_TRADEOFF, TEST_COUNT };
static const char *const proto_test_names[TEST_COUNT + 1] = {"probe", "tradeoff", NULL};
enum { VIEW_BOTH, VIEW_SENDER, VIEW_RECV_EARLY, VIEW_RECV_LATE, VIEW_STEP, VIEW_COUNT };
static const char *const proto_view_names[VIEW_COUNT + 1] = {"both", "sender", "recv-early", "recv-late", "step",
                                                             NULL};

#define PROTO_OPTIONS(X)                                                                                            \
    X(test, CHOICES, .default_value = "probe", .names = proto_test_names, .help = "what to measure")                \
    X(view, CHOICES, .default_value = "both", .names = proto_view_names, .used_by = "test:probe",                   \
      .help = "probe: both = both sides compute after posting (does the transfer progress during compute?); "       \
              "sender/recv-early/recv-late = whose request completes without the peer's MPI calls; step = where "   \
              "the cost of a blocking transfer of fresh data jumps (steps of the cost curve; give a linear --range)") \
    X(range, SIZES, .default_value = "512:96K:+512", .min = 1, .max = 1 << 30, .used_by = "test:probe",             \
      .help = "probe: size grid scanned for switches (then bisected); views both and step want a linear one")      \
    X(element, INT, .default_value = "8", .min = 1, .max = 1 << 20, .used_by = "test:probe",                        \
      .help = "probe: bisection resolution in bytes (grid sizes must be multiples)")                               \
    X(trials, INT, .default_value = "5", .min = 1, .max = 101, .used_by = "test:probe",                             \
      .help = "probe: trials per size per iteration (both: pooled over iterations; sender, recv-*: a size "       \
              "progressed when most of them did)")                                                                 \
    X(min_compute, DURATION, .default_value = "50us", .used_by = "test:probe", .max = 3600,                         \
      .help = "probe: least compute per trial (else 2x the transfer time)")                                        \
    X(window, INT, .default_value = "64", .min = 1, .max = 4096, .used_by = "test:tradeoff",                        \
      .help = "tradeoff: messages in flight per pair per iteration")
HMB_OPTIONS(proto_opts, PROTO_OPTIONS);

#define PROTO_PARAMS(X) X(test, NAME, .names = proto_test_names) X(view, NAME, .names = proto_view_names) X(window, INT) X(pairs, INT)
HMB_POINT_PARAMS(proto_point, PROTO_PARAMS);
enum { M_SWITCHES, M_FIRST_SWITCH, M_RATE, M_BANDWIDTH, M_ITER_TIME };
enum { TAG_DATA = 1, TAG_TOKEN = 2 };

#define MAX_SWITCHES 8
#define MAX_FOUND 64            /* iterations whose switch lists are kept for the consensus */
#define CALIBRATION_ROUND_TRIPS 5
#define PROBE_ATTEMPTS_PER_TRIAL 3  /* a trial without a verdict is repeated, up to this many times */
#define STEP_ROUND_TRIPS 15         /* view step: fresh-data round trips per size, the fastest counts */
#define STEP_BISECT_ROUND_TRIPS 45  /* view step: the same for the three sizes of a bisection step */
#define BOTH_BISECT_TRIALS_PER_TRIAL 3 /* view both: a bisection step's sizes get 3 x --trials trials each */

/* A growing list of readings (view both: one grid size's outstanding times). */
typedef struct {
    double *v;
    int n, cap;
} reading_pool;

typedef struct {
    int count;
    size_t lo_hi[2 * MAX_SWITCHES];
    int progressed_after[MAX_SWITCHES];
} switch_list;

/* Memory of the run (max over ranks, rank 0): read as early as a benchmark can, in points(). */
typedef struct {
    double rss_init_kB, hwm_init_kB;
} proto_run;

typedef struct proto_state proto_state;

/* A test: a row of the tests' table (pattern.c), indexed by TEST_*. */
typedef struct {
    /* setup.c: its own state of the point (peers, grids, requests); returns the bytes of each of the
     * two message buffers, and clears *ok when an allocation failed */
    size_t (*state)(hmb_ctx *ctx, proto_state *st, const hmb_point *pt, int *ok);
    void (*ready)(proto_state *st); /* setup.c: once every rank has its buffers; may be NULL */
    void (*iterate)(hmb_ctx *ctx, proto_state *st, long iter, hmb_sample *out); /* pattern.c */
    void (*annotate)(hmb_ctx *ctx, proto_state *st);                             /* pattern.c */
    void (*prepare)(proto_state *st, long iter); /* verify.c: send data; may be NULL */
    void (*verify)(hmb_ctx *ctx, const proto_state *st, const hmb_point *pt, long iter); /* verify.c; may be NULL */
} proto_test_def;

struct proto_state {
    hmb_ctx *ctx;
    const hmb_point *pt;
    const proto_test_def *test_def; /* its row */
    int test, view, peer, is_sender, trials;
    long iter;
    int probe_no;              /* probes in this iteration: the validation pattern's part */
    size_t element;
    int ngrid;
    const size_t *grid;
    double *transfer_s;        /* per grid size: one-way blocking transfer time (rank 0) */
    double *share_at;          /* view both, per grid size: outstanding time / transfer time (rank 0) */
    reading_pool *pool;        /* view both, per grid size: the outstanding times of all iterations' trials */
    double *cost_s;            /* per grid size, the curve whose clearest step is the switch: view step, the
                                * fastest fresh-data one-way time of all iterations; view both, the lower
                                * quartile of the outstanding times of all iterations' trials */
    hmb_changepoint steps[MAX_SWITCHES]; /* views step and both: the steps of cost_s (annotate) */
    int nsteps;
    double min_compute_s;
    size_t size;               /* tradeoff: message size */
    int window;
    unsigned char *send, *recv;
    MPI_Request *reqs;
    int nfound;
    long trials_run, trials_without_verdict; /* probe: trials made; sizes' trials never judged */
    switch_list found[MAX_FOUND];
    double rss_pairs_kB, rss_traffic_kB, hwm_kB;
};

/* setup.c; tests: the tests' table (pattern.c) */
void proto_check(hmb_ctx *ctx);
void proto_points(hmb_ctx *ctx, hmb_point_list *out);
void *proto_setup(hmb_ctx *ctx, const hmb_point *pt, const proto_test_def *tests);
size_t proto_probe_state(hmb_ctx *ctx, proto_state *st, const hmb_point *pt, int *ok);
size_t proto_tradeoff_state(hmb_ctx *ctx, proto_state *st, const hmb_point *pt, int *ok);
void proto_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt);
/* The largest resident memory and peak of any rank now, kB (collective). */
void proto_max_memory(hmb_ctx *ctx, double *rss_kB, double *hwm_kB);
/* The fastest one-way transfer time of every grid size so far (views other than both: once, at
 * set-up; both: again in every iteration). Collective. */
void proto_calibrate_transfers(proto_state *st);

/* verify.c: the trade-off's send data and checks */
void proto_tradeoff_prepare(proto_state *st, long iter);
void proto_tradeoff_verify(hmb_ctx *ctx, const proto_state *st, const hmb_point *pt, long iter);

#endif
