"""Exact gradient accumulation: any ``optim.grad_accum`` gives the full batch's loss and gradient.

The reference is the single-batch step (grad_accum = 1) on the same batch; every reduction, batch
sizes that the accumulation divides and does not, more micro-batches than rows, and both paths.
"""

from __future__ import annotations

import pytest
import torch

from distillscope.metric_keys import METRICS, accumulation
from distillscope.train.step import micro_batch_share

from .conftest import random_rollouts, step_cfg, train_step

REDUCTIONS = ("seq_mean", "token_mean", "sum")


def _step(models, rollouts, **over) -> tuple[dict[str, float], torch.Tensor]:
    """Metrics and the flat gradient of one step's forward/backward."""
    student, teacher = models
    student.zero_grad(set_to_none=True)
    row = train_step(step_cfg(**over), rollouts, student, teacher, 40)
    grads = [p.grad.flatten() for p in student.parameters() if p.grad is not None]
    return row, torch.cat(grads)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_micro_batch_shares_weight_the_batch_loss(reduction):
    mask_B_T = random_rollouts(6, 40, seed=0).completion_mask_B_T
    shares = [micro_batch_share(mask_B_T, i, reduction) for i in torch.arange(6).tensor_split(4)]
    assert sum(shares) == pytest.approx(1.0 if reduction != "sum" else 4.0)
    if reduction == "token_mean":
        assert shares[0] == pytest.approx(float(mask_B_T[:2].sum() / mask_B_T.sum()))


@pytest.mark.parametrize("path", ["plain", "fused"])
@pytest.mark.parametrize("batch", [5, 6, 8])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_accumulated_gradient_equals_the_full_batch(models_f64, path, batch, reduction):
    rollouts = random_rollouts(batch, 40, seed=batch)
    over = {"objective.path": path, "objective.reduction": reduction, "objective.chunk_size": 0}
    ref_row, ref_grad = _step(models_f64, rollouts, **over)
    for accum in (2, 3, 4, 7):
        row, grad = _step(models_f64, rollouts, **over, **{"optim.grad_accum": accum})
        torch.testing.assert_close(grad, ref_grad, rtol=0, atol=1e-6)
        assert row["train/loss"] == pytest.approx(ref_row["train/loss"], abs=1e-6)
        assert row["objective/tokens"] == ref_row["objective/tokens"]
        for key in ("kl/k1", "kl/k3", "rollout/student_token_prob", "rollout/teacher_geo_prob"):
            assert row[key] == pytest.approx(ref_row[key], abs=1e-6), key


@pytest.mark.parametrize("path", ["plain", "fused"])
@pytest.mark.parametrize("kind", ["opd", "forward_sampled", "reverse_sampled", "jsd", "mixture"])
def test_accumulation_is_exact_for_every_kind(models_f64, path, kind):
    rollouts = random_rollouts(7, 40, seed=3)
    over = {"objective.path": path, "objective.kind": kind, "objective.reduction": "token_mean"}
    ref_row, ref_grad = _step(models_f64, rollouts, **over)
    row, grad = _step(models_f64, rollouts, **over, **{"optim.grad_accum": 3})
    torch.testing.assert_close(grad, ref_grad, rtol=0, atol=1e-6)
    assert row["train/loss"] == pytest.approx(ref_row["train/loss"], abs=1e-6)


def test_every_metric_an_objective_returns_declares_how_micro_batches_combine():
    # opd/informativeness* are the loop's (one value per step from the whole batch), not an
    # objective's: they have no micro-batch accumulation
    loop_keys = ("opd/informativeness", "opd/informativeness_groups")
    returned = [
        m
        for m in METRICS
        if (m.key == "train/loss" or m.key.startswith(("objective/", "opd/")))
        and m.key not in loop_keys
    ]
    assert len(returned) == 21 and all(m.accumulate for m in returned)
    assert not [m for m in METRICS if m.key in loop_keys and m.accumulate]
    assert [accumulation(k) for k in ("objective/tokens", "opd/loss", "objective/forward_kl")] == [
        "sum",
        "loss",
        "mean",
    ]
    with pytest.raises(ValueError, match="declares no micro-batch accumulation"):
        accumulation("kl/k1")  # computed once on the whole batch, never accumulated
