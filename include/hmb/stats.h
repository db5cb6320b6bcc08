/* HMB — statistics of samples (src/harness/stats.c): the median and its rank-based confidence
 * interval, quantiles and the summary the harness reports for every metric of a point. Pure
 * functions, unit-tested through libhmbcore (tests/test_stats.py). */
#ifndef HMB_STATS_H
#define HMB_STATS_H

#ifdef __cplusplus
extern "C" {
#endif

/* qsort comparator of doubles, ascending (NaN: unordered, as qsort leaves it). */
int hmb_cmp_double(const void *a, const void *b);
typedef struct {
    long count;        /* valid samples summarised */
    double median, ci_lo, ci_hi; /* rank-based (binomial order statistics) CI of the median */
    int ci_valid;      /* 0 when count is too small for the requested confidence */
    double min, p95, max, mean, stddev;
} hmb_summary;

/* 0-based order-statistic indices (lo, hi) of the sorted sample bracketing the median
 * with at least `conf` coverage (exact binomial, Bin(n, 1/2)). Returns 0, or -1 if n is too
 * small for that coverage (then lo = 0, hi = n-1). */
int hmb_median_ci_ranks(long n, double conf, long *lo, long *hi);
/* Linear-interpolation quantile of a sorted array (numpy's default method). */
double hmb_quantile_sorted(const double *sorted, long n, double q);
/* Summary of n samples (NaN entries skipped); x is not modified. conf e.g. 0.95. */
void hmb_summarize(const double *x, long n, double conf, hmb_summary *out);
/* Adaptive stopping rule: 1 if the CI half-width (max of the two sides) is within
 * target_frac of |median| and the CI is valid. */
int hmb_ci_target_met(const hmb_summary *s, double target_frac);

#ifdef __cplusplus
}
#endif
#endif
