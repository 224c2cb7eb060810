"""On the fused path a full-vocabulary divergence gathers the diagnostics' token log-probs in its
own head pass: the step projects each model's hidden states once, with the same metrics."""

from __future__ import annotations

import pytest
import torch

from distillscope.objectives import OBJECTIVES, ChunkSpec, DivergenceOptions
from distillscope.train import scoring
from distillscope.train.scoring import HiddenScores

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


def test_gathered_logprobs_are_not_read_for_other_tokens(models_f64):
    """Scores asked about another completion project again (the gathered ones are not theirs)."""
    student, teacher = models_f64
    r = random_rollouts(4, 40, seed=3)
    chunks = ChunkSpec(chunk_size=3)
    path = scoring.ScorePath(True, chunks, 40)
    with torch.no_grad():
        s, t = path.scores(student, r, "student"), path.scores(teacher, r, "teacher")
    options = DivergenceOptions(teacher_temperature=0.5)
    t.divergence_from(s, r.completion_mask_B_T, OBJECTIVES["forward_kl"], options)
    gathered = s.completion_logprobs(r, 1.0)
    fresh = HiddenScores(s.hidden_B_T_H, s.head_V_H, 40, chunks).completion_logprobs(r, 1.0)
    for a, b in zip(gathered, fresh, strict=True):
        torch.testing.assert_close(a, b.to(a.dtype), rtol=1e-6, atol=1e-6)
    other = r.rows(torch.arange(4))
    other.completion_B_T = (r.completion_B_T + 1) % 40
    want = HiddenScores(s.hidden_B_T_H, s.head_V_H, 40, chunks).completion_logprobs(other, 1.0)
    got = s.completion_logprobs(other, 1.0)
    torch.testing.assert_close(got[0], want[0])
    teacher_got = t.completion_logprobs(r, 0.5)  # the teacher's at its own loss temperature
    teacher_want = HiddenScores(t.hidden_B_T_H, t.head_V_H, 40, chunks).completion_logprobs(r, 0.5)
    torch.testing.assert_close(teacher_got[0], teacher_want[0].to(teacher_got[0].dtype))
    torch.testing.assert_close(teacher_got[1], teacher_want[1].to(teacher_got[1].dtype))
