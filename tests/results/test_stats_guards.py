"""The scorecard's statistics, value by value: every function of results/stats.py on numbers
whose answer is known (closed forms, scipy's own routines), including each degenerate branch
and each strict inequality exactly at its edge."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from distillscope.results import stats
from distillscope.results.stats import (
    ALPHA,
    Pair,
    Range,
    beyond,
    bounds,
    cell_range,
    detectable_margin,
    fisher_greater,
    interval,
    linear,
    num,
    pooled,
    pooled_pair,
    pooled_variance,
    pp,
    sample_pair,
    spearman,
    trend,
    versus,
    welch_dof,
    with_variance,
    within,
)

NAN, INF = math.nan, math.inf
T4 = float(sps.t.ppf(0.975, 4))  # 2.7764…


def _nan(*values: float) -> bool:
    return all(math.isnan(v) for v in values)


def test_pair_difference_sem_and_welch_dof():
    p = Pair("k", 5.0, 3.0, 2.0, 4.0, 2.0, 4.0)
    assert (p.diff, p.sem) == (3.0, 5.0)
    assert p.dof == pytest.approx(25.0**2 / (81.0 / 2 + 256.0 / 4), rel=1e-12)
    assert _nan(Pair("k", 1.0, NAN, 0.0, 1.0).sem)


def test_welch_dof_branches():
    assert welch_dof([4.0, 4.0], [3.0, 3.0]) == pytest.approx(6.0)
    assert welch_dof([0.0, 4.0], [NAN, 2.0]) == 2.0  # a zero-variance part carries no weight
    assert welch_dof([0.0, 0.0], [NAN, NAN]) == INF  # no variance at all
    assert welch_dof([], []) == INF
    for variances, dofs in (([NAN], [2.0]), ([4.0], [NAN]), ([4.0], [0.0]), ([4.0], [-1.0])):
        assert _nan(welch_dof(variances, dofs)), (variances, dofs)
    assert welch_dof([4.0], [0.5]) == 0.5  # fractional dofs are fine


def test_t_quantile_is_students():
    assert stats.t_quantile(0.975, 4) == T4
    assert stats.t_quantile(0.975, INF) == pytest.approx(1.959963984540054, rel=1e-12)


def _one_sample(diff: float, sem: float = 1.0, dof: float = 4.0) -> Pair:
    return Pair("k", diff, sem, 0.0, 0.0, dof, INF)


def test_bounds_are_the_one_sided_t_bounds():
    lo, hi = bounds(_one_sample(3.0), ALPHA)
    assert (lo, hi) == (3.0 - T4, 3.0 + T4)
    lo, hi = bounds(_one_sample(3.0), 0.1)
    assert hi - 3.0 == pytest.approx(float(sps.t.ppf(0.9, 4)))
    for p in (
        _one_sample(NAN),
        Pair("k", 1.0, NAN, 0.0, 0.0),
        _one_sample(1.0, dof=NAN),
        _one_sample(1.0, sem=0.0),
    ):
        assert _nan(*bounds(p, ALPHA)), p


def test_beyond_is_strict_at_the_margin():
    p = _one_sample(3.0)
    lo, hi = bounds(p, ALPHA)
    assert beyond(p, lo) == 0 and beyond(p, np.nextafter(lo, -INF)) == 1
    q = _one_sample(-3.0)
    lo, hi = bounds(q, ALPHA)
    assert beyond(q, -hi) == 0 and beyond(q, np.nextafter(-hi, -INF)) == -1
    assert beyond(_one_sample(0.5), 0.0) == 0
    assert beyond(Pair("k", 9.0, NAN, 0.0, 0.0), 0.0) == 0  # one seed: never decides
    assert beyond(_one_sample(3.0, sem=0.0), 0.0) == 0  # no seed variance: never decides


def test_within_is_strict_on_both_sides():
    p = _one_sample(0.5)
    lo, hi = bounds(p, ALPHA)
    m = max(-lo, hi)
    assert within(p, np.nextafter(m, INF)) and not within(p, m)
    q = _one_sample(-0.5)
    lo, hi = bounds(q, ALPHA)
    m = max(-lo, hi)
    assert within(q, np.nextafter(m, INF)) and not within(q, m)
    assert not within(_one_sample(0.0, sem=0.0), 100.0)


def test_interval_texts():
    assert interval(_one_sample(3.0)) == f"[{3.0 - T4:+.1f}, {3.0 + T4:+.1f}]" == "[+0.2, +5.8]"
    assert interval(_one_sample(3.0, sem=0.0)) == (
        "[no seed variance: every seed gave the same value]"
    )
    assert interval(Pair("k", 3.0, NAN, 0.0, 0.0)) == "[no SEM: one seed]"


def test_pooled_variance():
    # sides (SEM 1, ν 2) and (SEM 2, ν 2): s² = SEM² · n, pooled on Σν = 4
    got = pooled_variance([Pair("k", 0.0, 1.0, 0.0, 2.0, 2.0, 2.0)])
    assert got == ((2 * 1 * 3 + 2 * 4 * 3) / 4, 4.0)
    two = [Pair("k", 0.0, 1.0, 0.0, 1.0, 1.0, 1.0), Pair("k", 0.0, 1.0, 0.0, 1.0, 3.0, 3.0)]
    assert pooled_variance(two) == ((2 * 1 * 2 + 2 * 3 * 4) / 8, 8.0)
    assert pooled_variance([]) is None
    for bad in (Pair("k", 0.0, 1.0, 0.0, 1.0, 0.0, 2.0), Pair("k", 0.0, 1.0, 0.0, 1.0, 2.0, INF)):
        assert pooled_variance([bad]) is None, bad
    assert pooled_variance([Pair("k", 0.0, NAN, 0.0, 1.0, 2.0, 2.0)]) is None
    assert pooled_variance([Pair("k", 0.0, 1.0, 0.0, 1.0, 1.0, 1.0)]) == (2.0, 2.0)  # ν = 1 is in


def test_with_variance_splits_the_dof():
    p = with_variance(Pair("cell", 1.0, 9.0, 2.0, 9.0), 8.0, 6.0, 2.0, 8.0)
    assert p == Pair("cell", 1.0, 2.0, 2.0, 1.0, 3.0, 3.0)


def test_pooled_pair_with_known_seed_counts():
    # two cells, 3 seeds a side, seed SD 1 everywhere: SEM 1/√3 a side
    s = 1 / math.sqrt(3)
    cells = [Pair("x", 1.0, s, 0.0, s, 2.0, 2.0), Pair("y", 3.0, s, 1.0, s, 2.0, 2.0)]
    p = pooled_pair(cells, "both")
    assert (p.key, p.a, p.b) == ("both", 2.0, 0.5)
    # mean of 2 cells of 3 seeds = one cell of 6: SEM √(1/6), on 8 dof split between the sides
    assert p.a_sem == pytest.approx(math.sqrt(1 / 6)) and p.b_sem == pytest.approx(math.sqrt(1 / 6))
    assert (p.a_dof, p.b_dof) == (4.0, 4.0) and p.dof == pytest.approx(8.0)


def test_pooled_pair_unequal_seed_counts():
    cells = [Pair("x", 1.0, 1.0, 0.0, 1.0, 1.0, 3.0), Pair("y", 3.0, 1.0, 2.0, 1.0, 1.0, 3.0)]
    p = pooled_pair(cells, "k")
    var = (1 * 1 * 2 * 2 + 3 * 1 * 4 * 2) / 8  # pooled s² over the four sides
    n_a, n_b = 4 / (1 / 2 + 1 / 2), 4 / (1 / 4 + 1 / 4)
    assert p.a_sem == pytest.approx(math.sqrt(var / n_a)) and p.b_sem == pytest.approx(
        math.sqrt(var / n_b)
    )


def test_pooled_pair_without_seed_counts_uses_welch():
    cells = [Pair("x", 1.0, 1.0, 0.0, 2.0), Pair("y", 3.0, 1.0, 2.0, 2.0)]
    p = pooled_pair(cells, "k")
    assert (p.a, p.a_sem, p.b, p.b_sem) == (2.0, math.sqrt(2) / 2, 1.0, math.sqrt(8) / 2)
    assert _nan(p.a_dof, p.b_dof)
    known = [Pair("x", 1.0, 1.0, 0.0, 2.0, 2.0, NAN), Pair("y", 3.0, 1.0, 2.0, 2.0, 2.0, NAN)]
    q = pooled_pair(known, "k")  # side b's seed counts unknown: Welch on side a's dofs
    assert q.a_dof == pytest.approx(4.0) and _nan(q.b_dof)


def test_welch_dof_of_known_variances_is_infinite():
    assert welch_dof([4.0, 4.0], [INF, INF]) == INF


def test_pooled_pair_leaves_one_seed_cells_out_unless_all_are():
    cells = [Pair("x", 1.0, 1.0, 0.0, 1.0, 2.0, 2.0), Pair("one", 50.0, NAN, 0.0, 1.0)]
    assert pooled_pair(cells, "k").a == 1.0
    only = pooled_pair([Pair("one", 5.0, NAN, 1.0, NAN)], "k")
    assert (only.a, only.b) == (5.0, 1.0) and _nan(only.sem)
    empty = pooled_pair([], "k")
    assert empty.key == "k" and _nan(empty.a, empty.a_sem, empty.b, empty.b_sem)


def test_sample_pair():
    p = sample_pair([1.0, 2.0, 3.0, NAN], [5.0], "k")
    assert (p.key, p.a, p.a_sem, p.a_dof) == ("k", 2.0, 1.0 / math.sqrt(3), 2.0)
    assert p.b == 5.0 and _nan(p.b_sem, p.b_dof)
    e = sample_pair([], [NAN], "k")
    assert _nan(e.a, e.a_sem, e.a_dof, e.b, e.b_sem, e.b_dof)
    two = sample_pair([1.0, 3.0], [2.0, 2.0], "k")
    assert (two.a_sem, two.a_dof, two.b_sem, two.b_dof) == (1.0, 1.0, 0.0, 1.0)


def test_pooled_means_and_sems():
    assert pooled([1.0, 3.0], [3.0, 4.0]) == (2.0, 2.5)
    assert pooled([1.0, NAN, 3.0], [1.0, 1.0]) == (2.0, math.sqrt(2) / 2)
    m, s = pooled([1.0, 3.0], [1.0, NAN])
    assert m == 2.0 and _nan(s)
    m, s = pooled([1.0, 3.0], [1.0])
    assert m == 2.0 and _nan(s)  # SEMs must match the means
    assert _nan(*pooled([NAN], [1.0]))


def test_spearman():
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    x, y = [1, 2, 3, 4, 5], [2, 1, 4, 3, 5]
    assert spearman(x, y) == pytest.approx(sps.spearmanr(x, y).statistic, rel=1e-12)
    assert spearman([1, 2, 3, NAN], [1, 2, 3, 0]) == pytest.approx(1.0)  # NaN points left out
    assert _nan(spearman([1, 2], [1, 2]))  # < 3 points
    assert _nan(spearman([1, 2, NAN], [1, 2, 3]))
    assert _nan(spearman([1, 1, 1], [1, 2, 3])) and _nan(spearman([1, 2, 3], [5, 5, 5]))
    assert spearman([1, 2, 2], [1, 2, 3]) == pytest.approx(sps.spearmanr([1, 2, 2], [1, 2, 3])[0])


def test_trend_fits_the_change_over_the_range():
    p = trend(np.array([0.0, 1.0, 2.0, NAN]), np.array([0.0, 1.0, 2.0, 7.0]), "k")
    assert p.key == "k" and p.a == pytest.approx(2.0) and p.a_sem == pytest.approx(0.0, abs=1e-12)
    assert (p.b, p.b_sem, p.a_dof, p.b_dof) == (0.0, 0.0, 1.0, INF)
    x, y = np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.0, 2.0, 1.0, 4.0])
    fit = sps.linregress(x, y)
    q = trend(x, y, "k")
    assert q.a == pytest.approx(fit.slope * 3) and q.a_sem == pytest.approx(fit.stderr * 3)
    r = trend(np.array([0.0, 0.5, 1.0]), np.array([1.0, 2.0, 3.0]), "k")  # 3 points, range 1
    assert r.a == pytest.approx(2.0) and r.a_dof == 1.0
    assert trend(np.array([1.0, 2.0, 3.0]), np.array([NAN, 5.0, 6.0]), "k").a is NAN


@pytest.mark.parametrize(
    ("x", "y"),
    [([0.0, 1.0], [0.0, 1.0]), ([2.0, 2.0, 2.0], [0.0, 1.0, 2.0]), ([0.0, NAN, 2.0], [1, 2, 3])],
)
def test_trend_without_enough_points_or_spread_is_undefined(x, y):
    p = trend(np.array(x, dtype=float), np.array(y, dtype=float), "key")
    assert p.key == "key" and _nan(p.a, p.a_sem) and (p.b, p.b_sem) == (0.0, 0.0)
    assert _nan(p.a_dof, p.b_dof)


def test_a_flat_trend_is_exactly_zero_with_no_residual():
    p = trend(np.array([0.0, 1.0, 2.0, 3.0]), np.array([4.0, 4.0, 4.0, 4.0]), "flat")
    assert p == Pair("flat", 0.0, 0.0, 0.0, 0.0, 2.0, INF)


@pytest.mark.parametrize(
    ("hit_a", "n_a", "hit_b", "n_b"), [(5, 10, 1, 10), (3, 3, 0, 7), (0, 5, 5, 5), (7, 9, 2, 12)]
)
def test_fisher_greater_matches_scipy(hit_a, n_a, hit_b, n_b):
    table = [[hit_a, n_a - hit_a], [hit_b, n_b - hit_b]]
    want = sps.fisher_exact(table, alternative="greater").pvalue
    assert fisher_greater(hit_a, n_a, hit_b, n_b) == pytest.approx(want, rel=1e-12)


def test_fisher_greater_is_exact_at_the_level():
    # 1 way in 120 of putting 3 hits in the 3-run group of 10: p = 1/120 exactly
    assert fisher_greater(3, 3, 0, 7) == 1 / 120
    assert fisher_greater(0, 3, 0, 7) == 1.0


def test_linear_combination_of_contrasts():
    d1, d2 = _one_sample(2.0, sem=1.0, dof=4.0), _one_sample(1.0, sem=2.0, dof=4.0)
    p = linear("lin", [(1.0, d1), (-0.5, d2)])
    assert (p.key, p.a, p.b, p.b_sem, p.b_dof) == ("lin", 1.5, 0.0, 0.0, INF)
    assert p.a_sem == pytest.approx(math.sqrt(1.0 + 0.25 * 4.0))
    assert p.a_dof == pytest.approx(welch_dof([1.0, 1.0], [4.0, 4.0])) == pytest.approx(8.0)


def test_versus_a_fixed_value():
    p = versus("v", 0.25, Pair("x", 0.4, 0.1, 9.0, 9.0, 3.0, 3.0))
    assert p == Pair("v", 0.4, 0.1, 0.25, 0.0, 3.0, INF)


def test_detectable_margin():
    want = (float(sps.t.ppf(0.975, 4)) + float(sps.t.ppf(0.9, 4))) * 2.0
    assert detectable_margin(_one_sample(0.0, sem=2.0)) == pytest.approx(want, rel=1e-12)
    want = (float(sps.t.ppf(0.975, 4)) + float(sps.t.ppf(0.95, 4))) * 2.0
    assert detectable_margin(_one_sample(0.0, sem=2.0), power=0.9) == pytest.approx(want)
    for p in (Pair("k", 0.0, NAN, 0.0, 0.0), _one_sample(0.0, dof=NAN), _one_sample(0.0, 0.0)):
        assert _nan(detectable_margin(p)), p


def _cells(means, sems, runs) -> pd.DataFrame:
    return pd.DataFrame({"mean": means, "sem": sems, "runs": runs})


def test_cell_range_bounds():
    # three cells of 3 seeds, seed SD 1 (SEM 1/√3): pooled s² = 1 on 6 dof
    s = 1 / math.sqrt(3)
    r = cell_range(_cells([0.0, 1.0, 4.0], [s, s, s], [3, 3, 3]), 0.05, 0.1)
    se = math.sqrt(2 / 3)
    assert r.value == 4.0
    assert r.upper == pytest.approx(4.0 + float(sps.t.ppf(0.95, 6)) * se)
    assert r.lower == pytest.approx(4.0 - float(sps.t.ppf(1 - 0.1 / 3, 6)) * se)
    q80 = float(sps.studentized_range.ppf(0.8, 3, 6))
    want = math.sqrt(1 / 3) * (q80 + float(sps.t.ppf(0.95, 6)) * math.sqrt(2))
    assert r.detectable == pytest.approx(want) and _nan(r.best)


def test_cell_range_ignores_one_seed_cells_for_the_variance():
    s = 1 / math.sqrt(3)
    r = cell_range(_cells([0.0, 1.0, 9.0], [s, s, NAN], [3, 3, 1]), 0.05, 0.05)
    assert r.value == 9.0
    se = math.sqrt(1 / 3 + 1 / 1)  # s² = 1 on 4 dof (the one-seed cell adds none)
    assert r.upper == pytest.approx(9.0 + float(sps.t.ppf(0.95, 4)) * se)


@pytest.mark.parametrize(
    "cells",
    [
        _cells([1.0, 2.0], [NAN, NAN], [1, 1]),  # one seed per cell
        _cells([1.0, 2.0], [0.0, 0.0], [3, 3]),  # seeds that all agree
        _cells([1.0], [0.5], [3]),  # one cell
    ],
)
def test_cell_range_without_seed_variance_has_no_bound(cells):
    r = cell_range(cells, 0.05, 0.05)
    assert r.value == float(cells["mean"].max() - cells["mean"].min())
    assert _nan(r.upper, r.lower, r.detectable)


def test_range_text():
    assert Range(4.14, 7.16, -1.0, 3.0).text() == "4.1 pp [≥ 0.0, ≤ 7.2]"
    assert Range(4.14, 7.16, 2.06, 3.0).text() == "4.1 pp [≥ 2.1, ≤ 7.2]"
    assert Range(4.14, NAN, NAN, NAN).text() == "4.1 pp [no seed variance: no bound]"


def test_number_formats():
    assert (pp(3.21), pp(-1.256, 2), pp(0.0), pp(NAN)) == ("+3.2", "-1.26", "+0.0", "n/a")
    assert (num(72.34), num(-0.06), num(1.0, 3), num(NAN)) == ("72.3", "-0.1", "1.000", "n/a")


def test_welch_dof_refuses_unmatched_lengths():
    with pytest.raises(ValueError):
        welch_dof([1.0, 2.0], [3.0])


def test_pooled_pair_welch_dofs_on_unequal_sems():
    # seed counts below 2 on side b (ν = 0.5): no pooled variance, Welch on each side
    cells = [Pair("x", 1.0, 1.0, 0.0, 1.0, 2.0, 0.5), Pair("y", 3.0, 2.0, 2.0, 3.0, 2.0, 0.5)]
    p = pooled_pair(cells, "k")
    assert p.a_dof == pytest.approx(25.0 / (1.0 / 2 + 16.0 / 2))
    assert p.b_dof == pytest.approx(100.0 / (1.0 / 0.5 + 81.0 / 0.5))
    assert (p.a_sem, p.b_sem) == (math.sqrt(5) / 2, math.sqrt(10) / 2)


def test_spearman_with_two_distinct_values_on_one_side():
    x, y = [1.0, 2.0, 3.0], [0.0, 0.0, 1.0]
    assert (
        spearman(x, y)
        == pytest.approx(sps.spearmanr(x, y).statistic)
        == pytest.approx(0.866, abs=1e-3)
    )
    assert spearman(y, x) == pytest.approx(0.866, abs=1e-3)
