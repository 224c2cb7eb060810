"""The reference the fused objectives are checked against: chunked full-vocabulary divergences
from hidden states and LM-head weights by autograd on each chunk (docs/method.md §2, Memory).

Not part of the package: training computes these divergences with
:func:`distillscope.objectives.fused_divergence` (closed-form gradients, chunks sized by a memory
budget). This file keeps the straightforward version — the plain per-token divergence of
:mod:`distillscope.objectives.divergences` on each chunk, differentiated by autograd — so that the
tests (and ``bench/bench_objectives.py``'s ``chunked`` mode) can hold the fused form to it.

The [tokens × V] logits of two models are the memory bottleneck (V = 128,256 for Llama 3,
151,936 for Qwen). These objectives take the final hidden states and the LM-head weights
instead of logits, keep only the masked (completion) positions, and process them ``chunk_size``
tokens at a time: logits exist for one chunk of both models at once, in the forward *and* in
the backward pass.

How the backward stays bounded: a custom ``torch.autograd.Function`` computes, chunk by chunk
during the forward, the exact gradient w.r.t. that chunk's student logits (by autograd on the
chunk only) and immediately folds it into ∂L/∂hidden = g · W and ∂L/∂W = gᵀ · h. Only those two
(the size of the inputs) are kept; backward just scales them by the incoming gradient. This is
the technique of Liger-Kernel's fused linear losses, written for our divergences. The values and
gradients equal the plain :mod:`distillscope.objectives.divergences` ones to float tolerance.

No bias terms (LM heads of Llama/Qwen have none). Metric keys as in ``divergences``.
"""

from __future__ import annotations

import torch

from distillscope.objectives.divergences import (
    FORWARD_KL,
    REVERSE_KL,
    Divergence,
    check_options,
    tempered_log_softmax,
    token_stats,
    token_weights,
)
from distillscope.objectives.fused import apply_over_rows, check_hidden_inputs
from distillscope.objectives.options import DivergenceOptions, Reduction


class _ChunkedDivergence(torch.autograd.Function):
    """Weighted sum Σ_n w_n D(π_S(·|n), π_T(·|n)) over selected positions, chunk by chunk."""

    @staticmethod
    def forward(
        ctx,
        student_hidden_N_H: torch.Tensor,
        student_head_V_H: torch.Tensor,
        teacher_hidden_N_H: torch.Tensor,
        teacher_head_V_H: torch.Tensor,
        weights_N: torch.Tensor,
        options: dict,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        need_hidden_grad, need_head_grad = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        need_grad = need_hidden_grad or need_head_grad
        device = student_hidden_N_H.device
        dtype = torch.promote_types(student_hidden_N_H.dtype, torch.float32)  # fp64 stays fp64
        loss = torch.zeros((), dtype=dtype, device=device)
        stat_sums_4 = torch.zeros(4, dtype=dtype, device=device)
        grad_hidden_N_H = torch.zeros_like(student_hidden_N_H) if need_hidden_grad else None
        grad_head_V_H = (  # accumulated over chunks in fp32 (fp64), cast back at the end
            torch.zeros(student_head_V_H.shape, dtype=dtype, device=device)
            if need_head_grad
            else None
        )
        chunk_size = options["chunk_size"]
        for start in range(0, student_hidden_N_H.shape[0], chunk_size):
            hidden_C_H = student_hidden_N_H[start : start + chunk_size]
            logits_C_V = (hidden_C_H @ student_head_V_H.T).to(dtype)
            teacher_logits_C_V = teacher_hidden_N_H[start : start + chunk_size] @ teacher_head_V_H.T
            tau_t = options["teacher_temperature"]
            logp_teacher_C_V = tempered_log_softmax(teacher_logits_C_V, tau_t)
            with torch.enable_grad():  # Function.forward runs under no_grad; we need a local graph
                logits_C_V.requires_grad_(need_grad)
                logp_student_C_V = tempered_log_softmax(logits_C_V, options["student_temperature"])
                divergence_C = options["divergence"].tokens(
                    logp_student_C_V, logp_teacher_C_V, options["options"]
                )
                chunk_loss = (divergence_C * weights_N[start : start + chunk_size]).sum()
            if need_grad:
                (grad_logits_C_V,) = torch.autograd.grad(chunk_loss, logits_C_V)
                grad_logits_C_V = grad_logits_C_V.to(student_head_V_H.dtype)
                if need_hidden_grad:
                    grad_hidden_N_H[start : start + chunk_size] = grad_logits_C_V @ student_head_V_H
                if need_head_grad:
                    grad_head_V_H += (grad_logits_C_V.T @ hidden_C_H).to(dtype)  # (V, H)
            loss += chunk_loss.detach()
            stat_sums_4 += token_stats(logp_student_C_V.detach(), logp_teacher_C_V).sum(dim=-1)
        if grad_head_V_H is not None:
            grad_head_V_H = grad_head_V_H.to(student_head_V_H.dtype)
        ctx.save_for_backward(grad_hidden_N_H, grad_head_V_H)
        ctx.mark_non_differentiable(stat_sums_4)
        return loss, stat_sums_4

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor, _grad_stats: torch.Tensor):
        grad_hidden_N_H, grad_head_V_H = ctx.saved_tensors
        if grad_hidden_N_H is not None:
            grad_hidden_N_H = grad_hidden_N_H * grad_loss.to(grad_hidden_N_H.dtype)
        if grad_head_V_H is not None:
            grad_head_V_H = grad_head_V_H * grad_loss.to(grad_head_V_H.dtype)
        return grad_hidden_N_H, grad_head_V_H, None, None, None, None


def chunked_divergence(
    student_hidden_B_T_H: torch.Tensor,
    student_head_V_H: torch.Tensor,
    teacher_hidden_B_T_H: torch.Tensor,
    teacher_head_V_H: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    divergence: Divergence = FORWARD_KL,
    chunk_size: int = 1024,
    student_temperature: float = 1.0,
    teacher_temperature: float = 1.0,
    reduction: Reduction = "seq_mean",
    vocab_size: int | None = None,
    **weights: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Any :class:`~distillscope.objectives.divergences.Divergence`, chunked, by autograd of its
    ``value`` on each chunk.

    z_S = h_S W_Sᵀ, z_T = h_T W_Tᵀ at the masked positions, then the same loss as the plain
    objective: Σ_n w_n D(softmax(z_S,n / τ_S), softmax(z_T,n / τ_T)) with the reduction weights
    w of ``token_weights`` (docs/method.md §1–§2, [P] Eq. 1). Gradients flow to
    ``student_hidden_B_T_H`` and ``student_head_V_H``; the teacher is detached.

    Args:
        student_hidden_B_T_H: student final hidden states (after the last norm).
        student_head_V_H: student LM-head weight (``lm_head.weight``, shape (V, H)).
        teacher_hidden_B_T_H: teacher final hidden states; its H may differ from the student's.
        teacher_head_V_H: teacher LM-head weight, (V', H_teacher).
        mask_B_T: True at the completion tokens that count.
        divergence: the declaration (``weights``: its weights by name, ``beta=0.3``; one
            absent is read at its default).
        chunk_size: positions per chunk; the transient logits and log-probs take a small
            multiple (about 10×) of chunk_size · V fp32 values, whatever the token count.
        vocab_size: use only the first ``vocab_size`` rows of both heads (docs/method.md §1);
            without it, heads of different widths raise ValueError.

    Returns:
        ``(loss, metrics)`` exactly as the plain objective returns them.
    """
    check_options(reduction, student_temperature, teacher_temperature)
    divergence.weights_of(DivergenceOptions(weights=weights))
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    vocab = check_hidden_inputs(
        student_hidden_B_T_H,
        student_head_V_H,
        teacher_hidden_B_T_H,
        teacher_head_V_H,
        mask_B_T,
        vocab_size,
    )
    student_head_V_H, teacher_head_V_H = student_head_V_H[:vocab], teacher_head_V_H[:vocab]

    keep_B_T = mask_B_T.bool()
    weights_N = token_weights(keep_B_T, reduction)[keep_B_T]  # (N,) reduction weights
    options = {
        "divergence": divergence,
        "chunk_size": chunk_size,
        "student_temperature": student_temperature,
        "teacher_temperature": teacher_temperature,
        "options": DivergenceOptions(weights=weights),
    }
    return apply_over_rows(
        _ChunkedDivergence,
        student_hidden_B_T_H,
        student_head_V_H,
        teacher_hidden_B_T_H,
        teacher_head_V_H,
        keep_B_T,
        weights_N,
        options,
    )


def chunked_forward_kl(
    student_hidden_B_T_H: torch.Tensor,
    student_head_V_H: torch.Tensor,
    teacher_hidden_B_T_H: torch.Tensor,
    teacher_head_V_H: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    chunk_size: int = 1024,
    student_temperature: float = 1.0,
    teacher_temperature: float = 1.0,
    reduction: Reduction = "seq_mean",
    vocab_size: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Chunked forward KL(π_T ‖ π_S) = Σ_v π_T (log π_T − log π_S) (docs/method.md §2, [P] Eq. 1).

    Equal to the plain :data:`~distillscope.objectives.divergences.FORWARD_KL` on ``h Wᵀ``
    logits; see :func:`chunked_divergence` for the arguments.
    """
    return chunked_divergence(
        student_hidden_B_T_H,
        student_head_V_H,
        teacher_hidden_B_T_H,
        teacher_head_V_H,
        mask_B_T,
        divergence=FORWARD_KL,
        chunk_size=chunk_size,
        student_temperature=student_temperature,
        teacher_temperature=teacher_temperature,
        reduction=reduction,
        vocab_size=vocab_size,
    )


def chunked_reverse_kl(
    student_hidden_B_T_H: torch.Tensor,
    student_head_V_H: torch.Tensor,
    teacher_hidden_B_T_H: torch.Tensor,
    teacher_head_V_H: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    chunk_size: int = 1024,
    student_temperature: float = 1.0,
    teacher_temperature: float = 1.0,
    reduction: Reduction = "seq_mean",
    vocab_size: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Chunked reverse KL(π_S ‖ π_T) = Σ_v π_S (log π_S − log π_T) (docs/method.md §2, [P] Eq. 1).

    Equal to the plain :data:`~distillscope.objectives.divergences.REVERSE_KL` on ``h Wᵀ``
    logits; see :func:`chunked_divergence` for the arguments.
    """
    return chunked_divergence(
        student_hidden_B_T_H,
        student_head_V_H,
        teacher_hidden_B_T_H,
        teacher_head_V_H,
        mask_B_T,
        divergence=REVERSE_KL,
        chunk_size=chunk_size,
        student_temperature=student_temperature,
        teacher_temperature=teacher_temperature,
        reduction=reduction,
        vocab_size=vocab_size,
    )
