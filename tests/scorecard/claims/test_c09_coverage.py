"""Claim 9 ("forward KL gives more coverage"): control and adversarial tables."""

from __future__ import annotations

import pandas as pd


def test_the_published_picture_is_supported(tb):
    assert tb.judge(tb.paper_main(), 9).verdict == "supported"


def test_equal_pass_at_10_with_a_lower_pass_at_1_is_not_more_coverage(tb):
    # the old rule read pass@10 − pass@1: here it is +4 pp, but pass@10 itself is equal
    cells = tb.main_cells()
    for (_policy, kind, _lr), v in cells.items():
        v["eval/pass@10"] = 0.70
        v["eval/pass@1"] = 0.58 - (0.04 if kind == tb.REV else 0.0)
    r = tb.judge(pd.DataFrame(tb.cells_table(cells) + tb.baseline()), 9)
    assert r.verdict == "contradicted" and "contradicts Δ pass@K > 3 pp" in r.evidence


def test_without_pass_at_k_it_is_not_tested(tb):
    df = tb.paper_main().drop(columns=["eval/pass@10"])
    r = tb.judge(df, 9)
    assert r.verdict == "not tested" and "pass@k at some k > 1" in r.reason
