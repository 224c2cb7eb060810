"""On-policy distillation policy gradient: REINFORCE at r = 1, regulations, ratio clipping."""

from __future__ import annotations

import math

import pytest
import torch
from tests.numerics import approx_tols, chain_tols, log_softmax_tol

from distillscope.objectives import OPDOptions
from distillscope.objectives.opd import opd_policy_gradient, regulate_advantage

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

B, T, V = 2, 6, 9


def _batch(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, V, generator=generator)
    tokens = torch.randint(0, V, (B, T), generator=generator)
    mask = torch.tensor([[0, 1, 1, 1, 1, 1], [0, 0, 1, 1, 0, 0]], dtype=torch.bool)
    # Teacher log-probs far from the student's so that some |Δℓ| exceed the ±3 hard clip.
    logp_teacher = -6.0 * torch.rand(B, T, generator=generator)
    return logits, tokens, mask, logp_teacher


def _logp_of_tokens(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0):
    return torch.log_softmax(logits / temperature, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize("regulation", ["none", "hard_clip", "log_compress"])
@pytest.mark.parametrize("reduction", ["seq_mean", "token_mean", "sum"])
def test_ratio_one_is_reinforce_with_regulated_rewards(regulation: str, reduction: str) -> None:
    logits, tokens, mask, logp_teacher = _batch()
    logp_old = _logp_of_tokens(logits, tokens, 0.7)  # one update per batch: old == current
    z = logits.clone().requires_grad_()
    loss, metrics = opd_policy_gradient(
        z,
        tokens,
        logp_teacher,
        logp_old,
        mask,
        options=OPDOptions(regulation=regulation),
        student_temperature=0.7,
        reduction=reduction,
    )
    loss.backward()

    # Independent reference: −Σ_t w_t g(Δℓ_t) log π(y_t), w_t from the reduction.
    delta = logp_teacher - logp_old
    reward = {
        "none": delta,
        "hard_clip": delta.clamp(-3.0, 3.0),
        "log_compress": torch.sign(delta) * torch.log(1 + delta.abs()),
    }[regulation]
    lengths = mask.sum(-1, keepdim=True).float()
    weight = {
        "seq_mean": mask / lengths / 2,  # both rows have tokens
        "token_mean": mask / mask.sum(),
        "sum": mask.float(),
    }[reduction]
    z_ref = logits.clone().requires_grad_()
    reference = -(weight * reward * _logp_of_tokens(z_ref, tokens, 0.7)).sum()
    reference.backward()
    # the same fp32 log-softmax (V terms), weighted and summed over the B·T tokens
    torch.testing.assert_close(z.grad, z_ref.grad, **chain_tols(z_ref.grad, V, B * T))
    value = -(weight * reward).sum()
    assert loss.item() == pytest.approx(value.item(), **approx_tols(reward, V, B * T))
    assert metrics["opd/ratio_mean"] == pytest.approx(1.0, **approx_tols(1.0, V, B * T))
    assert metrics["opd/ratio_clip_frac"] == 0.0
    assert metrics["opd/tokens"] == 7


def test_regulations_hand_computed() -> None:
    delta = torch.tensor([-5.0, -1.0, 0.0, 0.5, 4.0])
    assert torch.equal(regulate_advantage(delta, "none"), delta)
    assert torch.equal(
        regulate_advantage(delta, "hard_clip", clip_min=-3.0, clip_max=3.0),
        torch.tensor([-3.0, -1.0, 0.0, 0.5, 3.0]),
    )
    expected = [-math.log(6.0), -math.log(2.0), 0.0, math.log(1.5), math.log(5.0)]
    torch.testing.assert_close(regulate_advantage(delta, "log_compress"), torch.tensor(expected))
    asymmetric = regulate_advantage(delta, "hard_clip", clip_min=-0.5, clip_max=2.0)
    assert asymmetric.tolist() == [-0.5, -0.5, 0.0, 0.5, 2.0]
    with pytest.raises(ValueError, match="regulation"):
        regulate_advantage(delta, "sqrt")  # type: ignore[arg-type]


def test_advantage_metrics() -> None:
    logits, tokens, mask, logp_teacher = _batch(1)
    logp_old = _logp_of_tokens(logits, tokens)
    _, metrics = opd_policy_gradient(
        logits,
        tokens,
        logp_teacher,
        logp_old,
        mask,
        options=OPDOptions(regulation="hard_clip", clip_max=0.5),
    )
    delta = (logp_teacher - logp_old)[mask]
    clipped = delta.clamp(-3.0, 0.5)
    n = int(mask.sum())  # a mean of n values; a std squares, sums n and takes a root
    for key, values in (("opd/raw_advantage", delta), ("opd/advantage", clipped)):
        assert metrics[f"{key}_mean"] == pytest.approx(
            values.mean().item(), **approx_tols(values, n)
        )
        std = values.std(unbiased=False).item()
        assert metrics[f"{key}_std"] == pytest.approx(std, **approx_tols(values, 2 * n))
    hit = ((delta < -3.0) | (delta > 0.5)).float().mean().item()
    assert 0 < hit < 1 and metrics["opd/hard_clip_frac"] == pytest.approx(hit)


def _one_token(advantage_sign: float, ratio: float, eps: float = 0.2):
    """A single position whose Δℓ has ``advantage_sign`` and whose ratio π_θ/π_old is ``ratio``."""
    z = torch.tensor([[[0.5, -0.2, 0.1, 0.0]]], requires_grad=True)
    tokens = torch.tensor([[0]])
    logp_now = _logp_of_tokens(z.detach(), tokens)
    loss, metrics = opd_policy_gradient(
        z,
        tokens,
        logp_now + advantage_sign,  # Δℓ = ±1
        logp_now - math.log(ratio),  # r = exp(log π_θ − log π_old)
        torch.ones(1, 1, dtype=torch.bool),
        options=OPDOptions(eps_low=eps, eps_high=eps),
    )
    (grad,) = torch.autograd.grad(loss, z)
    return loss, metrics, grad, z.detach(), tokens


@pytest.mark.parametrize(
    ("advantage_sign", "ratio", "clipped"),
    [
        (+1.0, 1.5, True),  # positive advantage, ratio already above 1 + ε: stop pushing up
        (+1.0, 0.5, False),  # positive advantage, ratio below 1 − ε: gradient still flows
        (-1.0, 0.5, True),  # negative advantage, ratio already below 1 − ε: stop pushing down
        (-1.0, 1.5, False),  # negative advantage, ratio above 1 + ε: gradient still flows
        (+1.0, 1.1, False),  # inside the trust region
    ],
)
def test_ratio_clipping_zeroes_gradient_outside_trust_region(
    advantage_sign: float, ratio: float, clipped: bool
) -> None:
    loss, metrics, grad, z, tokens = _one_token(advantage_sign, ratio)
    # r = exp(log π_θ − log π_old): the two fp32 log-probs' errors, relative to r
    assert metrics["opd/ratio_mean"] == pytest.approx(ratio, rel=2 * log_softmax_tol(z))
    assert metrics["opd/ratio_clip_frac"] == (1.0 if clipped else 0.0)
    if clipped:
        bound = 1.2 if advantage_sign > 0 else 0.8
        assert loss.item() == pytest.approx(-bound * advantage_sign, **approx_tols(bound, 4))
        assert torch.equal(grad, torch.zeros_like(grad))
    else:
        # ∇(−r A) = −A r ∇log π(y) = −A r (e_y − π)
        probs = torch.softmax(z, -1)
        expected = -advantage_sign * ratio * (torch.nn.functional.one_hot(tokens, 4) - probs)
        torch.testing.assert_close(grad, expected, **chain_tols(expected, 4))


def test_padding_junk_and_all_masked() -> None:
    logits, tokens, mask, logp_teacher = _batch(2)
    logp_old = _logp_of_tokens(logits, tokens)
    junk_tokens = torch.where(mask, tokens, torch.full_like(tokens, -100))
    junk_old = torch.where(mask, logp_old, torch.full_like(logp_old, -math.inf))
    junk_teacher = torch.where(mask, logp_teacher, torch.full_like(logp_teacher, math.nan))
    z = logits.clone().requires_grad_()
    loss, metrics = opd_policy_gradient(z, junk_tokens, junk_teacher, junk_old, mask)
    loss.backward()
    assert math.isfinite(loss.item()) and torch.isfinite(z.grad).all()
    assert all(math.isfinite(v) for v in metrics.values())

    z.grad = None
    empty = torch.zeros_like(mask)
    loss, metrics = opd_policy_gradient(z, tokens, logp_teacher, logp_old, empty)
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(z.grad, torch.zeros_like(z))
    assert metrics["opd/tokens"] == 0 and all(math.isfinite(v) for v in metrics.values())


def test_bad_options_raise() -> None:
    logits, tokens, mask, logp_teacher = _batch()
    args = (logits, tokens, logp_teacher, logp_teacher, mask)
    with pytest.raises(ValueError, match="clip_min"):
        opd_policy_gradient(
            *args, options=OPDOptions(regulation="hard_clip", clip_min=1.0, clip_max=1.0)
        )
    with pytest.raises(ValueError, match="eps_low"):
        opd_policy_gradient(*args, options=OPDOptions(eps_low=1.0))
    with pytest.raises(ValueError, match="logp_old_B_T"):
        opd_policy_gradient(logits, tokens, logp_teacher, logp_teacher[:, :-1], mask)
