/* MPI_T control variables, read for the record and for what a mode needs (async's library
 * progress thread, mt's VCIs and streams), and the tool interface's one initialisation.
 *
 * MPI_T is initialised once, at the first use, and stays so to the end of the process (no
 * MPI_T_finalize): MPICH 4.0.2 (ch3, built with recvq pvars) crashed in MPI_T_pvar_get_num when
 * MPI_T was initialised again after being finalised (match opens its variables in check() and
 * again in setup()). */
#include <string.h>

#include "hmb/threads.h"
#include "ctx.h"
#include "env.h"

int hmb_mpit_hold(void)
{
    static int held = -1;
    if (held < 0) {
        int provided;
        held = MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS;
    }
    return held;
}

int hmb_mpit_cvar_int(const char *name, long long *value)
{
    int index, count, found = 0;
    if (!hmb_mpit_hold())
        return 0;
    if (MPI_T_cvar_get_index(name, &index) == MPI_SUCCESS) {
        char cname[256], desc[256];
        int name_len = sizeof cname, desc_len = sizeof desc, verbosity, bind, scope;
        MPI_Datatype type;
        MPI_T_enum enumtype;
        MPI_T_cvar_handle handle;
        if (MPI_T_cvar_get_info(index, cname, &name_len, &verbosity, &type, &enumtype, desc, &desc_len, &bind,
                                &scope) == MPI_SUCCESS &&
            bind == MPI_T_BIND_NO_OBJECT && MPI_T_cvar_handle_alloc(index, NULL, &handle, &count) == MPI_SUCCESS) {
            union { int i; unsigned u; long l; unsigned long ul; long long ll; unsigned long long ull; } v;
            memset(&v, 0, sizeof v);
            if (count == 1 && MPI_T_cvar_read(handle, &v) == MPI_SUCCESS) {
                found = 1;
                if (type == MPI_INT)
                    *value = v.i;
                else if (type == MPI_UNSIGNED)
                    *value = v.u;
                else if (type == MPI_LONG)
                    *value = v.l;
                else if (type == MPI_UNSIGNED_LONG)
                    *value = (long long)v.ul;
                else if (type == MPI_LONG_LONG)
                    *value = v.ll;
                else if (type == MPI_UNSIGNED_LONG_LONG)
                    *value = (long long)v.ull;
                else
                    found = 0;
            }
            MPI_T_cvar_handle_free(&handle);
        }
    }
    return found;
}
