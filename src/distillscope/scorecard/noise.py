"""The study's error structure: a variance-component model of one run's metric, per metric.

    from distillscope.scorecard.noise import estimate_noise
    comps = estimate_noise(study.scored, study.root)        # {metric: Components}
    comps["eval/accuracy"].run_var(samples=10)              # a run's variance at 10 samples

A run of cell c under seed s measures (docs/method.md §9 "Statistics")

    y_cs = μ_c + β_s + τ_cs + e_cs,    β_s ~ N(0, seed_sd²),  τ_cs ~ N(0, train_sd²),

where β_s is shared by every cell of seed s (the seed's initialisation and data order, and the
evaluation uniforms every cell of a seed shares: common random numbers), τ_cs is the run's own
training noise and e_cs its evaluation sampling noise: on I items with n samples each and
per-item success probabilities p_i, a block's mean has

    Var(e) = (1/I) · mean_i V_k(p_i, n),    V_1(p, n) = p(1 − p)/n,

(``Components.eval_var``) where V_k is the variance of the unbiased pass@k estimator
1 − C(n − c, k)/C(n, k) with c ~ Binomial(n, p) (k = 1: the mean of the n samples), computed
exactly from the binomial pmf. A metric in percentage points scales it by 100².

Estimators (``estimate_noise``), over the study's finished runs without the untrained-student
baseline, in stored units:

- **seed_sd**: the least-squares two-way fit y = cell + seed gives centred seed effects b̂ with
  covariance σ̂² A⁺ (``seed_and_residual``) and residual variance σ̂² = RSS / ν; as
  E[b̂ᵀb̂] = rank(A) seed_sd² + σ² tr(A⁺), seed_sd² = max(b̂ᵀb̂ − σ̂² tr(A⁺), 0) / rank(A)
  (rank(A) = S − 1 for a connected design; balanced: (MS_seed − MS_resid) / C, the ANOVA
  estimator).
- **eval_var**: from ``eval_items.parquet`` when the study's runs have it (``p_items``: each
  item's success rate over the runs' samples, pooled over runs: by Jensen an upper bound of the
  within-run mean p(1 − p)); otherwise binomial at the metric's mean level p̄ over its items
  (``p_items`` None; homogeneous items, again an upper bound). Item and sample counts come from
  the per-item table, else from the results columns (``eval/*_samples``, ``split/*eval_items``),
  else from ``FALLBACK_ITEMS`` and one sample (the evaluation config's defaults).
- **train_sd**: √max(σ̂² − eval_var, 0). The residual of the two-way fit holds the training noise
  and the part of the evaluation noise that cells of one seed do not share; the part they share
  is in the seed term. Drawing β, τ and an independent per-run evaluation noise at these values
  reproduces both the seed and the residual variance of the study whenever the floor does not
  bind; when it binds (evaluation noise mostly shared) it overstates a run's own variance.
- **fallbacks**: one seed: seed_sd = 0. No residual degrees of freedom (every cell one run), or
  runs that all agree (a design before it runs): seed_sd = 0 and the residual is ``default_sd``
  (3 pp for fractions and pp, else 5% of the metric's typical size).
Torch-free.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from distillscope.metric_keys import unit
from distillscope.results.aggregate import (
    SEED,
    cell_columns,
    metric_columns,
    percent_scale,
    trained,
)
from distillscope.results.items import SKILLS, ItemTable, eval_block, load_items, pass_k_table
from distillscope.scorecard.item_noise import ItemNoise, draw_items, item_noise, stratum_sd

#: Residual SD by unit when the study cannot estimate one (stored units).
DEFAULT_SD = {"fraction": 0.03, "pp": 3.0}
DEFAULT_REL_SD = 0.05  # other units: this fraction of the metric's typical size
#: Items per block when neither per-item data nor a results column says (config defaults).
FALLBACK_ITEMS = {"accuracy": 200, "harder": 200, "coverage": 100, "harder_coverage": 100}
SKILL_ITEMS = 100  # items per skill of the testbed's suite (eval.skill_items' default)
#: A residual variance this small relative to the mean square is float rounding: the runs agree.
ROUNDING = 1e-20
RANK_TOL = 1e-9  # eigenvalues of the seed system below this (relative) are its null space


@dataclass(frozen=True)
class Components:
    """A metric's variance components (stored units) and its evaluation design.

    ``items`` × ``samples`` of evaluation block ``block`` (0 items: the metric has no
    evaluation sampling); ``p_items`` the per-item success probabilities (None: homogeneous at
    ``level``); ``k`` the pass@k it reports (1: a mean of samples); ``scale`` stored units per
    success fraction (100 for a pp metric).
    """

    seed_sd: float
    train_sd: float
    items: int
    samples: int
    p_items: np.ndarray | None
    block: str = ""
    k: int = 1
    level: float = math.nan
    scale: float = 1.0
    #: The residual is ``default_sd``'s assumption, not an estimate (nothing to estimate from).
    assumed: bool = False
    crossed: ItemNoise | None = None  # items × cells (``item_noise``): None without items
    stratum: np.ndarray | None = None  # per design row, its stratum's extra training SD

    def probabilities(self) -> np.ndarray:
        """Per-item success probabilities: ``p_items``, else ``level`` for every item."""
        if self.p_items is not None:
            return np.asarray(self.p_items, dtype=float)
        return np.array([0.0 if math.isnan(self.level) else self.level])

    def eval_var(self, items: int | None = None, samples: int | None = None) -> float:
        """Variance of a run's mean from evaluation sampling at ``items`` × ``samples``
        (default: the study's): scale² · mean_i V_k(p_i, n) / I, V_1(p, n) = p(1 − p)/n."""
        i = self.items if items is None else items
        n = self.samples if samples is None else samples
        if i <= 0 or n <= 0:
            return 0.0
        v = pass_k_var(self.probabilities(), n, min(self.k, n))
        return float(self.scale**2 * v.mean() / i)

    def run_var(self, items: int | None = None, samples: int | None = None) -> float:
        """Total variance of one run: seed_sd² + train_sd² + eval_var(items, samples)."""
        return self.seed_sd**2 + self.train_sd**2 + self.eval_var(items, samples)

    def summary(self) -> dict[str, float | int | str]:
        """JSON-ready numbers (no per-item array): the components and the design."""
        return {
            "seed_sd": self.seed_sd,
            "train_sd": self.train_sd,
            "eval_sd": math.sqrt(self.eval_var()),
            "items": self.items,
            "samples": self.samples,
            "block": self.block,
            "k": self.k,
            "per_item": self.p_items is not None,
            "assumed": self.assumed,
            "item_sd": 0.0 if self.crossed is None else self.crossed.sd(),
            "stratum_sd": 0.0 if self.stratum is None else float(np.max(self.stratum, initial=0)),
        }


def pass_k_var(p: np.ndarray, n: int, k: int) -> np.ndarray:
    """Var f_k(c), c ~ Binomial(n, p), per entry of ``p``: Σ_c pmf(c) f_k(c)² − (1 − (1 − p)^k)²
    (the estimator is unbiased); p(1 − p)/n for k = 1."""
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    if k == 1:
        return p * (1.0 - p) / n
    from scipy.stats import binom

    c = np.arange(n + 1)
    pmf = binom.pmf(c[None, :], n, p[:, None])  # (items, n + 1)
    second = pmf @ pass_k_table(n, k) ** 2
    return np.maximum(second - (1.0 - (1.0 - p) ** k) ** 2, 0.0)


def estimate_noise(
    df: pd.DataFrame, study_dir: Path | None = None, per_item: ItemTable | None = None
) -> dict[str, Components]:
    """Per numeric metric of ``df``, its ``Components`` (module docstring: the estimators);
    ``per_item``: the runs' per-item outcomes when the caller has read them (``Study.items``),
    else read from ``study_dir`` (each run's file once)."""
    rows = trained(df)
    per_item = per_item if per_item is not None else load_items(study_dir, df)
    items = None if per_item is None else per_item.outcomes(rows["run_id"].map(str))
    cell, seed = cell_and_seed_codes(rows)
    every_cell, every_seed = cell_and_seed_codes(df)
    out = {}
    for metric in metric_columns(rows):
        y = pd.to_numeric(rows[metric], errors="coerce")
        ok = y.notna().to_numpy()
        if not ok.any():
            continue
        seed_sd, resid = seed_and_residual(cell[ok], seed[ok], y[ok].to_numpy(dtype=float))
        assumed = math.isnan(resid) or resid + seed_sd**2 <= ROUNDING * float(np.mean(y[ok] ** 2))
        if assumed:
            seed_sd, resid = 0.0, default_sd(metric, float(y.median())) ** 2
        ev = _evaluation(metric, rows[ok], items)
        train_sd = math.sqrt(max(resid - ev.eval_var(), 0.0))
        crossed = item_noise(df, per_item, metric, every_cell)
        stratum = stratum_sd(df, metric, every_cell, every_seed)
        out[metric] = replace(
            ev,
            seed_sd=seed_sd,
            train_sd=train_sd,
            crossed=crossed,
            stratum=stratum,
            assumed=assumed,
        )
    return out


def default_sd(metric: str, typical: float) -> float:
    """The residual SD assumed when the study has none: ``DEFAULT_SD`` by unit, else
    ``DEFAULT_REL_SD`` of the metric's typical size."""
    return DEFAULT_SD.get(unit(metric), DEFAULT_REL_SD * max(abs(typical), 1e-3))


def cell_and_seed_codes(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(cell code, seed code) of each row: cells by ``cell_columns``, seeds by ``seed``."""
    keys = [rows[col].map(str) for col in cell_columns(rows)] or [pd.Series("", rows.index)]
    cell = rows.groupby(keys, sort=False).ngroup().to_numpy()
    seed = pd.factorize(rows[SEED].map(str) if SEED in rows else pd.Series("", rows.index))[0]
    return cell, seed


def seed_and_residual(cell: np.ndarray, seed: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(seed_sd, residual variance σ̂²) of the two-way fit y = μ_cell + β_seed (module
    docstring); (0, σ̂²) with one seed; (0, NaN) without residual degrees of freedom.

    Solved by absorbing the cells: with N the cells × seeds counts, the seed effects solve
    A β = r, A = diag(n_s) − Nᵀ diag(1/n_c) N, r = Y_s − Nᵀ (Y_c / n_c) (Y: sums), β̂ = A⁺ r
    (centred within each connected part of the design); μ̂_c = (Y_c − (N β̂)_c)/n_c; rank(X) =
    C + rank(A). Cov β̂ = σ² A⁺, so E[β̂ᵀβ̂] = rank(A) seed_sd² + σ² tr(A⁺):
    seed_sd² = max(β̂ᵀβ̂ − σ̂² tr(A⁺), 0) / rank(A).
    """
    _, cell = np.unique(cell, return_inverse=True)  # (runs,) codes 0 … C − 1
    _, seed = np.unique(seed, return_inverse=True)
    c, s = int(cell.max()) + 1, int(seed.max()) + 1
    counts = np.zeros((c, s))  # (cells, seeds)
    np.add.at(counts, (cell, seed), 1.0)
    n_c, n_s = counts.sum(axis=1), counts.sum(axis=0)
    y_c, y_s = np.bincount(cell, y, c), np.bincount(seed, y, s)
    a = np.diag(n_s) - counts.T @ (counts / n_c[:, None])  # (seeds, seeds)
    w, v = np.linalg.eigh(a)  # A is symmetric, positive semi-definite; its null space: 1 per part
    keep = w > RANK_TOL * max(float(w.max()), 1.0)
    a_pinv = (v[:, keep] / w[keep]) @ v[:, keep].T
    rank_a = int(keep.sum())
    beta = a_pinv @ (y_s - counts.T @ (y_c / n_c))
    mu = (y_c - counts @ beta) / n_c
    dof = len(y) - c - rank_a
    if dof <= 0:
        return 0.0, math.nan
    resid = y - mu[cell] - beta[seed]
    sigma2 = float(resid @ resid) / dof
    if rank_a == 0:
        return 0.0, sigma2
    var_seed = (float(beta @ beta) - sigma2 * float(np.trace(a_pinv))) / rank_a
    return math.sqrt(max(var_seed, 0.0)), sigma2


def _evaluation(metric: str, rows: pd.DataFrame, items: pd.DataFrame | None) -> Components:
    """The evaluation design of ``metric`` (variances zero) in ``rows``, the runs that
    measured it: from the per-item table when it holds the block, else from the results
    columns and the metric's level (module docstring). Only those runs count: pass@32 of the
    runs evaluated with 32 coverage samples is not modelled at the 10 samples of the others."""
    spec = eval_block(metric)
    if spec is None:
        return Components(0.0, 0.0, 0, 0, None)
    block, k, scale = spec
    table = None if items is None else items[_in_block(items["block"], block)]
    if table is not None and "run_id" in rows:
        table = table[table["run"].isin(rows["run_id"].map(str))]
    if table is not None and len(table):
        p = table.groupby(["block", "item"])["score"].mean().to_numpy(dtype=float)
        samples = int(table.groupby(["run", "block", "item"]).size().median())
        per_run = table[["run", "block", "item"]].drop_duplicates().groupby("run").size()
        n_items = int(per_run.median())
        return Components(0.0, 0.0, n_items, samples, p, block, min(k, samples), scale=scale)
    samples = _samples(block, rows, k)
    level_of = "eval/skills_after" if metric == "eval/forgetting_pp" else metric
    level = pd.to_numeric(rows.get(level_of, pd.Series(dtype=float)), errors="coerce").mean()
    level = float(np.clip(level, 0.0, 1.0)) if not math.isnan(level) else 0.5
    p = 1.0 - (1.0 - level) ** (1.0 / k) if k > 1 else level  # an item's p at a pass@k level
    return Components(
        0.0, 0.0, _items(block, rows), samples, None, block, min(k, samples), p, scale
    )


def _in_block(blocks: pd.Series, block: str) -> pd.Series:
    """Rows of ``block`` (``SKILLS``: every skill block)."""
    return blocks.str.startswith(SKILLS) if block == SKILLS else blocks == block


#: Results columns holding a block's samples per item, and its items.
SAMPLES_COLUMN = {
    "accuracy": "eval/accuracy_samples",
    "harder": "eval/harder_samples",
    SKILLS: "eval/skill_samples",
}
ITEMS_COLUMN = {"accuracy": "split/eval_items", "harder": "split/harder/eval_items"}


def _median(rows: pd.DataFrame, column: str) -> float:
    vals = pd.to_numeric(rows.get(column, pd.Series(dtype=float)), errors="coerce")
    return float(vals.median()) if vals.notna().any() else math.nan


def _samples(block: str, rows: pd.DataFrame, k: int) -> int:
    """Samples per item of ``block`` from the results columns: ``SAMPLES_COLUMN``; a coverage
    block's n: the median over runs of the largest n (avg@n) or k (pass@k) a run measured;
    else 1 ([P]'s protocol)."""
    column = SAMPLES_COLUMN.get(SKILLS if block.startswith(SKILLS) else block)
    if column is not None:
        n = _median(rows, column)
        return int(n) if not math.isnan(n) else 1
    if block in ("coverage", "harder_coverage"):  # per run, its largest n (or k) measured
        prefix = "eval/harder/" if block == "harder_coverage" else "eval/"
        ns = {
            c: int(m.group(2))
            for c in rows.columns
            if (m := re.fullmatch(re.escape(prefix) + r"(avg|pass)@(\d+)", c))
        }
        measured = pd.DataFrame(
            {c: pd.to_numeric(rows[c], errors="coerce").notna() * n for c, n in ns.items()}
        )
        per_run = measured.max(axis=1) if len(ns) else pd.Series(dtype=float)
        per_run = per_run[per_run > 0]
        return max(k, int(per_run.median())) if len(per_run) else k
    return 1


def _items(block: str, rows: pd.DataFrame) -> int:
    """Items of ``block`` from the results columns (``ITEMS_COLUMN``; an RLVR measure's
    split/rlvr/…/eval_items), else ``FALLBACK_ITEMS``; the skill suite: ``SKILL_ITEMS`` per
    skill."""
    if block.startswith(SKILLS):
        skills = [c for c in rows.columns if c.startswith("eval/skill-")]
        return SKILL_ITEMS * (max(len(skills), 1) if block == SKILLS else 1)
    column = ITEMS_COLUMN.get(block)
    if block.startswith("rlvr/"):
        column = f"split/rlvr/{block.removeprefix('rlvr/')}/eval_items"
    n = _median(rows, column) if column else math.nan
    return int(n) if not math.isnan(n) else FALLBACK_ITEMS.get(block, FALLBACK_ITEMS["accuracy"])


def draw_noise(
    comps: dict[str, Components],
    seeds: np.ndarray,
    rng: np.random.Generator,
    items_out: dict[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """One table's noise per metric of ``comps`` for runs of seed codes ``seeds`` (0 … S − 1):
    a seed effect β_s ~ N(0, seed_sd²) drawn once per seed and shared by its cells, training
    noise N(0, train_sd²) per run (plus its stratum's extra SD, ``Components.stratum``), and
    evaluation noise per run: c_i ~ Binomial(n, p_i) on each of the block's I items,
    scale · mean_i (f_k(c_i) − (1 − (1 − p_i)^k)). Metrics of one block (same items, samples
    and p) read the same draws, as pass@1 and pass@10 read one sampler pass. The binomial is
    drawn at the study's own p_i: a planted effect moves a run's mean, not the variance of its
    evaluation. With ``items_out``: the items crossed with the cells (``item_noise``) too —
    each run moves by its cell's interaction over the drawn items, and ``items_out`` gets each
    metric's per-item values (display units) for the report's estimators.
    """
    n_seeds = int(seeds.max()) + 1 if len(seeds) else 0
    counts: dict[tuple, np.ndarray] = {}
    out, evaluation = {}, {}
    for metric, comp in comps.items():
        v = rng.normal(0.0, comp.seed_sd, n_seeds)[seeds] + rng.normal(
            0.0, comp.train_sd, len(seeds)
        )
        if comp.stratum is not None and len(comp.stratum) == len(seeds):
            v = v + rng.normal(0.0, 1.0, len(seeds)) * comp.stratum
        if comp.items > 0 and comp.samples > 0:
            p = np.resize(comp.probabilities(), comp.items)  # (items,)
            key = (comp.block, comp.items, comp.samples, p.tobytes())
            if key not in counts:
                counts[key] = rng.binomial(comp.samples, p, (len(seeds), comp.items))
            k = min(comp.k, comp.samples)
            expected = 1.0 - (1.0 - p) ** k  # (items,)
            dev = pass_k_table(comp.samples, k)[counts[key]] - expected  # (runs, items)
            v = v + comp.scale * dev.mean(axis=1)
            evaluation[metric] = comp.scale * dev * percent_scale(metric)
        out[metric] = v
    if items_out is not None:
        crossed = {
            m: c.crossed
            for m, c in comps.items()
            if c.crossed is not None and len(c.crossed.cell) == len(seeds)
        }
        offsets, values = draw_items(crossed, rng, evaluation)
        for m, o in offsets.items():
            out[m] = out[m] + o / percent_scale(m)
        items_out.update(values)
    return out
