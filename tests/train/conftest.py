"""Hand-built batches and tiny in-memory models for the forward/backward tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from distillscope.config import load_run_config
from distillscope.rollout.rollouts import Rollouts, micro_batches
from distillscope.teacher.scorer import TeacherScorer
from distillscope.train.loop import Learner, StepBatch, forward_backward
from distillscope.train.machinery import PhaseTimer
from distillscope.train.step import Objective


def tiny_llama(vocab: int, hidden: int, seed: int, dtype=torch.float64) -> LlamaForCausalLM:
    """A random one-layer Llama (untied head), in ``dtype``."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    return LlamaForCausalLM(cfg).to(dtype)


def random_rollouts(batch: int, vocab: int, seed: int, source_B=None, width: int = 5) -> Rollouts:
    """``batch`` rows: left-padded prompts of 2–4 tokens, completions of 0–``width`` tokens.

    Row 1 has an empty completion (it counts in no reduction); ``source_B`` defaults to
    student-written rows.
    """
    g = torch.Generator().manual_seed(seed)
    prompt_B_P = torch.randint(1, vocab, (batch, 4), generator=g)
    prompt_len_B = torch.randint(2, 5, (batch,), generator=g)
    prompt_mask_B_P = (torch.arange(4) >= 4 - prompt_len_B[:, None]).long()
    lengths_B = torch.randint(1, width + 1, (batch,), generator=g)
    lengths_B[1] = 0
    mask_B_T = (torch.arange(width) < lengths_B[:, None]).long()
    completion_B_T = torch.randint(1, vocab, (batch, width), generator=g) * mask_B_T
    logp_B_T = -torch.rand(batch, width, generator=g) * 3 * mask_B_T
    if source_B is None:
        source_B = torch.ones(batch, dtype=torch.int8)
    return Rollouts(
        prompt_ids_B_P=prompt_B_P * prompt_mask_B_P,
        prompt_mask_B_P=prompt_mask_B_P,
        teacher_prompt_ids_B_Q=prompt_B_P * prompt_mask_B_P,
        teacher_prompt_mask_B_Q=prompt_mask_B_P,
        completion_B_T=completion_B_T,
        completion_mask_B_T=mask_B_T,
        logp_student_B_T=None,
        logp_teacher_B_T=None,
        logp_behavior_B_T=logp_B_T,
        lengths_B=lengths_B,
        truncated_B=torch.zeros(batch, dtype=torch.bool),
        source="test",
        source_B=source_B.to(torch.int8),
    )


@pytest.fixture(scope="module")
def models_f64():
    """(student, teacher) with V = 40, hidden 16 / 24, fp64."""
    return tiny_llama(40, 16, seed=1), tiny_llama(40, 24, seed=2)


def step_cfg(**over):
    """A run config for calling the forward/backward directly (model paths are unused)."""
    return load_run_config(None, [f"{k}={v}" for k, v in over.items()])


def train_step(cfg, rollouts: Rollouts, student, teacher, vocab: int, step: int = 0) -> dict:
    """One step's forwards and backward as the loop runs them (a live teacher): its metrics."""
    objective = Objective.from_config(cfg.objective, vocab)
    batches = micro_batches(rollouts, cfg.optim.grad_accum)
    t_scores, _ = TeacherScorer(cfg, teacher, objective).scores(step, None, batches)
    learner = Learner(cfg, objective, student)
    return forward_backward(
        learner, StepBatch(step, rollouts, batches), t_scores, PhaseTimer()
    ).metrics


def tensorboard_rows(log_dir: Path) -> dict[int, dict[str, float]]:
    """step → {tag: value} of every scalar in ``log_dir``'s event files (older sessions' steps
    purged as TensorBoard purges them)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    acc.Reload()
    rows: dict[int, dict[str, float]] = {}
    for tag in acc.Tags()["scalars"]:
        for event in acc.Scalars(tag):
            assert tag not in rows.get(event.step, {}), f"step {event.step} of {tag} twice"
            rows.setdefault(event.step, {})[tag] = event.value
    return rows
