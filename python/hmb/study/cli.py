"""`hmb study list | run | report | demo` (the seed studies; docs/studies.md).

A study runs through hmb sweep (sweep.py): the study's grid, fitted or as published, is
written as a sweep config beside the results and run by the same driver as every config, so
finished launches are kept, `--resume` continues, and the machine lock applies.
"""
from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

from . import StudyError, load, names

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
    r.add_argument("--resume", action="store_true", help="continue an interrupted run")
    r.set_defaults(func=cmd_run, mode=None)
    rp = ss.add_parser("report", help="a study run's figures and its claims beside HMB's readings")
    rp.add_argument("dir", metavar="DIR", help="the directory hmb study run wrote (study.toml, results.jsonl)")
    rp.add_argument("--study", metavar="NAME", help="judge against this study instead of DIR/study.toml")
    rp.set_defaults(func=cmd_report)
    d = ss.add_parser("demo", help="the headline figure of every study, --fit, small (about 2 minutes)")
    d.add_argument("--mpi", default="mpich", help="MPI(s), comma-separated (default mpich)")
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
            print(f"{n:22s} {s.citation()}\n{'':22s} {figs}; {len(s.claims)} claims"
                  + (f"; {len(s.not_run())} not runnable" if s.not_run() else ""))
    except StudyError as e:
        return _fail(e)
    return 0


def cmd_run(args) -> int:
    from .. import sweep
    try:
        return run(args.name, mode=args.mode, mpi=args.mpi, figure=args.figure, repeats=args.repeats,
                   outdir=args.out, dry_run=args.dry_run, resume=args.resume, budget=args.budget)
    except (StudyError, sweep.ConfigError) as e:
        return _fail(e)


def _mpis(text: str | None) -> list | None:
    from .. import mpi as hmpi
    return hmpi.names(text, "--mpi", StudyError) if text else None


def default_mode(study) -> str:
    from .fit import cores
    published = max(max(_listed(b.get("ranks", 2))) * max(_listed(b.get("threads", 1))) for b in study.benches)
    return "fit" if published > cores() else "as-published"


def _listed(v) -> list:
    return v if isinstance(v, list) else [v]


def _write_config(out: Path, data: dict, comment: str) -> Path:
    import tomli_w
    out.mkdir(parents=True, exist_ok=True)
    path = out / "config.toml"
    path.write_text(f"# {comment}\n" + tomli_w.dumps(data))
    return path


QUICK_ITERS, QUICK_WARMUP = 5, 1   # --budget: at most these per point (hmb-bench: 20 and 3)


def with_budget(data: dict, budget: str) -> list[str]:
    """--budget: every bench's time per point set to budget (hmb-bench --budget), and the
    minimum and warm-up iterations to at most QUICK_ITERS and QUICK_WARMUP; returns the changes
    to record, naming what they replaced."""
    from ..units import parse_duration
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
        was = {int(common.get(name, default))} | {int(b["args"][name]) for b in data["bench"]
                                                    if name in (b.get("args") or {})}
        if max(was) > quick:
            common[name] = min(quick, int(common.get(name, default)))
            for b in data["bench"]:
                if int((b.get("args") or {}).get(name, 0)) > quick:
                    b["args"][name] = quick
            label = "minimum iterations" if name == "iters" else "warm-up iterations"
            changes.append(f"{label} per point {'/'.join(map(str, sorted(was)))} → at most {quick} (--budget)")
    return changes


def run(name, mode=None, mpi=None, figure=None, repeats=None, outdir=None, dry_run=False,
        resume=False, quiet=False, budget=None) -> int:
    """Run a study (or one figure of it) through hmb sweep; the study file, the fitted config
    and its changes are written beside the results (study.toml, config.toml, fit.txt), then the
    report (study.md, figures/). Returns hmb sweep's status."""
    from .. import sweep
    from . import fit
    if repeats is not None and repeats < 1:
        raise StudyError(f"--repeats: expected a positive integer, got {repeats}")
    mpis = _mpis(mpi)
    study = load(name)
    if figure and figure not in [f["id"] for f in study.figures + study.tables]:
        raise StudyError(f"study {study.name}: no figure or table {figure!r} (has: "
                         f"{', '.join(f['id'] for f in study.figures + study.tables)})")
    mode = mode or default_mode(study)
    for line in study.not_run(figure):
        print(f"hmb study: {line}", file=sys.stderr)
    if figure and any(f["id"] == figure and f.get("needs") for f in study.figures):
        return 0
    data, changes = fit.config(study, mode, figure=figure, repeats=repeats)
    if budget is not None:
        changes += with_budget(data, budget)
    out = Path(outdir or f"results/study-{study.name}")
    data["sweep"]["output"] = str(out / "results.jsonl")
    done = out / "results.jsonl"
    if done.exists() and done.stat().st_size > 0 and not resume and not dry_run:
        raise StudyError(f"{done} already has results: pass --resume to continue that run, or --out DIR "
                         f"for a new one (hmb study report {out} reads it)")
    config = _write_config(out, data, f"hmb study run {study.name} --{mode}"
                           f"{f' --figure {figure}' if figure else ''} ({study.citation()})")
    shutil.copyfile(study.path, out / "study.toml")
    header = f"{study.name} --{mode}: {len(changes)} change{'s' if len(changes) != 1 else ''} for {fit.cores()} cores"
    (out / "fit.txt").write_text("\n".join([header] + changes) + "\n")
    if not quiet:
        print(f"hmb study: {header}", file=sys.stderr)
        for c in changes:
            print(f"  {c}", file=sys.stderr)
    cfg = sweep.load(str(config), mpis_override=mpis)
    rc = sweep.run(cfg, resume=resume, dry_run=dry_run, skip_missing=True, quiet=quiet)
    if dry_run or rc == 130 or not Path(cfg.output).exists():
        return rc
    text, _ = report(study, [cfg.output], out, figures_only=[figure] if figure else None)
    if not quiet:
        print(text)
    return rc


def slurm_config(name: str) -> str:
    """hmb slurm --study NAME: write the study's grid as published to results/study-NAME/config.toml
    (the sbatch script runs hmb sweep on it with --resume); returns its path."""
    from . import fit
    study = load(name)
    data, _ = fit.config(study, "as-published")
    out = Path(f"results/study-{study.name}")
    data["sweep"]["output"] = str(out / "results.jsonl")
    for line in study.not_run():
        print(f"hmb study: {line}", file=sys.stderr)
    path = _write_config(out, data, f"hmb slurm --study {study.name} (as published; {study.citation()})")
    shutil.copyfile(study.path, out / "study.toml")
    return str(path)


def cmd_report(args) -> int:
    from .. import results
    try:
        d = Path(args.dir)
        if not d.is_dir():
            raise StudyError(f"{args.dir}: not a directory (give the directory hmb study run wrote)")
        study = load(args.study) if args.study else None
        if study is None:
            if not (d / "study.toml").is_file():
                raise StudyError(f"{d}: no study.toml (not written by hmb study run; name one with --study)")
            study = load(str(d / "study.toml"))
        files = sorted(d.glob("*.jsonl"))
        if not files:
            raise StudyError(f"{d}: no results (*.jsonl)")
        text, _ = report(study, files, d)
    except (StudyError, results.ResultsError) as e:
        return _fail(e)
    print(text)
    return 0


def report(study, paths, outdir=None, figures_only=None) -> tuple[str, list]:
    """Write the study's figures, tables and study.md; returns (the markdown, the verdicts)."""
    from .. import results, tidy
    from . import claims, figures
    rs = results.load([str(p) for p in paths])
    df = tidy.frame(rs)
    out = Path(outdir) if outdir else Path(paths[0]).resolve().parent
    m = study.meta
    lines = [f"# {m['title']}", "", f"{study.citation()} — HMB study `{study.name}`.", "",
             f"The seed's setup: {m.get('setup', 'not stated')}.", ""]
    fit_txt = out / "fit.txt"
    if fit_txt.is_file():
        lines += ["## What --fit changed", "", "```", fit_txt.read_text().rstrip(), "```", ""]
    gaps = study.not_run()
    if gaps:
        lines += ["## Not run: HMB lacks", ""] + [f"- {x[len('not run: '):]}" for x in gaps] + [""]
    lines += ["## Figures and tables", ""]
    for fig in study.figures:
        if (figures_only and fig["id"] not in figures_only) or fig.get("needs"):
            continue
        if fig.get("mpip"):    # a projection from bundled mpiP reports: hmb project (project.py)
            from .. import project
            try:
                path, note = project.study_figure(fig, df, out / "figures")
                lines += [f"![{fig['number']}](figures/{path.name})", "", note, "", fig.get("note", ""), ""]
            except project.ProjectError as e:
                lines += [f"- {e}", ""]
            continue
        path, note = figures.draw(fig, df, out / "figures")
        if path is not None:
            lines += [f"![{fig['number']}](figures/{path.name})", "", f"{note}. {fig.get('note', '')}".rstrip(), ""]
        else:
            lines += [f"- {note}", ""]
    for t in study.tables:
        if figures_only and t["id"] not in figures_only:
            continue
        lines += [figures.table(t, df), t.get("note", ""), ""]
    verdicts = claims.table(study, df, tidy.unsupported(rs))
    if figures_only:
        verdicts = [v for v in verdicts if v.claim.get("figure_id") in figures_only]
    lines += ["## Claims beside HMB's readings", "", claims.markdown(verdicts)]
    text = "\n".join(lines)
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.md").write_text(text)
    return text, verdicts


def wrap_line(line: str, width: int) -> str:
    """A demo line folded to width, its continuation indented two more than the line (a claim's
    quote and verdict run to 300 characters)."""
    indent = len(line) - len(line.lstrip(" "))
    return textwrap.fill(line, width=width, subsequent_indent=" " * (indent + 2),
                         break_long_words=False, break_on_hyphens=False)


def cmd_demo(args) -> int:
    from .. import results, sweep
    try:
        return demo(args.mpi, Path(args.out))
    except (StudyError, sweep.ConfigError, results.ResultsError) as e:
        return _fail(e)


def demo_config(mpis: list) -> tuple[dict, list, list]:
    """One sweep config holding every study's headline figure, --fit, with each study's demo
    settings (demo_args, demo_threads, demo_repeats launches): (config, [(study, figure id)],
    [changes])."""
    from . import fit
    benches, heads, changes = [], [], []
    for n in names():
        study = load(n)
        head = study.meta["headline"]
        data, ch = fit.config(study, "fit", figure=head, demo=True,
                              repeats=study.meta.get("demo_repeats", 1))
        common = data["sweep"].get("args", {})
        if study.meta.get("demo_budget"):
            common = {**common, "budget": study.meta["demo_budget"]}
        for b in data["bench"]:
            b["args"] = {**common, **b.get("args", {})}
            b.pop("mpis", None)
            benches.append(b)
        heads.append((study, head))
        changes += [f"{n}: {c}" for c in ch]
    cfg = {"sweep": {"mpis": mpis, "repeats": 1, "seed": 1, "timeout": DEMO_TIMEOUT}, "bench": benches}
    return cfg, heads, changes


def demo(mpi: str, out: Path) -> int:
    """Run every study's headline figure --fit and small, then report each and print its
    readings: the claims of that figure with their verdicts, and each launch's reading where
    a study asks for several launches (a library bimodal from launch to launch)."""
    import time

    from .. import sweep, tidy
    from . import claims
    mpis = _mpis(mpi)
    data, heads, changes = demo_config(mpis)
    data["sweep"]["output"] = str(out / "demo.jsonl")
    config = _write_config(out, data, "hmb study demo: the headline figure of every study, --fit, small")
    (out / "fit.txt").write_text("\n".join([f"hmb study demo --fit: {len(changes)} changes"] + changes) + "\n")
    print(f"hmb study demo: {len(heads)} studies' headline figures on {', '.join(mpis)} -> {out}", file=sys.stderr)
    t0 = time.monotonic()
    rc = sweep.run(sweep.load(str(config)), overwrite=True, skip_missing=True, build="always")
    took = time.monotonic() - t0
    if rc == 130:
        return rc
    if not Path(data["sweep"]["output"]).exists():
        raise StudyError("the demo produced no results")
    df = tidy.load([data["sweep"]["output"]], warn=False)
    lines = [f"hmb study demo: {took:.0f} s on {', '.join(mpis)}; what --fit changed: {out / 'fit.txt'}"]
    width = max(60, min(shutil.get_terminal_size((120, 24)).columns, 120))
    for study, head in heads:
        sub = out / study.name
        sub.mkdir(parents=True, exist_ok=True)
        own = [c[len(study.name) + 2:] for c in changes if c.startswith(f"{study.name}: ")]
        (sub / "fit.txt").write_text("\n".join([f"{study.name} demo --fit: {len(own)} changes"] + own) + "\n")
        _, verdicts = report(study, [data["sweep"]["output"]], sub, figures_only=[head])
        fig = next((f for f in study.figures + study.tables if f["id"] == head), {})
        lines += ["", wrap_line(f"{study.name} — {fig.get('number', head)}: {fig.get('title', '')}", width),
                  wrap_line(f"  ({study.citation()})", width)]
        for v in verdicts:
            lines += [wrap_line(f"  {v.claim['figure']}: \"{v.claim['quote']}\"", width),
                      wrap_line(f"    HMB{f' ({v.mpi})' if v.mpi else ''}: {v.reading} → {v.verdict}"
                                + (f" ({v.reason})" if v.reason else ""), width)]
            launches = claims.per_launch(v.claim, df[df["mpi"] == v.mpi] if v.mpi else df)
            if len(launches) > 1 and "launches disagree" not in v.reason:
                lines.append(f"    each launch alone: {', '.join(launches)}")
        lines.append(f"  report: {sub / 'study.md'}")
    text = "\n".join(lines) + "\n"
    (out / "demo.md").write_text(text)
    print("\n" + text)
    return 0 if rc == 0 else 1
