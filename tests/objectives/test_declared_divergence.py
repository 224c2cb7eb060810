"""A divergence declared here, in the test, gets the plain, the chunked and the fused path for free.

The toy is a scaled squared distance between the two distributions (the Brier score of π_S
against π_T), D = (γ/2) Σ_v (π_S − π_T)², with u = ∂D/∂π_S = γ (π_S − π_T), so the softmax
Jacobian gives ∂D/∂a = γ π_S ⊙ (u' − Σ_v π_S u'), u' = π_S − π_T (a = z_S / τ_S). Nothing in the
package names it, nor its weight γ (declared with it, a name no config field has): one
:class:`Divergence` and the three paths must agree with each other and with autograd of its
value, reading γ from :class:`DivergenceOptions` or at its default.

Tolerances: the inputs are float64 (ε ≈ 1.1e-16) and every value is a sum of V = 29 products of
numbers below 1 in magnitude, so paths that only reorder sums agree to ~V·ε ≈ 1e-14; 1e-12 leaves
two orders of margin.
"""

from __future__ import annotations

import pytest
import torch

from distillscope.objectives import ChunkSpec, DivergenceOptions, Weight
from distillscope.objectives.divergences import Divergence, FusedChunk, row_dots
from distillscope.objectives.fused import fused_divergence

from .chunked_reference import chunked_divergence
from .shorthand import plain_loss

B, T, H, H_TEACHER, V = 3, 6, 5, 7, 29
TOLERANCE = {"rtol": 1e-12, "atol": 1e-12}


def _brier_gradient(c: FusedChunk, gamma: float) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(D_C, G_C_V, γ) with γ G = ∂D/∂a; π_S − π_T is written over the spare buffer."""
    gap_C_V = torch.sub(c.p_student_C_V, c.p_teacher_C_V, out=c.spare_C_V)
    value_C = 0.5 * gamma * row_dots(gap_C_V, gap_C_V)
    centred_C = row_dots(c.p_student_C_V, gap_C_V)
    return value_C, gap_C_V.sub_(centred_C[:, None]).mul_(c.p_student_C_V), gamma


BRIER = Divergence(
    "brier",
    value=lambda s, t, gamma: 0.5 * gamma * ((s.exp() - t.exp()) ** 2).sum(-1),
    gradient=_brier_gradient,
    weights=(Weight("gamma", 0.25, "scale of the squared distance"),),
    needs_spare=lambda gamma: True,
)


def _inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    f64 = {"generator": g, "dtype": torch.float64}
    student_hidden, student_head = torch.randn(B, T, H, **f64), 0.8 * torch.randn(V, H, **f64)
    teacher_hidden = torch.randn(B, T, H_TEACHER, **f64)
    teacher_head = 0.8 * torch.randn(V, H_TEACHER, **f64)
    mask = torch.rand(B, T, generator=g) > 0.3
    mask[1] = False  # an empty sequence
    mask[0, 0] = True
    return student_hidden, student_head, teacher_hidden, teacher_head, mask


def _run(path: str, inputs, options: DivergenceOptions, chunk_size: int = 4):
    """(loss, metrics, ∂L/∂h, ∂L/∂W) of ``path`` on the same inputs."""
    hidden, head, teacher_hidden, teacher_head, mask = inputs
    h, w = hidden.clone().requires_grad_(), head.clone().requires_grad_()
    if path == "plain":
        kw = {f: getattr(options, f) for f in ("student_temperature", "teacher_temperature")}
        loss, metrics = plain_loss(
            BRIER, h @ w.T, teacher_hidden @ teacher_head.T, mask, **kw,
            reduction=options.reduction, gamma=options.weights["gamma"],
        )  # fmt: skip
    elif path == "chunked":
        loss, metrics = chunked_divergence(
            h, w, teacher_hidden, teacher_head, mask, divergence=BRIER, chunk_size=chunk_size,
            student_temperature=options.student_temperature,
            teacher_temperature=options.teacher_temperature,
            reduction=options.reduction, gamma=options.weights["gamma"],
        )  # fmt: skip
    else:
        chunks = ChunkSpec(chunk_size=chunk_size)
        loss, metrics, _ = fused_divergence(
            h, w, teacher_hidden, teacher_head, mask, divergence=BRIER, options=options,
            chunks=chunks,
        )  # fmt: skip
    loss.backward()
    return loss.detach(), metrics, h.grad, w.grad


@pytest.mark.parametrize("temperatures", [(1.0, 1.0), (0.7, 2.0)])
@pytest.mark.parametrize("reduction", ["seq_mean", "token_mean", "sum"])
def test_a_declared_divergence_is_equal_on_the_plain_chunked_and_fused_paths(
    temperatures, reduction
):
    options = DivergenceOptions(*temperatures, reduction, {"gamma": 0.6})
    inputs = _inputs(0)
    plain = _run("plain", inputs, options)
    for path in ("chunked", "fused"):
        loss, metrics, grad_h, grad_w = _run(path, inputs, options)
        torch.testing.assert_close(loss, plain[0].to(loss.dtype), **TOLERANCE)
        torch.testing.assert_close(grad_h, plain[2], **TOLERANCE)
        torch.testing.assert_close(grad_w, plain[3], **TOLERANCE)
        for key, value in plain[1].items():
            assert metrics[key] == pytest.approx(value, rel=1e-12, abs=1e-12), (path, key)


def test_the_declared_value_matches_its_definition_and_the_closed_form_matches_autograd():
    """Independent of the package's loss code: D from its formula, ∂D/∂z_S by autograd."""
    hidden, head, teacher_hidden, teacher_head, mask = _inputs(1)
    z_s = (hidden @ head.T)[mask].requires_grad_()  # (N, V)
    z_t = (teacher_hidden @ teacher_head.T)[mask]
    tau_s, tau_t, gamma = 0.7, 1.3, 0.6
    p_s, p_t = torch.softmax(z_s / tau_s, -1), torch.softmax(z_t / tau_t, -1)
    want_N = 0.5 * gamma * ((p_s - p_t) ** 2).sum(-1)
    (want_grad,) = torch.autograd.grad(want_N.sum(), z_s)
    ls, lt = torch.log_softmax(z_s.detach() / tau_s, -1), torch.log_softmax(z_t / tau_t, -1)
    chunk = FusedChunk(ls.clone(), lt.clone(), ls.exp(), lt.exp(), None, None, torch.empty_like(ls))
    value_N, grad_N_V, scale = BRIER.gradient(chunk, gamma=gamma)
    torch.testing.assert_close(value_N, want_N.detach(), **TOLERANCE)
    torch.testing.assert_close(scale * grad_N_V / tau_s, want_grad, **TOLERANCE)


def test_a_declared_divergence_is_a_connected_zero_when_nothing_is_masked():
    hidden, head, teacher_hidden, teacher_head, mask = _inputs(2)
    empty = (hidden, head, teacher_hidden, teacher_head, torch.zeros_like(mask))
    for path in ("plain", "chunked", "fused"):
        loss, metrics, grad_h, grad_w = _run(path, empty, DivergenceOptions(weights={"gamma": 0.6}))
        assert loss.item() == 0.0 and metrics["objective/tokens"] == 0, path
        assert not grad_h.any() and not grad_w.any(), path


def test_its_weight_is_checked_like_any_declared_weight():
    with pytest.raises(ValueError, match=r"brier gamma must be in \[0, 1\], got 1.5"):
        _run("fused", _inputs(3), DivergenceOptions(weights={"gamma": 1.5}))


def test_its_weight_is_read_at_its_default_when_the_options_do_not_name_it():
    inputs = _inputs(4)
    default = _run("fused", inputs, DivergenceOptions())
    named = _run("fused", inputs, DivergenceOptions(weights={"gamma": 0.25}))
    for got, want in zip(default, named, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert BRIER.weights_of(DivergenceOptions(weights={"beta": 0.9})) == {"gamma": 0.25}
