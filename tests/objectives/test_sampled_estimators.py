"""Sampled / rollout-token KL estimators and k1/k2/k3 (docs/method.md §2, [P] App. A.2,
Schulman)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.numerics import log_softmax_tol, scale

from distillscope.objectives.divergences import FORWARD_KL, REVERSE_KL
from distillscope.objectives.estimators import kl_sample_metrics

from .shorthand import (
    plain_loss,
    rollout_token_forward_kl,
    rollout_token_reverse_kl,
    sampled_forward_kl,
    sampled_reverse_kl,
)

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

V = 5


N_SAMPLES = 100_000  # positions sharing one distribution: the mean of N i.i.d. draws
STUDENT = torch.tensor([0.3, -1.0, 1.2, 0.0, -0.4])
TEACHER = torch.tensor([1.0, 0.2, -0.5, 0.7, -1.5])


def _repeated(logits_V: torch.Tensor) -> torch.Tensor:
    return logits_V.expand(1, N_SAMPLES, V)


def _sampled_gradient(estimator, seed: int, **kw) -> tuple[torch.Tensor, dict[str, float]]:
    """Mean over N_SAMPLES positions of the estimator's gradient w.r.t. the shared logits."""
    z = STUDENT.clone().requires_grad_()
    loss, metrics = estimator(
        _repeated(z),
        _repeated(TEACHER),
        torch.ones(1, N_SAMPLES, dtype=torch.bool),
        generator=torch.Generator().manual_seed(seed),
        reduction="token_mean",
        **kw,
    )
    (grad,) = torch.autograd.grad(loss, z)
    return grad, metrics


def _exact_gradient(divergence, **kw) -> tuple[torch.Tensor, float]:
    z = STUDENT.clone().view(1, 1, V).requires_grad_()
    loss, _ = plain_loss(divergence, z, TEACHER.view(1, 1, V), torch.ones(1, 1), **kw)
    (grad,) = torch.autograd.grad(loss, z)
    return grad.view(V), loss.item()


def test_sampled_forward_kl_gradient_is_unbiased() -> None:
    # Per-sample gradient (e_y − π_S)/τ_S has entries in [−1, 1]: the mean of 1e5 draws is within
    # ~0.005 (three standard errors) of its expectation ∇ KL(π_T ‖ π_S).
    kw = {"student_temperature": 1.0, "teacher_temperature": 0.5}
    grad, metrics = _sampled_gradient(sampled_forward_kl, seed=0, **kw)
    exact, kl = _exact_gradient(FORWARD_KL, **kw)
    torch.testing.assert_close(grad, exact, atol=0.01, rtol=0)
    assert metrics["objective/forward_kl_estimate"] == pytest.approx(kl, abs=0.02)


def test_sampled_reverse_kl_gradient_is_unbiased() -> None:
    # Per-sample gradient (ℓ_S − ℓ_T)(y) (e_y − π_S): entries up to ~3, standard error ~0.005.
    kw = {"student_temperature": 1.0, "teacher_temperature": 1.0}
    grad, metrics = _sampled_gradient(sampled_reverse_kl, seed=1, **kw)
    exact, kl = _exact_gradient(REVERSE_KL, **kw)
    torch.testing.assert_close(grad, exact, atol=0.02, rtol=0)
    assert metrics["objective/reverse_kl_estimate"] == pytest.approx(kl, abs=0.02)


def test_draws_are_reproducible_with_the_generator() -> None:
    logits, teacher = STUDENT.expand(2, 50, V), TEACHER.expand(2, 50, V)
    mask = torch.ones(2, 50, dtype=torch.bool)

    def run(seed: int) -> float:
        generator = torch.Generator().manual_seed(seed)
        return sampled_forward_kl(logits, teacher, mask, generator=generator)[0].item()

    assert run(7) == run(7)
    assert run(7) != run(8)


def _rollout_case():
    generator = torch.Generator().manual_seed(3)
    student = torch.randn(2, 4, V, generator=generator)
    teacher = torch.randn(2, 4, V, generator=generator)
    tokens = torch.tensor([[1, 4, 0, -100], [2, 2, -100, -100]])  # −100: padding ids
    mask = tokens >= 0
    return student, teacher, tokens, mask


def test_rollout_token_forward_is_nll_of_the_rollout() -> None:
    student, teacher, tokens, mask = _rollout_case()
    z = student.clone().requires_grad_()
    loss, _ = rollout_token_forward_kl(
        z, teacher, tokens, mask, student_temperature=2.0, reduction="sum"
    )
    logp = torch.log_softmax(student / 2.0, -1)
    expected = -sum(logp[b, t, tokens[b, t]] for b, t in mask.nonzero().tolist())
    n = int(mask.sum())  # a sum of n fp32 log-probs, each within log_softmax_tol
    assert loss.item() == pytest.approx(expected.item(), abs=n * log_softmax_tol(student, 2.0))
    loss.backward()
    assert torch.equal(z.grad[~mask], torch.zeros(int((~mask).sum()), V))


def test_rollout_token_reverse_gradient_is_the_score_function_form() -> None:
    # ∇ loss_t = (ℓ_S − ℓ_T)(y_t) · (e_{y_t} − π_S) at temperature 1, per position.
    student, teacher, tokens, mask = _rollout_case()
    z = student.clone().requires_grad_()
    loss, _ = rollout_token_reverse_kl(z, teacher, tokens, mask, reduction="sum")
    loss.backward()
    logp_s, logp_t = torch.log_softmax(student, -1), torch.log_softmax(teacher, -1)
    # a log-ratio (two log-probs' errors) times e_y − π_S (≤ 1), and π_S's error times the ratio
    error = log_softmax_tol(student) + log_softmax_tol(teacher)
    tol = error * (1 + scale(logp_s - logp_t))
    for b, t in mask.nonzero().tolist():
        y = tokens[b, t]
        expected = (logp_s[b, t, y] - logp_t[b, t, y]) * (
            torch.nn.functional.one_hot(y, V) - logp_s[b, t].exp()
        )
        torch.testing.assert_close(z.grad[b, t], expected, atol=tol, rtol=0)


def test_all_masked_estimators_are_zero() -> None:
    student, teacher, tokens, _ = _rollout_case()
    mask = torch.zeros_like(tokens, dtype=torch.bool)
    z = student.clone().requires_grad_()
    generator = torch.Generator().manual_seed(0)
    losses = [
        sampled_forward_kl(z, teacher, mask, generator=generator)[0],
        sampled_reverse_kl(z, teacher, mask, generator=generator)[0],
        rollout_token_forward_kl(z, teacher, tokens, mask)[0],
        rollout_token_reverse_kl(z, teacher, tokens, mask)[0],
    ]
    assert all(loss.item() == 0.0 for loss in losses)
    sum(losses).backward()
    assert torch.equal(z.grad, torch.zeros_like(z))
    assert kl_sample_metrics(torch.zeros(2, 4), torch.zeros(2, 4), mask) == {
        "kl/k1": 0.0,
        "kl/k2": 0.0,
        "kl/k3": 0.0,
    }


def test_k_metrics_hand_computed() -> None:
    logp_student = torch.tensor([[-1.0, -2.0, -0.5]])
    logp_teacher = torch.tensor([[-0.5, -3.0, -9.0]])  # log r = 0.5, −1, (masked)
    mask = torch.tensor([[True, True, False]])
    metrics = kl_sample_metrics(logp_student, logp_teacher, mask)
    assert metrics["kl/k1"] == pytest.approx((-0.5 + 1.0) / 2)
    assert metrics["kl/k2"] == pytest.approx((0.125 + 0.5) / 2)
    k3 = [math.exp(0.5) - 1 - 0.5, math.exp(-1.0) - 1 + 1.0]
    assert metrics["kl/k3"] == pytest.approx(sum(k3) / 2, rel=1e-6)


def test_k1_and_k3_are_unbiased_for_reverse_kl() -> None:
    # y ~ π_S; E[k1] = E[k3] = KL(π_S ‖ π_T). k2 is only approximately KL (biased).
    generator = torch.Generator().manual_seed(4)
    logp_s = torch.log_softmax(STUDENT, -1)
    logp_t = torch.log_softmax(TEACHER, -1)
    y = torch.multinomial(logp_s.exp(), N_SAMPLES, replacement=True, generator=generator)
    metrics = kl_sample_metrics(
        logp_s[y].view(1, -1), logp_t[y].view(1, -1), torch.ones(1, N_SAMPLES)
    )
    kl = (logp_s.exp() * (logp_s - logp_t)).sum().item()
    assert metrics["kl/k1"] == pytest.approx(kl, abs=0.015)
    assert metrics["kl/k3"] == pytest.approx(kl, abs=0.015)
    assert metrics["kl/k2"] > 0


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(-30, 0), st.floats(-30, 0)),
        min_size=1,
        max_size=8,
    )
)
def test_k3_is_nonnegative_and_matches_float64(pairs: list[tuple[float, float]]) -> None:
    logp_student = torch.tensor([[a for a, _ in pairs]])
    logp_teacher = torch.tensor([[b for _, b in pairs]])
    for i in range(len(pairs)):  # each sample alone, so the mean is that sample's k3
        mask = torch.zeros(1, len(pairs), dtype=torch.bool)
        mask[0, i] = True
        metrics = kl_sample_metrics(logp_student, logp_teacher, mask)
        log_r = float(logp_teacher[0, i]) - float(logp_student[0, i])
        assert metrics["kl/k3"] >= 0.0 and metrics["kl/k2"] >= 0.0
        assert metrics["kl/k3"] == pytest.approx(math.expm1(log_r) - log_r, rel=1e-4, abs=1e-6)
