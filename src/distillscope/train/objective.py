"""From an ``ObjectiveConfig`` to a call of the pure objective it names.

The loop hands over the student's and the teacher's completion logits (or final hidden states
and LM-head weights for the chunked path) and the rollouts; the kind's entry in
:data:`distillscope.objectives.OBJECTIVES` says which function to call and with what.
"""

from __future__ import annotations

import torch

from distillscope.config import ObjectiveConfig
from distillscope.objectives import OBJECTIVES, chunked_divergence
from distillscope.rollout import Rollouts, tempered_logprobs


def completion_token_logprobs(
    logits_B_T_V: torch.Tensor, r: Rollouts, temperature: float, vocab_size: int
) -> torch.Tensor:
    """log softmax(z / T)[y] of each sampled completion token (fp32), 0 where masked."""
    logp_B_T_V = tempered_logprobs(logits_B_T_V[..., :vocab_size], temperature)
    logp_B_T = logp_B_T_V.gather(-1, r.completion_B_T[..., None]).squeeze(-1)
    return logp_B_T.masked_fill(r.completion_mask_B_T == 0, 0.0)


def logits_loss(
    cfg: ObjectiveConfig,
    student_logits_B_T_V: torch.Tensor,
    teacher_logits_B_T_V: torch.Tensor,
    rollouts: Rollouts,
    generator: torch.Generator,
    vocab_size: int,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The configured objective on completion logits (both models at the same positions)."""
    kind = OBJECTIVES[cfg.kind]
    options = {name: getattr(cfg, name) for name in kind.options}
    mask_B_T = rollouts.completion_mask_B_T
    s, t = student_logits_B_T_V, teacher_logits_B_T_V
    if kind.inputs == "sampled_tokens":
        # Advantage log π_T − log π_S at the loss temperatures; π_old is the sampler's policy.
        return kind.loss(
            s[..., :vocab_size],
            rollouts.completion_B_T,
            completion_token_logprobs(t, rollouts, cfg.teacher_temperature, vocab_size),
            rollouts.logp_behavior_B_T,
            mask_B_T,
            **options,
        )
    if kind.needs_generator:
        options["generator"] = generator
    return kind.loss(s, t, mask_B_T, vocab_size=vocab_size, **options)


def chunked_loss(
    cfg: ObjectiveConfig,
    student_hidden_B_T_H: torch.Tensor,
    student_head_V_H: torch.Tensor,
    teacher_hidden_B_T_H: torch.Tensor,
    teacher_head_V_H: torch.Tensor,
    rollouts: Rollouts,
    vocab_size: int,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The configured full-vocabulary divergence, ``cfg.chunk_size`` tokens at a time.

    Config validation admits ``chunk_size > 0`` only for kinds the registry marks chunkable.
    """
    return chunked_divergence(
        student_hidden_B_T_H,
        student_head_V_H,
        teacher_hidden_B_T_H,
        teacher_head_V_H,
        rollouts.completion_mask_B_T,
        divergence=cfg.kind,
        chunk_size=cfg.chunk_size,
        student_temperature=cfg.student_temperature,
        teacher_temperature=cfg.teacher_temperature,
        reduction=cfg.reduction,
        vocab_size=vocab_size,
        beta=cfg.beta,
        alpha=cfg.alpha,
    )
