"""HMB's ReFrame library on the lab's Slurm (make test-lab; needs root and `ip netns`; ReFrame from
scripts/packaging-tools.sh): `reframe --system lab` submits every check with sbatch to a 2-node lab
(`scripts/slurm-lab.sh up --name rflab`), srun starts one rank per node, all checks pass with both
wheels and every perflog number is the one in hmb-bench's JSON; a planted fault fails its check
with hmb-bench's validation message.

One Slurm runs on this machine at a time: the lab comes up only once no other slurmctld is running
(waiting up to 20 minutes for one it did not start), and goes down at the end."""
from __future__ import annotations

import json
import re
import subprocess
import time

import pytest

from hmb.lab import nodes as lab
from hmb.run import mpi as hmpi

from _packaging import (CHECKS, CHECKS_PER_ENVIRONMENT, FAULTS, REPO, cases_of, json_results, perflog_entries,
                        reframe_missing, run_reframe, summary_line, tool_env, xfail_reasons)

# ReFrame's own .rfm_testcase.json is no HMB output (see tests/test_packaging.py)
pytestmark = [pytest.mark.lab, pytest.mark.planted_json(".rfm_testcase.json")]
WHY_NOT = lab.can_make_labs()
if WHY_NOT:
    pytestmark.append(pytest.mark.skip(reason=f"hmb lab {WHY_NOT}"))

NAME = "rflab"
NODES = [f"{NAME}-n1", f"{NAME}-n2"]
WAIT_FOR_OTHER_SLURM_S = 1200


def _other_slurmctld() -> list[str]:
    """Live slurmctld processes (a killed one may linger as a zombie until PID 1 reaps it)."""
    ps = subprocess.run(["ps", "-eo", "pid=,stat=,comm="], capture_output=True, text=True).stdout
    return [ln.strip() for ln in ps.splitlines()
            if ln.split()[-1:] == ["slurmctld"] and not ln.split()[1].startswith("Z")]


@pytest.fixture(scope="module")
def rf_lab(tmp_path_factory):
    why = reframe_missing()
    if why:
        pytest.skip(why)
    for name in ("mpich", "openmpi"):
        hmpi.find(name)
    deadline = time.monotonic() + WAIT_FOR_OTHER_SLURM_S
    while _other_slurmctld():
        if time.monotonic() > deadline:
            pytest.fail(f"another Slurm kept running for {WAIT_FOR_OTHER_SLURM_S} s: {_other_slurmctld()}")
        time.sleep(15)
    tmp = tmp_path_factory.mktemp("rflab-up")
    r = subprocess.run(["scripts/slurm-lab.sh", "up", "--name", NAME, "--nodes", "2"], capture_output=True,
                       text=True, cwd=REPO, timeout=900, env=tool_env(tmp))
    try:
        assert r.returncode == 0, r.stderr + r.stdout
        conf = next(ln.split("=", 1)[1] for ln in r.stdout.splitlines() if ln.startswith("export SLURM_CONF="))
        yield {"SLURM_CONF": conf, "HMB_LAB_NAME": NAME}
    finally:
        subprocess.run(["scripts/slurm-lab.sh", "down", "--name", NAME], capture_output=True, cwd=REPO, timeout=300)


@pytest.mark.timeout(1500)
def test_reframe_library_passes_on_the_lab_slurm_across_two_nodes(rf_lab, tmp_path):
    prefix = tmp_path / "rfm"
    proc, report = run_reframe(prefix, "-c", str(CHECKS), "--system", "lab", env=tool_env(tmp_path, **rf_lab),
                               timeout=1400)
    cases = cases_of(report)
    checks = [c for c in cases if not c["fixture"]]
    assert len(checks) == 2 * CHECKS_PER_ENVIRONMENT, summary_line(proc.stdout) + proc.stdout[-4000:]
    reasons = xfail_reasons(proc.stdout)
    for c in checks:
        if c["result"] == "xfail":      # Open MPI's partitioned defect (settings.py, known_defects)
            why = reasons[(c["display_name"], c["environ"])]
            assert c["point"].startswith("halo3d/partitioned/") and "known defect" in why, why
        else:
            assert c["result"] == "pass", (c["display_name"], c["environ"], c["fail_reason"])
    assert proc.returncode == 0, summary_line(proc.stdout)
    assert {(c["system"], c["partition"]) for c in cases} == {("lab", "lab")}
    assert all(c["scheduler"] == "squeue" for c in checks)
    # every launch ran one rank on each of the lab's two nodes, over TCP between them
    results = json_results(prefix / "output")
    runs = {}
    for path in (prefix / "output").rglob("hmb.jsonl"):
        run = json.loads(path.read_text().splitlines()[0])
        runs[run["run_id"]] = run
    assert len(runs) == len([c for c in checks if c["result"] == "pass"])
    assert all(r["hosts"] == NODES and [p["host"] for p in r["placement"]] == NODES for r in runs.values())
    assert {r["mpi"]["impl"] for r in runs.values()} == {"MPICH", "Open MPI"}
    # the perflog's numbers are hmb-bench's
    entries = [e for e in perflog_entries(prefix / "perflogs") if e["result"] == "pass"]
    assert entries and all(e["syspart"] == "lab:lab" for e in entries)
    for e in entries:
        assert float(e["value"]) == results[e["run_id"]]["metrics"][e["var"]]["median"], e


@pytest.mark.timeout(600)
def test_planted_fault_fails_its_check_on_the_lab(rf_lab, tmp_path):
    bench = hmpi.build(hmpi.find("mpich"))
    proc, report = run_reframe(tmp_path / "rfm", "-c", str(FAULTS), "--system", "lab", "-p", "mpich",
                               "-S", f"build_hmb_bench.prebuilt={bench}", env=tool_env(tmp_path, **rf_lab),
                               timeout=500)
    assert proc.returncode != 0
    (case,) = [c for c in cases_of(report) if not c["fixture"]]
    assert case["result"] == "fail" and case["system"] == "lab", (case["result"], case["fail_reason"])
    assert re.search(r"hmb-bench exited with [1-9]\d*: validation failed: bench=p2p size=8 mode=latency "
                     r".*iteration=3 rank=1", case["fail_reason"]), case["fail_reason"]
    # it failed on the lab's two nodes (the squeue backend reports no node list: the JSON does)
    run = json.loads((tmp_path / "rfm" / "stage" / "lab" / "lab" / "mpich" / "hmb_planted_fault_check" /
                      "hmb.jsonl").read_text().splitlines()[0])
    assert run["hosts"] == NODES, run["hosts"]
