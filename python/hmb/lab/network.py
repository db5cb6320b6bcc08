"""MPI on the lab's network: the library settings that put traffic between lab nodes on TCP over
the nodes' veths (network_env), the settings that make a library say which transport each peer
got (verbose_env) and the reading of that output (path_of). hmb.run.launch asks for them when a
launch goes --hosts lab (docs/lab.md)."""
from __future__ import annotations

import os
import re
from pathlib import Path

from .nodes import NODE_IFACE, LabError

# What a run header's env says of a launch across lab nodes (tidy's `network` column; the
# study claims label their readings with it).
NETWORK_LABEL = "TCP between namespaces on one machine"


def network_env(flavor: str) -> dict:
    """The library settings that put traffic between lab nodes on TCP over the nodes' veths.

    MPICH (ch4:ucx): UCX takes the peers for one machine (it compares boot ids, not hostnames)
    and would move their messages through shared memory (sysv, cma) between the namespaces
    (measured: `inter-node` never appears, `intra-node cfg tag(sysv/memory cma/memory)`), so
    its transports are self and tcp on the node's interface; ranks on one node still talk
    through MPICH's own shared memory. Open MPI (ob1): btl tcp on the node's interface beside
    sm and self (no uct, no ofi). FI_TCP_IFACE is for MPICH's ofi netmod when a user picks it."""
    if flavor == "openmpi":
        return {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,sm,tcp", "OMPI_MCA_btl_tcp_if_include": NODE_IFACE}
    if flavor == "mpich":
        return {"UCX_TLS": "self,tcp", "UCX_NET_DEVICES": NODE_IFACE, "FI_TCP_IFACE": NODE_IFACE}
    raise LabError(f"--hosts lab: the {flavor} launcher is not set up for the lab (MPICH and Open MPI are)")


UCX_LOG = "ucx.%h.%p.log"     # a rank's UCX log in the probe's directory (%h host, %p pid)


def verbose_env(flavor: str, logdir: str | os.PathLike) -> dict:
    """Settings that make the library say which transport each peer got (path_of reads it): Open
    MPI's btl verbosity on the launch's output, UCX's info log into files in logdir (verbose_log).
    UCX's log on the ranks' stdout broke MPICH's start-up under srun's PMI-2 beside --json
    (slurmstepd: "value not properly terminated in client request"; docs/findings.md)."""
    if flavor == "openmpi":
        return {"OMPI_MCA_btl_base_verbose": "30"}
    return {"UCX_LOG_LEVEL": "info", "UCX_LOG_FILE": os.path.join(os.fspath(logdir), UCX_LOG)}


def verbose_log(logdir: str | os.PathLike) -> str:
    """The UCX log files verbose_env asked for in logdir, one after the other ("" when none)."""
    return "".join(f.read_text(errors="replace") for f in sorted(Path(logdir).glob(UCX_LOG.replace("%h.%p", "*"))))


_UCX_CFG = re.compile(r"\[([^:\]]+):\s*\d+\s*:\d+\].*?ucp_context_\d+ (inter-node|intra-node) cfg#\d+ tag\(([^)]*)\)")
_OMPI_TCP = re.compile(r"\[([^:\]]+):\s*\d+\] btl: ?tcp: (?:attempting to connect\(\) to \S+ address (\S+)|"
                       r"now connected to (\S+))")


def path_of(flavor: str, text: str) -> tuple[str | None, str]:
    """(transport between nodes or None, the evidence) from a launch's verbose output
    (verbose_env). None when the output shows shared memory between nodes or nothing at all."""
    if flavor == "openmpi":
        hits = _OMPI_TCP.findall(text)
        if hits:
            host, a, b = hits[0]
            return "tcp", f"Open MPI btl tcp: {host} connect() to {(a or b).rstrip(',.')}"
        return None, "Open MPI printed no btl tcp connection between the nodes (btl_base_verbose 30)"
    cfgs = _UCX_CFG.findall(text)
    if not cfgs:
        return None, "UCX printed no endpoint configuration (UCX_LOG_LEVEL=info): not the ucx netmod?"
    intra = [c for c in cfgs if c[1] == "intra-node"]
    if intra:
        return None, f"UCX took the other node for its own: {intra[0][0]} intra-node tag({intra[0][2]})"
    tls = sorted({t.strip() for c in cfgs for t in c[2].split()})
    if all(t.startswith("tcp/") for t in tls):
        return "tcp", f"UCX inter-node tag({' '.join(tls)})"
    return None, f"UCX inter-node tag({' '.join(tls)}): not TCP"
