"""A seeded builder of results tables for black-box scorecard tests (issue 33).

A table has the shape of a study's ``results.parquet`` (``study/table.py``): one row per run
with its experiment, status, axes and metrics, then the untrained student's baseline rows. The
builder's noise has the study's structure (docs/method.md §9 "Statistics"): every evaluation
metric of a run gets its seed's shared effect (one draw per seed, common to all cells of that
seed, so seeds are blocks) plus independent run noise; level metrics (sparsity, gradient norms,
token probabilities, informativeness, lengths) get run noise only. Values are given in display
units — percentage points for fractions — and stored as the study stores them.

    t = Table(seed=3)
    t.grid("main", paper_cell)               # the published picture of the main grid
    t.baseline({"eval/accuracy": 30})
    verdict = t.score(2, tmp_path)            # score_claims(..., claims=[2]) for claim 2

Transformations (``duplicate``, ``one_seed``, ``without``, ``set_nan``) edit a built table the
way an adversary would; trajectories (``metrics.jsonl``) travel with the table (``Table.steps``).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from distillscope.scorecard import score_claims

SEEDS = (42, 43, 44)
LOW, HIGH = 1e-4, 3e-4
LRS = {"low": LOW, "high": HIGH}
TASK = "tb-countdown3"
TEACHER, SMALL_TEACHER = "testbed:teacher", "testbed:teacher-small"
TEACHER_PARAMS = {TEACHER: 1929024.0, SMALL_TEACHER: 480000.0}
ACC, FORGET = "eval/accuracy", "eval/forgetting_pp"
SPARSITY, SPARSITY_FP32 = "eval/sparsity_bf16_tau1e-06", "eval/sparsity_fp32_tau1e-06"
LAMBDAS = (-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0)
DECIDED = ("supported", "contradicted")

#: Run noise (display units, SD) of metrics without a shared seed effect; others get NOISE_PP.
LEVEL_NOISE = {
    "eval/sparsity": 0.02,
    "train/grad_clipped_frac": 0.2,
    "train/grad_norm": 0.05,
    "rollout/": 0.002,
    "eval/informativeness": 0.005,
    "eval/len_mean": 0.5,
    "model/": 0.0,
}
NOISE_PP, SEED_SD_PP = 0.25, 0.6
#: Stored as themselves, not as fractions of 100.
RAW = ("eval/forgetting_pp", "eval/len_mean", "eval/informativeness", "train/grad_norm")


def stored(metric: str, value: float) -> float:
    """``value`` (display units) as the study stores ``metric``: fractions for pp metrics."""
    if metric.startswith(("eval/", "rlvr/", "train/grad_clipped")) and not metric.startswith(RAW):
        return value / 100.0
    return value


def level_noise(metric: str) -> float | None:
    """The run noise SD of a level metric (no seed effect), None for an evaluation metric."""
    for prefix, sd in LEVEL_NOISE.items():
        if metric.startswith(prefix):
            return sd
    return None


class Table:
    """Rows of one synthetic study, drawn with one seeded generator (see the module doc)."""

    def __init__(
        self,
        seed: int = 0,
        seeds: Iterable[int] = SEEDS,
        noise: float = NOISE_PP,
        seed_sd: float = SEED_SD_PP,
    ) -> None:
        self.rng = np.random.default_rng(seed)
        self.seeds = tuple(seeds)
        self.noise, self.seed_sd = noise, seed_sd
        self.seed_effect = {s: float(self.rng.normal(0.0, seed_sd)) for s in range(40, 80)}
        self.rows: list[dict[str, Any]] = []
        self.steps: dict[str, list[dict[str, float]]] = {}

    # -- building -------------------------------------------------------------------------

    def value(self, metric: str, mean: float, seed: int, noise: float | None = None) -> float:
        """One run's value of ``metric`` around ``mean`` (display units), stored units out."""
        if mean is None or (isinstance(mean, float) and math.isnan(mean)):
            return math.nan
        noise = self.noise if noise is None or self.noise == 0 else noise
        sd = level_noise(metric)
        if sd is None:
            x = mean + self.seed_effect.get(seed, 0.0) + self.rng.normal(0.0, noise)
        else:
            x = mean + self.rng.normal(0.0, sd * noise / NOISE_PP)
        return stored(metric, float(x))

    def cell(
        self,
        experiment: str,
        values: Mapping[str, float],
        seeds: Iterable[int] | None = None,
        noise: float | None = None,
        **axes: Any,
    ) -> list[str]:
        """One row per seed of a cell: ``axes`` (dotted keys with ``__`` for dots) over
        :func:`run_axes`' defaults, ``values`` (display units) plus noise (``noise``: this
        cell's run noise SD instead of the table's). Returns the run ids."""
        ids = []
        for s in self.seeds if seeds is None else seeds:
            row = run_axes(experiment, seed=s, **axes)
            row.update({m: self.value(m, v, s, noise) for m, v in values.items()})
            ids.append(row["run_id"])
            self.rows.append(row)
        return ids

    def grid(
        self,
        experiment: str,
        values: Callable[[str, str, str], dict[str, float]],
        policies: Iterable[str] = ("student", "teacher"),
        kinds: Iterable[str] = ("forward_kl", "reverse_kl"),
        lrs: Mapping[str, float] = LRS,
        noise_of: Callable[[str, str, str], float] | None = None,
        **axes: Any,
    ) -> None:
        """A rollout × KL × LR grid; ``values(policy, kind, lr_label)`` gives each cell and
        ``noise_of`` (same arguments) its run noise when given."""
        for policy in policies:
            for kind in kinds:
                for label, lr in lrs.items():
                    self.cell(
                        experiment,
                        values(policy, kind, label),
                        noise=noise_of(policy, kind, label) if noise_of else None,
                        rollout__policy=policy,
                        objective__kind=kind,
                        optim__lr=lr,
                        lr_label=label if experiment != "lr_sweep" else math.nan,
                        **axes,
                    )

    def spectrum(
        self,
        values: Callable[[str, float, str], dict[str, float]],
        lrs: Mapping[str, float] = LRS,
        lambdas: Iterable[float] = LAMBDAS,
    ) -> None:
        """The λ-spectrum (rollout.policy "spectrum"); ``values(kind, λ, lr_label)``."""
        for kind in ("forward_kl", "reverse_kl"):
            for label, lr in lrs.items():
                for lam in lambdas:
                    self.cell(
                        "spectrum",
                        values(kind, lam, label),
                        rollout__policy="spectrum",
                        rollout__lam=lam,
                        objective__kind=kind,
                        optim__lr=lr,
                        lr_label=label,
                    )

    def baseline(self, values: Mapping[str, float], seeds: Iterable[int] | None = None) -> None:
        """The untrained student's rows as the study writes them (one per seed)."""
        for k, s in enumerate(self.seeds if seeds is None else seeds):
            row = {c: math.nan for c in run_axes("x")}
            row.update(
                {
                    "run_id": f"baseline-{k}" if k else "baseline",
                    "experiment": "baseline",
                    "status": "done",
                    "reason": "",
                    "seed": s,
                    "task.name": TASK,
                    "task.teacher_style_flag": None,
                }
            )
            row.update({m: self.value(m, v, s) for m, v in values.items()})
            self.rows.append(row)

    def trajectory(self, run_ids: Iterable[str], steps: Callable[[int], dict[str, float]]) -> None:
        """``metrics.jsonl`` of ``run_ids``: ``steps(k)`` for k in 0..39, with small noise."""
        sd = 0.002 if self.noise else 0.0  # a noise-free table has noise-free trajectories
        for rid in run_ids:
            self.steps[rid] = [
                {"step": k, **{m: v + self.rng.normal(0.0, sd) for m, v in steps(k).items()}}
                for k in range(40)
            ]

    # -- reading --------------------------------------------------------------------------

    def frame(self) -> pd.DataFrame:
        """The results table."""
        return pd.DataFrame(self.rows)

    def score(self, claim: int, study_dir: Path, df: pd.DataFrame | None = None):
        """``score`` of ``claim`` on this table (or on ``df``, an edit of it)."""
        return score(self.frame() if df is None else df, claim, study_dir, self.steps)

    def ids(self, **where: Any) -> list[str]:
        """Run ids of the rows whose columns (``__`` for dots) equal ``where``."""
        df = self.frame()
        return list(df.loc[mask(df, **where), "run_id"])


def run_axes(experiment: str, seed: int = SEEDS[0], **axes: Any) -> dict[str, Any]:
    """A run's id, status and config columns: the `paper` preset's defaults, then ``axes``."""
    row: dict[str, Any] = {
        "run_id": "",
        "experiment": experiment,
        "status": "done",
        "reason": "",
        "rollout.policy": "student",
        "rollout.lam": 1.0,
        "objective.kind": "forward_kl",
        "objective.regulation": "none",
        "optim.lr": LOW,
        "optim.grad_clip": 1.0,
        "seed": seed,
        "task.name": TASK,
        "model.teacher": TEACHER,
        "task.teacher_style_flag": False,
        "rollout.prompts_per_step": 16.0,
        "rollout.rollouts_per_prompt": 1.0,
        "lr_label": math.nan,
        "model/teacher_params": TEACHER_PARAMS[TEACHER],
    }
    for key, value in axes.items():
        row[key.replace("__", ".")] = value
    if row["model.teacher"] in TEACHER_PARAMS:
        row["model/teacher_params"] = TEACHER_PARAMS[row["model.teacher"]]
    if row["rollout.policy"] == "teacher":
        row["rollout.lam"] = 0.0 if "rollout__lam" not in axes else row["rollout.lam"]
    config = [f"{k}={row[k]}" for k in sorted(row) if k not in ("run_id", "status", "reason")]
    digest = hashlib.sha1("|".join(config).encode()).hexdigest()[:10]
    row["run_id"] = row.get("run_id") or f"{experiment}_{digest}"
    return row


def mask(df: pd.DataFrame, **where: Any) -> pd.Series:
    """Rows whose columns (``__`` for dots) equal ``where`` (a list or tuple: any of them)."""
    out = pd.Series(True, index=df.index)
    for key, value in where.items():
        col = df[key.replace("__", ".")]
        out &= col.isin(value) if isinstance(value, list | tuple) else col == value
    return out


# -- adversarial edits of a built table --------------------------------------------------------


def duplicate(df: pd.DataFrame, where: pd.Series, copies: int, same_id: bool) -> pd.DataFrame:
    """``df`` with ``copies`` more copies of the rows ``where``: under the same run id, or under
    new run ids with the same resolved config (a store merged twice, a re-run kept)."""
    extra = []
    for k in range(copies):
        rows = df[where].copy()
        if not same_id:
            rows["run_id"] = rows["run_id"].map(str) + f"-copy{k}"
        extra.append(rows)
    return pd.concat([df, *extra], ignore_index=True)


def one_seed(df: pd.DataFrame, where: pd.Series) -> pd.DataFrame:
    """``df`` with the rows ``where`` cut to their first seed (a one-seed cell)."""
    first = df.loc[where, "seed"].min()
    return df[~where | (df["seed"] == first)].reset_index(drop=True)


def set_nan(df: pd.DataFrame, where: pd.Series, metric: str) -> pd.DataFrame:
    """``df`` with ``metric`` NaN in the rows ``where``."""
    df = df.copy()
    df.loc[where, metric] = math.nan
    return df


def without(df: pd.DataFrame, where: pd.Series) -> pd.DataFrame:
    """``df`` without the rows ``where``."""
    return df[~where].reset_index(drop=True)


def score(
    df: pd.DataFrame,
    claim: int,
    study_dir: Path,
    steps: Mapping[str, list[dict[str, float]]] | None = None,
):
    """``score_claims`` of ``claim`` on ``df`` — the public entry point, black box — with the
    study directory holding ``metrics.jsonl`` of the runs in ``steps``."""
    study_dir.mkdir(parents=True, exist_ok=True)
    df.to_parquet(study_dir / "results.parquet", index=False)
    for rid, lines in (steps or {}).items():
        run = study_dir / "runs" / rid
        run.mkdir(parents=True, exist_ok=True)
        (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (result,) = score_claims(df, study_dir, claims=[claim])
    return result
