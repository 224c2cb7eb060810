"""One run end to end: train, evaluate, and keep ``status.json`` truthful throughout."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path

from distillscope.config import RunConfig
from distillscope.eval.evaluate import evaluate
from distillscope.store import write_status
from distillscope.train.distill import DivergedError, distill


def run_one(
    cfg: RunConfig,
    run_dir: Path,
    *,
    rollout_cache: Path | None = None,
    on_step: Callable[[int, dict], None] | None = None,
) -> dict:
    """``distill`` then ``evaluate``; status ends ``done``, ``diverged`` or ``failed`` (+ reason).

    Returns the evaluation metrics (empty when the run diverged). A failure other than
    divergence is re-raised after the status is written.
    """
    try:
        student = distill(cfg, run_dir, rollout_cache=rollout_cache, on_step=on_step)
        write_status(run_dir, "running", phase="eval")
        metrics = evaluate(cfg, run_dir, student)
    except DivergedError:
        return {}
    except Exception as err:
        write_status(
            run_dir,
            "failed",
            f"{type(err).__name__}: {err}",
            traceback=traceback.format_exc(limit=5),
        )
        raise
    write_status(run_dir, "done")
    return metrics
