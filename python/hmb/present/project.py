"""`hmb project`: what a measured point-to-point speed-up would give a whole application
(seed 000 §4.8, SPEC §3.7): projected speed-up = 1 / ((1 - f) + f / s), f the share of run
time the application spends in point-to-point communication, s the speed-up of that
communication measured by HMB.

f is given or read from mpiP reports (one per process count), s is given or read from a
results file (the `ratio_<mode>` metric that halo3d and sweep3d write: that mode's throughput
over `single`'s). The formula is hmb_projected_speedup in src/harness/metrics.c, reached
through libhmbcore.so, so it lives once. docs/toolkit.md ("hmb project") is the reference.
"""
from __future__ import annotations

import ctypes
import dataclasses
import math
import re
from pathlib import Path

import pandas as pd

from ..data import DATA_DIR, tidy
from ..data.results import file_problem
from ..run import core
from . import figures

# MPI calls whose time counts as point-to-point: sends, receives, and the completions and probes
# of their requests (mpiP cannot tell a Wait on a point-to-point request from one on a
# non-blocking collective; an application with those must say so with --fraction).
P2P_CALLS = frozenset("""
Send Recv Isend Irecv Ssend Issend Bsend Ibsend Rsend Irsend Sendrecv Sendrecv_replace
Send_init Recv_init Ssend_init Bsend_init Rsend_init Start Startall
Psend_init Precv_init Pready Pready_range Pready_list Parrived
Wait Waitall Waitany Waitsome Test Testall Testany Testsome Probe Iprobe Mprobe Improbe Mrecv Imrecv
""".split())

MPI_TIME = "@--- MPI Time (seconds)"
AGGREGATE = "@--- Aggregate Time (top twenty, descending, milliseconds)"
CALLSITE_STATS = "@--- Callsite Time statistics (all, milliseconds)"


class ProjectError(Exception):
    """A one-line problem with the input of `hmb project` (exit status 2)."""


@dataclasses.dataclass
class Profile:
    source: str
    processes: int
    app_time_s: float     # summed over the tasks ('*' row)
    p2p_time_s: float     # summed over the tasks and the point-to-point call sites
    from_section: str     # which mpiP section the call times came from

    @property
    def fraction(self) -> float:
        return self.p2p_time_s / self.app_time_s


def _sections(text: str) -> dict[str, list[str]]:
    """mpiP section title line (up to its dashes) -> the table lines under it."""
    out, current = {}, None
    for line in text.splitlines():
        if line.startswith("@---"):
            current = re.sub(r"[\s-]*$", "", line.split(":")[0] if "statistics" in line else line)
            out[current] = []
        elif current is not None and line.strip() and not set(line.strip()) <= {"-"}:
            out[current].append(line)
    return out


def _table(lines: list[str], where: str) -> list[dict]:
    """Rows of a whitespace table as {header: field}; the first line is the header."""
    if not lines:
        raise ProjectError(f"{where}: empty table")
    header = lines[0].split()
    rows = []
    for line in lines[1:]:
        fields = line.split()
        if len(fields) != len(header):
            raise ProjectError(f"{where}: row '{line.strip()}' does not match the header '{lines[0].strip()}'")
        rows.append(dict(zip(header, fields)))
    return rows


def _num(value: str, where: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise ProjectError(f"{where}: '{value}' is not a number") from None
    if not x >= 0:
        raise ProjectError(f"{where}: {value} is negative")
    return x


def parse_mpip(path: str | Path) -> Profile:
    """f of one mpiP report: point-to-point call time over application time, both summed over
    the tasks. Call times from the complete "Callsite Time statistics" ('*' rows: Count x Mean)
    when the report has it, else from the aggregate time (top twenty call sites)."""
    path = Path(path)
    if file_problem(path):   # a FIFO would block the read
        raise ProjectError(f"{path}: {file_problem(path)}")
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise ProjectError(f"{path}: {e.strerror}") from None
    sec = _sections(text)
    if MPI_TIME not in sec:
        raise ProjectError(f"{path}: no '{MPI_TIME}' section (is it an mpiP report?)")
    where = f"{path}: MPI Time"
    tasks = _table(sec[MPI_TIME], where)
    total = [r for r in tasks if r.get("Task") == "*"]
    if "AppTime" not in (tasks[0] if tasks else {}) or len(total) != 1:
        raise ProjectError(f"{where}: expected a Task/AppTime table with one '*' row")
    processes = len(tasks) - 1
    app_time_s = _num(total[0]["AppTime"], where)
    if processes < 1 or app_time_s <= 0:
        raise ProjectError(f"{where}: no tasks or zero application time")

    if CALLSITE_STATS in sec:
        where, section = f"{path}: Callsite Time statistics", CALLSITE_STATS
        rows = [r for r in _table(sec[CALLSITE_STATS], where) if r.get("Rank") == "*"]
        p2p_ms = sum(_num(r["Count"], where) * _num(r["Mean"], where) for r in rows if r["Name"] in P2P_CALLS)
    elif AGGREGATE in sec:
        where, section = f"{path}: Aggregate Time", AGGREGATE
        rows = _table(sec[AGGREGATE], where)
        p2p_ms = sum(_num(r["Time"], where) for r in rows if r["Call"] in P2P_CALLS)
    else:
        raise ProjectError(f"{path}: neither '{CALLSITE_STATS}' nor '{AGGREGATE}' section")
    if rows and not all(k in rows[0] for k in (("Name", "Count", "Mean") if section == CALLSITE_STATS
                                               else ("Call", "Time"))):
        raise ProjectError(f"{where}: unexpected columns")
    p2p_time_s = p2p_ms / 1e3
    if p2p_time_s > app_time_s:
        raise ProjectError(f"{path}: point-to-point time {p2p_time_s:g} s exceeds the application time "
                           f"{app_time_s:g} s")
    return Profile(str(path), processes, app_time_s, p2p_time_s, section.strip("@- "))


def speedup_from_results(paths: list[str], bench: str, size_bytes: int, mode: str) -> float:
    """The median over its launches (tidy.over_launches) of metric ratio_<mode> of the one point
    of bench at size_bytes."""
    metric = f"ratio_{mode}"
    t = tidy.read(paths)
    rows = tidy.select(t.df, bench, metric, {"size_bytes": size_bytes})
    if rows is None or rows.empty:
        raise ProjectError(f"no {bench} result at {size_bytes} bytes with metric {metric} in {', '.join(paths)}")
    if len(set(t.keys(rows))) > 1:
        differ = tidy.varying([dict(items, mpi=mpi) for items, mpi in zip(t.detail_of(rows)["identity"], rows["mpi"])])
        raise ProjectError(f"{len(set(t.keys(rows)))} different {bench} points at {size_bytes} bytes (they differ in "
                           f"{', '.join(differ) or 'noise'}): give --speedup, or a results file with one")
    c = tidy.over_launches(rows)
    if not c.median > 0:
        raise ProjectError(f"{bench} {metric} at {size_bytes} bytes is not a positive number")
    return c.median


def _corelib():
    return core.load()


def projected_speedup(fraction: float, speedup: float) -> float:
    """hmb_projected_speedup (metrics.c)."""
    return _corelib().hmb_projected_speedup(fraction, speedup)


def parse_size(text: str) -> int:
    """Bytes from "64K", "1M", "4096", as hmb-bench reads them (hmb_parse_size, units.c)."""
    out, err = ctypes.c_size_t(), ctypes.create_string_buffer(256)
    if _corelib().hmb_parse_size(text.encode(), ctypes.byref(out), err, len(err)) != 0:
        raise ProjectError(f"--size: {err.value.decode(errors='replace')}")
    return out.value


def check_inputs(fraction: float | None, speedup: float | None) -> None:
    if fraction is not None and not 0.0 <= fraction <= 1.0:
        raise ProjectError(f"--fraction: {fraction:g} is not a share between 0 and 1")
    if speedup is not None and not speedup > 0.0:
        raise ProjectError(f"--speedup: {speedup:g} must be > 0")


def table(rows: list[tuple]) -> str:
    """rows: (label, processes, f, s, projected)."""
    head = f"{'source':<28} {'processes':>9} {'f (p2p share)':>14} {'s (p2p speed-up)':>17} {'projected':>10}"
    lines = [head]
    for label, procs, f, s, proj in rows:
        lines.append(f"{label:<28} {procs if procs is not None else '-':>9} {f:>14.4f} {s:>17.3f} {proj:>10.3f}")
    return "\n".join(lines) + "\n"


FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def figure_path(name: str) -> Path:
    """--figure FILE: a file whose suffix names a format matplotlib writes (PNG, SVG, PDF)."""
    path = Path(name)
    if path.is_dir():
        raise ProjectError(f"--figure {name}: is a directory (give a file name ending in .png or .svg)")
    if path.suffix.lower() not in FIGURE_SUFFIXES:
        raise ProjectError(f"--figure {name}: the suffix names the format: use "
                           f"{', '.join(FIGURE_SUFFIXES)}")
    return path


PROJECTED = "projected_speedup"


def _frame(points: list[dict]):
    """Projections as rows of the tidy table (bench "project", metric projected_speedup, one row
    per projection: processes, f_pct, s and its source), for the figure engine. A projection whose
    s is no reading (its points oversubscribed...) is marked so: drawn hollow."""
    base = {"bench": "project", "metric": PROJECTED, "ci_lo": math.nan, "ci_hi": math.nan, "count": 1, "unit": "",
            "higher_is_better": True, "mpi": "", "library": "", "settings": "default", "noise": "none",
            "oversubscribed": False, "progress_shares_core": None, "host": "", "cpus": None, "tag": ""}
    return pd.DataFrame([{**base, "run_id": str(i), "source": str(i), **pt} for i, pt in enumerate(points)])


def _declaration(title: str, frame, footer: str) -> dict:
    by_processes = frame["processes"].notna().any()
    return {"id": "projection", "title": title, "bench": "project", "y": PROJECTED,
            "x": "processes" if by_processes else "f_pct", "hue": "s", "hue_format": "{}",
            "xlabel": "processes" if by_processes else "f, point-to-point share of run time (%)",
            "ylabel": "projected application speed-up", "ref": [{"y": 1.0, "label": "1: no gain"}],
            "logx": False, "footer": footer}


def _draw(points: list[dict], path: Path, title: str, footer: str) -> None:
    """The projections drawn by the figure engine into path (its suffix: the format)."""
    frame = _frame(points)
    fig, _ = figures.render(_declaration(title, frame, footer), frame)
    figures.save(fig, path.parent, path.stem, (path.suffix.lstrip(".").lower(),))


def _fs(rows: list[tuple]) -> str:
    """f of each source, said once: "snap.4.mpiP: f = 30.0%"."""
    return "; ".join(f"{label}: f = {100 * f:.1f}%" for label, f in dict.fromkeys((r[0], r[2]) for r in rows))


def figure(rows: list[tuple], path: Path, speedup_label: str) -> None:
    """Projected speed-up by process count (seed 000's Fig. 13) for rows (label, processes, f,
    s, projected): one line per s, f said below the figure."""
    points = [{"median": proj, "processes": procs, "f_pct": 100 * f, "s": f"s = {s:.3g}"}
              for _, procs, f, s, proj in rows]
    _draw(points, path, f"Projected speed-up, point-to-point {speedup_label}", _fs(rows))




def study_figure(fig: dict, df, outdir: Path) -> tuple[Path, str]:
    """A study's projection figure (a [[figure]] with `mpip`: report files under hmb/data/):
    f from each bundled mpiP report; s the seed's (`seed_speedup`) and HMB's own, per MPI: the
    median over launches of the study's `bench` metric `y` at `where` (tidy.select, the
    claims' reading; readings only, where there are any). Returns (the PNG, a note with the
    table and where s came from)."""
    profiles = [parse_mpip(DATA_DIR / name) for name in fig["mpip"]]
    speedups = []      # (label, s, what it is, a reading)
    if "seed_speedup" in fig:
        speedups.append(("seed", float(fig["seed_speedup"]), "the seed's", True))
    rows = tidy.select(df, fig.get("bench"), fig["y"], fig.get("where"))
    missing = []
    for m in ([] if rows is None or rows.empty else sorted(rows["mpi"].unique())):
        mine = rows[rows["mpi"] == m]
        solid = tidy.readings(mine)
        vals = tidy.point_medians(solid if not solid.empty else mine)
        if vals.empty or not float(vals.median()) > 0:
            continue
        launches = (solid if not solid.empty else mine)["run_id"].nunique()
        what = f"HMB {m} (median of {vals.size} point(s), {launches} launch(es)" + (
            ")" if not solid.empty else "; oversubscribed: not a reading)")
        speedups.append((m, float(vals.median()), what, not solid.empty))
    if len(speedups) == (1 if "seed_speedup" in fig else 0):
        missing.append(f"no {fig.get('bench')} {fig['y']} results at {fig.get('where') or 'any point'}: "
                       f"HMB's own s not drawn")
    if not speedups:
        raise ProjectError(f"{fig['number']}: no speed-up to project with (no seed_speedup, no results)")
    table_rows, points = [], []
    context = {}
    if rows is not None and not rows.empty:   # the measured s: the library and machine it came from
        context = {"library": "; ".join(sorted({" ".join(str(v).split()) for v in rows["library"].dropna()})),
                   "host": ",".join(sorted({h for v in rows["host"].dropna() for h in str(v).split(",") if h})),
                   "cpus": rows["cpus"].dropna().iloc[0] if rows["cpus"].notna().any() else None}
    for prof in profiles:
        for label, s, _, solid_s in speedups:
            proj = projected_speedup(prof.fraction, s)
            table_rows.append((f"{Path(prof.source).name} ({label})", prof.processes, prof.fraction, s, proj))
            points.append({"median": proj, "processes": prof.processes, "f_pct": 100 * prof.fraction,
                           "s": f"s = {s:.3g} ({label}{'' if solid_s else ', no reading'})",
                           "oversubscribed": not solid_s, **context})
    path = Path(outdir) / f"{fig['id']}.png"
    s_label = "s: " + "; ".join(f"{what} {s:.3g}" for _, s, what, _ in speedups)
    footer = (_fs([(Path(p.source).name, p.processes, p.fraction) for p in profiles])
              + " (hmb/data/mpip/README.md)")
    _draw(points, path, f"{fig['number']}: {fig['title']}", footer)
    note = (f"{fig['number']}: projected = 1 / ((1 - f) + f / s); " + "; ".join(missing + [s_label])
            + "\n\n```\n" + table(table_rows) + "```")
    return path, note


def run(args) -> int:
    """`hmb project` (arguments from cli.py)."""
    check_inputs(args.fraction, args.speedup)
    if (args.fraction is None) == (not args.mpip):
        raise ProjectError("give exactly one of --fraction F and --mpip REPORT...")
    if (args.speedup is None) == (args.results is None):
        raise ProjectError("give exactly one of --speedup S and --results FILE (with --bench, --size, --mode)")
    if args.speedup is not None:
        s, s_label = args.speedup, f"s = {args.speedup:g} (given)"
    else:
        if not args.size:
            raise ProjectError("--results needs --size (e.g. 64K)")
        size = parse_size(args.size)
        s = speedup_from_results(args.results, args.bench, size, args.mode)
        s_label = f"s = {s:.3g} ({args.bench} {args.mode}/single at {args.size})"
    if args.fraction is not None:
        rows = [("--fraction", None, args.fraction, s, projected_speedup(args.fraction, s))]
    else:
        profiles = sorted((parse_mpip(p) for p in args.mpip), key=lambda p: p.processes)
        rows = [(Path(p.source).name, p.processes, p.fraction, s, projected_speedup(p.fraction, s))
                for p in profiles]
    if args.figure:
        figure_path(args.figure)   # before any work: a bad --figure is a usage error
    print(f"# projected speed-up = 1 / ((1 - f) + f / s); {s_label}")
    print(table(rows), end="")
    if args.figure:
        figure(rows, figure_path(args.figure), s_label)
        print(f"hmb: wrote {args.figure}")
    return 0
