"""Claim 8 (an instrument check: "trajectory likelihoods move with λ as intended"): the
log-likelihood gap's rank correlation with λ is judged; the token probabilities are shown."""

from __future__ import annotations

import math

import pandas as pd

S, T = "rollout/student_token_prob_mean", "rollout/teacher_token_prob_mean"
G = "rollout/loglik_gap_mean"
#: The probabilities are not stored as fractions: the builder scales their noise 100×.
NOISE = {"seed_sd": 0.0001, "noise": 0.00005}


def intended(kind: str, lam: float, lr: float) -> dict:
    """The log-likelihood gap rises with λ (student-token probability rises, teacher-token
    probability falls)."""
    return {G: 0.4 * lam, S: 0.5 + 0.1 * lam, T: 0.6 - 0.08 * lam, "eval/accuracy": 0.72}


def test_the_intended_movement_is_supported(tb):
    r = tb.judge(tb.spectrum_table(intended, lrs=(tb.LOW, tb.HIGH), **NOISE), 8)
    assert r.verdict == "supported", r.evidence


def test_one_curve_moving_the_wrong_way_is_not_pooled_away(tb):
    def cell(kind, lam, lr):
        return {**intended(kind, lam, lr), G: 0.4 * lam * (1 - 2 * (kind == "reverse_kl"))}

    r = tb.judge(tb.spectrum_table(cell, **NOISE), 8)
    assert r.verdict == "contradicted" and "ρ_gap [reverse KL" in r.evidence


def test_a_flat_gap_is_not_supported(tb):
    def cell(kind, lam, lr):
        return {**intended(kind, lam, lr), G: 0.1}

    assert tb.judge(tb.spectrum_table(cell, **NOISE), 8).verdict != "supported"


def test_the_token_probabilities_are_shown_not_judged(tb):
    # a student-token probability that falls with λ (possible: the mix moves the gap, not each
    # probability) does not decide the check; it is shown in the evidence
    def cell(kind, lam, lr):
        return {**intended(kind, lam, lr), S: 0.5 - 0.1 * lam}

    r = tb.judge(tb.spectrum_table(cell, **NOISE), 8)
    assert r.verdict == "supported", r.evidence
    assert "shown, not judged: ρ_student-prob" in r.evidence


def test_runs_without_the_gap_are_not_tested_by_name(tb):
    df = tb.spectrum_table(intended, **NOISE).drop(columns=[G])
    r = tb.judge(df, 8)
    assert r.verdict == "not tested" and G in r.reason


def test_the_spectrum_only_in_another_experiment_is_not_tested(tb):
    r = tb.judge(tb.spectrum_table(intended, experiment="main", **NOISE), 8)
    assert r.verdict == "not tested"


def test_duplicated_rows_count_once(tb):
    df = tb.spectrum_table(intended, **NOISE)
    once, twice = tb.judge(df, 8), tb.judge(pd.concat([df, df], ignore_index=True), 8)
    assert (twice.verdict, twice.headline) == (once.verdict, once.headline)


def test_a_one_seed_cell_is_not_tested_by_name(tb):
    df = tb.spectrum_table(intended, **NOISE)
    cell = (df["objective.kind"] == "forward_kl") & (df["rollout.lam"] == 0.0)
    r = tb.judge(df[~(cell & (df["seed"] != 42))], 8)
    assert r.verdict == "not tested" and "fewer than 2 seeds" in r.reason


def test_a_nan_metric_is_not_tested_by_name(tb):
    df = tb.spectrum_table(intended, **NOISE)
    df.loc[df.index[1], G] = math.nan
    r = tb.judge(df, 8)
    assert r.verdict == "not tested" and G in r.reason
