"""A design's power for each claim part, from closed forms on the study's noise components.

    from distillscope.scorecard.power import part_profiles, plan_part
    profiles = part_profiles(record_df)              # (claim, part) → kind, metric, strata
    plan_part(part, profile, components, seeds=5, samples=10)   # → PartPlan: SE, power, …

Per run, y_cs = μ_c + β_s + τ_cs + e_cs (``scorecard.noise``: seed_sd, train_sd, and eval_var at
I items × n samples). Over ``seeds`` = S seed blocks (display units: × 100 for fractions):

- **contrast** (matched cells of one seed, paired: β_s cancels):
  SE² = 2 (train_sd² + eval_var) / S   — the paired contrast of two cells;
- **level** (the seed kept: a mean of cells, or a gain over the untrained student of the same
  seed): SE² = (2 (train_sd² + eval_var) + seed_sd²) / S.

A pooled contrast over m matched pairs has a smaller SE (÷ √m): the formula is conservative
there. A part's kind is read from the estimator itself (``part_profiles``): its estimate on a
table is recomputed after shifting every run of each seed by the same amount (the baseline
rows untouched); a contrast does not move, a level does. Its metric is the one named when every
candidate metric is blanked (the estimator's "not tested: lacks …"), else the one whose
blanking alone makes it untestable.

With ν the estimator's degrees of freedom at S seeds (``Profile.dof``: S − 1 for a level or a
paired contrast, (C − 1)(S − 1) for a contrast of a cell + seed fit over C cells, read off the
profiled estimate) and the one-sided level α, the distance from the margin the design decides at
power π is (t₁₋α(ν) + t_π(ν)) · SE (``Estimate.reach``, the rule ``scorecard.verdicts`` uses), so
the power at a true effect at distance d is F_ν(d / SE − t₁₋α(ν)) — for an equivalence band
around a published 0, 2 F_ν(d / SE − t₁₋α(ν)) − 1 — and, over the k strata a part must hold
in (``every`` / ``only``), its k-th power (strata taken independent).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from distillscope.results.aggregate import (
    SEED,
    is_baseline,
    metric_columns,
    percent_scale,
)
from distillscope.results.stats import ALPHA
from distillscope.scorecard.claim_spec import ABOVE, ANY, WITHIN, Claim, Part
from distillscope.scorecard.claims import CLAIMS
from distillscope.scorecard.estimate import Estimate, RangeEstimate
from distillscope.scorecard.evidence import Evidence
from distillscope.scorecard.interval import Bounded, Selected
from distillscope.scorecard.noise import Components
from distillscope.scorecard.verdicts import POWER

CONTRAST, LEVEL = "contrast", "level"
MAX_SEEDS = 100  # the most seeds a "would decide" search tries


@dataclass(frozen=True)
class Profile:
    """What a part's estimator is: ``kind`` (CONTRAST / LEVEL), the ``metric`` it reads, the
    number of strata it must hold in (1 for pooled and ``any``), and its degrees of freedom per
    seed block beyond the first (ν / (S − 1): 1 for a level or a paired contrast of two cells,
    C − 1 for a contrast drawn from a cell + seed fit over C cells)."""

    kind: str
    metric: str
    strata: int = 1
    dof_per_seed: float = 1.0

    def dof(self, seeds: int) -> float:
        """ν at ``seeds`` seed blocks."""
        return self.dof_per_seed * (seeds - 1)


@dataclass(frozen=True)
class PartPlan:
    """A part under a design: SE (display units), power at the published effect, and the
    smallest effect it decides at 80% power, in words."""

    se: float
    power: float
    smallest: str


def contrast_se(c: Components, seeds: int, items: int | None, samples: int | None) -> float:
    """√(2 (train_sd² + eval_var) / S), stored units (the module docstring)."""
    return math.sqrt(2 * (c.train_sd**2 + c.eval_var(items, samples)) / seeds)


def level_se(c: Components, seeds: int, items: int | None, samples: int | None) -> float:
    """√((2 (train_sd² + eval_var) + seed_sd²) / S), stored units."""
    return math.sqrt((2 * (c.train_sd**2 + c.eval_var(items, samples)) + c.seed_sd**2) / seeds)


def distance(part: Part) -> float:
    """How far the published value lies on the claimed side of the margin (display units)."""
    if part.side == WITHIN:
        return part.margin - abs(part.published)
    sign = 1.0 if part.side == ABOVE else -1.0
    return sign * (part.published - part.margin)


def power_at(part: Part, se: float, dof: float, alpha: float = ALPHA, strata: int = 1) -> float:
    """The power at the published value (the module docstring's formula) on ν = ``dof``; NaN
    without an SE or degrees of freedom."""
    if not (se > 0 and dof > 0):
        return math.nan
    shift = distance(part) / se - stats.t.ppf(1 - alpha, dof)
    if part.side == WITHIN and part.published == 0:
        one = max(2 * stats.t.cdf(shift, dof) - 1, 0.0)
    else:
        one = float(stats.t.cdf(shift, dof))
    return one**strata


def plan_part(
    part: Part,
    profile: Profile,
    c: Components,
    seeds: int,
    items: int | None = None,
    samples: int | None = None,
    alpha: float = ALPHA,
) -> PartPlan:
    """``part`` under ``seeds`` × ``items`` × ``samples`` with components ``c``."""
    form = level_se if profile.kind == LEVEL else contrast_se
    se = form(c, seeds, items, samples) * percent_scale(profile.metric)
    strata = 1 if part.quantifier == ANY else profile.strata
    p = power_at(part, se, profile.dof(seeds), alpha, strata)
    est = Estimate(part.name, part.published, se, profile.dof(seeds), seeds)
    reach = est.reach(alpha, POWER, part.side == WITHIN and part.published == 0)
    if math.isnan(reach):
        return PartPlan(se, p, "n/a")
    u = f" {part.unit}".rstrip()
    if part.side == WITHIN:
        return PartPlan(se, p, f"a band of ±{abs(part.published) + reach:.1f}{u}")
    sign = 1 if part.side == ABOVE else -1
    return PartPlan(se, p, f"{part.name} beyond {part.margin + sign * reach:+.1f}{u}")


def seeds_to_decide(
    part: Part, profile: Profile, c: Components, samples: int | None, alpha: float = ALPHA
) -> int | None:
    """The fewest seeds (≥ 2) at ``samples`` per item whose power at the published value
    reaches 80% in every stratum; None within ``MAX_SEEDS`` or when the published value does
    not lie on the claimed side."""
    if distance(part) <= 0:
        return None
    for s in range(2, MAX_SEEDS + 1):
        if plan_part(part, profile, c, s, None, samples, alpha).power >= POWER:
            return s
    return None


def part_profiles(
    df: pd.DataFrame, claims: Collection[int] | None = None
) -> dict[tuple[int, str], Profile]:
    """(claim id, part name) → ``Profile`` for each part of ``claims`` (default: all; premises
    included) that the table ``df`` estimates as a mean over seeds (module docstring)."""
    candidates = [m for m in metric_columns(df) if m.split("/")[0] in ("eval", "train", "rlvr")]
    ev, ev_shift = Evidence(df), Evidence(_seed_shifted(df, candidates))
    out = {}
    for claim in (c for c in CLAIMS if claims is None or c.id in claims):
        for part in (*claim.premises, *claim.parts):
            xs, moved = _estimate(part, claim, ev), _estimate(part, claim, ev_shift)
            ok = [(x, y) for x, y in zip(xs, moved, strict=False) if _seed_mean(x)]
            metric = _metric(claim, part, df, candidates) if ok else None
            if metric is None:
                continue
            level = any(abs(x.value - y.value) > 1e-6 * (1 + abs(x.value)) for x, y in ok)
            per_seed = float(np.mean([x.dof / max(x.seeds - 1, 1) for x, _ in ok]))
            kind = LEVEL if level else CONTRAST
            out[(claim.id, part.name)] = Profile(kind, metric, len(xs), per_seed)
    return out


def _estimate(part: Part, claim: Claim, ev: Evidence) -> list[Estimate]:
    """The part's estimates on ``ev`` (none when the table makes its estimator raise)."""
    try:
        return part.estimate(ev.for_claim(claim.experiments))
    except Exception:  # a table the claim cannot read: the part gets no profile
        return []


def _seed_mean(x: Estimate) -> bool:
    """An estimate of means over seeds (an SE on ν > 0), not a count or a rank: a plain
    contrast or level, a range, a level on a bounded scale, a best cell picked from a family."""
    return type(x) in (Estimate, RangeEstimate, Bounded, Selected) and x.decidable()


def _seed_shifted(df: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """``df`` with every run of seed s (baseline rows untouched) shifted by s-dependent
    amounts, the same for every cell: what a shared seed effect does."""
    out = df.copy()
    if SEED not in df:
        return out
    seed = pd.to_numeric(df[SEED], errors="coerce").fillna(0).to_numpy()
    runs = ~is_baseline(df).to_numpy()
    for m in metrics:
        y = pd.to_numeric(df[m], errors="coerce")
        out[m] = y + np.where(runs, np.sin(seed) * _size(y), 0.0)
    return out


def _size(y: pd.Series) -> float:
    sd = float(y.std()) if y.notna().sum() > 1 else 0.0
    return sd if sd > 0 else 1.0


def _metric(claim: Claim, part: Part, df: pd.DataFrame, candidates: list[str]) -> str | None:
    """The metric ``part`` measures. Every candidate blanked, the estimator names what it
    lacks; restored one by one until it estimates, those named are the metrics it needs; the
    one whose small perturbation moves its value (the last named first) is the one it
    measures (the others select or gate rows)."""
    blank, needed = set(candidates), []
    for _ in range(len(candidates)):
        table = df.copy()
        table[sorted(blank)] = np.nan
        xs = _estimate(part, claim, Evidence(table))
        text = " ".join(x.missing for x in xs)
        named = [m for m in blank if m in text]
        if not text or not named:
            break
        needed.append(max(named, key=len))
        blank.discard(needed[-1])
    base = _estimate(part, claim, Evidence(df))
    for m in reversed(needed):
        nudged = df.copy()
        y = pd.to_numeric(df[m], errors="coerce")
        nudged[m] = y + 1e-3 * _size(y) * np.cos(np.arange(len(y)))
        ys = _estimate(part, claim, Evidence(nudged))
        if any(abs(x.value - y.value) > 1e-9 for x, y in zip(base, ys, strict=False)):
            return m
    return needed[-1] if needed else None
