"""Guards of OPD's regulations, trust region and metrics against hand-computed values.

Every expected number below is worked out by hand from docs/method.md §4:
Δℓ = ℓ_T − ℓ_S, A = g(Δℓ), r = exp(ℓ_θ − ℓ_old), loss_t = −min(r A, clip(r, 1 − ε_l, 1 + ε_h) A).
"""

from __future__ import annotations

import math

import pytest
import torch

from distillscope.objectives.opd import opd_from_logprobs, opd_policy_gradient, regulate_advantage
from distillscope.objectives.options import OPDOptions


def test_regulate_advantage_defaults_are_identity_and_clip_at_three():
    x = torch.tensor([-5.0, -3.0, -0.5, 0.0, 2.0, 3.0, 7.0])
    assert torch.equal(regulate_advantage(x), x)
    assert regulate_advantage(x, "hard_clip").tolist() == [-3.0, -3.0, -0.5, 0.0, 2.0, 3.0, 3.0]
    got = regulate_advantage(x, "log_compress").tolist()
    want = [math.copysign(math.log1p(abs(v)), v) if v else 0.0 for v in x.tolist()]
    assert got == pytest.approx(want)


def test_regulate_advantage_refuses_bad_inputs():
    x = torch.zeros(2)
    with pytest.raises(ValueError, match=r"clip_min \(1.0\) must be below clip_max \(1.0\)"):
        regulate_advantage(x, "hard_clip", clip_min=1.0, clip_max=1.0)
    with pytest.raises(ValueError, match="regulation must be one of"):
        regulate_advantage(x, "softclip")  # type: ignore[arg-type]
    # clip bounds matter only to hard_clip
    assert torch.equal(regulate_advantage(x, "none", clip_min=2.0, clip_max=1.0), x)


def _case():
    """Four kept tokens and a padded one holding junk (−inf, NaN), ratios inside and outside
    the clip."""
    logp = torch.tensor([[-1.0, -1.0, -1.0, -1.0, -2.0]])
    teacher = torch.tensor([[0.0, -5.0, -0.5, -1.5, -float("inf")]])  # Δℓ = 1, −4, 0.5, −0.5
    # r = e^{0.5} (above 1.2), e^{-0.5} (below 0.8), 1, e^{0.1}
    old = torch.tensor([[-1.5, -0.5, -1.0, -1.1, float("nan")]])
    mask = torch.tensor([[True, True, True, True, False]])
    return logp, teacher, old, mask


def test_opd_loss_and_metrics_exact_with_hard_clip():
    logp, teacher, old, mask = _case()
    options = OPDOptions(regulation="hard_clip", clip_min=-2.0, clip_max=0.75)
    leaf = logp.clone().requires_grad_()
    loss, m = opd_from_logprobs(leaf, teacher, old, mask, options=options, reduction="sum")
    r = [math.exp(0.5), math.exp(-0.5), 1.0, math.exp(0.1)]
    adv = [0.75, -2.0, 0.5, -0.5]
    clipped = [min(max(x, 0.8), 1.2) for x in r]
    per_token = [-min(ri * a, ci * a) for ri, a, ci in zip(r, adv, clipped, strict=True)]
    assert loss.item() == pytest.approx(sum(per_token), rel=1e-6)
    # d/dℓ_θ of −r·A where the unclipped branch is the minimum, 0 where the clip acts
    (grad,) = torch.autograd.grad(loss, leaf)
    want = [0.0, 0.0, -1.0 * 0.5, -math.exp(0.1) * -0.5, 0.0]
    assert grad[0].tolist() == pytest.approx(want, rel=1e-6)
    raw = [1.0, -4.0, 0.5, -0.5]
    raw_mean = sum(raw) / 4
    adv_mean = sum(adv) / 4
    expected = {
        "opd/loss": sum(per_token),
        "opd/raw_advantage_mean": raw_mean,
        "opd/raw_advantage_std": math.sqrt(sum((x - raw_mean) ** 2 for x in raw) / 4),
        "opd/advantage_mean": adv_mean,
        "opd/advantage_std": math.sqrt(sum((x - adv_mean) ** 2 for x in adv) / 4),
        "opd/hard_clip_frac": 2 / 4,  # Δℓ = 1 > 0.75 and −4 < −2
        "opd/ratio_mean": sum(r) / 4,
        "opd/ratio_clip_frac": 2 / 4,  # A > 0 with r > 1.2; A < 0 with r < 0.8
        "opd/tokens": 4.0,
    }
    assert m == pytest.approx(expected, rel=1e-6)


def test_hard_clip_frac_counts_only_strictly_outside_the_bounds():
    logp = torch.zeros(1, 4)
    teacher = torch.tensor([[-3.0, 3.0, -3.001, 3.001]])  # at both bounds, then past them
    mask = torch.ones(1, 4, dtype=torch.bool)
    _, m = opd_from_logprobs(logp, teacher, logp, mask, options=OPDOptions("hard_clip"))
    assert m["opd/hard_clip_frac"] == 0.5


def test_ratio_at_the_trust_region_edge_is_not_clipped():
    # ε = 0: the region is the single point r = 1, and r = 1 exactly sits on both of its edges
    logp = torch.zeros(1, 2)
    teacher = torch.tensor([[1.0, -1.0]])  # A > 0 and A < 0
    options = OPDOptions(eps_low=0.0, eps_high=0.0)
    _, m = opd_from_logprobs(logp, teacher, logp, torch.ones(1, 2), options=options)
    assert m["opd/ratio_clip_frac"] == 0.0
    options = OPDOptions(eps_low=0.25, eps_high=0.25)
    old = torch.tensor([[-0.1, 0.5]])  # r = e^{0.1} inside with A > 0, r = e^{−0.5} < 0.75, A < 0
    _, m = opd_from_logprobs(logp, teacher, old, torch.ones(1, 2), options=options)
    assert m["opd/ratio_clip_frac"] == 0.5
    _, m = opd_from_logprobs(logp, -teacher, old, torch.ones(1, 2), options=options)
    assert m["opd/ratio_clip_frac"] == 0.0  # signs swapped: the clip never binds


@pytest.mark.parametrize(
    "options, message",
    [
        (OPDOptions(eps_low=1.0), "need 0 ≤ eps_low < 1"),
        (OPDOptions(eps_low=-0.1), "need 0 ≤ eps_low < 1"),
        (OPDOptions(eps_high=-0.1), "eps_high ≥ 0"),
        (OPDOptions(clip_min=3.0, clip_max=3.0), "must be below clip_max"),
        (OPDOptions(regulation="clip"), "regulation must be one of"),  # type: ignore[arg-type]
    ],
)
def test_opd_from_logprobs_refuses_bad_options(options, message):
    x = torch.zeros(1, 2)
    with pytest.raises(ValueError, match=message):
        opd_from_logprobs(x, x, x, torch.ones(1, 2), options=options)


def test_trust_region_ends_are_accepted():
    x = torch.zeros(1, 2)
    for options in (OPDOptions(eps_low=0.0, eps_high=0.0), OPDOptions(eps_low=0.99)):
        loss, _ = opd_from_logprobs(x, x, x, torch.ones(1, 2), options=options)
        assert loss.item() == 0.0


def test_shape_errors_name_the_tensor():
    x = torch.zeros(1, 3)
    bad = torch.zeros(1, 2)
    for i, name in enumerate(("logp_teacher_B_T", "logp_old_B_T", "mask_B_T")):
        args = [x, x, x, torch.ones(1, 3)]
        args[i + 1] = bad
        with pytest.raises(ValueError, match=rf"{name} has shape \(1, 2\), expected \(1, 3\)"):
            opd_from_logprobs(*args)
    with pytest.raises(ValueError, match="logp_student_fixed_B_T has shape"):
        opd_from_logprobs(x, x, x, torch.ones(1, 3), logp_student_fixed_B_T=bad)
    z = torch.zeros(1, 3, 4)
    with pytest.raises(ValueError, match=r"tokens_B_T has shape \(1, 2\)"):
        opd_policy_gradient(z, torch.zeros(1, 2, dtype=torch.long), x, x, torch.ones(1, 3))
    with pytest.raises(ValueError, match=r"mask_B_T has shape \(1, 2\)"):
        opd_policy_gradient(z, torch.zeros(1, 3, dtype=torch.long), x, x, torch.ones(1, 2))
    with pytest.raises(ValueError, match="temperatures must be positive"):
        opd_policy_gradient(
            z, torch.zeros(1, 3, dtype=torch.long), x, x, torch.ones(1, 3), student_temperature=0.0
        )


def test_fixed_student_side_sets_the_advantage_only_on_kept_tokens():
    logp = torch.tensor([[-1.0, -2.0, -1.0]])
    teacher = torch.tensor([[-0.5, -0.5, -0.5]])
    fixed = torch.tensor([[-3.0, -1.0, float("nan")]])
    mask = torch.tensor([[True, True, False]])
    _, m = opd_from_logprobs(logp, teacher, logp, mask, logp_student_fixed_B_T=fixed)
    assert m["opd/raw_advantage_mean"] == pytest.approx((2.5 + 0.5) / 2)
    _, m = opd_from_logprobs(logp, teacher, logp, mask)
    assert m["opd/raw_advantage_mean"] == pytest.approx((0.5 + 1.5) / 2)


def test_policy_gradient_defaults_and_tempered_log_probs():
    z = torch.tensor([[[0.0, 1.0, 2.0], [2.0, 0.0, -1.0]], [[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]])
    tokens = torch.tensor([[2, 0], [1, 77]])  # a padding id outside the vocabulary
    mask = torch.tensor([[True, True], [True, False]])
    teacher = torch.full((2, 2), -0.7)
    for tau in (1.0, 0.5):
        ell = torch.log_softmax(z.double() / tau, -1)
        picked = ell.gather(-1, tokens.masked_fill(~mask, 0).unsqueeze(-1)).squeeze(-1).float()
        loss, m = opd_policy_gradient(z, tokens, teacher, picked, mask, student_temperature=tau)
        adv = (teacher - picked)[mask]
        # r = 1: loss = −A per token, seq_mean over rows [2 tokens], [1 token]
        want = -(adv[:2].mean() + adv[2:].mean()) / 2
        assert loss.item() == pytest.approx(want.item(), rel=1e-5)
        assert m["opd/ratio_mean"] == pytest.approx(1.0)
    default, _ = opd_policy_gradient(z, tokens, teacher, picked, mask)
    assert default.item() != pytest.approx(loss.item())  # the default τ_S is 1, not 0.5


def test_policy_gradient_passes_options_and_reduction():
    z = torch.tensor([[[0.0, 1.0, 2.0], [2.0, 0.0, -1.0], [0.0, 0.0, 0.0]]])
    tokens = torch.tensor([[2, 0, 1]])
    mask = torch.tensor([[True, True, True]])
    ell = torch.log_softmax(z, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    teacher = ell + torch.tensor([[5.0, -5.0, 0.5]])
    options = OPDOptions(regulation="hard_clip", clip_min=-1.0, clip_max=1.0)
    loss, m = opd_policy_gradient(z, tokens, teacher, ell, mask, options=options, reduction="sum")
    assert loss.item() == pytest.approx(-(1.0 - 1.0 + 0.5), abs=1e-6)
    assert m["opd/hard_clip_frac"] == pytest.approx(2 / 3)


def test_ratio_clip_frac_ignores_zero_and_small_positive_advantages():
    # A = 0 (Δℓ = 0) and A = 0.5 with r far outside [0.8, 1.2]: the clip does not bind
    logp = torch.zeros(1, 4)
    teacher = torch.tensor([[0.0, 0.0, 0.5, 0.5]])
    old = torch.tensor([[-0.5, 0.5, 0.5, 0.5]])  # r = e^{0.5}, e^{−0.5}, e^{−0.5}, e^{−0.5}
    _, m = opd_from_logprobs(logp, teacher, old, torch.ones(1, 4))
    assert m["opd/ratio_clip_frac"] == 0.0


def test_fixed_student_side_keeps_the_loss_in_the_log_probs_dtype():
    logp = torch.tensor([[-1.0, -2.0]])
    fixed = torch.tensor([[-1.5, -2.5]], dtype=torch.float64)
    loss, _ = opd_from_logprobs(logp, logp, logp, torch.ones(1, 2), logp_student_fixed_B_T=fixed)
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(-0.5)  # A = 0.5 on both tokens, r = 1


def test_policy_gradient_padding_ids_never_index_the_vocabulary():
    z = torch.zeros(1, 2, 1)  # a one-token vocabulary: only id 0 exists
    tokens = torch.tensor([[0, 5]])
    mask = torch.tensor([[True, False]])
    x = torch.zeros(1, 2)
    loss, m = opd_policy_gradient(z, tokens, x, x, mask)
    assert loss.item() == 0.0 and m["opd/tokens"] == 1.0


def test_a_current_log_prob_of_minus_inf_at_padding_leaves_the_gradient_finite():
    """Junk in the differentiable log-probs themselves (a direct caller's padding): the
    reduction drops the position, and its NaN must not reach the gradient either."""
    logp = torch.tensor([[-1.0, -float("inf")]], requires_grad=True)
    mask = torch.tensor([[1, 0]])
    loss, _ = opd_from_logprobs(logp, torch.tensor([[-0.5, 0.0]]), logp.detach(), mask)
    loss.backward()
    assert torch.isfinite(logp.grad).all() and logp.grad[0, 1] == 0.0
