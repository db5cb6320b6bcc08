/* Validation as data: the registry's work in the point loop (measure.c) and the paired modes (modes.c); validate.c. */
#ifndef HMB_VALIDATE_H
#define HMB_VALIDATE_H

#include "hmb/bench.h"

void hmb_checks_prepare(hmb_ctx *ctx, long iter);          /* fill sends, poison receives */
void hmb_checks_run(hmb_ctx *ctx, long iter, int group);   /* check a group's receives, poison */
void hmb_checks_clear(hmb_ctx *ctx);                       /* after teardown */

/* --inject (inject.c). hmb_inject_setup: the faults from the options, refusing (exit 2) one that can
 * never fire (an iteration past the last one a point can run) or never be caught (--no-validate);
 * hmb_inject_check_ranks: after MPI_Init (hang needs a rank 1); hmb_inject_point_ran: a point ran
 * iterations 0..n-1; hmb_inject_verdict (collective, at the end of the run): 0 when no fault was
 * given, else one line on rank 0 and the exit status: 2 never fired, 3 fired but not caught. */
void hmb_inject_setup(hmb_ctx *ctx);
void hmb_inject_check_ranks(hmb_ctx *ctx);
void hmb_inject_point_ran(hmb_ctx *ctx, long iterations);
int hmb_inject_verdict(hmb_ctx *ctx);

#endif
