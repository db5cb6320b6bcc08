"""Counterbalanced phase orders (src/harness/design.c): Williams' balanced Latin squares."""
from __future__ import annotations

import ctypes as C
import itertools

import pytest

import _corelib as cl


@pytest.fixture(scope="module")
def lib():
    return cl.load()


def orders(lib, k):
    n = lib.hmb_phase_orders(k)
    out = []
    for it in range(n):
        o = (C.c_int * k)()
        assert lib.hmb_phase_order(k, it, o) == 0
        out.append(list(o))
    return out


def test_two_and_three_phases_get_every_order(lib):
    assert orders(lib, 2) == [[0, 1], [1, 0]]
    # k = 3: rows r + (0, 1, 2) and their mirrors -> all 6 permutations
    assert sorted(map(tuple, orders(lib, 3))) == sorted(itertools.permutations(range(3)))


def test_four_phases_by_hand(lib):
    # Williams k = 4: offsets (0, 1, 3, 2); rows r = 0..3
    assert orders(lib, 4) == [[0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1]]


@pytest.mark.parametrize("k", [2, 3, 4, 5, 6])
def test_balanced_positions_and_carry_over(lib, k):
    rows = orders(lib, k)
    n = len(rows)
    assert n == (k if k % 2 == 0 else 2 * k)
    for r in rows:
        assert sorted(r) == list(range(k))
    for pos in range(k):   # each phase equally often in each position
        counts = [sum(1 for r in rows if r[pos] == p) for p in range(k)]
        assert len(set(counts)) == 1
    follows = {}           # each ordered pair (a directly before b) equally often
    for r in rows:
        for a, b in zip(r, r[1:]):
            follows[(a, b)] = follows.get((a, b), 0) + 1
    assert len(follows) == k * (k - 1) and len(set(follows.values())) == 1


def test_cycles_and_bad_input(lib):
    o1, o2 = (C.c_int * 4)(), (C.c_int * 4)()
    lib.hmb_phase_order(4, 1, o1)
    lib.hmb_phase_order(4, 5, o2)
    assert list(o1) == list(o2)
    assert lib.hmb_phase_orders(1) == 1 and lib.hmb_phase_orders(0) == 0
    assert lib.hmb_phase_order(0, 0, o1) == -1 and lib.hmb_phase_order(3, -1, o1) == -1
