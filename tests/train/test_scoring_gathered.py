"""On the fused path a full-vocabulary divergence gathers the diagnostics' token log-probs in its
own head pass and returns them: the step projects each model's hidden states once, with the same
metrics as the plain path."""

from __future__ import annotations

from dataclasses import fields

import pytest
import torch

from distillscope.objectives import ChunkSpec, DivergenceOptions
from distillscope.objectives.divergences import FORWARD_KL
from distillscope.rollout import scoring
from distillscope.rollout.scoring import HiddenScores

from .conftest import random_rollouts, step_cfg, train_step


@pytest.mark.parametrize("kind", ["forward_kl", "reverse_kl", "jsd"])
@pytest.mark.parametrize("grad_accum", [1, 2])
def test_the_diagnostics_reuse_the_divergence_pass(models_f64, monkeypatch, kind, grad_accum):
    student, teacher = models_f64
    rollouts = random_rollouts(6, 40, seed=7)
    over = {
        "objective.kind": kind,
        "objective.teacher_temperature": 0.7,  # the diagnostics read τ and 1.0
        "optim.grad_accum": grad_accum,
    }
    calls = []
    own_pass = scoring.token_logprobs_at_temperatures

    def counting(*args, **kwargs):
        calls.append(1)
        return own_pass(*args, **kwargs)

    monkeypatch.setattr(scoring, "token_logprobs_at_temperatures", counting)
    row = train_step(
        step_cfg(**over, **{"objective.chunk_size": 4}), rollouts, student, teacher, 40
    )
    assert calls == []  # no head pass of the diagnostics' own
    plain = train_step(step_cfg(**over, **{"objective.path": "plain"}), rollouts, *models_f64, 40)
    for key, value in plain.items():
        if not key.startswith("time/"):
            assert row[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key


def test_the_fused_loss_returns_the_log_probs_a_fresh_head_pass_gives(models_f64):
    """What the loss gathers is returned to the caller (not kept in the score objects), and it
    equals each model's own head pass at its loss temperature and at 1.0."""
    student, teacher = models_f64
    r = random_rollouts(4, 40, seed=3)
    chunks = ChunkSpec(chunk_size=3)
    path = scoring.ScorePath(True, chunks, 40)
    with torch.no_grad():
        s, t = path.scores(student, r, "student"), path.scores(teacher, r, "teacher")
        options = DivergenceOptions(student_temperature=0.8, teacher_temperature=0.5)
        mask_B_T = r.completion_mask_B_T
        _, _, gathered = scoring.divergence_between(FORWARD_KL, s, t, mask_B_T, options, r)
    assert [f.name for f in fields(HiddenScores)] == [
        "hidden_B_T_H",
        "head_V_H",
        "vocab_size",
        "chunks",
    ]
    pairs = (
        (s, 0.8, gathered.student_B_T, gathered.student_t1_B_T),
        (t, 0.5, gathered.teacher_B_T, gathered.teacher_t1_B_T),
    )
    for scores, tau, at_tau, at_one in pairs:
        want_tau, want_one = scores.loss_t_and_t1_logprobs(r, tau)
        torch.testing.assert_close(at_tau, want_tau.to(at_tau.dtype), rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(at_one, want_one.to(at_one.dtype), rtol=1e-6, atol=1e-6)
