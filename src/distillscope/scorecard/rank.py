"""Rank correlations and curves of a fit's cells against an axis (docs/method.md §9 claims 5–8).

A *curve* is the cells of one stratum (every cell column but the axis's) ordered by the axis
(the LR, or λ). Its Spearman ρ is that of the fitted cell effects μ̂ against the axis values.
Its uncertainty is drawn from the seed-blocked fit (``estimate.Blocks``): the cell effects are
jointly μ̂ + σ̂ L z / √(χ²_ν / ν) (L Lᵀ = the cells' (XᵀX)⁻¹, z standard normal: a multivariate
t on the fit's ν degrees of freedom; seed effects cancel, ρ reads only differences of cells),
and ρ of each of ``DRAWS`` draws gives the distribution; a (1 − α) one-sided bound is its α
quantile. The generator is seeded (``DRAW_SEED``): the same table gives the same bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from distillscope.results.aggregate import comparable_spectrum, effective_lam, with_labels
from distillscope.results.matching import LAMBDA
from distillscope.scorecard.claim_columns import FORWARD, KIND, LR, POLICY, REVERSE
from distillscope.scorecard.contrasts import stratum_name
from distillscope.scorecard.estimate import Blocks, Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence
from distillscope.scorecard.planting import rows_mask
from distillscope.scorecard.selection import plain_runs

DRAWS = 20_000
DRAW_SEED = 0
#: A curve needs this many points for a rank correlation or a range.
MIN_POINTS = 3
LAM_COLUMN = "rollout.lam"


@dataclass(frozen=True)
class RankEstimate(Estimate):
    """Spearman ρ of a curve; ``draws`` its distribution under the fit (bounds: quantiles)."""

    draws: np.ndarray | None = field(default=None, repr=False, compare=False)

    def decidable(self) -> bool:
        """Drawn from a fit with residual variance (every draw may still give ρ = ±1: a curve
        whose steps dwarf the noise)."""
        return self.draws is not None and math.isfinite(self.value)

    def bounds(self, alpha: float) -> tuple[float, float]:
        """The α and 1 − α quantiles of the drawn ρ (NaN when undecidable)."""
        if not self.decidable() or self.draws is None:
            return math.nan, math.nan
        lo, hi = np.quantile(self.draws, [alpha, 1.0 - alpha])
        return float(lo), float(hi)


def axis_values(b: Blocks, axis: str) -> np.ndarray:
    """The axis value of each cell: λ (OnPD +1, OffPD −1, a spectrum cell its λ) for ``λ``,
    else the numeric column ``axis``."""
    if axis == "λ":
        lam = b.cells[LAM_COLUMN] if LAM_COLUMN in b.cells else [math.nan] * len(b.cells)
        return np.array([effective_lam(p, x) for p, x in zip(b.cells[POLICY], lam, strict=True)])
    return b.cells[axis].to_numpy(dtype=float)


def curves(b: Blocks, axis: str, x: np.ndarray) -> dict[str, np.ndarray]:
    """{stratum name: indices of its cells, ordered by ``x``}; a stratum is one value of every
    cell column but the axis's (``axis``; for λ the policy and λ columns), named by the ones
    that vary."""
    drop = {POLICY, LAM_COLUMN} if axis == "λ" else {axis}
    rest = [c for c in b.by if c not in drop]
    varying = [c for c in rest if b.cells[c].map(str).nunique() > 1]
    keys = b.cells[rest].map(str).agg("|".join, axis=1) if rest else None
    labelled = b.labelled
    out: dict[str, np.ndarray] = {}
    for key in dict.fromkeys(keys if keys is not None else [""]):
        idx = np.flatnonzero(keys == key) if keys is not None else np.arange(len(b.cells))
        idx = idx[np.isfinite(x[idx])]
        if len(idx):
            out[stratum_name(labelled, int(idx[0]), varying)] = idx[np.argsort(x[idx])]
    return out


def mask_of(n: int, idx: np.ndarray) -> np.ndarray:
    """A boolean mask of length ``n``, true at ``idx`` (a curve's cells for ``Blocks.range``)."""
    m = np.zeros(n, dtype=bool)
    m[idx] = True
    return m


def spearman_rows(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Spearman ρ of each row of ``y`` against ``x`` (ties in ``x``: average ranks; ``y`` is
    continuous, drawn or fitted)."""
    ry = np.argsort(np.argsort(y, axis=-1), axis=-1).astype(float)
    rx = rankdata(x).astype(float)
    ry -= ry.mean(axis=-1, keepdims=True)
    rx -= rx.mean()
    return (ry @ rx) / np.sqrt((ry * ry).sum(axis=-1) * (rx @ rx))


def rank_correlation(b: Blocks, idx: np.ndarray, x: np.ndarray, label: str) -> Estimate:
    """Spearman ρ of the effects of cells ``idx`` against ``x`` with its drawn distribution;
    "not tested" with fewer than ``MIN_POINTS`` distinct axis values or a one-seed cell."""
    if len(np.unique(x[idx])) < MIN_POINTS:
        return not_tested(label, f"{MIN_POINTS} distinct axis values for {label}")
    thin = [i for i in idx if i in b.thin]
    if thin:
        return not_tested(label, f"{b.cell_names(thin)} has fewer than 2 seeds")
    mu = b.cells["mu"].to_numpy(dtype=float)[idx]
    value = float(spearman_rows(mu[None, :], x[idx])[0])
    seeds = int(b.cells["n"].to_numpy()[idx].min())
    if not (b.dof > 0 and math.isfinite(b.sigma2) and b.sigma2 > 0):
        return Estimate(label, value, 0.0, b.dof, seeds, b.seed_note())
    draws = spearman_rows(_draw_effects(b, idx, mu), x[idx])
    se = float(draws.std())
    return RankEstimate(label, value, se, b.dof, seeds, b.seed_note(), "", draws)


def _draw_effects(b: Blocks, idx: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """``DRAWS`` draws of the cells' effects from the fit's multivariate t (module docstring)."""
    gen = np.random.default_rng(DRAW_SEED)
    vals, vecs = np.linalg.eigh(b.covariance(idx))
    root = vecs * np.sqrt(np.clip(vals, 0.0, None))
    z = gen.standard_normal((DRAWS, len(idx))) @ root.T
    scale = np.sqrt(gen.chisquare(b.dof, DRAWS) / b.dof)[:, None]
    return mu[None, :] + z / scale


def rank_estimates(b: Blocks | str, axis: str, label: str) -> list[Estimate]:
    """ρ against ``axis`` of every curve of ``b`` (one estimate per curve), or "not tested"
    naming what is missing (``b`` a string) or that no curve has ``MIN_POINTS`` values."""
    if isinstance(b, str):
        return [not_tested(label, b)]
    x = axis_values(b, axis)
    out = [rank_correlation(b, idx, x, name) for name, idx in curves(b, axis, x).items()]
    return out or [not_tested(label, f"a curve over {MIN_POINTS} values of {axis}")]


def spectrum_rows(view: ClaimEvidence, experiment: str, kind: str | None = None) -> pd.DataFrame:
    """The plain forward/reverse KL runs of the λ-spectrum ``experiment`` (only ``kind`` when
    given) without the pure-policy cells its ends are not (``aggregate.comparable_spectrum``)."""
    rows = plain_runs(view, experiment)
    if KIND not in rows.columns:
        return rows.iloc[0:0]
    rows, note = comparable_spectrum(rows[rows[KIND].isin([FORWARD, REVERSE])])
    view.leave_out(note)
    return rows if kind is None else rows[rows[KIND] == kind]


def lam_curves(b: Blocks | str, label: str) -> tuple[Blocks | None, dict[str, np.ndarray], str]:
    """(the fit, its curves over λ with ≥ ``MIN_POINTS`` cells, what is missing) of ``b``."""
    if isinstance(b, str):
        return None, {}, b
    x = axis_values(b, "λ")
    found = {k: i for k, i in curves(b, "λ", x).items() if len(np.unique(x[i])) >= MIN_POINTS}
    return b, found, "" if found else f"{MIN_POINTS} values of λ for {label}"


def spectrum_top_lr(
    d: pd.DataFrame, experiment: str = "spectrum", top: bool = True
) -> tuple[np.ndarray, np.ndarray, bool]:
    """(mask of the spectrum-policy rows of the λ-spectrum ``experiment`` at its highest LR —
    its lowest when not ``top`` —, their λ, whether it ran at ≥ 2 LRs) in design ``d``; a
    design without spectrum runs has none (its OnPD/OffPD rows are not moved)."""
    lam = pd.to_numeric(with_labels(d)[LAMBDA], errors="coerce").to_numpy()
    rows = rows_mask(d, experiment, **{POLICY: "spectrum"}) & ~np.isnan(lam)
    lr = pd.to_numeric(d.get(LR, pd.Series(np.nan, index=d.index)), errors="coerce")
    lrs = lr[rows].dropna().unique()
    if len(lrs):
        rows = rows & (lr == (lrs.max() if top else lrs.min())).to_numpy()
    return rows, np.nan_to_num(lam), len(lrs) >= 2


def lam_ramp(d: pd.DataFrame, metric: str, kind: str, size: float) -> dict[str, np.ndarray]:
    """``metric`` of the ``kind`` spectrum cells at the highest LR rising linearly by ``size``
    (stored units) from the lowest λ to the highest: that curve's range is exactly ``size``
    (one pair of cells at the margin, the others inside: the case closest to passing)."""
    rows, lam, _ = spectrum_top_lr(d)
    kinds = d[KIND].map(str).to_numpy() if KIND in d else np.array([""] * len(d))
    rows = rows & (kinds == kind)
    if not rows.any() or np.ptp(lam[rows]) == 0:
        return {metric: np.zeros(len(d))}
    lo, span = lam[rows].min(), np.ptp(lam[rows])
    return {metric: np.where(rows, size * (lam - lo) / span, 0.0)}
