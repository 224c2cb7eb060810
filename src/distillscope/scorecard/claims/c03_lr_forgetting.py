"""Claim 3 ([P]): the learning rate governs forgetting; rollout barely matters.

On the seed-blocked main-grid fit of ``eval/forgetting_pp`` (skills after − before, pp; more
negative = more forgotten): the extra forgetting at the high LR (low − high, pooled over
matched rollout × KL cells) above 5 pp; the low LR's change within ±2 pp (a level: the seed is
the replicate); and OnPD − OffPD in every LR × KL cell (not pooled over KL, so that opposite
effects cannot cancel) within a band of a third of the study's own LR effect — relative, as
docs/method.md §9 says: [P]'s own high-LR range spans 2.8 pp (11.2–14.0), so an absolute ±2 pp
band would be tighter than the paper's data; "little variation" is small against what the LR
does. |Δ_ro| < Δ_LR / 3 is two linear contrasts of one fit per cell, Δ_LR/3 − Δ_ro > 0 and
Δ_LR/3 + Δ_ro > 0 (each at α: the equivalence test of a band that is itself estimated).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd

from distillscope.scorecard.claim_columns import FORGET, KIND, LR, POLICY, STUDENT, TEACHER
from distillscope.scorecard.claim_spec import (
    ABOVE,
    EVERY,
    POOLED,
    WITHIN,
    Claim,
    MarginCase,
    Offsets,
    Part,
    Quote,
)
from distillscope.scorecard.claims.quotes import LR_GOVERNS
from distillscope.scorecard.contrasts import blocks, matched, matched_weights
from distillscope.scorecard.estimate import Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence
from distillscope.scorecard.planting import axes, lr_end, rows_mask
from distillscope.scorecard.selection import MAIN_GRID, Grid

LR_MARGIN_PP = 5.0
LOW_LR_MARGIN_PP = 2.0
#: The rollout band as a share of the study's own LR effect.
BAND_SHARE = 1.0 / 3.0
#: The planted world's forgetting (pp): −1 at the low LR to −12.6 at the high LR ([P]: ≤ 1.3
#: and 11.2–14.0), OffPD forgetting 1 pp less (within ±2 pp here, above claim 5's 0).
PLANT_LOW_PP, PLANT_HIGH_PP, PLANT_OFFPD_LESS_PP = -1.0, 12.6, 1.0


def plant(d: pd.DataFrame) -> Offsets:
    """forgetting_pp (a level) from ``PLANT_LOW_PP`` at each experiment's lowest LR to
    −``PLANT_HIGH_PP`` at its highest (linear in log LR), OffPD ``PLANT_OFFPD_LESS_PP`` less."""
    a = axes(d)
    forget = PLANT_LOW_PP - (PLANT_HIGH_PP + PLANT_LOW_PP) * a.lr_position
    return {FORGET: forget + np.where(a.policy == TEACHER, PLANT_OFFPD_LESS_PP, 0.0)}


def _ends(view: ClaimEvidence, grid: Grid) -> tuple[object, str]:
    """(the fit of the grid's two extreme LRs, or what is missing)."""
    rows = grid.rows(view)
    if LR not in rows.columns or rows[LR].dropna().nunique() < 2:
        return None, f"{grid.name} runs at two learning rates"
    lrs = sorted(rows[LR].dropna().unique())
    ends = rows[rows[LR].isin([lrs[0], lrs[-1]])]
    b = blocks(view, f"{grid.experiment} (extreme LRs)", ends, FORGET)
    return (None, b) if isinstance(b, str) else (b, "")


def lr_effect(view: ClaimEvidence, grid: Grid = MAIN_GRID) -> list[Estimate]:
    """forgetting_pp(low LR) − forgetting_pp(high LR), pooled over matched rollout × KL cells."""
    b, lack = _ends(view, grid)
    if b is None:
        return [not_tested("Δ_LR", lack)]
    lrs = sorted(b.cells[LR].unique())
    return matched(b, LR, lrs[0], lrs[-1], (), "Δ_LR")


def low_lr_change(view: ClaimEvidence, grid: Grid = MAIN_GRID) -> list[Estimate]:
    """The mean forgetting_pp of the low LR's cells, the seed as replicate."""
    b, lack = _ends(view, grid)
    if b is None:
        return [not_tested("low-LR change", lack)]
    low = min(b.cells[LR].unique())
    return [b.level(b.mask(**{LR: low}), "low-LR change")]


def rollout_band(view: ClaimEvidence, grid: Grid = MAIN_GRID, sign: float = 1.0) -> list[Estimate]:
    """Per LR × KL cell, Δ_LR / 3 − sign · Δ_ro (Δ_ro = OnPD − OffPD forgetting_pp in that
    cell, Δ_LR = low − high LR pooled), one contrast of the grid's fit."""
    label = f"Δ_LR/3 {'−' if sign > 0 else '+'} Δ_ro"
    b = blocks(view, grid.experiment, grid.rows(view), FORGET)
    if isinstance(b, str):
        return [not_tested(label, b)]
    lrs = sorted(b.cells[LR].dropna().unique()) if LR in b.cells.columns else []
    if len(lrs) < 2:
        return [not_tested(label, f"{grid.name} runs at two learning rates")]
    lr_w = matched_weights(b, LR, lrs[0], lrs[-1]).get("pooled")
    ro_w = matched_weights(b, POLICY, STUDENT, TEACHER, (KIND, LR))
    if lr_w is None or not ro_w:
        return [not_tested(label, "matched cells of both LRs and both rollouts")]
    return [b.contrast(BAND_SHARE * lr_w - sign * w, cell) for cell, w in ro_w.items()]


def low_lr_at_margin(d: pd.DataFrame, grid: Grid = MAIN_GRID) -> dict[str, np.ndarray]:
    """The low LR's mean change moved to exactly −LOW_LR_MARGIN_PP (planted: −0.5)."""
    planted = PLANT_LOW_PP + PLANT_OFFPD_LESS_PP / 2
    low = lr_end(d, grid.experiment, False)
    return {FORGET: np.where(low, -LOW_LR_MARGIN_PP - planted, 0.0)}


def rollout_at_margin(d: pd.DataFrame, grid: Grid = MAIN_GRID) -> dict[str, np.ndarray]:
    """OffPD forgetting_pp at the high LR raised by x (both KLs) so that |Δ_ro| there is exactly
    a third of the planted world's Δ_LR, which x lowers too: with D = the planted LR effect and
    L = OffPD's planted lead, L + x = (D − x/2) / 3, x = (D/3 − L) · 6/7 (two rollouts)."""
    e = grid.experiment
    off = rows_mask(d, e, **{POLICY: TEACHER}) & lr_end(d, e, True)
    lr_effect_pp = PLANT_HIGH_PP + PLANT_LOW_PP
    x = (BAND_SHARE * lr_effect_pp - PLANT_OFFPD_LESS_PP) / (1 + BAND_SHARE / 2)
    return {FORGET: np.where(off, x, 0.0)}


def specify(grid: Grid = MAIN_GRID) -> Claim:
    """Claim 3 reading ``grid`` (the main grid; claim 14 replays it on the no-clip grid)."""
    return Claim(
        id=3,
        title="LR governs forgetting: ≤ 1.3 pp change at the low LR, 11.2–14.0 pp drop at the "
        "high LR, little or no variation due to rollout.",
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                6,
                "en 7 benchmarks OOD el rendimiento cambia 1.3 pp o menos a LR 1e-5, pero "
                "cae 11.2-14.0 pp a LR 5e-5",
                "on 7 OOD benchmarks performance changes by 1.3 pp or less at LR 1e-5, "
                "but drops 11.2–14.0 pp at LR 5e-5",
            ),
            LR_GOVERNS,
        ),
        experiments=(grid.experiment,),
        parts=(
            Part(
                "Δ_LR",
                "forgetting_pp(low LR) − forgetting_pp(high LR) (extra skills lost at the high "
                "LR), pooled over matched rollout × KL cells of the fit of the two extreme LRs",
                partial(lr_effect, grid=grid),
                POOLED,
                ABOVE,
                LR_MARGIN_PP,
                "under half the published ≈ 11 pp difference (11.2–14.0 drop vs ≤ 1.3): a "
                "smaller one does not 'govern'.",
                published=11.6,
            ),
            Part(
                "low-LR change",
                "mean forgetting_pp over the low LR's cells (the seed as replicate)",
                partial(low_lr_change, grid=grid),
                POOLED,
                WITHIN,
                LOW_LR_MARGIN_PP,
                "[P]: ≤ 1.3 pp; ±2 pp leaves 0.7 pp for a testbed's skill suite.",
                published=-1.3,
            ),
            *(
                Part(
                    f"Δ_LR/3 {op} Δ_ro",
                    f"a third of Δ_LR (low − high LR, pooled) {op} Δ_ro (OnPD − OffPD "
                    "forgetting_pp) per LR × KL cell, one contrast of the grid's fit (not "
                    "pooled over KL: opposite effects must not cancel)",
                    partial(rollout_band, grid=grid, sign=sign),
                    EVERY,
                    ABOVE,
                    0.0,
                    "'little or no variation due to rollout' is relative (docs/method.md §9): "
                    "|Δ_ro| < Δ_LR / 3, the band a third of the study's own LR effect ([P]'s "
                    "high-LR range alone spans 14.0 − 11.2 = 2.8 pp); published ≈ 11.6 / 3 ≈ "
                    "3.9 pp of slack with no rollout effect.",
                    published=PLANT_HIGH_PP / 3 + PLANT_LOW_PP / 3,
                    over="LR × KL cell",
                )
                for op, sign in (("−", 1.0), ("+", -1.0))
            ),
        ),
        needs="the main grid (`main`) at two learning rates with OnPD and OffPD and "
        "eval/forgetting_pp",
        plant=plant,
        levels=(FORGET,),  # forgetting_pp planted as a level
        margin_cases=(
            MarginCase("low-LR change at the margin", partial(low_lr_at_margin, grid=grid), True),
            MarginCase("rollout effect at the margin", partial(rollout_at_margin, grid=grid), True),
        ),
    )


CLAIMS = (specify(),)
