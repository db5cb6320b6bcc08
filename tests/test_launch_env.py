"""Library settings the start-up probe refuses (launch.environment): a set of variables that only
works together is kept; variables refused even alone are named; a failing combination is dropped."""
from __future__ import annotations

import types

import pytest

from hmb import launch


@pytest.fixture
def fake(monkeypatch):
    # The "library" starts unless: CELL without PACK (they must move together), or BAD at all,
    # or X and Y together.
    def accepts(target, settings):
        if "BAD" in settings:
            return False
        if "CELL" in settings and "PACK" not in settings:
            return False
        return not ("X" in settings and "Y" in settings)
    monkeypatch.setattr(launch, "library_accepts", accepts)
    return types.SimpleNamespace(impl=None, name="fake")


def test_variables_that_only_work_together_are_kept(fake):
    env, added = launch.environment(fake, 1, {"CELL": "65536", "PACK": "65536"}, None)
    assert added["CELL"] == "65536" and added["PACK"] == "65536" and "HMB_ENV_REFUSED" not in added


def test_a_variable_refused_alone_is_named_and_left_out(fake, capsys):
    env, added = launch.environment(fake, 1, {"CELL": "1", "PACK": "1", "BAD": "1"}, None)
    assert "BAD" not in added and added["HMB_ENV_REFUSED"] == "BAD=1"
    assert added["CELL"] == "1"
    assert "does not start with BAD=1" in capsys.readouterr().err


def test_a_failing_combination_is_dropped_whole(fake):
    env, added = launch.environment(fake, 1, {"X": "1", "Y": "2"}, None)
    assert "X" not in added and "Y" not in added
    assert added["HMB_ENV_REFUSED"] == "X=1 Y=2"


def test_threads_are_pinned_only_inside_bound_ranks(monkeypatch):
    # mpiexec binds ranks only while they fit the cores; beyond that every rank's mask is the
    # whole machine and OMP_PROC_BIND=close would put each rank's thread 0 on the same core.
    from hmb import mpi as hmpi
    impl = hmpi.MPI("mpich", "mpich", None, "mpicc", "mpiexec")
    target = types.SimpleNamespace(impl=impl, name="mpich")
    monkeypatch.setattr(launch.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(hmpi.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(launch, "library_accepts", lambda t, s: True)
    monkeypatch.setattr(impl, "env", lambda: {})
    _, bound = launch.environment(target, 2, {}, None, ranks=2, launcher="mpiexec")
    _, unbound = launch.environment(target, 1, {}, None, ranks=9, launcher="mpiexec")
    _, srun = launch.environment(target, 1, {}, None, ranks=9, launcher="srun")
    assert (bound["OMP_PROC_BIND"], bound["OMP_PLACES"]) == ("close", "cores")
    assert unbound["OMP_PROC_BIND"] == "false" and "OMP_PLACES" not in unbound
    assert srun["OMP_PROC_BIND"] == "close"   # srun --cpu-bind=cores binds every rank
    assert "-bind-to" in impl.launch_args(2) and impl.launch_args(9)[-1] == "none"


def test_oversubscribed_open_mpi_launches_yield_unless_the_user_chose(monkeypatch, capsys):
    # 4 cores: 2 x 2 fits, 2 x 4 and 9 x 1 do not. Open MPI then yields when idle (said once);
    # MPICH gets nothing; a value in the user's environment wins; srun is left alone.
    from hmb import mpi as hmpi
    monkeypatch.setattr(launch.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(hmpi.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(launch, "library_accepts", lambda t, s: True)
    monkeypatch.setattr(launch, "_said_oversub", {})
    monkeypatch.delenv("OMPI_MCA_mpi_yield_when_idle", raising=False)
    ompi = hmpi.MPI("openmpi", "openmpi", None, "mpicc", "mpiexec")
    mpich = hmpi.MPI("mpich", "mpich", None, "mpicc", "mpiexec")
    for impl in (ompi, mpich):
        monkeypatch.setattr(impl, "env", lambda: {})
    t_ompi = types.SimpleNamespace(impl=ompi, name="openmpi")
    t_mpich = types.SimpleNamespace(impl=mpich, name="mpich")
    yield_1 = {"OMPI_MCA_mpi_yield_when_idle": "1"}

    def added(target, threads, ranks, launcher="mpiexec", env_added=None):
        return launch.environment(target, threads, env_added or {}, None, ranks=ranks, launcher=launcher)[1]

    assert "OMPI_MCA_mpi_yield_when_idle" not in added(t_ompi, 2, 2)
    assert yield_1.items() <= added(t_ompi, 4, 2).items()
    assert yield_1.items() <= added(t_ompi, 1, 9).items()
    assert capsys.readouterr().err.count("OMPI_MCA_mpi_yield_when_idle=1") == 1
    assert "OMPI_MCA_mpi_yield_when_idle" not in added(t_ompi, 1, 9, launcher="srun")
    assert "OMPI_MCA_mpi_yield_when_idle" not in added(t_mpich, 1, 9)
    assert added(t_ompi, 1, 9, env_added={"OMPI_MCA_mpi_yield_when_idle": "0"})["OMPI_MCA_mpi_yield_when_idle"] == "0"
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "0")
    assert "OMPI_MCA_mpi_yield_when_idle" not in added(t_ompi, 1, 9)
