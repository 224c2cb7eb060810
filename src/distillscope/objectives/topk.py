"""A top-k teacher: each position's divergence over the teacher's k most likely tokens + a tail.

At V = 151,936 a teacher's full distribution is 600 kB a token, too much to cache for every
position of every shared rollout. With ``objective.teacher_topk = k`` the teacher keeps, at each
position, its k most likely tokens (at the loss temperature) and folds the rest of its mass into
one tail bin; the student's distribution is folded onto the same k + 1 bins:

    π̃_T = (π_T(v₁), …, π_T(v_k), 1 − Σᵢ π_T(vᵢ)),   π̃_S = (π_S(v₁), …, π_S(v_k), 1 − Σᵢ π_S(vᵢ))

with v₁…v_k the teacher's top k, and the configured divergence is computed between π̃_S and
π̃_T. This **changes the objective**: coarse-graining never increases an f-divergence (forward
and reverse KL, JSD and their mixtures), so the top-k divergence is a lower bound of the full
one, equal to it when the teacher's tail is empty and close to it when the tail is small
(``objective/teacher_topk_mass`` logs the teacher's mass in its top k). Unlike dropping the tail
and renormalising, every divergence stays finite, reverse KL included. Runs that use it are
labelled ``top-k teacher (k)``.

Folded log-probs, ``[B, T, k + 1]`` (fp32): the top-k entries are ℓ(vᵢ) = log softmax(z/τ)[vᵢ]
and the tail entry is logsumexp of ℓ over the other V − k tokens, computed directly (never as
log(1 − Σ), which loses every digit when the tail is tiny).

On the fused path the student's folded log-probs come from hidden states a chunk of rows at a
time (:class:`_FoldedLogprobs`). With p = softmax(z/τ), r = p restricted to the tail tokens and
renormalised, and upstream gradients gᵢ (top-k entries) and g_t (tail):

    ∂L/∂z = (1/τ) [ Σᵢ gᵢ e_{vᵢ} + g_t r − (Σᵢ gᵢ + g_t) p ],

folded into ∂L/∂h = (∂L/∂z) W and ∂L/∂W = (∂L/∂z)ᵀ h as in :mod:`.fused_tokens`.
"""

from __future__ import annotations

import math

import torch

from distillscope.objectives.divergences import tempered_log_softmax
from distillscope.objectives.fused_tokens import (
    _chunk_logprobs,
    _map_chunks,
    _masked_rows,
    _softmax_dtype,
    backprop_chunks,
)
from distillscope.objectives.options import ChunkSpec


def check_topk(k: int, vocab_size: int) -> None:
    """``0 < k < vocab_size`` or ValueError naming ``objective.teacher_topk``."""
    if not 0 < k < vocab_size:
        raise ValueError(
            f"objective.teacher_topk must be between 1 and the vocabulary size − 1 "
            f"({vocab_size - 1}), got {k}"
        )


def fold(logp_N_V: torch.Tensor, ids_N_K: torch.Tensor) -> torch.Tensor:
    """Folded log-probs ``[N, k + 1]``: ℓ at ``ids`` and the logsumexp of every other entry.

    Differentiable in ``logp_N_V``; rows of ``ids`` must hold distinct token ids.
    """
    top_N_K = logp_N_V.gather(-1, ids_N_K)
    tail_N = logp_N_V.scatter(-1, ids_N_K, float("-inf")).logsumexp(dim=-1)
    return torch.cat([top_N_K, tail_N[..., None]], dim=-1)


def _top(logp_N_V: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids of the k largest entries, folded log-probs) of each row."""
    ids_N_K = logp_N_V.topk(k, dim=-1).indices
    return ids_N_K, fold(logp_N_V, ids_N_K)


@torch.no_grad()
def teacher_topk_from_logits(
    logits_B_T_V: torch.Tensor, k: int, temperature: float, vocab_size: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The teacher's top ``k`` ids ``[B, T, k]`` and folded log-probs ``[B, T, k + 1]`` (fp32).

    Only the first ``vocab_size`` logits count (padded embedding rows are never chosen).
    """
    logp_B_T_V = tempered_log_softmax(logits_B_T_V, temperature, vocab_size)
    check_topk(k, logp_B_T_V.shape[-1])
    return _top(logp_B_T_V, k)


@torch.no_grad()
def teacher_topk_from_hidden(
    hidden_B_T_H: torch.Tensor,
    head_V_H: torch.Tensor,
    mask_B_T: torch.Tensor,
    k: int,
    temperature: float,
    *,
    vocab_size: int | None = None,
    chunks: ChunkSpec | None = None,
    tokens_B_T: torch.Tensor | None = None,
) -> tuple[torch.Tensor, ...]:
    """:func:`teacher_topk_from_logits` from hidden states, a chunk of masked rows at a time.

    Unmasked positions get ids 0…k−1 and a uniform folded distribution (finite, never read).
    With ``tokens_B_T`` the same head pass also returns the log-probs of those tokens at
    ``temperature`` and at 1.0 (``[B, T]`` each, 0 where masked): log softmax(z) is
    log softmax(τ ℓ_τ), a per-row shift of the tempered log-probs.
    """
    keep_B_T, hidden_N_H, head, rows = _masked_rows(
        hidden_B_T_H, head_V_H, mask_B_T, vocab_size, chunks
    )
    check_topk(k, head.shape[0])
    dtype = _softmax_dtype(hidden_N_H)
    n = hidden_N_H.shape[0]
    ids_N_K = torch.empty((n, k), dtype=torch.long, device=hidden_N_H.device)
    folded_N_K1 = torch.empty((n, k + 1), dtype=dtype, device=hidden_N_H.device)
    tokens_N_1 = None if tokens_B_T is None else tokens_B_T[keep_B_T].long()[:, None]
    token_N_2 = torch.zeros((n, 2), dtype=dtype, device=hidden_N_H.device)
    for start in range(0, n, rows):
        stop = start + rows
        logp_C_V = _chunk_logprobs(hidden_N_H[start:stop], head, temperature)
        ids_N_K[start:stop], folded_N_K1[start:stop] = _top(logp_C_V, k)
        if tokens_N_1 is not None:
            index_C_1 = tokens_N_1[start:stop]
            token_N_2[start:stop, 0] = logp_C_V.gather(-1, index_C_1)[:, 0]
            logp1_C_V = torch.log_softmax(logp_C_V * temperature, dim=-1)
            token_N_2[start:stop, 1] = logp1_C_V.gather(-1, index_C_1)[:, 0]
    ids_B_T_K, folded_B_T_K1 = _scatter_rows(keep_B_T, ids_N_K, folded_N_K1)
    if tokens_N_1 is None:
        return ids_B_T_K, folded_B_T_K1
    zeros_B_T = torch.zeros_like(keep_B_T, dtype=dtype)
    at_tau, at_one = (zeros_B_T.masked_scatter(keep_B_T, t) for t in token_N_2.T.contiguous())
    return ids_B_T_K, folded_B_T_K1, at_tau, at_one


def _scatter_rows(
    keep_B_T: torch.Tensor, ids_N_K: torch.Tensor, folded_N_K1: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked rows back to ``[B, T, …]``; padding rows get ids 0…k−1 and a uniform fold."""
    k = ids_N_K.shape[-1]
    shape = (*keep_B_T.shape, k)
    ids_B_T_K = torch.arange(k, device=ids_N_K.device).expand(shape).clone()
    ids_B_T_K[keep_B_T] = ids_N_K
    folded_B_T_K1 = _uniform_fold(keep_B_T, k, folded_N_K1)
    folded_B_T_K1[keep_B_T] = folded_N_K1
    return ids_B_T_K, folded_B_T_K1


def student_folded_from_logits(
    logits_B_T_V: torch.Tensor,
    ids_B_T_K: torch.Tensor,
    temperature: float,
    vocab_size: int | None = None,
) -> torch.Tensor:
    """The student's log-probs folded onto the teacher's top-k bins, ``[B, T, k + 1]``.

    Differentiable (autograd through the full log-softmax; the plain path).
    """
    return fold(tempered_log_softmax(logits_B_T_V, temperature, vocab_size), ids_B_T_K)


class _FoldedLogprobs(torch.autograd.Function):
    """Folded log-probs of N rows from hidden states, chunk by chunk (see the module doc)."""

    @staticmethod
    def forward(ctx, hidden_N_H, head_V_H, ids_N_K, tau: float, rows: int):
        out_N_K1 = _folded_rows(hidden_N_H, head_V_H, ids_N_K, tau, rows)
        ctx.save_for_backward(hidden_N_H, head_V_H, ids_N_K, out_N_K1[:, -1])
        ctx.tau, ctx.rows = tau, rows
        return out_N_K1

    @staticmethod
    def backward(ctx, grad_N_K1):
        hidden_N_H, head_V_H, ids_N_K, tail_N = ctx.saved_tensors
        grad_N_K1 = grad_N_K1.to(_softmax_dtype(hidden_N_H))

        def logit_grad(start: int, stop: int, logp_C_V: torch.Tensor) -> torch.Tensor:
            ids_C_K, g_C_K1 = ids_N_K[start:stop], grad_N_K1[start:stop]
            # g_t · r: the tail's softmax, exp(ℓ − tail) off the top k, 0 on it
            grad_C_V = (logp_C_V - tail_N[start:stop, None]).exp_()
            grad_C_V.scatter_(-1, ids_C_K, 0.0).mul_(g_C_K1[:, -1:])
            # − (Σ g) p, then + Σᵢ gᵢ e_{vᵢ}, all over τ
            grad_C_V.sub_(logp_C_V.exp_().mul_(g_C_K1.sum(dim=-1, keepdim=True)))
            return grad_C_V.scatter_add_(-1, ids_C_K, g_C_K1[:, :-1]).div_(ctx.tau)

        return (*backprop_chunks(ctx, hidden_N_H, head_V_H, logit_grad), None, None, None)


def _folded_rows(
    hidden_N_H: torch.Tensor, head_V_H: torch.Tensor, ids_N_K: torch.Tensor, tau: float, rows: int
) -> torch.Tensor:
    out_N_K1 = hidden_N_H.new_empty(
        (hidden_N_H.shape[0], ids_N_K.shape[-1] + 1), dtype=_softmax_dtype(hidden_N_H)
    )
    with torch.no_grad():
        return _map_chunks(
            hidden_N_H,
            head_V_H,
            tau,
            rows,
            lambda logp_C_V, start, stop: fold(logp_C_V, ids_N_K[start:stop]),
            out_N_K1,
        )


def _uniform_fold(keep_B_T: torch.Tensor, k: int, like: torch.Tensor) -> torch.Tensor:
    """``[B, T, k + 1]`` of log(1 / (k + 1)): the finite fold of positions outside the mask."""
    shape = (*keep_B_T.shape, k + 1)
    return torch.full(shape, -math.log(k + 1), dtype=like.dtype, device=like.device)


def student_folded_from_hidden(
    hidden_B_T_H: torch.Tensor,
    head_V_H: torch.Tensor,
    ids_B_T_K: torch.Tensor,
    mask_B_T: torch.Tensor,
    temperature: float,
    *,
    vocab_size: int | None = None,
    chunks: ChunkSpec | None = None,
) -> torch.Tensor:
    """:func:`student_folded_from_logits` from hidden states; logits exist a chunk at a time.

    Gradients flow to ``hidden_B_T_H`` and ``head_V_H``; unmasked positions get a uniform fold
    (no gradient).
    """
    keep_B_T, hidden_N_H, head, rows = _masked_rows(
        hidden_B_T_H, head_V_H, mask_B_T, vocab_size, chunks
    )
    ids_N_K = ids_B_T_K[keep_B_T]
    if torch.is_grad_enabled() and (hidden_N_H.requires_grad or head.requires_grad):
        folded_N_K1 = _FoldedLogprobs.apply(hidden_N_H, head, ids_N_K, temperature, rows)
    else:
        folded_N_K1 = _folded_rows(hidden_N_H, head, ids_N_K, temperature, rows)
    out_B_T_K1 = _uniform_fold(keep_B_T, ids_N_K.shape[-1], folded_N_K1)
    return out_B_T_K1.masked_scatter(keep_B_T[..., None], folded_N_K1)
