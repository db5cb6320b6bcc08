/* Validation as data: the registry's work in the point loop (measure.c) and the paired modes (modes.c); validate.c. */
#ifndef HMB_VALIDATE_H
#define HMB_VALIDATE_H

#include "hmb/hmb.h"

void hmb_checks_prepare(hmb_ctx *ctx, long iter);          /* fill sends, poison receives */
void hmb_checks_run(hmb_ctx *ctx, long iter, int group);   /* check a group's receives, poison */
void hmb_checks_clear(hmb_ctx *ctx);                       /* after teardown */

#endif
