"""Logit gradients and the §5 bounds (docs/method.md §5) against autograd and built cases."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Categorical, kl_divergence

from distillscope.objectives.gradient_bounds import (
    REVERSE_SHARP,
    SQRT2,
    check_bound,
    forward_difference_bound,
    forward_second_moment_bound,
    gradient_difference,
    log_ratio_spread,
    logit_gradients,
    logit_level_checks,
    position_gradients,
    reverse_difference_bound,
    reverse_second_moment_bound,
    total_variation,
    two_token_counterexample,
)

B, T, V = 3, 4, 9


def _logits(seed: int, scale: float = 3.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return scale * torch.randn(B, T, V, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("tau_s, tau_t", [(1.0, 0.5), (1.0, 1.0), (2.0, 0.5)])
def test_closed_forms_equal_autograd_of_torch_kl(tau_s, tau_t):
    z_s = _logits(0).requires_grad_(True)
    z_t = _logits(1)
    p_t = Categorical(logits=z_t / tau_t)
    (grad_f,) = torch.autograd.grad(kl_divergence(p_t, Categorical(logits=z_s / tau_s)).sum(), z_s)
    (grad_r,) = torch.autograd.grad(kl_divergence(Categorical(logits=z_s / tau_s), p_t).sum(), z_s)
    logp_s = torch.log_softmax(z_s.detach() / tau_s, -1)
    logp_t = torch.log_softmax(z_t / tau_t, -1)
    closed_f, closed_r = logit_gradients(logp_s, logp_t, tau_s)
    torch.testing.assert_close(closed_f, grad_f, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(closed_r, grad_r, rtol=1e-10, atol=1e-12)


def test_spread_and_total_variation_by_hand():
    logp_s = torch.tensor([0.5, 0.25, 0.25]).log()
    logp_t = torch.tensor([0.25, 0.25, 0.5]).log()
    assert float(log_ratio_spread(logp_s, logp_t)) == pytest.approx(2 * math.log(2))
    assert float(total_variation(logp_s, logp_t)) == pytest.approx(0.25)


@pytest.mark.parametrize("seed", range(5))
def test_every_logit_level_bound_holds_on_random_logits(seed):
    for scale in (0.3, 3.0, 12.0):
        logp_s = torch.log_softmax(_logits(seed, scale), -1)
        logp_t = torch.log_softmax(_logits(seed + 100, scale) / 0.5, -1)
        g = position_gradients(logp_s, logp_t)
        checks = logit_level_checks(g, torch.ones(B, T, dtype=torch.bool))
        assert len(checks) == 4 and all(c.holds for c in checks), checks
        # the sharp reverse constant: ‖∂R/∂z‖ ≤ R_n / (2√2) per token
        assert bool((g.reverse_norm <= REVERSE_SHARP * g.spread + 1e-9).all())


def test_forward_bound_is_attained_by_disjoint_one_hots():
    big = 60.0
    z_s = torch.tensor([[[big, 0.0, 0.0]]], dtype=torch.float64)
    z_t = torch.tensor([[[0.0, big, 0.0]]], dtype=torch.float64)
    g = position_gradients(torch.log_softmax(z_s, -1), torch.log_softmax(z_t, -1))
    assert float(g.forward_norm) == pytest.approx(SQRT2, rel=1e-12)
    checks = logit_level_checks(g, torch.ones(1, 1, dtype=torch.bool))
    norm, second = checks[0], checks[1]
    assert norm.observed == pytest.approx(norm.bound, rel=1e-12) and norm.holds
    assert second.observed == pytest.approx(second.bound, rel=1e-12) and second.holds


def test_reverse_per_token_bound_is_attained_at_its_sharp_constant():
    # two tokens of mass ½ at the ends of the spread: ‖∂R/∂z‖ = R_n / (2√2) exactly
    logp_s = torch.tensor([0.5, 0.5], dtype=torch.float64).log()
    logp_t = torch.tensor([0.9, 0.1], dtype=torch.float64).log()
    g = position_gradients(logp_s[None, None], logp_t[None, None])
    assert float(g.reverse_norm) == pytest.approx(REVERSE_SHARP * float(g.spread), rel=1e-12)


def test_difference_bounds_sit_at_equality_on_opposite_extreme_gradients():
    # ρ and ρ' disjoint (TV = 1), per-outcome gradients ±u with ‖u‖ = sup: the bound is equality
    u = torch.tensor([1.0, -1.0, 0.0], dtype=torch.float64)  # ‖u‖ = √2 = sup ‖g_F‖ (B = 1)
    rho, rho_prime = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    diff, tv = gradient_difference(rho.double(), rho_prime.double(), torch.stack([u, -u]))
    assert tv == 1.0 and diff == pytest.approx(forward_difference_bound(1.0, tv), rel=1e-12)
    spread = 3.0
    u_r = torch.tensor([spread, 0.0], dtype=torch.float64)  # ‖u‖ = R = sup ‖g_R‖ (B = 1)
    diff, tv = gradient_difference(rho.double(), rho_prime.double(), torch.stack([u_r, -u_r]))
    assert diff == pytest.approx(reverse_difference_bound(1.0, spread, tv), rel=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_difference_bounds_hold_on_random_rollout_distributions(seed):
    g = torch.Generator().manual_seed(seed)
    k = 6  # outcomes (prefixes), each with its own student and teacher distribution
    logp_s = torch.log_softmax(3 * torch.randn(k, V, generator=g, dtype=torch.float64), -1)
    logp_t = torch.log_softmax(3 * torch.randn(k, V, generator=g, dtype=torch.float64), -1)
    grad_f, grad_r = logit_gradients(logp_s, logp_t)
    spread = float(log_ratio_spread(logp_s, logp_t).max())
    rho = torch.softmax(torch.randn(k, generator=g, dtype=torch.float64), 0)
    rho_prime = torch.softmax(torch.randn(k, generator=g, dtype=torch.float64), 0)
    diff_f, tv = gradient_difference(rho, rho_prime, grad_f)
    diff_r, _ = gradient_difference(rho, rho_prime, grad_r)
    assert 0 < diff_f <= forward_difference_bound(1.0, tv)
    assert 0 < diff_r <= reverse_difference_bound(1.0, spread, tv)
    assert float((grad_f.norm(dim=-1) ** 2).mean()) <= forward_second_moment_bound(1.0)
    assert float((grad_r.norm(dim=-1) ** 2).mean()) <= reverse_second_moment_bound(1.0, spread)


def test_two_token_counterexample_amplifies_by_log_one_over_delta():
    eps = 1e-3
    previous = 0.0
    for delta in (1e-2, 1e-4, 1e-8, 1e-16):
        out = two_token_counterexample(eps, delta)
        assert out["tv"] == pytest.approx(eps)
        expected = SQRT2 / 4 * math.log((1 - delta) / delta)
        assert out["reverse_amplification"] == pytest.approx(expected, rel=1e-9)
        assert out["reverse_amplification"] > previous  # grows without bound as δ → 0
        previous = out["reverse_amplification"]
        # forward KL stays bounded by √2/2 whatever δ, and within its distribution-free bound
        assert out["forward_amplification"] == pytest.approx(SQRT2 * (0.5 - delta), rel=1e-9)
        assert out["forward_difference"] <= forward_difference_bound(1.0, eps)
        # the reverse difference needs the spread R = log((1 − δ)/δ), and stays within 2Rε
        assert out["spread"] == pytest.approx(math.log((1 - delta) / delta))
        assert out["reverse_difference"] <= out["reverse_spread_bound"]
    assert previous > 4 * SQRT2  # at δ = 1e-16 it is past any fixed constant like 2√2
    with pytest.raises(ValueError, match="delta"):
        two_token_counterexample(0.1, 0.7)


def test_two_token_counterexample_matches_autograd():
    delta = 1e-3
    z = torch.zeros(2, dtype=torch.float64, requires_grad=True)  # student uniform at b
    teacher = Categorical(probs=torch.tensor([1 - delta, delta], dtype=torch.float64))
    (grad_r,) = torch.autograd.grad(kl_divergence(Categorical(logits=z), teacher), z)
    out = two_token_counterexample(0.25, delta)
    assert out["reverse_difference"] == pytest.approx(0.25 * float(grad_r.norm()), rel=1e-12)


def test_check_bound_tolerance_and_nan():
    assert check_bound("x", "logit", "1", "", 1.0, 1.0 + 1e-9).holds
    assert not check_bound("x", "logit", "1", "", 1.0, 1.01).holds
    assert not check_bound("x", "logit", "1", "", 1.0, float("nan")).holds


def test_all_masked_positions_give_no_checks():
    logp = torch.log_softmax(_logits(3), -1)
    g = position_gradients(logp, logp)
    assert logit_level_checks(g, torch.zeros(B, T, dtype=torch.bool)) == []
