"""Claim 10 ("on-policy helps on the harder variant"): control and adversarial tables."""

from __future__ import annotations

import pandas as pd

HARD = "eval/harder/pass@10"


def _with_gain(tb, gain: dict) -> pd.DataFrame:
    cells = tb.main_cells()
    for key, v in cells.items():
        v[HARD] = 0.30 + (gain[key[1:]] if key[0] == tb.ON else 0.0)
    return pd.DataFrame(tb.cells_table(cells) + tb.baseline())


def test_the_published_picture_is_supported(tb):
    assert tb.judge(tb.paper_main(), 10).verdict == "supported"


def test_a_gain_pooled_over_lrs_that_reverses_at_one_lr_contradicts(tb):
    # +16 pp at the low LR, −4 pp at the high LR: a +6 pp pooled gain that is not consistent
    gain = {
        (k, lr): 0.16 if lr == tb.LOW else -0.04
        for k in (tb.FWD, tb.REV)
        for lr in (tb.LOW, tb.HIGH)
    }
    r = tb.judge(_with_gain(tb, gain), 10)
    assert r.verdict == "contradicted" and "gain at LR [3e-04]" in r.evidence


def test_a_small_gain_is_a_sign_without_its_size(tb):
    gain = {(k, lr): 0.025 for k in (tb.FWD, tb.REV) for lr in (tb.LOW, tb.HIGH)}
    r = tb.judge(_with_gain(tb, gain), 10)
    assert r.verdict == "contradicted" and "contradicts gain > 5 pp" in r.evidence


def test_the_gain_under_one_direction_only_is_not_supported(tb):
    gain = {
        (k, lr): 0.125 if k == tb.FWD else 0.0 for k in (tb.FWD, tb.REV) for lr in (tb.LOW, tb.HIGH)
    }
    assert tb.judge(_with_gain(tb, gain), 10).verdict == "contradicted"
