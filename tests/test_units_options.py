"""Units (sizes, integer lists, durations) and the table-driven option parser (units.c,
options.c) through libhmbcore.so."""
from __future__ import annotations

import ctypes as C
import math
import os
import tempfile

import pytest

import _corelib as cl
from _corelib import CHOICE, CHOICE_ARGS, CHOICES, DOUBLE, DURATION, FLAG, INT, INTS, SIZES, STRING

K, M, G = 1 << 10, 1 << 20, 1 << 30
libc = C.CDLL(None)
libc.free.argtypes = [C.c_void_p]
libc.fdopen.restype = C.c_void_p
libc.fdopen.argtypes = [C.c_int, C.c_char_p]
libc.fclose.argtypes = [C.c_void_p]


@pytest.fixture(scope="module")
def lib():
    return cl.load()


def size(lib, text):
    out, err = C.c_size_t(), C.create_string_buffer(256)
    rc = lib.hmb_parse_size(text.encode(), C.byref(out), err, len(err))
    return (out.value if rc == 0 else None), err.value.decode()


def size_list(lib, text):
    ptr, n, err = C.POINTER(C.c_size_t)(), C.c_int(), C.create_string_buffer(256)
    if lib.hmb_parse_size_list(text.encode(), C.byref(ptr), C.byref(n), err, len(err)):
        return None, err.value.decode()
    values = [ptr[i] for i in range(n.value)]
    libc.free(ptr)
    return values, ""


def int_list(lib, text):
    ptr, n, err = C.POINTER(C.c_longlong)(), C.c_int(), C.create_string_buffer(256)
    if lib.hmb_parse_int_list(text.encode(), C.byref(ptr), C.byref(n), err, len(err)):
        return None, err.value.decode()
    values = [ptr[i] for i in range(n.value)]
    libc.free(ptr)
    return values, ""


def duration(lib, text):
    out, err = C.c_int64(), C.create_string_buffer(256)
    rc = lib.hmb_parse_duration_ns(text.encode(), C.byref(out), err, len(err))
    return (out.value if rc == 0 else None), err.value.decode()


# ------------------------------------------------------------------ sizes

@pytest.mark.parametrize("text,value", [
    ("8", 8), ("0", 0), ("4K", 4 * K), ("4k", 4 * K), ("1M", M), ("16M", 16 * M), ("2G", 2 * G),
    ("4KB", 4 * K), ("4KiB", 4 * K), ("4kib", 4 * K), ("8B", 8), ("1MB", M),
])
def test_size_good(lib, text, value):
    assert size(lib, text) == (value, "")


@pytest.mark.parametrize("text,needle", [
    ("4Q", '"4Q": unknown unit suffix "Q" (use K, M or G)'),
    ("", "empty"),
    ("-1", '"-1": must not be negative'),
    ("abc", '"abc": not a number'),
    ("1.5K", '"1.5K": must be a whole number'),
    ("4KX", '"4KX": unknown unit suffix "KX"'),
    ("99999999999999999999", "too large"),
    ("17179869184G", "too large"),  # 2^34 * 2^30 = 2^64 overflows
    ("1K:4K", "not a list or range"),
])
def test_size_bad(lib, text, needle):
    value, err = size(lib, text)
    assert value is None
    assert needle in err
    assert "\n" not in err


@pytest.mark.parametrize("text,values", [
    ("8", [8]),
    ("1K:16M", [K << i for i in range(15)]),          # doubling, both ends included
    ("1K:16M:x4", [K * 4 ** i for i in range(8)]),    # 1K, 4K, ..., 16M
    ("1K:5K", [K, 2 * K, 4 * K]),                     # end not on the grid: stop below it
    ("2:8:+2", [2, 4, 6, 8]),
    ("0:8:+4", [0, 4, 8]),
    ("1K,64K", [K, 64 * K]),
    ("64K,1K", [64 * K, K]),                          # the user's order is kept
    ("1,2,4", [1, 2, 4]),
    ("8,8", [8, 8]),                                  # nothing dropped
    ("4,1K:4K", [4, K, 2 * K, 4 * K]),                # a list of ranges
    ("5:5", [5]),
])
def test_size_list_good(lib, text, values):
    assert size_list(lib, text) == (values, "")


@pytest.mark.parametrize("text,needle", [
    ("", "empty"),
    ("1K:", '"1K:": incomplete range'),
    (":4", '":4": incomplete range'),
    ("1:4:", "incomplete range"),
    ("16M:1K", '"16M:1K": range end is below its start'),
    ("0:8", "must start above 0"),                    # doubling from 0 would never end
    ("0:8:x2", "must start above 0"),
    ("1:8:x1", "factor must be at least 2"),
    ("1:8:+0", "increment must be at least 1"),
    ("1:8:y2", "step"),
    ("1:2:3:4", "a range is"),
    ("1K,,2K", "empty list item"),
    ("1K,", "empty list item"),
    ("1K,4Q", '"4Q": unknown unit suffix "Q"'),       # the bad element is named
    ("-1", "must not be negative"),
    ("1:1G:+1", "more than"),                         # 2^30 values: a typo, not a sweep
    ("16G:32G:x99999999999999999999", "too large"),
])
def test_size_list_bad(lib, text, needle):
    values, err = size_list(lib, text)
    assert values is None
    assert needle in err, err


def test_size_list_no_overflow_at_the_top(lib):
    # Doubling up to the largest power of two must stop, not wrap around to 0.
    values, err = size_list(lib, "1G:4611686018427387904")
    assert err == "" and values[-1] == 1 << 62 and len(values) == 33
    values, _ = int_list(lib, "9223372036854775000:9223372036854775807:+500")
    assert values == [9223372036854775000, 9223372036854775500]


@pytest.mark.parametrize("text,values", [
    ("1,2,4", [1, 2, 4]), ("2:8:+2", [2, 4, 6, 8]), ("1:16", [1, 2, 4, 8, 16]),
    ("1:16:x4", [1, 4, 16]), ("-1", [-1]), ("-4:4:+4", [-4, 0, 4]), ("1K", [1024]),
])
def test_int_list(lib, text, values):
    assert int_list(lib, text) == (values, "")


@pytest.mark.parametrize("text", ["", "1.5", "x", "1,,2", "4:2", "-4:4"])
def test_int_list_bad(lib, text):
    values, err = int_list(lib, text)
    assert values is None and err


# ------------------------------------------------------------------ durations

@pytest.mark.parametrize("text,ns", [
    ("10us", 10_000), ("10µs", 10_000), ("1.5ms", 1_500_000), ("2s", 2_000_000_000),
    ("500ns", 500), ("0", 0), ("0.0", 0), ("0.5us", 500), (".5ms", 500_000),
    ("300s", 300_000_000_000),
])
def test_duration_good(lib, text, ns):
    assert duration(lib, text) == (ns, "")


@pytest.mark.parametrize("text,needle", [
    ("-1us", "must not be negative"), ("-5", "must not be negative"),
    ("1m", 'unknown time unit "m"'), ("10 sec", "unknown time unit"), ("", "empty"),
    ("abc", "not a duration"), ("1e300s", "too large"), ("inf", "not a duration"),
    # A bare number other than 0 once meant microseconds ("--timeout 60" fired at once).
    ("100", '"100": a duration needs a unit (e.g. 100us, 100ms or 100s)'), ("1.5", "needs a unit"),
    ("0.001", "needs a unit"),
])
def test_duration_bad(lib, text, needle):
    value, err = duration(lib, text)
    assert value is None and needle in err, err


@pytest.mark.parametrize("n,text", [(4096, "4K"), (1 << 20, "1M"), (1000, "1000"), (0, "0"),
                                    (3 << 30, "3G"), (1536, "1536"), (8, "8"), (2048 * K, "2M")])
def test_format_size(lib, n, text):
    buf = C.create_string_buffer(32)
    lib.hmb_format_size(n, buf, len(buf))
    assert buf.value.decode() == text
    assert size(lib, text)[0] == n  # round-trips through the parser


# ------------------------------------------------------------------ option parser

def option_table(*rows):
    """An HMB_OPTION_END-terminated hmb_option array from (name, type, default, help, min,
    max, choices) tuples; the encoded strings are kept alive on the array."""
    arr = (cl.Option * (len(rows) + 1))()
    keep = []
    for i, (name, typ, default, help_, lo, hi, choices) in enumerate(rows):
        enc = [s.encode() if s is not None else None for s in (name, default, help_, choices)]
        keep += enc
        arr[i] = cl.Option(enc[0], typ, enc[1], enc[2], lo, hi, enc[3])
    arr._keep = keep
    return arr


def default_table(**overrides):
    arr = (cl.Default * (len(overrides) + 1))()
    keep = []
    for i, (name, value) in enumerate(overrides.items()):
        enc = (name.replace("_", "-").encode(), value.encode())
        keep += enc
        arr[i] = cl.Default(*enc)
    arr._keep = keep
    return arr


BENCH = option_table(
    ("partitions", INTS, "1", "partitions per message", 1, 1024, None),
    ("threads", INT, "2", "threads per rank (re-declared)", 1, 8, None),
    ("mode", CHOICE, "single", "exchange mode", 0, 0, "single|multiple|partitioned"),
    ("ratio", DOUBLE, "0.5", "a fraction", 0, 1, None),
    ("poll", DURATION, "10us", "poll interval", 1e-6, 1.0, None),
    ("label", STRING, None, "free text", 0, 0, None),
    ("verbose", FLAG, "0", "say more", 0, 0, None),
)


class Parsed:
    def __init__(self, lib, args, bench=BENCH, defaults=None):
        self.lib = lib
        self._tables = (bench, defaults)  # sval may point into them: keep them alive
        self.set = cl.OptSet()
        self._args = [a.encode() for a in args]
        argv = (C.c_char_p * max(1, len(args)))(*self._args)
        err = C.create_string_buffer(512)
        self.rc = lib.hmb_options_parse(C.byref(self.set), bench, defaults, len(args), argv, err,
                                        len(err))
        self.err = err.value.decode()

    def __getitem__(self, name):
        p = self.lib.hmb_options_find(C.byref(self.set), name.encode())
        return p.contents if p else None

    def __del__(self):
        if self.rc == 0:
            self.lib.hmb_options_free(C.byref(self.set))


def test_common_table_exactly(lib):
    table = C.cast(C.addressof(cl.Option.in_dll(lib, "hmb_common_options")), C.POINTER(cl.Option))
    rows, run_control = {}, set()
    i = 0
    groups = {}
    while table[i].name:
        o = table[i]
        name = o.name.decode().replace("_", "-")   # declared as a C field: --max-iters is max_iters
        i += 1
        assert o.help and len(o.help) > 10 and o.slot > 0 and o.given_slot > 0
        if o.group:   # offered only to the benchmarks that use the group (bench->uses)
            groups[name] = o.group
            continue
        if o.role == 1:
            run_control.add(name)
        names = []
        while o.names and o.names[len(names)]:   # .names: the choices as an array
            names.append(o.names[len(names)].decode())
        rows[name] = (o.type, o.default_value and o.default_value.decode(), o.min, o.max,
                      o.choices.decode() if o.choices else "|".join(names) or None)
    assert groups == {"grid": 1, "tgrid": 1, "boundary": 1, "face-partitions": 4, "comm": 2, "format": 8}
    assert rows == {
        "sizes": (SIZES, "8:4M", 0, 0, None),
        "threads": (INT, "1", 1, 256, None),
        "iters": (INT, "20", 1, 1e9, None),
        "max-iters": (INT, "100000", 1, 1e9, None),
        "warmup": (INT, "3", 0, 1e6, None),
        "ci-target": (DOUBLE, "5", 0, 100, None),
        "budget": (DURATION, "2s", 0, 86400, None),
        "compute": (DURATION, "0", 0, 3600, None),
        "noise": (STRING, "none", 0, 0, None),
        "noise-thread": (CHOICE, "fixed", 0, 0, "fixed|rand"),
        "seed": (INT, "1", 0, 2.0 ** 62, None),
        "compute-check": (CHOICE, "auto", 0, 0, "auto|full"),
        "cache": (CHOICE, "hot", 0, 0, "hot|cold"),
        "data": (CHOICE, "fresh", 0, 0, "reuse|fresh"),
        "llc-size": (SIZES, "0", 0, 0, None),
        "no-validate": (FLAG, "0", 0, 0, None),
        "inject": (CHOICE_ARGS, None, 0, 1e9, "corrupt:|never-complete:|stale:|wrong-slot:|hang:|silent-partner|invalid:"),
        "timeout": (DURATION, "300s", 0, 604800, None),
        "wait-bound": (DURATION, "10s", 0, 3600, None),
        "json": (STRING, None, 0, 0, None),
        "raw": (FLAG, "0", 0, 0, None),
        "metric": (STRING, None, 0, 0, None),
        "wide": (FLAG, "0", 0, 0, None),
        "thread-level": (CHOICE, None, 0, 0, "single|funneled|serialized|multiple"),
    }
    # options that steer the run but never define what is measured (the toolkit groups by the rest)
    assert run_control == {"iters", "max-iters", "warmup", "ci-target", "budget", "seed", "compute-check", "llc-size",
                           "no-validate", "inject", "timeout", "wait-bound", "json", "raw",
                           "metric", "wide"}


def test_defaults_of_common_options(lib):
    p = Parsed(lib, [], bench=None)
    assert p.rc == 0, p.err
    assert p["sizes"].size_list() == [8 << i for i in range(20)]  # 8 .. 4M
    assert p["iters"].ival == 20 and p["warmup"].ival == 3 and p["max-iters"].ival == 100000
    assert p["ci-target"].dval == 5.0
    assert p["budget"].ns == 2_000_000_000 and p["timeout"].ns == 300_000_000_000
    assert p["compute"].ns == 0 and p["noise"].sval == b"none" and p["cache"].sval == b"hot"
    assert p["inject"].present == 0 and p["seed"].ival == 1
    assert p["no-validate"].ival == 0 and p["raw"].ival == 0
    assert p["json"].present == 0 and p["json"].sval is None
    assert all(not p[n].given for n in ("sizes", "iters", "raw"))
    assert p["threads"].ival == 1 and p["nonexistent"] is None


def test_values_both_spellings(lib):
    p = Parsed(lib, ["--sizes", "1K:4K", "--iters=7", "--partitions", "1,2,4", "--mode=multiple",
                     "--ratio", "0.25", "--poll", "1.5ms", "--label", "hello world", "--verbose",
                     "--no-validate", "--inject", "corrupt:3", "--json=/tmp/x.jsonl", "--seed", "0"])
    assert p.rc == 0, p.err
    assert p["sizes"].size_list() == [1024, 2048, 4096] and p["sizes"].given
    assert p["iters"].ival == 7 and p["iters"].given
    assert p["partitions"].int_list() == [1, 2, 4]
    assert p["mode"].sval == b"multiple" and p["ratio"].dval == 0.25
    assert p["poll"].ns == 1_500_000 and p["label"].sval == b"hello world"
    assert p["verbose"].ival == 1 and p["no-validate"].ival == 1 and p["raw"].ival == 0
    assert p["inject"].choice_args() == [(0, 3.0)] and p["json"].sval == b"/tmp/x.jsonl" and p["seed"].ival == 0


def test_negative_values_and_units_in_ints(lib):
    p = Parsed(lib, ["--partitions", "-1:1:+1", "--iters", "2K", "--seed", "4611686018427387904"],
               bench=option_table(("partitions", INTS, "1", "any integers", 0, 0, None)))
    assert p.rc == 0, p.err
    assert p["partitions"].int_list() == [-1, 0, 1] and p["iters"].ival == 2048 and p["seed"].ival == 1 << 62


def test_last_one_wins(lib):
    p = Parsed(lib, ["--sizes", "1K", "--sizes", "8,16"])
    assert p.rc == 0 and p["sizes"].size_list() == [8, 16]


def test_benchmark_option_replaces_common(lib):
    # BENCH re-declares threads with range [1, 8] and default 2.
    p = Parsed(lib, [])
    assert p.rc == 0 and p["threads"].ival == 2
    names = [p.set.vals[i].opt.contents.name for i in range(p.set.count)]
    assert names.count(b"threads") == 1
    assert names[:7] == [b"partitions", b"threads", b"mode", b"ratio", b"poll", b"label", b"verbose"]
    assert Parsed(lib, ["--threads", "9"]).err == "--threads: 9 is above the maximum 8"
    assert Parsed(lib, ["--threads", "9"], bench=None).rc == 0  # the common range is [1, 256]


def test_default_overrides(lib):
    p = Parsed(lib, [], defaults=default_table(sizes="1K:16M", partitions="4", cache="cold"))
    assert p.rc == 0, p.err
    assert p["sizes"].size_list()[0] == 1024 and p["sizes"].size_list()[-1] == 16 << 20
    assert p["partitions"].int_list() == [4] and p["cache"].sval == b"cold"
    assert not p["sizes"].given
    # The command line still wins over an overridden default.
    p = Parsed(lib, ["--sizes", "8"], defaults=default_table(sizes="1K:16M"))
    assert p["sizes"].size_list() == [8]
    # An override naming no option is a programming error, reported.
    bad = Parsed(lib, [], defaults=default_table(bogus="1"))
    assert bad.rc == -1 and "bogus" in bad.err
    bad = Parsed(lib, [], defaults=default_table(partitions="0"))
    assert bad.rc == -1 and "default" in bad.err and "below the minimum 1" in bad.err


@pytest.mark.parametrize("args,message", [
    (["--foo"], "unknown option --foo"),
    (["--foo=3"], "unknown option --foo"),
    (["-x"], "unknown option -x"),
    (["xyz"], "unexpected argument 'xyz'"),
    (["--iters", "5", "stray"], "unexpected argument 'stray'"),
    (["--iters"], "--iters needs a value"),
    (["--iters", "--warmup", "1"], "--iters needs a value"),
    (["--partitions", "0"], "--partitions: 0 is below the minimum 1"),
    (["--partitions", "1,2,2048"], "--partitions: 2048 is above the maximum 1024"),  # per element
    (["--partitions", "0:8:+4"], "--partitions: 0 is below the minimum 1"),
    (["--sizes", "4Q"], '--sizes: "4Q": unknown unit suffix "Q" (use K, M or G)'),
    (["--sizes", "16M:1K"], '--sizes: "16M:1K": range end is below its start'),
    (["--cache", "warm"], '--cache: "warm" is not one of hot|cold'),
    (["--mode", "single2"], '--mode: "single2" is not one of single|multiple|partitioned'),
    (["--iters", "0"], "--iters: 0 is below the minimum 1"),
    (["--iters", "1.5"], "--iters: \"1.5\": must be a whole number"),
    (["--iters", "1,2"], "--iters: \"1,2\": one integer expected, not a list or range"),
    (["--warmup", "-1"], "--warmup: -1 is below the minimum 0"),
    (["--inject", "corrupt:-2"], "--inject: -2 is below the minimum 0"),
    (["--inject", "corrupt"], '--inject: "corrupt" is not one of corrupt:|never-complete:|stale:|wrong-slot:|hang:|'
                              'silent-partner|invalid: (a comma list; NAME:NUMBER where a name ends in :)'),
    (["--max-iters", "2000000000"], "--max-iters: 2000000000 is above the maximum 1000000000"),
    (["--ci-target", "101"], "--ci-target: 101 is above the maximum 100"),
    (["--ci-target", "abc"], '--ci-target: "abc" is not a number (plain decimal, e.g. 2.5 or 1e-3)'),
    (["--ratio", "1.5"], "--ratio: 1.5 is above the maximum 1"),
    (["--ratio", "-0.25"], "--ratio: -0.25 is below the minimum 0"),
    (["--poll", "0.25ms"], None),
    (["--poll", "2s"], "--poll: 2s is above the maximum 1s"),
    (["--poll", "100ns"], "--poll: 100ns is below the minimum 1us"),
    (["--budget", "-1s"], "--budget: \"-1s\": a duration must not be negative"),
    (["--timeout", "5m"], '--timeout: "5m": unknown time unit "m" (use ns, us, ms or s)'),
    (["--timeout", "60"], '--timeout: "60": a duration needs a unit (e.g. 60us, 60ms or 60s)'),
    (["--compute", "0"], None),
    (["--raw=1"], "--raw takes no value"),
    (["--seed", "4611686018427387905"], "--seed: 4611686018427387905 is above the maximum 4611686018427387904"),
])
def test_errors_one_line(lib, args, message):
    p = Parsed(lib, args)
    if message is None:
        assert p.rc == 0, p.err
        return
    assert p.rc == -1
    assert p.err == message
    assert "\n" not in p.err


@pytest.mark.parametrize("args", [["-h"], ["--help"], ["--iters", "5", "--help"], ["--bogus", "-h"]])
def test_help_returns_1(lib, args):
    assert Parsed(lib, args).rc == 1


@pytest.mark.parametrize("args", [["--help-all"], ["--help", "--help-all"], ["--bogus", "--help-all"]])
def test_help_all_returns_2(lib, args):
    assert Parsed(lib, args).rc == 2


def _help(lib, all_options: int) -> str:
    fd, path = tempfile.mkstemp()
    fp = libc.fdopen(fd, b"w")
    lib.hmb_options_help(fp, BENCH, default_table(sizes="1K:16M"), all_options)
    libc.fclose(fp)
    with open(path) as f:
        text = f.read()
    os.unlink(path)
    return text


def test_help_text(lib):
    text = _help(lib, 0)
    print(text)
    lines = text.splitlines()
    bench_at = lines.index("Benchmark options:")
    common_at = next(i for i, line in enumerate(lines) if line.startswith("Common options"))
    assert bench_at < common_at
    part = next(line for line in lines if line.startswith("  --partitions"))
    assert lines.index(part) < common_at
    assert "INTS" in part and "partitions per message (default: 1) [1..1024]" in part
    threads = [line for line in lines if line.startswith("  --threads")]
    assert len(threads) == 1 and "[1..8]" in threads[0]            # replaced, shown once
    assert any("--sizes SIZES" in line and "(default: 1K:16M)" in line for line in lines)
    assert any("--cache hot|cold" in line and "(default: hot)" in line for line in lines)
    assert any("--iters INT" in line and "[1..1000000000]" in line for line in lines)
    assert any("--poll TIME" in line and "[1us..1s]" in line for line in lines)
    assert any(line.startswith("  --raw ") for line in lines)
    for name in ("sizes", "threads", "iters", "max-iters", "warmup", "ci-target", "budget",
                 "compute", "noise", "noise-thread", "seed", "compute-check", "cache", "data", "llc-size", "no-validate",
                 "timeout", "json", "raw", "metric", "wide"):
        assert any(line.startswith(f"  --{name} ") for line in lines[common_at:] + threads), name
    # TEST ONLY options (planted faults) are counted, listed only with --help-all (all = 1)
    assert not any(line.startswith("  --inject") for line in lines)
    assert "(1 TEST ONLY option for testing hmb-bench itself not shown: --help-all lists them)" in lines
    full = _help(lib, 1)
    assert any(line.startswith("  --inject LIST") and "TEST ONLY" in line for line in full.splitlines())
    assert "not shown" not in full


LIST_TABLE = option_table(
    ("mode", CHOICES, "latency,bw", "what to measure", 0, 0, "latency|bw|bibw|msgrate"),
)


@pytest.mark.parametrize("text,mask", [
    ("latency", 0b0001), ("bw,latency", 0b0011), ("msgrate", 0b1000), ("all", 0b1111),
    ("bibw,msgrate,latency,bw", 0b1111),
])
def test_choices_list_is_a_mask_in_declared_order(lib, text, mask):
    p = Parsed(lib, ["--mode", text], bench=LIST_TABLE)
    assert p.rc == 0, p.err
    assert p["mode"].ival == mask and p["mode"].sval.decode() == text


def test_choices_default(lib):
    p = Parsed(lib, [], bench=LIST_TABLE)
    assert p.rc == 0 and p["mode"].ival == 0b0011


@pytest.mark.parametrize("text,message", [
    ("bogus", '--mode: "bogus" is not one of latency|bw|bibw|msgrate (a comma list, or all)'),
    ("bw,bw", '--mode: "bw" is listed twice'),
    ("bw,,latency", '--mode: empty item in "bw,,latency"'),
    ("bw,", '--mode: empty item in "bw,"'),
    ("latency,Bw", '--mode: "Bw" is not one of latency|bw|bibw|msgrate (a comma list, or all)'),
])
def test_choices_errors_name_the_item(lib, text, message):
    p = Parsed(lib, ["--mode", text], bench=LIST_TABLE)
    assert p.rc == -1 and p.err == message


ARGS_TABLE = option_table(
    ("progress", CHOICE_ARGS, "none,test:10", "progress modes", 0.1, 1e6, "none|test:|thread"),
)


@pytest.mark.parametrize("text,items", [
    ("none", [(0, None)]),
    ("thread,none", [(2, None), (0, None)]),                      # the order given, not declared
    ("test:2.5,none,test:10", [(1, 2.5), (0, None), (1, 10.0)]),  # one name, two numbers
    ("test:1e6", [(1, 1e6)]),
])
def test_choice_args_keep_order_and_numbers(lib, text, items):
    p = Parsed(lib, ["--progress", text], bench=ARGS_TABLE)
    assert p.rc == 0, p.err
    got = [(i, None if math.isnan(x) else x) for i, x in p["progress"].choice_args()]
    assert got == items and p["progress"].sval.decode() == text


def test_choice_args_default(lib):
    p = Parsed(lib, [], bench=ARGS_TABLE)
    assert p.rc == 0 and p["progress"].choice_args()[1] == (1, 10.0)


@pytest.mark.parametrize("text,message", [
    ("fast", '--progress: "fast" is not one of none|test:|thread (a comma list; NAME:NUMBER where a name ends in :)'),
    ("test", '--progress: "test" is not one of none|test:|thread (a comma list; NAME:NUMBER where a name ends in :)'),
    ("none:3", '--progress: "none:3" is not one of none|test:|thread (a comma list; NAME:NUMBER where a name ends in :)'),
    ("test:", '--progress: "test:": "" is not a number'),
    ("test:x1", '--progress: "test:x1": "x1" is not a number'),
    ("test:0.05", "--progress: 0.05 is below the minimum 0.1"),
    ("test:10,test:10.0", '--progress: "test:10.0" is listed twice'),
    ("none,none", '--progress: "none" is listed twice'),
    ("none,,thread", '--progress: empty item in "none,,thread"'),
])
def test_choice_args_errors_name_the_item(lib, text, message):
    p = Parsed(lib, ["--progress", text], bench=ARGS_TABLE)
    assert p.rc == -1 and p.err == message


def test_struct_mirrors_match_the_library(lib):
    """Every mirrored struct's size and field offsets agree with the library (load() checks it too)."""
    assert cl.layout_mismatches(lib) == []


def test_a_desynchronised_mirror_is_named(lib, monkeypatch):
    class Shifted(C.Structure):  # hmb_default with a field inserted in front: every offset moves
        _fields_ = [("pad", C.c_int), ("name", C.c_char_p), ("value", C.c_char_p)]
    monkeypatch.setitem(cl.MIRRORS, "hmb_default", Shifted)
    bad = cl.layout_mismatches(lib)
    assert "hmb_default: 24 bytes in the mirror, 16 in the library" in bad
    assert "hmb_default.name: offset/size 8/8 in the mirror, 0/8 in the library" in bad
    assert "hmb_default: mirror fields ['pad'] not in the library's table" in bad


# ------------------------------------------------------------------ typed values (HMB_OPTIONS)

class TypedBench(C.Structure):
    """What HMB_OPTIONS generates for X(parts, INTS) X(mode, CHOICE) X(level, CHOICES) X(delay, DURATION)
    X(label, STRING) X(count, INT): one typed field per option, then the given flags."""
    _fields_ = [("parts_v", C.POINTER(C.c_longlong)), ("parts_n", C.c_int), ("mode", C.c_int),
                ("level", C.c_ulonglong), ("delay", C.c_int64), ("label", C.c_char_p), ("count", C.c_longlong),
                ("given", C.c_ubyte * 6)]


def typed_table():
    f = TypedBench
    rows = [("parts", INTS, "1,2", f.parts_v.offset), ("mode", CHOICE, "b", f.mode.offset),
            ("level", CHOICES, "x,z", f.level.offset), ("delay", DURATION, "10us", f.delay.offset),
            ("label", STRING, None, f.label.offset), ("count", INT, "7", f.count.offset)]
    arr = (cl.Option * (len(rows) + 1))()
    keep = []
    for i, (name, typ, default, offset) in enumerate(rows):
        enc = [name.encode(), default and default.encode(), b"help", b"a|b|c" if typ == CHOICE else b"x|y|z"]
        keep += enc
        arr[i] = cl.Option(enc[0], typ, enc[1], enc[2], 0, 0, enc[3] if typ in (CHOICE, CHOICES) else None, 0,
                           offset + 1, f.given.offset + i + 1)
    arr._keep = keep
    return arr


def test_typed_values_land_in_the_struct(lib):
    """The parser stores each value where its row's slot says, typed: what a benchmark reads."""
    table = typed_table()
    p = Parsed(lib, ["--mode", "c", "--delay", "1.5ms", "--label", "hi"], bench=table)
    assert p.rc == 0, p.err
    common = C.create_string_buffer(8192)   # hmb_common_opts: the harness's own
    typed = TypedBench()
    lib.hmb_options_store(C.byref(p.set), C.cast(common, C.c_void_p), C.byref(typed))
    assert [typed.parts_v[i] for i in range(typed.parts_n)] == [1, 2]
    assert typed.mode == 2 and typed.level == 0b101 and typed.delay == 1_500_000
    assert typed.label == b"hi" and typed.count == 7
    assert list(typed.given) == [0, 1, 0, 1, 1, 0]   # mode, delay, label given; the rest defaulted


def test_unset_typed_values(lib):
    """An option without default and not given: NULL string, -1 choice, empty list."""
    table = option_table(("label", STRING, None, "free text", 0, 0, None),
                         ("mode", CHOICE, None, "a choice", 0, 0, "a|b"))
    table[0].slot, table[1].slot = 1, 9
    p = Parsed(lib, [], bench=table)
    assert p.rc == 0, p.err
    out = (C.c_char * 16)()
    C.memset(out, 0x5a, 16)
    lib.hmb_options_store(C.byref(p.set), C.cast(C.create_string_buffer(8192), C.c_void_p), C.byref(out))
    assert C.c_void_p.from_buffer(out, 0).value is None and C.c_int.from_buffer(out, 8).value == -1


def test_option_names_spell_underscore_as_dash(lib):
    table = option_table(("face_partitions", STRING, "tiles", "a name declared as a C field", 0, 0, None))
    p = Parsed(lib, ["--face-partitions", "4"], bench=table)
    assert p.rc == 0 and p["face-partitions"].sval == b"4"
    assert p.set.vals[0].opt.contents.name == b"face-partitions"
