"""p2p baselines: every mode produces sane, validated results under each MPI.

Timings on this shared 2-core VM are noisy, so only physically possible bounds are checked:
a positive latency below 10 ms, a bandwidth below 1 TB/s, medians inside their CIs. What is
checked exactly: validation catches corrupted, stale and misplaced data under both --data
regimes, the slot and batch counts follow the documented rules, and usage errors exit 2.
"""
from __future__ import annotations

import math

import pytest

from conftest import run_bench

FAST = ["--iters", "5", "--warmup", "1", "--ci-target", "0"]
MODES = {  # mode -> metrics it reports (the others are null for that mode)
    "latency": ["latency_us", "iter_time_us"],
    "bw": ["bandwidth_MBps", "msg_rate", "iter_time_us"],
    "bibw": ["bandwidth_MBps", "msg_rate", "iter_time_us"],
    "msgrate": ["bandwidth_MBps", "msg_rate", "iter_time_us"],
}


def messages_per_sample(res: dict) -> int:
    """Messages one sample times, from the mode's definition (osu_bw / osu_bibw / osu_mbw_mr)."""
    window, pairs = res["params"]["window"], res["params"]["pairs"]
    return {"bw": window, "bibw": 2 * window, "msgrate": window * pairs}[res["params"]["mode"]]


def check_result(res: dict, mode: str) -> None:
    assert res["status"] == "ok" and res["invalid"] == 0
    assert res["params"]["mode"] == mode
    for name, m in res["metrics"].items():
        if name not in MODES[mode]:
            assert m["count"] == 0 and m["median"] is None, (mode, name)
            continue
        assert m["count"] == res["iterations"]
        assert math.isfinite(m["median"]) and m["median"] > 0, (mode, name, m)
        # (ci_lo <= median <= ci_hi and min <= median <= max hold by construction: test_stats.py)
    if mode == "latency":
        # microseconds, not seconds or nanoseconds (80 ms was seen on a heavily loaded machine)
        assert 0.01 < res["metrics"]["latency_us"]["median"] < 1_000_000
        assert 1 <= res["extra"]["batch"] <= 256 and res["extra"]["slots"] == res["extra"]["batch"]
        return
    assert 0 < res["metrics"]["bandwidth_MBps"]["median"] < 1e6
    assert 1 <= res["extra"]["slots"] <= res["params"]["window"]
    samples = res.get("samples")
    if samples:
        # Each sample moves the mode's message count: rate x span = messages, bandwidth x span = bytes.
        # The expectation comes from the mode (bibw counts both directions, msgrate all pairs).
        want = messages_per_sample(res)
        for rate, bw, span_us in zip(samples["msg_rate"], samples["bandwidth_MBps"], samples["iter_time_us"]):
            assert rate * span_us * 1e-6 == pytest.approx(want, rel=1e-9)
            assert bw * span_us == pytest.approx(want * res["params"]["size_bytes"], rel=1e-9)


@pytest.mark.parametrize("mode", ["latency", "bw", "bibw"])
def test_two_rank_modes(mpi_name, mode, tmp_path):
    window = [] if mode == "latency" else ["--window", "8"]  # latency reads no --window (refused: exit 2)
    r = run_bench(mpi_name, ["p2p", "--mode", mode, "--sizes", "8,1K,64K", *window, "--raw"] + FAST,
                  tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    results = r.results()
    assert [x["params"]["size_bytes"] for x in results] == [8, 1024, 65536]
    for res in results:
        check_result(res, mode)
        assert res["params"]["window"] == (1 if mode == "latency" else 8)
        assert res["params"]["pairs"] == 1
    # The stdout table has one row per point, after the '#' header block.
    rows = [line for line in r.stdout.splitlines() if line and not line.startswith("#")]
    assert len(rows) == 3 and rows[1].split()[:2] == ["1K", mode]


def test_all_modes_default(mpi_name, tmp_path):
    r = run_bench(mpi_name, ["p2p", "--sizes", "4K", "--window", "4"] + FAST, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    assert [x["params"]["mode"] for x in r.results()] == ["latency", "bw", "bibw", "msgrate"]
    for res in r.results():
        check_result(res, res["params"]["mode"])


def test_msgrate_four_ranks(mpi_name, tmp_path):
    """Two pairs (0-2, 1-3); oversubscribed on 2 cores, so only correctness is checked."""
    r = run_bench(mpi_name, ["p2p", "--mode", "msgrate", "--sizes", "8,4K", "--window", "4", "--raw"] + FAST,
                  ranks=4, tmp_path=tmp_path, timeout=240)
    assert r.rc == 0, r.stderr
    for res in r.results():
        check_result(res, "msgrate")
        assert res["params"]["pairs"] == 2


def test_three_ranks_latency_and_odd_msgrate(mpi_name, tmp_path):
    """Ranks beyond 0 and 1 idle in latency/bw; msgrate needs an even count (exit 2)."""
    ok = run_bench(mpi_name, ["p2p", "--mode", "latency,bw", "--sizes", "8", "--window", "2"] + FAST,
                   ranks=3, tmp_path=tmp_path, timeout=240)
    assert ok.rc == 0, ok.stderr
    assert [x["params"]["mode"] for x in ok.results()] == ["latency", "bw"]
    bad = run_bench(mpi_name, ["p2p", "--mode", "msgrate", "--sizes", "8"] + FAST, ranks=3, timeout=240)
    assert bad.rc == 2
    assert [line for line in bad.stderr.splitlines() if "even number of ranks (got 3)" in line]


def test_bad_mode_is_usage_error(mpi_name):
    r = run_bench(mpi_name, ["p2p", "--mode", "latency,pingpong"], timeout=60)
    assert r.rc == 2
    assert [line for line in r.stderr.splitlines() if line.startswith("hmb-bench p2p: --mode")]


def test_window_slots_validated(mpi_name, tmp_path):
    """bibw: both ranks receive windows; the corruption is caught on the highest checking rank."""
    r = run_bench(mpi_name, ["p2p", "--mode", "bibw", "--sizes", "1K", "--window", "3",
                             "--inject", "corrupt:3"] + FAST, tmp_path=tmp_path, timeout=120)
    assert r.rc == 3, r.stderr
    assert any("validation failed: bench=p2p size=1K mode=bibw" in line and "iteration=3" in line
               and "rank=1" in line for line in r.stderr.splitlines())


@pytest.mark.parametrize("data", ["reuse", "fresh"])
def test_data_regimes_validate(mpi_name, data, tmp_path):
    """Both regimes run every mode with every message checked; the regime is in both headers."""
    r = run_bench(mpi_name, ["p2p", "--data", data, "--sizes", "8,4K", "--window", "4", "--batch", "3"] + FAST,
                  tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    assert r.header()["data"] == data and r.header()["options"]["data"] == data
    assert any(line.startswith("# cache:") and f"data: {data}," in line for line in r.stdout.splitlines())
    assert len(r.results()) == 8
    for res in r.results():
        check_result(res, res["params"]["mode"])


# (mode, extra args, rank that receives the bad message, slot it lands in)
FAULTS = [("latency", ["--batch", "4"], 1, 3), ("bw", ["--window", "8"], 1, 7),
          ("bibw", ["--window", "8"], 1, 7), ("msgrate", ["--window", "8"], 1, 7)]


@pytest.mark.parametrize("data", ["reuse", "fresh"])
@pytest.mark.parametrize("mode,extra,rank,slot", FAULTS)
def test_stale_data_caught(mpi_name, mode, extra, rank, slot, data, tmp_path):
    """In iteration 3 the sender sends the previous generation's buffers: data that is right in
    every byte except that it belongs to another iteration must fail validation."""
    r = run_bench(mpi_name, ["p2p", "--mode", mode, "--sizes", "1K", "--data", data, "--inject", "stale:3"]
                  + extra + FAST, tmp_path=tmp_path, timeout=120)
    assert r.rc == 3, (r.rc, r.stderr)
    lines = [line for line in r.stderr.splitlines() if "validation failed: bench=p2p" in line]
    assert lines and all(f"mode={mode}" in line and "iteration=3" in line and f"rank={rank}" in line
                         for line in lines), r.stderr


@pytest.mark.parametrize("mode,extra,rank,slot", FAULTS)
def test_wrong_slot_caught(mpi_name, mode, extra, rank, slot, tmp_path):
    """The last message of iteration 2 carries the next slot's data: the slot it lands in fails."""
    r = run_bench(mpi_name, ["p2p", "--mode", mode, "--sizes", "1K", "--inject", "wrong-slot:2"] + extra + FAST,
                  tmp_path=tmp_path, timeout=120)
    assert r.rc == 3, (r.rc, r.stderr)
    lines = [line for line in r.stderr.splitlines() if "validation failed: bench=p2p" in line]
    assert len(lines) == 1 and "iteration=2" in lines[0] and f"rank={rank} partition={slot}:" in lines[0], r.stderr


@pytest.mark.parametrize("post", ["racing", "ahead"])
def test_window_posting_validates(mpi_name, post, tmp_path):
    """Receives posted after the start signal (racing, osu_bw's way, the default) or before it
    (ahead): bw and msgrate run and check every slot, the choice is in the header, and the
    previous iteration's data sent in iteration 3 fail validation either way."""
    args = ["p2p", "--mode", "bw,msgrate", "--sizes", "8,4K", "--window", "8", "--post", post] + FAST
    r = run_bench(mpi_name, args, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    assert r.header()["options"]["post"] == post
    assert [x["params"]["mode"] for x in r.results()] == ["bw", "bw", "msgrate", "msgrate"]
    for res in r.results():
        check_result(res, res["params"]["mode"])
    stale = run_bench(mpi_name, args + ["--inject", "stale:3"], tmp_path=tmp_path, timeout=120)
    assert stale.rc == 3, stale.stderr
    assert any("validation failed: bench=p2p" in line and "iteration=3" in line for line in stale.stderr.splitlines())


def test_window_slots_follow_the_cache(mpi_name, tmp_path):
    """--cache hot: receive slots are reused once the window exceeds LLC/256 (here 1M/256 = 4K),
    at least one; --cache cold: one slot per message. Misplaced data is caught in a reused slot."""
    args = ["p2p", "--mode", "bw", "--sizes", "64,1K,16K", "--window", "8", "--llc-size", "1M"] + FAST
    hot = run_bench(mpi_name, args, tmp_path=tmp_path)
    assert hot.rc == 0, hot.stderr
    assert [x["extra"]["slots"] for x in hot.results()] == [8, 4, 1]   # 8 x 64 B fit; 4 x 1K; 16K alone
    cold = run_bench(mpi_name, args + ["--cache", "cold"], tmp_path=tmp_path)
    assert cold.rc == 0, cold.stderr
    assert [x["extra"]["slots"] for x in cold.results()] == [8, 8, 8]
    # Message 7 lands in slot 7 % 4 = 3 and carries slot 0's data.
    bad = run_bench(mpi_name, ["p2p", "--mode", "bw", "--sizes", "1K", "--window", "8", "--llc-size", "1M",
                               "--inject", "wrong-slot:2"] + FAST, tmp_path=tmp_path, timeout=120)
    assert bad.rc == 3, bad.stderr
    assert any("iteration=2 rank=1 partition=3:" in line for line in bad.stderr.splitlines()), bad.stderr


def test_latency_batch_recorded(mpi_name, tmp_path):
    """--batch N: N round trips per sample, each into its own checked slot (the corruption of
    iteration 2 hits the first slot checked); auto: a 4 MB round trip (8 MB moved, well over
    20 us on any machine) is never batched."""
    forced = run_bench(mpi_name, ["p2p", "--mode", "latency", "--sizes", "8,1K", "--batch", "5"] + FAST,
                       tmp_path=tmp_path)
    assert forced.rc == 0, forced.stderr
    for res in forced.results():
        check_result(res, "latency")
        assert res["extra"] == {"batch": 5, "slots": 5} and res["params"]["window"] == 1
    auto = run_bench(mpi_name, ["p2p", "--mode", "latency", "--sizes", "8,4M"] + FAST, tmp_path=tmp_path)
    assert auto.rc == 0, auto.stderr
    small, big = auto.results()
    check_result(small, "latency")
    assert big["extra"]["batch"] == 1
    bad = run_bench(mpi_name, ["p2p", "--mode", "latency", "--sizes", "1K", "--batch", "6", "--inject", "corrupt:2"]
                    + FAST, tmp_path=tmp_path, timeout=120)
    assert bad.rc == 3, bad.stderr
    assert any("iteration=2 rank=1 partition=0:" in line for line in bad.stderr.splitlines()), bad.stderr


@pytest.mark.parametrize("args,name", [(["--data", "stale"], "--data"), (["--batch", "-1"], "--batch"),
                                       (["--post", "early"], "--post"),
                                       (["--mode", "latency", "--batch", "4096", "--sizes", "1M"], "--batch")])
def test_bad_data_and_batch_are_usage_errors(mpi_name, args, name):
    r = run_bench(mpi_name, ["p2p"] + args, timeout=60)
    assert r.rc == 2, (r.rc, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.startswith("hmb-bench p2p:")]
    assert len(lines) == 1 and lines[0].startswith(f"hmb-bench p2p: {name}"), r.stderr


def test_poison_pages_marks_every_page_and_the_tail():
    """hmb_poison_pages (p2p's hot-cache latency, which sends one unchanging set): one 8-byte
    word of 0xA5 at every 4 KB page start and in the last 8 bytes, nothing else; all of a buffer
    shorter than 16 bytes. Hand-computed offsets for 10000 bytes: 0, 4096, 8192 and 9992."""
    import ctypes as C
    from _corelib import load
    lib = load()
    buf = (C.c_ubyte * 10000)()
    lib.hmb_poison_pages(buf, 10000)
    poisoned = {i for i in range(10000) if buf[i] == 0xA5}
    want = set(range(0, 8)) | set(range(4096, 4104)) | set(range(8192, 8200)) | set(range(9992, 10000))
    assert poisoned == want and all(buf[i] == 0 for i in range(10000) if i not in want)
    small = (C.c_ubyte * 12)()
    lib.hmb_poison_pages(small, 12)
    assert list(small) == [0xA5] * 12


@pytest.mark.parametrize("got,want,words", [
    (b"\xa5" * 8, bytes(range(8)), "the piece is still the receive poison"),
    (b"\x5e" * 8, bytes(range(8)), "the piece is the sender's poison"),
    # Open MPI 5.0.11 partitioned, once in a make test: byte 0 of a halo face was 0x5e, the rest right
    (b"\x5e" + bytes(range(1, 8)), bytes(range(8)), "its 1 wrong byte(s) of 8 all hold the sender's poison"),
    (b"\x00\x01\xa5\xa5" + bytes(range(4, 8)), bytes(range(8)), "its 2 wrong byte(s) of 8 all hold the receive poison"),
    (b"\x5e\xa5" + bytes(range(2, 8)), bytes(range(8)), None),     # both poisons: says nothing
    (b"\x07" + bytes(range(1, 8)), bytes(range(8)), None),          # other data: says nothing
    (b"\x5e" + bytes(range(1, 8)), b"\x5e" + bytes(range(1, 8)), None),   # nothing wrong
])
def test_poison_in_a_wrong_buffer_is_named(got, want, words):
    """hmb_poison_why: what the poison bytes in a mismatch say (a library conformance problem), for
    the whole piece and for its wrong bytes alone; nothing when the wrong bytes are not one poison."""
    import ctypes as C
    from _corelib import load
    why = C.create_string_buffer(200)
    load().hmb_poison_why(got, want, len(got), why, 200)
    text = why.value.decode()
    if words is None:
        assert text == ""
    else:
        assert text.startswith(" (") and words in text and text.endswith("library conformance problem)"), text


def test_stale_data_caught_with_latency_rewarm(mpi_name, tmp_path):
    """Above 128 KB, hot-cache latency does one untimed round trip after the check (restoring the
    library's cache state) and poisons again: stale data in the timed sample must still fail."""
    r = run_bench(mpi_name, ["p2p", "--mode", "latency", "--sizes", "256K", "--inject", "stale:3"] + FAST,
                  tmp_path=tmp_path, timeout=120)
    assert r.rc == 3, (r.rc, r.stderr)
    assert "validation failed: bench=p2p" in r.stderr and "iteration=3" in r.stderr, r.stderr
