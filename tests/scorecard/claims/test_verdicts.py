"""Decisions on both sides of a margin, the quantifiers, and the reasons of undecided parts."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from distillscope.scorecard.claim_spec import (
    ABOVE,
    ANY,
    BELOW,
    EVERY,
    POOLED,
    WITHIN,
    Part,
    Routes,
)
from distillscope.scorecard.estimate import Estimate, RangeEstimate, not_tested
from distillscope.scorecard.exact import share_gap
from distillscope.scorecard.verdicts import (
    CONTRADICTED,
    NOT_TESTED,
    SUPPORTED,
    UNDECIDED,
    decide_part,
    decide_routes,
    decide_stratum,
    interval_text,
)

T = stats.t.ppf(0.975, 10)  # the one-sided 97.5% quantile on 10 degrees of freedom


def _part(side: str, margin: float = 5.0, quantifier: str = POOLED, published: float = 17.0):
    return Part("Δ", "d", lambda v: [], quantifier, side, margin, "why", published, over="x")


def _x(value: float, se: float = 1.0, label: str = "s") -> Estimate:
    return Estimate(label, value, se, 10.0, 11)


@pytest.mark.parametrize(
    ("side", "value", "state"),
    [
        (ABOVE, 5.0 + T + 0.01, SUPPORTED),  # lower bound just above the margin
        (ABOVE, 5.0 + T - 0.01, UNDECIDED),
        (ABOVE, 5.0 - T - 0.01, CONTRADICTED),  # upper bound below: a size the claim denies
        (ABOVE, 5.0 - T + 0.01, UNDECIDED),
        (BELOW, 5.0 - T - 0.01, SUPPORTED),
        (BELOW, 5.0 + T + 0.01, CONTRADICTED),
        (WITHIN, 0.0, SUPPORTED),  # ±T inside ±5
        (WITHIN, 5.0 - T + 0.01, UNDECIDED),
        (WITHIN, 5.0 + T + 0.01, CONTRADICTED),  # wholly outside the band
        (WITHIN, -5.0 - T - 0.01, CONTRADICTED),
    ],
)
def test_each_side_of_the_margin(side, value, state):
    assert decide_stratum(_part(side), _x(value), 0.025).state == state


def test_contradiction_uses_its_own_level():
    part, x = _part(ABOVE), _x(5.0 - T - 0.01)
    assert decide_stratum(part, x, 0.025).state == CONTRADICTED
    assert decide_stratum(part, x, 0.0025).state == UNDECIDED  # Bonferroni over 10 tests


def test_a_range_is_judged_by_its_upper_and_lower_bounds():
    wide = RangeEstimate("r", 9.0, 1.0, 10.0, 3, diffs=(9.0,), ses=(1.0,))
    narrow = RangeEstimate("r", 1.0, 1.0, 10.0, 3, diffs=(1.0,), ses=(1.0,))
    assert decide_stratum(_part(WITHIN, published=2.0), wide, 0.025).state == CONTRADICTED
    assert decide_stratum(_part(WITHIN, published=2.0), narrow, 0.025).state == SUPPORTED


def test_quantifiers_every_and_any():
    good, bad, open_ = _x(20.0), _x(-10.0), _x(5.0)
    every = _part(ABOVE, quantifier=EVERY)
    assert decide_part(every, [good, good], 0.025).state == SUPPORTED
    assert decide_part(every, [good, open_], 0.025).state == UNDECIDED
    assert decide_part(every, [good, bad], 0.025).state == CONTRADICTED  # one stratum suffices
    anyp = _part(ABOVE, quantifier=ANY)
    assert decide_part(anyp, [bad, good], 0.025).state == SUPPORTED
    assert decide_part(anyp, [bad, open_], 0.025).state == UNDECIDED
    assert decide_part(anyp, [bad, bad], 0.025).state == CONTRADICTED


def test_a_missing_stratum_is_not_tested_by_name_unless_another_contradicts():
    part = _part(ABOVE, quantifier=EVERY)
    gone = not_tested("s2", "eval/forgetting_pp of main")
    d = decide_part(part, [_x(20.0), gone], 0.025)
    assert d.state == NOT_TESTED and d.reason == "eval/forgetting_pp of main"
    assert decide_part(part, [_x(-10.0), gone], 0.025).state == CONTRADICTED


def test_reasons_say_lacks_power_or_near_the_margin():
    part = _part(ABOVE, margin=5.0, published=17.0)
    weak = decide_stratum(part, _x(8.0, se=6.0), 0.025)
    assert weak.reason.startswith("lacks power (smallest effect the design decides: Δ beyond")
    assert "seeds would decide the published 17" in weak.reason
    near = decide_stratum(part, _x(6.0, se=1.0), 0.025)
    assert near.reason.startswith("effect near its margin: +6.0 pp")
    flat = decide_stratum(part, _x(6.0, se=0.0), 0.025)
    assert flat.state == UNDECIDED and "no seed variance" in flat.reason


def test_no_events_on_either_side_lacks_power_with_the_gap_fisher_decides():
    # "0 of 27 vs 0 of 27": SE 0 and bounds [−100, +100] — the design lacks power, and the
    # smallest gap it decides is the least k / 27 that Fisher's one-sided test passes at α
    part = _part(ABOVE, margin=0.0, published=20.0)
    x = share_gap("Δ", 0, 27, 0, 27)
    k = next(
        k
        for k in range(28)
        if stats.fisher_exact([[k, 27 - k], [0, 27]], alternative="greater")[1] <= 0.025
    )
    d = decide_stratum(part, x, 0.025)
    assert d.state == UNDECIDED
    assert d.reason.startswith(
        f"lacks power (smallest effect the design decides: Δ beyond +{100 * k / 27:.1f} pp"
    )
    assert "near" not in d.reason  # 22.2 pp > the published 20: more runs would decide it
    # the whole range is no interval "near" a margin, even when the published gap is all of
    # it (claim 16 on the paper record: 0 of 3 unregulated vs 0 of 6 regulated runs exploit)
    all_of_it = decide_stratum(
        _part(ABOVE, 0.0, published=100.0), share_gap("Δ", 0, 3, 0, 6), 0.025
    )
    assert (
        all_of_it.reason == "lacks power (smallest effect the design decides: Δ beyond +100.0 pp)"
    )
    # a gap no count decides: 0 of 2 vs 0 of 2
    assert "no effect is decided" in decide_stratum(part, share_gap("Δ", 0, 2, 0, 2), 0.025).reason


def test_near_the_margin_needs_a_straddling_interval_narrower_than_the_distance():
    part = _part(ABOVE, margin=5.0, published=17.0)
    # straddles 5 and narrow (half-width 2.2 < 12): near
    assert decide_stratum(part, _x(6.0, se=1.0), 0.025).reason.startswith("effect near")
    # below the margin at α but not contradicted at the stricter α_contra: not straddling
    below = decide_stratum(part, _x(5.0 - T - 0.5, se=1.0), 0.001)
    assert below.state == UNDECIDED and below.reason.startswith("lacks power")


def test_intervals_are_labelled_with_their_real_level():
    text = interval_text(_x(1.0))
    assert text.endswith("(95% CI)") and "98%" not in text
    assert "no interval" in interval_text(Estimate("s", 1.0, math.nan, math.nan, 1))


def _routes() -> Routes:
    within = Part("after", "d", lambda v: [], EVERY, WITHIN, 2.0, "w", 0.0, over="m")
    below = Part("after", "d", lambda v: [], EVERY, BELOW, 0.0, "w", -10.0, over="m")
    return Routes("fades", (within, below), EVERY, over="m")


def test_routes_hold_by_any_route_at_a_split_level_and_fail_only_when_every_route_fails():
    t3 = stats.t.ppf(1 - 0.025 / 2, 10)  # each of 2 routes at α / 2
    r = _routes()
    # reversed beyond the split level: the BELOW route holds (the band does not)
    assert decide_routes(r, [[_x(-t3 - 0.01)], [_x(-t3 - 0.01)]], 0.025).state == SUPPORTED
    # at the plain level but not at α / 2: undecided
    assert decide_routes(r, [[_x(-T - 0.01)], [_x(-T - 0.01)]], 0.025).state == UNDECIDED
    # above the band: both routes contradicted
    up = _x(2.0 + T + 0.01)
    assert decide_routes(r, [[up], [up]], 0.025).state == CONTRADICTED
    # below the band: the band is contradicted but the reversed route holds
    down = _x(-2.0 - t3 - 0.01)
    assert decide_routes(r, [[down], [down]], 0.025).state == SUPPORTED
    # every stratum must hold: one contradicted stratum contradicts the part
    a, b = _x(-t3 - 1, label="m1"), _x(2.0 + T + 1, label="m2")
    assert decide_routes(r, [[a, b], [a, b]], 0.025).state == CONTRADICTED
    # a route not tested in a stratum (and none holding): not tested
    gap = not_tested("m1", "rlvr/harder_accuracy")
    d = decide_routes(r, [[gap], [_x(0.0, label="m1")]], 0.025)
    assert d.state == NOT_TESTED and "harder" in d.reason


def test_the_seeds_that_would_decide_count_the_t_quantiles_they_shrink():
    # 3 seeds on 2 degrees of freedom: reach (t.975(2) + t.8(2))·6 = 32.2 against a distance of
    # 12. Scaling that reach by (32.2 / 12)² alone offers 22 seeds; with ν growing by one per
    # seed the design reaches 12 at the first n with (t.975(n−1) + t.8(n−1))·6·√(3/n) ≤ 12
    part = _part(ABOVE, margin=5.0, published=17.0)
    x = Estimate("s", 8.0, 6.0, 2.0, 3)

    def reach(n: int) -> float:
        dof = n - 1
        return (stats.t.ppf(0.975, dof) + stats.t.ppf(0.8, dof)) * 6.0 * (3 / n) ** 0.5

    need = next(n for n in range(3, 1000) if reach(n) <= 12.0)
    assert need == 8 and reach(need - 1) > 12.0
    d = decide_stratum(part, x, 0.025)
    assert d.reason.endswith(f"; ≈ {need} seeds would decide the published 17)"), d.reason
    # a count that does not scale as 1/√seeds (Fisher's exact test) offers no seed count
    near = decide_stratum(part, share_gap("Δ", 1, 3, 0, 3), 0.025)
    assert "seeds would decide" not in near.reason


@pytest.mark.parametrize(
    ("value", "gap", "q"),
    [
        (-6.5, 1.5, 0.8),  # beyond the band's edge: contradicting it is one-sided
        (4.0, 1.0, 0.9),  # inside the band: supporting it is two one-sided tests
    ],
)
def test_near_its_margin_says_what_would_decide_it(value, gap, q):
    # the seeds at which the estimate, were it the effect, clears the nearest edge of a ±5 pp
    # band with 80% power (normal quantiles here: SE ∝ 1/√seeds, 3 seeds now)
    part = _part(WITHIN, margin=5.0, published=0.0)
    x = Estimate("s", value, 0.79, math.inf, 3)
    need = math.ceil(3 * ((stats.norm.ppf(0.975) + stats.norm.ppf(q)) * 0.79 / gap) ** 2)
    d = decide_stratum(part, x, 0.025)
    assert d.reason.startswith("effect near its margin"), d.reason
    assert d.reason.endswith(f"; ≈ {need} seeds would decide it if the effect is {value:+.1f} pp")
