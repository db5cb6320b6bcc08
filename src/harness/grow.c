/* The growable array (core.h, hmb_grow): one home for every list the harness builds. */
#include <stdlib.h>

#include "core.h"

void *hmb_grow(void *items, size_t *capacity, size_t count, size_t elem)
{
    if (count < *capacity)
        return items;
    size_t cap = *capacity ? 2 * *capacity : 16;
    while (cap <= count)
        cap *= 2;
    void *p = realloc(items, cap * elem);
    if (!p)
        abort(); /* out of memory while building a list: nothing sensible to report */
    *capacity = cap;
    return p;
}
