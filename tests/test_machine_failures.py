"""Nothing lost when the machine fails (issue 40): a launch's outcome says whose failure it was;
the machine's are `incomplete` and `hmb sweep --resume` runs them again, keeping every attempt's
record and counting every planned point exactly once.

No MPI needed: the fake hmb-bench (tests/data/fake_hmb_bench.py) fails as the machine does.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from hmb.data import results, tidy, validate
from hmb.run import sweep

from conftest import hmb_cli

HERE = Path(__file__).parent
REPO = HERE.parent
FAKE = HERE / "data" / "fake_hmb_bench.py"

CONFIG = """
[sweep]
mpis = ["mpich"]
seed = 3
output = "out.jsonl"
timeout = "{timeout}"

[[bench]]
name = "p2p"
args = {{ mode = "latency", sizes = ["8,16,32", "64,128,256", "512,1024,2048"] }}
"""
PLANNED = 9     # 3 launches x 3 points


def fake_env(tmp_path: Path, **extra) -> dict:
    env = dict(os.environ)
    env.update({"HMB_BENCH_OVERRIDE": f"{sys.executable} {FAKE}", "FAKE_LOG": str(tmp_path / "fake.log"),
                "FAKE_SLEEP_S": "0", "PYTHONPATH": str(REPO / "python"),
                "HMB_CONCURRENT": "1"}, **extra)   # a fake bench measures nothing: it holds no machine lock
    return env


def config(tmp_path: Path, timeout: str = "60s") -> Path:
    p = tmp_path / "c.toml"
    p.write_text(CONFIG.format(timeout=timeout))
    return p


def records(path: Path, kind: str) -> list[dict]:
    return [r for r in map(json.loads, path.read_text().splitlines()) if r.get("type") == kind]


def starts(tmp_path: Path) -> Counter:
    return Counter(ln.split()[1] for ln in (tmp_path / "fake.log").read_text().splitlines() if ln.startswith("start"))


def every_point_once(out: Path) -> None:
    """hmb validate accepts the file, and every reader counts each planned point once."""
    n, bad = validate.validate_file(out)
    assert not bad, bad
    points = Counter((r.run.get("tag"), r.params["size_bytes"]) for r in results.scan([out], warn=None))
    assert len(points) == PLANNED and set(points.values()) == {1}, points
    df = tidy.load([out], warn=False)
    assert len(df) == PLANNED and not df.duplicated(["tag", "size_bytes", "metric"]).any()


@pytest.mark.parametrize("machine, why, timeout", [
    ("srun", "srun: error: Unable to create step for job 4242", "60s"),
    ("daemon", "1 of 3 planned points written, though the launcher returned 0", "60s"),
    ("watchdog", "hmb-bench: watchdog: p2p size=64", "60s"),
    ("hang", "killed after the 2 s timeout", "2s"),
], ids=["step-refused", "launcher-returned-0", "watchdog", "timeout"])
def test_the_machines_failure_is_incomplete_and_resume_runs_it_again(tmp_path, machine, why, timeout):
    """A step srun refused, a launcher that returned 0 with 1 of 3 points (Open MPI's mpiexec
    after 'A daemon failed to report back'), a rank left hanging, the timeout: recorded failed
    (or done), never run again by --resume."""
    cfg = config(tmp_path, timeout)
    victim = sweep.expand(sweep.load(str(cfg)))[1].tag
    env = fake_env(tmp_path, FAKE_MACHINE_TAG_SUBSTR=victim, FAKE_MACHINE=machine)
    r = hmb_cli(["sweep", cfg], env=env, cwd=tmp_path)
    out = tmp_path / "out.jsonl"
    assert r.returncode == 1, r.stderr
    rec = {x["tag"]: x for x in records(out, "launch")}
    assert (rec[victim]["status"], rec[victim]["attempt"]) == ("incomplete", 1) and why in rec[victim]["why"], rec
    assert all(x["status"] == "done" for t, x in rec.items() if t != victim)
    last = r.stderr.splitlines()[-1]
    assert "1 incomplete" in last and f"hmb sweep {cfg} --resume --output out.jsonl" in last, r.stderr
    assert f"1 of 3 launches incomplete, cut short by the machine: {victim} (" in r.stderr, r.stderr

    r = hmb_cli(["sweep", cfg, "--resume"], env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert starts(tmp_path) == Counter({victim: 2, **{t: 1 for t in rec if t != victim}})
    tries = [x for x in records(out, "launch") if x["tag"] == victim]
    assert [(x["attempt"], x["status"]) for x in tries] == [(1, "incomplete"), (2, "done")]   # each attempt kept
    assert records(out, "sweep")[-1]["rerun_incomplete"] == 1
    every_point_once(out)


def test_the_benchmarks_own_verdict_is_final(tmp_path):
    cfg = config(tmp_path)
    victim = sweep.expand(sweep.load(str(cfg)))[0].tag
    env = fake_env(tmp_path, FAKE_FAIL_TAG_SUBSTR=victim, FAKE_FAIL_AS_HYDRA_KILL="1")   # a rank's MPI_Abort(3)
    assert hmb_cli(["sweep", cfg], env=env, cwd=tmp_path).returncode == 1
    rec = {x["tag"]: x for x in records(tmp_path / "out.jsonl", "launch")}[victim]
    assert (rec["status"], rec["rc"], rec["attempt"]) == ("failed", 3, 1) and "validation failed" in rec["why"]
    assert hmb_cli(["sweep", cfg, "--resume"], env=env, cwd=tmp_path).returncode == 0
    assert starts(tmp_path)[victim] == 1


def test_a_launch_record_cut_by_a_full_disk_is_repaired_and_its_points_counted_once(tmp_path):
    """The results were written, the launch record after them cut mid-line by a full disk;
    --resume ran the launch again after the cut line: 18 ok results for 16 planned in a file
    hmb validate rejected."""
    cfg = config(tmp_path)
    env = fake_env(tmp_path)
    out = tmp_path / "out.jsonl"
    assert hmb_cli(["sweep", cfg], env=env, cwd=tmp_path).returncode == 0
    data = out.read_bytes()
    last = data.rstrip(b"\n").rsplit(b"\n", 1)[1]
    cut_tag = json.loads(last)["tag"]
    out.write_bytes(data[:len(data) - len(last) // 2])       # the last launch record, half written
    r = hmb_cli(["sweep", cfg, "--resume"], env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "out.jsonl: cut off a partial last line" in r.stderr, r.stderr
    assert starts(tmp_path)[cut_tag] == 2
    tries = [x for x in records(out, "launch") if x["tag"] == cut_tag]
    assert [(x["attempt"], x["status"]) for x in tries] == [(2, "done")]   # the cut record's attempt counted
    assert len(records(out, "result")) == PLANNED + 3    # the first attempt's results stay, superseded
    every_point_once(out)


def _fsize_limit(limit: int):
    def limit_it():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return limit_it


def test_a_full_results_disk_stops_the_sweep_and_resume_completes_it(tmp_path):
    """RLIMIT_FSIZE stands in for a full file system (EFBIG where ENOSPC would be): the write that
    fails is named, the launch is incomplete, the lines before stay whole; once there is room,
    --resume ends with every planned point exactly once in a file hmb validate accepts."""
    cfg = config(tmp_path)
    env = fake_env(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    free = tmp_path / "free"
    free.mkdir()
    (free / "c.toml").write_text(cfg.read_text())
    assert hmb_cli(["sweep", free / "c.toml"], env=fake_env(free), cwd=free).returncode == 0
    ends = [i + 1 for i, b in enumerate((free / "out.jsonl").read_bytes()) if b == ord("\n")]
    launch_ends = [e for e, ln in zip(ends, (free / "out.jsonl").read_text().splitlines())
                   if json.loads(ln)["type"] == "launch"]
    limit = launch_ends[0] + (launch_ends[1] - launch_ends[0]) // 2    # room for one launch and a half
    p = subprocess.run([sys.executable, "-m", "hmb.cli", "sweep", str(cfg)], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120, preexec_fn=_fsize_limit(limit))
    out = tmp_path / "out.jsonl"
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr and "out.jsonl" in p.stderr and "File too large" in p.stderr, p.stderr
    assert f"make space, then: hmb sweep {cfg} --resume --output out.jsonl" in p.stderr.splitlines()[-1], p.stderr
    assert out.read_bytes().endswith(b"\n") and not validate.validate_file(out)[1]   # every line whole
    assert [x["status"] for x in records(out, "launch")][:1] == ["done"]
    r = hmb_cli(["sweep", cfg, "--resume"], env=fake_env(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    every_point_once(out)


def test_legacy_failed_records_of_the_machine_are_run_again():
    """Records written before launch outcomes had an attempt called a timeout (124) or a killed
    launcher failed: those are the machine's; a usage error (2) or validation failure (3) stays."""
    assert [sweep.is_final(r) for r in ({"status": "failed", "rc": 124}, {"status": "failed", "rc": 137},
                                        {"status": "failed", "rc": 3}, {"status": "failed", "rc": 2},
                                        {"status": "done", "rc": 0}, {"status": "incomplete", "attempt": 1},
                                        {"status": "failed", "rc": 1, "attempt": 1})] == \
        [False, False, True, True, True, False, True]


@pytest.mark.parametrize("rc, text, planned, written, status", [
    (3, "hmb-bench: validation failed: bench=p2p size=8", 3, 1, "failed"),
    (2, "hmb-bench p2p: --window 0: out of range", None, 0, "failed"),
    (1, "hmb-bench: cannot write results to 'o.jsonl': No space left on device", 3, 1, "incomplete"),
    (2, "hmb-bench: --json: cannot open 'o.jsonl' for appending", None, 0, "incomplete"),
    (2, "mpiexec: unrecognized argument", None, 0, "incomplete"),    # not hmb-bench's verdict
    (0, "", 3, 3, "done"),
    (0, "A daemon failed to report back", 3, 1, "incomplete"),
    (0, "", None, 0, "incomplete"),
    (137, "", 3, 2, "incomplete"),
])
def test_outcome(rc, text, planned, written, status):
    assert sweep.outcome(rc, text, planned, written)[0] == status


def _segment(name: str, age_s: float = 0, where: Path = Path("/dev/shm")) -> Path:
    p = where / name
    p.write_bytes(b"\0" * 4096)
    if age_s:
        t = time.time() - age_s
        os.utime(p, (t, t))
    return p


def test_segments_dead_launches_left_are_removed_by_the_next_launch(tmp_path):
    """A sweep driver killed with SIGKILL left MPICH's segments in /dev/shm, and no later run
    removed them. The next launch removes those of its library's names that no live process maps
    and that are not new; a segment still mapped, a new one, or another name stays."""
    import mmap
    tag = f"hmbtest{os.getpid()}"
    shm = tmp_path / "shm"      # HMB_SHM_DIR: no launch of another test sees these
    shm.mkdir()
    dead = _segment(f"mpich_shm_{tag}_0", age_s=600, where=shm)
    mapped = _segment(f"mpich_shm_{tag}_1", age_s=600, where=shm)
    young = _segment(f"mpich_shm_{tag}_2", where=shm)
    other = _segment(f"{tag}_not_mpi", age_s=600, where=shm)
    ompi = _segment(f"sm_segment.{tag}.0", age_s=600, where=shm)     # Open MPI's: not MPICH's launch to remove
    try:
        with open(mapped, "r+b") as f, mmap.mmap(f.fileno(), 4096):
            r = hmb_cli(["run", "p2p", "--", "--sizes", "8"], env=fake_env(tmp_path, HMB_SHM_DIR=str(shm)))
        assert r.returncode == 0, r.stderr
        assert not dead.exists() and mapped.exists() and young.exists() and other.exists() and ompi.exists()
        assert f"shared-memory segment the earlier launches left in {shm} (mpich_shm_{tag}_0)" in r.stderr, \
            r.stderr
    finally:
        for p in (dead, mapped, young, other, ompi):
            p.unlink(missing_ok=True)
