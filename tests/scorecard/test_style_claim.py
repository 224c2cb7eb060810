"""Claim 12 reads style runs of either form: the testbed's glyph flag or a teacher instruction."""

from __future__ import annotations

import math

import pandas as pd

from distillscope.scorecard import score_claims
from distillscope.scorecard.claims import CLAIMS
from distillscope.scorecard.selection import plain as plain_rows
from distillscope.scorecard.selection import style_runs

SPANISH = "Razona en español."


def _style_cells(resists: float = 0.1, adopts: float = 0.8) -> dict[tuple, dict]:
    return {
        (p, k, 1e-5): {
            "eval/teacher_style_share": resists if (p, k) == ("student", "reverse_kl") else adopts
        }
        for p in ("student", "teacher")
        for k in ("forward_kl", "reverse_kl")
    }


def _table(synth, **style_columns) -> pd.DataFrame:
    rows = synth.grid(
        "main", synth.main_cells(synth.PAPER_ACC), **{"task.teacher_style_flag": False}
    )
    rows += synth.grid("style", _style_cells(), **style_columns)
    # the untrained student once per seed, with its style share at T = 1 (claim 12's regime)
    base = [
        {**synth.baseline_row(**{"eval/style_share_t1": 0.2}), "seed": s, "run_id": f"baseline-{s}"}
        for s in (42, 43, 44)
    ]
    return pd.DataFrame([*rows, *base])


def _claim_12(df: pd.DataFrame):
    (result,) = score_claims(df, strict=True, claims=[12])
    return result


def test_instruction_runs_are_style_runs(synth):
    df = _table(synth, **{"task.teacher_style_flag": False, "task.teacher_instruction": SPANISH})
    result = _claim_12(df)
    assert result.verdict == "supported", result.evidence


def test_flagged_runs_still_are(synth):
    assert _claim_12(_table(synth, **{"task.teacher_style_flag": True})).verdict == "supported"


def test_a_style_experiment_with_neither_is_not_tested(synth):
    df = _table(synth, **{"task.teacher_style_flag": False, "task.teacher_instruction": math.nan})
    assert _claim_12(df).verdict == "not tested"


def test_style_runs_and_plain_rows_split_on_either_column():
    df = pd.DataFrame(
        {
            "task.teacher_style_flag": [True, False, False, math.nan, False],
            "task.teacher_instruction": [math.nan, SPANISH, math.nan, math.nan, "  "],
        }
    )
    assert style_runs(df).tolist() == [True, True, False, False, False]
    assert plain_rows(df).index.tolist() == [2, 3, 4]
    only_flag = df[["task.teacher_style_flag"]]
    assert style_runs(only_flag).tolist() == [True, False, False, False, False]
    assert style_runs(pd.DataFrame({"x": [1, 2]})).tolist() == [False, False]


def test_the_rule_s_scope_names_both_forms():
    (rule,) = [c for c in CLAIMS if c.id == 12]
    assert "task.teacher_style_flag or task.teacher_instruction" in rule.needs
