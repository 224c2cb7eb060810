"""Matched comparisons of the scorecard: cells that agree on every axis but one, keyed on values.

A ``Contrast`` names the two sides by config values (``rollout.policy == "student"`` versus
``rollout.policy == "teacher"``); ``paired`` returns, for every cell of the other axes where
both sides ran, the two cell means as a ``Pair``. Reader labels (OnPD, forward KL, 1e-04 (low))
appear only in the cell names of the evidence (``cell_key``); rows are never chosen by them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from distillscope.labels import REGULATION_NAMES, labelled_axes
from distillscope.results.aggregate import (
    aggregate,
    cell_columns,
    percent_scale,
    with_label,
    with_labels,
)
from distillscope.results.stats import Pair, num, pp

#: The effective λ of a run's rollouts (−1 teacher, +1 student, else ``rollout.lam``), a value
#: that ``aggregate.with_labels`` derives from ``rollout.policy`` and ``rollout.lam``.
LAMBDA = "_lam"
#: Whether a run clipped its gradients (``optim.grad_clip`` set, not null), derived by the rules
#: that compare clipping on with clipping off.
CLIP_ON = "_clip_on"


@dataclass(frozen=True)
class Contrast:
    """Side a versus side b of a matched comparison: the rows whose ``column`` equals ``a``
    against those where it equals ``b`` (a − b is the difference that ``Pair.diff`` gives)."""

    column: str
    a: object
    b: object

    def reversed(self) -> Contrast:
        """The same comparison with the sides swapped (b − a)."""
        return Contrast(self.column, self.b, self.a)


ON_VS_OFF = Contrast("rollout.policy", "student", "teacher")  # OnPD − OffPD
FORWARD_VS_REVERSE = Contrast("objective.kind", "forward_kl", "reverse_kl")
SAMPLED_FORWARD_VS_REVERSE = Contrast("objective.kind", "forward_sampled", "reverse_sampled")
CLIP_ON_VS_OFF = Contrast(CLIP_ON, True, False)

# Columns that encode the same axis: comparing along one of them ignores all of them when matching
# (and a labelled axis always brings its label column, see match_columns).
_ROLLOUT = ("rollout.policy", "rollout.lam", "_rollout", LAMBDA)
_FAMILIES = {
    "rollout.policy": _ROLLOUT,
    LAMBDA: _ROLLOUT,
    "objective.kind": ("objective.kind", "_kl"),
    "optim.lr": ("optim.lr", "_lr"),
    CLIP_ON: ("optim.grad_clip", CLIP_ON),
}


def match_columns(df: pd.DataFrame, axis: str) -> list[str]:
    """Cell columns other than ``axis`` (and its aliases) and ``experiment``: what must agree."""
    drop = {"experiment", axis, *_FAMILIES.get(axis, ())}
    labels = labelled_axes(df.columns)
    drop |= {labels[c] for c in drop if c in labels}
    return [c for c in cell_columns(df) if c not in drop]


def cell_key(row: pd.Series, columns: Sequence[str]) -> str:
    """A readable name of a cell from its varying ``columns`` (reader labels where available)."""
    shown_by = {"rollout.lam": "rollout.policy"}  # λ is part of the OnPD/OffPD/λ label
    labels = labelled_axes(row.index)
    labelled_by = {lab: axis for axis, lab in labels.items()}
    parts = []
    for c in columns:
        v = row[c]
        if shown_by.get(c) in columns or labelled_by.get(c) in columns:
            continue  # shown with the axis it belongs to
        if c == "rollout.policy" and "_rollout" in row:
            v = row["_rollout"]
        elif c == "objective.kind" and "_kl" in row:
            v = row["_kl"]
        elif c == "optim.lr" and "_lr" in row:
            v = row["_lr"]
        elif c == "objective.regulation":
            if "objective.kind" in columns and row.get("objective.kind") == "opd":
                continue  # the OPD label names its regulation
            v = REGULATION_NAMES.get(str(v), f"regulation={v}")
        elif c == "rollout.lam":
            v = f"λ={v:+g}" if isinstance(v, float) and not math.isnan(v) else f"λ={v}"
        else:
            label = row[labels[c]] if c in labels else None
            v = with_label(f"{c.split('.')[-1]}={v}", label)
        parts.append(str(v))
    return ", ".join(parts) if parts else "all"


def paired(df: pd.DataFrame, metric: str, contrast: Contrast) -> list[Pair]:
    """Matched cell means of ``metric`` (display units): side ``contrast.a`` versus ``.b``.

    Cells are matched on every other cell column (``match_columns``); only cells where both
    sides have a measured run are returned, in the order of their matched values.
    """
    axis = contrast.column
    if metric not in df.columns or axis not in df.columns:
        return []
    match = match_columns(df, axis)
    varying = [c for c in match if df[c].map(str).nunique() > 1]
    agg = aggregate(df, [metric], [*match, axis])
    agg = agg[agg[f"{metric}:n"] >= 1]
    scale = percent_scale(metric)
    labels = with_labels(agg)
    agg = agg.assign(_key=[cell_key(labels.loc[i], varying) for i in agg.index])
    agg["_match"] = match_keys(agg, match)
    out = []
    for _, group in agg.groupby("_match", sort=True):
        side_a = group[group[axis] == contrast.a]
        side_b = group[group[axis] == contrast.b]
        if len(side_a) == 1 and len(side_b) == 1:
            ra, rb = side_a.iloc[0], side_b.iloc[0]
            out.append(
                Pair(
                    key=str(ra["_key"]),
                    a=ra[f"{metric}:mean"] * scale,
                    a_sem=ra[f"{metric}:sem"] * scale,
                    b=rb[f"{metric}:mean"] * scale,
                    b_sem=rb[f"{metric}:sem"] * scale,
                    a_dof=seed_dof(ra[f"{metric}:n"]),
                    b_dof=seed_dof(rb[f"{metric}:n"]),
                )
            )
    return out


def seed_dof(n: float) -> float:
    """Degrees of freedom of a cell's SEM over ``n`` seeds: n − 1, NaN for one seed."""
    return float(n) - 1.0 if n >= 2 else math.nan


def cell_means(df: pd.DataFrame, metric: str, by: Sequence[str]) -> pd.DataFrame:
    """Mean, SEM and n of ``metric`` per ``by`` group, in display units (pp for fractions)."""
    agg = aggregate(df, [metric], list(by))
    scale = percent_scale(metric)
    agg = agg[agg[f"{metric}:n"] > 0]
    return agg.assign(
        mean=agg[f"{metric}:mean"] * scale,
        sem=agg[f"{metric}:sem"] * scale,
        runs=agg[f"{metric}:n"],
    )[[*by, "mean", "sem", "runs"]]


def cell_pair(key: str, a: pd.Series, b: pd.Series) -> Pair:
    """Two rows of ``cell_means`` (mean, sem, runs) as a pair a − b."""
    dof_a, dof_b = seed_dof(a["runs"]), seed_dof(b["runs"])
    return Pair(key, a["mean"], a["sem"], b["mean"], b["sem"], dof_a, dof_b)


def match_keys(frame: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """One string per row joining ``columns`` (NaN → "nan", so missing values match each other)."""
    if not columns or frame.empty:
        return pd.Series("", index=frame.index, dtype=object)
    return frame[list(columns)].apply(lambda col: col.map(str)).agg("|".join, axis=1)


def describe_pairs(pairs: Sequence[Pair], unit: str = "pp", digits: int = 1) -> str:
    """``forward KL, 1e-05: 72.0 vs 70.1 (Δ +1.9 ± 1.1 pp); …`` for the evidence column."""
    parts = []
    for p in pairs:
        sem = "" if math.isnan(p.sem) else f" ± {p.sem:.{digits}f}"
        unit_text = f" {unit}" if unit else ""
        parts.append(
            f"{p.key}: {num(p.a, digits)} vs {num(p.b, digits)} "
            f"(Δ {pp(p.diff, digits)}{sem}{unit_text})"
        )
    return "; ".join(parts)
