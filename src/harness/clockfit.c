/* The clock model across processes, as pure functions (no MPI), so that tests can check the fit
 * on an injected skew through libhmbcore. clocks.c takes the measurements.
 *
 * A remote clock reads t_remote = t + offset(t) when rank 0's clock reads t. ReproMPI's HCA
 * models offset(t) = offset_ref + drift * (t - t_ref): estimate the offset at two or more points
 * in time and fit a straight line (least squares). drift is dimensionless (s/s; x 1e6 = ppm). */
#include "core.h"

#include <math.h>

double hmb_clock_exchange_offset(double t_send_s, double t_remote_s, double t_recv_s)
{
    /* The remote reading is assumed to sit at the midpoint of the round trip; the error is at
     * most half the round trip, which is why the shortest round trip of a group is kept. */
    return t_remote_s - 0.5 * (t_send_s + t_recv_s);
}

int hmb_clock_fit(int n, const double *t_s, const double *offset_s, double t_ref_s, hmb_clock_model *out)
{
    if (n < 1 || !t_s || !offset_s || !out)
        return -1;
    double t_mean = 0, y_mean = 0;
    for (int i = 0; i < n; i++) {
        t_mean += t_s[i];
        y_mean += offset_s[i];
    }
    t_mean /= n;
    y_mean /= n;
    double sxy = 0, sxx = 0;
    for (int i = 0; i < n; i++) {
        sxy += (t_s[i] - t_mean) * (offset_s[i] - y_mean);
        sxx += (t_s[i] - t_mean) * (t_s[i] - t_mean);
    }
    /* One point in time (or one point): an offset, no drift can be told. */
    out->drift = sxx > 0 ? sxy / sxx : 0.0;
    out->t_ref_s = t_ref_s;
    out->offset_s = y_mean + out->drift * (t_ref_s - t_mean);
    out->residual_max_s = 0;
    for (int i = 0; i < n; i++) {
        double residual = fabs(offset_s[i] - hmb_clock_model_offset(out, t_s[i]));
        if (residual > out->residual_max_s)
            out->residual_max_s = residual;
    }
    return 0;
}

double hmb_clock_model_offset(const hmb_clock_model *m, double t_s)
{
    return m->offset_s + m->drift * (t_s - m->t_ref_s);
}
