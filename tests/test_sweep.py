"""hmb sweep: grid expansion, requirement splitting, seeded shuffling, resume after a kill.

No MPI needed: a fake hmb-bench (tests/data/fake_hmb_bench.py) stands in through the
HMB_BENCH_OVERRIDE testing hook.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from hmb.data import results
from hmb.run import sweep

from conftest import hmb_cli

HERE = Path(__file__).parent
FAKE = HERE / "data" / "fake_hmb_bench.py"
REPO = HERE.parent


def write_config(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "sweep.toml"
    p.write_text(text)
    return p


GRID = """
[sweep]
mpis = ["mpich", "openmpi"]
repeats = 2
seed = 11
output = "out.jsonl"
args = { budget = "0.2s" }

[[bench]]
name = "part"
ranks = 2
threads = [1, 2]
args = { sizes = "64K,1M", partitions = ["1", "2", "4"], noise = ["none", "uniform:4"], compute = "1ms" }
"""


def test_expansion_covers_the_grid(tmp_path):
    cfg = sweep.load(str(write_config(tmp_path, GRID)))
    specs = sweep.expand(cfg)
    # 2 MPIs x 2 thread counts x 3 partition counts x 2 noise models x 2 repeats
    assert len(specs) == 2 * 2 * 3 * 2 * 2
    assert len({s.tag for s in specs}) == len(specs)
    points = Counter((s.mpi, s.threads, s.args["partitions"], s.args["noise"]) for s in specs)
    assert set(points.values()) == {2}                      # every point twice (repeats)
    for s in specs:
        assert s.args["sizes"] == "64K,1M" and s.args["compute"] == "1ms"  # scalars pass through
        assert s.args["budget"] == "0.2s"                   # [sweep] args reach every bench
        assert s.ranks == 2 and s.env_added == {}


def test_shuffle_is_deterministic_for_a_seed(tmp_path):
    cfg = sweep.load(str(write_config(tmp_path, GRID)))
    specs = sweep.expand(cfg)
    a = [s.tag for s in sweep.order(specs, 11)]
    b = [s.tag for s in sweep.order(sweep.expand(sweep.load(str(write_config(tmp_path, GRID)))), 11)]
    c = [s.tag for s in sweep.order(specs, 12)]
    assert a == b
    assert a != c and sorted(a) == sorted(c)
    assert a != [s.tag for s in specs]                      # actually shuffled


def test_seed_is_recorded_when_not_given(tmp_path):
    cfg = sweep.load(str(write_config(tmp_path, GRID.replace("seed = 11\n", ""))))
    assert not cfg.seed_given and isinstance(cfg.seed, int)


def test_requirements_split_async_impl_and_mt_modes(tmp_path):
    cfg = sweep.load(str(write_config(tmp_path, """
[sweep]
mpis = ["mpich", "openmpi"]
seed = 1
[[bench]]
name = "async"
args = { op = "pt2pt", progress = "none,test:10,impl,thread" }
[[bench]]
name = "mt"
threads = 4
args = { test = "rate", mode = "shared,comm,stream,funneled,everywhere" }
""")))
    specs = sweep.expand(cfg)
    by = {(s.bench, s.mpi, s.args.get("progress") or s.args.get("mode")): s for s in specs}
    impl = by[("async", "mpich", "impl")]
    assert impl.env_added == {"MPIR_CVAR_ASYNC_PROGRESS": "1"}
    assert by[("async", "mpich", "none,test:10,thread")].env_added == {}
    # Open MPI has no such variable: impl stays in the one launch (the benchmark says unsupported)
    assert by[("async", "openmpi", "none,test:10,impl,thread")].env_added == {}
    assert by[("mt", "mpich", "shared,comm")].env_added == {"MPIR_CVAR_CH4_NUM_VCIS": "4"}
    assert by[("mt", "mpich", "stream")].env_added == {"MPIR_CVAR_CH4_RESERVE_VCIS": "4", "MPIR_CVAR_CH4_NUM_VCIS": "5"}
    assert by[("mt", "mpich", "funneled")].env_added == {}
    ev = by[("mt", "mpich", "everywhere")]
    assert (ev.ranks, ev.threads) == (8, 1)                 # T single-threaded processes per side
    assert by[("mt", "openmpi", "shared,comm,stream,funneled")].threads == 4


def fake_env(tmp_path: Path, sleep_s: float = 0.0, **extra) -> dict:
    env = dict(os.environ)
    env.update({"HMB_BENCH_OVERRIDE": f"{sys.executable} {FAKE}", "FAKE_LOG": str(tmp_path / "fake.log"),
                "FAKE_SLEEP_S": str(sleep_s), "PYTHONPATH": str(REPO / "python")}, **extra)
    return env


RESUME = """
[sweep]
mpis = ["mpich"]
repeats = 1
seed = 5
output = "out.jsonl"
timeout = "60s"

[[bench]]
name = "p2p"
args = { mode = "latency", sizes = ["8,16,32", "64,128,256", "512,1024,2048", "4096,8192,16384", "1,2,3", "4,5,6"] }
"""


def hmb(args, env, cwd, **kw):
    return hmb_cli(args, env=env, cwd=cwd, **kw)


def launch_records(path: Path) -> list[dict]:
    return [r for r in map(json.loads, path.read_text().splitlines()) if r.get("type") == "launch"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "sigkill"])
def test_resume_after_killed_sweep_keeps_finished_and_redoes_none(tmp_path, sig):
    cfg = write_config(tmp_path, RESUME)
    env = fake_env(tmp_path, sleep_s=0.15)
    out = tmp_path / "out.jsonl"
    # SIGINT as a terminal's Ctrl-C delivers it: a test run started in the background (`make test &`
    # in a script) passes SIGINT on ignored, and Python then installs no KeyboardInterrupt handler.
    proc = subprocess.Popen([sys.executable, "-m", "hmb.cli", "sweep", str(cfg)], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    # Kill in the middle of a launch: after two have finished and a third has started.
    while time.monotonic() < deadline:
        log = (tmp_path / "fake.log").read_text().split("\n") if (tmp_path / "fake.log").exists() else []
        if out.exists() and len(launch_records(out)) >= 2 and sum(ln.startswith("start") for ln in log) >= 3:
            break
        time.sleep(0.02)
    else:
        proc.kill()
        pytest.fail("sweep did not get going")
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    time.sleep(0.5)  # let an orphaned child (SIGKILL case) take its SIGTERM
    finished_before = {r["tag"] for r in launch_records(out)}
    assert 2 <= len(finished_before) < 6
    results_before = [r for r in map(json.loads, out.read_text().splitlines()) if r.get("type") == "result"]

    # the pause between points was there to stop it mid-launch; the resumed sweep needs none
    r = hmb(["sweep", str(cfg), "--resume"], fake_env(tmp_path), tmp_path)
    assert r.returncode == 0, r.stderr
    launches = launch_records(out)
    tags = Counter(rec["tag"] for rec in launches)
    assert len(tags) == 6 and set(tags.values()) == {1}     # every launch recorded once
    assert all(rec["status"] == "done" for rec in launches)
    starts = Counter(ln.split()[1] for ln in (tmp_path / "fake.log").read_text().splitlines()
                     if ln.startswith("start"))
    for tag in finished_before:
        assert starts[tag] == 1                             # none finished was redone
    assert sum(starts.values()) <= 6 + 1                    # only the interrupted one ran twice
    # every finished point's results are still there, and the redone launch is not counted twice
    after = [r for r in map(json.loads, out.read_text().splitlines()) if r.get("type") == "result"]
    assert all(rec in after for rec in results_before)
    rs = list(results.scan([out]))
    assert len(rs) == 6 * 3
    assert len({(x.run.get("tag"), x.params["size_bytes"]) for x in rs}) == 18


def test_sweep_refuses_to_mix_into_existing_output(tmp_path):
    cfg = write_config(tmp_path, RESUME)
    env = fake_env(tmp_path)
    assert hmb(["sweep", str(cfg)], env, tmp_path).returncode == 0
    r = hmb(["sweep", str(cfg)], env, tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--resume" in r.stderr
    r = hmb(["sweep", str(cfg), "--resume"], env, tmp_path)
    assert r.returncode == 0
    assert (tmp_path / "fake.log").read_text().count("start") == 6    # nothing re-run
    assert len(launch_records(tmp_path / "out.jsonl")) == 6


def test_an_abort_the_launcher_returned_as_its_kill_is_recorded_with_the_ranks_code(tmp_path):
    """hydra returns 9 (the SIGKILL it stopped the other ranks with) for a rank's MPI_Abort(3) now
    and then: the launch record carries the rank's 3, and the launcher's 9 beside it."""
    cfg = write_config(tmp_path, RESUME)
    tag_part = sweep.expand(sweep.load(str(cfg)))[1].tag
    env = fake_env(tmp_path, FAKE_FAIL_TAG_SUBSTR=tag_part, FAKE_FAIL_AS_HYDRA_KILL="1")
    r = hmb(["sweep", str(cfg)], env, tmp_path)
    assert r.returncode == 1 and "failed (exit 3)" in r.stderr and "validation failed" in r.stderr, r.stderr
    recs = {rec["tag"]: rec for rec in launch_records(tmp_path / "out.jsonl")}
    assert (recs[tag_part]["rc"], recs[tag_part]["launcher_rc"], recs[tag_part]["status"]) == (3, 9, "failed")
    assert all("launcher_rc" not in rec for tag, rec in recs.items() if tag != tag_part)


def test_failed_launch_recorded_and_not_retried(tmp_path):
    cfg = write_config(tmp_path, RESUME)
    tag_part = sweep.expand(sweep.load(str(cfg)))[1].tag
    env = fake_env(tmp_path, FAKE_FAIL_TAG_SUBSTR=tag_part)
    r = hmb(["sweep", str(cfg)], env, tmp_path)
    assert r.returncode == 1 and "failed (exit 2)" in r.stderr and "planted failure" in r.stderr
    recs = {rec["tag"]: rec for rec in launch_records(tmp_path / "out.jsonl")}
    assert recs[tag_part]["status"] == "failed" and recs[tag_part]["rc"] == 2
    rec = recs[[t for t in recs if t != tag_part][0]]
    assert rec["status"] == "done" and rec["rc"] == 0
    # the launch record carries what the driver did
    assert rec["env_added"]["OMP_NUM_THREADS"] == "1" and rec["env_added"]["HMB_TAG"] == rec["tag"]
    assert rec["env_added"]["OMP_PLACES"] == "cores" and rec["env_added"]["OMP_PROC_BIND"] == "close"
    assert "--raw" in rec["command"] and "--json" in rec["command"] and rec["elapsed_s"] >= 0
    assert rec["point"]["bench"] == "p2p" and rec["point"]["mpi"] == "mpich"
    before = (tmp_path / "fake.log").read_text()
    assert hmb(["sweep", str(cfg), "--resume"], env, tmp_path).returncode == 0
    assert (tmp_path / "fake.log").read_text() == before


def test_sweep_record_and_dry_run(tmp_path):
    cfg = write_config(tmp_path, RESUME)
    env = fake_env(tmp_path)
    r = hmb(["sweep", str(cfg), "--dry-run"], env, tmp_path)
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 6 and not (tmp_path / "out.jsonl").exists()
    assert hmb(["sweep", str(cfg)], env, tmp_path).returncode == 0
    first = json.loads((tmp_path / "out.jsonl").read_text().splitlines()[0])
    assert first["type"] == "sweep" and first["seed"] == 5 and len(first["order"]) == 6
    assert first["order"] == [line.split()[0] for line in r.stdout.splitlines()]


def test_missing_benchmark_is_skipped_only_when_asked(tmp_path, capsys):
    cfg = sweep.load(str(write_config(tmp_path, GRID.replace('"mpich", "openmpi"', '"mpich"')
                                      .replace("repeats = 2", "repeats = 1"))))
    cfg.output = str(tmp_path / "o.jsonl")
    os.environ.update({k: v for k, v in fake_env(tmp_path, FAKE_BENCHES="p2p mt").items()
                       if k.startswith(("HMB_", "FAKE_"))})
    try:
        with pytest.raises(sweep.ConfigError, match="not in this hmb-bench build"):
            sweep.run(cfg, quiet=True)
        assert sweep.run(cfg, skip_missing=True, quiet=True) == 0
        assert "skipping part on mpich" in capsys.readouterr().err
    finally:
        for k in ("HMB_BENCH_OVERRIDE", "FAKE_BENCHES", "FAKE_LOG", "FAKE_SLEEP_S"):
            os.environ.pop(k, None)


def test_system_mpi_uses_its_detected_flavor(tmp_path, monkeypatch, built_bench):
    # A system Intel MPI gets I_MPI_ASYNC_PROGRESS, not MPICH's variable.
    from hmb.run import mpi as hmpi
    monkeypatch.delenv("HMB_BENCH_OVERRIDE", raising=False)
    monkeypatch.setattr(hmpi, "find", lambda name, install=True: hmpi.MPI(
        "system", "impi", None, "mpicc", "mpiexec"))
    cfg = sweep.load(str(write_config(tmp_path, """
[sweep]
mpis = ["system"]
seed = 1
[[bench]]
name = "async"
args = { progress = "impl" }
""")))
    (spec,) = sweep.expand(cfg)
    assert spec.env_added == {"I_MPI_ASYNC_PROGRESS": "1"}


@pytest.mark.parametrize("text, what", [
    ('[sweep]\nseed = 1\n[[bench]]\nname = "p2p"\nargs = { sizes = [] }\n', "bench[0].args.sizes: empty list"),
    ('[sweep]\nseed = 1\nargs = { sizes = [] }\n[[bench]]\nname = "p2p"\n', "sweep.args.sizes: empty list"),
    ('[sweep]\nseed = 1\nrepeats = [3, 1]\n[[bench]]\nname = "p2p"\n', "sweep.repeats: expected a positive integer"),
    ('[sweep]\nseed = 1\n[[bench]]\nname = "p2p"\nrepeats = "2"\n', "bench[0].repeats: expected a positive integer"),
    ('bench = [1, 2]\n', "bench[0] must be a table"),
])
def test_bad_config_values_are_one_line(tmp_path, text, what):
    path = write_config(tmp_path, text)
    with pytest.raises(sweep.ConfigError) as e:
        sweep.load(str(path))
    assert what in str(e.value) and "\n" not in str(e.value)
    r = subprocess.run([sys.executable, "-m", "hmb.cli", "sweep", str(path), "--dry-run"], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_resume_without_a_seed_keeps_the_first_order(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps({"type": "sweep", "seed": 4242, "order": []}) + "\n"
                   + json.dumps({"type": "sweep", "seed": 7, "order": []}) + "\n")
    assert sweep.recorded_seed(out, 1) == 4242
    assert sweep.recorded_seed(tmp_path / "none.jsonl", 1) == 1


def test_tag_counts_a_settings_variables_not_only_its_name():
    """A preset whose variables changed (presets began to move the network paths too) is a new
    launch for --resume; the default setting's tags stay as they were."""
    from hmb.run.sweep import tag_of
    a = tag_of("proto", "mpich", 2, 1, {"sizes": "1K"}, 0, "16K", {"MPIR_CVAR_A": "16384"})
    b = tag_of("proto", "mpich", 2, 1, {"sizes": "1K"}, 0, "16K", {"MPIR_CVAR_A": "16384", "UCX_RNDV_THRESH": "16384"})
    assert a != b and a == tag_of("proto", "mpich", 2, 1, {"sizes": "1K"}, 0, "16K", {"MPIR_CVAR_A": "16384"})
    assert tag_of("proto", "mpich", 2, 1, {"sizes": "1K"}, 0) == tag_of("proto", "mpich", 2, 1, {"sizes": "1K"}, 0,
                                                                        "default", {})
