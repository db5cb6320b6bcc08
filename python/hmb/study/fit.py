"""A study's grid as a sweep config: as published, or fitted to this machine.

--as-published keeps the seed's ranks, threads and parameters. --fit keeps the seed's axes and
shrinks only what does not fit: ranks × threads ≤ cores (ranks first to the bench's
`fit_ranks`, else to the largest that fit; threads to what is left per rank), sizes within
memory. Every change is one line, printed and recorded beside the results (fit.txt).
"""
from __future__ import annotations

import copy
import json
import os
import subprocess

from ..run import core, launch, mpi
from ..run.mpi import MPIError
from . import STUDY_ONLY_BENCH_KEYS, Study, StudyError


# hmb sweep runs at most this many threads a core on one machine (sweep.LOCAL_PROCS_PER_CORE)
OVERSUBSCRIBE_LIMIT = 16


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 1 << 34


def _span(values: list) -> str:
    return str(values[0]) if len(values) == 1 else f"{min(values)}–{max(values)}"


def config(study: Study, mode: str = "fit", figure: str | None = None, demo: bool = False,
           ncores: int | None = None, memory: int | None = None, repeats: int | None = None) -> tuple[dict, list]:
    """(sweep config as a dict for hmb sweep, [changes]) for mode "fit" or "as-published".
    figure: only the benches feeding that figure; demo: also each bench's demo_args."""
    ncores = ncores or cores()
    memory = memory or memory_bytes()
    sweep = copy.deepcopy(study.data["sweep"])
    changes, benches = [], []
    for i, b in enumerate(study.benches):
        if figure and figure not in b.get("figures", []):
            continue
        if demo and b.get("demo") is False:
            continue
        b = copy.deepcopy(b)
        where = f"{b['name']}[{i}]"
        if demo and b.get("demo_args"):
            b["args"] = {**b.get("args", {}), **b["demo_args"]}
            changes.append(f"{where}: demo: " + ", ".join(f"{k} = {v}" for k, v in b["demo_args"].items()))
        if demo and b.get("demo_threads"):
            changes.append(f"{where}: demo: threads {_span(_listed(b.get('threads', 1)))} → {_span(b['demo_threads'])}")
            b["threads"] = b["demo_threads"]
        per_thread = b.get("partition_per_thread", False)
        for k in STUDY_ONLY_BENCH_KEYS:
            b.pop(k, None)
        group = _per_thread(b, where, ncores if mode == "fit" else None, changes) if per_thread else [b]
        for g in group:
            if mode == "fit" and not per_thread:
                _fit_layout(g, study.benches[i], where, ncores, changes)
            if mode == "fit":
                _fit_sizes(g, where, memory, changes, sweep.get("args") or {})
            if repeats:
                g["repeats"] = repeats
            benches.append(g)
    if not benches:
        raise StudyError(f"study {study.name}: no bench feeds figure {figure!r}")
    if repeats:
        sweep["repeats"] = repeats
    return {"sweep": sweep, "bench": benches}, changes


def _listed(v) -> list:
    return v if isinstance(v, list) else [v]


def _largest_divisor(n: int, at_most: int) -> int:
    """The largest divisor of n that is at most at_most (1 at least): the divisors in pairs up to
    sqrt(n), so a published T of 10^8 takes 10^4 steps, not 10^8."""
    best, d = 1, 1
    while d * d <= n:
        if n % d == 0:
            best = max([best] + [x for x in (d, n // d) if x <= at_most])
        d += 1
    return best


def _per_thread(b: dict, where: str, ncores: int | None, changes: list) -> list:
    """The seed's one partition per thread (P = T for each T of `threads`): as published, one
    bench per T with partitions = T; fitted, threads shrink to what the cores hold per rank and
    P keeps the seed's values, each thread owning P/T (T the largest thread count that fits and
    divides P). Returns the benches, grouped by thread count."""
    threads = b.get("threads", 1)
    threads = threads if isinstance(threads, list) else [threads]
    ranks = b.get("ranks", 2)
    ranks = ranks if isinstance(ranks, list) else [ranks]
    per_rank = max(1, ncores // max(1, min(ranks))) if ncores else max(threads)
    groups: dict[int, list[int]] = {}
    for p in threads:
        groups.setdefault(_largest_divisor(p, per_rank), []).append(p)
    out = []
    for t, ps in sorted(groups.items()):
        g = copy.deepcopy(b)
        g["threads"] = t
        g["args"] = {**g.get("args", {}), "partitions": ",".join(map(str, ps))}
        out.append(g)
    if ncores and any(t != p for t, ps in groups.items() for p in ps):
        kept = "; ".join(f"T = {t} for P = {_span(ps)}" for t, ps in sorted(groups.items()))
        changes.append(f"{where}: threads {_span(threads)} → {_span(sorted(groups))} (at most {per_rank} per rank on "
                       f"{ncores} cores); partitions {_span(threads)} kept, each thread owns P/T ({kept})")
    return out


def _fit_layout(b: dict, declared: dict, where: str, ncores: int, changes: list) -> None:
    ranks = b.get("ranks", 2)
    ranks = ranks if isinstance(ranks, list) else [ranks]
    fitting = [r for r in ranks if r <= ncores]
    if not fitting:
        fitting = declared.get("fit_ranks") or [min(ncores, 2) if ncores >= 2 else 2]
        over = max(fitting) > ncores
        kept = fitting == ranks
        changes.append(f"{where}: ranks {_span(ranks)} " + ("kept (the pattern needs them)" if kept else f"→ {_span(fitting)}")
                       + (f": more than the {ncores} cores, oversubscribed, drawn hollow, no claim reads it"
                          if over else ""))
    elif fitting != ranks:
        changes.append(f"{where}: ranks {_span(ranks)} → {_span(fitting)} (at most {ncores} cores)")
    b["ranks"] = fitting
    threads = b.get("threads", 1)
    threads = threads if isinstance(threads, list) else [threads]
    per_rank = max(1, ncores // max(1, min(fitting)))
    keep = [t for t in threads if t <= per_rank]
    if not keep:
        keep = declared.get("fit_threads") or [per_rank]
    for t in declared.get("oversubscribe") or []:   # the seed oversubscribed these on purpose
        if t in threads and t not in keep:
            if max(fitting) * t <= OVERSUBSCRIBE_LIMIT * ncores:
                keep.append(t)
                changes.append(f"{where}: threads {t} kept, oversubscribed as the seed's were ({max(fitting) * t} "
                               f"threads on {ncores} cores): only claims marked oversubscribed read them")
            else:
                changes.append(f"{where}: threads {t} not kept: {max(fitting) * t} threads on {ncores} cores exceed "
                               f"hmb sweep's {OVERSUBSCRIBE_LIMIT} a core (claims marked oversubscribed need "
                               f"{-(-max(fitting) * t // OVERSUBSCRIBE_LIMIT)} cores)")
    if keep != threads:
        msg = f"{where}: threads {_span(threads)} → {_span(keep)}"
        if max(keep) > per_rank:
            msg += f" (the benchmark needs them: more than the {ncores} cores, oversubscribed, drawn hollow, no claim reads it)"
        parts = (b.get("args") or {}).get("partitions")
        if parts is not None:
            msg += f"; partitions {parts} kept, each thread owns P/T"
        elif "thread-comm" in (b.get("args") or {}):
            msg += " (each face is cut into one share per thread: fewer shares than in the seed)"
        elif b["name"] in ("halo3d", "sweep3d"):
            fp = (b.get("args") or {}).get("face-partitions")
            if isinstance(fp, int):
                msg += f"; face partitions {fp} kept, each thread owns {fp}/T"
            else:
                msg += " (a face's partitions are the threads on it: fewer here than in the seed)"
        changes.append(msg)
    b["threads"] = keep


_rank_bytes_cache: dict = {}


def rank_bytes(bench: str, sizes: list, args: dict | None = None, threads: int = 1) -> dict:
    """{size: bytes}: what one rank of `bench` allocates for each message size, as hmb-bench says
    (`hmb-bench BENCH --sizes ... --launch-needs`, the benchmark's own rank_bytes: halo3d's size is
    the face of a cubic block, so its block and face buffers; others a fixed number of buffers of
    the size). args: the bench's other options (lists, the sweep's axes, are left out)."""
    scalar = {k: v for k, v in (args or {}).items() if k not in ("sizes", "threads") and not isinstance(v, list)}
    argv = [bench, "--sizes", ",".join(str(n) for n in sizes), "--threads", str(threads)] + launch.bench_argv(scalar)
    key = tuple(argv)
    if key not in _rank_bytes_cache:
        try:
            exe = mpi.local_binary()
        except MPIError as e:
            raise StudyError(f"{bench}: cannot ask hmb-bench for the memory per rank: {e}") from None
        p = subprocess.run([str(exe)] + argv + ["--launch-needs"], capture_output=True, text=True, errors="replace",
                           timeout=60)
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["no message"])[-1]
            raise StudyError(f"{bench}: hmb-bench --launch-needs: {last}")
        _rank_bytes_cache[key] = {int(k): int(v) for k, v in json.loads(p.stdout)["rank_bytes"].items()}
    return _rank_bytes_cache[key]


def _size_text(n: int) -> str:
    for suffix, mult in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{suffix}"
    return str(n)


def _fit_sizes(b: dict, where: str, memory: int, changes: list, common: dict | None = None) -> None:
    """Sizes whose ranks together need more than a quarter of this machine's memory are left
    out, and the change says so; a benchmark none of whose sizes fit is refused. A bench
    without its own sizes runs the [sweep].args sizes: those it keeps become its own."""
    args = b.get("args") or {}
    if "sizes" not in args:
        if "sizes" not in (common or {}):
            return
        args = {**args, "sizes": common["sizes"]}
        before = copy.deepcopy(args)
        _fit_sizes({**b, "args": args}, where, memory, changes)
        if args != before:
            b["args"] = args
        return
    ranks = max(b["ranks"]) if isinstance(b["ranks"], list) else b["ranks"]
    specs = args["sizes"] if isinstance(args["sizes"], list) else [args["sizes"]]
    try:
        lists = [core.size_list(str(spec)) for spec in specs]
    except ValueError as e:
        raise StudyError(f"{where}: sizes: {e}") from None
    threads = max(b["threads"]) if isinstance(b.get("threads"), list) else b.get("threads", 1)
    per_rank = rank_bytes(b["name"], sorted({n for sizes in lists for n in sizes}), args, threads)
    fits = lambda n: per_rank[n] * ranks <= memory // 4   # noqa: E731
    kept = [[n for n in sizes if fits(n)] for sizes in lists]
    if all(len(k) == len(s) for k, s in zip(kept, lists)):
        return
    first_out = min(n for sizes in lists for n in sizes if not fits(n))
    need = per_rank[first_out] * ranks
    if not any(kept):
        raise StudyError(f"{where}: sizes from {first_out} bytes need about {need >> 20} MiB, more than a "
                         f"quarter of this machine's {memory >> 20} MiB: run it --as-published on a bigger one")
    texts = [",".join(_size_text(n) for n in k) for k in kept if k]
    args["sizes"] = texts if isinstance(args["sizes"], list) else texts[0]
    every = sorted({n for sizes in lists for n in sizes})
    left = sorted({n for k in kept for n in k})
    changes.append(f"{where}: sizes {_size_text(every[0])}–{_size_text(every[-1])} → "
                   f"{_size_text(left[0])}–{_size_text(left[-1])} (from {_size_text(first_out)} the ranks need "
                   f"about {need >> 20} MiB, more than a quarter of this machine's {memory >> 20} MiB)")
