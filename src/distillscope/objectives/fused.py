"""Fused full-vocabulary divergences: hidden states + LM heads → loss and closed-form gradients.

The same objectives as :mod:`.divergences` (docs/method.md §1–§2) computed the way
docs/method.md §2 "Memory" asks: from the final hidden states and the LM-head weights, a chunk
of token rows at a time, so the [tokens × V] logits of the two models never exist at once.
No autograd graph is built per chunk (as the tests' reference implementation,
tests/objectives/chunked_reference.py, does): the gradient w.r.t. the chunk's student logits
is written in closed form, folded at once into ∂L/∂h = G W and ∂L/∂W += Gᵀ h, and
dropped (the pattern of Liger-Kernel's fused linear losses). ``backward`` only scales those two
by the incoming gradient. One pass over the chunk does loss, metrics and gradient; the chunk's
buffers are allocated once and reused.

Closed forms. With a = z_S / τ_S, ℓ = log_softmax, p = exp(ℓ), each
:class:`~.divergences.Divergence` declares its own ∂D/∂a beside its value (∂F/∂a = p_S − p_T,
∂R/∂a = p_S ⊙ (ℓ_S − ℓ_T − R), [P] Eq. 4–5 at τ_S = 1; JSD and the mixture likewise); this
module computes what every closed form reads once per chunk (ℓ, p of both models, F and R per
row, :class:`~.divergences.FusedChunk`), calls the declaration, and applies ∂D/∂z_S =
(1/τ_S) ∂D/∂a. The teacher gets no gradient. Each token's reduction weight w_n, 1/τ_S and the
declaration's scale (1 − β for JSD) scale the row *after* the matmuls, on the (rows × H) side,
never on the (rows × V) buffers.

Memory. Per chunk of C rows: four (C × V) buffers in fp32 (fp64 for fp64 inputs) —
student and teacher log-probs, student and teacher probs, the gradient written into one of
them — five when the declaration needs a spare (JSD), plus one (C × V) product in the input
dtype when the inputs are bf16/fp16. :class:`~.options.ChunkSpec` picks the largest C whose
buffers fit its ``memory_budget_mb`` (or takes its ``chunk_size``), and the N rows are split
into ⌈N / C⌉ equal chunks. On top of that: ∂L/∂W (V_s × H, the size of the head, accumulated
in fp32) and ∂L/∂h (N × H).

The default budget, :data:`~.options.DEFAULT_MEMORY_BUDGET_MB` = 256 MB, allows 500 rows at
V = 32,000 and 124 at V = 128,256. It trades time for memory at large V: each chunk re-reads the
heads in three matmuls, and on a CPU a matmul with ~128 rows runs ~1.5× slower per row than one
with ≥ 512 (bench/bench_objectives.py shows both budgets); raise it where memory allows.

Token log-probs on the way. With ``tokens_B_T`` the same pass also gathers each model's
log-prob of the completion token, ℓ(y_n), at its loss temperature τ and at 1.0 (the
diagnostics: k1/k2/k3, likelihoods), so they cost no head pass of their own: ℓ at τ is read
from the chunk's log-softmax, and at 1.0 it is log softmax(τ ℓ)[y] = τ ℓ(y) − logsumexp(τ ℓ)
(one more pass over the chunk's buffer, only when τ ≠ 1).

No bias terms (LM heads of Llama/Qwen have none). Metric keys and values as in
:mod:`.divergences`, so metrics never depend on the path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from distillscope.objectives.divergences import (
    FORWARD_KL,
    Divergence,
    FusedChunk,
    check_options,
    check_shape,
    objective_metrics,
    token_weights,
)
from distillscope.objectives.options import ChunkSpec, DivergenceOptions


@dataclass(frozen=True)
class _Plan:
    """What one fused call computes: the divergence, its options and weights, rows per chunk,
    V, and the tokens ``[N]`` whose log-probs it gathers on the way (None: none)."""

    divergence: Divergence
    options: DivergenceOptions
    weights: dict
    rows: int
    vocab: int
    tokens_N: torch.Tensor | None = None


@dataclass(frozen=True)
class TokenLogprobs:
    """Log-probs of the completion tokens ``[B, T]`` (fp32, 0 where masked), gathered by
    :func:`fused_divergence`: each model's at its loss temperature and at 1.0."""

    student_B_T: torch.Tensor
    teacher_B_T: torch.Tensor
    student_t1_B_T: torch.Tensor
    teacher_t1_B_T: torch.Tensor


def _logits_into(
    hidden_C_H: torch.Tensor, head_V_H: torch.Tensor, temperature: float, out_C_V: torch.Tensor
) -> None:
    """out ← h Wᵀ / τ in out's (fp32 or wider) dtype; ``out`` may be a row-strided view."""
    if hidden_C_H.dtype == out_C_V.dtype:  # the matmul writes into the buffer, 1/τ folded in
        torch.addmm(out_C_V, hidden_C_H, head_V_H.T, beta=0, alpha=1 / temperature, out=out_C_V)
    else:  # bf16/fp16 product, then one fp32 copy (softmax always in fp32, docs/method.md §2)
        out_C_V.copy_(hidden_C_H @ head_V_H.T)
        if temperature != 1.0:
            out_C_V.mul_(1 / temperature)


def _chunk_stats(
    logp_C_2_V: torch.Tensor, p_C_2_V: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(F_C, R_C, stats_4_C) of one chunk: forward and reverse KL per row and the four metric
    stats (F, R, H(p_T), H(p_S)), from ``logp_C_2_V`` = (ℓ_S, ℓ_T) and ``p_C_2_V`` = (p_S, p_T).
    """
    # One batched (2 × V)(V × 2) product per row gives the four dots behind every stat:
    # dots[c, i, j] = Σ_v p_i ℓ_j with i, j ∈ (S, T). Four separate row dots cost ~4× more.
    dots_C_2_2 = torch.bmm(p_C_2_V, logp_C_2_V.transpose(1, 2))
    student_self, student_cross = dots_C_2_2[:, 0, 0], dots_C_2_2[:, 0, 1]  # Σ p_S ℓ_S, Σ p_S ℓ_T
    teacher_cross, teacher_self = dots_C_2_2[:, 1, 0], dots_C_2_2[:, 1, 1]  # Σ p_T ℓ_S, Σ p_T ℓ_T
    forward_C = teacher_self - teacher_cross
    reverse_C = student_self - student_cross
    return forward_C, reverse_C, torch.stack([forward_C, reverse_C, -teacher_self, -student_self])


def _gather_tokens(
    logp_C_2_V: torch.Tensor, spare_C_V: torch.Tensor, tokens_C: torch.Tensor, taus: tuple
) -> torch.Tensor:
    """ℓ(y) of both models at their loss temperatures and at 1.0: ``[4, C]`` (S, T, S₁, T₁).

    ``spare_C_V`` is overwritten (a buffer not yet in use); see the module docstring.
    """
    rows = logp_C_2_V.shape[0]
    index_C_2_1 = tokens_C.view(rows, 1, 1).expand(rows, 2, 1)
    at_tau_C_2 = logp_C_2_V.gather(-1, index_C_2_1).squeeze(-1)
    at_one = []
    for i, tau in enumerate(taus):
        if tau == 1.0:
            at_one.append(at_tau_C_2[:, i])
            continue
        scaled_C_V = torch.mul(logp_C_2_V[:, i], tau, out=spare_C_V)
        max_C = scaled_C_V.amax(dim=-1)
        log_z_C = scaled_C_V.sub_(max_C[:, None]).exp_().sum(dim=-1).log_().add_(max_C)
        at_one.append(tau * at_tau_C_2[:, i] - log_z_C)
    return torch.stack([at_tau_C_2[:, 0], at_tau_C_2[:, 1], *at_one])


def _buffer_count(divergence: Divergence, weights: dict[str, float]) -> int:
    """(rows × V) buffers one chunk needs: ℓ_S, ℓ_T, p_S, p_T, and the declaration's spare."""
    return 5 if divergence.needs_spare(**weights) else 4


def _fold_gradient(
    grad_C_V: torch.Tensor,
    coef_C_1: torch.Tensor,
    hidden_C_H: torch.Tensor,
    head_V_H: torch.Tensor,
    grad_hidden_C_H: torch.Tensor | None,
    grad_head_V_H: torch.Tensor | None,
    *,
    first: bool,
) -> None:
    """With G = coef ⊙ grad (∂L/∂z_S of the chunk): ∂L/∂h ← G W, ∂L/∂W += Gᵀ h, in place.

    ``coef_C_1`` scales the (C × H) results, never the (C × V) gradient; the first chunk
    overwrites ∂L/∂W instead of adding to zeros.
    """
    if grad_hidden_C_H is not None:
        if grad_hidden_C_H.dtype == grad_C_V.dtype:
            torch.mm(grad_C_V, head_V_H, out=grad_hidden_C_H)
        else:  # bf16/fp16: in the head's dtype, as the plain path's backward
            grad_hidden_C_H.copy_(grad_C_V.to(head_V_H.dtype) @ head_V_H)
        grad_hidden_C_H.mul_(coef_C_1.to(grad_hidden_C_H.dtype))
    if grad_head_V_H is not None:  # fp32 (fp64) accumulator whatever the head's dtype
        scaled_hidden_C_H = hidden_C_H.to(grad_head_V_H.dtype) * coef_C_1
        beta = 0 if first else 1
        torch.addmm(grad_head_V_H, grad_C_V.T, scaled_hidden_C_H, beta=beta, out=grad_head_V_H)


def _head_grad_buffer(
    head_V_H: torch.Tensor, vocab: int, rows: int, dtype: torch.dtype, needed: bool
) -> torch.Tensor | None:
    """∂L/∂W's buffer (fp32 or wider, the head's full width): the rows past ``vocab`` stay 0,
    the rest is overwritten by the first chunk (all 0 when there are no rows); None when the
    head needs no gradient."""
    if not needed:
        return None
    grad_V_H = torch.empty(head_V_H.shape, dtype=dtype, device=head_V_H.device)
    grad_V_H[vocab:].zero_()
    if rows == 0:
        grad_V_H.zero_()
    return grad_V_H


class _FusedDivergence(torch.autograd.Function):
    """Σ_n w_n D(π_S(·|n), π_T(·|n)) over N rows, chunk by chunk, with closed-form gradients."""

    @staticmethod
    def forward(
        ctx,
        student_hidden_N_H: torch.Tensor,
        student_head_V_H: torch.Tensor,
        teacher_hidden_N_H: torch.Tensor,
        teacher_head_V_H: torch.Tensor,
        weights_N: torch.Tensor,
        plan: _Plan,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        need_hidden_grad, need_head_grad = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        rows, vocab = student_hidden_N_H.shape[0], plan.vocab
        tau_s, tau_t = plan.options.student_temperature, plan.options.teacher_temperature
        device = student_hidden_N_H.device
        dtype = torch.promote_types(student_hidden_N_H.dtype, torch.float32)  # softmax dtype
        head_V_H = student_head_V_H[:vocab]  # row slices of the heads: views, no copy
        teacher_head_V_H = teacher_head_V_H[:vocab]

        # ∂L/∂h: every row is written by its chunk. ∂L/∂W: full width (rows past vocab_size
        # stay 0), accumulated in fp32; the first chunk overwrites instead of adding to zeros.
        grad_hidden_N_H = torch.empty_like(student_hidden_N_H) if need_hidden_grad else None
        grad_head_V_H = _head_grad_buffer(student_head_V_H, vocab, rows, dtype, need_head_grad)
        # Equal chunks, as few as the bound allows: no small trailing chunk (a matmul with few
        # rows re-reads the whole head for little work), and the buffers shrink to fit.
        chunks = max(1, math.ceil(rows / plan.rows))
        chunk = max(1, math.ceil(rows / chunks))
        # Student and teacher side by side, (C, 2, V): one log_softmax, one exp and one batched
        # product serve both models (see _chunk_stats).
        logp_C_2_V = torch.empty((chunk, 2, vocab), dtype=dtype, device=device)
        p_C_2_V = torch.empty_like(logp_C_2_V)
        spare_C_V = (
            torch.empty((chunk, vocab), dtype=dtype, device=device)
            if _buffer_count(plan.divergence, plan.weights) > 4
            else None
        )
        loss_sum = torch.zeros((), dtype=dtype, device=device)
        stat_sums_4 = torch.zeros(4, dtype=dtype, device=device)
        tokens_N = plan.tokens_N
        token_logp_4_N = torch.empty(
            (4, 0 if tokens_N is None else rows), dtype=dtype, device=device
        )
        for start in range(0, rows, chunk):
            stop = min(start + chunk, rows)
            hidden_C_H = student_hidden_N_H[start:stop]
            logp, p = logp_C_2_V[: stop - start], p_C_2_V[: stop - start]
            spare = None if spare_C_V is None else spare_C_V[: stop - start]
            _logits_into(hidden_C_H, head_V_H, tau_s, logp[:, 0])
            _logits_into(teacher_hidden_N_H[start:stop], teacher_head_V_H, tau_t, logp[:, 1])
            logp_2C_V = logp.view(-1, vocab)  # (C·2, V): row c·2 + i is model i of token c
            torch.log_softmax(logp_2C_V, dim=-1, out=logp_2C_V)
            if tokens_N is not None:  # before the buffers are reused: p is free until the exp
                token_logp_4_N[:, start:stop] = _gather_tokens(
                    logp, p[:, 0], tokens_N[start:stop], (tau_s, tau_t)
                )
            torch.exp(logp, out=p)
            forward_C, reverse_C, stats_4_C = _chunk_stats(logp, p)
            divergence_C, grad_C_V, scale = plan.divergence.gradient(
                FusedChunk(logp[:, 0], logp[:, 1], p[:, 0], p[:, 1], forward_C, reverse_C, spare),
                **plan.weights,
            )
            weights_C = weights_N[start:stop].to(dtype)
            loss_sum += (divergence_C * weights_C).sum()
            stat_sums_4 += stats_4_C.sum(dim=-1)
            # ∂L/∂z_S = (w_n · scale / τ_S) ⊙ grad_C_V; the row factor goes on the (C × H) side.
            _fold_gradient(
                grad_C_V,
                (weights_C * (scale / tau_s))[:, None],
                hidden_C_H,
                head_V_H,
                None if grad_hidden_N_H is None else grad_hidden_N_H[start:stop],
                None if grad_head_V_H is None else grad_head_V_H[:vocab],
                first=start == 0,
            )
        if grad_head_V_H is not None:
            grad_head_V_H = grad_head_V_H.to(student_head_V_H.dtype)
        ctx.save_for_backward(grad_hidden_N_H, grad_head_V_H)
        ctx.mark_non_differentiable(stat_sums_4, token_logp_4_N)
        return loss_sum, stat_sums_4, token_logp_4_N

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor, _grad_stats: torch.Tensor, _grad_tokens):
        grad_hidden_N_H, grad_head_V_H = ctx.saved_tensors
        # Skip two (size-of-input) multiplications for the usual loss.backward() (a host sync
        # on GPU, as in Liger; cheap next to the forward's matmuls).
        if not torch.equal(grad_loss, torch.ones_like(grad_loss)):
            if grad_hidden_N_H is not None:
                grad_hidden_N_H = grad_hidden_N_H * grad_loss.to(grad_hidden_N_H.dtype)
            if grad_head_V_H is not None:
                grad_head_V_H = grad_head_V_H * grad_loss.to(grad_head_V_H.dtype)
        return grad_hidden_N_H, grad_head_V_H, None, None, None, None


def check_hidden_inputs(
    student_hidden_B_T_H: torch.Tensor,
    student_head_V_H: torch.Tensor,
    teacher_hidden_B_T_H: torch.Tensor,
    teacher_head_V_H: torch.Tensor,
    mask_B_T: torch.Tensor,
    vocab_size: int | None,
) -> int:
    """Validate shapes; return the shared vocabulary size (docs/method.md §1, last bullet)."""
    if student_hidden_B_T_H.shape[:-1] != teacher_hidden_B_T_H.shape[:-1]:
        raise ValueError(
            f"student hidden {tuple(student_hidden_B_T_H.shape)} and teacher hidden "
            f"{tuple(teacher_hidden_B_T_H.shape)} must cover the same (B, T) positions"
        )
    for who, hidden, head in (
        ("student", student_hidden_B_T_H, student_head_V_H),
        ("teacher", teacher_hidden_B_T_H, teacher_head_V_H),
    ):
        if head.ndim != 2 or head.shape[1] != hidden.shape[-1]:
            raise ValueError(
                f"{who} head weight {tuple(head.shape)} must be (V, H) with H = "
                f"{hidden.shape[-1]}, the width of the {who} hidden states"
            )
    check_shape("mask_B_T", mask_B_T, student_hidden_B_T_H.shape[:-1])
    widths = (student_head_V_H.shape[0], teacher_head_V_H.shape[0])
    if vocab_size is None:
        if widths[0] != widths[1]:
            raise ValueError(
                f"student and teacher head widths differ ({widths[0]} vs {widths[1]}); "
                f"pass vocab_size=<tokenizer length> to slice both"
            )
        return widths[0]
    if not 1 <= vocab_size <= min(widths):
        raise ValueError(
            f"vocab_size={vocab_size} must be between 1 and the smaller head width "
            f"(student {widths[0]}, teacher {widths[1]})"
        )
    return vocab_size


def fused_divergence(
    student_hidden_B_T_H: torch.Tensor,
    student_head_V_H: torch.Tensor,
    teacher_hidden_B_T_H: torch.Tensor,
    teacher_head_V_H: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    divergence: Divergence = FORWARD_KL,
    options: DivergenceOptions | None = None,
    chunks: ChunkSpec | None = None,
    vocab_size: int | None = None,
    tokens_B_T: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float], TokenLogprobs | None]:
    """A :class:`~.divergences.Divergence` from hidden states, fused and chunked by memory.

    z_S = h_S W_Sᵀ, z_T = h_T W_Tᵀ at the masked positions, then the plain objective's loss
    Σ_n w_n D(softmax(z_S,n / τ_S), softmax(z_T,n / τ_T)) with the reduction weights w of
    ``token_weights`` (docs/method.md §1–§2, [P] Eq. 1); the gradient w.r.t. the student logits
    is the declaration's closed form (``divergence.gradient``). Gradients flow to
    ``student_hidden_B_T_H`` and ``student_head_V_H``; the teacher is detached.

    Args:
        student_hidden_B_T_H: student final hidden states (after the last norm).
        student_head_V_H: student LM-head weight (``lm_head.weight``, shape (V_s, H)).
        teacher_hidden_B_T_H: teacher final hidden states; its width H_t may differ.
        teacher_head_V_H: teacher LM-head weight, (V_t, H_t).
        mask_B_T: True at the completion tokens that count; only those rows are projected.
        divergence: which D (:data:`~.divergences.DIVERGENCES`; forward KL by default).
        options: temperatures, reduction, weights (:class:`~.options.DivergenceOptions`; its
            defaults when None).
        chunks: rows per chunk, from a memory budget on the chunk's transient (rows × V)
            buffers or an explicit ``chunk_size`` (:class:`~.options.ChunkSpec`; its default
            256 MB budget when None). Either bound splits the N masked rows into ⌈N / bound⌉
            equal chunks.
        vocab_size: use only the first ``vocab_size`` rows of both heads (docs/method.md §1);
            without it, heads of different widths raise ValueError.
        tokens_B_T: the completion tokens; when given, the same pass gathers both models'
            log-probs of them (:class:`TokenLogprobs`, module docstring).

    Returns:
        ``(loss, metrics, token_logprobs)``: the loss and metrics exactly as
        :func:`~.divergences.divergence_loss` returns them, and the :class:`TokenLogprobs` the
        pass gathered when ``tokens_B_T`` is given (None otherwise): one shape whatever the
        arguments.
    """
    o = options or DivergenceOptions()
    check_options(o.reduction, o.student_temperature, o.teacher_temperature)
    weights = divergence.weights_of(o)
    vocab = check_hidden_inputs(
        student_hidden_B_T_H,
        student_head_V_H,
        teacher_hidden_B_T_H,
        teacher_head_V_H,
        mask_B_T,
        vocab_size,
    )
    keep_B_T = mask_B_T.bool()
    dtype = torch.promote_types(student_hidden_B_T_H.dtype, torch.float32)  # fp32, fp64 for fp64
    weights_N = token_weights(mask_B_T, o.reduction, dtype)[keep_B_T]  # (N,) loss weights
    rows = (chunks or ChunkSpec()).rows(
        vocab, buffers=_buffer_count(divergence, weights), bytes_per_value=dtype.itemsize
    )
    tokens_N = None if tokens_B_T is None else tokens_B_T[keep_B_T].long()
    loss, metrics, token_logp_4_N = apply_over_rows(
        _FusedDivergence,
        student_hidden_B_T_H,
        student_head_V_H,
        teacher_hidden_B_T_H,
        teacher_head_V_H,
        keep_B_T,
        weights_N,
        _Plan(divergence, o, weights, rows, vocab, tokens_N),
    )
    if tokens_N is None:
        return loss, metrics, None
    zeros_B_T = torch.zeros_like(keep_B_T, dtype=token_logp_4_N.dtype)
    per_model = [zeros_B_T.masked_scatter(keep_B_T, row_N) for row_N in token_logp_4_N]
    return loss, metrics, TokenLogprobs(*per_model)


def apply_over_rows(
    function: type[torch.autograd.Function],
    student_hidden_B_T_H: torch.Tensor,
    student_head_V_H: torch.Tensor,
    teacher_hidden_B_T_H: torch.Tensor,
    teacher_head_V_H: torch.Tensor,
    keep_B_T: torch.Tensor,
    weights_N: torch.Tensor,
    plan: object,
) -> tuple:
    """Run a hidden-state divergence ``function`` on the kept rows; ``(loss, metrics, *rest)``.

    ``function.apply(h_S (N, H), W_S, h_T (N, H_t), W_T, weights_N, plan)`` returns the
    weighted loss sum and the four metric sums (:data:`~.divergences.STAT_KEYS`), then whatever
    else it computes (``rest``: the fused form's gathered token log-probs); the fused form and
    the tests' reference (autograd per chunk) share this wrapper. The teacher is detached.
    """
    if not torch.is_grad_enabled():
        # Under no_grad, Function.forward still sees needs_input_grad=True; detaching the
        # inputs skips the gradient work (evaluation, metrics-only calls).
        student_hidden_B_T_H = student_hidden_B_T_H.detach()
        student_head_V_H = student_head_V_H.detach()
    loss, stat_sums_4, *rest = function.apply(
        student_hidden_B_T_H[keep_B_T],  # (N, H): only completion tokens are ever projected
        student_head_V_H,
        teacher_hidden_B_T_H.detach()[keep_B_T],
        teacher_head_V_H.detach(),
        weights_N,
        plan,
    )
    tokens = keep_B_T.sum().float()
    metrics = objective_metrics(loss, stat_sums_4 / tokens.clamp_min(1.0), tokens)
    return loss, metrics, *rest
