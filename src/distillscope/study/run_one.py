"""One run end to end: train, evaluate, and keep ``status.json`` truthful throughout."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path

import torch

from distillscope.config import ConfigError, RunConfig
from distillscope.eval.evaluate import evaluate
from distillscope.eval.rlvr_effect import evaluate_rlvr
from distillscope.store import (
    CHECKPOINT_META,
    RunMismatchError,
    check_run_config,
    checkpoint_dir,
    read_json_strict,
    read_status,
    write_status,
)
from distillscope.train.checkpoint import check_checkpoint_meta
from distillscope.train.distributed import Ranks
from distillscope.train.grpo import grpo, load_start
from distillscope.train.loop import DivergedError, distill


def run_one(
    cfg: RunConfig,
    run_dir: Path,
    *,
    rollout_cache: Path | None = None,
    on_step: Callable[[int, dict], None] | None = None,
    overwrite: bool = False,
    skip_eval: bool = False,
    on_eval: Callable[[str], None] | None = None,
) -> dict:
    """``distill`` then ``evaluate``; status ends ``done``, ``diverged`` or ``failed`` (+ reason).

    Returns the evaluation metrics (empty when the run diverged or ``skip_eval``, which leaves
    the status ``trained``). A failure other than divergence is re-raised after the status is
    written. ``on_step`` and ``on_eval`` report progress (see ``distill`` and ``evaluate``).
    Under a launcher's several processes only rank 0 writes the status and evaluates.
    """
    if cfg.rlvr is not None:
        if Ranks.current(cfg).world > 1:
            raise ConfigError("an rlvr run trains on one process; start it without a launcher")
        return run_rlvr(
            cfg, run_dir, on_step=on_step, overwrite=overwrite, skip_eval=skip_eval, on_eval=on_eval
        )
    try:
        student = distill(
            cfg, run_dir, rollout_cache=rollout_cache, on_step=on_step, overwrite=overwrite
        )
    except DivergedError:
        return {}
    except RunMismatchError:  # the directory is another run's: leave its status alone
        raise
    except Exception as err:
        if Ranks.current(cfg).writes:
            _failed(run_dir, err)
        raise
    if skip_eval or not Ranks.current(cfg).writes:
        return {}
    return evaluate_run(cfg, run_dir, student, on_eval, rollout_cache)


def evaluate_run(
    cfg: RunConfig,
    run_dir: Path,
    student: torch.nn.Module | None = None,
    on_eval: Callable[[str], None] | None = None,
    cache_dir: Path | None = None,
    trained: RunConfig | None = None,
) -> dict:
    """Evaluate a run (its checkpoint unless ``student`` is given); status ends ``done``.

    Without ``student``, the checkpoint must have been written under the fingerprint of
    ``trained`` (default ``cfg``; a re-evaluation passes the trained config and evaluates with
    ``cfg``, whose ``eval`` section differs). ``cache_dir``: the study's shared cache (the
    baseline's skill scores).
    """
    if student is None:
        fingerprint = check_run_config(run_dir, (trained or cfg).model_dump(mode="json"))
        meta = checkpoint_dir(run_dir) / CHECKPOINT_META
        check_checkpoint_meta(meta, read_json_strict(meta), fingerprint)
    write_status(run_dir, "running", phase="eval")
    try:
        metrics = evaluate(cfg, run_dir, student, on_eval, cache_dir=cache_dir)
    except Exception as err:
        _failed(run_dir, err)
        raise
    write_status(run_dir, "done")
    return metrics


def run_rlvr(
    cfg: RunConfig,
    run_dir: Path,
    *,
    on_step: Callable[[int, dict], None] | None = None,
    overwrite: bool = False,
    skip_eval: bool = False,
    on_eval: Callable[[str], None] | None = None,
) -> dict:
    """An RLVR run (``cfg.rlvr`` set): ``grpo`` from its parent's student, then
    ``evaluate_rlvr``; the status ends as :func:`run_one`'s does."""
    try:
        student, tokenizer = grpo(cfg, run_dir, on_step=on_step, overwrite=overwrite)
    except DivergedError:
        return {}
    except RunMismatchError:
        raise
    except Exception as err:
        _failed(run_dir, err)
        raise
    if skip_eval:
        return {}
    write_status(run_dir, "running", phase="eval")
    try:
        start, _ = load_start(cfg, run_dir)
        metrics = evaluate_rlvr(cfg, run_dir, start, student, tokenizer, on_eval)
    except Exception as err:
        _failed(run_dir, err)
        raise
    write_status(run_dir, "done")
    return metrics


def mark_interrupted(run_dir: Path) -> str:
    """After Ctrl-C: a status left ``running`` becomes ``trained`` when training had finished
    (the evaluation was interrupted) and ``pending`` otherwise, with a reason saying how to
    resume; returns the line the command prints."""
    status = read_status(run_dir)
    if status["status"] != "running":
        return f"interrupted; {run_dir} is {status['status']}"
    evaluating = status.get("phase") == "eval"
    resume = "evaluate it with `distillscope eval`" if evaluating else "rerun the same command"
    reason = f"interrupted (Ctrl-C); {resume} to resume from its last checkpoint"
    write_status(run_dir, "trained" if evaluating else "pending", reason)
    return f"{run_dir}: {reason}"


def _failed(run_dir: Path, err: Exception) -> None:
    write_status(
        run_dir, "failed", f"{type(err).__name__}: {err}", traceback=traceback.format_exc(limit=5)
    )
