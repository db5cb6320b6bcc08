/* A benchmark's metric list, built at run time from its descriptor: the fixed metrics, then each
 * mode metric template instantiated for every mode that declares it (template by template, modes
 * in their declared order). No fixed cap: the list is as long as the declarations make it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

/* text with every "{mode}" replaced by mode (a new string). */
static char *substitute(const char *text, const char *mode)
{
    static const char token[] = "{mode}";
    const size_t tlen = sizeof token - 1, mlen = strlen(mode);
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, token)); p += tlen)
        n++;
    char *out = malloc(strlen(text) + n * mlen + 1), *w = out;
    if (!out)
        abort();
    for (const char *p = text, *q; *p; p = q + tlen) {
        if (!(q = strstr(p, token))) {
            strcpy(w, p);
            return out;
        }
        memcpy(w, p, (size_t)(q - p));
        w += q - p;
        memcpy(w, mode, mlen);
        w += mlen;
        *w = '\0';
    }
    *w = '\0';
    return out;
}

static int count_metrics(const hmb_metric *m)
{
    int n = 0;
    while (m && m[n].name)
        n++;
    return n;
}

int hmb_bench_nmodes(const hmb_bench *b)
{
    int n = 0;
    while (b->modes && b->modes[n].name)
        n++;
    return n;
}

void hmb_metric_list_build(hmb_metric_list *l, const hmb_bench *b)
{
    memset(l, 0, sizeof *l);
    const int nfixed = count_metrics(b->metrics), ntemplates = count_metrics(b->mode_metrics);
    const int nmodes = hmb_bench_nmodes(b);
    int total = nfixed;
    for (int k = 0; k < ntemplates; k++)
        for (int m = 0; m < nmodes; m++)
            total += (b->modes[m].metrics >> k) & 1u;
    l->items = calloc((size_t)(total ? total : 1), sizeof *l->items);
    l->owned = calloc((size_t)(total ? total : 1), sizeof *l->owned);
    const int nslots = ntemplates * nmodes;
    l->slot = malloc((size_t)(nslots > 0 ? nslots : 1) * sizeof *l->slot);
    if (!l->items || !l->owned || !l->slot)
        abort();
    l->ntemplates = ntemplates;
    l->nmodes = nmodes;
    for (int i = 0; i < nfixed; i++)
        l->items[l->count++] = b->metrics[i];
    for (int k = 0; k < ntemplates; k++)
        for (int m = 0; m < nmodes; m++) {
            l->slot[k * nmodes + m] = -1;
            if (!((b->modes[m].metrics >> k) & 1u))
                continue;
            hmb_metric *mt = &l->items[l->count];
            *mt = b->mode_metrics[k];
            mt->name = l->owned[l->count] = substitute(b->mode_metrics[k].name, b->modes[m].name);
            /* the description is owned too: freed with the list */
            mt->description = substitute(b->mode_metrics[k].description ? b->mode_metrics[k].description : "",
                                         b->modes[m].name);
            l->slot[k * nmodes + m] = l->count++;
        }
    l->nowned = l->count;
    l->nfixed = nfixed;
}

void hmb_metric_list_free(hmb_metric_list *l)
{
    for (int i = l->nfixed; i < l->nowned; i++) {
        free(l->owned[i]);
        free((char *)l->items[i].description);
    }
    free(l->owned);
    free(l->items);
    free(l->slot);
    memset(l, 0, sizeof *l);
}

int hmb_metric_list_find(const hmb_metric_list *l, const char *name, size_t len)
{
    for (int i = 0; i < l->count; i++)
        if (strlen(l->items[i].name) == len && strncmp(l->items[i].name, name, len) == 0)
            return i;
    return -1;
}

int hmb_metric_list_slot(const hmb_metric_list *l, int k, int mode)
{
    if (k < 0 || k >= l->ntemplates || mode < 0 || mode >= l->nmodes)
        return -1;
    return l->slot[k * l->nmodes + mode];
}
