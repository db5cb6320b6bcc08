/* Counterbalanced orders for paired designs (hmb/timing.h, hmb_phase_order). Pure. */
#include "hmb/timing.h"

int hmb_phase_orders(int k)
{
    if (k < 1)
        return 0;
    if (k == 1)
        return 1;
    return k % 2 == 0 ? k : 2 * k;
}

int hmb_phase_order(int k, long iter, int *order)
{
    int n = hmb_phase_orders(k);
    if (n == 0 || iter < 0)
        return -1;
    int row = (int)(iter % n), reversed = row >= k;
    if (reversed)
        row -= k;
    /* Williams' balanced Latin square: row r is r + (0, 1, k-1, 2, k-2, ...) mod k; for odd k the
     * mirrored rows are added, so every phase directly precedes every other equally often. */
    for (int j = 0; j < k; j++) {
        int c = j == 0 ? 0 : (j % 2 == 1 ? (j + 1) / 2 : k - j / 2);
        order[reversed ? k - 1 - j : j] = (row + c) % k;
    }
    return 0;
}
