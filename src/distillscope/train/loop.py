"""``distill(cfg, run_dir)``: one readable distillation loop (docs/method.md §1–§6).

    distillscope train configs/testbed-onpd-forward.yaml optim.lr=3e-4

Every step, in the order it happens: pick prompts → roll out → the teacher's scores → per
micro-batch: student forward → objective → backward → then clip → step → log → (checkpoint).
A step is one rollout batch: OPD may take ``objective.updates_per_batch`` optimizer steps on it
(the forward → step part repeated), every other kind one, so ``optim.steps`` counts rollout
batches and ``metrics.jsonl`` keeps one row per rollout batch.
The run directory receives ``config.yaml``, ``metrics.jsonl`` (one row per step, keys in
:mod:`distillscope.metric_keys`), ``status.json``, ``checkpoint/`` and, at the end, ``student/``
(a Hugging Face directory), and ``profiles.jsonl`` at ``eval.profile_steps`` (:mod:`.profiles`:
per-position profiles on fresh student completions). A killed run restarts from its last
checkpoint and ends with the same metrics as an uninterrupted one: every random draw of step k
comes from ``(seed, k)`` (:class:`~distillscope.rollout.prompts.Stream`), never from state
carried across steps.

The pieces: :mod:`.machinery` (the run directory from claim to export, shared with :mod:`.grpo`),
:mod:`.step` (the objective on one micro-batch), :mod:`distillscope.rollout.scoring` (score
objects of either path), :mod:`distillscope.teacher` (the teacher of every kind behind one
constructor: its rollouts and scores), :mod:`.setup` (models, policy), :mod:`.distributed` (the
collectives of a run on several processes).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import torch

from distillscope.config import RunConfig
from distillscope.metric_keys import accumulation
from distillscope.models import resolve_model_path
from distillscope.models.load import ModelPair, load_model, load_options
from distillscope.models.precision import forward_precision
from distillscope.objectives.estimators import draw_uniforms, kl_metrics_by_writer
from distillscope.rollout.diagnostics import likelihood_metrics, rollout_length_metrics
from distillscope.rollout.policies import (
    SOURCE_STUDENT,
    SOURCE_TEACHER,
    NonFiniteSamplingError,
    RolloutPolicy,
)
from distillscope.rollout.prompts import Stream, model_generator, select_problems
from distillscope.rollout.rollouts import MicroBatch, PromptBatch, Rollouts, SamplingSpec
from distillscope.rollout.sampler import sample_rollouts
from distillscope.rollout.scoring import TeacherScores
from distillscope.rollout.vllm_engine import VLLMEngine, engine_metrics, rollout_engine
from distillscope.tasks import training_problems
from distillscope.teacher.kinds import open_teacher
from distillscope.teacher.signal import informativeness_metrics
from distillscope.train.distributed import ONE_PROCESS, Ranks
from distillscope.train.fsdp import adamw_groups, is_sharded
from distillscope.train.lora import merged_student, plain_weights, trainable_parameters
from distillscope.train.machinery import DivergedError, PhaseTimer, Run, max_norm, set_lr
from distillscope.train.profiles import Profiler
from distillscope.train.run_checks import preflight
from distillscope.train.setup import load_models, make_policy
from distillscope.train.step import (
    FixedAdvantage,
    Objective,
    diagnostic_logprobs,
    micro_batch_share,
    objective_loss,
    teacher_losses,
)

__all__ = ["DivergedError", "distill", "lr_at"]  # DivergedError: what distill raises (.run)


def lr_at(cfg: RunConfig, step: int) -> float:
    """Linear warm-up over ``optim.warmup_steps``, then constant (docs/method.md §6)."""
    warm = cfg.optim.warmup_steps
    return cfg.optim.lr * min(1.0, (step + 1) / warm) if warm else cfg.optim.lr


def distill(
    cfg: RunConfig,
    run_dir: Path,
    *,
    rollout_cache: Path | None = None,
    on_step: Callable[[int, dict], None] | None = None,
    overwrite: bool = False,
) -> torch.nn.Module:
    """Train the student of ``cfg`` into ``run_dir``; returns the trained student.

    ``run_dir`` belongs to one config (:func:`distillscope.store.claim_run`): one trained under
    another config is refused unless ``overwrite``, which clears it first. A non-finite loss,
    gradient norm or sampling distribution marks the run ``diverged`` (step and quantity in
    ``status.json``) and raises :class:`~.machinery.DivergedError`; a finished run is ``trained``.

    ``rollout_cache`` (a directory shared by runs) enables reuse of teacher rollouts when
    ``rollout.cache_teacher_rollouts`` is set. ``on_step(step, row)`` is called after each
    logged step (progress bars).
    """
    task = preflight(cfg)  # a bad path or task file fails before anything is written
    profile_steps = set(cfg.eval.profile_steps)  # rank 0 profiles; under FSDP every rank gathers
    run = Run.claim(cfg, run_dir, overwrite, on_step)  # the launcher's processes; rank 0 claims
    cfg, ranks = run.cfg, run.ranks  # this rank's device; the run directory keeps the config
    torch.manual_seed(cfg.seed)
    pair = load_models(cfg, shard=ranks.fsdp)  # --fsdp: the student's layers sharded
    is_cap = cfg.rollout.engine_is_cap if cfg.rollout.engine_is_correction else None
    objective = Objective.from_config(cfg.objective, pair.vocab_size, is_cap)  # bad top k fails
    pool = training_problems(task, cfg.task.eval_fraction)
    sampler, student = Sampler.of(cfg, pair), pair.student
    optimizer = _adamw(cfg, student)
    start = run.resume(student, optimizer)  # metrics.jsonl, trackers: from the checkpoint on
    # the teacher of its kind (teacher.kinds); a rollout cache keys single-process micro-batches
    teacher = open_teacher(cfg, pair, objective, rollout_cache if ranks.world == 1 else None)
    encoder = teacher.prompt_encoder.of_run(task, cfg.task, pair)  # its prompts' tokenizers
    learner = Learner(cfg, objective, student, ranks)
    profiler = Profiler(cfg, pair, objective.path, encoder, pool, run_dir, start)

    for step in range(start, cfg.optim.steps):
        with ranks.full_weights(student, step in profile_steps):
            profiler.at(step)  # eval.profile_steps' profiles, before the step's update
        timer = PhaseTimer()
        # 1. prompts: distinct within the step, drawn from the step's own (seed, step) stream
        problems = step_problems(cfg, pool, step)
        prompts = encoder.batch(problems, cfg.model.device)
        step_teacher = teacher.for_step(problems)  # several teachers: each row's own
        # 2. roll out on rank 0, sent to every rank: trajectories are constants (no gradient
        #    through sampling); a shared teacher-written step comes from the rollout cache when
        #    another run sampled it; under FSDP every rank gathers the student's full weights
        sample = functools.partial(sampler.sample, prompts, step)
        try:
            with ranks.full_weights(student):
                rollouts, saved_s = ranks.rollouts_of_rank0(
                    step_teacher.rollouts, step, prompts, sample
                )
        except NonFiniteSamplingError as err:
            run.diverged(f"step {step}: {err}")
        rollouts = rollouts.to(cfg.model.device)
        rewards = _rewards(task, pair.tokenizer, problems, rollouts)
        timer.lap("rollout")
        # 3. score: the teacher's scores of each micro-batch of this rank's rows, live or cached
        micro = ranks.micro_batches(rollouts, cfg.optim.grad_accum)
        batch = StepBatch(step, rollouts, micro, step_teacher.route)
        t_scores, scores_saved_s = step_teacher.scores(step, prompts, batch.micro)
        timer.lap("teacher_forward")
        # 4–7. per update (1, or OPD's updates_per_batch): forward, objective, backward, clip, step
        lr = set_lr(optimizer, lr_at(cfg, step))
        passes: list[Pass] = []
        norms: list[float] = []
        for update in range(objective.opd.updates_per_batch):
            # OPD's later updates keep the first one's advantage: only the ratio r_t moves
            advantage = FixedAdvantage.from_diagnostics(passes[0].logprobs_B_T) if update else None
            done = forward_backward(learner, batch, t_scores, timer, advantage)
            ranks.sum_gradients(student)  # several processes: the whole batch's gradient
            grad_norm = ranks.clip_gradients(student, max_norm(cfg.optim.grad_clip))  # pre-clip
            run.stop_if_diverged(step, done.metrics["train/loss"], grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            timer.lap("optimizer")
            passes.append(done)
            norms.append(grad_norm)
        # 8. log: the loss metrics and the pre-clip norms as the mean over the updates
        row = update_metrics(cfg, passes, rollouts, rewards)
        row |= step_teacher.metrics(rollouts, passes[0].logprobs_B_T, rewards)  # teacher/<name>/
        row |= _step_metrics(cfg, step, lr, norms, rewards, rollouts, timer)
        row["time/teacher_saved"] = saved_s + scores_saved_s  # rollouts and scores from cache
        run.log(row)  # metrics.jsonl (rank 0), trackers, on_step
        # 9. checkpoint: a killed run resumes from the last one with the same metrics
        run.checkpoint(step + 1, student, optimizer)
    with ranks.full_weights(student, cfg.optim.steps in profile_steps):
        profiler.at(cfg.optim.steps)  # after the last update
    return _finish(run, student, optimizer, pair.tokenizer)


def _step_metrics(
    cfg: RunConfig,
    step: int,
    lr: float,
    norms: list[float],
    rewards: list[float],
    rollouts: Rollouts,
    timer: PhaseTimer,
) -> dict[str, float]:
    """The step's row beyond the loss metrics: step, learning rate, the pre-clip norms' mean and
    clipped share over the updates, the mean reward, rollout lengths, phase times and the
    engine's log-prob gap."""
    row = {"step": step, "train/lr": lr, "train/grad_norm": _mean(norms)}
    clip = max_norm(cfg.optim.grad_clip)
    row["train/grad_clipped"] = _mean([float(n > clip) for n in norms])
    row["rollout/reward"] = sum(rewards) / len(rewards)
    row |= rollout_length_metrics(rollouts) | timer.metrics(rollouts)
    return row | engine_metrics(rollouts)


def _finish(
    run: Run, student: torch.nn.Module, optimizer: torch.optim.Optimizer, tokenizer
) -> torch.nn.Module:
    """After the last step: the final checkpoint (LoRA adapters unmerged, so a resume is exact)
    and status ``trained``, then the adapters merged and ``RUN/student/`` written (a
    from_pretrained directory) by rank 0; the other ranks only merge. Under FSDP rank 0 returns
    a whole (unsharded) student loaded with the gathered weights, as the evaluation loads one;
    the other ranks return their shards. Returns the trained student, in eval mode."""
    cfg, ranks = run.cfg, run.ranks
    full = run.finish(cfg.optim.steps, student, optimizer)  # FSDP: rank 0's gathered weights
    student = merged_student(cfg.model, student)  # model.lora: adapters merged into the weights
    run.export(student, tokenizer, full)
    if ranks.fsdp and ranks.writes:
        student, _ = load_model(resolve_model_path(cfg.model.student), **load_options(cfg.model))
        student.load_state_dict(full, strict=True)
    student.eval()
    return student


def _adamw(cfg: RunConfig, student: torch.nn.Module) -> torch.optim.AdamW:
    """AdamW with torch's fused kernel where the student's device has one: one pass over each
    tensor. The per-list implementation holds temporaries of about 1.4× the parameters during the
    step (1 GB for a 196M-parameter student, BENCHMARKS "A training step against TRL") and takes
    several times longer on CPU (196M parameters: 0.3 s instead of 4.8 s). Under FSDP the
    replicated parameters and the shards are two groups of the same settings (train/fsdp.py)."""
    o = cfg.optim
    params = trainable_parameters(student)  # model.lora: the adapters only
    fused = all(p.device.type in _FUSED_ADAMW_DEVICES for p in params)
    if any(is_sharded(p) for p in params):  # FSDP: the fused kernel steps a group of DTensors
        params = adamw_groups(params)
    return torch.optim.AdamW(
        params, lr=o.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay, fused=fused
    )


#: the devices on which torch's AdamW has a fused kernel (torch ≥ 2.4)
_FUSED_ADAMW_DEVICES = ("cpu", "cuda")


def step_problems(cfg: RunConfig, pool: list, step: int) -> list:
    """The step's problems: ``prompts_per_step`` distinct ones from the step's own stream,
    each repeated ``rollouts_per_prompt`` times."""
    problems = select_problems(pool, cfg.rollout.prompts_per_step, cfg.seed, step)
    return [p for p in problems for _ in range(cfg.rollout.rollouts_per_prompt)]


def _rewards(task, tokenizer, problems: list, rollouts: Rollouts) -> list[float]:
    """The task's score of each completion (the reward of ``rollout/reward``)."""
    texts = tokenizer.batch_decode(rollouts.completion_B_T, skip_special_tokens=True)
    return [task.score(p, t) for p, t in zip(problems, texts, strict=True)]


@dataclass(frozen=True)
class Sampler:
    """The run's rollout policy and where it samples: vLLM's ``engine``
    (:mod:`distillscope.rollout.vllm_engine`, which first pushes the student's weights) or, when
    None, the built-in sampler over the ``pair``'s models."""

    cfg: RunConfig
    policy: RolloutPolicy
    pair: ModelPair
    engine: VLLMEngine | None

    @classmethod
    def of(cls, cfg: RunConfig, pair: ModelPair) -> Sampler:
        """``rollout.policy`` over ``pair`` on ``rollout.engine``, a LoRA student's engine
        holding its merged weights."""
        policy, r = make_policy(cfg.rollout), cfg.rollout
        writers = (pair.student, pair.teacher)
        engine = rollout_engine(r.engine, policy, *writers, plain_weights, r.engine_gpu_memory)
        return cls(cfg, policy, pair, engine)

    def sample(self, prompts: PromptBatch, step: int, teacher=None) -> Rollouts:
        """Step ``step``'s rollouts of ``prompts``, drawn with the step's own generator and
        ``teacher`` (a routed run's; None = the pair's)."""
        cfg, pair = self.cfg, self.pair
        teacher = pair.teacher if teacher is None else teacher
        spec = SamplingSpec(
            max_new_tokens=cfg.task.max_new_tokens,
            stop_ids=pair.stop_ids or pair.tokenizer.eos_token_id,
            pad_id=pair.tokenizer.pad_token_id,
            vocab_size=pair.vocab_size,
        )
        generator = model_generator(pair.student, cfg.seed, step, Stream.ROLLOUT)
        if self.engine is not None:
            return self.engine.sample(self.policy, prompts, spec, generator)
        return sample_rollouts(self.policy, pair.student, teacher, prompts, spec, generator)


@dataclass(frozen=True)
class Learner:
    """What a forward–backward reads besides the batch: the run's config and objective, the
    student, and the run's processes (the metric totals and diagnostics are summed over them)."""

    cfg: RunConfig
    objective: Objective
    student: torch.nn.Module
    ranks: Ranks = ONE_PROCESS


@dataclass(frozen=True)
class StepBatch:
    """A step's rollout batch: the step (its random streams are ``(seed, step)``'s), the whole
    batch's rollouts, this rank's micro-batches of them (row indices the whole batch's) and,
    with several teachers, the teacher each row is routed to."""

    step: int
    rollouts: Rollouts
    micro: list[MicroBatch]
    route: list[str] | tuple[str, ...] = ()  # several teachers: each row's (.routing)


@dataclass(frozen=True)
class Pass:
    """One update's pass over the micro-batches: its metrics (with the diagnostics on the first
    update) and the whole batch's diagnostic log-probs (empty on the later updates)."""

    metrics: dict[str, float]
    logprobs_B_T: dict[str, torch.Tensor]


def _mean(values: list[float]) -> float:
    """The mean of one update's value or several (one value comes back unchanged, bit for bit)."""
    return sum(values[1:], values[0]) / len(values)


def update_metrics(
    cfg: RunConfig, passes: list[Pass], rollouts: Rollouts, rewards: list[float] | None = None
) -> dict[str, float]:
    """The step's loss metrics from its updates' ``passes``: the first update's diagnostics (of
    the policy that sampled), and each loss metric as the mean over the updates. With the
    rollouts' ``rewards`` also the informativeness I (:mod:`distillscope.teacher.signal`;
    ``rollout.rollouts_per_prompt`` ≥ 2)."""
    row = dict(passes[0].metrics)
    if rewards is not None:
        g = cfg.rollout.rollouts_per_prompt
        row |= informativeness_metrics(g, rollouts, passes[0].logprobs_B_T, rewards)
    for key in passes[-1].metrics:  # the keys every update logs: the loss metrics
        row[key] = _mean([p.metrics[key] for p in passes])
    return row


def forward_backward(
    learner: Learner,
    batch: StepBatch,
    teacher_scores: Iterable[TeacherScores],
    timer: PhaseTimer,
    advantage: FixedAdvantage | None = None,
) -> Pass:
    """Student forward, objective and backward per micro-batch; the update's metrics.

    Exact accumulation: micro-batch k's loss is weighted by its share of the whole batch's
    normaliser (:func:`~distillscope.train.step.micro_batch_share`), so the summed gradient is
    the full batch's for every reduction and any ``grad_accum``, dividing the batch or not; each
    metric is combined as :mod:`distillscope.metric_keys` declares beside it. Sampled estimators
    draw from uniforms of the whole batch, and the diagnostics are computed once on the whole
    batch's token log-probs: no metric depends on ``grad_accum`` or the path. With
    ``advantage`` (OPD's later updates of a batch) the teacher's scores are not read and no
    diagnostic is computed. With several processes ``batch.micro`` are this rank's; the totals
    and the diagnostic log-probs are summed over the ranks (:class:`.distributed.Ranks`).
    """
    cfg, objective, student = learner.cfg, learner.objective, learner.student
    student.train()
    rollouts, mask_B_T = batch.rollouts, batch.rollouts.completion_mask_B_T
    uniforms_B_T = None
    if objective.kind.needs_generator:  # one uniform per position, from the step's own stream
        gen = model_generator(student, cfg.seed, batch.step, Stream.ESTIMATOR)
        uniforms_B_T = draw_uniforms(mask_B_T.shape, gen).to(mask_B_T.device)
    if advantage is not None:
        teacher_scores = [None] * len(batch.micro)
    diag_B_T: dict[str, torch.Tensor] = {}
    totals: dict[str, float] = {}
    n_tokens = float(mask_B_T.sum())
    # a live teacher scores each micro-batch as the loop reaches it (teacher_scores is lazy)
    for micro, t_scores in zip(batch.micro, teacher_scores, strict=True):
        timer.lap("teacher_forward")
        r, index_b = micro.rollouts, micro.index_b
        share = micro_batch_share(mask_B_T, index_b, objective.options.reduction)
        with forward_precision(cfg.model):
            s_scores = objective.path.scores(student, r, "student")
        micro_u = None if uniforms_B_T is None else uniforms_B_T[index_b]
        micro_a = None if advantage is None else advantage.rows(index_b.to(mask_B_T.device))
        loss, metrics, gathered = objective_loss(objective, s_scores, t_scores, r, micro_u, micro_a)
        (loss * share).backward()
        # several teachers: each one's loss on its own rows, already weighted (none: no row)
        metrics |= teacher_losses(
            objective, s_scores, t_scores, mask_B_T, batch.route, micro, micro_u, micro_a
        )
        timer.lap("student_forward_backward")
        if advantage is None:
            logp_B_T = diagnostic_logprobs(objective, s_scores, t_scores, r, gathered)
            for key, value in logp_B_T.items():
                diag_B_T.setdefault(key, value.new_zeros(mask_B_T.shape))
                diag_B_T[key][index_b] = value
        weights = {
            "sum": 1.0,
            "loss": share,
            "mean": float(r.completion_mask_B_T.sum()) / max(n_tokens, 1.0),
        }
        for key, value in {"train/loss": float(loss.detach()), **metrics}.items():
            totals[key] = totals.get(key, 0.0) + value * weights[accumulation(key)]
    totals = learner.ranks.sum_metrics(totals)
    if advantage is not None:
        return Pass(totals, {})
    diag_B_T = learner.ranks.sum_rows(diag_B_T)
    return Pass({**totals, **_diagnostics(rollouts, diag_B_T)}, diag_B_T)


def _diagnostics(r: Rollouts, logp_B_T: dict[str, torch.Tensor]) -> dict[str, float]:
    """k1/k2/k3 on student-written rows, forward-KL estimators on teacher-written rows (loss
    temperatures), and the likelihood diagnostic at temperature 1.0 — on the whole batch."""
    out = kl_metrics_by_writer(
        logp_B_T["student_loss_t"],
        logp_B_T["teacher_loss_t"],
        r.completion_mask_B_T,
        r.source_B == SOURCE_STUDENT,
        r.source_B == SOURCE_TEACHER,
    )
    out.update(likelihood_metrics(r, logp_B_T["student_t1"], logp_B_T["teacher_t1"]))
    return out
