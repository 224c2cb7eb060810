"""Claim 2 ("KL direction matters more than rollout"): control and adversarial tables."""

from __future__ import annotations

import pandas as pd


def _table(tb, acc: dict, **kw) -> pd.DataFrame:
    return pd.DataFrame(tb.cells_table(tb.main_cells(acc), **kw) + tb.baseline())


def test_the_published_picture_is_supported(tb):
    r = tb.judge(tb.paper_main(), 2)
    assert r.verdict == "supported", r.evidence


def test_a_sign_without_its_size_contradicts(tb):
    # forward KL ahead by 1.5 pp in every cell: the right sign, far below the 5 pp margin
    acc = {k: 0.72 - (0.015 if k[1] == tb.REV else 0.0) for k in tb.PAPER_ACC}
    r = tb.judge(_table(tb, acc), 2)
    assert r.verdict == "contradicted"
    assert "contradicts Δ_KL > 5 pp" in r.evidence


def test_rollout_mattering_more_contradicts(tb):
    # OnPD 20 pp ahead everywhere, forward KL 8 pp ahead: the KL effect is the smaller one
    acc = {
        k: 0.50 + (0.20 if k[0] == tb.ON else 0.0) + (0.08 if k[1] == tb.FWD else 0.0)
        for k in tb.PAPER_ACC
    }
    r = tb.judge(_table(tb, acc), 2)
    assert r.verdict == "contradicted"
    assert "contradicts Δ_KL ∓ Δ_ro > 0" in r.evidence


def test_forward_kl_spread_wider_than_the_band_contradicts(tb):
    acc = dict(tb.PAPER_ACC)
    acc[(tb.ON, tb.FWD, tb.HIGH)] = 0.85  # forward cells span 72–85%
    acc[(tb.OFF, tb.REV, tb.LOW)] = 0.40
    r = tb.judge(_table(tb, acc), 2)
    assert r.verdict == "contradicted" and "contradicts |forward range| < 5 pp" in r.evidence


def test_without_offpd_runs_it_is_not_tested_by_name(tb):
    df = tb.paper_main()
    r = tb.judge(df[df["rollout.policy"] != tb.OFF], 2)
    assert r.verdict == "not tested" and "OnPD/OffPD" in r.reason


def test_noisy_design_is_inconclusive_with_its_reason(tb):
    r = tb.judge(_table(tb, tb.PAPER_ACC, noise=0.06, seed_sd=0.0), 2)
    assert r.verdict == "inconclusive"
    assert "lacks power" in r.reason or "near its margin" in r.reason
