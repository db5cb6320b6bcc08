"""Readers stream (issue 40): hmb validate, hmb export, hmb.load and the report read results a
line at a time, in memory bounded by a line, not by the file; a file of NULs (a sparse file) is
refused at once, naming what is wrong."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hmb.data import results, validate

from conftest import hmb_cli

RUN = {"type": "run", "schema": 1, "run_id": "a", "bench": "p2p", "ranks": 2, "threads": 1,
       "mpi": {"impl": "MPICH", "library": "MPICH Version: 5.0.2"}}


def _result(size: int, samples: int = 3) -> dict:
    return {"type": "result", "schema": 1, "run_id": "a", "bench": "p2p", "params": {"size_bytes": size},
            "status": "ok", "metrics": {"latency_us": {"unit": "us", "median": 1.0, "ci_lo": 0.9, "ci_hi": 1.1,
                                                        "count": samples, "higher_is_better": False}},
            "samples": {"latency_us": [1.0 + k * 1e-6 for k in range(samples)]}}


def _result_line(size: int, samples: int) -> str:
    """json.dumps(_result(size, samples)), the samples' text (the same for every size) made once:
    the 48 lines of 50,000 samples each took 2 s of the memory test to write."""
    rec = _result(size, samples)
    if samples not in _samples_text:
        _samples_text[samples] = json.dumps(rec["samples"])
    rec["samples"] = None                     # its place kept: the last key
    text = json.dumps(rec)
    assert text.endswith('"samples": null}'), text
    return text[:-len("null}")] + _samples_text[samples] + "}"


_samples_text: dict = {}


def _peak_kib(argv: list) -> int:
    """Peak resident memory (KiB) of `hmb ARGV` in a process of its own."""
    code = ("import resource, sys\nfrom hmb import cli\nrc = cli.main(sys.argv[1:])\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\nsys.exit(rc)")
    p = subprocess.run([sys.executable, "-c", code, *map(str, argv)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return int(p.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("command", ["validate", "export"])
def test_memory_does_not_grow_with_the_file(tmp_path, command):
    """24 MB of --raw samples: the old readers held the whole file (validate its bytes twice, then
    parsed; export every record with its samples parsed): +36 and +64 MB over a 2-line file for
    16 MB. Streaming, the growth is about one line's."""
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    small.write_text(json.dumps(RUN) + "\n" + json.dumps(_result(8)) + "\n")
    with open(big, "w") as f:
        f.write(json.dumps(RUN) + "\n")
        for i in range(48):
            f.write(_result_line(8 * (i + 1), 50000) + "\n")
    size_kib = big.stat().st_size // 1024
    argv = (lambda f: ["validate", f]) if command == "validate" else \
        (lambda f: ["export", "--csv", tmp_path / "o.csv", f])
    base, grown = _peak_kib(argv(small)), _peak_kib(argv(big))
    assert grown - base < size_kib // 2, f"{command}: {base} KiB for 2 lines, {grown} KiB for {size_kib} KiB"
    if command == "export":
        assert len((tmp_path / "o.csv").read_text().splitlines()) == 1 + 48


@pytest.mark.planted_json("nul.jsonl")
def test_a_20_gb_sparse_file_of_nuls_is_refused_at_once(tmp_path):
    """hmb export of a 20 GB sparse file ran past 60 s (one 'line' of 20 GB read in)."""
    f = tmp_path / "nul.jsonl"
    with open(f, "wb") as fh:
        fh.truncate(20 << 30)
    for argv in (["export", "--csv", tmp_path / "x.csv", f], ["validate", f]):
        t0 = time.monotonic()
        p = hmb_cli(argv)
        took = time.monotonic() - t0
        assert p.returncode == 2 and took < 15, (took, p.stdout, p.stderr)
        assert f"{f}:1: a NUL byte" in p.stdout + p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.planted_json("holes.jsonl")
def test_records_after_a_hole_are_read_and_the_hole_is_one_bad_line(tmp_path):
    """A machine that failed leaves NULs in a file (a hole the size of the blocks it had not
    written): what follows is read, by validate and by the reader alike."""
    f = tmp_path / "holes.jsonl"
    with open(f, "wb") as fh:
        fh.write((json.dumps(RUN) + "\n" + json.dumps(_result(8)) + "\n").encode())
        fh.seek(fh.tell() + (3 << 20))          # 3 MB of hole, then the line it was in ends
        fh.write(b"\n" + (json.dumps(_result(16)) + "\n").encode())
    bad = []
    recs = results.read_records(f, bad)
    assert [r["type"] for _, r in recs] == ["run", "result", "result"] and recs[-1][0] == 4, recs
    assert bad == [f"{f}:3: a NUL byte (binary data, or a sparse or preallocated file?)"], bad
    seen = [(n, why) for n, _, why in validate.records(f)]
    assert [n for n, _ in seen] == [1, 2, 3, 4] and seen[2][1] == bad[0].split(":3: ")[1]
    assert [r.params["size_bytes"] for r in results.scan([f], warn=None)] == [8, 16]


@pytest.mark.planted_json("long.jsonl")
def test_a_line_longer_than_the_limit_is_one_bad_line_not_held(tmp_path):
    f = tmp_path / "long.jsonl"
    f.write_bytes(json.dumps(RUN).encode() + b"\n" + b"x" * (3 << 20) + b"\n" + json.dumps(_result(8)).encode())
    with open(f, "rb") as fh:
        got = [(n, raw is None, why) for n, raw, why in results.lines(fh, max_line=1 << 20)]
    assert got == [(1, False, None), (2, True, "a line longer than 1 MB (no line end: not JSON Lines?)"),
                   (3, False, None)]


def test_load_keeps_no_samples_unless_asked(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps(RUN) + "\n" + json.dumps(_result(8, 10)) + "\n")
    assert "samples" not in next(iter(results.scan([f], samples=False))).record
    assert len(next(iter(results.scan([f], samples=True))).record["samples"]["latency_us"]) == 10


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_validate_of_a_fifo_or_a_device_is_one_line(tmp_path, kind):
    """Refused without being opened (reading a FIFO blocks, /dev/zero never ends): one line."""
    path = Path("/dev/zero") if kind == "device" else tmp_path / "fifo.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    p = hmb_cli(["validate", path])
    assert p.returncode == 2 and p.stdout == f"{path}:0: not a regular file (a FIFO or a device?)\n", p.stdout
