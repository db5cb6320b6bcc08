/* MPI_T performance variables: one session, variables found by name, bound to a communicator
 * or to nothing, started/stopped/reset/read with respect for their class and type. A name the
 * library does not expose is "unavailable", never an error: the benchmark then reports what it
 * can measure without it (docs/methodology.md, "MPI_T performance variables"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "env.h"

typedef struct {
    char *name;
    const char *reason; /* why unavailable; NULL when available */
    int index, var_class, bind, readonly, continuous;
    MPI_Datatype type;
    int count;       /* values per read */
    int type_bytes;  /* size of one value */
    int started;
    MPI_T_pvar_handle handle;
    void *raw;       /* count values of type, as MPI_T_pvar_read writes them */
} hmb_pvar;

struct hmb_pvars {
    int mpit_ok;  /* the tool interface is up (hmb_mpit_hold) */
    int session_ok;
    MPI_T_pvar_session session;
    MPI_Comm comm; /* the bound object, kept as long as its handles (MPI_T passes its address) */
    int n;
    hmb_pvar *vars;
};

static const char *class_name(int var_class)
{
    switch (var_class) {
    case MPI_T_PVAR_CLASS_STATE: return "state";
    case MPI_T_PVAR_CLASS_LEVEL: return "level";
    case MPI_T_PVAR_CLASS_SIZE: return "size";
    case MPI_T_PVAR_CLASS_PERCENTAGE: return "percentage";
    case MPI_T_PVAR_CLASS_HIGHWATERMARK: return "highwatermark";
    case MPI_T_PVAR_CLASS_LOWWATERMARK: return "lowwatermark";
    case MPI_T_PVAR_CLASS_COUNTER: return "counter";
    case MPI_T_PVAR_CLASS_AGGREGATE: return "aggregate";
    case MPI_T_PVAR_CLASS_TIMER: return "timer";
    case MPI_T_PVAR_CLASS_GENERIC: return "generic";
    default: return "unknown";
    }
}

static const char *binding_name(int bind)
{
    switch (bind) {
    case MPI_T_BIND_NO_OBJECT: return "none";
    case MPI_T_BIND_MPI_COMM: return "communicator";
    case MPI_T_BIND_MPI_DATATYPE: return "datatype";
    case MPI_T_BIND_MPI_ERRHANDLER: return "errhandler";
    case MPI_T_BIND_MPI_FILE: return "file";
    case MPI_T_BIND_MPI_GROUP: return "group";
    case MPI_T_BIND_MPI_OP: return "op";
    case MPI_T_BIND_MPI_REQUEST: return "request";
    case MPI_T_BIND_MPI_WIN: return "window";
    case MPI_T_BIND_MPI_MESSAGE: return "message";
    case MPI_T_BIND_MPI_INFO: return "info";
    default: return "unknown";
    }
}

/* The numeric types MPI_T may use for a pvar (MPI 4.0 §15.3.5); NULL for others (MPI_CHAR). */
static const char *type_name(MPI_Datatype type)
{
    if (type == MPI_UNSIGNED) return "unsigned";
    if (type == MPI_UNSIGNED_LONG) return "unsigned long";
    if (type == MPI_UNSIGNED_LONG_LONG) return "unsigned long long";
    if (type == MPI_INT) return "int";
    if (type == MPI_COUNT) return "count";
    if (type == MPI_DOUBLE) return "double";
    return NULL;
}

static double value_at(const void *raw, MPI_Datatype type, int i)
{
    if (type == MPI_UNSIGNED) return ((const unsigned *)raw)[i];
    if (type == MPI_UNSIGNED_LONG) return (double)((const unsigned long *)raw)[i];
    if (type == MPI_UNSIGNED_LONG_LONG) return (double)((const unsigned long long *)raw)[i];
    if (type == MPI_INT) return ((const int *)raw)[i];
    if (type == MPI_COUNT) return (double)((const MPI_Count *)raw)[i];
    return ((const double *)raw)[i]; /* MPI_DOUBLE: type_name() admitted nothing else */
}

/* The unit a value is in: MPI_T gives double timers in MPI_Wtime's unit (seconds) and leaves
 * integer timers' unit to the library's description, so those stay raw ("ticks"). */
static const char *unit_of(int var_class, MPI_Datatype type)
{
    if (var_class == MPI_T_PVAR_CLASS_TIMER)
        return type == MPI_DOUBLE ? "s" : "ticks";
    if (var_class == MPI_T_PVAR_CLASS_PERCENTAGE)
        return "fraction";
    if (var_class == MPI_T_PVAR_CLASS_SIZE || var_class == MPI_T_PVAR_CLASS_STATE ||
        var_class == MPI_T_PVAR_CLASS_GENERIC)
        return "";
    return "count";
}

typedef struct {
    char name[256], desc[1024];
    int verbosity, var_class, bind, readonly, continuous, atomic;
    MPI_Datatype type;
} pvar_info;

static int get_info(int index, pvar_info *info)
{
    int name_len = sizeof info->name, desc_len = sizeof info->desc;
    MPI_T_enum enumtype;
    return MPI_T_pvar_get_info(index, info->name, &name_len, &info->verbosity, &info->var_class, &info->type,
                               &enumtype, info->desc, &desc_len, &info->bind, &info->readonly,
                               &info->continuous, &info->atomic) == MPI_SUCCESS;
}

/* The variable "name" (first in the library's order, whatever its class) or "class:name" (MPICH
 * 4.0.2 has time_matching_unexpectedq both as a timer and as a counter of passes); -1 if the
 * library has none. MPI_T_pvar_get_index needs the class, and MPI 3.0 libraries lack it. */
static int find_index(const char *name, pvar_info *info)
{
    int num = 0, want_class = -1;
    const char *colon = strchr(name, ':');
    if (colon) {
        for (int c = MPI_T_PVAR_CLASS_STATE; c <= MPI_T_PVAR_CLASS_GENERIC; c++)
            if (strlen(class_name(c)) == (size_t)(colon - name) && strncmp(class_name(c), name, colon - name) == 0)
                want_class = c;
        if (want_class < 0)
            return -1;
        name = colon + 1;
    }
    if (MPI_T_pvar_get_num(&num) != MPI_SUCCESS)
        return -1;
    for (int i = 0; i < num; i++)
        if (get_info(i, info) && strcmp(info->name, name) == 0 && (want_class < 0 || info->var_class == want_class))
            return i;
    return -1;
}

static void open_one(hmb_pvars *pv, hmb_pvar *v)
{
    pvar_info info;
    v->reason = "not exposed by this MPI library";
    v->index = pv->session_ok ? find_index(v->name, &info) : -1;
    if (v->index < 0)
        return;
    v->var_class = info.var_class;
    v->bind = info.bind;
    v->type = info.type;
    v->readonly = info.readonly != 0; /* MPICH returns its flag bits (continuous = 2) */
    v->continuous = info.continuous != 0;
    if (!type_name(info.type)) {
        v->reason = "not numeric";
        return;
    }
    void *object = NULL;
    if (info.bind == MPI_T_BIND_MPI_COMM)
        object = &pv->comm;
    else if (info.bind != MPI_T_BIND_NO_OBJECT) {
        v->reason = "bound to an object other than a communicator";
        return;
    }
    if (MPI_T_pvar_handle_alloc(pv->session, v->index, object, &v->handle, &v->count) != MPI_SUCCESS) {
        v->reason = "MPI_T_pvar_handle_alloc failed";
        return;
    }
    MPI_Type_size(info.type, &v->type_bytes);
    v->raw = calloc((size_t)(v->count > 0 ? v->count : 1), (size_t)v->type_bytes);
    if (!v->raw)
        abort();
    v->reason = NULL;
}

hmb_pvars *hmb_pvars_open(hmb_ctx *ctx, const char *const *names, int n, MPI_Comm comm)
{
    (void)ctx;
    hmb_pvars *pv = calloc(1, sizeof *pv);
    if (!pv || !(pv->vars = calloc((size_t)(n > 0 ? n : 1), sizeof *pv->vars)))
        abort();
    pv->n = n;
    pv->comm = comm;
    pv->mpit_ok = hmb_mpit_hold();
    pv->session_ok = pv->mpit_ok && MPI_T_pvar_session_create(&pv->session) == MPI_SUCCESS;
    for (int i = 0; i < n; i++) {
        pv->vars[i].name = strdup(names[i]);
        open_one(pv, &pv->vars[i]);
    }
    return pv;
}

static const hmb_pvar *var(const hmb_pvars *pv, int i)
{
    if (i < 0 || i >= pv->n) {
        fprintf(stderr, "hmb: pvar index %d outside 0..%d (programming error)\n", i, pv->n - 1);
        abort();
    }
    return &pv->vars[i];
}

int hmb_pvars_available(const hmb_pvars *pv, int i) { return var(pv, i)->reason == NULL; }

int hmb_pvars_count(const hmb_pvars *pv, int i) { return hmb_pvars_available(pv, i) ? var(pv, i)->count : 0; }

const char *hmb_pvars_class(const hmb_pvars *pv, int i)
{
    return var(pv, i)->index < 0 ? "unavailable" : class_name(var(pv, i)->var_class);
}

const char *hmb_pvars_unit(const hmb_pvars *pv, int i)
{
    return hmb_pvars_available(pv, i) ? unit_of(var(pv, i)->var_class, var(pv, i)->type) : "";
}

void hmb_pvars_start(hmb_pvars *pv)
{
    for (int i = 0; i < pv->n; i++) {
        hmb_pvar *v = &pv->vars[i];
        if (!v->reason && !v->continuous && !v->started)
            v->started = MPI_T_pvar_start(pv->session, v->handle) == MPI_SUCCESS;
    }
}

void hmb_pvars_stop(hmb_pvars *pv)
{
    for (int i = 0; i < pv->n; i++) {
        hmb_pvar *v = &pv->vars[i];
        if (!v->reason && !v->continuous && v->started && MPI_T_pvar_stop(pv->session, v->handle) == MPI_SUCCESS)
            v->started = 0;
    }
}

void hmb_pvars_reset(hmb_pvars *pv)
{
    for (int i = 0; i < pv->n; i++) {
        hmb_pvar *v = &pv->vars[i];
        if (!v->reason && !v->readonly)
            MPI_T_pvar_reset(pv->session, v->handle);
    }
}

int hmb_pvars_read(hmb_pvars *pv, int i, double *values)
{
    hmb_pvar *v = (hmb_pvar *)var(pv, i);
    if (v->reason || MPI_T_pvar_read(pv->session, v->handle, v->raw) != MPI_SUCCESS)
        return 0;
    for (int k = 0; k < v->count; k++)
        values[k] = value_at(v->raw, v->type, k);
    return v->count;
}

void hmb_pvars_record(hmb_ctx *ctx, const hmb_pvars *pv, const char *prefix)
{
    char key[512];
    for (int i = 0; i < pv->n; i++) {
        const hmb_pvar *v = &pv->vars[i];
#define KEY(field) (snprintf(key, sizeof key, "%s%s.%s", prefix, v->name, field), key)
        hmb_result_add_num(ctx, KEY("available"), v->reason == NULL);
        if (v->reason) {
            hmb_result_add_str(ctx, KEY("reason"), v->reason);
            continue;
        }
        hmb_result_add_str(ctx, KEY("class"), class_name(v->var_class));
        hmb_result_add_str(ctx, KEY("type"), type_name(v->type));
        hmb_result_add_str(ctx, KEY("binding"), binding_name(v->bind));
        hmb_result_add_num(ctx, KEY("count"), v->count);
        hmb_result_add_str(ctx, KEY("unit"), unit_of(v->var_class, v->type));
        hmb_result_add_num(ctx, KEY("continuous"), v->continuous);
#undef KEY
    }
}

void hmb_pvars_close(hmb_pvars *pv)
{
    if (!pv)
        return;
    for (int i = 0; i < pv->n; i++) {
        hmb_pvar *v = &pv->vars[i];
        if (!v->reason)
            MPI_T_pvar_handle_free(pv->session, &v->handle);
        free(v->raw);
        free(v->name);
    }
    if (pv->session_ok)
        MPI_T_pvar_session_free(&pv->session);
    free(pv->vars); /* MPI_T itself stays initialised (hmb_mpit_hold) */
    free(pv);
}

int hmb_pvars_list(FILE *out)
{
    int num = 0, usable = 0;
    if (!hmb_mpit_hold() || MPI_T_pvar_get_num(&num) != MPI_SUCCESS) {
        fprintf(out, "this MPI library's tool interface (MPI_T) did not start: no performance variables\n");
        return 0;
    }
    /* An index may be invalid: Open MPI keeps those of components it closed again. */
    pvar_info info;
    for (int i = 0; i < num; i++)
        usable += get_info(i, &info);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(version, &len);
    fprintf(out, "%d MPI_T performance variables in %.*s", usable, (int)strcspn(version, "\n"), version);
    if (usable < num)
        fprintf(out, " (%d more indices refer to variables the library withdrew)", num - usable);
    fputc('\n', out);
    if (usable > 0)
        fprintf(out, "%-40s %-13s %-18s %-12s %s\n", "name", "class", "type", "binding", "description");
    for (int i = 0; i < num; i++) {
        if (!get_info(i, &info))
            continue;
        const char *type = type_name(info.type);
        info.desc[strcspn(info.desc, "\n")] = '\0';
        fprintf(out, "%-40s %-13s %-18s %-12s %s\n", info.name, class_name(info.var_class), type ? type : "other",
                binding_name(info.bind), info.desc);
    }
    return usable;
}
