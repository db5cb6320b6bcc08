"""`hmb advise`: seed 001's adaptive eager threshold from a libhmbprof profile, and its verification.

Trigger (per message): non-blocking, larger than the current switch (it goes by rendezvous), and
post-to-wait >= 50 % of its estimated transfer time (size / bandwidth): its wait would have been
hidden had it gone eagerly (seed 001, the default). `--trigger outside-mpi` asks instead that the
part of post-to-wait its thread spent outside MPI calls (computation) reach 50 %: a window of sends
followed by one Waitall (queueing, no computation) then does not trigger. Rule: 2^ceil(log2(mean size of the triggered messages + header)) + 1024,
the one definition in src/harness/metrics.c (hmb_eager_threshold_rule), called through ctypes.
Per directed pair and per job; the job's setting comes from settings.threshold_env.
docs/toolkit.md, "Profiler and advisor", says how to read the output.
"""
from __future__ import annotations

import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from scipy import stats

from ..data import results
from ..data.outputs import check_output, write_json
from ..data.results import BLANK, decode, file_problem
from . import core
from . import launch
from . import mpi as hmpi
from . import settings

TRIGGER_FRACTION = 0.5
# --trigger -> the profile's histogram that must reach TRIGGER_FRACTION of the transfer time
TRIGGER_HIST = {"post-to-wait": "post_to_wait_hist", "outside-mpi": "outside_mpi_hist"}
TRIGGER_TEXT = {"post-to-wait": "post-to-wait", "outside-mpi": "time outside MPI between post and wait"}


class AdviseError(Exception):
    """One-line user-facing problem (exit status 2)."""


# ------------------------------------------------------------------ inputs

def _read_json(path: str, what: str):
    """One JSON document, read by results.decode (the decoder of every hmb JSON reader: a
    5000-digit integer, NaN or a lone surrogate is one line); a FIFO is refused, not read."""
    problem = file_problem(path)
    if problem:
        raise AdviseError(f"{what} {path}: {problem}")
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise AdviseError(f"{what} {path}: {e.strerror or e}") from None
    problem, value = decode(data)
    if problem or value is BLANK:
        raise AdviseError(f"{what} {path}: {problem or 'empty'}")
    return value


def load_profile(path: str) -> dict:
    prof = _read_json(path, "profile")
    if not isinstance(prof, dict) or prof.get("type") != "hmbprof":
        raise AdviseError(f"profile {path}: not a libhmbprof profile (no \"type\": \"hmbprof\")")
    if prof.get("schema") != 1:
        raise AdviseError(f"profile {path}: schema {prof.get('schema')!r} not understood (this hmb reads 1)")
    if not isinstance(prof.get("ranks"), list) or not prof["ranks"]:
        raise AdviseError(f"profile {path}: no ranks")
    return prof


def _jsonl(path: str, what: str) -> list[dict]:
    """The file's records (results.read_records); its first unreadable line is the error."""
    bad = []
    try:
        records = results.read_records(Path(path), bad)
    except results.ResultsError as e:
        raise AdviseError(f"{what}: {e}") from None
    if bad:
        raise AdviseError(f"{what} {bad[0]}" + (f" (and {len(bad) - 1} more bad lines)" if len(bad) > 1 else ""))
    return [rec for _, rec in records]


def _shape_checked(loader):
    """A record of the right kind but the wrong shape (a list where a number goes) is one
    line naming the file, not a traceback."""
    def checked(path: str, *a, **k):
        try:
            return loader(path, *a, **k)
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
            raise AdviseError(f"{path}: a record of unexpected shape ({type(e).__name__}: {e})") from None
    checked.__doc__, checked.__name__ = loader.__doc__, loader.__name__
    return checked


@_shape_checked
def load_probe(path: str) -> tuple[int | None, list | None]:
    """(switch: the largest size that still progressed, or None when no record found one;
    bandwidth table [[size, MB/s], ...] or None)
    from `hmb-bench proto --test probe` records (`switch_bytes` and `bandwidth_MBps` at the top or
    in `extra`; a bandwidth is a number, a metric {median}, or per-size [size, MB/s] pairs). With
    several views or switches the smallest switch wins: from there on some view needs MPI calls to
    progress. Several bandwidths of one size: their median."""
    lows, bws = [], defaultdict(list)
    for rec in _jsonl(path, "probe"):
        if rec.get("bench") != "proto":
            continue
        place = rec if "switch_bytes" in rec else rec.get("extra") or {}
        if "switch_bytes" not in place and "bandwidth_MBps" not in place:
            continue
        for pair in place.get("switch_bytes") or []:
            lows.append(int(pair[0]))
        bw = place.get("bandwidth_MBps", rec.get("bandwidth_MBps"))
        if isinstance(bw, dict):
            bw = bw.get("median")
        if isinstance(bw, (int, float)):
            bw = [[0, bw]]
        for size, mbps in bw if isinstance(bw, list) else []:
            if mbps > 0:
                bws[int(size)].append(float(mbps))
    table = [[size, statistics.median(v)] for size, v in sorted(bws.items())] or None
    if not lows and not table:
        raise AdviseError(f"probe {path}: no proto record with a switch_bytes interval or a bandwidth")
    return (min(lows) if lows else None), table


def bandwidth_at(table: list, size: float) -> float:
    """MB/s at this size from [[size, MB/s], ...] sorted by size: linear in log(size) between the
    measured sizes, the nearest one's outside them."""
    if size <= table[0][0] or len(table) == 1:
        return table[0][1] if size <= table[0][0] else table[-1][1]
    for (s0, b0), (s1, b1) in zip(table, table[1:]):
        if size <= s1:
            return b0 + (b1 - b0) * math.log(size / s0) / math.log(s1 / s0)
    return table[-1][1]


@_shape_checked
def load_tradeoff(path: str) -> dict:
    """threshold (bytes, or "default") -> per-peer library memory in kB, from `proto --test
    tradeoff` records: the record's `setting`/`threshold_bytes` (params or extra) and its first
    field whose name has `per_peer` and ends in `_kB` (top level, extra, or a metric's median)."""
    table = {}
    for rec in _jsonl(path, "trade-off"):
        if rec.get("bench") != "proto":
            continue
        places = [rec, rec.get("params") or {}, rec.get("extra") or {}]
        label = next((p[k] for p in places for k in ("threshold_bytes", "setting") if k in p), None)
        per_peer = None
        for p in places + [{k: v.get("median") for k, v in (rec.get("metrics") or {}).items()
                            if isinstance(v, dict)}]:
            per_peer = next((v for k, v in p.items() if "per_peer" in k and k.endswith("_kB")
                             and isinstance(v, (int, float))), None)
            if per_peer is not None:
                break
        if label is None or per_peer is None:
            continue
        key = "default" if str(label) == "default" else settings.parse_bytes(label)
        table[key] = float(per_peer)
    if not table:
        raise AdviseError(f"trade-off {path}: no proto record with a setting and a per-peer memory (..per_peer.._kB)")
    return table


# ------------------------------------------------------------------ the rule (one definition, in C)

def eager_threshold_rule(mean_size_bytes: float, header_bytes: int) -> int:
    """hmb_eager_threshold_rule from libhmbcore.so (built with hmb-bench). The pure library does
    not link MPI: the default MPICH build's copy serves advice for every library."""
    return int(core.load().hmb_eager_threshold_rule(float(mean_size_bytes), int(header_bytes)))


# ------------------------------------------------------------------ the advice

def _triggered(entry: dict, switch_bytes: int, bandwidth: list, hist: str) -> tuple[float, int]:
    """(size, messages that trigger) for one nonblocking_sizes entry. A bin of the histogram `hist`
    counts when its geometric middle reaches 50 % of the transfer time (resolution 1/8 octave)."""
    size = entry["size"] if entry.get("exact", True) else entry["bytes"] / max(1, entry["messages"])
    if size <= switch_bytes:
        return size, 0
    if hist not in entry:
        raise AdviseError(f"the profile has no {hist} (written by an older libhmbprof.so); use --trigger post-to-wait")
    need_s = TRIGGER_FRACTION * size / (1e6 * bandwidth_at(bandwidth, size))
    return size, sum(int(n) for lo, hi, n in entry[hist] if math.sqrt(max(lo, 0.0) * hi) >= need_s)


def analyse(prof: dict, switch_bytes: int, bandwidth_MBps: float | list, header_bytes: int, mpi_name: str,
            trigger: str = "post-to-wait") -> dict:
    """Per directed pair (src -> dst): non-blocking rendezvous messages and those that trigger; per
    size the larger of the sender's and the receiver's triggered counts (one message counts once)."""
    bw = bandwidth_MBps if isinstance(bandwidth_MBps, list) else [[0, bandwidth_MBps]]
    # (src, dst) -> size -> {side: [non-blocking rendezvous messages, triggered]}
    flows = defaultdict(lambda: defaultdict(lambda: {"send": [0, 0], "recv": [0, 0]}))
    for rank in prof["ranks"]:
        me = rank["rank"]
        for peer in rank.get("peers", []):
            for side, pair in (("send", (me, peer["peer"])), ("recv", (peer["peer"], me))):
                for e in peer[side].get("nonblocking_sizes", []):
                    size, n = _triggered(e, switch_bytes, bw, TRIGGER_HIST[trigger])
                    cell = flows[pair][size][side]
                    cell[0] += int(e["messages"]) if size > switch_bytes else 0
                    cell[1] += n
    pairs, job_n, job_bytes = [], 0, 0.0
    for (src, dst), sizes in sorted(flows.items()):
        def both(col):   # per size, the side that saw more: one message counts once
            return {s: max(c["send"][col], c["recv"][col]) for s, c in sizes.items()}
        n = sum(both(1).values())
        nbytes = sum(s * k for s, k in both(1).items())
        rdv = sum(both(0).values())
        row = {"src": src, "dst": dst, "rendezvous_nonblocking": rdv, "triggered": n, "threshold_bytes": None}
        if n:
            row["mean_size_bytes"] = nbytes / n
            row["threshold_bytes"] = eager_threshold_rule(nbytes / n, header_bytes)
            job_n += n
            job_bytes += nbytes
        pairs.append(row)
    job = {"triggered": job_n, "threshold_bytes": None}
    if job_n:
        job["mean_size_bytes"] = job_bytes / job_n
        job["threshold_bytes"] = eager_threshold_rule(job_bytes / job_n, header_bytes)
        try:
            job["env"] = settings.threshold_env(hmpi.flavor(mpi_name), job["threshold_bytes"])
        except ValueError as e:
            job["env_error"] = str(e)
    ranks = prof["ranks"]
    job["p2p_fraction_mean"] = statistics.mean(r.get("p2p_fraction", 0.0) for r in ranks)
    job["world_size"] = prof.get("world_size", len(ranks))
    return {"type": "advise", "schema": 1, "switch_bytes": switch_bytes, "bandwidth_MBps": bandwidth_MBps, "header_bytes": header_bytes,
            "trigger": trigger, "pairs": pairs, "job": job}


def memory_cost(tradeoff: dict, threshold: int, peers: int) -> str:
    """Extra library memory per rank at this job's size: (per-peer cost at the smallest measured
    threshold >= the advised one, minus the default's) x peers."""
    measured = sorted(k for k in tradeoff if k != "default")
    at = next((k for k in measured if k >= threshold), None)
    if at is None or "default" not in tradeoff:
        return f"memory cost unknown (trade-off data has no default and no threshold >= {threshold} B)"
    extra_kB = (tradeoff[at] - tradeoff["default"]) * peers
    return (f"memory: {tradeoff[at]:.1f} kB/peer at {at} B vs {tradeoff['default']:.1f} kB/peer by default "
            f"-> {extra_kB:+.0f} kB per rank with {peers} peers")


def _bandwidth_text(bw: float | list) -> str:
    if not isinstance(bw, list):
        return f"{bw:g} MB/s"
    if len(bw) == 1:
        return f"{bw[0][1]:g} MB/s"
    return "per size " + ", ".join(f"{size} B {mbps:.0f}" for size, mbps in bw) + " MB/s"


def render(adv: dict, mpi_name: str, tradeoff: dict | None) -> str:
    job = adv["job"]
    lines = [f"# hmb advise ({mpi_name}): current switch {adv['switch_bytes']} B (larger messages go by "
             f"rendezvous), bandwidth {_bandwidth_text(adv['bandwidth_MBps'])}, header {adv['header_bytes']} B",
             f"# trigger: non-blocking, size > switch, {TRIGGER_TEXT[adv['trigger']]} >= 50 % of size/bandwidth",
             f"{'pair':>12} {'rdv non-blocking':>17} {'triggered':>10} {'mean size B':>12} {'threshold B':>12}"]
    for p in adv["pairs"]:
        mean = f"{p['mean_size_bytes']:.0f}" if p["triggered"] else "-"
        thr = str(p["threshold_bytes"]) if p["threshold_bytes"] else "keep"
        lines.append(f"{p['src']:>5} -> {p['dst']:<4} {p['rendezvous_nonblocking']:>17} {p['triggered']:>10} "
                     f"{mean:>12} {thr:>12}")
    if not job["threshold_bytes"]:
        lines.append("job: keep the current threshold (no non-blocking rendezvous message met the trigger)")
        return "\n".join(lines) + "\n"
    lines.append(f"job: threshold {job['threshold_bytes']} B (mean triggered size {job['mean_size_bytes']:.0f} B, "
                 f"{job['triggered']} messages); share of run time in point-to-point {job['p2p_fraction_mean']:.1%}")
    if "env" in job:
        lines.append("setting: " + " ".join(f"{k}={v}" for k, v in job["env"].items()))
    else:
        lines.append(f"setting: none ({job['env_error']})")
    if tradeoff is None:
        lines.append("memory cost unknown (no trade-off data)")
    else:
        lines.append(memory_cost(tradeoff, job["threshold_bytes"], job["world_size"] - 1))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ verification

def _launch(cmd: list[str], env: dict, regex: re.Pattern | None, profile: Path | None) -> dict:
    """One launch: wall s, rc, the figure the regex captures in stdout (or None), and memory: the
    ranks' VmHWM summed from the profile when libhmbprof was preloaded, else the largest RSS of
    any process of the launch (rusage of the children, launcher included)."""
    if profile is not None:
        profile.unlink(missing_ok=True)
    with launch.machine_lock(" ".join(cmd)[:300]):
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True, errors="replace")
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
    res = {"wall_s": time.perf_counter() - t0, "rc": os.waitstatus_to_exitcode(status), "figure": None,
           "memory_kB": usage.ru_maxrss, "memory_from": "max RSS of a process"}
    if regex is not None:
        found = regex.findall(out)
        if found:
            res["figure"] = float(found[-1] if isinstance(found[-1], str) else found[-1][0])
    if profile is not None and profile.exists():
        try:
            hwm = [r["vmhwm_kib"] for r in json.loads(profile.read_text())["ranks"]]
            res["memory_kB"], res["memory_from"] = sum(hwm), f"VmHWM summed over {len(hwm)} ranks"
        except (ValueError, KeyError, TypeError):
            pass
    return res


def ratio_ci(ratios: list[float]) -> tuple[float, float, float]:
    """Geometric mean of paired ratios and its 95 % t-interval (on log ratios; NaN with one pair)."""
    logs = [math.log(r) for r in ratios]
    mean = statistics.mean(logs)
    if len(logs) < 2:
        return math.exp(mean), math.nan, math.nan
    half = stats.t.ppf(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def verify(cmd: list[str], mpi_name: str, threshold: int, launches: int, regex: str | None,
           higher_is_better: bool, profile_memory: bool = True) -> str:
    impl = hmpi.find(mpi_name, install=False)
    try:
        advised_env = settings.threshold_env(hmpi.flavor(mpi_name), threshold)
    except ValueError as e:
        raise AdviseError(str(e)) from None
    pattern = None
    if regex:
        try:
            pattern = re.compile(regex)
        except re.error as e:
            raise AdviseError(f"--figure: bad regular expression ({e})") from None
    base = impl.env()
    profile = None
    prof_lib = impl.build_dir / "libhmbprof.so"
    if profile_memory and prof_lib.exists():   # both settings alike, so it costs no fairness
        tmp = Path(tempfile.mkdtemp(prefix="hmb-verify-"))
        profile = tmp / "profile.json"
        base = {**base, "LD_PRELOAD": " ".join(filter(None, [str(prof_lib), base.get("LD_PRELOAD")])),
                "HMB_PROF_OUT": str(profile), "HMB_PROF_QUIET": "1"}
    envs = {"default": base, "advised": {**base, **advised_env}}
    runs = {"default": [], "advised": []}
    for k in range(launches):
        for name in ("default", "advised"):   # ABAB...: slow drifts hit both alike
            r = _launch(cmd, envs[name], pattern, profile)
            if r["rc"] != 0:
                raise AdviseError(f"verify: launch {k + 1} ({name}) exited with status {r['rc']}: {shlex.join(cmd)}")
            if pattern is not None and r["figure"] is None:
                raise AdviseError(f"verify: launch {k + 1} ({name}) printed nothing matching --figure")
            runs[name].append(r)
            print(f"hmb advise: launch {k + 1}/{launches} {name}: {r['wall_s']:.3f} s"
                  + (f", figure {r['figure']:g}" if r["figure"] is not None else "")
                  + f", memory {r['memory_kB']} kB", file=sys.stderr)
    pairs = list(zip(runs["default"], runs["advised"]))
    if pattern is None:
        what, ratios = "wall time", [a["wall_s"] / b["wall_s"] for a, b in pairs]
    elif higher_is_better:
        what, ratios = "figure", [b["figure"] / a["figure"] for a, b in pairs]
    else:
        what, ratios = "figure", [a["figure"] / b["figure"] for a, b in pairs]
    gm, lo, hi = ratio_ci(ratios)
    mem_a = statistics.median(r["memory_kB"] for r in runs["default"])
    mem_b = statistics.median(r["memory_kB"] for r in runs["advised"])
    sources = {r["memory_from"] for r in runs["default"] + runs["advised"]}
    ci = f"95 % CI {lo:.3f}-{hi:.3f}" if not math.isnan(lo) else "no CI with one pair"
    return (f"# verify ({mpi_name}): advised {' '.join(f'{k}={v}' for k, v in advised_env.items())}\n"
            f"# {launches} launch pairs, alternating default/advised: {shlex.join(cmd)}\n"
            f"speed-up ({what}, default/advised): {gm:.3f} ({ci}; pairs {min(ratios):.3f}-{max(ratios):.3f})\n"
            f"memory ({' / '.join(sorted(sources))}, median): {mem_a:.0f} kB default, {mem_b:.0f} kB advised "
            f"({mem_b - mem_a:+.0f} kB)\n")


# ------------------------------------------------------------------ command

def run(args) -> int:
    if args.json:   # before anything is read or run: never over an input, a FIFO or a device
        check_output(args.json, "--json", "advise", [args.profile, args.probe, args.tradeoff], force=True)
    tradeoff = load_tradeoff(args.tradeoff) if args.tradeoff else None
    if args.launches < 1:
        raise AdviseError("--launches must be at least 1")
    if args.header < 0:
        raise AdviseError("--header must be >= 0")
    program = getattr(args, "program", [])
    if args.verify and not program:
        raise AdviseError("--verify needs the program after --, e.g. hmb advise --verify --apply 16K -- mpiexec -n 2 ./app")
    if program and not args.verify:
        raise AdviseError("a program after -- is only run with --verify")
    threshold = None
    if args.apply is not None:
        try:
            threshold = settings.parse_bytes(args.apply)
        except ValueError as e:
            raise AdviseError(f"--apply: {e}") from None
    if args.profile:
        prof = load_profile(args.profile)
        switch, bw = (None, None)
        if args.probe:
            switch, bw = load_probe(args.probe)
        if args.threshold is not None:
            switch = args.threshold
        if args.bandwidth is not None:
            bw = args.bandwidth
        if switch is None or bw is None:
            found = " (the probe found no switch: give --threshold)" if args.probe and bw is not None else ""
            raise AdviseError("advise needs the current switch and bandwidth: --probe FILE "
                              f"(proto --test probe results) or --threshold BYTES --bandwidth MBps{found}")
        if switch < 0 or (not isinstance(bw, list) and not 0 < bw < math.inf):   # inf advised "keep"
            raise AdviseError("--threshold must be >= 0 and --bandwidth > 0 (a finite number)")
        try:
            adv = analyse(prof, switch, bw, args.header, args.mpi, args.trigger)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise AdviseError(f"profile {args.profile}: malformed ({type(e).__name__}: {e})") from None
        sys.stdout.write(render(adv, args.mpi, tradeoff))
        if args.json:
            write_json(args.json, adv, "--json")
        if threshold is None:
            threshold = adv["job"]["threshold_bytes"]
    elif not args.verify:
        raise AdviseError("advise needs a PROFILE (libhmbprof output), or --verify --apply BYTES -- CMD")
    if args.verify:
        if threshold is None:
            raise AdviseError("verify: nothing to verify (no threshold advised; --apply BYTES sets one)")
        sys.stdout.write(verify(program, args.mpi, threshold, args.launches, args.figure, args.higher_is_better,
                                profile_memory=not args.no_profile))
    return 0
