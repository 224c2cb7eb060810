"""Exact counts, Fisher bounds and the F-ratio bounds of ``scorecard.claims.exact``."""

import math

import pytest
from scipy import stats

from distillscope.scorecard.exact import count, observation, share_gap, variance_ratio
from distillscope.scorecard.interval import Bounded, newcombe, wilson


def test_a_count_is_its_own_bound():
    x = count("runs", 3)
    assert x.bounds(0.025) == (3.0, 3.0) and x.decidable()


def test_share_gap_bounds_are_fishers_test():
    # 3/3 vs 0/6: one-sided Fisher p = 1 / C(9, 3) = 1/84 ≈ 0.0119 < 0.025
    x = share_gap("Δ", 3, 3, 0, 6)
    assert x.value == pytest.approx(100.0)
    assert x.p_above == pytest.approx(1 / 84)
    assert x.bounds(0.025) == (100.0, 100.0)  # "less often" is not significant: ceiling 100
    # 1/3 vs 0/6: p = 3/9 · ... = 1/3 — not significant: Newcombe's score bounds, inside
    # the range (never ±100 for want of a test), the lower one not beyond 0
    y = share_gap("Δ", 1, 3, 0, 6)
    assert y.p_above == pytest.approx(1 / 3)
    lo, hi = newcombe(1, 3, 0, 6, 0.025)
    assert y.bounds(0.025) == (pytest.approx(min(100 * lo, 0.0)), pytest.approx(100 * hi))
    assert -100.0 < y.bounds(0.025)[0] < 0.0 < y.bounds(0.025)[1] < 100.0
    # the normal-approximation SE for the power sentence: √(p q / n) summed
    assert y.se == pytest.approx(100 * math.sqrt((1 / 3) * (2 / 3) / 3))


def test_variance_ratio_bounds_are_the_f_quantiles():
    x = variance_ratio("r", 8.0, 6.0, 2.0, 6.0)
    lo, hi = x.bounds(0.025)
    assert x.value == 4.0
    assert lo == pytest.approx(4.0 / stats.f.ppf(0.975, 6, 6))
    assert hi == pytest.approx(4.0 / stats.f.ppf(0.025, 6, 6))
    assert not variance_ratio("r", 1.0, 6.0, 0.0, 6.0).decidable()  # no variance below


def test_an_observation_is_never_decided():
    x = observation("best", 62.0, "one run per condition")
    assert not x.decidable() and math.isnan(x.bounds(0.025)[0])


def test_one_run_per_condition_is_named_as_such():
    from distillscope.scorecard.claim_spec import ABOVE, POOLED, Part
    from distillscope.scorecard.verdicts import ONE_RUN, UNDECIDED, decide_stratum

    part = Part("best", "a cell", lambda v: [], POOLED, ABOVE, 0.0, "an observation", 0.0)
    d = decide_stratum(part, observation("best", 62.0, "one run"), 0.025)
    assert (d.state, d.reason) == (UNDECIDED, ONE_RUN)


def test_wilson_and_newcombe_give_the_published_intervals():
    # Newcombe (1998), Stat. Med. 17: 81/263 → Wilson [0.2553, 0.3662]; 56/70 − 48/80 →
    # hybrid score (method 10) [0.0524, 0.3339], both 95%
    assert wilson(81, 263, 0.025) == pytest.approx((0.2553, 0.3662), abs=1e-4)
    assert newcombe(56, 70, 48, 80, 0.025) == pytest.approx((0.0524, 0.3339), abs=1e-4)


@pytest.mark.parametrize("value,se", [(92.1, 5.5), (2.0, 3.0), (50.0, 10.0), (100.0, 1.0)])
def test_a_bounded_level_stays_inside_its_range(value, se):
    x = Bounded("share", value, se, 4.0, 5)
    lo, hi = x.bounds(0.025)
    assert 0.0 <= lo <= value <= hi <= 100.0
    if 0 < value < 100:  # the logit scale: symmetric there, and so around the value
        u = value / 100
        z = math.log(u / (1 - u))
        q = stats.t.ppf(0.975, 4.0) * se / (100 * u * (1 - u))
        assert (lo, hi) == pytest.approx(
            (100 / (1 + math.exp(-(z - q))), 100 / (1 + math.exp(-(z + q))))
        )
