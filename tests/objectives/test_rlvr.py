"""The RLVR stage's objective against direct formulas: group-normalised advantages and the DAPO
clipped surrogate with token-level normalisation."""

import math

import pytest
import torch

from distillscope.objectives.rlvr import GROUP_STD_EPS, dapo_loss, group_advantages


def test_group_advantages_by_hand():
    rewards = torch.tensor([2.0, 0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 2.0])
    adv = group_advantages(rewards, 4)
    # group 1: mean 0.5, population std √(0.75) → (2 − 0.5)/0.866, (0 − 0.5)/0.866
    s = math.sqrt(0.75)
    expect = [1.5 / (s + GROUP_STD_EPS)] + [-0.5 / (s + GROUP_STD_EPS)] * 3 + [0.0] * 4
    assert adv.tolist() == pytest.approx(expect, rel=1e-6)
    assert float(adv[:4].sum()) == pytest.approx(0.0, abs=1e-6)  # centred within the group


def test_group_advantages_refuse_ragged_groups():
    with pytest.raises(ValueError, match="groups of 3"):
        group_advantages(torch.zeros(8), 3)


def _direct(logp, old, adv, mask, lo, hi):
    """Σ over masked tokens of −min(r A, clip(r) A), divided by the number of masked tokens."""
    total, n = 0.0, 0
    for b in range(logp.shape[0]):
        for t in range(logp.shape[1]):
            if mask[b, t]:
                r = math.exp(float(logp[b, t] - old[b, t]))
                a = float(adv[b])
                total += -min(r * a, min(max(r, 1 - lo), 1 + hi) * a)
                n += 1
    return total / n


def test_dapo_loss_matches_the_direct_formula_with_both_clips_active():
    g = torch.Generator().manual_seed(0)
    logp = (-torch.rand(3, 5, generator=g) * 2).requires_grad_(True)
    # old log-probs far from the current ones: ratios well above 1 + ε_high and below 1 − ε_low
    old = logp.detach() + torch.tensor([[0.5, -0.5, 0.0, 0.3, -0.3]] * 3)
    adv = torch.tensor([1.0, -2.0, 0.5])
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    loss, metrics = dapo_loss(logp, old, adv, mask, eps_low=0.2, eps_high=0.28)
    assert float(loss.detach()) == pytest.approx(
        _direct(logp.detach(), old, adv, mask, 0.2, 0.28), rel=1e-6
    )
    assert 0.0 < metrics["rlvr/ratio_clip_frac"] < 1.0
    # token-level normalisation: a long row weighs more than a short one (not per sequence)
    loss.backward()
    grad = logp.grad
    r = torch.exp(logp.detach() - old)
    clipped = ((adv[:, None] > 0) & (r > 1.28)) | ((adv[:, None] < 0) & (r < 0.8))
    expect = torch.where(mask.bool() & ~clipped, -adv[:, None] * r / mask.sum(), 0.0)
    torch.testing.assert_close(grad, expect)


def test_dapo_loss_at_ratio_one_is_reinforce_with_group_advantages():
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -0.1]], requires_grad=True)
    adv = torch.tensor([1.0, -1.0])
    mask = torch.tensor([[1, 1], [1, 0]])
    loss, m = dapo_loss(logp, logp.detach(), adv, mask)
    assert float(loss.detach()) == pytest.approx(-(1 + 1 - 1) / 3)
    assert m["rlvr/ratio_mean"] == pytest.approx(1.0)
    assert m["rlvr/ratio_clip_frac"] == 0.0
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[-1 / 3, -1 / 3], [1 / 3, 0.0]]))


def test_dapo_loss_of_an_all_masked_batch_is_zero_and_finite():
    logp = torch.full((2, 3), -math.inf, requires_grad=True)
    loss, m = dapo_loss(logp, torch.zeros(2, 3), torch.ones(2), torch.zeros(2, 3))
    assert float(loss.detach()) == 0.0 and all(math.isfinite(v) for v in m.values())


def test_dapo_loss_refuses_bad_clips_and_shapes():
    with pytest.raises(ValueError, match="eps_low"):
        dapo_loss(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1), torch.ones(1, 2), eps_low=1)
    with pytest.raises(ValueError, match="advantages_B"):
        dapo_loss(torch.zeros(2, 2), torch.zeros(2, 2), torch.zeros(3), torch.ones(2, 2))


def test_junk_log_probs_at_padding_leave_the_gradient_finite():
    logp = torch.tensor([[-1.0, -math.inf], [-0.5, -math.inf]], requires_grad=True)
    mask = torch.tensor([[1, 0], [1, 0]])
    old = logp.detach().clone()  # the sampler's log-probs: junk at padding too
    loss, _ = dapo_loss(logp, old, torch.tensor([1.0, -1.0]), mask)
    loss.backward()
    assert torch.isfinite(logp.grad).all()
    torch.testing.assert_close(logp.grad, torch.tensor([[-0.5, 0.0], [0.5, 0.0]]))
