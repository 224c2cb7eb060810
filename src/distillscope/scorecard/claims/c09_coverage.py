"""Claim 9 ([P] §4.2): forward KL gives more coverage — higher pass@10 at similar pass@1.

On the seed-blocked main-grid fits: forward − reverse pass@K (K = 10, else the largest k
measured), pooled over matched rollout × LR cells, above 3 pp — pass@K itself, not pass@K −
pass@1 (equal pass@K with a lower pass@1 is not more coverage); and forward − reverse pass@1
within ±5 pp.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.scorecard.claim_columns import FORWARD, KIND, MAIN, REVERSE
from distillscope.scorecard.claim_spec import (
    ABOVE,
    POOLED,
    WITHIN,
    Claim,
    MarginCase,
    Offsets,
    Part,
    Quote,
)
from distillscope.scorecard.contrasts import blocks, matched
from distillscope.scorecard.estimate import Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence
from distillscope.scorecard.planting import axes, in_pp, rows_mask
from distillscope.scorecard.selection import grid_rows

COVERAGE_PP = 3.0
SIMILAR_PP = 5.0
PASS1 = "eval/pass@1"


def pass_k(rows: pd.DataFrame, prefix: str = "eval/pass@") -> str | None:
    """``{prefix}10`` when measured, else the largest k > 1 measured (None without one)."""
    ks = sorted(
        int(c[len(prefix) :])
        for c in rows.columns
        if c.startswith(prefix) and c[len(prefix) :].isdigit() and rows[c].notna().any()
    )
    big = [k for k in ks if k > 1]
    if not big:
        return None
    return f"{prefix}{10 if 10 in big else big[-1]}"


def _forward_minus_reverse(view: ClaimEvidence, metric: str | None, name: str) -> list[Estimate]:
    rows = grid_rows(view, MAIN)
    if metric is None:
        return [not_tested(name, "pass@k at some k > 1 in `main`")]
    b = blocks(view, MAIN, rows, metric)
    if isinstance(b, str):
        return [not_tested(name, b)]
    return matched(b, KIND, FORWARD, REVERSE, (), name)


def coverage_gain(view: ClaimEvidence) -> list[Estimate]:
    """Forward − reverse pass@K, pooled over matched rollout × LR cells."""
    return _forward_minus_reverse(view, pass_k(grid_rows(view, MAIN)), "Δ pass@K")


def pass1_gap(view: ClaimEvidence) -> list[Estimate]:
    """Forward − reverse pass@1, pooled over matched rollout × LR cells."""
    return _forward_minus_reverse(view, PASS1, "Δ pass@1")


def pass1_at_margin(d: pd.DataFrame) -> dict[str, np.ndarray]:
    """Forward KL's pass@1 (and pass@10 with it) raised by SIMILAR_PP: "similar" at its edge."""
    shift = np.where(rows_mask(d, MAIN, **{KIND: FORWARD}), in_pp(PASS1, SIMILAR_PP), 0.0)
    return {PASS1: shift, "eval/pass@10": shift}


#: The planted pass@10 (fractions above the study's typical value): forward KL +15 pp, reverse
#: KL +5 pp — 10 pp more coverage at an unchanged pass@1.
PLANT_FORWARD, PLANT_REVERSE = 0.15, 0.05


def plant(d: pd.DataFrame) -> Offsets:
    """pass@10 ``PLANT_FORWARD`` / ``PLANT_REVERSE`` above typical, pass@1 unchanged."""
    return {"eval/pass@10": np.where(axes(d).reverse, PLANT_REVERSE, PLANT_FORWARD)}


CLAIMS = (
    Claim(
        id=9,
        title="Forward KL gives more coverage (higher pass@10 at similar pass@1).",
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                44,
                "También en pass@10 con pass@1 comparable gana forward KL sobre reverse KL",
                "Also on pass@10 at comparable pass@1 forward KL beats reverse KL",
            ),
            Quote(
                "000_4fa7018284e9b536.txt",
                31,
                "A KL direta produz ganhos maiores de pass@ na tarefa dentro da "
                "distribuição do que a KL reversa.",
                "Forward KL yields larger pass@ gains on the in-distribution task than reverse KL.",
            ),
        ),
        experiments=(MAIN,),
        parts=(
            Part(
                "Δ pass@K",
                "forward − reverse pass@K (K = 10, else the largest k), pooled over matched "
                "rollout × LR cells of the main grid's cell + seed fit",
                coverage_gain,
                POOLED,
                ABOVE,
                COVERAGE_PP,
                "[P] prints no size; 3 pp is the smallest gap a 100-item, 10-sample coverage "
                "evaluation resolves (pass@10 binomial SD ≈ 3 pp per run).",
                published=10.0,
                sized=False,
            ),
            Part(
                "Δ pass@1",
                "forward − reverse pass@1, pooled over matched rollout × LR cells",
                pass1_gap,
                POOLED,
                WITHIN,
                SIMILAR_PP,
                "'similar pass@1': the same ±5 pp band as claim 1's 'no consistent gain'.",
                published=0.0,
            ),
        ),
        plant=plant,
        needs="the main grid (`main`) with forward and reverse KL, eval/pass@1 and eval/pass@10",
        margin_cases=(MarginCase("pass@1 gap at the margin", pass1_at_margin, True),),
    ),
)
