/* The watchdog: a point that runs past --timeout ends the job naming where it was (watchdog.c). */
#ifndef HMB_WATCHDOG_H
#define HMB_WATCHDOG_H

#include <stdint.h>

#include "hmb/hmb.h"

typedef struct hmb_watchdog hmb_watchdog;

hmb_watchdog *hmb_watchdog_start(hmb_ctx *ctx);
void hmb_watchdog_arm(hmb_watchdog *w, int64_t timeout_ns);
void hmb_watchdog_disarm(hmb_watchdog *w);
void hmb_watchdog_stop(hmb_watchdog *w);

#endif
