"""The calibration's items and strata: the study's item × configuration structure and its
per-stratum residual variance, drawn into every synthetic table (docs/method.md §9 "What an
interval covers": the false rates are those of the intervals the report prints).

From the study's per-item outcomes (``items.ItemTable``) of one metric, in display units:
per cell c its per-item mean over seeds M_ci; the item effects a_i = M̄_·i − M̄ and the
interaction R_ci = M_ci − M̄_c· − M̄_·i + M̄ (double-centred). R holds the seed × item noise
of a mean of n_c seeds too (its variance MS_c / n_c, MS_c the cell's seed × item residual mean
square): each cell's row is shrunk by √max(1 − (MS_c / n_c) / Var_i R_c, 0), so that only the
interaction is planted — each cell (and so each stratum) at its own size. A synthetic table
draws I items with replacement (J): every run of cell c moves by mean_i R_cJ(i) (shared by the
cell's seeds, as a fixed item set's interaction is) and its per-item values are a_J + R_cJ
plus the run's own per-item evaluation noise (``noise.draw_noise``).

Per stratum (``strata.STRATA[0]``, the KL direction): the cell + seed fit's residual variance
inside each stratum; a stratum above the pooled variance gets the difference as extra training
noise (``stratum_sd``), so that the synthetic tables carry the study's unequal variances.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from distillscope.results.aggregate import percent_scale, trained_mask
from distillscope.results.items import ItemTable, shifted
from distillscope.scorecard.strata import STRATA, residual


@dataclass(frozen=True)
class ItemNoise:
    """One metric's item effects ``effect`` (I,), interaction ``inter`` (cells × I), display
    units, and each study row's cell (``cell``; −1: no cell, e.g. the baseline)."""

    effect: np.ndarray
    inter: np.ndarray
    cell: np.ndarray

    def sd(self) -> float:
        """The planted interaction's SD per item (display units)."""
        return float(np.sqrt(np.mean(self.inter**2))) if self.inter.size else 0.0


def item_noise(
    df: pd.DataFrame, items: ItemTable | None, metric: str, cells: np.ndarray
) -> ItemNoise | None:
    """The item structure of ``metric`` over the study's rows ``df`` (``cells``: each row's
    cell code, module docstring); None without per-item outcomes of it."""
    x = None if items is None else items.matrix(df, metric)
    if x is None:
        return None
    use = ~np.isnan(x).any(axis=1) & trained_mask(df)
    codes = np.where(use, cells, -1)
    ids = np.unique(codes[codes >= 0])
    if len(ids) < 1 or x.shape[1] < 2:
        return None
    dense = np.full(len(codes), -1)
    means, noise = [], []
    for k, c in enumerate(ids):
        dense[codes == c] = k
        xc = x[codes == c]
        means.append(xc.mean(axis=0))
        n = len(xc)
        if n >= 2:
            r = xc - xc.mean(axis=0) - xc.mean(axis=1)[:, None] + xc.mean()
            noise.append(float((r * r).sum()) / ((n - 1) * (x.shape[1] - 1)) / n)
        else:
            noise.append(np.nan)
    m = np.array(means)
    grand = m.mean()
    effect = m.mean(axis=0) - grand
    inter = m - m.mean(axis=1)[:, None] - m.mean(axis=0)[None, :] + grand
    spread = inter.var(axis=1, ddof=1)
    fill = np.nanmean(noise) if not np.isnan(noise).all() else 0.0
    noise_c = np.where(np.isnan(noise), fill, noise)
    with np.errstate(invalid="ignore", divide="ignore"):
        keep = np.sqrt(np.clip(np.where(spread > 0, 1 - noise_c / spread, 0.0), 0.0, 1.0))
    return ItemNoise(effect, inter * keep[:, None], dense)


def stratum_sd(
    df: pd.DataFrame, metric: str, cells: np.ndarray, seeds: np.ndarray
) -> np.ndarray | None:
    """Per row of ``df``, the extra training SD (stored units) of its stratum (module
    docstring); None when the design has no strata or no stratum exceeds the pooled one."""
    out = np.zeros(len(df))
    axis = STRATA[0]
    y = pd.to_numeric(df.get(metric, pd.Series(np.nan, index=df.index)), errors="coerce")
    ok = y.notna().to_numpy() & trained_mask(df)
    if axis not in df.columns or ok.sum() < 4:
        return None
    lab = df[axis].map(str).to_numpy()
    fits = {
        k: residual(y.to_numpy()[ok & (lab == k)], cells[ok & (lab == k)], seeds[ok & (lab == k)])
        for k in np.unique(lab[ok])
    }
    fits = {k: f for k, f in fits.items() if f[1] >= 1}
    if len(fits) < 2:
        return None
    pooled = sum(r for r, _ in fits.values()) / sum(d for _, d in fits.values())
    for k, (rss, dof) in fits.items():
        out[lab == k] = np.sqrt(max(rss / dof - pooled, 0.0))
    return out if out.any() else None


def draw_items(
    noise: dict[str, ItemNoise], rng: np.random.Generator, evaluation: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """One table's (cell offsets per row, per-item values per row) of each metric of
    ``noise``, display units: I items drawn with replacement (module docstring), plus the
    rows' per-item evaluation noise ``evaluation`` (display units) where its shape fits."""
    offsets, values = {}, {}
    drawn: dict[int, np.ndarray] = {}
    for metric, n in noise.items():
        size = n.inter.shape[1]
        j = drawn.setdefault(size, rng.integers(0, size, size))  # one item draw per item set
        inter = n.inter[:, j]
        rows = np.where(n.cell >= 0, n.cell, 0)
        has = (n.cell >= 0)[:, None]
        x = n.effect[j][None, :] + np.where(has, inter[rows], 0.0)
        ev = evaluation.get(metric)
        if ev is not None and ev.shape == x.shape:
            x = x + ev
        offsets[metric] = np.where(n.cell >= 0, inter.mean(axis=1)[rows], 0.0)
        values[metric] = x
    return offsets, values


@dataclass
class DrawnItems:
    """A synthetic table's per-item values (``draw_items``), read as ``ItemTable.matrix`` reads
    a study's: by the rows' position in the table, shifted to their values."""

    values: dict[str, np.ndarray]

    def matrix(self, rows: pd.DataFrame, metric: str) -> np.ndarray | None:
        """Per row of ``rows``, its drawn per-item values of ``metric`` (None: none drawn)."""
        x = self.values.get(metric)
        if x is None or metric not in rows:
            return None
        y = pd.to_numeric(rows[metric], errors="coerce").to_numpy(dtype=float)
        return shifted(x[rows.index.to_numpy()], y * percent_scale(metric))
