"""The objective kinds a config can name: one entry each, the single home of the list.

``objective.kind`` is validated against :data:`OBJECTIVES` when a config loads, and the
training loop looks its entry up once to call the function. Each entry says what the function
needs, so that incompatible settings fail at validation, not at step 0:

- ``inputs="logits"``: ``loss(student_logits_B_T_V, teacher_logits_B_T_V, mask_B_T, **options,
  vocab_size=...)`` — a full-vocabulary divergence or a sampled estimator on both models' logits;
- ``inputs="sampled_tokens"``: ``loss(student_logits_B_T_V, tokens_B_T, logp_teacher_B_T,
  logp_behavior_B_T, mask_B_T, **options)`` — a policy gradient on the rollout's own tokens.

``options`` are the ``ObjectiveConfig`` fields passed to the function by keyword.

Every kind also has a form from hidden states + LM-head weights (``hidden_form``), the default
training path when V > :data:`FUSED_MIN_VOCAB` (docs/method.md §2, Memory), so that no
[B, T, V] tensor exists at real vocabularies:

- ``"divergence"``: :func:`~distillscope.objectives.fused.fused_divergence` (closed-form
  gradients, chunks sized by ``objective.memory_budget_mb``);
- ``"token_logprobs"``: the loss needs one token's log-prob per position (OPD, the sampled
  estimators); :mod:`~distillscope.objectives.fused_tokens` gives it chunk by chunk, with draws
  by inverse CDF from the same uniforms as the logits path.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

#: Above this vocabulary size the training loop computes every objective and diagnostic from
#: hidden states (``objective.path: auto``); at or below it, from logits.
FUSED_MIN_VOCAB = 4096

LOSS_OPTIONS = ("student_temperature", "teacher_temperature", "reduction")
OPD_OPTIONS = (
    "regulation",
    "clip_min",
    "clip_max",
    "eps_low",
    "eps_high",
    "student_temperature",
    "reduction",
)


@dataclass(frozen=True)
class ObjectiveKind:
    """One objective a run can minimise, and what it needs from the loop and the config."""

    name: str
    #: "module:function" of the loss within this package, imported on first use, so that
    #: validating a config (which reads this registry) never imports torch
    impl: str
    summary: str  # one line, shown in the CLI's config listing
    inputs: Literal["logits", "sampled_tokens"] = "logits"
    options: tuple[str, ...] = LOSS_OPTIONS
    hidden_form: Literal["divergence", "token_logprobs"] = "divergence"  # see module docstring
    full_vocabulary: bool = False  # sums over the whole vocabulary at each position
    needs_generator: bool = False  # draws extra tokens with the step's generator
    needs_behavior_logprobs: bool = False  # needs the sampler's log-probs of its own tokens
    needs_student_rollouts: bool = False  # only meaningful when the student wrote the tokens

    @property
    def loss(self) -> Callable[..., tuple]:
        """The loss function (see the module docstring for its signature)."""
        module, function = self.impl.split(":")
        return getattr(importlib.import_module(f"{__package__}.{module}"), function)


OBJECTIVES: dict[str, ObjectiveKind] = {
    k.name: k
    for k in (
        ObjectiveKind(
            "forward_kl",
            "divergences:forward_kl",
            "KL(π_T ‖ π_S), full vocabulary (mode-covering)",
            full_vocabulary=True,
        ),
        ObjectiveKind(
            "reverse_kl",
            "divergences:reverse_kl",
            "KL(π_S ‖ π_T), full vocabulary (mode-seeking)",
            full_vocabulary=True,
        ),
        ObjectiveKind(
            "jsd",
            "divergences:generalized_jsd",
            "generalised Jensen–Shannon divergence (objective.beta)",
            options=(*LOSS_OPTIONS, "beta"),
            full_vocabulary=True,
        ),
        ObjectiveKind(
            "mixture",
            "divergences:kl_mixture",
            "α·forward + (1−α)·reverse KL (objective.alpha)",
            options=(*LOSS_OPTIONS, "alpha"),
            full_vocabulary=True,
        ),
        ObjectiveKind(
            "forward_sampled",
            "estimators:sampled_forward_kl",
            "forward KL, one teacher sample per position",
            needs_generator=True,
            hidden_form="token_logprobs",
        ),
        ObjectiveKind(
            "reverse_sampled",
            "estimators:sampled_reverse_kl",
            "reverse KL, one student sample per position",
            needs_generator=True,
            hidden_form="token_logprobs",
        ),
        ObjectiveKind(
            "opd",
            "opd:opd_policy_gradient",
            "on-policy distillation: clipped policy gradient with teacher advantages",
            inputs="sampled_tokens",
            options=OPD_OPTIONS,
            needs_behavior_logprobs=True,
            needs_student_rollouts=True,
            hidden_form="token_logprobs",
        ),
    )
}


def objective_kind(name: str) -> ObjectiveKind:
    """The registry entry of ``name``; ValueError naming the allowed kinds otherwise."""
    if name not in OBJECTIVES:
        raise ValueError(f"objective.kind must be one of {tuple(OBJECTIVES)}, got {name!r}")
    return OBJECTIVES[name]
