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
1/√seeds, degrees of freedom ∝ seeds − 1: ``seeds_to_reach``) — else "effect near its
margin".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from distillscope.results.stats import ALPHA
from distillscope.scorecard.claim_spec import ABOVE, ANY, BELOW, WITHIN, Part, Routes
from distillscope.scorecard.estimate import Estimate, RangeEstimate

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
MAX_SEEDS = 100_000  # the most seeds a "would decide" count offers


def ci_label(alpha: float = ALPHA) -> str:
    """The two-sided level of two one-sided (1 − alpha) bounds: ``95% CI`` at α = 0.025,
    ``97.5% CI`` at α / 2 (an ``any`` part of two strata), never rounded up to a whole %."""
    return f"{100 * (1 - 2 * alpha):.4g}% CI"


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
    """``+1.9 pp [−0.4, +4.2] (95% CI)`` (the level of ``alpha``), or what made an interval
    impossible."""
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
    if x.covers:  # what the interval covers: seeds and items, or seeds only
        text += f" over {x.covers}"
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
    """ "lacks power (…)" or "effect near its margin (…)" for an undecided stratum.

    Near its margin only when the interval straddles the margin (a band's edge) and is
    narrower than the effect it would need to resolve — reach strictly below the published
    value's distance from the margin, half-width below it; otherwise (a wide interval, as "0 of n vs
    0 of n" events gives: [−100, +100] pp against a published 100 pp) the design lacks power.
    """
    band = part.side == WITHIN
    two_sided = band and part.published == 0 and not isinstance(x, RangeEstimate)
    reach = x.reach(alpha, POWER, two_sided)
    distance = part.margin - abs(part.published) if band else abs(part.published - part.margin)
    if math.isnan(reach):
        return NO_VARIANCE
    lo, hi = x.bounds(alpha)
    m = part.margin
    straddles = (lo < m < hi) or (band and lo < -m < hi)
    u = f" {part.unit}" if part.unit else ""
    if straddles and reach < distance and (hi - lo) / 2 < distance:
        text = f"{NEAR_MARGIN}: {fmt(x.value)}{u} [{fmt(lo)}, {fmt(hi)}] against {part.claimed()}"
        # what would decide it: the seeds at which the estimate, were it the effect, clears the
        # nearest edge with 80% power (the edge it lies beyond, or inside a band)
        gap = abs(abs(x.value) - m) if band else abs(x.value - m)
        seeds = seeds_to_reach(x, gap, alpha, two_sided and abs(x.value) < m)
        if seeds is not None:
            text += f"; ≈ {seeds} seeds would decide it if the effect is {fmt(x.value)}{u}"
        return text
    if math.isinf(reach):
        return f"{LACKS_POWER} (no effect is decided with these runs: [{fmt(lo)}, {fmt(hi)}]{u})"
    if band:
        smallest = f"a band of ±{abs(part.published) + reach:.1f} {part.unit}".rstrip()
    else:
        sign = 1 if part.side == ABOVE else -1
        smallest = f"{part.name} beyond {m + sign * reach:+.1f} {part.unit}".rstrip()
    text = f"{LACKS_POWER} (smallest effect the design decides: {smallest}"
    seeds = seeds_to_reach(x, distance, alpha, two_sided) if 0 < distance < reach else None
    if seeds is not None:
        what = "published" if part.sized else "planted (no size stated)"
        text += f"; ≈ {seeds} seeds would decide the {what} {part.published:g}"
    elif (hi - lo) / 2 > distance:
        text += f"; its interval [{fmt(lo)}, {fmt(hi)}]{u} is wider than that"
    return text + ")"


def seeds_to_reach(
    x: Estimate, distance: float, alpha: float = ALPHA, two_sided: bool = False
) -> int | None:
    """The fewest seeds at which ``x``'s design reaches ``distance`` with 80% power
    (``Estimate.at_seeds``: SE ∝ 1/√seeds, ν ∝ seeds − 1, so the t quantiles shrink as seeds
    are added; scaling the reach at 2 or 3 seeds by (reach / distance)² alone would count their
    t quantiles as if they stayed); None when it does not scale so or needs more than
    ``MAX_SEEDS``. Bisects from the normal-quantile count, a lower bound (the reach falls
    monotonically as seeds are added)."""
    if x.at_seeds(2) is None or distance <= 0 or not x.decidable():
        return None

    def reaches(n: int) -> bool:
        y = x.at_seeds(n)
        return y is not None and y.reach(alpha, POWER, two_sided) <= distance

    z_reach = replace(x, dof=math.inf).reach(alpha, POWER, two_sided)
    lo = max(x.seeds + 1, math.ceil(x.seeds * (z_reach / distance) ** 2))
    if lo > MAX_SEEDS or not reaches(MAX_SEEDS):
        return None
    hi = MAX_SEEDS  # the reach falls as seeds grow: bisect for the first n that reaches
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reaches(mid) else (mid + 1, hi)
    return lo


def decide_part(
    part: Part, xs: Sequence[Estimate], alpha_contra: float, level: float = ALPHA
) -> Decision:
    """A part over its strata by its quantifier: ``every`` / ``only`` / ``pooled`` (supported
    when every stratum is, contradicted when any is), ``any`` (supported when some stratum is
    at α / k, contradicted when every one is); α = ``level``."""
    k = max(len(xs), 1)
    alpha = level / k if part.quantifier == ANY else level
    ds = [decide_stratum(part, x, alpha_contra, alpha) for x in xs]
    if not ds:
        return Decision(NOT_TESTED, f"{part.name}: no stratum", f"{part.name}: no stratum")
    if part.quantifier == ANY:
        states = [d.state for d in ds]
        text = "; ".join(d.text for d in ds)
        if SUPPORTED in states:
            return Decision(SUPPORTED, text)
        if all(s == CONTRADICTED for s in states):
            return Decision(CONTRADICTED, text)
    return combine(part.name, ds, part.guard, veto=part.quantifier != ANY)


def combine(name: str, ds: Sequence[Decision], guard: bool = False, veto: bool = True) -> Decision:
    """Strata decisions that must all hold: contradicted when any is (``veto``), else not
    tested when any is, else supported when all are (or the part is a guard, which only
    vetoes), else undecided with the reason that matters most."""
    states = [d.state for d in ds]
    text = "; ".join(d.text for d in ds)
    if veto and CONTRADICTED in states:
        return Decision(CONTRADICTED, text)
    missing = [d.reason for d in ds if d.state == NOT_TESTED]
    if missing:
        return Decision(NOT_TESTED, text, "; ".join(dict.fromkeys(missing)))
    if all(s == SUPPORTED for s in states) or guard:  # a guard only vetoes
        return Decision(SUPPORTED, text)
    reasons = [d.reason for d in ds if d.state == UNDECIDED]
    return Decision(UNDECIDED, text, f"{name}: {first_reason(reasons)}")


def decide_routes(
    part: Routes, xss: Sequence[Sequence[Estimate]], alpha_contra: float, level: float = ALPHA
) -> Decision:
    """A multi-route part (``spec.Routes``) over its strata. ``xss[r]``: route r's estimates,
    one per stratum label. In a stratum each route is decided at α / r (the part holds when
    any does: a union, Bonferroni) and contradicts at ``alpha_contra`` (the part is
    contradicted only when every route is: an intersection); strata combine as ``combine``."""
    alpha = level / len(part.routes)
    labels = list(dict.fromkeys(x.label for xs in xss for x in xs))
    if not labels:
        return Decision(NOT_TESTED, f"{part.name}: no stratum", f"{part.name}: no stratum")
    ds = []
    for label in labels:
        got = [
            decide_stratum(route, x, alpha_contra, alpha)
            for route, xs in zip(part.routes, xss, strict=True)
            for x in xs
            if x.label == label
        ]
        states = [d.state for d in got]
        text = " or ".join(d.text for d in got)
        if SUPPORTED in states:
            ds.append(Decision(SUPPORTED, text))
        elif len(got) == len(part.routes) and all(s == CONTRADICTED for s in states):
            ds.append(Decision(CONTRADICTED, text))
        elif NOT_TESTED in states or len(got) < len(part.routes):
            lack = [d.reason for d in got if d.state == NOT_TESTED] or [f"a route for {label}"]
            ds.append(Decision(NOT_TESTED, text, "; ".join(dict.fromkeys(lack))))
        else:
            reasons = [d.reason for d in got if d.state == UNDECIDED]
            ds.append(Decision(UNDECIDED, text, first_reason(reasons)))
    return combine(part.name, ds, part.guard)


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
