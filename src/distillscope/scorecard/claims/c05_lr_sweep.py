"""Claim 5 ([P] §4.3, the LR sweep): sparsity falls and forgetting rises monotonically with LR;
OffPD forgets less at matched LR.

On the seed-blocked fit of the ``lr_sweep`` experiment's plain OnPD/OffPD × forward/reverse KL
runs: per series (rollout × KL, every cell column but the LR) the Spearman ρ of the cell
effects against the LR (``rank``: bounds drawn from the fit), ρ(sparsity) ≤ −0.8 and
ρ(forgetting_pp) ≤ −0.8 (forgetting_pp is skills after − before: more forgetting is more
negative, so "forgetting rises" is a falling forgetting_pp); and OffPD − OnPD forgetting_pp,
pooled over matched KL × LR cells, above 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.scorecard.claim_columns import FORGET, LR, POLICY, SPARSITY, STUDENT, TEACHER
from distillscope.scorecard.claim_spec import (
    ABOVE,
    BELOW,
    EVERY,
    POOLED,
    Claim,
    MarginCase,
    Part,
    Quote,
)
from distillscope.scorecard.claims.quotes import LR_GOVERNS
from distillscope.scorecard.contrasts import blocks, matched
from distillscope.scorecard.estimate import Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence
from distillscope.scorecard.planting import rows_mask
from distillscope.scorecard.rank import rank_estimates
from distillscope.scorecard.regime_premises import sparsity_floor
from distillscope.scorecard.selection import grid_rows

SWEEP = "lr_sweep"
RHO = 0.8
#: OffPD's smaller forgetting in the planted world (pp; [P] prints no number for it).
PLANT_OFFPD_LESS_PP = 1.0


def _fit(view: ClaimEvidence, metric: str):
    return blocks(view, SWEEP, grid_rows(view, SWEEP), metric)


def sparsity_rho(view: ClaimEvidence) -> list[Estimate]:
    """ρ(bf16 sparsity, LR) of every rollout × KL series of the sweep."""
    return rank_estimates(_fit(view, SPARSITY), LR, "ρ_sparsity")


def forgetting_rho(view: ClaimEvidence) -> list[Estimate]:
    """ρ(forgetting_pp, LR) of every rollout × KL series of the sweep."""
    return rank_estimates(_fit(view, FORGET), LR, "ρ_forget")


def offpd_forgets_less(view: ClaimEvidence) -> list[Estimate]:
    """OffPD − OnPD forgetting_pp, pooled over matched KL × LR cells of the sweep."""
    b = _fit(view, FORGET)
    if isinstance(b, str):
        return [not_tested("OffPD − OnPD", b)]
    return matched(b, POLICY, TEACHER, STUDENT, (), "OffPD − OnPD")


def offpd_equal_at_margin(d: pd.DataFrame) -> dict[str, np.ndarray]:
    """OffPD's forgetting moved back to OnPD's: OffPD − OnPD exactly 0 (its margin)."""
    off = rows_mask(d, SWEEP, **{POLICY: TEACHER})
    return {FORGET: np.where(off, -PLANT_OFFPD_LESS_PP, 0.0)}


def _rho_part(name: str, metric: str, fn) -> Part:
    return Part(
        name,
        f"Spearman ρ of {metric}'s cell effects against the LR, per rollout × KL series of "
        "`lr_sweep`, bounds drawn from the cell + seed fit",
        fn,
        EVERY,
        BELOW,
        -RHO,
        "'monotonically' is ρ = −1 ([P]'s sweep); −0.8 allows one adjacent swap among five "
        "LRs (ρ = −0.9) but not a flat or turning curve.",
        published=-1.0,
        over="rollout × KL series",
        unit="",
    )


CLAIMS = (
    Claim(
        id=5,
        title="Sweep: sparsity falls and forgetting rises monotonically with LR; OffPD forgets "
        "less at matched LR.",
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                6,
                "Y en el sweep, a LR emparejadas, OffPD olvida menos que OnPD y produce "
                "updates al menos tan sparse",
                "And in the sweep, at matched LRs, OffPD forgets less than OnPD and "
                "produces updates at least as sparse",
            ),
            LR_GOVERNS,
        ),
        experiments=(SWEEP,),
        premises=(sparsity_floor(SWEEP, lambda view: grid_rows(view, SWEEP)),),
        parts=(
            _rho_part("ρ_sparsity", "bf16 sparsity (τ = 1e-6)", sparsity_rho),
            _rho_part("ρ_forget", "forgetting_pp (skills after − before)", forgetting_rho),
            Part(
                "OffPD − OnPD",
                "forgetting_pp of OffPD − OnPD (positive: OffPD loses fewer skills), pooled "
                "over matched KL × LR cells of the sweep's fit",
                offpd_forgets_less,
                POOLED,
                ABOVE,
                0.0,
                "'forgets less' is a sign: [P] prints no size, so any positive difference "
                "beyond uncertainty; calibration plants 1 pp (under the ≤ 1.3 pp low-LR change).",
                published=PLANT_OFFPD_LESS_PP,
                sized=False,
            ),
        ),
        needs="the LR sweep (`lr_sweep`) at ≥ 3 learning rates with OnPD and OffPD, "
        "eval/forgetting_pp and eval/sparsity_bf16_tau1e-06",
        margin_cases=(MarginCase("OffPD forgets as much as OnPD", offpd_equal_at_margin, True),),
    ),
)
