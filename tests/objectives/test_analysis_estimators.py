"""Estimator bias against a distribution with a known KL (docs/method.md §2)."""

from __future__ import annotations

import math

import pytest
import torch

from distillscope.objectives.estimator_bias import (
    TARGETS,
    UNBIASED,
    error_summaries,
    estimator_draws,
    overall_summary,
    schulman_k,
)
from distillscope.objectives.positions import bin_edges

S = 4000  # draws per position: Monte-Carlo error ~ std / √(S · positions)


def _known_pair():
    """Two positions with hand-computable KLs: π_S, π_T over 3 tokens."""
    p_s = torch.tensor([[0.7, 0.2, 0.1], [0.2, 0.2, 0.6]], dtype=torch.float64)
    p_t = torch.tensor([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], dtype=torch.float64)
    return p_s.log()[None], p_t.log()[None], p_s, p_t  # [1, 2, 3]


def _uniforms(seed: int, s: int = S) -> torch.Tensor:
    return torch.rand(
        2, s, 1, 2, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )


def test_targets_are_the_exact_kls():
    logp_s, logp_t, p_s, p_t = _known_pair()
    _, targets = estimator_draws(logp_s, logp_t, _uniforms(0, 2))
    reverse = (p_s * (p_s / p_t).log()).sum(-1)
    forward = (p_t * (p_t / p_s).log()).sum(-1)
    torch.testing.assert_close(targets["reverse_kl"][0], reverse)
    torch.testing.assert_close(targets["forward_kl"][0], forward)


def test_k1_k3_unbiased_and_k2_biased_within_monte_carlo_error():
    logp_s, logp_t, _, _ = _known_pair()
    estimates, targets = estimator_draws(logp_s, logp_t, _uniforms(1), topk=1)
    mask = torch.ones(1, 2, dtype=torch.bool)
    rows = {}
    for name, values in estimates.items():
        rows[name] = overall_summary(values, targets[TARGETS[name]], mask, name != "topk_tail")
    for name in UNBIASED:
        assert abs(rows[name].bias) < 4 * rows[name].se, (name, rows[name])
    # k2's bias is known exactly: E_{π_S}[½ (log r)²] − KL; the estimate finds it
    _, _, p_s, p_t = _known_pair()
    exact_k2 = (p_s * 0.5 * (p_t / p_s).log().square()).sum(-1) - (p_s * (p_s / p_t).log()).sum(-1)
    exact_fk2 = (p_t * 0.5 * (p_s / p_t).log().square()).sum(-1) - (p_t * (p_t / p_s).log()).sum(-1)
    for name, exact in (("k2", exact_k2), ("forward_k2", exact_fk2)):
        assert abs(float(exact.mean())) > 10 * rows[name].se  # a bias far beyond the MC error
        assert rows[name].bias == pytest.approx(float(exact.mean()), abs=4 * rows[name].se)
    assert rows["k1"].std > rows["k3"].std  # k3 is the low-variance unbiased one here
    top = rows["topk_tail"]
    assert top.bias < 0 and math.isnan(top.se) and top.draws == 2  # a lower bound of F


def test_topk_with_every_token_but_one_is_nearly_exact():
    logp_s, logp_t, _, _ = _known_pair()
    estimates, targets = estimator_draws(logp_s, logp_t, _uniforms(2, 2), topk=2)
    # with k = V − 1 the tail bin holds one token: the fold is the full distribution
    torch.testing.assert_close(estimates["topk_tail"][0], targets["forward_kl"])


def test_schulman_k_by_hand():
    log_r = torch.tensor([math.log(2.0)], dtype=torch.float64)
    k1, k2, k3 = schulman_k(log_r)
    assert float(k1) == pytest.approx(-math.log(2))
    assert float(k2) == pytest.approx(0.5 * math.log(2) ** 2)
    assert float(k3) == pytest.approx(1 - math.log(2))


def test_binned_summaries_split_positions():
    logp_s, logp_t, _, _ = _known_pair()
    estimates, targets = estimator_draws(logp_s, logp_t, _uniforms(3, 50))
    mask = torch.ones(1, 2, dtype=torch.bool)
    bins = error_summaries(estimates["k2"], targets["reverse_kl"], mask, bin_edges(2, 2))
    assert [b.draws for b in bins] == [50, 50]
    assert bins[0].target_mean == pytest.approx(float(targets["reverse_kl"][0, 0]))
    pooled = overall_summary(estimates["k2"], targets["reverse_kl"], mask)
    assert pooled.bias == pytest.approx((bins[0].bias + bins[1].bias) / 2)
