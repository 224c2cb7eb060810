"""The tests' shorthands for the objectives' public forms: a declaration and its options as
keywords, as the tests write them."""

from __future__ import annotations

import torch

from distillscope.objectives import (
    FORWARD_SAMPLED,
    REVERSE_SAMPLED,
    Divergence,
    DivergenceOptions,
    divergence_loss,
    sampled_kl,
)


def plain_loss(
    divergence: Divergence,
    student_logits_B_T_V: torch.Tensor,
    teacher_logits_B_T_V: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    vocab_size: int | None = None,
    **options,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The tests' shorthand for the plain path: :func:`divergence_loss` with the
    :class:`DivergenceOptions` fields as keywords."""
    return divergence_loss(
        student_logits_B_T_V,
        teacher_logits_B_T_V,
        mask_B_T,
        divergence=divergence,
        options=DivergenceOptions(**options),
        vocab_size=vocab_size,
    )


def sampled_forward_kl(s, t, mask, **kw):
    """:func:`sampled_kl` of the forward estimator (draws from the teacher)."""
    return sampled_kl(s, t, mask, FORWARD_SAMPLED, **kw)


def sampled_reverse_kl(s, t, mask, **kw):
    """:func:`sampled_kl` of the reverse estimator (draws from the student)."""
    return sampled_kl(s, t, mask, REVERSE_SAMPLED, **kw)


def rollout_token_forward_kl(s, t, tokens, mask, **kw):
    """:func:`sampled_kl` of the forward estimator on the rollout's own tokens."""
    return sampled_kl(s, t, mask, FORWARD_SAMPLED, tokens_B_T=tokens, **kw)


def rollout_token_reverse_kl(s, t, tokens, mask, **kw):
    """:func:`sampled_kl` of the reverse estimator on the rollout's own tokens."""
    return sampled_kl(s, t, mask, REVERSE_SAMPLED, tokens_B_T=tokens, **kw)
