"""No output over an input (issue 40): every writer refuses an output that is one of its inputs,
a FIFO, a device or a directory, and (without --force) a file of another kind; it writes through
a temporary file renamed into place, so a full disk leaves the old file and names it."""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import hmb_cli

HERE = Path(__file__).parent
REPO = HERE.parent
sys.path.insert(0, str(HERE / "data"))
import make_synthetic as synth  # noqa: E402

CONFIG = '[sweep]\nseed = 1\nmpis = ["mpich"]\noutput = "out/k.jsonl"\n[[bench]]\nname = "p2p"\nranks = 2\n'


def _results(path: Path, n: int = 48) -> Path:
    """A results file of n results (one launch)."""
    w = synth.Writer()
    run_id = w.run("p2p", "MPICH", "MPICH Version: 5.0.2", 2, 1, tag="t")
    import numpy as np
    for i in range(n):
        w.result(run_id, "p2p", {"size_bytes": 8 << i % 20, "test": "latency", "window": i},
                 {"latency_us": (np.full(5, 1.0 + i), "us", False)})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in w.lines))
    return path


def one_line(p, *words, rc=2):
    assert p.returncode == rc and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    for w in words:
        assert w in p.stderr, p.stderr


def test_export_over_its_own_input_is_refused(tmp_path):
    """hmb export --csv victim.jsonl victim.jsonl replaced the results with their CSV, exit 0."""
    victim = _results(tmp_path / "victim.jsonl")
    before = victim.read_bytes()
    one_line(hmb_cli(["export", "--csv", victim, victim]), f"--csv {victim}: is also an input")
    one_line(hmb_cli(["export", "--csv", victim, victim, "--force"]), "is also an input")   # never, even forced
    one_line(hmb_cli(["export", "--csv", victim, tmp_path]), "is also an input")   # a directory: its *.jsonl
    assert victim.read_bytes() == before


def test_slurm_script_over_results_or_its_config_is_refused(tmp_path):
    """hmb slurm k.toml ... -o out/k.jsonl replaced a 48-result file with a script; -o k.toml
    replaced the config it reads."""
    cfg = tmp_path / "k.toml"
    cfg.write_text(CONFIG)
    res = _results(tmp_path / "out" / "k.jsonl")
    before = res.read_bytes()
    argv = ["slurm", cfg, "--nodes", "1", "--ranks-per-node", "2", "--threads", "1", "--mpi", "system", "-o"]
    one_line(hmb_cli(argv + [res]), f"slurm -o {res}: holds an HMB results file", "--force")
    assert res.read_bytes() == before
    one_line(hmb_cli(argv + [cfg, "--force"]), f"slurm -o {cfg}: is also an input")
    assert cfg.read_text() == CONFIG
    other = tmp_path / "other.toml"
    other.write_text(CONFIG)
    one_line(hmb_cli(argv + [other]), "holds a sweep config (TOML)")
    p = hmb_cli(argv + [other, "--force"])     # asked for: replaced, executable
    assert p.returncode == 0 and other.read_text().startswith("#!") and os.access(other, os.X_OK), p.stderr
    script = tmp_path / "job.sbatch"
    assert hmb_cli(argv + [script]).returncode == 0 and hmb_cli(argv + [script]).returncode == 0   # its own kind


def test_export_over_a_config_or_a_study_needs_force(tmp_path):
    res = _results(tmp_path / "r.jsonl")
    for name, text, kind in (("c.toml", CONFIG, "a sweep config"),
                             ("s.toml", '[study]\nname = "x"\n', "a study"),
                             ("other.jsonl", (tmp_path / "r.jsonl").read_text(), "an HMB results file")):
        f = tmp_path / name
        f.write_text(text)
        one_line(hmb_cli(["export", "--csv", f, res]), f"--csv {f}: holds {kind}")
        assert f.read_text() == text
    p = hmb_cli(["export", "--csv", tmp_path / "c.toml", res, "--force"])
    assert p.returncode == 0 and (tmp_path / "c.toml").read_text().startswith("bench,metric,"), p.stderr
    p = hmb_cli(["export", "--csv", tmp_path / "c.toml", res])      # now a CSV of its own: replaced
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("argv", [
    ["export", "--csv", "{out}", "{res}"],
    ["slurm", "{cfg}", "--nodes", "1", "--ranks-per-node", "2", "--threads", "1", "--mpi", "system", "-o", "{out}"],
    ["compare", "{res}", "{res}", "-o", "{out}"],
    ["check", "--json", "{out}"],
    ["sweep", "{cfg}", "--output", "{out}"],
], ids=["export", "slurm", "compare", "check", "sweep"])
@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_fifo_a_device_or_a_directory_as_output_is_one_line(tmp_path, argv, kind):
    """-o FIFO hung (export, slurm); check --json DIR failed only after 6 s of measuring."""
    cfg = tmp_path / "k.toml"
    cfg.write_text(CONFIG)
    res = _results(tmp_path / "r.jsonl")
    out = {"fifo": tmp_path / "fifo", "device": Path("/dev/full"), "directory": tmp_path / "d"}[kind]
    if kind == "fifo":
        os.mkfifo(out)
    elif kind == "directory":
        out.mkdir()
    args = [a.format(out=out, res=res, cfg=cfg) for a in argv]
    env = dict(os.environ, HMB_NO_MPI="1", PYTHONPATH=str(REPO / "python"))
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "hmb.cli", *args], capture_output=True, text=True, timeout=60,
                       env=env, cwd=tmp_path)
    took = time.monotonic() - t0
    what = {"fifo": "a FIFO, not a file", "device": "a device, not a file", "directory": "is a directory"}[kind]
    one_line(p, f"{out}: {what}")
    assert took < 20, took


def _fsize_limit(limit: int):
    def limit_it():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return limit_it


def test_a_full_disk_leaves_the_old_file_and_names_it(tmp_path):
    """RLIMIT_FSIZE stands in for a full disk (EFBIG once a file would grow past it). The
    script was written in place: the old file was cut to the limit and the error named no
    file ('hmb: File too large')."""
    cfg = tmp_path / "k.toml"
    cfg.write_text(CONFIG)
    old = tmp_path / "job.sbatch"
    old.write_text("#!/bin/bash\necho the old script\n")
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), PYTHONDONTWRITEBYTECODE="1")
    p = subprocess.run([sys.executable, "-m", "hmb.cli", "slurm", str(cfg), "--nodes", "1", "--ranks-per-node", "2",
                        "--threads", "1", "--mpi", "system", "-o", str(old)], capture_output=True, text=True,
                       timeout=60, env=env, cwd=tmp_path, preexec_fn=_fsize_limit(200))
    one_line(p, f"cannot write slurm -o {old}: File too large (the old file is unchanged)")
    assert old.read_text() == "#!/bin/bash\necho the old script\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["job.sbatch", "k.toml"]   # no temporary file left


def test_write_atomic_keeps_the_old_permissions_and_writes_through_a_link(tmp_path):
    from hmb.data import outputs
    target = tmp_path / "real.csv"
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    outputs.write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new" and (target.stat().st_mode & 0o777) == 0o640


def test_check_json_refuses_another_kind_before_measuring(tmp_path):
    res = _results(tmp_path / "r.jsonl")
    env = dict(os.environ, HMB_NO_MPI="1")    # nothing may be launched
    p = hmb_cli(["check", "--json", res], env=env)
    one_line(p, f"check: --json {res}: holds an HMB results file (JSON Lines), not an hmb check record")


def test_kind_of():
    from hmb.data import outputs
    assert outputs.kind_of(REPO / "configs" / "demo.toml") == "config"
    assert outputs.kind_of(REPO / "python" / "hmb" / "studies" / "seed000-partitioned.toml") == "study"
    assert outputs.kind_of(REPO / "README.md") is None
