"""Guards of the sampled / rollout-token estimators and k1/k2/k3 (mutation score).

Expected values come from plain fp64 formulas written here: the token a uniform picks by
inverse CDF (the first v with F(v) > u), −ℓ_S(y), sg[ℓ_S − ℓ_T]·ℓ_S(y), Schulman's k1/k2/k3.
"""

from __future__ import annotations

import math

import pytest
import torch
from tests.numerics import log_softmax_tol, scale

from distillscope.objectives.estimators import (
    FORWARD_SAMPLED,
    REVERSE_SAMPLED,
    draw_uniforms,
    kl_metrics_by_writer,
    kl_sample_metrics,
    sampled_token_loss,
)

from .shorthand import (
    rollout_token_forward_kl,
    rollout_token_reverse_kl,
    sampled_forward_kl,
    sampled_reverse_kl,
)

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

B, T, V = 2, 3, 5
MASK = torch.tensor([[True, True, True], [True, False, False]])  # seq_mean ≠ token_mean


def _logits(seed: int, *shape: int) -> torch.Tensor:
    return 2.0 * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _logp(z: torch.Tensor, tau: float) -> torch.Tensor:
    return torch.log_softmax(z.double() / tau, dim=-1)


def _inverse_cdf(logp_B_T_V: torch.Tensor, u_B_T: torch.Tensor) -> torch.Tensor:
    """min{v : F(v) > u}, position by position, in plain Python."""
    out = torch.zeros(u_B_T.shape, dtype=torch.long)
    for b in range(u_B_T.shape[0]):
        for t in range(u_B_T.shape[1]):
            cdf = 0.0
            for v, p in enumerate(logp_B_T_V[b, t].exp().tolist()):
                cdf += p
                if cdf > u_B_T[b, t].item():
                    out[b, t] = v
                    break
            else:
                out[b, t] = logp_B_T_V.shape[-1] - 1
    return out


def _seq_mean(values_B_T: torch.Tensor, mask_B_T: torch.Tensor) -> float:
    rows = [
        values_B_T[b][mask_B_T[b]].mean().item() for b in range(len(mask_B_T)) if mask_B_T[b].any()
    ]
    return sum(rows) / len(rows)


def _tol(s, t, tau_s: float, tau_t: float, *values: torch.Tensor) -> float:
    """fp32 tolerance of a mean of log-probs or of products ``ratio · ℓ_S`` (``values``: the
    factors' fp64 references) against fp64: each fp32 log-prob within :func:`log_softmax_tol`,
    a product within that times twice its larger factor."""
    error = log_softmax_tol(s, tau_s) + log_softmax_tol(t, tau_t)
    return 2 * error * scale(*values)


def _picked(logp_B_T_V: torch.Tensor, tokens_B_T: torch.Tensor) -> torch.Tensor:
    return logp_B_T_V.gather(-1, tokens_B_T.unsqueeze(-1)).squeeze(-1)


# --- which model the extra token is drawn from, and the loss it gets -------------------------


@pytest.mark.parametrize("tau_s, tau_t", [(1.0, 1.0), (0.5, 2.0)])
def test_sampled_forward_kl_draws_from_the_teacher(tau_s, tau_t):
    s, t = _logits(0, B, T, V), _logits(1, B, T, V)
    u = torch.tensor([[0.05, 0.5, 0.95], [0.3, 0.7, 0.2]])
    loss, metrics = sampled_forward_kl(
        s, t, MASK, uniforms_B_T=u, student_temperature=tau_s, teacher_temperature=tau_t
    )
    ls, lt = _logp(s, tau_s), _logp(t, tau_t)
    y = _inverse_cdf(lt, u)
    tol = _tol(s, t, tau_s, tau_t)
    assert loss.item() == pytest.approx(_seq_mean(-_picked(ls, y), MASK), abs=tol)
    estimate = (_picked(lt, y) - _picked(ls, y))[MASK].mean().item()
    assert metrics["objective/forward_kl_estimate"] == pytest.approx(estimate, abs=tol)
    assert metrics["objective/tokens"] == 4.0


@pytest.mark.parametrize("tau_s, tau_t", [(1.0, 1.0), (0.5, 2.0)])
def test_sampled_reverse_kl_draws_from_the_student(tau_s, tau_t):
    s, t = _logits(2, B, T, V), _logits(3, B, T, V)
    u = torch.tensor([[0.05, 0.5, 0.95], [0.3, 0.7, 0.2]])
    loss, metrics = sampled_reverse_kl(
        s, t, MASK, uniforms_B_T=u, student_temperature=tau_s, teacher_temperature=tau_t
    )
    ls, lt = _logp(s, tau_s), _logp(t, tau_t)
    y = _inverse_cdf(ls, u)
    ratio = _picked(ls, y) - _picked(lt, y)
    tol = _tol(s, t, tau_s, tau_t, ratio, _picked(ls, y))
    assert loss.item() == pytest.approx(_seq_mean(ratio * _picked(ls, y), MASK), abs=tol)
    estimate = ratio[MASK].mean().item()
    assert metrics["objective/reverse_kl_estimate"] == pytest.approx(estimate, abs=tol)


@pytest.mark.parametrize("estimator", [sampled_forward_kl, sampled_reverse_kl])
def test_sampled_estimators_default_to_seq_mean_at_temperature_one(estimator):
    s, t = _logits(4, B, T, V), _logits(5, B, T, V)
    gen = torch.Generator().manual_seed(7)
    u = torch.rand(B, T, generator=torch.Generator().manual_seed(7))
    default, default_metrics = estimator(s, t, MASK, generator=gen)
    explicit, explicit_metrics = estimator(
        s,
        t,
        MASK,
        uniforms_B_T=u,
        student_temperature=1.0,
        teacher_temperature=1.0,
        reduction="seq_mean",
    )
    assert default.item() == explicit.item()
    assert default_metrics == explicit_metrics  # the estimate reads ℓ_T at τ_T = 1 too
    token_mean, _ = estimator(s, t, MASK, uniforms_B_T=u, reduction="token_mean")
    assert token_mean.item() != default.item()


@pytest.mark.parametrize("estimator", [sampled_forward_kl, sampled_reverse_kl])
def test_sampled_estimators_pass_reduction_and_vocab_size(estimator):
    s, t = _logits(6, B, T, V), _logits(7, B, T, V + 3)
    u = torch.rand(B, T, generator=torch.Generator().manual_seed(1))
    sliced, _ = estimator(s, t, MASK, uniforms_B_T=u, reduction="sum", vocab_size=V)
    same, _ = estimator(s, t[..., :V], MASK, uniforms_B_T=u, reduction="sum")
    assert sliced.item() == same.item()
    mean, _ = estimator(s, t[..., :V], MASK, uniforms_B_T=u, reduction="token_mean")
    assert same.item() == pytest.approx(4 * mean.item(), abs=4 * _tol(s, t, 1.0, 1.0, same))


@pytest.mark.parametrize("tau_s, tau_t", [(1.0, 1.0), (0.5, 2.0)])
def test_rollout_token_estimators_score_the_given_tokens(tau_s, tau_t):
    s, t = _logits(8, B, T, V), _logits(9, B, T, V)
    tokens = torch.tensor([[0, 4, 2], [3, 999, -5]])  # masked positions may hold any id
    kw = {"student_temperature": tau_s, "teacher_temperature": tau_t}
    fwd, fm = rollout_token_forward_kl(s, t, tokens, MASK, **kw)
    rev, rm = rollout_token_reverse_kl(s, t, tokens, MASK, **kw)
    ls, lt = _logp(s, tau_s), _logp(t, tau_t)
    y = tokens.masked_fill(~MASK, 0)
    ratio = _picked(ls, y) - _picked(lt, y)
    tol = _tol(s, t, tau_s, tau_t, ratio[MASK], _picked(ls, y)[MASK])
    assert fwd.item() == pytest.approx(_seq_mean(-_picked(ls, y), MASK), abs=tol)
    assert rev.item() == pytest.approx(_seq_mean(ratio * _picked(ls, y), MASK), abs=tol)
    assert fm["objective/forward_kl_estimate"] == pytest.approx(-ratio[MASK].mean().item(), abs=tol)
    assert rm["objective/reverse_kl_estimate"] == pytest.approx(ratio[MASK].mean().item(), abs=tol)


@pytest.mark.parametrize("estimator", [rollout_token_forward_kl, rollout_token_reverse_kl])
def test_rollout_token_estimators_defaults_and_vocab_size(estimator):
    s, t = _logits(10, B, T, V), _logits(11, B, T, V + 2)
    tokens = torch.tensor([[0, 4, 2], [3, 1, 1]])
    sliced, sliced_metrics = estimator(s, t, tokens, MASK, vocab_size=V)
    explicit, explicit_metrics = estimator(
        s,
        t[..., :V],
        tokens,
        MASK,
        student_temperature=1.0,
        teacher_temperature=1.0,
        reduction="seq_mean",
    )
    assert sliced.item() == explicit.item()
    assert sliced_metrics == explicit_metrics  # the estimate reads ℓ_T at τ_T = 1 too
    summed, _ = estimator(s, t[..., :V], tokens, MASK, reduction="sum")
    assert summed.item() != pytest.approx(explicit.item())


def test_shape_errors_name_the_offending_tensor():
    s, t = _logits(0, B, T, V), _logits(1, B, T, V)
    with pytest.raises(ValueError, match=r"mask_B_T has shape \(2, 4\), expected \(2, 3\)"):
        sampled_forward_kl(s, t, torch.ones(B, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"uniforms_B_T has shape \(2, 2\), expected \(2, 3\)"):
        sampled_forward_kl(s, t, MASK, uniforms_B_T=torch.rand(B, 2))
    with pytest.raises(ValueError, match=r"tokens_B_T has shape \(2,\), expected \(2, 3\)"):
        rollout_token_forward_kl(s, t, torch.zeros(B, dtype=torch.long), MASK)
    msg = r"student logits \(2, 3, 5\) and teacher logits \(2, 2, 5\) must cover the same"
    with pytest.raises(ValueError, match=msg):
        sampled_forward_kl(s, t[:, :2], MASK)
    for tau in ({"teacher_temperature": 0.0}, {"student_temperature": 0.0}):
        with pytest.raises(ValueError, match="temperatures must be positive"):
            sampled_forward_kl(s, t, MASK, **tau)
        with pytest.raises(ValueError, match="temperatures must be positive"):
            rollout_token_reverse_kl(s, t, torch.zeros(B, T, dtype=torch.long), MASK, **tau)


def test_padding_ids_never_index_the_vocabulary():
    # a one-token vocabulary: any id but 0 at a padding position would be out of range
    s, t = torch.zeros(1, 2, 1), torch.zeros(1, 2, 1)
    tokens = torch.tensor([[0, 5]])
    mask = torch.tensor([[True, False]])
    for estimator in (rollout_token_forward_kl, rollout_token_reverse_kl):
        loss, metrics = estimator(s, t, tokens, mask)
        assert loss.item() == 0.0 and metrics["objective/tokens"] == 1.0


# --- the loss's gradient and metrics ----------------------------------------------------------


def test_sampled_token_loss_gradients_and_metrics_exact():
    ls = torch.tensor([[-0.5, -2.0, -1.0]], requires_grad=True)
    lt = torch.tensor([[-1.5, -0.5, -3.0]])
    mask = torch.tensor([[True, True, False]])
    loss, m = sampled_token_loss(ls, lt, mask, REVERSE_SAMPLED, "sum")
    (grad,) = torch.autograd.grad(loss, ls)
    assert grad.tolist() == [[1.0, -1.5, 0.0]]  # sg[ℓ_S − ℓ_T] per kept token, no more
    assert loss.item() == pytest.approx(1.0 * -0.5 + -1.5 * -2.0)
    assert m == pytest.approx(
        {"objective/loss": 2.5, "objective/reverse_kl_estimate": -0.25, "objective/tokens": 2.0}
    )
    loss, m = sampled_token_loss(ls, lt, mask, FORWARD_SAMPLED, "sum")
    (grad,) = torch.autograd.grad(loss, ls)
    assert grad.tolist() == [[-1.0, -1.0, 0.0]]
    assert m == pytest.approx(
        {"objective/loss": 2.5, "objective/forward_kl_estimate": 0.25, "objective/tokens": 2.0}
    )


def test_draw_uniforms_follow_the_generator_and_device():
    a = draw_uniforms((3, 4), torch.Generator().manual_seed(5))
    b = draw_uniforms((3, 4), torch.Generator().manual_seed(5), "cpu")
    assert a.shape == (3, 4) and torch.equal(a, b)
    assert float(a.min()) >= 0.0 and float(a.max()) < 1.0
    assert torch.equal(a, torch.rand((3, 4), generator=torch.Generator().manual_seed(5)))
    torch.manual_seed(11)
    c = draw_uniforms((2,), None)
    torch.manual_seed(11)
    assert torch.equal(c, torch.rand(2)) and c.device.type == "cpu"


# --- k1 / k2 / k3 -----------------------------------------------------------------------------


def test_k1_k2_k3_exact_values():
    ls = torch.tensor([[-1.0, -2.0, -0.5]])
    lt = torch.tensor([[-1.5, -1.0, -9.0]])
    mask = torch.tensor([[True, True, False]])
    m = kl_sample_metrics(ls, lt, mask)
    log_r = [-0.5, 1.0]  # ℓ_T − ℓ_S on the kept tokens
    k1 = sum(-x for x in log_r) / 2
    k2 = sum(0.5 * x * x for x in log_r) / 2
    k3 = sum(math.expm1(x) - x for x in log_r) / 2
    assert m == pytest.approx({"kl/k1": k1, "kl/k2": k2, "kl/k3": k3}, rel=1e-6)


def test_k3_is_never_negative_and_empty_mask_gives_zeros():
    ls = torch.tensor([[-1.0, -1.0 + 1e-7]])
    m = kl_sample_metrics(ls, ls.clone(), torch.ones(1, 2, dtype=torch.bool))
    assert m["kl/k3"] >= 0.0
    empty = kl_sample_metrics(ls, ls + 1, torch.zeros(1, 2, dtype=torch.bool))
    assert empty == {"kl/k1": 0.0, "kl/k2": 0.0, "kl/k3": 0.0}


def test_k_metrics_shape_errors_name_the_tensor():
    ls = torch.zeros(1, 3)
    with pytest.raises(ValueError, match="logp_teacher_sampled_B_T has shape"):
        kl_sample_metrics(ls, torch.zeros(1, 2), torch.ones(1, 3))
    with pytest.raises(ValueError, match="mask_B_T has shape"):
        kl_sample_metrics(ls, ls, torch.ones(1, 2))


def test_kl_metrics_by_writer_swaps_roles_for_teacher_rows():
    ls = torch.tensor([[-1.0, -2.0], [-0.5, -3.0], [-1.0, -1.0]])
    lt = torch.tensor([[-1.5, -1.0], [-1.0, -2.0], [-4.0, -4.0]])
    mask = torch.ones(3, 2, dtype=torch.bool)
    student_rows = torch.tensor([True, False, False])
    teacher_rows = torch.tensor([False, True, False])  # row 2: written jointly, in neither
    out = kl_metrics_by_writer(ls, lt, mask, student_rows, teacher_rows)
    on_student = kl_sample_metrics(ls[:1], lt[:1], mask[:1])
    on_teacher = kl_sample_metrics(lt[1:2], ls[1:2], mask[1:2])
    expected = {**on_student, **{f"kl/forward_k{i}": on_teacher[f"kl/k{i}"] for i in (1, 2, 3)}}
    assert out == pytest.approx(expected)
    assert out["kl/forward_k1"] == pytest.approx((-0.5 + 1.0) / 2)  # ℓ_T − ℓ_S, y ~ π_T


def test_kl_metrics_by_writer_leaves_out_a_family_without_tokens():
    ls, lt = torch.tensor([[-1.0, -2.0]]), torch.tensor([[-1.5, -1.0]])
    mask = torch.tensor([[True, True]])
    yes, no = torch.tensor([True]), torch.tensor([False])
    assert set(kl_metrics_by_writer(ls, lt, mask, yes, no)) == {"kl/k1", "kl/k2", "kl/k3"}
    assert set(kl_metrics_by_writer(ls, lt, mask, no, yes)) == {
        "kl/forward_k1",
        "kl/forward_k2",
        "kl/forward_k3",
    }
    assert kl_metrics_by_writer(ls, lt, ~mask, yes, yes) == {}
