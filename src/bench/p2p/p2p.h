/* Private to p2p: pattern.c (the timed exchanges, the metrics, the descriptor; the family's
 * description is at its top), setup.c (checks, points, message slots, the latency batch, state),
 * verify.c (send data, both regimes and the planted faults, and the checks). */
#ifndef HMB_BENCH_P2P_H
#define HMB_BENCH_P2P_H

#include "hmb/bench.h"

enum { MODE_LATENCY, MODE_BW, MODE_BIBW, MODE_MSGRATE, MODE_COUNT };
enum { POST_RACING, POST_AHEAD }; /* --post */
/* --mode's names, in MODE_* order. */
static const char *const p2p_mode_names[MODE_COUNT + 1] = {"latency", "bw", "bibw", "msgrate", NULL};

#define P2P_OPTIONS(X)                                                                                              \
    X(mode, CHOICES, .default_value = "all", .names = p2p_mode_names, .help = "what to measure")                       \
    X(window, INT, .default_value = "64", .min = 1, .max = 4096, .used_by = "mode:bw,bibw,msgrate",                 \
      .help = "messages in flight per iteration for bw, bibw, msgrate (osu: 64)")                                  \
    X(post, CHOICE, .default_value = "racing", .choices = "racing|ahead", .used_by = "mode:bw,msgrate", /* POST_* order */ \
      .help = "bw, msgrate: the receiver posts a window's receives after the start signal, racing the sender's "    \
              "first messages as after osu_bw's and osu_mbw_mr's ack (racing), or before it (ahead: all pre-posted)") \
    X(batch, INT, .default_value = "0", .min = 0, .max = 4096, .used_by = "mode:latency",                           \
      .help = "latency: round trips timed back-to-back per sample (0 = auto: a sample of >= 20 us, at most 256)")
HMB_OPTIONS(p2p_opts, P2P_OPTIONS);

#define P2P_PARAMS(X) X(mode, NAME, .names = p2p_mode_names) X(window, INT) X(pairs, INT)
HMB_POINT_PARAMS(p2p_point, P2P_PARAMS);

enum { TAG_DATA = 1, TAG_READY = 2, TAG_ACK = 3, TAG_REWARM = 4 };
enum { M_LATENCY, M_BANDWIDTH, M_RATE, M_ITER_TIME }; /* indices into p2p_metrics */

/* Latency batching: a sample lasts at least BATCH_SAMPLE_NS (and 100 timer calls), so the
 * ~0.1 us the harness spends around a sample (ready handshake, phase marks, checks) stays
 * below 0.5% of it; at most BATCH_MAX round trips. */
#define BATCH_SAMPLE_NS 20000.0
#define BATCH_TIMER_CALLS 100.0
#define BATCH_MAX 256
#define BATCH_PROBE_ROUND_TRIPS 8
#define BATCH_PROBE_REPEATS 3
/* --cache hot: the receive slots of a window take at most this fraction of the LLC, and at most
 * WINDOW_HOT_MAX_BYTES (window_slots); latency rewarms a batch's slots after the check above
 * SLOTS_HOT_MAX_BYTES (setup.c). */
#define SLOTS_LLC_FRACTION 256
#define WINDOW_HOT_MAX_BYTES (16u << 10)
#define SLOTS_HOT_MAX_BYTES (128u << 10)

typedef struct p2p_state p2p_state;

/* A mode: a row of the modes' table (pattern.c), indexed by MODE_*. */
typedef struct {
    /* the timed exchange: its messages, this rank's timed region's start and end (0: none) */
    void (*exchange)(hmb_ctx *ctx, p2p_state *st, long iter, double *t_start_s, double *t_end_s);
    int batched;    /* a sample is a batch of back-to-back round trips (--batch), one slot each */
    int both_ways;  /* both sides of the pair send and receive */
    int all_pairs;  /* every rank is in a pair (rank i with i + n/2), all pairs at once */
    int directions; /* messages per count per iteration: 1, or 2 (both directions at once) */
    int rates;      /* reports bandwidth and message rate */
} p2p_mode_def;

struct p2p_state {
    int mode;
    const p2p_mode_def *def; /* its row */
    size_t size;
    int count;       /* messages per direction per iteration: window, or latency round trips (batch) */
    int slots;       /* distinct receive slots (and send patterns); message j uses slot j % slots */
    int peer;        /* -1: idle in this mode */
    int is_sender;   /* latency: the pinger (rank 0) */
    long stale_at, wrong_slot_at; /* test-only faults (-1: none) */
    int rewarm;      /* latency: one untimed round trip after the check, before the sample (see setup.c) */
    int racing;      /* bw, msgrate: --post racing (the start signal before the receives, as osu_bw's ack) */
    int nsets;                 /* send sets: 2 (generations, set iter & 1), or 1 (latency, --cache hot) */
    unsigned char *send_sets;  /* nsets sets of slots x size */
    unsigned char *recv_slots; /* slots x size */
    unsigned char **send_msg, **recv_msg; /* per message of this iteration: its send data, its slot */
    MPI_Request *reqs;         /* 2 * count */
};

/* setup.c; modes: the modes' table (pattern.c) */
void p2p_check(hmb_ctx *ctx, const p2p_mode_def *modes);
void p2p_points(hmb_ctx *ctx, hmb_point_list *out, const p2p_mode_def *modes);
void *p2p_setup(hmb_ctx *ctx, const hmb_point *pt, const p2p_mode_def *modes);
void p2p_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt);

/* verify.c */
void p2p_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter);
void p2p_verify(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter);

#endif
