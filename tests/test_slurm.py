"""hmb slurm: the sbatch script matches the golden file; impossible layouts are refused."""
from __future__ import annotations

from pathlib import Path

from conftest import hmb_cli

HERE = Path(__file__).parent
REPO = HERE.parent


def hmb(*args):
    return hmb_cli(args, cwd=REPO)


def test_matches_golden(tmp_path):
    out = tmp_path / "job.sbatch"
    r = hmb("slurm", "tests/data/slurm.toml", "--nodes", "2", "--ranks-per-node", "1", "--threads", "4",
            "--time", "00:30:00", "--partition", "short", "--account", "proj42", "-o", str(out))
    assert r.returncode == 0, r.stderr
    golden = HERE / "golden" / "slurm-2x1x4.sbatch"
    assert out.read_text() == golden.read_text()
    text = out.read_text()
    assert "--launcher srun" in text and "OMP_PLACES=cores" in text and "--resume" in text


def test_stdout_and_minimal_options():
    r = hmb("slurm", "tests/data/slurm.toml", "--nodes", "1", "--ranks-per-node", "2", "--threads", "4")
    assert r.returncode == 0 and r.stdout.startswith("#!/bin/bash\n")
    assert "#SBATCH --partition" not in r.stdout and "#SBATCH --cpus-per-task=4" in r.stdout


def test_layout_that_does_not_fit_is_refused():
    r = hmb("slurm", "tests/data/slurm.toml", "--nodes", "1", "--ranks-per-node", "1", "--threads", "4")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "ranks=2" in r.stderr
    r = hmb("slurm", "tests/data/slurm.toml", "--nodes", "2", "--ranks-per-node", "1", "--threads", "2")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "threads=4" in r.stderr
    r = hmb("slurm", "tests/data/slurm.toml", "--nodes", "2", "--ranks-per-node", "1", "--threads", "4",
            "--time", "soon")
    assert r.returncode == 2 and "--time" in r.stderr


def test_fit_check_counts_the_expanded_launches(tmp_path):
    # mt everywhere at T=2 launches 2·T = 4 ranks of one thread: 2 ranks per node do not fit.
    cfg = tmp_path / "mt.toml"
    cfg.write_text('[sweep]\nseed = 1\n[[bench]]\nname = "mt"\nranks = 2\nthreads = 2\n'
                   'args = { mode = "shared,everywhere" }\n')
    r = hmb("slurm", str(cfg), "--nodes", "1", "--ranks-per-node", "2", "--threads", "2")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "ranks=4" in r.stderr, r.stderr
    assert "mode=everywhere" in r.stderr
    r = hmb("slurm", str(cfg), "--nodes", "2", "--ranks-per-node", "2", "--threads", "2")
    assert r.returncode == 0, r.stderr


def test_script_into_a_missing_directory_is_one_line(tmp_path):
    r = hmb("slurm", "tests/data/slurm.toml", "--nodes", "2", "--ranks-per-node", "1", "--threads", "4",
            "-o", str(tmp_path / "nodir" / "job.sbatch"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
