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

from distillscope.config import RunConfig, dump_run_config
from distillscope.objectives import kl_sample_metrics
from distillscope.rollout import (
    TEACHER_LOGITS_MAX_VOCAB,
    NonFiniteSamplingError,
    PromptEncoder,
    RolloutCache,
    Rollouts,
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
from distillscope.train.objective import (
    chunked_loss,
    completion_token_logprobs,
    logits_loss,
)
from distillscope.train.setup import load_models, make_policy, preflight


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
    pool = training_problems(task, cfg.task.eval_fraction)
    encoder = PromptEncoder(
        task, pair.tokenizer, cfg.task.prompt_format, cfg.task.teacher_style_flag,
        teacher_tokenizer=pair.teacher_tokenizer,
    )  # fmt: skip
    policy = make_policy(cfg.rollout)
    student, teacher = pair.student, pair.teacher
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
                functools.partial(_teacher_outputs, cfg, rollouts, teacher, form),
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
    return sample_rollouts(
        policy,
        pair.student,
        pair.teacher,
        prompt_ids,
        prompt_mask,
        teacher_prompt_ids=teacher_ids,
        teacher_prompt_mask=teacher_mask,
        max_new_tokens=cfg.task.max_new_tokens,
        eos_token_id=pair.stop_ids or pair.tokenizer.eos_token_id,
        pad_token_id=pair.tokenizer.pad_token_id,
        generator=model_generator(pair.student, cfg.seed, step),
        vocab_size=pair.vocab_size,
    )


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

    ``teacher_scores`` (from the rollout cache: ``micro_<k>`` → the teacher's output for
    micro-batch k) replaces the teacher forward. Returns the step's metrics averaged over
    micro-batches (equal-sized micro-batches make the mean of per-micro-batch ``seq_mean``
    losses the full batch's ``seq_mean``).
    """
    student.train()
    n = cfg.optim.grad_accum
    totals: dict[str, float] = {}
    chunked = _loss_reads_hidden(cfg)
    completion_output = completion_hidden if chunked else completion_logits
    s_device = _device(student)
    t_head = _head(teacher).to(s_device) if chunked else None  # a copy only across devices
    for k, micro in enumerate(_micro_batches(rollouts, n)):
        gen = model_generator(student, cfg.seed, step, stream=1 + k)
        if teacher_scores is None:
            t_out = _teacher_output(teacher, micro, completion_output).to(s_device)
        else:
            t_out = teacher_scores[f"micro_{k}"].to(s_device)
        timer.lap("teacher_forward")
        s_out = completion_output(student, micro, "student")
        if chunked:
            loss, metrics = chunked_loss(
                cfg.objective, s_out, _head(student), t_out, t_head, micro, vocab_size
            )
            diag = {}
        else:
            loss, metrics = logits_loss(cfg.objective, s_out, t_out, micro, gen, vocab_size)
            diag = _diagnostics(cfg, s_out.detach(), t_out, micro, vocab_size)
        (loss / n).backward()
        timer.lap("student_forward_backward")
        for key, value in {"train/loss": float(loss.detach()), **metrics, **diag}.items():
            totals[key] = totals.get(key, 0.0) + value / n
    return totals


def _micro_batches(rollouts: Rollouts, n: int) -> list[Rollouts]:
    """The ``n`` gradient-accumulation micro-batches of ``rollouts`` (consecutive rows)."""
    rows_n = torch.arange(rollouts.batch_size).chunk(n)  # n index tensors
    return [rollouts if len(i) == rollouts.batch_size else rollouts.rows(i) for i in rows_n]


def _teacher_output(teacher: torch.nn.Module, micro: Rollouts, completion_output) -> torch.Tensor:
    """The teacher's completion logits or hidden states, without an autograd graph."""
    with torch.inference_mode():  # the teacher may sit on its own device
        t_out = completion_output(teacher, micro.to(_device(teacher)), "teacher")
    return t_out.clone()  # inference tensors cannot enter autograd


def _loss_reads_hidden(cfg: RunConfig) -> bool:
    """Whether the loss takes final hidden states (and LM heads) rather than logits."""
    return cfg.objective.chunk_size > 0


def _teacher_score_form(cfg: RunConfig, vocab_size: int) -> str | None:
    """What of the teacher's output a cache entry holds: ``hidden`` states for the chunked
    objectives (any V), full ``logits`` up to V = TEACHER_LOGITS_MAX_VOCAB, else nothing."""
    if _loss_reads_hidden(cfg):
        return "hidden"
    return "logits" if vocab_size <= TEACHER_LOGITS_MAX_VOCAB else None


def _teacher_outputs(
    cfg: RunConfig, rollouts: Rollouts, teacher: torch.nn.Module, form: str
) -> dict[str, torch.Tensor]:
    """The teacher's output for every micro-batch, as :func:`_forward_backward` would compute."""
    output = completion_hidden if form == "hidden" else completion_logits
    micro_n = _micro_batches(rollouts, cfg.optim.grad_accum)
    return {f"micro_{k}": _teacher_output(teacher, m, output) for k, m in enumerate(micro_n)}


def completion_logits(model: torch.nn.Module, r: Rollouts, role: str) -> torch.Tensor:
    """Logits ``[B, T, V]`` of ``model`` at the positions that predict the completion tokens."""
    ids_B_S, mask_B_S, pos_B_S = r.sequence(role)
    logits_B_S_V = model(input_ids=ids_B_S, attention_mask=mask_B_S, position_ids=pos_B_S).logits
    return logits_B_S_V[:, r.completion_logits_slice(role)]


def completion_hidden(model: torch.nn.Module, r: Rollouts, role: str) -> torch.Tensor:
    """Final hidden states ``[B, T, H]`` predicting the completion (the decoder body only).

    The chunked objectives apply the LM head chunk by chunk, so full logits never exist.
    """
    ids_B_S, mask_B_S, pos_B_S = r.sequence(role)
    out = model.model(input_ids=ids_B_S, attention_mask=mask_B_S, position_ids=pos_B_S)
    return out.last_hidden_state[:, r.completion_logits_slice(role)]


def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def _head(model: torch.nn.Module) -> torch.Tensor:
    return model.get_output_embeddings().weight


def _diagnostics(
    cfg: RunConfig,
    s_logits_B_T_V: torch.Tensor,
    t_logits_B_T_V: torch.Tensor,
    r: Rollouts,
    vocab_size: int,
) -> dict[str, float]:
    """k1/k2/k3 at the loss temperatures and the likelihood diagnostic at temperature 1.0."""

    def token_logp(logits: torch.Tensor, temperature: float) -> torch.Tensor:
        return completion_token_logprobs(logits, r, temperature, vocab_size)

    o = cfg.objective
    out = kl_sample_metrics(
        token_logp(s_logits_B_T_V, o.student_temperature),
        token_logp(t_logits_B_T_V, o.teacher_temperature),
        r.completion_mask_B_T,
    )
    out.update(
        likelihood_metrics(r, token_logp(s_logits_B_T_V, 1.0), token_logp(t_logits_B_T_V, 1.0))
    )
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
    return {
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
