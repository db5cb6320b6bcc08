/* CPU sets without MPI: cpulists, the spare CPUs a progress thread may use, the
 * spare_core_when rule of a descriptor, and the threads of this process (/proc/self/task).
 * Pure enough for libhmbcore.so, so the mask arithmetic is unit-tested through ctypes. */
#define _GNU_SOURCE /* sched_getaffinity, cpu_set_t */
#include <ctype.h>
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

void hmb_cpus_set(hmb_cpus *s, int cpu)
{
    if (cpu >= 0 && cpu < HMB_MAX_CPUS)
        s->bits[cpu / 64] |= 1ull << (cpu % 64);
}

int hmb_cpus_has(const hmb_cpus *s, int cpu)
{
    return cpu >= 0 && cpu < HMB_MAX_CPUS && (s->bits[cpu / 64] >> (cpu % 64) & 1u);
}

int hmb_cpus_count(const hmb_cpus *s)
{
    int n = 0;
    for (int w = 0; w < HMB_CPUS_WORDS; w++)
        n += __builtin_popcountll(s->bits[w]);
    return n;
}

int hmb_cpus_first(const hmb_cpus *s)
{
    for (int cpu = 0; cpu < HMB_MAX_CPUS; cpu++)
        if (hmb_cpus_has(s, cpu))
            return cpu;
    return -1;
}

void hmb_cpus_or(hmb_cpus *into, const hmb_cpus *s)
{
    for (int w = 0; w < HMB_CPUS_WORDS; w++)
        into->bits[w] |= s->bits[w];
}

int hmb_cpus_intersect(const hmb_cpus *a, const hmb_cpus *b)
{
    for (int w = 0; w < HMB_CPUS_WORDS; w++)
        if (a->bits[w] & b->bits[w])
            return 1;
    return 0;
}

void hmb_cpus_minus(hmb_cpus *out, const hmb_cpus *a, const hmb_cpus *b)
{
    for (int w = 0; w < HMB_CPUS_WORDS; w++)
        out->bits[w] = a->bits[w] & ~b->bits[w];
}

/* "0-3,6,8-9" (the kernel's cpulist format); "" for the empty set. */
void hmb_cpulist_format(const hmb_cpus *s, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int cpu = 0; cpu < HMB_MAX_CPUS && used + 24 < len; cpu++) {
        if (!hmb_cpus_has(s, cpu))
            continue;
        int last = cpu;
        while (hmb_cpus_has(s, last + 1))
            last++;
        const char *sep = used ? "," : "";
        if (last == cpu)
            used += (size_t)snprintf(buf + used, len - used, "%s%d", sep, cpu);
        else
            used += (size_t)snprintf(buf + used, len - used, "%s%d-%d", sep, cpu, last);
        cpu = last;
    }
}

int hmb_cpulist_parse(const char *text, hmb_cpus *out)
{
    memset(out, 0, sizeof *out);
    const char *p = text;
    while (*p) {
        char *end;
        if (!isdigit((unsigned char)*p))
            return -1;
        long first = strtol(p, &end, 10), last = first;
        if (*end == '-') {
            if (!isdigit((unsigned char)end[1]))
                return -1;
            last = strtol(end + 1, &end, 10);
        }
        if (first > last || last >= HMB_MAX_CPUS)
            return -1;
        for (long cpu = first; cpu <= last; cpu++)
            hmb_cpus_set(out, (int)cpu);
        if (*end == ',' && end[1] != '\0')
            end++;
        else if (*end != '\0')
            return -1;
        p = end;
    }
    return 0;
}

int hmb_spare_cpulist(const char *rank_cpus, const char *compute_cpus, char *spare, size_t len)
{
    hmb_cpus rank, compute, rest;
    if (hmb_cpulist_parse(rank_cpus, &rank) != 0 || hmb_cpulist_parse(compute_cpus, &compute) != 0)
        return -1;
    hmb_cpus_minus(&rest, &rank, &compute);
    hmb_cpulist_format(&rest, spare, len);
    return hmb_cpus_count(&rest);
}

int hmb_cpus_oversubscribed(int threads, const hmb_cpus *occupied)
{
    return threads > hmb_cpus_count(occupied);
}

int hmb_spare_rule_option(const char *rule, char *option, size_t len)
{
    const char *eq = rule ? strchr(rule, '=') : NULL;
    if (!eq || eq == rule || eq[1] == '\0' || (size_t)(eq - rule) >= len)
        return -1;
    snprintf(option, len, "%.*s", (int)(eq - rule), rule);
    return 0;
}

/* Is the text before any ':' of one element of `list` (comma-separated) equal to `word`? */
static int list_has_head(const char *list, const char *word, size_t word_len)
{
    for (const char *p = list; p && *p;) {
        size_t item = strcspn(p, ",");
        size_t head = strcspn(p, ",:");
        if (head > item)
            head = item;
        if (head == word_len && strncmp(p, word, word_len) == 0)
            return 1;
        p += item;
        if (*p == ',')
            p++;
    }
    return 0;
}

int hmb_spare_rule_matches(const char *rule, const char *values)
{
    const char *eq = rule ? strchr(rule, '=') : NULL;
    if (!eq || !values)
        return 0;
    for (const char *p = eq + 1; *p;) {
        size_t len = strcspn(p, ",");
        if (len > 0 && list_has_head(values, p, len))
            return 1;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

int hmb_cpus_of_thread(int tid, hmb_cpus *out)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    memset(out, 0, sizeof *out);
    if (sched_getaffinity(tid, sizeof set, &set) != 0)
        return -1;
    for (int cpu = 0; cpu < CPU_SETSIZE && cpu < HMB_MAX_CPUS; cpu++)
        if (CPU_ISSET(cpu, &set))
            hmb_cpus_set(out, cpu);
    return 0;
}

int hmb_cpus_apply(int tid, const hmb_cpus *s)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu = 0; cpu < CPU_SETSIZE && cpu < HMB_MAX_CPUS; cpu++)
        if (hmb_cpus_has(s, cpu))
            CPU_SET(cpu, &set);
    return sched_setaffinity(tid, sizeof set, &set);
}

int hmb_task_list(int *tids, int max)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < max;)
        if (isdigit((unsigned char)e->d_name[0]))
            tids[n++] = atoi(e->d_name);
    closedir(d);
    return n;
}

int hmb_task_stat(int tid, int *last_cpu, long long *cpu_ticks)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    /* Fields after the command name "(...)", which may itself hold spaces: state is field 3,
     * utime 14, stime 15, processor 39. */
    char *p = strrchr(line, ')');
    if (!p)
        return -1;
    long long utime = 0, stime = 0;
    int cpu = -1, field = 2;
    char *save = NULL;
    for (char *tok = strtok_r(p + 1, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        field++;
        if (field == 14)
            utime = atoll(tok);
        else if (field == 15)
            stime = atoll(tok);
        else if (field == 39)
            cpu = atoi(tok);
    }
    if (last_cpu)
        *last_cpu = cpu;
    if (cpu_ticks)
        *cpu_ticks = utime + stime;
    return 0;
}
