"""Informativeness I of a teacher's token signal ([D]; docs/method.md §4).

Does the teacher's per-token advantage point at correct answers? For every prompt group (the
G ≥ 2 rollouts of one prompt) that holds both a correct and an incorrect rollout, take each
rollout i's mean advantage and its binary reward,

    Ā_i = (1/|y_i|) Σ_t Δℓ_t,   Δℓ_t = log π_T(y_t | h_t) − log π_S(y_t | h_t),
    R_i = 1 if reward_i > 0 else 0,

centre both within the group (a_i = Ā_i − mean_g Ā, r_i = R_i − mean_g R) and pool the centred
values of the qualifying groups:

    I = Σ_i a_i r_i / √(Σ_i a_i² · Σ_i r_i²),

the Pearson (point-biserial) correlation of the centred values — their pooled means are 0, so
this is ``scipy.stats.pearsonr`` of the centred data. Within-group centring removes what a
prompt does to every rollout (an easy prompt raises every Ā), so I measures whether, *for the
same prompt*, the rollouts the teacher favours are the correct ones. I > 0 is needed for
distillation to help; groups whose rollouts are all correct or all wrong carry no information
and are left out.

Rewards: every distillscope task scores 0 or 1; a task with graded scores is read as correct
when its score is > 0 (``reward > 0``), so R stays binary. Pure torch, float64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch


def mean_advantage(
    logp_teacher_B_T: torch.Tensor, logp_student_B_T: torch.Tensor, mask_B_T: torch.Tensor
) -> torch.Tensor:
    """Ā per rollout: the masked mean over its completion tokens of log π_T − log π_S, ``[B]``
    (float64; NaN for a row with no completion token)."""
    mask = mask_B_T.to(torch.float64)
    delta = (logp_teacher_B_T.double() - logp_student_B_T.double()) * mask
    return delta.sum(dim=1) / mask.sum(dim=1)


def informativeness(
    mean_advantage_B: torch.Tensor | Sequence[float],
    reward_B: torch.Tensor | Sequence[float],
    group_B: torch.Tensor | Sequence[int],
) -> tuple[float, int]:
    """(I, number of groups used) of one batch (module docstring for the formula).

    ``group_B`` names each rollout's prompt group (any integers; rollouts of one prompt share
    one). A group counts when it has ≥ 2 rollouts with a finite Ā and both outcomes
    (R = 1 ⇔ reward > 0). I is NaN when no group counts, or when the centred Ā have no spread
    (every rollout of every counted group has its group's mean advantage).
    """
    adv = torch.as_tensor(mean_advantage_B, dtype=torch.float64).flatten()
    won = (torch.as_tensor(reward_B, dtype=torch.float64).flatten() > 0).to(torch.float64)
    group = torch.as_tensor(group_B).flatten()
    if not (len(adv) == len(won) == len(group)):
        raise ValueError(
            f"informativeness: {len(adv)} advantages, {len(won)} rewards, {len(group)} groups"
        )
    finite = torch.isfinite(adv)
    a_parts, r_parts = [], []
    for g in torch.unique(group[finite]):
        rows = finite & (group == g)
        a, r = adv[rows], won[rows]
        if len(a) < 2 or r.min() == r.max():  # one rollout, or all correct / all wrong
            continue
        a_parts.append(a - a.mean())
        r_parts.append(r - r.mean())
    if not a_parts:
        return math.nan, 0
    a, r = torch.cat(a_parts), torch.cat(r_parts)
    denom = math.sqrt(float((a * a).sum()) * float((r * r).sum()))
    value = float((a * r).sum()) / denom if denom > 0 else math.nan
    return value, len(a_parts)
