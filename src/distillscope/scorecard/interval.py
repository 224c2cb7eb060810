"""The scorecard's estimate types: value ± SE on ν degrees of freedom and its one-sided bounds.

- ``Estimate``: t-bounds; ``not_tested`` one that could not be made (its part "not tested").
- ``Selected``: a contrast the data picked among a family (a best cell): Bonferroni bounds.
- ``RangeEstimate``: max − min over cells (intersection–union upper, Bonferroni lower bound).
- ``Bounded``: a quantity with a range (a share, rate or accuracy in [0, 100] %, a difference
  of two in [−100, +100] pp): its t-bounds on the logit scale of the range, so they never
  leave it and are asymmetric near an end, as a Wilson interval is (claim 13's clipped share
  was +92.1% [+81.0, +103.2]). With u = (v − low) / (high − low):
  z = logit(u), SE_z = SE / ((high − low) u (1 − u)) (the delta method), bounds = low +
  (high − low) · expit(z ∓ t₁₋α(ν) SE_z). An estimate exactly on an end has no logit: its bound
  on that side is the end and the other the t-bound, clipped into the range.
- ``wilson`` / ``newcombe``: score bounds of one share and of the difference of two
  (Newcombe's hybrid score interval, method 10), for shares of runs (``exact.share_gap``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache

import numpy as np
from scipy import stats

from distillscope.results.stats import t_quantile as student_t


@lru_cache(maxsize=1 << 16)
def t_quantile(p: float, dof: float) -> float:
    """The p-quantile of Student's t on ``dof`` degrees of freedom (∞: the normal's); memoised:
    the rules and the calibration's thousands of tables ask for the same few levels and ν."""
    if not math.isfinite(dof):
        return float(stats.norm.ppf(p))
    return student_t(p, dof)


@dataclass(frozen=True)
class Estimate:
    """One estimand in one stratum: value ± SE on ν degrees of freedom over ``seeds`` seeds.

    ``missing`` non-empty: the part is "not tested" in this stratum, and says what is missing.
    ``note`` names what the estimate left out (seeds missing on one side, duplicates).
    """

    label: str
    value: float = math.nan
    se: float = math.nan
    dof: float = math.nan
    seeds: int = 0
    note: str = ""
    missing: str = ""
    #: What the interval covers ("seeds and items", "seeds only …"; "" where it is not a
    #: seed-blocked interval), said after it in the evidence. Keyword-only: the subclasses'
    #: own fields follow ``missing`` positionally.
    covers: str = field(default="", kw_only=True)

    def bounds(self, alpha: float) -> tuple[float, float]:
        """One-sided (1 − alpha) lower and upper t-bounds; NaN without an SE (or SE = 0)."""
        if not self.decidable():
            return math.nan, math.nan
        half = t_quantile(1.0 - alpha, self.dof) * self.se
        return self.value - half, self.value + half

    def decidable(self) -> bool:
        """Whether the estimate has a positive, finite SE on ν > 0 (else it decides nothing)."""
        ok = math.isfinite(self.value) and math.isfinite(self.se) and self.se > 0
        return ok and not math.isnan(self.dof) and self.dof > 0

    def reach(self, alpha: float, power: float = 0.8, two_sided: bool = False) -> float:
        """The distance from a margin at which a true effect is decided with ``power``:
        (t₁₋α(ν) + t_power(ν)) · SE (for an equivalence band, t₁₋₍₁₋power₎/₂)."""
        if not self.decidable():
            return math.nan
        q = 1 - (1 - power) / 2 if two_sided else power
        return (t_quantile(1 - alpha, self.dof) + t_quantile(q, self.dof)) * self.se

    def selected(self, family: int, what: str) -> Estimate:
        """This contrast as the one the data picked among ``family`` (``what`` names the pick):
        a ``Selected`` estimate, its bounds Bonferroni over the family, said in the note."""
        if family <= 1:
            return replace(self, note="; ".join(filter(None, [what, self.note])))
        said = f"{what} (best of {family} contrasts: bounds Bonferroni over them)"
        base = {f.name: getattr(self, f.name) for f in fields(Estimate)}
        return Selected(
            **(base | {"note": "; ".join(filter(None, [said, self.note]))}), family=family
        )

    def at_seeds(self, seeds: int) -> Estimate | None:
        """The same design over ``seeds`` seeds: SE ∝ 1/√seeds and ν ∝ seeds − 1 (its degrees of
        freedom per added seed kept); None when the estimate does not scale so (exact tests)."""
        if self.seeds < 2 or seeds < 2:
            return None
        per_seed = self.dof / (self.seeds - 1)
        se = self.se * math.sqrt(self.seeds / seeds)
        return replace(self, se=se, dof=per_seed * (seeds - 1), seeds=seeds)


@dataclass(frozen=True)
class Selected(Estimate):
    """A contrast the data picked among ``family`` candidates (a best cell, docs/method.md §9
    "What an interval covers"): each one-sided bound at α / ``family`` (Bonferroni), so that it
    holds for the picked contrast whichever the data picked — a simultaneous bound over the
    family. For best-of-A − best-of-B it also bounds max_A μ − max_B μ: the picked pair's
    lower bound lies below it (max_A μ ≥ μ_â; ȳ_b* ≤ ȳ_b̂), and likewise the upper. The picked
    contrast's SE stands for the family's (equal in a balanced seed-only fit; with items each
    pair's item component differs a little)."""

    family: int = 1

    def bounds(self, alpha: float) -> tuple[float, float]:
        """The t-bounds at alpha / ``family``."""
        return Estimate.bounds(self, alpha / self.family)

    def reach(self, alpha: float, power: float = 0.8, two_sided: bool = False) -> float:
        """``Estimate.reach`` at alpha / ``family``."""
        return Estimate.reach(self, alpha / self.family, power, two_sided)


@dataclass(frozen=True)
class RangeEstimate(Estimate):
    """max − min of cell effects: ``diffs`` |μ̂_i − μ̂_j| and ``ses`` over every pair i < j."""

    diffs: tuple[float, ...] = ()
    ses: tuple[float, ...] = ()

    def bounds(self, alpha: float) -> tuple[float, float]:
        """Lower: max |dᵢⱼ| − t₁₋α/k·SEᵢⱼ (Bonferroni over the k pairs); upper: max |dᵢⱼ| +
        t₁₋α·SEᵢⱼ (every pair within the band: an intersection–union test)."""
        if not self.decidable() or not self.diffs:
            return math.nan, math.nan
        d, se = np.array(self.diffs), np.array(self.ses)
        lo = float((d - t_quantile(1 - alpha / len(d), self.dof) * se).max())
        hi = float((d + t_quantile(1 - alpha, self.dof) * se).max())
        return max(lo, 0.0), hi


def not_tested(label: str, what: str) -> Estimate:
    """An estimate that could not be made: its part is "not tested: ``what``"."""
    return Estimate(label, missing=what)


@dataclass(frozen=True)
class Bounded(Estimate):
    """An estimate of a quantity in [``low``, ``high``] with logit-scale bounds (module
    docstring)."""

    low: float = 0.0
    high: float = 100.0

    def bounds(self, alpha: float) -> tuple[float, float]:
        """The (1 − alpha) bounds on the logit scale of the range, back-transformed."""
        if not self.decidable():
            return math.nan, math.nan
        width = self.high - self.low
        u = (self.value - self.low) / width
        q = t_quantile(1.0 - alpha, self.dof)
        if not 0.0 < u < 1.0:  # on an end: that end, and the t-bound clipped into the range
            lo, hi = self.value - q * self.se, self.value + q * self.se
            return max(lo, self.low), min(hi, self.high)
        z, se_z = math.log(u / (1 - u)), self.se / (width * u * (1 - u))
        return self.low + width * expit(z - q * se_z), self.low + width * expit(z + q * se_z)


def expit(z: float) -> float:
    """1 / (1 + e^−z), without overflow."""
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def bounded(x: Estimate, low: float, high: float) -> Estimate:
    """``x`` as a ``Bounded`` estimate of a quantity in [low, high] (``x`` itself when it is
    "not tested" or already of a special kind)."""
    if x.missing or type(x) is not Estimate:
        return x
    return Bounded(**{f.name: getattr(x, f.name) for f in fields(Estimate)}, low=low, high=high)


def wilson(hits: int, n: int, alpha: float) -> tuple[float, float]:
    """Wilson's score bounds (one-sided 1 − alpha each) of a share hits / n, as fractions."""
    if n <= 0:
        return 0.0, 1.0
    z = float(stats.norm.ppf(1 - alpha))
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(centre - half, 0.0), min(centre + half, 1.0)


def newcombe(hit_a: int, n_a: int, hit_b: int, n_b: int, alpha: float) -> tuple[float, float]:
    """Newcombe's hybrid score bounds of share a − share b (fractions, inside [−1, 1])."""
    pa, pb = hit_a / n_a, hit_b / n_b
    la, ua = wilson(hit_a, n_a, alpha)
    lb, ub = wilson(hit_b, n_b, alpha)
    d = pa - pb
    return d - math.hypot(pa - la, ub - pb), d + math.hypot(ua - pa, pb - lb)
