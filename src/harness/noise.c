/* Noise models for the compute load (SPEC §2, seed 000 §3.3).
 *
 * Draws come from a counter-based generator: every random number is a hash of
 * (seed, rank, thread, iteration, stream), so a draw is a pure function of its coordinates.
 * Consequences we rely on: no shared generator state between threads (thread-safe without
 * locks), the two phases of a paired design see identical draws, a run is reproducible from
 * its seed, and a thread's draws do not depend on how many other threads drew before it. */
#include "core.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Independent streams of the same coordinates. */
enum { STREAM_UNIFORM = 1, STREAM_GAUSS_A, STREAM_GAUSS_B, STREAM_SINGLE_THREAD };


uint64_t hmb_mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t hash_coords(uint64_t seed, int rank, int tid, long iter, int stream)
{
    uint64_t h = hmb_mix64(seed);
    h = hmb_mix64(h ^ (uint64_t)(uint32_t)rank);
    h = hmb_mix64(h ^ (uint64_t)(uint32_t)tid);
    h = hmb_mix64(h ^ (uint64_t)iter);
    return hmb_mix64(h ^ (uint64_t)stream);
}

/* Uniform in [0, 1) with 53 random bits. */
static double unit_interval(uint64_t h) { return (double)(h >> 11) * 0x1.0p-53; }

int hmb_noise_parse(const char *spec, hmb_noise *out, char *err, size_t errlen)
{
    static const char *const usage = "use none, single:P, uniform:P or gaussian:P";
    hmb_noise parsed = {HMB_NOISE_NONE, 0.0, 0, 0};
    if (!spec || !*spec) {
        hmb_set_err(err, errlen, "empty noise model (%s)", usage);
        return -1;
    }
    const char *colon = strchr(spec, ':');
    size_t name_len = colon ? (size_t)(colon - spec) : strlen(spec);
    static const struct {
        const char *name;
        hmb_noise_kind kind;
    } models[] = {{"none", HMB_NOISE_NONE},
                  {"single", HMB_NOISE_SINGLE},
                  {"uniform", HMB_NOISE_UNIFORM},
                  {"gaussian", HMB_NOISE_GAUSSIAN}};
    int found = -1;
    for (int i = 0; i < 4; i++)
        if (strlen(models[i].name) == name_len && !strncmp(spec, models[i].name, name_len))
            found = i;
    if (found < 0) {
        hmb_set_err(err, errlen, "\"%s\": unknown noise model (%s)", spec, usage);
        return -1;
    }
    parsed.kind = models[found].kind;
    if (parsed.kind == HMB_NOISE_NONE) {
        if (colon) {
            hmb_set_err(err, errlen, "\"%s\": none takes no percentage", spec);
            return -1;
        }
    } else {
        if (!colon || !colon[1]) {
            hmb_set_err(err, errlen, "\"%s\": needs a percentage, e.g. %s:10", spec, models[found].name);
            return -1;
        }
        double percent;
        if (hmb_parse_number(colon + 1, &percent)) { /* plain decimal: no hex, inf, nan or spaces */
            hmb_set_err(err, errlen, "\"%s\": \"%s\" is not a number", spec, colon + 1);
            return -1;
        }
        if (percent < 0.0) {
            hmb_set_err(err, errlen, "\"%s\": the percentage must not be negative", spec);
            return -1;
        }
        parsed.percent = percent;
    }
    *out = parsed;
    return 0;
}

int hmb_noise_single_thread(const hmb_noise *nz, int rank, int nthreads, long iter)
{
    if (nthreads < 1)
        return 0;
    if (!nz->thread_random)
        return (int)(nz->seed % (uint64_t)nthreads);
    /* tid fixed to -1: the choice is per (seed, rank, iter), the same for every thread. */
    return (int)(hash_coords(nz->seed, rank, -1, iter, STREAM_SINGLE_THREAD) % (uint64_t)nthreads);
}

int64_t hmb_noise_draw(const hmb_noise *nz, int rank, int tid, int nthreads, long iter, int64_t base_ns)
{
    if (nz->kind == HMB_NOISE_NONE || base_ns <= 0)
        return base_ns;
    const double base = (double)base_ns, frac = nz->percent / 100.0;
    double amount = base;
    switch (nz->kind) {
    case HMB_NOISE_SINGLE:
        if (tid == hmb_noise_single_thread(nz, rank, nthreads, iter))
            amount = base * (1.0 + frac);
        break;
    case HMB_NOISE_UNIFORM:
        amount = base * (1.0 + frac * unit_interval(hash_coords(nz->seed, rank, tid, iter, STREAM_UNIFORM)));
        break;
    case HMB_NOISE_GAUSSIAN: {
        /* Box-Muller; u1 in (0, 1] so log(u1) is finite. */
        double u1 = 1.0 - unit_interval(hash_coords(nz->seed, rank, tid, iter, STREAM_GAUSS_A));
        double u2 = unit_interval(hash_coords(nz->seed, rank, tid, iter, STREAM_GAUSS_B));
        double z = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
        amount = base * (1.0 + frac * z);
        if (amount < 0.0)
            amount = 0.0; /* truncated at 0: negative work does not exist */
        break;
    }
    case HMB_NOISE_NONE:
        break;
    }
    if (amount >= 9.2e18)
        return INT64_MAX;
    return (int64_t)llround(amount);
}

int64_t hmb_noise_max_draw(const hmb_noise *nz, int64_t base_ns)
{
    if (nz->kind == HMB_NOISE_NONE || base_ns <= 0)
        return base_ns;
    /* unit_interval's smallest step is 2^-53, so Box-Muller's u1 >= 2^-53 and
     * |z| <= sqrt(-2 ln 2^-53) = sqrt(106 ln 2) = 8.572 */
    const double z_max = nz->kind == HMB_NOISE_GAUSSIAN ? sqrt(106.0 * log(2.0)) : 1.0;
    double amount = (double)base_ns * (1.0 + nz->percent / 100.0 * z_max);
    return amount >= 9.2e18 ? INT64_MAX : (int64_t)ceil(amount);
}
