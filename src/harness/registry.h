/* The benchmark registry and the descriptors for tools (registry.c). */
#ifndef HMB_REGISTRY_H
#define HMB_REGISTRY_H

#include <stdio.h>

#include "hmb/bench.h"

const hmb_bench *hmb_registry_find(const char *name);
/* Sorted by group then name; returns the count, *out owned by the caller (free). */
int hmb_registry_list(const hmb_bench ***out);
/* Descriptors as one JSON line (docs/output-schema.md): every benchmark, or only `only`. */
void hmb_registry_describe_json(FILE *out, const hmb_bench *only);

#endif
