"""A study's claims beside HMB's reading: agrees / differs / not comparable / no verdict, with
the reason. docs/studies.md ("Claims") describes every key; the short form:

What a claim reads (from the tidy table, `hmb.load`): `bench`, `metric`, `where` (column =
value filters; a list: any of them), `stat` (median / max / min over the points, each point the
median of its launches), and one of these forms:
- plain: the stat of the selected points;
- `over` (a second selection, optionally `over_metric`): the ratio of the two stats, or with
  `compare = "difference"` their difference; with `pair_on` (columns) the ratio or difference is
  taken point by point between points equal in those columns (`cores` = ranks × threads), then
  the stat of those;
- `trend = AXIS`: Spearman's rank correlation of the metric with the axis within each group of
  points equal in every other parameter, then the stat over groups (+1 rising, 0 no trend);
- `peak = AXIS`: the axis value where the metric is highest, per group, then the stat.

What the paper says: `value` with `op` ("~" within the tolerance, "<=" / ">=" at most / at least
value, loosened by the tolerance, "in" within `range`), `tolerance` (relative) or `tolerance_abs`,
and `tolerance_from`: the paper's own spread, or the rationale for the tolerance. `null` is the
reading without the effect (default 1 for a ratio, 0 for a difference or a trend): a claim must
not accept it unless the paper's statement is that very absence (`null_agrees`, saying why), and
no acceptance edge may sit on it. `scale` (columns) is the paper's scale: a run without it is
read at its own and not judged. `per` (columns) judges each value apart; `cells` expands one
claim into the cells of a table. `definition` (how HMB's definition differs), `contradicts` (the
id of a claim the paper contradicts with this one), `drifts` (libraries whose reading drifts
between runs: the reading, no verdict) are said beside the verdict. `needs` (a feature HMB
lacks) and `scope = "network"` (the reading depends on the paper's network) make a claim not
comparable, with the reason; a network claim read across the nodes of an hmb lab says so
("network: TCP between namespaces on one machine, not the seed's InfiniBand", from the run
header's HMB_NETWORK).
"""
from __future__ import annotations

import copy
import dataclasses
import math
import re
import statistics

from scipy.stats import spearmanr
from scipy.stats import t as student

from ..data import tidy
from ..data.tidy import point_values, points, same, select, with_derived
from ..present.format import fmt_num, md_text

AGREES, DIFFERS, NOT_COMPARABLE = "agrees", "differs", "not comparable"
UNDECIDED, UNSTABLE = "undecided", "unstable"
DECIDED = (AGREES, DIFFERS)

# A verdict rests on at least this many launches, and on a 97.5 % interval of the mean of the
# claim's reading in each launch that lies on one side of every edge of the claim's range
# (decide). Launches of one repeat index pair up across the claim's selections (replicate).
# A claim-driven run looks at most four times (rounds.py: 3, 5, 7, 9 launches): a truth on an
# edge is then decided about 3 % of the time each way (tests/test_rounds.py simulates it).
MIN_LAUNCHES = 3
LEVEL = 0.975
OVERSUBSCRIBE_LIMIT = 16    # threads a core hmb sweep runs on one machine (sweep.LOCAL_PROCS_PER_CORE)

# An acceptance edge closer than this share of the claim's scale to the reading without the
# effect sits on it: noise alone would flip the verdict (seed000 Fig. 4's 1.3 ± 0.231 had its
# lower edge at 0.9997, where one partition is by construction).
EDGE = 0.05


@dataclasses.dataclass
class Verdict:
    claim: dict
    reading: str
    verdict: str
    reason: str
    mpi: str = ""       # the library the reading is from ("" when the claim reads nothing)
    value: float = math.nan   # the reading as a number (nan when none)
    launches: list = dataclasses.field(default_factory=list)   # the reading in each launch alone
    decision: "Decision | None" = None    # this run's launches against the range (decide)
    library: str = ""   # the library's version string, as the run header gives it
    history: str = ""   # the kept runs' readings beside this one (over_time)
    cause: str = ""     # the claim's `cause` variant read beside it (the paired measurement that names it)
    cost: str = ""      # a claim-driven run's launches, seconds and deciding round for it


# ---------------------------------------------------------------- selecting points
# select, same and with_derived are tidy's (one reader of the tidy table for figures and claims)

def _number_first(text: str):
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)


def _had(m, col) -> list[str]:
    m = with_derived(m, col)
    return sorted({_show(v) for v in m[col].dropna()}, key=_number_first) if col in m.columns else []


def _show(v) -> str:
    """A cell as text that reads back as the same value (4194304, not 4.1943e+06)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return str(int(f)) if f.is_integer() else f"{f:.12g}"


def why_no_rows(df, bench: str | None, where: dict | None, unsupported=None) -> str:
    """Why a claim found no rows: the library reported its points unsupported (with the
    benchmark's reason); else the first of its filters this run's grid does not hold (with what
    the run had); else the points ran but gave no result for the metric."""
    if unsupported is not None and not unsupported.empty:
        un = select(unsupported, bench, None, where)
        if un is not None and not un.empty:
            return f"unsupported by this library: {un['reason'].iloc[0] or un['status'].iloc[0]}"
    m = df if df is None or df.empty or not bench else df[df["bench"] == bench]
    if m is None or m.empty:
        return f"this run has no {bench} results" if bench else "this run has no results"
    for col, want in (where or {}).items():
        wants = want if isinstance(want, list) else [want]
        m = with_derived(m, col)
        had = _had(m, col)
        kept = m[m[col].map(lambda v: any(same(v, w) for w in wants))] if col in m.columns else m.iloc[0:0]
        if kept.empty:
            ran = f"it ran {col} = {', '.join(had)}" if had else f"its {bench} results have no {col}"
            return f"{col} = {'/'.join(str(w) for w in wants)} is not in this run ({ran})"
        m = kept
    return "the claim's points ran but gave no result for its metric"


def _stat(values, stat: str) -> float:
    vals = [v for v in values if not math.isnan(v)]
    if not vals:
        return math.nan
    return float({"median": statistics.median, "max": max, "min": min}[stat](vals))


def _lab_network(rows) -> str:
    """The network a run's headers name between its hosts (tidy's `network`: HMB_NETWORK, set
    across the nodes of an hmb lab), "" where none does."""
    if "network" not in rows.columns:
        return ""
    return ", ".join(sorted({str(v) for v in rows["network"].dropna() if str(v)}))


def _seed_network(setup: str) -> str:
    """The seed's network, as its setup names it first (InfiniBand, Omni-Path), else "network"."""
    found = [(setup.find(n), n) for n in ("InfiniBand", "Omni-Path") if n in setup]
    return min(found)[1] if found else "network"


def _solid(rows):
    """Rows that are readings (tidy.readings: the one predicate)."""
    return tidy.readings(rows)


def _single_node(df) -> bool:
    hosts = set()
    for h in df["host"].dropna():
        hosts.update(x for x in str(h).split(",") if x)
    return len(hosts) <= 1


def _nonfinite(v) -> str:
    return "NaN" if math.isnan(v) else "Infinity" if v > 0 else "-Infinity"


def finite_rows(rows):
    """(the rows whose median is a finite number, what was dropped in words, how many launches
    were dropped whole). A NaN (hmb-bench's null) or infinite median is no reading: it is left
    out of the statistic, and the reading says so ("launch 3 dropped: median NaN"), never a
    launch counted that gave nothing."""
    med = rows["median"].astype(float)
    ok = med.map(math.isfinite).astype(bool)
    if ok.all():
        return rows, "", 0
    kept = set(rows.loc[ok, "run_id"])
    notes, gone = [], 0
    for i, rid in enumerate(dict.fromkeys(rows["run_id"]), 1):
        bad = med[(rows["run_id"] == rid) & ~ok]
        if bad.empty:
            continue
        what = "median " + "/".join(sorted({_nonfinite(v) for v in bad}))
        if rid in kept:
            notes.append(f"{len(bad)} point{'s' if len(bad) > 1 else ''} of launch {i} dropped: {what}")
        else:
            gone += 1
            notes.append(f"launch {i} dropped: {what}")
    return rows[ok], "; ".join(notes), gone


# ---------------------------------------------------------------- the reading

@dataclasses.dataclass
class Reading:
    value: float
    detail: str          # "(median of 4 points, 3 launches)"
    problem: str = ""    # why there is no reading ("" when there is one)


def fmt(v: float) -> str:
    """A reading or a paper's value as fmt_num writes it, but small values to three significant
    digits (fmt_num's two decimals read the paper's 0.084 as 0.08)."""
    if v is not None and math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if v is not None and not math.isnan(v) and 0 < abs(v) < 0.1:
        return f"{v:.3g}"
    return fmt_num(v)


def _launches(*frames) -> int:
    ids = set()
    for f in frames:
        if f is not None and not f.empty:
            ids.update(f["run_id"])
    return len(ids)


def _launch_text(n: int) -> str:
    return f"{n} launch{'es' if n != 1 else ''}"


def _norm(v) -> str:
    try:
        return f"{float(v):g}"
    except (TypeError, ValueError):
        return str(v)


def _combine(claim: dict, num: float, den: float) -> float:
    if claim.get("compare") == "difference":
        return num - den
    return num / den if den and not math.isnan(den) else math.nan


def reading(claim: dict, num, den=None, gone: int = 0) -> Reading:
    """The claim's reading from its solid rows (num: its own selection, den: its `over`
    selection, both already filtered; gone: launches dropped whole for a non-finite median)."""
    stat = claim.get("stat", "median")
    n = _launches(num, den)
    launches = f"{n} of {n + gone} launches" if gone else _launch_text(n)
    for col in list(claim.get("pair_on") or []) + [claim.get("trend") or claim.get("peak") or ""]:
        num = with_derived(num, col)
        den = with_derived(den, col) if den is not None else None
    if claim.get("trend") or claim.get("peak"):
        return _along(claim, num, stat, launches)
    pair = claim.get("pair_on")
    if not claim.get("over") or not pair:
        # the points' values alone (tidy.point_values: points(num)["value"], no table built)
        vals = point_values(num)
        if not claim.get("over"):
            return Reading(_stat(vals, stat), f"({stat} of {len(vals)} points, {launches})")
        if den is None or den.empty:
            return Reading(math.nan, "", "no results for the claim's reference points")
        dvals = point_values(den)
        d = _stat(dvals, stat)
        if claim.get("compare") != "difference" and (not d or math.isnan(d)):
            return Reading(math.nan, "", "the reference reading is 0 or undefined")
        return Reading(_combine(claim, _stat(vals, stat), d),
                       f"({stat} of {len(vals)} points over {len(dvals)}, {launches})")
    pts = points(num)
    if den is None or den.empty:
        return Reading(math.nan, "", "no results for the claim's reference points")
    dpts = points(den)
    for col in pair:
        if col not in pts.columns or col not in dpts.columns:
            return Reading(math.nan, "", f"the points have no {col} to pair on")
    ref = dpts.groupby([dpts[c].map(_norm) for c in pair])["value"].median()
    vals = []
    for _, p in pts.iterrows():
        key = tuple(_norm(p[c]) for c in pair)
        key = key[0] if len(pair) == 1 else key
        if key in ref.index:
            vals.append(_combine(claim, p["value"], float(ref[key])))
    if not vals:
        return Reading(math.nan, "", f"no reference point has the same {', '.join(pair)} as the claim's points")
    return Reading(_stat(vals, stat), f"({stat} of {len(vals)} pairs at equal {', '.join(pair)}, {launches})")


def _spearman(x, y) -> float:
    """Spearman's rank correlation; 0 (no trend) for a flat series."""
    if len(set(y)) <= 1:
        return 0.0
    return float(spearmanr(x, y).statistic)


def _along(claim: dict, num, stat: str, launches: str) -> Reading:
    axis = claim.get("trend") or claim.get("peak")
    pts = points(num)
    if axis not in pts.columns:
        return Reading(math.nan, "", f"the points have no {axis}")
    pts = pts.assign(_x=pts[axis].map(lambda v: float(v) if _number_first(str(v))[0] == 0 else math.nan))
    # Columns that move with the axis (threads when P = T, one partition per thread) are part of
    # the axis, not groups of their own: one value for each axis value, more than one in all.
    moves = [c for c in pts.columns if c not in (axis, "value", "_x") and pts[c].nunique() > 1
             and (pts.groupby("_x")[c].nunique() <= 1).all()]
    others = [c for c in pts.columns if c not in (axis, "value", "_x", *moves)]
    groups = [g for _, g in (pts.groupby(others, dropna=False) if others else [((), pts)])]
    got = []
    for g in groups:
        g = g.dropna(subset=["_x"]).sort_values("_x")
        if claim.get("trend"):
            if g["_x"].nunique() >= 3:
                got.append(_spearman(list(g["_x"]), list(g["value"])))
        elif g["_x"].nunique() >= 3:
            got.append(float(g.loc[g["value"].idxmax(), "_x"]))
    if not got:
        had = ", ".join(_had(num, axis))
        return Reading(math.nan, "", f"a {'trend' if claim.get('trend') else 'peak'} needs at least 3 values "
                       f"of {axis} in a group; this run had {axis} = {had or 'none'}")
    what = "Spearman ρ" if claim.get("trend") else f"the {axis} of the highest point"
    return Reading(_stat(got, stat), f"({what}, {stat} over {len(got)} group{'s' if len(got) != 1 else ''} "
                   f"of points along {axis}, {launches})")


# ---------------------------------------------------------------- what the paper says

def acceptance(claim: dict) -> tuple[float, float]:
    """The readings that meet the paper's value: (low, high), either end infinite."""
    op = claim.get("op", "~")
    if op == "in":
        lo, hi = claim["range"]
        return float(lo), float(hi)
    v = float(claim["value"])
    slack = float(claim["tolerance_abs"]) if "tolerance_abs" in claim else float(claim.get("tolerance", 0.0)) * abs(v)
    if op == "~":
        return v - slack, v + slack
    if op == "<=":
        return -math.inf, v + slack
    return v - slack, math.inf


def holds(claim: dict, value: float) -> bool:
    """Whether a reading meets the claim: "~" within tolerance, "<=" at most value (+ tolerance),
    ">=" at least value (− tolerance), "in" within range (tolerance relative to |value|, or
    tolerance_abs)."""
    if value is None or math.isnan(value):
        return False
    lo, hi = acceptance(claim)
    return lo <= value <= hi


def null_of(claim: dict):
    """The reading without the effect: declared, else 0 for a difference or a trend, 1 for a
    ratio; None where there is none (no_null says why)."""
    if "null" in claim:
        return float(claim["null"])
    if claim.get("trend"):
        return 0.0
    if claim.get("over"):
        return 0.0 if claim.get("compare") == "difference" else 1.0
    return None


def is_numeric(claim: dict) -> bool:
    return ("value" in claim or "range" in claim) and "metric" in claim


def lint(claim: dict, metric=None) -> list[str]:
    """What breaks the fidelity rules (SPEC §3.8) in one (expanded) claim: a claim that cannot
    differ from the reading without the effect, an edge on it, a tolerance without its source;
    with the metric's descriptor (descriptors.Metric: what hmb-bench says its definition allows),
    also a reading the definition fixes (early-bird at one partition), a ratio across the values
    of an option that sets the metric (throughput whose loop holds the compute), and a range
    that no producible reading meets or every producible reading meets (physical)."""
    if not is_numeric(claim) or claim.get("needs"):
        return []
    out = physical(claim, metric) if metric is not None else []
    if not claim.get("tolerance_from"):
        out.append("no tolerance_from: the paper's spread or a written rationale")
    if claim.get("op", "~") == "~" and not (claim.get("tolerance") or claim.get("tolerance_abs")):
        out.append("'~' with no tolerance: an exact value no measurement meets")
    null = null_of(claim)
    if null is None:
        if not claim.get("no_null"):
            out.append("no null (the reading without the effect) and no no_null saying why there is none")
        return out
    lo, hi = acceptance(claim)
    scale = max([abs(null)] + [abs(x) for x in (lo, hi, claim.get("value", 0.0)) if math.isfinite(x)] + [1e-12])
    if holds(claim, null):
        if not claim.get("null_agrees"):
            out.append(f"accepts the reading without the effect ({fmt(null)}): read the paper's effect, "
                       "or say with null_agrees why its statement is that absence")
    elif claim.get("null_agrees"):
        out.append(f"null_agrees, but the reading without the effect ({fmt(null)}) does not meet it")
    near = [e for e in (lo, hi) if math.isfinite(e) and abs(e - null) < EDGE * scale]
    if near:
        out.append(f"an edge of the accepted range ({fmt(near[0])}) sits on the reading without the effect "
                   f"({fmt(null)}): noise alone flips the verdict")
    return out


def producible(claim: dict, metric) -> tuple[float, float]:
    """The readings of the claim the benchmark can produce, from the metric's bounds: a trend's
    ρ within [−1, 1]; a ratio of a metric that cannot be negative from 0; a difference within
    the bounds' width; a plain reading or a peak within the bounds."""
    lo, hi = metric.allowed()
    if claim.get("trend"):
        return -1.0, 1.0
    if claim.get("peak"):
        return 0.0, math.inf
    if claim.get("over"):
        if claim.get("compare") == "difference":
            width = hi - lo
            return -width, width
        return (0.0, math.inf) if lo >= 0 else (-math.inf, math.inf)
    return lo, hi


def physical(claim: dict, metric) -> list[str]:
    """Fidelity rules that need the metric's definition (lint)."""
    out = []
    sels = [("where", claim.get("where") or {})] + ([("over", claim["over"])] if claim.get("over") else [])
    for value, cond in getattr(metric, "fixed_at", ()):
        for which, sel in sels:
            if all(col in sel and all(same(x, v) for x in _listed(sel[col])) for col, v in cond.items()):
                at = ", ".join(f"{k} = {v}" for k, v in cond.items())
                out.append(f"reads {metric.name} at {at} ({which}), which its definition fixes at {fmt(value)}: "
                           "no reading there can differ")
    for opt in getattr(metric, "set_by_options", ()):
        col = opt.replace("-", "_")
        if claim.get("trend") == col:
            out.append(f"a trend of {metric.name} along {col}, which the {opt} sets by construction")
        if claim.get("over") and col in (claim.get("where") or {}) and col in claim["over"]:
            a, b = sorted(map(str, _listed(claim["where"][col]))), sorted(map(str, _listed(claim["over"][col])))
            if a != b:
                out.append(f"a ratio of {metric.name} across {col} values ({'/'.join(a)} over {'/'.join(b)}), "
                           f"which the {opt} sets by construction: the reading is the {opt}'s, not the library's")
    plo, phi = producible(claim, metric)
    lo, hi = acceptance(claim)
    if max(lo, plo) > min(hi, phi):
        out.append(f"no reading {metric.name} can produce meets it (it can read {fmt(plo)} to {fmt(phi)})")
    elif lo <= plo and phi <= hi:
        out.append(f"every reading {metric.name} can produce meets it ({fmt(plo)} to {fmt(phi)}): it cannot differ")
    return out


# ---------------------------------------------------------------- cells, per, judging

def _merge_where(base: dict | None, extra: dict | None) -> dict | None:
    if base is None and not extra:
        return None
    return {**(base or {}), **(extra or {})}


def _merge_over(over: dict, extra: dict | None) -> dict:
    """A cell's or per value's filter joins `over` where `over` leaves the column open or allows
    the value (then narrowing to it: per partitions = 4 against over partitions = 2-32 reads 4
    over 4); where `over` fixes the column to other values it keeps its own (a cell mode = comm
    against over mode = everywhere reads comm over everywhere, not comm over comm)."""
    out = dict(over)
    for k, v in (extra or {}).items():
        allowed = over[k] if isinstance(over.get(k), list) else [over[k]] if k in over else None
        vals = v if isinstance(v, list) else [v]
        if allowed is None or all(any(same(x, a) for a in allowed) for x in vals):
            out[k] = v
    return out


def expand(claim: dict) -> list[dict]:
    """A claim with `cells` as one claim per cell: a cell's `where` joins the claim's `where`
    and `over` (_merge_over), its other keys replace the claim's (value, tolerance, scale,
    label, metric, over, ...)."""
    if not claim.get("cells"):
        return [claim]
    out = []
    for cell in claim["cells"]:
        c = {k: copy.deepcopy(v) for k, v in claim.items() if k != "cells"}
        c.update({k: copy.deepcopy(v) for k, v in cell.items() if k != "where"})
        if cell.get("where"):
            c["where"] = _merge_where(c.get("where"), cell["where"])
            if c.get("over"):
                c["over"] = _merge_over(c["over"], cell["where"])
        c.setdefault("label", ", ".join(f"{k} = {_show(v)}" for k, v in {**cell.get("scale", {}),
                                                                          **cell.get("where", {})}.items()))
        out.append(c)
    return out


def _lib_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def _fmt_filter(d: dict) -> str:
    return ", ".join(f"{k} = {'/'.join(_show(x) for x in (v if isinstance(v, list) else [v]))}" for k, v in d.items())


def judge(claim: dict, df, seed_setup: str = "", lacks: str = "", unsupported=None) -> Verdict:
    """One (expanded) claim against one library's rows. lacks: what HMB lacks for the claim's
    figure (the figure's `needs`); unsupported: the points the library did not run
    (tidy.Table.unsupported), to say so when the claim has no rows. The verdict is this run's
    (decide): agrees / differs when the launches decide it, undecided when they do not;
    over_time sets it beside the kept runs."""
    if claim.get("needs") or lacks:
        return Verdict(claim, "–", NOT_COMPARABLE, f"HMB lacks {claim.get('needs') or lacks}")
    if "metric" not in claim:
        return Verdict(claim, "–", NOT_COMPARABLE, claim.get("reason", "a qualitative claim: read the figure"))
    numbers = [claim.get(k, 0) for k in ("value", "tolerance", "tolerance_abs")] + list(claim.get("range", []))
    if any(not math.isfinite(float(x)) for x in numbers):
        return Verdict(claim, "–", NOT_COMPARABLE, "the seed's value or tolerance is not a finite number")
    rows = select(df, claim.get("bench"), claim["metric"], claim.get("where"))
    if rows is None or rows.empty:
        return Verdict(claim, "–", NOT_COMPARABLE, why_no_rows(df, claim.get("bench"), claim.get("where"), unsupported))
    den = None
    if claim.get("over"):
        den = select(df, claim.get("bench"), claim.get("over_metric", claim["metric"]), claim["over"])
        if den is None or den.empty:
            return Verdict(claim, "–", NOT_COMPARABLE, "no results for the claim's reference points: "
                           + why_no_rows(df, claim.get("bench"), claim["over"], unsupported))
    if claim.get("min_threads"):
        enough = rows[rows["threads"].astype(float) >= claim["min_threads"]]
        if enough.empty:
            ran = "/".join(sorted({f"{float(t):g}" for t in rows["threads"]}))
            return Verdict(claim, "–", NOT_COMPARABLE, f"the claim needs at least {claim['min_threads']} threads "
                           f"per rank; this run had T = {ran}")
        rows = enough
        if den is not None:
            # the reference at the same thread need, where it has such points; a reference that
            # runs at fewer threads by design (MPI everywhere: one per process) is read as it is
            den_enough = den[den["threads"].astype(float) >= claim["min_threads"]]
            den = den_enough if not den_enough.empty else den
    reasons, labels = [], []
    if claim.get("scale"):
        at = select(rows, None, None, claim["scale"])
        if at.empty:
            ran = "; ".join(f"{k} = {', '.join(_had(rows, k)) or '?'}" for k in claim["scale"])
            reasons.append(f"the seed's scale is {_fmt_filter(claim['scale'])}; this run ran {ran}")
        else:
            rows = at
            if den is not None:
                den_at = select(den, None, None, claim["scale"])
                den = den_at if not den_at.empty else den
    if claim.get("scope") == "network":
        why, label = _network_reason(claim, rows, df, seed_setup)
        reasons += [why] if why else []
        labels += [label] if label else []
    elif _lab_network(rows):    # a claim any network may judge, read across lab nodes: said so
        labels.append(f"network: {_lab_network(rows)}")
    rows, dropped, gone = finite_rows(rows)
    if rows.empty:
        return Verdict(claim, "–", NOT_COMPARABLE, f"no reading: {dropped}")
    if den is not None:
        den, den_dropped, _ = finite_rows(den)
        if den.empty:
            return Verdict(claim, "–", NOT_COMPARABLE, f"no reference reading: {den_dropped}")
        dropped = "; ".join(x for x in (dropped, den_dropped and f"reference points: {den_dropped}") if x)
    if claim.get("oversubscribed"):   # the seed's own oversubscription: its points are the reading
        solid, sden = rows, den
        if no_reading(rows).any() or (den is not None and no_reading(den).any()):
            labels.append(f"read oversubscribed, as the seed was: {claim['oversubscribed']}")
    else:
        solid = _solid(rows)
        sden = _solid(den) if den is not None else None
    if solid.empty or (sden is not None and sden.empty):
        r = reading(claim, rows, den)
        shown = f"{fmt(r.value)} (oversubscribed)" if not r.problem else "–"
        which = "every reference point is" if not solid.empty else "every point is"
        return Verdict(claim, shown, NOT_COMPARABLE, f"{which} oversubscribed or its progress thread shares a "
                       "compute core: not a reading", value=math.nan)
    r = reading(claim, solid, sden, gone)
    if r.problem:
        return Verdict(claim, "–", NOT_COMPARABLE, r.problem)
    if not math.isfinite(r.value):
        return Verdict(claim, fmt_num(r.value), NOT_COMPARABLE, "the reading is not a finite number"
                       + (f" ({dropped})" if dropped else ""))
    text = f"{fmt(r.value)} {r.detail[:-1]}; {dropped})" if dropped else f"{fmt(r.value)} {r.detail}"
    each = _each_launch(claim, solid, sden)
    library = _library(solid)
    if reasons:   # not judged; whether this machine's reading meets the seed's value is said beside it
        if is_numeric(claim):
            reasons[-1] += f"; here the reading {'meets' if holds(claim, r.value) else 'does not meet'} the seed's value"
        return Verdict(claim, text, NOT_COMPARABLE, "; ".join(reasons + _notes(claim)), value=r.value,
                       launches=each, library=library)
    if not is_numeric(claim):
        return Verdict(claim, text, NOT_COMPARABLE, "the seed gives no number: read the figure", value=r.value,
                       launches=each, library=library)
    d = decide(claim, r.value, each)
    notes = [d.text] + labels + [claim.get("caveat", "")] + _notes(claim)
    return Verdict(claim, text, d.verdict, "; ".join(n for n in notes if n), value=r.value, launches=each,
                   decision=d, library=library, cause=_cause(claim, df, seed_setup))


def _cause(claim: dict, df, seed_setup: str) -> str:
    """The claim's `cause` (a paired variant HMB measures beside the paper's baseline, e.g. part's
    polled receive against its blocking one): the same selection read with the variant's metric,
    in words, so a difference from the paper can be put down to the baseline or to the library
    ("" without one)."""
    cause = claim.get("cause")
    if not cause:
        return ""
    variant = {k: v for k, v in claim.items() if k != "cause"}
    variant["metric"] = cause["metric"]
    if claim.get("over"):
        variant["over_metric"] = cause.get("over_metric", claim.get("over_metric", claim["metric"]))
    v = judge(variant, df, seed_setup)
    if not math.isfinite(v.value):
        return f"{cause['label']}: no reading ({v.reason})"
    meets = "meets" if holds(claim, v.value) else "does not meet"
    return f"{cause['label']} ({cause['metric']}): {fmt(v.value)}, which {meets} the seed's value ({v.verdict})"


def no_reading(rows):
    return tidy.no_reading(rows)


def _library(rows) -> str:
    libs = sorted({str(x) for x in rows["library"].dropna() if str(x)}) if "library" in rows.columns else []
    return libs[0] if libs else ""


def _network_reason(claim: dict, rows, df, seed_setup: str) -> tuple[str, str]:
    """(why a network-scoped claim is not judged here, "" when it is; the label a judged one
    carries). Across the nodes of an hmb lab, a claim whose statement is an effect (`lab =
    "effect"`: a direction, an ordering, a ratio) is judged, labelled with the lab's network; an
    overlap claim (`lab = "overlap"`) only where each node has a core beside its ranks for the
    kernel's TCP work and the library's threads; a value measured on the seed's network never."""
    lab_net = _lab_network(rows)
    seed_net = _seed_network(seed_setup)
    if lab_net:
        kind = claim.get("lab")
        label = f"network: {lab_net}, not the seed's {seed_net}"
        if kind == "effect":
            return "", f"judged on the effect the seed states; {label}"
        if kind == "overlap":
            short = _no_spare_core(rows)
            if short:
                return (f"{label}; overlap needs a core beside each rank for the network path, and {short}: "
                        "the rank, the kernel's TCP work and the library's threads time-slice one core"), ""
            return "", f"judged on the effect the seed states, each node with a core to spare; {label}"
        return f"{label}: the seed's value is measured on its network", ""
    if _single_node(df):
        return (f"the seed ran {seed_setup}; this run is one node's shared memory" if seed_setup
                else "the seed's reading depends on its network; this run is one node's shared memory"), ""
    return "", ""


def _no_spare_core(rows) -> str:
    """Where a launch's nodes had no core beside their ranks' threads (the run header's CPUs of the
    busiest node against its ranks × threads), that fact in words; "" where every node had one."""
    for _, r in rows.drop_duplicates("run_id").iterrows():
        try:
            cpus, per_node, threads = float(r.get("cpus")), float(r.get("ranks_per_node")), float(r.get("threads"))
        except (TypeError, ValueError):
            return "the run header does not say how many CPUs a node has"
        if not (cpus > per_node * threads):
            return (f"a node has {cpus:g} CPU{'s' if cpus != 1 else ''} for {per_node:g} rank{'s' if per_node != 1 else ''}"
                    f" × {threads:g} thread{'s' if threads != 1 else ''} (measured: the run header's cpus_available)")
    return ""


# Futility: judged from this many launches on (three say too little of the spread), with this margin
# on the reading's distance from the edge (tests/test_rounds.py simulates both).
FUTILE_FROM, FUTILE_MARGIN = 5, 1.5


def reachable(d: "Decision", cap: int) -> bool:
    """Whether cap launches could decide an undecided claim at the spread its launches show: the
    interval at cap launches (Student's t at LEVEL, the same standard deviation) would clear the
    nearest edge were the reading FUTILE_MARGIN times as far from it. A reading on the edge would
    not: more launches only spend time (a futility rule, as sequential trials stop)."""
    if d.n < max(MIN_LAUNCHES, FUTILE_FROM):
        return True
    if not math.isfinite(d.edge_se):
        return False
    return float(student.ppf(0.5 + LEVEL / 2, cap - 1)) * math.sqrt(d.n / cap) < d.edge_se * FUTILE_MARGIN


@dataclasses.dataclass
class Decision:
    """This run's launches against the claim's range: the mean of the reading in each launch
    with its LEVEL interval (Student's t over the launches); agrees when the interval lies inside
    the range, differs when it lies outside one edge, undecided otherwise (or with fewer than
    MIN_LAUNCHES launches). `edge_se`: the distance of the mean from the nearest edge in
    standard errors (what more launches could resolve)."""
    verdict: str
    n: int
    mean: float = math.nan
    half: float = math.nan
    edge_se: float = math.nan
    text: str = ""


def decide(claim: dict, value: float, each: list) -> Decision:
    """The verdict the launches support (Decision). value: the claim's reading (the statistic of
    the points' medians), which must fall on the same side as the interval."""
    vals = [float(v) for v in each if v is not None and math.isfinite(float(v))]
    n = len(vals)
    if n < MIN_LAUNCHES:
        why = "the claim's selections come from launches that do not pair up" if not vals and each == [] \
            else f"{_launch_text(n)}"
        return Decision(UNDECIDED, n, text=f"undecided: {why}; a verdict rests on at least {MIN_LAUNCHES} launches")
    # statistics' exact sums: equal readings (a Spearman ρ of 7 sizes takes few values) give a
    # spread of 0, not a rounding error printed as "± 1.35e-16"
    mean = statistics.mean(vals)
    sd = statistics.stdev(vals, mean)
    se = sd / math.sqrt(n)
    half = float(student.ppf(0.5 + LEVEL / 2, n - 1)) * se
    lo, hi = acceptance(claim)
    a, b = mean - half, mean + half
    edges = [e for e in (lo, hi) if math.isfinite(e)]
    edge = min(edges, key=lambda e: abs(mean - e)) if edges else math.nan
    dist = abs(mean - edge) / se if se > 0 else math.inf
    interval = f"{n} launches: {fmt(mean)} ± {fmt(half)} ({LEVEL * 100:g} %)"
    if lo <= a and b <= hi and holds(claim, value):
        return Decision(AGREES, n, mean, half, dist, interval)
    if (b < lo or a > hi) and not holds(claim, value):
        return Decision(DIFFERS, n, mean, half, dist, interval)
    return Decision(UNDECIDED, n, mean, half, dist,
                    f"undecided: {interval} reaches across the edge {fmt(edge)}, "
                    f"{dist:.1f} standard errors from it")


def _notes(claim: dict) -> list[str]:
    out = []
    if claim.get("definition"):
        out.append(f"definition differs: {claim['definition']}")
    if claim.get("contradiction"):
        out.append(f"the paper contradicts itself: {claim['contradiction']}")
    return out


_REPEAT = re.compile(r"-r(\d+)$")


def replicate(rows):
    """Each row's launch replicate: the repeat index of its sweep launch (the tag's -rN: launches
    of one repeat index of different configs were alternated, so they pair up across a claim's
    selections), else its run id (a launch on its own)."""
    tags = rows["tag"].astype(str) if "tag" in rows.columns else None
    out = []
    for i, rid in enumerate(rows["run_id"].astype(str)):
        m = _REPEAT.search(tags.iloc[i]) if tags is not None else None
        out.append(f"r{m.group(1)}" if m else f"run {rid}")
    return out


def _each_launch(claim: dict, num, den) -> list[float]:
    """The claim's reading in each launch replicate alone (replicate), in order: a replicate
    counts where it holds every point of both selections that the run holds (a launch cut short
    or a config relaunched alone is no replicate of the claim)."""
    rn = replicate(num)
    rd = replicate(den) if den is not None else None
    if not (claim.get("pair_on") or claim.get("trend") or claim.get("peak")):
        fast = _each_launch_of_values(claim, num, den, rn, rd)
        if fast is not None:
            return fast
    full_n = tidy.n_points(num)
    full_d = tidy.n_points(den) if den is not None else 0
    out = []
    for key in dict.fromkeys(rn):
        n = num[[k == key for k in rn]]
        d = None if den is None else den[[k == key for k in rd]]
        if tidy.n_points(n) < full_n or (d is not None and (d.empty or tidy.n_points(d) < full_d)):
            continue
        r = reading(claim, n, d)
        if not r.problem and math.isfinite(r.value):
            out.append(r.value)
    return out


def _each_launch_of_values(claim: dict, num, den, rn, rd) -> list[float] | None:
    """_each_launch for a claim read from its points' values alone (no pair_on, trend or peak),
    without a table per replicate: each replicate's points from one pass over the rows
    (tidy.launch_points), its reading as reading() takes it from them (the stat of the points'
    launch medians; the order of the points does not change a median, max or min). None when the
    rows have no point columns (the general path)."""
    per_n = tidy.launch_points(num, rn)
    per_d = tidy.launch_points(den, rd) if den is not None else {}
    if per_n is None or per_d is None:
        return None
    stat = claim.get("stat", "median")
    full_n = len({p for pts in per_n.values() for p in pts})
    full_d = len({p for pts in per_d.values() for p in pts})
    out = []
    for key, pts in per_n.items():
        dpts = per_d.get(key) if den is not None else None
        if len(pts) < full_n or (den is not None and (not dpts or len(dpts) < full_d)):
            continue
        value = _stat([tidy.launch_median(v) for v in pts.values()], stat)
        if den is not None:
            d = _stat([tidy.launch_median(v) for v in dpts.values()], stat)
            if claim.get("compare") != "difference" and (not d or math.isnan(d)):
                continue    # reading(): "the reference reading is 0 or undefined"
            value = _combine(claim, value, d)
        if math.isfinite(value):
            out.append(value)
    return out


def per_launch(claim: dict, df) -> list[str]:
    """The claim's reading in each launch replicate alone, as text, as judge reads them; [] for a
    claim that reads nothing here."""
    if "metric" not in claim or claim.get("needs") or df is None or df.empty:
        return []
    return [fmt(v) for v in judge(claim, df).launches]


def judge_all(claim: dict, df, seed_setup: str = "", lacks: str = "", unsupported=None) -> list[Verdict]:
    """A declared claim judged: one verdict per cell, and per value of its `per` columns."""
    out = []
    for c in expand(claim):
        per = c.get("per")
        if not per or "metric" not in c or c.get("needs") or lacks:
            out.append(judge(c, df, seed_setup, lacks, unsupported))
            continue
        per = per if isinstance(per, list) else [per]
        rows = select(df, c.get("bench"), c["metric"], c.get("where"))
        combos = []
        if rows is not None and not rows.empty and all(p in with_derived(rows, p).columns for p in per):
            r = rows
            for p in per:
                r = with_derived(r, p)
            combos = sorted({tuple(_show(x) for x in t) for t in r[per].dropna().itertuples(index=False)},
                            key=lambda t: [_number_first(x) for x in t])
        if not combos:
            out.append(judge(c, df, seed_setup, lacks, unsupported))
            continue
        for combo in combos:
            fix = dict(zip(per, combo))
            cc = {**c, "where": _merge_where(c.get("where"), fix), "_planned": c}
            if c.get("over"):
                cc["over"] = _merge_over(c["over"], fix)
            label = ", ".join(f"{k} = {v}" for k, v in fix.items())
            cc["label"] = f"{c['label']}; {label}" if c.get("label") else label
            out.append(judge(cc, df, seed_setup, lacks, unsupported))
    return out


def table(study, df, unsupported=None, only=None, launches=None) -> list[Verdict]:
    """Each claim judged once per MPI library in the table (a claim that reads nothing: once);
    unsupported: tidy.Table.unsupported of the same results; only: these claims instead of the
    study's (a demo's, narrowed to the cells it judges); launches(claim, mpi): the tags of the
    launches a claim-driven run judged the (expanded) claim on there, None for every launch."""
    needs = {f["id"]: f["needs"] for f in study.figures if f.get("needs")}
    mpis = sorted(df["mpi"].dropna().unique()) if df is not None and not df.empty else []
    setup = study.meta.get("setup", "")
    out = []
    for c in (study.claims if only is None else only):
        lacks = needs.get(c.get("figure_id"), "")
        if "metric" not in c or c.get("needs") or lacks or not mpis:
            out += judge_all(c, df, setup, lacks)
            continue
        for m in mpis:
            un = unsupported[unsupported["mpi"] == m] if unsupported is not None and not unsupported.empty \
                else None
            rows = df[df["mpi"] == m]
            for e in ([c] if launches is None else expand(c)):
                tags = launches(e, m) if launches is not None else None
                for v in judge_all(e, rows if tags is None else rows[rows["tag"].isin(tags)], setup, unsupported=un):
                    v.mpi = m
                    out.append(v)
    return out


# ---------------------------------------------------------------- coverage

def statements(claim: dict) -> int:
    """How many of the paper's statements a declared claim stands for (a table's cells each)."""
    return len(claim["cells"]) if claim.get("cells") else 1


def not_here(claim: dict, lacks: str = "", cores: int | None = None, lab: bool = False,
             spare_core_when: str | None = None) -> str:
    """Why this machine cannot judge the claim, as a short reason that groups claims (one line
    per reason in the demo): "HMB lacks …", "a qualitative statement", "needs a network", "needs
    nodes with a spare core", "needs N cores"; "" where it can. lab: the run is across the nodes
    of an hmb lab (a network claim stating an effect is judged there)."""
    if claim.get("needs") or lacks:
        return f"HMB lacks {claim.get('needs') or lacks}"
    if "metric" not in claim:
        return "a qualitative statement (read the figure)"
    if not is_numeric(claim):
        return "the seed gives no number (read the figure)"
    if claim.get("scope") == "network":
        kind = claim.get("lab")
        if not lab:
            return "needs a network (hmb study run --hosts lab)" if kind else "needs the seed's network"
        if kind is None:
            return "needs the seed's network"
    if cores is not None and claim.get("oversubscribed"):   # oversubscribed as the seed was, within the limit
        scale = claim.get("scale") or {}
        total = max(float(x) for x in _listed(scale.get("ranks", 2))) * max(
            [float(claim.get("min_threads", 1))] + [float(x) for x in _listed(scale.get("threads", 1))])
        if total > OVERSUBSCRIBE_LIMIT * cores:
            return (f"needs {math.ceil(total / OVERSUBSCRIBE_LIMIT):g} cores (the seed's oversubscription, at most "
                    f"{OVERSUBSCRIBE_LIMIT} threads a core)")
    if cores is not None and not claim.get("oversubscribed"):
        scale = claim.get("scale") or {}
        where = claim.get("where") or {}
        # the least the claim reads (a list of thread counts is judged per value): its smallest point
        ranks = min(_numbers(scale.get("ranks")) or _numbers(where.get("ranks")) or [2.0])
        threads = max([float(claim.get("min_threads", 1)),
                       min(_numbers(scale.get("threads")) or _numbers(where.get("threads")) or [1.0])])
        spare = _needs_spare(claim, spare_core_when)
        if ranks * (threads + spare) > cores:
            return f"needs {ranks * (threads + spare):g} cores" + (" (a spare core per rank for the progress thread)"
                                                                   if spare else "")
    return ""


def _needs_spare(claim: dict, when: str | None) -> int:
    """1 where every point the claim reads runs a progress agent that needs a core of its own
    (the benchmark's spare_core_when, e.g. async's progress=impl,thread), else 0."""
    if not when:
        return 0
    col, _, values = when.partition("=")
    col, allowed = col.strip().replace("-", "_"), {v.strip() for v in values.split(",")}
    sels = [claim.get("where") or {}] + ([claim["over"]] if claim.get("over") else [])
    hit = [sel for sel in sels if col in sel and all(str(v) in allowed for v in _listed(sel[col]))]
    return 1 if hit else 0


def _numbers(v) -> list[float]:
    """The numbers among a filter's values (none for None)."""
    out = []
    for x in _listed(v) if v is not None else []:
        try:
            out.append(float(x))
        except (TypeError, ValueError):
            pass
    return out


def runnable_here(claim: dict, lacks: str = "", cores: int | None = None) -> bool:
    """Whether this machine can give the claim a verdict at all (not_here says why not)."""
    return not not_here(claim, lacks, cores)


def _listed(v) -> list:
    return v if isinstance(v, list) else [v]


# ---------------------------------------------------------------- markdown

def seed_value(c: dict) -> str:
    """The paper's value as the claim reads it: op, value, tolerance and the accepted range."""
    if not is_numeric(c):
        return "–"
    op = c.get("op", "~")
    if op == "in":
        lo, hi = c["range"]
        return f"in [{fmt(float(lo))}, {fmt(float(hi))}]"
    v = float(c["value"])
    tol = (f" ±{fmt(float(c['tolerance_abs']))}" if "tolerance_abs" in c
           else f" ±{float(c['tolerance']) * 100:.0f}%" if c.get("tolerance") else "")
    sym = {"~": "~", "<=": "≤", ">=": "≥"}[op]
    lo, hi = acceptance(c)
    rng = "" if not tol else f" [{fmt(lo)}, {fmt(hi)}]"
    return f"{sym} {fmt(v)}{tol}{rng}"


def shown_cause(v: Verdict) -> str:
    """The cause variant's reading, where the verdict is not agreement (a difference to explain)."""
    return f"cause: {v.cause}" if v.cause and v.verdict != AGREES else ""


def markdown(verdicts: list[Verdict]) -> str:
    out = ["| seed | claim (quoted) | seed's value | MPI | HMB's reading | verdict | why | launches, time |",
           "|---|---|---|---|---|---|---|---|"]
    for v in verdicts:
        c = v.claim
        where = f" [{c['label']}]" if c.get("label") else ""
        cells = [md_text(c["figure"] + where), f"\"{md_text(c['quote'])}\"", seed_value(c), md_text(v.mpi or "–"),
                 md_text(v.reading), v.verdict, md_text("; ".join(x for x in (v.history, v.reason, shown_cause(v)) if x)),
                 md_text(v.cost or (f"{v.decision.n} launches" if v.decision else "–"))]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"
