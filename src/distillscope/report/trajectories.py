"""Per-run trajectory features of the OPD runs (claim 16), from each run's metrics.jsonl.

Legacy home of claim 16's features until its rule moves into ``report.claims`` (where a
claim declares its features, ``Claim.features``).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from distillscope.report.claims_opd import (
    ADV_RISE,
    ADV_RISE_SEM,
    LEN_RISE,
    LEN_RISE_SEM,
    REWARD_DROP,
    TRAJ_KEYS,
)
from distillscope.report.load import metrics_frame
from distillscope.store import run_dir


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
