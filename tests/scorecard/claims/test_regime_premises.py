"""Regime premises (docs/method.md §9 "Regime premises"), over the whole claim registry: for
every claim with one, a table where its regime is absent — or not measured — is never decided
(neither supported nor contradicted), while the same table with the regime present is judged.

Each table is the paper preset's design drawn in calibration's planted world (the published
effects, every regime present); ``ABSENT`` takes one claim's regime away. A claim that gains a
regime premise without an entry here fails ``test_every_regime_premise_has_an_absent_case``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from distillscope.results.aggregate import is_baseline
from distillscope.scorecard.calibrate import planned_table, simulate
from distillscope.scorecard.claim_columns import ACC, SPARSITY
from distillscope.scorecard.claims import CLAIMS
from distillscope.scorecard.runner import score_claims
from distillscope.study.spec import expand, load_spec
from distillscope.study.table import plan_row

DECIDED = ("supported", "contradicted")
REGIME = {c.id: [p for p in c.premises if p.regime] for c in CLAIMS}
REGIME = {i: ps for i, ps in REGIME.items() if ps}


def _of(df: pd.DataFrame, experiment: str) -> pd.Series:
    return df["experiment"].map(str) == experiment


def _floor(experiment: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """Sparsity on its floor: the experiment's bf16 sparsity at 5% of its planted level."""

    def edit(df: pd.DataFrame) -> pd.DataFrame:
        df.loc[_of(df, experiment), SPARSITY] *= 0.06
        return df

    return edit


def _no_style_support(df: pd.DataFrame) -> pd.DataFrame:
    df.loc[is_baseline(df), "eval/style_share_t1"] = 0.0
    return df


def _no_latent_capability(df: pd.DataFrame) -> pd.DataFrame:
    passes = [c for c in df.columns if c.startswith("eval/pass@")]
    df.loc[is_baseline(df), passes] = 0.0
    return df


def _grpo_stuck(df: pd.DataFrame) -> pd.DataFrame:
    """GRPO ends where the untrained student starts: accuracy and reward 0 in every seed."""
    grpo = _of(df, "grpo")
    df.loc[grpo, ["rlvr/eval_accuracy", "rlvr/reward_final", "rlvr/reward_first"]] = 0.0
    df.loc[is_baseline(df), ACC] = 0.0
    return df


ABSENT: dict[int, Callable[[pd.DataFrame], pd.DataFrame]] = {
    4: _floor("main"),
    5: _floor("lr_sweep"),
    7: _floor("spectrum"),
    12: _no_style_support,
    23: _no_latent_capability,
    26: _grpo_stuck,
    27: _grpo_stuck,
}
#: The metric each claim's regime premise reads (dropped: "not measured").
MEASURE = {
    4: SPARSITY,
    5: SPARSITY,
    7: SPARSITY,
    12: "eval/style_share_t1",
    23: "eval/pass@32",
    26: "rlvr/eval_accuracy",
    27: "rlvr/eval_accuracy",
}


@pytest.fixture(scope="module")
def planted() -> pd.DataFrame:
    design = planned_table([plan_row(r) for r in expand(load_spec("paper"))])
    design["eval/pass@32"] = 0.75  # the `opd` runs' and the baseline's eval.coverage_samples
    # what the `grpo` RLVR stage records: final held-out accuracy, first and final reward
    design = design.assign(
        **{"rlvr/eval_accuracy": 0.6, "rlvr/reward_first": 0.1, "rlvr/reward_final": 0.5}
    )
    return simulate(design, "planted", seed=1)


def test_every_regime_premise_has_an_absent_case():
    assert set(REGIME) == set(ABSENT) == set(MEASURE)


def _judge(df: pd.DataFrame, claim: int):
    (result,) = score_claims(df, strict=True, claims=[claim])
    return result


@pytest.mark.parametrize("claim", sorted(REGIME))
def test_an_absent_regime_is_never_decided(planted, claim):
    present = _judge(planted.copy(), claim)  # the regime holds: it does not stop the claim
    assert present.verdict != "not applicable", present.reason
    assert not present.reason.startswith("regime premise"), present.reason
    assert "(present)" in present.regime and "absent" not in present.regime
    absent = _judge(ABSENT[claim](planted.copy()), claim)
    assert absent.verdict == "not applicable", (absent.verdict, absent.evidence)
    conditions = [p.regime for p in REGIME[claim]]
    assert any(absent.reason.startswith(c) for c in conditions), absent.reason


@pytest.mark.parametrize("claim", sorted(REGIME))
def test_an_unmeasured_regime_is_not_tested_by_name(planted, claim):
    df = planted.copy()
    metric = MEASURE[claim]
    df.loc[is_baseline(df) | _of(df, "grpo") | ~is_baseline(df), metric] = np.nan
    r = _judge(df, claim)
    assert r.verdict not in DECIDED
    assert metric in r.reason or metric in r.evidence, r.reason
