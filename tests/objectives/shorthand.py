"""The tests' shorthands for the objectives' public forms: a declaration and its options as
keywords, as the tests write them."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from distillscope.objectives import DivergenceOptions
from distillscope.objectives.divergences import Divergence, divergence_loss
from distillscope.objectives.estimators import FORWARD_SAMPLED, REVERSE_SAMPLED, sampled_kl

#: the :class:`DivergenceOptions` fields a shorthand takes as keywords (any other is a weight)
_FIELDS = {f.name for f in dataclasses.fields(DivergenceOptions)} - {"weights"}


def options_of(**options: Any) -> DivergenceOptions:
    """:class:`DivergenceOptions` from flat keywords: its fields by name, and any other keyword
    (``beta=0.3``) one of the weights."""
    weights = {name: options.pop(name) for name in list(options) if name not in _FIELDS}
    return DivergenceOptions(**options, weights=weights)


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
    :class:`DivergenceOptions` fields and the weights as keywords (:func:`options_of`)."""
    return divergence_loss(
        student_logits_B_T_V,
        teacher_logits_B_T_V,
        mask_B_T,
        divergence=divergence,
        options=options_of(**options),
        vocab_size=vocab_size,
    )


def _sampled(estimator, s, t, mask, *, tokens_B_T=None, uniforms_B_T=None, generator=None,
             vocab_size=None, **options):  # fmt: skip
    """:func:`sampled_kl` with the :class:`DivergenceOptions` fields as keywords."""
    return sampled_kl(
        s, t, mask, estimator, tokens_B_T=tokens_B_T, uniforms_B_T=uniforms_B_T,
        generator=generator, options=options_of(**options), vocab_size=vocab_size,
    )  # fmt: skip


def sampled_forward_kl(s, t, mask, **kw):
    """The forward estimator (draws from the teacher)."""
    return _sampled(FORWARD_SAMPLED, s, t, mask, **kw)


def sampled_reverse_kl(s, t, mask, **kw):
    """The reverse estimator (draws from the student)."""
    return _sampled(REVERSE_SAMPLED, s, t, mask, **kw)


def rollout_token_forward_kl(s, t, tokens, mask, **kw):
    """The forward estimator on the rollout's own tokens."""
    return _sampled(FORWARD_SAMPLED, s, t, mask, tokens_B_T=tokens, **kw)


def rollout_token_reverse_kl(s, t, tokens, mask, **kw):
    """The reverse estimator on the rollout's own tokens."""
    return _sampled(REVERSE_SAMPLED, s, t, mask, tokens_B_T=tokens, **kw)
