"""The seed-blocked estimates: the two-way fit against hand computation, missing seeds, levels,
ranges, and the coverage of blocked intervals on tables with a shared seed effect."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from distillscope.scorecard.estimate import Blocks, Estimate, RangeEstimate, seed_level

ACC = "eval/accuracy"


def _rows(values: dict[tuple[str, int], float]) -> pd.DataFrame:
    """Rows {(cell, seed): accuracy (fraction)} with the cell in column ``c.x``."""
    return pd.DataFrame(
        [{"c.x": c, "seed": s, ACC: v} for (c, s), v in values.items()],
    )


def test_two_cells_are_the_paired_t_test():
    a = [0.70, 0.75, 0.62, 0.71]
    b = [0.65, 0.69, 0.60, 0.70]
    values = {**{("a", s): v for s, v in enumerate(a)}, **{("b", s): v for s, v in enumerate(b)}}
    rows = _rows(values)
    blk = Blocks(rows, ACC, ["c.x"])
    x = blk.difference(blk.mask(c__x="a"), blk.mask(c__x="b"), "a − b")
    d = 100 * (np.array(a) - np.array(b))
    assert x.value == pytest.approx(d.mean())
    assert x.se == pytest.approx(d.std(ddof=1) / 2)  # sd / √4
    assert x.dof == 3
    lo, hi = x.bounds(0.025)
    half = stats.t.ppf(0.975, 3) * d.std(ddof=1) / 2
    assert (lo, hi) == pytest.approx((d.mean() - half, d.mean() + half))


def test_a_seed_missing_on_one_side_leaves_its_pair_and_is_named():
    vals = {("a", 0): 0.5, ("a", 1): 0.6, ("a", 2): 0.7, ("b", 0): 0.4, ("b", 1): 0.52}
    blk = Blocks(_rows(vals), ACC, ["c.x"])
    x = blk.difference(blk.mask(c__x="a"), blk.mask(c__x="b"), "a − b")
    assert x.value == pytest.approx(100 * ((0.1 + 0.08) / 2))  # seed 2 has no pair
    assert x.dof == 1 and "seed(s) 2 missing" in x.note


def test_a_one_seed_cell_is_not_tested_by_name():
    vals = {("a", 0): 0.5, ("a", 1): 0.6, ("b", 0): 0.4}
    blk = Blocks(_rows(vals), ACC, ["c.x"])
    x = blk.difference(blk.mask(c__x="a"), blk.mask(c__x="b"), "a − b")
    assert x.missing == "x=b has fewer than 2 seeds"


def test_an_exactly_additive_table_has_no_variance():
    vals = {(c, s): 0.5 + 0.1 * (c == "a") + 0.05 * s for c in "ab" for s in range(3)}
    blk = Blocks(_rows(vals), ACC, ["c.x"])
    x = blk.difference(blk.mask(c__x="a"), blk.mask(c__x="b"), "a − b")
    assert x.value == pytest.approx(10.0) and x.se == 0.0 and not x.decidable()


def test_level_uses_the_seed_as_replicate_and_a_reference_per_seed():
    vals = {(c, s): 0.5 + 0.1 * s + 0.01 * (c == "a") for c in "ab" for s in range(3)}
    rows = _rows(vals)
    blk = Blocks(rows, ACC, ["c.x"])
    x = blk.level(np.array([True, True]), "mean")
    per_seed = [50.5, 60.5, 70.5]
    assert x.value == pytest.approx(60.5) and x.se == pytest.approx(10 / math.sqrt(3))
    ref = pd.DataFrame({"seed": [0, 1, 2], ACC: [0.4, 0.5, 0.6]})
    y = seed_level(rows, ACC, "gain", ref)
    assert y.value == pytest.approx(np.mean(per_seed) - 50) and y.se == pytest.approx(0.0, abs=1e-9)


def test_range_bounds_intersection_union_above_bonferroni_below():
    x = RangeEstimate("r", 4.0, 1.0, 10.0, 3, diffs=(4.0, 1.0, 3.0), ses=(1.0, 1.0, 1.0))
    lo, hi = x.bounds(0.025)
    assert hi == pytest.approx(4.0 + stats.t.ppf(0.975, 10))
    assert lo == pytest.approx(max(0.0, 4.0 - stats.t.ppf(1 - 0.025 / 3, 10)))


def test_reach_is_the_distance_decided_at_80_percent_power():
    x = Estimate("x", 0.0, 2.0, 8.0, 9)
    assert x.reach(0.025) == pytest.approx((stats.t.ppf(0.975, 8) + stats.t.ppf(0.8, 8)) * 2)
    assert x.reach(0.025, two_sided=True) > x.reach(0.025)


def _coverage(sims: int, rng: np.random.Generator) -> tuple[float, float, float]:
    """Coverage of 95% intervals on 8 cells × 3 seeds (the main grid's shape) with a shared
    seed effect (SD 3 pp) and run noise (SD 1 pp), true cell means 60 (cells 0–3) and 65 (4–7):
    the blocked contrast (cell 4 − cell 0), the blocked level (mean of all cells), and the
    unpaired level (cells as independent samples: SE √(Σ s_c² / n_c) / C, Welch's ν)."""
    means = np.repeat([60.0, 65.0], 4)
    hit = np.zeros(3)
    for _ in range(sims):
        y = means[:, None] + rng.normal(0, 3.0, 3)[None, :] + rng.normal(0, 1.0, (8, 3))
        rows = pd.DataFrame(
            [{"c.x": str(c), "seed": s, "m/pp": y[c, s]} for c in range(8) for s in range(3)]
        )
        blk = Blocks(rows, "m/pp", ["c.x"])
        diff = blk.difference(blk.mask(c__x="4"), blk.mask(c__x="0"), "d")
        level = blk.level(np.ones(8, bool), "level")
        var = y.var(axis=1, ddof=1) / 3
        unpaired = Estimate("unpaired", y.mean(), math.sqrt(var.sum()) / 8, 16.0, 3)
        for k, (x, truth) in enumerate(((diff, 5.0), (level, 62.5), (unpaired, 62.5))):
            lo, hi = x.bounds(0.025)
            hit[k] += lo < truth < hi
    return tuple(hit / sims)


@pytest.mark.slow  # 300 fits: ≈ 3 s idle, more on a loaded machine
def test_blocked_intervals_cover_at_their_level_and_unpaired_ones_do_not():
    diff, level, unpaired = _coverage(300, np.random.default_rng(20261202))
    # 300 draws: a coverage of 0.95 has binomial SD 0.0126; allow 3 SD
    assert diff == pytest.approx(0.95, abs=0.038)
    assert level == pytest.approx(0.95, abs=0.038)
    # cells of one seed share its effect: the unpaired SE is ≈ 0.37× the level's true SD,
    # so its 95% interval covers ≈ 57% (normal approximation); far below the nominal level
    assert unpaired < 0.75
