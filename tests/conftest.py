"""Shared fixtures: builds of hmb-bench per MPI, the pure core library, and a launcher.

Integration tests are parametrised over MPICH and Open MPI (their wheels; installed on
demand into the repo). Set HMB_TEST_MPIS=mpich to restrict, HMB_BUILD_ROOT to use another
build tree.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pytest

from hmb.run import launch as hlaunch
from hmb.run import mpi as hmpi

TEST_MPIS = [m for m in os.environ.get("HMB_TEST_MPIS", "mpich,openmpi").split(",") if m]

# Open MPI's libfabric BTL probes its providers at start-up: 1.0 s of every Open MPI launch here
# (1.32 s against 0.32 s for a 2-rank p2p run), a third of the suite's time, for a component
# that one node's ranks never use (ob1 talks to them over btl sm; `hmb-bench` records the
# variable in its header's env). A test that sets OMPI_MCA_btl itself replaces this; the product
# never sets it: a sweep runs the library's own selection.
os.environ.setdefault("OMPI_MCA_btl", "^ofi")
# The tests' launches through hmb (launch.machine_lock: one hmb launch at a time per machine) take a
# lock of this test session's own: a test waits for no other session's sweep on a shared machine
# (fake launches waited minutes behind real ones, and timed out). The lock's own tests set theirs.
os.environ.setdefault("HMB_MACHINE_LOCK", os.path.join(tempfile.mkdtemp(prefix="hmb-tests-"), "lock"))
_built: dict[str, hmpi.MPI] = {}


def get_mpi(name: str) -> hmpi.MPI:
    """The named MPI with hmb-bench built for it (once per test session)."""
    if os.environ.get("HMB_NO_MPI"):
        pytest.fail(f"this test needs an MPI library ({name}) but is not marked mpi, and HMB_NO_MPI is set "
                    "(make test-fast): see NEEDS_MPI in tests/conftest.py")
    if name not in _built:
        impl = hmpi.find(name)
        hmpi.build(impl)
        _built[name] = impl
    return _built[name]


@pytest.fixture(scope="session")
def built_bench():
    """The newest hmb-bench built here, the default MPI's built first when none is: for a test
    that reads its descriptors (the launch needs `hmb run --help` lists, a benchmark's run-control
    options) and launches nothing. Without it such a test read whatever another test had built by
    then: it failed when it ran first (a CI run on a clean clone). It uses no get_mpi, so it stays
    out of the `mpi` group; under HMB_NO_MPI it finds the build `make test-fast` makes first."""
    return hmpi.local_binary(True)


# Open MPI 5.0.11 (wheel), partitioned communication with more than one partitioned request
# between two ranks: receive buffers written while their requests are inactive, sends complete
# before their data left, runs hang (docs/findings.md; scripts/repro/partitioned_rounds.c shows it
# without HMB). The pattern benchmarks catch it with exit 3 "library conformance problem" (wrong
# data, or a partition or request the library never completes, bounded by --wait-bound),
# intermittently on 2 cores, every launch on 16. Their tests check the
# partitioned mode on MPICH; on Open MPI it has one test of its own, which asserts what must hold
# there in every launch (partitioned_outcome), so the finding stays visible in every run instead
# of making other tests flaky.
OPENMPI_PARTITIONED = ("Open MPI 5.0.11 partitioned requests between one pair of ranks: data written "
                       "outside the request's active time (docs/findings.md)")


def pattern_modes(mpi_name: str) -> tuple:
    """The threading modes a pattern benchmark's tests run under this MPI (see above)."""
    if get_mpi(mpi_name).flavor == "openmpi":
        return ("single", "multiple")
    return ("single", "multiple", "partitioned")


def compute_floor_us(run: "BenchRun", request_us: float) -> float:
    """The least a compute of request_us may measure in this launch: the request itself. The
    benchmarks that vary a delay (mt, stencil3d, part, halo3d, sweep3d) compute the TIME kind,
    which returns only once the clock has passed the request (src/harness/compute.c); the run
    header's start-up check records both kinds (calibration.check)."""
    assert run.header()["calibration"]["check"], "no start-up compute check in the run header"
    return request_us


# A launch of a pattern's partitioned mode on Open MPI ends within this many seconds: the
# benchmarks' bounded MPI_Parrived polling (--wait-bound, default 10 s) names a partition that
# never arrives long before the watchdog.
PARTITIONED_END_S = 30


def partitioned_outcome(mpi_name: str, run: BenchRun, took_s: float) -> bool:
    """What must hold for a partitioned-mode launch: under MPICH it passes; under Open MPI
    (OPENMPI_PARTITIONED) it ends within PARTITIONED_END_S, and either passes or fails with exit 3
    naming a library conformance problem: wrong data, a partition MPI_Parrived never reports, or
    requests the library never completes (hmb_waitall_bounded) — never the watchdog (exit 4).
    True when it passed (the caller then checks its results: every byte was validated, on every
    iteration)."""
    if run.rc == 0:
        return True
    assert get_mpi(mpi_name).flavor == "openmpi", run.stderr
    assert took_s < PARTITIONED_END_S, (took_s, run.stderr)
    assert run.rc == 3 and "library conformance problem" in run.stderr, (run.rc, run.stderr)
    return False


def run_partitioned_bounded(mpi_name: str, args: list[str], **kw) -> "BenchRun | None":
    """Run a pattern's partitioned mode with a 15 s watchdog and judge it by partitioned_outcome:
    the run when it passed, for the caller to check, else None."""
    started = time.monotonic()
    r = run_bench(mpi_name, args + ["--timeout", "15s"], timeout=60, **kw)
    return r if partitioned_outcome(mpi_name, r, time.monotonic() - started) else None


# --inject never-complete:ITER (TEST ONLY): in that iteration the harness's bounded waits
# (hmb_parrived_bounded, hmb_parrived_each_bounded, hmb_waitall_bounded) see nothing arrive. With a
# short --wait-bound the point must end with exit 3 naming the wait, well before the watchdog.
PLANTED_BOUND = ["--wait-bound", "2s", "--timeout", "60s"]


def run_planted_never_complete(mpi_name: str, args: list[str], iteration: int, **kw) -> "BenchRun":
    """Launch with a wait that never completes planted at `iteration`, and check what must hold in
    every launch: exit 3, a validation failure (not the watchdog's timeout) at that iteration
    naming the planted wait and the 2 s bound, within seconds. The run, for the caller to check
    which wait it names."""
    started = time.monotonic()
    r = run_bench(mpi_name, args + PLANTED_BOUND + ["--inject", "never-complete:" + str(iteration)], timeout=90, **kw)
    took = time.monotonic() - started
    assert r.rc == 3, (r.rc, r.stderr)
    failures = [x for x in r.records if x.get("type") == "failure"]
    assert failures and {f["kind"] for f in failures} == {"validation"}, failures
    assert all(f["iteration"] == iteration for f in failures), failures
    assert all("(--inject never-complete: planted by the test): library conformance problem" in f["message"]
               for f in failures), failures
    assert took < 30, f"took {took:.0f} s: the 2 s bound did not end it"
    return r


@pytest.fixture(params=TEST_MPIS)
def mpi_name(request):
    return request.param


def usage_cases(argnames: str, cases: list, on_every_mpi: int = 2, ids: list | None = None) -> tuple[str, list]:
    """The parameters of a test of hmb-bench's own usage errors, for pytest.mark.parametrize(*...):
    "mpi_name," + argnames, every case under the first library of TEST_MPIS (MPICH) and the first
    on_every_mpi cases under every library too. The rules are hmb-bench's, the same under any
    library; what a library changes is the way a usage error leaves (rank 0's one line, exit 2,
    through its launcher), which the first cases check under each. Every further case under Open MPI
    was a launch (0.3-0.5 s of make test's critical path) that checked nothing new."""
    params = []
    for i, case in enumerate(cases):
        case = case if isinstance(case, tuple) and "," in argnames else (case,)
        params += [pytest.param(m, *case, id=f"{m}-{ids[i]}" if ids else None)
                   for m in TEST_MPIS if m == TEST_MPIS[0] or i < on_every_mpi]
    return "mpi_name," + argnames, params


# The `mpi` marker: a test that needs an MPI library (builds hmb-bench or launches ranks) is marked
# when collected, so `make test-fast` (pytest -m "not mpi") runs the rest. A test needs one when it
# or anything it calls (its module's functions, this file's, its fixtures, followed through their
# code) uses the mpi_name fixture or get_mpi, the one door to a built library here. A test that
# launches in a way the code does not show (an `hmb run` command line) carries @pytest.mark.mpi
# itself: under HMB_NO_MPI=1 (make test-fast) every MPI library is refused (hmb.run.mpi.find), so a
# test that needs one and is not marked fails there, naming it.
NEEDS_MPI = frozenset({"get_mpi", "mpi_name"})


def _names(code, out: set) -> set:
    out.update(code.co_names)
    out.update(code.co_varnames)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            _names(const, out)
    return out


def needs_mpi(func, seen: set | None = None) -> bool:
    """Whether func, or a function of this test tree it refers to, reaches NEEDS_MPI."""
    seen = set() if seen is None else seen
    func = getattr(func, "__wrapped__", func)
    code = getattr(func, "__code__", None)
    if code is None or code in seen:
        return False
    seen.add(code)
    names = _names(code, set())
    if names & NEEDS_MPI:
        return True
    here = Path(__file__).parent
    for name in names:
        g = func.__globals__.get(name)
        if callable(g) and getattr(g, "__code__", None) is not None \
                and Path(g.__code__.co_filename).parent == here and needs_mpi(g, seen):
            return True
    return False


@pytest.hookimpl(tryfirst=True)   # before -m deselects by the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("mpi"):
            continue
        info = getattr(item, "_fixtureinfo", None)
        fixtures = [d.func for defs in (info.name2fixturedefs.values() if info else ()) for d in defs]
        if NEEDS_MPI & set(getattr(item, "fixturenames", ())) or \
                any(needs_mpi(f) for f in [getattr(item, "function", None), *fixtures] if f is not None):
            item.add_marker(pytest.mark.mpi)
    groups_dir = os.environ.get(_GROUPS_DIR)
    if groups_dir and hasattr(config, "workerinput"):
        ids = [item.nodeid for item in items if (item.get_closest_marker("mpi") or item.get_closest_marker("lab"))
               and not item.get_closest_marker("no_launch")]
        Path(groups_dir, config.workerinput["workerid"]).write_text("\n".join(ids))


# `make test` runs on two pytest-xdist workers with --dist loadgroup, and every test that launches
# ranks (marked `mpi` above; `lab`) is in one group: they all run on one worker, one after the
# other (their ranks never share the 2 cores with another launch's ranks; each MPI is built once),
# while the tests that launch nothing run on the other worker. xdist's own loadgroup reads a group
# from an "@group" suffix it adds to the node id on the worker, which pytest 9.2 no longer lets it
# add (pytest-xdist issue 1386: the groups are then silently ignored; in a run here two MPI tests
# launched at once and one failed). So each worker writes the ids of its group's tests into a
# directory the controller made (_GROUPS_DIR), and the controller's scheduler (xdist's hook
# pytest_xdist_make_scheduler) reads them when it makes its work units.
# A test marked `no_launch` needs a built library (it is `mpi`: not in make test-fast) but launches
# no ranks (it reads descriptors): it stays out of the group, so its seconds of Python run on the
# other worker instead of lengthening the group, the run's longest.
_GROUPS_DIR = "HMB_TEST_XDIST_GROUPS"


def pytest_configure(config):
    # here, not in pyproject.toml's list: editing that file makes `make` set up the .venv again
    config.addinivalue_line("markers", "no_launch: an mpi test that reads hmb-bench (its descriptors) but starts "
                            "none of it under a launcher: make test runs it beside the launches, not in their group")
    if not hasattr(config, "workerinput") and getattr(config.option, "dist", "no") == "loadgroup":
        os.environ[_GROUPS_DIR] = tempfile.mkdtemp(prefix="hmb-test-groups-")   # the workers inherit it


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput") and os.environ.get(_GROUPS_DIR):
        import shutil
        shutil.rmtree(os.environ.pop(_GROUPS_DIR), ignore_errors=True)


@pytest.hookimpl(optionalhook=True)   # a run without xdist (-p no:xdist) knows no such hook
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class MPIGroupScheduling(LoadGroupScheduling):
        """loadgroup, with the tests whose ids the workers wrote in one work unit, "mpi"."""
        mpi_ids: set | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.mpi_ids is None:
                self.mpi_ids = set()
                for f in Path(os.environ[_GROUPS_DIR]).iterdir():
                    self.mpi_ids.update(f.read_text().splitlines())
                assert self.mpi_ids, "no worker wrote the ids of its mpi tests"
            return "mpi" if nodeid in self.mpi_ids else super()._split_scope(nodeid)

    return MPIGroupScheduling(config, log)


@dataclasses.dataclass
class BenchRun:
    rc: int
    stdout: str
    stderr: str
    records: list

    def results(self, status: str | None = "ok") -> list:
        return [r for r in self.records if r.get("type") == "result"
                and (status is None or r.get("status") == status)]

    def header(self) -> dict:
        return next(r for r in self.records if r.get("type") == "run")


# Open MPI's launcher now and then forwards a stray byte (a NUL, or one that is not UTF-8)
# in front of a rank's line; nothing hmb-bench writes contains such characters (tabs and
# newlines are kept).
_LAUNCHER_NOISE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")


def clean_launcher_output(text: str) -> str:
    """Launcher-forwarded output with stray control bytes removed."""
    return _LAUNCHER_NOISE.sub("", text)


def hmb_lines(stderr: str, prefix: str = "hmb-bench") -> list[str]:
    """hmb-bench's own stderr lines (launchers add their banners around them)."""
    lines = (line.strip() for line in clean_launcher_output(stderr).splitlines())
    return [line for line in lines if line.startswith(prefix)]


def one_hmb_line(stderr: str) -> str:
    """The single line hmb-bench wrote on stderr, asserting there is exactly one."""
    lines = hmb_lines(stderr)
    assert len(lines) == 1, f"expected one hmb-bench line on stderr, got:\n{stderr}"
    return lines[0]


def launch_lock(impl: hmpi.MPI, cmd: list):
    """What a test's launch of impl holds: Open MPI's launches hold the machine lock, as hmb's
    own do (launch.machine_lock). make test's group runs its launches one after another on one
    worker, but a run with another --dist, or the group lost again (pytest-xdist issue 1386),
    launches two at once, and an Open MPI launch starting or ending beside another broke
    prterun's start-up (docs/findings.md, PMIx's listener thread). MPICH's take none (hydra has
    not shown it)."""
    if impl.flavor != "openmpi":
        return contextlib.nullcontext()
    return hlaunch.machine_lock(" ".join(map(str, cmd))[:300])


def mpi_run(impl: hmpi.MPI, cmd: list, **kw) -> subprocess.CompletedProcess:
    """subprocess.run of a test's own MPI launch (not hmb-bench's: run_bench), under launch_lock."""
    with launch_lock(impl, cmd):
        return subprocess.run(cmd, **kw)


def run_bench(mpi_name: str, args: list[str], ranks: int = 2, threads: int = 1,
              timeout: float = 180, env: dict | None = None, tmp_path: Path | None = None,
              bind: bool = True) -> BenchRun:
    """Launch hmb-bench under the named MPI; parse the JSON Lines it wrote."""
    impl = get_mpi(mpi_name)
    jpath = None
    full_args = list(args)
    if tmp_path is not None:
        jpath = Path(tmp_path) / f"out-{mpi_name}-{os.getpid()}-{len(list(Path(tmp_path).iterdir()))}.jsonl"
        full_args += ["--json", str(jpath)]
    cmd = impl.launch_args(ranks, threads, bind) + [str(impl.bench)] + full_args
    e = impl.env()
    e["OMP_NUM_THREADS"] = str(threads)
    if env:
        e.update(env)
    with launch_lock(impl, cmd):
        for attempt in (1, 2):
            shm_before = hlaunch.shm_names()
            try:
                p = subprocess.run(cmd, capture_output=True, timeout=timeout, env=e)
            except subprocess.TimeoutExpired as exc:
                raise AssertionError(f"hmb-bench hung past {timeout}s: {' '.join(cmd)}\n"
                                     f"{(exc.stdout or b'').decode(errors='replace')}\n"
                                     f"{(exc.stderr or b'').decode(errors='replace')}")
            cause = hlaunch.machine_failure(p.stderr.decode(errors="replace"), p.returncode)
            if attempt == 1 and cause and not p.stdout:
                # the launcher did not start the job, no rank ran (prterun's start-up, once in a full
                # suite here; also seen on other projects' CI): launch again, once, and say so, as
                # hmb check does.
                warnings.warn(f"{cause}; launched again")
                continue
            break
        if p.returncode != 0:   # an aborted launch's segments (hmb run does the same: launch.run_streaming)
            hlaunch.remove_left_shm(shm_before)
    records = []
    if jpath is not None and jpath.exists():
        records = [json.loads(line) for line in jpath.read_text().splitlines() if line.strip()]
    # hydra returns 9 now and then for a rank's MPI_Abort(3) (hmb.run.launch.abort_code): the rank's code
    rc = hlaunch.abort_code(p.returncode, p.stderr.decode(errors="replace"))
    return BenchRun(rc, clean_launcher_output(p.stdout.decode(errors="replace")),
                    clean_launcher_output(p.stderr.decode(errors="replace")), records)



def _fresh_process_state() -> None:
    """Empty what hmb caches once per process (a binary's descriptors, the launch probes' answers,
    the lines said once, the launch-needs rules), so an in-process `hmb` call sees what a new
    process would (a test's fake hmb-bench lists other benchmarks than the one before it), and the
    parser, whose `hmb run --help` lists those rules as they were when it was made."""
    from hmb import commands
    from hmb.data import descriptors
    from hmb.run import launch, requirements
    for cache in (descriptors._cache, launch._accepted, launch._said_oversub, launch._paths):
        cache.clear()
    requirements._rules = None
    commands.make_parser.cache_clear()


def hmb_cli(args, cwd=None, env: dict | None = None, timeout: float | None = None) -> subprocess.CompletedProcess:
    """`hmb ARGS` as a subprocess would see it (exit status, stdout and stderr as text), run in this
    process: hmb.cli.main(ARGS) with the working directory, the environment and file descriptors 1
    and 2 swapped for the call (what hmb's own child processes write is captured too). An exit
    through SystemExit (argparse: --help 0, a usage error 2) gives its status; an exception that
    escapes main gives its traceback on stderr and status 1, as the interpreter would. A Python
    start-up per call (0.5 s idle, 1-2 s loaded) was most of `make test-fast`'s time; the console
    script itself is launched for real by tests/test_cli.py::test_console_script_runs.
    `timeout` is accepted for the subprocess helpers' signature (pytest-timeout bounds the test).
    What hmb keeps per process starts empty, as in a new process, and is emptied again after."""
    import contextlib
    import io
    import traceback
    from hmb import cli
    _fresh_process_state()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_fds = [os.dup(1), os.dup(2)]
    files = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
    streams = [io.TextIOWrapper(open(os.dup(f.fileno()), "wb", buffering=0), encoding="utf-8",
                                errors="replace", write_through=True) for f in files]
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        for fd, f in zip((1, 2), files):
            os.dup2(f.fileno(), fd)
        with contextlib.redirect_stdout(streams[0]), contextlib.redirect_stderr(streams[1]):
            try:
                rc = cli.main([str(a) for a in args])
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if not isinstance(e.code, (int, type(None))):
                    print(e.code, file=sys.stderr)
            except Exception:  # noqa: BLE001 -- what the interpreter prints for an uncaught one
                traceback.print_exc()
                rc = 1
    finally:
        for fd, saved in zip((1, 2), saved_fds):
            os.dup2(saved, fd)
            os.close(saved)
        os.chdir(saved_cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(saved_env)
        for stream in streams:
            stream.close()
        _fresh_process_state()   # nor does a later in-process test see this call's caches
    out = []
    for f in files:
        f.seek(0)
        out.append(f.read().decode("utf-8", errors="replace"))
        f.close()
    return subprocess.CompletedProcess(["hmb", *map(str, args)], 0 if rc is None else rc, out[0], out[1])

# Every JSON / JSON Lines file a test leaves in its tmp_path is validated against the shipped
# schema (hmb validate) when the test ends; files in tmp_path_factory directories at the end of
# the session. A test that plants bad records names those files: @pytest.mark.planted_json("a.jsonl").
# docs/output-schema.md.
from hmb.data import validate as _hvalidate  # noqa: E402  (jsonschema missing = an error, not a skip)

_json_checked: set = set()
_json_planted_names: set = set()   # planted by tests whose files live in tmp_path_factory dirs


def _bad_json_under(root: Path, planted: frozenset = frozenset()) -> list:
    bad = []
    for f in sorted(root.rglob("*")):
        if f.suffix in (".json", ".jsonl") and f.is_file() and f not in _json_checked:
            _json_checked.add(f)
            if f.name not in planted:
                bad += _hvalidate.validate_file(f)[1]
    return bad


@pytest.fixture(autouse=True)
def _validate_json_outputs(request):
    marker = request.node.get_closest_marker("planted_json")
    planted = frozenset(marker.args if marker else ())
    yield
    tmp_path = request.node.funcargs.get("tmp_path")   # set when the test or a fixture used it
    if tmp_path is None:
        _json_planted_names.update(planted)
        return
    bad = _bad_json_under(tmp_path, planted)
    assert not bad, "output not valid against python/hmb/data/schema:\n" + "\n".join(bad)


@pytest.fixture(autouse=True, scope="session")
def _validate_json_outputs_session(tmp_path_factory):
    yield
    bad = _bad_json_under(tmp_path_factory.getbasetemp(), frozenset(_json_planted_names))
    assert not bad, "output not valid against python/hmb/data/schema:\n" + "\n".join(bad)
