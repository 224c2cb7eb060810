"""The λ-spectrum (docs/method.md §3): pure-function checks against hand-computed references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from tests.numerics import reorder_tol

from distillscope.rollout.spectrum import spectrum_logprobs, spectrum_scores

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

C = 2 * math.log(3)


def _pair(seed: int = 0, shape: tuple[int, ...] = (3, 7, 11)) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    logp_s = F.log_softmax(3 * torch.randn(shape, generator=g), dim=-1)
    logp_t = F.log_softmax(3 * torch.randn(shape, generator=g), dim=-1)
    return logp_s, logp_t


def _tol(want: torch.Tensor) -> float:
    """fp32 log-softmax over the last axis, taken in another order: its sum's terms are of the
    size of the largest log-prob (|ℓ| reaches ~20 here, where one ulp is 1.9e-6)."""
    return reorder_tol(float(want.abs().max()), want.shape[-1])


def test_endpoints_recover_pure_policies_and_midpoint_is_geometric_mean():
    logp_s, logp_t = _pair()
    for lam, want in ((-1.0, logp_t), (1.0, logp_s)):
        got = spectrum_logprobs(logp_s, logp_t, lam)
        torch.testing.assert_close(got, want, atol=_tol(want), rtol=0)
    geo = F.log_softmax(0.5 * (logp_s + logp_t), dim=-1)
    got = spectrum_logprobs(logp_s, logp_t, 0.0)
    torch.testing.assert_close(got, geo, atol=_tol(geo), rtol=0)
    # The unnormalised scores are bit-for-bit the end distributions: the sampler relies on it.
    assert torch.equal(spectrum_scores(logp_s, logp_t, -1.0), logp_t)
    assert torch.equal(spectrum_scores(logp_s, logp_t, 1.0), logp_s)


def test_interpolation_matches_formula():
    logp_s, logp_t = _pair(1)
    lam = -0.3
    want = F.log_softmax(0.35 * logp_s + 0.65 * logp_t, dim=-1)
    got = spectrum_logprobs(logp_s, logp_t, lam)
    torch.testing.assert_close(got, want, atol=_tol(want), rtol=0)


def test_continuous_at_plus_and_minus_one():
    logp_s, logp_t = _pair(2)
    for end in (1.0, -1.0):
        inside = spectrum_logprobs(logp_s, logp_t, end * (1 - 1e-6))
        outside = spectrum_logprobs(logp_s, logp_t, end * (1 + 1e-6))
        # Both sides differ from the end point by O(1e-6 · |ℓ_S − ℓ_T|) with |ℓ| up to ~20.
        torch.testing.assert_close(inside, outside, atol=1e-4, rtol=0)
        torch.testing.assert_close(outside, logp_s if end > 0 else logp_t, atol=1e-4, rtol=0)


def _crafted() -> tuple[torch.Tensor, torch.Tensor]:
    """Four tokens, hand-picked so each case of the extrapolation bonus occurs once.

    student p = [0.50, 0.30, 0.15, 0.05]; max ℓ_S + log 0.2 = log 0.1, so M_S = [1, 1, 1, 0].
    teacher p = [0.70, 0.02, 0.08, 0.20]; r = log(p_S / p_T):
      token 0: r < 0 -> no bonus;  token 1: r = log 15 > c -> bonus clipped at c;
      token 2: 0 < r = log 1.875 < c -> bonus r;  token 3: r < 0 and outside M_S anyway.
    """
    logp_s = torch.tensor([0.50, 0.30, 0.15, 0.05]).log()
    logp_t = torch.tensor([0.70, 0.02, 0.08, 0.20]).log()
    return logp_s, logp_t


def test_extrapolation_bonus_is_masked_and_clipped():
    logp_s, logp_t = _crafted()
    lam = 2.0
    bonus = torch.tensor([0.0, C, math.log(0.15 / 0.08), 0.0])
    want_z = logp_s + (lam - 1) / 2 * bonus
    torch.testing.assert_close(
        spectrum_scores(logp_s, logp_t, lam), want_z, atol=_tol(want_z), rtol=0
    )
    want = F.log_softmax(want_z, -1)
    torch.testing.assert_close(
        spectrum_logprobs(logp_s, logp_t, lam), want, atol=_tol(want), rtol=0
    )


def test_extrapolation_outside_the_mask_gets_no_bonus():
    # Token 3 is far more likely under S than T (r > 0) but below max ℓ_S + log α: no bonus.
    logp_s = torch.tensor([0.85, 0.10, 0.04, 0.01]).log()
    logp_t = torch.tensor([0.50, 0.10, 0.3998, 0.0002]).log()
    z = spectrum_scores(logp_s, logp_t, 2.0)
    assert z[3].item() == logp_s[3].item()
    assert z[0].item() > logp_s[0].item()  # r = log 1.7 > 0 and inside the mask


def test_negative_extrapolation_is_teacher_anchored():
    logp_s, logp_t = _crafted()
    lam = -3.0
    # b_T = M_T·min(max(-r, 0), c); M_T: ℓ_T ≥ log(0.7·0.2) = log 0.14 -> tokens 0 and 3.
    bonus = torch.tensor([math.log(0.70 / 0.50), 0.0, 0.0, math.log(0.20 / 0.05)])
    want_z = logp_t + (-lam - 1) / 2 * bonus
    torch.testing.assert_close(
        spectrum_scores(logp_s, logp_t, lam), want_z, atol=_tol(want_z), rtol=0
    )


@settings(max_examples=60, deadline=None)
@given(
    logits=arrays(np.float32, (2, 2, 9), elements=st.floats(-30, 30, width=32)),
    lam=st.floats(-4.0, 4.0),
    alpha=st.floats(0.01, 1.0),
)
def test_output_is_a_valid_log_distribution(logits, lam, alpha):
    logp_s = F.log_softmax(torch.from_numpy(logits[0]), dim=-1)
    logp_t = F.log_softmax(torch.from_numpy(logits[1]), dim=-1)
    out = spectrum_logprobs(logp_s, logp_t, lam, alpha=alpha)
    assert out.shape == logp_s.shape
    assert torch.isfinite(out).all()
    assert (out <= 1e-6).all()
    # Σ exp over 9 log-probs whose log-partition (|z| ≤ 30·(|λ|+1)/2 + c ≲ 80) carries u·80 ≈ 5e-6
    torch.testing.assert_close(out.exp().sum(-1), torch.ones(2), atol=1e-5, rtol=0)
