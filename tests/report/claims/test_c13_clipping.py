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
