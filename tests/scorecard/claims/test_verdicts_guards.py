"""Guards of the decisions (scorecard/verdicts.py): the numbers and words a reader sees for each
decision, bounds that touch a margin, the level each quantifier decides at, the power reasons,
and the stratum that heads a claim's line.

Every estimate here has ν = ∞, so its bounds use normal quantiles (z.975 = 1.960,
z.9975 = 2.807, z.9 = 1.282, z.8 = 0.842) and each number can be checked by hand.
"""

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
from distillscope.scorecard.verdicts import (
    CONTRADICTED,
    NO_VARIANCE,
    NOT_TESTED,
    ONE_RUN,
    SUPPORTED,
    UNDECIDED,
    Decision,
    decide_part,
    decide_routes,
    decide_stratum,
    first_reason,
    fmt,
    interval_text,
    undecided_reason,
    worst,
)

INF = math.inf


def _part(side, margin=5.0, published=17.0, quantifier=POOLED, unit="pp") -> Part:
    return Part("Δ", "d", lambda v: [], quantifier, side, margin, "why", published, "x", unit)


def _x(value: float, se: float = 1.0, label: str = "s", seeds: int = 11, note: str = ""):
    return Estimate(label, value, se, INF, seeds, note)


def _would(gap: float, unit: str, value: float, se: float = 1.0, seeds: int = 11) -> str:
    """A near-margin reason's tail: the seeds (normal quantiles, SE ∝ 1/√seeds) at which an
    effect ``gap`` from the margin is decided with 80% power at α = 0.025."""
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    n = math.ceil(seeds * (z * se / gap) ** 2)
    return f"; ≈ {n} seeds would decide it if the effect is {value:+.1f}{unit}"


def test_numbers_are_printed_with_sign_and_their_interval():
    assert (fmt(math.nan), fmt(3.14159, 2), fmt(-0.26)) == ("n/a", "+3.14", "-0.3")
    assert interval_text(_x(3.0)) == "+3.0 pp [+1.0, +5.0] (95% CI)"  # 3 ± 1.96
    assert interval_text(_x(3.0), unit="") == "+3.0 [+1.0, +5.0] (95% CI)"
    assert interval_text(Estimate("s", 1.0, 0.0, INF, 3)) == "+1.0 pp [no interval: SE 0]"
    # an SE without degrees of freedom gives no interval either
    assert interval_text(Estimate("s", 1.0, 1.0, math.nan, 1)) == "+1.0 pp [no interval: no SE]"
    assert interval_text(Estimate("s"), unit="") == "n/a [no interval: no SE]"


def test_a_decision_names_its_stratum_note_and_the_claimed_side():
    above = _part(ABOVE)
    pooled = decide_stratum(above, _x(9.0, label="pooled"), 0.025)
    assert pooled == Decision(SUPPORTED, "Δ +9.0 pp [+7.0, +11.0] (95% CI) → Δ > 5 pp")
    noted = decide_stratum(above, _x(9.0, label="Δ", note="seed 3 left out"), 0.025)
    assert noted.text == "Δ +9.0 pp [+7.0, +11.0] (95% CI) (seed 3 left out) → Δ > 5 pp"
    seconds = decide_stratum(_part(ABOVE, unit="s"), _x(9.0, label="forward KL"), 0.025)
    assert seconds.text == "Δ [forward KL] +9.0 s [+7.0, +11.0] (95% CI) → Δ > 5 s"
    against = decide_stratum(above, _x(1.0), 0.025)
    assert against == Decision(
        CONTRADICTED, "Δ [s] +1.0 pp [-1.0, +3.0] (95% CI) → contradicts Δ > 5 pp"
    )
    near = decide_stratum(above, _x(6.0), 0.025)
    why = f"effect near its margin: +6.0 pp [+4.0, +8.0] against Δ > 5 pp{_would(1.0, ' pp', 6)}"
    assert near == Decision(
        UNDECIDED, f"Δ [s] +6.0 pp [+4.0, +8.0] (95% CI) → undecided: {why}", why
    )
    gone = decide_stratum(above, not_tested("s", "x of main"), 0.025)
    assert gone == Decision(NOT_TESTED, "Δ [s]: not tested (lacks x of main)", "x of main")


def test_one_run_and_a_table_without_variance_are_told_apart():
    one = decide_stratum(_part(ABOVE), Estimate("s", 9.0, math.nan, math.nan, 1), 0.025)
    assert one.state == UNDECIDED and one.reason == ONE_RUN
    flat = decide_stratum(_part(ABOVE), Estimate("s", 9.0, 0.0, 2.0, 2), 0.025)
    assert flat.state == UNDECIDED and flat.reason == NO_VARIANCE


def _touching(side: str, x: Estimate, which: str) -> Part:
    """A part whose margin is exactly one bound of ``x``: lo/hi at α = 0.025, clo/chi at the
    contradiction level 0.0025 (a negative ``which`` mirrors it: the margin is −bound)."""
    lo, hi = x.bounds(0.025)
    clo, chi = x.bounds(0.0025)
    bound = {"lo": lo, "hi": hi, "clo": clo, "chi": chi}[which.lstrip("-")]
    return _part(side, -bound if which.startswith("-") else bound)


RANGE = RangeEstimate("r", 4.0, 1.0, INF, 3, diffs=(4.0,), ses=(1.0,))


@pytest.mark.parametrize(
    ("side", "x", "which"),
    [
        (ABOVE, _x(9.0), "lo"),  # support needs lo > m
        (ABOVE, _x(1.0), "chi"),  # contradiction needs chi < m
        (BELOW, _x(1.0), "hi"),
        (BELOW, _x(9.0), "clo"),
        (WITHIN, RANGE, "hi"),  # a range: supported when hi < m
        (WITHIN, RANGE, "clo"),  # contradicted when its lower bound > m
        (WITHIN, _x(-2.0), "-lo"),  # a band: −m < lo
        (WITHIN, _x(2.0), "hi"),  # hi < m
        (WITHIN, _x(9.0), "clo"),  # wholly above: clo > m
        (WITHIN, _x(-9.0), "-chi"),  # wholly below: chi < −m
    ],
)
def test_a_bound_on_the_margin_decides_nothing(side, x, which):
    # the claim needs its interval wholly on one side: a bound equal to the margin is not
    part = _touching(side, x, which)
    assert decide_stratum(part, x, 0.0025).state == UNDECIDED


LACKS = "lacks power (smallest effect the design decides: "


@pytest.mark.parametrize(
    ("part", "x", "reason"),
    [
        # reach = (z.975 + z.8)·6 = 16.81 > |17 − 5|; 5 + 16.81; ⌈11·(16.81/12)²⌉ = 22
        (
            _part(ABOVE),
            _x(8.0, 6.0),
            "Δ beyond +21.8 pp; ≈ 22 seeds would decide the published 17)",
        ),
        (
            _part(BELOW, published=-7.0),
            _x(2.0, 6.0),
            "Δ beyond -11.8 pp; ≈ 22 seeds would decide the published -7)",
        ),
        # a no-effect band (published 0) is two one-sided tests: z.9; (1.960 + 1.282)·3 = 9.72
        (
            _part(WITHIN, published=0.0),
            _x(1.0, 3.0),
            "a band of ±9.7 pp; ≈ 42 seeds would decide the published 0)",
        ),
        # a band around a published −1.3: one side matters, z.8; 1.3 + 5.60, distance 2 − 1.3
        (
            _part(WITHIN, 2.0, -1.3),
            _x(0.0, 2.0),
            "a band of ±6.9 pp; ≈ 705 seeds would decide the published -1.3)",
        ),
        # a range is bounded from above only: z.8 even at published 0; ⌈11·(5.60/5)²⌉ = 14
        (
            _part(WITHIN, published=0.0),
            RangeEstimate("r", 3.0, 2.0, INF, 11, diffs=(3.0,), ses=(2.0,)),
            "a band of ±5.6 pp; ≈ 14 seeds would decide the published 0)",
        ),
        # non-inferiority at −2 with a published 0 is one-sided: −2 + 5.60; ⌈11·(5.60/2)²⌉ = 87
        (
            _part(ABOVE, -2.0, 0.0),
            _x(0.0, 2.0),
            "Δ beyond +3.6 pp; ≈ 87 seeds would decide the published 0)",
        ),
        # two seeds are enough to scale from; ⌈2·(16.81/12)²⌉ = 4
        (
            _part(ABOVE),
            _x(8.0, 6.0, seeds=2),
            "Δ beyond +21.8 pp; ≈ 4 seeds would decide the published 17)",
        ),
        # no seed count, or a published value on the margin: no number of seeds to offer (on
        # the margin, an interval of ±3.9 is wider than the distance 0 it would resolve)
        (_part(ABOVE), _x(8.0, 6.0, seeds=0), "Δ beyond +21.8 pp)"),
        (
            _part(WITHIN, 2.0, 2.0),
            _x(0.0, 2.0),
            "a band of ±7.6 pp; its interval [-3.9, +3.9] pp is wider than that)",
        ),
        # a unitless part ends its number at the parenthesis
        (_part(ABOVE, unit=""), _x(8.0, 6.0, seeds=0), "Δ beyond +21.8)"),
        (
            _part(WITHIN, 2.0, 2.0, unit=""),
            _x(0.0, 2.0),
            "a band of ±7.6; its interval [-3.9, +3.9] is wider than that)",
        ),
    ],
)
def test_lacking_power_gives_the_smallest_effect_decided_and_the_seeds_needed(part, x, reason):
    d = decide_stratum(part, x, 0.0025)
    assert d.state == UNDECIDED and d.reason == LACKS + reason
    assert d.reason == undecided_reason(part, x)


def test_the_power_reason_uses_the_level_the_stratum_was_decided_at():
    # at α = 0.0025: (z.9975 + z.8)·6 = 21.89; ⌈11·(21.89/12)²⌉ = 37
    d = decide_stratum(_part(ABOVE), _x(8.0, 6.0), 0.0025, alpha=0.0025)
    assert d.reason == LACKS + "Δ beyond +26.9 pp; ≈ 37 seeds would decide the published 17)"


def test_a_design_that_resolves_exactly_the_published_distance_has_its_power():
    x = _x(1.0)
    # distance just beyond the reach: the design decides it (at distance = reach exactly an
    # exact test clamped at its range, "0 of 3 vs 0 of 6", would read as near its margin)
    part = _part(ABOVE, 0.0, x.reach(0.025) * 1.001)
    d = decide_stratum(part, x, 0.0025)
    assert d.reason == (
        f"effect near its margin: +1.0 pp [-1.0, +3.0] against Δ > 0 pp{_would(1.0, ' pp', 1)}"
    )
    unitless = decide_stratum(_part(ABOVE, unit=""), _x(6.0), 0.0025)
    assert unitless.reason == (
        f"effect near its margin: +6.0 [+4.0, +8.0] against Δ > 5{_would(1.0, '', 6)}"
    )


# 7.1 − z.975 = 5.14 > 5, but 7.1 − z.99375 = 4.86: supported at α, not at α / 2
EDGE = 7.1


def test_any_splits_its_level_over_its_strata_and_every_does_not():
    a, b = _x(EDGE, label="a"), _x(EDGE, label="b")
    anyp, every = _part(ABOVE, quantifier=ANY), _part(ABOVE, quantifier=EVERY)
    assert decide_part(anyp, [a], 0.0025).state == SUPPORTED  # one stratum: α / 1
    assert decide_part(anyp, [a, b], 0.0025).state == UNDECIDED  # α / 2 each
    assert decide_part(every, [a, b], 0.0025).state == SUPPORTED  # an intersection: α each
    one = "+7.1 pp [+5.1, +9.1] (95% CI) → Δ > 5 pp"
    assert decide_part(every, [a, b], 0.0025).text == f"Δ [a] {one}; Δ [b] {one}"


def test_contradiction_is_decided_at_the_level_the_runner_gives():
    # 2.9 + z.975 = 4.86 < 5 contradicts at 0.025; 2.9 + z.9975 = 5.71 does not at 0.0025
    x = _x(2.9)
    every = _part(ABOVE, quantifier=EVERY)
    assert decide_part(every, [x], 0.025).state == CONTRADICTED
    assert decide_part(every, [x], 0.0025).state == UNDECIDED


def test_any_names_every_stratum_whatever_it_decides():
    anyp = _part(ABOVE, quantifier=ANY)
    good, bad = _x(20.0, label="a"), _x(-10.0, label="b")
    yes = decide_part(anyp, [bad, good], 0.0025)
    assert (
        yes.state == SUPPORTED
        and yes.text.startswith("Δ [b] -10.0 pp [")
        and "; Δ [a] +20.0" in yes.text
    )
    no = decide_part(anyp, [bad, bad], 0.0025)
    assert no.state == CONTRADICTED and no.text.count("→ contradicts Δ > 5 pp") == 2


def test_a_part_without_strata_or_with_missing_ones_says_what_it_lacks():
    part = _part(ABOVE, quantifier=EVERY)
    assert decide_part(part, [], 0.025) == Decision(NOT_TESTED, "Δ: no stratum", "Δ: no stratum")
    gone = [not_tested("a", "m1"), not_tested("b", "m2"), not_tested("c", "m1")]
    d = decide_part(part, gone, 0.025)
    assert d.state == NOT_TESTED and d.reason == "m1; m2"  # each lack named once


def test_the_reason_that_matters_most_comes_first():
    near, lacks = "effect near its margin: +6.0", "lacks power (smallest …)"
    assert first_reason([near, lacks]) == lacks
    assert first_reason([near, NO_VARIANCE]) == NO_VARIANCE
    assert first_reason([near, "other"]) == near
    assert first_reason(["one", "two"]) == "one" and first_reason([]) == ""


def test_the_headline_stratum_is_the_one_closest_to_failing():
    nan, gone = Estimate("n", math.nan, 1.0, INF, 3), not_tested("g", "m")
    a, b, c = _x(3.0, label="a"), _x(-4.0, label="b"), _x(1.0, label="c")
    assert worst(_part(ABOVE), [nan, gone, a, b, c]) is b  # the lowest
    assert worst(_part(BELOW), [nan, gone, c, a, b]) is a  # the highest
    assert worst(_part(WITHIN), [nan, gone, c, a, b]) is b  # the largest |value|
    assert worst(_part(ABOVE), [nan, gone]) is None


def test_the_interval_shown_is_the_one_decided():
    # an `any` stratum of two is decided at α / 2: its interval is the wider 97.5% one, and
    # says so (not "95%", nor 97.5% rounded to "98%")
    q = stats.norm.ppf(1 - 0.025 / 2)
    d = decide_part(_part(ABOVE, quantifier=ANY), [_x(EDGE, label="a"), _x(0.0, label="b")], 0.0025)
    assert f"[{EDGE - q:+.1f}, {EDGE + q:+.1f}] (97.5% CI)" in d.text
    assert interval_text(_x(1.0), alpha=0.025 / 3).endswith("(98.33% CI)")


@pytest.mark.parametrize(
    ("part", "x", "near"),
    [
        # straddling a margin needs the margin strictly inside the interval
        (_part(ABOVE), _x(5.0), True),
        (_part(ABOVE, published=17.0, margin=4.0), _x(6.0), False),  # lo 4.04 > 4: not astride
        (_part(ABOVE, 2.0), _x(-0.5), False),  # astride −2 only: not a band's edge
        (_part(WITHIN, 5.0, 0.0), _x(-5.0), True),  # astride the band's lower edge
        # narrow and astride, but the published value only 1 pp from the margin: 0.84 ≤ 1
        (_part(ABOVE, 5.0, 6.0), _x(5.2, 0.3), True),
    ],
)
def test_near_its_margin_needs_a_narrow_interval_astride_the_margin(part, x, near):
    assert undecided_reason(part, x).startswith("effect near its margin") == near


@pytest.mark.parametrize(
    ("side", "value", "edge"),
    [
        (ABOVE, 9.0, lambda lo, hi: lo),  # m = lo: lo < m fails
        (ABOVE, 9.0, lambda lo, hi: hi),  # m = hi: m < hi fails
        (WITHIN, -9.0, lambda lo, hi: -lo),  # −m = lo
        (WITHIN, -9.0, lambda lo, hi: -hi),  # −m = hi
    ],
)
def test_a_bound_on_the_margin_is_not_astride_it(side, value, edge):
    x = _x(value)
    m = edge(*x.bounds(0.025))
    part = _part(side, m, m + 12.0 if side == ABOVE else 0.0)
    assert undecided_reason(part, x).startswith(LACKS)


def test_the_seeds_and_the_width_are_offered_only_when_they_say_something():
    x = _x(-2.5)  # hi −0.54 < 0: not astride a margin at 0
    on_reach = _part(ABOVE, 0.0, x.reach(0.025))  # distance = reach: more seeds add nothing
    assert undecided_reason(on_reach, x) == LACKS + "Δ beyond +2.8 pp)"
    wide = Estimate("s", 0.0, 6.0, INF, 0)  # no seed count; half-width 1.96·6 = 11.76
    lo, hi = wide.bounds(0.025)
    at = _part(ABOVE, 0.0, hi)  # the half-width exactly the distance: not wider
    assert undecided_reason(at, wide) == LACKS + "Δ beyond +16.8 pp)"
    beyond = _part(ABOVE, 0.0, 10.0)
    assert undecided_reason(beyond, wide) == (
        LACKS + "Δ beyond +16.8 pp; its interval [-11.8, +11.8] pp is wider than that)"
    )


def _route(name: str, side: str = ABOVE, margin: float = 5.0) -> Part:
    return Part(name, "d", lambda v: [], POOLED, side, margin, "why", 17.0)


def test_a_guard_only_vetoes():
    guard = Part("g", "d", lambda v: [], EVERY, ABOVE, 5.0, "w", 17.0, "x", guard=True)
    assert decide_part(guard, [_x(6.0)], 0.0025).state == SUPPORTED  # undecided: no veto
    assert decide_part(guard, [_x(-10.0)], 0.0025).state == CONTRADICTED


def test_routes_hold_by_any_route_and_fail_only_by_all():
    g = Routes("G", (_route("a"), _route("b", BELOW, 0.0)))
    good, bad, open_ = _x(20.0), _x(-10.0), _x(EDGE)  # for b: bad holds, good fails
    assert decide_routes(g, [[good], [good]], 0.0025).state == SUPPORTED
    both = decide_routes(g, [[_x(-10.0)], [_x(20.0)]], 0.0025)
    assert both.state == CONTRADICTED
    assert both.text == (
        "a [s] -10.0 pp [-12.2, -7.8] (97.5% CI) → contradicts a > 5 pp or "
        "b [s] +20.0 pp [+17.8, +22.2] (97.5% CI) → contradicts b < 0 pp"
    )
    # each route decided at α / 2: 7.1 − 2.24 < 5, so route a is open here
    d = decide_routes(g, [[open_], [_x(20.0)]], 0.0025)
    assert d.state == UNDECIDED and d.reason.startswith("G: ")
    assert "effect near its margin" in d.reason or "lacks power" in d.reason
    assert decide_routes(g, [[bad], [_x(2.0)]], 0.0025).state == UNDECIDED
    guarded = Routes("G", g.routes, guard=True)
    assert decide_routes(guarded, [[open_], [_x(20.0)]], 0.0025).state == SUPPORTED


def test_routes_name_what_a_stratum_lacks():
    g = Routes("G", (_route("a"), _route("b", BELOW, 0.0)), EVERY, "cell")
    s1, s2 = _x(EDGE, label="s1"), _x(EDGE, label="s2")
    d = decide_routes(g, [[s1, s2], [_x(20.0, label="s1")]], 0.0025)
    assert d.state == NOT_TESTED and d.reason == "a route for s2"
    d = decide_routes(g, [[not_tested("s1", "m1")], [not_tested("s1", "m2")]], 0.0025)
    assert d.reason == "m1; m2"
    d = decide_routes(g, [[not_tested("s1", "m1")], [not_tested("s1", "m1")]], 0.0025)
    assert d.reason == "m1"
    empty = decide_routes(g, [[], []], 0.0025)
    assert empty == Decision(NOT_TESTED, "G: no stratum", "G: no stratum")
    with pytest.raises(ValueError):  # one list of estimates per route
        decide_routes(g, [[s1]], 0.0025)
