/* The watchdog: a point that runs past --timeout ends the job naming where it was (watchdog.c). */
#ifndef HMB_WATCHDOG_H
#define HMB_WATCHDOG_H

#include <stdint.h>

#include "hmb/bench.h"

typedef struct hmb_watchdog hmb_watchdog;

hmb_watchdog *hmb_watchdog_start(hmb_ctx *ctx);
void hmb_watchdog_arm(hmb_watchdog *w, int64_t timeout_ns);
void hmb_watchdog_disarm(hmb_watchdog *w);
void hmb_watchdog_stop(hmb_watchdog *w);
/* The bound of one blocking call (hmb_wait_bounded, modes.c): prepare names it (message, the
 * point's iteration) and wakes the watchdog (untimed); start sets its deadline, since_s +
 * bound_s, without waking it (cheap, in the timed path); clear ends it. Past the deadline the
 * watchdog fails the point with exit 3 (hmb_validation_failure) with the message. */
void hmb_watchdog_bound_prepare(hmb_watchdog *w, double bound_s, long iter, const char *message);
void hmb_watchdog_bound_start(hmb_watchdog *w, double since_s);
void hmb_watchdog_bound_clear(hmb_watchdog *w);

#endif
