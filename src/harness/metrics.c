/* Metric formulas: see include/hmb/metrics.h and docs/metrics.md. */
#include "hmb/metrics.h"

#include <math.h>
#include <stdlib.h>

int hmb_part_metrics_compute(int n, const double *s, const double *a, double t_join_s, double t_pt2pt_s,
                             double t_persist_s, double t_polled_s, size_t m_bytes, hmb_part_metrics *out)
{
    if (n < 1 || !(t_pt2pt_s > 0.0) || !out)
        return -1;
    double s_min = s[0], a_max = a[0];
    int last_ready = 0, arrived_by_join = 0;
    for (int k = 0; k < n; k++) {
        if (s[k] < s_min)
            s_min = s[k];
        if (a[k] > a_max)
            a_max = a[k];
        /* ties (pieces of one send partition): the one that arrived last */
        if (s[k] > s[last_ready] || (s[k] == s[last_ready] && a[k] > a[last_ready]))
            last_ready = k;
        arrived_by_join += a[k] <= t_join_s;
    }
    out->t_part_s = a_max - s_min;
    out->t_pt2pt_s = t_pt2pt_s;
    out->t_persist_s = t_persist_s;
    out->t_polled_s = t_polled_s;
    out->overhead = out->t_part_s / t_pt2pt_s;
    /* an unusable persistent or polled baseline costs only the metrics that use it */
    out->overhead_persistent = t_persist_s > 0.0 ? out->t_part_s / t_persist_s : NAN;
    out->overhead_polled = t_polled_s > 0.0 ? out->t_part_s / t_polled_s : NAN;
    out->polled_over_blocking = t_polled_s > 0.0 ? t_polled_s / t_pt2pt_s : NAN;
    double last_span = a[last_ready] - s[last_ready];
    out->perceived_bw_Bps = last_span > 0.0 ? (double)m_bytes / last_span : NAN;
    double after = a_max - t_join_s;
    out->t_after_join_s = after > 0.0 ? after : 0.0;
    out->availability = 1.0 - out->t_after_join_s / t_pt2pt_s;
    /* Equal pieces: the share of pieces is the share of bytes, sum_k bytes_k / m. */
    out->early_bird = (double)arrived_by_join / n;
    return last_span > 0.0 ? 0 : 1;
}

double hmb_async_overhead(double t_total_s, double c_s) { return t_total_s - c_s; }

double hmb_async_efficiency_pct(double t_total_s, double c_s, double t_sync_s)
{
    return 100.0 * (1.0 - hmb_async_overhead(t_total_s, c_s) / t_sync_s);
}

int hmb_async_efficiency_ranks(int n, const double *t_total_s, const double *c_s, const double *t_sync_s,
                               double *worst_pct, double *mean_pct)
{
    *worst_pct = *mean_pct = NAN;
    if (n < 1)
        return -1;
    double worst = INFINITY, sum = 0.0;
    for (int r = 0; r < n; r++) {
        if (!(t_sync_s[r] > 0.0))
            return -1;
        double e = hmb_async_efficiency_pct(t_total_s[r], c_s[r], t_sync_s[r]);
        worst = e < worst ? e : worst;
        sum += e;
    }
    *worst_pct = worst;
    *mean_pct = sum / n;
    return 0;
}

double hmb_overlap_unclamped_pct(double t_comm_s, double t_comp_s, double t_overall_s)
{
    if (!(t_comm_s > 0.0))
        return 0.0;
    return 100.0 * (t_comm_s + t_comp_s - t_overall_s) / t_comm_s;
}

double hmb_overlap_pct(double t_comm_s, double t_comp_s, double t_overall_s)
{
    double pct = hmb_overlap_unclamped_pct(t_comm_s, t_comp_s, t_overall_s);
    return pct < 0.0 ? 0.0 : pct > 100.0 ? 100.0 : pct;
}

double hmb_projected_speedup(double fraction_p2p, double speedup_p2p)
{
    return 1.0 / ((1.0 - fraction_p2p) + fraction_p2p / speedup_p2p);
}

size_t hmb_eager_threshold_rule(double mean_size_bytes, size_t header_bytes)
{
    double x = mean_size_bytes + (double)header_bytes;
    if (x <= 1.0)
        return 1 + 1024;
    return (size_t)ldexp(1.0, (int)ceil(log2(x))) + 1024;
}

double hmb_async_compute_tolerance(double c_s, double calibration_error)
{
    double tolerance = calibration_error > 0.01 ? calibration_error : 0.01;
    return c_s > 0.0 && 1e-6 / c_s > tolerance ? 1e-6 / c_s : tolerance;
}

int hmb_async_compute_too_fast(double c_kernel_s, double c_s, double calibration_error)
{
    if (!(c_s > 0.0) || isnan(c_kernel_s))
        return 0;
    return c_kernel_s < c_s * (1.0 - hmb_async_compute_tolerance(c_s, calibration_error));
}

double hmb_kba_ideal_idle_share(int px, int py, int kblocks)
{
    if (px < 1 || py < 1 || kblocks < 1)
        return NAN;
    double stages = (double)kblocks + (px - 1) + (py - 1);
    return 1.0 - kblocks / stages;
}

double hmb_idle_share(double busy_s, double elapsed_s)
{
    if (!(elapsed_s > 0.0))
        return NAN;
    return 1.0 - busy_s / elapsed_s;
}

int hmb_match_times_compute(int nthreads, const double *begin, const double *posted, const double *done,
                            const double *paused, int ops, hmb_match_times *out)
{
    if (nthreads < 1 || ops < 1 || !out)
        return -1;
    double first = begin[0], last = done[0], post_sum = 0.0, wait_sum = 0.0;
    for (int k = 0; k < nthreads; k++) {
        if (begin[k] < first)
            first = begin[k];
        if (done[k] > last)
            last = done[k];
        post_sum += posted[k] - begin[k] - paused[k];
        wait_sum += done[k] - posted[k];
    }
    out->t_iter_s = last - first;
    out->post_per_msg_s = post_sum / ops;
    out->wait_per_msg_s = wait_sum / ops;
    return 0;
}

void hmb_match_queue_depth(int n, const double *values, double *total, double *peer_max)
{
    *total = *peer_max = NAN;
    if (n < 1)
        return;
    *total = 0.0;
    *peer_max = values[0];
    for (int i = 0; i < n; i++) {
        *total += values[i];
        if (values[i] > *peer_max)
            *peer_max = values[i];
    }
}

double hmb_throughput_Bps(double bytes_per_process, double t_region_s)
{
    return bytes_per_process > 0.0 && t_region_s > 0.0 ? bytes_per_process / t_region_s : NAN;
}

void hmb_pattern_rates(int nmodes, const double *bytes, const double *t_s, double *throughput_Bps, double *ratio)
{
    for (int m = 0; m < nmodes; m++)
        throughput_Bps[m] = hmb_throughput_Bps(bytes[m], t_s[m]);
    for (int m = 0; m < nmodes; m++)
        ratio[m] = throughput_Bps[m] / throughput_Bps[0]; /* NaN propagates */
}

/* ---- proto probe (SPEC §3.7; docs/metrics.md "proto") ---- */

int hmb_probe_majority(int progressed, int trials)
{
    return trials > 0 && 2 * progressed > trials;
}

int hmb_probe_verdict(double wait_start, double wait_end, double peer_call)
{
    if (!(wait_start < peer_call) || wait_end < wait_start)
        return -1;
    return wait_end < peer_call;
}

double hmb_probe_outstanding(double sender_wait_start, double sender_wait_end, double receiver_wait_start)
{
    if (!isfinite(sender_wait_start) || !isfinite(sender_wait_end) || !isfinite(receiver_wait_start) ||
        sender_wait_end < sender_wait_start || receiver_wait_start < sender_wait_start)
        return NAN;
    return sender_wait_end > receiver_wait_start ? sender_wait_end - receiver_wait_start : 0.0;
}

double hmb_probe_outstanding_share(double outstanding_s, double transfer_s)
{
    if (!(transfer_s > 0.0) || !(outstanding_s >= 0.0))
        return NAN;
    return outstanding_s / transfer_s;
}

/* ---- proto probe, view step: change point of a per-size cost curve ---- */

/* Least squares y = a + b x over x[0..n-1] (n >= 2, x not all equal); returns the residual sum. */
static double line_fit(int n, const double *x, const double *y, double *a, double *b)
{
    double mx = 0.0, my = 0.0, sxx = 0.0, sxy = 0.0, rss = 0.0;
    for (int i = 0; i < n; i++)
        mx += x[i], my += y[i];
    mx /= n, my /= n;
    for (int i = 0; i < n; i++)
        sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
    *b = sxy / sxx;
    *a = my - *b * mx;
    for (int i = 0; i < n; i++) {
        double r = y[i] - (*a + *b * x[i]);
        rss += r * r;
    }
    return rss;
}

/* Both lines of the break k of x[0..n-1] (k points left, n - k right) and the verdict. */
static void fit_at(int n, const double *x, const double *y, int k, double noise, hmb_changepoint *out)
{
    out->index = k;
    out->rss = line_fit(k, x, y, &out->a_left, &out->b_left) +
               line_fit(n - k, x + k, y + k, &out->a_right, &out->b_right);
    out->lo = x[k - 1];
    out->hi = x[k];
    const double mid = (out->lo + out->hi) / 2;
    out->jump = (out->a_right + out->b_right * mid) - (out->a_left + out->b_left * mid);
    out->sigma = sqrt(out->rss / (n - 4)); /* n >= 2 HMB_CHANGEPOINT_MIN_SIDE > 4 */
    const double spread = noise > out->sigma ? noise : out->sigma;
    out->step = fabs(out->jump) > 0.0 && fabs(out->jump) >= HMB_CHANGEPOINT_MIN_SIGMAS * spread;
}

static int usable_curve(int n, const double *x, const double *y)
{
    if (n < 2 * HMB_CHANGEPOINT_MIN_SIDE)
        return 0;
    for (int i = 0; i < n; i++)
        if (!isfinite(x[i]) || !isfinite(y[i]) || (i > 0 && !(x[i] > x[i - 1])))
            return 0;
    return 1;
}

/* A changepoint without a fit: index -1, every number NaN. */
static hmb_changepoint no_fit(void)
{
    return (hmb_changepoint){.index = -1, .lo = NAN, .hi = NAN, .a_left = NAN, .b_left = NAN, .a_right = NAN,
                             .b_right = NAN, .jump = NAN, .rss = NAN, .rss_line = NAN, .sigma = NAN};
}

int hmb_changepoint_fit(int n, const double *x, const double *y, double noise, hmb_changepoint *out)
{
    if (!out)
        return -1;
    *out = no_fit();
    if (!usable_curve(n, x, y))
        return -1;
    int best = -1;
    double best_rss = HUGE_VAL, a, b;
    for (int k = HMB_CHANGEPOINT_MIN_SIDE; k <= n - HMB_CHANGEPOINT_MIN_SIDE; k++) {
        double rss = line_fit(k, x, y, &a, &b) + line_fit(n - k, x + k, y + k, &a, &b);
        if (rss < best_rss)
            best = k, best_rss = rss;
    }
    fit_at(n, x, y, best, noise, out);
    out->rss_line = line_fit(n, x, y, &a, &b);
    return 0;
}

int hmb_changepoint_side(const hmb_changepoint *cp, double x, double y)
{
    if (!cp || cp->index < 0 || !isfinite(x) || !isfinite(y))
        return -1;
    double left = fabs(y - (cp->a_left + cp->b_left * x)), right = fabs(y - (cp->a_right + cp->b_right * x));
    return right < left;
}

static int compare_double_values(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_in_place(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_double_values);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double hmb_cost_noise(int n, const double *y)
{
    if (n < 3)
        return NAN;
    double *d = malloc((size_t)(n - 1) * sizeof *d);
    if (!d)
        return NAN;
    for (int i = 0; i + 1 < n; i++)
        d[i] = y[i + 1] - y[i];
    const double centre = median_in_place(d, n - 1);
    for (int i = 0; i + 1 < n; i++)
        d[i] = fabs(d[i] - centre);
    const double mad = median_in_place(d, n - 1);
    free(d);
    return 1.4826 * mad / sqrt(2.0);
}

/* Binary segmentation: split [lo, hi) at its best break while the split lowers the residual by
 * more than a BIC penalty, 3 ln(points) noise^2 (two more line parameters and a location); the
 * breaks, in increasing order, go to idx. */
static void segment(const double *x, const double *y, int lo, int hi, double noise, int *idx, int *nidx)
{
    hmb_changepoint cp;
    if (hmb_changepoint_fit(hi - lo, x + lo, y + lo, noise, &cp) != 0 ||
        !(cp.rss_line - cp.rss > 3.0 * log(hi - lo) * noise * noise))
        return;
    const int k = lo + cp.index;
    segment(x, y, lo, k, noise, idx, nidx);
    idx[(*nidx)++] = k;
    segment(x, y, k, hi, noise, idx, nidx);
}

/* hmb_cost_noise, at least 1e-9 of the curve's largest value: exact synthetic lines' rounding is
 * not a step. */
static double curve_noise(int n, const double *y)
{
    double scale = 0.0;
    for (int i = 0; i < n; i++)
        scale = fabs(y[i]) > scale ? fabs(y[i]) : scale;
    const double noise = hmb_cost_noise(n, y);
    return noise > 1e-9 * scale ? noise : 1e-9 * scale;
}

int hmb_changepoint_steps(int n, const double *x, const double *y, hmb_changepoint *out, int max_out)
{
    if (!usable_curve(n, x, y))
        return -1;
    const double noise = curve_noise(n, y);
    int *idx = malloc((size_t)n * sizeof *idx), nidx = 0, count = 0;
    if (!idx)
        return -1;
    segment(x, y, 0, n, noise, idx, &nidx);
    for (int j = 0; j < nidx; j++) {
        const int lo = j > 0 ? idx[j - 1] : 0, hi = j + 1 < nidx ? idx[j + 1] : n;
        hmb_changepoint cp;
        fit_at(hi - lo, x + lo, y + lo, idx[j] - lo, noise, &cp);
        if (!cp.step)
            continue;
        cp.index = idx[j];
        double a, b;
        cp.rss_line = line_fit(hi - lo, x + lo, y + lo, &a, &b);
        if (count < max_out)
            out[count] = cp;
        count++;
    }
    free(idx);
    return count;
}

int hmb_clearest_step(int n, const double *x, const double *y, int relative, hmb_changepoint *out)
{
    if (!out)
        return -1;
    *out = no_fit();
    if (!usable_curve(n, x, y))
        return -1;
    hmb_changepoint *steps = malloc((size_t)n * sizeof *steps);
    if (!steps)
        return -1;
    const int count = hmb_changepoint_steps(n, x, y, steps, n);
    const double noise = curve_noise(n, y);
    double best_score = -1.0;
    for (int j = 0; j < count; j++) {
        const hmb_changepoint *cp = &steps[j];
        const double left = cp->a_left + cp->b_left * (cp->lo + cp->hi) / 2, right = left + cp->jump;
        const double score =
            relative ? fabs(cp->jump) / (fabs(left) + fabs(right)) : fabs(cp->jump) / fmax(noise, cp->sigma);
        if (score > best_score)
            best_score = score, *out = steps[j];
    }
    free(steps);
    return count > 0;
}

void hmb_running_median3(int n, const double *y, double *out)
{
    for (int i = 0; i < n; i++) {
        if (i == 0 || i == n - 1) {
            out[i] = y[i];
            continue;
        }
        const double a = y[i - 1], b = y[i], c = y[i + 1];
        if (isnan(a) || isnan(b) || isnan(c))
            out[i] = NAN;
        else
            out[i] = a > b ? (b > c ? b : a > c ? c : a) : (a > c ? a : b > c ? c : b);
    }
}
