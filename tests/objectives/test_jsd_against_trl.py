"""Generalised JSD and both KLs against TRL's ``GKDTrainer.generalized_jsd_loss`` (reference).

TRL is a test-only dependency; without it this module is skipped. It is marked ``slow`` only
because importing ``GKDTrainer`` pulls in ``transformers.Trainer`` (8–15 s on 2 CPU cores); the
comparisons themselves take milliseconds.

How TRL's conventions map to ours (read from trl/experimental/gkd/gkd_trainer.py, trl 1.16):

- ``F.kl_div(input, target, log_target=True)`` is KL(target ‖ input) summed per element.
- β = 0: TRL returns ``kl_div(student_log_probs, teacher_log_probs)`` = KL(π_T ‖ π_S), our
  forward KL — whereas the generalised JSD *definition* gives exactly 0 at β = 0, which is what
  our JSD returns.
- β = 1: TRL returns ``kl_div(teacher_log_probs, student_log_probs)`` = KL(π_S ‖ π_T), our
  reverse KL (and again our JSD is exactly 0).
- 0 < β < 1: TRL's mixture is M = β π_T + (1−β) π_S and its loss β KL(π_T‖M) + (1−β) KL(π_S‖M),
  the same as ours.
- ``reduction="batchmean"`` with ``labels`` (−100 = ignored) divides the sum over kept tokens
  by their count: our ``token_mean``. One ``temperature`` divides both models' logits.
"""

from __future__ import annotations

from functools import partial

import pytest
import torch
from tests.numerics import divergence_tol, mean_tol

from distillscope.objectives.divergences import FORWARD_KL, JSD, REVERSE_KL

from .shorthand import plain_loss

forward_kl, reverse_kl, generalized_jsd = (
    partial(plain_loss, divergence) for divergence in (FORWARD_KL, REVERSE_KL, JSD)
)

pytestmark = [pytest.mark.slow, pytest.mark.numerics]  # numerics: re-run (Makefile)

B, T, V = 2, 6, 13


@pytest.fixture(scope="module")
def trl_jsd():
    """TRL's reference, imported only when a test here runs (the import is the slow part)."""
    gkd = pytest.importorskip(
        "trl.experimental.gkd",
        reason="trl (test-only reference for the generalised JSD) is not installed",
    )
    return gkd.GKDTrainer.generalized_jsd_loss


@pytest.fixture
def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    student = 2.0 * torch.randn(B, T, V, generator=generator)
    teacher = 2.0 * torch.randn(B, T, V, generator=generator)
    mask = torch.tensor([[0, 0, 1, 1, 1, 1], [0, 1, 1, 1, 0, 0]], dtype=torch.bool)
    labels = torch.where(mask, torch.ones(B, T, dtype=torch.long), torch.full((B, T), -100))
    return student, teacher, mask, labels


def _tol(batch, value: torch.Tensor, temperature: float) -> float:
    """Two fp32 token means of one divergence (ours, TRL's), each within :func:`mean_tol`."""
    student, teacher, mask, _ = batch
    per_token = divergence_tol(student, teacher, temperature, temperature)
    return 2 * mean_tol(per_token, value, int(mask.sum()))


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_trl_beta_zero_is_our_forward_kl(trl_jsd, batch, temperature: float) -> None:
    student, teacher, mask, labels = batch
    theirs = trl_jsd(student, teacher, labels=labels, beta=0.0, temperature=temperature)
    ours, _ = forward_kl(
        student,
        teacher,
        mask,
        student_temperature=temperature,
        teacher_temperature=temperature,
        reduction="token_mean",
    )
    assert ours.item() == pytest.approx(theirs.item(), abs=_tol(batch, theirs, temperature))
    assert generalized_jsd(student, teacher, mask, beta=0.0)[0].item() == 0.0


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_trl_beta_one_is_our_reverse_kl(trl_jsd, batch, temperature: float) -> None:
    student, teacher, mask, labels = batch
    theirs = trl_jsd(student, teacher, labels=labels, beta=1.0, temperature=temperature)
    ours, _ = reverse_kl(
        student,
        teacher,
        mask,
        student_temperature=temperature,
        teacher_temperature=temperature,
        reduction="token_mean",
    )
    assert ours.item() == pytest.approx(theirs.item(), abs=_tol(batch, theirs, temperature))
    assert generalized_jsd(student, teacher, mask, beta=1.0)[0].item() == 0.0


@pytest.mark.parametrize("beta", [0.1, 0.5, 0.9])
def test_trl_interior_beta_matches_value_and_gradient(trl_jsd, batch, beta: float) -> None:
    student, teacher, mask, labels = batch
    z_theirs = student.clone().requires_grad_()
    z_ours = student.clone().requires_grad_()
    theirs = trl_jsd(z_theirs, teacher, labels=labels, beta=beta, temperature=1.5)
    ours, _ = generalized_jsd(
        z_ours,
        teacher,
        mask,
        beta=beta,
        student_temperature=1.5,
        teacher_temperature=1.5,
        reduction="token_mean",
    )
    assert ours.item() == pytest.approx(theirs.item(), abs=_tol(batch, theirs, 1.5))
    theirs.backward()
    ours.backward()
    # ∂/∂z of a token mean: (mixture-weighted p − q) / (τ N), each known to divergence_tol
    tol = divergence_tol(student, teacher, 1.5, 1.5) / (1.5 * int(mask.sum()))
    torch.testing.assert_close(z_ours.grad, z_theirs.grad, atol=tol, rtol=0)
