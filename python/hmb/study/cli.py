"""`hmb study list | run | report` (the seed studies; docs/studies.md)."""
from __future__ import annotations

import sys
from pathlib import Path

from . import StudyError, load, names


def add_parser(sub) -> None:
    st = sub.add_parser("study", help="the seed papers' experiments: list, run, report",
                        description="A study is one seed paper's experiments as data: its grid, figures and "
                        "claims (python/hmb/studies/*.toml; docs/studies.md).")
    ss = st.add_subparsers(dest="study_cmd", metavar="{list,run,report}", required=True)
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
    r.add_argument("--figure", metavar="ID", help="only the benches feeding this figure")
    r.add_argument("--repeats", type=int, metavar="N", help="launches per point (default: the study's)")
    r.add_argument("-o", "--output-dir", metavar="DIR", help="default results/study-NAME")
    r.add_argument("--dry-run", action="store_true", help="print the launches, run nothing")
    r.add_argument("--resume", action="store_true", help="continue an interrupted run")
    r.set_defaults(func=cmd_run, mode=None)
    rp = ss.add_parser("report", help="the study's figures and its claims beside HMB's readings")
    rp.add_argument("name")
    rp.add_argument("results", nargs="+", metavar="RESULTS")
    rp.add_argument("-o", "--output-dir", metavar="DIR", help="default: beside the first results file")
    rp.set_defaults(func=cmd_report)


def _fail(e: Exception) -> int:
    print(f"hmb: {e}", file=sys.stderr)
    return 2


def cmd_list(args) -> int:
    for n in names():
        s = load(n)
        figs = ", ".join(f["number"] for f in s.figures)
        print(f"{n:22s} {s.citation()}\n{'':22s} figures: {figs}; {len(s.claims)} claims")
    return 0


def cmd_run(args) -> int:
    try:
        return run(args.name, mode=args.mode, mpi=args.mpi, figure=args.figure, repeats=args.repeats,
                   outdir=args.output_dir, dry_run=args.dry_run, resume=args.resume)
    except StudyError as e:
        return _fail(e)


def run(name, mode=None, mpi=None, figure=None, repeats=None, outdir=None, dry_run=False,
        resume=False, demo=False, quiet=False) -> int:
    """Run a study (or one figure of it); the fitted config and its changes are written beside
    the results (config.toml, fit.txt). Returns hmb sweep's status."""
    import tomli_w

    from .. import sweep
    from . import fit
    from .fit import cores
    if repeats is not None and repeats < 1:
        raise StudyError(f"--repeats: expected a positive integer, got {repeats}")
    study = load(name)
    published = max(max(b["ranks"] if isinstance(b.get("ranks", 2), list) else [b.get("ranks", 2)]) *
                    max(b["threads"] if isinstance(b.get("threads", 1), list) else [b.get("threads", 1)])
                    for b in study.benches)
    if mode is None:
        mode = "fit" if published > cores() else "as-published"
    data, changes = fit.config(study, mode, figure=figure, demo=demo, repeats=repeats)
    out = Path(outdir or f"results/study-{study.name}")
    out.mkdir(parents=True, exist_ok=True)
    data["sweep"]["output"] = str(out / "results.jsonl")
    (out / "config.toml").write_text(f"# hmb study run {study.name} --{mode}"
                                     f"{f' --figure {figure}' if figure else ''} ({study.citation()})\n"
                                     + tomli_w.dumps(data))
    header = f"{study.name} --{mode}: {len(changes)} change{'s' if len(changes) != 1 else ''} " \
             f"for {cores()} cores"
    (out / "fit.txt").write_text("\n".join([header] + changes) + "\n")
    if not quiet:
        print(f"hmb study: {header}", file=sys.stderr)
        for c in changes:
            print(f"  {c}", file=sys.stderr)
    try:
        cfg = sweep.load(str(out / "config.toml"), mpis_override=mpi.split(",") if mpi else None)
    except sweep.ConfigError as e:
        raise StudyError(f"study {study.name}: {e}") from None
    return sweep.run(cfg, resume=resume, dry_run=dry_run, overwrite=not resume, skip_missing=True,
                     quiet=quiet)


def cmd_report(args) -> int:
    from .. import results
    try:
        study = load(args.name)
        text, _ = report(study, args.results, args.output_dir)
    except (StudyError, results.ResultsError) as e:
        return _fail(e)
    print(text)
    return 0


def report(study, paths, outdir=None, figures_only=None) -> tuple[str, list]:
    """Write the study's figures and study.md; returns (the markdown, the claim verdicts)."""
    from .. import results, tidy
    from . import claims, figures
    rs = results.load(list(paths))
    df = tidy.frame(rs)
    out = Path(outdir) if outdir else Path(paths[0]).resolve().parent
    m = study.meta
    lines = [f"# {m['title']}", "", f"{study.citation()} — HMB study `{study.name}`.", "",
             f"The seed's setup: {m.get('setup', 'not stated')}.", ""]
    fit_txt = Path(paths[0]).resolve().parent / "fit.txt"
    if fit_txt.is_file():
        lines += ["## What --fit changed", "", "```", fit_txt.read_text().rstrip(), "```", ""]
    if m.get("missing"):
        lines += ["## Not comparable: HMB lacks", ""] + [f"- {x}" for x in m["missing"]] + [""]
    lines += ["## Figures", ""]
    for fig in study.figures:
        if figures_only and fig["id"] not in figures_only:
            continue
        path, note = figures.draw(fig, df, out / "figures")
        if path is not None:
            lines += [f"![{fig['number']}](figures/{path.name})", "", f"{note}. {fig.get('note', '')}".rstrip(), ""]
        else:
            lines += [f"- {note}" + (f" ({fig['needs']})" if fig.get("needs") else ""), ""]
    verdicts = claims.table(study, df)
    if figures_only:
        verdicts = [v for v in verdicts if v.claim.get("figure_id") in figures_only]
    lines += ["## Claims beside HMB's readings", "", claims.markdown(verdicts)]
    text = "\n".join(lines)
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.md").write_text(text)
    return text, verdicts
