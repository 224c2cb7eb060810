"""``distill(cfg, run_dir)``: one readable distillation loop (docs/method.md §1–§6).

    distillscope train configs/testbed-onpd-forward.yaml optim.lr=3e-4

Every step, in the order it happens: pick prompts → roll out → teacher forward → student
forward → objective → backward → clip → step → log → (checkpoint). The run directory receives
``config.yaml``, ``metrics.jsonl`` (one row per step, keys in :mod:`distillscope.metric_keys`),
``status.json``, ``checkpoint/`` and, at the end, ``student/`` (a Hugging Face directory). A
killed run restarts from its last checkpoint and ends with the same metrics as an uninterrupted
one: every random draw of step k comes from ``(seed, k)``, never from state carried across steps.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import torch

from distillscope.config import ObjectiveConfig, RunConfig, dump_run_config
from distillscope.objectives import (
    OBJECTIVES,
    draw_uniforms,
    kl_metrics_by_writer,
)
from distillscope.objectives.topk import check_topk
from distillscope.rollout import (
    SOURCE_STUDENT,
    SOURCE_TEACHER,
    TEACHER_LOGITS_MAX_VOCAB,
    NonFiniteSamplingError,
    PromptBatch,
    PromptEncoder,
    RolloutCache,
    Rollouts,
    SamplingSpec,
    likelihood_metrics,
    model_generator,
    prompt_digest,
    rollout_length_metrics,
    sample_rollouts,
    select_problems,
)
from distillscope.store import MetricsLog, claim_run, write_config, write_status
from distillscope.tasks import training_problems
from distillscope.train.checkpoint import export_student, load_checkpoint, save_checkpoint
from distillscope.train.checks import preflight
from distillscope.train.precision import forward_precision
from distillscope.train.scoring import (
    Scores,
    TeacherTopK,
    diagnostic_logprobs,
    micro_batch_share,
    objective_loss,
    teacher_topk,
    use_fused,
)
from distillscope.train.setup import load_models, make_policy


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
    run_dir.mkdir(parents=True, exist_ok=True)
    fingerprint = claim_run(run_dir, cfg.model_dump(mode="json"), overwrite=overwrite)
    write_config(run_dir, dump_run_config(cfg))
    write_status(run_dir, "running", phase="train")
    torch.manual_seed(cfg.seed)

    pair = load_models(cfg)
    if cfg.objective.teacher_topk:
        check_topk(cfg.objective.teacher_topk, pair.vocab_size)
    pool = training_problems(task, cfg.task.eval_fraction)
    encoder = PromptEncoder(
        task,
        pair.tokenizer,
        cfg.task.prompt_format,
        cfg.task.teacher_style_flag,
        teacher_tokenizer=pair.teacher_tokenizer,
    )
    policy = make_policy(cfg.rollout)
    student, teacher = pair.student, pair.teacher
    if cfg.model.gradient_checkpointing:
        student.activation_checkpointing_enable({"use_reentrant": False})
    optimizer = torch.optim.AdamW(
        student.parameters(),
        lr=cfg.optim.lr,
        betas=cfg.optim.betas,
        eps=cfg.optim.eps,
        weight_decay=cfg.optim.weight_decay,
    )
    start = load_checkpoint(run_dir, student, optimizer, fingerprint)
    log = MetricsLog(run_dir, keep_steps=start)
    cache = (
        RolloutCache(rollout_cache)
        if rollout_cache and cfg.rollout.cache_teacher_rollouts
        else None
    )

    for step in range(start, cfg.optim.steps):
        timer = _PhaseTimer()
        # 1. prompts: distinct within the step, drawn from a (seed, step) stream
        problems = select_problems(pool, cfg.rollout.prompts_per_step, cfg.seed, step)
        problems = [p for p in problems for _ in range(cfg.rollout.rollouts_per_prompt)]
        # Every tensor of the step lives on the student's device (the sampler moves the
        # teacher's inputs to the teacher's device and its logits back, one row per token).
        prompt_ids, prompt_mask = _to(encoder.encode(problems, "student"), cfg.model.device)
        teacher_ids, teacher_mask = (
            _to(encoder.encode(problems, "teacher"), cfg.model.device)
            if encoder.teacher_prompt_differs
            else (None, None)
        )

        # 2. roll out (trajectories are constants: no gradient through sampling)
        roll = functools.partial(
            _roll_out, cfg, policy, pair, prompt_ids, prompt_mask, teacher_ids, teacher_mask, step
        )
        shared = cache is not None and cfg.rollout.policy == "teacher"
        saved_s, scores = 0.0, None
        try:
            if shared:
                key = _cache_key(cfg, step, prompt_digest(prompt_ids, prompt_mask))
                rollouts, saved_s = cache.fetch(key, roll)
            else:
                rollouts = roll()
        except NonFiniteSamplingError as err:
            _diverged(run_dir, f"step {step}: {err}")
        rollouts = rollouts.to(cfg.model.device)
        texts = pair.tokenizer.batch_decode(rollouts.completion_B_T, skip_special_tokens=True)
        rewards = [task.score(p, t) for p, t in zip(problems, texts, strict=True)]
        timer.lap("rollout")
        form = _teacher_score_form(cfg, pair.vocab_size)
        if shared and form is not None:
            # the teacher's scores of shared rollouts are shared too, bit for bit
            scores, scores_saved_s = cache.fetch_tensors(
                {**key, **_score_key(cfg, form, pair.vocab_size)},
                functools.partial(_teacher_outputs, cfg, rollouts, teacher, form, pair.vocab_size),
            )
            saved_s += scores_saved_s
            timer.lap("teacher_forward")

        # 3–6. forwards, objective and backward, in grad_accum micro-batches
        for group in optimizer.param_groups:
            group["lr"] = lr_at(cfg, step)
        row = _forward_backward(
            cfg, rollouts, student, teacher, pair.vocab_size, step, timer, teacher_scores=scores
        )

        # 7. clip (log the pre-clip norm) and step
        max_norm = cfg.optim.grad_clip if cfg.optim.grad_clip is not None else math.inf
        grad_norm = float(torch.nn.utils.clip_grad_norm_(student.parameters(), max_norm))
        if not (math.isfinite(grad_norm) and math.isfinite(row["train/loss"])):
            _diverged(
                run_dir, f"step {step}: loss {row['train/loss']}, pre-clip grad norm {grad_norm}"
            )
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        timer.lap("optimizer")

        # 8. log
        row.update(
            {
                "step": step,
                "train/lr": lr_at(cfg, step),
                "train/grad_norm": grad_norm,
                "train/grad_clipped": float(grad_norm > max_norm),
                "rollout/reward": sum(rewards) / len(rewards),
                **rollout_length_metrics(rollouts),
                **timer.metrics(int(rollouts.completion_mask_B_T.sum())),
                "time/teacher_saved": saved_s,
            }
        )
        log.append(row)
        if on_step is not None:
            on_step(step, row)
        if cfg.checkpoint_every and ((step + 1) % cfg.checkpoint_every == 0):
            save_checkpoint(run_dir, step + 1, student, optimizer, fingerprint)
    save_checkpoint(run_dir, cfg.optim.steps, student, optimizer, fingerprint)
    write_status(run_dir, "trained")
    export_student(run_dir, student, pair.tokenizer)  # RUN/student/: from_pretrained loads it
    student.eval()
    return student


def _diverged(run_dir: Path, reason: str) -> NoReturn:
    write_status(run_dir, "diverged", reason)
    raise DivergedError(reason)


def _roll_out(
    cfg: RunConfig,
    policy,
    pair,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    teacher_ids: torch.Tensor | None,
    teacher_mask: torch.Tensor | None,
    step: int,
) -> Rollouts:
    """Sample this step's rollouts with the step's own generator."""
    spec = SamplingSpec(
        max_new_tokens=cfg.task.max_new_tokens,
        stop_ids=pair.stop_ids or pair.tokenizer.eos_token_id,
        pad_id=pair.tokenizer.pad_token_id,
        vocab_size=pair.vocab_size,
    )
    prompts = PromptBatch(prompt_ids, prompt_mask, teacher_ids, teacher_mask)
    generator = model_generator(pair.student, cfg.seed, step)
    return sample_rollouts(policy, pair.student, pair.teacher, prompts, spec, generator)


def _to(tensors: tuple[torch.Tensor, ...], device: str) -> tuple[torch.Tensor, ...]:
    return tuple(t.to(device) for t in tensors)


def _forward_backward(
    cfg: RunConfig,
    rollouts: Rollouts,
    student: torch.nn.Module,
    teacher: torch.nn.Module,
    vocab_size: int,
    step: int,
    timer: _PhaseTimer,
    teacher_scores: dict[str, torch.Tensor] | None = None,
) -> dict[str, float]:
    """Teacher forward (no grad), student forward, objective, backward — per micro-batch.

    Exact accumulation: micro-batch k's loss is weighted by its share of the whole batch's
    normaliser (:func:`~distillscope.train.scoring.micro_batch_share`), so the summed gradient is
    the full batch's for every reduction and any ``grad_accum``, dividing the batch or not.
    Sampled estimators draw from uniforms of the whole batch, and the diagnostics are computed
    once on the whole batch's token log-probs: no metric depends on ``grad_accum`` or the path.
    ``teacher_scores`` (from the rollout cache: ``micro_<k>`` → the teacher's logits or hidden
    states for micro-batch k, see :func:`_teacher_outputs`) replaces the teacher forward.
    """
    student.train()
    o = cfg.objective
    mask_B_T = rollouts.completion_mask_B_T
    fused = use_fused(o, vocab_size)
    s_device = _device(student)
    uniforms_B_T = None
    if OBJECTIVES[o.kind].needs_generator:
        gen = model_generator(student, cfg.seed, step, stream=1)
        uniforms_B_T = draw_uniforms(mask_B_T.shape, gen).to(mask_B_T.device)
    diag_B_T: dict[str, torch.Tensor] = {}
    totals: dict[str, float] = {}
    n_tokens = float(mask_B_T.sum())
    for k, index_b in enumerate(_micro_batch_rows(rollouts, cfg.optim.grad_accum)):
        whole = len(index_b) == rollouts.batch_size
        micro = rollouts if whole else rollouts.rows(index_b.to(mask_B_T.device))
        share = micro_batch_share(mask_B_T, index_b, o.reduction)
        with forward_precision(cfg.model):
            if teacher_scores is None:
                t_scores = _teacher_scores(teacher, micro, fused, s_device)
                if o.teacher_topk:
                    t_scores = teacher_topk(o, t_scores, micro, vocab_size)
            else:
                t_scores = _cached_scores(teacher_scores, k, teacher, o, fused, s_device)
            timer.lap("teacher_forward")
            s_scores = model_scores(student, micro, "student", fused)
        micro_u = None if uniforms_B_T is None else uniforms_B_T[index_b]
        loss, metrics = objective_loss(o, s_scores, t_scores, micro, vocab_size, micro_u)
        (loss * share).backward()
        timer.lap("student_forward_backward")
        for key, value in diagnostic_logprobs(o, s_scores, t_scores, micro, vocab_size).items():
            diag_B_T.setdefault(key, value.new_zeros(mask_B_T.shape))
            diag_B_T[key][index_b] = value
        token_share = float(micro.completion_mask_B_T.sum()) / max(n_tokens, 1.0)
        for key, value in {"train/loss": float(loss.detach()), **metrics}.items():
            weight = (
                1.0 if key.endswith("/tokens") else share if key.endswith("loss") else token_share
            )
            totals[key] = totals.get(key, 0.0) + value * weight
    return {**totals, **_diagnostics(rollouts, diag_B_T)}


def model_scores(model: torch.nn.Module, r: Rollouts, role: str, fused: bool) -> Scores:
    """The model's scores of the completion: hidden states + LM head (fused) or logits."""
    if not fused:
        return Scores(logits_B_T_V=completion_logits(model, r, role))
    head_V_H = model.get_output_embeddings().weight
    # Autocast leaves bf16 hidden states; the objective casts per chunk, in the head's dtype.
    return Scores(
        hidden_B_T_H=completion_hidden(model, r, role).to(head_V_H.dtype), head_V_H=head_V_H
    )


def _micro_batch_rows(rollouts: Rollouts, n: int) -> list[torch.Tensor]:
    """Row indices of the ``grad_accum`` micro-batches (consecutive rows; none empty)."""
    return [i for i in torch.arange(rollouts.batch_size).tensor_split(n) if len(i)]


def _teacher_scores(
    teacher: torch.nn.Module, micro: Rollouts, fused: bool, device: torch.device
) -> Scores:
    """The teacher's scores of ``micro`` on the student's ``device``, without autograd."""
    with torch.inference_mode():  # the teacher may sit on its own device
        t = model_scores(teacher, micro.to(_device(teacher)), "teacher", fused)
    # clone: inference tensors cannot enter autograd
    if t.fused:
        return Scores(
            hidden_B_T_H=t.hidden_B_T_H.clone().to(device), head_V_H=t.head_V_H.to(device)
        )
    return Scores(logits_B_T_V=t.logits_B_T_V.clone().to(device))


def _cached_scores(
    entry: dict[str, torch.Tensor],
    k: int,
    teacher: torch.nn.Module,
    cfg: ObjectiveConfig,
    fused: bool,
    device: torch.device,
) -> Scores | TeacherTopK:
    """Micro-batch ``k`` of a cache entry of :func:`_teacher_outputs` on ``device``."""
    if cfg.teacher_topk:
        return TeacherTopK(*(entry[f"micro_{k}/{name}"] for name in TeacherTopK.TENSORS)).to(device)
    tensor = entry[f"micro_{k}"]
    if fused:
        return Scores(hidden_B_T_H=tensor.to(device), head_V_H=_head(teacher).to(device))
    return Scores(logits_B_T_V=tensor.to(device))


def _teacher_score_form(cfg: RunConfig, vocab_size: int) -> str | None:
    """What of the teacher's output a cache entry holds: its ``topk`` reduction when
    ``objective.teacher_topk`` is set (any V), ``hidden`` states on the fused path (any V), full
    ``logits`` up to V = TEACHER_LOGITS_MAX_VOCAB, else nothing."""
    if cfg.objective.teacher_topk:
        return "topk"
    if use_fused(cfg.objective, vocab_size):
        return "hidden"
    return "logits" if vocab_size <= TEACHER_LOGITS_MAX_VOCAB else None


def _teacher_outputs(
    cfg: RunConfig, rollouts: Rollouts, teacher: torch.nn.Module, form: str, vocab_size: int
) -> dict[str, torch.Tensor]:
    """The teacher's output for every micro-batch, as :func:`_forward_backward` would compute."""
    o, device = cfg.objective, rollouts.completion_mask_B_T.device
    fused = use_fused(o, vocab_size) if form == "topk" else form == "hidden"
    out = {}
    for k, index_b in enumerate(_micro_batch_rows(rollouts, cfg.optim.grad_accum)):
        micro = rollouts if len(index_b) == rollouts.batch_size else rollouts.rows(index_b)
        with forward_precision(cfg.model):
            t = _teacher_scores(teacher, micro, fused, device)
        if form == "topk":
            top = teacher_topk(o, t, micro, vocab_size)
            out.update({f"micro_{k}/{name}": v for name, v in top.tensors().items()})
        else:
            out[f"micro_{k}"] = t.hidden_B_T_H if fused else t.logits_B_T_V
    return out


def completion_logits(model: torch.nn.Module, r: Rollouts, role: str) -> torch.Tensor:
    """Logits ``[B, T, V]`` of ``model`` at the positions that predict the completion tokens."""
    ids_B_S, mask_B_S, pos_B_S = r.sequence(role)
    logits_B_S_V = model(input_ids=ids_B_S, attention_mask=mask_B_S, position_ids=pos_B_S).logits
    return logits_B_S_V[:, r.completion_logits_slice(role)]


def completion_hidden(model: torch.nn.Module, r: Rollouts, role: str) -> torch.Tensor:
    """Final hidden states ``[B, T, H]`` predicting the completion (the decoder body only).

    The fused objectives apply the LM head chunk by chunk, so full logits never exist.
    """
    ids_B_S, mask_B_S, pos_B_S = r.sequence(role)
    out = model.model(input_ids=ids_B_S, attention_mask=mask_B_S, position_ids=pos_B_S)
    return out.last_hidden_state[:, r.completion_logits_slice(role)]


def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def _head(model: torch.nn.Module) -> torch.Tensor:
    return model.get_output_embeddings().weight


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


def _cache_key(cfg: RunConfig, step: int, prompts: str) -> dict:
    """What determines a teacher rollout batch: teacher, task, seed, step, sampling settings."""
    return {
        "teacher": str(cfg.model.teacher),
        "teacher_dtype": cfg.model.teacher_dtype,
        "task": cfg.task.name,
        "file": str(cfg.task.file) if cfg.task.file else None,
        "style_flag": cfg.task.teacher_style_flag,
        "seed": cfg.seed,
        "step": step,
        "temperature": cfg.rollout.teacher_temperature,
        "top_p": cfg.rollout.top_p,
        "max_new_tokens": cfg.task.max_new_tokens,
        "prompts": prompts,
    }


def _score_key(cfg: RunConfig, form: str, vocab_size: int) -> dict:
    """What else determines the teacher's scores of a cached batch: the form, the scoring
    device and micro-batching, the loss temperature and the vocabulary."""
    topk = {"teacher_topk": cfg.objective.teacher_topk} if form == "topk" else {}
    return {
        **topk,
        "scores": form,
        "device": str(cfg.model.device),
        "grad_accum": cfg.optim.grad_accum,
        "loss_temperature": cfg.objective.teacher_temperature,
        "vocab_size": vocab_size,
    }


class _PhaseTimer:
    """Wall time per phase of a step (``time/<phase>``, seconds) and tokens per second."""

    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()
        self.phases: dict[str, float] = {}

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self.last
        self.last = now

    def metrics(self, tokens: int) -> dict[str, float]:
        total = self.last - self.start
        out = {f"time/{k}": v for k, v in self.phases.items()}
        out["time/step"] = total
        out["perf/tokens_per_s"] = tokens / total if total > 0 else 0.0
        return out
