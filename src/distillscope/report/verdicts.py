"""Decisions on both sides of a margin: a part in each stratum, then the claim (docs/method.md §9).

For one stratum's ``Estimate`` x of a part with margin m (display units):

- ``above``: supported when the one-sided (1 − α) lower bound > m; contradicted when the
  upper bound (at the contradiction level) < m — an effect smaller than the margin
  contradicts a claim that states the effect.
- ``below``: the mirror image.
- ``within`` (equivalence, TOST): supported when both one-sided bounds lie inside (−m, m);
  contradicted when the interval lies wholly outside (lower > m or upper < −m). A range's
  lower bound is ≥ 0: contradicted when it exceeds m.

Support is an intersection–union test (every part, every stratum it quantifies, at α each):
its false rate is at most α. Contradiction is a union (any part, any stratum), so its level is
split over the claim's k tests (Bonferroni, α / k). α = ``ALPHA`` = 0.025 one-sided: the two
bounds shown form a two-sided 95% interval.

An undecided stratum says why (``reason``): "lacks power" when the design could not decide
the published value at 80% power — the distance from the margin it resolves,
(t₁₋α + t₀.₈)·SE (t₀.₉ for a band), exceeds the published value's distance from the margin;
the evidence gives the smallest effect it decides and roughly how many seeds would (SE ∝
1/√seeds) — else "effect near its margin".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from distillscope.report.claims.estimate import Estimate, RangeEstimate
from distillscope.report.claims.spec import ABOVE, ANY, BELOW, WITHIN, Part
from distillscope.report.stats import ALPHA

SUPPORTED, CONTRADICTED, UNDECIDED, NOT_TESTED = (
    "supported",
    "contradicted",
    "undecided",
    "not tested",
)
LACKS_POWER, NEAR_MARGIN = "lacks power", "effect near its margin"
NO_VARIANCE = "no seed variance (every seed gave the same value): the design decides nothing"
ONE_RUN = "one run per condition: an observation, not a test"
POWER = 0.8


def ci_label(alpha: float = ALPHA) -> str:
    """``95% CI`` for two one-sided (1 − α) bounds (``98.3% CI`` at α / 3)."""
    return f"{100 * (1 - 2 * alpha):.1f}".rstrip("0").rstrip(".") + "% CI"


@dataclass(frozen=True)
class Decision:
    """One part in one stratum: its state, the words behind it, and a reason when undecided."""

    state: str
    text: str
    reason: str = ""


def fmt(value: float, digits: int = 1) -> str:
    """``+3.2`` with sign; ``n/a`` for NaN."""
    return "n/a" if math.isnan(value) else f"{value:+.{digits}f}"


def interval_text(x: Estimate, alpha: float = ALPHA, unit: str = "pp") -> str:
    """``+1.9 pp [−0.4, +4.2] (95% CI)``, or what made an interval impossible."""
    lo, hi = x.bounds(alpha)
    u = f" {unit}" if unit else ""
    if math.isnan(lo):
        return f"{fmt(x.value)}{u} [no interval: {'SE 0' if x.se == 0 else 'no SE'}]"
    return f"{fmt(x.value)}{u} [{fmt(lo)}, {fmt(hi)}] ({ci_label(alpha)})"


def decide_stratum(part: Part, x: Estimate, alpha_contra: float, alpha: float = ALPHA) -> Decision:
    """``part`` decided on estimate ``x`` of one stratum (see the module docstring)."""
    head = part.name if x.label in (part.name, "pooled") else f"{part.name} [{x.label}]"
    if x.missing:
        return Decision(NOT_TESTED, f"{head}: not tested (lacks {x.missing})", x.missing)
    text = f"{head} {interval_text(x, alpha, part.unit)}"
    if x.note:
        text += f" ({x.note})"
    if not x.decidable():
        return Decision(UNDECIDED, text, ONE_RUN if x.seeds == 1 else NO_VARIANCE)
    lo, hi = x.bounds(alpha)
    clo, chi = x.bounds(alpha_contra)
    m = part.margin
    if part.side == ABOVE:
        ok, against = lo > m, chi < m
    elif part.side == BELOW:
        ok, against = hi < m, clo > m
    elif isinstance(x, RangeEstimate):
        ok, against = hi < m, clo > m
    else:
        ok, against = (-m < lo and hi < m), (clo > m or chi < -m)
    if against:
        return Decision(CONTRADICTED, f"{text} → contradicts {part.claimed()}")
    if ok:
        return Decision(SUPPORTED, f"{text} → {part.claimed()}")
    reason = undecided_reason(part, x, alpha)
    return Decision(UNDECIDED, f"{text} → undecided: {reason}", reason)


def undecided_reason(part: Part, x: Estimate, alpha: float = ALPHA) -> str:
    """ "lacks power (…)" or "effect near its margin (…)" for an undecided stratum."""
    band = part.side == WITHIN
    two_sided = band and part.published == 0 and not isinstance(x, RangeEstimate)
    reach = x.reach(alpha, POWER, two_sided)
    distance = part.margin - abs(part.published) if band else abs(part.published - part.margin)
    if math.isnan(reach):
        return NO_VARIANCE
    if reach > distance:
        if band:
            smallest = f"a band of ±{abs(part.published) + reach:.1f} {part.unit}".rstrip()
        else:
            sign = 1 if part.side == ABOVE else -1
            smallest = f"{part.name} beyond {part.margin + sign * reach:+.1f} {part.unit}".rstrip()
        text = f"{LACKS_POWER} (smallest effect the design decides: {smallest}"
        if x.seeds >= 2 and distance > 0:
            seeds = math.ceil(x.seeds * (reach / distance) ** 2)
            text += f"; ≈ {seeds} seeds would decide the published {part.published:g}"
        return text + ")"
    u = f" {part.unit}" if part.unit else ""
    lo, hi = x.bounds(alpha)
    return f"{NEAR_MARGIN}: {fmt(x.value)}{u} [{fmt(lo)}, {fmt(hi)}] against {part.claimed()}"


def decide_part(
    part: Part, xs: Sequence[Estimate], alpha_contra: float, level: float = ALPHA
) -> Decision:
    """A part over its strata by its quantifier: ``every`` / ``only`` / ``pooled`` (supported
    when every stratum is, contradicted when any is), ``any`` (supported when some stratum is
    at α / k, contradicted when every one is); α = ``level``."""
    k = max(len(xs), 1)
    alpha = level / k if part.quantifier == ANY else level
    ds = [decide_stratum(part, x, alpha_contra, alpha) for x in xs]
    states = [d.state for d in ds]
    text = "; ".join(d.text for d in ds)
    if not ds:
        return Decision(NOT_TESTED, f"{part.name}: no stratum", f"{part.name}: no stratum")
    if part.quantifier == ANY:
        if SUPPORTED in states:
            return Decision(SUPPORTED, text)
        if all(s == CONTRADICTED for s in states):
            return Decision(CONTRADICTED, text)
    elif CONTRADICTED in states:
        return Decision(CONTRADICTED, text)
    missing = [d.reason for d in ds if d.state == NOT_TESTED]
    if missing:
        return Decision(NOT_TESTED, text, "; ".join(dict.fromkeys(missing)))
    if all(s == SUPPORTED for s in states) or part.guard:  # a guard only vetoes
        return Decision(SUPPORTED, text)
    reasons = [d.reason for d in ds if d.state == UNDECIDED]
    return Decision(UNDECIDED, text, f"{part.name}: {first_reason(reasons)}")


def first_reason(reasons: Sequence[str]) -> str:
    """The reason that matters most: lack of power before a near-margin effect."""
    for key in (LACKS_POWER, NO_VARIANCE[:15], NEAR_MARGIN):
        for r in reasons:
            if key in r:
                return r
    return reasons[0] if reasons else ""


def worst(part: Part, xs: Sequence[Estimate]) -> Estimate | None:
    """The stratum closest to failing ``part`` (for the headline): lowest value for ``above``,
    highest for ``below``, largest |value| for ``within``."""
    ok = [x for x in xs if not x.missing and not math.isnan(x.value)]
    if not ok:
        return None
    if part.side == ABOVE:
        return min(ok, key=lambda x: x.value)
    if part.side == BELOW:
        return max(ok, key=lambda x: x.value)
    return max(ok, key=lambda x: abs(x.value))
