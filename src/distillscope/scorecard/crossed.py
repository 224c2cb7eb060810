"""The item component of a seed-blocked estimate: items crossed with configurations.

Every run is evaluated on the same I items, so a run's per-item value (``ItemTable.matrix``) is

    y_csi = μ_c + a_i + (ac)_ci + β_s + (βc)_cs + e_csi,

items (a_i, and their interaction with the configuration (ac)_ci) crossed with seeds. An
estimate Σ w_c μ̂_c over cell means (a contrast, Σ w = 0; or a level, Σ w = 1) generalises over
items as well as seeds when its variance holds both:

    Var = [seed-blocked part: σ²_(βc) + σ²_e / I terms, ``Blocks``] + Var_item,
    Var_item = Var_i(d_i) / I − (its seed × item noise) / (S I),

with d_i = Σ w_c ȳ_c·i the per-item estimate (cell means over seeds) — for a contrast the item
main effect cancels and d_i's spread is the interaction (ac) under the weights, its stratum's
own size wherever it differs; for a level a_i stays in. The seed × item noise that the
seed-blocked part already holds (it is inside each run's mean) is removed with its own
estimate: per seed s complete in the weighted cells, D_si = Σ_c w_c y_csi; the residual mean
square of the S × I table D after seed and item means, MS_si, estimates Var(Σ w e_·si) with
the evaluation stream each seed's cells share (common random numbers) included. This is the
classic crossed two-way estimator (Var = (MS_s + MS_i − MS_si) / (S I)), its item part on
Satterthwaite's degrees of freedom; a negative difference is truncated at 0. With fewer than 2
complete seeds the noise is not removed (a conservative SE).
"""

from __future__ import annotations

import math

import numpy as np

from distillscope.results.stats import welch_dof


class ItemComponent:
    """The per-item values of one fit's runs as a cells × seeds × items table (NaN: absent)."""

    def __init__(self, items: np.ndarray, cell: np.ndarray, seed: np.ndarray) -> None:
        c, s = int(cell.max()) + 1 if len(cell) else 0, int(seed.max()) + 1 if len(seed) else 0
        n_items = items.shape[1] if items.ndim == 2 else 0
        total = np.zeros((c, s, n_items))
        count = np.zeros((c, s, 1))
        ok = ~np.isnan(items).any(axis=1) if n_items else np.ones(len(cell), dtype=bool)
        np.add.at(total, (cell[ok], seed[ok]), items[ok])  # a run without items: absent
        np.add.at(count, (cell[ok], seed[ok]), 1.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.table = total / count  # (cells, seeds, items); NaN where a seed is absent
        self.cache: dict[bytes, tuple[float, float]] = {}

    def variance(self, w: np.ndarray) -> tuple[float, float]:
        """(Var_item, ν) of Σ w_c μ_c (module docstring); (0, ∞) without two items."""
        key = np.asarray(w, dtype=float).tobytes()
        if key not in self.cache:
            self.cache[key] = self._variance(np.asarray(w, dtype=float))
        return self.cache[key]

    def _variance(self, w: np.ndarray) -> tuple[float, float]:
        used = np.flatnonzero(w != 0)
        t = self.table[used]  # (u, S, I)
        n_items = t.shape[2]
        if n_items < 2 or not len(used):
            return 0.0, math.inf
        with np.errstate(invalid="ignore"):
            d = w[used] @ np.nanmean(t, axis=1)  # (I,) per-item estimate over each cell's seeds
        if np.isnan(d).any():
            return 0.0, math.inf
        total = float(d.var(ddof=1))
        complete = ~np.isnan(t).any(axis=(0, 2))
        noise, noise_dof = 0.0, math.inf
        s = int(complete.sum())
        if s >= 2:
            per = np.tensordot(w[used], t[:, complete], axes=1)  # (S', I)
            r = per - per.mean(axis=0) - per.mean(axis=1)[:, None] + per.mean()
            noise_dof = (s - 1) * (n_items - 1)
            noise = float((r * r).sum()) / noise_dof / s
        var = max(total - noise, 0.0)
        if var == 0.0:
            return 0.0, math.inf
        spread = total**2 / (n_items - 1) + noise**2 / noise_dof
        return var / n_items, var**2 / spread


def welch(variances: list[float], dofs: list[float]) -> float:
    """Welch–Satterthwaite ν of a sum of variances (``stats.welch_dof``)."""
    return welch_dof(variances, dofs)


def pair_w(n: int, a: int, b: int) -> np.ndarray:
    """Weights of cell ``a`` − cell ``b`` among ``n`` cells."""
    w = np.zeros(n)
    w[a], w[b] = 1.0, -1.0
    return w
