"""`hmb lab up|down|status|exec`: N "nodes" on one machine, so MPI traffic takes the network path.

A node is a network namespace and a UTS namespace (its own hostname) with a veth on one bridge,
an address, `lo`, a default route through the bridge, and its share of the machine's CPUs (a
command started in it is confined to them, as on a node of its own). Ranks on different nodes
see different hostnames and different interfaces, so an MPI library treats them as remote and
uses its network path (TCP over the veths); docs/lab.md.

Everything a lab owns is named after it (NAME, default "hmblab"): namespaces NAME-n1..NAME-nN
(also the nodes' hostnames, in an /etc/hosts block), the bridge NAMEbr, host-side veths
NAMEv1.., the state directory /run/hmb-lab/NAME (lab.json, the nodes' UTS namespace files, the
launcher agent `exec`). `down` stops every process living in a node's network namespace
(slurmd, MPI proxies, ranks), then removes namespaces, links, the hosts block and the state,
also when a failed `up` left only part of it.

The launcher agent (DIR/exec HOST COMMAND..., rsh-style) runs a command inside a node:
MPICH's hydra calls it with -launcher-exec, Open MPI's prte as plm_rsh_agent.
"""
from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

DEFAULT_NAME = "hmblab"
NAME_RE = re.compile(r"[a-z][a-z0-9]{0,9}")     # interface names hold 15 characters: NAMEbr, NAMEv12
BASE_VAR = "HMB_LAB_DIR"                        # where labs keep their state (default /run/hmb-lab)
HOSTS_FILE = Path(os.environ.get("HMB_LAB_HOSTS_FILE", "/etc/hosts"))
NODE_IFACE = "lab0"                             # the veth end inside every node
MAX_NODES = 16


class LabError(Exception):
    """A one-line, user-facing problem (exit status 2)."""


class LabInterrupted(KeyboardInterrupt):
    """`up` (or `up --slurm`) was interrupted (SIGINT, SIGTERM, SIGHUP) and took down what it had
    made: str() says so in one line, naming what is left, if anything."""


@dataclasses.dataclass
class Node:
    name: str       # hostname and network namespace name
    addr: str
    uts: str        # the bind-mounted UTS namespace file
    cpus: list

    @property
    def netns(self) -> str:
        return f"/run/netns/{self.name}"


@dataclasses.dataclass
class Lab:
    name: str
    subnet: str
    head_addr: str      # the bridge's address in the machine's own namespace
    nodes: list

    @property
    def dir(self) -> Path:
        return base_dir() / self.name

    @property
    def bridge(self) -> str:
        return f"{self.name}br"

    @property
    def agent(self) -> Path:
        """The launcher agent: `agent [-opts] HOST COMMAND...` runs COMMAND in node HOST."""
        return self.dir / "exec"

    @property
    def hostnames(self) -> list[str]:
        return [n.name for n in self.nodes]

    def node(self, host: str) -> Node:
        for n in self.nodes:
            if host in (n.name, n.addr):
                return n
        raise LabError(f"lab {self.name} has no node {host!r} (nodes: {', '.join(self.hostnames)})")

    def to_json(self) -> dict:
        return {"name": self.name, "subnet": self.subnet, "head_addr": self.head_addr,
                "nodes": [dataclasses.asdict(n) for n in self.nodes]}


def base_dir() -> Path:
    return Path(os.environ.get(BASE_VAR) or "/run/hmb-lab")


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name or ""):
        raise LabError(f"lab name {name!r}: expected a lower-case letter, then up to 9 letters or digits "
                       f"(its interfaces are named NAMEbr and NAMEv1..)")
    return name


def default_subnet(name: str) -> str:
    """A /24 of 10.77-10.78.x.0 chosen from the name, so two labs (two test runs) do not meet."""
    h = zlib.crc32(name.encode())
    return f"10.{77 + (h >> 8) % 2}.{h % 250 + 1}.0/24"


def run(cmd: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    """cmd's result (LabError with its last line when it fails and check). The command runs in a
    session of its own: a Ctrl-C at the terminal reaches hmb alone, which decides what to stop
    (a second one killed the `ip netns del` of the cleanup the first had started)."""
    # ip, unshare and umount start with SIGINT, SIGTERM and SIGHUP blocked: a signal sent to hmb's
    # process group (a terminal's second Ctrl-C) in the moment between fork and the child's new
    # session was kept pending through exec and killed the cleanup's `ip netns del` (status -2).
    shield = os.path.basename(cmd[0]) in ("ip", "unshare", "umount")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS) if shield else None
        try:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, start_new_session=True, **kw)
        except BaseException:
            if mask is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            raise
        try:
            if mask is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)     # a pending signal is acted on here
            rc = proc.wait()
        except BaseException:
            # An interrupt lets the command finish: `ip netns add` killed half-way (inside its
            # unshare) made its namespace file after the cleanup had removed it, and left it.
            while proc.poll() is None:
                try:
                    proc.wait()
                except BaseException:
                    continue
            raise
        out.seek(0)
        err.seek(0)
        p = subprocess.CompletedProcess(cmd, rc, out.read().decode(errors="replace"),
                                        err.read().decode(errors="replace"))
    if check and p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip() or f"exit {p.returncode}").splitlines()[-1]
        raise LabError(f"{' '.join(cmd[:6])}: {msg}")
    return p


def can_make_labs() -> str | None:
    """Why this machine cannot lay out a lab (None: it can): not root, no `ip`, `nsenter`,
    `unshare` or `taskset`, or network namespaces refused."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs and a bridge)"
    for tool in ("ip", "nsenter", "unshare", "taskset"):
        if shutil.which(tool) is None:
            return f"needs `{tool}` on PATH (packages iproute2, util-linux)"
    probe = f"hmbprobe{os.getpid() % 100000}"
    try:
        p = run(["ip", "netns", "add", probe], check=False)
        if p.returncode != 0:
            return f"`ip netns add` fails here: {(p.stderr.strip() or 'exit ' + str(p.returncode)).splitlines()[-1]}"
    finally:
        with _signals(raising=False):
            if os.path.exists(f"/run/netns/{probe}"):
                run(["ip", "netns", "del", probe], check=False)
    return None


def load(name: str = DEFAULT_NAME) -> Lab:
    """The lab that is up under this name (LabError if none)."""
    check_name(name)
    path = base_dir() / name / "lab.json"
    try:
        if path.exists() and not path.is_file():
            raise ValueError("not a regular file")
        data = json.loads(path.read_text())
        if (path.parent / DOWN_MARK).exists():
            raise LabError(f"lab {name} is being taken down, or a `down` of it was stopped "
                           f"(hmb lab down --name {name} clears it)")
        lab = Lab(data["name"], data["subnet"], data["head_addr"], [Node(**n) for n in data["nodes"]])
        _check_state(lab, name)
    except FileNotFoundError:
        raise LabError(f"no lab {name!r} is up (hmb lab up{'' if name == DEFAULT_NAME else ' --name ' + name})") from None
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as e:
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e)[:200]
        raise LabError(f"lab {name}: unreadable state {path}: {why} (hmb lab down --name {name} clears it)") from None
    return lab


def _check_state(lab: Lab, name: str) -> None:
    """lab.json holds what `up` wrote: its names go to mpiexec -hosts, the agent and /etc/hosts,
    so a hand-edited one (a node '-oProxyCommand=..', an address 'x;y') is refused (ValueError)."""
    if lab.name != name or not isinstance(lab.nodes, list) or not 1 <= len(lab.nodes) <= MAX_NODES:
        raise ValueError(f"not lab {name}'s state (name {lab.name!r}, {type(lab.nodes).__name__} of nodes)")
    ipaddress.ip_network(lab.subnet)
    ipaddress.ip_address(lab.head_addr)
    for i, n in enumerate(lab.nodes, 1):
        if n.name != f"{name}-n{i}":
            raise ValueError(f"node {i} is named {str(n.name)[:40]!r}, not {name}-n{i}")
        ipaddress.ip_address(n.addr)
        if not isinstance(n.uts, str) or not isinstance(n.cpus, list) or \
                not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c < 1 << 16 for c in n.cpus):
            raise ValueError(f"node {n.name}: a uts path and a list of CPU numbers expected")


def layout(name: str, nodes: int, subnet: str | None = None, cpus: list | None = None) -> Lab:
    """The lab's plan (nothing is created): addresses .1..N for the nodes, .254 for the bridge;
    the machine's CPUs dealt out in equal consecutive shares (every node gets all of them when
    there are fewer CPUs than nodes: then the nodes share cores, said by `status`)."""
    check_name(name)
    if not 2 <= nodes <= MAX_NODES:
        raise LabError(f"--nodes {nodes}: a lab has 2 to {MAX_NODES} nodes")
    if subnet is not None and not subnet.strip():
        raise LabError("--subnet: empty (leave it out for one chosen from the name)")
    try:
        net = ipaddress.ip_network(subnet or default_subnet(name))
    except ValueError as e:
        raise LabError(f"--subnet: {e}") from None
    if net.version != 4 or net.prefixlen > 24:
        raise LabError(f"--subnet {net}: expected a private IPv4 network of at least /24 (e.g. 10.77.5.0/24)")
    check_subnet(net)
    # Addresses by arithmetic: listing a /8's hosts took 47 s and 1.4 GB. At least /24: .1..N
    # for the nodes, .254 for the bridge.
    base = net.network_address
    cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    share = len(cpus) // nodes
    out = []
    for i in range(1, nodes + 1):
        mine = cpus[(i - 1) * share:i * share] if share else cpus
        out.append(Node(f"{name}-n{i}", str(base + i), str(base_dir() / name / f"uts-n{i}"), mine))
    return Lab(name, str(net), str(base + 254), out)


PRIVATE = [ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]
# Ranges that are no use for nodes, named (Python's is_private counts loopback and link-local as
# private: a lab on 127.0.0.0/24 came up, and no TCP connected between its nodes).
UNUSABLE = [(ipaddress.ip_network(n), what) for n, what in (
    ("127.0.0.0/8", "loopback: every node would take its peers' addresses for its own"),
    ("224.0.0.0/4", "multicast: no host may hold such an address"),
    ("169.254.0.0/16", "link-local: not routed through the bridge"),
    ("0.0.0.0/8", "'this network': not an address a node may hold"),
    ("240.0.0.0/4", "reserved (and broadcast)"),
    ("100.64.0.0/10", "carrier-grade NAT's shared space"),
)]


def check_subnet(net) -> None:
    """A lab's subnet lies inside one RFC 1918 private block; a range that cannot work (loopback,
    multicast, link-local, ...) is named."""
    for bad, what in UNUSABLE:
        if net.subnet_of(bad):
            raise LabError(f"--subnet {net}: {bad} is {what}; expected a private network inside "
                           f"10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16")
    if not any(net.subnet_of(b) for b in PRIVATE):
        raise LabError(f"--subnet {net}: expected a private IPv4 network of at least /24 inside 10.0.0.0/8, "
                       f"172.16.0.0/12 or 192.168.0.0/16 (e.g. 10.77.5.0/24)")


def _taken(lab: Lab) -> str | None:
    """What on this machine already uses an address of lab's subnet (None: nothing): another
    lab's subnet (from its state, up or half up), or any route or address of the machine's (a
    connected route is how an interface's addresses show; routes through this lab's own bridge,
    remnants `down` clears, are not counted)."""
    net = ipaddress.ip_network(lab.subnet)
    base = base_dir()
    for state in sorted(base.glob("*/lab.json")) if base.is_dir() else []:
        if state.parent.name == lab.name:
            continue
        try:
            other = ipaddress.ip_network(json.loads(state.read_text())["subnet"])
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            continue
        if net.overlaps(other):
            return f"lab {state.parent.name} has {other}"
    routes = run(["ip", "-4", "-o", "route", "show", "table", "all"], check=False).stdout
    for ln in routes.splitlines():
        words = ln.split()
        if not words:
            continue
        dest = words[1] if words[0] in ("local", "broadcast", "unicast", "anycast", "multicast", "blackhole",
                                         "unreachable", "prohibit", "throw", "nat") and len(words) > 1 else words[0]
        if dest == "default" or f" dev {lab.bridge} " in f" {ln} ":
            continue
        try:
            if net.overlaps(ipaddress.ip_network(dest, strict=False)):
                return f"routed here ({' '.join(words[:5])})"
        except ValueError:
            continue
    return None


def _agent_text(lab: Lab) -> str:
    """The launcher agent: rsh-style `exec [-opts] HOST COMMAND...`; COMMAND's words are joined
    and run by /bin/sh inside the node (as ssh does), confined to the node's CPUs. With --argv
    first, COMMAND is run as given (no shell).

    Inside a node: its network and UTS namespaces, and a mount namespace of its own whose /sys is
    a sysfs of the node's network namespace (as `ip netns exec` mounts it: libraries that list
    interfaces in /sys/class/net, UCX among them, see the node's own), with the machine's cgroup
    hierarchies bound back under /sys/fs/cgroup (slurmd will not start without them)."""
    cases = []
    for n in lab.nodes:
        cpus = ",".join(map(str, n.cpus))
        cases.append(f"  {n.name}|{n.addr}) ns={n.name}; uts={shlex.quote(n.uts)}; cpus={cpus} ;;")
    keep = shlex.quote(str(lab.dir / "cgroup-mnt"))
    return "\n".join([
        "#!/bin/sh",
        f"# hmb lab {lab.name}: run a command inside a node, rsh-style: exec [-x ...] HOST COMMAND...",
        "# (MPICH hydra: -launcher ssh -launcher-exec THIS; Open MPI: --prtemca plm_ssh_agent THIS)",
        "# exec --argv HOST PROGRAM ARGS...: run PROGRAM with ARGS as given, no shell.",
        "argv=0; stage=0",
        "while [ $# -gt 0 ]; do case \"$1\" in --argv) argv=1; shift ;; --in-node) stage=1; shift ;; -*) shift ;; "
        "*) break ;; esac; done",
        "host=$1",
        "[ $# -gt 0 ] && shift",
        "case \"$host\" in",
        *cases,
        f"  *) echo \"hmb lab {lab.name}: no node '$host' (nodes: {' '.join(lab.hostnames)})\" >&2; exit 255 ;;",
        "esac",
        "[ $# -gt 0 ] || { echo \"hmb lab: no command for $host\" >&2; exit 255; }",
        "if [ $stage = 0 ]; then",
        "  exec nsenter --uts=\"$uts\" --net=\"/run/netns/$ns\" -- unshare --mount --propagation private -- \"$0\" "
        "--in-node $([ $argv = 1 ] && echo --argv) \"$host\" \"$@\"",
        "fi",
        "# --in-node (the agent's own second stage): only inside the node's network and UTS namespaces,",
        "# in a mount namespace that is not the caller's, is /sys replaced (nothing the caller sets decides).",
        "[ \"$(readlink /proc/self/ns/net)\" = \"net:[$(stat -L -c %i \"/run/netns/$ns\" 2>/dev/null)]\" ] &&",
        "  [ \"$(readlink /proc/self/ns/uts)\" = \"uts:[$(stat -L -c %i \"$uts\" 2>/dev/null)]\" ] &&",
        "  [ \"$(readlink /proc/$$/ns/mnt)\" != \"$(readlink /proc/$PPID/ns/mnt 2>/dev/null)\" ] ||",
        "  { echo \"hmb lab: not inside node $ns's namespaces: --in-node is the agent's own\" >&2; exit 255; }",
        f"keep={keep}",
        "if mountpoint -q /sys/fs/cgroup; then mount --rbind /sys/fs/cgroup \"$keep\" || exit 255; fi",
        "umount -l /sys && mount -t sysfs \"$ns\" /sys || { echo \"hmb lab: cannot mount the node's /sys\" >&2; exit 255; }",
        "if mountpoint -q \"$keep\"; then mount --move \"$keep\" /sys/fs/cgroup || exit 255; fi",
        "if [ $argv = 1 ]; then exec taskset -c \"$cpus\" \"$@\"; fi",
        "exec taskset -c \"$cpus\" /bin/sh -c \"$*\"",
        "",
    ])


def _hosts_block(lab: Lab) -> list[str]:
    return ([f"# hmb lab {lab.name} begin"] + [f"{n.addr} {n.name}" for n in lab.nodes]
            + [f"{lab.head_addr} {lab.name}-head", f"# hmb lab {lab.name} end"])


def _set_hosts(name: str, block: list[str]) -> None:
    """Replace this lab's block in the hosts file (written in place: it may be a bind mount)."""
    try:
        lines = HOSTS_FILE.read_text().splitlines()
    except FileNotFoundError:
        lines = []
    out, inside = [], False
    for ln in lines:
        if ln.strip() == f"# hmb lab {name} begin":
            inside = True
        elif inside and ln.strip() == f"# hmb lab {name} end":
            inside = False
        elif not inside:
            out.append(ln)
    if out == lines and not block:
        return
    with open(HOSTS_FILE, "w") as f:
        f.write("\n".join(out + block) + "\n")


_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


@contextlib.contextmanager
def _signals(raising: bool):
    """While making or removing a lab: SIGINT, SIGTERM and SIGHUP either raise KeyboardInterrupt
    (the first one only: a second signal must not cut short the cleanup the first started) or
    are only noted (cleanup). Yields the list of signals received. Outside the main thread
    (handlers cannot be set) nothing changes."""
    got: list = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return

    def handler(signum, frame):
        got.append(signum)
        if raising and len(got) == 1:
            raise KeyboardInterrupt
    old = {sig: signal.signal(sig, handler) for sig in _SIGNALS}
    try:
        yield got
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def held_signals():
    """A context in which SIGINT, SIGTERM and SIGHUP are noted, not acted on (`hmb lab down`
    finishes first); yields the list of those received."""
    return _signals(raising=False)


class _Guard:
    started = False         # set once something of the lab may have been made


_guards: list = []


@contextlib.contextmanager
def taken_down_on_interrupt(name: str):
    """Around `hmb lab up [--slurm]`: the first SIGINT, SIGTERM or SIGHUP stops it, and once
    anything may have been made (guard.started) `down` removes it with further signals held off
    (a second Ctrl-C or a SIGTERM during the cleanup left namespaces, links, UTS mounts and the
    state in 4 of 6 runs, and said nothing); LabInterrupted then says what is left, if anything.
    Any other failure after the start takes the lab down too and is raised as it was. Nested
    uses (cli around up()) share the outer guard."""
    if _guards:
        yield _guards[-1]
        return
    guard = _Guard()
    _guards.append(guard)
    try:
        with _signals(raising=True):
            try:
                yield guard
            except LabInterrupted:
                raise
            except BaseException as e:
                if not guard.started:
                    if isinstance(e, KeyboardInterrupt):
                        raise LabInterrupted(f"hmb lab: interrupted before lab {name} was made; nothing is left") \
                            from None
                    raise
                with _signals(raising=False) as more:
                    try:
                        down(name, quiet=True)
                    except LabError:
                        pass
                    left = leftovers(name)
                if not isinstance(e, KeyboardInterrupt):
                    raise
                again = f" (interrupted {1 + len(more)} times: the cleanup finished first)" if more else ""
                if left:
                    raise LabInterrupted(f"hmb lab: interrupted; lab {name} is partly down{again}: left "
                                         f"{', '.join(left)} (hmb lab down --name {name} clears it)") from None
                raise LabInterrupted(f"hmb lab: interrupted; lab {name} was taken down again, nothing is "
                                     f"left{again}") from None
    finally:
        _guards.pop()


def up(name: str = DEFAULT_NAME, nodes: int = 2, subnet: str | None = None, out=print) -> Lab:
    """Lay the lab out; on any failure or interrupt take down what was made and raise LabError
    (LabInterrupted on SIGINT, SIGTERM, SIGHUP: taken_down_on_interrupt)."""
    with taken_down_on_interrupt(name) as guard:
        lab = layout(name, nodes, subnet)
        why = can_make_labs()
        if why:
            raise LabError(f"hmb lab: {why}")
        if (lab.dir / "lab.json").exists():
            old = load(name)
            if _complete(old):
                raise LabError(f"lab {name} is already up ({', '.join(old.hostnames)}): hmb lab down first")
        taken = _taken(lab)
        if taken:
            raise LabError(f"--subnet {lab.subnet}: overlaps what this machine already uses: {taken}; "
                           f"choose another")
        guard.started = True
        down(name, quiet=True)      # remnants of an earlier lab of this name
        lab.dir.mkdir(parents=True, exist_ok=True)
        run(["ip", "link", "add", lab.bridge, "type", "bridge"])
        run(["ip", "addr", "add", f"{lab.head_addr}/{ipaddress.ip_network(lab.subnet).prefixlen}", "dev", lab.bridge])
        run(["ip", "link", "set", lab.bridge, "up"])
        prefix = ipaddress.ip_network(lab.subnet).prefixlen
        for i, n in enumerate(lab.nodes, 1):
            veth = f"{name}v{i}"
            run(["ip", "netns", "add", n.name])
            run(["ip", "link", "add", veth, "type", "veth", "peer", "name", NODE_IFACE, "netns", n.name])
            run(["ip", "link", "set", veth, "master", lab.bridge])
            run(["ip", "link", "set", veth, "up"])
            run(["ip", "-n", n.name, "addr", "add", f"{n.addr}/{prefix}", "dev", NODE_IFACE])
            run(["ip", "-n", n.name, "link", "set", NODE_IFACE, "up"])
            run(["ip", "-n", n.name, "link", "set", "lo", "up"])
            run(["ip", "-n", n.name, "route", "add", "default", "via", lab.head_addr])
            Path(n.uts).touch()
            run(["unshare", f"--uts={n.uts}", "hostname", n.name])
        (lab.dir / "cgroup-mnt").mkdir(exist_ok=True)
        lab.agent.write_text(_agent_text(lab))
        lab.agent.chmod(0o755)
        _set_hosts(name, _hosts_block(lab))
        (lab.dir / "lab.json").write_text(json.dumps(lab.to_json(), indent=1) + "\n")
    return lab


def _complete(lab: Lab) -> bool:
    have = set(run(["ip", "netns", "list"], check=False).stdout.split())
    return all(n.name in have and os.path.exists(n.uts) for n in lab.nodes)


def _netns_names(name: str) -> list[str]:
    """The lab's network namespaces that exist now (also those a lost lab.json no longer lists)."""
    out = run(["ip", "netns", "list"], check=False).stdout.split()
    return sorted({w for w in out if re.fullmatch(rf"{re.escape(name)}-n\d+", w)})


def _links(name: str) -> list[str]:
    out = run(["ip", "-o", "link", "show"], check=False).stdout
    names = [ln.split(":")[1].strip().split("@")[0] for ln in out.splitlines() if ln.count(":") >= 2]
    return sorted(n for n in names if n == f"{name}br" or re.fullmatch(rf"{re.escape(name)}v\d+", n))


def _ns_id(path: str) -> tuple | None:
    """(device, inode) of a namespace file (a /proc/PID/ns entry or a bind mount of one)."""
    try:
        st = os.stat(path)
        return st.st_dev, st.st_ino
    except OSError:
        return None


def _ns_ids(name: str) -> dict:
    """The lab's namespaces as (device, inode) -> node name: each node's network namespace, and
    its UTS namespace (a process in a node whose network namespace was deleted, or never made,
    is still found by its hostname's namespace)."""
    wanted = {}
    for ns in _netns_names(name):
        ident = _ns_id(f"/run/netns/{ns}")
        if ident is not None:
            wanted[ident] = ns
    d = base_dir() / name
    proc_dev = (_ns_id("/proc/self/ns/uts") or (None,))[0]
    for uts in sorted(d.glob("uts-n*")) if d.is_dir() else []:
        ident = _ns_id(str(uts))
        if ident is not None and ident[0] == proc_dev:       # mounted: an nsfs file, not the plain one
            wanted.setdefault(ident, f"{name}-n{uts.name[len('uts-n'):]}")
    return wanted


def processes(name: str) -> dict[str, list[int]]:
    """node -> pids of the processes living in its network or UTS namespace (slurmd, proxies,
    ranks...)."""
    wanted = _ns_ids(name)
    found: dict[str, list[int]] = {ns: [] for ns in sorted(set(wanted.values()))}
    if not wanted:
        return found
    me = os.getpid()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        for kind in ("net", "uts"):
            node = wanted.get(_ns_id(f"/proc/{d}/ns/{kind}"))
            if node is not None:
                found[node].append(int(d))
                break
    return found


def _stop(pids: list[int], grace: float = 5.0) -> list[int]:
    """SIGTERM, then SIGKILL what is left after grace; returns the pids still alive."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + wait
        while pids and time.monotonic() < end:
            pids = [p for p in pids if _alive(p)]
            if pids:
                time.sleep(0.1)
        if not pids:
            return []
    return pids


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


DOWN_MARK = "taking-down"       # in the lab's directory while `down` runs (or after one was killed)


def _stop_all(name: str, limit: float = 30.0) -> tuple[int, list[int]]:
    """Stop every process living in the lab's namespaces, again and again until none is left (a
    process that respawns, or a shell loop starting children, left an orphan in a namespace
    that no longer had a name when the list was taken once); the first round gives SIGTERM its
    grace, later ones are quick. (processes stopped, pids still alive after `limit` seconds)."""
    end = time.monotonic() + limit
    stopped, rounds = 0, 0
    while True:
        pids = [p for ps in processes(name).values() for p in ps if _alive(p)]
        if not pids:
            return stopped, []
        if time.monotonic() > end:
            return stopped, pids
        still = _stop(pids, grace=5.0 if rounds == 0 else 0.2)
        stopped += len(pids) - len(still)
        rounds += 1


def down(name: str = DEFAULT_NAME, quiet: bool = False, out=print) -> list[str]:
    """Take the lab down completely; returns what was removed (one phrase each). Raises
    LabError naming what could not be removed."""
    check_name(name)
    removed, left = [], []
    d = base_dir() / name
    if (d / "lab.json").exists():
        try:        # launches watching the lab (launch.run_streaming) name the cause by it
            (d / DOWN_MARK).write_text(f"pid {os.getpid()}\n")
        except OSError:
            pass
    stopped, still = _stop_all(name)
    if stopped:
        removed.append(f"{stopped} process{'es' if stopped != 1 else ''}")
    left += [f"process {p}" for p in still]
    for ns in _netns_names(name):
        r = run(["ip", "netns", "del", ns], check=False)
        (removed if r.returncode == 0 else left).append(f"namespace {ns}")
    for link in _links(name):
        r = run(["ip", "link", "del", link], check=False)
        if r.returncode == 0 or link not in _links(name):   # a veth goes with its peer's namespace
            removed.append(f"link {link}")
        else:
            left.append(f"link {link}")
    for uts in sorted(d.glob("uts-n*")) if d.is_dir() else []:
        run(["umount", str(uts)], check=False)
    try:
        _set_hosts(name, [])
    except OSError as e:
        left.append(f"the {HOSTS_FILE} block ({e.strerror})")
    if d.is_dir():
        shutil.rmtree(d, ignore_errors=True)
        (left if d.exists() else removed).append(f"state {d}")
    try:
        base_dir().rmdir()      # the last lab's
    except OSError:
        pass
    if left:
        raise LabError(f"lab {name}: could not remove {', '.join(left)}")
    if not quiet:
        out(f"hmb lab: {name} is down" + (f" (removed {', '.join(removed)})" if removed else " (nothing was up)"))
    return removed


def leftovers(name: str) -> list[str]:
    """What of the lab still exists (empty after a complete `down`): for the tests and `status`."""
    out = [f"namespace {n}" for n in _netns_names(name)] + [f"link {link}" for link in _links(name)]
    out += [f"process {p} in {ns}" for ns, ps in processes(name).items() for p in ps]
    if (base_dir() / name).exists():
        out.append(f"state {base_dir() / name}")
    try:
        if f"# hmb lab {name} begin" in HOSTS_FILE.read_text():
            out.append(f"{HOSTS_FILE} block")
    except OSError:
        pass
    mounts = Path("/proc/self/mountinfo").read_text() if Path("/proc/self/mountinfo").exists() else ""
    out += [f"mount {m}" for m in re.findall(rf"\S*{re.escape(str(base_dir() / name))}/uts-n\d+", mounts)]
    return out


def _iface_state(path: str) -> str | None:
    """'up', 'down' (administratively) or None (gone) for an interface of this machine's, read
    from its sysfs flags (no process started: a launch's watch reads this every second)."""
    try:
        flags = int(Path(path, "flags").read_text(), 16)
    except (OSError, ValueError):
        return None
    return "up" if flags & 0x1 else "down"


def failure_cause(lab: Lab, during: bool = True) -> str | None:
    """Why launches across the lab's nodes cannot work now, by its cause (None: every node is
    sound): the lab taken down, a node's namespace gone, the bridge or a node's link down or
    gone, `lab0` down or without its address in a node. A launch that failed, or hung, for
    one of these said only its launcher's banner ("process manager error waiting for
    completion", a row of dashes). during: the launch was under way (else it is about to
    start)."""
    state = lab.dir / "lab.json"
    if not state.is_file() or (lab.dir / DOWN_MARK).exists():
        return "the lab was taken down during the launch" if during else f"lab {lab.name} was taken down"
    have = set(run(["ip", "netns", "list"], check=False).stdout.split())
    for n in lab.nodes:
        if n.name not in have:
            return f"node {n.name}'s namespace is gone"
    if _in_machine_netns():    # (hmb in a node, under the lab's Slurm, sees the node's /sys)
        bridge = _iface_state(f"/sys/class/net/{lab.bridge}")
        if bridge != "up":
            return f"the lab's bridge {lab.bridge} is {'gone' if bridge is None else 'down'}"
        for i, n in enumerate(lab.nodes, 1):
            veth = _iface_state(f"/sys/class/net/{lab.name}v{i}")
            if veth != "up":
                return f"{n.name}'s link on this machine ({lab.name}v{i}) is {'gone' if veth is None else 'down'}"
    for i, n in enumerate(lab.nodes, 1):
        r = run(["ip", "-j", "-n", n.name, "addr", "show", "dev", NODE_IFACE], check=False)
        try:
            info = json.loads(r.stdout)[0] if r.returncode == 0 else None
        except (ValueError, IndexError, TypeError):
            info = None
        if not isinstance(info, dict):
            return f"{NODE_IFACE} is gone in {n.name}"
        flags = info.get("flags", [])
        if "UP" not in flags:
            return f"{NODE_IFACE} is down in {n.name}"
        if "LOWER_UP" not in flags and "NO-CARRIER" in flags:      # its peer on the machine is down
            return f"{n.name}'s link on this machine ({lab.name}v{i}) is down"
        if n.addr not in [a.get("local") for a in info.get("addr_info", []) if isinstance(a, dict)]:
            return f"{n.name} lost its address {n.addr} on {NODE_IFACE}"
    return None


def _in_machine_netns() -> bool:
    """Whether this process is in the machine's network namespace, not in a node's (PID 1's
    namespace may not be readable: a node's is known by its name in /run/netns)."""
    mine = _ns_id("/proc/self/ns/net")
    try:
        names = os.listdir("/run/netns")
    except OSError:
        return True
    return mine is None or all(_ns_id(f"/run/netns/{n}") != mine for n in names)


# A launch across the lab carries this variable (a value of its own) into every process it starts
# in the nodes (the agent keeps the environment): what one launch left there (hydra_pmi_proxy after
# a failed MPICH launch, prted and ranks after a timeout) is found by it and ended.
LAUNCH_VAR = "HMB_LAB_LAUNCH"


def launch_mark() -> str:
    return f"{os.getpid()}.{time.time_ns()}"


def launch_processes(name: str, mark: str) -> list[int]:
    """The live processes in the lab's nodes that carry LAUNCH_VAR=mark."""
    want = f"{LAUNCH_VAR}={mark}".encode()
    out = []
    for pids in processes(name).values():
        for pid in pids:
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if want in f.read().split(b"\0") and _alive(pid):
                        out.append(pid)
            except OSError:
                continue
    return out


def end_launch(name: str, mark: str) -> list[str]:
    """Stop what the launch marked `mark` left in the lab's nodes (SIGTERM, then SIGKILL after a
    second); returns their names ('hydra_pmi_proxy in hmblab-n1'), those that would not end
    with ' (still running)'."""
    pids = launch_processes(name, mark)
    if not pids:
        return []
    where = {p: node for node, ps in processes(name).items() for p in ps}
    names = {}
    for p in pids:
        try:
            names[p] = f"{Path(f'/proc/{p}/comm').read_text().strip()} in {where.get(p, name)}"
        except OSError:
            names[p] = f"process {p} in {where.get(p, name)}"
    still = set(_stop(pids, grace=1.0))
    return [names[p] + (" (still running)" if p in still else "") for p in pids]


def status(name: str = DEFAULT_NAME, out=print) -> int:
    """Print the lab's nodes (hostname, address, CPUs, processes); 0 if up, 1 if not (a bad
    name is a LabError: exit 2)."""
    check_name(name)
    try:
        lab = load(name)
    except LabError as e:
        rest = leftovers(name)
        out(f"hmb lab: {e}" + (f"; remnants: {', '.join(rest)} (hmb lab down clears them)" if rest else ""))
        return 1
    procs = processes(name)
    shared = len({tuple(n.cpus) for n in lab.nodes}) < len(lab.nodes)
    out(f"lab {lab.name}: {len(lab.nodes)} nodes on bridge {lab.bridge} ({lab.subnet}, this machine "
        f"{lab.head_addr}); launcher agent {lab.agent}")
    for n in lab.nodes:
        names = []
        for p in procs.get(n.name, []):
            try:
                names.append(Path(f"/proc/{p}/comm").read_text().strip())
            except OSError:
                continue
        out(f"  {n.name:<14} {n.addr:<15} cpus {','.join(map(str, n.cpus)):<8} "
            f"{len(names)} process{'es' if len(names) != 1 else ''}{': ' + ', '.join(sorted(set(names))) if names else ''}")
    if shared:
        out("  (fewer CPUs than nodes: the nodes share cores, every timing is oversubscribed)")
    if not _complete(lab):
        out("  incomplete: a namespace is missing (hmb lab down, then up)")
        return 1
    return 0


def is_up(name: str) -> bool:
    try:
        return _complete(load(name))
    except LabError:
        return False


def exec_argv(lab: Lab, host: str, argv: list[str]) -> list[str]:
    """argv run inside node `host` (its namespaces and CPUs), without a shell in between."""
    return [str(lab.agent), "--argv", lab.node(host).name, *argv]


def main_exec(name: str, host: str, argv: list[str]) -> int:
    if not argv:
        raise LabError("hmb lab exec NODE -- COMMAND: no command")
    lab = load(name)
    try:
        return subprocess.call(exec_argv(lab, host, argv))
    except OSError as e:
        raise LabError(f"cannot run {argv[0]} in {host}: {e.strerror}") from None


def hosts_file_text(lab: Lab) -> str:
    """One host per line (for tools that take a hostfile)."""
    return "".join(f"{h}\n" for h in lab.hostnames)


if __name__ == "__main__":   # the agent's equivalent in Python, for debugging: python -m hmb.lab.nodes NAME HOST CMD
    sys.exit(main_exec(sys.argv[1], sys.argv[2], sys.argv[3:]))
