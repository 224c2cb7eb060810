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
gives an intersection–union upper bound and a Bonferroni lower bound over the pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import stats

from distillscope.report.aggregate import SEED, percent_scale, row_keys
from distillscope.report.claims.crossed import ItemComponent, pair_w, welch
from distillscope.report.claims.strata import STRATA, Stratified, design, stratify

#: Relative size of a residual sum of squares that is float rounding (an exactly additive
#: table: every seed shifts every cell alike), treated as zero: such a table decides nothing.
ROUNDING = 1e-20


@lru_cache(maxsize=1 << 16)
def t_quantile(p: float, dof: float) -> float:
    """The p-quantile of Student's t on ``dof`` degrees of freedom (∞: the normal's); memoised:
    the rules and the calibration's thousands of tables ask for the same few levels and ν."""
    return float(stats.t.ppf(p, dof)) if math.isfinite(dof) else float(stats.norm.ppf(p))


@dataclass(frozen=True)
class Estimate:
    """One estimand in one stratum: value ± SE on ν degrees of freedom over ``seeds`` seeds.

    ``missing`` non-empty: the part is "not tested" in this stratum, and says what is missing.
    ``note`` names what the estimate left out (seeds missing on one side, duplicates).
    """

    label: str
    value: float = math.nan
    se: float = math.nan
    dof: float = math.nan
    seeds: int = 0
    note: str = ""
    missing: str = ""

    def bounds(self, alpha: float) -> tuple[float, float]:
        """One-sided (1 − alpha) lower and upper t-bounds; NaN without an SE (or SE = 0)."""
        if not self.decidable():
            return math.nan, math.nan
        half = t_quantile(1.0 - alpha, self.dof) * self.se
        return self.value - half, self.value + half

    def decidable(self) -> bool:
        """Whether the estimate has a positive, finite SE on ν > 0 (else it decides nothing)."""
        ok = math.isfinite(self.value) and math.isfinite(self.se) and self.se > 0
        return ok and not math.isnan(self.dof) and self.dof > 0

    def reach(self, alpha: float, power: float = 0.8, two_sided: bool = False) -> float:
        """The distance from a margin at which a true effect is decided with ``power``:
        (t₁₋α(ν) + t_power(ν)) · SE (for an equivalence band, t₁₋₍₁₋power₎/₂)."""
        if not self.decidable():
            return math.nan
        q = 1 - (1 - power) / 2 if two_sided else power
        return (t_quantile(1 - alpha, self.dof) + t_quantile(q, self.dof)) * self.se

    def selected(self, family: int, what: str) -> Estimate:
        """This contrast as the one the data picked among ``family`` (``what`` names the pick):
        a ``Selected`` estimate, its bounds Bonferroni over the family, said in the note."""
        if family <= 1:
            return replace(self, note="; ".join(filter(None, [what, self.note])))
        said = f"{what} (best of {family} contrasts: bounds Bonferroni over them)"
        base = {f.name: getattr(self, f.name) for f in fields(Estimate)}
        return Selected(
            **(base | {"note": "; ".join(filter(None, [said, self.note]))}), family=family
        )

    def at_seeds(self, seeds: int) -> Estimate | None:
        """The same design over ``seeds`` seeds: SE ∝ 1/√seeds and ν ∝ seeds − 1 (its degrees of
        freedom per added seed kept); None when the estimate does not scale so (exact tests)."""
        if self.seeds < 2 or seeds < 2:
            return None
        per_seed = self.dof / (self.seeds - 1)
        se = self.se * math.sqrt(self.seeds / seeds)
        return replace(self, se=se, dof=per_seed * (seeds - 1), seeds=seeds)


@dataclass(frozen=True)
class Selected(Estimate):
    """A contrast the data picked among ``family`` candidates (a best cell, docs/method.md §9
    "What an interval covers"): each one-sided bound at α / ``family`` (Bonferroni), so that it
    holds for the picked contrast whichever the data picked — a simultaneous bound over the
    family. For best-of-A − best-of-B it also bounds max_A μ − max_B μ: the picked pair's
    lower bound lies below it (max_A μ ≥ μ_â; ȳ_b* ≤ ȳ_b̂), and likewise the upper. The picked
    contrast's SE stands for the family's (equal in a balanced seed-only fit; with items each
    pair's item component differs a little)."""

    family: int = 1

    def bounds(self, alpha: float) -> tuple[float, float]:
        """The t-bounds at alpha / ``family``."""
        return Estimate.bounds(self, alpha / self.family)

    def reach(self, alpha: float, power: float = 0.8, two_sided: bool = False) -> float:
        """``Estimate.reach`` at alpha / ``family``."""
        return Estimate.reach(self, alpha / self.family, power, two_sided)


@dataclass(frozen=True)
class RangeEstimate(Estimate):
    """max − min of cell effects: ``diffs`` |μ̂_i − μ̂_j| and ``ses`` over every pair i < j."""

    diffs: tuple[float, ...] = ()
    ses: tuple[float, ...] = ()

    def bounds(self, alpha: float) -> tuple[float, float]:
        """Lower: max |dᵢⱼ| − t₁₋α/k·SEᵢⱼ (Bonferroni over the k pairs); upper: max |dᵢⱼ| +
        t₁₋α·SEᵢⱼ (every pair within the band: an intersection–union test)."""
        if not self.decidable() or not self.diffs:
            return math.nan, math.nan
        d, se = np.array(self.diffs), np.array(self.ses)
        lo = float((d - t_quantile(1 - alpha / len(d), self.dof) * se).max())
        hi = float((d + t_quantile(1 - alpha, self.dof) * se).max())
        return max(lo, 0.0), hi


def not_tested(label: str, what: str) -> Estimate:
    """An estimate that could not be made: its part is "not tested: ``what``"."""
    return Estimate(label, missing=what)


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
        return Estimate(label, value, math.sqrt(var), dof, seeds, self.seed_note())

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
            label, value, float(ses.max()), dof, seeds, note, "", tuple(diffs), tuple(ses)
        )

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
        var, dof = self.with_items(float(per.var(ddof=1)) / len(per), len(per) - 1.0, m / m.sum())
        return Estimate(label, float(per.mean()), math.sqrt(var), dof, len(per), note)

    def covariance(self, idx: Sequence[int]) -> np.ndarray:
        """σ̂² (XᵀX)⁻¹ of the effects of cells ``idx``: their joint sampling covariance."""
        return self.sigma2 * self._cov[np.ix_(list(idx), list(idx))]

    def cell_names(self, idx: Sequence[int]) -> str:
        """Cells ``idx`` named by their varying columns."""
        varying = [c for c in self.by if self.cells[c].map(str).nunique() > 1] or self.by
        return "; ".join(
            ", ".join(f"{c.split('.')[-1]}={self.cells.at[i, c]}" for c in varying) for i in idx
        )

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


def seed_level(
    rows: pd.DataFrame, metric: str, label: str, reference: pd.DataFrame | None = None
) -> Estimate:
    """The mean of ``metric`` (display units) over ``rows`` with the seed as the replicate.

    Per seed: the mean over that seed's runs, minus (when ``reference`` rows are given) the
    reference's mean for the same seed — or, where no reference row has that seed, the
    reference's overall mean. Estimate = mean over seeds; SE = their sd / √S on S − 1.
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
    sd = float(per.std(ddof=1))
    return Estimate(
        label, float(per.mean()), sd / math.sqrt(len(per)), len(per) - 1.0, len(per), note
    )
