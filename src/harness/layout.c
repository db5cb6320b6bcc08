/* The layouts of the structures the unit tests mirror with ctypes (tests/_corelib.py), exported
 * so the loader checks every size and field offset against this library: a struct change cannot
 * silently desynchronise the tests. */
#include <stddef.h>

#include "core.h"
#include "hmb/metrics.h"

typedef struct {
    const char *type, *field; /* field NULL: the whole structure */
    size_t offset, size;
} layout_row;

#define SIZE(T) {#T, NULL, 0, sizeof(T)}
#define FIELD(T, f) {#T, #f, offsetof(T, f), sizeof(((T *)0)->f)}

static const layout_row rows[] = {
    SIZE(hmb_option), FIELD(hmb_option, name), FIELD(hmb_option, type), FIELD(hmb_option, default_value),
    FIELD(hmb_option, help), FIELD(hmb_option, min), FIELD(hmb_option, max), FIELD(hmb_option, choices),
    FIELD(hmb_option, role), FIELD(hmb_option, slot), FIELD(hmb_option, given_slot), FIELD(hmb_option, names),
    FIELD(hmb_option, modes), FIELD(hmb_option, group), FIELD(hmb_option, used_by),
    SIZE(hmb_default), FIELD(hmb_default, name), FIELD(hmb_default, value),
    SIZE(hmb_optval), FIELD(hmb_optval, opt), FIELD(hmb_optval, given), FIELD(hmb_optval, present),
    FIELD(hmb_optval, ival), FIELD(hmb_optval, dval), FIELD(hmb_optval, ns), FIELD(hmb_optval, sval),
    FIELD(hmb_optval, sizes), FIELD(hmb_optval, ints), FIELD(hmb_optval, count), FIELD(hmb_optval, args),
    SIZE(hmb_optset), FIELD(hmb_optset, count), FIELD(hmb_optset, vals), FIELD(hmb_optset, rows),
    FIELD(hmb_optset, common), FIELD(hmb_optset, owned), FIELD(hmb_optset, nowned),
    SIZE(hmb_summary), FIELD(hmb_summary, count), FIELD(hmb_summary, median), FIELD(hmb_summary, ci_lo),
    FIELD(hmb_summary, ci_hi), FIELD(hmb_summary, ci_valid), FIELD(hmb_summary, min), FIELD(hmb_summary, p95),
    FIELD(hmb_summary, max), FIELD(hmb_summary, mean), FIELD(hmb_summary, stddev),
    SIZE(hmb_noise), FIELD(hmb_noise, kind), FIELD(hmb_noise, percent), FIELD(hmb_noise, thread_random),
    FIELD(hmb_noise, seed),
    SIZE(hmb_calib), FIELD(hmb_calib, iters_per_ns), FIELD(hmb_calib, calib_s), FIELD(hmb_calib, cpu),
    FIELD(hmb_calib, interrupt_lost_frac), FIELD(hmb_calib, interrupts_per_ns),
    FIELD(hmb_calib, rate_spread), FIELD(hmb_calib, verify_error), FIELD(hmb_calib, alone_iters_per_ns),
    FIELD(hmb_calib, concurrent),
    SIZE(hmb_compute_summary), FIELD(hmb_compute_summary, present), FIELD(hmb_compute_summary, kinds),
    FIELD(hmb_compute_summary, threads), FIELD(hmb_compute_summary, requested_ns),
    FIELD(hmb_compute_summary, measured_ns), FIELD(hmb_compute_summary, error), FIELD(hmb_compute_summary, worst_rank),
    FIELD(hmb_compute_summary, worst_thread), FIELD(hmb_compute_summary, worst_requested_ns),
    FIELD(hmb_compute_summary, worst_measured_ns), FIELD(hmb_compute_summary, worst_error),
    SIZE(hmb_part_metrics), FIELD(hmb_part_metrics, t_part_s), FIELD(hmb_part_metrics, t_pt2pt_s),
    FIELD(hmb_part_metrics, t_persist_s), FIELD(hmb_part_metrics, t_polled_s), FIELD(hmb_part_metrics, overhead),
    FIELD(hmb_part_metrics, overhead_persistent), FIELD(hmb_part_metrics, overhead_polled),
    FIELD(hmb_part_metrics, polled_over_blocking), FIELD(hmb_part_metrics, perceived_bw_Bps),
    FIELD(hmb_part_metrics, t_after_join_s), FIELD(hmb_part_metrics, availability),
    FIELD(hmb_part_metrics, early_bird),
    SIZE(hmb_topo_dir), FIELD(hmb_topo_dir, off), FIELD(hmb_topo_dir, to), FIELD(hmb_topo_dir, from),
    SIZE(hmb_topo), FIELD(hmb_topo, ndims), FIELD(hmb_topo, dims), FIELD(hmb_topo, periodic),
    FIELD(hmb_topo, coords), FIELD(hmb_topo, rank), FIELD(hmb_topo, size), FIELD(hmb_topo, tdims),
    FIELD(hmb_topo, nthreads), FIELD(hmb_topo, ndirs), FIELD(hmb_topo, dir),
    SIZE(hmb_changepoint), FIELD(hmb_changepoint, index), FIELD(hmb_changepoint, lo), FIELD(hmb_changepoint, hi),
    FIELD(hmb_changepoint, a_left), FIELD(hmb_changepoint, b_left), FIELD(hmb_changepoint, a_right),
    FIELD(hmb_changepoint, b_right), FIELD(hmb_changepoint, jump), FIELD(hmb_changepoint, rss),
    FIELD(hmb_changepoint, rss_line), FIELD(hmb_changepoint, sigma), FIELD(hmb_changepoint, step),
    SIZE(hmb_clock_model), FIELD(hmb_clock_model, offset_s), FIELD(hmb_clock_model, drift),
    FIELD(hmb_clock_model, t_ref_s), FIELD(hmb_clock_model, residual_max_s),
    SIZE(hmb_cpus), FIELD(hmb_cpus, bits),
};

/* Row i of the table: 1 with its type, field (NULL: the structure's size), offset and size;
 * 0 past the end. */
int hmb_layout(int i, const char **type, const char **field, size_t *offset, size_t *size)
{
    if (i < 0 || (size_t)i >= sizeof rows / sizeof rows[0])
        return 0;
    *type = rows[i].type;
    *field = rows[i].field;
    *offset = rows[i].offset;
    *size = rows[i].size;
    return 1;
}
