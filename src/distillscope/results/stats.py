"""Statistics of the scorecard: matched pairs of cell means, t-bounds, equivalence (TOST).

A ``Pair`` holds two cell means (display units), their SEMs and degrees of freedom. A contrast
is *beyond* a margin m when its one-sided (1 − α) t-bound lies beyond m (``beyond``), *within*
±m when both one-sided bounds lie inside (``within``, two one-sided tests). A side without a
SEM (one seed) or a contrast without any seed variance never decides. Student's t quantiles,
Spearman's rank correlation and the least-squares trend come from ``scipy.stats``; Fisher's
exact test is exact rational arithmetic (``fisher_greater``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import special, stats

#: Level of each one-sided test (a one-sided 97.5% bound = one end of a two-sided 95% CI): the
#: false rate each verdict of a rule is built to keep, with room under the 5% target.
ALPHA = 0.025


@dataclass(frozen=True)
class Pair:
    """Cell means of one metric on the two sides of a matched comparison (display units)."""

    key: str  # the matched cell, e.g. "forward KL, 5e-05 (high)"
    a: float
    a_sem: float
    b: float
    b_sem: float
    a_dof: float = math.nan  # degrees of freedom of a_sem (seeds − 1); NaN when unknown
    b_dof: float = math.nan

    @property
    def diff(self) -> float:
        """a − b."""
        return self.a - self.b

    @property
    def sem(self) -> float:
        """Combined SEM √(SEM_a² + SEM_b²); NaN when either side has no SEM (one seed)."""
        return math.sqrt(self.a_sem**2 + self.b_sem**2)

    @property
    def dof(self) -> float:
        """Welch–Satterthwaite degrees of freedom of ``sem`` (NaN when unknown)."""
        return welch_dof([self.a_sem**2, self.b_sem**2], [self.a_dof, self.b_dof])


def welch_dof(variances: Sequence[float], dofs: Sequence[float]) -> float:
    """ν = (Σ vᵢ)² / Σ (vᵢ² / νᵢ) (Welch–Satterthwaite); parts with vᵢ = 0 carry no weight."""
    parts = [(v, d) for v, d in zip(variances, dofs, strict=True) if not v == 0.0]
    if not parts:
        return math.inf  # no variance at all: the interval has zero width
    if any(math.isnan(v) or math.isnan(d) or d <= 0 for v, d in parts):
        return math.nan
    spread = sum(v * v / d for v, d in parts)
    if spread == 0.0:
        return math.inf  # every variance known exactly (ν = ∞): the normal's quantiles
    return sum(v for v, _ in parts) ** 2 / spread


def t_quantile(p: float, dof: float) -> float:
    """The p-quantile of Student's t with ``dof`` degrees of freedom (∞: the normal's).

    ``scipy.stats.t.ppf``; ``dof`` may be fractional (Welch–Satterthwaite). Inside its domain
    (0 < p < 1, ν > 0) it is ``scipy.special.stdtrit`` directly, the function ``t.ppf`` calls
    (the same value, ~60× faster: the calibration asks for ~10⁴ quantiles at Welch ν that
    rarely repeat).
    """
    if 0.0 < p < 1.0 and dof > 0:
        return float(special.stdtrit(dof, p))
    return float(stats.t.ppf(p, dof))


def bounds(pair: Pair, alpha: float) -> tuple[float, float]:
    """One-sided (1 − alpha) lower and upper confidence bounds of a − b (NaN when unknown)."""
    sem, dof = pair.sem, pair.dof
    if math.isnan(pair.diff) or math.isnan(sem) or math.isnan(dof) or sem == 0.0:
        return math.nan, math.nan  # no seed variance at all (degenerate table): no evidence
    half = t_quantile(1.0 - alpha, dof) * sem
    return pair.diff - half, pair.diff + half


def beyond(pair: Pair, margin: float, alpha: float = ALPHA) -> int:
    """+1 when a − b > margin beyond uncertainty (lower bound > margin), −1 when a − b < −margin
    (upper bound < −margin), 0 otherwise or when the SEM is undefined (a one-seed cell)."""
    lo, hi = bounds(pair, alpha)
    if lo > margin:
        return 1
    if hi < -margin:
        return -1
    return 0


def within(pair: Pair, margin: float, alpha: float = ALPHA) -> bool:
    """Equivalence by two one-sided tests (TOST): both (1 − alpha) bounds inside (−m, m)."""
    lo, hi = bounds(pair, alpha)
    return -margin < lo and hi < margin


def interval(pair: Pair, alpha: float = ALPHA) -> str:
    """``[+1.2, +4.5]``: the two one-sided (1 − alpha) bounds of a − b, for the evidence."""
    lo, hi = bounds(pair, alpha)
    if not math.isnan(lo):
        return f"[{pp(lo)}, {pp(hi)}]"
    if pair.sem == 0.0:
        return "[no seed variance: every seed gave the same value]"
    return "[no SEM: one seed]"


def pooled_variance(pairs: Sequence[Pair]) -> tuple[float, float] | None:
    """Seed variance s² pooled over every side of ``pairs`` and its degrees of freedom.

    s² = Σ νᵢ sᵢ² / Σ νᵢ with sᵢ² = SEMᵢ² nᵢ and nᵢ = νᵢ + 1: exact for a balanced design with
    equal seed noise, on Σ νᵢ degrees of freedom. None when some side's seed count is unknown
    (a one-seed side or a side given without its degrees of freedom).
    """
    sides = [(p.a_sem, p.a_dof) for p in pairs] + [(p.b_sem, p.b_dof) for p in pairs]
    if not sides or not all(1 <= d < math.inf and not math.isnan(s) for s, d in sides):
        return None
    dof = sum(d for _, d in sides)
    return sum(d * s * s * (d + 1) for s, d in sides) / dof, dof


def with_variance(pair: Pair, var: float, dof: float, n_a: float, n_b: float) -> Pair:
    """``pair`` with SEMs from one shared variance estimate (var, on dof degrees of freedom) of
    sides with n_a and n_b seeds: SEM = √(var / n); the estimate's ν is split between the sides
    so that the Welch–Satterthwaite ν of the difference is ``dof`` when n_a = n_b."""
    half = dof / 2
    return Pair(pair.key, pair.a, math.sqrt(var / n_a), pair.b, math.sqrt(var / n_b), half, half)


def pooled_pair(pairs: Sequence[Pair], key: str) -> Pair:
    """Matched pairs averaged into one contrast: a = mean of a, b = mean of b.

    The seed variance is pooled over all cells of the contrast (``pooled_variance``; SEM_a =
    s √(Σ 1/n_aᵢ) / k); when some cell's seed count is unknown, SEM_a = √(Σ SEM_aᵢ²) / k with
    Welch–Satterthwaite degrees of freedom.

    Pairs without a SEM (a one-seed side) are left out when any pair has one; with none the
    contrast's SEM is undefined, so it is never beyond uncertainty.
    """
    measured = [p for p in pairs if not math.isnan(p.sem)]
    pairs = measured or pairs  # one-seed cells carry no uncertainty: left out when others have
    k = len(pairs)
    if k == 0:
        return Pair(key, math.nan, math.nan, math.nan, math.nan)
    a, a_sem = pooled([p.a for p in pairs], [p.a_sem for p in pairs])
    b, b_sem = pooled([p.b for p in pairs], [p.b_sem for p in pairs])
    shared = pooled_variance(pairs)
    if shared is not None:
        var, dof = shared
        # mean of k cells: Var = s² Σ (1/nᵢ) / k², i.e. one cell with n = k² / Σ (1/nᵢ) seeds
        n_a = k * k / sum(1 / (p.a_dof + 1) for p in pairs)
        n_b = k * k / sum(1 / (p.b_dof + 1) for p in pairs)
        return with_variance(Pair(key, a, a_sem, b, b_sem), var, dof, n_a, n_b)
    a_dof = welch_dof([p.a_sem**2 for p in pairs], [p.a_dof for p in pairs])
    b_dof = welch_dof([p.b_sem**2 for p in pairs], [p.b_dof for p in pairs])
    return Pair(key, a, a_sem, b, b_sem, a_dof, b_dof)


def sample_pair(a: Sequence[float], b: Sequence[float], key: str) -> Pair:
    """Two groups of cell means compared as samples (cells as replicates; Welch's t).

    For sub-grids with one seed per cell: the spread of the cells within a group is the noise
    (it also holds any real variation inside a group, so the test is conservative).
    """
    xa = np.array([v for v in a if not math.isnan(v)], dtype=float)
    xb = np.array([v for v in b if not math.isnan(v)], dtype=float)

    def side(x: np.ndarray) -> tuple[float, float, float]:
        if len(x) == 0:
            return math.nan, math.nan, math.nan
        if len(x) < 2:
            return float(x.mean()), math.nan, math.nan
        return float(x.mean()), float(x.std(ddof=1) / math.sqrt(len(x))), float(len(x) - 1)

    (ma, sa, da), (mb, sb, db) = side(xa), side(xb)
    return Pair(key, ma, sa, mb, sb, da, db)


def pooled(means: Sequence[float], sems: Sequence[float]) -> tuple[float, float]:
    """Mean of cell means and its SEM √(Σ SEM²) / k (NaN when some cell has no SEM)."""
    ms = [m for m in means if not math.isnan(m)]
    if not ms:
        return math.nan, math.nan
    ss = list(sems)
    if any(math.isnan(s) for s in ss) or len(ss) != len(ms):
        return float(np.mean(ms)), math.nan
    return float(np.mean(ms)), math.sqrt(sum(s * s for s in ss)) / len(ss)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation ρ (average ranks for ties, ``scipy.stats.spearmanr``) of
    the points where both are finite; NaN with < 3 such points or when either has no spread."""
    xs, ys = pd.Series(list(x), dtype=float), pd.Series(list(y), dtype=float)
    ok = xs.notna() & ys.notna()
    if ok.sum() < 3 or xs[ok].nunique() < 2 or ys[ok].nunique() < 2:
        return math.nan
    return float(stats.spearmanr(xs[ok], ys[ok]).statistic)


def trend(x: np.ndarray, y: np.ndarray, key: str) -> Pair:
    """The fitted change of y over the range of x as a pair: a = slope · (max x − min x), b = 0.

    Least squares (``scipy.stats.linregress``) over the points where both are finite; the
    change's SEM is the slope's standard error · range, on n − 2 degrees of freedom. NaN with
    < 3 points or no spread in x.
    """
    ok = ~(np.isnan(x) | np.isnan(y))
    x, y = x[ok], y[ok]
    if len(x) < 3 or np.ptp(x) == 0:
        return Pair(key, math.nan, math.nan, 0.0, 0.0)
    if np.ptp(y) == 0:  # flat: slope 0 with no residual (linregress's r would be 0/0, NaN)
        return Pair(key, 0.0, 0.0, 0.0, 0.0, float(len(x) - 2), math.inf)
    fit = stats.linregress(x, y)
    span = float(np.ptp(x))
    return Pair(key, fit.slope * span, fit.stderr * span, 0.0, 0.0, float(len(x) - 2), math.inf)


def fisher_greater(hit_a: int, n_a: int, hit_b: int, n_b: int) -> float:
    """One-sided Fisher exact p-value that group a's hit rate exceeds group b's.

    p = Σ_{k ≥ hit_a} C(n_a, k) C(n_b, h − k) / C(n_a + n_b, h) with h = hit_a + hit_b (the
    hypergeometric tail), in exact integer arithmetic: a p-value that equals the level exactly
    (3/120 = 0.025) is not moved across it by rounding.
    """
    hits, n = hit_a + hit_b, n_a + n_b
    tail = range(hit_a, min(n_a, hits) + 1)
    return sum(math.comb(n_a, k) * math.comb(n_b, hits - k) for k in tail) / math.comb(n, hits)


def linear(key: str, terms: Sequence[tuple[float, Pair]]) -> Pair:
    """Σ cᵢ·dᵢ of independent contrasts dᵢ (orthogonal contrasts of a balanced grid) as a
    one-sample pair: SEM √(Σ cᵢ² SEMᵢ²), Welch–Satterthwaite degrees of freedom."""
    value = sum(c * p.diff for c, p in terms)
    variances = [c * c * p.sem**2 for c, p in terms]
    dof = welch_dof(variances, [p.dof for _, p in terms])
    return Pair(key, value, math.sqrt(sum(variances)), 0.0, 0.0, dof, math.inf)


def versus(key: str, value: float, pair: Pair) -> Pair:
    """``pair``'s side a against a fixed ``value`` (one sample)."""
    return Pair(key, pair.a, pair.a_sem, value, 0.0, pair.a_dof, math.inf)


def detectable_margin(pair: Pair, power: float = 0.8) -> float:
    """The smallest equivalence margin TOST passes with ``power`` at a true difference of 0:
    (t₁₋α(ν) + t₁₋₍₁₋power₎/₂(ν)) · SEM (NaN without a SEM)."""
    sem, dof = pair.sem, pair.dof
    if math.isnan(sem) or math.isnan(dof) or sem == 0.0:
        return math.nan
    return (t_quantile(1 - ALPHA, dof) + t_quantile(1 - (1 - power) / 2, dof)) * sem


@dataclass(frozen=True)
class Range:
    """max − min of cell means (display units) and its confidence bounds (``cell_range``)."""

    value: float
    upper: float  # (1 − α) upper bound on the true range (IUT); NaN without seed variance
    lower: float  # lower bound, Bonferroni over the pairs; NaN without seed variance
    detectable: float  # the margin an equal-means design passes at 80% power (≈)
    best: float = math.nan  # a label of the highest cell, set by the caller (e.g. its λ)

    def text(self) -> str:
        """``4.1 pp [≥ 0.0, ≤ 7.2]``."""
        if math.isnan(self.upper):
            return f"{num(self.value)} pp [no seed variance: no bound]"
        return f"{num(self.value)} pp [≥ {num(max(self.lower, 0.0))}, ≤ {num(self.upper)}]"


def seed_variance(cells: pd.DataFrame) -> tuple[float, float]:
    """(s², ν): the within-cell seed variance pooled over ``cells`` (mean, sem, runs per cell;
    cells with ≥ 2 seeds and a SEM), s² = Σ (nᵢ − 1) SEMᵢ² nᵢ / ν with ν = Σ (nᵢ − 1);
    (0, 0) when no cell has two seeds."""
    n = cells["runs"].to_numpy(dtype=float)
    sem = cells["sem"].to_numpy(dtype=float)
    ok = (n >= 2) & ~np.isnan(sem)
    dof = float((n[ok] - 1).sum())
    if dof == 0:
        return 0.0, 0.0
    return float(((n[ok] - 1) * sem[ok] ** 2 * n[ok]).sum() / dof), dof


def cell_range(cells: pd.DataFrame, alpha_upper: float, alpha_lower: float) -> Range:
    """The range max − min of cell means (``cells``: mean, sem, runs per cell) with bounds from
    the seed variance pooled over the cells (cells with ≥ 2 seeds).

    Upper bound (at ``alpha_upper``): the largest |dᵢⱼ| + t·SEᵢⱼ over pairs — "range < m" is
    every pair within ±m, an intersection–union test with no multiplicity correction. Lower
    bound (at ``alpha_lower`` split over the pairs, Bonferroni): the largest |dᵢⱼ| − t·SEᵢⱼ.
    ``detectable``: the margin that equal true means pass at 80% power (studentized range).
    """
    means = cells["mean"].to_numpy(dtype=float)
    n = cells["runs"].to_numpy(dtype=float)
    value = float(means.max() - means.min())
    var, dof = seed_variance(cells)
    if var == 0.0 or len(means) < 2:  # one seed per cell, or seeds that all agree: no bound
        return Range(value, math.nan, math.nan, math.nan)
    i, j = np.triu_indices(len(means), 1)
    d = np.abs(means[i] - means[j])
    se = np.sqrt(var * (1 / n[i] + 1 / n[j]))
    upper = float((d + t_quantile(1 - alpha_upper, dof) * se).max())
    lower = float((d - t_quantile(1 - alpha_lower / len(d), dof) * se).max())
    size = len(means) / float((1 / n).sum())  # harmonic mean of the seeds per cell
    flat = math.sqrt(var / size) * (
        _range_q80(len(means), dof) + t_quantile(1 - alpha_upper, dof) * math.sqrt(2)
    )
    return Range(value, upper, lower, flat)


@lru_cache(maxsize=64)
def _range_q80(k: int, dof: float) -> float:
    """80th percentile of the studentized range of k means on ``dof`` degrees of freedom."""
    return float(stats.studentized_range.ppf(0.8, k, dof))


def pp(value: float, digits: int = 1) -> str:
    """``+3.2`` with sign; ``n/a`` for NaN."""
    return "n/a" if math.isnan(value) else f"{value:+.{digits}f}"


def num(value: float, digits: int = 1) -> str:
    """``72.3``; ``n/a`` for NaN."""
    return "n/a" if math.isnan(value) else f"{value:.{digits}f}"
