"""Claim 7 ([P] §4.4): λ barely moves forgetting or sparsity.

On the seed-blocked fit of the ``spectrum`` experiment's plain runs: the range over λ of
forgetting_pp and of bf16 sparsity within ±3 pp in every KL × LR curve. Premise: the same
study's LR effect on each metric is larger — the main grid's extreme LRs (claims 3 and 4's
``Δ_LR``) above 3 pp — else "barely" has nothing to be small against ("not applicable") — and
the regime premise that the spectrum's sparsity is off its floor (``regime.sparsity_floor``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from distillscope.scorecard.claim_columns import FORGET, FORWARD, MAIN, SPARSITY
from distillscope.scorecard.claim_spec import (
    ABOVE,
    EVERY,
    INSTRUMENT,
    WITHIN,
    Claim,
    MarginCase,
    Part,
    Quote,
)
from distillscope.scorecard.claims import c03_lr_forgetting, c04_lr_sparsity
from distillscope.scorecard.claims.quotes import LR_GOVERNS
from distillscope.scorecard.contrasts import blocks
from distillscope.scorecard.estimate import Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence
from distillscope.scorecard.planting import in_pp
from distillscope.scorecard.rank import lam_curves, lam_ramp, mask_of, spectrum_rows
from distillscope.scorecard.regime_premises import sparsity_floor

SPECTRUM = "spectrum"
MARGIN_PP = 3.0


def _ranges(view: ClaimEvidence, metric: str, label: str) -> list[Estimate]:
    b, found, lack = lam_curves(
        blocks(view, SPECTRUM, spectrum_rows(view, SPECTRUM), metric), label
    )
    if lack:
        return [not_tested(label, lack)]
    return [b.range(mask_of(len(b.cells), idx), name) for name, idx in found.items()]


def forgetting_range(view: ClaimEvidence) -> list[Estimate]:
    """max − min of forgetting_pp over λ in every KL × LR curve of the spectrum."""
    return _ranges(view, FORGET, "forgetting range")


def sparsity_range(view: ClaimEvidence) -> list[Estimate]:
    """max − min of bf16 sparsity over λ in every KL × LR curve of the spectrum."""
    return _ranges(view, SPARSITY, "sparsity range")


def lr_effects(view: ClaimEvidence) -> list[Estimate]:
    """The main grid's low − high LR effect on forgetting_pp and on sparsity (claims 3, 4)."""
    forget = c03_lr_forgetting.lr_effect(view)
    sparse = c04_lr_sparsity.lr_effect(view)
    return [dataclasses.replace(x, label="forgetting_pp") for x in forget] + [
        dataclasses.replace(x, label="sparsity") for x in sparse
    ]


def forgetting_at_margin(d: pd.DataFrame) -> dict[str, np.ndarray]:
    """Forward KL's forgetting_pp range over λ exactly MARGIN_PP at the highest LR."""
    return lam_ramp(d, FORGET, FORWARD, in_pp(FORGET, MARGIN_PP))


def sparsity_at_margin(d: pd.DataFrame) -> dict[str, np.ndarray]:
    """Forward KL's bf16 sparsity range over λ exactly MARGIN_PP at the highest LR."""
    return lam_ramp(d, SPARSITY, FORWARD, in_pp(SPARSITY, MARGIN_PP))


def _range_part(name: str, what: str, fn) -> Part:
    return Part(
        name,
        f"max − min of {what} over λ per KL × LR curve, pairs of cells of the spectrum's "
        "cell + seed fit",
        fn,
        EVERY,
        WITHIN,
        MARGIN_PP,
        "'barely moves': 3 pp is a tenth of [P]'s LR effect on sparsity (≈ 31 pp) and a "
        "quarter of that on forgetting (≈ 11 pp).",
        published=1.0,
        over="KL × LR curve",
    )


CLAIMS = (
    Claim(
        id=7,
        title="λ barely moves forgetting or sparsity (the LR does).",
        quotes=(
            Quote(
                "000_4fa7018284e9b536.txt",
                27,
                "Além da comparação binária, os autores percorrem um espectro contínuo de "
                "políticas de rollout entre aluno e professor.",
                "Beyond the binary comparison, the authors sweep a continuous spectrum of "
                "rollout policies between student and teacher.",
            ),
            LR_GOVERNS,
        ),
        kind=INSTRUMENT,
        experiments=(SPECTRUM, MAIN),
        premises=(
            sparsity_floor(SPECTRUM, lambda view: spectrum_rows(view, SPECTRUM)),
            Part(
                "Δ_LR",
                "the main grid's low − high LR effect on forgetting_pp and on bf16 sparsity, "
                "pooled over matched rollout × KL cells (claims 3 and 4)",
                lr_effects,
                EVERY,
                ABOVE,
                MARGIN_PP,
                "'barely' is relative: the same study's LR effect must exceed the band λ is "
                "held to ([P]: ≈ 11 pp forgetting, ≈ 31 pp sparsity).",
                published=11.6,
                over="metric",
            ),
        ),
        parts=(
            _range_part("forgetting range", "forgetting_pp", forgetting_range),
            _range_part("sparsity range", "bf16 sparsity (τ = 1e-6)", sparsity_range),
        ),
        needs="the λ-spectrum (`spectrum`) at ≥ 3 values of λ with eval/forgetting_pp and "
        "eval/sparsity_bf16_tau1e-06, and the main grid (`main`) at two LRs",
        null_true=True,
        margin_cases=(
            MarginCase("forgetting range over λ at the margin", forgetting_at_margin, True),
            MarginCase("sparsity range over λ at the margin", sparsity_at_margin, True),
        ),
    ),
)
