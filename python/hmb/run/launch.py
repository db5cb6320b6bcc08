"""Launching hmb-bench: the command line (mpiexec or srun), its environment, running it.

Testing hook: HMB_BENCH_OVERRIDE="COMMAND" (split like a shell would) makes the driver run
that command directly (no build, no MPI launcher) in place of `mpiexec ... hmb-bench`, with
the same arguments and environment. The test suite uses it to stand a fake hmb-bench in.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

from ..data import descriptors, launchlog
from ..lab import network
from ..lab import nodes as hlab
from . import mpi as hmpi
from . import requirements

OVERRIDE_VAR = "HMB_BENCH_OVERRIDE"
# Thread placement every launch gets: one thread per core, packed next to its rank.
OMP_ENV = {"OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}


class LaunchError(Exception):
    """A one-line, user-facing problem (exit status 2)."""


def override() -> list[str] | None:
    value = os.environ.get(OVERRIDE_VAR, "").strip()
    return shlex.split(value) if value else None


def in_slurm() -> bool:
    return bool(os.environ.get("SLURM_JOB_ID"))


@dataclasses.dataclass
class Target:
    """An MPI library ready to launch hmb-bench (or the testing override)."""
    name: str
    flavor: str
    impl: hmpi.MPI | None       # None with the override

    @property
    def bench_cmd(self) -> list[str]:
        return override() or [str(self.impl.bench)]


def prepare(name: str, build: str = "missing") -> Target:
    """Find the MPI (installing a wheel if needed) and build hmb-bench for it.

    build: "missing" (only if hmb-bench is absent), "stale" (also when a source is newer than
    the build: hmpi.stale; what hmb run and hmb sweep do, so a git pull never launches the old
    binary), "always" (an incremental CMake build).
    """
    hmpi.check(name, error=LaunchError)
    if override():   # testing hook: no MPI at hand, a system MPI counts as MPICH-like
        return Target(name, hmpi.WHEEL_FLAVORS.get(name, "mpich"), None)
    try:
        impl = hmpi.find(name)
        if build == "always" or not impl.bench.exists() or (build == "stale" and hmpi.stale(impl)):
            print(f"hmb: building hmb-bench for {name} in {impl.build_dir}", file=sys.stderr)
            hmpi.build(impl)
    except hmpi.MPIError as e:
        raise LaunchError(str(e)) from None
    return Target(name, impl.flavor, impl)


def prepare_flavor(name: str) -> str:
    """The launcher dialect a launch of this MPI will have (what prepare() would give)."""
    if override():
        return hmpi.WHEEL_FLAVORS.get(name, "mpich")
    return hmpi.flavor(name)


def available_benches(target: Target) -> dict | None:
    """name -> descriptor of each benchmark this hmb-bench provides (`hmb-bench --list --json`,
    read once per binary), or None if it cannot say."""
    env = target.impl.env() if target.impl else dict(os.environ)
    try:
        return descriptors.load(target.bench_cmd, env=env)
    except descriptors.DescriptorError:
        return None


def bench_argv(args: dict) -> list[str]:
    """Option dict -> hmb-bench arguments (true -> flag, false/None -> omitted)."""
    out = []
    for key, value in args.items():
        opt = "--" + str(key).replace("_", "-")
        if value is True:
            out.append(opt)
        elif value is False or value is None:
            continue
        elif isinstance(value, (list, tuple)):
            out += [opt, ",".join(str(v) for v in value)]
        else:
            out += [opt, str(value)]
    return out


def parse_bench_argv(argv: list[str]) -> dict:
    """hmb-bench arguments -> option dict (inverse of bench_argv, for the requirement table)."""
    out, i = {}, 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--") and "=" in a:
            k, v = a[2:].split("=", 1)
            out[k] = v
        elif a.startswith("--"):
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                out[a[2:]] = argv[i + 1]
                i += 1
            else:
                out[a[2:]] = True
        else:
            out.setdefault("_positional", []).append(a)
        i += 1
    return out


def spare_cores(target: Target, bench: str, args: list[str]) -> int:
    """Cores per rank this invocation needs beyond its compute threads (a progress thread's),
    as hmb-bench derives it from the benchmark's descriptor without starting MPI
    (`hmb-bench BENCH ARGS --launch-needs`). 0 when it cannot say: bad arguments are then
    reported by the launch itself."""
    if target.impl is None:
        return 0
    try:
        p = subprocess.run(target.bench_cmd + [bench] + list(args) + ["--launch-needs"], capture_output=True,
                           text=True, errors="replace", timeout=60, env=target.impl.env())
        return int(json.loads(p.stdout)["spare_cores_per_rank"]) if p.returncode == 0 else 0
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError):
        return 0


def cores_per_rank(target: Target, bench: str, args: list[str], ranks: int, threads: int,
                   launcher: str) -> int:
    """Cores to bind each rank to: T for the compute threads, plus a spare one when the run has a
    progress thread and the host (or, under srun, the allocation's CPUs per task) has room
    (OMP_PLACES=cores with OMP_PROC_BIND=close keeps the T threads on the first T; hmb-bench moves
    progress threads to the rest). Without room: T, and hmb-bench warns and records that the
    progress thread shares a compute core."""
    spare = spare_cores(target, bench, args)
    if not spare:
        return threads
    if launcher == "srun":     # Slurm knows the node; the allocation must hold the extra core
        # Inside an allocation of fewer CPUs per task, a step asking for more is refused ("More
        # processors requested than permitted"): T, as without room on one host.
        room = os.environ.get("SLURM_CPUS_PER_TASK", "")
        return threads if room.isdigit() and int(room) < threads + spare else threads + spare
    return threads + spare if ranks * (threads + spare) <= (os.cpu_count() or 1) else threads


# The PMI each library's wheel speaks to srun (`srun --mpi=...`; a config's srun_args naming
# --mpi wins): the MPICH wheel's own PMI client speaks PMI-1/PMI-2 (no PMIx library in it), Open
# MPI 5 only PMIx. Without one, srun starts N singletons of one rank each.
SRUN_MPI = {"mpich": "pmi2", "impi": "pmi2", "openmpi": "pmix"}


@dataclasses.dataclass
class Hosts:
    """Where ranks go: the nodes of a lab (--hosts lab, lab:NAME; hmb/lab.py) or of a hostfile."""
    text: str
    names: list
    lab: object = None              # hmb.lab.Lab
    hostfile: str | None = None

    def per_node(self, ranks: int, ranks_per_node: int | None = None) -> int:
        """Ranks per node: as asked, else spread evenly (2 ranks on 2 nodes: one per node, the
        seeds' pairs)."""
        return ranks_per_node or -(-ranks // len(self.names))


# A host name as a hostfile may give it (RFC 1123 labels, '_' tolerated; no ':', which hydra and
# prte read as the slots): it reaches mpiexec's -hosts/--host and, from there, ssh's command line,
# so a name such as '-oProxyCommand=...' (an ssh option) or 'a,b' (two hosts) is refused.
HOST_NAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9_][A-Za-z0-9_-]{0,62}(\.[A-Za-z0-9_][A-Za-z0-9_-]{0,62})*")
HOSTFILE_MAX_BYTES = 16 << 20   # 10^5 hosts take about 1 MB


def _shown(text: str, width: int = 40) -> str:
    """A value for a one-line message: control characters escaped, cut to width."""
    s = text if text.isprintable() else ascii(text)[1:-1]
    return s if len(s) <= width else s[:width] + "..."


def parse_hosts(text: str | None) -> Hosts | None:
    """--hosts: 'lab' (the lab that is up, hmb lab up), 'lab:NAME', or a hostfile (one host per
    line, first word, an optional :slots or slots= ignored; a host listed again, as `srun
    hostname` writes it once per task, counts once). A hostfile is a regular UTF-8 file of at
    most HOSTFILE_MAX_BYTES whose every name is a host name (HOST_NAME); anything else is one
    LaunchError line naming the problem (a FIFO or /dev/zero blocked or filled memory)."""
    if text is None:
        return None
    if not text.strip():
        raise LaunchError("--hosts: empty (give lab, lab:NAME or a hostfile)")
    if text == "lab" or text.startswith("lab:"):
        try:
            up = hlab.load(text.split(":", 1)[1] if ":" in text else hlab.DEFAULT_NAME)
        except hlab.LabError as e:
            raise LaunchError(f"--hosts {_shown(text)}: {e}") from None
        return Hosts(text, up.hostnames, lab=up)
    shown = _shown(text, 200)
    try:
        path = os.path.abspath(text)
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a FIFO, device or socket)"
            raise LaunchError(f"--hosts {shown}: {kind}; give lab, lab:NAME or a hostfile")
        if st.st_size > HOSTFILE_MAX_BYTES:
            raise LaunchError(f"--hosts {shown}: {st.st_size:,} bytes, more than a hostfile's "
                              f"{HOSTFILE_MAX_BYTES >> 20} MB")
        with open(path, "rb") as f:
            data = f.read(HOSTFILE_MAX_BYTES + 1)
    except OSError as e:
        raise LaunchError(f"--hosts {shown}: not 'lab', 'lab:NAME' or a readable hostfile ({e.strerror})") from None
    except ValueError:     # a NUL in the path
        raise LaunchError(f"--hosts {shown}: not a file name (a NUL byte)") from None
    names: dict[str, str] = {}
    for no, raw in enumerate(data.split(b"\n"), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise LaunchError(f"--hosts {shown}: line {no}: not UTF-8 text (byte 0x{raw[e.start]:02x})") from None
        words = line.split("#")[0].split()
        if not words:
            continue
        name = words[0].split(":")[0]
        if not HOST_NAME.fullmatch(name):
            raise LaunchError(f"--hosts {shown}: line {no}: '{_shown(words[0])}' is not a host name (letters, "
                              f"digits, '-', '_' and '.', not starting with '-'; an optional :SLOTS)")
        names.setdefault(name.lower(), name)
    if not names:
        raise LaunchError(f"--hosts {shown}: no host in the file")
    return Hosts(text, list(names.values()), hostfile=path)


def hosts_prefix(target: Target, ranks: int, threads: int, hosts: Hosts,
                 ranks_per_node: int | None = None) -> list[str]:
    """mpiexec across hosts, ranks_per_node on each of the first ceil(ranks / it) hosts.

    On a lab the launcher's agent starts each node's proxy inside the node (hydra
    -launcher-exec, prte plm_ssh_agent), and hydra listens on the lab's bridge (its own hostname
    means nothing inside a node). Ranks are not bound by the launcher there: hydra and prte
    bind to the machine's cores, not the node's share (measured: the rank of the second node
    bound to CPU 0 beside the first node's, 1.4 ms per 8 B message); a node's share of the CPUs
    is its ranks' binding."""
    per = hosts.per_node(ranks, ranks_per_node)
    nodes = -(-ranks // per)
    if nodes > len(hosts.names):
        raise LaunchError(f"{ranks} ranks at {per} per node need {nodes} nodes; --hosts {hosts.text} has "
                          f"{len(hosts.names)}")
    used = [f"{h}:{per}" for h in hosts.names[:nodes]]
    impl = target.impl
    agent = str(hosts.lab.agent) if hosts.lab is not None else None
    cmd = [impl.mpiexec, "-n", str(ranks)]
    if target.flavor == "openmpi":
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        cmd += ["--host", ",".join(used)]
        if agent:
            return cmd + ["--prtemca", "plm_ssh_agent", agent, "--bind-to", "none"]
        return cmd + (["--map-by", f"slot:PE={threads}"] if threads > 1 else []) + ["--bind-to", "core"]
    if target.flavor != "mpich":
        raise LaunchError(f"--hosts: {target.name}'s launcher is not set up for other hosts (MPICH and Open MPI are)")
    cmd += ["-hosts", ",".join(used)]
    if agent:
        return cmd + ["-launcher", "ssh", "-launcher-exec", agent, "-iface", hosts.lab.bridge, "-bind-to", "none"]
    return cmd + ["-bind-to", f"core:{threads}" if threads > 1 else "core"]


def launcher_prefix(target: Target, ranks: int, threads: int, launcher: str = "auto",
                    ranks_per_node: int | None = None, srun_args: list[str] | None = None,
                    env_names: list[str] = (), hosts: Hosts | None = None) -> list[str]:
    """The launcher part of the command: srun inside Slurm (or on request), else mpiexec (across
    `hosts` when given). threads: cores bound per rank (the compute threads plus any spare core)."""
    if launcher == "auto":
        launcher = "srun" if in_slurm() else "mpiexec"
    if launcher == "srun":
        cmd = ["srun", "--cpu-bind=cores", "-n", str(ranks), "-c", str(threads)]
        if ranks_per_node or hosts:
            cmd[1:1] = ["-N", str(-(-ranks // (hosts.per_node(ranks, ranks_per_node) if hosts else ranks_per_node)))]
        extra = list(srun_args or [])
        if not any(a.startswith("--mpi") for a in extra) and target.flavor in SRUN_MPI:
            extra.insert(0, f"--mpi={SRUN_MPI[target.flavor]}")
        return cmd + extra
    if launcher != "mpiexec":
        raise LaunchError(f"unknown launcher '{launcher}' (choose auto, mpiexec or srun)")
    if target.impl is None:
        return []
    cmd = hosts_prefix(target, ranks, threads, hosts, ranks_per_node) if hosts else \
        target.impl.launch_args(ranks, threads)
    if target.flavor == "openmpi":
        # Open MPI forwards only what it is told to remote nodes; be explicit.
        for name in env_names:
            cmd += ["-x", name]
    return cmd


def command(target: Target, bench: str, args: list[str], ranks: int, threads: int,
            launcher: str = "auto", ranks_per_node: int | None = None,
            srun_args: list[str] | None = None, env_names: list[str] = (),
            hosts: Hosts | None = None) -> list[str]:
    if override():
        return override() + [bench] + args
    if launcher == "auto":
        launcher = "srun" if in_slurm() else "mpiexec"
    cores = cores_per_rank(target, bench, args, ranks, threads, launcher)
    prefix = launcher_prefix(target, ranks, cores, launcher, ranks_per_node, srun_args,
                             env_names, hosts)
    return prefix + target.bench_cmd + [bench] + args


_accepted: dict = {}


def library_accepts(target: Target, settings: dict) -> bool:
    """Does this MPI start (MPI_Init) with these settings? Probed once per build and setting
    with `hmb-bench --init-check` on one rank: an MPICH built for fewer VCIs than a mode asks
    for aborts inside MPI_Init (seen with Debian's MPICH 4.0.2 and MPIR_CVAR_CH4_NUM_VCIS=2)."""
    if target.impl is None or not settings:
        return True
    key = (str(target.impl.bench), tuple(sorted(settings.items())))
    if key not in _accepted:
        env = target.impl.env()
        env.update(settings)
        cmd = target.impl.launch_args(1) + [str(target.impl.bench), "--init-check"]
        try:
            with machine_lock(" ".join(cmd)[:300]):
                r = subprocess.run(cmd, env=env, capture_output=True, text=True, errors="replace", timeout=120)
            _accepted[key] = r.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _accepted[key] = False
    return _accepted[key]


_said_oversub: dict[str, bool] = {}   # the oversubscription line is said once per MPI and process


def environment(target: Target, threads: int, env_added: dict, tag: str | None, ranks: int | None = None,
                launcher: str = "auto", hosts: Hosts | None = None) -> tuple[dict, dict]:
    """(full environment, the variables HMB added) for one launch.

    Threads are pinned (OMP_PLACES=cores, OMP_PROC_BIND=close) inside a rank bound to its cores.
    A launch that leaves its ranks unbound (mpiexec with more ranks than cores) gets
    OMP_PROC_BIND=false instead: pinning there would put every rank's thread 0 on the same
    first core. A launch with more ranks x threads than cores also gets the library's
    oversubscription settings (MPI.oversubscribed_env: Open MPI yields when idle), said once.

    A library setting the library refuses at start-up is left out, said in one line, and
    recorded as HMB_ENV_REFUSED (in the launch record and hmb-bench's run header), so the
    benchmark runs with what the library has and reports what it got (or "unsupported")."""
    env = target.impl.env() if target.impl else dict(os.environ)
    # The whole set first: variables that only work together (MPICH's shared-memory cell size
    # needs a pack buffer that holds a cell) must not be probed one by one. A set that fails is
    # taken apart by leaving one variable out at a time: those whose absence lets the library
    # start are refused; if that names none, or the rest still fails, the whole set is.
    refused = {}
    if not library_accepts(target, env_added):
        refused = {k: v for k, v in env_added.items()
                   if library_accepts(target, {o: w for o, w in env_added.items() if o != k})}
        rest = {k: v for k, v in env_added.items() if k not in refused}
        if not refused or not library_accepts(target, rest):
            refused = dict(env_added)
    if refused:
        text = " ".join(f"{k}={v}" for k, v in refused.items())
        print(f"hmb: {target.name} does not start with {text} (MPI_Init fails); launching without it",
              file=sys.stderr)
        env_added = {k: v for k, v in env_added.items() if k not in refused}
        env_added["HMB_ENV_REFUSED"] = text
    if launcher == "auto":
        launcher = "srun" if in_slurm() else "mpiexec"
    unbound = launcher == "mpiexec" and target.impl is not None and ranks is not None \
        and not target.impl.binds_ranks(ranks) and hosts is None
    omp = {"OMP_PROC_BIND": "false"} if unbound else OMP_ENV
    oversub = {}
    if hosts is not None and hosts.lab is not None:
        # Across lab nodes: the library's network settings and the path a probe took (checked).
        env_added = {**lab_network(target, hosts, launcher), **env_added}
        node_cpus = min(len(n.cpus) for n in hosts.lab.nodes)
        if target.flavor == "openmpi" and "OMPI_MCA_mpi_yield_when_idle" not in os.environ \
                and hosts.per_node(ranks or 1) * threads > node_cpus:
            oversub = {"OMPI_MCA_mpi_yield_when_idle": "1"}
    elif launcher == "mpiexec" and target.impl is not None and ranks is not None and hosts is None:
        oversub = {k: v for k, v in target.impl.oversubscribed_env(ranks, threads).items() if k not in env_added}
        if oversub and not _said_oversub.get(target.name):
            _said_oversub[target.name] = True
            text = " ".join(f"{k}={v}" for k, v in oversub.items())
            print(f"hmb: {target.name}: {ranks} ranks x {threads} threads on {os.cpu_count()} cores: launching "
                  f"with {text} (export it to choose otherwise)", file=sys.stderr)
    added = {"OMP_NUM_THREADS": str(threads), **omp, **oversub, **env_added}
    if tag:
        added["HMB_TAG"] = tag
    env.update(added)
    return env, added


_paths: dict = {}


def lab_network(target: Target, hosts: Hosts, launcher: str = "auto") -> dict:
    """What a launch across lab nodes adds: the library's network settings (network.network_env; a
    value the user exported wins) and the path the library took with them, from a probe launch
    (one rank on each of two nodes, the library's own verbose selection output, once per MPI,
    lab and launcher in a process): HMB_LAB, HMB_NETWORK (network.NETWORK_LABEL) and
    HMB_NETWORK_EVIDENCE (what the library printed, and the probe's 8 B latency), which every
    run header records. A library that did not take TCP between the nodes is a LaunchError."""
    try:
        net = {k: v for k, v in network.network_env(target.flavor).items() if k not in os.environ}
    except hlab.LabError as e:
        raise LaunchError(str(e)) from None
    # Every launch, before it starts: a lab that cannot carry it (a node's namespace gone, a link
    # down) is named here instead of by the launcher's banner, or a hang until the timeout.
    cause = hlab.failure_cause(hosts.lab, during=False)
    if cause:
        raise LaunchError(f"--hosts {hosts.text}: {cause}: no launch can cross the lab (hmb lab down"
                          f"{'' if hosts.lab.name == hlab.DEFAULT_NAME else ' --name ' + hosts.lab.name}, then up)")
    if launcher == "auto":
        launcher = "srun" if in_slurm() else "mpiexec"
    key = (target.name, hosts.lab.name, launcher, tuple(sorted(net.items())))
    if key not in _paths:
        _paths[key] = _probe_path(target, hosts, launcher, net)
    return {**net, **_paths[key]}


def _probe_path(target: Target, hosts: Hosts, launcher: str, net: dict) -> dict:
    found = {"HMB_LAB": hosts.lab.name, "HMB_NETWORK": network.NETWORK_LABEL}
    if target.impl is None:    # the testing override runs no MPI
        return {**found, "HMB_NETWORK_EVIDENCE": f"not probed ({OVERRIDE_VAR})"}
    if len(hosts.names) < 2:
        raise LaunchError(f"--hosts {hosts.text}: a network path needs two nodes")
    with tempfile.TemporaryDirectory(prefix="probe-", dir=hosts.lab.dir) as d:
        out = os.path.join(d, "probe.jsonl")
        args = ["--mode", "latency", "--sizes", "8", "--iters", "50", "--warmup", "5", "--ci-target", "0",
                "--threads", "1", "--json", out]
        cmd = command(target, "p2p", args, 2, 1, launcher, 1, hosts=hosts)
        env = target.impl.env()
        env.update({"OMP_NUM_THREADS": "1", **OMP_ENV, **net, **network.verbose_env(target.flavor, d)})
        mark = env[hlab.LAUNCH_VAR] = hlab.launch_mark()
        try:
            with machine_lock(f"hmb lab network probe: {target.name} on {hosts.text}"):
                p = subprocess.run(cmd, env=env, capture_output=True, text=True, errors="replace", timeout=180)
        except subprocess.TimeoutExpired:
            cause = hlab.failure_cause(hosts.lab)
            raise LaunchError(f"--hosts {hosts.text}: the network probe ({target.name}, one rank on each of "
                              f"{', '.join(hosts.names[:2])}) did not end in 180 s"
                              + (f": {cause}" if cause else "")) from None
        finally:
            hlab.end_launch(hosts.lab.name, mark)     # hydra_pmi_proxy stayed in node 1 after a failed probe
        said = p.stdout + p.stderr + network.verbose_log(d)
        if p.returncode != 0:
            last = launchlog.log_reason(p.stderr + p.stdout, p.returncode)   # an Open MPI help box whole
            cause = hlab.failure_cause(hosts.lab)
            raise LaunchError(f"--hosts {hosts.text}: the network probe ({target.name}, one rank on each of "
                              f"{', '.join(hosts.names[:2])}) failed (exit {p.returncode}): "
                              + (cause if cause else last.strip()[:200]))
        latency = None
        try:
            with open(out) as f:
                for line in f:
                    rec = json.loads(line)
                    if rec.get("type") == "result" and rec.get("status") == "ok":
                        latency = rec["metrics"]["latency_us"]["median"]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    path, evidence = network.path_of(target.flavor, said)
    if path != "tcp":
        raise LaunchError(f"--hosts {hosts.text}: {target.name} did not take TCP between the nodes: {evidence}"
                          + (f" (check {', '.join(k for k in network.network_env(target.flavor) if k in os.environ)}"
                             " in your environment)" if any(k in os.environ for k in network.network_env(target.flavor))
                             else ""))
    lat = f"; probe 8 B latency {latency:.3g} us" if isinstance(latency, (int, float)) else ""
    return {**found, "HMB_NETWORK_EVIDENCE": f"{evidence}{lat}"}


MACHINE_LOCK_VAR = "HMB_MACHINE_LOCK"      # the lock file (default /tmp/hmb-machine.lock)
CONCURRENT_VAR = "HMB_CONCURRENT"          # 1: launch without waiting for other hmb launches


_held = threading.local()      # machine_lock: how deep this thread is inside it (depth)


@contextlib.contextmanager
def machine_lock(what: str):
    """One benchmark launch at a time per machine: two launches measure each other's load.

    Every launch hmb starts holds an exclusive flock on one file for the machine; a second one
    waits, saying once who holds it. HMB_CONCURRENT=1 asks for the other behaviour (no lock).
    Re-entrant: a launch made while this thread holds the lock (a probe inside a launch's
    set-up) runs under it; another thread of the process waits like another process."""
    depth = getattr(_held, "depth", 0)
    if os.environ.get(CONCURRENT_VAR, "") not in ("", "0") or depth:
        _held.depth = depth + 1
        try:
            yield
        finally:
            _held.depth = depth
        return
    path = os.environ.get(MACHINE_LOCK_VAR) or "/tmp/hmb-machine.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        raise LaunchError(f"cannot open the machine lock {path}: {e.strerror} "
                          f"(set {MACHINE_LOCK_VAR}=FILE, or {CONCURRENT_VAR}=1 to run without it)") from None
    try:
        try:
            os.fchmod(fd, 0o666)       # other users' hmb waits on the same file
        except OSError:
            pass
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode(errors="replace").strip() or "another process"
            print(f"hmb: waiting for the machine: another hmb launch holds {path} ({holder}); "
                  f"{CONCURRENT_VAR}=1 runs without waiting", file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}: {what}\n".encode(errors="replace"), 0)
        _held.depth = 1
        try:
            yield
        finally:
            _held.depth = 0
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)      # releases the lock


def run_streaming(cmd: list[str], env: dict, timeout: float | None = None,
                  stdout=None, stderr=None, preexec_fn=None, library: str | None = None) -> int:
    """Run cmd in its own process group; on timeout or Ctrl-C stop the whole group.
    Holds the machine lock (machine_lock) while it runs. library (a launcher flavor: mpich,
    openmpi): first remove that library's shared-memory segments that earlier launches left and
    no live process maps (remove_dead_shm).

    Returns the exit status (124 on timeout). KeyboardInterrupt is re-raised after the
    child group is stopped, so the caller can leave without recording an unfinished launch.
    A command that cannot start is a LaunchError.

    A launch across a lab's nodes (env holds the lab's settings, lab_network) is watched: a
    lab that breaks under it stops it at once, and the cause is written to its stderr
    ("hmb: lab NAME failed: CAUSE", which machine_failure reads); what it leaves in the nodes
    is ended after it (lab.end_launch, by the mark every process of the launch carries).
    """
    with machine_lock(" ".join(cmd)[:300]):
        if library:
            _say_removed(remove_dead_shm(library), "earlier launches")
        shm_before = shm_names()
        lab = _lab_of(env)
        if lab is not None:
            env = {**env, hlab.LAUNCH_VAR: hlab.launch_mark()}
        try:
            proc = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=stderr,
                                    start_new_session=True, preexec_fn=preexec_fn)
        except OSError as e:
            raise LaunchError(f"cannot start {cmd[0]}: {e.strerror}") from None
        try:
            if lab is None:
                status = proc.wait(timeout=timeout)
            else:
                status = _wait_watching(proc, timeout, lab, stderr)
        except subprocess.TimeoutExpired:
            _stop_launch(proc)
            return 124
        except KeyboardInterrupt:
            _stop_launch(proc)
            raise
        finally:
            if lab is not None:
                _end_lab_launch(lab, env, proc, stderr)
        if status == 0 and getattr(proc, "hmb_lab_cause", None):
            status = 1
        if status != 0:
            _say_removed(remove_left_shm(shm_before), "failed launch")
        return status


LAB_WATCH_S = 1.0       # how often a launch across a lab checks the lab (lab.failure_cause)


def _lab_of(env: dict):
    """The lab a launch crosses (its env holds the lab's settings, launch.lab_network), or None."""
    name = env.get("HMB_LAB")
    if not name or env.get("HMB_NETWORK") != network.NETWORK_LABEL:
        return None
    try:
        return hlab.load(name)
    except hlab.LabError as e:
        raise LaunchError(f"--hosts lab:{name}: {e}") from None


def _say(stream, text: str) -> None:
    """A line for the launch's own stderr (the sweep's log) or hmb's."""
    out = stream if hasattr(stream, "write") else sys.stderr
    out.write(text + "\n")
    out.flush()


def _wait_watching(proc: subprocess.Popen, timeout: float | None, lab, stderr) -> int:
    """proc.wait, checking the lab every LAB_WATCH_S: a launch whose lab broke under it (a link
    down, a node's namespace gone, the lab taken down) is stopped at once, naming the cause,
    instead of hanging until the timeout (90 s in a sweep) with its ranks waiting on TCP."""
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        step = LAB_WATCH_S if end is None else max(0.0, min(LAB_WATCH_S, end - time.monotonic()))
        try:
            return proc.wait(timeout=step)
        except subprocess.TimeoutExpired:
            if end is not None and time.monotonic() >= end:
                raise
        cause = hlab.failure_cause(lab)
        if cause and proc.poll() is None:
            _say(stderr, f"hmb: lab {lab.name} failed: {cause}; the launch was stopped")
            proc.hmb_lab_cause = cause
            _stop_launch(proc)
            return proc.returncode if proc.returncode not in (0, None) else 1


def _end_lab_launch(lab, env: dict, proc: subprocess.Popen, stderr) -> None:
    """After a launch across a lab: the cause, when it failed because of the lab (said once, as
    the watch says it), and an end to what it left in the nodes: a failed MPICH launch left
    hydra_pmi_proxy in node 1, a killed one prted and hmb-bench, running on."""
    if proc.returncode is not None and not getattr(proc, "hmb_lab_cause", None):
        # Also after a status 0: Open MPI's prterun returned 0 when `hmb lab down` stopped its
        # daemons ("A daemon failed to report back"), and the sweep recorded a launch done with
        # no result. A launch whose lab broke before it was checked is not done.
        cause = hlab.failure_cause(lab)
        if cause:
            _say(stderr, f"hmb: lab {lab.name} failed: {cause}")
            proc.hmb_lab_cause = cause
    left = hlab.end_launch(lab.name, env[hlab.LAUNCH_VAR])
    if left and proc.returncode != 0:
        _say(stderr, f"hmb: stopped what the launch left in the lab's nodes: {', '.join(left[:4])}"
                     f"{', ...' if len(left) > 4 else ''}")


SHM_DIR = "/dev/shm/"


def shm_dir() -> str:
    """Where the libraries' shared-memory segments live: /dev/shm, or HMB_SHM_DIR (a test's own
    directory, so no other launch on the machine touches the segments it plants)."""
    return os.environ.get("HMB_SHM_DIR", SHM_DIR).rstrip("/") + "/"

# The names each library's own code gives its shared-memory segments in /dev/shm (UCX, which both
# MPICH's wheel and Open MPI's pml ucx load, has its own): remove_dead_shm touches no other name.
SHM_PREFIXES = {"mpich": ("mpich_shm_",), "openmpi": ("sm_segment.", "vader_segment."), "impi": ()}
UCX_SHM_PREFIXES = ("ucx_shm_posix_",)
# A segment younger than this may be one a launch is creating (before its first process maps it).
SHM_DEAD_AGE_S = 60


def remove_dead_shm(library: str) -> list:
    """Segments of this library's own names (SHM_PREFIXES) that earlier launches left behind:
    a driver killed with SIGKILL, or a launch killed outside hmb, cannot remove them (MPICH
    unlinks a segment only once every rank has mapped it), and no later launch did. Only those
    this user owns, not changed for SHM_DEAD_AGE_S, and that no live process maps or holds
    open; returns the names removed."""
    prefixes = SHM_PREFIXES.get(library, ()) + UCX_SHM_PREFIXES
    now, uid, old = time.time(), os.geteuid(), set()
    for name in shm_names():
        if not name.startswith(prefixes):
            continue
        try:
            st = os.lstat(shm_dir() + name)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_uid == uid and now - st.st_mtime > SHM_DEAD_AGE_S:
            old.add(name)
    return _unlink_shm(old - shm_in_tree(None)) if old else []

# What the launchers print when a rank calls MPI_Abort(comm, CODE): hydra "application called
# MPI_Abort(comm=0x84000001, 3) - process 3", Open MPI 5 "MPI_ABORT was invoked on rank 3 in communicator
# ... Proc: ... Errorcode: 3" (4.x: "... with errorcode 3.").
_ABORT_CODE = re.compile(r"application called MPI_Abort\([^,()]*,\s*(\d+)\)|"
                         r"MPI_ABORT was invoked on rank \d+ in communicator[\s\S]{0,300}?"
                         r"(?:with errorcode|Errorcode:)\s*(\d+)")


def abort_code(rc: int, text: str) -> int:
    """The exit status of a launch whose rank aborted: the code the rank gave MPI_Abort, as the
    launcher printed it, where the launcher itself returned the signal that stopped the other
    ranks. MPICH's hydra returns 9 (SIGKILL) instead of the rank's 3 in about one launch of six
    when 4 ranks share 2 cores: the same output, the abort line included, and another status.
    Otherwise rc, unchanged."""
    if rc not in (9, 137, -9):
        return rc
    codes = {int(a or b) for a, b in _ABORT_CODE.findall(text)}
    return codes.pop() if len(codes) == 1 else rc


# What ends a launch that is the machine's doing, not the benchmark's: the sweep records such a
# launch `incomplete` (resumed), not `failed` (final). Slurm's words (22.05; srun and slurmstepd),
# then the line a launch across a lab writes when the lab broke (_wait_watching, _end_lab_launch).
# After a job's time limit every further srun of the sweep failed in 0.1 s ("Unable to create step
# ... already completing") and a resubmitted job found the sweep "already finished", 21 of 48
# points never run.
_SLURM_MACHINE = [
    (re.compile(r"Unable to create step for job \d+: (Job/step already completing or completed|Invalid job id "
                r"specified|Job has expired|Requested nodes are busy|Unable to contact slurm controller[^\n]*|"
                r"Socket timed out on send/recv operation|Zero Bytes were transmitted or received)"),
     "Slurm refused the step: {0} (the allocation is ending or unreachable)"),
    (re.compile(r"\*\*\* (?:STEP|JOB) [\d.]+ ON \S+ CANCELLED AT \S+ DUE TO (TIME LIMIT|NODE FAILURE|PREEMPTION)"),
     "Slurm cancelled the step (due to {0})"),
    (re.compile(r"\*\*\* (?:STEP|JOB) [\d.]+ ON \S+ CANCELLED AT \S+ \*\*\*"),
     "Slurm cancelled the step (scancel)"),
    (re.compile(r"srun: error: (Node failure on \S+|Unable to contact slurm controller)"),
     "Slurm: {0}"),
]
# A launcher that failed to start its job: no rank ran, nothing of the benchmark failed. Open MPI's
# prterun, now and then when another Open MPI launch starts or ends beside it (docs/findings.md).
_LAUNCHER_MACHINE = [
    (re.compile(r"The PMIx server's listener thread failed to start"),
     "Open MPI's launcher did not start the job (the PMIx server's listener thread failed to start)"),
]
_LAB_FAILED = re.compile(r"^hmb: lab [a-z][a-z0-9]* failed: (.+?)(?:; the launch was stopped)?$", re.MULTILINE)


def machine_failure(text: str, rc: int, lab=None) -> str | None:
    """Why a launch that failed (rc != 0) did, when the machine ended it and not the benchmark:
    the job's time limit, a step Slurm refused or cancelled, a node failure, the lab broken under
    it (a node's namespace gone, a link down, the lab taken down), a launcher that did not start
    the job (_LAUNCHER_MACHINE), from its output `text`; with
    `lab` (an hmb.lab.Lab) the lab is also checked as it is now. None: the benchmark's own failure
    (or one nothing here recognises), final."""
    if rc == 0:
        return None
    m = _LAB_FAILED.search(text or "")
    if m:
        return m.group(1).strip()
    for pattern, says in _SLURM_MACHINE + _LAUNCHER_MACHINE:
        if rc == 124 and says.endswith("(scancel)"):
            continue        # hmb's own timeout stopped the step: Slurm says it was cancelled
        m = pattern.search(text or "")
        if m:
            return says.format(*[g.lower() if g.isupper() else g for g in m.groups()])
    if lab is not None:
        return hlab.failure_cause(lab)
    return None


def _stop_launch(proc: subprocess.Popen) -> None:
    """Stop the launch's process group, then remove the shared-memory segments its processes
    had mapped (MPICH's mpich_shm_*, Open MPI's sm_segment.*: a killed job cannot unlink them)
    and no live process maps any more; say so."""
    mine = shm_in_tree(proc.pid)
    _stop_group(proc)
    _say_removed(_unlink_shm(mine - shm_in_tree(None)), "stopped launch")


def shm_names() -> set:
    """The names in /dev/shm now."""
    try:
        return set(os.listdir(shm_dir()))
    except OSError:
        return set()


def remove_left_shm(before: set) -> list:
    """A launch that failed on its own (a rank aborted: a data mismatch, the watchdog) leaves
    the library's shared-memory segments behind: MPICH cannot unlink a segment when a rank is
    killed before it has (a 2-rank aborting launch left one, ~1-5 MB, in /dev/shm here; ~80 per
    make test before this). Removes those that appeared since `before` and that no live process
    maps or holds open (the machine lock keeps other hmb launches out meanwhile); returns them."""
    return _unlink_shm((shm_names() - before) - shm_in_tree(None))


def _unlink_shm(names) -> list:
    removed = []
    for name in sorted(names):
        try:
            os.unlink(shm_dir() + name)
            removed.append(name)
        except OSError:
            continue
    return removed


def _say_removed(removed: list, what: str) -> None:
    if removed:
        print(f"hmb: removed {len(removed)} shared-memory segment{'s' if len(removed) > 1 else ''} the "
              f"{what} left in {shm_dir().rstrip('/')} ({', '.join(removed[:3])}{', ...' if len(removed) > 3 else ''})",
              file=sys.stderr)


def shm_in_tree(root: int | None) -> set:
    """Names of /dev/shm files mapped or open by `root` and its descendants (launchers such as
    hydra start their ranks in new sessions, so the tree is followed by parent id); None: by
    any live process."""
    pids = [d for d in os.listdir("/proc") if d.isdigit()]
    if root is not None:
        children = {}
        for d in pids:
            try:
                with open(f"/proc/{d}/stat") as f:
                    children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(d))
            except (OSError, ValueError, IndexError):
                continue
        tree, todo = set(), [root]
        while todo:
            pid = todo.pop()
            if pid not in tree:
                tree.add(pid)
                todo += children.get(pid, [])
        pids = [str(p) for p in tree]
    names = set()
    for d in pids:
        try:
            with open(f"/proc/{d}/maps") as f:
                names.update(ln.rstrip("\n").split(shm_dir(), 1)[1].split(" ")[0] for ln in f if shm_dir() in ln)
            for fd in os.listdir(f"/proc/{d}/fd"):
                target = os.readlink(f"/proc/{d}/fd/{fd}")
                if target.startswith(shm_dir()):
                    names.add(target[len(shm_dir()):])
        except OSError:
            continue
    return {n for n in names if n and "/" not in n and not n.endswith("(deleted)")}


def _stop_group(proc: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGINT, 3), (signal.SIGTERM, 3), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def run_bench(target: Target, bench: str, bench_args: list[str], ranks: int, threads: int,
              json_path: str | None = None, launcher: str = "auto",
              timeout: float | None = None, dry_run: bool = False, hosts: Hosts | None = None,
              ranks_per_node: int | None = None) -> int:
    """`hmb run`: split by the requirement table, launch each part, stream its output."""
    opts = parse_bench_argv(bench_args)
    split_opts = {k: v for k, v in opts.items() if k != "_positional" and v is not True}
    launches = requirements.plan(bench, split_opts, ranks, threads, target.flavor)
    worst = 0
    for launch in launches:
        argv = _replace_split(bench_args, launches, launch)
        argv = _without(argv, "--threads") + ["--threads", str(launch.threads)]
        if json_path:
            argv = _without(argv, "--json") + ["--json", json_path]
        env, added = environment(target, launch.threads, launch.env_added, None, launch.ranks, launcher,
                                 hosts=None if dry_run and hosts and hosts.lab else hosts)
        cmd = command(target, bench, argv, launch.ranks, launch.threads, launcher, ranks_per_node,
                      env_names=sorted(added), hosts=hosts)
        note = f" ({launch.split})" if launch.split else ""
        added_txt = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in added.items())
        print(f"# hmb: {added_txt} {' '.join(cmd)}{note}", file=sys.stderr, flush=True)
        if dry_run:
            continue
        rc = run_streaming(cmd, env, timeout, library=target.flavor)
        if rc == 124 and timeout:
            print(f"hmb: launch killed after the --timeout of {timeout:g} s", file=sys.stderr)
        if rc != 0 and worst == 0:
            worst = rc
    return worst


def _without(argv: list[str], opt: str) -> list[str]:
    """Drop `opt VALUE` and `opt=VALUE` from argv."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == opt:
            skip = True
            continue
        if a.startswith(opt + "="):
            continue
        out.append(a)
    return out


def _replace_split(argv: list[str], launches, launch) -> list[str]:
    """argv with the split option's value replaced by this launch's share of it."""
    if len(launches) == 1:
        return list(argv)
    changed = {k: v for k, v in launch.args.items()}
    out = []
    i = 0
    while i < len(argv):
        a = argv[i]
        key = a[2:].split("=", 1)[0] if a.startswith("--") else None
        if key in changed and "=" in a:
            out.append(f"--{key}={changed[key]}")
        elif key in changed and i + 1 < len(argv):
            out += [a, str(changed[key])]
            i += 1
        else:
            out.append(a)
        i += 1
    return out
