"""From an ``ObjectiveConfig`` to a call of the pure objective it names.

The loop hands over the student's and the teacher's completion logits (or final hidden states
and LM-head weights for the chunked path) and the rollouts; this module picks the function.
"""

from __future__ import annotations

import torch

from distillscope.config import ObjectiveConfig
from distillscope.objectives import (
    chunked_divergence,
    forward_kl,
    generalized_jsd,
    kl_mixture,
    opd_policy_gradient,
    reverse_kl,
    sampled_forward_kl,
    sampled_reverse_kl,
)
from distillscope.rollout import Rollouts, tempered_logprobs

FULL_VOCAB = ("forward_kl", "reverse_kl", "jsd", "mixture")


def completion_token_logprobs(
    logits_B_L_V: torch.Tensor, r: Rollouts, temperature: float, vocab_size: int
) -> torch.Tensor:
    """log softmax(z / T)[y] of each sampled completion token (fp32), 0 where masked."""
    logp_B_L_V = tempered_logprobs(logits_B_L_V[..., :vocab_size], temperature)
    logp_B_L = logp_B_L_V.gather(-1, r.completion_B_L[..., None]).squeeze(-1)
    return logp_B_L.masked_fill(r.completion_mask_B_L == 0, 0.0)


def full_vocab_loss(
    cfg: ObjectiveConfig,
    student_logits_B_L_V: torch.Tensor,
    teacher_logits_B_L_V: torch.Tensor,
    rollouts: Rollouts,
    generator: torch.Generator,
    vocab_size: int,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The configured objective on completion logits (both models at the same positions)."""
    mask_B_L = rollouts.completion_mask_B_L
    temps = dict(
        student_temperature=cfg.student_temperature,
        teacher_temperature=cfg.teacher_temperature,
        reduction=cfg.reduction,
        vocab_size=vocab_size,
    )
    s, t = student_logits_B_L_V, teacher_logits_B_L_V
    if cfg.kind == "forward_kl":
        return forward_kl(s, t, mask_B_L, **temps)
    if cfg.kind == "reverse_kl":
        return reverse_kl(s, t, mask_B_L, **temps)
    if cfg.kind == "jsd":
        return generalized_jsd(s, t, mask_B_L, beta=cfg.beta, **temps)
    if cfg.kind == "mixture":
        return kl_mixture(s, t, mask_B_L, alpha=cfg.alpha, **temps)
    if cfg.kind == "forward_sampled":
        return sampled_forward_kl(s, t, mask_B_L, generator=generator, **temps)
    if cfg.kind == "reverse_sampled":
        return sampled_reverse_kl(s, t, mask_B_L, generator=generator, **temps)
    if cfg.kind == "opd":
        # Advantage log π_T − log π_S at the loss temperatures; π_old is the sampler's policy.
        return opd_policy_gradient(
            s[..., :vocab_size],
            rollouts.completion_B_L,
            completion_token_logprobs(t, rollouts, cfg.teacher_temperature, vocab_size),
            rollouts.logp_behavior_B_L,
            mask_B_L,
            regulation=cfg.regulation,
            clip_min=cfg.clip_min,
            clip_max=cfg.clip_max,
            eps_low=cfg.eps_low,
            eps_high=cfg.eps_high,
            student_temperature=cfg.student_temperature,
            reduction=cfg.reduction,
        )
    raise ValueError(f"objective.kind={cfg.kind!r} is not known")


def chunked_loss(
    cfg: ObjectiveConfig,
    student_hidden_B_L_H: torch.Tensor,
    student_head_V_H: torch.Tensor,
    teacher_hidden_B_L_H: torch.Tensor,
    teacher_head_V_H: torch.Tensor,
    rollouts: Rollouts,
    vocab_size: int,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The configured full-vocabulary divergence, ``cfg.chunk_size`` tokens at a time."""
    if cfg.kind not in FULL_VOCAB:
        raise ValueError(f"objective.chunk_size > 0 needs a full-vocabulary kind {FULL_VOCAB}")
    return chunked_divergence(
        student_hidden_B_L_H,
        student_head_V_H,
        teacher_hidden_B_L_H,
        teacher_head_V_H,
        rollouts.completion_mask_B_L,
        divergence=cfg.kind,
        chunk_size=cfg.chunk_size,
        student_temperature=cfg.student_temperature,
        teacher_temperature=cfg.teacher_temperature,
        reduction=cfg.reduction,
        vocab_size=vocab_size,
        beta=cfg.beta,
        alpha=cfg.alpha,
    )
