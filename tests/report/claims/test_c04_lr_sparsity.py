"""Claim 4 ("LR governs sparsity; OffPD at least as sparse"): control and adversarial tables."""

from __future__ import annotations

import pandas as pd


def _table(tb, cells: dict, **kw) -> pd.DataFrame:
    return pd.DataFrame(tb.cells_table(cells, **kw) + tb.baseline())


def test_the_published_picture_is_supported(tb):
    assert tb.judge(tb.paper_main(), 4).verdict == "supported"


def test_an_lr_effect_wholly_below_the_margin_contradicts(tb):
    # the paper record's picture: 2.3 pp between the LRs against a published 25–35 pp
    cells = tb.main_cells(sparsity={tb.LOW: 0.90, tb.HIGH: 0.877})
    r = tb.judge(_table(tb, cells, seed_sd=0.001, noise=0.0005), 4)
    assert r.verdict == "contradicted" and "contradicts Δ_LR > 10 pp" in r.evidence


def test_one_pair_where_offpd_is_clearly_less_sparse_contradicts(tb):
    cells = tb.main_cells()
    cells[(tb.OFF, tb.REV, tb.HIGH)]["eval/sparsity_bf16_tau1e-06"] -= 0.05
    r = tb.judge(_table(tb, cells, seed_sd=0.002, noise=0.002), 4)
    assert r.verdict == "contradicted"
    assert "OffPD − OnPD [reverse KL, 3e-04]" in r.evidence


def test_fp32_only_tables_are_not_tested_by_name(tb):
    df = tb.paper_main().rename(
        columns={"eval/sparsity_bf16_tau1e-06": "eval/sparsity_fp32_tau1e-06"}
    )
    r = tb.judge(df, 4)
    assert r.verdict == "not tested" and "eval/sparsity_bf16_tau1e-06 of main" in r.reason
