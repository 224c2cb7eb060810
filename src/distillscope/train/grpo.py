"""``grpo(cfg, run_dir)``: the RLVR stage — GRPO with the DAPO loss from a distilled student
(docs/method.md §8).

    distillscope study --preset paper     # its rlvr stage starts one run per main-grid run

An RLVR run's config is its parent's (the distilled run it starts from) plus an ``rlvr``
section (:class:`~distillscope.config.RLVRConfig`) saying how it trains; it starts from the
student the parent exported, ``runs/<rlvr.parent>/student/``, a sibling of its own directory.
Every step, in the order it happens: pick prompts → G completions each from the current student
→ the verifier's rewards → group-normalised advantages → per micro-batch: student forward →
DAPO loss → backward → clip → step → log → (checkpoint). There is no teacher and no reference
model. The run directory is kept by the machinery the distillation loop uses (:mod:`.machinery`:
``config.yaml``, ``metrics.jsonl``, the trackers, ``status.json``, ``checkpoint/``,
``student/``) and resumes the same way: the draws of step k come from ``(seed, k)`` on the RLVR
streams, so a killed run ends with the metrics of an uninterrupted one. It trains on one
process.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import torch

from distillscope.config import RLVRConfig, RunConfig
from distillscope.models.load import load_model, load_options
from distillscope.models.locate import check_model_dir
from distillscope.models.precision import forward_precision
from distillscope.models.vocab import stop_token_ids
from distillscope.objectives.rlvr import dapo_loss, group_advantages
from distillscope.rollout.diagnostics import rollout_length_metrics
from distillscope.rollout.policies import StudentPolicy
from distillscope.rollout.prompts import PromptEncoder, Stream, model_generator, step_rng
from distillscope.rollout.rollouts import PromptBatch, Rollouts, SamplingSpec, micro_batches
from distillscope.rollout.sampler import sample_rollouts
from distillscope.rollout.scoring import ScorePath
from distillscope.tasks import Task, resolve_task, training_problems
from distillscope.train.checkpoint import STUDENT_DIR
from distillscope.train.distributed import ONE_PROCESS
from distillscope.train.machinery import PhaseTimer, Run, max_norm, set_lr
from distillscope.train.step import micro_batch_share, use_fused


def parent_student_dir(run_dir: Path, cfg: RunConfig) -> Path:
    """The student an RLVR run starts from: its parent run's ``student/``, beside ``run_dir``."""
    return Path(run_dir).parent / _rlvr(cfg).parent / STUDENT_DIR


def check_parent(run_dir: Path, cfg: RunConfig) -> Path:
    """The parent's exported student, or one line naming what is missing."""
    start = parent_student_dir(run_dir, cfg)
    if not start.is_dir():
        raise FileNotFoundError(
            f"rlvr.parent {_rlvr(cfg).parent}: {start} does not exist; the RLVR run starts from "
            "the student its parent run exported (run the parent first)"
        )
    return check_model_dir(start, cfg.model.allow_pickle)


def cosine_lr(r: RLVRConfig, step: int) -> float:
    """Linear warm-up over ``warmup_fraction`` of the steps, then cosine decay towards 0."""
    warm = round(r.warmup_fraction * r.steps)
    if step < warm:
        return r.lr * (step + 1) / warm
    progress = (step - warm) / max(1, r.steps - warm)
    return r.lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def load_start(cfg: RunConfig, run_dir: Path):
    """``(model, tokenizer)`` of the parent's exported student, as the config loads models."""
    return load_model(check_parent(run_dir, cfg), **load_options(cfg.model))


def grpo(
    cfg: RunConfig,
    run_dir: Path,
    *,
    on_step: Callable[[int, dict], None] | None = None,
    overwrite: bool = False,
) -> tuple[torch.nn.Module, object]:
    """Train the RLVR run of ``cfg`` into ``run_dir``; returns ``(student, tokenizer)``.

    As :func:`~distillscope.train.loop.distill`: ``run_dir`` belongs to one config, a NaN/inf
    loss or gradient norm marks the run ``diverged``, a finished run is ``trained`` and exports
    ``student/``.
    """
    r = _rlvr(cfg)
    task = resolve_task(r.task)
    check_parent(run_dir, cfg)  # before anything is written
    run = Run.claim(cfg, run_dir, overwrite, on_step, ranks=ONE_PROCESS)
    torch.manual_seed(cfg.seed)
    student, tokenizer = load_start(cfg, run_dir)
    vocab, spec = len(tokenizer), _sampling_spec(cfg, student, tokenizer)
    policy = StudentPolicy(r.temperature, r.top_p)
    pool = training_problems(task, cfg.task.eval_fraction)
    encoder = PromptEncoder(task, tokenizer, cfg.task.prompt_format)
    path = ScorePath(use_fused(cfg.objective, vocab), cfg.objective.chunks(), vocab)
    o = cfg.optim
    optimizer = torch.optim.AdamW(
        student.parameters(), lr=r.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay
    )
    start, clip = run.resume(student, optimizer), max_norm(r.grad_clip)
    for step in range(start, r.steps):
        timer = PhaseTimer()
        # 1. prompts: distinct within the step, each repeated G times (rows k·G … (k+1)·G − 1)
        problems = _problems(r, pool, cfg.seed, step)
        ids_B_P, mask_B_P = (t.to(cfg.model.device) for t in encoder.encode(problems, "student"))
        # 2. roll out from the current student (constants: no gradient through sampling)
        generator = model_generator(student, cfg.seed, step, Stream.RLVR_ROLLOUT)
        prompts = PromptBatch(ids_B_P, mask_B_P)
        rollouts = sample_rollouts(policy, student, None, prompts, spec, generator)
        # 3. rewards from the verifier, advantages normalised within each prompt's group
        correct_B = _correct(task, tokenizer, problems, rollouts)
        rewards_B = correct_B * r.reward_correct
        advantages_B = group_advantages(rewards_B, r.group_size).to(cfg.model.device)
        timer.lap("rollout")
        # 4–6. per micro-batch: student forward, DAPO loss, backward — each loss weighted by
        #      its share of the batch's tokens (exact accumulation); then clip and step
        lr = set_lr(optimizer, cosine_lr(r, step))
        student.train()
        row: dict[str, float] = {}
        for micro in micro_batches(rollouts, cfg.optim.grad_accum):
            share = micro_batch_share(rollouts.completion_mask_B_T, micro.index_b, "token_mean")
            m, adv_B = micro.rollouts, advantages_B[micro.index_b.to(advantages_B.device)]
            with forward_precision(cfg.model):
                scores = path.scores(student, m, "student")
            logp_B_T = scores.token_logprobs(m.completion_B_T, m.completion_mask_B_T, r.temperature)
            # one update per batch: π_old is the current student, so its log-probs, detached,
            # make the ratio 1 (the clip acts only across updates: rlvr/ratio_clip_frac)
            loss, metrics = dapo_loss(
                logp_B_T,
                logp_B_T.detach(),
                adv_B,
                m.completion_mask_B_T,
                eps_low=r.eps_low,
                eps_high=r.eps_high,
            )
            (loss * share).backward()
            for key, value in {"train/loss": float(loss.detach()), **metrics}.items():
                row[key] = row.get(key, 0.0) + value * share
        timer.lap("student_forward_backward")
        grad_norm = float(torch.nn.utils.clip_grad_norm_(student.parameters(), clip))
        run.stop_if_diverged(step, row["train/loss"], grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        timer.lap("optimizer")
        # 7. log
        row |= {"step": step, "train/lr": lr, "train/grad_norm": grad_norm}
        row["train/grad_clipped"] = float(grad_norm > clip)
        row |= _reward_metrics(correct_B, rewards_B, r.group_size)
        row |= rollout_length_metrics(rollouts) | timer.metrics(rollouts)
        run.log(row)
        # 8. checkpoint
        run.checkpoint(step + 1, student, optimizer)
    run.finish(r.steps, student, optimizer)
    run.export(student, tokenizer)
    student.eval()
    return student, tokenizer


def _sampling_spec(cfg: RunConfig, student: torch.nn.Module, tokenizer) -> SamplingSpec:
    """How the RLVR stage samples: its own length budget (else the task's), the student's stops."""
    return SamplingSpec(
        max_new_tokens=_rlvr(cfg).max_new_tokens or cfg.task.max_new_tokens,
        stop_ids=stop_token_ids((tokenizer,), (student,)),
        pad_id=tokenizer.pad_token_id,
        vocab_size=len(tokenizer),
    )


def _rlvr(cfg: RunConfig) -> RLVRConfig:
    if cfg.rlvr is None:
        raise ValueError(f"run {cfg.name} has no rlvr section: it is not an RLVR run")
    return cfg.rlvr


def _problems(r: RLVRConfig, pool: list, seed: int, step: int) -> list:
    """The step's ``prompts_per_step`` distinct problems, each repeated ``group_size`` times."""
    if r.prompts_per_step > len(pool):
        raise ValueError(
            f"rlvr.prompts_per_step={r.prompts_per_step} exceeds the {len(pool)} training "
            f"problems of {r.task}"
        )
    chosen = step_rng(seed, step, Stream.RLVR_PROMPTS).sample(pool, r.prompts_per_step)
    return [p for p in chosen for _ in range(r.group_size)]


def _correct(task: Task, tokenizer, problems: list, rollouts: Rollouts) -> torch.Tensor:
    """1.0 where the verifier accepts the completion (score ≥ 1), else 0.0; ``[B]``."""
    texts = tokenizer.batch_decode(rollouts.completion_B_T, skip_special_tokens=True)
    scores = [task.score(p, t) for p, t in zip(problems, texts, strict=True)]
    return torch.tensor([float(s >= 1.0) for s in scores])


def _reward_metrics(
    correct_B: torch.Tensor, rewards_B: torch.Tensor, group_size: int
) -> dict[str, float]:
    """The step's mean reward, accuracy, and the share of groups with both outcomes (the only
    groups with a gradient)."""
    c_K_G = correct_B.view(-1, group_size)
    mixed = ((c_K_G.min(dim=-1).values == 0) & (c_K_G.max(dim=-1).values == 1)).float()
    return {
        "rlvr/reward": float(rewards_B.mean()),
        "rlvr/accuracy": float(correct_B.mean()),
        "rlvr/groups_mixed": float(mixed.mean()),
        "rollout/reward": float(correct_B.mean()),
    }
