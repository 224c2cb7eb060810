"""How the scorecard rules are built: keyed on config values, one fit per experiment and metric
per table, and scipy's statistics checked against independent references."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pandas as pd
import pytest

import distillscope.scorecard.contrasts as contrasts
from distillscope.report.grids import main_grid
from distillscope.results.matching import FORWARD_VS_REVERSE, ON_VS_OFF, paired
from distillscope.results.reader import finished_runs
from distillscope.results.stats import fisher_greater, spearman, t_quantile, trend
from distillscope.scorecard import score_claims

# the module, not the function of the same name that distillscope.report exports
aggregate = importlib.import_module("distillscope.results.aggregate")


def _main(synth) -> pd.DataFrame:
    rows = synth.grid("main", synth.main_cells(synth.PAPER_ACC))
    return pd.DataFrame([*rows, synth.baseline_row()])


def test_rules_choose_rows_by_values_not_by_reader_names(synth, monkeypatch):
    df = _main(synth)
    before = {r.id: r for r in score_claims(df, strict=True)}
    monkeypatch.setattr(aggregate, "ROLLOUT_NAMES", {"student": "on-policy", "teacher": "off"})
    monkeypatch.setattr(aggregate, "OBJECTIVE_NAMES", {"forward_kl": "FKL", "reverse_kl": "RKL"})
    after = {r.id: r for r in score_claims(df, strict=True)}  # what the reader sees, only
    assert {i: r.verdict for i, r in after.items()} == {i: r.verdict for i, r in before.items()}
    assert after[1].verdict == "supported"
    # the evidence names the cells as the reader sees them
    assert "Δ_ro [forward KL, " in before[3].evidence and "forward KL" not in after[3].evidence
    assert "Δ_ro [FKL, " in after[3].evidence


def test_a_contrast_pairs_matched_cells_by_value(synth):
    m = main_grid(finished_runs(_main(synth)))
    pairs = paired(m, "eval/accuracy", ON_VS_OFF)
    assert len(pairs) == 4  # KL × LR cells
    flipped = paired(m, "eval/accuracy", ON_VS_OFF.reversed())
    assert [p.diff for p in flipped] == pytest.approx([-p.diff for p in pairs])
    by_kl = paired(m, "eval/accuracy", FORWARD_VS_REVERSE)
    reverse_high_offpd = next(p for p in by_kl if p.key == "OffPD, 5e-05 (high)")
    assert (reverse_high_offpd.a, reverse_high_offpd.b) == pytest.approx((72.0, 35.0))


def test_one_scoring_fits_each_experiment_and_metric_once(synth, monkeypatch):
    fits = []

    class Counted(contrasts.Blocks):
        def __post_init__(self) -> None:
            fits.append((len(self.rows), self.metric))
            super().__post_init__()

    monkeypatch.setattr(contrasts, "Blocks", Counted)
    df = _main(synth)
    score_claims(df, strict=True, claims=[1, 2])
    assert fits == [(24, "eval/accuracy")]  # claims 1 and 2 share the main grid's fit
    score_claims(df.iloc[:-4], strict=True, claims=[1, 2])
    assert fits[1:] == [(21, "eval/accuracy")]  # a new table (the baseline and 3 runs fewer)


def test_t_quantiles_match_tabulated_values():
    # Student's t table (e.g. Abramowitz & Stegun 26.10), and the normal at ν = ∞
    assert t_quantile(0.975, 1) == pytest.approx(12.706205, abs=1e-6)
    assert t_quantile(0.975, 4) == pytest.approx(2.776445, abs=1e-6)
    assert t_quantile(0.975, 16) == pytest.approx(2.119905, abs=1e-6)
    assert t_quantile(0.99, 30) == pytest.approx(2.457262, abs=1e-6)
    assert t_quantile(0.975, math.inf) == pytest.approx(1.959964, abs=1e-6)
    assert t_quantile(0.975, 4.5) < t_quantile(0.975, 4.0)  # fractional Welch ν


def test_spearman_is_the_correlation_of_average_ranks():
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = rng.choice([-2.0, -1.0, 0.0, 0.5, 1.0, 2.0], 9)
        y = np.round(rng.normal(size=9), 1)  # ties on both sides
        ranks = pd.DataFrame({"x": x, "y": y}).rank()
        reference = float(np.corrcoef(ranks["x"], ranks["y"])[0, 1])
        assert spearman(x, y) == pytest.approx(reference, abs=1e-12)
    assert math.isnan(spearman([1.0, 2.0], [3.0, 4.0]))  # < 3 points
    assert math.isnan(spearman([1.0, 2.0, 3.0], [5.0, 5.0, 5.0]))  # no spread
    assert spearman([1.0, 2.0, math.nan, 3.0], [1.0, 4.0, 0.0, 9.0]) == pytest.approx(1.0)


def test_trend_is_the_least_squares_change_with_its_residual_error():
    rng = np.random.default_rng(1)
    x = np.log10(np.repeat([1e-5, 3e-5, 1e-4, 3e-4], 3))
    y = 80.0 - 12.0 * (x - x.min()) + rng.normal(0.0, 1.5, len(x))
    p = trend(x, y, "sparsity")
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (slope * x + intercept)
    sxx = float(((x - x.mean()) ** 2).sum())
    se = math.sqrt(float((resid**2).sum()) / (len(x) - 2) / sxx)
    span = float(np.ptp(x))
    assert p.a == pytest.approx(slope * span, rel=1e-9)
    assert p.a_sem == pytest.approx(se * span, rel=1e-9)
    assert (p.b, p.b_sem, p.a_dof, p.b_dof) == (0.0, 0.0, len(x) - 2, math.inf)
    flat = trend(x, np.full(len(x), 50.0), "flat")
    assert (flat.a, flat.a_sem) == (0.0, 0.0)  # no residual: "no seed variance", not a NaN
    assert math.isnan(trend(x[:2], y[:2], "short").a)


def test_fisher_exact_tail_is_exact():
    # 3 of 3 runs flagged in group a, 0 of 3 in b: P(X ≥ 3) = C(3,3) C(3,0) / C(6,3) = 1/20
    assert fisher_greater(3, 3, 0, 3) == 1 / 20
    assert fisher_greater(3, 3, 0, 7) == 1 / 120 and fisher_greater(0, 3, 0, 3) == 1.0
