"""The `hmb` command line: build, run, sweep, report, compare, slurm, demo, check, advise, and the
commands of hmb.study and hmb.lab (hmb.cli.main runs it).

Every user error is one line "hmb: ..." on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import shlex
import sys
from pathlib import Path

# Modules that load numpy, pandas, matplotlib or scipy (the report, compare, repeats, project,
# advise, the tidy table) are imported by the command that needs them: `hmb --help` and every
# other command start without them.
from . import __version__
from .data import outputs, results, validate
from .data.outputs import check_output, write_text
from .data.units import parse_duration
from .lab import nodes as lab
from .lab import slurm as lab_slurm
from .run import check, conform, launch, mpi, settings, slurm, sweep
from .run.requirements import explain
from .run.sweep import MAX_LAUNCHES
from .study import StudyError
from .study import cli as study_cli

EXAMPLES = """examples:
  hmb demo                                   build, run configs/demo.toml, write results/report.html
  hmb run part -n 2 --threads 2 -- --sizes 64K,1M --partitions 1,2,4 --noise uniform:4
  hmb run async --mpi openmpi -- --op pt2pt --progress none,thread,impl
  hmb sweep configs/part-async.toml          a grid over benchmarks x parameters x MPIs
  hmb sweep configs/part-async.toml --resume continue an interrupted sweep
  hmb report results/sweep.jsonl -o results/report
  hmb compare before.jsonl after.jsonl
  hmb slurm configs/part-async.toml --nodes 2 --ranks-per-node 1 --threads 8 -o job.sbatch
  hmb check --mpi openmpi                    can numbers measured on this machine be trusted?
  hmb advise prof.json --mpi mpich --probe probe.jsonl --verify -- mpiexec -n 2 ./app
  hmb project --mpip snap.4.mpiP snap.16.mpiP --results r.jsonl --bench sweep3d --size 64K --mode partitioned
"""


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse with hmb's error style: one line, exit 2."""

    def error(self, message):
        print(f"hmb: {message} (see: {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def _seed(text: str) -> int:
    """A random seed: a whole number from 0 to 2^64 - 1 (numpy refused -1 with a traceback)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r} (a whole number, 0 or more)") from None
    if not 0 <= n < 1 << 64:
        raise argparse.ArgumentTypeError(f"seed {n} is out of range (0 to 2^64 - 1)")
    return n


MAX_RANKS = 1 << 20     # a bound for rank counts (slurm.MAX_COUNT): -n 99999999999 reached mpiexec
MAX_THREADS = 256       # hmb-bench's HMB_MAX_THREADS


def _count(flag: str, value: int, most: int = MAX_RANKS, least: int = 1) -> int:
    """A count option in its range, else one UsageError line."""
    if value < least:
        raise UsageError(f"{flag} must be at least {least} (got {value:,})")
    if value > most:
        raise UsageError(f"{flag} must be at most {most:,} (got {value:,})")
    return value


def _nonempty(flag: str, value: str | None) -> str | None:
    """An option given an empty value is refused, not read as not given (--json '' wrote nothing)."""
    if value is not None and not value.strip():
        raise UsageError(f"{flag}: empty value")
    return value


def cmd_build(args) -> int:
    impl = mpi.find(args.mpi)
    path = mpi.build(impl, quiet=not args.verbose)
    print(path)
    return 0


def cmd_run(args) -> int:
    # --threads may be given to hmb (before --) or to hmb-bench (after --): both mean the same
    # thing, and hmb must lay out the launch for it, so it is never silently replaced.
    given = launch.parse_bench_argv(args.bench_args).get("threads")
    if given is not None:
        try:
            bench_threads = int(given)
        except (TypeError, ValueError):
            raise UsageError(f"--threads after --: '{given}' is not a whole number") from None
        if args.threads is not None and args.threads != bench_threads:
            raise UsageError(f"--threads {args.threads} before -- and --threads {bench_threads} after -- disagree")
        args.threads = bench_threads
    if args.threads is None:
        args.threads = 1
    _count("-n", args.ranks)
    _count("--threads", args.threads, MAX_THREADS)
    _count("--repeats", args.repeats, MAX_LAUNCHES)   # --repeats 99999999999 --dry-run printed for ever
    _nonempty("--json", args.json)
    _nonempty("--metric", args.metric)
    try:
        timeout = parse_duration(args.timeout) if args.timeout is not None else 0
    except ValueError as e:
        raise UsageError(f"--timeout: {e}") from None
    if args.metric and "metric" not in launch.parse_bench_argv(args.bench_args):
        args.bench_args = list(args.bench_args) + ["--metric", args.metric]   # every table, not only the summary
    if args.ranks_per_node is not None:
        _count("--ranks-per-node", args.ranks_per_node)
    args.hosts = launch.parse_hosts(args.hosts)
    target = launch.prepare(args.mpi, build="always" if args.rebuild else "stale")
    if args.repeats == 1:
        return launch.run_bench(target, args.bench, args.bench_args, args.ranks, args.threads,
                                json_path=args.json, launcher=args.launcher, timeout=timeout or None,
                                dry_run=args.dry_run, hosts=args.hosts, ranks_per_node=args.ranks_per_node)
    from .present import repeats   # pandas
    return repeats.run(target, args, timeout or None)


def cmd_sweep(args) -> int:
    if args.ranks_per_node is not None:
        _count("--ranks-per-node", args.ranks_per_node)
    cfg = sweep.load(args.config, mpis_override=mpi.names(args.mpi, "--mpi", UsageError) if args.mpi is not None else None,
                     output_override=args.output)
    if args.launcher:
        cfg.launcher = args.launcher
    cfg.hosts = args.hosts
    cfg.max_launches = args.max_launches
    return sweep.run(cfg, resume=args.resume, dry_run=args.dry_run, overwrite=args.overwrite,
                     ranks_per_node=args.ranks_per_node, build="always" if args.rebuild else "stale",
                     force=args.force)


def cmd_report(args) -> int:
    from .present import report   # matplotlib, pandas
    from .data import tidy   # pandas
    t = tidy.read(args.results)    # the report reads summaries, never --raw samples
    out = report.build(t, Path(args.output), embed=args.embed)
    print(f"hmb: wrote {out['html']} and {out['md']} ({len(out['figures'])} figures)")
    return 1 if t.bad_lines else 0   # unreadable lines were skipped (named on stderr)


def cmd_compare(args) -> int:
    check_output(args.output, "-o", "text", [args.a, args.b], force=args.force)   # before a second of imports
    from .present import compare   # scipy, pandas
    from .data import tidy   # pandas
    a, b = tidy.read([args.a], samples=True), tidy.read([args.b], samples=True)   # samples: the bootstrap
    metrics = args.metric.split(",") if args.metric else None
    c = compare.compare(a, b, metrics, seed=args.seed, label_a=args.a, label_b=args.b)
    if not c.rows and not c.only_a and not c.only_b:
        raise UsageError("no results to compare")
    text = compare.render(c)
    sys.stdout.write(text)
    if args.output:
        write_text(args.output, text, "-o")
    return 1 if a.bad_lines or b.bad_lines else 0   # unreadable lines were skipped (named on stderr)


@contextlib.contextmanager
def _undone_on_error(directory: Path, names: tuple):
    """Files of `directory` (and the directory) as they were, should the body fail: hmb slurm
    --study writes the study's config before the allocation is checked against its grid (2 ranks
    for seed004's 28 left results/study-seed004-async-slurm/ behind)."""
    existed = directory.is_dir()
    before = {n: (directory / n).read_bytes() if (directory / n).is_file() else None for n in names} if existed else {}
    made = [p for p in [directory, *directory.parents] if not p.exists()]   # to remove again, deepest first
    try:
        yield
    except BaseException:
        for n in names:
            old, path = before.get(n), directory / n
            if old is None:
                path.unlink(missing_ok=True)
            elif not path.is_file() or path.read_bytes() != old:
                path.write_bytes(old)
        for p in made:
            with contextlib.suppress(OSError):
                p.rmdir()
        raise


def cmd_slurm(args) -> int:
    slurm.check_options(args.nodes, args.ranks_per_node, args.threads, args.time, args.partition, args.account,
                        args.job_name, args.hosts)
    for flag, value in (("--study", args.study), ("--results", args.results), ("--mpi", args.mpi)):
        _nonempty(f"slurm {flag}", value)
    if args.output is not None and not args.output.strip():
        raise UsageError("slurm -o: give a file name, or - for standard output")
    # the config it reads, and the results file the script's sweep will write, are no place for it
    check_output(args.output, "slurm -o", "script", [args.config, args.results], force=args.force)
    guard = contextlib.nullcontext()
    if args.study:   # hmb slurm --study NAME: the study as published (study/cli.py writes its config)
        if args.config:
            raise UsageError("slurm: give a CONFIG or --study NAME, not both")
        try:
            guard = _undone_on_error(Path(f"results/study-{study_cli.load(args.study).name}-slurm"),
                                     ("config.toml", "study.toml", "fit.txt"))
        except StudyError as e:
            raise UsageError(str(e)) from None
    elif args.fit:
        raise UsageError("slurm: --fit goes with --study NAME")
    elif not args.config:
        raise UsageError("slurm: give a CONFIG.toml or --study NAME")
    with guard:
        if args.study:
            try:
                args.config = study_cli.slurm_config(args.study, fit_cores=args.nodes * args.ranks_per_node
                                                     * args.threads if args.fit else None)
            except StudyError as e:
                raise UsageError(str(e)) from None
        cfg = sweep.load(args.config, mpis_override=mpi.names(args.mpi, "--mpi", UsageError) if args.mpi is not None else None,
                         output_override=args.results)
        text = slurm.script(cfg, args.config, args.nodes, args.ranks_per_node, args.threads,
                            time=args.time, partition=args.partition, account=args.account,
                            job_name=args.job_name, mpi=args.mpi, hosts=args.hosts,
                            study_dir=str(Path(args.config).parent) if args.study else None)
    if args.study:   # said once the script is made: a refusal above stays one line
        for line in study_cli.load(args.study).not_run():
            print(f"hmb study: {line}", file=sys.stderr)
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        write_text(args.output, text, "slurm -o", executable=True)
        print(f"hmb: wrote {args.output}; submit it with: sbatch {args.output}", file=sys.stderr)
    return 0


def cmd_demo(args) -> int:
    from .present import report   # matplotlib, pandas
    from .data import tidy   # pandas
    config = Path(args.config) if args.config else mpi.REPO / "configs" / "demo.toml"
    outdir = Path(args.output_dir)
    cfg = sweep.load(str(config), mpis_override=[args.mpi],
                     output_override=str(outdir / "demo.jsonl"))
    print(f"hmb demo: {config.name} on {args.mpi} -> {cfg.output}", file=sys.stderr)
    rc = sweep.run(cfg, overwrite=True, skip_missing=True, build="always")
    if rc == 130:
        return rc
    if not Path(cfg.output).exists():
        raise UsageError("the demo produced no results")
    out = report.build(tidy.read([cfg.output]), outdir)
    # The answers first, in the terminal; figures and tables are in the report.
    for title, question, reading in out["readings"]:
        print(f"\n{title}\n  Q: {question}\n  A: {reading}")
    print(f"\nhmb demo: report in {out['html']} (and {out['md']}), {len(out['figures'])} figures")
    return 0 if rc == 0 else 1


def cmd_advise(args) -> int:
    from .run import advise   # scipy
    try:
        return advise.run(args)
    except advise.AdviseError as e:
        raise UsageError(str(e)) from None


def cmd_check(args) -> int:
    if args.ranks < 2:
        raise UsageError("check: -n must be at least 2 (a ping-pong needs two ranks)")
    _count("check: -n", args.ranks, least=2)
    _count("check: --threads", args.threads, MAX_THREADS)
    _nonempty("check: --json", args.json)
    hosts = launch.parse_hosts(args.hosts)
    json_path = args.json or check.default_record(args.mpi, hosts)
    parent = Path(json_path).parent
    if not parent.exists() and not args.json:   # results/, made for the default record
        parent.mkdir(parents=True, exist_ok=True)
    # before a minute of measuring: a directory, a FIFO, a device or another kind of file is no record
    outputs.check_output(json_path, "check: --json", "check", [args.hosts if hosts and hosts.hostfile else None],
                         force=args.force)
    return check.run(args.mpi, args.ranks, args.quick, json_path, threads=args.threads, hosts=hosts)


def cmd_project(args) -> int:
    from .present import project   # matplotlib
    try:
        return project.run(args)
    except project.ProjectError as e:
        raise UsageError(str(e)) from None


@functools.cache
def make_parser() -> argparse.ArgumentParser:
    """hmb's parser, built once per process (10 ms: a process that runs several commands, a
    study's or the tests', reuses it; parsing leaves it unchanged)."""
    p = _Parser(prog="hmb", description="HMB (Hybrid MPI Benchmarks): run hmb-bench under one or "
                "several MPI libraries, sweep parameter grids, and turn the results into reports.",
                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"hmb {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    b = sub.add_parser("build", help="install the MPI if needed and build hmb-bench for it",
                       description="Install the MPI wheel if needed and build hmb-bench for it "
                       "(in $HMB_BUILD_ROOT/<mpi>, default build/<mpi>).")
    b.add_argument("--mpi", default="mpich", choices=mpi.KNOWN)
    b.add_argument("-v", "--verbose", action="store_true", help="show the compiler output")
    b.set_defaults(func=cmd_build)

    r = sub.add_parser(
        "run", help="launch one benchmark (builds hmb-bench on demand)", allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="hmb run BENCH [--mpi MPI] [-n RANKS] [--threads T] [--json FILE] [--] [BENCH-ARGS ...]",
        description="Launch hmb-bench BENCH under mpiexec (with each library's binding flags) or, "
        "inside a Slurm allocation, srun --cpu-bind=cores. Sets OMP_NUM_THREADS, OMP_PLACES=cores, "
        "OMP_PROC_BIND=close (false when more ranks than cores leave the ranks unbound) and the library settings a mode needs; option values with different "
        "needs run as separate launches. Arguments hmb does not know (or all after --) go to "
        "hmb-bench; see `hmb run BENCH -- --help`. Exit status is hmb-bench's.",
        epilog="library settings applied per mode:\n  " + explain().replace("\n", "\n  "))
    r.add_argument("bench", metavar="BENCH", help="benchmark name (hmb-bench --list)")
    r.add_argument("--mpi", default="mpich", choices=mpi.KNOWN, help="MPI implementation (default mpich)")
    r.add_argument("-n", "--ranks", type=int, default=2, help="MPI processes (default 2)")
    r.add_argument("--threads", type=int, default=None,
                   help="OpenMP threads per rank (default 1; may also be given after --)")
    r.add_argument("--json", metavar="FILE", help="append JSON Lines results to FILE")
    r.add_argument("--launcher", choices=("auto", "mpiexec", "srun"), default="auto",
                   help="auto: srun inside a Slurm allocation (SLURM_JOB_ID set), else mpiexec")
    r.add_argument("--timeout", metavar="DURATION",
                   help="kill a launch after this long (30s, 5min; 0 = never, the default)")
    r.add_argument("--hosts", metavar="lab|lab:NAME|FILE",
                   help="launch across hosts: the nodes of the lab that is up (hmb lab up; docs/lab.md) or the "
                   "hosts of a hostfile; ranks are spread evenly (one per node for 2 ranks on 2 nodes)")
    r.add_argument("--ranks-per-node", type=int, metavar="R", help="with --hosts or srun: R ranks on each node")
    r.add_argument("--repeats", type=int, default=1, metavar="N",
                   help="launch N times (the same command) and show, per point and metric, the median "
                   "of launch medians, their min-max and the within-launch 95%% CI (default 1)")
    r.add_argument("--metric", metavar="NAMES",
                   help="only these metrics, in every launch's table and the --repeats summary "
                   "(comma list; default: the table's)")
    r.add_argument("--rebuild", action="store_true", help="run an incremental build first")
    r.add_argument("--dry-run", action="store_true", help="print the launch lines, run nothing")
    r.set_defaults(func=cmd_run)

    s = sub.add_parser("sweep", help="run a parameter grid from a TOML config (resumable)",
                       description="Run every launch of a sweep config (docs/toolkit.md) in a shuffled, "
                       "seeded order with a progress bar; results and one launch record per launch are "
                       "appended to the output JSON Lines file.")
    s.add_argument("config", metavar="CONFIG.toml")
    s.add_argument("--resume", action="store_true", help="skip launches already recorded as done/failed")
    s.add_argument("--output", metavar="FILE", help="results file (default: sweep.output in the config)")
    s.add_argument("--dry-run", action="store_true", help="list the launches in order, run nothing")
    s.add_argument("--overwrite", action="store_true", help="start over, deleting an existing output")
    s.add_argument("--force", action="store_true", help="write the output even if it holds something else than "
                   "results (a config, a study, a CSV): --overwrite then deletes it, --resume appends to it")
    s.add_argument("--mpi", metavar="LIST", help="only these MPIs (comma-separated), overriding the config")
    s.add_argument("--launcher", choices=("auto", "mpiexec", "srun"), help="override sweep.launcher")
    s.add_argument("--ranks-per-node", type=int, help="with srun or --hosts: spread ranks over ceil(ranks/R) nodes")
    s.add_argument("--hosts", metavar="lab|lab:NAME|FILE", help="launch across the lab's nodes (hmb lab up) or a "
                   "hostfile's hosts; ranks spread evenly unless --ranks-per-node (docs/lab.md)")
    s.add_argument("--rebuild", action="store_true", help="run an incremental build of hmb-bench first")
    s.add_argument("--max-launches", type=int, default=MAX_LAUNCHES, metavar="N",
                   help=f"refuse grids of more launches (default {MAX_LAUNCHES})")
    s.set_defaults(func=cmd_sweep)

    rp = sub.add_parser("report", help="figures, report.md and report.html from results",
                        description="Make figures (PNG and SVG) and report.md / report.html from "
                        "JSON Lines results: each figure with the question it answers and a reading "
                        "computed from the data, the environment, unsupported points and failures.")
    rp.add_argument("results", nargs="+", metavar="RESULTS", help="JSONL files or directories of them")
    rp.add_argument("-o", "--output", default="results/report", metavar="DIR",
                    help="output directory (default results/report)")
    rp.add_argument("--embed", action="store_true", help="embed the PNGs in report.html (one file)")
    rp.set_defaults(func=cmd_report)

    c = sub.add_parser("compare", help="compare two result sets point by point",
                       description="Match points of A and B (benchmark, parameters, threads; the MPI "
                       "too unless each side has a single library) and report B/A ratios of medians "
                       "with 95% CIs and Holm-corrected tests; then what changed significantly.")
    c.add_argument("a", metavar="A", help="results JSONL (the reference)")
    c.add_argument("b", metavar="B", help="results JSONL (compared against A)")
    c.add_argument("--metric", help="only these metrics (comma-separated; default all)")
    c.add_argument("--seed", type=_seed, default=0, help="bootstrap seed (default 0)")
    c.add_argument("-o", "--output", metavar="FILE", help="also write the table to FILE")
    c.add_argument("--force", action="store_true", help="replace FILE even if it holds results, a config or a study")
    c.set_defaults(func=cmd_compare)

    sl = sub.add_parser("slurm", help="write an sbatch script that runs a sweep with srun",
                        description="Write an sbatch script that runs `hmb sweep CONFIG --resume` inside "
                        "the allocation; each launch uses srun --cpu-bind=cores -n RANKS -c THREADS.")
    sl.add_argument("config", metavar="CONFIG.toml", nargs="?")
    sl.add_argument("--study", metavar="NAME", help="a seed study as published (hmb study list) instead of CONFIG")
    sl.add_argument("--nodes", type=int, required=True)
    sl.add_argument("--ranks-per-node", type=int, required=True)
    sl.add_argument("--threads", type=int, required=True, help="CPUs (OpenMP threads) per rank")
    sl.add_argument("--time", default="01:00:00", help="wall-time limit (default 01:00:00)")
    sl.add_argument("--partition", help="Slurm partition")
    sl.add_argument("--account", help="Slurm account")
    sl.add_argument("--job-name", default="hmb-sweep")
    sl.add_argument("--mpi", help="only these MPIs (comma-separated; e.g. system)")
    sl.add_argument("--results", metavar="FILE", help="results file (default: sweep.output)")
    sl.add_argument("--fit", action="store_true", help="with --study: the study fitted to the allocation's "
                    "nodes x ranks-per-node x threads cores (default: as published)")
    sl.add_argument("--hosts", metavar="lab|lab:NAME", help="the allocation is on an hmb lab: its network settings "
                    "and path check (docs/lab.md)")
    sl.add_argument("-o", "--output", metavar="FILE", help="script file (default: stdout)")
    sl.add_argument("--force", action="store_true", help="replace FILE even if it holds results, a config or a study")
    sl.set_defaults(func=cmd_slurm)

    ck = sub.add_parser("check", help="self-test: can numbers measured on this machine be trusted?",
                        description="Measure, on this machine or cluster node, what hmb's numbers rest on "
                        "(binding, timer, compute calibration, clock offsets, interruptions, hmb-bench's latency "
                        "against a minimal ping-pong, async progress physics) and print PASS / WARN / FAIL per "
                        "expectation with why it matters (docs/methodology.md). Exit status 1 if any FAIL.")
    ck.add_argument("--mpi", default="mpich", choices=mpi.KNOWN, help="MPI implementation (default mpich)")
    ck.add_argument("-n", "--ranks", type=int, default=2, help="MPI processes (default 2)")
    ck.add_argument("--threads", type=int, default=1,
                    help="OpenMP threads per rank, as the runs to be trusted use (default 1): the start-up compute "
                    "check runs on every thread of every rank at once")
    ck.add_argument("--json", metavar="FILE", help="machine record (default results/check-MPI.json)")
    ck.add_argument("--quick", action="store_true", help="fewer rounds and iterations (about half a minute)")
    ck.add_argument("--force", action="store_true", help="replace the --json file even if it holds results, a "
                    "config or a study")
    ck.add_argument("--hosts", metavar="lab|lab:NAME|FILE", help="ranks spread over these hosts; on an hmb lab "
                    "(one machine's clock) the offsets estimated across hosts must be ~0 (docs/lab.md)")
    ck.set_defaults(func=cmd_check)

    av = sub.add_parser(
        "advise", help="eager threshold advice from a libhmbprof profile; --verify re-runs a program",
        usage="hmb advise [PROFILE] --mpi MPI [--probe FILE | --threshold B --bandwidth MBps] [--header B] "
        "[--trigger post-to-wait|outside-mpi] "
        "[--tradeoff FILE] [--verify [--launches N] [--apply B] [--figure REGEX] -- CMD ...]",
        description="Apply seed 001's trigger (non-blocking rendezvous messages whose post-to-wait time is "
        ">= 50%% of their transfer time) and threshold rule to a profile written by libhmbprof.so, per pair "
        "and per job, with the library setting and its memory cost; --verify runs CMD alternately with the "
        "default and the advised setting and reports the speed-up (docs/toolkit.md).")
    av.add_argument("profile", nargs="?", metavar="PROFILE", help="JSON profile from libhmbprof.so")
    av.add_argument("--mpi", default="mpich", choices=mpi.KNOWN, help="MPI implementation (default mpich)")
    av.add_argument("--probe", metavar="FILE", help="proto --test probe results (switch and bandwidth)")
    av.add_argument("--threshold", type=int, metavar="BYTES",
                    help="current switch: the largest message size that still goes eagerly")
    av.add_argument("--bandwidth", type=float, metavar="MBps", help="bandwidth for the transfer time (1 MB = 1e6 B)")
    av.add_argument("--header", type=int, default=0, metavar="BYTES",
                    help="per-message header added before rounding (default 0)")
    av.add_argument("--trigger", choices=["post-to-wait", "outside-mpi"], default="post-to-wait",
                    help="what must reach 50%% of the transfer time: the whole post-to-wait time (seed 001, "
                    "default) or only its part spent outside MPI calls (computation the message could hide)")
    av.add_argument("--tradeoff", metavar="FILE", help="proto --test tradeoff results (memory per peer)")
    av.add_argument("--json", metavar="FILE", help="also write the advice as JSON")
    av.add_argument("--verify", action="store_true", help="run the program after -- with default and advised setting")
    av.add_argument("--apply", metavar="BYTES", help="with --verify: this threshold instead of the advised one")
    av.add_argument("--launches", type=int, default=3, metavar="N", help="launch pairs for --verify (default 3)")
    av.add_argument("--figure", metavar="REGEX", help="compare the number this regex captures in stdout "
                    "(the last match) instead of wall time")
    av.add_argument("--higher-is-better", action="store_true", help="the --figure is a rate (default: a time)")
    av.add_argument("--no-profile", action="store_true", help="with --verify: do not preload libhmbprof.so "
                    "(memory is then the largest RSS of any process, the launcher's included)")
    av.set_defaults(func=cmd_advise, program=[])
    pj = sub.add_parser("project", help="project an application's speed-up from its p2p share (Amdahl)",
                        description="Projected speed-up = 1 / ((1 - f) + f / s): f, the share of run time "
                        "an application spends in point-to-point communication (given, or from mpiP reports, "
                        "one per process count), s, the speed-up of that communication (given, or a mode's "
                        "ratio to single from halo3d/sweep3d results). Prints a table; --figure draws it.")
    pj.add_argument("--fraction", type=float, metavar="F", help="point-to-point share of run time, 0..1")
    pj.add_argument("--mpip", nargs="+", metavar="REPORT", help="mpiP text reports (one per process count)")
    pj.add_argument("--speedup", type=float, metavar="S", help="speed-up of the point-to-point time")
    pj.add_argument("--results", nargs="+", metavar="FILE", help="results JSONL holding ratio_<mode>")
    pj.add_argument("--bench", default="sweep3d", help="with --results: benchmark (default sweep3d)")
    pj.add_argument("--size", metavar="SIZE", help="with --results: message size of the point (e.g. 64K)")
    pj.add_argument("--mode", default="partitioned", help="with --results: mode whose ratio_<mode> to read "
                    "(default partitioned)")
    pj.add_argument("--figure", metavar="FILE", help="also draw the projection (PNG or SVG, by suffix)")
    pj.set_defaults(func=cmd_project)

    d = sub.add_parser("demo", help="build, run configs/demo.toml and write results/report.html",
                       description="The first thing to run: builds hmb-bench, runs configs/demo.toml "
                       "(a few minutes), and writes results/report.html. Benchmarks not in this build "
                       "are skipped with one line.")
    d.add_argument("--mpi", default="mpich", choices=mpi.KNOWN)
    d.add_argument("--config", help="another sweep config instead of configs/demo.toml")
    d.add_argument("--output-dir", default="results", metavar="DIR", help="default results/")
    d.set_defaults(func=cmd_demo)

    # hmb validate: check output files against the shipped JSON Schema (hmb/validate.py)
    cf = sub.add_parser("conform", help="conformance checks (partitioned, MPI + threads): one matrix per library",
                        description="Run hmb-bench conform's checks, each in its own bounded launch, under each "
                        "MPI library and print one matrix (checks x libraries: PASS / FAIL / UNSUPPORTED) with "
                        "the reason of each FAIL; records go to --json (docs/conformance.md). Exit status 1 if "
                        "any check FAILed.")
    cf.add_argument("--mpi", default="mpich,openmpi", help="comma list of MPI libraries (default mpich,openmpi)")
    cf.add_argument("--check", metavar="NAMES", help="comma list of checks (default: all)")
    cf.add_argument("--json", metavar="FILE", default="results/conform.jsonl", help="records (appended)")

    def cmd_conform(a) -> int:
        libs = mpi.names(a.mpi, "conform --mpi", UsageError)
        return conform.run(libs, a.json, conform.parse_checks(a.check))
    cf.set_defaults(func=cmd_conform)

    va = sub.add_parser("validate", help="check HMB output files against the JSON Schema",
                        description="One line FILE:LINE: why per bad record; exit 2 if any, else 0 "
                        "and a count. The schema: python/hmb/data/schema/, documented in docs/output-schema.md.")
    va.add_argument("files", nargs="+", metavar="FILE")

    def cmd_validate(a) -> int:
        return validate.main(a.files)
    va.set_defaults(func=cmd_validate)

    # hmb export: the tidy table (hmb/tidy.py; hmb.load in Python) as CSV
    ex = sub.add_parser("export", help="write results as a tidy CSV table (one row per point and metric)",
                        description="The table hmb.load() returns in Python: one row per point and metric, "
                        "parameters as columns, median, CI, count, unit, MPI, settings, run id.")
    ex.add_argument("--csv", required=True, metavar="FILE", help="output CSV ('-': standard output)")
    ex.add_argument("results", nargs="+", metavar="RESULTS")
    ex.add_argument("--force", action="store_true", help="replace FILE even if it holds something else than a "
                    "CSV table (results, a config, a study)")

    def cmd_export(a) -> int:
        if not a.csv.strip():
            raise UsageError("--csv: give a file name, or - for standard output")
        outputs.check_output(a.csv, "--csv", "csv", a.results, force=a.force)
        from .data import tidy   # pandas
        stream = results.scan(a.results)    # read a line at a time: a 1 GB file in bounded memory
        if a.csv == "-":
            n = tidy.write_csv(stream, sys.stdout)
        else:
            with outputs.write_atomic(a.csv, "--csv", newline="") as f:
                n = tidy.write_csv(stream, f)
        stream.say_bad_lines()
        if a.csv != "-":
            print(f"hmb: wrote {a.csv} ({n} rows)", file=sys.stderr)
        return 1 if stream.bad_lines else 0
    ex.set_defaults(func=cmd_export)

    # hmb settings: the `settings` presets and the variables each path gets (hmb/settings.py)
    se = sub.add_parser("settings", help="eager-threshold presets: the variables per MPI and path",
                        description="The presets of a sweep's `settings` axis and, per MPI family and path "
                        "(shared memory, UCX, OFI, TCP), the variables a threshold sets, what was measured of "
                        "them on one node, and the paths no variable moves. docs/toolkit.md has the sources.")
    se.add_argument("--mpi", choices=("mpich", "openmpi", "impi"), help="one family (default: all)")
    se.add_argument("--threshold", default="16K", metavar="BYTES", help="show the variables for this threshold "
                    "or preset (default 16K)")

    def cmd_settings(a) -> int:
        try:
            t, nocma = settings.parse_setting(a.threshold)
        except ValueError as e:
            raise UsageError(f"--threshold: {e}") from None
        print(settings.table(a.mpi, t, nocma), end="")
        return 0
    se.set_defaults(func=cmd_settings)

    add_lab_parser(sub)

    # hmb study: the seed studies (hmb/study/, python/hmb/studies/*.toml)
    study_cli.add_parser(sub)
    return p


def add_lab_parser(sub) -> None:
    """hmb lab up|down|status|exec: nodes on one machine (hmb/lab.py, docs/lab.md)."""
    la = sub.add_parser("lab", help="a lab of N nodes on this machine (namespaces on a bridge; root)",
                        description="Lay out N nodes on this machine, each its own network and UTS namespace "
                        "(hostname) on one bridge with an address and its share of the CPUs, so MPI traffic between "
                        "ranks on different nodes takes the library's network path (TCP); optionally a real Slurm "
                        "on them. hmb run/sweep/study/check --hosts lab launch across them (docs/lab.md).")
    ls = la.add_subparsers(dest="lab_cmd", metavar="{up,down,status,exec}", required=True, parser_class=_Parser)
    up = ls.add_parser("up", help="create the nodes (and with --slurm, munged, slurmctld and a slurmd per node)")
    up.add_argument("--nodes", type=int, default=2, help="nodes (default 2)")
    up.add_argument("--subnet", metavar="CIDR", help="a private IPv4 /24 (default: one chosen from the name)")
    up.add_argument("--slurm", action="store_true", help="also start Slurm on the nodes (on a lab already up: "
                    "only Slurm; scripts/slurm-lab.sh up installs it); prints the SLURM_CONF to export")
    up.add_argument("--dry-run", action="store_true", help="check the options and print the nodes' names, "
                    "addresses and CPUs; create nothing")
    dn = ls.add_parser("down", help="stop every process in the nodes and remove namespaces, links, hosts entries")
    st = ls.add_parser("status", help="the nodes, their addresses, CPUs and processes (exit 1 if not up)")
    ex = ls.add_parser("exec", help="run a command inside a node: hmb lab exec NODE -- COMMAND ...")
    ex.add_argument("node", metavar="NODE", help="a node's hostname or address")
    for q in (up, dn, st, ex):
        q.add_argument("--name", default=lab.DEFAULT_NAME, help=f"the lab's name (default {lab.DEFAULT_NAME})")

    def cmd_lab(a) -> int:
        if a.program and a.lab_cmd != "exec":
            # `hmb lab down -- --name X` took down hmblab: what follows -- was dropped
            raise UsageError(f"hmb lab {a.lab_cmd}: unexpected arguments after --: {shlex.join(a.program)[:120]} "
                             f"(only hmb lab exec NODE -- COMMAND takes a command)")
        try:
            if a.lab_cmd == "up" and a.dry_run:
                plan = lab.layout(a.name, a.nodes, a.subnet)
                print(f"lab {plan.name} (not created): {len(plan.nodes)} nodes on bridge {plan.bridge} ({plan.subnet}, "
                      f"this machine {plan.head_addr})")
                for n in plan.nodes:
                    print(f"  {n.name:<14} {n.addr:<15} cpus {','.join(map(str, n.cpus))}")
                return 0
            if a.lab_cmd == "up":
                # An interrupt (SIGINT, SIGTERM, SIGHUP, once or more) until the lab is up and said
                # so takes down what was made and says what is left (lab.taken_down_on_interrupt).
                with lab.taken_down_on_interrupt(a.name) as guard:
                    made = lab.load(a.name) if a.slurm and lab.is_up(a.name) else lab.up(a.name, a.nodes, a.subnet)
                    guard.started = True        # from here on a failure (Slurm's) takes the lab down
                    conf = None
                    if a.slurm and lab_slurm.running(made):
                        conf = lab_slurm.conf(made)
                    elif a.slurm:
                        conf = lab_slurm.up(made)
                    lab.status(a.name)
                    if conf:
                        print(f"export SLURM_CONF={conf}", flush=True)
                return 0
            if a.lab_cmd == "down":
                # An interrupt waits for the lab to be down (a down cut short left an orphaned
                # namespace and its processes); the exit status says it came.
                with lab.held_signals() as got:
                    lab.down(a.name)
                if got:
                    print(f"hmb lab: interrupted; {a.name} was taken down first", file=sys.stderr)
                    return 130
                return 0
            if a.lab_cmd == "status":
                return lab.status(a.name)
            return lab.main_exec(a.name, a.node, a.program)
        except lab.LabError as e:
            raise UsageError(str(e)) from None
        except lab.LabInterrupted as e:
            print(str(e), file=sys.stderr)
            return 130
    la.set_defaults(func=cmd_lab, program=[])


def _split_run_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """For `hmb run`: what hmb parses, and what goes to hmb-bench (unknowns and all after --)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def run(argv=None) -> int:
    """Parse hmb's command line and run the command (hmb.cli.main is the entry point)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser()
    own, passthrough = _split_run_argv(argv)
    is_run = bool(own) and own[0] == "run"
    if is_run:
        args, unknown = parser.parse_known_args(own)
        args.bench_args = unknown + passthrough
    elif own and own[0] in ("advise", "lab"):   # the program to verify (run) follows --
        args = parser.parse_args(own)
        args.program = passthrough
    else:
        args = parser.parse_args(argv)
    try:
        if getattr(args, "hosts", None) is not None and args.command != "slurm":
            # --hosts is read before a command writes or deletes anything (sweep --overwrite removed
            # the results and study run wrote its directory, then a missing hostfile was named);
            # slurm checks it its own way (the lab need not be up where the script is written).
            launch.parse_hosts(args.hosts)
        return args.func(args)
    except (mpi.MPIError, launch.LaunchError, sweep.ConfigError, results.ResultsError, outputs.OutputError,
            UsageError) as e:
        print(f"hmb: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hmb: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:   # an output that cannot be written (missing directory, a file in the way)
        where = f"{e.filename}: " if e.filename else ""
        print(f"hmb: {where}{e.strerror or e}", file=sys.stderr)
        return 2
