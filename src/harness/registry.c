/* Benchmark registry: every src/bench file puts a pointer to its descriptor into the linker
 * section "hmb_benchmarks" (HMB_REGISTER); GNU ld provides the section's bounds. */
#include <stdlib.h>
#include <string.h>

#include "ctx.h"

extern const hmb_bench *const __start_hmb_benchmarks[] __attribute__((weak));
extern const hmb_bench *const __stop_hmb_benchmarks[] __attribute__((weak));

const hmb_bench *hmb_registry_find(const char *name)
{
    if (!__start_hmb_benchmarks)
        return NULL;
    for (const hmb_bench *const *b = __start_hmb_benchmarks; b < __stop_hmb_benchmarks; b++)
        if (*b && strcmp((*b)->name, name) == 0)
            return *b;
    return NULL;
}

static int by_group_then_name(const void *a, const void *b)
{
    const hmb_bench *x = *(const hmb_bench *const *)a, *y = *(const hmb_bench *const *)b;
    int g = strcmp(x->group, y->group);
    return g ? g : strcmp(x->name, y->name);
}

int hmb_registry_list(const hmb_bench ***out)
{
    int n = 0;
    if (__start_hmb_benchmarks)
        n = (int)(__stop_hmb_benchmarks - __start_hmb_benchmarks);
    const hmb_bench **list = calloc((size_t)(n ? n : 1), sizeof *list);
    if (!list)
        abort();
    int count = 0;
    for (int i = 0; i < n; i++)
        if (__start_hmb_benchmarks[i])
            list[count++] = __start_hmb_benchmarks[i];
    qsort(list, (size_t)count, sizeof *list, by_group_then_name);
    *out = list;
    return count;
}
