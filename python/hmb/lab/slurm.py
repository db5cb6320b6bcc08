"""Slurm on the lab: munged, slurmctld on the first node and a slurmd per node, each inside its
node's namespaces (`hmb lab up --slurm`, scripts/slurm-lab.sh; docs/lab.md). Debian's Slurm."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from . import nodes
from .nodes import Lab, LabError

SLURM_TOOLS = ("slurmctld", "slurmd", "munged", "sbatch", "srun", "sinfo", "scontrol")
SLURM_PACKAGES = "slurmctld slurmd slurm-client munge"   # Debian's (22.05 in bookworm)


def conf(lab: Lab) -> Path:
    return lab.dir / "slurm" / "slurm.conf"


def conf_text(lab: Lab) -> str:
    d = lab.dir / "slurm"
    head = lab.nodes[0]
    nodes = [f"NodeName={n.name} NodeAddr={n.addr} CPUs={len(n.cpus)} State=UNKNOWN" for n in lab.nodes]
    return "\n".join([
        f"# hmb lab {lab.name}: Slurm on the lab's nodes (written by hmb lab up --slurm; docs/lab.md)",
        f"ClusterName={lab.name}",
        f"SlurmctldHost={head.name}({head.addr})",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={d / 'munge.sock'}",
        f"StateSaveLocation={d / 'state'}",
        f"SlurmdSpoolDir={d / 'spool-%n'}",
        # Node-local temporary files (Slurm's PMIx server makes spmix_appdir_* there: one /tmp
        # shared by the nodes makes the second node's step fail with "File exists").
        f"TmpFS={d / 'tmp-%n'}",
        f"SlurmctldPidFile={d / 'slurmctld.pid'}",
        f"SlurmdPidFile={d / 'slurmd-%n.pid'}",
        f"SlurmctldLogFile={d / 'slurmctld.log'}",
        f"SlurmdLogFile={d / 'slurmd-%n.log'}",
        "SlurmctldPort=6817",
        "SlurmdPort=6818",
        # No cgroup here: processes are tracked by parentage, and tasks are not re-bound by
        # Slurm (its view of the CPUs is the whole machine's, so task/affinity would put every
        # node's first task on CPU 0); a task keeps its node's share of the CPUs.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill",
        "MpiDefault=none",
        "ReturnToService=2",
        "JobCompType=jobcomp/none",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SlurmdTimeout=60",
        "InactiveLimit=0",
        "KillWait=5",
        *nodes,
        f"PartitionName=lab Nodes={','.join(lab.hostnames)} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def running(lab: Lab) -> bool:
    """Is this lab's slurmctld alive (its pid file names a live process in the first node)?"""
    try:
        pid = int((lab.dir / "slurm" / "slurmctld.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    return pid in nodes.processes(lab.name).get(lab.nodes[0].name, [])


def missing() -> list[str]:
    return [t for t in SLURM_TOOLS if shutil.which(t) is None and not Path("/usr/sbin", t).exists()]


def up(lab: Lab, timeout: float = 60.0, out=print) -> Path:
    """munged, slurmctld (on the first node) and one slurmd per node, each inside its node's
    namespaces; returns slurm.conf (clients need SLURM_CONF=it). Waits until every node is idle."""
    lacking = missing()
    if lacking:
        raise LabError(f"Slurm is not installed ({', '.join(lacking)} missing): scripts/slurm-lab.sh up installs "
                       f"Debian's {SLURM_PACKAGES}")
    d = lab.dir / "slurm"
    (d / "state").mkdir(parents=True, exist_ok=True)
    for n in lab.nodes:
        (d / f"spool-{n.name}").mkdir(exist_ok=True)
        (d / f"tmp-{n.name}").mkdir(exist_ok=True)
        os.chmod(d / f"tmp-{n.name}", 0o1777)
    os.chmod(d, 0o755)
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    path = conf(lab)
    path.write_text(conf_text(lab))
    head = lab.nodes[0]
    nodes.run(nodes.exec_argv(lab, head.name, ["/usr/sbin/munged", "--force", f"--key-file={key}", f"--socket={d / 'munge.sock'}",
                                    f"--pid-file={d / 'munged.pid'}", f"--log-file={d / 'munged.log'}",
                                    f"--seed-file={d / 'munged.seed'}"]))
    env = dict(os.environ, SLURM_CONF=str(path))
    nodes.run(nodes.exec_argv(lab, head.name, ["/usr/sbin/slurmctld", "-f", str(path)]), env=env)
    for n in lab.nodes:
        nodes.run(nodes.exec_argv(lab, n.name, ["/usr/sbin/slurmd", "-f", str(path), "-N", n.name]), env=env)
    end = time.monotonic() + timeout
    state = ""
    while time.monotonic() < end:
        p = nodes.run(["sinfo", "-h", "-N", "-o", "%N %T"], check=False, env=env)
        state = p.stdout.strip() or p.stderr.strip()
        if p.returncode == 0 and all(ln.split()[-1].rstrip("*") == "idle" for ln in state.splitlines()) \
                and len(state.splitlines()) == len(lab.nodes):
            return path
        time.sleep(1)
    raise LabError(f"lab {lab.name}: Slurm's nodes did not come up in {timeout:.0f} s (sinfo: "
                   f"{' '.join(state.split())[:200]}; logs in {d})")
