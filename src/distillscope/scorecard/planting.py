"""A design's rows as the calibration's planted world sees them: masks of an experiment's
rows, its LR ends and positions, the axes of each row (``Axes``), offsets in stored units —
what the claims' ``Claim.plant`` and margin cases are written with."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from distillscope.results.aggregate import percent_scale, with_labels
from distillscope.results.matching import LAMBDA
from distillscope.scorecard.claim_columns import KIND, LR, POLICY, REVERSE, STUDENT, TEACHER


def rows_mask(d: pd.DataFrame, experiment: str, **values: object) -> np.ndarray:
    """Mask of design rows of ``experiment`` whose columns equal ``values`` (``__`` for dots)."""
    if "experiment" not in d.columns:
        return np.zeros(len(d), dtype=bool)
    m = (d["experiment"].map(str) == experiment).to_numpy().copy()
    for key, value in values.items():
        col = key.replace("__", ".")
        m &= d[col].map(str).eq(str(value)).to_numpy() if col in d else False
    return m


def lr_end(d: pd.DataFrame, experiment: str, high: bool) -> np.ndarray:
    """Mask of the design rows of ``experiment`` at its smallest (or largest) LR."""
    rows = rows_mask(d, experiment)
    lr = pd.to_numeric(d.get(LR, pd.Series(np.nan, index=d.index)), errors="coerce")
    lrs = lr[rows].dropna()
    if lrs.empty:
        return np.zeros(len(d), dtype=bool)
    return rows & (lr == (lrs.max() if high else lrs.min())).to_numpy()


@dataclass(frozen=True)
class Axes:
    """A design's rows as the planted world sees them (calibration's ``Claim.plant``)."""

    kind: pd.Series  # objective.kind as strings ("" when absent)
    policy: pd.Series  # rollout.policy as strings
    lam: np.ndarray  # λ (0 where unknown)
    reverse: np.ndarray  # reverse KL, full-vocabulary or sampled
    spectrum: np.ndarray  # rows of the `spectrum` experiment
    teacher: np.ndarray  # OffPD rows
    on: np.ndarray  # on-policy rows: OnPD, or λ > 0 on the spectrum
    lr_position: np.ndarray  # log-LR position in [0, 1] within the row's experiment


def column(d: pd.DataFrame, name: str) -> pd.Series:
    """``name`` as strings ("" where the design has no such column)."""
    return d[name].map(str) if name in d.columns else pd.Series("", index=d.index)


def lr_position(d: pd.DataFrame) -> np.ndarray:
    """Per row, log-LR position in [0, 1] within its experiment (0 = lowest LR)."""
    pos = np.zeros(len(d))
    if LR not in d.columns:
        return pos
    lr = pd.to_numeric(d[LR], errors="coerce")
    exp = column(d, "experiment") if "experiment" in d.columns else pd.Series("", index=d.index)
    for _, idx in d.groupby(exp).groups.items():
        x = np.log10(lr.loc[idx].to_numpy(dtype=float))
        span = np.nanmax(x) - np.nanmin(x) if np.isfinite(x).any() else 0.0
        pos[d.index.get_indexer(idx)] = np.nan_to_num((x - np.nanmin(x)) / span) if span else 0.0
    return pos


def axes(d: pd.DataFrame) -> Axes:
    """The design's ``Axes``."""
    labelled = with_labels(d)
    kind, policy = column(labelled, KIND), column(labelled, POLICY)
    lam = pd.to_numeric(labelled[LAMBDA], errors="coerce").fillna(0.0).to_numpy()
    teacher = (policy == TEACHER).to_numpy()
    return Axes(
        kind,
        policy,
        lam,
        kind.isin([REVERSE, "reverse_sampled"]).to_numpy(),
        (column(labelled, "experiment") == "spectrum").to_numpy(),
        teacher,
        ((policy == STUDENT).to_numpy() | (lam > 0)) & ~teacher,
        lr_position(d),
    )


def in_pp(metric: str, value: float) -> float:
    """A display-unit offset (pp for fractions) in the metric's stored units."""
    return value / percent_scale(metric)
