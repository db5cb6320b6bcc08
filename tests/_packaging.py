"""Helpers for the tests that run HMB where HPC centres run benchmarks: ReFrame on
packaging/reframe/ (tests/test_packaging.py on this machine, tests/test_lab_reframe.py on the lab's
Slurm) and the EasyBuild module. Their tools come from project files: the `frameworks` extra and
Debian's Lmod, installed by scripts/packaging-tools.sh (make test-packaging, make test-lab)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = REPO / ".venv" / "bin"
REFRAME = VENV_BIN / "reframe"
EB = VENV_BIN / "eb"
SETTINGS = REPO / "packaging" / "reframe" / "settings.py"
CHECKS = REPO / "packaging" / "reframe"
FAULTS = CHECKS / "faults"
LMOD_INIT = Path("/usr/share/lmod/lmod/init/bash")
TOOLS_SCRIPT = "scripts/packaging-tools.sh"

# The library's checks: 4 p2p + 2 part + 3 async + 4 mt + 4 halo3d points (hmb_checks.py).
CHECKS_PER_ENVIRONMENT = 17


def reframe_missing() -> str | None:
    """Why ReFrame cannot run here, or None."""
    if not REFRAME.exists():
        return f"ReFrame is not installed ({REFRAME} missing: {TOOLS_SCRIPT} installs the frameworks extra)"
    return None


def tool_env(tmp: Path, **extra) -> dict:
    env = dict(os.environ)
    # The tests' own settings (conftest: OMPI_MCA_btl=^ofi) are not a user's: ReFrame's jobs run
    # with the environments settings.py defines.
    for name in ("OMPI_MCA_btl", "HMB_NO_MPI", "HMB_RFM_REFERENCES"):
        env.pop(name, None)
    env["TMPDIR"] = str(tmp)        # ReFrame's own log files land here, not in /tmp
    env.update(extra)
    return env


def run_reframe(prefix: Path, *args: str, env: dict | None = None, timeout: int = 1200):
    """`reframe -C settings.py ARGS -r` with everything under prefix (stage, output, perflogs, the
    run report): (the finished process, the run report)."""
    prefix.mkdir(parents=True, exist_ok=True)
    report = prefix / "run-report.reframe"    # not .json: conftest schema-checks *.json as HMB output
    cmd = [str(REFRAME), "-C", str(SETTINGS), *args, "--prefix", str(prefix), "--report-file", str(report),
           "--nocolor", "-r"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=prefix, env=env or tool_env(prefix),
                          timeout=timeout)
    data = json.loads(report.read_text()) if report.exists() else {"runs": []}
    return proc, data


def cases_of(report: dict) -> list[dict]:
    """The last run's test cases (a rerun of failures would add runs; none is asked for)."""
    return report["runs"][-1]["testcases"] if report.get("runs") else []


def xfail_reasons(out: str) -> dict[tuple[str, str], str]:
    """(display name, environment) -> the reason ReFrame printed for an expected failure (its
    run report keeps none): `[    XFAIL ] (3/3) NAME /HASH @SYSTEM:PARTITION+ENV [REASON]`."""
    found = {}
    for m in re.finditer(r"^\[\s*XFAIL \] \(\s*\d+/\d+\) (.+?) /[0-9a-f]+ @\S+?\+(\S+) \[(.*)\]$", out, re.M):
        found[(m.group(1), m.group(2))] = m.group(3)
    return found


def summary_line(out: str) -> str:
    return next((ln.strip() for ln in out.splitlines() if "Ran " in ln and "test case(s)" in ln), "")


def perflog_entries(perflogs: Path) -> list[dict]:
    """Every performance value in ReFrame's perflogs (the filelog handler of settings.py: one line
    per check run, `NAME=VALUE|UNIT|ref=R|lower=L|upper=U|` per variable)."""
    entries = []
    for log in sorted(perflogs.rglob("*.log")):
        lines = log.read_text().splitlines()
        for line in lines[1:]:                          # the first is the header
            fields = line.split("|")
            head = dict(f.split("=", 1) for f in fields[5:7])   # hmb_run_id=..., hmb_point=...
            result, rest = fields[7], fields[8:]
            for i in range(0, len(rest) - 4, 5):
                name, value = rest[i].split("=", 1)
                entries.append({"log": log.name, "check": fields[2], "syspart": fields[3], "environ": fields[4],
                                "run_id": head["hmb_run_id"], "point": head["hmb_point"], "result": result,
                                "var": name, "value": value, "unit": rest[i + 1],
                                "ref": rest[i + 2].split("=", 1)[1]})
    return entries


def json_results(output: Path) -> dict[str, dict]:
    """run_id -> the one result record of that hmb-bench launch, from the hmb.jsonl files ReFrame
    kept in its output directories."""
    by_run = {}
    for path in output.rglob("hmb.jsonl"):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec["type"] == "result":
                assert rec["run_id"] not in by_run, f"two results of run {rec['run_id']}"
                by_run[rec["run_id"]] = rec
    return by_run
