"""A study's claims beside HMB's reading: agrees / differs / not comparable, with the reason.

A claim ([[claim]] in a study file) names the paper's figure or table (`figure`), quotes its
words (`quote`), and where it is numeric, what to read from the tidy table: `bench`, `metric`,
`where` (column = value filters), `stat` (median / max / min of the points' medians), optional
`over` (a second filter: the reading is the ratio of the two, or with `compare = "difference"`
their difference, for signed metrics), `min_threads` (rows with fewer threads per rank are no
reading of the claim), and `value` with `op`
("~": within `tolerance` relative; "<=" / ">=": at most / at least value×(1±tolerance)).
`needs` (a feature HMB lacks) and `scope = "network"` (the seed's reading depends on an
inter-node network) make it not comparable, with the reason.
"""
from __future__ import annotations

import dataclasses
import math

from .. import tidy
from ..results import fmt_num, md_text
from ..tidy import same, select

AGREES, DIFFERS, NOT_COMPARABLE = "agrees", "differs", "not comparable"


@dataclasses.dataclass
class Verdict:
    claim: dict
    reading: str
    verdict: str
    reason: str
    mpi: str = ""       # the library the reading is from ("" when the claim reads nothing)


def _number_first(text: str):
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)


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
        had = sorted({str(v) for v in m[col].dropna()}, key=_number_first) if col in m.columns else []
        kept = m[m[col].map(lambda v: any(same(v, w) for w in wants))] if col in m.columns else m.iloc[0:0]
        if kept.empty:
            ran = f"it ran {col} = {', '.join(had)}" if had else f"its {bench} results have no {col}"
            return f"{col} = {'/'.join(str(w) for w in wants)} is not in this run ({ran})"
        m = kept
    return "the claim's points ran but gave no result for its metric"


def point_medians(rows):
    """The median of each point over its launches (tidy.point_medians: the one point identity)."""
    return tidy.point_medians(rows)


def _stat(rows, stat: str) -> float:
    vals = point_medians(rows)
    if vals.empty:
        return math.nan
    return float({"median": vals.median, "max": vals.max, "min": vals.min}[stat]())


def _single_node(df) -> bool:
    hosts = set()
    for h in df["host"].dropna():
        hosts.update(x for x in str(h).split(",") if x)
    return len(hosts) <= 1


def _solid(rows):
    """Rows that are readings (tidy.readings: the one predicate)."""
    return tidy.readings(rows)


def judge(claim: dict, df, seed_setup: str = "", lacks: str = "", unsupported=None) -> Verdict:
    """lacks: what HMB lacks for the claim's figure (the figure's `needs`); unsupported: the
    points the library did not run (tidy.unsupported), to say so when the claim has no rows."""
    if claim.get("needs") or lacks:
        return Verdict(claim, "–", NOT_COMPARABLE, f"HMB lacks {claim.get('needs') or lacks}")
    if "metric" not in claim:
        return Verdict(claim, "–", NOT_COMPARABLE, claim.get("reason", "a qualitative claim: read the figure"))
    rows = select(df, claim.get("bench"), claim["metric"], claim.get("where"))
    if rows is None or rows.empty:
        return Verdict(claim, "–", NOT_COMPARABLE, why_no_rows(df, claim.get("bench"), claim.get("where"), unsupported))
    if claim.get("min_threads"):
        enough = rows[rows["threads"].astype(float) >= claim["min_threads"]]
        if enough.empty:
            ran = "/".join(sorted({f"{float(t):g}" for t in rows["threads"]}))
            return Verdict(claim, "–", NOT_COMPARABLE, f"the claim needs at least {claim['min_threads']} threads "
                           f"per rank (the seed: one per partition); this run had T = {ran} (--fit)")
        rows = enough
    if claim.get("scope") == "network" and _single_node(df):
        reason = f"the seed ran {seed_setup}; this run is one node's shared memory" if seed_setup \
            else "the seed's reading depends on its network; this run is one node's shared memory"
    else:
        reason = ""
    if any(not math.isfinite(float(claim.get(k, 0))) for k in ("value", "tolerance")):
        return Verdict(claim, "–", NOT_COMPARABLE, "the seed's value or tolerance is not a finite number")
    rows, dropped, gone = finite_rows(rows)
    solid = _solid(rows)
    stat = claim.get("stat", "median")
    if rows.empty:
        return Verdict(claim, "–", NOT_COMPARABLE, f"no reading: {dropped}")
    if solid.empty:   # shown as the claim reads (a ratio where it has `over`), never judged
        shown = _stat(rows, stat)
        if claim.get("over"):
            den_rows = select(df, claim.get("bench"), claim.get("over_metric", claim["metric"]), claim["over"])
            den = _stat(den_rows, stat) if den_rows is not None and not den_rows.empty else math.nan
            shown = shown - den if claim.get("compare") == "difference" else shown / den if den else math.nan
        return Verdict(claim, f"{fmt_num(shown)} (oversubscribed)",
                       NOT_COMPARABLE, "every point is oversubscribed or its progress thread shares a "
                       "compute core: not a reading")
    value = _stat(solid, stat)
    if claim.get("over"):
        den_rows = select(df, claim.get("bench"), claim.get("over_metric", claim["metric"]), claim["over"])
        if claim.get("min_threads") and not den_rows.empty:
            den_rows = den_rows[den_rows["threads"].astype(float) >= claim["min_threads"]]
        if den_rows.empty:
            return Verdict(claim, "–", NOT_COMPARABLE, "no results for the claim's reference points")
        if _solid(den_rows).empty:
            return Verdict(claim, "–", NOT_COMPARABLE, "every reference point is oversubscribed or its "
                           "progress thread shares a compute core: not a reading")
        den_rows, den_dropped, _ = finite_rows(den_rows)
        if _solid(den_rows).empty:
            return Verdict(claim, "–", NOT_COMPARABLE, f"no reference reading: {den_dropped}")
        dropped = "; ".join(x for x in (dropped, den_dropped and f"reference points: {den_dropped}") if x)
        den = _stat(_solid(den_rows), stat)
        if claim.get("compare") == "difference":
            value = value - den
        elif not den or math.isnan(den):
            return Verdict(claim, "–", NOT_COMPARABLE, "the reference reading is 0 or undefined")
        else:
            value = value / den
    if not math.isfinite(value):
        return Verdict(claim, fmt_num(value), NOT_COMPARABLE, "the reading is not a finite number"
                       + (f" ({dropped})" if dropped else ""))
    launches = solid["run_id"].nunique()
    counted = f"{launches} of {launches + gone} launches" if gone else \
        f"{launches} launch{'es' if launches != 1 else ''}"
    reading = f"{fmt_num(value)} ({stat} of {len(point_medians(solid))} points, {counted}" \
              f"{f'; {dropped}' if dropped else ''})"
    if reason:   # not judged; whether this machine's reading meets the seed's value is said beside it
        if "value" in claim:
            reason += f"; here the reading {'meets' if holds(claim, value) else 'does not meet'} the seed's value"
        return Verdict(claim, reading, NOT_COMPARABLE, reason)
    if "value" not in claim:
        return Verdict(claim, reading, NOT_COMPARABLE, "the seed gives no number: read the figure")
    ok = holds(claim, value)
    notes = [claim.get("caveat", "")]
    if launches < 3 and claim.get("bimodal"):
        notes.append(f"{launches} launch{'es' if launches != 1 else ''}: the library is bimodal between launches")
    if launches > 1 and not claim.get("over"):
        each = [_stat(g, stat) for _, g in solid.groupby("run_id", sort=False)]
        agree = sum(holds(claim, v) for v in each)
        if 0 < agree < len(each):
            notes.append(f"launches disagree: {agree} of {len(each)} agree alone "
                         f"({', '.join(fmt_num(v) for v in each)})")
    return Verdict(claim, reading, AGREES if ok else DIFFERS, "; ".join(n for n in notes if n))


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


def holds(claim: dict, value: float) -> bool:
    """Whether a reading satisfies the claim's value: "~" within tolerance (relative), "<=" at
    most value×(1+tolerance), ">=" at least value×(1−tolerance) (signs kept for negatives)."""
    target, tol, op = float(claim["value"]), float(claim.get("tolerance", 0.0)), claim.get("op", "~")
    if math.isnan(value):
        return False
    if op == "~":
        return abs(value - target) <= tol * abs(target)
    if op == "<=":
        return value <= target * (1 + tol) if target >= 0 else value <= target * (1 - tol)
    return value >= target * (1 - tol) if target >= 0 else value >= target * (1 + tol)


def per_launch(claim: dict, df) -> list[str]:
    """The claim's reading in each launch alone (its stat over that launch's points), as text
    in launch order; [] for a claim that reads nothing."""
    if "metric" not in claim or claim.get("needs") or claim.get("over") or df is None or df.empty:
        return []
    rows = select(df, claim.get("bench"), claim["metric"], claim.get("where"))
    rows = _solid(finite_rows(rows)[0]) if rows is not None and not rows.empty else rows
    if rows is None or rows.empty:
        return []
    stat = claim.get("stat", "median")
    return [fmt_num(_stat(g, stat)) for _, g in rows.groupby("run_id", sort=False)]


def table(study, df, unsupported=None) -> list[Verdict]:
    """Each claim judged once per MPI library in the table (a claim that reads nothing: once);
    unsupported: tidy.unsupported of the same results."""
    needs = {f["id"]: f["needs"] for f in study.figures if f.get("needs")}
    mpis = sorted(df["mpi"].dropna().unique()) if df is not None and not df.empty else []
    out = []
    for c in study.claims:
        lacks = needs.get(c.get("figure_id"), "")
        if "metric" not in c or c.get("needs") or lacks or not mpis:
            out.append(judge(c, df, study.meta.get("setup", ""), lacks))
            continue
        for m in mpis:
            un = unsupported[unsupported["mpi"] == m] if unsupported is not None and not unsupported.empty \
                else None
            v = judge(c, df[df["mpi"] == m], study.meta.get("setup", ""), unsupported=un)
            v.mpi = m
            out.append(v)
    return out


def markdown(verdicts: list[Verdict]) -> str:
    out = ["| seed | claim (quoted) | seed's value | MPI | HMB's reading | verdict | why |",
           "|---|---|---|---|---|---|---|"]
    for v in verdicts:
        c = v.claim
        seed_value = f"{c.get('op', '~')} {fmt_num(float(c['value']))}" + \
            (f" ±{float(c['tolerance']) * 100:.0f}%" if c.get("tolerance") else "") if "value" in c else "–"
        cells = [md_text(c["figure"]), f"\"{md_text(c['quote'])}\"", seed_value, md_text(v.mpi or "–"),
                 md_text(v.reading), v.verdict, md_text(v.reason)]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"
