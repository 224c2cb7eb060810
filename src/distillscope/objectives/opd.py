"""On-policy distillation as a policy gradient with per-token teacher advantages (docs/method.md
§4, [D]).

The student samples y ~ π_S; each sampled token gets the advantage
Δℓ_t = log π_T(y_t|h_t) − log π_S(y_t|h_t) (detached; both models at temperature 1 unless the
config tempers them, ``objective.tempered_teacher``), shaped by a regulation g, and the student
takes PPO-style clipped steps. With one update per rollout batch the importance ratio is 1 and
this is REINFORCE with per-token rewards g(Δℓ_t) — the rollout-token reverse-KL gradient when g
is the identity; with ``objective.updates_per_batch`` > 1 the later updates reuse the first
update's advantage (that of π_old, the policy that sampled) while r_t moves and the clip acts.

Metrics are plain floats under ``opd/`` keys (token statistics over masked tokens, detached);
what each key means is registered in :mod:`distillscope.metric_keys`, the one list.
"""

from __future__ import annotations

import torch

from distillscope.objectives.divergences import (
    check_options,
    check_shape,
    masked_mean,
    reduce_tokens,
    tempered_log_softmax,
)
from distillscope.objectives.options import REGULATIONS, OPDOptions, Reduction, Regulation

_DEFAULTS = OPDOptions()


def regulate_advantage(
    delta_B_T: torch.Tensor,
    regulation: Regulation = _DEFAULTS.regulation,
    *,
    clip_min: float = _DEFAULTS.clip_min,
    clip_max: float = _DEFAULTS.clip_max,
) -> torch.Tensor:
    """The signal regulation g of [D] (docs/method.md §4), elementwise on Δℓ_B_T.

    none: g(x) = x;   hard_clip: g(x) = clip(x, c_min, c_max);
    log_compress: g(x) = sign(x) · log(1 + |x|).
    [D] gives no thresholds; ours default to those of :class:`~.options.OPDOptions`
    (docs/method.md §10).
    """
    if regulation == "none":
        return delta_B_T
    if regulation == "hard_clip":
        if not clip_min < clip_max:
            raise ValueError(f"clip_min ({clip_min}) must be below clip_max ({clip_max})")
        return delta_B_T.clamp(clip_min, clip_max)
    if regulation == "log_compress":
        return torch.sign(delta_B_T) * torch.log1p(delta_B_T.abs())
    raise ValueError(f"regulation must be one of {REGULATIONS}, got {regulation!r}")


def _masked_std(
    values_B_T: torch.Tensor, mean: torch.Tensor, mask_B_T: torch.Tensor
) -> torch.Tensor:
    """Population standard deviation over masked tokens (0 with fewer than two)."""
    return masked_mean((values_B_T - mean).square(), mask_B_T).sqrt()


def check_trust_region(eps_low: float, eps_high: float) -> None:
    """Refuse an importance-ratio clip [1 − ε_low, 1 + ε_high] that is not a trust region."""
    if not (0.0 <= eps_low < 1.0 and eps_high >= 0.0):
        raise ValueError(f"need 0 ≤ eps_low < 1 and eps_high ≥ 0, got {eps_low}, {eps_high}")


def clipped_surrogate(
    ratio_B_T: torch.Tensor, advantage_B_T: torch.Tensor, eps_low: float, eps_high: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped surrogate min(r A, clip(r, 1 − ε_low, 1 + ε_high) A) per token, and where
    its clipped branch is the minimum (so the token has no gradient), detached.

    ``advantage_B_T`` broadcasts against ``ratio_B_T`` (a ``[B, 1]`` per-sequence advantage).
    """
    clipped_ratio_B_T = ratio_B_T.clamp(1.0 - eps_low, 1.0 + eps_high)
    surrogate_B_T = torch.minimum(ratio_B_T * advantage_B_T, clipped_ratio_B_T * advantage_B_T)
    with torch.no_grad():
        r_B_T, a_B_T = ratio_B_T.detach(), advantage_B_T.detach()
        active_B_T = ((a_B_T > 0) & (r_B_T > 1.0 + eps_high)) | (
            (a_B_T < 0) & (r_B_T < 1.0 - eps_low)
        )
    return surrogate_B_T, active_B_T


def opd_policy_gradient(
    student_logits_B_T_V: torch.Tensor,
    tokens_B_T: torch.Tensor,
    logp_teacher_B_T: torch.Tensor,
    logp_old_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    options: OPDOptions | None = None,
    student_temperature: float = 1.0,
    reduction: Reduction = "seq_mean",
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO-clipped OPD loss with per-token teacher advantages ([D]; docs/method.md §4).

    With ℓ_θ(y_t) = log softmax(z_t / τ_S)[y_t] from the current logits:

        Δℓ_t = sg[log π_T(y_t) − ℓ_θ(y_t)],   A_t = g(Δℓ_t)   (:func:`regulate_advantage`)
        r_t  = exp(ℓ_θ(y_t) − log π_old(y_t))
        loss_t = −min(r_t A_t, clip(r_t, 1 − ε_low, 1 + ε_high) A_t)

    reduced over ``mask_B_T`` by ``reduction`` (docs/method.md §1). With ``logp_old`` equal to
    the current log-probs (one update per rollout batch) r_t = 1 and
    ∇loss = −Σ w_t A_t ∇ℓ_θ(y_t): REINFORCE with per-token reward g(Δℓ_t). The advantage uses
    the current student log-prob, detached: that of π_old on a batch's first update (later
    updates pass it to :func:`opd_from_logprobs`).

    Args:
        student_logits_B_T_V: current student logits; ``logits[b, t]`` scores ``tokens[b, t]``.
        tokens_B_T: the sampled tokens y_t (ids at masked-out positions are ignored).
        logp_teacher_B_T: log π_T(y_t|h_t) of the sampled tokens (a constant).
        logp_old_B_T: log π_old(y_t|h_t) under the policy that sampled them (a constant).
        mask_B_T: True at the completion tokens that count.
        options: the shaping g of the advantage (regulation, clip_min, clip_max) and the trust
            region [1 − ε_low, 1 + ε_high] of the importance ratio (:class:`~.options.OPDOptions`;
            its defaults when None).
        student_temperature: τ_S of the current log-probs; use the sampling temperature that
            produced ``logp_old_B_T`` so that r_t = 1 on the first update.

    Returns:
        ``(loss, metrics)``: a scalar fp32 loss and the ``opd/`` metrics.
    """
    check_options(reduction, student_temperature)
    leading_shape = student_logits_B_T_V.shape[:-1]
    check_shape("tokens_B_T", tokens_B_T, leading_shape)
    check_shape("mask_B_T", mask_B_T, leading_shape)
    keep_B_T = mask_B_T.bool()
    index_B_T_1 = tokens_B_T.long().masked_fill(~keep_B_T, 0).unsqueeze(-1)
    logp_B_T_V = tempered_log_softmax(student_logits_B_T_V, student_temperature)
    logp_B_T = logp_B_T_V.gather(-1, index_B_T_1).squeeze(-1)
    return opd_from_logprobs(
        logp_B_T, logp_teacher_B_T, logp_old_B_T, mask_B_T, options=options, reduction=reduction
    )


def opd_from_logprobs(
    logp_B_T: torch.Tensor,
    logp_teacher_B_T: torch.Tensor,
    logp_old_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    options: OPDOptions | None = None,
    reduction: Reduction = "seq_mean",
    logp_student_fixed_B_T: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """:func:`opd_policy_gradient` from ℓ_θ(y_t) (differentiable, at τ_S) instead of logits.

    The hidden-state path computes ``logp_B_T`` chunk by chunk
    (:func:`~distillscope.objectives.fused_tokens.token_logprobs_from_hidden`); both paths share
    this body, so their losses, gradients and metrics agree.

    ``logp_student_fixed_B_T`` is the student's side of Δℓ_t = log π_T(y_t) − log π_S(y_t):
    None on a rollout batch's first update (the current ℓ_θ, detached, is π_old's), the first
    update's values on the later ones (``objective.updates_per_batch``, PPO: the advantage stays
    the sampling policy's while the ratio r_t moves).
    """
    o = options or _DEFAULTS
    regulation, clip_min, clip_max = o.regulation, o.clip_min, o.clip_max
    eps_low, eps_high = o.eps_low, o.eps_high
    check_options(reduction)
    if regulation not in REGULATIONS:
        raise ValueError(f"regulation must be one of {REGULATIONS}, got {regulation!r}")
    if not clip_min < clip_max:
        raise ValueError(f"clip_min ({clip_min}) must be below clip_max ({clip_max})")
    check_trust_region(eps_low, eps_high)
    for name, tensor in (
        ("logp_teacher_B_T", logp_teacher_B_T),
        ("logp_old_B_T", logp_old_B_T),
        ("mask_B_T", mask_B_T),
    ):
        check_shape(name, tensor, logp_B_T.shape)
    if logp_student_fixed_B_T is not None:
        check_shape("logp_student_fixed_B_T", logp_student_fixed_B_T, logp_B_T.shape)
    keep_B_T = mask_B_T.bool()
    # Padding positions may carry junk (e.g. −inf) log-probs, the current ones included; replace
    # them before exp(), since a NaN there would reach the gradient even though the reduction
    # drops the value.
    logp_B_T = torch.where(keep_B_T, logp_B_T, torch.zeros_like(logp_B_T))
    logp_now_B_T = logp_B_T.detach()
    logp_teacher_B_T = torch.where(keep_B_T, logp_teacher_B_T.float(), logp_now_B_T)
    logp_old_B_T = torch.where(keep_B_T, logp_old_B_T.float(), logp_now_B_T)
    logp_student_B_T = logp_now_B_T
    if logp_student_fixed_B_T is not None:
        logp_student_B_T = torch.where(
            keep_B_T, logp_student_fixed_B_T.to(logp_now_B_T), logp_now_B_T
        )

    delta_B_T = logp_teacher_B_T - logp_student_B_T  # Δℓ, detached
    advantage_B_T = regulate_advantage(delta_B_T, regulation, clip_min=clip_min, clip_max=clip_max)
    ratio_B_T = torch.exp(logp_B_T - logp_old_B_T)
    surrogate_B_T, ratio_clipped_B_T = clipped_surrogate(
        ratio_B_T, advantage_B_T, eps_low, eps_high
    )
    loss = reduce_tokens(-surrogate_B_T, mask_B_T, reduction)  # a float mask weights tokens

    with torch.no_grad():
        ratio_now_B_T = ratio_B_T.detach()
        hard_clipped_B_T = (delta_B_T < clip_min) | (delta_B_T > clip_max)
        raw_mean = masked_mean(delta_B_T, keep_B_T)
        mean = masked_mean(advantage_B_T, keep_B_T)
        stats = [
            loss.detach(),
            raw_mean,
            _masked_std(delta_B_T, raw_mean, keep_B_T),
            mean,
            _masked_std(advantage_B_T, mean, keep_B_T),
            masked_mean(hard_clipped_B_T.float(), keep_B_T),
            masked_mean(ratio_now_B_T, keep_B_T),
            masked_mean(ratio_clipped_B_T.float(), keep_B_T),
            keep_B_T.sum().float(),
        ]
        values = torch.stack(stats).tolist()  # one device→host sync for all metrics
    keys = (
        "opd/loss",
        "opd/raw_advantage_mean",
        "opd/raw_advantage_std",
        "opd/advantage_mean",
        "opd/advantage_std",
        "opd/hard_clip_frac",
        "opd/ratio_mean",
        "opd/ratio_clip_frac",
        "opd/tokens",
    )
    return loss, dict(zip(keys, values, strict=True))
