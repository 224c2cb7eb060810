"""Claim 10 ([P] §4.4): on-policy data helps on the harder variant (+10–15% pass@k).

On the seed-blocked main-grid fit of the harder variant's pass@K (the largest k measured):
OnPD − OffPD per KL direction (pooled over matched LRs) above 5 pp under both directions, and
at no LR reversed beyond uncertainty (a guard: it only contradicts).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.scorecard.claim_columns import KIND, LR, MAIN, POLICY, STUDENT, TEACHER
from distillscope.scorecard.claim_spec import ABOVE, EVERY, Claim, Offsets, Part, Quote
from distillscope.scorecard.claims.c09_coverage import pass_k
from distillscope.scorecard.contrasts import blocks, matched
from distillscope.scorecard.estimate import Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence
from distillscope.scorecard.planting import axes
from distillscope.scorecard.selection import grid_rows

GAIN_PP = 5.0
HARDER = "eval/harder/pass@"


def _gain(view: ClaimEvidence, strata: tuple[str, ...], name: str) -> list[Estimate]:
    rows = grid_rows(view, MAIN)
    metric = pass_k(rows, HARDER)
    if metric is None:
        return [not_tested(name, "the harder variant's pass@k (k > 1) in `main`")]
    b = blocks(view, MAIN, rows, metric)
    if isinstance(b, str):
        return [not_tested(name, b)]
    return matched(b, POLICY, STUDENT, TEACHER, strata, name)


def gain_per_kl(view: ClaimEvidence) -> list[Estimate]:
    """OnPD − OffPD harder pass@K per KL direction, pooled over matched LRs."""
    return _gain(view, (KIND,), "gain")


def gain_per_lr(view: ClaimEvidence) -> list[Estimate]:
    """OnPD − OffPD harder pass@K per LR, pooled over matched KL directions."""
    return _gain(view, (LR,), "gain at LR")


#: The planted harder variant (fractions, on-policy runs above off-policy): accuracy +5 pp and
#: pass@10 +12.5 pp ([P]: +10–15% pass@k).
PLANT_ACC, PLANT_PASS10 = 0.05, 0.125


def plant(d: pd.DataFrame) -> Offsets:
    """On-policy runs (OnPD, or λ > 0) ahead on the harder variant."""
    on = axes(d).on
    return {
        "eval/harder_accuracy": np.where(on, PLANT_ACC, 0.0),
        "eval/harder/pass@10": np.where(on, PLANT_PASS10, 0.0),
    }


CLAIMS = (
    Claim(
        id=10,
        title="On-policy data helps on the harder variant (+10–15% pass@k, both KL directions).",
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                41,
                "En Countdown-4E —una variante más difícil que la de entrenamiento— "
                "on-policy da +10-15% pass@k con ambas direcciones de KL.",
                "On Countdown-4E — a harder variant than the training one — on-policy "
                "gives +10–15% pass@k under both KL directions.",
                "§5.3",
            ),
            Quote(
                "000_4fa7018284e9b536.txt",
                35,
                "Onde os dados on-policy parecem ajudar de forma consistente é na "
                "generalização para variantes mais difíceis da tarefa aritmética "
                "Countdown, sob ambas as direções de KL.",
                "Where on-policy data seem to help consistently is generalisation to "
                "harder variants of the arithmetic task Countdown, under both KL "
                "directions.",
            ),
        ),
        experiments=(MAIN,),
        parts=(
            Part(
                "gain",
                "OnPD − OffPD pass@K on the harder variant (K the largest k measured), per KL "
                "direction, pooled over matched LRs of the main grid's cell + seed fit",
                gain_per_kl,
                EVERY,
                ABOVE,
                GAIN_PP,
                "'+10–15% pass@k' read as pp (the papers' convention for pass@k); 5 pp is half "
                "the published lower end.",
                published=12.5,
                over="KL direction",
            ),
            Part(
                "gain at LR",
                "OnPD − OffPD harder pass@K per LR, pooled over matched KL directions",
                gain_per_lr,
                EVERY,
                ABOVE,
                0.0,
                "'helps' admits no LR where on-policy data hurts beyond uncertainty.",
                published=12.5,
                over="LR",
                guard=True,
            ),
        ),
        plant=plant,
        needs="the main grid (`main`) with OnPD and OffPD under both KL directions and the "
        "harder variant's pass@k (eval.harder_task)",
    ),
)
