"""proto (SPEC §3.7): the switch search on synthetic predicates (pure library), the result
fields, bad input (exit 2) and validation (exit 3). Where the switch lies is machine physics
and is not asserted here."""
import ctypes as C
import math

import pytest

import _corelib as cl
from conftest import run_bench, usage_cases


@pytest.fixture(scope="module")
def core():
    return cl.load()


def find(core, grid, element, predicate, max_switches=8):
    calls = []

    def pred(size, _arg):
        calls.append(size)
        return predicate(size)

    g = (C.c_size_t * len(grid))(*grid)
    lo_hi = (C.c_size_t * (2 * max_switches))()
    after = (C.c_int * max_switches)()
    cb = cl.SIZE_PREDICATE(pred)
    n = core.hmb_find_switches(g, len(grid), element, cb, None, lo_hi, after, max_switches)
    k = min(max(n, 0), max_switches)
    return n, [(lo_hi[2 * i], lo_hi[2 * i + 1], after[i]) for i in range(k)], calls


def test_one_eager_switch_bisected_to_the_element(core):
    # eager up to 8120 B (MPICH-like): the grid 1K..1M brackets it in (4096, 8192)
    n, sw, calls = find(core, [1024 << i for i in range(11)], 8, lambda s: s <= 8120)
    assert n == 1 and sw == [(8120, 8128, 0)]
    # 11 grid sizes + log2((8192 - 4096) / 8) = 9 bisection steps
    assert len(calls) == 11 + 9


def test_several_switches_and_a_switch_back(core):
    # progressed below 4000, not between 4000 and 64K, progressed again from 64K (single copy)
    n, sw, _ = find(core, [1024 << i for i in range(11)], 1, lambda s: s < 4000 or s >= 65536)
    assert n == 2
    assert sw == [(3999, 4000, 0), (65535, 65536, 1)]


def test_no_switch_and_storage_limit(core):
    assert find(core, [8, 64, 512], 8, lambda s: 1)[:2] == (0, [])
    # alternating grid: 3 switches found, only 2 stored
    n, sw, _ = find(core, [8, 16, 24, 32], 8, lambda s: (s // 8) % 2, max_switches=2)
    assert n == 3 and len(sw) == 2


def test_unusable_grid(core):
    assert find(core, [8, 12], 8, lambda s: 1)[0] == -1          # not a multiple of the element
    assert find(core, [64, 32], 8, lambda s: 1)[0] == -1         # not increasing


def test_majority_rule(core):
    assert [core.hmb_probe_majority(k, 5) for k in range(6)] == [0, 0, 0, 1, 1, 1]
    assert core.hmb_probe_majority(2, 4) == 0                    # a tie is not progressed
    assert core.hmb_probe_majority(0, 0) == 0


def test_probe_verdict_on_timelines(core):
    v = core.hmb_probe_verdict
    # waited 10..12 us, the peer's first MPI call at 100 us: done without the peer
    assert v(10e-6, 12e-6, 100e-6) == 1
    # waited from 10 us until 103 us, 3 us after the peer's call at 100 us: needed the peer
    assert v(10e-6, 103e-6, 100e-6) == 0
    # the observed side was late (its wait began at 150 us, after the peer's call): no verdict,
    # even though its wait was short
    assert v(150e-6, 151e-6, 100e-6) == -1
    assert v(10e-6, 9e-6, 100e-6) == -1                     # a wait that ends before it starts


def test_memory_per_peer(core):
    assert core.hmb_memory_per_peer_kB(10000.0, 10600.0, 3) == 200.0
    assert core.hmb_memory_projected_kB(10000.0, 200.0, 1000) == 210000.0


# ---- view both's criterion: the clearest step of the outstanding time over the sizes ----
def clearest(core, x, y, relative=1):
    out = cl.Changepoint()
    rc = core.hmb_clearest_step(len(x), cl.doubles(x), cl.doubles(y), relative, C.byref(out))
    return rc, out


def median3(core, y):
    out = (C.c_double * len(y))()
    core.hmb_running_median3(len(y), cl.doubles(y), out)
    return list(out)


def test_clearest_step_finds_a_switch(core):
    # MPICH-like, x in KB: eager sends complete locally (0 outstanding) up to 4, a rendezvous leaves
    # 4.5 + 0.1 x us from 5 on. Both sides of the break 4|5 are exact lines (residual 0); the jump
    # at m = 4.5 is 4.5 + 0.45 - 0 = 4.95. Noise: differences 0,0,0,5,.1,.1,.1 (median .1, deviations
    # .1,.1,.1,4.9,0,0,0: median .1) -> 1.4826 x .1 / sqrt 2 = 0.105; 4.95 >= 3 x 0.105: a step.
    rc, cp = clearest(core, [1, 2, 3, 4, 5, 6, 7, 8], [0, 0, 0, 0, 5, 5.1, 5.2, 5.3])
    assert rc == 1 and (cp.index, cp.lo, cp.hi) == (4, 4.0, 5.0)
    assert cp.jump == pytest.approx(4.95) and (cp.b_left, cp.b_right) == pytest.approx((0.0, 0.1))


def test_clearest_step_none_without_a_switch(core):
    # a flat curve and a noisy line (y = x -/+ 1: its only break 3|4 has lines 2/3 apart, less
    # than 3 x their spread 1.63) have no step
    for y in ([2.0] * 8, [0, 3, 2, 5, 4, 7]):
        rc, cp = clearest(core, list(range(1, len(y) + 1)), y)
        assert rc == 0 and cp.index == -1 and math.isnan(cp.jump)
    assert clearest(core, [1, 2, 3, 4, 5], [0, 0, 0, 1, 1])[0] == -1            # under 3 sizes a side
    assert clearest(core, [1, 2, 3, 4, 5, 6], [0, 0, math.nan, 1, 1, 1])[0] == -1


def test_clearest_step_open_mpi_half_transfer_eager(core):
    # Open MPI's shape (x in KB): a blocking transfer takes t = 0.8 + 0.2 x us; an eager send keeps
    # its request until the receiver copied the fragment out, half a transfer: 0.4 + 0.1 x (0.5,
    # 0.6, 0.7 at 1-3 KB); a rendezvous leaves a handshake and the copy, 1.4 + 0.2 x (2.2 ... 3.0).
    # The share of the transfer outstanding is 0.5 on the eager side, so a threshold of a quarter
    # calls every size a handshake and finds no switch; the step does: break 3|4 leaves exact
    # lines on both sides, jump at 3.5: (1.4 + 0.7) - (0.4 + 0.35) = 1.35.
    x = [1, 2, 3, 4, 5, 6, 7, 8]
    t = [0.8 + 0.2 * v for v in x]
    o = [0.5 * tv if v <= 3 else 1.4 + 0.2 * v for v, tv in zip(x, t)]
    assert all(core.hmb_probe_outstanding_share(ov, tv) >= 0.25 for ov, tv in zip(o, t))
    rc, cp = clearest(core, x, o)
    assert rc == 1 and (cp.lo, cp.hi) == (3.0, 4.0)
    assert cp.jump == pytest.approx(1.35) and (cp.b_left, cp.b_right) == pytest.approx((0.1, 0.2))


def test_clearest_step_is_the_largest_of_several(core):
    # by the spread (view step): steps of 0.5 (at 3|4) and 5 (at 9|10), flat between (exact lines:
    # sigma 0, noise 0): the larger jump is the switch wherever it lies
    x = list(range(1, 13))
    rc, cp = clearest(core, x, [0, 0, 0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 5.5, 5.5, 5.5], relative=0)
    assert rc == 1 and (cp.lo, cp.hi) == (9.0, 10.0) and cp.jump == pytest.approx(5.0)
    rc, cp = clearest(core, x, [0, 0, 0, 5, 5, 5, 5, 5, 5, 5.5, 5.5, 5.5], relative=0)
    assert rc == 1 and (cp.lo, cp.hi) == (3.0, 4.0) and cp.jump == pytest.approx(5.0)
    # by the factor (view both) the step from nothing outstanding (0 -> 0.5: 0.5 / 0.5 = 1, as
    # MPICH's local eager completion against its rendezvous) beats 0.5 -> 5.5 (5 / 6)
    rc, cp = clearest(core, x, [0, 0, 0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 5.5, 5.5, 5.5], relative=1)
    assert rc == 1 and (cp.lo, cp.hi) == (3.0, 4.0) and cp.jump == pytest.approx(0.5)


def test_clearest_step_by_factor_or_by_spread(core):
    # steps of 1 at 3|4 (1 -> 2: a factor |1| / (1 + 2) = 0.333) and of 1.5 at 9|10 (2 -> 3.5:
    # 1.5 / 5.5 = 0.273), exact lines. By the factor (view both) the first is the switch, as Open
    # MPI's eager -> rendezvous (+0.9 us on 1.3 us) against a page step at 80 KB (+0.8 us on
    # 12 us); by the spread (view step) the larger jump
    x = list(range(1, 13))
    y = [1, 1, 1, 2, 2, 2, 2, 2, 2, 3.5, 3.5, 3.5]
    rc, cp = clearest(core, x, y, relative=1)
    assert rc == 1 and (cp.lo, cp.hi) == (3.0, 4.0) and cp.jump == pytest.approx(1.0)
    rc, cp = clearest(core, x, y, relative=0)
    assert rc == 1 and (cp.lo, cp.hi) == (9.0, 10.0) and cp.jump == pytest.approx(1.5)


def test_running_median3(core):
    # out[i] = median of y[i-1..i+1], the ends kept: a one-size spike goes, a step stays where it is
    assert median3(core, [1, 9, 2, 3, 10, 10, 10]) == [1, 2, 3, 3, 10, 10, 10]
    assert median3(core, [0, 0, 0, 0, 30, 6, 6.1, 6.2, 6.3]) == [0, 0, 0, 0, 6, 6.1, 6.1, 6.2, 6.3]
    assert median3(core, [4.0, 5.0]) == [4.0, 5.0]
    out = median3(core, [1, 2, math.nan, 4, 5])
    assert out[0] == 1 and all(math.isnan(v) for v in out[1:4]) and out[4] == 5


def test_clearest_step_after_the_median_at_a_spike(core):
    # MPICH's first rendezvous size after eager ones in a round reads high (29 us against 6 us):
    # through the running median the step lies at 4|5 with a right line of slope ~0.1, where the
    # raw curve's right line falls from the spike (its slope is negative)
    x = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    raw = [0, 0, 0, 0, 30, 6, 6.1, 6.2, 6.3]
    rc, cp = clearest(core, x, median3(core, raw))
    assert rc == 1 and (cp.lo, cp.hi) == (4.0, 5.0) and 0 < cp.b_right < 0.2 and cp.jump > 5
    rc, cp = clearest(core, x, raw)
    assert rc == 1 and cp.b_right < 0


FAST = ["--iters", "1", "--warmup", "0", "--max-iters", "2", "--trials", "1", "--min-compute", "20us"]


def test_probe_and_tradeoff_records(mpi_name, tmp_path):
    r = run_bench(mpi_name, ["proto", "--test", "probe,tradeoff", "--view", "sender", "--range", "1K:16K",
                             "--sizes", "1K,64K", "--window", "4"] + FAST, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    res = r.results()
    probe = [x for x in res if x["params"]["test"] == "probe"]
    assert [x["params"]["view"] for x in probe] == ["sender"]
    extra = probe[0]["extra"]
    assert isinstance(extra["switch_bytes"], list)
    for lo, hi in extra["switch_bytes"]:
        assert 1024 <= lo < hi <= 16384 and hi - lo == 8     # bisected to --element
    assert [row[0] for row in extra["bandwidth_MBps"]] == [1024, 2048, 4096, 8192, 16384]
    trade = [x for x in res if x["params"]["test"] == "tradeoff"]
    assert [x["params"]["size_bytes"] for x in trade] == [1024, 65536]
    for x in trade:
        for key in ("rss_init_kB", "rss_pairs_kB", "rss_traffic_kB", "hwm_kB", "per_peer_kB",
                    "rss_1000_peers_projected_kB", "rss_8000_peers_projected_kB"):
            assert key in x["extra"]
        assert x["extra"]["hwm_kB"] >= x["extra"]["rss_traffic_kB"] > 0


def test_probe_default_view_both_records_outstanding_times(mpi_name, tmp_path):
    r = run_bench(mpi_name, ["proto", "--range", "1K:8K:+1K"] + FAST, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    probe = r.results()
    assert [x["params"]["view"] for x in probe] == ["both"]          # the default view
    extra = probe[0]["extra"]
    sizes = [1024 * k for k in range(1, 9)]
    assert [row[0] for row in extra["outstanding_us"]] == sizes
    assert [row[0] for row in extra["outstanding_share"]] == sizes
    assert all(row[1] is None or row[1] >= 0 for row in extra["outstanding_us"] + extra["outstanding_share"])
    assert extra["step_noise_us"] is None or extra["step_noise_us"] >= 0
    for row in extra["steps"]:            # whatever this machine shows: well-formed, inside the range
        assert len(row) == 6 and 1024 <= row[0] < row[1] <= 8192 and row[1] - row[0] == 1024
    for lo, hi in extra["switch_bytes"]:
        assert 1024 <= lo < hi <= 8192 and hi - lo == 8
    assert "# probe view both: switches" in r.stdout


def test_probe_view_step_records_costs_and_steps(mpi_name, tmp_path):
    r = run_bench(mpi_name, ["proto", "--view", "step", "--range", "1K:8K:+1K"] + FAST, tmp_path=tmp_path)
    assert r.rc == 0, r.stderr
    probe = r.results()
    assert [x["params"]["view"] for x in probe] == ["step"]
    extra = probe[0]["extra"]
    assert [row[0] for row in extra["cost_us"]] == [1024 * k for k in range(1, 9)]
    assert all(row[1] > 0 for row in extra["cost_us"])
    assert extra["step_noise_us"] >= 0
    for row in extra["steps"]:            # whatever this machine shows: well-formed, inside the range
        assert len(row) == 6 and 1024 <= row[0] < row[1] <= 8192 and row[1] - row[0] == 1024
    for lo, hi in extra["switch_bytes"]:
        assert 1024 <= lo < hi <= 8192 and hi - lo == 8
    assert "# probe view step: switches" in r.stdout


def test_probe_view_step_validation_failure_exit_3(mpi_name, tmp_path):
    r = run_bench(mpi_name, ["proto", "--view", "step", "--range", "1K:6K:+1K", "--inject", "corrupt:1",
                             "--iters", "3", "--warmup", "0"], tmp_path=tmp_path)
    assert r.rc == 3, r.stderr
    assert any("validation failed: bench=proto" in ln and "iteration=1" in ln for ln in r.stderr.splitlines())


@pytest.mark.parametrize(*usage_cases("args,needle", [
    (["--view", "step", "--range", "1K:16K"], "--view step needs at least 6 --range sizes"),
    (["--range", "1K:16K"], "--view both needs at least 6 --range sizes"),
    (["--range", "1K,1000"], "--range must increase"),
    (["--range", "1K:8K", "--element", "3"], "not a multiple of --element"),
    (["--range", "4K"], "at least two sizes"),
    (["--view", "middle"], "view"),
]))
def test_bad_input_exit_2(mpi_name, args, needle):
    r = run_bench(mpi_name, ["proto"] + args + FAST)
    assert r.rc == 2
    # one line from hmb-bench (Open MPI's launcher adds its own about the exit status)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("hmb-bench proto")]
    assert len(lines) == 1 and needle in lines[0], r.stderr


@pytest.mark.parametrize("test,view", [("probe", "recv-early"), ("probe", "both"), ("tradeoff", None)])
def test_validation_failure_exit_3(mpi_name, test, view, tmp_path):
    # each test's own options only: an option its --test does not read is refused (exit 2)
    own = (["--view", view, "--range", "1K:6K:+1K", "--trials", "1", "--min-compute", "20us"] if test == "probe"
           else ["--window", "2"])
    r = run_bench(mpi_name, ["proto", "--test", test, *own, "--sizes", "1K", "--inject", "corrupt:1", "--iters", "3",
                             "--warmup", "0"], tmp_path=tmp_path)
    assert r.rc == 3, r.stderr
    assert any("validation failed: bench=proto" in ln and "iteration=1" in ln for ln in r.stderr.splitlines())
