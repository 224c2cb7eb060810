"""Claim 12 ([P] §4.5): OnPD + reverse KL resists teacher-style transfer; the other three adopt it.

On the seed-blocked fit of ``eval/teacher_style_share`` over the `style` experiment's runs:
each other rollout × KL configuration's share − OnPD + reverse KL's above 20 pp (``only``: one
estimate per other configuration). Another configuration within 20 pp of it (beyond
uncertainty) contradicts, as does OnPD + reverse KL adopting the style. Regime premise: the
style lies in the untrained student's support — its style share sampling at T = 1
(``eval/style_share_t1``, measured once per seed by a style study's baseline) ≥ 1%; a style the
student cannot produce is one reverse KL's gradient cannot reach under any rollout.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.scorecard.claim_columns import KIND, POLICY, REVERSE, STUDENT
from distillscope.scorecard.claim_spec import ABOVE, ONLY, POOLED, Claim, Offsets, Part, Quote
from distillscope.scorecard.contrasts import blocks, stratum_name
from distillscope.scorecard.estimate import Estimate, not_tested, seed_level
from distillscope.scorecard.evidence import ClaimEvidence, missing_metric
from distillscope.scorecard.planting import axes
from distillscope.scorecard.regime_premises import exact
from distillscope.scorecard.selection import style_runs

STYLE = "style"
SHARE = "eval/teacher_style_share"
SUPPORT = "eval/style_share_t1"
MARGIN_PP = 20.0
SUPPORT_PCT = 1.0


def style_support(view: ClaimEvidence) -> list[Estimate]:
    """The untrained student's style share at T = 1, per seed (the seed as replicate)."""
    base = view.baseline(SUPPORT)
    lack = missing_metric(base, SUPPORT, "the untrained student")
    if lack:
        why = " (a style study's baseline evaluation measures it; older records lack it)"
        return [not_tested("style support", lack + why)]
    return [exact(seed_level(base, SUPPORT, "style support", None, view.ev.item_matrix))]


def others_minus_resister(view: ClaimEvidence) -> list[Estimate]:
    """Each other configuration's style share − OnPD + reverse KL's."""
    rows = view.rows(STYLE)
    rows = rows[style_runs(rows)]
    if rows.empty or POLICY not in rows or KIND not in rows:
        lack = "style runs (a teacher style flag or instruction) in `style`"
        return [not_tested("other − OnPD+RKL", lack)]
    b = blocks(view, STYLE, rows, SHARE)
    if isinstance(b, str):
        return [not_tested("other − OnPD+RKL", b)]
    it = b.mask(**{POLICY: STUDENT, KIND: REVERSE})
    if it.sum() != 1:
        return [not_tested("other − OnPD+RKL", "one OnPD + reverse KL cell in `style`")]
    shown = [c for c in (POLICY, KIND) if c in b.cells]
    return [
        b.difference(
            b.mask(**{POLICY: b.cells.at[i, POLICY], KIND: b.cells.at[i, KIND]}) & ~it,
            it,
            stratum_name(b.cells, i, shown),
        )
        for i in range(len(b.cells))
        if not it[i]
    ]


#: The planted style shares (levels, fractions): OnPD + reverse KL 10%, every other run 70%.
PLANT_RESISTS, PLANT_ADOPTS = 0.10, 0.70


def plant(d: pd.DataFrame) -> Offsets:
    """OnPD + reverse KL at ``PLANT_RESISTS``, the rest at ``PLANT_ADOPTS``."""
    a = axes(d)
    resists = (a.policy == STUDENT).to_numpy() & (a.kind == REVERSE).to_numpy()
    return {SHARE: np.where(resists, PLANT_RESISTS, PLANT_ADOPTS)}


CLAIMS = (
    Claim(
        id=12,
        title="OnPD + reverse KL resists teacher-style transfer; the other three configurations "
        "adopt it.",
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                42,
                "Con un teacher instruido en español, OnPD con reverse KL es la única "
                "configuración que preserva el inglés del estudiante; todas las demás "
                "transfieren el español casi por completo.",
                "With a teacher instructed in Spanish, OnPD with reverse KL is the only "
                "configuration that keeps the student's English; all the others transfer "
                "the Spanish almost completely.",
                "App. D.7",
            ),
            Quote(
                "000_4fa7018284e9b536.txt",
                36,
                "Os autores também observam que, combinados com KL reversa, rollouts "
                "on-policy reduzem a transferência incidental de estilo do professor.",
                "The authors also observe that, combined with reverse KL, on-policy "
                "rollouts reduce the incidental transfer of the teacher's style.",
            ),
        ),
        experiments=(STYLE,),
        premises=(
            Part(
                "style support",
                "the untrained student's share of answers in the teacher's style sampling at "
                f"T = 1 ({SUPPORT} of the baseline rows), per seed (the seed as replicate)",
                style_support,
                POOLED,
                ABOVE,
                SUPPORT_PCT,
                "[P]'s style (Spanish reasoning) is one a pretrained student writes; reverse "
                "KL's gradient on a token is weighted by the student's own probability of it, "
                "so a style it samples in under 1 of 100 answers is out of its reach.",
                published=10.0,
                unit="%",
                regime="the teacher's style in the untrained student's support (share at T = 1)",
            ),
        ),
        parts=(
            Part(
                "other − OnPD+RKL",
                "each other rollout × KL configuration's teacher-style share − OnPD + reverse "
                "KL's, on the `style` runs' cell + seed fit",
                others_minus_resister,
                ONLY,
                ABOVE,
                MARGIN_PP,
                "[P]: the three adopt the style, OnPD + reverse KL does not (≈ 70% vs ≈ 10% in "
                "the testbed's planted picture); 20 pp is a third of that gap.",
                published=60.0,
                over="OnPD + reverse KL against each other configuration",
            ),
        ),
        plant=plant,
        levels=(SHARE,),
        needs="the `style` experiment: style runs (task.teacher_style_flag or "
        "task.teacher_instruction) of all four rollout × KL configurations with "
        "eval/teacher_style_share",
    ),
)
