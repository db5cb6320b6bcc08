"""`hmb sweep`: a parameter grid, run as shuffled launches, resumable.

The config (TOML, documented in docs/toolkit.md) names benchmarks with their layout and
arguments; list-valued entries expand the grid. Every grid point is split by the
requirement table (requirements.py) into launches, each repeated `repeats` times, and the
whole list is shuffled with a recorded seed so that slow drifts of a shared machine do not
line up with one parameter. Each launch appends its records to the output (hmb-bench
--json FILE --raw) and the driver appends a `launch` record right after it ends, so an
interrupted sweep loses nothing finished and `--resume` redoes nothing finished.
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import datetime
import errno
import fcntl
import hashlib
import itertools
import json
import math
import os
import random
import re
import signal
import socket
import stat
import sys
import time
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:   # Python < 3.11
    import tomli as tomllib

from ..data import descriptors, outputs, results
from ..data.launchlog import log_reason, own_line
from ..data.units import parse_duration
from . import launch as hlaunch
from . import mpi as hmpi
from . import requirements
from . import settings as hsettings

SCHEMA = 1
MAX_LAUNCHES = 10000    # a grid beyond this is refused up front (hmb sweep --max-launches raises it)
LOCAL_PROCS_PER_CORE = 16   # mpiexec on one machine: more processes than this per core are refused
SWEEP_KEYS = {"mpis", "repeats", "seed", "output", "timeout", "launcher", "args", "srun_args"}
BENCH_KEYS = {"name", "ranks", "threads", "args", "mpis", "repeats", "settings"}


class ConfigError(Exception):
    """A one-line problem with a sweep config (exit status 2)."""


@dataclasses.dataclass
class Config:
    path: str
    mpis: list
    repeats: int
    seed: int
    seed_given: bool
    output: str
    timeout: float      # seconds per launch; 0: none
    launcher: str
    srun_args: list
    benches: list       # dicts: name, ranks (list), threads (list), mpis, repeats, args
    max_launches: int = MAX_LAUNCHES
    hosts: str | None = None    # --hosts: lab, lab:NAME or a hostfile (launch.parse_hosts)


@dataclasses.dataclass
class LaunchSpec:
    tag: str
    bench: str
    mpi: str
    ranks: int
    threads: int
    args: dict          # option -> text, as given to hmb-bench (without --threads/--json)
    env_added: dict     # from the requirement table (OMP_*/HMB_TAG are added at launch)
    repeat: int
    split: str
    settings: str = "default"   # the `settings` axis entry (settings.py preset or threshold)

    def point(self) -> dict:
        return {"bench": self.bench, "mpi": self.mpi, "ranks": self.ranks,
                "threads": self.threads, "args": self.args, "repeat": self.repeat,
                "split": self.split, "settings": self.settings}


def _as_list(value, what: str, kind=None) -> list:
    values = value if isinstance(value, list) else [value]
    if kind is not None:
        for v in values:
            if not isinstance(v, kind) or isinstance(v, bool) or (kind is int and v < 1):
                raise ConfigError(f"{what}: expected {'a positive integer' if kind is int else kind.__name__}"
                                  f" or a list of them, got {v!r}")
    if not values:
        raise ConfigError(f"{what}: empty list")
    return values


def _repeats(value, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{what}: expected a positive integer, got {value!r}")
    return value


def _check_args(args, what: str) -> dict:
    if not isinstance(args, dict):
        raise ConfigError(f"{what}: expected a table of benchmark options, got {args!r}")
    for key, value in args.items():
        if isinstance(value, list) and not value:
            raise ConfigError(f"{what}.{key}: empty list (it would expand to no launches)")
        for v in (value if isinstance(value, list) else [value]):
            if isinstance(v, (dict, list)) or v is None:
                raise ConfigError(f"{what}.{key}: expected text, number, boolean or a list of them")
            if isinstance(v, str) and any(ord(c) < 32 or ord(c) == 127 for c in v):
                raise ConfigError(f"{what}.{key}: {v!r} holds a control character (NUL, newline, ...)")
            if isinstance(v, float) and not math.isfinite(v):
                raise ConfigError(f"{what}.{key}: {v} is not a finite number")
        if not re.fullmatch(r"[a-z][a-z0-9_-]*", str(key)):
            raise ConfigError(f"{what}: {key!r} is not an option name (lower-case letters, digits, - and _)")
        if key in ("threads", "json", "raw"):
            raise ConfigError(f"{what}.{key}: set by the driver ("
                              f"{'use threads = ... in [[bench]]' if key == 'threads' else 'always passed'})")
    return args


def load(path: str, mpis_override: list | None = None, output_override: str | None = None) -> Config:
    """Read and validate a sweep config; every problem is one ConfigError line."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"config {path}: is a directory, not a TOML file")
    if not p.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: bad TOML: {e}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file") from None
    except RecursionError:
        raise ConfigError(f"{path}: bad TOML: nested too deeply") from None
    unknown_top = set(data) - {"sweep", "bench"}
    if unknown_top:
        raise ConfigError(f"{path}: unknown section [{sorted(unknown_top)[0]}] (expected [sweep] and [[bench]])")
    sweep = data.get("sweep", {})
    if not isinstance(sweep, dict):
        raise ConfigError(f"{path}: [sweep] must be a table")
    bad = set(sweep) - SWEEP_KEYS
    if bad:
        raise ConfigError(f"{path}: unknown key sweep.{sorted(bad)[0]} (known: {', '.join(sorted(SWEEP_KEYS))})")
    mpis = hmpi.names(mpis_override, "--mpi", ConfigError) if mpis_override else \
        hmpi.names(_as_list(sweep.get("mpis", ["mpich"]), "sweep.mpis", str), f"{path}: sweep.mpis", ConfigError)
    repeats = _repeats(sweep.get("repeats", 1), "sweep.repeats")
    seed = sweep.get("seed")
    seed_given = seed is not None
    if seed_given and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise ConfigError(f"{path}: sweep.seed must be an integer")
    if not seed_given:
        seed = random.SystemRandom().randrange(2**31)
    try:
        timeout = parse_duration(sweep.get("timeout", "600s"))
    except ValueError as e:
        raise ConfigError(f"{path}: sweep.timeout: {e}") from None
    launcher = sweep.get("launcher", "auto")
    if launcher not in ("auto", "mpiexec", "srun"):
        raise ConfigError(f"{path}: sweep.launcher must be auto, mpiexec or srun")
    common = _check_args(sweep.get("args", {}), "sweep.args")
    srun_args = sweep.get("srun_args", [])
    if not isinstance(srun_args, list) or not all(isinstance(a, str) for a in srun_args):
        raise ConfigError(f"{path}: sweep.srun_args must be a list of strings")
    benches = data.get("bench", [])
    if not isinstance(benches, list) or not benches:
        raise ConfigError(f"{path}: no [[bench]] entries")
    out_benches = []
    for i, b in enumerate(benches):
        where = f"bench[{i}]"
        if not isinstance(b, dict):
            raise ConfigError(f"{path}: {where} must be a table ([[bench]] with name = ...), got {b!r}")
        bad = set(b) - BENCH_KEYS
        if bad:
            raise ConfigError(f"{path}: unknown key {where}.{sorted(bad)[0]} (known: {', '.join(sorted(BENCH_KEYS))})")
        name = b.get("name")
        # Whether hmb-bench has it is asked of the build itself when the sweep runs.
        if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise ConfigError(f"{path}: {where}: name must be a benchmark name (hmb-bench --list), got {name!r}")
        bm = _as_list(b["mpis"], f"{where}.mpis", str) if "mpis" in b else mpis
        if mpis_override:
            bm = [m for m in bm if m in mpis_override] or mpis_override
        hmpi.names(bm, f"{path}: {where}.mpis", ConfigError)
        args = {**common, **_check_args(b.get("args", {}), f"{where}.args")}
        chosen = b.get("settings", ["default"])
        if not isinstance(chosen, list) or not chosen or not all(
                isinstance(v, (str, int)) and not isinstance(v, bool) for v in chosen):
            raise ConfigError(f"{path}: {where}.settings: expected a list of presets or thresholds, "
                              f"e.g. [\"default\", \"16K\"]")
        out_benches.append({
            "name": name,
            "settings": chosen,
            "ranks": _as_list(b.get("ranks", 2), f"{where}.ranks", int),
            "threads": _as_list(b.get("threads", 1), f"{where}.threads", int),
            "mpis": bm,
            "repeats": _repeats(b.get("repeats", repeats), f"{where}.repeats"),
            "args": args,
        })
    output = output_override or sweep.get("output", "results/sweep.jsonl")
    if not isinstance(output, str) or not output:
        raise ConfigError(f"{path}: sweep.output must be a file name")
    return Config(str(path), list(mpis), repeats, seed, seed_given, output, timeout,
                  launcher, srun_args, out_benches)


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def tag_of(bench: str, mpi: str, ranks: int, threads: int, args: dict, repeat: int,
           setting: str = "default", setting_env: dict | None = None) -> str:
    """Stable launch identity: the same launch gets the same tag in every run of a config. A
    setting counts by its name and the variables it sets, so a preset whose variables changed
    (e.g. when presets began to move the network paths too) is a new launch for --resume."""
    fields = [bench, mpi, ranks, threads, sorted(args.items()), repeat]
    if setting != "default":    # tags of configs without a settings axis stay as they were
        fields.append(setting)
        if setting_env:
            fields.append(sorted(setting_env.items()))
    key = json.dumps(fields, sort_keys=True)
    return f"{bench}-{mpi}-{hashlib.sha1(key.encode()).hexdigest()[:10]}-r{repeat}"


def expand(cfg: Config, probe_mpi: bool = True) -> list[LaunchSpec]:
    """Every launch of the grid, in config order (shuffle with order()).

    probe_mpi False: a system MPI that is not on this machine (an sbatch script written for a
    cluster) gets no library settings, only the layouts, which need no MPI."""
    size = grid_size(cfg)
    if size > cfg.max_launches:
        raise ConfigError(f"{cfg.path}: the grid has at least {size:,} launches, more than the limit of "
                          f"{cfg.max_launches:,} (check repeats and the lists; --max-launches N raises it)")
    specs, seen, flavors = [], set(), {}
    for b in cfg.benches:
        list_keys = [k for k, v in b["args"].items() if isinstance(v, list)]
        scalar = {k: v for k, v in b["args"].items() if not isinstance(v, list)}
        combos = itertools.product(b["settings"], b["mpis"], b["ranks"], b["threads"],
                                   *[b["args"][k] for k in list_keys])
        for setting, mpi, ranks, threads, *chosen in combos:
            args = {k: v for k, v in scalar.items()}
            args.update(zip(list_keys, chosen))
            args = {k: v for k, v in args.items() if v is not False}
            text_args = {k: (True if v is True else _text(v)) for k, v in args.items()}
            flavor = _flavor(mpi, flavors, probe_mpi)
            label, library_env = _setting_env(flavor, setting)
            for part in requirements.plan(b["name"], text_args, ranks, threads, flavor):
                for r in range(b["repeats"]):
                    tag = tag_of(b["name"], mpi, part.ranks, part.threads, part.args, r, label, library_env)
                    if tag in seen:   # e.g. `everywhere` at several thread counts → same layout
                        continue
                    seen.add(tag)
                    specs.append(LaunchSpec(tag, b["name"], mpi, part.ranks, part.threads, part.args,
                                            {**library_env, **part.env_added}, r, part.split, label))
    return specs


def grid_size(cfg: Config) -> int:
    """Launches the grid expands to before the requirement table splits any (a lower bound),
    counted without expanding it."""
    total = 0
    for b in cfg.benches:
        n = len(b["settings"]) * len(b["mpis"]) * len(b["ranks"]) * len(b["threads"]) * b["repeats"]
        for v in b["args"].values():
            n *= len(v) if isinstance(v, list) else 1
        total += n
    return total


def check_launches(specs: list, described: dict, launcher: str, ranks_per_node) -> None:
    """Every launch's layout and arguments against its benchmark's descriptor, before the first
    launch (one ConfigError line naming the launch)."""
    if ranks_per_node is not None and ranks_per_node < 1:
        raise ConfigError(f"--ranks-per-node {ranks_per_node}: must be at least 1")
    cores = os.cpu_count() or 1
    local = launcher != "srun" and not (launcher == "auto" and os.environ.get("SLURM_JOB_ID"))
    for spec in specs:
        where = f"{spec.bench} (ranks={spec.ranks}, threads={spec.threads}, {spec.mpi})"
        if local and spec.ranks * spec.threads > LOCAL_PROCS_PER_CORE * cores:
            raise ConfigError(f"{where}: {spec.ranks * spec.threads} ranks x threads on this machine's "
                              f"{cores} cores (at most {LOCAL_PROCS_PER_CORE} per core; on a cluster use "
                              f"--launcher srun)")
        desc = described.get(spec.bench)
        if desc is None:
            continue
        if spec.ranks < desc.min_ranks or spec.ranks % desc.rank_multiple:
            raise ConfigError(f"{where}: {spec.bench} needs at least {desc.min_ranks} ranks"
                              + (f", a multiple of {desc.rank_multiple}" if desc.rank_multiple > 1 else ""))
        for name, value in [*spec.args.items(), ("threads", str(spec.threads))]:
            problem = _option_problem(desc.option(name.replace("_", "-")), value)
            if problem:
                raise ConfigError(f"{where}: --{name} {value if value is not True else ''}: {problem}".replace(" :", ":"))


def _option_problem(opt, value) -> str | None:
    """What is wrong with one option value by its descriptor (None: fine or not checkable here)."""
    if opt is None:
        return "not an option of this benchmark (hmb-bench BENCH --help)"
    if opt.type == "flag":
        return None if value is True else "a flag (write true)"
    if value is True:
        return "needs a value"
    if opt.type in ("int", "double"):
        try:
            v = int(value) if opt.type == "int" else float(value)
        except ValueError:
            return f"not {'a whole number' if opt.type == 'int' else 'a number'}"
        if opt.range and not opt.range[0] <= v <= opt.range[1]:
            return f"out of range [{opt.range[0]:g}..{opt.range[1]:g}]"
    elif opt.type in ("choice", "choices") and opt.choices:
        if opt.type == "choices" and str(value) == "all":   # hmb-bench: "a comma list, or all"
            return None
        for v in (str(value).split(",") if opt.type == "choices" else [str(value)]):
            if v not in opt.choices:
                return f"{v!r} is not one of {', '.join(opt.choices)}"
    elif opt.type == "choice_args" and opt.choices:  # "none,test:10": a name ending in ':' takes a number
        for v in str(value).split(","):
            if (v.split(":", 1)[0] + ":" if ":" in v else v) not in opt.choices:
                return f"{v!r} is not one of {', '.join(opt.choices)}"
    elif opt.type == "duration":
        try:
            parse_duration(value)
        except ValueError as e:
            return str(e)
    return None


def _setting_env(flavor: str, setting) -> tuple[str, dict]:
    """A `settings` entry -> (label, library variables) for this MPI family (settings.py)."""
    if setting == "default":
        return "default", {}
    try:
        return hsettings.resolve(flavor, setting)
    except ValueError as e:
        raise ConfigError(f"settings: {e}") from None


def _flavor(mpi: str, known: dict, probe_mpi: bool = True) -> str:
    """The MPI's launcher dialect (a system MPI's as detected), asked once per expansion."""
    if mpi not in known:
        try:
            known[mpi] = hlaunch.prepare_flavor(mpi)
        except hmpi.MPIError as e:
            if probe_mpi:
                raise ConfigError(str(e)) from None
            known[mpi] = "unknown"
    return known[mpi]


def order(specs: list[LaunchSpec], seed: int) -> list[LaunchSpec]:
    """Shuffled launch order, deterministic for a seed (repeats interleave with everything)."""
    shuffled = list(specs)
    random.Random(seed).shuffle(shuffled)
    return shuffled


class WriteError(ConfigError):
    """The sweep cannot write its output or its log (a full disk): one line naming the file.
    ran: the launch in hand had run (its record was what could not be written)."""
    ran = False


def _history(output: Path) -> tuple[dict, dict, int | None]:
    """What the output says of its launches, read a line at a time, for the sweep that the last
    sweep record not resuming began (tags repeat across sweeps of one config): tag -> its launch
    records in order, tag -> the run ids of its run headers, and the first sweep record's seed."""
    launches, runs, seed = {}, {}, None
    if not output.exists():
        return launches, runs, seed
    try:
        for _, rec in results.iter_records(output, [], samples=False):
            kind = rec.get("type")
            if kind == "sweep":
                if seed is None and isinstance(rec.get("seed"), int) and not isinstance(rec["seed"], bool):
                    seed = rec["seed"]
                if not rec.get("resume"):
                    launches, runs = {}, {}
            elif kind == "launch" and isinstance(rec.get("tag"), str):
                launches.setdefault(rec["tag"], []).append({k: rec.get(k) for k in ("status", "rc", "attempt", "why")})
            elif kind == "run" and isinstance(rec.get("tag"), str):
                runs.setdefault(rec["tag"], set()).add(rec.get("run_id"))
    except results.ResultsError as e:
        raise ConfigError(str(e)) from None
    return launches, runs, seed


# hmb-bench's own verdicts, final: a usage error (2), a validation failure or a library defect it
# named (3). Anything else (the watchdog's 4 included: a rank left hanging by a lost node looks the
# same) is the machine's, unless the launch wrote every planned point and exited 0.
VERDICT_CODES = (2, 3)
# hmb-bench lines that speak of the machine, not of the benchmark: a write or open that failed.
_MACHINE_LINE = re.compile(r"cannot (write|open)|No space left|Disk quota|Read-only file system|"
                           r"Input/output error|Stale file handle", re.IGNORECASE)


def is_final(rec: dict) -> bool:
    """Whether a launch record ends its launch: done, or failed by the benchmark's own verdict.
    Records written before launch outcomes had an `attempt` called every non-zero exit
    `failed`: of those, only a verdict's exit status is final."""
    status = rec.get("status")
    if status == "done":
        return True
    if status != "failed":
        return False
    return rec.get("attempt") is not None or rec.get("rc") in VERDICT_CODES


def finished_tags(output: Path) -> set[str]:
    """Tags whose last launch record is final (is_final): what --resume skips."""
    launches, _, _ = _history(output)
    return {tag for tag, recs in launches.items() if is_final(recs[-1])}


def recorded_seed(output: Path, default: int) -> int:
    """The seed of the first sweep record in the output (default if there is none)."""
    seed = _history(output)[2]
    return default if seed is None else seed


def outcome(rc: int, text: str, planned: int | None, written: int, timeout: float = 0) -> tuple[str, str]:
    """(status, why) of one launch: whose failure it was (docs/toolkit.md, "Whose failure").

    failed: hmb-bench's own verdict (VERDICT_CODES with its own error line, not one about a
    write): final. done: exit 0 and every planned point written (the `plan` record's count; a
    launch whose hmb-bench writes no plan record: exit 0 and some result). incomplete: anything
    else, the machine's (the launcher or a rank killed, a step refused, a node lost, a write that
    failed, the timeout, fewer points than planned whatever the launcher returned)."""
    own = own_line(text)
    if rc in VERDICT_CODES and own and not _MACHINE_LINE.search(own):
        return "failed", own
    if rc == 0:
        if planned is not None and written < planned:
            return "incomplete", (f"{written} of {planned} planned points written, though the launcher "
                                  f"returned 0 ({log_reason(text, rc, timeout)})")
        if planned is None and written == 0:
            return "incomplete", f"no result written, though the launcher returned 0 ({log_reason(text, rc, timeout)})"
        return "done", ""
    return "incomplete", log_reason(text, rc, timeout)


def launch_points(output: Path, offset: int, tag: str) -> tuple[int | None, int]:
    """(points its plan record announced or None, results written) of the launch with this tag
    whose records follow `offset` in the output (complete lines only)."""
    run_ids, planned, written = set(), None, 0
    with open(output, "rb") as f:
        f.seek(offset)
        for _, raw, why in results.lines(f):
            if why or not raw.endswith(b"\n"):
                continue
            problem, rec = results.parse_line(raw)
            if problem or rec is None:
                continue
            kind = rec.get("type")
            if kind == "run" and rec.get("tag") == tag:
                run_ids.add(rec.get("run_id"))
            elif kind == "plan" and rec.get("run_id") in run_ids and isinstance(rec.get("points"), int):
                planned = rec["points"]
            elif kind == "result" and rec.get("run_id") in run_ids:
                written += 1
    return planned, written


def repair_tail(output: Path) -> int:
    """Cut a partial last line off the output (a write cut short by a full disk, a killed
    writer), so what is appended next starts a record of its own and every line stays whole; a
    last line that is a whole record without its line end gets the line end. Returns the bytes
    cut off (0: nothing to repair)."""
    try:
        st = os.stat(output)
    except FileNotFoundError:
        return 0
    if not stat_is_regular(st) or st.st_size == 0:
        return 0
    with open(output, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return 0
        end = st.st_size
        start, chunk = end, 1 << 16
        while start > 0:    # the last line's start: after the last LF
            lo = max(0, start - chunk)
            f.seek(lo)
            at = f.read(start - lo).rfind(b"\n")
            if at >= 0:
                start = lo + at + 1
                break
            start = lo
        f.seek(start)
        tail = f.read(end - start) if end - start <= results.MAX_LINE_BYTES else b""
        problem, rec = results.parse_line(tail) if tail else ("too long", None)
        if problem is None and rec is not None:
            f.seek(end)
            f.write(b"\n")
            f.flush()
            os.fsync(f.fileno())
            return 0
        f.truncate(start)
        f.flush()
        os.fsync(f.fileno())
        return end - start


def stat_is_regular(st) -> bool:
    return stat.S_ISREG(st.st_mode)


def append_record(output: Path, record: dict) -> None:
    """Append one JSON line and make it durable before going on. A partial last line (a writer
    cut short) is cut off first (repair_tail). A failed write, flush or sync (a full disk) is a
    WriteError naming the file, and what was written of the line is cut off again: the lines
    before stay as they were."""
    data = (json.dumps(record) + "\n").encode()
    try:
        cut = repair_tail(output)
        if cut:
            print(f"hmb: {output}: cut off a partial last line ({cut:,} bytes: a write cut short)", file=sys.stderr)
        fd = os.open(output, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            before = os.fstat(fd).st_size
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                try:
                    os.fsync(fd)
                except OSError as e:
                    if e.errno != errno.EINVAL:    # a device or a pipe cannot be synced
                        raise
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, before)
                raise
        finally:
            os.close(fd)
    except OSError as e:
        raise WriteError(f"cannot write to {output}: {e.strerror or e}") from None


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _die_with_parent() -> None:
    """In the child: get SIGTERM if the driver dies (even by SIGKILL), so no orphan runs on."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run(cfg: Config, resume: bool = False, dry_run: bool = False, overwrite: bool = False,
        skip_missing: bool = False, ranks_per_node: int | None = None,
        build: str = "stale", quiet: bool = False, force: bool = False) -> int:
    """Run the sweep; returns 0 if every launch succeeded, 1 if some failed or are incomplete,
    130 on Ctrl-C."""
    output = Path(cfg.output)
    if not dry_run:
        # a FIFO (hmb-bench blocked on it), a device, the config itself or another kind of file
        try:
            outputs.check_output(output, "output", "results", [cfg.path], force=force, makes_dirs=True)
        except outputs.OutputError as e:
            raise ConfigError(str(e)) from None
    if resume and not cfg.seed_given:
        # The order continues the interrupted sweep's shuffle, not a new one.
        cfg.seed = recorded_seed(output, cfg.seed)
    specs = order(expand(cfg), cfg.seed)
    if dry_run:
        for s in specs:
            argv = hlaunch.bench_argv(s.args) + ["--threads", str(s.threads)]
            env = " ".join(f"{k}={v}" for k, v in s.env_added.items())
            print(f"{s.tag}  -n {s.ranks}  {env + '  ' if env else ''}hmb-bench {s.bench} {' '.join(argv)}")
        print(f"# {len(specs)} launches, seed {cfg.seed}, output {output}", file=sys.stderr)
        return 0
    with _output_lock(output):
        return _run_locked(cfg, specs, output, resume, overwrite, skip_missing, ranks_per_node, build, quiet)


@contextlib.contextmanager
def _output_lock(output: Path):
    """Hold OUTPUT.lock for the sweep: a second sweep on the same output is refused, naming the
    one that holds it (two sweeps would run every launch under each other's load)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    path = output.with_name(output.name + ".lock")
    f = open(path, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise ConfigError(f"{output} is in use by another hmb sweep ({holder}): wait for it to end, "
                          f"or give this one another --output") from None
    try:
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()} on {socket.gethostname()} since {_now()}\n")
        f.flush()
        yield
    finally:
        path.unlink(missing_ok=True)
        f.close()


def _run_locked(cfg, specs, output, resume, overwrite, skip_missing, ranks_per_node, build, quiet) -> int:
    from tqdm import tqdm   # 0.14 s to import: only once a sweep runs, not on hmb's start-up path

    if output.exists() and output.stat().st_size > 0 and not resume:
        if not overwrite:
            raise ConfigError(f"{output} already has results: pass --resume to continue that sweep "
                              f"or --output for a new file")
        output.unlink()
        output.with_name(output.name + ".log").unlink(missing_ok=True)
    history, runs_of, _ = _history(output) if resume else ({}, {}, None)
    done = {tag for tag, recs in history.items() if is_final(recs[-1])}
    todo = [s for s in specs if s.tag not in done]
    attempts = {s.tag: max(len(history.get(s.tag, ())), len(runs_of.get(s.tag, ()))) for s in todo}
    if resume and not todo:
        print(f"hmb: the sweep is already finished: all {len(specs)} launches are recorded in {output} "
              f"(nothing to resume; --overwrite starts over)", file=sys.stderr)
        return 0
    targets = {}
    for name in sorted({s.mpi for s in todo}):
        try:
            targets[name] = hlaunch.prepare(name, build=build)
        except hlaunch.LaunchError as e:
            raise ConfigError(str(e)) from None
        have = hlaunch.available_benches(targets[name])
        for bench in sorted({s.bench for s in todo if s.mpi == name}):
            if have is not None and bench not in have:
                if not skip_missing:
                    raise ConfigError(f"benchmark '{bench}' is not in this hmb-bench build for {name} "
                                      f"(hmb-bench --list shows: {', '.join(have) or 'none'})")
                print(f"hmb: skipping {bench} on {name}: not in this hmb-bench build yet", file=sys.stderr)
                todo = [s for s in todo if not (s.mpi == name and s.bench == bench)]
    described = {}
    for have in (hlaunch.available_benches(t) for t in targets.values()):
        described.update({n: d for n, d in (have or {}).items() if any(s.bench == n for s in todo)})
    try:
        hosts = hlaunch.parse_hosts(cfg.hosts)
        if hosts is not None and hosts.lab is not None:
            for name in sorted({s.mpi for s in todo}):   # the path each library takes, before any launch
                hlaunch.lab_network(targets[name], hosts, cfg.launcher)
    except hlaunch.LaunchError as e:
        raise ConfigError(str(e)) from None
    check_launches(todo, described, cfg.launcher if hosts is None else "srun", ranks_per_node)
    output.parent.mkdir(parents=True, exist_ok=True)
    log_path = output.with_name(output.name + ".log")
    resume_hint = f"hmb sweep {cfg.path} --resume{_output_flag(cfg)}"
    try:
        append_record(output, {"type": "sweep", "schema": SCHEMA, "config": cfg.path, "seed": cfg.seed,
                               "seed_given": cfg.seed_given, "start_time": _now(), "resume": resume,
                               "launches": len(specs), "skipped_finished": len(specs) - len(todo) if resume else 0,
                               "rerun_incomplete": sum(1 for s in todo if attempts[s.tag]),
                               "order": [s.tag for s in todo]})
        if described:   # so reading the results needs no hmb-bench (docs/output-schema.md)
            append_record(output, descriptors.record(described))
    except WriteError as e:
        raise WriteError(f"{e}: no launch was run (make space, then: {resume_hint if resume else 'run it again'})") \
            from None
    # SIGTERM (scancel, kill) ends the sweep like Ctrl-C: stop the launch, keep what finished.
    old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    failed, incomplete, ran = 0, [], 0
    tqdm.monitor_interval = 0  # no helper thread: children are started with preexec_fn
    bar = tqdm(total=len(todo), unit="launch", desc="hmb sweep", file=sys.stderr,
               disable=quiet or None, dynamic_ncols=True)
    lines = not quiet and bar.disable   # not a terminal (a pipe, a log): one line per launch
    start_size = output.stat().st_size
    try:
        for i, spec in enumerate(todo, 1):
            bar.set_postfix_str(f"{spec.bench} {spec.mpi} {spec.split or ''}".strip(), refresh=False)
            t0 = time.monotonic()
            try:
                status, why = _run_one(spec, targets[spec.mpi], cfg, output, log_path, ranks_per_node, bar, hosts,
                                       attempts[spec.tag] + 1)
            except WriteError as e:
                bar.close()
                last = f" (launch {spec.tag} ran; without its record --resume runs it again)" if e.ran else ""
                print(f"hmb: {e}{last}: the sweep stops after {i - 1 + e.ran} of {len(todo)} launches; what they "
                      f"wrote is kept in {output} (make space, then: {resume_hint})", file=sys.stderr)
                return 1
            ran += 1
            failed += status == "failed"
            if status == "incomplete":
                incomplete.append((spec.tag, why))
            bar.update(1)
            if lines:
                print(f"hmb sweep: {i}/{len(todo)} {spec.tag} {status} "
                      f"({time.monotonic() - t0:.1f} s)", file=sys.stderr, flush=True)
            if status == "incomplete" and _cannot_write(why, output):
                bar.close()
                print(f"hmb: {output} cannot be written ({why}): the sweep stops, {i} of {len(todo)} launches "
                      f"run; what they wrote is kept (make space, then: {resume_hint})", file=sys.stderr)
                return 1
    except KeyboardInterrupt:
        bar.close()
        print(f"hmb: sweep interrupted; finished launches are kept in {output} "
              f"(continue with: {resume_hint})", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, old_term)
        bar.close()
    if failed:
        print(f"hmb: {failed} of {len(todo)} launches failed (details in {log_path})", file=sys.stderr)
    if incomplete:
        named = "; ".join(f"{tag} ({why[:100]})" for tag, why in incomplete[:3])
        more = f"; {len(incomplete) - 3} more" if len(incomplete) > 3 else ""
        print(f"hmb: {len(incomplete)} of {len(todo)} launches incomplete, cut short by the machine: {named}{more} "
              f"(details in {log_path})", file=sys.stderr)
    if not quiet:
        print(f"hmb: {len(todo)} launches, {_results_since(output, start_size)} results, {failed} failed"
              + (f", {len(incomplete)} incomplete" if incomplete else "") + f" -> {output}"
              + (f" (run the incomplete ones again: {resume_hint})" if incomplete else ""), file=sys.stderr)
    elif incomplete:
        print(f"hmb: run the incomplete launches again with: {resume_hint}", file=sys.stderr)
    return 1 if failed or incomplete else 0


def _cannot_write(why: str, output: Path) -> bool:
    """Whether a launch ended because its results file could not be written (a full disk): the
    next launches would end the same way."""
    return bool(re.search(r"cannot write|No space left|Disk quota|Read-only file system", why)) and \
        (str(output) in why or os.path.basename(str(output)) in why or "No space left" in why)


def _results_since(output: Path, offset: int) -> int:
    """Result records appended to the output after this byte offset."""
    with open(output, "rb") as f:
        f.seek(offset)
        return sum(1 for _, raw, why in results.lines(f)
                   if not why and (results.parse_line(raw)[1] or {}).get("type") == "result")


def _output_flag(cfg: Config) -> str:
    return f" --output {cfg.output}"


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _run_one(spec: LaunchSpec, target: hlaunch.Target, cfg: Config, output: Path,
             log_path: Path, ranks_per_node, bar, hosts=None, attempt: int = 1) -> tuple[str, str]:
    """Run one launch and append its launch record: (status, why) as outcome() judges it."""
    argv = hlaunch.bench_argv(spec.args) + ["--threads", str(spec.threads),
                                            "--json", str(output), "--raw"]
    try:
        env, added = hlaunch.environment(target, spec.threads, spec.env_added, spec.tag, spec.ranks, cfg.launcher,
                                         hosts=hosts)
        cmd = hlaunch.command(target, spec.bench, argv, spec.ranks, spec.threads, cfg.launcher,
                              ranks_per_node, cfg.srun_args, env_names=sorted(added), hosts=hosts)
    except hlaunch.LaunchError as e:     # e.g. the lab's network probe: the same for every launch
        raise ConfigError(str(e)) from None
    out_offset = output.stat().st_size
    try:
        log = open(log_path, "a")
    except OSError as e:
        raise WriteError(f"cannot write to {log_path}: {e.strerror or e}") from None
    with log:
        try:
            log.write(f"### {_now()} {spec.tag}: {' '.join(cmd)}\n")
            log.flush()
        except OSError as e:
            raise WriteError(f"cannot write to {log_path}: {e.strerror or e}") from None
        start_offset = log.tell()
        t0 = time.monotonic()
        try:
            rc = hlaunch.run_streaming(cmd, env, cfg.timeout or None, stdout=log, stderr=log,
                                       preexec_fn=_die_with_parent, library=target.flavor)
        except hlaunch.LaunchError as e:
            rc = 127
            with contextlib.suppress(OSError):
                log.write(f"{e}\n")
        if rc == 124:
            with contextlib.suppress(OSError):
                log.write(f"hmb: launch killed after the {cfg.timeout:g} s timeout\n")
        elapsed = time.monotonic() - t0
        with contextlib.suppress(OSError):
            log.flush()
    with open(log_path, errors="replace") as f:
        f.seek(start_offset)
        text = f.read()
    launcher_rc, rc = rc, hlaunch.abort_code(rc, text)
    planned, written = launch_points(output, out_offset, spec.tag)
    status, why = outcome(rc, text, planned, written, cfg.timeout)
    # the machine's failure named (Slurm's time limit or refusal, the lab broken under the launch)
    cause = hlaunch.machine_failure(text, rc, getattr(hosts, "lab", None)) if rc != 0 else None
    if cause:      # the cause first, then what the launcher said (srun's own line)
        status, why = "incomplete", cause if not why or why in cause else f"{cause} ({why[:160]})"
    try:
        append_record(output, {"type": "launch", "schema": SCHEMA, "tag": spec.tag, "point": spec.point(),
                               "mpi": spec.mpi, "rc": rc, "status": status, "attempt": attempt,
                               **({"why": why} if why else {}), "points_planned": planned,
                               "points_written": written, "env_added": added,
                               **({"launcher_rc": launcher_rc} if launcher_rc != rc else {}),
                               "command": cmd, "elapsed_s": round(elapsed, 3), "end_time": _now()})
    except WriteError as e:
        e.ran = True
        raise
    if status != "done":
        bar.write(f"hmb: {spec.tag} {status} (exit {rc}): {why}", file=sys.stderr)
    return status, why


def machine_cause(path: Path, offset: int, rc: int, hosts=None) -> str | None:
    """Why the launch failed when the machine failed it, not the benchmark (hmb.run.launch.machine_failure:
    Slurm's time limit or a step it refused, the lab broken under it), from its part of the log."""
    if rc == 0:
        return None
    with open(path, errors="replace") as f:
        f.seek(offset)
        return hlaunch.machine_failure(f.read(), rc, getattr(hosts, "lab", None))


def failure_reason(path: Path, offset: int, rc: int, timeout: float = 0) -> str:
    """Why a launch failed, from its log (from `offset`): hmb-bench's own last error line when
    there is one (not the launcher's banner after it), else the timeout or the signal, else the
    last line."""
    with open(path, errors="replace") as f:
        f.seek(offset)
        return log_reason(f.read(), rc, timeout)
