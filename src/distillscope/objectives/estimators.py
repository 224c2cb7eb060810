"""Sampled KL estimators and the k1/k2/k3 sample metrics (docs/method.md §2, [P] App. A.2,
Schulman).

Instead of summing over the whole vocabulary, each completion position n uses one token y_n;
each estimator is one :class:`TokenEstimator` declaration (:data:`ESTIMATORS`):

- forward:  y ~ π_T(·|h_n),  loss = −log π_S(y|h_n)
  (∇ E_{y~π_T}[−log π_S(y)] = ∇ KL(π_T ‖ π_S): unbiased forward-KL gradient);
- reverse:  y ~ π_S(·|h_n),  loss = sg[log π_S(y) − log π_T(y)] · log π_S(y)
  (score-function form: E_{y~π_S}[(ℓ_S − ℓ_T)(y) ∇ℓ_S(y)] = ∇ KL(π_S ‖ π_T)).

Both read only ℓ_S(y) and ℓ_T(y), whose gradient w.r.t. the student's logits is the closed form
∂ℓ_S(y)/∂z_S = (e_y − π_S) / τ_S on either path (autograd of the log-softmax on logits; written
out chunk by chunk from hidden states, :mod:`.fused_tokens`); :func:`sampled_token_loss` is the
loss on those log-probs that both paths share. :func:`sampled_kl` is the form on logits: it
draws one *extra* token per position from the estimator's tempered sampling model (from
``uniforms_B_T``, or a caller-owned ``torch.Generator``), or takes the rollout's own token y_n
(``tokens_B_T``, what OPD uses, docs/method.md §4) — unbiased only when the rollout was sampled
from the same tempered distribution the estimator assumes.

``tokens_B_T[b, t]`` is the token *scored by* ``logits[b, t]`` (the caller shifts by one).
Reductions, temperatures, ``vocab_size`` and the mask follow :mod:`.divergences`.

Metrics are plain floats (token means over masked tokens, detached): the estimators write
``objective/`` keys, among them the single-sample KL estimate of their direction; the k1/k2/k3
functions write ``kl/`` keys. What each key means is registered in
:mod:`distillscope.metric_keys`, the one list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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
from distillscope.objectives.options import DivergenceOptions


@dataclass(frozen=True)
class TokenEstimator:
    """A KL estimated from one token y per position (module docstring).

    ``loss(ℓ_S(y), sg[ℓ_S − ℓ_T](y))`` is the per-token surrogate whose gradient is the
    estimator's; ``estimate(sg[ℓ_S − ℓ_T](y))`` the single-sample KL estimate reported under
    ``estimate_key``; ``draws_from`` the model y is drawn from when the step draws it.
    """

    name: str
    draws_from: Literal["teacher", "student"]
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    estimate: Callable[[torch.Tensor], torch.Tensor]
    estimate_key: str


#: Forward KL from y ~ π_T: loss −ℓ_S(y), ∂/∂ℓ_S(y) = −1 (a cross-entropy, whose value is not a
#: KL); the estimate is ℓ_T(y) − ℓ_S(y) ([P] App. A.2).
FORWARD_SAMPLED = TokenEstimator(
    "forward_sampled",
    draws_from="teacher",
    loss=lambda logp_student_B_T, log_ratio_B_T: -logp_student_B_T,
    estimate=lambda log_ratio_B_T: -log_ratio_B_T,
    estimate_key="objective/forward_kl_estimate",
)

#: Reverse KL from y ~ π_S: loss sg[ℓ_S − ℓ_T](y) · ℓ_S(y), ∂/∂ℓ_S(y) = sg[ℓ_S − ℓ_T](y) (the
#: score function; the sample itself is a constant); the estimate is ℓ_S(y) − ℓ_T(y).
REVERSE_SAMPLED = TokenEstimator(
    "reverse_sampled",
    draws_from="student",
    loss=lambda logp_student_B_T, log_ratio_B_T: log_ratio_B_T * logp_student_B_T,
    estimate=lambda log_ratio_B_T: log_ratio_B_T,
    estimate_key="objective/reverse_kl_estimate",
)

#: Every sampled estimator a config can name (``objective.kind``), by name.
ESTIMATORS: dict[str, TokenEstimator] = {e.name: e for e in (FORWARD_SAMPLED, REVERSE_SAMPLED)}


def sampled_kl(
    student_logits_B_T_V: torch.Tensor,
    teacher_logits_B_T_V: torch.Tensor,
    mask_B_T: torch.Tensor,
    estimator: TokenEstimator,
    *,
    tokens_B_T: torch.Tensor | None = None,
    uniforms_B_T: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    options: DivergenceOptions | None = None,
    vocab_size: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """``estimator`` on logits ([P] App. A.2, docs/method.md §2): one token y per position —
    ``tokens_B_T`` (the rollout's own), else a draw by inverse CDF from the tempered
    ``estimator.draws_from`` model with ``uniforms_B_T`` (one U[0, 1) per position: the same
    uniforms give the same tokens on every path, :mod:`.fused_tokens`), else with uniforms from
    ``generator`` (on the logits' device; None: the global RNG) — then
    :func:`sampled_token_loss`. ``options`` gives the temperatures and the reduction (the weights
    are not read); they, ``vocab_size`` and the mask follow :mod:`.divergences`. Padding
    positions of ``tokens_B_T`` may hold any id.
    """
    o = options or DivergenceOptions()
    check_options(o.reduction, o.student_temperature, o.teacher_temperature)
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
    logp_student_B_T_V = tempered_log_softmax(student_logits_B_T_V, o.student_temperature)
    logp_teacher_B_T_V = tempered_log_softmax(teacher_logits_B_T_V.detach(), o.teacher_temperature)

    if tokens_B_T is None:  # draw y' from the sampling model; every position draws once
        if uniforms_B_T is None:
            uniforms_B_T = draw_uniforms(mask_B_T.shape, generator, mask_B_T.device)
        from_teacher = estimator.draws_from == "teacher"
        sampler_logp_B_T_V = logp_teacher_B_T_V if from_teacher else logp_student_B_T_V
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
    return sampled_token_loss(logp_student_B_T, logp_teacher_B_T, mask_B_T, estimator, o.reduction)


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
    estimator: TokenEstimator,
    reduction: str,
) -> tuple[torch.Tensor, dict[str, float]]:
    """``estimator``'s loss from ℓ_S(y), ℓ_T(y) of the chosen token per position.

    forward: loss_n = −ℓ_S(y_n); reverse: loss_n = sg[ℓ_S − ℓ_T](y_n) · ℓ_S(y_n); reduced by
    ``reduction``. Shared by the logits path and the hidden-state path
    (:mod:`.fused_tokens`), so both give the same loss and metrics.
    """
    keep_B_T = mask_B_T.bool()
    log_ratio_B_T = (logp_student_B_T - logp_teacher_B_T).detach()  # ℓ_S − ℓ_T, stop-gradient
    per_token_B_T = estimator.loss(logp_student_B_T, log_ratio_B_T)
    estimate_key, estimate_B_T = estimator.estimate_key, estimator.estimate(log_ratio_B_T)
    loss = reduce_tokens(per_token_B_T, mask_B_T, reduction)  # a float mask weights tokens

    tokens = keep_B_T.sum().float().reshape(1)
    estimate = masked_mean(estimate_B_T, keep_B_T).reshape(1)
    values = torch.cat([loss.detach().reshape(1), estimate, tokens]).tolist()  # one sync
    metrics = {"objective/loss": values[0], estimate_key: values[1], "objective/tokens": values[2]}
    return loss, metrics


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
