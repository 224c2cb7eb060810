"""The loop's informativeness I: one step's student-written rollouts grouped by prompt, Δℓ at
temperature 1 (whatever the loss temperatures), logged with ≥ 2 rollouts per prompt only."""

from __future__ import annotations

import math

import pytest
import torch
from tests.train.conftest import random_rollouts, step_cfg
from tests.train.test_distill import tiny_cfg

from distillscope.objectives.informativeness import informativeness, mean_advantage
from distillscope.rollout.policies import SOURCE_STUDENT, SOURCE_TEACHER
from distillscope.rollout.rollouts import micro_batches
from distillscope.rollout.scoring import completion_logits
from distillscope.store import read_metrics
from distillscope.teacher.scorer import TeacherScorer
from distillscope.teacher.signal import GROUPS_KEY, INFO_KEY, informativeness_metrics
from distillscope.train import loop as loop_mod
from distillscope.train.loop import (
    Learner,
    StepBatch,
    distill,
    forward_backward,
    update_metrics,
)
from distillscope.train.machinery import PhaseTimer
from distillscope.train.step import Objective

VOCAB = 40


@torch.no_grad()
def _t1_logprobs(model, rollouts, role: str) -> torch.Tensor:
    """log softmax(z)[y] of the completion tokens at temperature 1, written out here."""
    logits = completion_logits(model, rollouts, role).double()
    logp = logits - logits.logsumexp(dim=-1, keepdim=True)
    mask = rollouts.completion_mask_B_T.bool()
    tokens = rollouts.completion_B_T.masked_fill(~mask, 0)
    return logp.gather(-1, tokens[..., None]).squeeze(-1).masked_fill(~mask, 0.0)


def test_rows_group_by_prompt_and_teacher_written_rows_are_left_out():
    source = torch.tensor([SOURCE_STUDENT] * 6 + [SOURCE_TEACHER] * 2)
    r = random_rollouts(8, VOCAB, seed=3, source_B=source)
    g = torch.Generator().manual_seed(0)
    logp = {
        "teacher_t1": -torch.rand(8, 5, generator=g),
        "student_t1": -torch.rand(8, 5, generator=g),
    }
    rewards = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0]  # groups of 2: mixed, mixed, same, mixed
    got = informativeness_metrics(2, r, logp, rewards)
    adv = mean_advantage(logp["teacher_t1"], logp["student_t1"], r.completion_mask_B_T)
    # row 1 has no completion token (NaN Ā), so group 0 has one usable rollout; the last
    # group is teacher-written: only group 1 counts
    want = informativeness(adv[:6], rewards[:6], [0, 0, 1, 1, 2, 2])
    assert got[GROUPS_KEY] == want[1] == 1
    assert got[INFO_KEY] == pytest.approx(want[0]) and abs(got[INFO_KEY]) == pytest.approx(1.0)
    assert informativeness_metrics(1, r, logp, rewards) == {}  # one rollout per prompt


def test_a_step_with_no_informative_group_logs_zero_groups_and_no_i():
    r = random_rollouts(4, VOCAB, seed=4)
    logp = {"teacher_t1": -torch.rand(4, 5), "student_t1": -torch.rand(4, 5)}
    assert informativeness_metrics(2, r, logp, [0.0] * 4) == {GROUPS_KEY: 0.0}


def test_the_step_logs_i_from_temperature_one_log_probs(models_f64):
    """Through the loop's forward–backward and step row of an OnPD forward-KL step with loss
    temperatures 0.5: I is the direct formula on temperature-1 log-probs of both models."""
    student, teacher = models_f64
    cfg = step_cfg(
        **{
            "objective.kind": "forward_kl",
            "objective.path": "plain",
            "objective.teacher_temperature": 0.5,
            "objective.student_temperature": 0.5,
            "rollout.rollouts_per_prompt": 3,
        }
    )
    r = random_rollouts(9, VOCAB, seed=7, width=6)
    rewards = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]  # row 1: no completion token
    direct = informativeness(
        mean_advantage(
            _t1_logprobs(teacher, r, "teacher"),
            _t1_logprobs(student, r, "student"),
            r.completion_mask_B_T,
        ),
        rewards,
        torch.arange(9) // 3,
    )
    objective = Objective.from_config(cfg.objective, VOCAB)
    batches = micro_batches(r, cfg.optim.grad_accum)
    scores, _ = TeacherScorer(cfg, teacher, objective).scores(0, None, batches)
    done = forward_backward(
        Learner(cfg, objective, student), StepBatch(0, r, batches), scores, PhaseTimer()
    )
    row = update_metrics(cfg, [done], r, rewards)
    assert row[GROUPS_KEY] == direct[1] == 3
    assert row[INFO_KEY] == pytest.approx(direct[0], abs=1e-5)


@pytest.mark.parametrize(
    "over, logged",
    [
        ({"rollout.rollouts_per_prompt": 2}, True),  # OnPD forward KL, 2 × 2
        ({"rollout.rollouts_per_prompt": 1}, False),
        ({"rollout.rollouts_per_prompt": 2, "rollout.policy": "teacher"}, False),  # OffPD
    ],
)
def test_distill_logs_i_with_two_rollouts_per_prompt(
    tiny_pair, tmp_path, monkeypatch, over, logged
):
    """A run of 2 steps whose rewards alternate (the tiny random models never solve a problem:
    the task's scores are replaced) logs I on student-written rollouts only."""
    monkeypatch.setattr(
        loop_mod,
        "_rewards",
        lambda task, tok, problems, r: [float(i % 2) for i in range(len(problems))],
    )
    cfg = tiny_cfg(tiny_pair, **{"rollout.prompts_per_step": 2, "optim.steps": 2, **over})
    distill(cfg, tmp_path / "run")
    rows = read_metrics(tmp_path / "run")
    assert len(rows) == 2
    if logged:
        assert all(r[GROUPS_KEY] == 2.0 and -1.0 <= r[INFO_KEY] <= 1.0 for r in rows)
    else:
        assert not any(GROUPS_KEY in r or INFO_KEY in r for r in rows)
    assert all(not (isinstance(v, float) and math.isnan(v)) for r in rows for v in r.values())
