"""Where HPC centres run benchmarks (make test-packaging; docs/toolkit.md, "Running HMB from
ReFrame" and "Installing as a module"):

- ReFrame runs HMB's test library (packaging/reframe/) on this machine with both wheels, every
  check passes, and every number in its perflogs is the one in hmb-bench's own JSON of that launch;
  a planted fault is a failed check carrying hmb-bench's validation message; a reference the run
  cannot meet is a failed check;
- EasyBuild builds HMB's SYSTEM-toolchain easyconfig from a `git archive` tarball with the MPICH
  wheel as an external module, and Lmod loads the module, from which a 2-rank run and ReFrame's
  checks (the prebuilt hmb-bench) run.

The tools come from project files (scripts/packaging-tools.sh: the frameworks extra, Debian's
lmod); a test skips, saying why, only where they are missing."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hmb.run import mpi as hmpi

from _packaging import (CHECKS, CHECKS_PER_ENVIRONMENT, EB, FAULTS, LMOD_INIT, REFRAME, REPO, SETTINGS,
                        json_results, perflog_entries, reframe_missing, run_reframe, summary_line, cases_of,
                        tool_env, xfail_reasons)

# ReFrame's own .rfm_testcase.json (stage and output directories) is no HMB output: conftest's
# schema check of every *.json left under tmp_path skips that name; hmb-bench's hmb.jsonl files
# are checked as usual.
pytestmark = [pytest.mark.packaging, pytest.mark.planted_json(".rfm_testcase.json")]
ENVIRONS = ("mpich", "openmpi")


def _need_reframe():
    why = reframe_missing()
    if why:
        pytest.skip(why)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """One `reframe -c packaging/reframe -r` on this machine, both wheels, hmb-bench built by the
    library's CMake fixture per environment."""
    _need_reframe()
    for name in ENVIRONS:
        hmpi.find(name)             # the wheels settings.py points at (installed on demand)
    prefix = tmp_path_factory.mktemp("rfm-local")
    proc, report = run_reframe(prefix, "-c", str(CHECKS))
    return proc, report, prefix


def test_reframe_runs_every_check_on_both_wheels(local_run):
    proc, report, _ = local_run
    cases = cases_of(report)
    assert proc.returncode == 0, summary_line(proc.stdout) + "\n" + proc.stdout[-4000:]
    checks = [c for c in cases if not c["fixture"]]
    builds = [c for c in cases if c["fixture"]]
    assert {c["environ"] for c in checks} == set(ENVIRONS) and len(builds) == len(ENVIRONS)
    assert len(checks) == CHECKS_PER_ENVIRONMENT * len(ENVIRONS), [c["display_name"] for c in checks]
    # Open MPI 5.0.11's partitioned defect (docs/findings.md) may fire in halo3d's partitioned mode:
    # then, and only there, an expected failure naming it (settings.py, known_defects)
    xfail = [c for c in cases if c["result"] == "xfail"]
    reasons = xfail_reasons(proc.stdout)
    for c in xfail:
        why = reasons[(c["display_name"], c["environ"])]
        assert c["environ"] == "openmpi" and c["point"].startswith("halo3d/partitioned/"), (c["display_name"], why)
        assert "known defect: Open MPI 5.0.11 partitioned" in why and "library conformance problem" in why, why
    assert all(c["result"] == "pass" for c in cases if c not in xfail), \
        [(c["display_name"], c["environ"], c["fail_reason"]) for c in cases if c["result"] != "pass"]
    # every family and mode the library promises ran, under each library
    points = {(c["environ"], c["point"]) for c in checks}
    for env in ENVIRONS:
        for p in ("p2p/latency/8", "p2p/bw/64K", "part/256K/partitions=2", "async/pt2pt/16K/test:10",
                  "mt/rate/tag/8", "halo3d/partitioned/16K"):
            assert (env, p) in points
    # the launches were the library's, bound to one core each as settings.py says
    runs = [json.loads(path.read_text().splitlines()[0]) for path in (local_run[2] / "output").rglob("hmb.jsonl")]
    # (ReFrame keeps the output of a check that passed: an expected failure's stays in its stage)
    assert len(runs) == len(checks) - len(xfail) and {r["mpi"]["impl"] for r in runs} == {"MPICH", "Open MPI"}
    cpusets = {tuple(p["cpuset"] for p in r["placement"]) for r in runs}
    assert all(len(c) == 2 and all(re.fullmatch(r"\d+", x) for x in c) and c[0] != c[1] for c in cpusets), cpusets


def test_perflog_numbers_are_hmb_json_numbers(local_run):
    """Every performance value ReFrame logged is the median hmb-bench wrote to its JSON for the
    same launch (the run_id on the perflog line), in the JSON's unit; references from
    references.toml reach the log."""
    _, report, prefix = local_run
    entries = perflog_entries(prefix / "perflogs")
    results = json_results(prefix / "output")
    checks = [c for c in cases_of(report) if not c["fixture"] and c["result"] == "pass"]
    expected = sum(len(c["units"]) for c in checks)
    assert len([e for e in entries if e["result"] == "pass"]) == expected, (len(entries), expected)
    for e in entries:
        if e["result"] != "pass":                   # an expected failure logs no values
            continue
        rec = results[e["run_id"]]
        metric = rec["metrics"][e["var"]]
        assert float(e["value"]) == metric["median"], (e, metric["median"])
        assert e["unit"] == metric["unit"]
    # a reference kept for this system reached the perflog
    refs = {(e["point"], e["var"]): float(e["ref"]) for e in entries if e["syspart"] == "local:default"}
    assert refs[("p2p/latency/8", "latency_us")] > 0 and refs[("mt/rate/funneled/8", "msg_rate")] > 0


def test_every_reference_names_a_check_of_the_library(local_run):
    """A reference under a point no check has (a typo in the centre's file) would silently never
    apply: each point in references.toml is one the library ran."""
    try:
        import tomllib
    except ImportError:                 # Python < 3.11
        import tomli as tomllib
    _, report, _ = local_run
    points = {c["point"] for c in cases_of(report) if not c["fixture"]}
    refs = tomllib.loads((CHECKS / "references.toml").read_text())
    for syspart, by_point in refs.items():
        unknown = set(by_point) - points
        assert not unknown, f"{syspart}: references for points no check has: {sorted(unknown)}"


def test_planted_fault_is_a_failed_check_with_hmb_benchs_message(tmp_path):
    _need_reframe()
    bench = hmpi.build(hmpi.find("mpich"))
    proc, report = run_reframe(tmp_path, "-c", str(FAULTS), "-p", "mpich",
                               "-S", f"build_hmb_bench.prebuilt={bench}")
    assert proc.returncode != 0
    (case,) = [c for c in cases_of(report) if not c["fixture"]]
    assert case["result"] == "fail" and case["fail_phase"] == "sanity", case["fail_reason"]
    reason = case["fail_reason"]
    assert re.search(r"hmb-bench exited with [1-9]\d*: validation failed: bench=p2p size=8 mode=latency "
                     r".*iteration=3 rank=1", reason), reason
    assert "FAILURE INFO for hmb_planted_fault_check" in proc.stdout


def test_declared_defect_is_an_expected_failure_elsewhere_a_failure(tmp_path):
    """settings.py declares Open MPI's partitioned defect for halo3d's partitioned points: a
    library conformance problem there is an expected failure (XFAIL, with the reason); the same kind
    of failure in another point (part) is a failed check. The failure is planted (--inject
    never-complete:0, a wait that never completes, named a library conformance problem by
    hmb-bench), so both fail every time."""
    _need_reframe()
    bench = hmpi.build(hmpi.find("openmpi"))
    proc, report = run_reframe(tmp_path, "-c", str(CHECKS), "-p", "openmpi",
                               "-n", "hmb_halo3d_check%mode=partitioned", "-n", "hmb_part_check%partitions=1",
                               "-S", f"build_hmb_bench.prebuilt={bench}", "-S", "inject=never-complete:0",
                               "-S", "wait_bound=1s")
    cases = {c["point"]: c for c in cases_of(report) if not c["fixture"]}
    assert set(cases) == {"halo3d/partitioned/16K", "part/256K/partitions=1"}, proc.stdout[-3000:]
    halo, part = cases["halo3d/partitioned/16K"], cases["part/256K/partitions=1"]
    assert halo["result"] == "xfail", (halo["result"], halo["fail_reason"])
    why = xfail_reasons(proc.stdout)[(halo["display_name"], "openmpi")]
    assert "known defect: Open MPI 5.0.11 partitioned" in why and "library conformance problem" in why, why
    assert part["result"] == "fail", (part["result"], part["fail_reason"])
    assert re.search(r"exited with [1-9]\d*: validation failed: bench=part .*iteration=0 .*"
                     r"\(--inject never-complete: planted by the test\): library conformance problem",
                     part["fail_reason"]), part["fail_reason"]
    line = summary_line(proc.stdout)
    assert proc.returncode != 0 and "1 failure(s), 1 expected failure(s)" in line, line


def test_reference_the_run_cannot_meet_fails_the_check(tmp_path):
    """The references are enforced: a centre's reference of 0.001 us for 8 B latency, no slower
    allowed, fails the check in the performance stage; the other point is untouched."""
    _need_reframe()
    bench = hmpi.build(hmpi.find("mpich"))
    refs = tmp_path / "refs.toml"
    refs.write_text('["local:default"."p2p/latency/8"]\nlatency_us = [0.001, "none", 0.0]\n')
    proc, report = run_reframe(tmp_path, "-c", str(CHECKS), "-p", "mpich", "-n", "hmb_p2p_check%p2p_point=latency_",
                               "-S", f"build_hmb_bench.prebuilt={bench}",
                               env=tool_env(tmp_path, HMB_RFM_REFERENCES=str(refs)))
    cases = {c["point"]: c for c in cases_of(report) if not c["fixture"]}
    assert set(cases) == {"p2p/latency/8", "p2p/latency/64K"}
    assert cases["p2p/latency/8"]["result"] == "fail" and cases["p2p/latency/8"]["fail_phase"] == "performance"
    assert "latency_us" in cases["p2p/latency/8"]["fail_reason"]
    assert cases["p2p/latency/64K"]["result"] == "pass"
    assert proc.returncode != 0


def _module_shell(prefix: Path, commands: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """commands in bash after Lmod's `module load HMB/0.1.0` from the EasyBuild prefix."""
    script = (f"source {LMOD_INIT}\nmodule use {prefix}/modules/all {prefix}/extmodules\n"
              f"module load HMB/0.1.0\n{commands}\n")
    return subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True, cwd=cwd or prefix,
                          env=tool_env(cwd or prefix), timeout=600)


@pytest.fixture(scope="module")
def eb_module(tmp_path_factory):
    """HMB built by EasyBuild (packaging/easybuild/build-module.sh) into a fresh prefix."""
    if not EB.exists():
        pytest.skip(f"EasyBuild is not installed ({EB} missing: scripts/packaging-tools.sh installs the frameworks extra)")
    if not LMOD_INIT.exists():
        pytest.skip(f"Lmod is not installed ({LMOD_INIT} missing: scripts/packaging-tools.sh runs apt-get install lmod)")
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: build-module.sh makes its tarball with git archive")
    hmpi.find("mpich")
    prefix = tmp_path_factory.mktemp("eb")
    r = subprocess.run(["packaging/easybuild/build-module.sh", str(prefix)], capture_output=True, text=True,
                       cwd=REPO, env=tool_env(prefix), timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "COMPLETED: Installation ended successfully" in r.stdout, r.stdout[-3000:]
    return prefix


def test_easybuild_module_loads_and_runs_two_ranks(eb_module):
    prefix = eb_module
    modfile = prefix / "modules" / "all" / "HMB" / "0.1.0.lua"
    assert modfile.exists()
    text = modfile.read_text()
    assert re.search(r'depends_on\("mpich/[0-9.]+"\)', text), text
    root = prefix / "software" / "HMB" / "0.1.0"
    assert (root / "bin" / "hmb-bench").is_file()
    assert any((root / lib / "libhmbprof.so").is_file() for lib in ("lib", "lib64"))
    r = _module_shell(prefix, "module -t list 2>&1\ncommand -v hmb-bench\necho EBROOTHMB=$EBROOTHMB\n"
                              "mpiexec -n 2 hmb-bench p2p --sizes 8 --iters 20 --ci-target 0 --json p2p.jsonl")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert re.search(r"^mpich/[0-9.]+$", r.stdout, re.M) and "HMB/0.1.0" in lines, r.stdout
    assert str(root / "bin" / "hmb-bench") in lines and f"EBROOTHMB={root}" in lines
    recs = [json.loads(x) for x in (prefix / "p2p.jsonl").read_text().splitlines()]
    run = next(x for x in recs if x["type"] == "run")
    assert run["argv"][0] == "hmb-bench" and run["ranks"] == 2 and run["mpi"]["impl"] == "MPICH"
    results = [x for x in recs if x["type"] == "result"]
    assert {x["params"]["mode"] for x in results} == {"latency", "bw", "bibw", "msgrate"}
    assert all(x["status"] == "ok" for x in results)


def test_reframe_runs_the_modules_hmb_bench(eb_module):
    """A centre's ReFrame with the module loaded runs the prebuilt hmb-bench from it (the fixture's
    prebuilt route), and its checks pass."""
    _need_reframe()
    rfm = eb_module / "rfm"
    rfm.mkdir()
    r = _module_shell(eb_module, f"{REFRAME} -C {SETTINGS} -c {CHECKS} -p mpich -n hmb_p2p_check --prefix {rfm} "
                                 f"--report-file {rfm}/run-report.reframe --nocolor -S build_hmb_bench.prebuilt=hmb-bench -r",
                      cwd=rfm)
    assert r.returncode == 0, r.stdout[-3000:]
    cases = cases_of(json.loads((rfm / "run-report.reframe").read_text()))
    assert len(cases) == 5 and all(c["result"] == "pass" for c in cases), [c["fail_reason"] for c in cases]
    build = next(c for c in cases if c["fixture"])
    found = (Path(build["outputdir"]) / "rfm_build.out").read_text()
    assert f"hmb-bench: {eb_module}/software/HMB/0.1.0/bin/hmb-bench" in found, found
    for case in cases:
        if not case["fixture"]:
            run = json.loads((Path(case["outputdir"]) / "hmb.jsonl").read_text().splitlines()[0])
            assert run["argv"][0] == "hmb-bench"      # the module's, found on PATH
