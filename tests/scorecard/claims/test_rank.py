"""Rank correlations of a fit's cells (``scorecard.rank``): ρ as scipy computes it, bounds drawn
from the seed-blocked fit, the same on every run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from distillscope.scorecard.estimate import Blocks
from distillscope.scorecard.rank import DRAWS, rank_correlation, spearman_rows


def test_spearman_rows_is_scipys_rho_row_by_row_with_tied_axis_values():
    gen = np.random.default_rng(3)
    x = np.array([1.0, 2.0, 2.0, 4.0, 5.0, 7.0])
    y = gen.normal(size=(20, len(x)))
    want = [stats.spearmanr(x, row).statistic for row in y]
    assert spearman_rows(y, x) == pytest.approx(want, abs=1e-12)


def _fit(step: float, sd: float) -> Blocks:
    """Five LRs × 3 seeds, y = step × rank + a seed effect + noise of SD ``sd``."""
    gen = np.random.default_rng(0)
    rows = [
        {"optim.lr": lr, "seed": s, "m": step * i + 0.5 * s + gen.normal(0, sd)}
        for i, lr in enumerate((1e-5, 2e-5, 5e-5, 1e-4, 3e-4))
        for s in range(3)
    ]
    return Blocks(pd.DataFrame(rows), "m", ["optim.lr"])


def test_a_steep_curve_has_rho_one_and_bounds_at_one():
    b = _fit(step=10.0, sd=0.1)
    x = b.cells["optim.lr"].to_numpy(dtype=float)
    r = rank_correlation(b, np.arange(5), x, "ρ")
    assert r.value == 1.0 and r.bounds(0.025) == (1.0, 1.0) and len(r.draws) == DRAWS


def test_a_flat_curve_has_wide_bounds_and_the_same_ones_each_time():
    b = _fit(step=0.0, sd=1.0)
    x = b.cells["optim.lr"].to_numpy(dtype=float)
    first = rank_correlation(b, np.arange(5), x, "ρ").bounds(0.025)
    again = rank_correlation(b, np.arange(5), x, "ρ").bounds(0.025)
    assert first == again and first[0] < -0.8 and first[1] > 0.0  # decides no trend
