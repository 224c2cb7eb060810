"""Exact counts, Fisher bounds and the F-ratio bounds of ``report.claims.exact``."""

import math

import pytest
from scipy import stats

from distillscope.report.claims.exact import count, observation, share_gap, variance_ratio


def test_a_count_is_its_own_bound():
    x = count("runs", 3)
    assert x.bounds(0.025) == (3.0, 3.0) and x.decidable()


def test_share_gap_bounds_are_fishers_test():
    # 3/3 vs 0/6: one-sided Fisher p = 1 / C(9, 3) = 1/84 ≈ 0.0119 < 0.025
    x = share_gap("Δ", 3, 3, 0, 6)
    assert x.value == pytest.approx(100.0)
    assert x.p_above == pytest.approx(1 / 84)
    assert x.bounds(0.025) == (100.0, 100.0)  # "less often" is not significant: ceiling 100
    # 1/3 vs 0/6: p = 3/9 · ... = 1/3 — not significant: the lower bound is the floor
    y = share_gap("Δ", 1, 3, 0, 6)
    assert y.p_above == pytest.approx(1 / 3)
    assert y.bounds(0.025) == (-100.0, 100.0)
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
    from distillscope.report.claims.spec import ABOVE, POOLED, Part
    from distillscope.report.verdicts import ONE_RUN, UNDECIDED, decide_stratum

    part = Part("best", "a cell", lambda v: [], POOLED, ABOVE, 0.0, "an observation", 0.0)
    d = decide_stratum(part, observation("best", 62.0, "one run"), 0.025)
    assert (d.state, d.reason) == (UNDECIDED, ONE_RUN)
