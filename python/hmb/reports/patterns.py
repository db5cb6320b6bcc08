"""Report of the communication patterns halo3d and sweep3d (SPEC §3.5, seed 000 Figs 9-12):
throughput per exchange mode against size, its ratio to the fork-join mode (single), and the
mock-mode share of an iteration (runs with --comm off set against the same point with
communication on). Both benchmarks name their metrics alike: throughput_<mode>_MBps,
ratio_<mode>, t_iter_<mode>_us (halo3d) / t_sweep_<mode>_us (sweep3d)."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ..results import Result, ResultSet, combine, fmt_size, identity
from . import register
from .common import OVERSUBSCRIBED_NOTE, Figure, Line, draw, int_param, lines_of, ok_results, reading_modes, \
    size_of

# serial (the single-threaded baseline, --mode serial) only where it ran; absent cells are "-"
MODES = ("serial", "single", "multiple", "partitioned", "persistent")
THREADED = MODES[1:]  # the modes with a speed-up over serial
PAIRED = MODES[2:]    # the modes with a ratio to single
MODE_COLORS = [(m,) for m in MODES]
TIME_METRIC = {"halo3d": "t_iter", "sweep3d": "t_sweep"}
SEED_FIGS = {"halo3d": "seed 000 Figs 11-12", "sweep3d": "seed 000 Figs 9-10"}


def _mock(r: Result) -> bool:
    return str(identity(r).get("comm", "on")) == "off" or bool((r.record.get("extra") or {}).get("mock"))


def _compute(r: Result) -> str:
    return str(identity(r).get("compute", "?"))


def _threads(r: Result) -> int:
    return int_param(r, "threads") or int(r.run.get("threads") or 1)


def _mode_lines(res: list[Result], metric_of, modes) -> list[Line]:
    """One line per (mode, threads) from the per-mode metric names; colour by mode."""
    multi_threads = len({_threads(r) for r in res}) > 1
    out = []
    for mode in modes:
        def label(r, mode=mode):
            return f"{mode}, T={_threads(r)}" if multi_threads else mode
        lines = lines_of(res, metric_of(mode), lambda r, mode=mode: (r.mpi, mode), size_of, label,
                         shown=("threads", "mode"))
        for ln in lines:
            ln.detail = ln.label
        out += lines
    return out


# The figures per compute: (name, y metric of a mode, modes, y label, yref, title, question,
# reading's unit, reading's lead).
FIGURES = [
    ("throughput", "throughput_{}_MBps", MODES, "throughput per process (MB/s)", None,
     "{bench} throughput per mode, compute {compute}",
     "Which threading mode moves a {bench} exchange fastest ({figs})? (bytes exchanged per process per second)",
     " MB/s", "Throughput,"),
    ("ratio", "ratio_{}", PAIRED, "throughput / single (same iterations)", 1.0,
     "{bench} throughput against fork-join, compute {compute}",
     "Does sending pieces as threads finish (multiple, partitioned) beat join-then-send? "
     "(> 1: faster than single, paired on the same compute draws)", "", "Ratio to single,"),
    ("speedup", "speedup_{}_vs_serial", THREADED, "throughput / serial (same iterations)", 1.0,
     "{bench} speed-up over the single-threaded baseline, compute {compute}",
     "How much faster than one thread doing all the work ({figs}: the seed's 15.1x is partitioned against "
     "single-threaded)? (> 1: faster than serial, paired on the same compute draws)", "x", "Speed-up over serial,"),
]


def _bench_figures(rs: ResultSet, outdir: Path, bench: str) -> list[Figure]:
    res = [r for r in ok_results(rs, bench) if not _mock(r)]
    figs = []
    for compute in sorted({_compute(r) for r in res}):
        sub = [r for r in res if _compute(r) == compute]
        tag = compute.replace(".", "p")
        for name, metric, modes, ylabel, yref, title, question, unit, lead in FIGURES:
            panels = [(f"compute {compute}, noise {noise}",
                       _mode_lines([r for r in sub if r.noise == noise], metric.format, modes))
                      for noise in sorted({r.noise for r in sub})]
            panels = [(t, ls) for t, ls in panels if ls]
            if not panels:
                continue
            png, svg, over = draw(f"{bench}_{name}_{tag}", panels, "bytes per face (message)", ylabel, outdir,
                                  yref=yref, ylog=True, color_order=MODE_COLORS)
            lines = [ln for _, ls in panels for ln in ls]
            figs.append(Figure(
                f"{bench}_{name}_{tag}", title.format(bench=bench, compute=compute),
                question.format(bench=bench, figs=SEED_FIGS[bench]),
                reading_modes(lines, unit, lead) + (OVERSUBSCRIBED_NOTE if over else ""), png, svg, over))
    return figs


def mock_share_rows(rs: ResultSet, bench: str) -> list[list[str]]:
    """Per point measured both ways: t_<iter> with --comm off over t_<iter> with it on, per mode:
    the share of an iteration that is compute, packing and unpacking alone."""
    tm = TIME_METRIC[bench]
    groups = defaultdict(lambda: {False: [], True: []})
    for r in ok_results(rs, bench):
        ident = {k: v for k, v in identity(r).items() if k != "comm"}
        groups[(r.mpi, r.noise, tuple(sorted(ident.items())))][_mock(r)].append(r)
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
        for mode in MODES:
            on, off = combine(both[False], f"{tm}_{mode}_us"), combine(both[True], f"{tm}_{mode}_us")
            cells.append(f"{off.median / on.median:.0%}" if on and off and on.median > 0 else "-")
        over = any(r.oversubscribed for r in both[False] + both[True])
        rows.append([mpi, fmt_size(int(d.get("size_bytes", 0))), d.get("threads", "?"), d.get("compute", "?"),
                     noise] + cells + ["yes" if over else "no"])
    return rows


def _tables(bench: str):
    def tables(rs: ResultSet) -> list:
        rows = mock_share_rows(rs, bench)
        if not rows:
            return []
        tm = TIME_METRIC[bench]
        what = "pack, unpack and compute" if bench == "halo3d" else "compute and fork-join"
        note = (f"{tm} with --comm off ({what}, no MPI) over {tm} with communication, "
                "medians of separate runs of the same point; the rest of an iteration is communication.")
        return [(f"{bench}: mock-mode share of an iteration", ["MPI", "face", "threads", "compute", "noise"]
                 + list(MODES) + ["oversubscribed"], rows, note)]
    return tables


register("halo3d", "Halo exchange (halo3d)", tables=_tables("halo3d"))(
    lambda rs, outdir: _bench_figures(rs, outdir, "halo3d"))
register("sweep3d", "KBA sweep (sweep3d)", tables=_tables("sweep3d"))(
    lambda rs, outdir: _bench_figures(rs, outdir, "sweep3d"))
