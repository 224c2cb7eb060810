"""The study's baseline: the untrained student, evaluated once, as every run is evaluated.

Effects are read against it ("students learned" = a run's accuracy above its baseline's). A study
plans one baseline per distinct evaluation among its runs — the student model, the task, the
``eval`` settings and the seed (which seeds the evaluation's sampling streams) — and evaluates it
with :func:`distillscope.eval.evaluate.evaluate` ``(untrained=True)``: the same held-out items,
sampling settings and generator streams as those runs' evaluation. Its directory
``runs/baseline`` (``runs/baseline-<k>`` when there are several, numbered in the order the runs
first need them) holds ``config.yaml`` (the first such run's config), ``status.json`` and
``eval.json``; a finished baseline is never evaluated again when the study resumes. The row it
adds to the results table is described in :mod:`distillscope.study.table`.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distillscope.config import RunConfig, dump_run_config, evaluation_key
from distillscope.store import claim_run, read_eval, read_status, write_config, write_status
from distillscope.study.spec import PlannedRun

BASELINE = "baseline"


@dataclass(frozen=True)
class PlannedBaseline:
    """One baseline evaluation: its id (a directory under ``runs/``) and the config it evaluates."""

    run_id: str
    config: RunConfig


#: Values of ``measures.forgetting``: the source of a row's ``eval/forgetting_pp``.
FORGETTING_MEASURES = ("lm-eval", "testbed-skills", "none")


def identity_columns(cfg: RunConfig) -> dict[str, str]:
    """What every results row carries, runs and baselines alike, to tie it to its data and say
    what it measured: ``task.dataset`` (:meth:`~distillscope.config.TaskConfig.identity`: two
    files of one task are two datasets), ``measures.forgetting`` (one of
    :data:`FORGETTING_MEASURES`) and ``measures.transfer`` (the harder task, or ``none``)."""
    e = cfg.eval
    forgetting = "lm-eval" if e.forgetting else "testbed-skills" if e.skill_items else "none"
    return {
        "task.dataset": cfg.task.identity(),
        "measures.forgetting": forgetting,
        "measures.transfer": e.harder_task or "none",
    }


def plan_baselines(runs: list[PlannedRun]) -> list[PlannedBaseline]:
    """One baseline per distinct :func:`evaluation_key` of ``runs``, in order of first use."""
    first: dict[str, RunConfig] = {}
    for r in runs:
        first.setdefault(evaluation_key(r.config), r.config)
    configs = list(first.values())
    if len(configs) == 1:
        return [PlannedBaseline(BASELINE, configs[0])]
    return [PlannedBaseline(f"{BASELINE}-{k}", c) for k, c in enumerate(configs, start=1)]


def run_baseline(baseline: PlannedBaseline, run_dir: Path, cache_dir: Path | None = None) -> str:
    """Evaluate the untrained student into ``run_dir`` unless done; returns the final status.

    A failure is recorded in ``status.json`` (``failed`` + reason) and the study goes on. With
    ``cache_dir`` (the study's shared cache) its skill-suite scores are stored there for the
    runs' "skills before" (:func:`~distillscope.eval.evaluate.evaluate`).
    """
    from distillscope.eval.evaluate import evaluate  # torch: only where a baseline is evaluated

    if read_status(run_dir)["status"] == "done":
        return "done"
    run_dir.mkdir(parents=True, exist_ok=True)
    claim_run(run_dir, baseline.config.model_dump(mode="json"))
    write_config(run_dir, dump_run_config(baseline.config))
    write_status(run_dir, "running", phase="eval")
    try:
        evaluate(baseline.config, run_dir, untrained=True, cache_dir=cache_dir)
    except Exception as err:  # noqa: BLE001 — recorded; the runs do not depend on it
        reason = f"{type(err).__name__}: {err}"
        write_status(run_dir, "failed", reason, traceback=traceback.format_exc(limit=5))
        return "failed"
    write_status(run_dir, "done")
    return "done"


def baseline_row(baseline: PlannedBaseline, run_dir: Path) -> dict[str, Any]:
    """The baseline's results row (format in :mod:`distillscope.study.table`)."""
    status = read_status(run_dir)
    cfg = baseline.config
    row: dict[str, Any] = {
        "run_id": baseline.run_id,
        "experiment": BASELINE,
        "status": status["status"],
        "reason": status.get("reason", ""),
        "seed": cfg.seed,
        "task.name": cfg.task.name,
        **identity_columns(cfg),
    }
    if status["status"] == "done":
        row.update(read_eval(run_dir))
    return row
