"""Claim 18 ([D] informativeness I) on synthetic `teacher_scale` tables whose verdicts are
known by construction: planted (supported), null and reversed effects, degenerate tables (no
seed variance, one seed, NaN I) and what a study lacks. Every rule runs strictly."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from distillscope.report import score_claims
from distillscope.report.claimkit import NOT_TESTED
from distillscope.report.claims_opd import INFO, TEACHER_PARAMS

DECIDED = {"supported", "contradicted"}


def _result(df: pd.DataFrame, claim: int = 18):
    return {r.id: r for r in score_claims(df, strict=True, claims=[claim])}[claim]


def teacher_scale(
    synth,
    info: dict[str, float],
    acc: dict[str, float],
    spread: float = 0.01,
    info_spread: float = 0.02,
    seeds=None,
    baseline: float | None = 0.05,
) -> pd.DataFrame:
    """Two teachers × {none, hard_clip} × seeds of the `teacher_scale` experiment: per
    teacher its I and accuracy (± spread over seeds), plus the untrained student's row."""
    rows = []
    seeds = seeds or synth.SEEDS
    sizes = {"testbed:teacher": 1.9e6, "testbed:teacher-small": 1.3e6}
    for teacher in info:
        for reg in ("none", "hard_clip"):
            for seed, k in seeds.items():
                row = synth.run_row(
                    "teacher_scale",
                    "student",
                    "opd",
                    synth.LOW,
                    seed,
                    regulation=reg,
                    tag=f"-{teacher.split(':')[1]}-{reg}",
                )
                row["model.teacher"] = teacher
                row[TEACHER_PARAMS] = sizes.get(teacher, 1e6)
                row["eval/accuracy"] = acc[teacher] + spread * k
                row[INFO] = info[teacher] + info_spread * k
                rows.append(row)
    if baseline is not None:
        rows.append(synth.baseline_row(baseline))
    return pd.DataFrame(rows)


BIG, SMALL = "testbed:teacher", "testbed:teacher-small"


@pytest.mark.parametrize(
    "info, acc, verdict",
    [
        # the stronger teacher is mismatched: lower I and the smaller gain
        ({BIG: 0.10, SMALL: 0.35}, {BIG: 0.30, SMALL: 0.45}, "supported"),
        # null: equal I, equal gains
        ({BIG: 0.20, SMALL: 0.20}, {BIG: 0.40, SMALL: 0.40}, "inconclusive"),
        # the higher-I teacher's students gain less, beyond noise
        ({BIG: 0.10, SMALL: 0.35}, {BIG: 0.45, SMALL: 0.30}, "contradicted"),
        # both learn, but one teacher's I is negative beyond noise
        ({BIG: -0.20, SMALL: 0.35}, {BIG: 0.40, SMALL: 0.41}, "contradicted"),
        # the gains differ, but which teacher has the lower I is within noise
        ({BIG: 0.20, SMALL: 0.21}, {BIG: 0.30, SMALL: 0.45}, "inconclusive"),
        ({BIG: 0.20, SMALL: 0.21}, {BIG: 0.45, SMALL: 0.30}, "inconclusive"),
        # I > 0 and the ordering holds, but no teacher's students learn (5 pp over 5%)
        ({BIG: 0.10, SMALL: 0.35}, {BIG: 0.06, SMALL: 0.09}, "inconclusive"),
    ],
)
def test_claim_18_planted_null_and_reversed(synth, info, acc, verdict):
    r = _result(teacher_scale(synth, info, acc))
    assert r.verdict == verdict, r.evidence
    assert "testbed:teacher-small (higher I) − testbed:teacher (lower I)" in r.evidence or (
        "testbed:teacher (higher I) − testbed:teacher-small (lower I)" in r.evidence
    )


def test_claim_18_evidence_names_each_teachers_i_and_gain(synth):
    r = _result(teacher_scale(synth, {BIG: 0.10, SMALL: 0.35}, {BIG: 0.30, SMALL: 0.45}))
    assert (
        "testbed:teacher: I 0.100" in r.evidence and "testbed:teacher-small: I 0.350" in r.evidence
    )
    assert "gain +25.0 pp" in r.evidence and "(learns)" in r.evidence
    assert r.headline.startswith("I 0.100 vs 0.350")


@pytest.mark.parametrize("kind", ["no variance", "one seed"])
def test_claim_18_degenerate_tables_decide_nothing(synth, kind):
    info, acc = {BIG: 0.10, SMALL: 0.35}, {BIG: 0.30, SMALL: 0.45}
    if kind == "no variance":
        df = teacher_scale(synth, info, acc, spread=0.0, info_spread=0.0)
    else:
        df = teacher_scale(synth, info, acc, seeds={42: 0.0})
    r = _result(df)
    assert r.verdict not in DECIDED, r.evidence


@pytest.mark.parametrize("fill", [0.0, 0.5])
def test_claim_18_constant_tables_decide_nothing(synth, fill):
    df = teacher_scale(synth, {BIG: 0.1, SMALL: 0.3}, {BIG: 0.3, SMALL: 0.45})
    df[["eval/accuracy", INFO]] = fill
    assert _result(df).verdict not in DECIDED


def test_claim_18_nan_informativeness_is_not_tested_with_words(synth):
    df = teacher_scale(synth, {BIG: 0.1, SMALL: 0.3}, {BIG: 0.3, SMALL: 0.45})
    df.loc[df["model.teacher"] == SMALL, INFO] = math.nan
    r = _result(df)
    assert r.verdict == NOT_TESTED and INFO in r.evidence and "for 1" in r.evidence
    df[INFO] = math.nan
    assert _result(df).verdict == NOT_TESTED


def test_claim_18_needs_two_teachers_and_a_baseline(synth):
    one = teacher_scale(synth, {BIG: 0.1}, {BIG: 0.3})
    r = _result(one)
    assert r.verdict == NOT_TESTED and "≥ 2 teachers" in r.evidence
    no_base = teacher_scale(synth, {BIG: 0.1, SMALL: 0.3}, {BIG: 0.3, SMALL: 0.45}, baseline=None)
    r = _result(no_base)
    assert r.verdict == NOT_TESTED and "untrained student" in r.evidence


def test_claim_18_reads_the_teacher_scale_experiment_when_present(synth):
    df = teacher_scale(synth, {BIG: 0.10, SMALL: 0.35}, {BIG: 0.30, SMALL: 0.45})
    # another experiment's runs of one teacher with a contrary picture are not read
    other = df[df["experiment"] == "teacher_scale"].copy()
    other["experiment"] = "diversity"
    other["run_id"] = other["run_id"] + "-diversity"
    other[INFO] = -0.5
    r = _result(pd.concat([df, other], ignore_index=True))
    assert r.verdict == "supported", r.evidence
