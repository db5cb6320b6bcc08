"""Hostile values to hmb-bench's options, and --inject faults that never fire (issue 29).

Every bad value is refused before MPI_Init in ONE stderr line that names the option, with exit 2,
so these cases run hmb-bench directly (one process, no launcher). A planted fault either fires (the
run ends in exit 3 or 4: tests/test_harness.py, test_p2p.py...) or fails the run: exit 2 before
the run when the iteration can never be reached, else one line at the end of the run.
"""
from __future__ import annotations

import subprocess

import pytest

from conftest import TEST_MPIS, get_mpi, hmb_lines, run_bench

MPI = "mpich" if "mpich" in TEST_MPIS else (TEST_MPIS[0] if TEST_MPIS else "mpich")


def direct(args: list[str]) -> subprocess.CompletedProcess:
    impl = get_mpi(MPI)
    return subprocess.run([str(impl.bench)] + args, capture_output=True, text=True, timeout=60, env=impl.env())


# (id, argv, the option named, a piece of the message)
HOSTILE = [
    # a control character inside a value: escaped, so the error stays one line
    ("newline-in-duration", ["part", "--compute", "1\nms"], "--compute", r'"1\nms"'),
    ("newline-in-size", ["p2p", "--sizes", "8\n16"], "--sizes", r"8\n16"),
    ("tab-in-choice", ["p2p", "--cache", "hot\t"], "--cache", r"hot\t"),
    ("escape-in-string-check", ["p2p", "--noise", "single:\x1b5"], "--noise", r"\x1B5"),
    ("newline-in-option-name", ["p2p", "--win\ndow", "4"], "--win", r"--win\ndow"),
    # durations have upper bounds (docs/methodology.md, "Options")
    ("compute-1e6s", ["part", "--compute", "1e6s"], "--compute", "above the maximum 3600s"),
    ("budget-2-days", ["p2p", "--budget", "172800s"], "--budget", "above the maximum 86400s"),
    ("timeout-8-days", ["p2p", "--timeout", "691200s"], "--timeout", "above the maximum 604800s"),
    ("wait-bound-2h", ["part", "--wait-bound", "7200s"], "--wait-bound", "above the maximum 3600s"),
    ("conform-delay-2h", ["conform", "--check", "pready-nonblocking", "--delay", "7200s"], "--delay", "maximum"),
    ("proto-min-compute-2h", ["proto", "--min-compute", "7200s"], "--min-compute", "maximum"),
    ("mt-shuffle-delay-2s", ["mt", "--shuffle-delay", "2s"], "--shuffle-delay", "maximum"),
    # only plain decimal numbers: no hex, inf, nan or surrounding spaces
    ("hex-duration", ["part", "--compute", "0x10ms"], "--compute", "0x10ms"),
    ("inf-duration", ["part", "--compute", "infms"], "--compute", "not a duration"),
    ("nan-duration", ["part", "--compute", "nanms"], "--compute", "not a duration"),
    ("space-duration", ["part", "--compute", " 1ms"], "--compute", "not a duration"),
    ("hex-double", ["async", "--calc-factor", "0x2"], "--calc-factor", "not a number"),
    ("inf-double", ["async", "--calc-factor", "inf"], "--calc-factor", "not a number"),
    ("space-double", ["async", "--calc-factor", "2 "], "--calc-factor", "not a number"),
    ("hex-choice-arg", ["async", "--progress", "test:0x10"], "--progress", "not a number"),
    ("nan-choice-arg", ["async", "--progress", "test:nan"], "--progress", "not a number"),
    ("hex-noise", ["part", "--noise", "single:0x10"], "--noise", "not a number"),
    ("space-face-partitions", ["halo3d", "--face-partitions", " 2"], "--face-partitions", "give tiles"),
    ("hex-int", ["p2p", "--iters", "0x10"], "--iters", "0x10"),
    # a positive duration that rounds to no time at all
    ("duration-rounds-to-zero", ["part", "--compute", "1e-9ns"], "--compute", "below the resolution of 1 ns"),
    ("duration-0.4ns", ["part", "--compute", "0.4ns"], "--compute", "below the resolution of 1 ns"),
    ("duration-underflow", ["part", "--compute", "1e-400s"], "--compute", "too small"),
    # an option the selected modes do not read
    ("p2p-post-latency", ["p2p", "--mode", "latency", "--post", "ahead"], "--post",
     "--mode latency does not use it (only --mode bw, msgrate do)"),
    ("p2p-window-latency", ["p2p", "--mode", "latency", "--window", "8"], "--window", "--mode latency does not use"),
    ("p2p-batch-bw", ["p2p", "--mode", "bw,bibw", "--batch", "4"], "--batch", "only --mode latency does"),
    ("proto-window-probe", ["proto", "--test", "probe", "--window", "8"], "--window", "--test probe does not use"),
    ("proto-view-tradeoff", ["proto", "--test", "tradeoff", "--view", "sender"], "--view", "only --test probe"),
    ("mt-get-window-rate", ["mt", "--test", "rate", "--get-window", "allocate"], "--get-window", "only --test get"),
    ("async-baseline-allreduce", ["async", "--op", "allreduce", "--baseline", "sendrecv"], "--baseline",
     "--op allreduce does not use it"),
    ("conform-requests-restarts", ["conform", "--check", "restarts", "--requests", "2"], "--requests",
     "only --check inactive-buffer"),
]


@pytest.mark.parametrize("argv,option,needle", [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_hostile_value_one_line_exit_2(argv, option, needle):
    p = direct(argv)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert option in lines[0] and needle in lines[0], lines[0]
    assert lines[0].startswith("hmb-bench"), lines[0]


def test_option_used_by_a_selected_mode_is_accepted():
    # --post ahead is read by bw: latency next to it does not make it unused (help exits 0 after parsing
    # would not check it, so ask --launch-needs, which parses everything and launches nothing)
    p = direct(["p2p", "--mode", "latency,bw", "--post", "ahead", "--launch-needs"])
    assert p.returncode == 0, p.stderr
    p = direct(["proto", "--test", "all", "--window", "8", "--view", "sender", "--launch-needs"])
    assert p.returncode == 0, p.stderr


# ---- --inject: every kind fires or fails the run

KINDS = ["corrupt", "never-complete", "stale", "wrong-slot", "hang"]


# --ci-target 0: every point runs exactly --warmup + --iters iterations; else at most --warmup + --max-iters
BOUNDS = [(["--warmup", "1", "--iters", "3", "--ci-target", "0"], 4, "0..3"),
          (["--warmup", "0", "--iters", "2", "--max-iters", "30"], 30, "0..29")]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bounds,at,iterations", BOUNDS, ids=["fixed", "adaptive"])
def test_inject_past_the_last_iteration_is_refused_before_the_run(kind, bounds, at, iterations):
    p = direct(["p2p", "--inject", f"{kind}:{at}", *bounds])
    assert p.returncode == 2, p.stderr
    (line,) = p.stderr.splitlines()
    assert f"--inject {kind}:{at}: never fires: each point runs iterations {iterations}" in line, line


@pytest.mark.parametrize("kind", KINDS)
def test_inject_never_reached_fails_the_run_at_its_end(kind, tmp_path):
    # Adaptive stop: the budget (1 us) ends the point at its first check, after 2 iterations, so
    # iteration 10 (within --max-iters) is never reached. The results are written, then exit 2.
    r = run_bench(MPI, ["p2p", "--mode", "latency", "--sizes", "8", "--inject", f"{kind}:10", "--warmup", "0",
                        "--iters", "2", "--max-iters", "20", "--budget", "1us", "--timeout", "60s"],
                  timeout=90, tmp_path=tmp_path)
    assert r.rc == 2, (r.rc, r.stderr)
    (line,) = hmb_lines(r.stderr)
    assert (f"hmb-bench p2p: --inject {kind}:10 never fired: no point reached iteration 10 "
            "(the longest ran iterations 0..1, warm-up included)") in line, line
    assert [x for x in r.records if x.get("type") == "result"], "the finished point's result is kept"


@pytest.mark.parametrize("argv,fault", [
    (["--mode", "bw", "--window", "1", "--sizes", "64K", "--inject", "wrong-slot:1"], "wrong-slot:1"),  # one slot
    (["--mode", "latency", "--sizes", "8", "--inject", "never-complete:1"], "never-complete:1"),  # no bounded wait
    (["--mode", "latency", "--sizes", "8", "--inject", "silent-partner"], "silent-partner"),  # conform's only
])
def test_inject_without_a_place_in_the_pattern_fails_the_run(argv, fault, tmp_path):
    r = run_bench(MPI, ["p2p", *argv, "--warmup", "0", "--iters", "2", "--ci-target", "0", "--timeout", "60s"],
                  timeout=90, tmp_path=tmp_path)
    assert r.rc == 2, (r.rc, r.stderr)
    (line,) = hmb_lines(r.stderr)
    assert f"--inject {fault} never fired: p2p ran" in line and "no rank planted it" in line, line


def test_inject_that_needs_validation_is_refused_without_it():
    p = direct(["p2p", "--inject", "stale:1", "--no-validate"])
    assert p.returncode == 2
    (line,) = p.stderr.splitlines()
    assert "--inject stale:1: never caught: --no-validate" in line, line
