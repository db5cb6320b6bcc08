"""`hmb compare A B`: per matched point, the ratio of medians B/A with a 95% CI and a test.

With raw samples (hmb sweeps pass --raw) the CI is a bootstrap of the ratio of medians
(two-level when a point has several repeats: resample repeats, then samples) and the test is
Mann–Whitney U on the pooled samples. Without samples, both come from the summaries' CIs
(normal approximation on the log ratio). A change is significant when its Holm-corrected
p < 0.05 AND the ratio moved by more than 5%.
"""
from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

import numpy as np
from scipy import stats

from .results import ResultSet, fmt_num, fmt_size

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
    ratio: float
    ci_lo: float
    ci_hi: float
    p: float
    method: str
    higher_is_better: bool | None
    p_holm: float = float("nan")
    significant: bool = False

    @property
    def verdict(self) -> str:
        if not self.significant:
            return ""
        if self.higher_is_better is None:
            return "changed"
        better = (self.ratio > 1) == self.higher_is_better
        return "better" if better else "worse"


def _groups(rs: ResultSet, with_mpi: bool) -> dict:
    g = defaultdict(list)
    for r in rs.results:
        if r.status != "ok":
            continue
        params = r.params
        params.setdefault("threads", r.run.get("threads"))
        key = (r.bench, tuple(sorted((k, str(v)) for k, v in params.items())), r.noise,
               r.mpi if with_mpi else "")
        g[key].append(r)
    return g


def _natural(key) -> tuple:
    """Sort numbers as numbers (8 < 64 < 1K), everything else as text."""
    bench, params, noise, mpi = key
    return (bench, mpi, noise, tuple((k, (0, int(v), "") if v.lstrip("-").isdigit() else (1, 0, v))
                                     for k, v in params))


def _describe(key) -> str:
    bench, params, noise, mpi = key
    parts = [f"{k}={fmt_size(v) if k == 'size_bytes' and v.isdigit() else v}" for k, v in params]
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


def _compare_point(ra: list, rb: list, metric: str, rng) -> tuple | None:
    ma = [r.metric(metric) for r in ra]
    mb = [r.metric(metric) for r in rb]
    if not all(ma) or not all(mb):
        return None
    med_a = float(np.median([m["median"] for m in ma]))
    med_b = float(np.median([m["median"] for m in mb]))
    ratio = med_b / med_a if med_a != 0 else float("nan")
    sa = [r.samples(metric) for r in ra]
    sb = [r.samples(metric) for r in rb]
    if all(s is not None and s.size for s in sa + sb):
        ba, bb = _boot_medians(sa, rng), _boot_medians(sb, rng)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = bb / ba
        ratios = ratios[np.isfinite(ratios)]
        lo, hi = (np.percentile(ratios, [2.5, 97.5]) if ratios.size else (math.nan, math.nan))
        pa, pb = np.concatenate(sa), np.concatenate(sb)
        p = float(stats.mannwhitneyu(pa, pb, alternative="two-sided").pvalue) \
            if np.ptp(np.concatenate([pa, pb])) > 0 else 1.0
        return med_a, med_b, ratio, float(lo), float(hi), p, "bootstrap+MWU"
    # From the summaries: standard error of log(median) from each repeat set's CI.
    def log_se(ms):
        lo = np.median([float(m.get("ci_lo", math.nan)) for m in ms])
        hi = np.median([float(m.get("ci_hi", math.nan)) for m in ms])
        if not (lo > 0 and hi > 0):
            return math.nan
        return (math.log(hi) - math.log(lo)) / (2 * 1.96) / math.sqrt(len(ms))
    se = math.hypot(log_se(ma), log_se(mb))
    if not (ratio > 0 and se > 0 and math.isfinite(se)):
        return med_a, med_b, ratio, math.nan, math.nan, math.nan, "summary (no CI)"
    z = math.log(ratio) / se
    return (med_a, med_b, ratio, ratio * math.exp(-1.96 * se), ratio * math.exp(1.96 * se),
            float(2 * stats.norm.sf(abs(z))), "summary CIs")


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


def compare(a: ResultSet, b: ResultSet, metrics: list[str] | None = None, seed: int = 0,
            label_a: str = "A", label_b: str = "B") -> Comparison:
    mpis_a = {r.mpi for r in a.results}
    mpis_b = {r.mpi for r in b.results}
    # One library per side (e.g. MPICH vs Open MPI): match across libraries.
    with_mpi = not (len(mpis_a) == 1 and len(mpis_b) == 1)
    ga, gb = _groups(a, with_mpi), _groups(b, with_mpi)
    rng = np.random.default_rng(seed)
    rows = []
    for key in sorted(set(ga) & set(gb), key=_natural):
        ra, rb = ga[key], gb[key]
        names = list((ra[0].record.get("metrics") or {}))
        for metric in names:
            if metrics and metric not in metrics:
                continue
            got = _compare_point(ra, rb, metric, rng)
            if got is None:
                continue
            info = (ra[0].record.get("metrics") or {}).get(metric, {})
            hib = info.get("higher_is_better")
            rows.append(Row(key[0], _describe(key), metric, info.get("unit", ""), *got,
                            higher_is_better=None if hib is None else bool(hib)))
    for row, p in zip(rows, holm([r.p for r in rows])):
        row.p_holm = p
        row.significant = (not math.isnan(p)) and p < ALPHA and abs(row.ratio - 1) > MIN_EFFECT
    only_a = [_describe(k) for k in sorted(set(ga) - set(gb), key=_natural)]
    only_b = [_describe(k) for k in sorted(set(gb) - set(ga), key=_natural)]
    return Comparison(rows, only_a, only_b, label_a, label_b)


def _fmt_p(p: float) -> str:
    return "n/a" if math.isnan(p) else (f"{p:.1e}" if p < 1e-3 else f"{p:.3f}")


def render(c: Comparison) -> str:
    """A table of every matched point and a summary of what changed significantly."""
    head = ["bench", "point", "metric", f"A median", f"B median", "B/A", "95% CI", "p (Holm)", ""]
    body = [[r.bench, r.point, r.metric, fmt_num(r.median_a), fmt_num(r.median_b),
             f"{r.ratio:.3f}", f"[{r.ci_lo:.3f}, {r.ci_hi:.3f}]" if not math.isnan(r.ci_lo) else "n/a",
             _fmt_p(r.p_holm), ("* " + r.verdict) if r.significant else ""] for r in c.rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)] if body else [len(h) for h in head]
    lines = [f"# A = {c.label_a}", f"# B = {c.label_b}",
             f"# B/A: ratio of medians; CI: bootstrap on raw samples or from summary CIs; "
             f"p: Mann-Whitney U (or z from CIs), Holm-corrected over {len(c.rows)} tests",
             "  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    lines += ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip() for row in body]
    sig = [r for r in c.rows if r.significant]
    lines.append("")
    lines.append(f"Significant changes (Holm p < {ALPHA} and |B/A - 1| > {MIN_EFFECT:.0%}): "
                 f"{len(sig)} of {len(c.rows)}")
    for r in sorted(sig, key=lambda r: -abs(math.log(r.ratio)) if r.ratio > 0 else 0):
        lines.append(f"  {r.bench} {r.point} {r.metric}: B/A = {r.ratio:.3f} "
                     f"[{r.ci_lo:.3f}, {r.ci_hi:.3f}] ({r.verdict})")
    if c.only_a:
        lines.append(f"Only in A ({len(c.only_a)}): " + "; ".join(c.only_a))
    if c.only_b:
        lines.append(f"Only in B ({len(c.only_b)}): " + "; ".join(c.only_b))
    return "\n".join(lines) + "\n"
