/* conform's verdicts, bounded waits and control messages, and the data pattern every check moves
 * and checks (the family's description is at the top of pattern.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "conform.h"

/* ------------------------------------------------------------------ verdicts and bounded waits */

void cf_set(cf *c, int verdict, const char *fmt, ...)
{
    if (verdict < c->verdict || (verdict == c->verdict && c->reason[0]))
        return; /* the first reason of the worst verdict stays */
    c->verdict = verdict;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof c->reason, fmt, ap);
    va_end(ap);
}

int cf_expired(const cf *c) { return hmb_now() > c->deadline; }

/* Poll n requests until all completed or the deadline: 1, or 0 after a FAIL naming what was
 * outstanding (the run is then wedged: its requests cannot be freed). */
int cf_complete(cf *c, int n, MPI_Request *req, const char *what)
{
    int left = n;
    char *done = calloc((size_t)n, 1);
    while (left > 0) {
        for (int i = 0; i < n; i++) {
            if (done[i])
                continue;
            int flag = 0;
            MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE);
            if (flag) {
                done[i] = 1;
                left--;
            }
        }
        if (left > 0 && cf_expired(c)) {
            char list[160] = "";
            size_t len = 0;
            for (int i = 0; i < n && len < sizeof list - 12; i++)
                if (!done[i])
                    len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? "," : "", i);
            cf_set(c, V_FAIL, "rank %d: %s: %d of %d request(s) not complete after %.1f s (outstanding: %s); "
                              "the library stopped progressing", c->rank, what, left, n, c->bound_s, list);
            c->wedged = 1;
            free(done);
            return 0;
        }
    }
    free(done);
    return 1;
}

/* A control message between the pair (bounded both ways). */
int cf_ctl_send(cf *c, int peer, int tag)
{
    int one = 1;
    MPI_Request r;
    MPI_Isend(&one, 1, MPI_INT, peer, TAG_GO + tag, c->comm, &r);
    return cf_complete(c, 1, &r, "control message send");
}

int cf_ctl_recv(cf *c, int peer, int tag)
{
    int v = 0;
    MPI_Request r;
    MPI_Irecv(&v, 1, MPI_INT, peer, TAG_GO + tag, c->comm, &r);
    return cf_complete(c, 1, &r, "control message receive (the partner did not reach its step)");
}

/* ------------------------------------------------------------------ data */

uint64_t cf_word_of(long round, size_t w) { return hmb_mix64(((uint64_t)round << 40) ^ (uint64_t)w ^ 0x5eedull); }

void cf_fill(uint64_t *b, size_t lo, size_t hi, long round)
{
    for (size_t w = lo; w < hi; w++)
        b[w] = cf_word_of(round, w);
}

void cf_poison(uint64_t *b, size_t n)
{
    for (size_t w = 0; w < n; w++)
        b[w] = POISON;
}

/* First word of [lo, hi) that does not hold round's data, or -1. */
long cf_bad_word(const uint64_t *b, size_t lo, size_t hi, long round)
{
    for (size_t w = lo; w < hi; w++)
        if (b[w] != cf_word_of(round, w))
            return (long)w;
    return -1;
}

/* What a wrong word holds, for the message: gen is the data generation expected, stride the
 * step between one round's generation and the next (the requests per pair). */
const char *cf_word_story_k(uint64_t v, long gen, size_t w, long stride)
{
    if (v == POISON)
        return "the poison (nothing arrived)";
    if (v == cf_word_of(gen + stride, w))
        return "the next round's data";
    if (gen >= stride && v == cf_word_of(gen - stride, w))
        return "the previous round's data";
    return "other bytes";
}

const char *cf_word_story(uint64_t v, long gen, size_t w) { return cf_word_story_k(v, gen, w, 1); }
