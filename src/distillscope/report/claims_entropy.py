"""Scorecard rule on [P, App. A.10]: docs/method.md §9 claim 19, from each run's metrics.jsonl.

Forward KL learns even through incoherent, high-entropy on-policy rollouts: the early entropy
ratio of each on-policy forward-KL run is read from its trajectory (``add_early_entropy``,
called by ``score_claims`` with a study directory).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from distillscope.report.aggregate import done
from distillscope.report.claimkit import (
    FINISHED,
    ClaimRule,
    Scoring,
    Verdict,
    effect_verdict,
    has,
    is_baseline,
    plain_rows,
    where,
)
from distillscope.report.load import metrics_frame
from distillscope.report.stats import ALPHA, Pair, interval, num, pp, sample_pair
from distillscope.store import run_dir

ACC = "eval/accuracy"
CI = f"one-sided {1 - ALPHA:.0%} t-interval"


# 19 -----------------------------------------------------------------------------------------
EARLY_ENTROPY = "traj/early_entropy_ratio"
CLAIM_19_EARLY_SHARE = 0.1  # "early" = the first 10% of a run's steps
CLAIM_19_HIGH_RATIO = 2.0  # high-entropy rollouts: the student's entropy ≥ this × the teacher's
CLAIM_19_GAIN_PP = 5.0  # the gain over the untrained student those runs must still reach
CLAIM_19_RULE = (
    f"From metrics.jsonl of each OnPD forward-KL run: early entropy ratio = mean "
    f"objective/student_entropy ÷ mean objective/teacher_entropy over the first "
    f"{CLAIM_19_EARLY_SHARE:.0%} of steps (the student's uncertainty on its own rollouts "
    f"against the teacher's on the same tokens). High-entropy runs: ratio ≥ "
    f"{CLAIM_19_HIGH_RATIO:g}. Gain = their accuracy − the untrained student's (runs as "
    f"samples, Welch t). Supported: gain > {CLAIM_19_GAIN_PP:g} pp beyond its {CI}. "
    f"Contradicted: gain < 0 beyond its {CI}. Else inconclusive."
)


def add_early_entropy(df: pd.DataFrame, study_dir: Path) -> pd.DataFrame:
    """Add ``traj/early_entropy_ratio`` to the OnPD forward-KL rows from their metrics.jsonl."""
    need = {"rollout.policy", "objective.kind", "run_id"}
    if not need <= set(df.columns):
        return df
    df = df.copy()
    if EARLY_ENTROPY not in df.columns:
        df[EARLY_ENTROPY] = math.nan
    rows = df.index[(df["rollout.policy"] == "student") & (df["objective.kind"] == "forward_kl")]
    for i in rows:
        df.at[i, EARLY_ENTROPY] = early_entropy_ratio(
            metrics_frame(run_dir(study_dir, df.at[i, "run_id"]))
        )
    return df


def early_entropy_ratio(metrics: pd.DataFrame) -> float:
    """Student ÷ teacher entropy over a run's first CLAIM_19_EARLY_SHARE of steps (NaN when
    either was not logged)."""
    cols = ("objective/student_entropy", "objective/teacher_entropy")
    if metrics.empty or not all(c in metrics for c in cols):
        return math.nan
    metrics = metrics.sort_values("step") if "step" in metrics else metrics
    n = max(1, math.ceil(len(metrics) * CLAIM_19_EARLY_SHARE))
    early = metrics.iloc[:n]
    student, teacher = (pd.to_numeric(early[c], errors="coerce").mean() for c in cols)
    return float(student / teacher) if teacher > 0 else math.nan


def onpd_forward_runs(s: Scoring) -> pd.DataFrame:
    """The finished plain OnPD forward-KL runs with an early entropy ratio."""
    rows = plain_rows(s.grid(FINISHED))
    rows = where(where(rows, "rollout.policy", ["student"]), "objective.kind", ["forward_kl"])
    if not has(rows, EARLY_ENTROPY):
        return rows.iloc[0:0]
    return rows[pd.to_numeric(rows[EARLY_ENTROPY], errors="coerce").notna()]


def claim_19_lacking(s: Scoring) -> list[str]:
    """Claim 19's condition must occur: some run with high-entropy early rollouts."""
    runs = onpd_forward_runs(s)
    ratio = pd.to_numeric(runs[EARLY_ENTROPY], errors="coerce")
    if (ratio >= CLAIM_19_HIGH_RATIO).any():
        return []
    return [
        f"an OnPD forward-KL run with high-entropy early rollouts (ratio ≥ "
        f"{CLAIM_19_HIGH_RATIO:g}; its {len(runs)} runs: {num(ratio.min(), 2)}–"
        f"{num(ratio.max(), 2)})"
    ]


def claim_19_incoherent_rollouts(s: Scoring) -> Verdict:
    """Claim 19's verdict (``CLAIM_19_RULE``)."""
    runs = onpd_forward_runs(s)
    high = runs[pd.to_numeric(runs[EARLY_ENTROPY], errors="coerce") >= CLAIM_19_HIGH_RATIO]
    base = done(s.df)
    base = base[is_baseline(base)]
    acc = [100.0 * float(x) for x in pd.to_numeric(high[ACC], errors="coerce").dropna()]
    ref = [100.0 * float(x) for x in pd.to_numeric(base.get(ACC), errors="coerce").dropna()]
    p = sample_pair(acc, ref, "high-entropy runs vs untrained")
    if len(ref) == 1:
        p = Pair(p.key, p.a, p.a_sem, p.b, 0.0, p.a_dof, math.inf)
    ev = (
        f"{len(high)} of {len(runs)} OnPD forward-KL runs had high-entropy early rollouts "
        f"(ratio {num(high[EARLY_ENTROPY].astype(float).min(), 2)}–"
        f"{num(high[EARLY_ENTROPY].astype(float).max(), 2)}); their accuracy {num(p.a)}% vs "
        f"untrained {num(p.b)}%: gain {pp(p.diff)} pp {interval(p)}"
    )
    head = f"gain {pp(p.diff)} pp {interval(p)} over {len(high)} high-entropy runs"
    return effect_verdict(p, CLAIM_19_GAIN_PP, CLAIM_19_RULE, ev, head)


def claim_19_applicable(s: Scoring) -> bool:
    """Claim 19 is testable: OnPD forward-KL runs with early entropies and a baseline."""
    base = done(s.df)
    return not onpd_forward_runs(s).empty and has(base[is_baseline(base)], ACC)


RULES_ENTROPY = [
    ClaimRule(
        19,
        "[P, App. A.10] Forward KL learns even through incoherent, high-entropy on-policy "
        "rollouts.",
        "OnPD forward-KL runs with objective/student_entropy and objective/teacher_entropy in "
        "metrics.jsonl (report from a study directory), and the untrained-student baseline",
        claim_19_applicable,
        claim_19_incoherent_rollouts,
        lacking=claim_19_lacking,
    ),
]
