"""The informativeness I of one training step's rollouts (docs/method.md §4; the formula:
:mod:`distillscope.objectives.informativeness`).

Logged by the loop as ``opd/informativeness`` and ``opd/informativeness_groups`` whenever a step
has ``rollout.rollouts_per_prompt`` ≥ 2, for any objective: the advantage is Δℓ_t at
temperature 1 (the diagnostics' ``teacher_t1`` − ``student_t1``, the models' own
distributions), whatever the loss temperatures. Only student-written rollouts count (a rollout
the teacher wrote says nothing about the student's choices), so OffPD steps log nothing and
mixed policies count their student-written rows. A step where no prompt group has both a
correct and an incorrect student rollout logs ``opd/informativeness_groups`` = 0 and no
``opd/informativeness`` (undefined, never NaN in ``metrics.jsonl``); so does a step whose
counted rollouts all have their group's mean advantage (no spread).
"""

from __future__ import annotations

import math

import torch

from distillscope.objectives.informativeness import informativeness, mean_advantage
from distillscope.rollout.policies import SOURCE_STUDENT
from distillscope.rollout.rollouts import Rollouts

INFO_KEY = "opd/informativeness"
GROUPS_KEY = "opd/informativeness_groups"


def informativeness_metrics(
    rollouts_per_prompt: int,
    rollouts: Rollouts,
    logprobs_B_T: dict[str, torch.Tensor],
    rewards: list[float],
) -> dict[str, float]:
    """``{INFO_KEY, GROUPS_KEY}`` of one step (``{}`` with one rollout per prompt, without a
    student-written rollout or without the temperature-1 log-probs). Rows are grouped as the
    loop lays them out: each prompt's ``rollouts_per_prompt`` rollouts next to each other."""
    student_B = rollouts.source_B.cpu() == SOURCE_STUDENT
    if rollouts_per_prompt < 2 or "teacher_t1" not in logprobs_B_T or not student_B.any():
        return {}
    mask_B_T = rollouts.completion_mask_B_T
    adv_B = mean_advantage(logprobs_B_T["teacher_t1"], logprobs_B_T["student_t1"], mask_B_T)
    adv_B = adv_B.cpu().masked_fill(~student_B, math.nan)
    group_B = torch.arange(len(adv_B)) // rollouts_per_prompt
    value, groups = informativeness(adv_B, rewards, group_B)
    out = {GROUPS_KEY: float(groups)}
    if groups and math.isfinite(value):
        out[INFO_KEY] = value
    return out
