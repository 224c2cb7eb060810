"""Claim 8 ([P] §4.4): trajectory likelihoods move with λ as intended.

On the seed-blocked fit of the ``spectrum`` experiment's plain runs, per KL × LR curve: the
Spearman ρ over λ of the rollouts' mean student-token probability ≥ 0.8 and of the mean
teacher-token probability ≤ −0.8 (``rank``: bounds drawn from the fit).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.report.claims.common import axes, blocks
from distillscope.report.claims.estimate import Estimate
from distillscope.report.claims.evidence import ClaimEvidence
from distillscope.report.claims.rank import rank_estimates, spectrum_rows
from distillscope.report.claims.spec import ABOVE, BELOW, EVERY, Claim, Offsets, Part

SPECTRUM = "spectrum"
S_PROB, T_PROB = "rollout/student_token_prob_mean", "rollout/teacher_token_prob_mean"
RHO = 0.8


def _rho(view: ClaimEvidence, metric: str, label: str) -> list[Estimate]:
    return rank_estimates(blocks(view, SPECTRUM, spectrum_rows(view, SPECTRUM), metric), "λ", label)


def student_rho(view: ClaimEvidence) -> list[Estimate]:
    """ρ(student-token probability, λ) in every KL × LR curve."""
    return _rho(view, S_PROB, "ρ_student")


def teacher_rho(view: ClaimEvidence) -> list[Estimate]:
    """ρ(teacher-token probability, λ) in every KL × LR curve."""
    return _rho(view, T_PROB, "ρ_teacher")


_WHY = (
    "'as intended' is monotone: a rollout mixed further toward the student (λ → +1) is more "
    "likely under the student and less under the teacher, ρ = ±1 by construction of the mix; "
    "0.8 allows one adjacent swap among five λ."
)

#: The planted spectrum: student-token probability rising, teacher-token probability falling,
#: 2 seed-noise SDs per unit λ.
PLANT_SD_PER_LAMBDA = 2.0


def plant_sd(d: pd.DataFrame) -> Offsets:
    """Token probabilities moving ±``PLANT_SD_PER_LAMBDA`` SD per unit λ on the spectrum."""
    a = axes(d)
    lam = np.where(a.spectrum, a.lam, 0.0)
    return {S_PROB: PLANT_SD_PER_LAMBDA * lam, T_PROB: -PLANT_SD_PER_LAMBDA * lam}


CLAIMS = (
    Claim(
        id=8,
        title="Trajectory likelihoods move with λ as intended: student-token probability rises "
        "and teacher-token probability falls with λ.",
        source="[P] §4.4",
        quote="trajectory likelihoods under student and teacher move with λ as intended",
        experiments=(SPECTRUM,),
        parts=(
            Part(
                "ρ_student",
                f"Spearman ρ of {S_PROB}'s cell effects against λ, per KL × LR curve",
                student_rho,
                EVERY,
                ABOVE,
                RHO,
                _WHY,
                published=1.0,
                over="KL × LR curve",
                unit="",
            ),
            Part(
                "ρ_teacher",
                f"Spearman ρ of {T_PROB}'s cell effects against λ, per KL × LR curve",
                teacher_rho,
                EVERY,
                BELOW,
                -RHO,
                _WHY,
                published=-1.0,
                over="KL × LR curve",
                unit="",
            ),
        ),
        plant_sd=plant_sd,
        needs=f"the λ-spectrum (`spectrum`) at ≥ 3 values of λ with {S_PROB} and {T_PROB}",
    ),
)
