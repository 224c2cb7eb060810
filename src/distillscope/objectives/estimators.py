"""Sampled KL estimators and the k1/k2/k3 sample metrics (docs/method.md §2, [P] App. A.2,
Schulman).

Instead of summing over the whole vocabulary, each completion position n uses one token y_n:

- forward:  y ~ π_T(·|h_n),  loss = −log π_S(y|h_n)
  (∇ E_{y~π_T}[−log π_S(y)] = ∇ KL(π_T ‖ π_S): unbiased forward-KL gradient);
- reverse:  y ~ π_S(·|h_n),  loss = sg[log π_S(y) − log π_T(y)] · log π_S(y)
  (score-function form: E_{y~π_S}[(ℓ_S − ℓ_T)(y) ∇ℓ_S(y)] = ∇ KL(π_S ‖ π_T)).

The ``sampled_*`` functions draw one *extra* token per position from the tempered model with a
caller-owned ``torch.Generator`` (independent of the rollout token). The ``rollout_token_*``
functions use the rollout's own token y_n instead (what OPD uses, docs/method.md §4); they are
unbiased
only when the rollout was sampled from the same tempered distribution the estimator assumes.

``tokens_B_T[b, t]`` is the token *scored by* ``logits[b, t]`` (the caller shifts by one).
Reductions, temperatures, ``vocab_size`` and the mask follow :mod:`.divergences`.

Metrics are plain floats (token means over masked tokens, detached): the estimators write
``objective/`` keys, among them the single-sample KL estimate of their direction; the k1/k2/k3
functions write ``kl/`` keys. What each key means is registered in
:mod:`distillscope.metric_keys`, the one list.
"""

from __future__ import annotations

from typing import Literal

import torch

from distillscope.objectives.divergences import (
    align_vocab,
    check_options,
    check_shape,
    masked_mean,
    reduce_tokens,
    tempered_log_softmax,
)
from distillscope.objectives.fused_tokens import inverse_cdf_draw
from distillscope.objectives.options import Reduction

Direction = Literal["forward", "reverse"]


def _sampled_objective(
    student_logits_B_T_V: torch.Tensor,
    teacher_logits_B_T_V: torch.Tensor,
    tokens_B_T: torch.Tensor | None,
    mask_B_T: torch.Tensor,
    direction: Direction,
    uniforms_B_T: torch.Tensor | None,
    *,
    student_temperature: float,
    teacher_temperature: float,
    reduction: str,
    vocab_size: int | None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Shared body: pick y per position (the rollout's token, or a draw by inverse CDF from
    ``uniforms_B_T``), then the estimator's loss."""
    check_options(reduction, student_temperature, teacher_temperature)
    student_logits_B_T_V, teacher_logits_B_T_V = align_vocab(
        student_logits_B_T_V, teacher_logits_B_T_V, vocab_size
    )
    if student_logits_B_T_V.shape != teacher_logits_B_T_V.shape:
        raise ValueError(
            f"student logits {tuple(student_logits_B_T_V.shape)} and teacher logits "
            f"{tuple(teacher_logits_B_T_V.shape)} must cover the same (B, T) positions"
        )
    check_shape("mask_B_T", mask_B_T, student_logits_B_T_V.shape[:-1])
    keep_B_T = mask_B_T.bool()
    logp_student_B_T_V = tempered_log_softmax(student_logits_B_T_V, student_temperature)
    logp_teacher_B_T_V = tempered_log_softmax(teacher_logits_B_T_V.detach(), teacher_temperature)

    if tokens_B_T is None:  # draw y' from the sampling model; every position draws once
        sampler_logp_B_T_V = logp_teacher_B_T_V if direction == "forward" else logp_student_B_T_V
        check_shape("uniforms_B_T", uniforms_B_T, keep_B_T.shape)
        vocab = sampler_logp_B_T_V.shape[-1]
        tokens_N = inverse_cdf_draw(
            sampler_logp_B_T_V.detach().reshape(-1, vocab), uniforms_B_T.reshape(-1)
        )
        tokens_B_T = tokens_N.view(keep_B_T.shape)
    else:
        check_shape("tokens_B_T", tokens_B_T, keep_B_T.shape)
        # Padding positions may hold ids outside the vocabulary; they are masked out anyway.
        tokens_B_T = tokens_B_T.long().masked_fill(~keep_B_T, 0)

    index_B_T_1 = tokens_B_T.unsqueeze(-1)
    logp_student_B_T = logp_student_B_T_V.gather(-1, index_B_T_1).squeeze(-1)
    logp_teacher_B_T = logp_teacher_B_T_V.gather(-1, index_B_T_1).squeeze(-1)
    return sampled_token_loss(logp_student_B_T, logp_teacher_B_T, mask_B_T, direction, reduction)


def draw_uniforms(
    shape: torch.Size | tuple[int, ...],
    generator: torch.Generator | None,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """U[0, 1) per position, on ``generator``'s device, moved to ``device``: the draws' source."""
    gen_device = generator.device if generator is not None else device
    return torch.rand(shape, generator=generator, device=gen_device).to(device)


def sampled_token_loss(
    logp_student_B_T: torch.Tensor,
    logp_teacher_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
    direction: Direction,
    reduction: str,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The estimator's loss from ℓ_S(y), ℓ_T(y) of the chosen token per position.

    forward: loss_n = −ℓ_S(y_n); reverse: loss_n = sg[ℓ_S − ℓ_T](y_n) · ℓ_S(y_n); reduced by
    ``reduction``. Shared by the logits path and the hidden-state path
    (:mod:`.fused_tokens`), so both give the same loss and metrics.
    """
    keep_B_T = mask_B_T.bool()
    log_ratio_B_T = (logp_student_B_T - logp_teacher_B_T).detach()  # ℓ_S − ℓ_T, stop-gradient
    if direction == "forward":
        per_token_B_T = -logp_student_B_T
        estimate_key, estimate_B_T = "objective/forward_kl_estimate", -log_ratio_B_T
    else:
        per_token_B_T = log_ratio_B_T * logp_student_B_T
        estimate_key, estimate_B_T = "objective/reverse_kl_estimate", log_ratio_B_T
    loss = reduce_tokens(per_token_B_T, mask_B_T, reduction)  # a float mask weights tokens

    tokens = keep_B_T.sum().float().reshape(1)
    estimate = masked_mean(estimate_B_T, keep_B_T).reshape(1)
    values = torch.cat([loss.detach().reshape(1), estimate, tokens]).tolist()  # one sync
    metrics = {"objective/loss": values[0], estimate_key: values[1], "objective/tokens": values[2]}
    return loss, metrics


def sampled_forward_kl(
    student_logits_B_T_V: torch.Tensor,
    teacher_logits_B_T_V: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    generator: torch.Generator | None = None,
    uniforms_B_T: torch.Tensor | None = None,
    student_temperature: float = 1.0,
    teacher_temperature: float = 1.0,
    reduction: Reduction = "seq_mean",
    vocab_size: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Sampled forward KL: y' ~ π_T(·|h_n) per position, loss = −log π_S(y'|h_n) ([P] App. A.2).

    Its gradient is an unbiased estimate of ∇ KL(π_T ‖ π_S); its value is a cross-entropy, not a
    KL (the metric ``objective/forward_kl_estimate`` is the KL estimate). ``generator`` (on the
    logits' device) makes the draws reproducible; ``None`` uses the global RNG. ``uniforms_B_T``
    (one U[0, 1) per position) replaces the generator: y' is drawn by inverse CDF from it, so
    the same uniforms give the same tokens on every path (:mod:`.fused_tokens`).
    """
    if uniforms_B_T is None:
        uniforms_B_T = draw_uniforms(mask_B_T.shape, generator, mask_B_T.device)
    return _sampled_objective(
        student_logits_B_T_V,
        teacher_logits_B_T_V,
        None,
        mask_B_T,
        "forward",
        uniforms_B_T,
        student_temperature=student_temperature,
        teacher_temperature=teacher_temperature,
        reduction=reduction,
        vocab_size=vocab_size,
    )


def sampled_reverse_kl(
    student_logits_B_T_V: torch.Tensor,
    teacher_logits_B_T_V: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    generator: torch.Generator | None = None,
    uniforms_B_T: torch.Tensor | None = None,
    student_temperature: float = 1.0,
    teacher_temperature: float = 1.0,
    reduction: Reduction = "seq_mean",
    vocab_size: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Sampled reverse KL: y' ~ π_S(·|h_n), loss = sg[log π_S(y') − log π_T(y')] · log π_S(y').

    [P] App. A.2. Its gradient is an unbiased estimate of ∇ KL(π_S ‖ π_T) (score function; the
    sample itself is a constant). ``generator`` as in :func:`sampled_forward_kl`.
    """
    if uniforms_B_T is None:
        uniforms_B_T = draw_uniforms(mask_B_T.shape, generator, mask_B_T.device)
    return _sampled_objective(
        student_logits_B_T_V,
        teacher_logits_B_T_V,
        None,
        mask_B_T,
        "reverse",
        uniforms_B_T,
        student_temperature=student_temperature,
        teacher_temperature=teacher_temperature,
        reduction=reduction,
        vocab_size=vocab_size,
    )


def rollout_token_forward_kl(
    student_logits_B_T_V: torch.Tensor,
    teacher_logits_B_T_V: torch.Tensor,
    tokens_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    student_temperature: float = 1.0,
    teacher_temperature: float = 1.0,
    reduction: Reduction = "seq_mean",
    vocab_size: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Rollout-token forward KL: loss = −log π_S(y_n|h_n) at the rollout's own token y_n.

    docs/method.md §2 ("rollout-token" variant of [P] App. A.2): an unbiased forward-KL gradient
    when y
    was sampled from π_T at ``teacher_temperature`` (OffPD); otherwise a plain NLL on the rollout.
    """
    return _sampled_objective(
        student_logits_B_T_V,
        teacher_logits_B_T_V,
        tokens_B_T,
        mask_B_T,
        "forward",
        None,
        student_temperature=student_temperature,
        teacher_temperature=teacher_temperature,
        reduction=reduction,
        vocab_size=vocab_size,
    )


def rollout_token_reverse_kl(
    student_logits_B_T_V: torch.Tensor,
    teacher_logits_B_T_V: torch.Tensor,
    tokens_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    student_temperature: float = 1.0,
    teacher_temperature: float = 1.0,
    reduction: Reduction = "seq_mean",
    vocab_size: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Rollout-token reverse KL: loss = sg[log π_S(y_n) − log π_T(y_n)] · log π_S(y_n).

    docs/method.md §2 and §4: the per-token policy gradient OPD builds on; an unbiased reverse-KL
    gradient when y was sampled from the current π_S at ``student_temperature`` (OnPD).
    """
    return _sampled_objective(
        student_logits_B_T_V,
        teacher_logits_B_T_V,
        tokens_B_T,
        mask_B_T,
        "reverse",
        None,
        student_temperature=student_temperature,
        teacher_temperature=teacher_temperature,
        reduction=reduction,
        vocab_size=vocab_size,
    )


@torch.no_grad()
def kl_sample_metrics(
    logp_student_sampled_B_T: torch.Tensor,
    logp_teacher_sampled_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
) -> dict[str, float]:
    """Schulman's k1/k2/k3 estimates of KL(π_S ‖ π_T) from tokens y ~ π_S (docs/method.md §2).

    With log r = log π_T(y) − log π_S(y):  k1 = −log r,  k2 = ½ (log r)²,  k3 = (r − 1) − log r
    (J. Schulman, "Approximating KL divergence", 2020). k1 and k3 are unbiased for KL(π_S‖π_T);
    k3 ≥ 0 per sample; k2 is biased but low-variance. Returns masked token means (fp32; 0.0
    with no masked token) under ``kl/k1``, ``kl/k2``, ``kl/k3``.

    Args:
        logp_student_sampled_B_T: log π_S of the sampled tokens.
        logp_teacher_sampled_B_T: log π_T of the same tokens.
        mask_B_T: True at the completion tokens that count.
    """
    check_shape(
        "logp_teacher_sampled_B_T", logp_teacher_sampled_B_T, logp_student_sampled_B_T.shape
    )
    check_shape("mask_B_T", mask_B_T, logp_student_sampled_B_T.shape)
    log_r_B_T = logp_teacher_sampled_B_T.float() - logp_student_sampled_B_T.float()
    k1_B_T = -log_r_B_T
    k2_B_T = 0.5 * log_r_B_T.square()
    # expm1 keeps (r − 1) − log r accurate near r = 1; the clamp removes rounding below 0.
    k3_B_T = (torch.expm1(log_r_B_T) - log_r_B_T).clamp_min(0.0)
    values = torch.stack([masked_mean(k, mask_B_T) for k in (k1_B_T, k2_B_T, k3_B_T)]).tolist()
    return dict(zip(("kl/k1", "kl/k2", "kl/k3"), values, strict=True))


def kl_metrics_by_writer(
    logp_student_B_T: torch.Tensor,
    logp_teacher_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
    student_rows_B: torch.Tensor,
    teacher_rows_B: torch.Tensor,
) -> dict[str, float]:
    """k1/k2/k3 honest to who wrote the tokens (docs/method.md §2).

    Schulman's estimators assume y ~ the first distribution of the KL. On student-written rows
    they estimate KL(π_S ‖ π_T) (``kl/k1``, ``kl/k2``, ``kl/k3``); on teacher-written rows the
    same formulas with the roles swapped, log r = ℓ_S(y) − ℓ_T(y), estimate KL(π_T ‖ π_S)
    (``kl/forward_k1``, ``kl/forward_k2``, ``kl/forward_k3``). Rows written jointly (λ-spectrum,
    interleaving) are sampled from neither model and count in neither. A family is absent when
    its rows hold no token, never reported as 0.
    """
    keep_B_T = mask_B_T.bool()
    out: dict[str, float] = {}
    for rows_B, sampler, other, prefix in (
        (student_rows_B, logp_student_B_T, logp_teacher_B_T, "kl/k"),
        (teacher_rows_B, logp_teacher_B_T, logp_student_B_T, "kl/forward_k"),
    ):
        rows_mask_B_T = keep_B_T & rows_B.bool()[:, None]
        if bool(rows_mask_B_T.any()):
            k = kl_sample_metrics(sampler, other, rows_mask_B_T)
            out.update({f"{prefix}{i}": k[f"kl/k{i}"] for i in (1, 2, 3)})
    return out
