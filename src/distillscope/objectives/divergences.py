"""Full-vocabulary token divergences between student and teacher logits (docs/method.md §1–§2).

Every objective here is a pure function ``(logits, logits, mask, options) -> (loss, metrics)``:

- log-probabilities are ``log_softmax(z / temperature)`` in fp32 whatever the input dtype
  (:func:`tempered_log_softmax`, the one body every sampler, scorer and loss calls);
- the teacher is detached (it is frozen and gets no gradient, docs/method.md §1);
- ``mask_B_T`` marks the completion tokens that count (prompt and padding are False);
- ``reduction`` is one of
  ``"seq_mean"`` — mean over each sequence's own masked tokens, then mean over the sequences that
  have at least one ([P] Eq. 1); ``"token_mean"`` — all masked tokens of the batch pooled;
  ``"sum"`` — the plain sum. A batch with no masked token gives a loss of exactly 0 that is still
  connected to the graph, so ``backward()`` works and yields zero gradients.

Metrics are plain Python floats under ``objective/`` keys, token means over the masked tokens
whatever the reduction (runs with different reductions stay comparable), all computed detached;
what each key means is registered in :mod:`distillscope.metric_keys`, the one list.
"""

from __future__ import annotations

import functools
import math
from typing import Literal

import torch

from distillscope.objectives.options import REDUCTIONS, DivergenceOptions, Reduction

Divergence = Literal["forward_kl", "reverse_kl", "jsd", "mixture"]
DIVERGENCES: tuple[str, ...] = ("forward_kl", "reverse_kl", "jsd", "mixture")


# ---------------------------------------------------------------------------------------------
# Checks and shared pieces (also used by fused.py, estimators.py and opd.py)
# ---------------------------------------------------------------------------------------------


def check_options(reduction: str, *temperatures: float) -> None:
    """Raise a one-line ValueError for an unknown reduction or a non-positive temperature."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    for temperature in temperatures:
        if not temperature > 0:
            raise ValueError(f"temperatures must be positive, got {temperature}")


def check_shape(name: str, tensor: torch.Tensor, shape: torch.Size | tuple[int, ...]) -> None:
    """Raise a one-line ValueError when ``tensor`` (called ``name``) does not have ``shape``."""
    if tuple(tensor.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(tensor.shape)}, expected {tuple(shape)}")


def check_divergence(divergence: str, *, beta: float = 0.5, alpha: float = 0.5) -> None:
    """Raise a one-line ValueError for an unknown divergence or a β / α outside [0, 1]."""
    if divergence not in DIVERGENCES:
        raise ValueError(f"divergence must be one of {DIVERGENCES}, got {divergence!r}")
    if divergence == "jsd" and not 0.0 <= beta <= 1.0:
        raise ValueError(f"jsd beta must be in [0, 1], got {beta}")
    if divergence == "mixture" and not 0.0 <= alpha <= 1.0:
        raise ValueError(f"mixture alpha must be in [0, 1], got {alpha}")


def shared_vocab(
    student_logits_B_T_V: torch.Tensor, teacher_logits_B_T_V: torch.Tensor, vocab_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Slice both logit tensors to the first ``vocab_size`` entries of their last dimension.

    Teacher and student share a tokenizer but may pad their LM heads to different widths (e.g.
    Qwen2.5-7B 152,064 vs 1.5B 151,936); both are cut to the tokenizer length before any
    softmax (docs/method.md §1, last bullet). Returns views, no copy.
    """
    widths = (student_logits_B_T_V.shape[-1], teacher_logits_B_T_V.shape[-1])
    if not 1 <= vocab_size <= min(widths):
        raise ValueError(
            f"vocab_size={vocab_size} must be between 1 and the smaller logit width "
            f"(student {widths[0]}, teacher {widths[1]})"
        )
    return student_logits_B_T_V[..., :vocab_size], teacher_logits_B_T_V[..., :vocab_size]


def align_vocab(
    student_logits_B_T_V: torch.Tensor, teacher_logits_B_T_V: torch.Tensor, vocab_size: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Apply :func:`shared_vocab` when ``vocab_size`` is given; otherwise require equal widths."""
    if vocab_size is not None:
        return shared_vocab(student_logits_B_T_V, teacher_logits_B_T_V, vocab_size)
    if student_logits_B_T_V.shape[-1] != teacher_logits_B_T_V.shape[-1]:
        raise ValueError(
            f"student and teacher logit widths differ ({student_logits_B_T_V.shape[-1]} vs "
            f"{teacher_logits_B_T_V.shape[-1]}); pass vocab_size=<tokenizer length> to slice both"
        )
    return student_logits_B_T_V, teacher_logits_B_T_V


def tempered_log_softmax(
    logits_V: torch.Tensor, temperature: float, vocab_size: int | None = None
) -> torch.Tensor:
    """ℓ = log_softmax(z[..., :V] / τ) over the last dimension, in fp32 (docs/method.md §1–§2).

    The one tempered log-softmax of the package: the sampler draws from it, the scorers and
    every loss read it. Low-precision logits are promoted to fp32 first (fp64 stays fp64);
    ``vocab_size`` V cuts padded head columns off before the softmax (None: the full width). At
    τ = 1 the division, an exact no-op that would copy the tensor, is skipped.
    """
    z_V = logits_V if vocab_size is None else logits_V[..., :vocab_size]
    z_V = z_V.to(torch.promote_types(z_V.dtype, torch.float32))
    return torch.log_softmax(z_V if temperature == 1.0 else z_V / temperature, dim=-1)


def token_weights(
    mask_B_T: torch.Tensor, reduction: str, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Per-token weights w_B_T (fp32, or ``dtype``) such that ``loss = Σ w · value`` implements
    ``reduction``.

    seq_mean: w = m_bt / (n_b · S) with n_b the masked tokens of row b and S the rows with
    n_b ≥ 1 ([P] Eq. 1); token_mean: w = m_bt / Σ m; sum: w = m_bt. Empty rows and empty batches
    get weight 0 (no division by zero). A floating-point mask carries per-token weights c_bt
    (e.g. :func:`truncated_is_weight` times the mask): the tokens that count are its nonzero
    entries, as above, and each one's w is multiplied by c_bt.
    """
    check_options(reduction)
    m_B_T = mask_B_T.bool().to(dtype)
    c_B_T = mask_B_T.to(dtype) if mask_B_T.is_floating_point() else m_B_T
    if reduction == "sum":
        return c_B_T
    if reduction == "token_mean":
        return c_B_T / m_B_T.sum().clamp_min(1.0)
    n_B = m_B_T.sum(dim=-1, keepdim=True)  # (B, 1) masked tokens per sequence
    rows = (n_B > 0).sum().clamp_min(1)  # sequences that contribute
    return c_B_T / n_B.clamp_min(1.0) / rows


def truncated_is_weight(
    logp_trainer_B_T: torch.Tensor, logp_sampler_B_T: torch.Tensor, cap: float
) -> torch.Tensor:
    """Truncated importance weight min(π_train(y) / π_sampler(y), C) per token (detached fp32).

    Corrects for a rollout engine whose log-probs differ from the trainer's (another kernel,
    precision or implementation, docs/method.md §4): multiplied into the mask of the per-token
    loss (:func:`token_weights`), it reweights the sampler's tokens towards the trainer's policy,
    and the cap C bounds the variance.
    """
    if cap <= 0:
        raise ValueError(f"the importance-weight cap must be > 0, got {cap}")
    log_ratio_B_T = logp_trainer_B_T.detach().float() - logp_sampler_B_T.detach().float()
    return log_ratio_B_T.exp().clamp(max=cap)


def reduce_tokens(values_B_T: torch.Tensor, mask_B_T: torch.Tensor, reduction: str) -> torch.Tensor:
    """Reduce per-token values with ``mask_B_T`` (seq_mean / token_mean / sum, see module doc).

    Masked-out values are replaced by 0 with ``torch.where`` (not multiplied), so a non-finite
    value at a padding position cannot leak into the loss.
    """
    zeros = torch.zeros((), dtype=values_B_T.dtype, device=values_B_T.device)
    kept_B_T = torch.where(mask_B_T.bool(), values_B_T, zeros)
    return (kept_B_T * token_weights(mask_B_T, reduction)).sum()


def masked_mean(values_B_T: torch.Tensor, mask_B_T: torch.Tensor) -> torch.Tensor:
    """Pooled mean of ``values_B_T`` over masked tokens (0 when none); used for metrics."""
    return reduce_tokens(values_B_T, mask_B_T, "token_mean")


# ---------------------------------------------------------------------------------------------
# Token-level divergences on log-probabilities
# ---------------------------------------------------------------------------------------------


def forward_kl_tokens(
    logp_student_B_T_V: torch.Tensor, logp_teacher_B_T_V: torch.Tensor
) -> torch.Tensor:
    """F = Σ_v π_T (ℓ_T − ℓ_S) per position (docs/method.md §2, D in [P] Eq. 1); shape (B, T)."""
    return (logp_teacher_B_T_V.exp() * (logp_teacher_B_T_V - logp_student_B_T_V)).sum(-1)


def reverse_kl_tokens(
    logp_student_B_T_V: torch.Tensor, logp_teacher_B_T_V: torch.Tensor
) -> torch.Tensor:
    """R = Σ_v π_S (ℓ_S − ℓ_T) per position (docs/method.md §2, D in [P] Eq. 1); shape (B, T)."""
    return (logp_student_B_T_V.exp() * (logp_student_B_T_V - logp_teacher_B_T_V)).sum(-1)


def mixture_tokens(
    logp_student_B_T_V: torch.Tensor, logp_teacher_B_T_V: torch.Tensor, alpha: float
) -> torch.Tensor:
    """α F + (1−α) R per position (docs/method.md §2, ours); shape (B, T)."""
    fkl_B_T = forward_kl_tokens(logp_student_B_T_V, logp_teacher_B_T_V)
    rkl_B_T = reverse_kl_tokens(logp_student_B_T_V, logp_teacher_B_T_V)
    return alpha * fkl_B_T + (1.0 - alpha) * rkl_B_T


def jsd_tokens(
    logp_student_B_T_V: torch.Tensor, logp_teacher_B_T_V: torch.Tensor, beta: float
) -> torch.Tensor:
    """M = β π_T + (1−β) π_S, β KL(π_T‖M) + (1−β) KL(π_S‖M) per position (GKD Eq. 1)."""
    # log M = logsumexp(ℓ_T + log β, ℓ_S + log(1−β)): stable, and at β ∈ {0, 1} it returns
    # the surviving log-prob exactly (log 0 = −inf drops out), so JSD is exactly 0 there.
    log_beta = math.log(beta) if beta > 0 else -math.inf
    log_one_minus_beta = math.log1p(-beta) if beta < 1 else -math.inf
    logp_mix_B_T_V = torch.logaddexp(
        logp_teacher_B_T_V + log_beta, logp_student_B_T_V + log_one_minus_beta
    )
    kl_teacher = (logp_teacher_B_T_V.exp() * (logp_teacher_B_T_V - logp_mix_B_T_V)).sum(-1)
    kl_student = (logp_student_B_T_V.exp() * (logp_student_B_T_V - logp_mix_B_T_V)).sum(-1)
    return beta * kl_teacher + (1.0 - beta) * kl_student


def token_divergence(
    logp_student_B_T_V: torch.Tensor,
    logp_teacher_B_T_V: torch.Tensor,
    divergence: str = "forward_kl",
    *,
    beta: float = 0.5,
    alpha: float = 0.5,
) -> torch.Tensor:
    """Per-position divergence D(π_S, π_T) from normalised log-probs; returns shape (B, T).

    Works on any leading shape (``..._V`` → ``...``). With ℓ_S = log π_S and ℓ_T = log π_T:

    - forward_kl: F = Σ_v π_T (ℓ_T − ℓ_S)                   (docs/method.md §2, D in [P] Eq. 1)
    - reverse_kl: R = Σ_v π_S (ℓ_S − ℓ_T)                   (docs/method.md §2, D in [P] Eq. 1)
    - jsd:  M = β π_T + (1−β) π_S,  β KL(π_T‖M) + (1−β) KL(π_S‖M)  (GKD, Agarwal et al. Eq. 1)
    - mixture: α F + (1−α) R                                 (docs/method.md §2, ours)
    """
    check_divergence(divergence, beta=beta, alpha=alpha)
    per_token = {
        "forward_kl": forward_kl_tokens,
        "reverse_kl": reverse_kl_tokens,
        "jsd": functools.partial(jsd_tokens, beta=beta),
        "mixture": functools.partial(mixture_tokens, alpha=alpha),
    }[divergence]
    return per_token(logp_student_B_T_V, logp_teacher_B_T_V)


@torch.no_grad()
def token_stats(logp_student_N_V: torch.Tensor, logp_teacher_N_V: torch.Tensor) -> torch.Tensor:
    """Detached per-position (forward KL, reverse KL, H(π_T), H(π_S)); shape (4, ...)."""
    p_student = logp_student_N_V.exp()
    p_teacher = logp_teacher_N_V.exp()
    log_ratio = logp_teacher_N_V - logp_student_N_V
    return torch.stack(
        [
            (p_teacher * log_ratio).sum(-1),
            -(p_student * log_ratio).sum(-1),
            -(p_teacher * logp_teacher_N_V).sum(-1),
            -(p_student * logp_student_N_V).sum(-1),
        ]
    )


STAT_KEYS = (
    "objective/forward_kl",
    "objective/reverse_kl",
    "objective/teacher_entropy",
    "objective/student_entropy",
)


def divergence_loss(
    student_logits_B_T_V: torch.Tensor,
    teacher_logits_B_T_V: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    divergence: str = "forward_kl",
    options: DivergenceOptions | None = None,
    vocab_size: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Any divergence of :func:`token_divergence` on logits, reduced: the body of the public
    objectives below (align, log-softmax, divergence, reduce, metrics).

    loss = Σ_n w_n D(softmax(z_S,n / τ_S), softmax(z_T,n / τ_T)) with the reduction weights w of
    :func:`token_weights` (docs/method.md §1–§2, [P] Eq. 1); the plain form of every
    full-vocabulary kind, as :func:`~distillscope.objectives.fused.fused_divergence` is its form
    from hidden states. ``options`` defaults to :class:`DivergenceOptions`' defaults.
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
    logp_student_B_T_V = tempered_log_softmax(student_logits_B_T_V, o.student_temperature)
    logp_teacher_B_T_V = tempered_log_softmax(teacher_logits_B_T_V.detach(), o.teacher_temperature)
    per_token_B_T = token_divergence(
        logp_student_B_T_V, logp_teacher_B_T_V, divergence, beta=o.beta, alpha=o.alpha
    )
    loss = reduce_tokens(per_token_B_T, mask_B_T, o.reduction)

    stats_4_B_T = token_stats(logp_student_B_T_V.detach(), logp_teacher_B_T_V)
    weights_B_T = token_weights(mask_B_T.bool(), "token_mean")
    kept_4_B_T = torch.where(mask_B_T.bool(), stats_4_B_T, torch.zeros_like(stats_4_B_T))
    means_4 = (kept_4_B_T * weights_B_T).sum(dim=(-2, -1))
    # One device→host transfer for all metrics (each .item() would be a sync point).
    tokens = mask_B_T.bool().sum().float().reshape(1)
    values = torch.cat([loss.detach().reshape(1), means_4, tokens]).tolist()
    metrics = {"objective/loss": values[0], **dict(zip(STAT_KEYS, values[1:5], strict=True))}
    metrics["objective/tokens"] = values[5]
    return loss, metrics


# ---------------------------------------------------------------------------------------------
# Public objectives
# ---------------------------------------------------------------------------------------------


def forward_kl(
    student_logits_B_T_V: torch.Tensor,
    teacher_logits_B_T_V: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    student_temperature: float = 1.0,
    teacher_temperature: float = 1.0,
    reduction: Reduction = "seq_mean",
    vocab_size: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Forward KL, mode-covering: F = KL(π_T ‖ π_S) = Σ_v π_T(v) [log π_T(v) − log π_S(v)].

    docs/method.md §2, the D of [P] Eq. 1, with π = softmax(z / temperature). At temperature 1 the
    gradient w.r.t. the student logits is ∂F/∂z_S = π_S − π_T ([P] Eq. 4).

    Args:
        student_logits_B_T_V: student logits (any float dtype; softmax runs in fp32).
        teacher_logits_B_T_V: teacher logits, detached here; same shape unless ``vocab_size``.
        mask_B_T: True at the completion tokens that count.
        vocab_size: slice both widths to this (tokenizer) length first; without it, differing
            widths raise ValueError.

    Returns:
        ``(loss, metrics)``: a scalar fp32 loss and the metrics listed in the module docstring.
    """
    options = DivergenceOptions(student_temperature, teacher_temperature, reduction)
    return divergence_loss(
        student_logits_B_T_V,
        teacher_logits_B_T_V,
        mask_B_T,
        divergence="forward_kl",
        options=options,
        vocab_size=vocab_size,
    )


def reverse_kl(
    student_logits_B_T_V: torch.Tensor,
    teacher_logits_B_T_V: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    student_temperature: float = 1.0,
    teacher_temperature: float = 1.0,
    reduction: Reduction = "seq_mean",
    vocab_size: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Reverse KL, mode-seeking: R = KL(π_S ‖ π_T) = Σ_v π_S(v) [log π_S(v) − log π_T(v)].

    docs/method.md §2, the D of [P] Eq. 1, with π = softmax(z / temperature). At temperature 1 the
    gradient w.r.t. the student logits is ∂R/∂z_S = π_S ⊙ (log π_S − log π_T − R) ([P] Eq. 5).
    Arguments and return value as in :func:`forward_kl`.
    """
    options = DivergenceOptions(student_temperature, teacher_temperature, reduction)
    return divergence_loss(
        student_logits_B_T_V,
        teacher_logits_B_T_V,
        mask_B_T,
        divergence="reverse_kl",
        options=options,
        vocab_size=vocab_size,
    )


def generalized_jsd(
    student_logits_B_T_V: torch.Tensor,
    teacher_logits_B_T_V: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    beta: float = 0.5,
    student_temperature: float = 1.0,
    teacher_temperature: float = 1.0,
    reduction: Reduction = "seq_mean",
    vocab_size: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Generalised Jensen–Shannon divergence of GKD (Agarwal et al. 2024, Eq. 1; docs/method.md §2).

    M = β π_T + (1−β) π_S,   JSD_β = β KL(π_T ‖ M) + (1−β) KL(π_S ‖ M),  log M by logsumexp.

    JSD_β → 0 as β → 0 or β → 1, and it is exactly 0 at β ∈ {0, 1}: it is *not* a dial between
    forward and reverse KL (TRL special-cases β = 0 / 1 as those KLs; we do not). Use
    :func:`forward_kl`, :func:`reverse_kl` or :func:`kl_mixture` for those.
    Other arguments and the return value as in :func:`forward_kl`.
    """
    options = DivergenceOptions(student_temperature, teacher_temperature, reduction, beta=beta)
    return divergence_loss(
        student_logits_B_T_V,
        teacher_logits_B_T_V,
        mask_B_T,
        divergence="jsd",
        options=options,
        vocab_size=vocab_size,
    )


def kl_mixture(
    student_logits_B_T_V: torch.Tensor,
    teacher_logits_B_T_V: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    alpha: float = 0.5,
    student_temperature: float = 1.0,
    teacher_temperature: float = 1.0,
    reduction: Reduction = "seq_mean",
    vocab_size: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Explicit mixture α · KL(π_T ‖ π_S) + (1−α) · KL(π_S ‖ π_T) (docs/method.md §2).

    α = 1 is :func:`forward_kl`, α = 0 is :func:`reverse_kl`. Other arguments and the return
    value as in :func:`forward_kl`.
    """
    options = DivergenceOptions(student_temperature, teacher_temperature, reduction, alpha=alpha)
    return divergence_loss(
        student_logits_B_T_V,
        teacher_logits_B_T_V,
        mask_B_T,
        divergence="mixture",
        options=options,
        vocab_size=vocab_size,
    )
