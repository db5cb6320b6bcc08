/* The harness clock: CLOCK_MONOTONIC (vDSO, no system call on Linux), plus a start-up
 * measurement of its resolution and cost that goes into the run record. */
#include "core.h"

#include <time.h>

int64_t hmb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double hmb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void hmb_timer_measure(double *resolution_ns, double *overhead_ns)
{
    enum { READS = 20000 };
    /* Resolution: the smallest step the clock shows between back-to-back reads. */
    int64_t min_step = INT64_MAX;
    int64_t prev = hmb_now_ns();
    for (int i = 0; i < READS; i++) {
        int64_t t = hmb_now_ns();
        if (t > prev && t - prev < min_step)
            min_step = t - prev;
        prev = t;
    }
    /* Overhead: mean cost of one call over a batch (the batch dwarfs the resolution). */
    int64_t t_begin = hmb_now_ns();
    for (int i = 0; i < READS; i++)
        (void)hmb_now_ns(); /* an external call: cannot be optimised away */
    int64_t t_end = hmb_now_ns();
    if (resolution_ns)
        *resolution_ns = min_step == INT64_MAX ? 0.0 : (double)min_step;
    if (overhead_ns)
        *overhead_ns = (double)(t_end - t_begin) / READS;
}
