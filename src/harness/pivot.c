/* The seed-style summary table (bench->pivot_metrics): after all points, for each combination
 * of the non-size parameters, one row per listed metric with message sizes as columns and the
 * medians as cells (IMB-ASYNC's layout). Rank 0 only; fed from the point loop. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"

#define PIVOT_MAX_METRICS 8
#define PIVOT_CELL_WIDTH 12

typedef struct {
    char group[256]; /* "op=pt2pt progress=none" */
    size_t size_bytes;
    double median[PIVOT_MAX_METRICS];
} pivot_cell;

struct hmb_pivot {
    int nmetrics;
    int metric_index[PIVOT_MAX_METRICS]; /* into bench->metrics, -1 if unknown */
    char metric_name[PIVOT_MAX_METRICS][48];
    int count;
    size_t capacity;
    pivot_cell *cells;
};

static hmb_pivot *pivot_create(const hmb_ctx *ctx)
{
    const hmb_bench *b = ctx->bench;
    hmb_pivot *pv = calloc(1, sizeof *pv);
    if (!pv)
        return NULL;
    const char *p = b->pivot_metrics;
    while (*p && pv->nmetrics < PIVOT_MAX_METRICS) {
        size_t n = strcspn(p, ",");
        char *name = pv->metric_name[pv->nmetrics];
        snprintf(name, sizeof pv->metric_name[0], "%.*s", (int)n, p);
        p += n + (p[n] == ',');
        if (!hmb_table_metric_selected(ctx, name))
            continue; /* --metric names others */
        pv->metric_index[pv->nmetrics] = hmb_metric_list_find(&ctx->metrics, name, strlen(name));
        pv->nmetrics++;
    }
    return pv;
}

void hmb_pivot_add(hmb_ctx *ctx, const hmb_point *pt, const hmb_summary *summaries)
{
    if (ctx->rank != 0 || !ctx->bench->pivot_metrics)
        return;
    if (!ctx->pivot && !(ctx->pivot = pivot_create(ctx)))
        return;
    hmb_pivot *pv = ctx->pivot;
    pv->cells = hmb_grow(pv->cells, &pv->capacity, (size_t)pv->count, sizeof *pv->cells);
    pivot_cell *c = &pv->cells[pv->count++];
    char described[sizeof c->group];
    hmb_point_describe(pt, described, sizeof described); /* "size=4K op=pt2pt ..." */
    const char *rest = strchr(described, ' ');             /* the row group: all but the size */
    snprintf(c->group, sizeof c->group, "%s", rest ? rest + 1 : "(all)");
    c->size_bytes = pt->size_bytes;
    for (int i = 0; i < pv->nmetrics; i++) {
        int m = pv->metric_index[i];
        c->median[i] = summaries && m >= 0 && summaries[m].count > 0 ? summaries[m].median : NAN;
    }
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* Group i's rows for sizes[from..to). */
static void print_block(const hmb_pivot *pv, int i, const size_t *sizes, int from, int to, int label_width)
{
    printf("# %s\n%-*s", pv->cells[i].group, label_width, "");
    for (int s = from; s < to; s++) {
        char label[32];
        hmb_format_size(sizes[s], label, sizeof label);
        printf(" %*s", PIVOT_CELL_WIDTH, label);
    }
    printf("\n");
    for (int m = 0; m < pv->nmetrics; m++) {
        printf("%-*s", label_width, pv->metric_name[m]);
        for (int s = from; s < to; s++) {
            double v = NAN;
            for (int k = i; k < pv->count; k++)
                if (pv->cells[k].size_bytes == sizes[s] && strcmp(pv->cells[k].group, pv->cells[i].group) == 0)
                    v = pv->cells[k].median[m];
            if (isnan(v))
                printf(" %*s", PIVOT_CELL_WIDTH, "-");
            else
                printf(" %*.4g", PIVOT_CELL_WIDTH, v);
        }
        printf("\n");
    }
}

void hmb_pivot_print(hmb_ctx *ctx)
{
    hmb_pivot *pv = ctx->pivot;
    if (ctx->rank != 0 || !pv || pv->count == 0 || pv->nmetrics == 0)
        return;
    size_t *sizes = malloc((size_t)pv->count * sizeof *sizes);
    if (!sizes)
        return;
    int nsizes = 0;
    for (int i = 0; i < pv->count; i++) {
        int seen = 0;
        for (int k = 0; k < nsizes; k++)
            seen |= sizes[k] == pv->cells[i].size_bytes;
        if (!seen)
            sizes[nsizes++] = pv->cells[i].size_bytes;
    }
    qsort(sizes, (size_t)nsizes, sizeof *sizes, cmp_size);

    int label_width = 16; /* the longest metric name, at least */
    for (int m = 0; m < pv->nmetrics; m++)
        if ((int)strlen(pv->metric_name[m]) > label_width)
            label_width = (int)strlen(pv->metric_name[m]);

    /* As many size columns as fit the table width; more sizes continue in further blocks. */
    int per_block = (HMB_TABLE_COLUMNS - label_width) / (1 + PIVOT_CELL_WIDTH);
    if (per_block < 1)
        per_block = 1;
    printf("\n# summary (medians; sizes in bytes as columns)\n");
    for (int i = 0; i < pv->count; i++) {
        int first = 1; /* print each group once, at its first cell */
        for (int k = 0; k < i; k++)
            first &= strcmp(pv->cells[k].group, pv->cells[i].group) != 0;
        if (!first)
            continue;
        for (int from = 0; from < nsizes; from += per_block)
            print_block(pv, i, sizes, from, from + per_block < nsizes ? from + per_block : nsizes, label_width);
    }
    fflush(stdout);
    free(sizes);
}

void hmb_pivot_free(hmb_ctx *ctx)
{
    if (ctx->pivot) {
        free(ctx->pivot->cells);
        free(ctx->pivot);
        ctx->pivot = NULL;
    }
}
