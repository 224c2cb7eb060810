"""Claim 13 ("clipping is active; reverse-KL norms are larger"): control and adversarial."""

from __future__ import annotations

import pandas as pd


def test_the_published_picture_is_supported(tb):
    assert tb.judge(tb.paper_main(), 13).verdict == "supported"


def test_rare_clipping_contradicts(tb):
    cells = tb.main_cells()
    for v in cells.values():
        v["train/grad_clipped_frac"] = 0.30
    r = tb.judge(pd.DataFrame(tb.cells_table(cells) + tb.baseline()), 13)
    assert r.verdict == "contradicted" and "contradicts clipped share > 80 %" in r.evidence


def test_a_nan_norm_is_not_tested_by_name(tb):
    df = tb.paper_main()
    df.loc[df.index[0], "train/grad_norm_mean"] = float("nan")
    r = tb.judge(df, 13)
    assert r.verdict == "not tested" and "train/grad_norm_mean of main in 1 run(s)" in r.reason


def test_one_kl_lr_cell_rarely_clipped_is_not_pooled_away(tb):
    # forward KL at the high LR clipped on 30% of its steps, every other cell on 100%: the pooled
    # share (≈ 82%) would pass; per KL × LR cell it contradicts
    cells = tb.main_cells()
    for (_policy, kind, lr), v in cells.items():
        v["train/grad_clipped_frac"] = 0.30 if (kind, lr) == (tb.FWD, tb.HIGH) else 1.0
    r = tb.judge(pd.DataFrame(tb.cells_table(cells) + tb.baseline()), 13)
    assert r.verdict == "contradicted", r.evidence
    assert "clipped share [forward KL" in r.evidence


def test_it_is_an_instrument_check(tb):
    r = tb.judge(tb.paper_main(), 13)
    assert r.instrument and r.quotes
