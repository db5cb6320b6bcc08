"""Hostile input to the readers (issue 31): `hmb validate`, the results reader (hmb.load, report,
export, compare) and the JSON readers of the other commands.

One decoder (results.decode) serves them all, so validate and the reader give the same verdict on
every planted line; a bad line is one named line, never a traceback; slow inputs are bounded.
Every file is planted here; each case names the defect it reproduces.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import hmb
from hmb import cli
from hmb.data import results, validate
from hmb.present import format as fmt
from _planted import metric, result, run, write

RUN = run("a", "p2p")
GOOD = [RUN, result("a", "p2p", {"size_bytes": 8}, {"latency": metric(1.5)}),
        result("a", "p2p", {"size_bytes": 64}, {"latency": metric(2.5)})]
GOOD_TEXT = "".join(json.dumps(r) + "\n" for r in GOOD)


def _result_line(median: str = "1.5", params: str = '{"size_bytes": 16}', extra: str = "") -> bytes:
    rec = json.dumps(result("a", "p2p", {"size_bytes": 16}, {"latency": metric(1.5)}))
    rec = rec.replace('"median": 1.5', f'"median": {median}').replace('{"size_bytes": 16}', params)
    return (rec[:-1] + extra + "}").encode("utf-8", "surrogatepass")


# (id, the planted line, what validate and the reader both say about it)
BAD_LINES = [
    ("latin-1", _result_line(params='{"size_bytes": 16, "x": "caf\u00e9"}').replace(b"caf\xc3\xa9", b"caf\xe9"),
     "not UTF-8 text (byte 0xe9"),
    ("nul", b'{"type": "run"\x00}', "a NUL byte"),
    ("nan-token", _result_line(median="NaN"), "NaN is not a JSON number"),
    ("infinity-token", _result_line(median="Infinity"), "Infinity is not a JSON number"),
    ("minus-infinity-token", _result_line(median="-Infinity"), "-Infinity is not a JSON number"),
    ("exponent-overflow", _result_line(median="1e999"), "is beyond a double's range"),
    ("400-digit-float", _result_line(median="1" * 400 + ".5"), "is beyond a double's range"),
    ("5000-digit-integer", _result_line(median="1" * 5000), "an integer of 5000 digits"),
    ("21-digit-integer", _result_line(median="1" * 21), "an integer of 21 digits"),
    ("lone-surrogate-value", _result_line(params='{"size_bytes": 16, "mode": "\\udfff"}'), "a lone surrogate"),
    ("lone-surrogate-key", _result_line(params='{"size_bytes": 16, "\\ud800": "x"}'), "a lone surrogate"),
    ("deep-arrays", b"[" * 100000 + b"]" * 100000, "nested too deeply"),
    ("deep-objects", b'{"a":' * 50000 + b"1" + b"}" * 50000, "nested too deeply"),
    ("cut-short", _result_line()[:60], "not JSON ("),
]


@pytest.mark.planted_json("bad.jsonl")
@pytest.mark.parametrize("line, why", [c[1:] for c in BAD_LINES], ids=[c[0] for c in BAD_LINES])
def test_validate_and_the_reader_name_the_same_bad_line(tmp_path, line, why):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(GOOD_TEXT.encode() + line + b"\n")
    count, bad = validate.validate_file(path)
    assert count == 4 and bad == [f"{path}:4: " + bad[0].split(":4: ", 1)[1]] and why in bad[0], bad
    rs = results.scan([path], warn=None)
    read = list(rs)
    assert len(rs.bad_lines) == 1 and rs.bad_lines[0].startswith(f"{path}:4: ") and why in rs.bad_lines[0]
    assert bad[0].split(":4: ", 1)[1] == rs.bad_lines[0].split(":4: ", 1)[1]     # the same words
    assert len(read) == 2                                                     # the rest is read
    df = hmb.load(path, warn=False)
    assert sorted(df["size_bytes"]) == [8, 64]


GOOD_LINES = [   # what both accept
    ("u2028-in-a-string", json.dumps({**RUN, "hosts": ["h\u2028x"]}, ensure_ascii=False).encode()),
    ("surrogate-pair", _result_line(params='{"size_bytes": 16, "mode": "\\ud83d\\ude00"}')),
    ("20-digit-integer", _result_line(params='{"size_bytes": 18446744073709551615}')),
    ("tiny-exponent", _result_line(median="1e-999")),
]


@pytest.mark.parametrize("line", [c[1] for c in GOOD_LINES], ids=[c[0] for c in GOOD_LINES])
def test_validate_and_the_reader_accept_the_same_good_line(tmp_path, line):
    path = tmp_path / "good.jsonl"
    path.write_bytes(GOOD_TEXT.encode() + line + b"\n")
    assert validate.validate_file(path) == (4, [])
    rs = results.scan([path], warn=None)
    read = list(rs)
    assert rs.bad_lines == [] and len(read) == 2 + (b'"result"' in line)


@pytest.mark.planted_json("cr.jsonl")
def test_a_file_of_cr_line_ends_is_one_bad_line_for_both(tmp_path):
    """validate split on CR (valid), the reader did not (no record): now both say why."""
    path = tmp_path / "cr.jsonl"
    path.write_text(GOOD_TEXT.replace("\n", "\r"))
    count, bad = validate.validate_file(path)
    assert count == 1 and len(bad) == 1 and "records separated by CR alone" in bad[0]
    with pytest.raises(results.ResultsError, match="records separated by CR alone"):
        results.scan([path], warn=None)
    crlf = tmp_path / "crlf.jsonl"
    crlf.write_text(GOOD_TEXT.replace("\n", "\r\n"))
    assert validate.validate_file(crlf) == (3, []) and len(list(results.scan([crlf], warn=None))) == 2


@pytest.mark.planted_json("doc.json")
def test_an_indented_document_with_nan_is_named_once(tmp_path):
    path = tmp_path / "doc.json"
    path.write_text('{\n  "type": "conformance",\n  "x": NaN\n}\n')
    assert validate.validate_file(path)[1] == [f"{path}:1: not JSON: NaN is not a JSON number (hmb-bench "
                                                "writes null for a value it has not got)"]


@pytest.mark.planted_json("digits.jsonl", "surrogate.jsonl")
@pytest.mark.parametrize("argv", [["report", "{f}", "-o", "{tmp}/rep"], ["export", "--csv", "{tmp}/x.csv", "{f}"],
                                  ["compare", "{f}", "{f}"], ["validate", "{f}"]])
@pytest.mark.parametrize("name, line", [("digits.jsonl", _result_line(median="1" * 5000)),
                                        ("surrogate.jsonl", json.dumps(RUN).replace("MPICH Version", "\\udfff V").encode())])
def test_every_reader_names_one_bad_line(tmp_path, capsys, argv, name, line):
    """A 5000-digit integer killed every reader ('ValueError' object has no attribute 'msg'); a lone
    surrogate in mpi.library crashed the report in matplotlib and export in the CSV writer."""
    f = tmp_path / name
    f.write_bytes(GOOD_TEXT.encode() + line + b"\n")
    rc = cli.main([a.format(f=f, tmp=tmp_path) for a in argv])
    out, err = capsys.readouterr()
    assert rc in (1, 2) and "Traceback" not in err and f"{f}:4: " in out + err, (rc, out, err)


@pytest.mark.planted_json("ok.jsonl")
def test_file_problems_are_one_line(tmp_path, capsys):
    (tmp_path / "ok.jsonl").write_text(GOOD_TEXT)
    os.symlink("b.jsonl", tmp_path / "a.jsonl")
    os.symlink("a.jsonl", tmp_path / "b.jsonl")
    os.symlink("/nonexistent/x", tmp_path / "dangling.jsonl")
    os.mkfifo(tmp_path / "fifo.jsonl")
    expect = {"a.jsonl": "a symbolic link loop", "dangling.jsonl": "a symbolic link to nothing (/nonexistent/x)",
              "fifo.jsonl": "not a regular file (a FIFO or a device?)"}
    for name, why in expect.items():
        p = tmp_path / name
        assert validate.main([str(p)], out=lambda s: None) == 2
        assert results.file_problem(p) == why
        for argv in (["report", p, "-o", tmp_path / "rep"], ["export", "--csv", "-", p], ["compare", p, p]):
            assert cli.main([str(a) for a in argv]) == 2
            err = capsys.readouterr().err.strip()
            assert err == f"hmb: {p}: {why}", err
    # in a directory: skipped and named, the good file read (was RuntimeError 'Symlink loop')
    rs = results.scan([tmp_path], warn=None)
    assert len(list(rs)) == 2 and sorted(b.split(":0: ")[1] for b in rs.bad_lines) == sorted(
        ["a symbolic link loop", "a symbolic link loop", expect["dangling.jsonl"], expect["fifo.jsonl"]])
    for argv in (["advise", tmp_path / "fifo.jsonl", "--mpi", "mpich", "--threshold", "8192", "--bandwidth", "1"],
                 ["project", "--mpip", tmp_path / "fifo.jsonl", "--speedup", "2"]):
        assert cli.main([str(a) for a in argv]) == 2          # both blocked forever reading the FIFO
        assert "not a regular file (a FIFO" in capsys.readouterr().err


@pytest.mark.planted_json("r.jsonl")
def test_when_every_launch_failed_the_reader_says_so_and_why(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [
        {"type": "sweep", "schema": 1, "seed": 1, "resume": False},
        {"type": "launch", "schema": 1, "tag": "t1", "status": "failed", "rc": 2, "point": {}},
        {"type": "launch", "schema": 1, "tag": "t2", "status": "failed", "rc": 2, "point": {}},
        {"type": "launch", "schema": 1, "tag": "t3", "status": "failed", "rc": 124, "point": {}}]))
    (tmp_path / "r.jsonl.log").write_text(
        "### 2026 t1: mpiexec a\nhmb-bench part: size 7 bytes does not split into 2 partitions\nlauncher banner\n"
        "### 2026 t2: mpiexec b\nhmb-bench part: size 7 bytes does not split into 2 partitions\n"
        "### 2026 t3: mpiexec c\nhmb: launch killed after the 5 s timeout\n")
    with pytest.raises(results.ResultsError) as e:
        results.scan([path], warn=None)
    assert str(e.value) == (f"{path}: all 3 launches failed, no results: 2 × exit 2: hmb-bench part: size 7 bytes "
                            f"does not split into 2 partitions; 1 × killed by the launch timeout (each launch's "
                            f"output: {path}.log)")


@pytest.mark.planted_json("rawbad.jsonl")
def test_raw_samples_are_checked_at_the_speed_of_reading_them(tmp_path):
    """validate on one 48 MB line took over 60 s (the schema's validator, item by item); the
    samples are now checked at C speed: validating costs a few times the JSON parse, not 100×."""
    line = json.dumps({**GOOD[1], "samples": {"latency": [1.25] * 1_000_000, "x": [None, 2]}})
    path = tmp_path / "raw.jsonl"
    path.write_text(json.dumps(RUN) + "\n" + line + "\n")
    t0 = time.perf_counter()
    json.loads(line)
    parse = time.perf_counter() - t0
    t0 = time.perf_counter()
    assert validate.validate_file(path) == (2, [])
    assert time.perf_counter() - t0 < 25 * parse + 2.0
    bad = tmp_path / "rawbad.jsonl"
    bad.write_text(json.dumps({**GOOD[1], "samples": {"latency": [1.0, 2.0, "x", True]}}) + "\n")
    assert validate.validate_file(bad)[1] == [f"{bad}:1: result: samples/latency/2: 'x' is not of type 'number', "
                                             "'null'"]


def test_a_100k_character_label_is_drawn_cut(tmp_path):
    """A 100k-character parameter value as a legend label took 244 s to draw; labels are cut to
    80 characters: the figure takes about as long as with a short label."""
    from hmb.study import figures
    def frame(mode):
        r = run("a", "part")
        r["options"]["compute"] = "10ms"
        recs = [r] + [result("a", "part", {"size_bytes": s, "partitions": p, "mode": mode if p == 1 else "x"},
                             {"overhead": metric(1.5, unit="ratio")}) for s in (1024, 4096) for p in (1, 2)]
        return hmb.load(write(tmp_path / f"r{len(mode)}.jsonl", recs), warn=False)
    fig = {"id": "f", "number": "Fig. 1", "title": "t", "bench": "part", "x": "size_bytes", "y": "overhead",
           "hue": "mode", "panels": "mode"}
    times = []
    for mode in ("m", "m" * 100_000):
        df = frame(mode)
        t0 = time.perf_counter()
        path, _ = figures.draw(fig, df, tmp_path / f"fig{len(mode)}")
        times.append(time.perf_counter() - t0)
        assert path.stat().st_size > 0
    assert times[1] < 5 * times[0] + 5.0, times
    assert fmt.clip_text("m" * 100_000) == "m" * 79 + "…"


@pytest.mark.planted_json("md.jsonl")
def test_hmb_report_markdown_keeps_results_text_as_text(tmp_path):
    f = tmp_path / "md.jsonl"
    f.write_text(GOOD_TEXT + json.dumps(result("a", "p2p", {"size_bytes": 16, "mode": "[x](http://evil) | <b>"},
                                                {"latency": metric(1.5)})) + "\n")
    assert cli.main(["report", str(f), "-o", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "mode=\\[x\\](http://evil) \\| \\<b\\>" in md and "[x](http" not in md


@pytest.mark.parametrize("value, shown", [("Fig. 1](http://x)", "Fig. 1\\](http://x)"), ("# h", "\\# h"),
                                          ("1. x", "1\\. x"), ("1.20 (x)", "1.20 (x)"), ("a|b", "a\\|b"),
                                          ("<script>", "\\<script\\>"), ("two\nlines", "two lines"),
                                          ("- x", "\\- x"), ("-5", "-5"), ("```", "\\```")])
def test_md_text(value, shown):
    assert fmt.md_text(value) == shown


def test_md_code_fence_is_longer_than_any_backtick_run():
    assert fmt.md_code("a ``` b") == "````\na ``` b\n````"


@pytest.mark.planted_json("x.csv")
@pytest.mark.parametrize("argv, why", [
    (["export", "--csv", "", "{f}"], "--csv: give a file name, or - for standard output"),
    (["export", "--csv", "/dev/full", "{f}"], "--csv /dev/full: a device, not a file"),
    (["export", "--csv", "{tmp}", "{f}"], "is a directory"),
    (["compare", "{f}", "{f}", "--seed", "-1"], "seed -1 is out of range"),
    (["compare", "{f}", "{f}", "--seed", "x"], "invalid seed 'x'"),
])
def test_export_and_compare_arguments_are_one_line(tmp_path, capsys, argv, why):
    f = tmp_path / "ok.jsonl"
    f.write_text(GOOD_TEXT)
    with pytest.raises(SystemExit) if "--seed" in argv else _nothing():
        assert cli.main([a.format(f=f, tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and why in err and "Traceback" not in err, err


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("paths, why", [(None, "got NoneType"), (3, "got int"), ([], "no results file given"),
                                        ([None], "a list holding other things"), ("/nonexistent", "not found")])
def test_hmb_load_refuses_what_is_no_path_in_one_line(paths, why):
    with pytest.raises(results.ResultsError, match=why):
        hmb.load(paths)


def test_hmb_load_reads_a_bytes_path(tmp_path):
    f = tmp_path / "ok.jsonl"
    f.write_text(GOOD_TEXT)
    assert len(hmb.load(os.fsencode(f), warn=False)) == 2


@pytest.mark.planted_json("prof.json")
@pytest.mark.parametrize("data, why", [
    (b'{"type": "hmbprof", "schema": 1, "x": ' + b"1" * 5000 + b"}", "an integer of 5000 digits"),
    (b'{"type": "hmbprof", "x": NaN}', "NaN is not a JSON number"),
    (b'{"type": "hmbprof", "x": "\\udfff"}', "a lone surrogate"),
    (b"[" * 100000, "nested too deeply"),
    (b"", "empty"),
])
def test_advise_reads_its_json_through_the_one_decoder(tmp_path, capsys, data, why):
    f = tmp_path / "prof.json"
    f.write_bytes(data)
    assert cli.main(["advise", str(f), "--mpi", "mpich", "--threshold", "8192", "--bandwidth", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"hmb: profile {f}: " + err.split(": ", 2)[2] and why in err, err


def test_advise_refuses_an_infinite_bandwidth(tmp_path, capsys):
    """--bandwidth inf (or 1e400) made every transfer time 0 and advised 'keep'."""
    f = tmp_path / "prof.json"
    f.write_text(json.dumps({"type": "hmbprof", "schema": 1, "world_size": 2,
                             "ranks": [{"rank": 0, "pairs": []}, {"rank": 1, "pairs": []}]}))
    for bw in ("inf", "1e400", "nan"):
        assert cli.main(["advise", str(f), "--mpi", "mpich", "--threshold", "8192", "--bandwidth", bw]) == 2
        assert "--bandwidth > 0 (a finite number)" in capsys.readouterr().err


@pytest.mark.parametrize("value, shown", [("FAIL [1]", "FAIL [1]"), ("-", "-"), ("#", "#"), ("1. x", "1. x"),
                                          ("[x](http://e)", "\\[x\\](http://e)"), ("![i](p.png)", "!\\[i\\](p.png)"),
                                          ("[a][ref]", "\\[a\\]\\[ref\\]"), ("[r]: http://e", "\\[r\\]: http://e"),
                                          ("a|b", "a\\|b"), ("<b>", "\\<b\\>"), ("two\nlines", "two lines")])
def test_md_cell_escapes_what_makes_links_or_breaks_the_row(value, shown):
    assert fmt.md_cell(value) == shown
