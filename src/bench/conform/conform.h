/* Private to conform: pattern.c (the table of checks, running one and gathering the ranks'
 * verdicts, the record, the descriptor; the family's description is at its top), setup.c (option
 * checks, points, the name and reproducer of a check, the state), verify.c (verdicts, bounded
 * waits, the data every check moves), and the checks themselves: checks_part.c (a partitioned
 * pair, data and arrival), checks_rounds.c (order, scale, request life), checks_threads.c
 * (MPI + threads). */
#ifndef HMB_CONFORM_H
#define HMB_CONFORM_H

#include <stddef.h>
#include <stdint.h>

#include "hmb/bench.h"

enum { SENDER = 1, RECEIVER = 0 }; /* as scripts/repro/partitioned_rounds.c */
enum { V_PASS, V_UNSUPPORTED, V_FAIL }; /* ordered: the worst verdict of the ranks wins */
enum { TAG_DATA = 7, TAG_GO = 100 };
#define POISON 0xA5A5A5A5A5A5A5A5ull
#define REASON_LEN 600

typedef enum { ORDER_FORWARD, ORDER_REVERSE, ORDER_RANDOM, ORDER_THREADS, ORDER_RANGE, ORDER_LIST } ready_order;
/* --order's names: name k is ready_order k + 1 (forward is no choice). --state's names. */
static const char *const cf_order_names[] = {"reverse", "random", "threads", "range", "list", NULL};
static const char *const cf_state_names[] = {"unstarted", "null", "completed", NULL};
enum { STATE_UNSTARTED, STATE_NULL, STATE_COMPLETED };

#define CONFORM_OPTIONS(X)                                                                                          \
    X(check, CHOICES, .default_value = "all", .help = "checks to run (one point each per variant)",                  \
      .choices = "inactive-buffer|pready-nonblocking|parrived-truth|parrived-inactive|part-counts|pready-order|"     \
                 "third-rank|many-partitions|restarts|request-free|multi-completion|mt-order|info-assertions|"      \
                 "streams|thread-level") /* the order of checks[] in pattern.c */                                  \
    X(requests, INTS, .default_value = "1,2,8", .min = 1, .max = 64, .used_by = "check:inactive-buffer",           \
      .help = "inactive-buffer: partitioned requests per pair of ranks")                                           \
    X(counts, STRING, .default_value = "4:8,8:2,3:6,6:4", .used_by = "check:part-counts", .help = "part-counts: send:receive partition counts") \
    X(order, CHOICES, .default_value = "reverse,random,threads,range,list", .names = cf_order_names, .used_by = "check:pready-order", \
      .help = "pready-order: reverse, random, from all --threads at once, MPI_Pready_range, MPI_Pready_list")        \
    X(state, CHOICES, .default_value = "unstarted,null,completed", .names = cf_state_names, .used_by = "check:parrived-inactive", \
      .help = "parrived-inactive: a request never started, MPI_REQUEST_NULL, a completed request")                 \
    X(many, INTS, .default_value = "1024,65536", .min = 1, .max = 1 << 20, .used_by = "check:many-partitions", .help = "many-partitions: partition counts") \
    X(restarts, INT, .default_value = "1000", .min = 300, .max = 1000000, .used_by = "check:restarts", .help = "restarts: MPI_Start/complete rounds") \
    X(delay, DURATION, .default_value = "50ms", .max = 3600, .used_by = "check:pready-nonblocking", .help = "pready-nonblocking: the receiver's delay before MPI_Start") \
    X(bound, DURATION, .default_value = "3s", .max = 3600, .help = "deadline of one check: past it a check still waiting FAILs", \
      HMB_RUN_CONTROL)
HMB_OPTIONS(conform_opts, CONFORM_OPTIONS);

/* A point: the check (its name, and its index in the table), and the variant it runs. */
#define CONFORM_PARAMS(X)                                                                                           \
    X(check, TEXT) X(requests, INT) X(partitions, INT) X(send_partitions, INT) X(recv_partitions, INT)             \
    X(order, NAME, .names = cf_order_names) X(state, NAME, .names = cf_state_names) X(check_index, DATA)
HMB_POINT_PARAMS(cf_point, CONFORM_PARAMS);

typedef struct {
    hmb_ctx *ctx;
    MPI_Comm comm; /* the check's messages (a fresh duplicate per point) */
    MPI_Comm ctl;  /* verdict gather: never matches a check's message */
    int rank, size, silent;
    double t0, deadline, bound_s;
    int verdict, wedged;
    char reason[REASON_LEN];
    /* rank 0, the worst outcome over the point's iterations */
    int final_verdict;
    double final_s;
    char final_reason[4 * REASON_LEN];
    char name[128], reproducer[512];
} cf;

/* Verdicts and bounded waits (verify.c). cf_set keeps the first reason of the worst verdict. */
void cf_set(cf *c, int verdict, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int cf_expired(const cf *c);
/* Poll n requests until all completed or the deadline: 1, or 0 after a FAIL naming what was
 * outstanding (c->wedged set: the requests cannot be freed). */
int cf_complete(cf *c, int n, MPI_Request *req, const char *what);
int cf_ctl_send(cf *c, int peer, int tag); /* a control message between the pair, bounded */
int cf_ctl_recv(cf *c, int peer, int tag);

/* Data (verify.c): word w of generation gen, fill, poison, the first wrong word (-1: none) and
 * what a wrong word holds (stride: generations between one round and the next). */
uint64_t cf_word_of(long gen, size_t w);
void cf_fill(uint64_t *b, size_t lo, size_t hi, long gen);
void cf_poison(uint64_t *b, size_t n);
long cf_bad_word(const uint64_t *b, size_t lo, size_t hi, long gen);
const char *cf_word_story_k(uint64_t v, long gen, size_t w, long stride);
const char *cf_word_story(uint64_t v, long gen, size_t w);

/* A partitioned pair (checks_part.c): rank 1 sends, rank 0 receives a message of `words` words,
 * each side with its own partition count; pairs_round runs k pairs through one round (start,
 * MPI_Pready in `order`, bounded completion, data checked): 1, or 0 after a verdict. */
typedef struct {
    MPI_Request req;
    uint64_t *buf;
    int parts;    /* this side's partition count */
    size_t words; /* whole message */
    int active;
} pside;
#define ROUNDS 5
void pair_init(cf *c, pside *p, int send_parts, int recv_parts, size_t words, int tag);
void pair_free(cf *c, pside *p, int n);
int pairs_round(cf *c, pside *p, int k, long round, ready_order order);
void ready_all(cf *c, pside *p, ready_order order, long round); /* the sender marks every partition */

/* A check: a row of the table (pattern.c), its index a bit of --check. */
typedef struct {
    const char *name;
    const char *clause;
    const char *variant; /* the option whose values make one point each, or NULL */
    void (*run)(cf *c, const hmb_point *pt);
} check_def;

#define NCHECKS 15

/* setup.c; checks: the table (pattern.c) */
void conform_check(hmb_ctx *ctx);
void conform_points(hmb_ctx *ctx, hmb_point_list *out, const check_def *checks);
void *conform_setup(hmb_ctx *ctx, const hmb_point *pt);
void conform_teardown(hmb_ctx *ctx, void *state, const hmb_point *pt);

/* The checks (checks_part.c, checks_rounds.c, checks_threads.c): set c's verdict and reason on
 * every rank. */
void check_inactive_buffer(cf *c, const hmb_point *pt);
void check_pready_nonblocking(cf *c, const hmb_point *pt);
void check_parrived_truth(cf *c, const hmb_point *pt);
void check_parrived_inactive(cf *c, const hmb_point *pt);
void check_part_counts(cf *c, const hmb_point *pt);
void check_pready_order(cf *c, const hmb_point *pt);
void check_third_rank(cf *c, const hmb_point *pt);
void check_many_partitions(cf *c, const hmb_point *pt);
void check_restarts(cf *c, const hmb_point *pt);
void check_request_free(cf *c, const hmb_point *pt);
void check_multi_completion(cf *c, const hmb_point *pt);
void check_mt_order(cf *c, const hmb_point *pt);
void check_info_assertions(cf *c, const hmb_point *pt);
void check_streams(cf *c, const hmb_point *pt);
void check_thread_level(cf *c, const hmb_point *pt);

#endif
