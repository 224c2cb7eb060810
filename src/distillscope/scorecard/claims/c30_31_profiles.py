"""Claims 30 and 31 ([P]): forward KL at the low LR gives the most robust profile; reverse KL
varies more between seeds.

Both read only the main grid. Claim 30, for every forward-KL cell at the lowest LR (each
rollout): the best other configuration's accuracy − the cell's below 3 pp (within 3 pp of the
best, or the best itself), and its forgetting within ±2 pp (a level, the seed as replicate).
Claim 31: the residual variance of accuracy under reverse KL ÷ under forward KL above 1, each
from a cell + seed fit of that direction's cells (the shared seed effect removed), bounds from
the F distribution.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.scorecard.claim_columns import ACC, FORGET, FORWARD, KIND, LR, MAIN, REVERSE
from distillscope.scorecard.claim_spec import (
    ABOVE,
    BELOW,
    EVERY,
    POOLED,
    WITHIN,
    Claim,
    Part,
    Quote,
)
from distillscope.scorecard.contrasts import blocks, stratum_name
from distillscope.scorecard.estimate import Blocks, Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence, missing_metric
from distillscope.scorecard.exact import variance_ratio
from distillscope.scorecard.selection import grid_rows

BEST_PP, FORGET_PP = 3.0, 2.0


def _low_forward(b: Blocks) -> np.ndarray:
    lr = pd.to_numeric(b.cells[LR], errors="coerce")
    return b.mask(**{KIND: FORWARD}) & (lr == lr.min()).to_numpy()


def behind_best(view: ClaimEvidence) -> list[Estimate]:
    """Per forward-KL low-LR cell: the best other configuration − it (accuracy)."""
    b = blocks(view, MAIN, grid_rows(view, MAIN), ACC)
    if isinstance(b, str):
        return [not_tested("Δ best", b)]
    if b.thin:
        return [not_tested("Δ best", f"{b.cell_names(b.thin)} has fewer than 2 seeds")]
    mu = b.cells["mu"].to_numpy(dtype=float)
    out = []
    for i in np.flatnonzero(_low_forward(b)):
        others = np.flatnonzero(np.arange(len(mu)) != i)
        j = int(others[np.argmax(mu[others])])
        w = np.zeros(len(mu))
        w[j], w[i] = 1.0, -1.0
        x = b.contrast(w, stratum_name(b.cells, int(i), ["rollout.policy"]))
        out.append(x.selected(len(others), ""))
    return out or [not_tested("Δ best", "forward-KL runs of `main`")]


def forgetting(view: ClaimEvidence) -> list[Estimate]:
    """Per forward-KL low-LR cell, its forgetting (pp), the seed as replicate."""
    b = blocks(view, MAIN, grid_rows(view, MAIN), FORGET)
    if isinstance(b, str):
        return [not_tested("forgetting", b)]
    cells = np.flatnonzero(_low_forward(b))
    out = []
    for i in cells:
        m = np.zeros(len(b.cells), dtype=bool)
        m[i] = True
        out.append(b.level(m, stratum_name(b.cells, int(i), ["rollout.policy"])))
    return out or [not_tested("forgetting", "forward-KL runs of `main`")]


def spread_ratio(view: ClaimEvidence) -> list[Estimate]:
    """Residual variance of accuracy, reverse KL ÷ forward KL (cell + seed fits)."""
    label = "var ratio"
    rows = grid_rows(view, MAIN)
    lack = missing_metric(rows, ACC, "the main grid")
    if lack:
        return [not_tested(label, lack)]
    fits = {}
    for kind in (REVERSE, FORWARD):
        side = rows[rows[KIND] == kind]
        if side.empty:
            return [not_tested(label, f"{kind} runs of `main`")]
        b = Blocks(side, ACC, [c for c in ("rollout.policy", LR) if c in side.columns])
        if b.thin:
            return [not_tested(label, f"{b.cell_names(b.thin)} has fewer than 2 seeds")]
        fits[kind] = b
    r, f = fits[REVERSE], fits[FORWARD]
    return [variance_ratio(label, r.sigma2, r.dof, f.sigma2, f.dof)]


CLAIMS = (
    Claim(
        id=30,
        title="Forward KL at the low LR gives the most robust profile.",
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                62,
                "Con forward KL y LR bajo tienes el perfil más robusto del paper — buena "
                "accuracy y olvido mínimo",
                "With forward KL and the low LR you have the paper's most robust profile "
                "— good accuracy and minimal forgetting",
            ),
            Quote(
                "002_c8062276978be7ba.txt",
                25,
                "con forward KL y LR bajo consigues la mejor accuracy sin el olvido",
                "with forward KL and the low LR you get the best accuracy without the forgetting",
            ),
        ),
        experiments=(MAIN,),
        parts=(
            Part(
                "Δ best",
                "per forward-KL cell at the main grid's lowest LR: the best other "
                "configuration's accuracy − the cell's, on the cell + seed fit",
                behind_best,
                EVERY,
                BELOW,
                BEST_PP,
                "'most robust' keeps accuracy near the best: within 3 pp, [P]'s forward-KL "
                "spread (71–73%) with room for noise.",
                published=0.0,
                over="rollout",
            ),
            Part(
                "forgetting",
                "per forward-KL cell at the lowest LR, its eval/forgetting_pp (the seed as "
                "replicate)",
                forgetting,
                EVERY,
                WITHIN,
                FORGET_PP,
                "claim 3's low-LR band: [P]'s low-LR change is ≤ 1.3 pp.",
                published=-1.0,
                over="rollout",
            ),
        ),
        needs="the main grid (`main`) with eval/accuracy and eval/forgetting_pp",
    ),
    Claim(
        id=31,
        title="Reverse KL varies more between seeds.",
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                38,
                "Reverse KL varía mucho con λ y entre semillas",
                "Reverse KL varies a lot with λ and between seeds",
                "§5.2",
            ),
        ),
        experiments=(MAIN,),
        parts=(
            Part(
                "var ratio",
                "residual variance of accuracy over the main grid's reverse-KL cells ÷ over "
                "its forward-KL cells, each from a cell + seed fit (the shared seed effect "
                "removed); F-distribution bounds",
                spread_ratio,
                POOLED,
                ABOVE,
                1.0,
                "'varies more' is an order of variances: a ratio above 1 beyond the F "
                "test's uncertainty; [P] gives no size.",
                published=4.0,
                sized=False,
                unit="×",
            ),
        ),
        needs="the main grid (`main`) with forward and reverse KL and ≥ 2 seeds per cell",
    ),
)
