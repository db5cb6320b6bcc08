"""Bad input and faults (issue 21): nothing lost, nothing miscounted, nothing injected.

Every file is planted by the test itself (tests/data/make_synthetic.py's Writer, or bytes
written here); each test reproduces one defect of the issue and checks the fixed behaviour.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from hmb import cli
from hmb.data import results, tidy
from conftest import get_mpi, hmb_cli, run_bench

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(DATA))
import make_synthetic as synth  # noqa: E402


def sweep_lines(n_launches: int = 4, first_run: int = 0, start="2024-06-01T12:00:00Z") -> list[dict]:
    """One sweep's output: a sweep record, then per launch a run, two results, a launch record."""
    w = synth.Writer()
    w.runs = first_run
    w.lines.append({"type": "sweep", "schema": 1, "seed": 1, "resume": False, "start_time": start})
    for i in range(n_launches):
        tag = f"p2p-mpich-abc-r{i}"
        run_id = w.run("p2p", "MPICH", "MPICH Version: 5.0.2", 2, 1, tag=tag)
        for size in (8, 64):
            w.result(run_id, "p2p", {"size_bytes": size, "test": "latency", "window": 1},
                     {"latency_us": (np.full(5, 1.0 + size / 100 + i / 10), "us", False)})
        w.lines.append({"type": "launch", "tag": tag, "status": "done", "rc": 0, "end_time": start,
                        "point": {"bench": "p2p", "mpi": "mpich", "repeat": i}})
    return w.lines


def text(lines: list[dict]) -> str:
    return "".join(json.dumps(x) + "\n" for x in lines)


def hmb(*argv) -> tuple[int, str, str]:
    p = hmb_cli(argv)
    return p.returncode, p.stdout, p.stderr


def assert_one_line_error(rc: int, err: str, *words):
    assert "Traceback" not in err, err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("hmb: "), err
    for w in words:
        assert w in err, err


# ---- 1-4: results miscounted or lost

def test_a_file_holding_its_records_twice_counts_them_once(tmp_path, capsys):
    one = text(sweep_lines())
    (tmp_path / "b.jsonl").write_text(one + one)
    rs = tidy.read([tmp_path / "b.jsonl"])
    assert rs.results == 8 and len(rs.runs) == 4
    assert rs.duplicates == 4 + 8 + 4          # runs, results, launch records
    assert "16 duplicate records" in capsys.readouterr().err


def test_two_sweeps_of_one_config_in_one_file_keep_both(tmp_path):
    # Same config twice: the same tags, other run ids; before, the second sweep's runs
    # superseded the first's ("24 results from 16 runs").
    both = text(sweep_lines()) + text(sweep_lines(first_run=4, start="2024-06-02T12:00:00Z"))
    (tmp_path / "c.jsonl").write_text(both)
    rs = tidy.read([tmp_path / "c.jsonl"])
    assert rs.results == 16 and len(rs.runs) == 8 and len(rs.launches) == 8
    # a resumed sweep is still one sweep: the redone launch supersedes the cut one
    lines = sweep_lines(2)
    cut = dict(lines[1], run_id="cut-1")
    redo = [{"type": "sweep", "resume": True, "seed": 1}, cut]
    rs = tidy.read([_write(tmp_path / "r.jsonl", text(lines[:1] + [cut] + lines[1:] + redo[:1]))])
    assert rs.results == 4


def _write(path: Path, body, mode="w") -> Path:
    if isinstance(body, bytes):
        path.write_bytes(body)
    else:
        path.write_text(body)
    return path


BAD_LINES = [   # (bytes of one line, what the warning says)
    (b'{"type": "result", "run_id": "synth-0', "not JSON"),               # cut in the middle
    (bytes(range(128, 256)), "not UTF-8"),                                # a binary blob
    (b'{"type": "run"\x00}', "NUL byte"),
    (b'[1, 2, 3]', "JSON list, not a record"),
    (b'"text"', "JSON str, not a record"),
    (b'[' * 100000 + b']' * 100000, "nested too deeply"),
    (b'{"type": "launch", "tag": "t", "point": "p2p"}', "'point' must be an object"),
    (b'{"type": "launch", "tag": ["a"], "point": {}}', "'tag' must be text"),
    (b'{"type": "run", "run_id": "x", "hosts": 3}', "'hosts' must be a list"),
    (b'{"type": "result", "run_id": "synth-001", "bench": "p2p"}', "no 'params'"),
]


@pytest.mark.planted_json("bad.jsonl")
@pytest.mark.parametrize("line, why", BAD_LINES, ids=[w for _, w in BAD_LINES])
def test_unreadable_lines_are_named_counted_and_the_rest_used(tmp_path, line, why):
    good = text(sweep_lines()).encode()
    path = _write(tmp_path / "bad.jsonl", good[:len(good) // 2].rsplit(b"\n", 1)[0] + b"\n" + line + b"\n"
                  + good[len(good) // 2:].split(b"\n", 1)[1])
    n = path.read_bytes().split(b"\n").index(line) + 1
    rs = tidy.read([path], warn=None)
    assert len(rs.bad_lines) == 1 and rs.bad_lines[0].startswith(f"{path}:{n}: ") and why in rs.bad_lines[0]
    assert rs.results == 7 + (b'"result"' not in good[len(good) // 2:].split(b"\n", 1)[0])
    # the CLI: every good record used, the bad line named, exit status 1; never a traceback
    rc, out, err = hmb("report", path, "-o", tmp_path / "rep")
    assert rc == 1 and f"{path}:{n}: " in err and "1 unreadable lines skipped" in err, err
    assert "Traceback" not in err and (tmp_path / "rep" / "report.md").exists()


def test_a_byte_order_mark_is_not_a_bad_line(tmp_path):
    path = _write(tmp_path / "bom.jsonl", b"\xef\xbb\xbf" + text(sweep_lines()).encode())
    rs = tidy.read([path], warn=None)
    assert not rs.bad_lines and rs.results == 8


@pytest.mark.planted_json("junk.jsonl")
def test_a_file_of_nothing_but_bad_lines_is_one_line_error(tmp_path):
    path = _write(tmp_path / "junk.jsonl", b"\x00\x01\n[1]\n")
    rc, _, err = hmb("report", path, "-o", tmp_path / "rep")
    assert_one_line_error(rc, err, f"{path}:1: ", "2 bad lines")


def test_text_window_among_integer_windows_is_a_bad_line_not_a_typeerror(tmp_path):
    lines = sweep_lines()
    lines[2] = dict(lines[2], params={**lines[2]["params"], "window": "auto"})
    path = _write(tmp_path / "w.jsonl", text(lines))
    rc, _, err = hmb("report", path, "-o", tmp_path / "rep")
    assert rc == 1 and f"{path}:3: params.window is text ('auto')" in err and "Traceback" not in err, err
    rc, out, err = hmb("compare", path, path)
    assert rc == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("mpi", ["mpich", "openmpi"])
def test_a_full_disk_is_an_error_naming_the_file(mpi):
    # /dev/full: every write fails with ENOSPC, as on a full file system (no mount needed)
    impl = get_mpi(mpi)
    r = run_bench(mpi, ["p2p", "--sizes", "8", "--iters", "5", "--ci-target", "0", "--json", "/dev/full"])
    assert r.rc != 0, (r.stdout, r.stderr)
    assert "hmb-bench: cannot write results to '/dev/full': No space left on device" in r.stderr, r.stderr


# ---- 5-8: tracebacks become one line naming the file and the problem

@pytest.mark.planted_json("o.jsonl")
def test_resume_on_a_deeply_nested_output_is_not_a_recursion_error(tmp_path):
    from hmb.run import sweep
    out = _write(tmp_path / "o.jsonl", text(sweep_lines(1)).encode() + b"[" * 100000 + b"\n")
    assert sweep.finished_tags(out) == {"p2p-mpich-abc-r0"} and sweep.recorded_seed(out, 7) == 1


def config(tmp_path: Path, body: str, name="c.toml") -> Path:
    return _write(tmp_path / name, "[sweep]\nseed = 1\nmpis = [\"mpich\"]\n" + body)


def test_a_nul_byte_in_a_sweeps_args_is_refused_before_anything_is_written(tmp_path):
    cfg = config(tmp_path, '[[bench]]\nname = "p2p"\nargs = { sizes = "8\\u0000" }\n')
    rc, _, err = hmb("sweep", cfg, "--output", tmp_path / "o.jsonl")
    assert_one_line_error(rc, err, "bench[0].args.sizes", "control character")
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.planted_json("bin.jsonl")
@pytest.mark.parametrize("flag", ["--probe", "--tradeoff"])
def test_advise_on_a_non_utf8_file_names_it(tmp_path, flag):
    prof = _write(tmp_path / "prof.json", json.dumps({"type": "hmbprof", "schema": 1, "ranks": [{"rank": 0}]}))
    bad = _write(tmp_path / "bin.jsonl", b"\xff\xfe\x00binary\n")
    rc, _, err = hmb("advise", prof, "--threshold", "1024", "--bandwidth", "1000", flag, bad)
    assert_one_line_error(rc, err, f"{bad}:1: ")


def test_advise_on_a_record_of_the_wrong_shape_names_the_file(tmp_path):
    prof = _write(tmp_path / "prof.json", json.dumps({"type": "hmbprof", "schema": 1, "ranks": [{"rank": 0}]}))
    probe = _write(tmp_path / "p.jsonl", json.dumps({"type": "result", "bench": "proto", "params": {},
                                                      "switch_bytes": [[]]}) + "\n")
    rc, _, err = hmb("advise", prof, "--probe", probe)
    assert_one_line_error(rc, err, str(probe), "unexpected shape")


@pytest.mark.parametrize("name", ["f.txt", "noext", "adir"])
def test_project_figure_needs_a_format_suffix(tmp_path, name):
    (tmp_path / "adir").mkdir()
    rc, out, err = hmb("project", "--fraction", "0.5", "--speedup", "2", "--figure", tmp_path / name)
    assert_one_line_error(rc, err, "--figure")
    assert out == "" and sorted(p.name for p in tmp_path.iterdir()) == ["adir"]
    rc, out, err = hmb("project", "--fraction", "0.5", "--speedup", "2", "--figure", tmp_path / "f.svg")
    assert rc == 0 and f"wrote {tmp_path / 'f.svg'}" in out and (tmp_path / "f.svg").stat().st_size > 0


# ---- 9-12: injection and limits

SLURM_CFG = '[[bench]]\nname = "p2p"\nranks = 2\nargs = { sizes = "8" }\n'


@pytest.mark.parametrize("flag, value", [("--job-name", "a\nb"), ("--partition", "x\n#SBATCH --qos=hi"),
                                         ("--account", "a b"), ("--job-name", "$(reboot)"),
                                         ("--results", "o\n.jsonl")])
def test_slurm_values_cannot_inject_lines(tmp_path, flag, value):
    cfg = config(tmp_path, SLURM_CFG)
    rc, out, err = hmb("slurm", cfg, "--nodes", 1, "--ranks-per-node", 2, "--threads", 1, flag, value)
    assert_one_line_error(rc, err, flag if flag != "--results" else "--results")
    assert out == ""


def test_slurm_config_path_is_quoted_in_the_script(tmp_path):
    cfg = config(tmp_path, SLURM_CFG, name="a b;x.toml")
    rc, out, err = hmb("slurm", cfg, "--nodes", 1, "--ranks-per-node", 2, "--threads", 1)
    assert rc == 0, err
    assert f"# Generated by `hmb slurm '{cfg}'" in out and f"sweep '{cfg}' --resume" in out


def test_a_huge_grid_is_refused_up_front(tmp_path):
    cfg = config(tmp_path, '[[bench]]\nname = "p2p"\nrepeats = 100000000\n')
    rc, out, err = hmb("sweep", cfg, "--dry-run")
    assert_one_line_error(rc, err, "100,000,000 launches", "--max-launches")
    cfg = config(tmp_path, '[[bench]]\nname = "p2p"\nrepeats = 3\nargs = { window = [1, 2, 4, 8] }\n')
    rc, out, err = hmb("sweep", cfg, "--dry-run", "--max-launches", 11)
    assert_one_line_error(rc, err, "12 launches")
    rc, out, err = hmb("sweep", cfg, "--dry-run", "--max-launches", 12)
    assert rc == 0 and len(out.splitlines()) == 12, err


@pytest.mark.parametrize("body, why", [
    ('threads = 100000', "ranks x threads on this machine"),
    ('ranks = 100000', "ranks x threads on this machine"),
    ('ranks = 1', "needs at least 2 ranks"),
    ('args = { bogus = 1 }', "--bogus 1: not an option"),
    ('args = { window = 0 }', "--window 0: out of range"),
    ('args = { window = "many" }', "not a whole number"),
    ('args = { mode = "latency,nosuch" }', "'nosuch' is not one of"),
    ('args = { timeout = "soon" }', "not a duration"),
])
@pytest.mark.mpi   # the sweep asks the built hmb-bench for its descriptors
def test_every_launch_is_checked_before_the_first(tmp_path, body, why):
    cfg = config(tmp_path, f'[[bench]]\nname = "p2p"\n{body}\n')
    rc, _, err = hmb("sweep", cfg, "--output", tmp_path / "o.jsonl")
    assert_one_line_error(rc, err, why)
    assert not (tmp_path / "o.jsonl").exists()


def test_a_comma_list_option_takes_all_as_hmb_bench_does():
    """hmb-bench takes "all" for any comma-list option ("a comma list, or all"); the sweep's check
    of a launch before the first must too (seed000's halo3d `mode = "all"` was refused)."""
    from hmb.data import descriptors
    from hmb.run import sweep
    modes = descriptors.Option("mode", "choices", "single", "parameter", choices=("single", "multiple"))
    assert sweep._option_problem(modes, "all") is None
    assert sweep._option_problem(modes, "single,multiple") is None
    assert "'al' is not one of" in sweep._option_problem(modes, "al")
    one = descriptors.Option("cache", "choice", "hot", "parameter", choices=("hot", "cold"))
    assert "'all' is not one of" in sweep._option_problem(one, "all")   # a single choice has no "all"


@pytest.mark.parametrize("rpn", [0, -3])
@pytest.mark.mpi   # refused in the launch check, after the sweep has prepared the library
def test_ranks_per_node_must_be_positive(tmp_path, rpn):
    cfg = config(tmp_path, '[[bench]]\nname = "p2p"\n')
    rc, _, err = hmb("sweep", cfg, "--output", tmp_path / "o.jsonl", "--ranks-per-node", rpn)
    assert_one_line_error(rc, err, "--ranks-per-node")


def fake_env(tmp_path: Path, **extra) -> dict:
    """A stand-in hmb-bench (tests/data/fake_hmb_bench.py) for sweeps that need no MPI."""
    import os
    env = dict(os.environ)
    env.update({"HMB_BENCH_OVERRIDE": f"{sys.executable} {DATA / 'fake_hmb_bench.py'}",
                "FAKE_LOG": str(tmp_path / "fake.log"), "FAKE_SLEEP_S": "0",
                "PYTHONPATH": str(DATA.parent.parent / "python")}, **extra)
    return env


def hmb_env(env, *argv):
    p = hmb_cli(argv, env=env)
    return p.returncode, p.stdout, p.stderr


def test_a_second_sweep_on_the_same_output_is_refused_naming_the_holder(tmp_path):
    from hmb.run import sweep
    cfg = config(tmp_path, '[[bench]]\nname = "p2p"\nargs = { sizes = "8" }\n')
    out = tmp_path / "o.jsonl"
    with sweep._output_lock(out):
        rc, _, err = hmb_env(fake_env(tmp_path), "sweep", cfg, "--output", out)
        assert_one_line_error(rc, err, f"{out} is in use by another hmb sweep (pid ", "--output")
        assert not out.exists()
    rc, _, err = hmb_env(fake_env(tmp_path), "sweep", cfg, "--output", out)   # released: runs
    assert rc == 0 and out.exists() and not (tmp_path / "o.jsonl.lock").exists(), err


# ---- 13-15: messages; shared memory of killed launches

def test_sweep_says_what_it_did_also_when_piped_and_resume_on_finished_says_so(tmp_path):
    cfg = config(tmp_path, '[[bench]]\nname = "p2p"\nrepeats = 2\nargs = { sizes = ["8,16", "32"] }\n')
    out = tmp_path / "o.jsonl"
    env = fake_env(tmp_path)
    rc, _, err = hmb_env(env, "sweep", cfg, "--output", out)
    assert rc == 0, err
    progress = [ln for ln in err.splitlines() if ln.startswith("hmb sweep: ")]
    assert [ln.split()[2] for ln in progress] == ["1/4", "2/4", "3/4", "4/4"], err
    assert f"hmb: 4 launches, 6 results, 0 failed -> {out}" in err.splitlines()[-1], err
    rc, _, err = hmb_env(env, "sweep", cfg, "--output", out, "--resume")
    assert rc == 0 and "already finished: all 4 launches" in err and err.count("\n") == 1, err


OMPI_BANNER = """--------------------------------------------------------------------------
prterun detected that one or more processes exited with non-zero status,
   Exit code:    2
--------------------------------------------------------------------------
"""


@pytest.mark.parametrize("log, rc, reason", [
    ("hmb-bench p2p: --window 0: out of range\n" + OMPI_BANNER, 2, "hmb-bench p2p: --window 0: out of range"),
    ("[1,0]<stderr>:hmb-bench: validation failed: bench=p2p\nPlease see the FAQ page for debugging suggestions\n",
     3, "hmb-bench: validation failed: bench=p2p"),
    ("hmb-bench: warning: oversubscribed\n===\nPlease see the FAQ page for debugging suggestions\n", -9,
     "ended by SIGKILL"),
    ("hmb-bench: warning: oversubscribed\n", 137, "ended by SIGKILL"),
    ("", 124, "killed after the 5 s timeout"),
    ("mpiexec: no such host\n", 1, "mpiexec: no such host"),
    # Open MPI's help box and its "error already reported" status (213 = -43): the box's first
    # and last line, never its rule of dashes (a CI run's `hmb check` said only "-----")
    ("-" * 74 + "\nIt looks like MPI_INIT failed for some reason; your parallel process is\n"
     "likely to abort.\n\n  ompi_mpi_init: ompi_rte_init failed\n  --> Returned \"(null)\" (-43)\n" + "-" * 74 + "\n",
     213, 'It looks like MPI_INIT failed for some reason; your parallel process is ... --> Returned "(null)" (-43)'),
    ("-" * 74 + "\n" + "-" * 74 + "\n", 213, "no output"),
    ("a cause\n" + "=" * 20 + "\n", 1, "a cause"),
])
def test_a_failed_launch_names_hmb_benchs_own_line_or_the_cause(tmp_path, log, rc, reason):
    from hmb.run import sweep
    path = _write(tmp_path / "x.log", "### the launch line mentions hmb-bench: p2p\n" + log)
    assert sweep.failure_reason(path, len("### the launch line mentions hmb-bench: p2p\n"), rc, 5.0) \
        .startswith(reason)


def test_config_that_is_a_directory_and_compare_of_an_unknown_metric(tmp_path):
    rc, _, err = hmb("sweep", tmp_path)
    assert_one_line_error(rc, err, "is a directory")
    path = _write(tmp_path / "a.jsonl", text(sweep_lines()))
    rc, _, err = hmb("compare", path, path, "--metric", "nosuch")
    assert_one_line_error(rc, err, "--metric nosuch", "latency_us")


def test_a_full_disk_in_the_sweep_driver_names_the_file(tmp_path):
    from hmb.run import sweep
    with pytest.raises(sweep.ConfigError, match="cannot write to /dev/full: No space left on device"):
        sweep.append_record(Path("/dev/full"), {"type": "sweep"})


def test_a_timed_out_run_says_so_and_removes_the_segments_it_created(mpi_name):
    import re
    p = subprocess.run([sys.executable, "-m", "hmb.cli", "run", "p2p", "--mpi", mpi_name, "--timeout", "2s", "--",
                        "--sizes", "8", "--iters", "100000", "--max-iters", "100000", "--ci-target", "0",
                        "--compute", "1ms"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 124 and "hmb: launch killed after the --timeout of 2 s" in p.stderr, p.stderr
    named = re.search(r"hmb: removed \d+ shared-memory segments? the stopped launch left in /dev/shm \((.*)\)",
                      p.stderr)
    if mpi_name == "mpich":   # MPICH maps one per node; a killed job cannot unlink it
        assert named, p.stderr
    for name in (named.group(1).split(", ") if named else []):
        assert name == "..." or not Path("/dev/shm", name).exists()


@pytest.mark.parametrize("existing", [b"", b'{"type": "sweep"}\n'], ids=["new-file", "existing-file"])
def test_a_file_size_limit_leaves_no_empty_file_and_no_half_line(tmp_path, existing):
    # RLIMIT_FSIZE stands in for a full disk (EFBIG once the file would grow past it). A singleton
    # Open MPI process: MPICH's MPI_Init (UCX) itself needs larger files than the limit, and
    # under a launcher the limit would hit the launcher's files first.
    import resource
    import signal

    out = tmp_path / "x.jsonl"
    if existing:
        out.write_bytes(existing)

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(existing) + 16,) * 2)

    impl = get_mpi("openmpi")
    p = subprocess.run([str(impl.bench), "halo3d", "--sizes", "8", "--iters", "3", "--ci-target", "0",
                        "--json", str(out)], capture_output=True, text=True, errors="replace", timeout=180,
                       env=impl.env(), preexec_fn=limit, cwd=tmp_path)
    assert p.returncode != 0, (p.stdout, p.stderr)
    assert f"hmb-bench: cannot write results to '{out}': File too large" in p.stderr, p.stderr
    if existing:
        assert out.read_bytes() == existing       # the half-written record is cut off again
    else:
        assert "(removed the empty file this run created)" in p.stderr and not out.exists()


FUZZ_VALUES = [None, "x", 1, [], {}, [1, "a"]]


def _mutations(lines: list[dict]):
    """Every field (nested objects too) of every record replaced by each value of another type."""
    def paths(rec, prefix=()):
        for k, v in rec.items():
            yield prefix + (k,)
            if isinstance(v, dict):
                yield from paths(v, prefix + (k,))
    for i, rec in enumerate(lines):
        for path in list(paths(rec)):
            for v in FUZZ_VALUES:
                out = json.loads(json.dumps(lines))
                tgt = out[i]
                for k in path[:-1]:
                    tgt = tgt[k]
                tgt[path[-1]] = v
                yield f"line {i + 1} {'.'.join(path)} = {v!r}", out


def test_no_field_of_the_wrong_type_gets_past_the_reader(tmp_path):
    # The readers (tidy.read) and compare on every mutation: a ResultsError line or a result,
    # never another exception. (The CLI turns ResultsError into one line, exit 2.)
    from hmb.present import compare
    base = sweep_lines(1)
    good = tidy.read([_write(tmp_path / "good.jsonl", text(base))], warn=None, samples=True)
    tried = 0
    for what, lines in _mutations(base):
        path = _write(tmp_path / "m.jsonl", text(lines))
        tried += 1
        try:
            rs = tidy.read([path], warn=None, samples=True)
            compare.render(compare.compare(good, rs))
        except results.ResultsError:
            pass
        except Exception as e:   # noqa: BLE001 - the point of the test
            pytest.fail(f"{what}: {type(e).__name__}: {e}")
    assert tried > 500


def test_a_deeply_nested_sweep_config_is_one_line(tmp_path):
    cfg = _write(tmp_path / "deep.toml", "[sweep]\nseed = " + "[" * 5000 + "]" * 5000 + "\n")
    rc, _, err = hmb("sweep", cfg)
    assert_one_line_error(rc, err, "nested too deeply")


@pytest.mark.planted_json("f.jsonl")
@pytest.mark.parametrize("field, value", [("status", {}), ("reason", [1]), ("threads", "x"),
                                          ("placement", "x")])
def test_fields_the_report_would_trip_on_are_bad_lines(tmp_path, field, value):
    # found by mutating every top-level field of planted records through report.build
    lines = sweep_lines()
    i = 1 if field in ("threads", "placement") else 2
    lines[i] = dict(lines[i], **{field: value})
    path = _write(tmp_path / "f.jsonl", text(lines))
    rc, _, err = hmb("report", path, "-o", tmp_path / "rep")
    assert rc == 1 and f"{path}:{i + 1}: " in err and f"'{field}' must be" in err and "Traceback" not in err, err


# ---- 12: one benchmark launch at a time per machine (launch.machine_lock)

def _hold_lock(path):
    import fcntl
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"pid 1: the other sweep")
    return fd


def test_a_second_launch_waits_for_the_machine_and_says_who_holds_it(tmp_path, monkeypatch, capsys):
    import threading
    from hmb.run import launch
    lock = tmp_path / "machine.lock"
    monkeypatch.setenv("HMB_MACHINE_LOCK", str(lock))
    monkeypatch.delenv("HMB_CONCURRENT", raising=False)
    fd = _hold_lock(lock)
    done = []
    t = threading.Thread(target=lambda: done.append(launch.run_streaming(["true"], dict(os.environ))))
    t.start()
    t.join(1.0)
    assert not done, "the launch ran while another held the machine"
    os.close(fd)                               # the other launch ends
    t.join(30)
    assert done == [0]
    err = capsys.readouterr().err
    assert "waiting for the machine" in err and "pid 1: the other sweep" in err and str(lock) in err


def test_concurrent_launches_when_the_user_asks(tmp_path, monkeypatch):
    from hmb.run import launch
    lock = tmp_path / "machine.lock"
    monkeypatch.setenv("HMB_MACHINE_LOCK", str(lock))
    monkeypatch.setenv("HMB_CONCURRENT", "1")
    fd = _hold_lock(lock)
    try:
        assert launch.run_streaming(["true"], dict(os.environ), timeout=30) == 0
    finally:
        os.close(fd)


def test_the_machine_lock_names_the_running_launch_and_is_released(tmp_path, monkeypatch):
    import fcntl
    from hmb.run import launch
    lock = tmp_path / "machine.lock"
    monkeypatch.setenv("HMB_MACHINE_LOCK", str(lock))
    monkeypatch.delenv("HMB_CONCURRENT", raising=False)
    with launch.machine_lock("mpiexec -n 2 hmb-bench p2p"):
        assert f"pid {os.getpid()}: mpiexec -n 2 hmb-bench p2p" in lock.read_text()
        with launch.machine_lock("a probe inside the launch's set-up"):   # re-entrant, not a deadlock
            assert "hmb-bench p2p" in lock.read_text()
        got = threading.Event()       # ... in its own thread only: another thread waits for it

        def other():
            with launch.machine_lock("another thread's launch"):
                got.set()
        t = threading.Thread(target=other, daemon=True)
        t.start()
        assert not got.wait(0.3)
        fd = os.open(lock, os.O_RDWR)
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(fd)
    assert got.wait(30)
    t.join(30)
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)      # free again
    os.close(fd)
    assert lock.read_text() == ""
