"""hmb lab without a lab: the layout, the launcher agent, the hosts block, the path read from a
library's verbose output, the launch lines across hosts, the Slurm configuration, the clock check
across hosts of one machine. (tests/test_lab_nodes.py brings real nodes up: make test-lab.)"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hmb.run import check, launch
from hmb.lab import network
from hmb.lab import nodes as lab
from hmb.lab import slurm as lab_slurm
from hmb.run import mpi as hmpi

from conftest import hmb_cli

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv(lab.BASE_VAR, str(tmp_path / "state"))
    monkeypatch.setattr(lab, "HOSTS_FILE", tmp_path / "hosts")
    return tmp_path


def test_layout_addresses_and_cpu_shares(state):
    lb = lab.layout("hmbt", 2, "10.77.200.0/24", cpus=[0, 1, 2, 3, 4])
    assert [n.name for n in lb.nodes] == ["hmbt-n1", "hmbt-n2"]
    assert [n.addr for n in lb.nodes] == ["10.77.200.1", "10.77.200.2"] and lb.head_addr == "10.77.200.254"
    assert [n.cpus for n in lb.nodes] == [[0, 1], [2, 3]]       # equal consecutive shares, CPU 4 left over
    assert lb.bridge == "hmbtbr" and lb.nodes[0].uts == str(state / "state" / "hmbt" / "uts-n1")
    # fewer CPUs than nodes: every node gets all of them (status says they share)
    assert [n.cpus for n in lab.layout("hmbt", 3, "10.77.200.0/24", cpus=[0, 1]).nodes] == [[0, 1]] * 3


@pytest.mark.parametrize("name, nodes, subnet, words", [
    ("Hmb", 2, None, "lab name"), ("abcdefghijk", 2, None, "lab name"), ("hmbt", 1, None, "2 to 16"),
    ("hmbt", 2, "8.8.8.0/24", "private"), ("hmbt", 2, "10.1.2.0/25", "at least /24"), ("hmbt", 2, "10.1.2", "--subnet"),
])
def test_layout_refuses_bad_input(state, name, nodes, subnet, words):
    with pytest.raises(lab.LabError) as e:
        lab.layout(name, nodes, subnet)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_default_subnets_differ_by_name():
    assert lab.default_subnet("hmblab") != lab.default_subnet("hmbt1")
    assert lab.default_subnet("hmblab") == lab.default_subnet("hmblab")


def test_hosts_block_is_replaced_and_removed(state):
    hosts = state / "hosts"
    hosts.write_text("127.0.0.1 localhost\n10.0.0.9 other\n")
    lb = lab.layout("hmbt", 2, "10.77.200.0/24", cpus=[0, 1])
    lab._set_hosts("hmbt", lab._hosts_block(lb))
    lab._set_hosts("hmbt", lab._hosts_block(lb))      # twice: still one block
    text = hosts.read_text()
    assert text.count("# hmb lab hmbt begin") == 1 and "10.77.200.2 hmbt-n2\n" in text
    assert text.startswith("127.0.0.1 localhost\n10.0.0.9 other\n")
    lab._set_hosts("hmbt", [])
    assert hosts.read_text() == "127.0.0.1 localhost\n10.0.0.9 other\n"


def test_agent_maps_hosts_and_refuses_others(state):
    lb = lab.layout("hmbt", 2, "10.77.200.0/24", cpus=[0, 1])
    lb.dir.mkdir(parents=True)
    lb.agent.write_text(lab._agent_text(lb))
    lb.agent.chmod(0o755)
    text = lb.agent.read_text()
    assert "hmbt-n2|10.77.200.2) ns=hmbt-n2;" in text and "cpus=1 ;;" in text
    # rsh-style options before the host are skipped; an unknown host is refused before entering anything
    r = subprocess.run([str(lb.agent), "-x", "-n", "nohost", "true"], capture_output=True, text=True)
    assert r.returncode == 255 and "no node 'nohost'" in r.stderr and "hmbt-n1 hmbt-n2" in r.stderr
    r = subprocess.run([str(lb.agent), "hmbt-n1"], capture_output=True, text=True)
    assert r.returncode == 255 and "no command" in r.stderr


UCX_TCP = """\
[1795737840.907539] [hmbt-n1:25777:0]      ucp_worker.c:1912 UCX  INFO    ucp_context_0 self cfg#0 tag(self/memory tcp/lab0)  rma(self/memory)  am(self/memory tcp/lab0)
[1795737841.162236] [hmbt-n1:3621 :0]      ucp_worker.c:1912 UCX  INFO    ucp_context_0 inter-node cfg#1 tag(tcp/lab0)  rma_am(tcp/lab0)  am(tcp/lab0)
"""
UCX_SHM = """\
[1795737822.259492] [hmbt-n1:25020:0]      ucp_worker.c:1912 UCX  INFO    ucp_context_0 intra-node cfg#1 tag(sysv/memory cma/memory)  rma(sysv/memory posix/memory)  am(sysv/memory cma/memory)
"""
OMPI_TCP = "[hmbt-n1:07766] btl: tcp: attempting to connect() to [[7302,1],1] address 10.77.133.2, on port 1024\n"


def test_ucx_logs_to_files_the_probe_reads_not_to_the_ranks_output(tmp_path):
    # UCX's log on stdout broke MPICH's start-up under srun's PMI-2 beside --json: it goes to
    # one file per rank in the probe's directory, and verbose_log gives path_of their text
    env = network.verbose_env("mpich", tmp_path)
    assert env == {"UCX_LOG_LEVEL": "info", "UCX_LOG_FILE": str(tmp_path / "ucx.%h.%p.log")}
    assert network.verbose_env("openmpi", tmp_path) == {"OMPI_MCA_btl_base_verbose": "30"}
    assert network.verbose_log(tmp_path) == ""
    (tmp_path / "ucx.hmbt-n1.11.log").write_text(UCX_TCP)
    (tmp_path / "other.log").write_text("not UCX's")
    assert network.path_of("mpich", network.verbose_log(tmp_path)) == ("tcp", "UCX inter-node tag(tcp/lab0)")


def test_path_of_reads_the_library_output():
    assert network.path_of("mpich", UCX_TCP) == ("tcp", "UCX inter-node tag(tcp/lab0)")
    path, why = network.path_of("mpich", UCX_SHM)       # UCX took the other node for its own: shared memory
    assert path is None and "intra-node tag(sysv/memory cma/memory)" in why
    path, why = network.path_of("mpich", UCX_TCP.replace("tag(tcp/lab0)", "tag(tcp/lab0 ud_verbs/mlx5_0:1)"))
    assert path is None and "not TCP" in why
    assert network.path_of("mpich", "8 latency 7.1\n")[0] is None
    assert network.path_of("openmpi", OMPI_TCP) == ("tcp", "Open MPI btl tcp: hmbt-n1 connect() to 10.77.133.2")
    assert network.path_of("openmpi", UCX_TCP)[0] is None


def _fake_target(flavor: str) -> launch.Target:
    impl = hmpi.MPI(flavor, flavor, None, "mpicc", "/x/mpiexec")
    return launch.Target(flavor, flavor, impl)


def test_launch_lines_across_lab_nodes(state):
    lb = lab.layout("hmbt", 3, "10.77.200.0/24", cpus=[0, 1, 2])
    hosts = launch.Hosts("lab:hmbt", lb.hostnames, lab=lb)
    m = launch.hosts_prefix(_fake_target("mpich"), 2, 1, hosts)
    assert m[:5] == ["/x/mpiexec", "-n", "2", "-hosts", "hmbt-n1:1,hmbt-n2:1"]      # one rank per node
    assert m[m.index("-launcher-exec") + 1] == str(lb.agent) and m[m.index("-iface") + 1] == "hmbtbr"
    assert m[-2:] == ["-bind-to", "none"]      # the node's CPU share binds, not hydra
    o = launch.hosts_prefix(_fake_target("openmpi"), 4, 1, hosts, ranks_per_node=2)
    assert o[o.index("--host") + 1] == "hmbt-n1:2,hmbt-n2:2"
    assert o[o.index("plm_ssh_agent") + 1] == str(lb.agent) and o[-2:] == ["--bind-to", "none"]
    assert launch.hosts_prefix(_fake_target("mpich"), 3, 1, hosts)[4] == "hmbt-n1:1,hmbt-n2:1,hmbt-n3:1"
    with pytest.raises(launch.LaunchError) as e:
        launch.hosts_prefix(_fake_target("mpich"), 7, 1, hosts, ranks_per_node=2)
    assert "need 4 nodes" in str(e.value) and "has 3" in str(e.value)
    s = launch.launcher_prefix(_fake_target("openmpi"), 2, 1, "srun", hosts=hosts)
    assert s[:3] == ["srun", "-N", "2"] and "--mpi=pmix" in s
    s = launch.launcher_prefix(_fake_target("mpich"), 2, 1, "srun", srun_args=["--mpi=pmix_v4"])
    assert "--mpi=pmix_v4" in s and "--mpi=pmi2" not in s     # the config's choice wins


def test_hostfile_hosts(tmp_path):
    f = tmp_path / "hosts.txt"
    f.write_text("# cluster\nnode1 slots=4\nnode2:4\n\nnode1\n")
    h = launch.parse_hosts(str(f))
    assert h.names == ["node1", "node2"] and h.lab is None and h.per_node(6) == 3
    m = launch.hosts_prefix(_fake_target("mpich"), 4, 2, h)
    assert m[3:] == ["-hosts", "node1:2,node2:2", "-bind-to", "core:2"]
    for bad in (str(tmp_path / "none.txt"), str(tmp_path)):
        with pytest.raises(launch.LaunchError):
            launch.parse_hosts(bad)


def test_hosts_lab_without_a_lab_is_one_line(state):
    r = hmb_cli(["run", "p2p", "--hosts", "lab:nolab", "--dry-run"], cwd=REPO,
                env={**__import__("os").environ, lab.BASE_VAR: str(state / "state")})
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no lab 'nolab' is up" in r.stderr


def test_slurm_conf_needs_no_cgroup(state):
    lb = lab.layout("hmbt", 2, "10.77.200.0/24", cpus=[0, 1])
    text = lab_slurm.conf_text(lb)
    assert "ProctrackType=proctrack/linuxproc" in text and "TaskPlugin=task/none" in text
    assert "SlurmctldHost=hmbt-n1(10.77.200.1)" in text
    assert "NodeName=hmbt-n2 NodeAddr=10.77.200.2 CPUs=1" in text
    assert "TmpFS=" in text and "tmp-%n" in text       # node-local: Slurm's PMIx directories collide otherwise


def _header(applied, estimated):
    return {"clock_offsets_s": applied, "clock_offsets_estimated_s": estimated}


def test_clock_check_across_hosts_of_one_clock():
    # rank 1 on another host of the same machine: its estimate is applied and must be ~0
    near = [_header([0, 3e-7], [0, 3e-7]), _header([0, -2e-6], [0, -2e-6])]
    c = {x.name: x for x in check.check_clocks(near, [], one_clock=True)}
    assert c["clock_offset_one_clock_us"].status == check.PASS and c["clock_offset_one_clock_us"].figure == 2.0
    far = [_header([0, 4.2e-5], [0, 4.2e-5])]          # 42 us: the estimator is off
    assert {x.name: x for x in check.check_clocks(far, [], one_clock=True)}["clock_offset_one_clock_us"].status \
        == check.WARN
    broken = [_header([0, 0.35], [0, 0.35])]              # a sign or clock-kind error: seconds
    assert {x.name: x for x in check.check_clocks(broken, [], one_clock=True)}["clock_offset_one_clock_us"].status \
        == check.FAIL
    # without one clock (a real cluster) the offsets across hosts are not judged
    assert "clock_offset_one_clock_us" not in {x.name for x in check.check_clocks(far, [])}


def test_slurm_script_for_the_lab(tmp_path):
    r = hmb_cli(["slurm", "tests/data/slurm.toml", "--nodes", "2", "--ranks-per-node", "1", "--threads", "4",
                 "--hosts", "lab"], cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "--launcher srun --ranks-per-node 1 --hosts lab --output results/cluster.jsonl" in r.stdout
    r = hmb_cli(["slurm", "tests/data/slurm.toml", "--nodes", "2", "--ranks-per-node", "1", "--threads", "4", "--fit"],
                cwd=REPO)
    assert r.returncode == 2 and "--fit goes with --study" in r.stderr


def test_network_label_in_the_schema():
    schema = json.loads((REPO / "python/hmb/data/schema/hmb-output.schema.json").read_text())
    assert network.NETWORK_LABEL in schema["$defs"]["run"]["properties"]["env"]["description"]


def _two_host_records(tmp_path, network: str | None):
    import hmb as hmb_pkg
    from _planted import metric, result, run, write
    recs = []
    for rid, e in (("a", 80.0), ("b", 84.0), ("c", 82.0)):
        r = run(rid, "async")
        r["hosts"] = ["hmbt-n1", "hmbt-n2"]
        r["env"] = {"HMB_NETWORK": network, "HMB_LAB": "hmbt"} if network else {}
        recs += [r, result(rid, "async", {"size_bytes": 4194304, "op": "pt2pt", "progress": "none"},
                           {"efficiency_mean_pct": metric(e, unit="%", higher=True)})]
    return hmb_pkg.load(write(tmp_path / f"{bool(network)}.jsonl", recs))


def test_network_claim_read_on_lab_nodes_is_labelled_and_not_judged(tmp_path):
    from hmb.study import claims
    claim = {"figure": "Table 1", "quote": "E_0, 2 nodes: 82%", "bench": "async", "metric": "efficiency_mean_pct",
             "where": {"op": "pt2pt", "progress": "none"}, "value": 82.0, "tolerance": 0.15, "scope": "network"}
    lab_df = _two_host_records(tmp_path, network.NETWORK_LABEL)
    assert set(lab_df["network"]) == {network.NETWORK_LABEL}
    v = claims.judge(claim, lab_df, "Lomonosov-2, Intel MPI 2017.1, InfiniBand")
    assert v.verdict == claims.NOT_COMPARABLE and v.reading.startswith("82.0")     # median of 80, 84 and 82
    assert v.reason == ("network: TCP between namespaces on one machine, not the seed's InfiniBand: the seed's "
                        "value is measured on its network; here the reading meets the seed's value")
    v = claims.judge(claim, lab_df, "MPICH/OFI on Intel Omni-Path (OPA); Mellanox InfiniBand Verbs for the table")
    assert "not the seed's Omni-Path" in v.reason
    # two hosts HMB did not lay out (a cluster): a reading of the network, judged
    cluster = _two_host_records(tmp_path, None)
    assert set(cluster["network"]) == {""}
    assert claims.judge(claim, cluster, "InfiniBand").verdict == claims.AGREES


def test_srun_asks_for_the_spare_core_only_where_the_allocation_has_it(monkeypatch):
    # a progress thread wants a core beside the compute threads; a step asking for more CPUs per
    # task than the allocation holds is refused by Slurm, so it gets T (the thread shares a core)
    t = _fake_target("mpich")
    monkeypatch.setattr(launch, "spare_cores", lambda *a: 1)
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    assert launch.cores_per_rank(t, "async", [], 2, 1, "srun") == 2
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    assert launch.cores_per_rank(t, "async", [], 2, 1, "srun") == 1
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "2")
    assert launch.cores_per_rank(t, "async", [], 2, 1, "srun") == 2


# ------------------------------------------------------------------ issue 40: nothing lost when the machine fails

@pytest.mark.parametrize("subnet, words", [
    ("127.0.0.0/24", "loopback"), ("127.5.0.0/16", "loopback"), ("224.1.0.0/16", "multicast"),
    ("239.255.0.0/24", "multicast"), ("169.254.3.0/24", "link-local"), ("0.0.0.0/24", "'this network'"),
    ("240.0.0.0/24", "reserved"), ("100.64.0.0/24", "carrier-grade NAT"), ("10.0.0.0/7", "inside 10.0.0.0/8"),
    ("0.0.0.0/0", "inside 10.0.0.0/8"),
])
def test_subnets_that_carry_no_lab_are_named(state, subnet, words):
    """`lab up --subnet 127.0.0.0/24` was reported up, and no TCP connected between its nodes
    (Python counts loopback and link-local as private)."""
    with pytest.raises(lab.LabError) as e:
        lab.layout("hmbt", 2, subnet)
    assert words in str(e.value) and "\n" not in str(e.value)
    for good in ("172.16.5.0/24", "192.168.9.0/24", "10.77.0.0/16"):
        assert lab.layout("hmbt", 2, good).subnet == good


def _machine(monkeypatch, routes: str, made: list):
    """lab.run answering `ip route` from `routes` (honouring `to match ADDR`), recording the rest."""
    def run(cmd, check=True, **kw):
        if cmd[:2] == ["ip", "-4"] and "route" in cmd:
            lines = routes.splitlines()
            if "match" in cmd:
                import ipaddress
                addr = ipaddress.ip_address(cmd[cmd.index("match") + 1])
                lines = [ln for ln in lines if ln.split()[0] == "default"
                         or addr in ipaddress.ip_network(ln.split()[0], strict=False)]
            return subprocess.CompletedProcess(cmd, 0, "\n".join(lines) + "\n", "")
        made.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")
    monkeypatch.setattr(lab, "run", run)
    monkeypatch.setattr(lab, "can_make_labs", lambda: None)


ROUTES = """default via 192.0.2.1 dev eth0
10.77.71.0/24 dev hmblabbr proto kernel scope link src 10.77.71.254
192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2
local 192.168.3.7 dev eth1 table local proto kernel scope host src 192.168.3.7
"""


@pytest.mark.parametrize("subnet, why", [
    ("10.77.0.0/16", "10.77.71.0/24 dev hmblabbr"),      # a /16 around a lab that is up: its first node .1 is free
    ("10.77.71.0/24", "10.77.71.0/24 dev hmblabbr"),
    ("192.168.0.0/16", "local 192.168.3.7 dev eth1"),     # an address of this machine's
])
def test_a_subnet_overlapping_what_the_machine_uses_is_refused(state, monkeypatch, subnet, why):
    """The check looked only at the route to the new lab's first node: a /16 over a lab already
    up was accepted (its .1 is not in the lab's /24), and the two labs' routes collided."""
    made = []
    _machine(monkeypatch, ROUTES, made)
    with pytest.raises(lab.LabError) as e:
        lab.up("hmbnew", 2, subnet)
    assert why in str(e.value) and "choose another" in str(e.value)
    assert not [c for c in made if "add" in c], "something was made"


@pytest.mark.planted_json("lab.json")
def test_a_subnet_overlapping_another_labs_state_is_refused(state, monkeypatch):
    """A lab whose state exists (up, or half up with its bridge gone) holds its subnet."""
    made = []
    _machine(monkeypatch, "default via 192.0.2.1 dev eth0\n", made)
    other = state / "state" / "other"
    other.mkdir(parents=True)
    (other / "lab.json").write_text(json.dumps(lab.layout("other", 2, "10.77.5.0/24").to_json()))
    with pytest.raises(lab.LabError) as e:
        lab.up("hmbnew", 2, "10.77.0.0/20")
    assert "lab other has 10.77.5.0/24" in str(e.value) and not [c for c in made if "add" in c]


def _fake_tools(d: Path, names) -> Path:
    """Executables that record their arguments in d/calls and fail."""
    d.mkdir(exist_ok=True)
    for n in names:
        (d / n).write_text(f'#!/bin/sh\necho "{n} $*" >> {d / "calls"}\nexit 1\n')
        (d / n).chmod(0o755)
    return d


def test_the_agent_enters_its_node_whatever_the_environment_says(state):
    """HMB_LAB_INSIDE=NODE made the agent run the command on the machine itself, after
    remounting /sys in the caller's mount namespace. The agent's own second stage (--in-node)
    checks the namespaces it is in, so a caller cannot skip the entering either."""
    lb = lab.layout("hmbt", 2, "10.77.200.0/24", cpus=[0, 1])
    lb.dir.mkdir(parents=True)
    lb.agent.write_text(lab._agent_text(lb))
    lb.agent.chmod(0o755)
    tools = _fake_tools(state / "bin", ["nsenter", "unshare", "mount", "umount", "mountpoint", "taskset"])
    env = {**__import__("os").environ, "PATH": f"{tools}:/usr/bin:/bin"}
    r = subprocess.run([str(lb.agent), "hmbt-n1", "true"], capture_output=True, text=True,
                       env={**env, "HMB_LAB_INSIDE": "hmbt-n1"})
    calls = (tools / "calls").read_text().splitlines()
    assert r.returncode != 0 and calls and calls[0].startswith("nsenter --uts="), calls
    assert not [c for c in calls if c.split()[0] in ("mount", "umount", "mountpoint", "taskset")], calls
    (tools / "calls").unlink()
    r = subprocess.run([str(lb.agent), "--in-node", "hmbt-n1", "true"], capture_output=True, text=True, env=env)
    assert r.returncode == 255 and "not inside node hmbt-n1's namespaces" in r.stderr
    assert not (tools / "calls").exists(), (tools / "calls").read_text()
    assert "HMB_LAB_INSIDE" not in lb.agent.read_text()


@pytest.mark.parametrize("text, rc, says", [
    ("srun: error: Unable to create step for job 7: Job/step already completing or completed\n", 1,
     "Slurm refused the step: Job/step already completing or completed"),
    ("slurmstepd-hmblab-n1: error: *** STEP 2.3 ON hmblab-n1 CANCELLED AT 2026-11-28T18:30:33 DUE TO TIME LIMIT ***\n"
     "srun: forcing job termination\n", 143, "Slurm cancelled the step (due to time limit)"),
    ("slurmstepd: error: *** JOB 9 ON n3 CANCELLED AT 2026-11-28T18:30:33 DUE TO NODE FAILURE ***\n", 1,
     "due to node failure"),
    ("slurmstepd: error: *** STEP 9.0 ON n3 CANCELLED AT 2026-11-28T18:30:33 ***\n", 15, "(scancel)"),
    ("x\nhmb: lab hmblab failed: lab0 is down in hmblab-n2; the launch was stopped\n", 1, "lab0 is down in hmblab-n2"),
    ("hmb: lab hmblab failed: the lab was taken down during the launch\n", 143, "the lab was taken down during the launch"),
    ("-" * 74 + "\nThe PMIx server's listener thread failed to start. We cannot\ncontinue.\n" + "-" * 74 + "\n", 213,
     "Open MPI's launcher did not start the job"),
])
def test_the_machines_failures_are_named_by_cause(text, rc, says):
    assert says in launch.machine_failure(text, rc)


@pytest.mark.parametrize("text", [
    "srun: error: Unable to create step for job 7: More processors requested than permitted\n",   # the config's
    "hmb-bench p2p: --sizes: bad size\n",
    "[mpiexec@vm] main (mpiexec.c:270): process manager error waiting for completion\n",
])
def test_the_benchmarks_own_failures_stay_final(text):
    assert launch.machine_failure(text, 1) is None
    assert launch.machine_failure("srun: error: Unable to create step for job 7: Job/step already completing "
                                  "or completed\n", 0) is None      # a launch that ended well did not fail


def _lab_state(state, name="hmbt"):
    lb = lab.layout(name, 2, "10.77.200.0/24", cpus=[0, 1])
    lb.dir.mkdir(parents=True)
    (lb.dir / "lab.json").write_text(json.dumps(lb.to_json()))
    return lb


def test_failure_cause_names_each_break(state, monkeypatch):
    """A launch across a broken lab said only its launcher's banner ("process manager error
    waiting for completion", a row of dashes), or hung until the sweep's timeout."""
    lb = _lab_state(state)
    world = {"netns": ["hmbt-n1", "hmbt-n2"], "ifaces": {"hmbtbr": "up", "hmbtv1": "up", "hmbtv2": "up"},
             "lab0": {"hmbt-n1": (["BROADCAST", "UP"], "10.77.200.1"), "hmbt-n2": (["BROADCAST", "UP"], "10.77.200.2")}}

    def run(cmd, check=True, **kw):
        if cmd[:3] == ["ip", "netns", "list"]:
            return subprocess.CompletedProcess(cmd, 0, "".join(f"{n} (id: 0)\n" for n in world["netns"]), "")
        node = cmd[cmd.index("-n") + 1]
        if node not in world["lab0"]:
            return subprocess.CompletedProcess(cmd, 1, "", "Device does not exist")
        flags, addr = world["lab0"][node]
        return subprocess.CompletedProcess(cmd, 0, json.dumps([{"ifname": "lab0", "flags": flags, "addr_info": (
            [{"family": "inet", "local": addr}] if addr else [])}]), "")
    monkeypatch.setattr(lab, "run", run)
    monkeypatch.setattr(lab, "_iface_state", lambda path: world["ifaces"].get(Path(path).name))
    assert lab.failure_cause(lb) is None
    world["lab0"]["hmbt-n2"] = (["BROADCAST"], "10.77.200.2")
    assert lab.failure_cause(lb) == "lab0 is down in hmbt-n2"
    world["lab0"]["hmbt-n2"] = (["BROADCAST", "UP"], None)
    assert lab.failure_cause(lb) == "hmbt-n2 lost its address 10.77.200.2 on lab0"
    del world["lab0"]["hmbt-n2"]
    assert lab.failure_cause(lb) == "lab0 is gone in hmbt-n2"
    world["ifaces"]["hmbtv2"] = "down"
    assert lab.failure_cause(lb) == "hmbt-n2's link on this machine (hmbtv2) is down"
    world["ifaces"]["hmbtbr"] = None
    assert lab.failure_cause(lb) == "the lab's bridge hmbtbr is gone"
    world["netns"].remove("hmbt-n2")
    assert lab.failure_cause(lb) == "node hmbt-n2's namespace is gone"
    (lb.dir / lab.DOWN_MARK).write_text("pid 1\n")     # `hmb lab down` under way
    assert lab.failure_cause(lb) == "the lab was taken down during the launch"
    assert lab.failure_cause(lb, during=False) == "lab hmbt was taken down"
    (lb.dir / "lab.json").unlink()
    assert lab.failure_cause(lb) == "the lab was taken down during the launch"


def _guarded(monkeypatch, signals_in_cleanup=0, left=()):
    """Run taken_down_on_interrupt around a SIGTERM to this process; the cleanup's down() gets
    `signals_in_cleanup` more. Returns (the exception, the number of downs)."""
    import os
    import signal
    downs = []

    def down(name, quiet=False, out=print):
        downs.append(name)
        for _ in range(signals_in_cleanup):
            os.kill(os.getpid(), signal.SIGINT)
    monkeypatch.setattr(lab, "down", down)
    monkeypatch.setattr(lab, "leftovers", lambda name: list(left))
    with pytest.raises(lab.LabInterrupted) as e:
        with lab.taken_down_on_interrupt("hmbt") as guard:
            guard.started = True
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100):
                __import__("time").sleep(0.01)
    return str(e.value), downs


def test_an_interrupt_of_up_takes_down_what_was_made(state, monkeypatch):
    """SIGTERM killed `hmb lab up` where it stood, and a second SIGINT cut its cleanup short:
    namespaces, links, UTS mounts and the state were left in 4 of 6 runs, with no message."""
    import signal
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    text, downs = _guarded(monkeypatch)
    assert downs == ["hmbt"] and text == "hmb lab: interrupted; lab hmbt was taken down again, nothing is left"
    text, downs = _guarded(monkeypatch, signals_in_cleanup=2)
    assert downs == ["hmbt"] and "(interrupted 3 times: the cleanup finished first)" in text
    text, _ = _guarded(monkeypatch, left=["namespace hmbt-n2", "mount /run/hmb-lab/hmbt/uts-n2"])
    assert text == ("hmb lab: interrupted; lab hmbt is partly down: left namespace hmbt-n2, mount "
                    "/run/hmb-lab/hmbt/uts-n2 (hmb lab down --name hmbt clears it)")
    assert {s: signal.getsignal(s) for s in before} == before       # handlers as they were


def test_an_interrupt_before_anything_is_made_takes_nothing_down(state, monkeypatch):
    import os
    import signal
    downs = []
    monkeypatch.setattr(lab, "down", lambda *a, **k: downs.append(a))
    with pytest.raises(lab.LabInterrupted) as e:
        with lab.taken_down_on_interrupt("hmbt"):
            os.kill(os.getpid(), signal.SIGINT)
            __import__("time").sleep(1)
    assert downs == [] and "before lab hmbt was made" in str(e.value)
    with pytest.raises(lab.LabError):       # a refusal (lab already up) takes nothing down either
        with lab.taken_down_on_interrupt("hmbt"):
            raise lab.LabError("lab hmbt is already up")
    assert downs == []


SLURM_REFUSED = """
[sweep]
mpis = ["mpich"]
seed = 5
output = "out.jsonl"
timeout = "60s"

[[bench]]
name = "p2p"
args = { mode = "latency", sizes = ["8", "64", "512"] }
"""


def test_a_launch_the_machine_ended_is_incomplete_and_resumed(tmp_path):
    """After a job's time limit, srun refused every further step ("Unable to create step ...
    already completing") and the sweep recorded those launches failed: resubmitted, the job
    found the sweep "already finished" with 27 of 48 points."""
    import os
    import sys
    from hmb.run import sweep
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(SLURM_REFUSED)
    specs = sweep.expand(sweep.load(str(cfg)))
    refused = specs[1].tag
    fake = REPO / "tests" / "data" / "fake_hmb_bench.py"
    env = {**os.environ, "HMB_BENCH_OVERRIDE": f"{sys.executable} {fake}", "FAKE_LOG": str(tmp_path / "fake.log"),
           "PYTHONPATH": str(REPO / "python"), "FAKE_FAIL_TAG_SUBSTR": refused,
           "FAKE_FAIL_STDERR": "srun: error: Unable to create step for job 7: Job/step already completing or completed"}
    r = hmb_cli(["sweep", str(cfg)], cwd=tmp_path, env=env)
    assert r.returncode == 1 and f"{refused} incomplete (exit 2): Slurm refused the step" in r.stderr, r.stderr
    recs = {x["tag"]: x for x in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())
            if x["type"] == "launch"}
    assert recs[refused]["status"] == "incomplete" and {x["status"] for t, x in recs.items() if t != refused} == {"done"}
    assert hmb_cli(["validate", str(tmp_path / "out.jsonl")], cwd=tmp_path).returncode == 0
    env.pop("FAKE_FAIL_TAG_SUBSTR")       # the next allocation: the step runs
    (tmp_path / "fake.log").unlink()
    r = hmb_cli(["sweep", str(cfg), "--resume"], cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "fake.log").read_text().split() == ["start", refused, "end", refused]
