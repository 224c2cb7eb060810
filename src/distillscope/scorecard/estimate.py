"""Seed-blocked estimates of the scorecard: a two-way cell + seed fit, contrasts, levels, ranges.

Cells of one seed share the evaluation stream (common random numbers, docs/method.md §9
"Statistics"), so a seed is a *block*. One metric over the cells a part reads is fitted by the
additive model

    y_cs = μ_c + β_s + ε_cs,    ε_cs ~ N(0, σ²) independent,

by least squares (``Blocks``): μ̂ = the cell effects, σ̂² = RSS / ν with ν = N − C − (S − 1).
A contrast Σ w_c μ_c with Σ w_c = 0 is free of the seed effects: its estimate is Σ w_c μ̂_c and
its SE σ̂ √(wᵀ (XᵀX)⁻¹ w) on ν degrees of freedom (for two cells of a balanced design this is
the paired t-test; for C cells it pools the residual variance over them). A seed missing in
one cell leaves only what it pairs with (its own β absorbs a lone value: residual 0, no ν).

A *level* (a mean of cells, or cells minus a per-seed reference) keeps the seed effect: its
estimate is the mean over seeds of the per-seed means and its SE their spread, sd / √S on
S − 1 degrees of freedom — the seed, not the run, is the replicate.

An ``Estimate`` gives one-sided (1 − α) t-bounds; ``RangeEstimate`` (max − min over cells)
gives an intersection–union upper bound and a Bonferroni lower bound over the pairs
(``interval``). Intervals cover items as well as seeds (docs/method.md §9 "What an interval
covers"): with the runs' per-item values (``items``) every estimate adds its item component
(``crossed``); the residual variance is fitted per stratum where Bartlett's test finds it
differs (``strata``); a metric with a range (fractions, changes in pp) gets bounds inside it
(``interval.Bounded``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from distillscope.metric_keys import unit
from distillscope.results.aggregate import SEED, percent_scale, row_keys, with_labels
from distillscope.scorecard.crossed import ItemComponent, pair_w, welch
from distillscope.scorecard.interval import (
    Estimate,
    RangeEstimate,
    bounded,
    not_tested,
)
from distillscope.scorecard.strata import STRATA, Stratified, design, stratify

#: Relative size of a residual sum of squares that is float rounding (an exactly additive
#: table: every seed shifts every cell alike), treated as zero: such a table decides nothing.
ROUNDING = 1e-20
#: What an interval covers, said in its evidence (docs/method.md §9 "What an interval
#: covers"): items as well as seeds where the runs' per-item outcomes of the metric exist
#: (accuracy, pass@k, forgetting), seeds only where none do (sparsity, style share, lengths).
OVER_ITEMS = "seeds and items"
OVER_SEEDS = "seeds only (no per-item outcomes)"


@dataclass
class Blocks:
    """The two-way cell + seed least-squares fit of one metric (display units) over ``rows``.

    ``cells``: one row per cell (the ``by`` columns, ``n`` seeds, ``mean`` of its runs, ``mu``
    the fitted effect); cells of one seed are listed in ``thin``; seeds absent from some cell
    in ``incomplete``.
    """

    rows: pd.DataFrame
    metric: str
    by: list[str]
    items: np.ndarray | None = None  # per row, its per-item values (``ItemTable.matrix``)
    cells: pd.DataFrame = field(init=False)
    thin: list[int] = field(init=False)
    incomplete: list[str] = field(init=False)
    sigma2: float = field(init=False)
    dof: float = field(init=False)
    per_seed: pd.DataFrame = field(init=False, repr=False)  # cells × seeds (NaN: absent)
    _cov: np.ndarray = field(init=False, repr=False)
    _items: ItemComponent | None = field(init=False, repr=False)
    strata: Stratified | None = field(init=False, repr=False)  # per-stratum residual variance

    def __post_init__(self) -> None:
        y = pd.to_numeric(self.rows[self.metric], errors="coerce") * percent_scale(self.metric)
        ok = y.notna().to_numpy()
        rows, y = self.rows[ok], y[ok].to_numpy(dtype=float)
        keys = row_keys(rows, self.by)  # NaN → "nan": missing values match
        cell_ids, first, cell_index = np.unique(keys, return_index=True, return_inverse=True)
        seeds = rows[SEED].map(str).to_numpy() if SEED in rows else np.array(["?"] * len(rows))
        seed_ids, seed_index = np.unique(seeds, return_inverse=True)
        c, s = len(cell_ids), len(seed_ids)
        self.cells = rows.iloc[first][self.by].reset_index(drop=True)
        n = np.bincount(cell_index, minlength=c)
        self.cells["n"] = n
        self.cells["mean"] = np.bincount(cell_index, y, c) / np.maximum(n, 1)
        self.thin = [i for i in range(c) if n[i] < 2]
        total, count = np.zeros((c, s)), np.zeros((c, s))
        np.add.at(total, (cell_index, seed_index), y)
        np.add.at(count, (cell_index, seed_index), 1.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.per_seed = pd.DataFrame(total / count, columns=list(seed_ids))
        self.incomplete = [str(seed_ids[k]) for k in range(s) if (count[:, k] == 0).any()]
        self._fit(y, cell_index, seed_index, c, s)
        items = None if self.items is None else self.items[ok]
        self._items = None if items is None else ItemComponent(items, cell_index, seed_index)

    def _fit(self, y: np.ndarray, ci: np.ndarray, si: np.ndarray, c: int, s: int) -> None:
        x = design(ci, si, c, s)
        xtx_inv = np.linalg.pinv(x.T @ x)
        beta = xtx_inv @ x.T @ y
        resid = y - x @ beta
        rank = int(np.linalg.matrix_rank(x)) if len(y) else 0
        self.dof = float(len(y) - rank)
        rss = float(resid @ resid)
        if rss <= ROUNDING * float(y @ y):  # an exactly additive table: rounding, not noise
            rss = 0.0
        self.sigma2 = rss / self.dof if self.dof > 0 else math.nan
        self.strata = None
        if rss > 0 and self.dof > 0:
            labels = {a: self.cells[a].map(str).to_numpy()[ci] for a in STRATA if a in self.cells}
            self.strata = stratify(y, ci, si, x, labels)
        if self.strata is not None:  # per-stratum residual variance: the weighted fit
            beta, xtx_inv = self.strata.beta, self.strata.cov
            self.sigma2, self.dof = 1.0, min(self.strata.dofs)
        self.cells["mu"] = beta[:c] if c else []
        self._cov = xtx_inv[:c, :c]

    @cached_property
    def labelled(self) -> pd.DataFrame:
        """``cells`` with the reader's label columns (``aggregate.with_labels``), made once: the
        rules name strata from it several times per fit (not to be modified)."""
        return with_labels(self.cells)

    def mask(self, **values: object) -> np.ndarray:
        """Cells whose columns equal ``values`` (keys with ``__`` for dots: ``optim__lr=1e-4``)."""
        m = np.ones(len(self.cells), dtype=bool)
        for key, value in values.items():
            col = key.replace("__", ".")
            m &= (self.cells[col].map(str) == str(value)).to_numpy()
        return m

    def contrast(self, w: np.ndarray, label: str) -> Estimate:
        """Σ w_c μ_c (Σ w = 0) with its seed-blocked SE; "not tested" when a weighted cell has
        one seed."""
        used = np.flatnonzero(w != 0)
        thin = [i for i in used if i in self.thin]
        if thin:
            return not_tested(label, f"{self.cell_names(thin)} has fewer than 2 seeds")
        value = float(w @ self.cells["mu"].to_numpy(dtype=float))
        var, dof = self.with_items(max(float(w @ self._cov @ w), 0.0) * self.sigma2, self.dof, w)
        seeds = int(self.cells["n"].to_numpy()[used].min()) if len(used) else 0
        note, covers = self.seed_note(), self.covers()
        x = Estimate(label, value, math.sqrt(var), dof, seeds, note, covers=covers)
        return self.ranged(x, w)

    def ranged(self, x: Estimate, w: np.ndarray) -> Estimate:
        """A level (Σ w = 1) of a metric with a range (``limits``) as a ``Bounded`` estimate;
        a contrast stays a t-interval (a paired difference far from ±100 pp)."""
        lim = limits(self.metric)
        return x if lim is None or abs(float(w.sum()) - 1.0) > 1e-9 else bounded(x, *lim)

    def with_items(self, var: float, dof: float, w: np.ndarray) -> tuple[float, float]:
        """A seed-blocked variance (on ``dof``) of Σ w_c μ_c plus its item component
        (``ItemComponent.variance``), degrees of freedom by Welch–Satterthwaite; unchanged for
        a metric without per-item outcomes."""
        if self._items is None:
            return var, dof
        v_item, d_item = self._items.variance(w)
        return var + v_item, welch([var, v_item], [dof, d_item])

    def difference(self, a: np.ndarray, b: np.ndarray, label: str) -> Estimate:
        """Mean effect of cells ``a`` − mean of cells ``b`` (masks); not tested when a side is
        empty."""
        if not a.any() or not b.any():
            side = "first" if not a.any() else "second"
            return not_tested(label, f"no cell on the {side} side of {label}")
        return self.contrast(a / a.sum() - b / b.sum(), label)

    def range(self, m: np.ndarray, label: str) -> Estimate:
        """max − min of the effects of cells ``m`` (``RangeEstimate``)."""
        idx = np.flatnonzero(m)
        if len(idx) < 2:
            return not_tested(label, f"fewer than 2 cells for {label}")
        thin = [i for i in idx if i in self.thin]
        if thin:
            return not_tested(label, f"{self.cell_names(thin)} has fewer than 2 seeds")
        mu = self.cells["mu"].to_numpy(dtype=float)
        i, j = np.triu_indices(len(idx), 1)
        a, b = idx[i], idx[j]
        diffs = np.abs(mu[a] - mu[b])
        cov = self._cov
        ses = np.sqrt(np.maximum(cov[a, a] + cov[b, b] - 2 * cov[a, b], 0.0) * self.sigma2)
        dof = self.dof
        if self._items is not None:  # each pair's own item component; ν: the smallest pair's
            parts = [
                self.with_items(e * e, self.dof, pair_w(len(mu), p, q))
                for e, p, q in zip(ses, a, b, strict=True)
            ]
            ses = np.sqrt([v for v, _ in parts])
            dof = min(d for _, d in parts)
        value = float(mu[idx].max() - mu[idx].min())
        seeds = int(self.cells["n"].to_numpy()[idx].min())
        note = self.seed_note()
        return RangeEstimate(
            label, value, float(ses.max()), dof, seeds, note, "", tuple(diffs), tuple(ses),
            covers=self.covers(),
        )  # fmt: skip

    def level(self, m: np.ndarray, label: str) -> Estimate:
        """The mean of cells ``m`` with the seed as the replicate: per seed present in every
        one of them, the mean over those cells; SE = their sd / √S on S − 1 (the seed effect
        stays in a level)."""
        idx = np.flatnonzero(m)
        if not len(idx):
            return not_tested(label, f"no cell for {label}")
        thin = [i for i in idx if i in self.thin]
        if thin:
            return not_tested(label, f"{self.cell_names(thin)} has fewer than 2 seeds")
        table = self.per_seed.iloc[idx]
        full = table.dropna(axis=1)
        per = full.mean(axis=0)
        if len(per) < 2:
            return not_tested(label, f"fewer than 2 seeds common to the cells of {label}")
        left = [str(s) for s in table.columns if s not in full.columns]
        note = f"seed(s) {', '.join(left)} missing in some cell: left out" if left else ""
        w = m / m.sum()
        var, dof = self.with_items(float(per.var(ddof=1)) / len(per), len(per) - 1.0, w)
        covers = self.covers()
        x = Estimate(label, float(per.mean()), math.sqrt(var), dof, len(per), note, covers=covers)
        return self.ranged(x, w)

    def covariance(self, idx: Sequence[int]) -> np.ndarray:
        """σ̂² (XᵀX)⁻¹ of the effects of cells ``idx``: their joint sampling covariance."""
        return self.sigma2 * self._cov[np.ix_(list(idx), list(idx))]

    def cell_names(self, idx: Sequence[int]) -> str:
        """Cells ``idx`` named by their varying columns."""
        varying = [c for c in self.by if self.cells[c].map(str).nunique() > 1] or self.by
        return "; ".join(
            ", ".join(f"{c.split('.')[-1]}={self.cells.at[i, c]}" for c in varying) for i in idx
        )

    def covers(self) -> str:
        """What this fit's intervals cover: ``OVER_ITEMS`` with per-item values, else
        ``OVER_SEEDS``."""
        return OVER_ITEMS if self._items is not None else OVER_SEEDS

    def seed_note(self) -> str:
        """Which seeds left the blocks (missing in some cell) and, where the fit is stratified,
        each stratum's residual SD, for the evidence."""
        notes = []
        if self.incomplete:
            notes.append(
                f"seed(s) {', '.join(self.incomplete)} missing in some cell: left those pairs"
            )
        if self.strata is not None:
            notes.append(self.strata.note())
        return "; ".join(notes)


def limits(metric: str) -> tuple[float, float] | None:
    """The range of ``metric`` in display units: [0, 100] % for a fraction, [−100, 100] pp for a
    change in pp (a difference of two fractions); None for an unbounded metric."""
    u = unit(metric)
    return (0.0, 100.0) if u == "fraction" else (-100.0, 100.0) if u == "pp" else None


#: What a seed-level interval can read of the runs' per-item values: ``Evidence.item_matrix``
#: (rows, metric) → rows × items in display units, or None without per-item outcomes.
ItemSource = Callable[[pd.DataFrame, str], "np.ndarray | None"]


def seed_level(
    rows: pd.DataFrame,
    metric: str,
    label: str,
    reference: pd.DataFrame | None = None,
    items: ItemSource | None = None,
) -> Estimate:
    """The mean of ``metric`` (display units) over ``rows`` with the seed as the replicate.

    Per seed: the mean over that seed's runs, minus (when ``reference`` rows are given) the
    reference's mean for the same seed — or, where no reference row has that seed, the
    reference's overall mean. Estimate = mean over seeds; SE = their sd / √S on S − 1, plus the
    item component (``crossed.ItemComponent``, weights rows +1 and reference −1) when ``items``
    gives both sides' per-item values: the reference (the untrained student) is evaluated on
    the same items, so students − untrained carries the item × configuration interaction.
    """
    scale = percent_scale(metric)
    y = pd.to_numeric(rows[metric], errors="coerce") * scale
    per = y.groupby(rows[SEED].map(str)).mean().dropna()
    note = ""
    if reference is not None:
        r = pd.to_numeric(reference[metric], errors="coerce") * scale
        ref_seeds = r.groupby(reference[SEED].map(str)).mean().dropna()
        if ref_seeds.empty:
            return not_tested(label, f"{metric} of the untrained student")
        common = per.index.intersection(ref_seeds.index)
        if len(common) >= 2:
            per = per[common] - ref_seeds[common]
        else:
            per = per - float(ref_seeds.mean())
            note = "no seed of the reference matches: against its overall mean"
    if len(per) < 2:
        return not_tested(label, f"{label}: fewer than 2 seeds")
    var, dof = float(per.var(ddof=1)) / len(per), len(per) - 1.0
    item = _seed_items(rows, reference, metric, list(per.index), items)
    if item is not None:
        var, dof = var + item[0], welch([var, item[0]], [dof, item[1]])
    covers = OVER_SEEDS if item is None else OVER_ITEMS
    x = Estimate(label, float(per.mean()), math.sqrt(var), dof, len(per), note, covers=covers)
    lim = limits(metric)
    if lim is None:
        return x
    return bounded(x, *(lim if reference is None else (lim[0] - lim[1], lim[1] - lim[0])))


def _seed_items(
    rows: pd.DataFrame,
    reference: pd.DataFrame | None,
    metric: str,
    seeds: list[str],
    items: ItemSource | None,
) -> tuple[float, float] | None:
    """(Var_item, ν) of a seed level: ``rows`` (their seeds in ``seeds``) as one cell and
    ``reference`` (the same seeds; every seed it has when it shares fewer than 2) as another,
    weights +1 / −1 (a plain level: +1); None when a side has no per-item values of
    ``metric``."""
    sides = [rows[rows[SEED].map(str).isin(seeds)]]
    if reference is not None:
        same = reference[reference[SEED].map(str).isin(seeds)]
        sides.append(same if same[SEED].nunique() >= 2 else reference)
    mats = [None if items is None else items(side, metric) for side in sides]
    if any(m is None for m in mats) or len({m.shape[1] for m in mats}) != 1:
        return None
    names = np.concatenate([side[SEED].map(str).to_numpy() for side in sides])
    _, seed = np.unique(names, return_inverse=True)
    cell = np.concatenate([np.full(len(side), k) for k, side in enumerate(sides)])
    w = np.array([1.0, -1.0][: len(sides)])
    return ItemComponent(np.vstack(mats), cell, seed).variance(w)
