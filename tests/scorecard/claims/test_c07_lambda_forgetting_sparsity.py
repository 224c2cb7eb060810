"""Claim 7 ("λ barely moves forgetting or sparsity"): control and adversarial tables on the
λ-spectrum, with the main grid's LR effect as the premise."""

from __future__ import annotations

import math

import pandas as pd

FORGET, SPARSE = "eval/forgetting_pp", "eval/sparsity_bf16_tau1e-06"


def flat(kind: str, lam: float, lr: float) -> dict:
    """λ moves neither metric (forgetting −1 pp, sparsity 87.5%)."""
    return {FORGET: -1.0, SPARSE: 0.875, "eval/accuracy": 0.72}


def _with_main(tb, spectrum: pd.DataFrame, main: pd.DataFrame | None = None) -> pd.DataFrame:
    main = tb.paper_main() if main is None else main
    return pd.concat([spectrum, main[main["experiment"] == "main"]], ignore_index=True)


def test_a_flat_spectrum_beside_a_large_lr_effect_is_supported(tb):
    r = tb.judge(_with_main(tb, tb.spectrum_table(flat)), 7)
    assert r.verdict == "supported", r.evidence


def test_forgetting_moving_under_one_kl_only_contradicts(tb):
    def cell(kind, lam, lr):
        return {**flat(kind, lam, lr), FORGET: -1.0 - 5.0 * lam * (kind == "reverse_kl")}

    r = tb.judge(_with_main(tb, tb.spectrum_table(cell)), 7)
    assert r.verdict == "contradicted"
    assert "forgetting range [reverse KL" in r.evidence or "forgetting range [" in r.evidence


def test_without_a_larger_lr_effect_it_is_not_applicable(tb):
    main = pd.DataFrame(
        tb.cells_table(tb.main_cells(forget={tb.LOW: -1.0, tb.HIGH: -1.0}), seed_sd=0.002)
    )
    r = tb.judge(_with_main(tb, tb.spectrum_table(flat), main), 7)
    assert r.verdict == "not applicable" and "Δ_LR > 3 pp" in r.reason


def test_without_the_main_grid_it_is_not_tested(tb):
    r = tb.judge(tb.spectrum_table(flat), 7)
    assert r.verdict == "not tested"


def test_the_spectrum_only_in_another_experiment_is_not_tested(tb):
    r = tb.judge(_with_main(tb, tb.spectrum_table(flat, experiment="spectrum_b")), 7)
    assert r.verdict == "not tested" and "λ" in r.reason


def test_duplicated_rows_count_once(tb):
    df = _with_main(tb, tb.spectrum_table(flat))
    once, twice = tb.judge(df, 7), tb.judge(pd.concat([df, df], ignore_index=True), 7)
    assert (twice.verdict, twice.headline) == (once.verdict, once.headline)


def test_a_nan_metric_is_not_tested_by_name(tb):
    df = _with_main(tb, tb.spectrum_table(flat))
    df.loc[df.index[2], SPARSE] = math.nan
    r = tb.judge(df, 7)
    assert r.verdict == "not tested" and SPARSE in r.reason
