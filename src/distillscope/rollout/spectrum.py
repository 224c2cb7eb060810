"""The λ-spectrum of rollout distributions between the teacher (λ = −1) and the student (λ = +1).

[P] §5.2, App. D.5; docs/method.md §3. Pure tensor functions over the last (vocabulary) dimension,
so they work on ``[V]``, ``[B, V]`` or ``[B, T, V]`` alike. Inputs are *normalised* fp32 log-probs
(``log_softmax`` of finite logits at each model's sampling temperature).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

#: Plausibility threshold α of the extrapolation masks [P, App. D.5].
DEFAULT_ALPHA = 0.2
#: Clip c of the extrapolation bonus [P, App. D.5]: a token gains at most a factor 3^(λ−1).
DEFAULT_CLIP = 2 * math.log(3)


def spectrum_scores(
    logp_student_V: torch.Tensor,
    logp_teacher_V: torch.Tensor,
    lam: float,
    alpha: float = DEFAULT_ALPHA,
    c: float = DEFAULT_CLIP,
) -> torch.Tensor:
    """Unnormalised log-weights z_λ of the λ-spectrum (``softmax(z)`` is π_λ).

    With ℓ_S, ℓ_T the normalised log-probs and r = ℓ_S − ℓ_T ([P] §5.2, App. D.5):

    - |λ| ≤ 1:  z = ((1+λ)/2)·ℓ_S + ((1−λ)/2)·ℓ_T
    - λ > 1:    z = ℓ_S + ((λ−1)/2)·b_S,  b_S = M_S·min(max(r, 0), c)
    - λ < −1:   z = ℓ_T + ((−λ−1)/2)·b_T, b_T = M_T·min(max(−r, 0), c)

    with plausibility masks M_S = 1[ℓ_S ≥ max ℓ_S + log α] and M_T likewise. At λ = ±1 the
    result is bit-for-bit ℓ_S or ℓ_T (a zero weight adds −0.0), which is what lets the sampler
    reproduce the pure student and teacher draws exactly.
    """
    if abs(lam) <= 1.0:
        return ((1.0 + lam) / 2.0) * logp_student_V + ((1.0 - lam) / 2.0) * logp_teacher_V
    log_ratio_V = logp_student_V - logp_teacher_V
    if lam > 1.0:
        bonus_V = _masked_bonus(logp_student_V, log_ratio_V, alpha, c)
        return logp_student_V + ((lam - 1.0) / 2.0) * bonus_V
    bonus_V = _masked_bonus(logp_teacher_V, -log_ratio_V, alpha, c)
    return logp_teacher_V + ((-lam - 1.0) / 2.0) * bonus_V


def spectrum_logprobs(
    logp_student_V: torch.Tensor,
    logp_teacher_V: torch.Tensor,
    lam: float,
    alpha: float = DEFAULT_ALPHA,
    c: float = DEFAULT_CLIP,
) -> torch.Tensor:
    """log π_λ = log_softmax(z_λ) over the last dim; see :func:`spectrum_scores` for z_λ.

    λ = −1 gives ℓ_T (OffPD), λ = +1 gives ℓ_S (OnPD), λ = 0 the normalised geometric mean
    log_softmax(½(ℓ_S + ℓ_T)); the map is continuous at λ = ±1.
    """
    z_V = spectrum_scores(logp_student_V, logp_teacher_V, lam, alpha, c)
    return F.log_softmax(z_V, dim=-1)


def _masked_bonus(
    logp_anchor_V: torch.Tensor, gain_V: torch.Tensor, alpha: float, c: float
) -> torch.Tensor:
    """b = M·min(max(gain, 0), c) with M = 1[ℓ_anchor ≥ max ℓ_anchor + log α].

    The mask keeps the extrapolation from inflating tokens the anchor model itself finds
    implausible (the naive formula would boost tokens both models dislike). ``torch.where``
    rather than a product, so a NaN gain from two −inf log-probs never leaks through the mask.
    """
    threshold_1 = logp_anchor_V.amax(dim=-1, keepdim=True) + math.log(alpha)
    plausible_V = logp_anchor_V >= threshold_1
    return torch.where(plausible_V, gain_V.clamp(min=0.0, max=c), torch.zeros_like(gain_V))
