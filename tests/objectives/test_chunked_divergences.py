"""The chunked reference (hidden states + LM head, autograd per chunk) equals the plain objectives,
gradients included; the fused objectives are held to it in test_fused.py."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch
from tests.numerics import approx_tols, chain_tols

from distillscope.objectives.divergences import DIVERGENCES, FORWARD_KL, REVERSE_KL

from .chunked_reference import chunked_divergence, chunked_forward_kl, chunked_reverse_kl
from .shorthand import plain_loss

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

B, T, H, H_TEACHER, V = 3, 7, 8, 12, 29
#: The sums between the inputs and a loss or gradient: a head's matmul (H_TEACHER ≥ H terms),
#: the log-partition (V), the token mean and a head gradient's sum over tokens (B·T).
CHAIN = (H_TEACHER, V, B * T)
PLAIN = {name: partial(plain_loss, divergence) for name, divergence in DIVERGENCES.items()}


def _inputs(seed: int, v_student: int = V, v_teacher: int = V):
    generator = torch.Generator().manual_seed(seed)
    student_hidden = torch.randn(B, T, H, generator=generator)
    student_head = 0.5 * torch.randn(v_student, H, generator=generator)
    teacher_hidden = torch.randn(B, T, H_TEACHER, generator=generator)
    teacher_head = 0.5 * torch.randn(v_teacher, H_TEACHER, generator=generator)
    mask = torch.rand(B, T, generator=generator) > 0.35
    mask[1] = False  # one empty sequence
    mask[0, 0] = True
    return student_hidden, student_head, teacher_hidden, teacher_head, mask


def _plain_and_chunked(divergence: str, chunk_size: int, reduction: str, **kw):
    """Loss, metrics and (hidden, head) gradients of both versions on the same inputs."""
    hidden, head, teacher_hidden, teacher_head, mask = _inputs(0)
    extra = (
        {"beta": 0.3} if divergence == "jsd" else {"alpha": 0.7} if divergence == "mixture" else {}
    )
    results = []
    for chunked in (False, True):
        h = hidden.clone().requires_grad_()
        w = head.clone().requires_grad_()
        if chunked:
            loss, metrics = chunked_divergence(
                h,
                w,
                teacher_hidden,
                teacher_head,
                mask,
                divergence=DIVERGENCES[divergence],
                chunk_size=chunk_size,
                reduction=reduction,
                **extra,
                **kw,
            )
        else:
            loss, metrics = PLAIN[divergence](
                h @ w.T, teacher_hidden @ teacher_head.T, mask, reduction=reduction, **extra, **kw
            )
        loss.backward()
        results.append((loss.detach(), metrics, h.grad, w.grad))
    return results


@pytest.mark.parametrize("divergence", list(PLAIN))
@pytest.mark.parametrize("chunk_size", [1, 3, 4, 1024])
def test_chunked_equals_plain(divergence: str, chunk_size: int) -> None:
    # The mask keeps a number of tokens that 3 and 4 do not divide (asserted below).
    kw = {"student_temperature": 1.0, "teacher_temperature": 0.5}
    plain, chunked = _plain_and_chunked(divergence, chunk_size, "seq_mean", **kw)
    assert int(plain[1]["objective/tokens"]) % 3 and int(plain[1]["objective/tokens"]) % 4
    torch.testing.assert_close(chunked[0], plain[0], **chain_tols(plain[0], *CHAIN))
    torch.testing.assert_close(chunked[2], plain[2], **chain_tols(plain[2], *CHAIN))  # ∂/∂hidden
    torch.testing.assert_close(chunked[3], plain[3], **chain_tols(plain[3], *CHAIN))  # ∂/∂head
    for key, value in plain[1].items():
        assert chunked[1][key] == pytest.approx(value, **approx_tols(value, *CHAIN)), key


@pytest.mark.parametrize("reduction", ["token_mean", "sum"])
def test_chunked_equals_plain_for_each_reduction(reduction: str) -> None:
    kw = {"student_temperature": 2.0, "teacher_temperature": 1.0}
    plain, chunked = _plain_and_chunked("reverse_kl", 5, reduction, **kw)
    for got, want in zip(chunked[0:1] + chunked[2:], plain[0:1] + plain[2:], strict=True):
        torch.testing.assert_close(got, want, **chain_tols(want, *CHAIN))


def test_named_wrappers_match_generic() -> None:
    hidden, head, teacher_hidden, teacher_head, mask = _inputs(1)
    args = (hidden, head, teacher_hidden, teacher_head, mask)
    forward = chunked_forward_kl(*args, chunk_size=2)[0]
    reverse = chunked_reverse_kl(*args, chunk_size=2)[0]
    generic_forward = chunked_divergence(*args, divergence=FORWARD_KL, chunk_size=2)[0]
    generic_reverse = chunked_divergence(*args, divergence=REVERSE_KL, chunk_size=2)[0]
    assert forward.item() == generic_forward.item()
    assert reverse.item() == generic_reverse.item()
    assert forward.item() != reverse.item()


def test_all_masked_is_zero_and_backward_works() -> None:
    hidden, head, teacher_hidden, teacher_head, _ = _inputs(2)
    h, w = hidden.clone().requires_grad_(), head.clone().requires_grad_()
    mask = torch.zeros(B, T, dtype=torch.bool)
    for reduction in ("seq_mean", "token_mean", "sum"):
        loss, metrics = chunked_forward_kl(
            h, w, teacher_hidden, teacher_head, mask, reduction=reduction
        )
        assert loss.item() == 0.0 and loss.requires_grad
        assert all(math.isfinite(v) for v in metrics.values())
        loss.backward()
    assert torch.equal(h.grad, torch.zeros_like(h)) and torch.equal(w.grad, torch.zeros_like(w))


def test_vocab_size_slices_both_heads() -> None:
    hidden, head, teacher_hidden, teacher_head, mask = _inputs(3, v_student=V, v_teacher=V + 4)
    with pytest.raises(ValueError, match="vocab_size"):
        chunked_forward_kl(hidden, head, teacher_hidden, teacher_head, mask)
    w = head.clone().requires_grad_()
    loss, _ = chunked_forward_kl(hidden, w, teacher_hidden, teacher_head, mask, vocab_size=V - 3)
    expected, _ = PLAIN["forward_kl"](
        hidden @ head[: V - 3].T, teacher_hidden @ teacher_head[: V - 3].T, mask
    )
    assert loss.item() == pytest.approx(expected.item(), **approx_tols(expected, *CHAIN))
    loss.backward()
    assert torch.equal(w.grad[V - 3 :], torch.zeros(3, H))  # rows beyond the tokenizer: no grad


def test_teacher_is_detached_and_no_grad_mode_skips_gradients() -> None:
    hidden, head, teacher_hidden, teacher_head, mask = _inputs(4)
    teacher_hidden.requires_grad_()
    teacher_head.requires_grad_()
    h = hidden.clone().requires_grad_()
    loss, metrics = chunked_reverse_kl(h, head, teacher_hidden, teacher_head, mask, chunk_size=3)
    loss.backward()
    assert teacher_hidden.grad is None and teacher_head.grad is None
    with torch.no_grad():
        loss_eval, metrics_eval = chunked_reverse_kl(
            h, head, teacher_hidden, teacher_head, mask, chunk_size=3
        )
    assert not loss_eval.requires_grad
    assert loss_eval.item() == loss.item() and metrics_eval == metrics


def _saved_tensor_sizes(objective) -> list[int]:
    """numel of every tensor autograd saves while ``objective()`` builds its graph."""
    sizes: list[int] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        sizes.append(tensor.numel())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        objective()[0].backward()
    return sizes


def test_no_full_logits_are_saved_for_backward() -> None:
    hidden, head, teacher_hidden, teacher_head, _ = _inputs(5)
    mask = torch.ones(B, T, dtype=torch.bool)
    h, w = hidden.clone().requires_grad_(), head.clone().requires_grad_()
    chunked_sizes = _saved_tensor_sizes(
        lambda: chunked_forward_kl(h, w, teacher_hidden, teacher_head, mask, chunk_size=2)
    )
    plain_sizes = _saved_tensor_sizes(
        lambda: PLAIN["forward_kl"](h @ w.T, teacher_hidden @ teacher_head.T, mask)
    )
    # The plain version keeps (B·T × V) log-probs; the chunked one only input-sized tensors and
    # (chunk × V) logits of one chunk at a time.
    assert max(plain_sizes) >= B * T * V
    assert max(chunked_sizes) <= max(B * T * H, V * H, 2 * V) < B * T * V


def test_bfloat16_inputs_keep_their_gradient_dtype() -> None:
    hidden, head, teacher_hidden, teacher_head, mask = _inputs(6)
    h = hidden.bfloat16().requires_grad_()
    w = head.bfloat16().requires_grad_()
    loss, _ = chunked_forward_kl(
        h, w, teacher_hidden.bfloat16(), teacher_head.bfloat16(), mask, chunk_size=4
    )
    loss.backward()
    assert loss.dtype == torch.float32 and h.grad.dtype == w.grad.dtype == torch.bfloat16
    h32, w32 = h.detach().float().requires_grad_(), w.detach().float().requires_grad_()
    ref, _ = PLAIN["forward_kl"](
        h32 @ w32.T, (teacher_hidden.bfloat16() @ teacher_head.bfloat16().T).float(), mask
    )
    ref.backward()
    bf16 = chain_tols(w32.grad, *CHAIN, dtype=torch.bfloat16)  # bf16 matmuls against fp32
    assert loss.item() == pytest.approx(ref.item(), rel=bf16["rtol"])
    torch.testing.assert_close(w.grad.float(), w32.grad, **bf16)


def test_bad_shapes_raise_one_line_errors() -> None:
    hidden, head, teacher_hidden, teacher_head, mask = _inputs(7)
    with pytest.raises(ValueError, match="head weight"):
        chunked_forward_kl(hidden, head.T, teacher_hidden, teacher_head, mask)
    with pytest.raises(ValueError, match="chunk_size"):
        chunked_forward_kl(hidden, head, teacher_hidden, teacher_head, mask, chunk_size=0)
