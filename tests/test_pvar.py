"""MPI_T performance variables (src/harness/pvar.c, SPEC §3.6): `hmb-bench --list-pvars` and the
module's known-answer program hmb-pvar-selftest under each MPI.

The selftest posts N receives nothing matches yet, then has N messages arrive that nobody asked
for, reading the queue lengths at each step; the answers (N, then 0 once drained) hold on any
machine and load. A library without the variables (the MPICH wheel exposes none) must say
"unavailable" and never produce a number.
"""
from __future__ import annotations

import json
import re
import subprocess

import pytest

from conftest import get_mpi, hmb_lines, mpi_run

N = 7
# Queue-length variables per library: Open MPI ob1 (per peer, bound to a communicator), MPICH recvq.
POSTED = ("pml_ob1_posted_recvq_length", "posted_recvq_length")
UNEXPECTED = ("pml_ob1_unexpected_msgq_length", "unexpected_recvq_length")


def launch(mpi_name: str, program: str, args: list[str], ranks: int) -> subprocess.CompletedProcess:
    impl = get_mpi(mpi_name)
    cmd = impl.launch_args(ranks) + [str(impl.build_dir / program)] + args
    return mpi_run(impl, cmd, capture_output=True, text=True, timeout=120, env=impl.env())


@pytest.fixture
def selftest(mpi_name) -> dict:
    p = launch(mpi_name, "hmb-pvar-selftest", [str(N)], ranks=2)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_list_pvars_lists_as_many_variables_as_it_counts(mpi_name):
    p = launch(mpi_name, "hmb-bench", ["--list-pvars"], ranks=1)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    m = re.match(r"(\d+) MPI_T performance variables in \S", lines[0])
    assert m, lines[0]
    count = int(m.group(1))
    rows = [line.split() for line in lines[2:]] if count else []
    assert len(lines) == (count + 2 if count else 1)
    if count:
        assert lines[1].split() == ["name", "class", "type", "binding", "description"]
    by_name = {row[0]: row for row in rows}
    if "pml_ob1_posted_recvq_length" in by_name:  # Open MPI: per-peer queue lengths on a communicator
        for name in ("pml_ob1_posted_recvq_length", "pml_ob1_unexpected_msgq_length"):
            assert by_name[name][1:4] == ["size", "unsigned", "communicator"], by_name[name]


def test_list_pvars_takes_no_arguments(mpi_name):
    p = launch(mpi_name, "hmb-bench", ["--list-pvars", "--json"], ranks=1)
    assert p.returncode == 2
    assert hmb_lines(p.stderr) == [
        "hmb-bench: --list-pvars takes no arguments (got '--json')"]


def test_selftest_rejects_bad_count():
    impl = get_mpi("mpich")
    p = subprocess.run([str(impl.build_dir / "hmb-pvar-selftest"), "0"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and "1..1000" in p.stderr


def test_unavailable_variables_yield_no_numbers(selftest):
    """Names the library lacks (MPICH's on Open MPI, all of them on the MPICH wheel) come out as
    unavailable: no class, no count, null in every sample, the reason on the result record."""
    missing = [name for name, v in selftest["vars"].items() if not v["available"]]
    if selftest["library"].startswith("Open MPI"):
        assert "posted_recvq_match_attempts" in missing
        # Bound to a window: found, but the module binds communicators or nothing.
        assert "osc_rdma_put_retry_count" in missing
        assert selftest["record"]["pvar.osc_rdma_put_retry_count.reason"] == \
            "bound to an object other than a communicator"
    assert missing
    record = selftest["record"]
    for name in missing:
        v = selftest["vars"][name]
        assert v["count"] == 0 and v["unit"] == ""
        for phase in ("at_start", "posted", "posted_drained", "unexpected", "unexpected_drained"):
            assert selftest[phase][name] is None, (phase, name)
        assert record[f"pvar.{name}.available"] == 0
        assert f"pvar.{name}.class" not in record
        if name != "osc_rdma_put_retry_count":
            assert v["class"] == "unavailable"
            assert record[f"pvar.{name}.reason"] == "not exposed by this MPI library"


def _queue_var(selftest: dict, candidates: tuple) -> str:
    found = [name for name in candidates if selftest["vars"][name]["available"]]
    if not found:
        pytest.skip(f"{' '.join(selftest['library'].split(',')[0].split())} exposes none of {', '.join(candidates)}: "
                    "the counts are unavailable there (checked by test_unavailable_variables_yield_no_numbers)")
    return found[0]


@pytest.mark.parametrize("queue, phase", [(POSTED, "posted"), (UNEXPECTED, "unexpected")])
def test_queue_length_known_answer(selftest, queue, phase):
    """N unmatched receives -> posted-queue length N for that peer; N unasked-for messages ->
    unexpected-queue length N; both 0 before and once drained."""
    name = _queue_var(selftest, queue)
    assert selftest["at_start"][name] == 0
    assert selftest[phase][name] == N
    assert selftest[f"{phase}_drained"][name] == 0
    other = "unexpected" if phase == "posted" else "posted"
    assert selftest[other][name] == 0, f"{name} moved in the {other}-queue case"
    record = selftest["record"]
    assert record[f"pvar.{name}.available"] == 1
    assert record[f"pvar.{name}.class"] == selftest["vars"][name]["class"]
    if name.startswith("pml_ob1_"):  # one value per peer of the 2-rank communicator
        assert record[f"pvar.{name}.binding"] == "communicator"
        assert record[f"pvar.{name}.count"] == 2
    else:
        assert record[f"pvar.{name}.binding"] == "none"
        assert record[f"pvar.{name}.count"] == 1


PHASES = ("at_start", "posted", "posted_drained", "unexpected", "unexpected_drained")


def test_cumulative_variables_never_decrease(selftest):
    """Counters and timers only grow (the instrumented MPICH: match attempts, time matching; a
    class-qualified name picks MPICH's counter twin of a timer). Absolute timer reads may carry
    a library offset (MPICH 4.0.2), so only the order of the samples is checked."""
    cumulative = [name for name, v in selftest["vars"].items()
                  if v["available"] and v["class"] in ("counter", "timer")]
    if not cumulative:
        pytest.skip(f"{' '.join(selftest['library'].split(',')[0].split())} exposes no counter or timer "
                    "among the selftest's variables")
    for name in cumulative:
        samples = [selftest[phase][name] for phase in PHASES]
        assert samples == sorted(samples), (name, samples)
        if name.startswith("counter:"):
            assert selftest["vars"][name]["class"] == "counter"
    if "unexpected_recvq_match_attempts" in cumulative:  # the N receives each searched the queue
        grew = selftest["unexpected_drained"]["unexpected_recvq_match_attempts"] - \
            selftest["unexpected"]["unexpected_recvq_match_attempts"]
        assert grew >= N
