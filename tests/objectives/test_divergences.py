"""Full-vocabulary divergences against independent references (docs/method.md §1–§2)."""

from __future__ import annotations

import itertools
import math
from functools import partial

import pytest
import torch
from tests.numerics import divergence_tol, mean_tol
from torch.distributions import Categorical, kl_divergence

from distillscope.objectives.divergences import FORWARD_KL, JSD, MIXTURE, REVERSE_KL, shared_vocab

from .shorthand import plain_loss

B, T, V = 3, 5, 11
TEMPERATURES = (0.5, 1.0, 2.0)
forward_kl, reverse_kl, generalized_jsd, kl_mixture = (
    partial(plain_loss, divergence) for divergence in (FORWARD_KL, REVERSE_KL, JSD, MIXTURE)
)

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)
OBJECTIVES = (forward_kl, reverse_kl, generalized_jsd, kl_mixture)


def _logits(seed: int, *shape: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return 2.0 * torch.randn(*shape, generator=generator)


def _tol(student, teacher, value, count: int, tau_s: float = 1.0, tau_t: float = 1.0) -> float:
    """fp32 tolerance of a reduction over ``count`` positions (a mean; a sum: ``count`` times
    each position's error) of a divergence whose size is ``value`` (tests/numerics.py)."""
    return count * mean_tol(divergence_tol(student, teacher, tau_s, tau_t), value, count)


def _ragged_mask() -> torch.Tensor:
    """Row 0: 4 tokens, row 1: none (must not count in seq_mean), row 2: 2 tokens."""
    return torch.tensor(
        [[0, 1, 1, 1, 1], [0, 0, 0, 0, 0], [1, 0, 1, 0, 0]],
        dtype=torch.bool,
    )


def _reference_kl(
    student_B_T_V: torch.Tensor, teacher_B_T_V: torch.Tensor, tau_s: float, tau_t: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(forward, reverse) per-position KL from torch.distributions, in float64."""
    student = Categorical(logits=student_B_T_V.double() / tau_s)
    teacher = Categorical(logits=teacher_B_T_V.double() / tau_t)
    return kl_divergence(teacher, student), kl_divergence(student, teacher)


@pytest.mark.parametrize(
    ("tau_s", "tau_t"), list(itertools.permutations(TEMPERATURES, 2)) + [(1.0, 1.0)]
)
def test_kl_matches_torch_distributions(tau_s: float, tau_t: float) -> None:
    student, teacher = _logits(0, B, T, V), _logits(1, B, T, V)
    mask = torch.ones(B, T, dtype=torch.bool)
    ref_forward_B_T, ref_reverse_B_T = _reference_kl(student, teacher, tau_s, tau_t)
    kw = {"student_temperature": tau_s, "teacher_temperature": tau_t, "reduction": "token_mean"}
    loss_f, metrics_f = forward_kl(student, teacher, mask, **kw)
    loss_r, metrics_r = reverse_kl(student, teacher, mask, **kw)
    assert loss_f.dtype == torch.float32
    per_token = divergence_tol(student, teacher, tau_s, tau_t)
    tol = mean_tol(per_token, torch.cat([ref_forward_B_T, ref_reverse_B_T]), B * T)
    assert loss_f.item() == pytest.approx(ref_forward_B_T.mean().item(), abs=tol)
    assert loss_r.item() == pytest.approx(ref_reverse_B_T.mean().item(), abs=tol)
    # Per position too, through the declarations' values.
    logp_s = torch.log_softmax(student / tau_s, -1)
    logp_t = torch.log_softmax(teacher / tau_t, -1)
    torch.testing.assert_close(
        FORWARD_KL.tokens(logp_s, logp_t).double(), ref_forward_B_T, atol=per_token, rtol=0
    )
    torch.testing.assert_close(
        REVERSE_KL.tokens(logp_s, logp_t).double(), ref_reverse_B_T, atol=per_token, rtol=0
    )
    # Both directions and both entropies are reported whichever direction is the loss.
    for metrics in (metrics_f, metrics_r):
        assert metrics["objective/forward_kl"] == pytest.approx(
            ref_forward_B_T.mean().item(), abs=tol
        )
        assert metrics["objective/reverse_kl"] == pytest.approx(
            ref_reverse_B_T.mean().item(), abs=tol
        )
        entropy_t = Categorical(logits=teacher.double() / tau_t).entropy().mean().item()
        entropy_s = Categorical(logits=student.double() / tau_s).entropy().mean().item()
        assert metrics["objective/teacher_entropy"] == pytest.approx(entropy_t, abs=tol)
        assert metrics["objective/student_entropy"] == pytest.approx(entropy_s, abs=tol)
        assert metrics["objective/tokens"] == B * T


@pytest.mark.parametrize("objective", [forward_kl, reverse_kl])
def test_reductions_match_hand_computed(objective) -> None:
    student, teacher = _logits(2, B, T, V), _logits(3, B, T, V)
    mask = _ragged_mask()
    ref_forward, ref_reverse = _reference_kl(student, teacher, 1.0, 0.5)
    per_token = (ref_forward if objective is forward_kl else ref_reverse).tolist()
    rows = [[v for v, m in zip(per_token[b], mask[b].tolist(), strict=True) if m] for b in range(B)]
    nonempty = [row for row in rows if row]
    expected = {
        "seq_mean": sum(sum(row) / len(row) for row in nonempty) / len(nonempty),
        "token_mean": sum(sum(row) for row in rows) / sum(len(row) for row in rows),
        "sum": sum(sum(row) for row in rows),
    }
    for reduction, value in expected.items():
        loss, metrics = objective(
            student, teacher, mask, teacher_temperature=0.5, reduction=reduction
        )
        tol = _tol(student, teacher, value, 6, tau_t=0.5)
        assert loss.item() == pytest.approx(value, abs=tol), reduction
        assert metrics["objective/loss"] == pytest.approx(value, abs=tol)
        assert metrics["objective/tokens"] == 6


def test_seq_mean_weights_sequences_equally_not_tokens() -> None:
    # One long and one short sequence with constant but different KL: seq_mean is the plain
    # average of the two sequence values, token_mean is length-weighted.
    student = torch.zeros(2, 4, 3)
    teacher = torch.stack([torch.zeros(4, 3), torch.tensor([[3.0, 0.0, 0.0]]).expand(4, 3)])
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.bool)
    kl_second = kl_divergence(
        Categorical(logits=torch.tensor([3.0, 0.0, 0.0])), Categorical(logits=torch.zeros(3))
    ).item()
    seq, _ = forward_kl(student, teacher, mask, reduction="seq_mean")
    tok, _ = forward_kl(student, teacher, mask, reduction="token_mean")
    tol = mean_tol(divergence_tol(student, teacher), kl_second, 5)
    assert seq.item() == pytest.approx(kl_second / 2, abs=tol)
    assert tok.item() == pytest.approx(kl_second / 5, abs=tol)


def test_gradients_equal_closed_forms_at_temperature_one() -> None:
    # [P] Eq. 4–5 at a single position.
    z_student = _logits(4, 1, 1, V).requires_grad_()
    z_teacher = _logits(5, 1, 1, V)
    mask = torch.ones(1, 1, dtype=torch.bool)
    p_s = torch.softmax(z_student.detach().double(), -1)
    p_t = torch.softmax(z_teacher.double(), -1)
    log_ratio = p_s.log() - p_t.log()
    reverse_value = (p_s * log_ratio).sum(-1, keepdim=True)

    (grad_f,) = torch.autograd.grad(forward_kl(z_student, z_teacher, mask)[0], z_student)
    (grad_r,) = torch.autograd.grad(reverse_kl(z_student, z_teacher, mask)[0], z_student)
    tol = divergence_tol(z_student, z_teacher)  # of the gradient in the logits too
    torch.testing.assert_close(grad_f.double(), p_s - p_t, atol=tol, rtol=0)
    torch.testing.assert_close(grad_r.double(), p_s * (log_ratio - reverse_value), atol=tol, rtol=0)
    assert grad_f.abs().max() <= 1.0


def test_forward_kl_gradient_scales_with_student_temperature() -> None:
    # ∂F/∂z_S = (π_S − π_T) / τ_S for π_S = softmax(z_S / τ_S).
    z_student = _logits(6, 1, 1, V).requires_grad_()
    z_teacher = _logits(7, 1, 1, V)
    loss, _ = forward_kl(
        z_student, z_teacher, torch.ones(1, 1), student_temperature=2.0, teacher_temperature=0.5
    )
    (grad,) = torch.autograd.grad(loss, z_student)
    expected = (
        torch.softmax(z_student.detach() / 2.0, -1) - torch.softmax(z_teacher / 0.5, -1)
    ) / 2
    tol = divergence_tol(z_student, z_teacher, 2.0, 0.5)
    torch.testing.assert_close(grad, expected, atol=tol, rtol=0)


def test_teacher_gets_no_gradient() -> None:
    z_student = _logits(8, B, T, V).requires_grad_()
    z_teacher = _logits(9, B, T, V).requires_grad_()
    for objective in OBJECTIVES:
        objective(z_student, z_teacher, _ragged_mask())[0].backward()
    assert z_teacher.grad is None
    assert z_student.grad is not None and torch.isfinite(z_student.grad).all()


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("reduction", ["seq_mean", "token_mean", "sum"])
def test_all_masked_gives_connected_zero(objective, reduction: str) -> None:
    z_student = _logits(10, B, T, V).requires_grad_()
    loss, metrics = objective(
        z_student, _logits(11, B, T, V), torch.zeros(B, T, dtype=torch.bool), reduction=reduction
    )
    assert loss.item() == 0.0 and loss.requires_grad
    loss.backward()
    assert torch.equal(z_student.grad, torch.zeros_like(z_student))
    assert all(math.isfinite(v) for v in metrics.values())
    assert metrics["objective/tokens"] == 0


def test_generalized_jsd_definition_and_edges() -> None:
    student, teacher = _logits(12, B, T, V), _logits(13, B, T, V)
    mask = torch.ones(B, T, dtype=torch.bool)
    p_s = torch.softmax(student.double(), -1)
    p_t = torch.softmax(teacher.double(), -1)
    for beta in (0.1, 0.5, 0.8):
        p_m = beta * p_t + (1 - beta) * p_s
        expected = beta * (p_t * (p_t / p_m).log()).sum(-1) + (1 - beta) * (
            p_s * (p_s / p_m).log()
        ).sum(-1)
        loss, _ = generalized_jsd(student, teacher, mask, beta=beta, reduction="token_mean")
        tol = mean_tol(divergence_tol(student, teacher), expected, B * T)
        assert loss.item() == pytest.approx(expected.mean().item(), abs=tol)
    # β = 0.5 is symmetric in its two arguments.
    jsd_st = generalized_jsd(student, teacher, mask, reduction="sum")[0]
    jsd_ts = generalized_jsd(teacher, student, mask, reduction="sum")[0]
    tol = _tol(student, teacher, jsd_st, B * T)
    assert jsd_st.item() == pytest.approx(jsd_ts.item(), abs=2 * tol)  # two fp32 values
    # Exactly 0 at β ∈ {0, 1}, with finite (zero) gradients: not a forward/reverse KL dial.
    for beta in (0.0, 1.0):
        z = student.clone().requires_grad_()
        loss, _ = generalized_jsd(z, teacher, mask, beta=beta)
        assert loss.item() == 0.0
        (grad,) = torch.autograd.grad(loss, z)
        assert torch.equal(grad, torch.zeros_like(grad))


def test_kl_mixture_interpolates_the_two_directions() -> None:
    student, teacher = _logits(14, B, T, V), _logits(15, B, T, V)
    mask = _ragged_mask()
    kw = {"teacher_temperature": 0.5}
    fkl = forward_kl(student, teacher, mask, **kw)[0].item()
    rkl = reverse_kl(student, teacher, mask, **kw)[0].item()
    tol = 2 * _tol(student, teacher, max(fkl, rkl), 6, tau_t=0.5) / 6  # two fp32 token means
    mix = partial(kl_mixture, student, teacher, mask, **kw)
    assert mix(alpha=1.0)[0].item() == pytest.approx(fkl, abs=tol)
    assert mix(alpha=0.0)[0].item() == pytest.approx(rkl, abs=tol)
    assert mix(alpha=0.3)[0].item() == pytest.approx(0.3 * fkl + 0.7 * rkl, abs=tol)


def test_width_mismatch_needs_explicit_vocab_size() -> None:
    student = _logits(16, B, T, V).requires_grad_()
    teacher = _logits(17, B, T, V + 5)  # padded LM head, e.g. 152,064 vs 151,936
    mask = _ragged_mask()
    with pytest.raises(ValueError, match="vocab_size"):
        forward_kl(student, teacher, mask)
    loss, _ = forward_kl(student, teacher, mask, vocab_size=V - 2)
    sliced_s, sliced_t = shared_vocab(student, teacher, V - 2)
    assert sliced_s.shape[-1] == sliced_t.shape[-1] == V - 2
    expected, _ = forward_kl(sliced_s.detach().clone(), sliced_t.clone(), mask)
    tol = 2 * mean_tol(divergence_tol(sliced_s, sliced_t), expected, 6)  # strided vs contiguous
    assert loss.item() == pytest.approx(expected.item(), abs=tol)
    loss.backward()
    assert torch.equal(student.grad[..., V - 2 :], torch.zeros(B, T, 2))
    with pytest.raises(ValueError, match="vocab_size"):
        shared_vocab(student, teacher, V + 1)


def test_low_precision_logits_are_promoted_to_fp32() -> None:
    student, teacher = _logits(18, B, T, V).bfloat16(), _logits(19, B, T, V).bfloat16()
    mask = _ragged_mask()
    loss, _ = reverse_kl(student, teacher, mask)
    expected, _ = reverse_kl(student.float(), teacher.float(), mask)
    assert loss.dtype == torch.float32
    assert loss.item() == expected.item()


def test_bad_options_raise_one_line_errors() -> None:
    student, teacher, mask = _logits(20, B, T, V), _logits(21, B, T, V), _ragged_mask()
    with pytest.raises(ValueError, match="reduction"):
        forward_kl(student, teacher, mask, reduction="mean")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="temperature"):
        forward_kl(student, teacher, mask, student_temperature=0.0)
    with pytest.raises(ValueError, match="mask_B_T"):
        forward_kl(student, teacher, mask[:, :-1])
    with pytest.raises(ValueError, match="beta"):
        generalized_jsd(student, teacher, mask, beta=1.5)
    with pytest.raises(ValueError, match="alpha"):
        kl_mixture(student, teacher, mask, alpha=-0.1)
