/* HMB — MPI_T performance variables (src/harness/pvar.c; docs/methodology.md, "MPI_T
 * performance variables"). */
#ifndef HMB_PVARS_H
#define HMB_PVARS_H

#include "hmb/hmb.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Library-internal counters (queue lengths, match attempts, time spent matching) read through
 * MPI_T (src/harness/pvar.c; docs/methodology.md, "MPI_T performance variables"). A name this
 * library does not expose is kept as "unavailable", never an error: report "unavailable", never
 * invent a value. Main thread only; sample outside timed regions (a read is a library call). */
typedef struct hmb_pvars hmb_pvars;
/* Start a pvar session (MPI_T_init_thread inside) and look up each name: "name" is the first
 * variable of that name in any class, "class:name" (e.g. "counter:time_matching_unexpectedq")
 * the one of that class (hmb_pvars_class() names). The names are copied.
 * Variables bound to a communicator are bound to comm, MPI_T_BIND_NO_OBJECT ones to nothing;
 * other bindings and non-numeric types count as unavailable. Call after MPI_Init: libraries
 * register some variables only then (Open MPI's ob1 queues). ctx may be NULL. */
hmb_pvars *hmb_pvars_open(hmb_ctx *ctx, const char *const *names, int n, MPI_Comm comm);
int hmb_pvars_available(const hmb_pvars *pv, int i); /* 1 if names[i] can be read here */
int hmb_pvars_count(const hmb_pvars *pv, int i);     /* values per read (one per peer, ...); 0 if unavailable */
/* "level", "counter", "timer", "highwatermark", "lowwatermark", "size", "percentage", "state",
 * "aggregate", "generic"; "unavailable" when the library has no such name. */
const char *hmb_pvars_class(const hmb_pvars *pv, int i);
/* Unit of the values read: "s" (timers of type double, MPI_Wtime's unit), "ticks" (integer timers:
 * the unit is the library's, see --list-pvars), "count", "fraction" (percentage), "" otherwise. */
const char *hmb_pvars_unit(const hmb_pvars *pv, int i);
void hmb_pvars_start(hmb_pvars *pv); /* starts those that are not continuous (continuous ones always run) */
void hmb_pvars_stop(hmb_pvars *pv);
void hmb_pvars_reset(hmb_pvars *pv); /* those that are not read-only (counters, timers, watermarks) */
/* Current values of names[i] as doubles (integers above 2^53 lose precision): writes
 * hmb_pvars_count() values and returns that count; 0 if unavailable or the read failed.
 * A counter or timer is cumulative: sample it before and after and take the difference (MPICH
 * 4.0.2's timers read as total minus a constant near -1.8e9 s: only differences mean anything). */
int hmb_pvars_read(hmb_pvars *pv, int i, double *values);
/* Onto the current result record (call from annotate()), for each name, keys
 * "<prefix><name>.available" (1/0), and either ".reason" or ".class", ".type", ".binding"
 * ("communicator"/"none"), ".count", ".unit", ".continuous". The values are the benchmark's
 * to record (as metrics or hmb_result_add_num). */
void hmb_pvars_record(hmb_ctx *ctx, const hmb_pvars *pv, const char *prefix);
void hmb_pvars_close(hmb_pvars *pv); /* frees handles and session, MPI_T_finalize; NULL is fine */

#ifdef __cplusplus
}
#endif
#endif
