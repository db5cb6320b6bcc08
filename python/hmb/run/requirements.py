"""Library settings and launch layouts that a benchmark mode needs — as hmb-bench declares them.

A benchmark option value (``async --progress impl``, ``mt --mode stream``) may need an
environment variable that only some MPI libraries know, or a different launch layout
(``mt --mode everywhere``: T single-threaded processes per side instead of T threads).
Values with different needs cannot share a launch, so a list option is split into groups
of values with the same needs; each group becomes its own launch.

The needs are the benchmarks' own (their ``hmb_option_rule`` rows, exported by
``hmb-bench --list --json`` as ``rules``): this module keeps no table of its own. To teach the
driver a new need, add a rule to the benchmark's descriptor.
"""
from __future__ import annotations

import dataclasses

from ..data import descriptors
from . import mpi as hmpi
from .mpi import MPIError


class RequirementsError(MPIError):
    """No hmb-bench to read the rules from (one line)."""


@dataclasses.dataclass(frozen=True)
class Rule:
    bench: str
    option: str                 # the benchmark option whose value triggers the rule
    values: tuple[str, ...]     # option values (text before any ':') that need it
    env: dict                   # flavor -> {VAR: template}; "{threads}", "{threads_plus_one}" substituted
    layout: str = ""            # "" or "everywhere": ranks = 2*T, threads = 1
    why: str = ""


_rules: tuple | None = None


def rules(build: bool = True) -> tuple:
    """Every benchmark's rules, from the newest hmb-bench built here, read once; when none is
    built, the default MPI's is built (build False: no rules then)."""
    global _rules
    if _rules is None:
        try:
            exe, known = descriptors.local_loaded()
            if exe is None and build:      # none built: the default MPI's is built
                exe = hmpi.local_binary(build)
                known = descriptors.load([str(exe)]) if exe else {}
        except (MPIError, descriptors.DescriptorError) as e:
            raise RequirementsError(f"no hmb-bench to read the benchmarks' launch needs from: {e}") from None
        if not known:
            return ()
        _rules = tuple(Rule(b.name, r["option"], tuple(r["values"]), r.get("env") or {}, r.get("layout") or "",
                            r.get("why", "")) for b in known.values() for r in b.rules)
    return _rules


@dataclasses.dataclass
class Launch:
    """One launch's share of a point: its benchmark args, layout and added environment."""
    args: dict                  # option -> value (text), as passed to hmb-bench
    ranks: int
    threads: int
    env_added: dict
    split: str = ""             # "" for an unsplit point, else e.g. "progress=impl"


def _rules_for(bench: str, option: str, value: str) -> list[Rule]:
    head = value.split(":", 1)[0].strip()
    return [r for r in rules() if r.bench == bench and r.option == option and head in r.values]


def _needs(bench: str, option: str, value: str, flavor: str, threads: int):
    env, layout = {}, ""
    for rule in _rules_for(bench, option, value):
        for var, template in rule.env.get(flavor, {}).items():
            env[var] = template.format(threads=threads, threads_plus_one=threads + 1)
        layout = rule.layout or layout
    return env, layout


def plan(bench: str, args: dict, ranks: int, threads: int, flavor: str) -> list[Launch]:
    """Split one point into launches whose option values share the same needs.

    args: option -> value text; list values are comma-separated text ("none,impl").
    flavor: mpich | openmpi | impi (the launcher dialect of the chosen MPI).
    """
    split_option = None
    for option in {r.option for r in rules() if r.bench == bench}:
        if option in args:
            split_option = option
            break
    if split_option is None:
        return [Launch(dict(args), ranks, threads, {})]
    values = [v.strip() for v in str(args[split_option]).split(",") if v.strip()]
    groups: dict[tuple, list[str]] = {}
    for value in values:
        env, layout = _needs(bench, split_option, value, flavor, threads)
        groups.setdefault((tuple(sorted(env.items())), layout), []).append(value)
    launches = []
    for (env_items, layout), group_values in groups.items():
        launch_args = dict(args)
        launch_args[split_option] = ",".join(group_values)
        n, t = ranks, threads
        if layout == "everywhere":
            n, t = 2 * threads * max(1, ranks // 2), 1
        label = f"{split_option}={launch_args[split_option]}" if len(groups) > 1 else ""
        launches.append(Launch(launch_args, n, t, dict(env_items), label))
    return launches


def explain() -> str:
    """The rules as text (for docs and `hmb run --help`), from the hmb-bench built here."""
    lines = []
    if not rules(build=False):
        return "(read from hmb-bench --list --json: run `hmb build` first)"
    for r in rules(build=False):
        env = "; ".join(f"{fl}: " + " ".join(f"{k}={v.format(threads='T', threads_plus_one='T+1')}"
                                              for k, v in e.items())
                        for fl, e in r.env.items()) or "-"
        lay = f" layout {r.layout}" if r.layout else ""
        lines.append(f"{r.bench} --{r.option} {'|'.join(r.values)}: {env}{lay} ({r.why})")
    return "\n".join(lines)
