"""`hmb compare A B`: per matched point, the change from A to B with a 95% CI and a test.

Points match on their identity (tidy.Table.keys: benchmark, params, ranks, thread level, run
options, library settings), read from the tidy table. With one library on each side, points match across libraries; with one `settings`
entry on each side, across settings.
The change is the ratio of medians B/A, or the difference B − A for metrics that can be
negative (signed in the benchmark's descriptor) or have a median <= 0, where a ratio means
nothing.

Basis of the test (column "basis"):
- repeats (>= 2 repeats on each side): launch-to-launch variation is the noise. With raw
  samples, a two-level bootstrap (resample repeats, then samples) gives the CI, and the p-value
  is its normal approximation (z = change / bootstrap SD, on the log scale for ratios).
  Without samples, a Welch t on the repeats' medians (log scale for ratios).
- iterations (one repeat on a side): the iteration samples are the noise, as no launch-to-launch
  variation was measured: bootstrap CI + Mann–Whitney U on the samples, or, without samples,
  a normal approximation from the summaries' CIs.
p-values are Holm-corrected over all tests. A change is significant when its Holm p < 0.05,
its CI excludes "no change" (1 or 0), and it is larger than MIN_EFFECT (5%).
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict

import numpy as np
from scipy import stats

from ..data import tidy
from ..data.results import ResultsError
from .format import fmt_num, fmt_size

ALPHA = 0.05
MIN_EFFECT = 0.05
BOOT = 2000
MAX_BOOT_SAMPLES = 4000  # per repeat; larger samples are thinned evenly for the bootstrap


@dataclasses.dataclass
class Row:
    bench: str
    point: str
    metric: str
    unit: str
    median_a: float
    median_b: float
    scale: str          # "ratio" (change = B/A) or "difference" (change = B − A)
    change: float
    ci_lo: float
    ci_hi: float
    p: float
    method: str
    basis: str          # "repeats" or "iterations"
    higher_is_better: bool | None
    signed: bool = False
    p_holm: float = float("nan")
    significant: bool = False

    @property
    def ratio(self) -> float:
        return self.median_b / self.median_a if self.median_a != 0 else float("nan")

    @property
    def no_change(self) -> float:
        return 1.0 if self.scale == "ratio" else 0.0

    @property
    def verdict(self) -> str:
        if not self.significant:
            return ""
        if self.higher_is_better is None:
            return "changed"
        better = (self.change > self.no_change) == self.higher_is_better
        return "better" if better else "worse"

    def large_enough(self) -> bool:
        """The change exceeds MIN_EFFECT: 5% of A for ratios; for differences 5 points of a
        percentage, 0.05 of a dimensionless ratio, else 5% of the larger |median|."""
        if self.scale == "ratio":
            return abs(self.change - 1) > MIN_EFFECT
        if self.unit == "%":
            floor = 100 * MIN_EFFECT
        elif self.unit == "ratio":
            floor = MIN_EFFECT
        else:
            floor = MIN_EFFECT * max(abs(self.median_a), abs(self.median_b))
        return abs(self.change) > floor

    def ci_excludes_no_change(self) -> bool:
        return not math.isnan(self.ci_lo) and not (self.ci_lo <= self.no_change <= self.ci_hi)


@dataclasses.dataclass
class Launch:
    """One launch's reading of a metric: its row of the tidy table, and its --raw samples when the
    results were read with them."""
    median: float
    ci_lo: float
    ci_hi: float
    samples: np.ndarray | None = None


def _groups(t: tidy.Table, with_mpi: bool, with_settings: bool = True) -> dict:
    """point -> {result: (its record, {metric: Launch})} of the ok results, points and results in
    reading order."""
    g = defaultdict(dict)
    d = t.detail_of(t.df)
    for key, res, rec, metric, med, lo, hi in zip(t.keys(t.df, with_mpi, with_settings), d["result"], d["record"],
                                                  t.df["metric"], t.df["median"], t.df["ci_lo"], t.df["ci_hi"]):
        g[key].setdefault(res, (rec, {}))[1][metric] = Launch(med, lo, hi, tidy.samples(rec, metric))
    return g


def side(launches: dict, metric: str) -> list:
    """Each launch's Launch of metric (None where a launch has none)."""
    return [by_metric.get(metric) for _, by_metric in launches.values()]


def _natural(key) -> tuple:
    """Sort numbers as numbers (8 < 64 < 1K), everything else as text."""
    bench, params, noise, mpi = key
    return (bench, mpi, noise, tuple((k, (0, int(v), "") if v.lstrip("-").isdigit() else (1, 0, v))
                                     for k, v in params))


def _describe(key, shown) -> str:
    bench, params, noise, mpi = key
    parts = [f"{k}={fmt_size(v) if k == 'size_bytes' and v.isdigit() else v}" for k, v in params
             if k in shown]
    if noise and noise != "none":
        parts.append(f"noise={noise}")
    if mpi:
        parts.insert(0, mpi)
    return " ".join(parts)


def _boot_medians(sample_sets: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """BOOT bootstrap replicates of the median of per-repeat medians."""
    per_repeat = []
    for s in sample_sets:
        if s.size > MAX_BOOT_SAMPLES:
            s = s[np.linspace(0, s.size - 1, MAX_BOOT_SAMPLES).astype(int)]
        idx = rng.integers(0, s.size, size=(BOOT, s.size))
        per_repeat.append(np.median(s[idx], axis=1))
    meds = np.stack(per_repeat, axis=1)                 # BOOT x repeats
    if meds.shape[1] == 1:
        return meds[:, 0]
    pick = rng.integers(0, meds.shape[1], size=meds.shape)
    return np.median(np.take_along_axis(meds, pick, axis=1), axis=1)


def _scale_of(signed: bool, medians: list[float]) -> str:
    return "difference" if signed or min(medians) <= 0 else "ratio"


def compare_point(ma: list, mb: list, signed: bool, rng) -> tuple | None:
    """The change of one point's metric from A to B, each side its launches' Launch (side()); None
    when a launch of either has no median of it."""
    if any(m is None or math.isnan(m.median) for m in ma + mb):
        return None
    meds_a = [m.median for m in ma]
    meds_b = [m.median for m in mb]
    med_a, med_b = tidy.launch_median(meds_a), tidy.launch_median(meds_b)
    scale = _scale_of(signed, meds_a + meds_b)
    ratio = scale == "ratio"
    change = med_b / med_a if ratio else med_b - med_a
    basis = "repeats" if len(ma) >= 2 and len(mb) >= 2 else "iterations"
    nan = math.nan
    head = (med_a, med_b, scale, change)

    sa = [m.samples for m in ma]
    sb = [m.samples for m in mb]
    if all(s is not None and s.size for s in sa + sb):
        ba, bb = _boot_medians(sa, rng), _boot_medians(sb, rng)
        with np.errstate(divide="ignore", invalid="ignore"):
            boot = bb / ba if ratio else bb - ba
        boot = boot[np.isfinite(boot) & (boot > 0)] if ratio else boot[np.isfinite(boot)]
        lo, hi = (np.percentile(boot, [2.5, 97.5]) if boot.size else (nan, nan))
        if basis == "repeats":
            spread = np.std(np.log(boot) if ratio else boot) if boot.size > 1 else nan
            est = math.log(change) if ratio else change
            p = float(2 * stats.norm.sf(abs(est) / spread)) if spread > 0 else (1.0 if est == 0 else nan)
            method = "two-level bootstrap"
        else:
            pa, pb = np.concatenate(sa), np.concatenate(sb)
            p = float(stats.mannwhitneyu(pa, pb, alternative="two-sided").pvalue) \
                if np.ptp(np.concatenate([pa, pb])) > 0 else 1.0
            method = "bootstrap+MWU"
        return (*head, float(lo), float(hi), p, method, basis)

    # From the summaries. On the log scale for ratios (a CI of a median is skewed).
    fwd = (lambda v: math.log(v)) if ratio else (lambda v: v)
    back = (lambda v: math.exp(v)) if ratio else (lambda v: v)
    est = fwd(med_b) - fwd(med_a)

    def within_se(ms) -> float:
        """One repeat's standard error of its median, from its CI (median over repeats)."""
        ses = []
        for m in ms:
            lo, hi = float(m.ci_lo), float(m.ci_hi)
            if ratio and not (lo > 0 and hi > 0):
                continue
            if not (math.isnan(lo) or math.isnan(hi)):
                ses.append((fwd(hi) - fwd(lo)) / (2 * 1.96))
        return statistics.median(ses) if ses else nan

    if basis == "repeats":
        xa, xb = [fwd(v) for v in meds_a], [fwd(v) for v in meds_b]
        se = math.sqrt(statistics.variance(xa) / len(xa) + statistics.variance(xb) / len(xb))
        # Repeats that happen to agree closely do not make the point more precise than one repeat.
        floor = math.hypot(within_se(ma) / math.sqrt(len(ma)), within_se(mb) / math.sqrt(len(mb)))
        if floor > se:
            se, df = floor, len(xa) + len(xb) - 2
            p = float(2 * stats.t.sf(abs(est) / se, df)) if se > 0 else nan
        else:
            welch = stats.ttest_ind(xb, xa, equal_var=False)
            df, p = float(welch.df), float(welch.pvalue)
        method = "Welch t on repeat medians"
        q = stats.t.ppf(0.975, df) if se > 0 else nan
    else:
        se = math.hypot(within_se(ma), within_se(mb))
        method = "summary CIs"
        q = 1.96
        p = float(2 * stats.norm.sf(abs(est) / se)) if se > 0 else nan
    if not (se > 0 and math.isfinite(se)):
        return (*head, nan, nan, nan, "summary (no CI)", basis)
    # CI on the change's own scale (B/A, or B − A), centred on the estimate like the test.
    return (*head, back(est - q * se), back(est + q * se), p, method, basis)


def holm(pvalues: list[float]) -> list[float]:
    """Holm step-down adjusted p-values (NaN stays NaN and is not counted)."""
    idx = [i for i, p in enumerate(pvalues) if not math.isnan(p)]
    order = sorted(idx, key=lambda i: pvalues[i])
    m = len(order)
    adjusted = [math.nan] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


@dataclasses.dataclass
class Comparison:
    rows: list
    only_a: list
    only_b: list
    label_a: str
    label_b: str


def _mpis(t: tidy.Table) -> set:
    """The MPIs of every result, those a library did not run included."""
    return set(t.df["mpi"]) | (set(t.unsupported["mpi"]) if not t.unsupported.empty else set())


def _settings(t: tidy.Table) -> set:
    return set(t.df["settings"]) | (set(t.unsupported["settings"]) if not t.unsupported.empty else set())


def _params(t: tidy.Table) -> set:
    """The parameter names of every result record."""
    return {k for rec in t.detail["record"] for k in (rec.get("params") or {})}


def compare(a: tidy.Table, b: tidy.Table, metrics: list[str] | None = None, seed: int = 0,
            label_a: str = "A", label_b: str = "B") -> Comparison:
    if metrics:
        have = set(a.df["metric"]) | set(b.df["metric"])
        missing = [m for m in metrics if m not in have]
        if missing:
            raise ResultsError(f"--metric {missing[0]}: no result of {label_a} or {label_b} has it "
                               f"(they have: {', '.join(sorted(have)) or 'none'})")
    # One library per side (e.g. MPICH vs Open MPI): match across libraries. Likewise one
    # library setting per side (a sweep's `settings`, e.g. default vs 16K): match across settings.
    with_mpi = not (len(_mpis(a)) == 1 and len(_mpis(b)) == 1)
    with_settings = not (len(_settings(a)) == 1 and len(_settings(b)) == 1)
    ga, gb = _groups(a, with_mpi, with_settings), _groups(b, with_mpi, with_settings)
    # A point is named by its params and whatever else tells points apart.
    keys = list(ga) + list(gb)
    shown = _params(a) | _params(b) | set(tidy.varying([dict(k[1]) for k in keys]))
    rng = np.random.default_rng(seed)
    rows = []
    for key in sorted(set(ga) & set(gb), key=_natural):
        ra, rb = ga[key], gb[key]
        first = next(iter(ra.values()))[0]    # the metrics in the order of A's first launch
        for metric in (first.get("metrics") or {}):
            if metrics and metric not in metrics:
                continue
            record = (first.get("metrics") or {}).get(metric, {})
            desc = a.descriptors.get(key[0])
            desc = desc.metric(metric) if desc else None
            signed = bool(desc and desc.signed)
            got = compare_point(side(ra, metric), side(rb, metric), signed, rng)
            if got is None:
                continue
            hib = desc.higher_is_better if desc else record.get("higher_is_better")
            rows.append(Row(key[0], _describe(key, shown), metric, record.get("unit", ""), *got,
                            higher_is_better=None if hib is None else bool(hib), signed=signed))
    for row, p in zip(rows, holm([r.p for r in rows])):
        row.p_holm = p
        row.significant = (not math.isnan(p) and p < ALPHA and row.ci_excludes_no_change()
                           and row.large_enough())
    only_a = [_describe(k, shown) for k in sorted(set(ga) - set(gb), key=_natural)]
    only_b = [_describe(k, shown) for k in sorted(set(gb) - set(ga), key=_natural)]
    return Comparison(rows, only_a, only_b, label_a, label_b)


def _fmt_p(p: float) -> str:
    return "n/a" if math.isnan(p) else (f"{p:.1e}" if p < 1e-3 else f"{p:.3f}")


def _fmt_change(r: Row, v: float) -> str:
    return f"{v:.3f}" if r.scale == "ratio" else f"{v:+.3g}"


def _fmt_ci(r: Row) -> str:
    if math.isnan(r.ci_lo):
        return "n/a"
    return f"[{_fmt_change(r, r.ci_lo)}, {_fmt_change(r, r.ci_hi)}]"


def render(c: Comparison) -> str:
    """A table of every matched point and a summary of what changed significantly."""
    head = ["bench", "point", "metric", "A median", "B median", "change", "95% CI", "p (Holm)", "basis", ""]
    body = [[r.bench, r.point, r.metric, fmt_num(r.median_a), fmt_num(r.median_b),
             ("B/A " if r.scale == "ratio" else "B-A ") + _fmt_change(r, r.change), _fmt_ci(r),
             _fmt_p(r.p_holm), r.basis, ("* " + r.verdict) if r.significant else ""] for r in c.rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)] if body else [len(h) for h in head]
    lines = [f"# A = {c.label_a}", f"# B = {c.label_b}",
             "# change: ratio of medians B/A, or difference B-A for shares, efficiencies and metrics with "
             "a median <= 0;",
             "# basis repeats: noise = launch-to-launch spread (two-level bootstrap, or Welch t on repeat "
             "medians); basis iterations: one repeat on a side, noise = iteration samples (bootstrap + "
             f"Mann-Whitney U, or z from CIs); Holm-corrected over {len(c.rows)} tests",
             "  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    lines += ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip() for row in body]
    sig = [r for r in c.rows if r.significant]
    lines.append("")
    lines.append(f"Significant changes (Holm p < {ALPHA}, CI excludes no change, and |B/A - 1| > "
                 f"{MIN_EFFECT:.0%} or |B-A| > {MIN_EFFECT:.0%} of scale): {len(sig)} of {len(c.rows)}")

    def size(r):
        return abs(math.log(r.change)) if r.scale == "ratio" and r.change > 0 else abs(r.change)
    for r in sorted(sig, key=lambda r: -size(r)):
        name = "B/A" if r.scale == "ratio" else "B-A"
        lines.append(f"  {r.bench} {r.point} {r.metric}: {name} = {_fmt_change(r, r.change)} "
                     f"{_fmt_ci(r)} ({r.verdict}, basis {r.basis})")
    if c.only_a:
        lines.append(f"Only in A ({len(c.only_a)}): " + "; ".join(c.only_a))
    if c.only_b:
        lines.append(f"Only in B ({len(c.only_b)}): " + "; ".join(c.only_b))
    return "\n".join(lines) + "\n"
