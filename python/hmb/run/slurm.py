"""`hmb slurm`: an sbatch script that runs a sweep inside the allocation with srun.

srun, not mpiexec, starts each launch's ranks: it is what a cluster's users run, Slurm places,
tracks and stops the ranks (scancel reaches every one, no ssh between nodes is needed), and each
wheel's MPI speaks a PMI srun serves (launch.SRUN_MPI: pmi2 for MPICH, pmix for Open MPI).

The script is deterministic (no absolute paths, no dates) so it can be kept in version
control and diffed; it runs from the directory it is submitted from (the repository).
"""
from __future__ import annotations

import re
import shlex

from ..lab import nodes as lab
from .launch import LaunchError, parse_hosts
from .sweep import Config, ConfigError, expand

MAX_COUNT = 1 << 20   # a bound for the #SBATCH lines (a 31-digit --nodes was written as is)
# sbatch --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes,
# days-hours:minutes:seconds (ASCII digits: \d took '١٢:٠٠'); 0 is no limit.
TIME_RE = re.compile(r"(?:([0-9]{1,9})-([0-9]{1,2})(?::([0-9]{2}))?(?::([0-9]{2}))?|([0-9]{1,9})(?::([0-9]{2}))?(?::([0-9]{2}))?)")
MAX_TIME_MIN = 0xFFFFFFFD     # Slurm keeps a time limit in minutes in 32 bits (0xFFFFFFFE/F: NO_VAL, INFINITE)
# #SBATCH lines are not shell: a value is written as is, so it must be one plain word
# (a newline would end the line and stop sbatch reading every #SBATCH after it).
SBATCH_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+,@-]{0,127}")


def _sbatch_value(flag: str, value: str) -> str:
    if not SBATCH_WORD.fullmatch(value):
        raise ConfigError(f"{flag} {value!r}: expected one word of letters, digits and . _ + , @ - "
                          f"(it is written into an #SBATCH line)")
    return value


def _no_control(what: str, value: str) -> str:
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ConfigError(f"{what} {value!r}: holds a control character (newline, NUL, ...)")
    return value


def check(cfg: Config, nodes: int, ranks_per_node: int, threads: int) -> None:
    """Every launch must fit the allocation (one line, exit 2, otherwise). The expanded
    launches are checked, so layouts the requirement table changes (mt everywhere: 2·T
    ranks) count with the ranks they really use."""
    for spec in expand(cfg, probe_mpi=False):   # the cluster has the MPI, this machine need not
        where = f"{spec.bench}" + (f" ({spec.split})" if spec.split else "")
        if spec.ranks > nodes * ranks_per_node:
            raise ConfigError(f"{where} with ranks={spec.ranks} needs more than "
                              f"--nodes × --ranks-per-node = {nodes * ranks_per_node} ranks")
        if spec.threads > threads:
            raise ConfigError(f"{where} with threads={spec.threads} needs more than --threads {threads} "
                              f"CPUs per rank")


def time_minutes(time: str) -> float:
    """sbatch --time's value in minutes (ConfigError naming the field out of range): hours of a
    day below 24, minutes and seconds below 60 where a larger field comes first (1-25:61:61 was
    accepted)."""
    m = TIME_RE.fullmatch(time)
    if not m:
        shown = time if time.isprintable() else ascii(time)[1:-1]
        raise ConfigError(f"--time '{shown[:40]}': expected minutes, MM:SS, HH:MM:SS or D-HH[:MM[:SS]]")
    d, dh, dm, ds, a, b, c = m.groups()
    if d is not None:
        fields = [("days", int(d), None), ("hours", int(dh), 24), ("minutes", int(dm or 0), 60),
                  ("seconds", int(ds or 0), 60)]
    elif c is not None:        # H:M:S
        fields = [("hours", int(a), None), ("minutes", int(b), 60), ("seconds", int(c), 60)]
    else:                      # M or M:S
        fields = [("minutes", int(a), None), ("seconds", int(b or 0), 60)]
    for name, value, below in fields:
        if below is not None and value >= below:
            raise ConfigError(f"--time {time}: {value} {name} (at most {below - 1} after a larger field)")
    scale = {"days": 1440, "hours": 60, "minutes": 1, "seconds": 1 / 60}
    total = sum(scale[name] * value for name, value, _ in fields)
    if total > MAX_TIME_MIN:
        raise ConfigError(f"--time {time}: {total:,.0f} minutes, beyond Slurm's largest limit ({MAX_TIME_MIN:,}); "
                          f"0 is no limit")
    return total


def check_hosts(hosts: str | None) -> None:
    """--hosts as hmb sweep will read it inside the allocation: lab, lab:NAME (a valid name; the
    lab need not be up where the script is written) or a hostfile readable here."""
    if hosts is None:
        return
    if hosts == "lab" or hosts.startswith("lab:"):
        try:
            lab.check_name(hosts.split(":", 1)[1] if ":" in hosts else lab.DEFAULT_NAME)
        except lab.LabError as e:
            raise ConfigError(f"--hosts {hosts}: {e}") from None
        return
    try:
        parse_hosts(hosts)
    except LaunchError as e:
        raise ConfigError(str(e)) from None


def check_options(nodes: int, ranks_per_node: int, threads: int, time: str = "01:00:00",
                  partition: str | None = None, account: str | None = None, job_name: str = "hmb-sweep",
                  hosts: str | None = None) -> None:
    """The allocation's options (one ConfigError line): checked before anything is written
    (slurm --study wrote its config before a bad --time was refused). An option given empty
    is refused, not dropped (--partition '' wrote no #SBATCH --partition line)."""
    if nodes < 1 or ranks_per_node < 1 or threads < 1:
        raise ConfigError("--nodes, --ranks-per-node and --threads must be at least 1")
    if max(nodes, ranks_per_node, threads) > MAX_COUNT:
        raise ConfigError(f"--nodes, --ranks-per-node and --threads must be at most {MAX_COUNT:,} "
                          f"(got {max(nodes, ranks_per_node, threads):,})")
    time_minutes(time)
    _sbatch_value("--job-name", job_name)
    if partition is not None:
        _sbatch_value("--partition", partition)
    if account is not None:
        _sbatch_value("--account", account)
    check_hosts(hosts)


def script(cfg: Config, config_path: str, nodes: int, ranks_per_node: int, threads: int,
           time: str = "01:00:00", partition: str | None = None, account: str | None = None,
           job_name: str = "hmb-sweep", mpi: str | None = None, hosts: str | None = None,
           study_dir: str | None = None) -> str:
    """hosts: passed to hmb sweep (--hosts lab: the lab's network settings and path check inside
    the allocation, docs/lab.md); study_dir: a study's directory (hmb slurm --study), reported
    with hmb study report at the end."""
    check_options(nodes, ranks_per_node, threads, time, partition, account, job_name, hosts)
    for what, value in (("config", config_path), ("--results", cfg.output), ("--mpi", mpi or ""),
                        ("--hosts", hosts or "")):
        _no_control(what, value)
    check(cfg, nodes, ranks_per_node, threads)
    q = shlex.quote
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --nodes={nodes}",
        f"#SBATCH --ntasks-per-node={ranks_per_node}",
        f"#SBATCH --cpus-per-task={threads}",
        f"#SBATCH --time={time}",
    ]
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    if account:
        lines.append(f"#SBATCH --account={account}")
    lines += [
        "#SBATCH --exclusive",
        f"#SBATCH --output={job_name}-%j.out",
        "",
        f"# Generated by `hmb slurm {q(config_path)} --nodes {nodes} --ranks-per-node {ranks_per_node} "
        f"--threads {threads}{' --hosts ' + q(hosts) if hosts else ''}`.",
        "# Submit from the repository root: sbatch THIS_FILE. Resubmitting continues the sweep",
        "# (--resume skips every launch that already finished).",
        "set -euo pipefail",
        'cd "${SLURM_SUBMIT_DIR:-.}"',
        "",
        "# One core per OpenMP thread, threads packed next to their rank.",
        f"export OMP_NUM_THREADS={threads}",
        "export OMP_PLACES=cores",
        "export OMP_PROC_BIND=close",
        "# Slurm >= 22.05 no longer passes --cpus-per-task from sbatch to srun; hmb passes -c",
        "# per launch, and this keeps srun's own default in line.",
        f"export SRUN_CPUS_PER_TASK={threads}",
        "",
        "# Each launch: srun --cpu-bind=cores -N <nodes> -n <ranks> -c <threads> --mpi=<the library's PMI:",
        "# pmi2 for MPICH, pmix for Open MPI, unless the config's srun_args name one> hmb-bench ...",
        f"HMB=${{HMB:-.venv/bin/hmb}}",
        f'"$HMB" sweep {q(config_path)} --resume --launcher srun --ranks-per-node {ranks_per_node}'
        + (f" --mpi {q(mpi)}" if mpi else "") + (f" --hosts {q(hosts)}" if hosts else "")
        + f" --output {q(cfg.output)}",
        "",
        f'"$HMB" study report {q(study_dir)}' if study_dir else
        f'"$HMB" report {q(cfg.output)} -o {q(_report_dir(cfg.output))}',
        "",
    ]
    return "\n".join(lines)


def _report_dir(output: str) -> str:
    if "/" in output:
        return output.rsplit("/", 1)[0] + "/report"
    return "report"
