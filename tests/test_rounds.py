"""Claim-driven runs (study/rounds.py, issue 37): which points a claim's launches hold, how the
rounds merge and stop, and that the stopping rule reaches the right verdict at its stated
confidence on planted launches with a known spread, and stays undecided on a range's edge."""
from __future__ import annotations

import random

import pytest

from hmb.study import claims, rounds

PART = {"name": "part", "ranks": 2, "threads": [1, 2, 4],
        "args": {"sizes": "4K:16M:x4", "compute": ["10ms", "100ms"], "noise": "none", "cache": ["hot", "cold"],
                 "partitions": "1,2,4,8"}}


def test_narrow_cuts_launch_axes_and_in_launch_lists_to_the_selection():
    n = rounds.narrow(PART, {"partitions": 1, "compute": "10ms", "size_bytes": [16384, 4194304]})
    assert n["args"]["partitions"] == "1" and n["args"]["compute"] == ["10ms"]
    assert n["args"]["sizes"] == "16384,4194304" and n["args"]["cache"] == ["hot", "cold"]
    assert PART["args"]["partitions"] == "1,2,4,8"        # the grid is left as it was
    # threads the claim needs; a value the bench never runs; a size it does not hold (kept whole:
    # halo3d's point size is the face it ran, not the option's)
    assert rounds.narrow(PART, {"threads>=": 2})["threads"] == [2, 4]
    assert rounds.narrow(PART, {"threads>=": 8}) is None
    assert rounds.narrow(PART, {"noise": "uniform:4"}) is None
    assert rounds.narrow(PART, {"partitions": 32}) is None
    assert rounds.narrow(PART, {"size_bytes": 3})["args"]["sizes"] == "4K:16M:x4"
    # an option left at its default selects only that default
    plain = {"name": "part", "args": {"sizes": "4K"}}
    assert rounds.narrow(plain, {"cache": "cold"}, {"cache": "hot"}) is None
    assert rounds.narrow(plain, {"cache": "hot"}, {"cache": "hot"}) is not None


def _driven(bench, key):
    return rounds.Driven({**bench, "_origin": 0}, [{"figure": key}], [key])


def test_merge_adds_no_point_the_claims_do_not_read():
    a = rounds.narrow(PART, {"partitions": 1, "compute": "10ms"})
    b = rounds.narrow(PART, {"partitions": 2, "compute": "10ms"})          # one option apart: united
    c = rounds.narrow(PART, {"partitions": 1, "compute": "10ms", "cache": "hot"})   # a's points: absorbed
    d = rounds.narrow(PART, {"partitions": 4, "compute": "100ms"})         # two options apart: its own
    got = rounds.merge([_driven(x, k) for x, k in ((a, "a"), (b, "b"), (c, "c"), (d, "d"))])
    assert len(got) == 2
    one = next(g for g in got if "a" in g.keys)
    assert sorted(one.keys) == ["a", "b", "c"] and one.bench["args"]["partitions"] == "1,2"
    assert one.bench["args"]["compute"] == ["10ms"]
    other = next(g for g in got if "d" in g.keys)
    assert other.keys == ["d"] and other.bench["args"]["partitions"] == "4"


def test_a_later_round_relaunches_only_the_configurations_undecided_claims_read():
    # seed000's Fig. 5 bench: 100 ms and 10 ms, three noises, merged; only the 10 ms claims went
    # on. A later round keeps the launch axes' values those claims select (in the grid's order),
    # the in-launch lists whole (each launch kept is one an earlier round ran: the same tag),
    # and an axis no selection narrows whole
    fig5 = {"name": "part", "threads": [1, 2], "args": {"sizes": "4K:16M:x4", "partitions": "1,2",
                                                         "compute": ["100ms", "10ms"],
                                                         "noise": ["none", "uniform:4", "uniform:10"]}}
    ten_none = {"where": {"compute": "10ms", "noise": "none", "partitions": 1}}
    ten_u10 = {"where": {"compute": "10ms", "noise": "uniform:10"}}
    b = rounds.focus(fig5, [ten_u10, ten_none])
    assert b["args"] == {**fig5["args"], "compute": ["10ms"], "noise": ["none", "uniform:10"]}
    assert b["threads"] == [1, 2] and fig5["args"]["compute"] == ["100ms", "10ms"]   # the bench is kept
    assert rounds._configs(fig5) == 12 and rounds._configs(b) == 4
    both = {"where": {"compute": "100ms"}, "over": {"compute": "10ms"}, "min_threads": 2}   # a ratio of two
    b = rounds.focus(fig5, [both])
    assert b["args"]["compute"] == ["100ms", "10ms"] and b["args"]["noise"] == fig5["args"]["noise"]
    assert b["threads"] == [2]
    assert rounds.focus(fig5, []) == fig5


def test_a_later_round_focuses_per_library_on_the_undecided_cells():
    # per library, the cells still undecided there (a `per` claim's one noise, not its three);
    # libraries with the same focus share a bench
    fig5 = {"name": "part", "args": {"sizes": "4K", "compute": ["100ms", "10ms"],
                                     "noise": ["none", "uniform:4", "uniform:10"]}}
    d = rounds.Driven(fig5, [{"figure": "a"}, {"figure": "b"}], ["a", "b"])
    unit = rounds.Unit(None, [d], [], [])
    cell = lambda compute, noise: {"where": {"compute": compute, "noise": noise}}   # noqa: E731
    still = {("a", "mpich"): [cell("100ms", "uniform:4")], ("b", "mpich"): [cell("10ms", "none")],
             ("b", "openmpi"): [cell("10ms", "none")], ("b", "impi"): [cell("10ms", "none")]}
    runs = rounds._next_round([unit], still)[id(d)]
    got = {tuple(b["mpis"]): (b["args"]["compute"], b["args"]["noise"]) for b in runs}
    assert got == {("mpich",): (["100ms", "10ms"], ["none", "uniform:4"]),
                   ("impi", "openmpi"): (["10ms"], ["none"])}
    elapsed = {"t1": 4.0, "t2": 6.0}
    d.tags = {"mpich": {"t1", "t2"}, "openmpi": {"t1"}}
    # mpich: 2 repeats x 4 launches x 5 s; openmpi 2 x 1 x 4 s; impi has no launches yet
    assert rounds._next_round_seconds([unit], elapsed, {id(d): runs}) == pytest.approx(40 + 8)


def test_a_phase_no_reader_needs_is_left_out():
    # part's polled and persistent baselines: each left out where neither the claims (metric,
    # over_metric, a cause's) nor, for the figures' launches, the figures and tables read one of
    # its metrics
    plain = {"metric": "perceived_bw_MBps"}
    caused = {"metric": "overhead", "cause": {"metric": "overhead_polled"}}
    persist = {"metric": "overhead", "over_metric": "t_persist_us"}
    assert rounds.metrics_read([plain, caused]) == {"perceived_bw_MBps", "overhead", "overhead_polled"}
    assert rounds.metrics_read([], [{"y": ["a", "b"]}, {"rows": ["c"]}]) == {"a", "b", "c"}
    b = {"name": "part", "args": {}}
    rounds.omit_unread(b, rounds.metrics_read([plain]))
    assert b["args"] == {"no-polled": True, "no-persistent": True}
    b = {"name": "part", "args": {}}
    rounds.omit_unread(b, rounds.metrics_read([plain, caused]))
    assert b["args"] == {"no-persistent": True}
    b = {"name": "part", "args": {}}
    rounds.omit_unread(b, rounds.metrics_read([caused, persist]))
    assert b["args"] == {}
    b = {"name": "part", "args": {}}                     # a figure's template may read either: both run
    rounds.omit_unread(b, rounds.metrics_read([], [{"y": ["overhead_{kind}"]}]))
    assert b["args"] == {}
    b = {"name": "p2p", "args": {}}                      # no phase of its own to leave out
    rounds.omit_unread(b, set())
    assert b["args"] == {}


def test_ci_target_follows_the_claims_tolerance():
    # ~1 ± 25 % against a no-effect 1 with null_agrees: its edges are 0.25 from the null: a third
    # of that; a "<= 0.9" ratio: 0.1 from 1, 0.033; trends take CI_MAX × 1.5 / 3
    assert rounds.ci_target([{"value": 1.0, "tolerance": 0.25, "null": 1.0}]) == pytest.approx(0.083)
    assert rounds.ci_target([{"over": {"k": 1}, "op": "<=", "value": 0.9}]) == pytest.approx(0.033)
    assert rounds.ci_target([{"over": {"k": 1}, "op": ">=", "value": 3.0}]) == rounds.CI_MAX
    assert rounds.ci_target([{"trend": "size_bytes", "op": ">=", "value": 0.8}]) == pytest.approx(0.05)
    both = [{"value": 1.0, "tolerance": 0.25, "null": 1.0}, {"over": {"k": 1}, "op": "<=", "value": 0.9}]
    assert rounds.ci_target(both) == pytest.approx(0.033)


CLAIM = {"value": 1.0, "tolerance": 0.2, "null": 1.0, "null_agrees": "planted"}   # accepts [0.8, 1.2]


def _sequential(mu: float, sd: float, rng) -> tuple[str, int]:
    """The rounds' looks (3, 5, 7, 9 launches) on planted launch readings N(mu, sd)."""
    xs: list = []
    for n in range(rounds.FIRST, rounds.CAP + 1, rounds.STEP):
        while len(xs) < n:
            xs.append(rng.gauss(mu, sd))
        d = claims.decide(CLAIM, sorted(xs)[len(xs) // 2], xs)
        if d.verdict != claims.UNDECIDED:
            return d.verdict, n
    return claims.UNDECIDED, rounds.CAP


@pytest.mark.parametrize("mu, right", [(1.0, claims.AGREES), (0.6, claims.DIFFERS), (1.4, claims.DIFFERS),
                                       (0.9, claims.AGREES), (0.7, claims.DIFFERS)])
def test_the_stopping_rule_reaches_the_right_verdict(mu, right):
    """Launch readings with a spread of 0.05: a truth 2 or more spreads inside or outside the range
    is decided the right way in at least 95 % of 400 planted runs, and never the wrong way."""
    rng = random.Random(7)
    got = [_sequential(mu, 0.05, rng)[0] for _ in range(400)]
    assert got.count(right) >= 0.95 * len(got), {v: got.count(v) for v in set(got)}
    wrong = claims.DIFFERS if right == claims.AGREES else claims.AGREES
    assert got.count(wrong) == 0


def test_the_stopping_rule_stays_undecided_on_the_edge():
    """A truth on the edge (0.8): 1000 planted runs of up to four looks are decided either way at
    most 10 % of the time (3-5 % each way at 97.5 % a look), the rest undecided."""
    rng = random.Random(11)
    got = [_sequential(0.8, 0.05, rng)[0] for _ in range(1000)]
    assert got.count(claims.UNDECIDED) >= 900, {v: got.count(v) for v in set(got)}
    assert got.count(claims.AGREES) <= 60 and got.count(claims.DIFFERS) <= 60


def test_a_claim_decided_early_needs_fewer_launches():
    rng = random.Random(3)
    far = [_sequential(0.5, 0.05, rng)[1] for _ in range(200)]
    near = [n for v, n in (_sequential(0.72, 0.05, rng) for _ in range(200)) if v != claims.UNDECIDED]
    assert sum(far) / len(far) < rounds.FIRST + 0.5        # 6 spreads from the edge: mostly at 3
    assert sum(near) / len(near) > rounds.FIRST + 1        # 1.6 spreads: more rounds


def test_a_claim_its_spread_cannot_decide_by_the_cap_stops_early():
    """Futility (from 5 launches): 0.74, 0.70, 0.78, 0.72, 0.76 against the edge 0.75 cannot be
    decided by 9 launches at that spread; 0.60 ... 0.68 (5 standard errors from it, not yet
    decided at 5 with t = 3.50) can, and goes on; three launches always go on."""
    c = {"value": 1.0, "tolerance": 0.25, "null": 1.0, "null_agrees": "planted"}
    on_edge = claims.decide(c, 0.74, [0.74, 0.70, 0.78, 0.72, 0.76])
    assert on_edge.verdict == claims.UNDECIDED and not claims.reachable(on_edge, rounds.CAP)
    near = claims.decide(c, 0.70, [0.65, 0.70, 0.75, 0.68, 0.72])
    assert near.verdict == claims.UNDECIDED and claims.reachable(near, rounds.CAP), near
    assert claims.reachable(claims.decide(c, 0.74, [0.74, 0.70, 0.78]), rounds.CAP)


def test_futility_keeps_the_stopping_rule_right():
    """With the futility stop, a truth two spreads inside or outside is still decided the right
    way at least 95 % of the time, and the edge stays undecided."""
    rng = random.Random(5)

    def run(mu):
        xs = []
        for n in range(rounds.FIRST, rounds.CAP + 1, rounds.STEP):
            while len(xs) < n:
                xs.append(rng.gauss(mu, 0.05))
            d = claims.decide(CLAIM, sorted(xs)[len(xs) // 2], xs)
            if d.verdict != claims.UNDECIDED or not claims.reachable(d, rounds.CAP):
                return d.verdict
        return claims.UNDECIDED
    assert sum(run(0.7) == claims.DIFFERS for _ in range(300)) >= 294
    assert sum(run(0.9) == claims.AGREES for _ in range(300)) >= 294
    assert sum(run(0.8) == claims.UNDECIDED for _ in range(300)) >= 270


def test_the_summary_line_counts_the_verdicts_and_the_figures_share():
    vs = [claims.Verdict({}, "1", w, "") for w in (claims.AGREES, claims.AGREES, claims.DIFFERS,
                                                   claims.UNDECIDED, claims.NOT_COMPARABLE)]
    assert rounds.summary_line("s", 100.4, 12, vs, (4, 60.2)) == (
        "s: 100 s, 12 launches (4 of them the figures', 60 s); claims: 3 decided (2 agree, 1 differ), "
        "0 unstable, 1 undecided, 1 not comparable")
    assert rounds.summary_line("s", 100.4, 12, vs, (0, 0.0)).startswith("s: 100 s, 12 launches; claims")


def test_the_figures_launch_keeps_the_modes_they_read_and_their_baselines():
    from hmb.data import descriptors as d
    metric = lambda n, text="": d.Metric(n, "x", text, True, False, True)   # noqa: E731
    bench = d.Bench("sw", "g", "", (), (metric("t_single"), metric("t_multiple"), metric("t_serial"),
                                        metric("ratio_multiple", "t_multiple / t_single")),
                    modes=(d.Mode("single", True, True, ("t_single",)),
                           d.Mode("multiple", True, True, ("t_multiple", "ratio_multiple")),
                           d.Mode("serial", True, False, ("t_serial",))))
    described = {"sw": bench}

    def kept(read, mode="single,multiple,serial"):
        b = {"name": "sw", "args": {"mode": mode}}
        rounds.keep_modes(b, read, described)
        return b["args"]["mode"]
    assert kept({"t_multiple", "t_serial"}) == "multiple,serial"
    assert kept({"ratio_multiple"}) == "single,multiple"          # taken against single
    assert kept({"t_{mode}"}) == "single,multiple,serial"          # a template reads every mode
    assert kept({"other"}) == "single,multiple,serial"             # no mode's metric read: unchanged
    assert kept({"t_serial"}, "all") == "serial"
    assert kept({"t_serial"}, ["single", "serial"]) == ["serial"]   # a launch axis stays a list
