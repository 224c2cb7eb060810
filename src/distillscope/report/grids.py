"""The sub-grids the report's tables and figures show: the main grid, the λ-spectrum, an
experiment's rows, chosen by config values (``rollout.policy == "student"``, …).

The scorecard does not read these: each claim reads only its declared experiments through
``scorecard.evidence``. Baseline rows (the untrained student) and the RLVR stage's runs are never
part of a sub-grid.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from distillscope.results.aggregate import done, is_baseline, is_rlvr, with_labels
from distillscope.results.matching import LAMBDA
from distillscope.scorecard.claims.common import plain


def experiment_rows(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """Rows of experiment ``name`` when the table names experiments and has it; else every row
    (a custom study's one grid)."""
    if "experiment" in df.columns and (df["experiment"].map(str) == name).any():
        return df[df["experiment"].map(str) == name]
    return df


def where(df: pd.DataFrame, column: str, values: Sequence[object]) -> pd.DataFrame:
    """Rows whose ``column`` is in ``values``; all rows when the column is absent."""
    if column not in df.columns:
        return df
    return df[df[column].isin(list(values))]


def finished(df: pd.DataFrame) -> pd.DataFrame:
    """Finished runs of the study's experiments, without the baseline and the RLVR stage."""
    rows = done(df)
    return rows[~is_baseline(rows) & ~is_rlvr(rows)]


def main_grid(df: pd.DataFrame) -> pd.DataFrame:
    """The finished OnPD/OffPD × forward/reverse KL runs of the main grid, with labels."""
    rows = plain(experiment_rows(finished(df), "main"))
    rows = where(
        where(rows, "rollout.policy", ["student", "teacher"]),
        "objective.kind",
        ["forward_kl", "reverse_kl"],
    )
    if "rollout.policy" not in rows.columns or "objective.kind" not in rows.columns:
        return rows.iloc[0:0]
    return with_labels(rows)


def spectrum_grid(df: pd.DataFrame) -> pd.DataFrame:
    """Finished full-vocabulary forward/reverse KL runs with a known λ (the λ-spectrum)."""
    rows = plain(experiment_rows(finished(df), "spectrum"))
    if "rollout.policy" not in rows.columns or "objective.kind" not in rows.columns:
        return rows.iloc[0:0]
    rows = with_labels(where(rows, "objective.kind", ["forward_kl", "reverse_kl"]))
    return rows[rows[LAMBDA].notna()]


def has(df: pd.DataFrame, *metrics: str) -> bool:
    """Whether every metric column exists and has at least one finite value."""
    return all(
        m in df.columns and pd.to_numeric(df[m], errors="coerce").notna().any() for m in metrics
    )


def n_values(df: pd.DataFrame, column: str) -> int:
    """Number of distinct non-missing values of ``column`` (0 when absent)."""
    return int(df[column].dropna().nunique()) if column in df.columns else 0
