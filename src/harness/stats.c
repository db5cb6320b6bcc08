/* Summary statistics of a point's samples: median with a distribution-free confidence
 * interval, min, p95, max, mean, stddev.
 *
 * CI of the median from order statistics. Let x(1) <= ... <= x(n) be the sorted sample and
 * M the true median. Each sample falls below M with probability 1/2, so the number B of
 * samples below M is Bin(n, 1/2). The interval [x(k), x(n-k+1)] (1-based) misses M exactly
 * when B <= k-1 (M lies below x(k)) or B >= n-k+1 (M lies above x(n-k+1)); by symmetry
 *     coverage(k) = 1 - 2 P(B <= k-1).
 * Coverage falls as k grows, so we take the LARGEST k >= 1 with coverage(k) >= conf: the
 * tightest symmetric interval that still has the requested coverage. If even k = 1
 * (the whole range, coverage 1 - 2^(1-n)) falls short, n is too small: at 95%, n < 6.
 * 0-based indices returned: lo = k-1, hi = n-k. P(B <= j) is summed exactly from the
 * binomial pmf, in log space so that 2^-n does not underflow for large n. */
#include "core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int hmb_median_ci_ranks(long n, double conf, long *lo, long *hi)
{
    *lo = 0;
    *hi = n > 0 ? n - 1 : 0;
    if (n < 1 || !(conf > 0.0) || !(conf < 1.0))
        return -1;
    /* Both tails together may hold at most alpha: 2 P(B <= k-1) <= alpha. */
    const double half_alpha = (1.0 - conf) / 2.0;
    const double log_half_pow_n = -(double)n * log(2.0);
    double log_pmf = log_half_pow_n; /* log P(B = 0) */
    double cdf = 0.0;                /* P(B <= j) for the j reached */
    long k = 0;                      /* largest k found so far with coverage(k) >= conf */
    for (long j = 0; j <= n / 2; j++) {
        cdf += exp(log_pmf); /* now P(B <= j), i.e. the tail for k = j + 1 */
        /* The 1e-12 relative slack only absorbs rounding; exact ties cannot occur for
         * conf values like 0.95 because the tail is a dyadic rational. */
        if (cdf > half_alpha * (1.0 + 1e-12))
            break;
        k = j + 1;
        log_pmf += log((double)(n - j)) - log((double)(j + 1)); /* P(B = j+1) */
    }
    if (k < 1)
        return -1;
    *lo = k - 1;
    *hi = n - k;
    return 0;
}

double hmb_quantile_sorted(const double *sorted, long n, double q)
{
    if (n < 1)
        return NAN;
    if (q <= 0.0)
        return sorted[0];
    if (q >= 1.0)
        return sorted[n - 1];
    double h = (double)(n - 1) * q;
    long below = (long)floor(h);
    if (below >= n - 1)
        return sorted[n - 1];
    double frac = h - (double)below;
    return sorted[below] + frac * (sorted[below + 1] - sorted[below]);
}

int hmb_cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

void hmb_summarize(const double *x, long n, double conf, hmb_summary *out)
{
    memset(out, 0, sizeof *out);
    out->median = out->ci_lo = out->ci_hi = NAN;
    out->min = out->p95 = out->max = out->mean = out->stddev = NAN;
    double *v = n > 0 ? malloc((size_t)n * sizeof *v) : NULL;
    long m = 0;
    for (long i = 0; v && i < n; i++)
        if (!isnan(x[i]))
            v[m++] = x[i];
    out->count = m;
    if (m == 0) {
        free(v);
        return;
    }
    qsort(v, (size_t)m, sizeof *v, hmb_cmp_double);
    out->min = v[0];
    out->max = v[m - 1];
    out->median = hmb_quantile_sorted(v, m, 0.5);
    out->p95 = hmb_quantile_sorted(v, m, 0.95);

    /* Welford: stable mean and sample (n-1) standard deviation. */
    double mean = 0.0, m2 = 0.0;
    for (long i = 0; i < m; i++) {
        double delta = v[i] - mean;
        mean += delta / (double)(i + 1);
        m2 += delta * (v[i] - mean);
    }
    out->mean = mean;
    out->stddev = m > 1 ? sqrt(m2 / (double)(m - 1)) : 0.0;

    long lo, hi;
    out->ci_valid = hmb_median_ci_ranks(m, conf, &lo, &hi) == 0;
    out->ci_lo = v[lo]; /* invalid: lo = 0, hi = m-1, the whole range */
    out->ci_hi = v[hi];
    free(v);
}

int hmb_ci_target_met(const hmb_summary *s, double target_frac)
{
    if (!s->ci_valid || s->count < 1 || isnan(s->median))
        return 0;
    double below = s->median - s->ci_lo, above = s->ci_hi - s->median;
    double half_width = below > above ? below : above;
    return half_width <= target_frac * fabs(s->median);
}
