"""hmb advise on a synthetic profile whose advice is computed by hand; bad input; --verify's
alternation and ratio on a fake program."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import get_mpi, hmb_cli



def nb(size, messages, hist, exact=True, nbytes=None):
    return {"size": size, "exact": exact, "messages": messages, "bytes": nbytes or size * messages,
            "waited": sum(n for _, _, n in hist), "post_to_wait_sum_s": 0.0, "post_to_wait_hist": hist}


def side(entries=(), blocking=0):
    msgs = sum(e["messages"] for e in entries) + blocking
    return {"messages": msgs, "bytes": 0, "blocking": blocking, "nonblocking": msgs - blocking,
            "size_hist": [], "nonblocking_sizes": list(entries)}


def rank(r, peers, p2p=0.2):
    return {"rank": r, "wall_s": 1.0, "p2p_s": p2p, "p2p_fraction": p2p, "vmhwm_kib": 1000,
            "peers": [{"peer": p, "send": s, "recv": rv} for p, (s, rv) in peers.items()]}


# Switch 8000 B, 1000 MB/s: a message of s bytes takes s ns; it triggers when non-blocking,
# s > 8000 and post-to-wait >= s/2 ns (a histogram bin counts by its geometric middle).
PROFILE = {
    "type": "hmbprof", "schema": 1, "world_size": 3, "ranks": [
        rank(0, {
            # 0 -> 1, sender's view: 12000 B x 10: 6 waited ~7.3 us (>= 6 us: trigger), 4 ~1 us (no);
            # 20000 B x 2 at 50 us (>= 10 us: trigger); 4000 B x 20 at 1 ms: eager already, ignored.
            1: (side([nb(12000, 10, [[7e-6, 7.6e-6, 6], [1e-6, 1.1e-6, 4]]), nb(20000, 2, [[5e-5, 5.4e-5, 2]]),
                      nb(4000, 20, [[1e-3, 1.1e-3, 20]])]),
                side()),
            # 0 -> 2: non-blocking but small: rendezvous 0, keep.
            2: (side([nb(100, 50, [[1e-3, 1.1e-3, 50]])]), side()),
        }),
        rank(1, {
            # 0 -> 1, receiver's view: 12000 B x 10 all at ~2 us: none triggers (max with the sender: 6)
            0: (side([nb(8100, 5, [[1e-3, 1.1e-3, 5]])]),       # 1 -> 0: 8100 B x 5, trigger
                side([nb(12000, 10, [[2e-6, 2.2e-6, 10]])], blocking=2)),
        }),
        rank(2, {
            # 2 -> 0: folded bin (not exact), 4 messages of mean 40000 B at 100 us (>= 20 us): trigger
            0: (side([nb(32768, 4, [[1e-4, 1.1e-4, 4]], exact=False, nbytes=160000)]), side()),
        }),
    ]}
# pair 0->1: (6 x 12000 + 2 x 20000) / 8 = 14000 -> 2^14 + 1024 = 17408
# pair 1->0: 8100 -> 8192 + 1024 = 9216; with --header 100: 8200 -> 16384 + 1024 = 17408
# pair 2->0: 40000 -> 65536 + 1024 = 66560
# job: (72000 + 40000 + 40500 + 160000) / 17 = 18382.35 -> 32768 + 1024 = 33792
TRADEOFF = [{"type": "result", "bench": "proto", "params": {"setting": "default"}, "extra": {"rss_per_peer_kB": 10}},
            {"type": "result", "bench": "proto", "params": {"setting": "16K"}, "extra": {"rss_per_peer_kB": 20}},
            {"type": "result", "bench": "proto", "params": {"setting": "64K"}, "extra": {"rss_per_peer_kB": 80}}]
PROBE = [{"type": "result", "bench": "proto", "params": {"view": "receiver-late"}, "switch_bytes": [[8000, 8064]],
          "bandwidth_MBps": 1000.0},
         {"type": "result", "bench": "proto", "params": {"view": "sender"}, "switch_bytes": [[8100, 8128]],
          "bandwidth_MBps": 1000.0}]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    get_mpi("mpich")   # libhmbcore.so holds the rule
    d = tmp_path_factory.mktemp("advise")
    (d / "prof.json").write_text(json.dumps(PROFILE))
    (d / "probe.jsonl").write_text("".join(json.dumps(r) + "\n" for r in PROBE))
    (d / "tradeoff.jsonl").write_text("".join(json.dumps(r) + "\n" for r in TRADEOFF))
    return d


def hmb(*args, cwd=None):
    return hmb_cli(args, cwd=cwd)


def test_advice_by_hand(files):
    p = hmb("advise", files / "prof.json", "--mpi", "mpich", "--threshold", 8000, "--bandwidth", 1000,
            "--json", files / "adv.json")
    assert p.returncode == 0, p.stderr
    adv = json.loads((files / "adv.json").read_text())
    pairs = {(r["src"], r["dst"]): r for r in adv["pairs"]}
    assert {k: (r["rendezvous_nonblocking"], r["triggered"], r["threshold_bytes"]) for k, r in pairs.items()} == {
        (0, 1): (12, 8, 17408), (0, 2): (0, 0, None), (1, 0): (5, 5, 9216), (2, 0): (4, 4, 66560)}
    assert pairs[(0, 1)]["mean_size_bytes"] == 14000
    assert adv["job"]["triggered"] == 17 and adv["job"]["mean_size_bytes"] == pytest.approx(312500 / 17)
    assert adv["job"]["threshold_bytes"] == 33792
    assert adv["job"]["env"] == {"MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE": "33792",
                                 "MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD": "33792",
                                 "MPIR_CVAR_CH4_PACK_BUFFER_SIZE": "33792",
                                 "UCX_RNDV_THRESH": "33792", "MPIR_CVAR_CH4_OFI_EAGER_THRESHOLD": "33792",
                                 "FI_OFI_RXM_BUFFER_SIZE": "33792", "FI_OFI_RXM_SAR_LIMIT": "33792"}
    assert "memory cost unknown (no trade-off data)" in p.stdout
    assert "job: threshold 33792 B" in p.stdout


def test_header_probe_and_memory(files):
    p = hmb("advise", files / "prof.json", "--mpi", "openmpi", "--probe", files / "probe.jsonl",
            "--header", 100, "--tradeoff", files / "tradeoff.jsonl", "--json", files / "adv2.json")
    assert p.returncode == 0, p.stderr
    adv = json.loads((files / "adv2.json").read_text())
    assert adv["switch_bytes"] == 8000 and adv["bandwidth_MBps"] == [[0, 1000.0]]   # the smaller switch of two views
    pairs = {(r["src"], r["dst"]): r["threshold_bytes"] for r in adv["pairs"]}
    assert pairs[(1, 0)] == 17408                                           # 8100 + 100 -> 2^14 + 1024
    # job mean 18382.35 + 100 -> 2^15 + 1024; Open MPI: the eager limit, and max send size above 32K
    assert adv["job"]["env"] == {"OMPI_MCA_btl_sm_eager_limit": "33792", "OMPI_MCA_btl_sm_max_send_size": "33792",
                                 "UCX_RNDV_THRESH": "33792", "OMPI_MCA_btl_tcp_eager_limit": "33792",
                                 "OMPI_MCA_btl_tcp_rndv_eager_limit": "33792",
                                 "FI_OFI_RXM_BUFFER_SIZE": "33792", "FI_OFI_RXM_SAR_LIMIT": "33792"}
    # 33792 B -> measured at 64K: (80 - 10) kB x 2 peers
    assert "+140 kB per rank with 2 peers" in p.stdout


def test_nothing_triggers_keeps_threshold(files):
    p = hmb("advise", files / "prof.json", "--mpi", "mpich", "--threshold", 1 << 20, "--bandwidth", 1000)
    assert p.returncode == 0 and "job: keep the current threshold" in p.stdout


# --trigger outside-mpi: 0 -> 1 sends 12000 B x 10 and 20000 B x 2, all waited 1 ms after their post
# (all trigger on post-to-wait: mean (120000 + 40000) / 12 = 13333 -> 2^14 + 1024 = 17408); outside
# MPI only ~1 us of the 12000 B ones' (< 6 us: no) and ~50 us of the 20000 B ones' (>= 10 us: trigger):
# mean 20000 -> 2^15 + 1024 = 33792.
def with_outside(size, messages, outside_hist):
    return {**nb(size, messages, [[1e-3, 1.1e-3, messages]]), "outside_mpi_known": messages,
            "outside_mpi_hist": outside_hist}


OUTSIDE_PROFILE = {"type": "hmbprof", "schema": 1, "world_size": 2, "ranks": [
    rank(0, {1: (side([with_outside(12000, 10, [[1e-6, 1.1e-6, 10]]),
                       with_outside(20000, 2, [[5e-5, 5.4e-5, 2]])]), side())}),
    rank(1, {0: (side(), side())})]}


@pytest.mark.parametrize("trigger,triggered,threshold", [("post-to-wait", 12, 17408), ("outside-mpi", 2, 33792)])
def test_trigger_outside_mpi(files, trigger, triggered, threshold):
    (files / "outside.json").write_text(json.dumps(OUTSIDE_PROFILE))
    p = hmb("advise", files / "outside.json", "--mpi", "mpich", "--threshold", 8000, "--bandwidth", 1000,
            "--trigger", trigger, "--json", files / "adv-outside.json")
    assert p.returncode == 0, p.stderr
    adv = json.loads((files / "adv-outside.json").read_text())
    assert (adv["trigger"], adv["job"]["triggered"], adv["job"]["threshold_bytes"]) == (trigger, triggered, threshold)


# A probe record as proto writes it: switch and per-size bandwidth in `extra`. 8192 B lies halfway
# (in log size) between 4096 B at 500 MB/s and 16384 B at 1500 MB/s: 1000 MB/s, 8.192 us, so a
# post-to-wait bin counts from 4.096 us: [4.2, 4.4] us yes (2 messages), [3.6, 3.8] us no.
PROTO_PROBE = {"type": "result", "bench": "proto", "params": {"view": "sender"},
               "extra": {"switch_bytes": [[8112, 8120]], "bandwidth_MBps": [[4096, 500.0], [16384, 1500.0]]}}
TABLE_PROFILE = {"type": "hmbprof", "schema": 1, "world_size": 2, "ranks": [
    rank(0, {1: (side([nb(8192, 3, [[4.2e-6, 4.4e-6, 2], [3.6e-6, 3.8e-6, 1]])]), side())}),
    rank(1, {0: (side(), side())})]}


def test_probe_without_a_switch_needs_threshold(files):
    no_switch = {**PROTO_PROBE, "extra": {**PROTO_PROBE["extra"], "switch_bytes": []}}
    (files / "no-switch.jsonl").write_text(json.dumps(no_switch) + "\n")
    (files / "table.json").write_text(json.dumps(TABLE_PROFILE))
    p = hmb("advise", files / "table.json", "--mpi", "mpich", "--probe", files / "no-switch.jsonl")
    assert p.returncode == 2 and "the probe found no switch: give --threshold" in p.stderr
    p = hmb("advise", files / "table.json", "--mpi", "mpich", "--probe", files / "no-switch.jsonl",
            "--threshold", 8112, "--json", files / "adv-no-switch.json")
    assert p.returncode == 0, p.stderr
    assert json.loads((files / "adv-no-switch.json").read_text())["job"]["triggered"] == 2   # the probe's bandwidths


def test_probe_from_proto_extra_with_bandwidth_per_size(files):
    (files / "proto-probe.jsonl").write_text(json.dumps(PROTO_PROBE) + "\n")
    (files / "table.json").write_text(json.dumps(TABLE_PROFILE))
    p = hmb("advise", files / "table.json", "--mpi", "mpich", "--probe", files / "proto-probe.jsonl",
            "--json", files / "adv-table.json")
    assert p.returncode == 0, p.stderr
    adv = json.loads((files / "adv-table.json").read_text())
    assert adv["switch_bytes"] == 8112
    assert (adv["job"]["triggered"], adv["job"]["threshold_bytes"]) == (2, 8192 + 1024)


@pytest.mark.parametrize("args,message", [
    (["--mpi", "mpich"], "--probe FILE"),
    (["--mpi", "mpich", "--threshold", "8000"], "--probe FILE"),
    (["--mpi", "mpich", "--threshold", "8000", "--bandwidth", "0"], "--bandwidth > 0"),
    (["--mpi", "mpich", "--probe", "missing.jsonl"], "missing.jsonl"),
    (["--mpi", "mpich", "--threshold", "8000", "--bandwidth", "1", "--tradeoff", "prof.json"], "trade-off"),
    (["--mpi", "mpich", "--threshold", "8000", "--bandwidth", "1", "--", "true"], "only run with --verify"),
    (["--mpi", "mpich", "--threshold", "8000", "--bandwidth", "1", "--trigger", "outside-mpi"], "no outside_mpi_hist"),
])
def test_bad_input(files, args, message):
    p = hmb("advise", "prof.json", *args, cwd=files)
    assert p.returncode == 2 and message in p.stderr and p.stderr.count("\n") == 1, p.stderr


@pytest.mark.planted_json("notprof.json", "text.json")
def test_bad_profiles(files):
    (files / "notprof.json").write_text(json.dumps({"type": "result"}))
    (files / "broken.json").write_text(json.dumps({"type": "hmbprof", "schema": 1, "ranks": [{"rank": 0}, {"x": 1}]}))
    (files / "text.json").write_text("{not json")
    for name, message in (("notprof.json", "not a libhmbprof profile"), ("broken.json", "malformed"),
                          ("text.json", "not JSON"), ("absent.json", "no such file")):
        p = hmb("advise", name, "--threshold", 8000, "--bandwidth", 1, cwd=files)
        assert p.returncode == 2 and message in p.stderr and p.stderr.count("\n") == 1, (name, p.stderr)
    p = hmb("advise", "--verify", "--apply", "16K", cwd=files)
    assert p.returncode == 2 and "needs the program after --" in p.stderr


FAKE = """import os, sys
with open(sys.argv[1], "a") as f:
    f.write("A" if "MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE" not in os.environ else
            "B" + os.environ["MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE"] + ",")
print("time per step 2.0" if "MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE" not in os.environ else "time per step 0.5")
"""


def test_verify_alternates_and_compares_the_figure(files):
    (files / "fake.py").write_text(FAKE)
    order = files / "order.txt"
    p = hmb("advise", "--verify", "--mpi", "mpich", "--apply", "16K", "--launches", 3, "--no-profile",
            "--figure", r"time per step ([0-9.]+)", "--", sys.executable, files / "fake.py", order)
    assert p.returncode == 0, p.stderr
    assert order.read_text() == "AB16384,AB16384,AB16384,"      # ABAB..., the advised env set on B only
    assert "speed-up (figure, default/advised): 4.000 (95 % CI 4.000-4.000" in p.stdout


def test_verify_failing_program(files):
    p = hmb("advise", "--verify", "--mpi", "mpich", "--apply", "16K", "--launches", 1, "--no-profile",
            "--", sys.executable, "-c", "import sys; sys.exit(5)")
    assert p.returncode == 2 and "exited with status 5" in p.stderr
