"""Topology module (src/harness/topology.c): grids, neighbourhoods, thread grids and face pieces,
on cases whose answers are worked out by hand in the comments."""
from __future__ import annotations

import ctypes as C
import itertools

import pytest

import _corelib as cl

PROC_NULL = None  # filled from the library's behaviour below (MPI_PROC_NULL differs per MPI)


@pytest.fixture(scope="module")
def lib():
    return cl.load()


def dims(lib, n, nd, given=(0, 0, 0)):
    d = (C.c_int * 3)(*given)
    rc = lib.hmb_dims_balanced(n, nd, d)
    return rc, list(d)[:nd]


def build(lib, nd, nbrs, size, rank, nthreads, grid=None, tgrid=None, periodic=True):
    t = cl.Topo()
    g = (C.c_int * 3)(*grid) if grid else None
    tg = (C.c_int * 3)(*tgrid) if tgrid else None
    err = lib.hmb_topo_build(C.byref(t), nd, nbrs, g, size, rank, tg, nthreads, int(periodic))
    return t, (err.decode() if err else None)


def ints3(v=(0, 0, 0)):
    return (C.c_int * 3)(*v)


@pytest.mark.parametrize("n,nd,given,want", [
    (8, 3, (0, 0, 0), [2, 2, 2]),
    (12, 3, (0, 0, 0), [3, 2, 2]),       # 12 = 3*2*2: largest factor first onto the emptiest axis
    (2, 3, (0, 0, 0), [2, 1, 1]),
    (27, 3, (0, 0, 0), [3, 3, 3]),
    (64, 3, (0, 0, 0), [4, 4, 4]),
    (9, 2, (0, 0, 0), [3, 3]),
    (6, 3, (0, 3, 0), [2, 3, 1]),        # a kept entry: 6 / 3 = 2 left for x and z
    (1, 3, (0, 0, 0), [1, 1, 1]),
])
def test_dims_balanced(lib, n, nd, given, want):
    rc, d = dims(lib, n, nd, given)
    assert rc == 0 and d == want


@pytest.mark.parametrize("n,nd,given", [(7, 3, (2, 0, 0)), (8, 3, (2, 2, 3)), (0, 3, (0, 0, 0)),
                                        (4, 4, (0, 0, 0))])
def test_dims_that_do_not_fit(lib, n, nd, given):
    assert dims(lib, n, nd, given)[0] == -1


def directions(lib, nd, k):
    off = (C.c_int * 3 * 26)()
    n = lib.hmb_topo_directions(nd, k, off)
    return [tuple(off[i])[:nd] for i in range(max(n, 0))], n


def test_face_directions_in_axis_order_each_followed_by_its_opposite(lib):
    d, n = directions(lib, 3, 6)
    assert n == 6
    assert d == [(1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)]
    d, n = directions(lib, 2, 4)
    assert d == [(1, 0), (-1, 0), (0, 1), (0, -1)]


@pytest.mark.parametrize("nd,k,faces,edges,corners", [(2, 8, 4, 4, 0), (3, 26, 6, 12, 8)])
def test_full_neighbourhoods(lib, nd, k, faces, edges, corners):
    d, n = directions(lib, nd, k)
    assert n == k
    # every non-zero offset exactly once: 3^nd - 1 of them
    assert sorted(d) == sorted(o for o in itertools.product((-1, 0, 1), repeat=nd) if any(o))
    nz = [sum(1 for c in o if c) for o in d]
    assert nz == sorted(nz)  # faces, then edges, then corners
    assert (nz.count(1), nz.count(2), nz.count(3)) == (faces, edges, corners)
    for i in range(0, n, 2):
        assert d[i + 1] == tuple(-c for c in d[i])   # opposite(d) = d ^ 1


@pytest.mark.parametrize("nd,k", [(3, 4), (2, 6), (3, 8), (1, 2), (4, 8)])
def test_unknown_neighbourhoods(lib, nd, k):
    assert directions(lib, nd, k)[1] == -1


def test_rank_layout_and_neighbours_on_an_open_3x3_grid(lib):
    # 2-D 3x3, rank = x*3 + y (last axis fastest). Rank 4 is the centre (1,1): all 8 neighbours.
    t, err = build(lib, 2, 8, 9, 4, 1, periodic=False)
    assert err is None and list(t.coords)[:2] == [1, 1]
    want = {(1, 0): 7, (-1, 0): 1, (0, 1): 5, (0, -1): 3, (1, 1): 8, (-1, -1): 0, (1, -1): 6, (-1, 1): 2}
    for i in range(t.ndirs):
        o = tuple(t.dir[i].off)[:2]
        assert t.dir[i].to == want[o]
        assert t.dir[i].from_ == want[tuple(-c for c in o)]
    # Corner rank 0 (0,0): +x goes to 3; -x falls off the grid on both ends of the relation.
    t0, _ = build(lib, 2, 8, 9, 0, 1, periodic=False)
    null = t0.dir[1].to  # -x of (0,0)
    assert t0.dir[0].to == 3 and t0.dir[0].from_ == null
    assert sum(1 for i in range(8) if t0.dir[i].to != null) == 3   # (1,0), (0,1), (1,1)
    assert null not in range(9)


def test_periodic_grid_of_two_ranks_wraps_to_the_same_rank_and_to_itself(lib):
    # 2 ranks, 3-D: grid 2x1x1. +x and -x both name the other rank; y and z name the rank itself.
    t, err = build(lib, 3, 6, 2, 0, 1)
    assert err is None and list(t.dims) == [2, 1, 1]
    assert [(t.dir[i].to, t.dir[i].from_) for i in range(6)] == [(1, 1), (1, 1), (0, 0), (0, 0), (0, 0), (0, 0)]


def test_every_message_meets_exactly_one_receive(lib):
    # For each (rank, direction) sent to "to", the receiver's same direction has from == sender.
    for size, grid, periodic in [(8, None, True), (27, None, False), (12, (3, 2, 2), True), (2, None, True)]:
        topos = [build(lib, 3, 26, size, r, 1, grid=grid, periodic=periodic)[0] for r in range(size)]
        for r, t in enumerate(topos):
            for d in range(t.ndirs):
                dest = t.dir[d].to
                if dest in range(size):
                    assert topos[dest].dir[d].from_ == r


@pytest.mark.parametrize("grid,tgrid,size,threads,reason", [
    ((3, 2, 1), None, 8, 1, "process grid"),
    (None, (2, 2, 1), 8, 8, "thread grid"),
    (None, None, 8, 0, "thread grid"),
])
def test_grids_that_do_not_fit(lib, grid, tgrid, size, threads, reason):
    _, err = build(lib, 3, 6, size, 0, threads, grid=grid, tgrid=tgrid)
    assert err is not None and reason in err


def test_face_pieces_of_a_2x2x2_thread_grid(lib):
    # 8 threads as 2x2x2: each face is owned by the 4 threads on its side (seed 000: 4 partitions
    # per face); an edge by 2 threads; a corner by 1.
    t, err = build(lib, 3, 26, 8, 0, 8)
    assert err is None and list(t.tdims) == [2, 2, 2]
    pieces = [lib.hmb_topo_pieces(t, d) for d in range(26)]
    assert pieces[:6] == [4] * 6 and pieces[6:18] == [2] * 12 and pieces[18:] == [1] * 8
    # +x face: threads with tx = 1 -> tids 1, 3, 5, 7 (x fastest), pieces numbered over (y, z).
    assert [lib.hmb_topo_piece_thread(t, 0, p) for p in range(4)] == [1, 3, 5, 7]
    assert [lib.hmb_topo_thread_piece(t, 0, tid) for tid in range(8)] == [-1, 0, -1, 1, -1, 2, -1, 3]
    # -x face: tx = 0 -> 0, 2, 4, 6
    assert [lib.hmb_topo_piece_thread(t, 1, p) for p in range(4)] == [0, 2, 4, 6]
    # 64 threads as 4x4x4: 16 pieces per face (seed 000)
    t64, _ = build(lib, 3, 6, 1, 0, 64)
    assert [lib.hmb_topo_pieces(t64, d) for d in range(6)] == [16] * 6


def box(fn, t, n, *args):
    lo, cnt = ints3(), ints3()
    fn(t, ints3(n), *args, lo, cnt)
    return list(lo), list(cnt)


def test_tiles_split_uneven_axes_by_at_most_one_cell(lib):
    # n = 5x4x1 cells over a 2x2x1 thread grid: x splits 3+2, y 2+2.
    t, _ = build(lib, 3, 6, 1, 0, 4, tgrid=(2, 2, 1))
    assert box(lib.hmb_topo_tile, t, (5, 4, 1), 0) == ([0, 0, 0], [3, 2, 1])
    assert box(lib.hmb_topo_tile, t, (5, 4, 1), 1) == ([3, 0, 0], [2, 2, 1])
    assert box(lib.hmb_topo_tile, t, (5, 4, 1), 3) == ([3, 2, 0], [2, 2, 1])


def test_send_and_receive_boxes_of_face_pieces(lib):
    # n = 4x4x4, threads 2x2x2. +x face piece 3 = thread 7 (1,1,1): sends x = 3 (last interior
    # layer), y 2..3, z 2..3; the receiver puts it into its -x halo, x = -1, same y and z.
    t, _ = build(lib, 3, 26, 1, 0, 8)
    n = (4, 4, 4)
    assert box(lib.hmb_topo_send_box, t, n, 0, 3) == ([3, 2, 2], [1, 2, 2])
    assert box(lib.hmb_topo_recv_box, t, n, 0, 3) == ([-1, 2, 2], [1, 2, 2])
    # -x face piece 0 = thread 0: sends x = 0, lands in the +x halo x = 4.
    assert box(lib.hmb_topo_send_box, t, n, 1, 0) == ([0, 0, 0], [1, 2, 2])
    assert box(lib.hmb_topo_recv_box, t, n, 1, 0) == ([4, 0, 0], [1, 2, 2])
    # A corner (+x, +y, +z) is one cell, sent from (3,3,3), received at (-1,-1,-1).
    d = next(i for i in range(26) if tuple(t.dir[i].off) == (1, 1, 1))
    assert box(lib.hmb_topo_send_box, t, n, d, 0) == ([3, 3, 3], [1, 1, 1])
    assert box(lib.hmb_topo_recv_box, t, n, d, 0) == ([-1, -1, -1], [1, 1, 1])


def test_pieces_of_a_face_cover_it_exactly_once(lib):
    # Uneven block 7x5x3 on a 3x2x1 thread grid: the pieces of every direction tile its boundary.
    t, _ = build(lib, 3, 26, 1, 0, 6, tgrid=(3, 2, 1))
    n = (7, 5, 3)
    for d in range(26):
        off = tuple(t.dir[d].off)
        want = {c for c in itertools.product(*(range(k) for k in n))
                if all(o == 0 or c[a] == (n[a] - 1 if o > 0 else 0) for a, o in enumerate(off))}
        got = []
        for p in range(lib.hmb_topo_pieces(t, d)):
            lo, cnt = box(lib.hmb_topo_send_box, t, n, d, p)
            got += list(itertools.product(*(range(lo[a], lo[a] + cnt[a]) for a in range(3))))
        assert sorted(got) == sorted(want), off
