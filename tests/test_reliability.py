"""Bad input and faults (issue 21): nothing lost, nothing miscounted, nothing injected.

Every file is planted by the test itself (tests/data/make_synthetic.py's Writer, or bytes
written here); each test reproduces one defect of the issue and checks the fixed behaviour.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hmb import cli, results
from conftest import get_mpi, run_bench

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
    p = subprocess.run([sys.executable, "-m", "hmb.cli", *map(str, argv)], capture_output=True, text=True,
                       timeout=300)
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
    rs = results.load([tmp_path / "b.jsonl"])
    assert len(rs.results) == 8 and len(rs.runs) == 4
    assert rs.duplicates == 4 + 8 + 4          # runs, results, launch records
    assert "16 duplicate records" in capsys.readouterr().err


def test_two_sweeps_of_one_config_in_one_file_keep_both(tmp_path):
    # Same config twice: the same tags, other run ids; before, the second sweep's runs
    # superseded the first's ("24 results from 16 runs").
    both = text(sweep_lines()) + text(sweep_lines(first_run=4, start="2024-06-02T12:00:00Z"))
    (tmp_path / "c.jsonl").write_text(both)
    rs = results.load([tmp_path / "c.jsonl"])
    assert len(rs.results) == 16 and len(rs.runs) == 8 and len(rs.launches) == 8
    # a resumed sweep is still one sweep: the redone launch supersedes the cut one
    lines = sweep_lines(2)
    cut = dict(lines[1], run_id="cut-1")
    redo = [{"type": "sweep", "resume": True, "seed": 1}, cut]
    rs = results.load([_write(tmp_path / "r.jsonl", text(lines[:1] + [cut] + lines[1:] + redo[:1]))])
    assert len(rs.results) == 4


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


@pytest.mark.parametrize("line, why", BAD_LINES, ids=[w for _, w in BAD_LINES])
def test_unreadable_lines_are_named_counted_and_the_rest_used(tmp_path, line, why):
    good = text(sweep_lines()).encode()
    path = _write(tmp_path / "bad.jsonl", good[:len(good) // 2].rsplit(b"\n", 1)[0] + b"\n" + line + b"\n"
                  + good[len(good) // 2:].split(b"\n", 1)[1])
    n = path.read_bytes().split(b"\n").index(line) + 1
    rs = results.load([path], warn=None)
    assert len(rs.bad_lines) == 1 and rs.bad_lines[0].startswith(f"{path}:{n}: ") and why in rs.bad_lines[0]
    assert len(rs.results) == 7 + (b'"result"' not in good[len(good) // 2:].split(b"\n", 1)[0])
    # the CLI: every good record used, the bad line named, exit status 1; never a traceback
    rc, out, err = hmb("report", path, "-o", tmp_path / "rep")
    assert rc == 1 and f"{path}:{n}: " in err and "1 unreadable lines skipped" in err, err
    assert "Traceback" not in err and (tmp_path / "rep" / "report.md").exists()


def test_a_byte_order_mark_is_not_a_bad_line(tmp_path):
    path = _write(tmp_path / "bom.jsonl", b"\xef\xbb\xbf" + text(sweep_lines()).encode())
    rs = results.load([path], warn=None)
    assert not rs.bad_lines and len(rs.results) == 8


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
