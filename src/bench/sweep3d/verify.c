/* sweep3d's validation, as data: the harness writes the send data of every slot this rank sends
 * and checks every face each mode received, right after the mode. */
#include "sweep3d.h"

static const char *face_name(int f) { return f == FACE_X ? "x" : "y"; }

/* Validation as data: the send data of every (octant, k-block, face) slot this rank sends, as
 * the values an application would have packed, and every received face of every mode, checked
 * right after the mode: the pattern of (source rank, slot, iteration), piece by piece. */
void sweep_register_checks(hmb_ctx *ctx, sweep_state *st)
{
    for (int o = 0; o < NOCTANTS; o++)
        for (int k = 0; k < st->kblocks; k++)
            for (int f = 0; f < NFACES; f++) {
                int slot = slot_of(st, o, k, f);
                const hmb_topo_dir *dir = &st->topo.dir[face_dir(o, f)];
                size_t len = 8 * st->face_cells[f];
                if (dir->to != MPI_PROC_NULL)
                    hmb_check_register(ctx, HMB_SEND, st->send + st->slot_offset[slot], len, st->rank, slot, 1,
                                       HMB_AFTER_ITERATION, "send");
                for (int i = 0; i < st->nmodes && dir->from != MPI_PROC_NULL; i++) {
                    int m = st->modes[i];
                    hmb_check_register(ctx, HMB_RECEIVE, st->recv[m] + st->slot_offset[slot], len, dir->from, slot,
                                       st->pieces[f], m, "%s mode, octant %d (%c%c%c), k-block %d: %s face from rank %d",
                                       hmb_mode_name(ctx, m), o, octant_sign(o, 0) > 0 ? '+' : '-',
                                       octant_sign(o, 1) > 0 ? '+' : '-', octant_sign(o, 2) > 0 ? '+' : '-', k,
                                       face_name(f), dir->from);
                }
            }
}
