"""Claim 8 (an instrument check: no seed states it): trajectory likelihoods move with λ as
the spectrum's mix intends.

On the seed-blocked fit of the ``spectrum`` experiment's plain runs, per KL × LR curve: the
Spearman ρ over λ of the rollouts' mean log-likelihood gap E[log p_student − log p_teacher]
(``rollout/loglik_gap_mean``) ≥ 0.8 (``rank``: bounds drawn from the fit). Only that gap is
monotone in the mixing weight by construction (docs/method.md §9); the mean student- and
teacher-token probabilities need not be, and are shown in the evidence, not judged.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.results.stats import ALPHA
from distillscope.scorecard.claim_spec import (
    ABOVE,
    EVERY,
    INSTRUMENT,
    Claim,
    Offsets,
    Part,
    Quote,
)
from distillscope.scorecard.contrasts import blocks
from distillscope.scorecard.estimate import Estimate
from distillscope.scorecard.evidence import ClaimEvidence
from distillscope.scorecard.planting import axes
from distillscope.scorecard.rank import rank_estimates, spectrum_rows

SPECTRUM = "spectrum"
GAP = "rollout/loglik_gap_mean"
S_PROB, T_PROB = "rollout/student_token_prob_mean", "rollout/teacher_token_prob_mean"
RHO = 0.8


def _rho(view: ClaimEvidence, metric: str, label: str) -> list[Estimate]:
    return rank_estimates(blocks(view, SPECTRUM, spectrum_rows(view, SPECTRUM), metric), "λ", label)


def gap_rho(view: ClaimEvidence) -> list[Estimate]:
    """ρ(log-likelihood gap, λ) in every KL × LR curve; the token probabilities' ρ are added to
    the evidence (shown, not judged)."""
    for metric, label in ((S_PROB, "ρ_student-prob"), (T_PROB, "ρ_teacher-prob")):
        shown = [x for x in _rho(view, metric, label) if not x.missing]
        if shown:
            text = "; ".join(f"{x.label} {_shown(x)}" for x in shown)
            view.leave_out(f"shown, not judged: {label} per curve: {text}")
    return _rho(view, GAP, "ρ_gap")


def _shown(x: Estimate) -> str:
    """``+0.90 [+0.60, +1.00]``: a ρ with its one-sided bounds at ``ALPHA`` each side."""
    lo, hi = x.bounds(ALPHA)
    return f"{x.value:+.2f} [{lo:+.2f}, {hi:+.2f}]"


#: The planted spectrum: the log-likelihood gap rising 2 seed-noise SDs per unit λ; the token
#: probabilities (shown) moving the same way for the student, the other for the teacher.
PLANT_SD_PER_LAMBDA = 2.0


def plant_sd(d: pd.DataFrame) -> Offsets:
    """The gap (and the shown token probabilities) moving ``PLANT_SD_PER_LAMBDA`` SD per unit λ
    on the spectrum."""
    a = axes(d)
    lam = np.where(a.spectrum, a.lam, 0.0)
    step = PLANT_SD_PER_LAMBDA * lam
    return {GAP: step, S_PROB: step, T_PROB: -step}


CLAIMS = (
    Claim(
        id=8,
        title="Trajectory likelihoods move with λ as intended: the log-likelihood gap "
        "E[log p_student − log p_teacher] of the rollouts rises with λ.",
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                17,
                "se barre un espectro continuo de rollouts (§5.2) que mezcla secuencias "
                "del teacher y del estudiante",
                "a continuous spectrum of rollouts (§5.2) is swept that mixes the "
                "teacher's and the student's sequences",
                "§5.2",
            ),
            Quote(
                "000_4fa7018284e9b536.txt",
                27,
                "Extrapolam além de ambos os extremos, para favorecer tokens preferidos "
                "por um modelo em detrimento do outro.",
                "They extrapolate beyond both extremes, to favour tokens preferred by one "
                "model over the other.",
            ),
        ),
        kind=INSTRUMENT,
        experiments=(SPECTRUM,),
        parts=(
            Part(
                "ρ_gap",
                f"Spearman ρ of {GAP}'s cell effects (the rollouts' mean per-token "
                "E[log p_student − log p_teacher]) against λ, per KL × LR curve",
                gap_rho,
                EVERY,
                ABOVE,
                RHO,
                "'as intended' is monotone: the mix weights the student's log-probability by "
                "λ, so a rollout mixed further toward the student (λ → +1) has a larger "
                "log-likelihood gap, ρ = 1 by construction; 0.8 allows one adjacent swap among "
                "five λ. The token probabilities alone need not be monotone: shown, not judged.",
                published=1.0,
                over="KL × LR curve",
                unit="",
            ),
        ),
        plant_sd=plant_sd,
        needs=f"the λ-spectrum (`spectrum`) at ≥ 3 values of λ with {GAP}",
    ),
)
