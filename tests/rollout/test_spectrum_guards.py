"""Guards of the λ-spectrum's branches, mask edge, clip and defaults ([P] App. D.5).

Scores are checked against the formulas of docs/method.md §3 worked out by hand on small
vectors; the mask edge uses ℓ_anchor = (0, log α, …) so the threshold max ℓ + log α is hit
exactly.
"""

from __future__ import annotations

import math

import pytest
import torch

from distillscope.rollout.spectrum import (
    DEFAULT_ALPHA,
    DEFAULT_CLIP,
    spectrum_logprobs,
    spectrum_scores,
)

S = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64).log()
T = torch.tensor([0.2, 0.59, 0.2, 0.01], dtype=torch.float64).log()


def test_defaults_are_the_papers():
    assert DEFAULT_ALPHA == 0.2
    assert DEFAULT_CLIP == pytest.approx(2 * math.log(3))


@pytest.mark.parametrize("lam", [-1.0, -0.5, 0.0, 0.25, 1.0])
def test_interpolation_weights(lam):
    z = spectrum_scores(S, T, lam)
    torch.testing.assert_close(z, (1 + lam) / 2 * S + (1 - lam) / 2 * T, rtol=0, atol=1e-15)


def test_ends_are_the_pure_log_probs_bit_for_bit():
    assert torch.equal(spectrum_scores(S, T, 1.0), S)
    assert torch.equal(spectrum_scores(S, T, -1.0), T)
    assert torch.equal(spectrum_logprobs(S, T, 1.0), torch.log_softmax(S, -1))


@pytest.mark.parametrize("lam", [1.5, 3.0])
def test_student_extrapolation_by_hand(lam):
    # r = ℓ_S − ℓ_T = log 2.5, log(30/59), log .75, log 5; M_S keeps p_S ≥ 0.2 · 0.5 = 0.1,
    # so token 3 (p_S = 0.05, r > 0) is masked: only token 0 gains, by (λ−1)/2 · log 2.5
    z = spectrum_scores(S, T, lam)
    want = S.clone()
    want[0] += (lam - 1) / 2 * math.log(2.5)
    torch.testing.assert_close(z, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("lam", [-1.5, -3.0])
def test_teacher_extrapolation_by_hand(lam):
    # −r = log .4, log(59/30), log(4/3), log .2; M_T keeps p_T ≥ 0.118: tokens 0, 1, 2
    z = spectrum_scores(S, T, lam)
    want = T.clone()
    want[1] += (-lam - 1) / 2 * math.log(0.59 / 0.3)
    want[2] += (-lam - 1) / 2 * math.log(0.2 / 0.15)
    torch.testing.assert_close(z, want, rtol=0, atol=1e-12)


def test_the_clip_caps_the_gain_at_c():
    s = torch.tensor([0.0, -1.0, -5.0], dtype=torch.float64)
    t = torch.tensor([-4.0, -1.5, -5.0], dtype=torch.float64)  # gains 4, 0.5, 0
    z = spectrum_scores(s, t, 3.0)  # default c = 2 log 3 ≈ 2.197 caps the first gain;
    want = s + torch.tensor([DEFAULT_CLIP, 0.5, 0.0], dtype=torch.float64)  # α = .2 keeps −1
    torch.testing.assert_close(z, want, rtol=0, atol=1e-12)
    z = spectrum_scores(s, t, 3.0, alpha=0.5, c=0.25)  # α = 0.5 masks token 1 (−1 < log .5)
    want = s + torch.tensor([0.25, 0.0, 0.0], dtype=torch.float64)
    torch.testing.assert_close(z, want, rtol=0, atol=1e-12)
    z = spectrum_scores(s, t, 3.0, alpha=0.3, c=10.0)  # α = 0.3: −1 ≥ log .3, token 1 gains
    want = s + torch.tensor([4.0, 0.5, 0.0], dtype=torch.float64)
    torch.testing.assert_close(z, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("lam, anchor", [(2.0, "student"), (-2.0, "teacher")])
def test_a_token_exactly_at_the_plausibility_threshold_is_kept(lam, anchor):
    alpha = 0.25
    edge = torch.tensor([0.0, math.log(alpha), math.log(alpha) - 1e-9], dtype=torch.float64)
    other = edge - torch.tensor([0.0, 1.0, 1.0], dtype=torch.float64)  # gain 1 on tokens 1, 2
    s, t = (edge, other) if anchor == "student" else (other, edge)
    z = spectrum_scores(s, t, lam, alpha=alpha, c=5.0)
    want = edge + torch.tensor([0.0, 0.5, 0.0], dtype=torch.float64)  # (|λ|−1)/2 · 1
    torch.testing.assert_close(z, want, rtol=0, atol=1e-12)


def test_mask_reads_each_row_of_a_batch_on_its_own():
    # row 0 anchors at max 0, row 1 at max −3: one threshold for the whole tensor would mask
    # all of row 1 (or none of row 0)
    s = torch.tensor([[[0.0, -1.0, -3.0]], [[-3.0, -4.0, -9.0]]], dtype=torch.float64)
    t = s - 1.0  # gain 1 everywhere
    z = spectrum_scores(s, t, 3.0, alpha=0.5, c=5.0)  # keeps ℓ ≥ max − log 2 ≈ max − 0.69
    want = s + torch.tensor([[[1.0, 0.0, 0.0]], [[1.0, 0.0, 0.0]]], dtype=torch.float64)
    torch.testing.assert_close(z, want, rtol=0, atol=1e-12)
    z = spectrum_scores(s, t, 3.0, alpha=0.3, c=5.0)  # max − 1.20: the second token too
    want = s + torch.tensor([[[1.0, 1.0, 0.0]], [[1.0, 1.0, 0.0]]], dtype=torch.float64)
    torch.testing.assert_close(z, want, rtol=0, atol=1e-12)


def test_two_minus_inf_log_probs_give_no_nan():
    s = torch.tensor([0.0, -1.0, -math.inf], dtype=torch.float64)
    t = torch.tensor([-0.5, -0.7, -math.inf], dtype=torch.float64)
    for lam in (3.0, -3.0):
        logp = spectrum_logprobs(s, t, lam)
        assert not torch.isnan(logp).any()
        assert logp[2] == -math.inf
        assert torch.logsumexp(logp, -1).item() == pytest.approx(0.0, abs=1e-12)


def test_logprobs_pass_alpha_and_c_and_normalise():
    s = torch.tensor([0.0, -1.0, -5.0], dtype=torch.float64)
    t = torch.tensor([-4.0, -1.5, -5.0], dtype=torch.float64)
    got = spectrum_logprobs(s, t, 3.0, alpha=0.3, c=10.0)
    want = torch.log_softmax(s + torch.tensor([4.0, 0.5, 0.0], dtype=torch.float64), -1)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    assert torch.logsumexp(spectrum_logprobs(S, T, 0.3), -1).item() == pytest.approx(0.0)


def test_the_clip_caps_the_teacher_side_gain_too():
    t = torch.tensor([0.0, -1.0, -5.0], dtype=torch.float64)
    s = torch.tensor([-4.0, -1.5, -5.0], dtype=torch.float64)  # −r = 4, 0.5, 0
    z = spectrum_scores(s, t, -3.0)  # (−λ−1)/2 = 1
    want = t + torch.tensor([DEFAULT_CLIP, 0.5, 0.0], dtype=torch.float64)
    torch.testing.assert_close(z, want, rtol=0, atol=1e-12)
    z = spectrum_scores(s, t, -3.0, c=0.25)
    want = t + torch.tensor([0.25, 0.25, 0.0], dtype=torch.float64)
    torch.testing.assert_close(z, want, rtol=0, atol=1e-12)
