"""Residual variance per stratum, where a test shows it differs (docs/method.md §9 "What an
interval covers").

The cell + seed fit (``Blocks``) pools one residual variance σ² over every cell it reads. Where
the seed-to-seed spread differs between strata (claim 31: reverse KL's seed variance ~3×
forward's), a pooled σ² gives the noisier stratum's contrasts too narrow an interval and the
quieter one's too wide. For each candidate axis ``STRATA`` among the fit's cell columns (2 to
``MAX_LEVELS`` values), the cell + seed model is fitted inside each of its strata k (σ̂²_k on
ν_k degrees of freedom) and Bartlett's test asks whether the σ²_k are equal, at ``LEVEL``
split over the candidates (Bonferroni). The axis with the smallest significant p, if any,
stratifies the fit: weighted least squares with weights 1/σ̂²_k (the seed effects still shared
by every cell of a seed), the effects' covariance (XᵀWX)⁻¹ and, conservatively, the smallest
ν_k as the degrees of freedom of every estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

#: Axes whose strata may carry their own residual variance (KL direction, rollout, LR).
STRATA = ("objective.kind", "rollout.policy", "optim.lr")
MAX_LEVELS = 4
LEVEL = 0.05  # Bartlett's test's level, split over the candidate axes


@dataclass(frozen=True)
class Stratified:
    """The chosen axis, its strata's σ̂²_k and ν_k, Bartlett's p, and the weighted fit."""

    axis: str
    names: tuple[str, ...]
    variances: tuple[float, ...]
    dofs: tuple[float, ...]
    p: float
    beta: np.ndarray
    cov: np.ndarray  # (XᵀWX)⁺: the effects' covariance (variance units, σ² inside)

    def note(self) -> str:
        """The evidence's words: which axis, each stratum's residual SD, the test's p."""
        sds = ", ".join(
            f"{n} {math.sqrt(v):.2g}" for n, v in zip(self.names, self.variances, strict=True)
        )
        return f"residual SD per {self.axis.split('.')[-1]} (Bartlett p = {self.p:.2g}): {sds}"


def design(ci: np.ndarray, si: np.ndarray, c: int, s: int) -> np.ndarray:
    """The cell + seed indicator matrix (seed 0 the reference level)."""
    x = np.zeros((len(ci), c + max(s - 1, 0)))
    x[np.arange(len(ci)), ci] = 1.0
    for k in range(1, s):
        x[si == k, c + k - 1] = 1.0
    return x


def residual(y: np.ndarray, ci: np.ndarray, si: np.ndarray) -> tuple[float, float]:
    """(RSS, ν) of the cell + seed least-squares fit of ``y`` (codes need not be dense)."""
    _, ci = np.unique(ci, return_inverse=True)
    _, si = np.unique(si, return_inverse=True)
    x = design(ci, si, int(ci.max()) + 1, int(si.max()) + 1)
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    r = y - x @ beta
    return float(r @ r), float(len(y) - np.linalg.matrix_rank(x))


def stratify(
    y: np.ndarray, ci: np.ndarray, si: np.ndarray, x: np.ndarray, labels: dict[str, np.ndarray]
) -> Stratified | None:
    """The weighted fit by the stratum axis Bartlett's test finds (module docstring); None when
    no candidate axis (``labels``: per axis, each row's stratum) shows unequal variances."""
    found = []
    for axis, lab in labels.items():
        names = list(dict.fromkeys(lab))
        if not 2 <= len(names) <= MAX_LEVELS:
            continue
        fits = [residual(y[lab == n], ci[lab == n], si[lab == n]) for n in names]
        if any(d < 1 or rss <= 0 for rss, d in fits):
            continue
        found.append((bartlett([r / d for r, d in fits], [d for _, d in fits]), axis, names, fits))
    level = LEVEL / max(len(found), 1)
    hits = [f for f in found if f[0] < level]
    if not hits:
        return None
    p, axis, names, fits = min(hits, key=lambda f: f[0])
    var = {n: rss / d for n, (rss, d) in zip(names, fits, strict=True)}
    w = np.array([1.0 / var[n] for n in labels[axis]])
    cov = np.linalg.pinv(x.T @ (x * w[:, None]))
    beta = cov @ (x.T @ (w * y))
    return Stratified(
        axis, tuple(names), tuple(var.values()), tuple(d for _, d in fits), p, beta, cov
    )


def bartlett(variances: list[float], dofs: list[float]) -> float:
    """Bartlett's test's p-value that variances ``s²_k`` on ν_k degrees of freedom are equal:
    T = (N ln s²_p − Σ ν_k ln s²_k) / (1 + (Σ 1/ν_k − 1/N) / (3 (k − 1))), χ²_(k−1)."""
    v, d = np.array(variances, dtype=float), np.array(dofs, dtype=float)
    n, k = d.sum(), len(v)
    pooled = float((d * v).sum() / n)
    t = (n * math.log(pooled) - float((d * np.log(v)).sum())) / (
        1 + ((1 / d).sum() - 1 / n) / (3 * (k - 1))
    )
    return float(stats.chi2.sf(t, k - 1))
