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

The pieces: :mod:`.step` (the objective on one micro-batch), :mod:`.scoring` (score objects
of either path), :mod:`.teacher` (the teacher's scores: live, cached or top-k), :mod:`.setup`
(models, policy), :mod:`.checkpoint`.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import torch

from distillscope.config import RunConfig, dump_run_config
from distillscope.metric_keys import accumulation
from distillscope.models import ModelPair, load_model, load_options, resolve_model_path
from distillscope.objectives import draw_uniforms, kl_metrics_by_writer
from distillscope.rollout import (
    SOURCE_STUDENT,
    SOURCE_TEACHER,
    NonFiniteSamplingError,
    PromptBatch,
    PromptEncoder,
    RolloutPolicy,
    Rollouts,
    SamplingSpec,
    likelihood_metrics,
    model_generator,
    rollout_length_metrics,
    sample_rollouts,
    select_problems,
)
from distillscope.rollout.prompts import Stream
from distillscope.rollout.vllm_engine import VLLMEngine, engine_metrics, rollout_engine
from distillscope.store import MetricsLog, claim_run, write_config, write_status
from distillscope.tasks import training_problems
from distillscope.train.checkpoint import export_student, load_checkpoint
from distillscope.train.checks import preflight
from distillscope.train.distributed import ONE_PROCESS, Ranks
from distillscope.train.fsdp import adamw_groups, is_sharded
from distillscope.train.informativeness import informativeness_metrics
from distillscope.train.lora import merged_student, plain_weights, trainable_parameters
from distillscope.train.precision import forward_precision
from distillscope.train.profiles import Profiler
from distillscope.train.scoring import TeacherScores
from distillscope.train.setup import load_models, make_policy
from distillscope.train.step import (
    FixedAdvantage,
    MicroBatch,
    Objective,
    diagnostic_logprobs,
    micro_batch_share,
    objective_loss,
)
from distillscope.train.teacher import TeacherScorer
from distillscope.train.trackers import Trackers


class DivergedError(RuntimeError):
    """The loss or the gradient norm became NaN/inf; the run is marked ``diverged``."""


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
    ``status.json``) and raises :class:`DivergedError`; a finished run is ``trained``.

    ``rollout_cache`` (a directory shared by runs) enables reuse of teacher rollouts when
    ``rollout.cache_teacher_rollouts`` is set. ``on_step(step, row)`` is called after each
    logged step (progress bars).
    """
    task = preflight(cfg)  # a bad path or task file fails before anything is written
    ranks = Ranks.current(cfg)  # one process, or one of a launcher's (train/distributed.py)
    ranks.check(cfg)
    fingerprint = ranks.of_rank0(lambda: claim_run_dir(cfg, run_dir, overwrite))
    profile_steps = set(cfg.eval.profile_steps)  # rank 0 profiles; under FSDP every rank gathers
    cfg = ranks.local_config(cfg)  # this rank's device; the run directory keeps the config
    torch.manual_seed(cfg.seed)
    pair = load_models(cfg, shard=ranks.fsdp)  # --fsdp: the student's layers sharded
    is_cap = cfg.rollout.engine_is_cap if cfg.rollout.engine_is_correction else None
    objective = Objective.from_config(cfg.objective, pair.vocab_size, is_cap)  # bad top k fails
    pool = training_problems(task, cfg.task.eval_fraction)
    encoder = _encoder(cfg, task, pair)
    policy, student = make_policy(cfg.rollout), pair.student
    engine = _engine(cfg, policy, pair)  # None: builtin
    optimizer = _adamw(cfg, student)
    start = load_checkpoint(run_dir, student, optimizer, fingerprint)
    log = MetricsLog(run_dir, keep_steps=start) if ranks.writes else None
    trackers = Trackers(cfg, run_dir, start)  # log.trackers: TensorBoard, W&B (same rows)
    # the rollout cache keys the teacher's scores by the single-process micro-batches
    teacher = TeacherScorer(
        cfg, pair.teacher, objective, rollout_cache if ranks.world == 1 else None
    )
    learner = _Learner(cfg, objective, student, optimizer, run_dir if ranks.writes else None, ranks)
    profiler = Profiler(cfg, pair, objective.path, encoder, pool, run_dir, start)

    for step in range(start, cfg.optim.steps):
        _profile(profiler, ranks, student, step, profile_steps)  # before the step's update
        timer = PhaseTimer()
        # 1. prompts: distinct within the step, drawn from the step's own (seed, step) stream
        problems = _problems(cfg, pool, step)
        prompts = _prompts(encoder, problems, cfg.model.device)
        # 2. roll out: trajectories are constants (no gradient through sampling); a shared
        #    teacher-written step comes from the rollout cache when another run sampled it;
        #    under FSDP every rank gathers the student's full weights while rank 0 samples
        try:
            roll = functools.partial(_roll_out, cfg, policy, pair, prompts, step, engine)
            fetch = functools.partial(teacher.rollouts, step, prompts, roll)
            with ranks.full_weights(student):
                rollouts, saved_s = ranks.rollouts_of_rank0(fetch)
        except NonFiniteSamplingError as err:
            _diverged(learner.run_dir, f"step {step}: {err}")
        rollouts = rollouts.to(cfg.model.device)
        rewards = _rewards(task, pair.tokenizer, problems, rollouts)
        timer.lap("rollout")
        # 3. score: the teacher's scores of each micro-batch (of this rank's rows, with several
        #    processes), live or from the cache (same bits)
        batches = ranks.micro_batches(rollouts, cfg.optim.grad_accum)
        t_scores, scores_saved_s = teacher.scores(step, prompts, batches)
        timer.lap("teacher_forward")
        # 4–7. per update (objective.updates_per_batch, 1 but for OPD): student forward,
        #      objective and backward per micro-batch (exact accumulation), clip, step
        lr = lr_at(cfg, step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        row, norms = _updates(learner, rollouts, batches, t_scores, step, timer, rewards)
        # 8. log: the loss metrics and the pre-clip norms as the mean over the updates
        row |= _step_metrics(cfg, step, lr, norms, rewards, rollouts, timer)
        row["time/teacher_saved"] = saved_s + scores_saved_s  # rollouts and scores from cache
        if ranks.writes:  # one writer: rank 0
            log.append(row)
        trackers.log(row)  # none on the other ranks (Ranks.local_config)
        if on_step is not None:
            on_step(step, row)
        # 9. checkpoint: a killed run resumes from the last one with the same metrics
        if cfg.checkpoint_every and ((step + 1) % cfg.checkpoint_every == 0):
            ranks.save_checkpoint(run_dir, step + 1, student, optimizer, fingerprint)  # rank 0
    trackers.close()
    _profile(profiler, ranks, student, cfg.optim.steps, profile_steps)  # after the last update
    return _finish(cfg, run_dir, learner, fingerprint, pair.tokenizer)


def _profile(profiler: Profiler, ranks: Ranks, student, step: int, steps: set[int]) -> None:
    """``eval.profile_steps``' per-position profiles at ``step`` (rank 0 takes them; under FSDP
    every rank gathers the student's full weights for them, so ``steps`` is the config's)."""
    with ranks.full_weights(student, step in steps):
        profiler.at(step)


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
    row["train/grad_clipped"] = _mean([float(n > _max_norm(cfg)) for n in norms])
    row["rollout/reward"] = sum(rewards) / len(rewards)
    row |= rollout_length_metrics(rollouts) | timer.metrics(rollouts)
    return row | engine_metrics(rollouts)


def _finish(
    cfg: RunConfig, run_dir: Path, learner: _Learner, fingerprint: str, tokenizer
) -> torch.nn.Module:
    """After the last step: the final checkpoint (LoRA adapters unmerged, so a resume is exact)
    and status ``trained``, then the adapters merged and ``RUN/student/`` written (a
    from_pretrained directory), by rank 0 alone; the other ranks only merge. Under FSDP every
    rank gathers the full weights for the checkpoint, and rank 0 returns a whole (unsharded)
    student loaded with them, as the evaluation loads one; the other ranks return their shards.
    Returns the trained student, in eval mode."""
    student, ranks = learner.student, learner.ranks
    full = ranks.save_checkpoint(run_dir, cfg.optim.steps, student, learner.optimizer, fingerprint)
    if ranks.writes:
        write_status(run_dir, "trained")
    student = merged_student(cfg.model, student)  # model.lora: adapters merged into the weights
    if ranks.writes:
        export_student(run_dir, student, tokenizer, full)  # full: FSDP's gathered weights
    if ranks.fsdp and ranks.writes:
        student, _ = load_model(resolve_model_path(cfg.model.student), **load_options(cfg.model))
        student.load_state_dict(full, strict=True)
    student.eval()
    return student


def claim_run_dir(cfg: RunConfig, run_dir: Path, overwrite: bool) -> str:
    """Claim ``run_dir`` for ``cfg`` (its fingerprint), write the config, mark it running."""
    run_dir.mkdir(parents=True, exist_ok=True)
    fingerprint = claim_run(run_dir, cfg.model_dump(mode="json"), overwrite=overwrite)
    write_config(run_dir, dump_run_config(cfg))
    write_status(run_dir, "running", phase="train")
    return fingerprint


def _encoder(cfg: RunConfig, task, pair) -> PromptEncoder:
    return PromptEncoder(
        task,
        pair.tokenizer,
        cfg.task.prompt_format,
        cfg.task.teacher_style_flag,
        teacher_tokenizer=pair.teacher_tokenizer,
        teacher_instruction=cfg.task.teacher_instruction,
    )


def _engine(cfg: RunConfig, policy: RolloutPolicy, pair: ModelPair) -> VLLMEngine | None:
    """The run's vLLM engine (``rollout.engine: vllm``) over the policy's writer, a LoRA
    student's holding its merged weights; None for the builtin sampler."""
    r = cfg.rollout
    writers = (pair.student, pair.teacher)
    return rollout_engine(r.engine, policy, *writers, plain_weights, r.engine_gpu_memory)


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


def _problems(cfg: RunConfig, pool: list, step: int) -> list:
    """The step's problems: ``prompts_per_step`` distinct ones from the step's own stream,
    each repeated ``rollouts_per_prompt`` times."""
    problems = select_problems(pool, cfg.rollout.prompts_per_step, cfg.seed, step)
    return [p for p in problems for _ in range(cfg.rollout.rollouts_per_prompt)]


def _rewards(task, tokenizer, problems: list, rollouts: Rollouts) -> list[float]:
    """The task's score of each completion (the reward of ``rollout/reward``)."""
    texts = tokenizer.batch_decode(rollouts.completion_B_T, skip_special_tokens=True)
    return [task.score(p, t) for p, t in zip(problems, texts, strict=True)]


def _diverged(run_dir: Path | None, reason: str) -> NoReturn:
    if run_dir is not None:
        write_status(run_dir, "diverged", reason)
    raise DivergedError(reason)


def stop_if_diverged(run_dir: Path | None, step: int, loss: float, grad_norm: float) -> None:
    """Mark the run diverged (and raise) when the loss or the pre-clip norm is NaN/inf (a rank
    that does not write the run directory, ``run_dir`` None, only raises)."""
    if not (math.isfinite(grad_norm) and math.isfinite(loss)):
        _diverged(run_dir, f"step {step}: loss {loss}, pre-clip grad norm {grad_norm}")


def _prompts(encoder: PromptEncoder, problems: list, device: str) -> PromptBatch:
    """The step's prompts on the student's device: the student's, and the teacher's own when
    it reads another (style flag, another chat template). The sampler moves the teacher's
    inputs to the teacher's device and its logits back."""
    ids_B_P, mask_B_P = (t.to(device) for t in encoder.encode(problems, "student"))
    if not encoder.teacher_prompt_differs:
        return PromptBatch(ids_B_P, mask_B_P)
    teacher_ids_B_Q, teacher_mask_B_Q = (t.to(device) for t in encoder.encode(problems, "teacher"))
    return PromptBatch(ids_B_P, mask_B_P, teacher_ids_B_Q, teacher_mask_B_Q)


def _roll_out(
    cfg: RunConfig, policy, pair, prompts: PromptBatch, step: int, engine=None
) -> Rollouts:
    """Sample this step's rollouts with the step's own generator (vLLM's ``engine`` when set:
    :mod:`distillscope.rollout.vllm_engine`, which first pushes the student's weights)."""
    spec = SamplingSpec(
        max_new_tokens=cfg.task.max_new_tokens,
        stop_ids=pair.stop_ids or pair.tokenizer.eos_token_id,
        pad_id=pair.tokenizer.pad_token_id,
        vocab_size=pair.vocab_size,
    )
    generator = model_generator(pair.student, cfg.seed, step, Stream.ROLLOUT)
    if engine is not None:
        return engine.sample(policy, prompts, spec, generator)
    return sample_rollouts(policy, pair.student, pair.teacher, prompts, spec, generator)


@dataclass(frozen=True)
class _Learner:
    """What an update changes and reads besides the batch: the student and its optimizer, the
    run's objective and config, the run directory (a diverged run is marked there; None on a
    rank that does not write it) and the run's processes (their gradients are summed)."""

    cfg: RunConfig
    objective: Objective
    student: torch.nn.Module
    optimizer: torch.optim.Optimizer
    run_dir: Path | None
    ranks: Ranks = ONE_PROCESS


def _max_norm(cfg: RunConfig) -> float:
    return cfg.optim.grad_clip if cfg.optim.grad_clip is not None else math.inf


def _mean(values: list[float]) -> float:
    """The mean of one update's value or several (one value comes back unchanged, bit for bit)."""
    return sum(values[1:], values[0]) / len(values)


def _updates(
    learner: _Learner,
    rollouts: Rollouts,
    batches: list[MicroBatch],
    teacher_scores: Iterable[TeacherScores],
    step: int,
    timer: PhaseTimer,
    rewards: list[float] | None = None,
) -> tuple[dict[str, float], list[float]]:
    """Steps 4–7 on one rollout batch, ``objective.updates_per_batch`` times (1 but for OPD):
    the micro-batches' forwards and backward (:func:`_forward_backward`), then clip and step.

    The first update reads the teacher's scores and computes the diagnostics, of the policy that
    sampled (as with one update); the later ones reuse its advantage
    (:class:`~distillscope.train.step.FixedAdvantage`) and run only the student, so the
    importance ratio r_t = π_θ / π_old moves from 1 and the clip acts. Each update is one
    optimizer step with exact accumulation over the micro-batches, at the step's learning rate;
    a NaN/inf loss or pre-clip norm ends the run at the update it appears. Returns the step's
    row — the first update's diagnostics, and each loss metric as the mean over the updates —
    and each update's pre-clip gradient norm. With the rollouts' ``rewards`` the row also holds
    the informativeness I (:mod:`distillscope.train.informativeness`).
    """
    cfg, objective, student = learner.cfg, learner.objective, learner.student
    ranks = learner.ranks
    passes: list[_Pass] = []
    norms: list[float] = []
    advantage = None
    for _ in range(objective.opd.updates_per_batch):
        scores = teacher_scores if advantage is None else [None] * len(batches)
        done = _forward_backward(
            cfg, objective, rollouts, batches, student, scores, step, timer, advantage, ranks
        )
        ranks.sum_gradients(student)  # several processes: the whole batch's gradient
        # clip (log the pre-clip norm) and step; a NaN/inf loss or norm ends the run here
        grad_norm = ranks.clip_gradients(student, _max_norm(cfg))  # FSDP: the global norm
        stop_if_diverged(learner.run_dir, step, done.metrics["train/loss"], grad_norm)
        learner.optimizer.step()
        learner.optimizer.zero_grad(set_to_none=True)
        timer.lap("optimizer")
        passes.append(done)
        norms.append(grad_norm)
        if advantage is None and objective.opd.updates_per_batch > 1:
            advantage = FixedAdvantage.from_diagnostics(done.logprobs_B_T)
    row = dict(passes[0].metrics)
    if rewards is not None:  # I of the sampling policy's rollouts (rollouts_per_prompt ≥ 2)
        g = cfg.rollout.rollouts_per_prompt
        row |= informativeness_metrics(g, rollouts, passes[0].logprobs_B_T, rewards)
    for key in passes[-1].metrics:  # the keys every update logs: the loss metrics
        row[key] = _mean([p.metrics[key] for p in passes])
    return row, norms


@dataclass(frozen=True)
class _Pass:
    """One update's pass over the micro-batches: its metrics (with the diagnostics on the first
    update) and the whole batch's diagnostic log-probs (empty on the later updates)."""

    metrics: dict[str, float]
    logprobs_B_T: dict[str, torch.Tensor]


def _forward_backward(
    cfg: RunConfig,
    objective: Objective,
    rollouts: Rollouts,
    batches: list[MicroBatch],
    student: torch.nn.Module,
    teacher_scores: Iterable[TeacherScores | None],
    step: int,
    timer: PhaseTimer,
    advantage: FixedAdvantage | None = None,
    ranks: Ranks = ONE_PROCESS,
) -> _Pass:
    """Student forward, objective and backward per micro-batch; the update's metrics.

    Exact accumulation: micro-batch k's loss is weighted by its share of the whole batch's
    normaliser (:func:`~distillscope.train.step.micro_batch_share`), so the summed gradient is
    the full batch's for every reduction and any ``grad_accum``, dividing the batch or not; each
    metric is combined as :mod:`distillscope.metric_keys` declares beside it. Sampled estimators
    draw from uniforms of the whole batch, and the diagnostics are computed once on the whole
    batch's token log-probs: no metric depends on ``grad_accum`` or the path. With
    ``advantage`` (OPD's later updates of a batch) the teacher is not read and no diagnostic is
    computed. With several processes ``batches`` are this rank's; the totals and the diagnostic
    log-probs are summed over the ranks (:class:`~distillscope.train.distributed.Ranks`).
    """
    student.train()
    mask_B_T = rollouts.completion_mask_B_T
    uniforms_B_T = None
    if objective.kind.needs_generator:  # one uniform per position, from the step's own stream
        gen = model_generator(student, cfg.seed, step, Stream.ESTIMATOR)
        uniforms_B_T = draw_uniforms(mask_B_T.shape, gen).to(mask_B_T.device)
    diag_B_T: dict[str, torch.Tensor] = {}
    totals: dict[str, float] = {}
    n_tokens = float(mask_B_T.sum())
    # a live teacher scores each micro-batch as the loop reaches it (teacher_scores is lazy)
    for micro, t_scores in zip(batches, teacher_scores, strict=True):
        timer.lap("teacher_forward")
        r, index_b = micro.rollouts, micro.index_b
        share = micro_batch_share(mask_B_T, index_b, objective.options.reduction)
        with forward_precision(cfg.model):
            s_scores = objective.path.scores(student, r, "student")
        micro_u = None if uniforms_B_T is None else uniforms_B_T[index_b]
        micro_a = None if advantage is None else advantage.rows(index_b.to(mask_B_T.device))
        loss, metrics, gathered = objective_loss(objective, s_scores, t_scores, r, micro_u, micro_a)
        (loss * share).backward()
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
    totals = ranks.sum_metrics(totals)
    if advantage is not None:
        return _Pass(totals, {})
    diag_B_T = ranks.sum_rows(diag_B_T)
    return _Pass({**totals, **_diagnostics(rollouts, diag_B_T)}, diag_B_T)


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


class PhaseTimer:
    """Wall time per phase of a step (``time/<phase>``, seconds) and tokens per second."""

    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()
        self.phases: dict[str, float] = {}

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self.last
        self.last = now

    def metrics(self, rollouts: Rollouts) -> dict[str, float]:
        """The phases' seconds, the step's, and the rollouts' completion tokens per second."""
        tokens = int(rollouts.completion_mask_B_T.sum())
        total = self.last - self.start
        out = {f"time/{k}": v for k, v in self.phases.items()}
        out["time/step"] = total
        out["perf/tokens_per_s"] = tokens / total if total > 0 else 0.0
        return out
