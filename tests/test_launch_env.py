"""Library settings the start-up probe refuses (launch.environment): a set of variables that only
works together is kept; variables refused even alone are named; a failing combination is dropped."""
from __future__ import annotations

import types

import pytest

from hmb.run import launch


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
    from hmb.run import mpi as hmpi
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
    from hmb.run import mpi as hmpi
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


HYDRA_ABORT = ("hmb-bench: validation failed: bench=halo3d size=128 iteration=2 rank=3 partition=0: ...\n"
               "Abort(3) on node 3 (rank 3 in comm 496): application called MPI_Abort(comm=0x84000001, 3) - process 3\n")
OMPI5_ABORT = ("hmb-bench: hmb-bench: watchdog: ...\n" + "-" * 74 + "\n"
               "MPI_ABORT was invoked on rank 3 in communicator MPI COMM 3 DUP FROM 0\n"
               "  Proc: [[54314,1],3]\n  Errorcode: 4\n\nNOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.\n")
OMPI4_ABORT = "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\nwith errorcode 3.\n"


@pytest.mark.parametrize("rc,text,expected", [
    (9, HYDRA_ABORT, 3),          # hydra's SIGKILL status, seen 1 launch in 6 with 4 ranks on 2 cores
    (137, HYDRA_ABORT, 3),
    (-9, OMPI5_ABORT, 4),
    (9, OMPI4_ABORT, 3),
    (3, HYDRA_ABORT, 3),          # the launcher's own status when it is not a kill: unchanged
    (1, OMPI5_ABORT, 1),
    (9, "Killed\n", 9),           # a kill with no abort printed: the kill
    (9, HYDRA_ABORT + HYDRA_ABORT.replace(", 3)", ", 4)"), 9),   # two codes: no guess
])
def test_abort_code_is_the_ranks_where_the_launcher_returned_its_kill(rc, text, expected):
    assert launch.abort_code(rc, text) == expected
