/* halo3d's data and checks, outside the timed exchange: the send data of every iteration
 * (prepare), and every mode's validation: the faces registered with the harness, and the halo the
 * mode unpacked, read from the block on its own (never through the exchanges' unpacking), against
 * the senders' cells. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "halo3d.h"

/* Value of interior cell (x, y, z) of rank's block in iteration iter. */
static uint64_t cell_value(int rank, long iter, const int n[3], int x, int y, int z)
{
    uint64_t cell = (uint64_t)x + (uint64_t)n[0] * ((uint64_t)y + (uint64_t)n[1] * (uint64_t)z);
    return hmb_mix64(hmb_mix64(hmb_mix64((uint64_t)rank) ^ (uint64_t)iter) ^ cell);
}

static void direction_name(const hmb_topo *t, int d, char out[8])
{
    int k = 0;
    for (int a = 0; a < 3; a++)
        if (t->dir[d].off[a] != 0) {
            out[k++] = t->dir[d].off[a] > 0 ? '+' : '-';
            out[k++] = "xyz"[a];
        }
    out[k] = '\0';
}

/* How many validation pieces a face has: threadcomm, one share per thread; else its partitions. */
static int face_pieces(const halo_state *st, const halo_face *f) { return st->tc >= 0 ? st->threads : f->nparts; }

/* The mode's name in validation messages: "threadcomm/tag" names the --thread-comm value. */
static const char *mode_label(const hmb_ctx *ctx, const halo_state *st, int mode, char *buf, size_t len)
{
    if (st->tc < 0) /* else the mode is threadcomm */
        return hmb_mode_name(ctx, mode);
    snprintf(buf, len, "threadcomm/%s", st->ev_threads ? "everywhere" : halo_tc_names[st->tc]);
    return buf;
}

/* Who sends and receives faces in messages: ranks, or with --everywhere-ranks the groups of ranks
 * standing in for them. */
static const char *rank_word(const halo_state *st) { return st->ev_threads ? "group" : "rank"; }

/* The face of direction d as sent (sender geometry, this rank's cells) or as received (the
 * sender's boundary layer on the +off side of each halo cell), piece by piece in box order. */
static void face_pattern(const halo_face *f, long iter, uint64_t *out, int received)
{
    const halo_state *st = f->state;
    const int *off = st->topo.dir[f->d].off;
    int src = received ? f->from : st->rank; /* this rank under the mock (hmb_comm_route) */
    size_t k = 0;
    for (int p = 0; p < f->npieces; p++) {
        int lo[3], cnt[3], c[3], s[3];
        if (received)
            hmb_topo_recv_box(&st->topo, st->n, f->d, p, lo, cnt);
        else
            hmb_topo_send_box(&st->topo, st->n, f->d, p, lo, cnt);
        for (c[2] = lo[2]; c[2] < lo[2] + cnt[2]; c[2]++)
            for (c[1] = lo[1]; c[1] < lo[1] + cnt[1]; c[1]++)
                for (c[0] = lo[0]; c[0] < lo[0] + cnt[0]; c[0]++) {
                    for (int a = 0; a < 3; a++)
                        s[a] = !received ? c[a] : off[a] > 0 ? st->n[a] - 1 : off[a] < 0 ? 0 : c[a];
                    out[k++] = cell_value(src, iter, st->n, s[0], s[1], s[2]);
                }
    }
}

static void face_received(const void *face, long iter, uint64_t *out) { face_pattern(face, iter, out, 1); }

/* The halo cells where face f lands, in its packed order (piece by piece, each box in z, y, x
 * order), as the mode's unpack left them in the block. */
static void halo_cells(const halo_face *f, uint64_t *out)
{
    const halo_state *st = f->state;
    size_t k = 0;
    for (int p = 0; p < f->npieces; p++) {
        int lo[3], cnt[3];
        hmb_topo_recv_box(&st->topo, st->n, f->d, p, lo, cnt);
        for (int z = lo[2]; z < lo[2] + cnt[2]; z++)
            for (int y = lo[1]; y < lo[1] + cnt[1]; y++)
                for (int x = lo[0]; x < lo[0] + cnt[0]; x++)
                    out[k++] = st->block[halo_cell_index(st->n, x, y, z)];
    }
}

/* The cells of face f this rank receives, [first, first + count) of its packed order: MPI
 * everywhere, thread ev_tid's share; else all of them. */
static void received_cells(const halo_state *st, const halo_face *f, size_t *first, size_t *count)
{
    size_t cells = halo_face_cells(f), share = cells / (size_t)st->threads;
    *first = st->ev_threads ? (size_t)st->ev_tid * share : 0;
    *count = st->ev_threads ? share : cells;
}

/* MPI everywhere: the share of face f this rank receives, as its sender's cells. */
static void face_share_received(const void *face, long iter, uint64_t *out)
{
    const halo_face *f = face;
    const halo_state *st = f->state;
    size_t first, count;
    received_cells(st, f, &first, &count);
    face_pattern(f, iter, st->share_want, 1);
    memcpy(out, st->share_want + first, count * sizeof(uint64_t));
}

/* Validation as data: every face this rank packs (the harness poisons it before and after each
 * mode) and every face it receives, per mode, checked right after the mode. */
void halo_register_checks(hmb_ctx *ctx, halo_state *st)
{
    for (int d = 0; d < NDIRS; d++) {
        halo_face *f = &st->face[d];
        size_t bytes = (size_t)f->npieces * f->piece_cells * sizeof(uint64_t);
        char dir[8];
        direction_name(&st->topo, d, dir);
        f->state = st, f->d = d;
        int pieces = face_pieces(st, f);
        if (f->to != MPI_PROC_NULL)
            hmb_check_register(ctx, HMB_SEND_PACKED, f->send, bytes, st->rank, d, pieces, HMB_EACH_MODE, "send");
        size_t first, count;
        received_cells(st, f, &first, &count);
        for (int k = 0; k < st->nmodes && f->from != MPI_PROC_NULL; k++) {
            char name[32], who[48] = "";
            if (st->ev_threads)
                snprintf(who, sizeof who, " (thread %d's share)", st->ev_tid);
            else if (st->tc >= 0)
                snprintf(who, sizeof who, " (piece t: thread t's share)");
            hmb_check_register_fn(ctx, HMB_RECEIVE, f->recv + first, count * sizeof(uint64_t),
                                  st->ev_threads ? face_share_received : face_received, f,
                                  st->ev_threads ? 1 : pieces, st->modes[k], "%s mode: %s %d face of direction %s "
                                  "from %s %d%s", mode_label(ctx, st, st->modes[k], name, sizeof name), rank_word(st),
                                  st->rank, dir, rank_word(st), f->from, who);
        }
    }
}

/* The halo after the mode's unpack (untimed, before the registry checks the receive buffers):
 * every received face's halo cells, in its packed order, against its sender's cells.
 * --inject corrupt flips the middle byte of the first face checked (hmb_corrupt_pick). */
static void check_halo(hmb_ctx *ctx, halo_state *st, int mode, long iter)
{
    if (!hmb_validate_enabled(ctx))
        return;
    for (int d = 0; d < NDIRS; d++) {
        const halo_face *f = &st->face[d];
        if (f->from == MPI_PROC_NULL)
            continue;
        size_t cells = halo_face_cells(f), first, count;
        received_cells(st, f, &first, &count);
        size_t lo = first * sizeof(uint64_t), bytes = count * sizeof(uint64_t);
        halo_cells(f, st->halo_seen);
        face_pattern(f, iter, st->halo_want, 1);
        unsigned char *seen = (unsigned char *)st->halo_seen, *want = (unsigned char *)st->halo_want;
        if (hmb_corrupt_pick(ctx, iter))
            seen[lo + bytes / 2] ^= 0x5a;
        if (memcmp(seen + lo, want + lo, bytes) == 0)
            continue;
        size_t bad = lo;
        while (seen[bad] == want[bad])
            bad++;
        int pieces = face_pieces(st, f), piece = (int)(bad / sizeof(uint64_t) / (cells / (size_t)pieces));
        char dir[8], name[32], share[32] = "", why[200];
        hmb_poison_why(seen + lo, want + lo, bytes, why, sizeof why);
        direction_name(&st->topo, d, dir);
        if (st->tc >= 0)
            snprintf(share, sizeof share, " (thread %d's share)", piece);
        hmb_validation_failure(ctx, st->pt, iter, piece,
                               "%s mode: %s %d face of direction %s from %s %d, piece %d of %d%s, cell %zu of "
                               "%zu (byte %zu) in the halo after unpack is 0x%02x, expected 0x%02x%s",
                               mode_label(ctx, st, mode, name, sizeof name), rank_word(st), st->rank, dir, rank_word(st),
                               f->from, piece, pieces, share, bad / 8, cells, bad, seen[bad], want[bad], why);
    }
}

/* Outside timing, before any cold-cache flush: iteration iter's values in the block's boundary
 * layer (everything the faces send). */
void halo_prepare(hmb_ctx *ctx, void *state, const hmb_point *pt, long iter)
{
    (void)ctx, (void)pt;
    halo_state *st = state;
    for (int d = 0; d < NDIRS; d++) {
        int lo[3], cnt[3];
        for (int p = 0; p < st->face[d].npieces; p++) {
            hmb_topo_send_box(&st->topo, st->n, d, p, lo, cnt);
            for (int z = lo[2]; z < lo[2] + cnt[2]; z++)
                for (int y = lo[1]; y < lo[1] + cnt[1]; y++)
                    for (int x = lo[0]; x < lo[0] + cnt[0]; x++)
                        st->block[halo_cell_index(st->n, x, y, z)] = cell_value(st->rank, iter, st->n, x, y, z);
        }
    }
}

void halo_mode_verify(hmb_ctx *ctx, void *state, int mode, long iter, double *sums)
{
    halo_state *st = state;
    sums[0] = (double)atomic_load(&st->bytes_sent[mode]);
    check_halo(ctx, st, mode, iter);
}
