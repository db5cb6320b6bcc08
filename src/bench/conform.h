/* conform: declarations shared by conform.c, conform_part.c and conform_threads.c (the family's
 * description is at the top of conform.c). */
#ifndef HMB_CONFORM_H
#define HMB_CONFORM_H

#include <stddef.h>
#include <stdint.h>

#include "hmb/hmb.h"

enum { SENDER = 1, RECEIVER = 0 }; /* as scripts/repro/partitioned_rounds.c */
enum { V_PASS, V_UNSUPPORTED, V_FAIL }; /* ordered: the worst verdict of the ranks wins */
enum { TAG_DATA = 7, TAG_GO = 100 };
#define POISON 0xA5A5A5A5A5A5A5A5ull
#define REASON_LEN 600

typedef enum { ORDER_FORWARD, ORDER_REVERSE, ORDER_RANDOM, ORDER_THREADS, ORDER_RANGE, ORDER_LIST } ready_order;

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

/* Verdicts and bounded waits (conform.c). cf_set keeps the first reason of the worst verdict. */
void cf_set(cf *c, int verdict, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int cf_expired(const cf *c);
/* Poll n requests until all completed or the deadline: 1, or 0 after a FAIL naming what was
 * outstanding (c->wedged set: the requests cannot be freed). */
int cf_complete(cf *c, int n, MPI_Request *req, const char *what);
int cf_ctl_send(cf *c, int peer, int tag); /* a control message between the pair, bounded */
int cf_ctl_recv(cf *c, int peer, int tag);

/* Data (conform.c): word w of generation gen, fill, poison, the first wrong word (-1: none) and
 * what a wrong word holds (stride: generations between one round and the next). */
uint64_t cf_word_of(long gen, size_t w);
void cf_fill(uint64_t *b, size_t lo, size_t hi, long gen);
void cf_poison(uint64_t *b, size_t n);
long cf_bad_word(const uint64_t *b, size_t lo, size_t hi, long gen);
const char *cf_word_story_k(uint64_t v, long gen, size_t w, long stride);
const char *cf_word_story(uint64_t v, long gen, size_t w);

/* The checks (conform_part.c, conform_threads.c): set c's verdict and reason on every rank. */
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
