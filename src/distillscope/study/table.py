"""The study table: one row per run, rebuilt from the run directories (the source of truth).

Rebuilding from the store rather than appending rows makes the table idempotent: a study
killed at any moment and re-run ends with exactly one row per planned run.

After the runs come the **baseline rows** (:mod:`distillscope.study.baseline`), one per distinct
evaluation in the study: the untrained student, evaluated on the same items with the same
sampling settings and seeds as the runs. A baseline row has

- ``run_id`` = ``baseline`` (``baseline-<k>`` when the study has several), ``experiment`` =
  ``baseline``, ``status`` = ``done`` once evaluated (``failed`` + ``reason`` otherwise);
- ``seed``, ``task.name``, ``task.dataset`` and ``measures.*`` set (match a run to its baseline
  on ``seed`` and ``task.dataset``; see
  :func:`~distillscope.study.baseline.identity_columns`), every other axis and
  recorded column empty (NaN/None): the baseline is not a cell of any grid — tables, figures and
  claims must exclude ``experiment == "baseline"`` from cells and read effects against it;
- the same evaluation columns as the runs (``eval/*``, ``split/*``), with ``eval/forgetting_pp``
  = 0 and ``eval/skills_before`` = ``eval/skills_after`` by definition, and no sparsity
  (``eval/sparsity_*`` NaN: there is no update) and no training summaries (NaN).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from distillscope.store import read_eval, read_metrics, read_status, run_dir
from distillscope.study.baseline import PlannedBaseline, baseline_row, identity_columns
from distillscope.study.spec import RECORDED, PlannedRun


def _get(cfg_dict: dict[str, Any], dotted: str) -> Any:
    node: Any = cfg_dict
    for part in dotted.split("."):
        node = node[part]
    return node


def plan_row(run: PlannedRun, status: str = "planned", reason: str = "") -> dict[str, Any]:
    """The columns of a run's row known before it runs: ids, status, axes and labels."""
    cfg = run.config.model_dump(mode="json")
    row: dict[str, Any] = {
        "run_id": run.run_id,
        "experiment": run.experiment,
        "status": status,
        "reason": reason,
    }
    for col in RECORDED:
        value = _get(cfg, col)
        if isinstance(value, dict):  # model.teachers, model.route: one groupable text cell
            value = json.dumps(value, sort_keys=True)
        row[col] = math.nan if value is None else value
    row.update({k: math.nan if v is None else v for k, v in run.axes.items()})
    row.update(run.labels)
    row.update(identity_columns(run.config))
    if run.parent is not None:  # an RLVR run: the distilled run it started from
        row["parent_run"] = run.parent
    return row


#: pass@k the evaluation reports beyond pass@10 when eval.coverage_samples reaches k.
LARGE_PASS_KS = (20, 32, 64)
#: Placeholder of a planned measurement (a design's table; calibration redraws every value).
PLANNED = 0.3
#: What a planned RLVR run is assumed to add on its own task (the testbed's stage moves it by
#: 8–10 pp, BENCHMARKS.md "The RLVR stage"): claim 11 is judged only once RLVR moved the task.
PLANNED_RLVR_GAIN = 0.09


def planned_row(run: PlannedRun) -> dict[str, Any]:
    """:func:`plan_row` plus placeholders (:data:`PLANNED`) for what the run's config makes it
    measure beyond the metrics every run has (``scorecard.calibrate.TYPICAL``): an RLVR run's
    before/after accuracies (after = before + :data:`PLANNED_RLVR_GAIN`), pass@k for k > 10 up
    to ``eval.coverage_samples``, and its teacher's and student's sizes
    (``model/teacher_params``, ``model/student_params``, NaN when unreadable) — so that a
    scorecard calibrated on a design before it runs finds what the RLVR, OPD and teacher rules
    read."""
    from distillscope.eval.evaluate import params_of, routed_params, teacher_params  # torch

    cfg = run.config
    row = plan_row(run)
    if cfg.rlvr is not None:
        names = ["eval_accuracy"]
        if cfg.eval.harder_task and cfg.eval.harder_task != cfg.rlvr.task:
            names.append("harder_accuracy")
        for name in names:
            row[f"rlvr/{name}_before"] = PLANNED
            row[f"rlvr/{name}"] = PLANNED + PLANNED_RLVR_GAIN
    n = cfg.eval.coverage_samples if cfg.eval.coverage_items else 0
    row.update({f"eval/pass@{k}": PLANNED for k in LARGE_PASS_KS if k <= n})
    row["model/teacher_params"] = teacher_params(cfg)
    row["model/student_params"] = params_of(cfg.model.student)
    row.update(routed_params(cfg))
    return row


def run_row(run: PlannedRun, run_dir: Path) -> dict[str, Any]:
    """One results row: ids, status, axes, evaluation metrics and training summaries."""
    status = read_status(run_dir)
    row = plan_row(run, status["status"], status.get("reason", ""))
    if status["status"] == "done":
        row.update(read_eval(run_dir))
    row.update(train_summary(read_metrics(run_dir)))
    return row


def loglik_gap(rows: list[dict[str, Any]]) -> float:
    """The rollouts' mean per-token log-likelihood gap E[log p_student − log p_teacher] over
    the steps that logged both geometric-mean probabilities (log of each is the mean log-prob
    of the sampled tokens); NaN when none did (or one underflowed to 0)."""
    keys = ("rollout/student_geo_prob", "rollout/teacher_geo_prob")
    gaps = [
        math.log(r[keys[0]]) - math.log(r[keys[1]])
        for r in rows
        if all(k in r and r[k] > 0 for k in keys)
    ]
    return sum(gaps) / len(gaps) if gaps else math.nan


def train_summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per-run summaries of the step metrics (what the report's tables need)."""
    if not rows:
        return {}

    def mean(key: str) -> float:
        vals = [r[key] for r in rows if key in r]
        return sum(vals) / len(vals) if vals else math.nan

    tail = rows[-max(1, len(rows) // 10) :]  # last 10% of steps
    return {
        "train/loss_final": sum(r["train/loss"] for r in tail) / len(tail),
        "train/grad_norm_mean": mean("train/grad_norm"),
        "train/grad_norm_max": max(r["train/grad_norm"] for r in rows),
        "train/grad_clipped_frac": mean("train/grad_clipped"),
        "rollout/student_token_prob_mean": mean("rollout/student_token_prob"),
        "rollout/teacher_token_prob_mean": mean("rollout/teacher_token_prob"),
        "rollout/loglik_gap_mean": loglik_gap(rows),
        "rollout/len_mean_final": sum(r["rollout/len_mean"] for r in tail) / len(tail),
        "train/steps_done": float(len(rows)),
        "time/run_s": sum(r.get("time/step", 0.0) for r in rows),
        "time/teacher_saved_s": sum(r.get("time/teacher_saved", 0.0) for r in rows),
        "time/teacher_forward_s": sum(r.get("time/teacher_forward", 0.0) for r in rows),
        "eval/informativeness": informativeness_summary(rows),
        **teacher_summary(rows),
    }


def teacher_summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per routed teacher of a run (its ``teacher/<name>/…`` step keys): its seconds summed over
    the run (``…/seconds_s``) and its I over the steps as :func:`informativeness_summary` weighs
    them (``…/informativeness_run``)."""
    names = sorted({k.split("/")[1] for r in rows for k in r if k.startswith("teacher/")})
    out = {}
    for name in names:
        key = f"teacher/{name}/"
        out[key + "seconds_s"] = sum(r.get(key + "seconds", 0.0) for r in rows)
        own = [
            {"opd/informativeness": r[key + "informativeness"]}
            | {"opd/informativeness_groups": r.get(key + "informativeness_groups", 1.0)}
            for r in rows
            if key + "informativeness" in r
        ]
        out[key + "informativeness_run"] = informativeness_summary(own)
    return out


def informativeness_summary(rows: list[dict[str, Any]]) -> float:
    """A run's informativeness I (``eval/informativeness``): ``opd/informativeness`` averaged
    over the steps that define it, each weighted by its ``opd/informativeness_groups`` (the
    prompt groups behind it); NaN when no step does (one rollout per prompt, OffPD)."""
    pairs = [
        (float(r["opd/informativeness"]), float(r.get("opd/informativeness_groups", 1.0)))
        for r in rows
        if isinstance(r.get("opd/informativeness"), int | float)
        and math.isfinite(r["opd/informativeness"])
    ]
    weight = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / weight if weight > 0 else math.nan


def write_table(
    study_dir: Path, runs: list[PlannedRun], baselines: list[PlannedBaseline] = ()
) -> pd.DataFrame:
    """Rebuild ``results.parquet`` from the run directories, atomically: runs, then baselines."""
    rows = [run_row(r, run_dir(study_dir, r.run_id)) for r in runs]
    rows += [baseline_row(b, run_dir(study_dir, b.run_id)) for b in baselines]
    df = pd.DataFrame(rows)
    fd, tmp = tempfile.mkstemp(dir=study_dir, prefix=".results.", suffix=".parquet")
    os.close(fd)
    df.to_parquet(tmp, index=False)
    os.replace(tmp, study_dir / "results.parquet")
    return df
