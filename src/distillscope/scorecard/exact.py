"""Estimates that are not t-intervals: exact counts, Fisher's exact test, a variance ratio, an
observation.

The runner (``scorecard.verdicts``) decides a part on its estimate's one-sided bounds
(``Estimate.bounds``); these estimates give bounds with the same meaning from other tests:

- ``count``: a number of runs, known exactly (bounds = the count itself).
- ``share_gap``: the share of runs with an event in group a − in group b. Its bounds come from
  Fisher's exact test (one-sided, ``stats.fisher_greater``): the lower bound is the observed
  gap when "a more often" is significant at α, else −1; the upper bound the gap when "a less
  often" is, else +1 — so "beyond the margin 0" means exactly "Fisher significant at α".
  Its SE (for the power sentence) is the normal approximation √(p_a q_a / n_a + p_b q_b / n_b).
- ``variance_ratio``: s²_a / s²_b on (ν_a, ν_b) degrees of freedom, bounds from the F
  distribution: lower = F / F₁₋α(ν_a, ν_b), upper = F / F_α(ν_a, ν_b).
- ``observation``: numbers shown, never decided (one run per condition).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats

from distillscope.results.stats import ALPHA, fisher_greater
from distillscope.scorecard.estimate import Estimate
from distillscope.scorecard.interval import newcombe


@dataclass(frozen=True)
class Exact(Estimate):
    """An estimate whose one-sided bounds at each level come from an exact test: ``lower`` and
    ``upper`` map a level α to the bound (see the module docstring)."""

    p_above: float = math.nan  # one-sided p of "the estimand > 0"
    p_below: float = math.nan  # one-sided p of "the estimand < 0"
    floor: float = -math.inf  # the bound shown when the test is not significant
    ceiling: float = math.inf
    #: The smallest distance from 0 the test decides at α with this design (NaN: use the SE).
    decides: float = math.nan

    def bounds(self, alpha: float) -> tuple[float, float]:
        """The value on a side whose exact test is significant at ``alpha``, else the range's
        end (``floor`` / ``ceiling``)."""
        lo = self.value if self.p_above <= alpha else self.floor
        hi = self.value if self.p_below <= alpha else self.ceiling
        return lo, hi

    def decidable(self) -> bool:
        return math.isfinite(self.value)

    def at_seeds(self, seeds: int) -> None:
        """An exact test's counts do not scale as 1/√seeds: no seed count is offered."""
        return None

    def reach(self, alpha: float, power: float = 0.8, two_sided: bool = False) -> float:
        """``decides`` when the test gives it (an exact test's SE is no guide: "0 of n vs 0 of
        n" has SE 0 and decides nothing), else the normal approximation's."""
        if not math.isnan(self.decides):
            return self.decides
        return super().reach(alpha, power, two_sided)


def count(label: str, n: int, note: str = "") -> Estimate:
    """A number of runs, known exactly: decided by the count itself."""
    return Exact(label, float(n), 0.0, math.inf, 0, note, "", 0.0, 0.0, float(n), float(n))


def share_gap(label: str, hit_a: int, n_a: int, hit_b: int, n_b: int, note: str = "") -> Estimate:
    """Share of group a with the event − share of group b, in pp, with Fisher's exact bounds.
    ``decides``: the smallest gap "a more often" reaches significance at ``ALPHA`` with b's
    count fixed, 100 · (k / n_a − hit_b / n_b) for the least such k (∞ when none does)."""
    pa, pb = hit_a / n_a, hit_b / n_b
    ks = [k for k in range(hit_b, n_a + 1) if fisher_greater(k, n_a, hit_b, n_b) <= ALPHA]
    decides = 100.0 * (ks[0] / n_a - pb) if ks else math.inf
    se = 100.0 * math.sqrt(pa * (1 - pa) / n_a + pb * (1 - pb) / n_b)
    lo, hi = newcombe(hit_a, n_a, hit_b, n_b, ALPHA)  # the side Fisher leaves open: a score
    return Exact(
        label,
        100.0 * (pa - pb),
        se,
        math.inf,
        min(n_a, n_b),
        note,
        "",
        fisher_greater(hit_a, n_a, hit_b, n_b),
        fisher_greater(hit_b, n_b, hit_a, n_a),
        min(100.0 * lo, 0.0),  # not beyond 0 where Fisher's test is not significant
        max(100.0 * hi, 0.0),
        decides,
    )


@dataclass(frozen=True)
class Ratio(Estimate):
    """s²_a / s²_b with its F-distribution bounds (``value`` the ratio; ``dof`` ν_a, ``dof_b``
    ν_b); ``se`` is the SE of log F, √(2/ν_a + 2/ν_b), for the power sentence."""

    dof_b: float = math.nan

    def at_seeds(self, seeds: int) -> None:
        """A variance ratio's power follows its degrees of freedom, not 1/√seeds."""
        return None

    def bounds(self, alpha: float) -> tuple[float, float]:
        if not self.decidable():
            return math.nan, math.nan
        hi_q = float(stats.f.ppf(1 - alpha, self.dof, self.dof_b))
        lo_q = float(stats.f.ppf(alpha, self.dof, self.dof_b))
        return self.value / hi_q, self.value / lo_q

    def decidable(self) -> bool:
        ok = math.isfinite(self.value) and self.value > 0
        return ok and self.dof > 0 and self.dof_b > 0

    def reach(self, alpha: float, power: float = 0.8, two_sided: bool = False) -> float:
        """How far above 1 a true ratio must lie to be decided with ``power`` (normal
        approximation on log F)."""
        if not self.decidable():
            return math.nan
        z = float(stats.norm.ppf(1 - alpha) + stats.norm.ppf(power))
        return math.exp(z * self.se) - 1.0


def variance_ratio(label: str, var_a: float, dof_a: float, var_b: float, dof_b: float) -> Ratio:
    """s²_a / s²_b on (ν_a, ν_b) degrees of freedom."""
    value = var_a / var_b if var_b > 0 else math.nan
    se = math.sqrt(2.0 / dof_a + 2.0 / dof_b) if dof_a > 0 and dof_b > 0 else math.nan
    return Ratio(label, value, se, dof_a, 0, "", "", dof_b)


@dataclass(frozen=True)
class Observation(Estimate):
    """Numbers shown (``note``), never decided: the claim stays inconclusive."""

    def decidable(self) -> bool:
        return False


def observation(label: str, value: float, note: str) -> Observation:
    """An observation of ``value`` described by ``note``."""
    return Observation(label, value, math.nan, math.nan, 1, note)
