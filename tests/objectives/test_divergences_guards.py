"""Guards of the divergences' defaults, validation and argument passing (mutation score).

Every expected value is computed here from plain fp64 formulas (softmax, Σ p log p/q), not from
the module under test, so a changed default, a dropped argument or a shifted bound fails.
"""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch
from tests.numerics import divergence_tol, mean_tol

from distillscope.objectives.divergences import (
    FORWARD_KL,
    JSD,
    MIXTURE,
    REVERSE_KL,
    align_vocab,
    divergence_loss,
    masked_mean,
    reduce_tokens,
    shared_vocab,
    token_weights,
)
from distillscope.objectives.options import DivergenceOptions

from .shorthand import plain_loss

forward_kl, reverse_kl, generalized_jsd, kl_mixture = (
    partial(plain_loss, divergence) for divergence in (FORWARD_KL, REVERSE_KL, JSD, MIXTURE)
)

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)


def _logits(seed: int, *shape: int) -> torch.Tensor:
    return 2.0 * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _tol(s, t, ref, count: int, tau_s: float = 1.0, tau_t: float = 1.0) -> float:
    """fp32 tolerance of a divergence of reference values ``ref`` summed over ``count``
    positions (tests/numerics.py)."""
    return count * mean_tol(divergence_tol(s, t, tau_s, tau_t), ref, count)


def _kl_rows(p_logits: torch.Tensor, q_logits: torch.Tensor, tau_p: float, tau_q: float):
    """KL(softmax(p/τ_p) ‖ softmax(q/τ_q)) per position, fp64, by the textbook formula."""
    p = torch.softmax(p_logits.double() / tau_p, dim=-1)
    q = torch.softmax(q_logits.double() / tau_q, dim=-1)
    return (p * (p.log() - q.log())).sum(-1)


def _jsd_rows(s_logits: torch.Tensor, t_logits: torch.Tensor, beta: float) -> torch.Tensor:
    ps, pt = torch.softmax(s_logits.double(), -1), torch.softmax(t_logits.double(), -1)
    m = beta * pt + (1 - beta) * ps
    kl_t = (pt * (pt.log() - m.log())).sum(-1)
    kl_s = (ps * (ps.log() - m.log())).sum(-1)
    return beta * kl_t + (1 - beta) * kl_s


# --- validation -------------------------------------------------------------------------------


def test_the_default_weights_are_valid_for_jsd_and_mixture():
    assert JSD.weights_of(DivergenceOptions()) == {"beta": 0.5}
    assert MIXTURE.weights_of(DivergenceOptions()) == {"alpha": 0.5}
    # β is not forward KL's weight
    assert FORWARD_KL.weights_of(DivergenceOptions(weights={"beta": 7.0})) == {}


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_beta_and_alpha_accept_their_ends(value):
    assert JSD.weights_of(DivergenceOptions(weights={"beta": value})) == {"beta": value}
    assert MIXTURE.weights_of(DivergenceOptions(weights={"alpha": value})) == {"alpha": value}


@pytest.mark.parametrize("value", [-0.01, 1.01, 1.5, 2.5])
def test_beta_and_alpha_refuse_values_outside_unit_interval(value):
    with pytest.raises(ValueError, match="jsd beta must be in"):
        JSD.weights_of(DivergenceOptions(weights={"beta": value}))
    with pytest.raises(ValueError, match="mixture alpha must be in"):
        MIXTURE.weights_of(DivergenceOptions(weights={"alpha": value}))


@pytest.mark.parametrize("kind", ["teacher_temperature", "student_temperature"])
@pytest.mark.parametrize("tau", [0.0, -1.0])
def test_non_positive_temperature_of_either_model_is_refused(kind, tau):
    s, t = _logits(0, 2, 3, 5), _logits(1, 2, 3, 5)
    mask = torch.ones(2, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="temperatures must be positive"):
        forward_kl(s, t, mask, **{kind: tau})
    with pytest.raises(ValueError, match="temperatures must be positive"):
        divergence_loss(s, t, mask, options=DivergenceOptions(**{kind: tau}))


def test_positions_mismatch_message_names_both_shapes():
    s, t = _logits(0, 2, 3, 5), _logits(1, 2, 4, 5)
    msg = r"student logits \(2, 3, 5\) and teacher logits \(2, 4, 5\) must cover the same"
    with pytest.raises(ValueError, match=msg):
        forward_kl(s, t, torch.ones(2, 3, dtype=torch.bool))


def test_mask_shape_message_names_the_mask():
    s, t = _logits(0, 2, 3, 5), _logits(1, 2, 3, 5)
    with pytest.raises(ValueError, match=r"mask_B_T has shape \(2, 4\), expected \(2, 3\)"):
        forward_kl(s, t, torch.ones(2, 4, dtype=torch.bool))


# --- vocabulary widths ------------------------------------------------------------------------


def test_shared_vocab_accepts_one_and_the_smaller_width():
    s, t = _logits(0, 2, 3, 5), _logits(1, 2, 3, 7)
    one_s, one_t = shared_vocab(s, t, 1)
    assert one_s.shape[-1] == one_t.shape[-1] == 1
    full_s, full_t = shared_vocab(s, t, 5)
    assert torch.equal(full_s, s) and torch.equal(full_t, t[..., :5])


def test_shared_vocab_message_names_each_width():
    s, t = _logits(0, 2, 3, 5), _logits(1, 2, 3, 7)
    with pytest.raises(ValueError, match=r"\(student 5, teacher 7\)"):
        shared_vocab(s, t, 9)
    with pytest.raises(ValueError, match=r"\(student 5, teacher 7\)"):
        shared_vocab(s, t, 0)


def test_align_vocab_message_names_the_vocabulary_widths():
    s, t = _logits(0, 2, 3, 5), _logits(1, 2, 3, 7)
    with pytest.raises(ValueError, match=r"widths differ \(5 vs 7\)"):
        align_vocab(s, t, None)


@pytest.mark.parametrize("objective", [forward_kl, reverse_kl, generalized_jsd, kl_mixture])
def test_every_objective_slices_both_heads_to_vocab_size(objective):
    s, t = _logits(0, 2, 3, 5), _logits(1, 2, 3, 8)
    mask = torch.ones(2, 3, dtype=torch.bool)
    sliced, _ = objective(s, t, mask, vocab_size=5)
    same, _ = objective(s, t[..., :5], mask)
    assert torch.equal(sliced, same)


# --- defaults and argument passing, against fp64 references ---------------------------------


def test_the_tokens_of_forward_kl_and_divergence_loss_default():
    s, t = _logits(2, 2, 3, 6), _logits(3, 2, 3, 6)
    ls, lt = torch.log_softmax(s, -1), torch.log_softmax(t, -1)
    ref = _kl_rows(t, s, 1.0, 1.0)
    tol = divergence_tol(s, t)
    torch.testing.assert_close(FORWARD_KL.tokens(ls, lt).double(), ref, rtol=0, atol=tol)
    mask = torch.ones(2, 3, dtype=torch.bool)
    loss, _ = divergence_loss(s, t, mask)
    torch.testing.assert_close(loss.double(), ref.mean(), rtol=0, atol=_tol(s, t, ref, 6) / 6)


def test_kl_mixture_defaults_are_half_and_half_at_temperature_one():
    s, t = _logits(4, 2, 3, 6), _logits(5, 2, 3, 6)
    mask = torch.ones(2, 3, dtype=torch.bool)
    loss, _ = kl_mixture(s, t, mask)
    ref = 0.5 * _kl_rows(t, s, 1.0, 1.0) + 0.5 * _kl_rows(s, t, 1.0, 1.0)
    torch.testing.assert_close(loss.double(), ref.mean(), rtol=0, atol=_tol(s, t, ref, 6) / 6)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.0])
def test_kl_mixture_passes_the_reduction(alpha):
    s, t = _logits(6, 2, 3, 6), _logits(7, 2, 3, 6)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=torch.bool)
    loss, _ = kl_mixture(s, t, mask, alpha=alpha, reduction="sum")
    rows = alpha * _kl_rows(t, s, 1.0, 1.0) + (1 - alpha) * _kl_rows(s, t, 1.0, 1.0)
    torch.testing.assert_close(loss.double(), rows[mask].sum(), rtol=0, atol=_tol(s, t, rows, 3))


@pytest.mark.parametrize("beta", [0.1, 0.5, 0.9])
def test_generalized_jsd_passes_the_reduction(beta):
    s, t = _logits(8, 2, 3, 6), _logits(9, 2, 3, 6)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=torch.bool)
    loss, _ = generalized_jsd(s, t, mask, beta=beta, reduction="sum")
    ref = _jsd_rows(s, t, beta)[mask].sum()
    torch.testing.assert_close(loss.double(), ref, rtol=0, atol=_tol(s, t, ref, 3))


def test_reverse_kl_at_other_temperatures_matches_reference():
    s, t = _logits(10, 2, 3, 6), _logits(11, 2, 3, 6)
    mask = torch.ones(2, 3, dtype=torch.bool)
    loss, metrics = reverse_kl(s, t, mask, student_temperature=0.7, teacher_temperature=1.6)
    ref = _kl_rows(s, t, 0.7, 1.6).mean()
    tol = _tol(s, t, ref, 6, 0.7, 1.6) / 6
    torch.testing.assert_close(loss.double(), ref, rtol=0, atol=tol)
    assert metrics["objective/reverse_kl"] == pytest.approx(float(ref), abs=tol)


# --- weights and masked means -----------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["seq_mean", "token_mean", "sum"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_token_weights_have_the_requested_dtype(reduction, dtype):
    mask = torch.tensor([[1, 0, 1], [0, 0, 0]], dtype=torch.bool)
    w = token_weights(mask, reduction, dtype)
    assert w.dtype == dtype
    assert token_weights(mask, reduction).dtype == torch.float32


def test_token_mean_of_a_single_masked_token_is_that_token():
    values = torch.tensor([[3.0, 7.0, -1.0]])
    mask = torch.tensor([[False, True, False]])
    assert reduce_tokens(values, mask, "token_mean").item() == 7.0
    assert token_weights(mask, "token_mean").tolist() == [[0.0, 1.0, 0.0]]


def test_masked_mean_exact_and_empty():
    values = torch.tensor([[1.0, 2.0, 100.0], [4.0, float("nan"), 8.0]])
    mask = torch.tensor([[True, True, False], [True, False, True]])
    assert masked_mean(values, mask).item() == pytest.approx((1 + 2 + 4 + 8) / 4)
    empty = masked_mean(values, torch.zeros_like(mask))
    assert empty.item() == 0.0 and not math.isnan(empty.item())
