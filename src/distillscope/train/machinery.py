"""The run machinery both training loops share — :func:`~.loop.distill` and :func:`~.grpo.grpo`
keep only their algorithm: what a step samples, which loss it backpropagates.

:class:`Run` is one run directory from claim to export, in the order a loop uses it::

    run = Run.claim(cfg, run_dir, overwrite, on_step)   # rank 0 claims; cfg as this rank runs it
    start = run.resume(student, optimizer)              # the last checkpoint's step (0: none)
    for step in range(start, steps):
        ...                                             # sample, forward, backward
        run.stop_if_diverged(step, loss, grad_norm)     # NaN/inf: status diverged, raise
        optimizer.step()
        run.log(row)                                    # metrics.jsonl, trackers, on_step
        run.checkpoint(step + 1, student, optimizer)    # every checkpoint_every steps
    run.finish(steps, student, optimizer)               # last checkpoint, status trained
    run.export(student, tokenizer)                      # RUN/student/

It owns the run's processes (:class:`~.distributed.Ranks`): only rank 0 writes the run
directory, a claim's refusal or a divergence is raised on every rank, and under FSDP a
checkpoint gathers the shards first. :class:`PhaseTimer` times a step's phases.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import torch

from distillscope.config import ConfigError, RunConfig, dump_run_config
from distillscope.rollout.rollouts import Rollouts
from distillscope.store import MetricsLog, claim_run, write_config, write_status
from distillscope.train.checkpoint import export_student, load_checkpoint, save_checkpoint
from distillscope.train.distributed import Ranks
from distillscope.train.trackers import Trackers


class DivergedError(RuntimeError):
    """The loss or the gradient norm became NaN/inf; the run is marked ``diverged``."""


def claim_run_dir(cfg: RunConfig, run_dir: Path, overwrite: bool) -> str:
    """Claim ``run_dir`` for ``cfg`` (its fingerprint), write the config, mark it running."""
    run_dir.mkdir(parents=True, exist_ok=True)
    fingerprint = claim_run(run_dir, cfg.model_dump(mode="json"), overwrite=overwrite)
    write_config(run_dir, dump_run_config(cfg))
    write_status(run_dir, "running", phase="train")
    return fingerprint


def max_norm(grad_clip: float | None) -> float:
    """The clip's max norm of ``optim.grad_clip`` / ``rlvr.grad_clip`` (None: no clip, ∞)."""
    return grad_clip if grad_clip is not None else math.inf


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> float:
    """Set the learning rate of every parameter group (the step's schedule); returns it."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


@dataclass
class Run:
    """One training run's directory on this process: claimed for its config, resumed from its
    last checkpoint, logged and checkpointed step by step, finished and exported.

    ``cfg`` is the run's config as this rank runs it (:func:`rank_config`; the directory keeps
    the config itself), ``fingerprint`` the config's, ``on_step(step, row)`` a caller's progress
    callback after each logged step.
    """

    cfg: RunConfig
    run_dir: Path
    ranks: Ranks
    fingerprint: str
    on_step: Callable[[int, dict], None] | None = None
    metrics: MetricsLog | None = field(default=None, init=False)
    trackers: Trackers | None = field(default=None, init=False)

    @classmethod
    def claim(
        cls,
        cfg: RunConfig,
        run_dir: Path,
        overwrite: bool = False,
        on_step: Callable[[int, dict], None] | None = None,
        ranks: Ranks | None = None,
    ) -> Run:
        """Claim ``run_dir`` for ``cfg`` (:func:`distillscope.store.claim_run`: a directory of
        another config is refused unless ``overwrite``, which clears it first) on rank 0, the
        refusal raised on every rank. ``ranks``: the launcher's (:meth:`Ranks.current`) unless
        given; a config the ranks cannot run is refused first (:func:`check_ranks`)."""
        ranks = Ranks.current(cfg) if ranks is None else ranks
        check_ranks(cfg, ranks)
        fingerprint = ranks.of_rank0(lambda: claim_run_dir(cfg, run_dir, overwrite))
        return cls(rank_config(cfg, ranks), run_dir, ranks, fingerprint, on_step)

    def resume(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
        """Load the last checkpoint into ``model`` and ``optimizer`` and open the metrics log
        (the steps before the checkpoint kept) and the trackers; returns the checkpoint's step,
        the first to train (0 for a fresh run)."""
        start = load_checkpoint(self.run_dir, model, optimizer, self.fingerprint)
        self.metrics = MetricsLog(self.run_dir, keep_steps=start) if self.ranks.writes else None
        self.trackers = Trackers(self.cfg, self.run_dir, start)  # none on the other ranks
        return start

    def stop_if_diverged(self, step: int, loss: float, grad_norm: float) -> None:
        """Mark the run diverged (and raise :class:`DivergedError`) when the loss or the
        pre-clip norm is NaN/inf. Every rank sees the same summed numbers, so all raise."""
        if not (math.isfinite(grad_norm) and math.isfinite(loss)):
            self.diverged(f"step {step}: loss {loss}, pre-clip grad norm {grad_norm}")

    def diverged(self, reason: str) -> NoReturn:
        """Status ``diverged`` with ``reason`` (rank 0 writes it), then raise on this rank."""
        if self.ranks.writes:
            write_status(self.run_dir, "diverged", reason)
        raise DivergedError(reason)

    def log(self, row: dict) -> None:
        """One step's row: ``metrics.jsonl`` (rank 0), the trackers, the caller's ``on_step``."""
        if self.metrics is not None:
            self.metrics.append(row)
        self.trackers.log(row)
        if self.on_step is not None:
            self.on_step(int(row["step"]), row)

    def checkpoint(
        self, done: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer
    ) -> None:
        """After ``done`` steps, every ``checkpoint_every``: a killed run resumes from the last
        checkpoint with the metrics of an uninterrupted one (every rank calls it)."""
        every = self.cfg.checkpoint_every
        if every and done % every == 0:
            self._save(done, model, optimizer)

    def finish(
        self, steps: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer
    ) -> dict[str, torch.Tensor] | None:
        """After the last step: the trackers closed, the final checkpoint and status
        ``trained``. Under FSDP every rank calls it and rank 0 gets the gathered full model
        state dict back (the weights :meth:`export` writes); else None."""
        self.trackers.close()
        full = self._save(steps, model, optimizer)
        if self.ranks.writes:
            write_status(self.run_dir, "trained")
        return full

    def _save(
        self, done: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer
    ) -> dict[str, torch.Tensor] | None:
        """The checkpoint after ``done`` steps, written by rank 0 (under FSDP a collective)."""
        writes = self.ranks.writes
        return save_checkpoint(self.run_dir, done, model, optimizer, self.fingerprint, writes)

    def export(self, model: torch.nn.Module, tokenizer, full: dict | None = None) -> None:
        """``RUN/student/``, a from_pretrained directory (rank 0 writes it); ``full``: FSDP's
        gathered weights, written instead of the sharded model's own."""
        if self.ranks.writes:
            export_student(self.run_dir, model, tokenizer, full)


def check_ranks(cfg: RunConfig, ranks: Ranks) -> None:
    """Refuse, on several processes, a rollout batch with fewer rows than processes (a rank
    would hold none) and vLLM rollouts (rank 0 samples with the built-in sampler); and FSDP on
    one process, of a LoRA student, or with ranks of unequal micro-batch counts."""
    if ranks.fsdp:
        _check_fsdp(cfg, ranks.world)
    if ranks.world > 1 and cfg.rollout.engine != "builtin":
        raise ConfigError(
            f"rollout.engine {cfg.rollout.engine!r} runs on one process; use builtin "
            "with a launcher"
        )
    rows = cfg.rollout.prompts_per_step * cfg.rollout.rollouts_per_prompt
    if rows < ranks.world:
        raise ConfigError(
            f"rollout.prompts_per_step × rollouts_per_prompt = {rows} rows cannot be split "
            f"over {ranks.world} processes; raise rollout.prompts_per_step"
        )


def _check_fsdp(cfg: RunConfig, world: int) -> None:
    """FSDP's collectives run per layer and micro-batch: every rank must run the same
    micro-batches, so each needs ``optim.grad_accum`` rows at least."""
    if world == 1:
        raise ConfigError(
            "FSDP shards the student over several processes; launch with --launcher "
            "accelerate --num-processes 2 or more"
        )
    if cfg.model.lora is not None:
        raise ConfigError("--fsdp shards a full student; a model.lora run trains without it")
    rows = cfg.rollout.prompts_per_step * cfg.rollout.rollouts_per_prompt
    if rows // world < cfg.optim.grad_accum:
        raise ConfigError(
            f"with --fsdp every process runs optim.grad_accum={cfg.optim.grad_accum} "
            f"micro-batches, and {rows} rows over {world} processes leave one "
            f"{rows // world}; lower optim.grad_accum or raise rollout.prompts_per_step"
        )


def rank_config(cfg: RunConfig, ranks: Ranks) -> RunConfig:
    """``cfg`` as rank ``ranks.rank`` runs it: on its own device, and profiling and trackers
    only on rank 0 (both write, nothing is reduced). The run directory keeps ``cfg`` itself."""
    if ranks.world == 1:
        return cfg
    model = cfg.model
    if ranks.device is not None:
        same = model.teacher_device in (None, model.device)
        teacher = ranks.device if same else model.teacher_device
        model = model.model_copy(update={"device": ranks.device, "teacher_device": teacher})
    steps = cfg.eval.profile_steps if ranks.writes else []
    evals = cfg.eval.model_copy(update={"profile_steps": steps})
    trackers = cfg.log if ranks.writes else None  # TensorBoard/W&B write into the run
    return cfg.model_copy(update={"model": model, "eval": evals, "log": trackers})


class PhaseTimer:
    """Wall time per phase of a step (``time/<phase>``, seconds) and tokens per second."""

    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()
        self.phases: dict[str, float] = {}

    def lap(self, phase: str) -> None:
        """Add the seconds since the last lap to ``phase``."""
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
