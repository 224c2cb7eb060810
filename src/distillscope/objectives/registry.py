"""The objective kinds a config can name: one entry each, the single home of the list.

``objective.kind`` is validated against :data:`OBJECTIVES` when a config loads, and the
training loop looks its entry up once to call the function. Each entry says what the function
needs, so that incompatible settings fail at validation, not at step 0:

- ``inputs="logits"``: ``loss(student_logits_B_T_V, teacher_logits_B_T_V, mask_B_T, **options,
  vocab_size=...)`` — a full-vocabulary divergence or a sampled estimator on both models' logits;
- ``inputs="sampled_tokens"``: ``loss(student_logits_B_T_V, tokens_B_T, logp_teacher_B_T,
  logp_behavior_B_T, mask_B_T, **options)`` — a policy gradient on the rollout's own tokens.

``options`` are the ``ObjectiveConfig`` fields passed to the function by keyword.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from distillscope.objectives.divergences import forward_kl, generalized_jsd, kl_mixture, reverse_kl
from distillscope.objectives.estimators import sampled_forward_kl, sampled_reverse_kl
from distillscope.objectives.opd import opd_policy_gradient

LOSS_OPTIONS = ("student_temperature", "teacher_temperature", "reduction")
OPD_OPTIONS = (
    "regulation", "clip_min", "clip_max", "eps_low", "eps_high", "student_temperature",
    "reduction",
)  # fmt: skip


@dataclass(frozen=True)
class ObjectiveKind:
    """One objective a run can minimise, and what it needs from the loop and the config."""

    name: str
    loss: Callable[..., tuple]
    summary: str  # one line, shown in the CLI's config listing
    inputs: Literal["logits", "sampled_tokens"] = "logits"
    options: tuple[str, ...] = LOSS_OPTIONS
    chunkable: bool = False  # has a chunked form from hidden states (objective.chunk_size > 0)
    full_vocabulary: bool = False  # sums over the whole vocabulary at each position
    needs_generator: bool = False  # draws extra tokens with the step's generator
    needs_behavior_logprobs: bool = False  # needs the sampler's log-probs of its own tokens
    needs_student_rollouts: bool = False  # only meaningful when the student wrote the tokens


OBJECTIVES: dict[str, ObjectiveKind] = {
    k.name: k
    for k in (
        ObjectiveKind(
            "forward_kl", forward_kl, "KL(π_T ‖ π_S), full vocabulary (mode-covering)",
            chunkable=True, full_vocabulary=True,
        ),
        ObjectiveKind(
            "reverse_kl", reverse_kl, "KL(π_S ‖ π_T), full vocabulary (mode-seeking)",
            chunkable=True, full_vocabulary=True,
        ),
        ObjectiveKind(
            "jsd", generalized_jsd, "generalised Jensen–Shannon divergence (objective.beta)",
            options=(*LOSS_OPTIONS, "beta"), chunkable=True, full_vocabulary=True,
        ),
        ObjectiveKind(
            "mixture", kl_mixture, "α·forward + (1−α)·reverse KL (objective.alpha)",
            options=(*LOSS_OPTIONS, "alpha"), chunkable=True, full_vocabulary=True,
        ),
        ObjectiveKind(
            "forward_sampled", sampled_forward_kl, "forward KL, one teacher sample per position",
            needs_generator=True,
        ),
        ObjectiveKind(
            "reverse_sampled", sampled_reverse_kl, "reverse KL, one student sample per position",
            needs_generator=True,
        ),
        ObjectiveKind(
            "opd", opd_policy_gradient,
            "on-policy distillation: clipped policy gradient with teacher advantages",
            inputs="sampled_tokens", options=OPD_OPTIONS, needs_behavior_logprobs=True,
            needs_student_rollouts=True,
        ),
    )
}  # fmt: skip


def objective_kind(name: str) -> ObjectiveKind:
    """The registry entry of ``name``; ValueError naming the allowed kinds otherwise."""
    if name not in OBJECTIVES:
        raise ValueError(f"objective.kind must be one of {tuple(OBJECTIVES)}, got {name!r}")
    return OBJECTIVES[name]
