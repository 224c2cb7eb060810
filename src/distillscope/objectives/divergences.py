"""Full-vocabulary token divergences between student and teacher (docs/method.md §1–§2).

Each divergence is one :class:`Divergence` declaration: its value per position (what the plain
path differentiates by autograd) beside its closed-form gradient w.r.t. the student's logits
(what the fused hidden-state path, :mod:`.fused`, writes chunk by chunk); :data:`DIVERGENCES`
lists them. The plain loss :func:`divergence_loss` maps ``(logits, logits, mask, divergence,
options) -> (loss, metrics)``:

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

Run: ``PYTHONPATH=src python -m pytest tests/objectives/test_divergences.py
tests/objectives/test_declared_divergence.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from distillscope.objectives.options import (
    JSD_BETA,
    MIXTURE_ALPHA,
    REDUCTIONS,
    DivergenceOptions,
    Weight,
)

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
# The declarations: each divergence's value and its closed-form gradient, side by side
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FusedChunk:
    """One chunk of C token rows on the fused path (:mod:`.fused`), as a closed form reads it.

    ℓ = log_softmax(a) and p = exp(ℓ) of both models, ``[C, V]`` each (fp32, fp64 for fp64
    inputs), with a = z_S / τ_S and b = z_T / τ_T; F and R per row (already computed for the
    metrics); and a spare ``[C, V]`` buffer when the divergence asks for one (``needs_spare``).
    A closed form may overwrite every buffer.
    """

    logp_student_C_V: torch.Tensor
    logp_teacher_C_V: torch.Tensor
    p_student_C_V: torch.Tensor
    p_teacher_C_V: torch.Tensor
    forward_C: torch.Tensor  # F = Σ p_T (ℓ_T − ℓ_S)
    reverse_C: torch.Tensor  # R = Σ p_S (ℓ_S − ℓ_T)
    spare_C_V: torch.Tensor | None = None


def _no_spare(**_weights: float) -> bool:
    return False


@dataclass(frozen=True)
class Divergence:
    """One full-vocabulary divergence D(π_S, π_T), declared once for every path.

    ``value(ℓ_S, ℓ_T, **weights)`` gives D per position from normalised log-probs (any leading
    shape, ``..._V`` → ``...``): the plain path (:func:`divergence_loss`) and the tests' chunked
    reference differentiate it by autograd. ``gradient(chunk, **weights)`` gives, for one
    :class:`FusedChunk`, ``(D_C, G_C_V, scale)`` with ``scale · G`` = ∂D/∂a, a = z_S / τ_S (the
    fused path, :mod:`.fused`, multiplies by w_n / τ_S on the (C × H) side). For any D that
    depends on the student through p_S, the softmax Jacobian gives ∂D/∂a = p_S ⊙ (u − Σ_v p_S u)
    with u = ∂D/∂p_S. ``weights`` are the :class:`~.options.Weight` s D reads, each in [0, 1],
    from :attr:`~.options.DivergenceOptions.weights` by name or else at its default, and passes
    to ``value`` and ``gradient`` as keywords of the same names (a weight a config sets is
    declared in :mod:`.options`, torch-free, and named again by the registry entry, from which
    the config generates its field). ``needs_spare(**weights)`` says whether ``gradient``
    writes ``chunk.spare_C_V``. Adding a divergence is one declaration: the plain, chunked and
    fused paths follow (tests/objectives/test_declared_divergence.py); a config names it, and
    sets its weights, once it is in :data:`DIVERGENCES` and has its entry in :mod:`.registry`
    (tests/objectives/test_divergence_weights.py).
    """

    name: str
    value: Callable[..., torch.Tensor]
    gradient: Callable[..., tuple[torch.Tensor, torch.Tensor, float]]
    weights: tuple[Weight, ...] = ()
    needs_spare: Callable[..., bool] = _no_spare

    def weights_of(self, options: DivergenceOptions) -> dict[str, float]:
        """The weights D reads from ``options`` (a weight absent there: its default), by name,
        checked to lie in [0, 1]."""
        weights = {w.name: options.weights.get(w.name, w.default) for w in self.weights}
        for name, weight in weights.items():
            if not 0.0 <= weight <= 1.0:
                raise ValueError(f"{self.name} {name} must be in [0, 1], got {weight}")
        return weights

    def tokens(
        self,
        logp_student_B_T_V: torch.Tensor,
        logp_teacher_B_T_V: torch.Tensor,
        options: DivergenceOptions | None = None,
    ) -> torch.Tensor:
        """D per position, ``[B, T]``, from normalised log-probs (``value`` with its weights)."""
        weights = self.weights_of(options or DivergenceOptions())
        return self.value(logp_student_B_T_V, logp_teacher_B_T_V, **weights)


def row_dots(a_C_V: torch.Tensor, b_C_V: torch.Tensor) -> torch.Tensor:
    """Σ_v a[c, v] b[c, v] for each row c, as one batched product (no [C, V] temporary)."""
    return torch.bmm(a_C_V.unsqueeze(1), b_C_V.unsqueeze(2)).view(-1)


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


#: Forward KL, mode-covering: F = KL(π_T ‖ π_S). u = −p_T / p_S, so ∂F/∂a = p_S − p_T
#: ([P] Eq. 4 at τ_S = 1), written over p_S.
FORWARD_KL = Divergence(
    "forward_kl",
    value=forward_kl_tokens,
    gradient=lambda c: (c.forward_C, c.p_student_C_V.sub_(c.p_teacher_C_V), 1.0),
)


def _reverse_kl_gradient(c: FusedChunk) -> torch.Tensor:
    """∂R/∂a = p_S ⊙ (ℓ_S − ℓ_T − R) ([P] Eq. 5 at τ_S = 1; u = ℓ_S − ℓ_T + 1), over ℓ_S."""
    grad_C_V = c.logp_student_C_V.sub_(c.logp_teacher_C_V).sub_(c.reverse_C[:, None])
    return grad_C_V.mul_(c.p_student_C_V)


#: Reverse KL, mode-seeking: R = KL(π_S ‖ π_T).
REVERSE_KL = Divergence(
    "reverse_kl",
    value=reverse_kl_tokens,
    gradient=lambda c: (c.reverse_C, _reverse_kl_gradient(c), 1.0),
)


def mixture_tokens(
    logp_student_B_T_V: torch.Tensor, logp_teacher_B_T_V: torch.Tensor, alpha: float
) -> torch.Tensor:
    """α F + (1−α) R per position (docs/method.md §2, ours); shape (B, T)."""
    fkl_B_T = forward_kl_tokens(logp_student_B_T_V, logp_teacher_B_T_V)
    rkl_B_T = reverse_kl_tokens(logp_student_B_T_V, logp_teacher_B_T_V)
    return alpha * fkl_B_T + (1.0 - alpha) * rkl_B_T


def _mixture_gradient(c: FusedChunk, alpha: float) -> tuple[torch.Tensor, torch.Tensor, float]:
    """∂/∂a = α (p_S − p_T) + (1−α) p_S ⊙ (ℓ_S − ℓ_T − R), written over ℓ_S."""
    grad_C_V = c.logp_student_C_V.sub_(c.logp_teacher_C_V).sub_(c.reverse_C[:, None])
    grad_C_V.mul_(1.0 - alpha).add_(alpha).mul_(c.p_student_C_V).sub_(c.p_teacher_C_V, alpha=alpha)
    return alpha * c.forward_C + (1.0 - alpha) * c.reverse_C, grad_C_V, 1.0


#: The explicit mixture α F + (1−α) R (docs/method.md §2, ours): α = 1 is forward KL, α = 0
#: reverse KL.
MIXTURE = Divergence(
    "mixture",
    value=mixture_tokens,
    gradient=_mixture_gradient,
    weights=(MIXTURE_ALPHA,),
)


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


def _jsd_gradient(c: FusedChunk, beta: float) -> tuple[torch.Tensor, torch.Tensor, float]:
    """∂J/∂a = (1−β) p_S ⊙ (ℓ_S − log M − K_S), K_S = KL(p_S‖M), written over the spare buffer.

    The terms through ∂M/∂p_S cancel (−β(1−β) p_T/M − (1−β)² p_S/M + (1−β) = 0), so
    u = (1−β)(ℓ_S − log M): reverse KL with M in place of p_T.
    """
    p_student_C_V, p_teacher_C_V = c.p_student_C_V, c.p_teacher_C_V
    if beta in (0.0, 1.0):  # M is p_S or p_T exactly: J and its gradient are exactly 0
        return torch.zeros_like(c.forward_C), p_student_C_V.zero_(), 0.0
    # M is a sum of probabilities; where both underflow to 0 the clamp keeps 0 · log M = 0.
    logp_mix_C_V = torch.mul(p_teacher_C_V, beta, out=c.spare_C_V)
    logp_mix_C_V.add_(p_student_C_V, alpha=1.0 - beta)
    logp_mix_C_V.clamp_min_(torch.finfo(logp_mix_C_V.dtype).tiny).log_()
    # KL(p ‖ M) as Σ p (ℓ − log M), not Σ p ℓ − Σ p log M: two sums of the size of the entropy
    # (≈ log V) whose difference is small lose float32 digits (1e-5 relative at V = 151,936).
    # ℓ_T − log M is written over ℓ_T, ℓ_S − log M over log M; neither is read again.
    mix_gap_teacher_C_V = c.logp_teacher_C_V.sub_(logp_mix_C_V)
    grad_C_V = torch.sub(c.logp_student_C_V, logp_mix_C_V, out=logp_mix_C_V)
    kl_student_C = row_dots(p_student_C_V, grad_C_V)  # KL(p_S ‖ M)
    kl_teacher_C = row_dots(p_teacher_C_V, mix_gap_teacher_C_V)  # KL(p_T ‖ M)
    jsd_C = beta * kl_teacher_C + (1.0 - beta) * kl_student_C
    grad_C_V.sub_(kl_student_C[:, None]).mul_(p_student_C_V)
    return jsd_C, grad_C_V, 1.0 - beta


#: The generalised Jensen–Shannon divergence of GKD (Agarwal et al. 2024, Eq. 1):
#: M = β π_T + (1−β) π_S, J_β = β KL(π_T ‖ M) + (1−β) KL(π_S ‖ M), log M by logsumexp. It is
#: exactly 0 at β ∈ {0, 1}: *not* a dial between forward and reverse KL (TRL special-cases
#: β = 0 / 1 as those KLs; we do not; use :data:`MIXTURE` for that).
JSD = Divergence(
    "jsd",
    value=jsd_tokens,
    gradient=_jsd_gradient,
    weights=(JSD_BETA,),
    needs_spare=lambda beta: 0.0 < beta < 1.0,
)

#: Every divergence a config can name, by name (``objective.kind``; the registry's
#: full-vocabulary kinds are these).
DIVERGENCES: dict[str, Divergence] = {d.name: d for d in (FORWARD_KL, REVERSE_KL, JSD, MIXTURE)}


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


def objective_metrics(
    loss: torch.Tensor, stat_means_4: torch.Tensor, tokens: torch.Tensor
) -> dict[str, float]:
    """``objective/`` metrics of a full-vocabulary loss: the loss, the token means of the four
    :data:`STAT_KEYS`, the token count; one device→host transfer (each ``.item()`` would be a
    sync point)."""
    values = torch.cat([loss.detach().reshape(1), stat_means_4, tokens.reshape(1)]).tolist()
    metrics = {"objective/loss": values[0], **dict(zip(STAT_KEYS, values[1:5], strict=True))}
    metrics["objective/tokens"] = values[5]
    return metrics


def divergence_loss(
    student_logits_B_T_V: torch.Tensor,
    teacher_logits_B_T_V: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    divergence: Divergence = FORWARD_KL,
    options: DivergenceOptions | None = None,
    vocab_size: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """A :class:`Divergence` on logits, reduced: the plain path of every full-vocabulary kind.

    loss = Σ_n w_n D(softmax(z_S,n / τ_S), softmax(z_T,n / τ_T)) with the reduction weights w of
    :func:`token_weights` (docs/method.md §1–§2, [P] Eq. 1); D by ``divergence.value``,
    differentiated by autograd (:func:`~distillscope.objectives.fused.fused_divergence` is the
    same loss from hidden states, with ``divergence.gradient``).

    Args:
        student_logits_B_T_V: student logits (any float dtype; softmax runs in fp32).
        teacher_logits_B_T_V: teacher logits, detached here; same shape unless ``vocab_size``.
        mask_B_T: True (or a per-token weight) at the completion tokens that count.
        divergence: which D (:data:`DIVERGENCES`; forward KL by default).
        options: temperatures, reduction and D's weights (:class:`DivergenceOptions`' defaults
            when None).
        vocab_size: slice both widths to this (tokenizer) length first; without it, differing
            widths raise ValueError.

    Returns:
        ``(loss, metrics)``: a scalar fp32 loss and the metrics listed in the module docstring.
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
    per_token_B_T = divergence.tokens(logp_student_B_T_V, logp_teacher_B_T_V, o)
    loss = reduce_tokens(per_token_B_T, mask_B_T, o.reduction)

    stats_4_B_T = token_stats(logp_student_B_T_V.detach(), logp_teacher_B_T_V)
    weights_B_T = token_weights(mask_B_T.bool(), "token_mean")
    kept_4_B_T = torch.where(mask_B_T.bool(), stats_4_B_T, torch.zeros_like(stats_4_B_T))
    means_4 = (kept_4_B_T * weights_B_T).sum(dim=(-2, -1))
    return loss, objective_metrics(loss, means_4, mask_B_T.bool().sum().float())
