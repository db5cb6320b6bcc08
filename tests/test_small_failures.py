"""Smaller items of issue 40, each a case that failed before: output in an ASCII locale, Ctrl-C at
start-up, MPI lists refused alike, a zero threshold, a stale hmb-bench after git pull."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hmb.run import launch, mpi

from conftest import hmb_cli

HERE = Path(__file__).parent
SCRIPT = Path(sys.executable).parent / "hmb"


def test_study_list_prints_in_an_ascii_locale():
    """PYTHONIOENCODING=ascii: a UnicodeEncodeError traceback (an author's name, Yıltan)."""
    p = subprocess.run([str(SCRIPT), "study", "list"], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONIOENCODING="ascii"))
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "seed000-partitioned" in p.stdout and "Y\\u0131ltan" in p.stdout, p.stdout[:300]


def _maps(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/maps") as f:
            return f.read()
    except OSError:
        return ""


def test_ctrl_c_during_start_up_is_one_line_and_130(tmp_path):
    """A Ctrl-C while hmb was still importing (numpy, pandas: most of its start-up) gave Python's
    KeyboardInterrupt traceback. The signal is sent once numpy's extension is loaded, i.e. in the
    middle of the imports."""
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps({"type": "run", "schema": 1, "run_id": "a", "bench": "p2p"}) + "\n")
    p = subprocess.Popen([str(SCRIPT), "report", str(f), "-o", str(tmp_path / "rep")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while "numpy" not in _maps(p.pid) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert (p.returncode, err) == (130, "hmb: interrupted\n"), (p.returncode, err)


@pytest.mark.parametrize("value, why", [
    ("", "--mpi: no MPI named"),
    ("mpich,,openmpi", "--mpi: an empty name in the list 'mpich,,openmpi'"),
    ("mpich,", "an empty name in the list"),
    ("mpich,mpich", "--mpi: mpich named twice"),
])
@pytest.mark.parametrize("command", [
    ["study", "run", "seed000-partitioned", "--dry-run", "--mpi"],
    ["conform", "--json", "{tmp}/c.jsonl", "--mpi"],
    ["slurm", "configs/demo.toml", "--nodes", "1", "--ranks-per-node", "2", "--threads", "2", "--mpi"],
    ["sweep", "configs/demo.toml", "--dry-run", "--mpi"],
], ids=["study", "conform", "slurm", "sweep"])
def test_a_list_of_mpis_with_a_hole_or_a_name_twice_is_refused_alike(tmp_path, command, value, why):
    """hmb study run --mpi '' ran the default; 'mpich,,openmpi' and 'mpich,mpich' were accepted
    (conform ran mpich's checks twice)."""
    argv = [a.format(tmp=tmp_path) for a in command] + [value]
    p = hmb_cli(argv, cwd=HERE.parent, env=dict(os.environ, HMB_NO_MPI="1"))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    if not (command[0] == "slurm" and value == ""):     # slurm names its own empty option first
        assert why in p.stderr, p.stderr
    assert not (tmp_path / "c.jsonl").exists()


@pytest.mark.parametrize("value", ["0", "0K", "0+nocma"])
def test_settings_refuses_a_zero_threshold(value):
    """hmb settings --threshold 0 printed usable-looking settings (UCX_RNDV_THRESH=0, ...)."""
    p = hmb_cli(["settings", "--threshold", value])
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "0 B is no eager threshold" in p.stderr, p.stderr
    assert p.stdout == ""


def test_a_zero_threshold_in_a_sweep_is_refused(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[sweep]\nmpis = ["openmpi"]\n[[bench]]\nname = "p2p"\nsettings = ["default", 0]\n')
    p = hmb_cli(["sweep", cfg, "--dry-run"], env=dict(os.environ, HMB_BENCH_OVERRIDE=f"{sys.executable} "
                                                      f"{HERE / 'data' / 'fake_hmb_bench.py'}"))
    assert p.returncode == 2 and "0 B is no eager threshold" in p.stderr, p.stderr


def _tree(tmp_path: Path) -> mpi.MPI:
    """A repository of its own (src, include, CMakeLists.txt) and a built hmb-bench in it."""
    for name in ("src/harness/main.c", "include/hmb/hmb.h", "CMakeLists.txt", "cmake/x.cmake"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    impl = mpi.MPI("mpich", "mpich", None, "mpicc", "mpiexec")
    return impl


def test_a_source_newer_than_the_build_makes_run_and_sweep_build_first(tmp_path, monkeypatch):
    """After a git pull, hmb run and hmb sweep launched the stale hmb-bench (only study run built
    first). They build when a source is newer than the last build, and only then."""
    monkeypatch.setattr(mpi, "REPO", tmp_path)
    impl = _tree(tmp_path)
    built = []

    def fake_build(m, quiet=True):
        built.append(m.name)
        m.build_dir.mkdir(parents=True, exist_ok=True)
        m.bench.write_text("binary")
        (m.build_dir / mpi.BUILT_STAMP).touch()
        return m.bench

    monkeypatch.setattr(mpi, "find", lambda name, install=True: impl)
    monkeypatch.setattr(mpi, "build", fake_build)
    monkeypatch.delenv(launch.OVERRIDE_VAR, raising=False)
    launch.prepare("mpich", build="stale")
    assert built == ["mpich"]                              # missing: built
    launch.prepare("mpich", build="stale")
    assert built == ["mpich"]                              # up to date: not built again
    later = time.time() + 5
    os.utime(tmp_path / "src" / "harness" / "main.c", (later, later))   # git pull
    launch.prepare("mpich", build="stale")
    assert built == ["mpich", "mpich"]
    os.utime(tmp_path / "include" / "hmb" / "hmb.h", (later + 5, later + 5))
    assert mpi.stale(impl)


@pytest.mark.parametrize("argv", [["run", "p2p"], ["sweep", "configs/demo.toml"]])
def test_run_and_sweep_ask_for_a_build_when_stale(monkeypatch, argv):
    asked = []

    def prepare(name, build="missing"):
        asked.append(build)
        raise launch.LaunchError("stop here")

    monkeypatch.setattr(launch, "prepare", prepare)
    monkeypatch.delenv(launch.OVERRIDE_VAR, raising=False)
    p = hmb_cli(argv, cwd=HERE.parent)
    assert p.returncode == 2 and "stop here" in p.stderr and asked == ["stale"], (asked, p.stderr)
