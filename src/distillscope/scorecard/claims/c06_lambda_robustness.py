"""Claim 6 ([P] §5.2, the λ-spectrum): forward KL is robust across λ; reverse KL is sensitive
and prefers student rollouts.

The seed's numbers are for λ ∈ [−1, 1] (teacher to student) at the low LR, so that is what is
judged (docs/method.md §9): on the ``spectrum`` experiment's lowest LR, each KL direction
fitted on its own (cell + seed; OffPD left out where it is not the spectrum's λ = −1), forward
KL's accuracy range over λ ∈ [−1, 1] within 8 pp; reverse KL's range there above forward's
beyond uncertainty (the seeds give no size for "a lot"); and reverse KL's best cell at λ > 0
beyond its best at λ ≤ 0. Extrapolated λ (|λ| > 1) and the other LRs are shown in the evidence,
not judged.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from distillscope.scorecard.claim_columns import ACC, FORWARD, KIND, LR, REVERSE
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
from distillscope.scorecard.contrasts import blocks
from distillscope.scorecard.crossed import pair_w, welch
from distillscope.scorecard.estimate import Blocks, Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence
from distillscope.scorecard.learned import learned_part
from distillscope.scorecard.planting import axes, in_pp
from distillscope.scorecard.rank import (
    MIN_POINTS,
    axis_values,
    lam_curves,
    mask_of,
    spectrum_rows,
    spectrum_top_lr,
)

SPECTRUM = "spectrum"
FORWARD_MARGIN_PP = 8.0
#: The judged stratum: λ from the teacher's pure rollout to the student's, at the low LR.
LAM_LO, LAM_HI = -1.0, 1.0
JUDGED = "low LR, λ ∈ [−1, 1]"


def _judged(
    view: ClaimEvidence, kind: str, label: str, show: bool = True
) -> tuple[Blocks | None, np.ndarray, str]:
    """(the fit of ``kind``'s spectrum runs, the indices of its judged cells — the lowest LR,
    λ ∈ [−1, 1] — , what is missing); with ``show``, every curve's range (all λ, each LR) goes
    to the evidence, shown, not judged."""
    b, found, lack = lam_curves(
        blocks(view, f"{SPECTRUM} {kind}", spectrum_rows(view, SPECTRUM, kind), ACC), label
    )
    if b is None:
        return None, np.array([], dtype=int), lack
    x = axis_values(b, "λ")
    keep = np.isfinite(x) & (x >= LAM_LO) & (x <= LAM_HI)
    if LR in b.cells.columns:
        lr = pd.to_numeric(b.cells[LR], errors="coerce").to_numpy(dtype=float)
        keep &= lr == np.nanmin(lr)
    idx = np.flatnonzero(keep)
    if len(np.unique(x[idx])) < MIN_POINTS:
        return None, idx, f"{MIN_POINTS} values of λ in [−1, 1] at the low LR for {label}"
    thin = [i for i in idx if i in b.thin]
    if thin:
        return None, idx, f"{b.cell_names(thin)} has fewer than 2 seeds"
    shown = [
        f"{name} {r.value:.1f} pp"
        for name, i in (found.items() if show else ())
        for r in [b.range(mask_of(len(b.cells), i), name)]
        if not r.missing
    ]
    if shown:
        view.leave_out(f"shown, not judged: {label} over every λ per LR: {'; '.join(shown)}")
    return b, idx, ""


def forward_range(view: ClaimEvidence) -> list[Estimate]:
    """max − min of forward KL's accuracy over λ ∈ [−1, 1] at the low LR."""
    b, idx, lack = _judged(view, FORWARD, "forward range")
    if b is None:
        return [not_tested("forward range", lack)]
    return [b.range(mask_of(len(b.cells), idx), JUDGED)]


def _extremes(b: Blocks, idx: np.ndarray, label: str) -> Estimate:
    """The judged cells' fitted max − min as the contrast of those two cells (value and SE)."""
    mu = b.cells["mu"].to_numpy(dtype=float)
    return b.contrast(pair_w(len(mu), idx[np.argmax(mu[idx])], idx[np.argmin(mu[idx])]), label)


def reverse_minus_forward(view: ClaimEvidence) -> list[Estimate]:
    """Reverse KL's range − forward KL's over λ ∈ [−1, 1] at the low LR: each range the contrast
    of its fit's extreme cells, the two fits' variances added (each direction keeps its own
    residual variance) on Welch–Satterthwaite degrees of freedom."""
    label = "reverse − forward range"
    got = [_judged(view, REVERSE, "reverse range"), _judged(view, FORWARD, "forward range")]
    lack = "; ".join(m for b, _, m in got if b is None)
    if lack:
        return [not_tested(label, lack)]
    (rb, ri, _), (fb, fi, _) = got
    r, f = _extremes(rb, ri, label), _extremes(fb, fi, label)
    if r.missing or f.missing:
        return [not_tested(label, r.missing or f.missing)]
    variances = [r.se**2, f.se**2]
    dof = welch(variances, [r.dof, f.dof])
    note = "; ".join(n for n in (r.note, f.note) if n)
    x = Estimate(JUDGED, r.value - f.value, math.sqrt(sum(variances)), dof, min(r.seeds, f.seeds))
    # each range's extremes are picked from the data: bounds Bonferroni over the pairs of each
    pairs = len(ri) * (len(ri) - 1) // 2 * len(fi) * (len(fi) - 1) // 2
    return [replace(x, note=note).selected(pairs, "")]


def reverse_best_student_side(view: ClaimEvidence) -> list[Estimate]:
    """Reverse KL at the low LR: the best cell at λ ∈ (0, 1] − the best at λ ∈ [−1, 0] (cells
    chosen by their fitted effect)."""
    label = "best λ>0 − best λ≤0"
    b, idx, lack = _judged(view, REVERSE, label, show=False)
    if b is None:
        return [not_tested(label, lack)]
    x, mu = axis_values(b, "λ"), b.cells["mu"].to_numpy(dtype=float)
    hi, lo = idx[x[idx] > 0], idx[x[idx] <= 0]
    if not len(hi) or not len(lo):
        return [not_tested(label, f"cells at λ > 0 and λ ≤ 0 for {label}")]
    w = pair_w(len(mu), hi[np.argmax(mu[hi])], lo[np.argmax(mu[lo])])
    return [b.contrast(w, JUDGED).selected(len(hi) * len(lo), "")]


def forward_range_at_margin(d: pd.DataFrame) -> dict[str, np.ndarray]:
    """Forward KL's accuracy over λ ∈ [−1, 1] at the lowest LR rising linearly by exactly
    FORWARD_MARGIN_PP from λ = −1 to λ = +1 (its range at the margin)."""
    rows, lam, _ = spectrum_top_lr(d, top=False)
    kinds = d[KIND].map(str).to_numpy() if KIND in d else np.array([""] * len(d))
    rows = rows & (kinds == FORWARD) & (lam >= LAM_LO) & (lam <= LAM_HI)
    size = in_pp(ACC, FORWARD_MARGIN_PP)
    return {ACC: np.where(rows, size * (lam - LAM_LO) / (LAM_HI - LAM_LO), 0.0)}


#: The planted spectrum ([P]: reverse KL 35% → 72% across λ): reverse-KL accuracy offsets
#: (fractions) from −37 pp at λ = −2 rising 9.25 pp per unit λ to 0 at λ = +2.
PLANT_REVERSE_AT_MINUS_2, PLANT_REVERSE_SLOPE = -0.37, 0.0925


def plant(d: pd.DataFrame) -> Offsets:
    """The spectrum's reverse-KL runs on the curve above (forward KL flat)."""
    a = axes(d)
    curve = PLANT_REVERSE_AT_MINUS_2 + PLANT_REVERSE_SLOPE * (np.clip(a.lam, -2, 2) + 2)
    return {ACC: np.where(a.reverse & a.spectrum, curve, 0.0)}


CLAIMS = (
    Claim(
        id=6,
        title="Forward KL is robust across λ (> 80%, 5.2 pp range at the low LR on Countdown-3, "
        "λ ∈ [−1, 1]); reverse KL is sensitive and prefers student rollouts.",
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                38,
                "forward KL mantiene la accuracy por encima del 80% en todo el rango —del "
                "rollout puro del teacher al puro del estudiante—, con una variación de "
                "5.2 pp a LR bajo en Countdown-3",
                "forward KL keeps accuracy above 80% over the whole range — from the "
                "teacher's pure rollout to the student's pure rollout — with a 5.2 pp "
                "variation at the low LR on Countdown-3",
                "§5.2",
            ),
            Quote(
                "002_c8062276978be7ba.txt",
                38,
                "Reverse KL varía mucho con λ",
                "Reverse KL varies a lot with λ",
                "§5.2",
            ),
            Quote(
                "000_4fa7018284e9b536.txt",
                34,
                "A KL reversa é substancialmente mais sensível e favorece rollouts "
                "gerados pelo aluno.",
                "Reverse KL is substantially more sensitive and favours student-generated "
                "rollouts.",
            ),
        ),
        experiments=(SPECTRUM,),
        premises=(learned_part(SPECTRUM),),
        parts=(
            Part(
                "forward range",
                "max − min of forward KL's accuracy over λ ∈ [−1, 1] at the low LR, pairs of "
                "cells of its spectrum fit (extrapolated λ and the high LR shown, not judged)",
                forward_range,
                POOLED,
                WITHIN,
                FORWARD_MARGIN_PP,
                "[P]'s forward range is 5.2 pp at the low LR from the teacher's pure rollout "
                "to the student's (λ ∈ [−1, 1]); 8 pp is that plus room for a testbed's noise.",
                published=5.2,
            ),
            Part(
                "reverse − forward range",
                "reverse KL's accuracy range over λ ∈ [−1, 1] at the low LR − forward KL's, "
                "each the contrast of its own fit's extreme cells",
                reverse_minus_forward,
                POOLED,
                ABOVE,
                0.0,
                "'varies a lot' / 'substantially more sensitive' is an order: the seeds give "
                "no size, so a sign beyond uncertainty.",
                published=PLANT_REVERSE_SLOPE * 100 * (LAM_HI - LAM_LO),
                sized=False,
            ),
            Part(
                "best λ>0 − best λ≤0",
                "reverse KL at the low LR: the fitted best cell at λ ∈ (0, 1] − the fitted "
                "best at λ ∈ [−1, 0], a contrast of its fit",
                reverse_best_student_side,
                POOLED,
                ABOVE,
                0.0,
                "'favours student-generated rollouts' is a sign: its best cell lies at λ > 0; "
                "the seeds give no size.",
                published=PLANT_REVERSE_SLOPE * 100 * LAM_HI,
                sized=False,
            ),
        ),
        plant=plant,
        needs="the λ-spectrum (`spectrum`) at ≥ 3 values of λ under forward and reverse KL, "
        "eval/accuracy",
        margin_cases=(
            MarginCase("forward KL's range over λ at the margin", forward_range_at_margin, True),
        ),
    ),
)
