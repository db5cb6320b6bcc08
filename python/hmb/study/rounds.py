"""Measurement driven by the claims (`hmb study run`'s default; docs/studies.md, "Claim-driven
runs"): measure until each question is answered, not for a fixed budget.

- The plan. Each claim this machine can judge (claims.not_here) selects points (its `where`
  and `over`, at its scale and threads). Every bench of the fitted grid is narrowed to the points
  its claims select (narrow: the launch axes and the in-launch lists, sizes, partitions, modes,
  cut to the values the selections name) and merged per launch layout, so a launch holds every
  point its claims need and no other.
- Round 1 gives those points FIRST launches (a verdict rests on at least three), each point's CI
  target derived from the tolerance of the claims that read it (ci_target), and every bench of
  the grid one short launch (FIGURE_ARGS) so each figure is drawn: points only a figure reads
  get nothing more.
- After each round every claim says where it stands (claims.judge: agrees or differs at 97.5 %,
  undecided with its distance from the edge, not comparable with why). The next round gives
  STEP more launches to the points of the claims still undecided, per library, up to CAP
  launches a claim; a claim undecided at the cap, or whose launches stopped growing, says so
  and is never forced into a verdict.
- Launches of a claim's points carry tags -r0, -r1, ...: those of one index pair up across its
  selections (claims.replicate); the figure launches are left out of the claims' readings.

Everything is derived from the study, the grid and the results, so `--resume` continues the
rounds where they stopped (finished launches are kept by hmb sweep).
"""
from __future__ import annotations

import copy
import dataclasses
import fnmatch
import json
import math
import re
import sys
import time
import uuid
from pathlib import Path

import tomli_w

from ..data import descriptors, tidy
from ..data import results as hresults
from ..data.outputs import write_file
from ..run import core, sweep
from . import claims as hclaims
from . import resolve

FIRST, STEP, CAP = 3, 2, 9
# One short launch per bench of the grid for its figures: one iteration a point, no warm-up.
FIGURE_ARGS = {"iters": 1, "warmup": 0, "ci-target": 0, "budget": "0.1s"}
# A claim's points: at most this long per point and at least this many iterations, none of them
# a warm-up (the launches, not one launch's samples, decide a claim, and a launch's median over
# three or more iterations leaves out a cold first one; a 100 ms point of part's four phases is
# 0.4 s an iteration, a warm-up there 3 s of a seven-size launch)
CLAIM_BUDGET, CLAIM_ITERS, CLAIM_WARMUP = "0.3s", 3, 0
# Options that leave out a phase, and the metrics only that phase gives: a launch whose readers
# (its claims; for the figures' launches, the study's figures and tables) read none of them runs
# without it (part's polled and persistent baselines are a quarter of its iterations' time each,
# with their compute: seed000 reads no persistent metric, so its part launches run two phases).
OMITTABLE = {"part": {"no-polled": frozenset({"overhead_polled", "t_pt2pt_polled_us", "polled_over_blocking"}),
                      "no-persistent": frozenset({"overhead_persistent", "t_persist_us"})}}
CI_MIN, CI_MAX = 0.01, 0.10


@dataclasses.dataclass
class Driven:
    """A bench of the claims' plan: its config (repeats set per round) and the claims it feeds."""
    bench: dict
    claims: list          # expanded claims (dicts) that read its points
    keys: list            # their history keys
    tags: dict = dataclasses.field(default_factory=dict)   # mpi -> the tags of its launches so far
    runs: list = dataclasses.field(default_factory=list)   # this round's benches (bench focused), each with its mpis


def selections(claim: dict) -> list[dict]:
    """The point filters a claim reads: its where and its over, each at its scale; with the
    threads it needs (min_threads) as a filter of its own ("threads>=")."""
    out = []
    for sel in [claim.get("where") or {}] + ([claim["over"]] if claim.get("over") else []):
        s = {**sel, **(claim.get("scale") or {})}
        if claim.get("min_threads"):
            s["threads>="] = claim["min_threads"]
        out.append(s)
    return out


def _listed(v) -> list:
    return v if isinstance(v, list) else [v]


def _matches(value, wants) -> bool:
    return any(tidy.same(value, w) for w in wants)


def _option_for(col: str, args: dict) -> str | None:
    if col == "size_bytes":
        return "sizes" if "sizes" in args else None
    for name in (col, col.replace("_", "-")):
        if name in args:
            return name
    return None


def _narrow_sizes(value, wants) -> tuple[object, bool]:
    """sizes narrowed to wants: (new value, True) or (value, False) where no size matches (a
    benchmark whose point size is not the option's: halo3d records the face it ran)."""
    specs = _listed(value)
    kept = []
    for spec in specs:
        try:
            sizes = core.size_list(str(spec))
        except ValueError:
            return value, False
        kept += [n for n in sizes if _matches(n, wants) and n not in kept]
    if not kept:
        return value, False
    text = ",".join(str(n) for n in kept)
    return ([text] if isinstance(value, list) else text), True


def _default(defaults: dict, col: str):
    for name in (col, col.replace("_", "-")):
        if name in defaults:
            return defaults[name]
    return None


def narrow(bench: dict, sel: dict, defaults: dict | None = None) -> dict | None:
    """The bench cut to the points sel selects: each filter on a column the bench sets (a launch
    axis, an in-launch list, threads, ranks, settings) keeps only the matching values; None when
    the bench cannot produce a point of sel. A filter on an option the bench leaves at its
    default (defaults: option -> hmb-bench's default, from --describe) must hold that default;
    filters on other columns are left to the reading."""
    defaults = defaults or {}
    b = copy.deepcopy(bench)
    args = b.setdefault("args", {})
    for col, want in sel.items():
        wants = _listed(want)
        if col == "threads>=":
            kept = [t for t in _listed(b.get("threads", 1)) if float(t) >= float(want)]
            if not kept:
                return None
            b["threads"] = kept
            continue
        if col in ("threads", "ranks", "settings"):
            have = _listed(b.get(col, "default" if col == "settings" else 1))
            kept = [v for v in have if _matches(v, wants)]
            if not kept:
                return None
            b[col] = kept
            continue
        opt = _option_for(col, args)
        if opt is None:
            default = _default(defaults, col)
            if default is not None and not _matches(default, wants):
                return None     # the benchmark runs only its default there, which sel does not hold
            continue
        value = args[opt]
        if opt == "sizes":
            args[opt], _ = _narrow_sizes(value, wants)
            continue
        if isinstance(value, list):            # a launch axis
            kept = [v for v in value if _matches(v, wants)]
            if not kept:
                return None
            args[opt] = kept
        elif isinstance(value, str) and "," in value:   # an in-launch list
            kept = [v for v in value.split(",") if _matches(v.strip(), wants)]
            if not kept:
                return None
            args[opt] = ",".join(kept)
        elif not _matches(value, wants):
            return None
    return b


def focus(bench: dict, claims: list[dict]) -> dict:
    """The bench of a later round: its launch axes (list-valued options; threads, ranks and
    settings) cut to the values the claims still undecided select, so a merged bench does not
    relaunch the configurations of claims already decided (seed000's Fig. 5 bench holds 100 ms
    and 10 ms launches: the 10 ms claims alone went on). In-launch lists and sizes stay whole, so
    each launch kept is the one earlier rounds ran (the same tag) and pairs up with them; an axis
    no claim's selection narrows stays whole."""
    b = copy.deepcopy(bench)
    args = b.setdefault("args", {})
    axes = [k for k, v in args.items() if isinstance(v, list) and k != "sizes"]
    top = [c for c in ("threads", "ranks", "settings") if isinstance(b.get(c), list)]
    kept: dict = {k: [] for k in axes + top}
    for c in claims:
        for sel in selections(c):
            n = narrow(bench, sel)
            if n is None:
                continue
            for k in axes + top:
                have = n["args"].get(k) if k in axes else n.get(k)
                kept[k] += [v for v in _listed(have) if v not in kept[k]]
    for k in axes:
        if kept[k]:
            args[k] = [v for v in args[k] if v in kept[k]]
    for k in top:
        if kept[k]:
            b[k] = [v for v in b[k] if v in kept[k]]
    return b


def _union(key: str, a, b):
    """Two values of an option of narrowed benches of one origin merged: launch axes and
    in-launch lists united in order (sizes as numbers), else a's."""
    if a == b:
        return a
    if isinstance(a, list) or isinstance(b, list):
        return list(dict.fromkeys(_listed(a) + _listed(b)))
    if isinstance(a, str) and isinstance(b, str):
        if key == "sizes":
            try:
                return ",".join(str(n) for n in dict.fromkeys(core.size_list(a) + core.size_list(b)))
            except ValueError:
                return a
        items = list(dict.fromkeys(a.split(",") + b.split(",")))
        try:
            return ",".join(sorted(items, key=float))
        except ValueError:
            return ",".join(items)
    return a


def _values(b: dict, defaults: dict, control: frozenset) -> dict:
    """A narrowed bench as option -> the set of values it runs (launch axes, in-launch lists split,
    sizes as numbers; threads, ranks and settings too; an option left out at its default): the
    points it holds are their product. Run-control options (control) hold no point."""
    out = {"threads": frozenset(str(v) for v in _listed(b.get("threads", 1))),
           "ranks": frozenset(str(v) for v in _listed(b.get("ranks", 2))),
           "settings": frozenset(str(v) for v in _listed(b.get("settings", "default")))}
    args = {**{k: v for k, v in defaults.items() if k not in control}, **(b.get("args") or {})}
    for k, v in args.items():
        if k in control:
            continue
        items = []
        for x in _listed(v):
            if k == "sizes" and isinstance(x, str):
                try:
                    items += [str(n) for n in core.size_list(x)]
                    continue
                except ValueError:
                    pass
            items += [y.strip() for y in x.split(",")] if isinstance(x, str) else [str(x)]
        out[k] = frozenset(items)
    return out


def _number_first(v: str):
    try:
        return (0, float(v), v)
    except ValueError:
        return (1, 0.0, v)


def _absorb(m: Driven, d: Driven) -> None:
    for c, k in zip(d.claims, d.keys):
        if k not in m.keys:
            m.claims.append(c)
            m.keys.append(k)


def merge(driven: list[Driven], described: dict | None = None) -> list[Driven]:
    """Narrowed benches of one benchmark merged where that adds no point: a bench whose points
    another holds is dropped into it, and two that differ in one option only become one (that
    option's values united). Others stay apart (a point both hold runs in both). described: the
    descriptors (options' defaults and which are run control)."""
    described = described or {}

    def values(b):
        desc = described.get(b["name"])
        defaults = {o.name: o.default for o in desc.options if o.default not in (None, "")} if desc else {}
        control = frozenset(o.name for o in desc.options if o.role == "run-control") if desc else frozenset()
        return _values(b, defaults, control | {"budget", "iters", "warmup", "ci-target", "timeout"})
    out: list[Driven] = []
    for d in driven:
        out.append(Driven(copy.deepcopy(d.bench), list(d.claims), list(d.keys)))
    changed = True
    while changed:
        changed = False
        for i, a in enumerate(out):
            for j, b in enumerate(out):
                if i == j or a.bench["name"] != b.bench["name"]:
                    continue
                va, vb = values(a.bench), values(b.bench)
                if va.keys() != vb.keys():
                    continue
                differ = [k for k in va if va[k] != vb[k]]
                if all(va[k] <= vb[k] for k in va):          # a's points are b's
                    _absorb(b, a)
                elif len(differ) == 1:                       # one option apart: an exact union
                    k = differ[0]
                    if k in ("threads", "ranks", "settings"):
                        b.bench[k] = sorted(va[k] | vb[k], key=_number_first)
                    elif k in a.bench["args"] and k in b.bench["args"]:
                        b.bench["args"][k] = _union(k, b.bench["args"][k], a.bench["args"][k])
                    else:
                        continue
                    _absorb(b, a)
                else:
                    continue
                out.pop(i)
                changed = True
                break
            if changed:
                break
    for d in out:
        d.bench.pop("_origin", None)
    return out


def ci_target(claims: list[dict]) -> float:
    """The CI half-width a point needs, relative to its median, from the claims that read it: a
    third of the narrowest relative tolerance (a 2x effect needs less precision than ±5 %), within
    CI_MIN..CI_MAX; trends and peaks, whose tolerance is on ρ or a position, take CI_MAX / 2."""
    rel = []
    for c in claims:
        if c.get("trend") or c.get("peak"):
            rel.append(CI_MAX * 1.5)
            continue
        lo, hi = hclaims.acceptance(c)
        v = float(c.get("value", 0.0)) if "value" in c else (lo + hi) / 2
        null = hclaims.null_of(c)
        edges = [e for e in (lo, hi) if math.isfinite(e)]
        ref = max(abs(v), 1e-12)
        if null is not None and edges:
            rel.append(min(abs(e - null) for e in edges) / max(abs(null), ref))
        elif edges:
            rel.append(min(abs(e - v) for e in edges) / ref if any(abs(e - v) > 0 for e in edges) else CI_MAX)
    target = min(rel) / 3 if rel else CI_MAX
    return round(min(CI_MAX, max(CI_MIN, target)), 3)


def plan(study, data: dict, judged: list[dict], keys: list[str], described: dict | None = None,
         budget: str | None = CLAIM_BUDGET) -> list[Driven]:
    """The claims' benches: every bench of the fitted grid (data) narrowed to each judged claim's
    selections, merged (merge), with the claims' CI target and budget. described: the benchmarks'
    descriptors (an option left at its default selects only that default)."""
    described = descriptors.local() if described is None else described
    driven = []
    common = (data.get("sweep") or {}).get("args") or {}
    benches = [{**b, "args": {**common, **(b.get("args") or {})}, "_origin": i} for i, b in enumerate(data["bench"])]
    for c, k in zip(judged, keys):
        for sel in selections(c):
            for b in benches:
                if b["name"] != c.get("bench"):
                    continue
                desc = described.get(b["name"])
                defaults = {o.name: o.default for o in desc.options if o.default not in (None, "")} if desc else {}
                n = narrow(b, sel, defaults)
                if n is not None:
                    driven.append(Driven(n, [c], [k]))
    out = merge(driven, described)
    for d in out:
        args = d.bench.setdefault("args", {})
        if budget is not None:   # the claims' own precision; None: the grid's (a fixed design on their points)
            args.update({"ci-target": ci_target(d.claims), "budget": budget})
            args["iters"] = min(_count(args.get("iters", 20)), CLAIM_ITERS)
            args["warmup"] = min(_count(args.get("warmup", 3)), CLAIM_WARMUP)
            omit_unread(d.bench, metrics_read(d.claims))
        d.bench["repeats"] = FIRST
    return out


def metrics_read(claims: list[dict], figures: list[dict] = ()) -> set:
    """The metrics the claims (metric, over_metric, their cause's; cells expanded) and the figures
    (a report figure they start `from` resolved) and tables (y, rows) read; a templated name
    ("throughput_{mode}_MBps") stands for every metric it matches (reads)."""
    out: set = set()
    for c in (e for c in claims for e in hclaims.expand(c)):
        out |= {c.get("metric"), c.get("over_metric")}
        cause = c.get("cause") or {}
        out |= {cause.get("metric"), cause.get("over_metric")}
    for f in figures:
        f = resolve(f)
        out |= set(_listed(f.get("y") or [])) | set(_listed(f.get("rows") or []))
    return out - {None}


def reads(read: set, metric: str) -> bool:
    """Whether read (metrics_read) holds the metric, by name or by a template matching it."""
    return metric in read or any("{" in r and fnmatch.fnmatchcase(metric, re.sub(r"\{[^}]*\}", "*", r))
                                 for r in read)


def omit_unread(bench: dict, read: set) -> None:
    """Set the bench's OMITTABLE options whose metrics nothing in read needs."""
    for option, metrics in OMITTABLE.get(bench.get("name"), {}).items():
        if not any(reads(read, m) for m in metrics):
            bench.setdefault("args", {})[option] = True


def keep_modes(bench: dict, read: set, described: dict) -> None:
    """A bench whose --mode lists paired modes keeps those whose metrics read holds, and the
    modes such a metric is taken against (its description names their metric: ratio_multiple is
    throughput_multiple / throughput_single); unchanged where read holds none of its modes'."""
    desc = described.get(bench.get("name"))
    args = bench.get("args") or {}
    if desc is None or not desc.modes or "mode" not in args:
        return
    of = {metric: mode.name for mode in desc.modes for metric in mode.metrics}
    need: set = set()
    for metric, mode in of.items():
        if reads(read, metric):
            info = desc.metric(metric)
            text = info.description if info else ""
            need |= {mode} | {m for other, m in of.items() if re.search(rf"\b{re.escape(other)}\b", text)}
    value = args["mode"]
    names = [x for v in _listed(value) for x in str(v).split(",")]
    if names == ["all"]:
        names = [m.name for m in desc.modes if m.choice]
    kept = [m for m in names if m in need]
    if need and kept and len(kept) < len(names):
        args["mode"] = kept if isinstance(value, list) else ",".join(kept)


def _count(v) -> int:
    try:
        return min(int(x) for x in str(v).split(","))
    except ValueError:
        return 20


def figure_benches(data: dict, study=None) -> list[dict]:
    """Every bench of the grid, once, short: what the figures draw (without the phases and modes
    that none of the study's figures and tables reads, when the study is given: claims never
    read these launches)."""
    out = []
    shown = [resolve(f) for f in study.figures + study.tables] if study is not None else None
    described = descriptors.local() if study is not None else {}
    common = (data.get("sweep") or {}).get("args") or {}
    for b in data["bench"]:
        b = copy.deepcopy(b)
        b["args"] = {**common, **b.get("args", {}), **FIGURE_ARGS}
        if shown is not None:
            read = metrics_read([], [f for f in shown if f.get("bench") == b["name"]])
            omit_unread(b, read)
            keep_modes(b, read, described)
        b["repeats"] = 1
        out.append(b)
    return out


def launch_seconds(records: list[dict]) -> dict:
    """tag -> seconds its launch took (the sweep's launch records)."""
    return {r.get("tag"): float(r.get("elapsed_s") or 0.0) for r in records if r.get("type") == "launch"}


def figure_share(output: Path, figure_tags: list) -> tuple[int, float]:
    """The figures' short launches in the run: how many finished and their seconds."""
    took = launch_seconds([rec for _, rec in hresults.read_records(output)]) if output.exists() else {}
    tags = [t for t in figure_tags if t in took]
    return len(tags), sum(took[t] for t in tags)


def summary_line(name: str, seconds: float, launches: int, verdicts: list,
                 figures: tuple[int, float] | None = None) -> str:
    """A study's line: time, launches (of them the figures' short ones, given), and claims
    decided, unstable, undecided, not comparable."""
    count = lambda *w: sum(v.verdict in w for v in verdicts)   # noqa: E731
    agree, differ = count(hclaims.AGREES), count(hclaims.DIFFERS)
    share = f" ({figures[0]} of them the figures', {figures[1]:.0f} s)" if figures and figures[0] else ""
    return (f"{name}: {seconds:.0f} s, {launches} launches{share}; claims: {agree + differ} decided ({agree} agree, "
            f"{differ} differ), {count(hclaims.UNSTABLE)} unstable, {count(hclaims.UNDECIDED)} undecided, "
            f"{count(hclaims.NOT_COMPARABLE)} not comparable")


def write_rounds(out: Path, outcome: "Outcome") -> None:
    """DIR/rounds.json (the output schema's `rounds`): what the report needs of the rounds."""
    data = {"type": "rounds", "schema": 1, "run_id": outcome.run_id or uuid.uuid4().hex,
            "figure_tags": outcome.figure_tags, "rounds": outcome.rounds, "seconds": round(outcome.seconds, 1),
            "claims": outcome.state}
    write_file(out / "rounds.json", json.dumps(data, indent=1, default=str) + "\n")


def now() -> float:
    return time.monotonic()


@dataclasses.dataclass
class Unit:
    """One study in a claim-driven run: the study, its driven benches, and the claims they judge."""
    study: object
    driven: list
    judged: list           # expanded claims (dicts)
    keys: list             # their history keys


@dataclasses.dataclass
class Outcome:
    rc: int
    seconds: float
    rounds: int
    figure_tags: list
    state: dict            # "key|mpi" -> {"round": r, "launches": n, "seconds": s, "tags": [...], ...}
    launches: int = 0
    run_id: str = ""


def _configs(bench: dict) -> int:
    """The launches one repeat of a bench makes per library: the product of its launch axes."""
    n = 1
    for v in list((bench.get("args") or {}).values()) + [bench.get(c) for c in ("threads", "ranks", "settings")]:
        n *= len(v) if isinstance(v, list) else 1
    return n


def _next_round(units: list, still: dict) -> dict:
    """id(Driven) -> its benches for the next round, each with the libraries it runs on: per
    library, the bench focused on the cells still undecided there (still: (claim key, mpi) -> the
    undecided verdicts' claims, each cut to its cell of a `per`), libraries with the same focus
    sharing one bench."""
    out = {}
    for u in units:
        for d in u.driven:
            groups: dict = {}
            for m in dict.fromkeys(m for k in d.keys for (kk, m) in still if kk == k):
                cells = [c for k in d.keys for c in still.get((k, m), ())]
                b = focus(d.bench, cells)
                groups.setdefault(json.dumps(b, sort_keys=True, default=str), (b, []))[1].append(m)
            if groups:
                out[id(d)] = [{**b, "mpis": sorted(ms)} for b, ms in groups.values()]
    return out


def _next_round_seconds(units: list, elapsed: dict, following: dict) -> float:
    """What the next round should take: per focused bench and library, the mean of the Driven's
    launches there so far times the STEP repeats it gets of each of the bench's launches."""
    total = 0.0
    for u in units:
        for d in u.driven:
            for b in following.get(id(d), ()):
                for m in b["mpis"]:
                    took = [elapsed[t] for t in d.tags.get(m, ()) if t in elapsed]
                    total += STEP * _configs(b) * (sum(took) / len(took) if took else 0.0)
    return total


def sweep_config(benches: list[dict], mpis: list, output: Path, seed: int, timeout: str) -> dict:
    out = []
    for b in benches:
        b = copy.deepcopy(b)
        b.setdefault("mpis", list(mpis))
        b.pop("figures", None)
        out.append(b)
    return {"sweep": {"mpis": list(mpis), "repeats": 1, "seed": seed, "timeout": timeout, "output": str(output)},
            "bench": out}


def _load_cfg(data: dict, path: Path, hosts):
    write_file(path, "# hmb study: a claim-driven round (docs/studies.md)\n" + tomli_w.dumps(data))
    cfg = sweep.load(str(path))
    cfg.hosts = hosts
    return cfg


def _finished(output: Path) -> set:
    return sweep.finished_tags(output) if output.exists() else set()


def drive(units: list[Unit], figures: list[dict], out: Path, mpis: list, hosts=None, quiet=False,
          timeout="3600s", cap: int = CAP, time_limit: float | None = None, build: str = "always",
          first: int = FIRST) -> Outcome:
    """Run the rounds (module docstring) for the units into out/results.jsonl: round 1 with the
    figures' short launches, then STEP more launches of undecided claims' points per round up to
    cap launches a claim or time_limit seconds. Returns the outcome for the report."""
    output = out / "results.jsonl"
    start = now()
    figure_tags: list = []
    if figures:
        fcfg = _load_cfg(sweep_config(figures, mpis, output, 1, timeout), out / "figures.toml", hosts)
        figure_tags = [s.tag for s in sweep.expand(fcfg, probe_mpi=False)]
    for u in units:
        for d in u.driven:
            d.bench["mpis"] = list(mpis)
            d.bench["repeats"] = first
            d.runs = [d.bench]
    state: dict = {}
    last_n: dict = {}
    target = first
    rc, rnd = 0, 0
    while True:
        rnd += 1
        runs = [(d, b) for u in units for d in u.driven for b in d.runs if b.get("mpis")]
        if not runs and not (rnd == 1 and figures):
            break
        data = sweep_config([b for _, b in runs] + (figures if rnd == 1 else []), mpis, output, rnd, timeout)
        cfg = _load_cfg(data, out / "rounds.toml", hosts)
        for (d, _), b in zip(runs, cfg.benches):    # the claims' benches come first, in this order
            for spec in sweep.expand(dataclasses.replace(cfg, benches=[b]), probe_mpi=False):
                d.tags.setdefault(spec.mpi, set()).add(spec.tag)
        todo = [s for s in sweep.expand(cfg, probe_mpi=False) if s.tag not in _finished(output)]
        if todo:
            if not quiet:
                print(f"hmb study: round {rnd}: {len(todo)} launch{'es' if len(todo) != 1 else ''}", flush=True,
                      file=sys.stderr)
            r = sweep.run(cfg, resume=True, skip_missing=True, quiet=quiet, build=build if rnd == 1 else "missing")
            if r == 130:
                return Outcome(130, now() - start, rnd, figure_tags, state)
            rc = rc or r
        if not output.exists():
            break
        records = [rec for _, rec in hresults.read_records(output)]
        elapsed = launch_seconds(records)
        df = tidy.load([output], warn=False)
        if not df.empty:
            df = df[~df["tag"].isin(set(figure_tags))]
        undecided: dict = {}
        cells: dict = {}          # (claim key, mpi) -> the undecided cells that more launches could decide
        for u in units:
            for c, k in zip(u.judged, u.keys):
                feeding = [d for d in u.driven if k in d.keys]
                for m in mpis:
                    tags = {t for d in feeding for t in d.tags.get(m, ())}
                    rows = df[df["tag"].isin(tags)] if not df.empty else df
                    vs = hclaims.judge_all(c, rows, u.study.meta.get("setup", "")) if not rows.empty else []
                    sid = f"{k}|{m}"
                    st = state.setdefault(sid, {"round": 0})
                    st["tags"] = sorted(tags)     # the report judges the claim on these launches alone
                    st["launches"] = len({t for t in tags if t in elapsed})
                    st["seconds"] = round(sum(elapsed.get(t, 0.0) for t in tags), 1)
                    st["n"] = min((v.decision.n for v in vs if v.decision is not None), default=0)
                    still = [v for v in vs if v.verdict == hclaims.UNDECIDED]
                    if any(v.verdict in hclaims.DECIDED for v in vs) and not still and not st["round"]:
                        st["round"] = rnd
                    # the launches of the cells still undecided (a decided cell's stop growing
                    # once later rounds focus on the others)
                    n = min((v.decision.n for v in still if v.decision is not None), default=st["n"])
                    grew = n > last_n.get(sid, -1)
                    last_n[sid] = n
                    futile = [v for v in still if v.decision is not None and not hclaims.reachable(v.decision, cap)]
                    if still and n < cap and grew and len(futile) < len(still):
                        undecided.setdefault(k, set()).add(m)
                        cells[(k, m)] = [v.claim for v in still if not any(v is f for f in futile)]
                        st.pop("stopped", None)
                    elif still:
                        st["stopped"] = (f"the cap of {cap} launches" if n >= cap else
                                         f"at its spread, {cap} launches would still reach across the edge"
                                         if futile else "its launches stopped adding readings (failed, or not paired)")
        if not undecided:
            break
        took = now() - start
        following = _next_round(units, cells)
        if time_limit is not None and took + _next_round_seconds(units, elapsed, following) > time_limit:
            for k, ms in undecided.items():
                for m in ms:
                    state[f"{k}|{m}"]["stopped"] = f"the run's time limit ({time_limit:.0f} s)"
            break
        target += STEP
        for u in units:
            for d in u.driven:
                d.runs = following.get(id(d), [])
                for b in d.runs:
                    b["repeats"] = target
    launches = len([t for t in launch_seconds([rec for _, rec in hresults.read_records(output)]) if t]) \
        if output.exists() else 0
    return Outcome(rc, now() - start, rnd, figure_tags, state, launches, uuid.uuid4().hex)
