/* The pure parts of proto (SPEC §3.7): the switch-point search of the probe (a scan of a size
 * grid, then a bisection of every interval whose ends behave differently, down to the element
 * size; the probe itself is the caller's predicate), the memory-per-peer formulas of the
 * trade-off, and the resident-memory reader. The probe's verdict formulas are in metrics.c. docs/metrics.md ("proto"). */
#include <math.h>
#include <stdio.h>

#include "hmb/memory.h"
#include "hmb/metrics.h"

int hmb_find_switches(const size_t *grid, int n, size_t element, hmb_size_predicate progressed, void *arg,
                      size_t *lo_hi, int *progressed_after, int max_switches)
{
    if (n < 1 || element < 1 || !grid || !progressed)
        return -1;
    for (int i = 0; i < n; i++)
        if (grid[i] % element || (i > 0 && grid[i] <= grid[i - 1]))
            return -1;
    int found = 0;
    int state_lo = progressed(grid[0], arg);
    for (int i = 1; i < n; i++) {
        int state_hi = progressed(grid[i], arg);
        if (state_hi != state_lo) {
            size_t lo = grid[i - 1], hi = grid[i];
            while (hi - lo > element) {
                size_t mid = lo + (hi - lo) / element / 2 * element;
                if (progressed(mid, arg) == state_lo)
                    lo = mid;
                else
                    hi = mid;
            }
            if (found < max_switches) {
                lo_hi[2 * found] = lo;
                lo_hi[2 * found + 1] = hi;
                progressed_after[found] = state_hi;
            }
            found++;
        }
        state_lo = state_hi;
    }
    return found;
}

double hmb_memory_per_peer_kB(double rss_init_kB, double rss_pairs_kB, int peers)
{
    return peers > 0 ? (rss_pairs_kB - rss_init_kB) / peers : NAN;
}

double hmb_memory_projected_kB(double rss_init_kB, double per_peer_kB, int peers)
{
    return rss_init_kB + per_peer_kB * peers;
}

int hmb_memory_kB(long *rss_kB, long *hwm_kB)
{
    *rss_kB = *hwm_kB = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        sscanf(line, "VmRSS: %ld", rss_kB);
        sscanf(line, "VmHWM: %ld", hwm_kB);
    }
    fclose(f);
    return *rss_kB >= 0 && *hwm_kB >= 0;
}
