"""OPD as [D] defines it, in the loop: the teacher at temperature 1 in the advantage, and
``objective.updates_per_batch`` PPO-style updates on one rollout batch (docs/method.md §4)."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from tests.numerics import approx_tols

from distillscope.rollout.rollouts import micro_batches
from distillscope.rollout.scoring import completion_logits
from distillscope.store import read_metrics
from distillscope.teacher.scorer import TeacherScorer
from distillscope.train.loop import Learner, StepBatch, distill, forward_backward, update_metrics
from distillscope.train.machinery import PhaseTimer, max_norm
from distillscope.train.step import FixedAdvantage, Objective

from .conftest import random_rollouts, step_cfg, train_step
from .test_distill import strip_timings, tiny_cfg

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

VOCAB = 40


@torch.no_grad()
def _token_logprobs(model, rollouts, role: str, temperature: float = 1.0) -> torch.Tensor:
    """log softmax(z / τ)[y] of the completion tokens, 0 where masked: written out here."""
    logits_B_T_V = completion_logits(model, rollouts, role).double() / temperature
    logp_B_T_V = logits_B_T_V - logits_B_T_V.logsumexp(dim=-1, keepdim=True)
    mask_B_T = rollouts.completion_mask_B_T.bool()
    tokens_B_T = rollouts.completion_B_T.masked_fill(~mask_B_T, 0)
    logp_B_T = logp_B_T_V.gather(-1, tokens_B_T[..., None]).squeeze(-1)
    return logp_B_T.masked_fill(~mask_B_T, 0.0)


def _own_rollouts(student, batch: int = 6, seed: int = 5):
    """Rollouts whose behaviour log-probs are the student's own at temperature 1 (π_old)."""
    rollouts = random_rollouts(batch, VOCAB, seed=seed)
    logp_B_T = _token_logprobs(student, rollouts, "student").to(rollouts.logp_behavior_B_T.dtype)
    return dataclasses.replace(rollouts, logp_behavior_B_T=logp_B_T)


def _run_updates(cfg, rollouts, student, teacher):
    """One step's updates on ``rollouts`` with a fresh AdamW, as ``distill``'s steps 4–7 take
    them on one process (its own loop is pinned end to end by test_golden_quick.py and the
    resume test below): the step's row and each update's pre-clip norm."""
    objective = Objective.from_config(cfg.objective, VOCAB)
    optimizer = torch.optim.AdamW(student.parameters(), lr=cfg.optim.lr)
    batch = StepBatch(0, rollouts, micro_batches(rollouts, cfg.optim.grad_accum))
    t_scores, _ = TeacherScorer(cfg, teacher, objective).scores(0, None, batch.micro)
    learner = Learner(cfg, objective, student)
    passes, norms = [], []
    for update in range(objective.opd.updates_per_batch):
        advantage = FixedAdvantage.from_diagnostics(passes[0].logprobs_B_T) if update else None
        passes.append(forward_backward(learner, batch, t_scores, PhaseTimer(), advantage))
        clip = max_norm(cfg.optim.grad_clip)
        norms.append(float(torch.nn.utils.clip_grad_norm_(student.parameters(), clip)))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return update_metrics(cfg, passes, rollouts), norms


def _opd(**over):
    return step_cfg(**{"objective.kind": "opd", "objective.path": "plain", **over})


def test_one_update_keeps_the_ratio_at_one_and_never_clips(models_f64):
    student, teacher = copy.deepcopy(models_f64[0]), models_f64[1]
    row, norms = _run_updates(_opd(**{"optim.lr": 0.05}), _own_rollouts(student), student, teacher)
    assert len(norms) == 1
    # π_old is the sampler's log-prob in fp32 (here the student's own, rounded): r_t = 1 to fp32
    assert row["opd/ratio_mean"] == pytest.approx(1.0, abs=1e-6)
    assert row["opd/ratio_clip_frac"] == 0.0


def test_two_updates_move_the_ratio_and_the_clip_acts(models_f64):
    # A large step on a tiny model moves π_θ far from π_old on the batch's second update.
    student, teacher = copy.deepcopy(models_f64[0]), models_f64[1]
    cfg = _opd(**{"optim.lr": 0.05, "optim.grad_clip": "null", "objective.updates_per_batch": 2})
    row, norms = _run_updates(cfg, _own_rollouts(student), student, teacher)
    assert len(norms) == 2 and norms[0] != norms[1]
    assert row["opd/ratio_clip_frac"] > 0.0  # the mean over the updates: the second clipped
    assert abs(row["opd/ratio_mean"] - 1.0) > 1e-3


def test_later_updates_keep_the_first_updates_advantage(models_f64):
    student, teacher = copy.deepcopy(models_f64[0]), models_f64[1]
    rollouts = _own_rollouts(student)
    one, _ = _run_updates(_opd(**{"optim.lr": 0.05}), rollouts, copy.deepcopy(student), teacher)
    cfg = _opd(**{"optim.lr": 0.05, "objective.updates_per_batch": 3})
    three, _ = _run_updates(cfg, rollouts, student, teacher)
    for key in ("opd/raw_advantage_mean", "opd/advantage_std", "opd/tokens", "kl/k1"):
        assert three[key] == pytest.approx(one[key], rel=1e-12, abs=1e-12), key


@pytest.mark.parametrize("path", ["plain", "fused"])
def test_accumulation_is_exact_within_each_update(models_f64, path):
    rollouts = _own_rollouts(models_f64[0], batch=7, seed=9)
    over = {"optim.lr": 0.01, "objective.updates_per_batch": 2, "objective.path": path}
    if path == "fused":
        over["objective.chunk_size"] = 5
    students, rows = [], []
    for accum in (1, 2):
        student = copy.deepcopy(models_f64[0])
        cfg = _opd(**over, **{"optim.grad_accum": accum})
        row, _ = _run_updates(cfg, rollouts, student, models_f64[1])
        students.append(student)
        rows.append(row)
    for (name, a), b in zip(students[0].named_parameters(), students[1].parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10, msg=name)
    n = int(rollouts.completion_mask_B_T.sum())  # fp32 token means of n terms, two orders
    for key in ("train/loss", "opd/ratio_mean", "opd/ratio_clip_frac", "opd/raw_advantage_mean"):
        assert rows[1][key] == pytest.approx(rows[0][key], **approx_tols(rows[0][key], n)), key


def test_the_default_advantage_takes_both_models_at_temperature_one(models_f64):
    student, teacher = models_f64
    rollouts = random_rollouts(6, VOCAB, seed=11)
    mask_B_T = rollouts.completion_mask_B_T.bool()

    def independent(tau_teacher: float) -> float:
        delta_B_T = _token_logprobs(teacher, rollouts, "teacher", tau_teacher) - _token_logprobs(
            student, rollouts, "student"
        )
        return float(delta_B_T[mask_B_T].mean())

    def fp32(tau_teacher: float) -> dict[str, float]:
        """The loss reads both log-probs in fp32 (each rounded to u·|ℓ|) and means n of them."""
        logp = _token_logprobs(teacher, rollouts, "teacher", tau_teacher)[mask_B_T]
        return approx_tols(logp, int(mask_B_T.sum()), 2)

    default = train_step(_opd(), rollouts, student, teacher, VOCAB)
    # the gap between τ = 1 and 0.5 is far beyond the fp32 rounding of the log-probs
    assert default["opd/raw_advantage_mean"] == pytest.approx(independent(1.0), **fp32(1.0))
    assert abs(independent(1.0) - independent(0.5)) > 1e-3  # the check can tell them apart
    tempered = _opd(**{"objective.teacher_temperature": 0.5, "objective.tempered_teacher": True})
    row = train_step(tempered, rollouts, student, teacher, VOCAB)
    assert row["opd/raw_advantage_mean"] == pytest.approx(independent(0.5), **fp32(0.5))


def test_a_killed_run_with_two_updates_resumes_to_the_same_metrics(tiny_pair, tmp_path):
    over = {
        "objective.kind": "opd",
        "objective.updates_per_batch": 2,
        "optim.lr": 3e-3,
        "optim.steps": 4,
    }
    cfg = tiny_cfg(tiny_pair, **over)
    distill(cfg, tmp_path / "a")
    a = strip_timings(read_metrics(tmp_path / "a"))
    assert [r["step"] for r in a] == [0, 1, 2, 3]  # one row per rollout batch

    def killed_at_step_2(step, row):
        if step == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        distill(cfg, tmp_path / "b", on_step=killed_at_step_2)
    distill(cfg, tmp_path / "b")
    assert strip_timings(read_metrics(tmp_path / "b")) == a
