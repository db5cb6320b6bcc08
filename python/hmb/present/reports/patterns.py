"""Readings and tables of the communication patterns halo3d and sweep3d (SPEC §3.5, seed 000
Figs 9-12; figures.toml: halo3d_* and sweep3d_*, one figure per compute): throughput per exchange
mode against size, its ratio to the fork-join mode (single), its speed-up over the
single-threaded baseline (serial), and the mock-mode share of an iteration (runs with --comm off
set against the same point with communication on). Both benchmarks name their metrics alike,
one per mode of their descriptor: throughput_<mode>_MBps, ratio_<mode>, speedup_<mode>_vs_serial,
t_iter_<mode>_us (halo3d) / t_sweep_<mode>_us (sweep3d)."""
from __future__ import annotations

from collections import defaultdict

from ...data import tidy
from ..figures import modes
from ..format import fmt_size
from .common import ok_results, reading, reading_modes, register, value

TIME_METRIC = {"halo3d": "t_iter", "sweep3d": "t_sweep"}


def _mock(ident: dict, r) -> bool:
    return str(ident.get("comm", "on")) == "off" or bool((r.record.get("extra") or {}).get("mock"))


def _modes(t: tidy.Table, bench: str) -> list:
    """The benchmark's exchange modes that time an iteration, in its descriptor's order (--describe)."""
    tm = TIME_METRIC[bench]
    return [name for name, adds in modes(bench, t.descriptors) if adds is None or f"{tm}_{name}_us" in adds]


def _by_mode(unit: str, lead: str):
    """The reading of a per-mode figure: at each MPI's largest face, the modes best first."""
    return lambda plan, unsupported=None: reading_modes(plan.lines(), unit, lead)


for bench in ("halo3d", "sweep3d"):
    reading(f"{bench}_throughput")(_by_mode(" MB/s", "Throughput,"))
    reading(f"{bench}_ratio")(_by_mode("", "Ratio to single,"))
    reading(f"{bench}_speedup")(_by_mode("x", "Speed-up over serial,"))


def mock_share_rows(t: tidy.Table, bench: str) -> list[list[str]]:
    """Per point measured both ways: t_<iter> with --comm off over t_<iter> with it on, per mode:
    the share of an iteration that is compute, packing and unpacking alone."""
    tm = TIME_METRIC[bench]
    modes = _modes(t, bench)
    groups = defaultdict(lambda: {False: [], True: []})
    for r, ix in ok_results(t, bench):
        whole = dict(t.detail.at[ix[0], "identity"])     # the point's identity, as recorded
        ident = {k: v for k, v in whole.items() if k != "comm"}
        groups[(r.mpi, r.noise, tuple(sorted(ident.items())))][_mock(whole, r)].append((r, ix))
    rows = []
    def order(item):  # by MPI, then numerically by face size and threads
        (mpi, noise, ident), _ = item
        d = dict(ident)
        return (mpi, noise, float(d.get("size_bytes", 0)), str(d.get("threads", "")), str(ident))
    for (mpi, noise, ident), both in sorted(groups.items(), key=order):
        if not both[False] or not both[True]:
            continue
        d = dict(ident)
        cells = []
        for mode in modes:
            on, off = value(t, both[False], f"{tm}_{mode}_us"), value(t, both[True], f"{tm}_{mode}_us")
            cells.append(f"{off.median / on.median:.0%}" if on and off and on.median > 0 else "-")
        over = bool(tidy.no_reading(t.df.loc[[i for _, ix in both[False] + both[True] for i in ix]]).any())
        rows.append([mpi, fmt_size(int(d.get("size_bytes", 0))), d.get("threads", "?"), d.get("compute", "?"),
                     noise] + cells + ["yes" if over else "no"])
    return rows


def _tables(bench: str):
    def tables(t: tidy.Table) -> list:
        rows = mock_share_rows(t, bench)
        if not rows:
            return []
        tm = TIME_METRIC[bench]
        what = "pack, unpack and compute" if bench == "halo3d" else "compute and fork-join"
        note = (f"{tm} with --comm off ({what}, no MPI) over {tm} with communication, "
                "medians of separate runs of the same point; the rest of an iteration is communication.")
        return [(f"{bench}: mock-mode share of an iteration", ["MPI", "face", "threads", "compute", "noise"]
                 + _modes(t, bench) + ["no reading"], rows, note + " No reading: oversubscribed, or a progress "
                 "thread on a compute core.")]
    return tables


register("halo3d", "Halo exchange (halo3d)", tables=_tables("halo3d"))
register("sweep3d", "KBA sweep (sweep3d)", tables=_tables("sweep3d"))
