"""Per-token log-probabilities and draws from hidden states + an LM head, chunk by chunk.

OPD, the sampled estimators and every diagnostic (k1/k2/k3, likelihoods) need only
ℓ(y_n) = log softmax(h_n Wᵀ / τ)[y_n] of one token per position, or one draw per position. At
V = 151,936 the [tokens × V] logits they are usually gathered from are the memory wall
(docs/method.md §2, Memory); here they exist for one chunk of rows at a time, sized by a
:class:`~distillscope.objectives.options.ChunkSpec`, in the forward *and* the backward pass.

Gradient (recomputed chunk by chunk in ``backward``, nothing of size V is saved): with
p = softmax(z / τ) and upstream g_n = ∂L/∂ℓ(y_n),

    ∂L/∂z_n = (g_n / τ) (e_{y_n} − p_n),   ∂L/∂h = (∂L/∂z) W,   ∂L/∂W = (∂L/∂z)ᵀ h.

Draws use inverse-CDF sampling with one uniform u_n per position (:func:`inverse_cdf_draw`):
y_n = min{v : F_n(v) > u_n · F_n(V)}. The draw of a position depends only on its own u_n, so
the tokens do not depend on the chunking or on how a batch is split into micro-batches; the
plain (logits) estimators draw the same way, so both paths draw the same tokens.
"""

from __future__ import annotations

import torch

from distillscope.objectives.divergences import tempered_log_softmax
from distillscope.objectives.options import ChunkSpec

#: (rows × V) fp32 buffers one chunk of the token log-prob needs (logits, exp, and one spare).
TOKEN_BUFFERS = 3


def inverse_cdf_draw(logp_N_V: torch.Tensor, uniforms_N: torch.Tensor) -> torch.Tensor:
    """One token per row of log-probabilities by inverse CDF: min{v : F(v) > u · F(V)}, int64.

    F is the running sum of exp(logp); scaling u by the row total absorbs rounding of the
    sum. A token of probability 0 is never drawn (its F equals its predecessor's).
    """
    cdf_N_V = logp_N_V.to(_softmax_dtype(logp_N_V)).exp().cumsum(dim=-1)
    target_N_1 = (uniforms_N.to(cdf_N_V.dtype) * cdf_N_V[:, -1])[:, None]
    tokens_N = torch.searchsorted(cdf_N_V, target_N_1, right=True).squeeze(-1)
    return tokens_N.clamp_max(logp_N_V.shape[-1] - 1)


def _chunk_logprobs(hidden_C_H: torch.Tensor, head_V_H: torch.Tensor, tau: float) -> torch.Tensor:
    """log softmax(h Wᵀ / τ) of one chunk in fp32 (fp64 for fp64 inputs; docs/method.md §2)."""
    return tempered_log_softmax(hidden_C_H @ head_V_H.T, tau)


def _softmax_dtype(tensor: torch.Tensor) -> torch.dtype:
    return torch.promote_types(tensor.dtype, torch.float32)


def _map_chunks(
    hidden_N_H: torch.Tensor, head_V_H: torch.Tensor, tau: float, rows: int, per_chunk, out_N
) -> torch.Tensor:
    """out[start:stop] ← per_chunk(log-probs of the chunk, start, stop), ``rows`` at a time."""
    for start in range(0, hidden_N_H.shape[0], rows):
        stop = start + rows
        out_N[start:stop] = per_chunk(
            _chunk_logprobs(hidden_N_H[start:stop], head_V_H, tau), start, stop
        )
    return out_N


def _gathered_logprobs(
    hidden_N_H: torch.Tensor, head_V_H: torch.Tensor, tokens_N: torch.Tensor, tau: float, rows: int
) -> torch.Tensor:
    """ℓ(y_n) for N rows, ``rows`` at a time (no graph)."""
    out_N = hidden_N_H.new_empty(hidden_N_H.shape[0], dtype=_softmax_dtype(hidden_N_H))
    return _map_chunks(
        hidden_N_H,
        head_V_H,
        tau,
        rows,
        lambda logp_C_V, start, stop: logp_C_V.gather(-1, tokens_N[start:stop, None])[:, 0],
        out_N,
    )


def _masked_rows(
    hidden_B_T_H: torch.Tensor,
    head_V_H: torch.Tensor,
    mask_B_T: torch.Tensor,
    vocab_size: int | None,
    chunks: ChunkSpec | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """(keep_B_T, hidden_N_H of the masked positions, head sliced to V, rows per chunk)."""
    vocab = head_V_H.shape[0] if vocab_size is None else vocab_size
    keep_B_T = mask_B_T.bool()
    hidden_N_H = hidden_B_T_H[keep_B_T]
    bound = (chunks or ChunkSpec()).rows(vocab, buffers=TOKEN_BUFFERS)
    return keep_B_T, hidden_N_H, head_V_H[:vocab], max(1, min(bound, hidden_N_H.shape[0]))


class _TokenLogprobs(torch.autograd.Function):
    """ℓ(y_n) for N rows, chunk by chunk; backward recomputes each chunk's softmax."""

    @staticmethod
    def forward(ctx, hidden_N_H, head_V_H, tokens_N, tau: float, rows: int):
        out_N = _gathered_logprobs(hidden_N_H, head_V_H, tokens_N, tau, rows)
        ctx.save_for_backward(hidden_N_H, head_V_H, tokens_N)
        ctx.tau, ctx.rows = tau, rows
        return out_N

    @staticmethod
    def backward(ctx, grad_N):
        hidden_N_H, head_V_H, tokens_N = ctx.saved_tensors
        dtype = _softmax_dtype(hidden_N_H)

        def logit_grad(start: int, stop: int, logp_C_V: torch.Tensor) -> torch.Tensor:
            # ∂L/∂z = (g / τ)(e_y − p), written over p
            grad_C_V = logp_C_V.exp_().neg_()
            grad_C_V.scatter_add_(-1, tokens_N[start:stop, None], torch.ones_like(grad_C_V[:, :1]))
            return grad_C_V.mul_((grad_N[start:stop].to(dtype) / ctx.tau)[:, None])

        return (*backprop_chunks(ctx, hidden_N_H, head_V_H, logit_grad), None, None, None)


def backprop_chunks(ctx, hidden_N_H: torch.Tensor, head_V_H: torch.Tensor, logit_grad) -> tuple:
    """(∂L/∂h, ∂L/∂W) of a chunked head pass, from each chunk's gradient w.r.t. its logits.

    For each chunk of ``ctx.rows`` rows the chunk's log-probs log softmax(h Wᵀ / ``ctx.tau``)
    are recomputed and ``logit_grad(start, stop, logp_C_V)`` returns ∂L/∂z (it may overwrite
    the log-probs); it is folded into ∂L/∂h = (∂L/∂z) W and ∂L/∂W += (∂L/∂z)ᵀ h at once.
    Inputs that need no gradient (``ctx.needs_input_grad``) get None.
    """
    need_hidden, need_head = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    grad_hidden_N_H = torch.empty_like(hidden_N_H) if need_hidden else None
    dtype = _softmax_dtype(hidden_N_H)
    grad_head_V_H = torch.zeros(head_V_H.shape, dtype=dtype, device=head_V_H.device)
    for start in range(0, hidden_N_H.shape[0], ctx.rows):
        stop = start + ctx.rows
        hidden_C_H = hidden_N_H[start:stop]
        grad_C_V = logit_grad(start, stop, _chunk_logprobs(hidden_C_H, head_V_H, ctx.tau))
        if need_hidden:
            grad_hidden_N_H[start:stop] = (grad_C_V.to(head_V_H.dtype) @ head_V_H).to(
                hidden_N_H.dtype
            )
        if need_head:
            grad_head_V_H.addmm_(grad_C_V.T, hidden_C_H.to(dtype))
    grad_head = grad_head_V_H.to(head_V_H.dtype) if need_head else None
    return grad_hidden_N_H, grad_head


def token_logprobs_from_hidden(
    hidden_B_T_H: torch.Tensor,
    head_V_H: torch.Tensor,
    tokens_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    temperature: float = 1.0,
    vocab_size: int | None = None,
    chunks: ChunkSpec | None = None,
) -> torch.Tensor:
    """ℓ_B_T = log softmax(h Wᵀ / τ)[y] (fp32) at masked positions, 0 elsewhere; differentiable.

    Only the first ``vocab_size`` rows of the head count (docs/method.md §1). Gradients flow to
    ``hidden_B_T_H`` and ``head_V_H`` when grad mode is on; logits exist for one chunk of rows
    at a time (``chunks``; the default 256 MB budget when None), never for the whole batch.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    keep_B_T, hidden_N_H, head, rows = _masked_rows(
        hidden_B_T_H, head_V_H, mask_B_T, vocab_size, chunks
    )
    tokens_N = tokens_B_T[keep_B_T].long()
    if bool((tokens_N >= head.shape[0]).any()) or bool((tokens_N < 0).any()):
        raise ValueError(
            f"a masked-in token id is outside the vocabulary of {head.shape[0]} tokens"
        )
    if torch.is_grad_enabled() and (hidden_N_H.requires_grad or head.requires_grad):
        logp_N = _TokenLogprobs.apply(hidden_N_H, head, tokens_N, temperature, rows)
    else:
        with torch.no_grad():
            logp_N = _gathered_logprobs(hidden_N_H, head, tokens_N, temperature, rows)
    return torch.zeros_like(keep_B_T, dtype=logp_N.dtype).masked_scatter(keep_B_T, logp_N)


@torch.no_grad()
def token_logprobs_at_temperatures(
    hidden_B_T_H: torch.Tensor,
    head_V_H: torch.Tensor,
    tokens_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
    temperatures: tuple[float, ...],
    *,
    vocab_size: int | None = None,
    chunks: ChunkSpec | None = None,
) -> list[torch.Tensor]:
    """:func:`token_logprobs_from_hidden` at several temperatures from one head pass, no graph.

    log softmax(z / τ) = log softmax(ℓ₁ / τ) with ℓ₁ = log softmax(z) (a per-row shift), so one
    product h Wᵀ per chunk serves every τ (diagnostics read the loss temperatures and 1.0).
    """
    keep_B_T, hidden_N_H, head, rows = _masked_rows(
        hidden_B_T_H, head_V_H, mask_B_T, vocab_size, chunks
    )
    tokens_N_1 = tokens_B_T[keep_B_T].long()[:, None]

    def per_chunk(logp_C_V: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        index_C_1 = tokens_N_1[start:stop]
        at_tau = {1.0: logp_C_V}  # ℓ₁ itself; each other τ is one more log_softmax
        for tau in temperatures:
            if tau not in at_tau:
                at_tau[tau] = tempered_log_softmax(logp_C_V, tau)
        return torch.cat([at_tau[tau].gather(-1, index_C_1) for tau in temperatures], dim=-1)

    out_N_K = hidden_N_H.new_empty(
        (hidden_N_H.shape[0], len(temperatures)), dtype=_softmax_dtype(hidden_N_H)
    )
    out_N_K = _map_chunks(hidden_N_H, head, 1.0, rows, per_chunk, out_N_K)
    zeros_B_T = torch.zeros_like(keep_B_T, dtype=out_N_K.dtype)
    return [zeros_B_T.masked_scatter(keep_B_T, out_N) for out_N in out_N_K.T.contiguous()]


@torch.no_grad()
def draw_from_hidden(
    hidden_B_T_H: torch.Tensor,
    head_V_H: torch.Tensor,
    mask_B_T: torch.Tensor,
    uniforms_B_T: torch.Tensor,
    *,
    temperature: float = 1.0,
    vocab_size: int | None = None,
    chunks: ChunkSpec | None = None,
) -> torch.Tensor:
    """y_B_T ~ softmax(h Wᵀ / τ) at masked positions (0 elsewhere), by :func:`inverse_cdf_draw`.

    ``uniforms_B_T`` holds one U[0, 1) value per position; the same uniforms give the same
    tokens as the plain estimators' draws from the logits.
    """
    keep_B_T, hidden_N_H, head, rows = _masked_rows(
        hidden_B_T_H, head_V_H, mask_B_T, vocab_size, chunks
    )
    uniforms_N = uniforms_B_T[keep_B_T]
    tokens_N = _map_chunks(
        hidden_N_H,
        head,
        temperature,
        rows,
        lambda logp_C_V, start, stop: inverse_cdf_draw(logp_C_V, uniforms_N[start:stop]),
        hidden_N_H.new_empty(hidden_N_H.shape[0], dtype=torch.long),
    )
    return torch.zeros_like(keep_B_T, dtype=torch.long).masked_scatter(keep_B_T, tokens_N)
