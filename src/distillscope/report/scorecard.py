"""The claims scorecard: each published finding of docs/method.md §9 scored against one study.

    from distillscope.report import score_claims
    for r in score_claims(results_df, study_dir):
        print(r.id, r.verdict, r.evidence)

Every claim ends as *supported*, *contradicted*, *inconclusive* (the study tests it but the
numbers are not beyond the rule's margins; "no power" when the students did not learn), *not
tested* (the study lacks the axes or metrics; the result says what would be needed), *not
implemented* (no code measures what the claim needs) or *error* (the rule raised: a bug, shown
with its message). Each rule states its margins in ``ClaimResult.rule``; the statistics are
in ``claimkit``.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from distillscope.report.aggregate import hashable_axes
from distillscope.report.claimkit import (
    ERROR,
    NOT_IMPLEMENTED,
    NOT_TESTED,
    ClaimRule,
    Scoring,
    Verdict,
)
from distillscope.report.claims_ablation import RULES_ABLATION
from distillscope.report.claims_clipping import RULES_CLIPPING
from distillscope.report.claims_entropy import RULES_ENTROPY, add_early_entropy
from distillscope.report.claims_grid import RULES_GRID
from distillscope.report.claims_opd import (
    ADV_RISE,
    ADV_RISE_SEM,
    LEN_RISE,
    LEN_RISE_SEM,
    REWARD_DROP,
    RULES_OPD,
    TRAJ_KEYS,
)
from distillscope.report.claims_reach import RULES_REACH
from distillscope.report.claims_rlvr import RULES_RLVR
from distillscope.report.claims_robustness import RULES_ROBUSTNESS
from distillscope.report.claims_spectrum import RULES_SPECTRUM
from distillscope.report.claims_stability import RULES_STABILITY
from distillscope.report.load import metrics_frame
from distillscope.store import run_dir

RULES: list[ClaimRule] = sorted(
    [
        *RULES_GRID,
        *RULES_ENTROPY,
        *RULES_SPECTRUM,
        *RULES_STABILITY,
        *RULES_ABLATION,
        *RULES_CLIPPING,
        *RULES_ROBUSTNESS,
        *RULES_OPD,
        *RULES_REACH,
        *RULES_RLVR,
    ],
    key=lambda r: r.id,
)


@dataclass(frozen=True)
class ClaimResult:
    """A claim scored against a study; ``verdict`` is a Verdict value or ``"not tested"``."""

    id: int
    claim: str
    verdict: str
    evidence: str
    rule: str
    headline: str = ""  # the one number behind the verdict (the report's summary)


def score_claims(
    df: pd.DataFrame,
    study_dir: Path | None = None,
    strict: bool = False,
    claims: Collection[int] | None = None,
) -> list[ClaimResult]:
    """Score docs/method.md §9 claims against a results table (one row per run).

    Args:
        df: the study's ``results.parquet`` (all statuses; each rule keeps the finished runs it
            needs and may count diverged ones; baseline rows are the untrained student).
        study_dir: when given, per-step trajectories are read from ``runs/*/metrics.jsonl`` for
            the claims that need them (claim 16); nothing else is read.
        strict: re-raise a rule's exception (tests); otherwise the claim's verdict is "error"
            with the message — a rule that raises is a bug and never yields a verdict.

    Returns:
        One ClaimResult per claim, in claim order.
    """
    df = hashable_axes(df)
    if study_dir is not None:
        df = add_trajectory_features(df, Path(study_dir))
        df = add_early_entropy(df, Path(study_dir))
    scoring = Scoring(df)  # one scoring: each sub-grid and matched comparison computed once
    return [score_one(r, scoring, strict) for r in RULES if claims is None or r.id in claims]


def score_one(rule: ClaimRule, scoring: Scoring, strict: bool = False) -> ClaimResult:
    """One claim scored on a scoring of a table (``Scoring(df)``); see ``score_claims``."""
    if rule.unmeasured:
        text = f"no code of distillscope writes {', '.join(rule.unmeasured)} yet"
        return ClaimResult(rule.id, rule.claim, NOT_IMPLEMENTED, text, "—")
    try:
        if not rule.applicable(scoring):
            return ClaimResult(rule.id, rule.claim, NOT_TESTED, f"needs {rule.needs}", "—")
        lacking = rule.lacking(scoring) if rule.lacking is not None else []
        if lacking:
            text = f"needs {rule.needs}; this study lacks {', '.join(lacking)}"
            return ClaimResult(rule.id, rule.claim, NOT_TESTED, text, "—")
        v: Verdict = rule.judge(scoring)
    except Exception as err:
        if strict:
            raise
        text = f"the rule raised {type(err).__name__}: {err} (a bug in distillscope)"
        return ClaimResult(rule.id, rule.claim, ERROR, text, "—")
    return ClaimResult(rule.id, rule.claim, v.verdict, v.evidence, v.rule, v.headline)


def add_trajectory_features(df: pd.DataFrame, study_dir: Path) -> pd.DataFrame:
    """Add the trajectory features (``claims_opd.TRAJ_KEYS``) to the OPD rows from metrics.jsonl.

    Each run's steps are split into quarters; the rollout reward's *peak* quarter (highest
    mean) is compared with the *last* quarter (``trajectory_features``):

    - ``traj/reward_drop_pp``: peak quarter's mean ``rollout/reward`` − the last quarter's, in
      pp (rewards in [0, 1]; other scales as stored);
    - ``traj/len_rise`` (tokens) and ``traj/advantage_rise`` (nats): the last quarter's mean
      ``rollout/len_mean`` / ``opd/advantage_mean`` − the peak quarter's, i.e. how they moved
      while the reward fell; ``traj/len_rise_sem`` / ``traj/advantage_rise_sem``: the SEM of
      that difference of two quarter means, √(s₁²/n₁ + s₂²/n₂) over their steps.
    """
    if "objective.kind" not in df.columns or "run_id" not in df.columns:
        return df
    df = df.copy()
    for col in TRAJ_KEYS:
        if col not in df.columns:
            df[col] = math.nan
    for i in df.index[df["objective.kind"] == "opd"]:
        features = trajectory_features(metrics_frame(run_dir(study_dir, df.at[i, "run_id"])))
        for col, value in features.items():
            df.at[i, col] = value
    return df


def trajectory_features(metrics: pd.DataFrame) -> dict[str, float]:
    """One run's trajectory features (``add_trajectory_features``); NaN where unmeasured."""
    out = dict.fromkeys(TRAJ_KEYS, math.nan)
    if metrics.empty or "rollout/reward" not in metrics:
        return out
    metrics = metrics.sort_values("step") if "step" in metrics else metrics
    metrics = metrics[pd.to_numeric(metrics["rollout/reward"], errors="coerce").notna()]
    if len(metrics) < 8:  # two steps per quarter at least: a quarter's SEM needs them
        return out
    quarters = _quarters(metrics.reset_index(drop=True))
    reward = [float(pd.to_numeric(q["rollout/reward"]).mean()) for q in quarters]
    peak = max(range(4), key=lambda k: reward[k])  # the first quarter with the highest mean
    scale = 100.0 if max(abs(r) for r in reward) <= 1.0 else 1.0
    out[REWARD_DROP] = (reward[peak] - reward[-1]) * scale
    for col, rise, sem in (
        ("rollout/len_mean", LEN_RISE, LEN_RISE_SEM),
        ("opd/advantage_mean", ADV_RISE, ADV_RISE_SEM),
    ):
        if col in metrics:
            out[rise], out[sem] = _rise(quarters[peak], quarters[-1], col)
    return out


def _rise(before: pd.DataFrame, after: pd.DataFrame, col: str) -> tuple[float, float]:
    """(mean of ``col`` in ``after`` − in ``before``, SEM of that difference); NaN with < 2
    values on a side."""
    a = pd.to_numeric(before[col], errors="coerce").dropna()
    b = pd.to_numeric(after[col], errors="coerce").dropna()
    if len(a) < 2 or len(b) < 2:
        return math.nan, math.nan
    sem = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    return float(b.mean() - a.mean()), sem


def _quarters(frame: pd.DataFrame) -> list[pd.DataFrame]:
    n = len(frame)
    bounds = [round(n * k / 4) for k in range(5)]
    return [frame.iloc[bounds[k] : bounds[k + 1]] for k in range(4)]
