"""Claim 19 ([P], App. A.10): forward KL learns even through incoherent, high-entropy on-policy
rollouts.

Reads only the main grid's OnPD forward-KL runs, each counted once. A run's early entropy
ratio (a trajectory feature) is the student's mean entropy on its own rollouts over the first
10% of steps ÷ the teacher's on the same tokens; runs with a ratio ≥ 2 had high-entropy early
rollouts. Premise: some such run exists. Part: their accuracy − the untrained student's
(seed as replicate) above 5 pp.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from distillscope.scorecard.claim_columns import ACC, FORWARD, KIND, MAIN, POLICY, STUDENT
from distillscope.scorecard.claim_spec import (
    ABOVE,
    POOLED,
    Claim,
    MarginCase,
    Part,
    Quote,
    Simulated,
)
from distillscope.scorecard.contrasts import blocks
from distillscope.scorecard.estimate import Estimate, not_tested, seed_level
from distillscope.scorecard.evidence import ClaimEvidence, missing_metric
from distillscope.scorecard.exact import count
from distillscope.scorecard.learned import LEARNED_PP
from distillscope.scorecard.planting import column, in_pp, rows_mask
from distillscope.scorecard.selection import plain_runs

EARLY = "traj/early_entropy_ratio"
EARLY_SHARE = 0.1  # "early" = the first 10% of a run's steps
HIGH_RATIO = 2.0  # high-entropy rollouts: the student's entropy ≥ this × the teacher's
GAIN_PP = 5.0
ENTROPIES = ("objective/student_entropy", "objective/teacher_entropy")


def early_entropy_ratio(metrics: pd.DataFrame) -> float:
    """Student ÷ teacher entropy over the first EARLY_SHARE of a run's steps (NaN: unlogged)."""
    if metrics.empty or not all(c in metrics for c in ENTROPIES):
        return math.nan
    metrics = metrics.sort_values("step") if "step" in metrics else metrics
    early = metrics.iloc[: max(1, math.ceil(len(metrics) * EARLY_SHARE))]
    student, teacher = (float(pd.to_numeric(early[c], errors="coerce").mean()) for c in ENTROPIES)
    return student / teacher if teacher > 0 else math.nan


def _runs(view: ClaimEvidence) -> tuple[pd.DataFrame, str]:
    """The main grid's plain OnPD forward-KL runs, or what is missing."""
    rows = plain_runs(view, MAIN)
    if POLICY not in rows.columns or KIND not in rows.columns:
        return rows.iloc[0:0], "OnPD forward-KL runs of `main`"
    rows = rows[(rows[POLICY] == STUDENT) & (rows[KIND] == FORWARD)]
    where = "the OnPD forward-KL runs of `main`"
    lack = missing_metric(rows, EARLY, where)
    if lack:
        return rows, lack.replace(EARLY, f"{' and '.join(ENTROPIES)} (metrics.jsonl)")
    return rows, ""


def _high(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[pd.to_numeric(rows[EARLY], errors="coerce") >= HIGH_RATIO]


def high_entropy_runs(view: ClaimEvidence) -> list[Estimate]:
    """Number of main-grid OnPD forward-KL runs with high-entropy early rollouts."""
    rows, lack = _runs(view)
    if lack:
        return [not_tested("high-entropy runs", lack)]
    ratio = pd.to_numeric(rows[EARLY], errors="coerce")
    note = f"{len(_high(rows))} of {len(rows)} runs, ratio {ratio.min():.2f}–{ratio.max():.2f}"
    return [count("high-entropy runs", len(_high(rows)), note)]


def gain(view: ClaimEvidence) -> list[Estimate]:
    """Accuracy of the high-entropy runs − the untrained student's, per seed."""
    rows, lack = _runs(view)
    high = _high(rows) if not lack else rows
    base = view.baseline()
    lack = lack or missing_metric(high, ACC, "the high-entropy runs")
    lack = lack or missing_metric(base, ACC, "the untrained student")
    if lack:
        return [not_tested("gain", lack)]
    fit = blocks(view, "main: high-entropy OnPD forward KL", high, ACC)
    if fit.thin:  # every cell of those runs needs its seeds, as any pooled level
        return [not_tested("gain", f"{fit.cell_names(fit.thin)} has fewer than 2 seeds")]
    return [seed_level(high, ACC, "gain", base, view.ev.item_matrix)]


def onpd_forward_runs(d: pd.DataFrame) -> np.ndarray:
    """Mask of a design's on-policy forward-KL runs, in any experiment: the runs whose early
    entropy ratio the calibration draws (``SIMULATED``)."""
    return ((column(d, POLICY) == STUDENT) & (column(d, KIND) == FORWARD)).to_numpy()


#: The early entropy ratio in a world without incoherent rollouts: 1 (student as uncertain as
#: the teacher), SD 0.1 run to run; drawn for the OnPD forward-KL runs only.
SIMULATED = {EARLY: Simulated(1.0, 0.1, onpd_forward_runs)}


def _on_forward(d: pd.DataFrame) -> np.ndarray:
    return rows_mask(d, MAIN, **{POLICY: STUDENT, KIND: FORWARD})


def plant(d: pd.DataFrame) -> dict[str, np.ndarray]:
    """High-entropy early rollouts (ratio 2 × HIGH_RATIO) in every main OnPD forward-KL run."""
    return {EARLY: np.where(_on_forward(d), 2 * HIGH_RATIO, 0.0)}


def at_margin(d: pd.DataFrame) -> dict[str, np.ndarray]:
    """Those runs gaining exactly GAIN_PP over the untrained student (the null world's
    students gain LEARNED_BY = 30 pp)."""
    rows = _on_forward(d)
    return {
        EARLY: np.where(rows, 2 * HIGH_RATIO, 0.0),
        ACC: np.where(rows, in_pp(ACC, GAIN_PP - 30.0), 0.0),
    }


CLAIMS = (
    Claim(
        id=19,
        title="Forward KL learns even through incoherent, high-entropy on-policy rollouts.",
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                38,
                "OnPD con forward KL aprende incluso atravesando rollouts incoherentes de "
                "alta entropía (Ap. A.10)",
                "OnPD with forward KL learns even through incoherent, high-entropy "
                "rollouts (App. A.10)",
                "App. A.10",
            ),
        ),
        experiments=(MAIN,),
        premises=(
            Part(
                "high-entropy runs",
                "number of the main grid's OnPD forward-KL runs whose student entropy over "
                f"the first {EARLY_SHARE:.0%} of steps is ≥ {HIGH_RATIO:g} × the teacher's on "
                "the same tokens (metrics.jsonl)",
                high_entropy_runs,
                POOLED,
                ABOVE,
                0.5,
                "the claim is about runs whose early rollouts are incoherent: without one it "
                "does not apply.",
                published=3.0,
                unit="runs",
            ),
        ),
        parts=(
            Part(
                "gain",
                "accuracy of those runs − the untrained student's, per seed (the seed as "
                "replicate)",
                gain,
                POOLED,
                ABOVE,
                GAIN_PP,
                f"'still learns': the scorecard's meaning of learned, {LEARNED_PP:g} pp above "
                "the untrained student; [P]'s forward-KL students reach 71–73%.",
                published=30.0,
            ),
        ),
        needs="the main grid's OnPD forward-KL runs with objective/student_entropy and "
        "objective/teacher_entropy in metrics.jsonl (report from a study directory), and the "
        "untrained-student baseline",
        features={EARLY: early_entropy_ratio},
        plant=plant,
        margin_cases=(MarginCase("high-entropy runs gaining exactly the margin", at_margin),),
        simulated=SIMULATED,
    ),
)
