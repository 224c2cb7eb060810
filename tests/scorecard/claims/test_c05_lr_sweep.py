"""Claim 5 ("sparsity falls, forgetting rises monotonically with LR; OffPD forgets less"):
control and adversarial tables on the LR sweep."""

from __future__ import annotations

import math

import pandas as pd

LRS = (1e-5, 2e-5, 5e-5, 1e-4, 3e-4)
SPARSE, FORGET = "eval/sparsity_bf16_tau1e-06", "eval/forgetting_pp"


def _cells(tb, sparsity=None, forget=None, offpd_less: float = 1.0) -> dict:
    """Sweep cells: sparsity 88% → 56% and forgetting_pp −1 → −12.6 over the LRs."""
    sparsity = sparsity or (lambda i: 0.875 - 0.08 * i)
    forget = forget or (lambda i: -1.0 - 2.9 * i)
    return {
        (p, k, lr): {SPARSE: sparsity(i), FORGET: forget(i) + (offpd_less if p == tb.OFF else 0)}
        for i, lr in enumerate(LRS)
        for p in (tb.ON, tb.OFF)
        for k in (tb.FWD, tb.REV)
    }


def _table(tb, cells: dict, experiment: str = "lr_sweep", **kw) -> pd.DataFrame:
    kw = {"seed_sd": 0.01, "noise": 0.002, **kw}
    return pd.DataFrame(tb.cells_table(cells, experiment=experiment, **kw) + tb.baseline())


def test_the_published_sweep_is_supported(tb):
    r = tb.judge(_table(tb, _cells(tb)), 5)
    assert r.verdict == "supported", r.evidence
    assert "ρ_sparsity [OnPD, forward KL]" in r.evidence or "ρ_sparsity [" in r.evidence


def test_a_series_rising_against_the_others_is_not_pooled_away(tb):
    cells = _cells(tb)
    for i, lr in enumerate(LRS):  # one series' sparsity rises with the LR
        cells[(tb.OFF, tb.REV, lr)][SPARSE] = 0.56 + 0.08 * i
    r = tb.judge(_table(tb, cells), 5)
    assert r.verdict == "contradicted"
    assert "contradicts ρ_sparsity < -0.8" in r.evidence


def test_a_turning_curve_is_not_monotone(tb):
    # sparsity falls then rises: a sign between the ends, but no monotone trend (ρ = 0)
    r = tb.judge(_table(tb, _cells(tb, sparsity=lambda i: 0.60 + 0.04 * (i - 2) ** 2)), 5)
    assert r.verdict != "supported"


def test_offpd_forgetting_more_beyond_uncertainty_contradicts(tb):
    r = tb.judge(_table(tb, _cells(tb, offpd_less=-2.0)), 5)
    assert r.verdict == "contradicted" and "contradicts OffPD − OnPD > 0 pp" in r.evidence


def test_the_sweep_only_in_another_experiment_is_not_tested(tb):
    r = tb.judge(_table(tb, _cells(tb), experiment="main"), 5)
    assert r.verdict == "not tested" and "lr_sweep" in r.reason


def test_duplicated_rows_count_once(tb):
    df = _table(tb, _cells(tb))
    once = tb.judge(df, 5)
    twice = tb.judge(pd.concat([df, df], ignore_index=True), 5)
    assert (twice.verdict, twice.headline) == (once.verdict, once.headline)


def test_a_one_seed_cell_is_not_tested_by_name(tb):
    df = _table(tb, _cells(tb))
    cell = (df["rollout.policy"] == tb.OFF) & (df["objective.kind"] == tb.REV)
    df = df[~(cell & (df["optim.lr"] == LRS[2]) & (df["seed"] != 42))]
    r = tb.judge(df, 5)
    assert r.verdict == "not tested" and "fewer than 2 seeds" in r.reason


def test_a_nan_metric_is_not_tested_by_name(tb):
    df = _table(tb, _cells(tb))
    df.loc[df.index[0], SPARSE] = math.nan
    r = tb.judge(df, 5)
    assert r.verdict == "not tested" and SPARSE in r.reason


def test_a_null_sweep_is_not_supported(tb):
    r = tb.judge(_table(tb, _cells(tb, lambda i: 0.8, lambda i: -1.0, 0.0)), 5)
    assert r.verdict != "supported"
