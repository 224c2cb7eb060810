"""Fused objectives (hidden states + LM head, closed-form gradients) against independent references.

References: the plain objectives of ``divergences`` on materialised logits with autograd (float32,
values, gradients and metrics), and a float64 re-derivation written here from the definitions in
docs/method.md §2 (values and gradients to ~1e-12).
"""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch
from tests.numerics import approx_tols, chain_tols, log_softmax_tol
from torch.utils._python_dispatch import TorchDispatchMode

from distillscope.objectives import (
    DEFAULT_MEMORY_BUDGET_MB,
    ChunkSpec,
    DivergenceOptions,
    chunk_rows,
)
from distillscope.objectives.divergences import (
    DIVERGENCES,
    JSD,
    MIXTURE,
    REVERSE_KL,
)
from distillscope.objectives.fused import fused_divergence

from .chunked_reference import chunked_divergence
from .shorthand import options_of, plain_loss

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

B, T, H, H_TEACHER = 3, 7, 8, 12
V_STUDENT, V_TEACHER, VOCAB = 33, 37, 29  # padded head widths, both wider than the tokenizer
PLAIN = {name: partial(plain_loss, divergence) for name, divergence in DIVERGENCES.items()}
EXTRA = {"forward_kl": {}, "reverse_kl": {}, "jsd": {"beta": 0.3}, "mixture": {"alpha": 0.7}}
TEMPERATURES = [(1.0, 1.0), (1.0, 0.5), (0.7, 2.0)]  # (student, teacher)
#: The sums between fp32 inputs and a loss or gradient: a head's matmul (H_TEACHER ≥ H terms),
#: the log-partition (V_TEACHER ≥ VOCAB), the token mean and a head gradient's sum over tokens.
CHAIN = (H_TEACHER, V_TEACHER, B * T)
REDUCTIONS = ["seq_mean", "token_mean", "sum"]


def _inputs(seed: int, dtype: torch.dtype = torch.float32):
    generator = torch.Generator().manual_seed(seed)
    student_hidden = torch.randn(B, T, H, generator=generator, dtype=torch.float64)
    student_head = 0.7 * torch.randn(V_STUDENT, H, generator=generator, dtype=torch.float64)
    teacher_hidden = torch.randn(B, T, H_TEACHER, generator=generator, dtype=torch.float64)
    teacher_head = 0.7 * torch.randn(V_TEACHER, H_TEACHER, generator=generator, dtype=torch.float64)
    mask = torch.rand(B, T, generator=generator) > 0.35
    mask[1] = False  # one empty sequence
    mask[0, 0] = mask[2, 1] = True
    tensors = (student_hidden, student_head, teacher_hidden, teacher_head)
    return (*(t.to(dtype) for t in tensors), mask)


def _fused(
    hidden,
    head,
    teacher_hidden,
    teacher_head,
    mask,
    divergence,
    chunk_size=None,
    vocab_size=None,
    **kw,
):
    """Loss, metrics and (hidden, head) gradients of the fused objective; ``kw`` are options."""
    h, w = hidden.clone().requires_grad_(), head.clone().requires_grad_()
    loss, metrics, _ = fused_divergence(
        h,
        w,
        teacher_hidden,
        teacher_head,
        mask,
        divergence=DIVERGENCES[divergence],
        options=options_of(**EXTRA[divergence], **kw),
        chunks=ChunkSpec(chunk_size=chunk_size),
        vocab_size=vocab_size,
    )
    loss.backward()
    return loss.detach(), metrics, h.grad, w.grad


def _plain(hidden, head, teacher_hidden, teacher_head, mask, divergence, vocab, **kw):
    """The same through ``divergences`` on materialised logits, autograd."""
    h, w = hidden.clone().requires_grad_(), head.clone().requires_grad_()
    loss, metrics = PLAIN[divergence](
        h @ w.T, teacher_hidden @ teacher_head.T, mask, vocab_size=vocab, **EXTRA[divergence], **kw
    )
    loss.backward()
    return loss.detach(), metrics, h.grad, w.grad


# ---------------------------------------------------------------------------------------------
# An independent float64 reference, from the definitions (docs/method.md §1–§2, GKD Eq. 1)
# ---------------------------------------------------------------------------------------------


def _reference_per_token(logits_s, logits_t, divergence, tau_s, tau_t, beta=0.3, alpha=0.7):
    """D per position from the textbook formulas, float64, differentiable in ``logits_s``."""
    log_s = torch.log_softmax(logits_s / tau_s, dim=-1)
    log_t = torch.log_softmax(logits_t / tau_t, dim=-1)
    p_s, p_t = log_s.exp(), log_t.exp()
    fkl = (p_t * (log_t - log_s)).sum(-1)
    rkl = (p_s * (log_s - log_t)).sum(-1)
    if divergence == "forward_kl":
        return fkl
    if divergence == "reverse_kl":
        return rkl
    if divergence == "mixture":
        return alpha * fkl + (1 - alpha) * rkl
    log_m = torch.log(beta * p_t + (1 - beta) * p_s)
    return beta * (p_t * (log_t - log_m)).sum(-1) + (1 - beta) * (p_s * (log_s - log_m)).sum(-1)


def _reference_reduce(values_B_T, mask_B_T, reduction):
    """[P] Eq. 1 per-sequence mean then mean over non-empty sequences; token mean; sum."""
    kept = values_B_T * mask_B_T
    if reduction == "sum":
        return kept.sum()
    if reduction == "token_mean":
        return kept.sum() / max(int(mask_B_T.sum()), 1)
    rows = [kept[b].sum() / mask_B_T[b].sum() for b in range(B) if mask_B_T[b].any()]
    return torch.stack(rows).mean() if rows else kept.sum()


# ---------------------------------------------------------------------------------------------
# Closed-form gradients w.r.t. the student logits
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("divergence", list(PLAIN))
@pytest.mark.parametrize("temperatures", TEMPERATURES)
def test_closed_form_logit_gradient_matches_autograd(divergence, temperatures) -> None:
    # With an identity head, z_S = h Iᵀ = h: ∂L/∂h *is* the closed-form ∂L/∂z_S.
    tau_s, tau_t = temperatures
    generator = torch.Generator().manual_seed(11)
    logits_s = 3 * torch.randn(2, 5, VOCAB, generator=generator, dtype=torch.float64)
    logits_t = 3 * torch.randn(2, 5, VOCAB, generator=generator, dtype=torch.float64)
    mask = torch.ones(2, 5, dtype=torch.bool)
    eye = torch.eye(VOCAB, dtype=torch.float64)
    loss, _, grad_logits, _ = _fused(
        logits_s,
        eye,
        logits_t,
        eye,
        mask,
        divergence,
        chunk_size=3,
        reduction="sum",
        student_temperature=tau_s,
        teacher_temperature=tau_t,
    )
    z = logits_s.clone().requires_grad_()
    expected = _reference_per_token(z, logits_t, divergence, tau_s, tau_t).sum()
    expected.backward()
    torch.testing.assert_close(loss, expected.detach(), atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(grad_logits, z.grad, atol=1e-12, rtol=1e-10)


def test_logit_gradients_are_the_method_formulas_at_temperature_one() -> None:
    # docs/method.md §2 / [P] Eq. 4–5: ∂F/∂z_S = π_S − π_T, ∂R/∂z_S = π_S ⊙ (log π_S − log π_T − R).
    generator = torch.Generator().manual_seed(12)
    logits_s = 2 * torch.randn(1, 4, VOCAB, generator=generator, dtype=torch.float64)
    logits_t = 2 * torch.randn(1, 4, VOCAB, generator=generator, dtype=torch.float64)
    mask = torch.ones(1, 4, dtype=torch.bool)
    eye = torch.eye(VOCAB, dtype=torch.float64)
    log_s, log_t = logits_s.log_softmax(-1), logits_t.log_softmax(-1)
    reverse = (log_s.exp() * (log_s - log_t)).sum(-1, keepdim=True)
    want = {
        "forward_kl": log_s.exp() - log_t.exp(),
        "reverse_kl": log_s.exp() * (log_s - log_t - reverse),
    }
    for divergence, expected in want.items():
        grad = _fused(logits_s, eye, logits_t, eye, mask, divergence, reduction="sum")[2]
        torch.testing.assert_close(grad, expected, atol=1e-14, rtol=1e-12)
        assert grad.abs().max() <= 1.0 or divergence == "reverse_kl"  # F's coordinates in [−1, 1]


# ---------------------------------------------------------------------------------------------
# Fused == plain, values, gradients and metrics
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("divergence", list(PLAIN))
@pytest.mark.parametrize("temperatures", TEMPERATURES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_fused_equals_plain(divergence, temperatures, reduction) -> None:
    # Masked rows, an empty sequence, 4 ∤ N (uneven last chunk), V_s ≠ V_t > vocab_size.
    inputs = _inputs(0)
    kw = {
        "student_temperature": temperatures[0],
        "teacher_temperature": temperatures[1],
        "reduction": reduction,
    }
    assert int(inputs[-1].sum()) % 4
    fused = _fused(*inputs, divergence, chunk_size=4, vocab_size=VOCAB, **kw)
    plain = _plain(*inputs, divergence, VOCAB, **kw)
    # the scale of a temperature-1/τ quantity is that of its largest scaled logit
    tau = min(temperatures)
    torch.testing.assert_close(fused[0], plain[0], **chain_tols(plain[0] / tau, *CHAIN))
    torch.testing.assert_close(fused[2], plain[2], **chain_tols(plain[2], *CHAIN))  # ∂/∂hidden
    torch.testing.assert_close(fused[3], plain[3], **chain_tols(plain[3], *CHAIN))  # ∂/∂head
    assert fused[1].keys() == plain[1].keys()
    for key, value in plain[1].items():
        assert fused[1][key] == pytest.approx(value, **approx_tols(value / tau, *CHAIN)), key
    assert torch.equal(fused[3][VOCAB:], torch.zeros(V_STUDENT - VOCAB, H))  # padding rows


@pytest.mark.parametrize("divergence", list(PLAIN))
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_fused_equals_the_chunked_reference(divergence, reduction) -> None:
    # Closed-form gradients against autograd on each chunk (tests/objectives/chunked_reference.py)
    inputs = _inputs(10)
    kw = {"student_temperature": 0.7, "teacher_temperature": 2.0, "reduction": reduction}
    fused = _fused(*inputs, divergence, chunk_size=4, vocab_size=VOCAB, **kw)
    h, w = inputs[0].clone().requires_grad_(), inputs[1].clone().requires_grad_()
    loss, metrics = chunked_divergence(
        h,
        w,
        *inputs[2:],
        divergence=DIVERGENCES[divergence],
        chunk_size=4,
        vocab_size=VOCAB,
        **EXTRA[divergence],
        **kw,
    )
    loss.backward()
    scaled = loss.detach() / 0.7  # the largest scaled logit is the student's, at τ = 0.7
    torch.testing.assert_close(fused[0], loss.detach(), **chain_tols(scaled, *CHAIN))
    torch.testing.assert_close(fused[2], h.grad, **chain_tols(h.grad, *CHAIN))
    torch.testing.assert_close(fused[3], w.grad, **chain_tols(w.grad, *CHAIN))
    assert fused[1].keys() == metrics.keys()
    for key, value in metrics.items():
        assert fused[1][key] == pytest.approx(value, **approx_tols(value / 0.7, *CHAIN)), key


@pytest.mark.parametrize("divergence", list(PLAIN))
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_float64_equals_independent_reference(divergence, reduction) -> None:
    hidden, head, teacher_hidden, teacher_head, mask = _inputs(1, torch.float64)
    tau_s, tau_t = 0.7, 2.0
    loss, _, grad_hidden, grad_head = _fused(
        hidden,
        head,
        teacher_hidden,
        teacher_head,
        mask,
        divergence,
        chunk_size=3,
        vocab_size=VOCAB,
        student_temperature=tau_s,
        teacher_temperature=tau_t,
        reduction=reduction,
    )
    h, w = hidden.clone().requires_grad_(), head.clone().requires_grad_()
    per_token = _reference_per_token(
        h @ w[:VOCAB].T, teacher_hidden @ teacher_head[:VOCAB].T, divergence, tau_s, tau_t
    )
    expected = _reference_reduce(per_token, mask, reduction)
    expected.backward()
    assert loss.dtype == torch.float64
    torch.testing.assert_close(loss, expected.detach(), atol=1e-12, rtol=1e-11)
    torch.testing.assert_close(grad_hidden, h.grad, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(grad_head, w.grad, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("divergence", list(PLAIN))
def test_chunking_does_not_change_the_result(divergence) -> None:
    inputs = _inputs(2, torch.float64)
    results = [
        _fused(*inputs, divergence, chunk_size=chunk, vocab_size=VOCAB)
        for chunk in (1, 3, 5, 10**6)
    ]
    for other in results[1:]:
        for got, want in zip(other[:1] + other[2:], results[0][:1] + results[0][2:], strict=True):
            torch.testing.assert_close(got, want, atol=1e-13, rtol=1e-12)


def test_all_masked_is_zero_and_backward_works() -> None:
    hidden, head, teacher_hidden, teacher_head, _ = _inputs(3)
    mask = torch.zeros(B, T, dtype=torch.bool)
    for divergence in PLAIN:
        for reduction in REDUCTIONS:
            h, w = hidden.clone().requires_grad_(), head.clone().requires_grad_()
            loss, metrics, _ = fused_divergence(
                h,
                w,
                teacher_hidden,
                teacher_head,
                mask,
                divergence=DIVERGENCES[divergence],
                options=DivergenceOptions(reduction=reduction),
                vocab_size=VOCAB,
            )
            assert loss.item() == 0.0 and loss.requires_grad
            assert metrics["objective/tokens"] == 0.0
            assert all(math.isfinite(v) for v in metrics.values())
            loss.backward()
            assert torch.equal(h.grad, torch.zeros_like(h))
            assert torch.equal(w.grad, torch.zeros_like(w))


def test_jsd_at_beta_zero_and_one_is_exactly_zero() -> None:
    hidden, head, teacher_hidden, teacher_head, mask = _inputs(4)
    for beta in (0.0, 1.0):
        h, w = hidden.clone().requires_grad_(), head.clone().requires_grad_()
        loss, _, _ = fused_divergence(
            h,
            w,
            teacher_hidden,
            teacher_head,
            mask,
            divergence=JSD,
            options=DivergenceOptions(weights={"beta": beta}),
            chunks=ChunkSpec(chunk_size=4),
            vocab_size=VOCAB,
        )
        loss.backward()
        assert loss.item() == 0.0
        assert not h.grad.any() and not w.grad.any()


def test_mixture_endpoints_are_the_two_kls() -> None:
    inputs = _inputs(5, torch.float64)
    for alpha, pure in ((1.0, "forward_kl"), (0.0, "reverse_kl")):
        h, w = inputs[0].clone().requires_grad_(), inputs[1].clone().requires_grad_()
        mixed, _, _ = fused_divergence(
            h,
            w,
            *inputs[2:],
            divergence=MIXTURE,
            options=DivergenceOptions(weights={"alpha": alpha}),
            vocab_size=VOCAB,
        )
        mixed.backward()
        want = _fused(*inputs, pure, vocab_size=VOCAB)
        torch.testing.assert_close(mixed.detach(), want[0], atol=1e-13, rtol=0)
        torch.testing.assert_close(w.grad, want[3], atol=1e-13, rtol=0)


def test_backward_scales_by_the_incoming_gradient() -> None:
    inputs = _inputs(6, torch.float64)
    h, w = inputs[0].clone().requires_grad_(), inputs[1].clone().requires_grad_()
    loss, _, _ = fused_divergence(h, w, *inputs[2:], divergence=REVERSE_KL, vocab_size=VOCAB)
    (-2.5 * loss).backward()
    once = _fused(*inputs, "reverse_kl", vocab_size=VOCAB)
    torch.testing.assert_close(h.grad, -2.5 * once[2], atol=1e-14, rtol=1e-12)
    torch.testing.assert_close(w.grad, -2.5 * once[3], atol=1e-14, rtol=1e-12)


def test_teacher_is_detached_and_no_grad_mode_skips_gradients() -> None:
    hidden, head, teacher_hidden, teacher_head, mask = _inputs(7)
    teacher_hidden.requires_grad_()
    teacher_head.requires_grad_()
    h = hidden.clone().requires_grad_()
    args = (h, head, teacher_hidden, teacher_head, mask)
    chunks = ChunkSpec(chunk_size=3)
    loss, metrics, _ = fused_divergence(*args, divergence=JSD, vocab_size=VOCAB, chunks=chunks)
    loss.backward()
    assert teacher_hidden.grad is None and teacher_head.grad is None
    with torch.no_grad():
        loss_eval, metrics_eval, _ = fused_divergence(
            *args, divergence=JSD, vocab_size=VOCAB, chunks=chunks
        )
    assert not loss_eval.requires_grad
    assert loss_eval.item() == loss.item() and metrics_eval == metrics


def test_bfloat16_inputs_keep_their_gradient_dtype() -> None:
    hidden, head, teacher_hidden, teacher_head, mask = (
        t.bfloat16() if t.is_floating_point() else t for t in _inputs(8)
    )
    h, w = hidden.clone().requires_grad_(), head.clone().requires_grad_()
    loss, _, _ = fused_divergence(h, w, teacher_hidden, teacher_head, mask, vocab_size=VOCAB)
    loss.backward()
    assert loss.dtype == torch.float32 and h.grad.dtype == w.grad.dtype == torch.bfloat16
    plain = _plain(hidden, head, teacher_hidden, teacher_head, mask, "forward_kl", VOCAB)
    bf16 = partial(chain_tols, dtype=torch.bfloat16)  # bf16 gradients, fp32 loss
    assert loss.item() == pytest.approx(plain[0].item(), rel=bf16(plain[0], *CHAIN)["rtol"])
    torch.testing.assert_close(h.grad.float(), plain[2].float(), **bf16(plain[2], *CHAIN))
    torch.testing.assert_close(w.grad.float(), plain[3].float(), **bf16(plain[3], *CHAIN))


def test_bad_inputs_raise_one_line_errors() -> None:
    hidden, head, teacher_hidden, teacher_head, mask = _inputs(9)
    with pytest.raises(ValueError, match="vocab_size"):  # widths differ, no vocab_size
        fused_divergence(hidden, head, teacher_hidden, teacher_head, mask)
    with pytest.raises(ValueError, match="head weight"):
        fused_divergence(hidden, head.T, teacher_hidden, teacher_head, mask, vocab_size=VOCAB)
    with pytest.raises(ValueError, match="chunk_size"):
        fused_divergence(*_inputs(9)[:4], mask, vocab_size=VOCAB, chunks=ChunkSpec(chunk_size=0))
    with pytest.raises(ValueError, match="memory_budget_mb"):
        fused_divergence(
            *_inputs(9)[:4], mask, vocab_size=VOCAB, chunks=ChunkSpec(memory_budget_mb=0)
        )
    with pytest.raises(ValueError, match=r"jsd beta must be in \[0, 1\], got 1.5"):
        options = DivergenceOptions(weights={"beta": 1.5})
        fused_divergence(*_inputs(9)[:4], mask, vocab_size=VOCAB, divergence=JSD, options=options)


# ---------------------------------------------------------------------------------------------
# Chunk size from a memory budget
# ---------------------------------------------------------------------------------------------


def test_chunk_rows_is_monotone_and_fits_the_budget() -> None:
    budgets = [0.01, 0.5, 1, 7.3, 64, 256, 1024, 4096]
    vocabs = [512, 32_000, 128_256, 151_936]
    for vocab in vocabs:
        rows = [chunk_rows(budget, vocab) for budget in budgets]
        assert rows == sorted(rows)  # non-decreasing in the budget
        for budget, n in zip(budgets, rows, strict=True):
            one_row = 4 * vocab * 4
            if budget * 1e6 >= one_row:
                assert n * one_row <= budget * 1e6 < (n + 1) * one_row  # fits, and is the most
            else:
                assert n == 1  # the floor
    for budget in budgets:
        by_vocab = [chunk_rows(budget, vocab) for vocab in vocabs]
        assert by_vocab == sorted(by_vocab, reverse=True)  # non-increasing in V
        assert chunk_rows(budget, 32_000, buffers=5) <= chunk_rows(budget, 32_000)
    assert chunk_rows(DEFAULT_MEMORY_BUDGET_MB, 128_256) == 124
    with pytest.raises(ValueError, match="memory_budget_mb"):
        chunk_rows(-1, 32_000)


class _Outputs(TorchDispatchMode):
    """Records the shape and byte size of every tensor an aten op returns."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[tuple[int, ...], int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(tensor, torch.Tensor):
                self.seen.append((tuple(tensor.shape), tensor.numel() * tensor.element_size()))
        return out


@pytest.mark.parametrize("divergence", ["forward_kl", "jsd"])
def test_fused_respects_the_memory_budget(divergence) -> None:
    # 512 positions × V = 1,000 under a 0.16 MB budget: 10 rows per chunk for 4 fp32 (rows × V)
    # buffers, 8 for JSD's 5. Apart from ∂L/∂W (the size of the head), no tensor the objective
    # creates, forward or backward, is larger than one chunk's (rows, 2, V) pair of buffers, and
    # all the chunk's buffers together fit the budget.
    vocab, tokens, budget_mb = 1000, 512, 0.16
    generator = torch.Generator().manual_seed(13)
    hidden = torch.randn(1, tokens, H, generator=generator).requires_grad_()
    head = torch.randn(vocab, H, generator=generator).requires_grad_()
    teacher_hidden = torch.randn(1, tokens, H, generator=generator)
    teacher_head = torch.randn(vocab, H, generator=generator)
    mask = torch.ones(1, tokens, dtype=torch.bool)
    outputs = _Outputs()
    with outputs:
        loss, _, _ = fused_divergence(
            hidden,
            head,
            teacher_hidden,
            teacher_head,
            mask,
            divergence=DIVERGENCES[divergence],
            chunks=ChunkSpec(memory_budget_mb=budget_mb),
        )
        loss.backward()
    buffers = 5 if divergence == "jsd" else 4
    rows = chunk_rows(budget_mb, vocab, buffers=buffers)
    assert rows == (8 if divergence == "jsd" else 10)
    assert buffers * rows * vocab * 4 <= budget_mb * 1e6
    largest = max(nbytes for shape, nbytes in outputs.seen if shape != (vocab, H))
    assert largest == 2 * rows * vocab * 4 < tokens * vocab * 4  # the (rows, 2, V) pair


@pytest.mark.parametrize("divergence", ["forward_kl", "reverse_kl", "jsd"])
@pytest.mark.parametrize(("tau_s", "tau_t"), TEMPERATURES)
def test_token_logprobs_gathered_on_the_way_equal_a_plain_log_softmax(divergence, tau_s, tau_t):
    """With ``tokens_B_T`` the pass also returns ℓ(y) of both models at τ and at 1.0 (the
    diagnostics), equal to log_softmax of the materialised logits, and changes nothing else."""
    hidden, head, teacher_hidden, teacher_head, mask = _inputs(11)
    tokens = torch.randint(0, VOCAB, mask.shape, generator=torch.Generator().manual_seed(3))
    tokens = tokens.masked_fill(~mask, 0)
    options = DivergenceOptions(tau_s, tau_t, weights=EXTRA[divergence])
    common = dict(
        divergence=DIVERGENCES[divergence], options=options, vocab_size=VOCAB, chunks=ChunkSpec(2)
    )
    h, w = hidden.clone().requires_grad_(), head.clone().requires_grad_()
    loss, metrics, logp = fused_divergence(
        h, w, teacher_hidden, teacher_head, mask, tokens_B_T=tokens, **common
    )
    loss.backward()
    h2, w2 = hidden.clone().requires_grad_(), head.clone().requires_grad_()
    loss2, metrics2, none = fused_divergence(h2, w2, teacher_hidden, teacher_head, mask, **common)
    loss2.backward()
    assert none is None  # one return shape: the third is None when no tokens are given
    assert torch.equal(loss, loss2) and metrics == metrics2
    assert torch.equal(h.grad, h2.grad) and torch.equal(w.grad, w2.grad)
    for got, (hid, weight, tau) in (
        (logp.student_B_T, (hidden, head, tau_s)),
        (logp.teacher_B_T, (teacher_hidden, teacher_head, tau_t)),
        (logp.student_t1_B_T, (hidden, head, 1.0)),
        (logp.teacher_t1_B_T, (teacher_hidden, teacher_head, 1.0)),
    ):
        logits = (hid @ weight.T)[..., :VOCAB].double() / tau
        want = logits.log_softmax(-1).gather(-1, tokens[..., None]).squeeze(-1)
        assert got.dtype == torch.float32 and got.shape == mask.shape
        # the scaled logits' fp32 matmul error, twice through the log-softmax, and its own
        tol = log_softmax_tol(logits) + 2 * chain_tols(logits, hid.shape[-1])["atol"]
        torch.testing.assert_close(got.double(), want.masked_fill(~mask, 0.0), rtol=0, atol=tol)
        assert torch.all(got[~mask] == 0)
