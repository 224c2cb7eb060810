"""Coverage of the seed-blocked intervals on tables drawn by ``calibrate.draw`` with a shared
seed effect, against the unpaired analysis (cells as independent samples) on the same tables.

Design: 4 cells × 5 seeds under the null (every cell at 50%); per run a seed effect of SD 3 pp
shared by the cells of its seed, training noise 1 pp and binomial evaluation noise on 200 items ×
4 samples (1.77 pp). Two-sided 90% intervals (two one-sided 95% bounds), R = 300 tables; a
coverage's Monte Carlo SE is √(0.9 · 0.1 / 300) = 1.7 pp, and the bounds are 3 SEs.

Measured (seed 0; seed 5): blocked contrast (cell 1 − cell 0, paired by seed) 90.7%; 91.0%;
blocked level (the mean of the 4 cells, per-seed means on S − 1 dof) 88.3%; 92.3%. Unpaired
level (cell SEMs combined as independent, Welch–Satterthwaite dof) 65.3%; 66.3%: its SE ignores
that the cells of a seed share σ_β² (true SE² = σ_β²/S + σ_ε²/(CS) = 2.01 pp², the unpaired
estimate ≈ (σ_β² + σ_ε²)/(CS) = 0.66 pp²: 1.75× too small). The unpaired contrast over-covers
(98.3%; 99.3%): it counts the shared seed effect, which cancels, as noise.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from distillscope.scorecard import calibrate as cal
from distillscope.scorecard.estimate import Blocks
from distillscope.scorecard.noise import Components

ACC = "eval/accuracy"
CELLS, SEEDS, TABLES, NOMINAL = 4, 5, 300, 0.90
MC_SE = math.sqrt(NOMINAL * (1 - NOMINAL) / TABLES)
NOISE = {ACC: Components(0.03, 0.01, 200, 4, None, "accuracy", 1, 0.5)}


def _design() -> pd.DataFrame:
    rows = [
        {"run_id": f"c{c}-s{s}", "experiment": "main", "optim.lr": 1e-5 * (c + 1), "seed": s}
        for c in range(CELLS)
        for s in range(SEEDS)
    ]
    return cal.design(pd.DataFrame(rows))


def _welch(means: np.ndarray, sems: np.ndarray, n: int, weights: np.ndarray) -> tuple:
    """Σ w_c mean_c with SE √Σ w_c² SEM_c² on Welch–Satterthwaite dof (cells independent)."""
    var = weights**2 * sems**2
    dof = var.sum() ** 2 / (var**2 / (n - 1)).sum()
    return float(weights @ means), math.sqrt(var.sum()), dof


def _covers(value: float, se: float, dof: float, truth: float) -> bool:
    half = stats.t.ppf(1 - (1 - NOMINAL) / 2, dof) * se
    return value - half <= truth <= value + half


def _coverages(rng: np.random.Generator) -> dict[str, float]:
    d = _design()
    hits = dict.fromkeys(("blocked contrast", "blocked level", "welch contrast", "welch level"), 0)
    contrast, level = np.array([-1.0, 1.0, 0.0, 0.0]), np.full(CELLS, 1.0 / CELLS)
    for _ in range(TABLES):
        table = cal.draw(d, "null", [ACC], NOISE, {ACC: 0.5}, rng)
        blocks = Blocks(table, ACC, ["optim.lr"])
        diff = blocks.difference(blocks.mask(optim__lr=2e-5), blocks.mask(optim__lr=1e-5), "d")
        lev = blocks.level(np.ones(CELLS, bool), "level")
        hits["blocked contrast"] += _covers(diff.value, diff.se, diff.dof, 0.0)
        hits["blocked level"] += _covers(lev.value, lev.se, lev.dof, 50.0)
        g = (100 * table[ACC]).groupby(table["optim.lr"])
        means, sems = g.mean().to_numpy(), (g.std(ddof=1) / math.sqrt(SEEDS)).to_numpy()
        hits["welch contrast"] += _covers(*_welch(means, sems, SEEDS, contrast), 0.0)
        hits["welch level"] += _covers(*_welch(means, sems, SEEDS, level), 50.0)
    return {k: v / TABLES for k, v in hits.items()}


def test_blocked_intervals_cover_and_unpaired_levels_do_not():
    cov = _coverages(np.random.default_rng(0))
    assert cov["blocked contrast"] == pytest.approx(NOMINAL, abs=3 * MC_SE), cov
    assert cov["blocked level"] == pytest.approx(NOMINAL, abs=3 * MC_SE), cov
    assert cov["welch level"] < NOMINAL - 3 * MC_SE, cov  # the shared seed effect ignored
    assert cov["welch contrast"] > NOMINAL + 3 * MC_SE, cov  # it cancels, yet counted


def test_cells_of_one_seed_share_its_effect():
    """Without training and evaluation noise, a table is cell value + seed effect: every cell
    of a seed moves by the same draw, and two seeds differ."""
    noise = {ACC: Components(0.03, 0.0, 0, 0, None)}
    table = cal.draw(_design(), "null", [ACC], noise, {ACC: 0.5}, np.random.default_rng(1))
    per_seed = table.groupby("seed")[ACC].agg(["min", "max"])
    assert (per_seed["max"] - per_seed["min"]).abs().max() < 1e-12
    assert per_seed["min"].nunique() == SEEDS
