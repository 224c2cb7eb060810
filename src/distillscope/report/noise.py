"""The study's error structure: a variance-component model of one run's metric, per metric.

    from distillscope.report.noise import estimate_noise
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

- **seed_sd**: the least-squares two-way fit y = cell + seed gives seed effects b̂ (seed 0 the
  reference) with covariance σ̂² V (V the seed block of (XᵀX)⁻¹, padded by the reference's zero)
  and residual variance σ̂² = RSS / ν. With H = I − 11ᵀ/S the centring matrix,
  E[b̂ᵀHb̂] = (S − 1) seed_sd² + σ² tr(HV), so seed_sd² = max(b̂ᵀHb̂ − σ̂² tr(HV), 0) / (S − 1)
  (for a balanced design: (MS_seed − MS_resid) / C, the ANOVA estimator).
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
- **fallbacks**: fewer than 2 seeds, or no residual degrees of freedom: seed_sd = 0 and the
  residual is ``default_sd`` (3 pp for fractions and pp, else 5% of the metric's typical size).
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
from distillscope.report.aggregate import SEED, cell_columns, done, metric_columns
from distillscope.report.claims.evidence import is_baseline
from distillscope.store import read_eval_items, run_dir

#: Residual SD by unit when the study cannot estimate one (stored units).
DEFAULT_SD = {"fraction": 0.03, "pp": 3.0}
DEFAULT_REL_SD = 0.05  # other units: this fraction of the metric's typical size
#: Items per block when neither per-item data nor a results column says (config defaults).
FALLBACK_ITEMS = {"accuracy": 200, "harder": 200, "coverage": 100, "harder_coverage": 100}
SKILL_ITEMS = 100  # items per skill of the testbed's suite (eval.skill_items' default)
SKILLS = "skill/"  # prefix of the skill blocks; skills_after and forgetting read all of them


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
        }


def pass_k_table(n: int, k: int) -> np.ndarray:
    """f_k(c) = 1 − C(n − c, k)/C(n, k) for c = 0 … n (the unbiased pass@k of c correct of n;
    1 − Π_{i=n−c+1..n} (1 − k/i), 1 when n − c < k; k = 1 gives c/n)."""
    out = np.ones(n + 1)
    for c in range(n + 1):
        if n - c >= k:
            out[c] = 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))
    return out


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


def eval_block(metric: str) -> tuple[str, int, float] | None:
    """(evaluation block, k, scale) behind ``metric``; None for a metric no sampling produces."""
    name = metric.split("/", 1)[-1]
    if metric == "eval/accuracy":
        return "accuracy", 1, 1.0
    if metric == "eval/harder_accuracy":
        return "harder", 1, 1.0
    if metric in ("eval/skills_after", "eval/forgetting_pp"):
        return SKILLS, 1, 100.0 if metric == "eval/forgetting_pp" else 1.0
    if metric.startswith("eval/skill-"):
        return SKILLS + name, 1, 1.0
    m = re.fullmatch(r"eval/(harder/)?(pass|avg)@(\d+)", metric)
    if m:
        block = "harder_coverage" if m.group(1) else "coverage"
        return block, int(m.group(3)) if m.group(2) == "pass" else 1, 1.0
    if metric.startswith("rlvr/") and unit(metric) == "fraction":
        return metric, 1, 1.0
    return None


def estimate_noise(df: pd.DataFrame, study_dir: Path | None = None) -> dict[str, Components]:
    """Per numeric metric of ``df``, its ``Components`` (module docstring: the estimators)."""
    rows = done(df)
    rows = rows[~is_baseline(rows)]
    items = _item_tables(rows, study_dir)
    out = {}
    for metric in metric_columns(rows):
        y = pd.to_numeric(rows[metric], errors="coerce")
        if not y.notna().any():
            continue
        seed_sd, resid = seed_and_residual(rows[y.notna()], y[y.notna()])
        if math.isnan(resid):
            seed_sd, resid = 0.0, default_sd(metric, float(y.median())) ** 2
        ev = _evaluation(metric, rows, items)
        train_sd = math.sqrt(max(resid - ev.eval_var(), 0.0))
        out[metric] = replace(ev, seed_sd=seed_sd, train_sd=train_sd)
    return out


def default_sd(metric: str, typical: float) -> float:
    """The residual SD assumed when the study has none: ``DEFAULT_SD`` by unit, else
    ``DEFAULT_REL_SD`` of the metric's typical size."""
    return DEFAULT_SD.get(unit(metric), DEFAULT_REL_SD * max(abs(typical), 1e-3))


def seed_and_residual(rows: pd.DataFrame, y: pd.Series) -> tuple[float, float]:
    """(seed_sd, residual variance σ̂²) of the two-way cell + seed fit of ``y`` (module
    docstring); (0, σ̂²) with one seed; (0, NaN) without residual degrees of freedom."""
    cells = cell_columns(rows)
    keys = [rows[col].map(str) for col in cells] or [pd.Series("", rows.index)]
    ci = rows.groupby(keys, sort=False).ngroup().to_numpy()
    seeds = rows[SEED].map(str) if SEED in rows else pd.Series("", rows.index)
    si, seed_ids = pd.factorize(seeds)
    c, s, n = int(ci.max()) + 1 if len(ci) else 0, len(seed_ids), len(y)
    x = np.zeros((n, c + max(s - 1, 0)))  # (runs, cells + seeds − 1): seed 0 the reference
    x[np.arange(n), ci] = 1.0
    for k in range(1, s):
        x[si == k, c + k - 1] = 1.0
    yv = y.to_numpy(dtype=float)
    xtx_inv = np.linalg.pinv(x.T @ x)
    beta = xtx_inv @ x.T @ yv
    dof = n - (int(np.linalg.matrix_rank(x)) if n else 0)
    if dof <= 0:
        return 0.0, math.nan
    resid = yv - x @ beta
    sigma2 = float(resid @ resid) / dof
    if s < 2:
        return 0.0, sigma2
    b = np.concatenate([[0.0], beta[c:]])  # (S,) seed effects relative to seed 0
    v = np.zeros((s, s))
    v[1:, 1:] = xtx_inv[c:, c:]
    h = np.eye(s) - 1.0 / s
    var_seed = (float(b @ h @ b) - sigma2 * float(np.trace(h @ v))) / (s - 1)
    return math.sqrt(max(var_seed, 0.0)), sigma2


def _evaluation(metric: str, rows: pd.DataFrame, items: pd.DataFrame | None) -> Components:
    """The evaluation design of ``metric`` (variances zero): from the per-item table when it
    holds the block, else from the results columns and the metric's level (module docstring)."""
    spec = eval_block(metric)
    if spec is None:
        return Components(0.0, 0.0, 0, 0, None)
    block, k, scale = spec
    table = None if items is None else items[_in_block(items["block"], block)]
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


def _item_tables(rows: pd.DataFrame, study_dir: Path | None) -> pd.DataFrame | None:
    """Every run's ``eval_items.parquet`` (block, item, score) with a ``run`` column; None when
    no run has one (or no study directory)."""
    if study_dir is None or "run_id" not in rows:
        return None
    frames = []
    for run_id in rows["run_id"].map(str):
        table = read_eval_items(run_dir(Path(study_dir), run_id))
        if table is not None and len(table):
            frames.append(table[["block", "item", "score"]].assign(run=run_id))
    return pd.concat(frames, ignore_index=True) if frames else None
