"""The sub-grids the report's tables and figures show: the main grid, the λ-spectrum, an
experiment's rows, chosen by config values (``rollout.policy == "student"``, …).

The scorecard does not read these: each claim reads only its declared experiments through
``scorecard.evidence``. Baseline rows (the untrained student) and the RLVR stage's runs are never
part of a sub-grid. Every function here takes the study's finished runs with their labels
(``results.reader.Study.finished``, computed once per report), never the raw results table.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from distillscope.results.aggregate import is_baseline, is_rlvr
from distillscope.results.matching import LAMBDA
from distillscope.scorecard.selection import plain


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


def distilled(finished: pd.DataFrame) -> pd.DataFrame:
    """The ``finished`` runs of the study's experiments, without the baseline and the RLVR
    stage."""
    return finished[~is_baseline(finished) & ~is_rlvr(finished)]


def main_grid(finished: pd.DataFrame) -> pd.DataFrame:
    """The OnPD/OffPD × forward/reverse KL runs of the main grid among the ``finished`` runs
    (``Study.finished``: labelled)."""
    rows = plain(experiment_rows(distilled(finished), "main"))
    rows = where(
        where(rows, "rollout.policy", ["student", "teacher"]),
        "objective.kind",
        ["forward_kl", "reverse_kl"],
    )
    if "rollout.policy" not in rows.columns or "objective.kind" not in rows.columns:
        return rows.iloc[0:0]
    return rows


def spectrum_grid(finished: pd.DataFrame) -> pd.DataFrame:
    """Full-vocabulary forward/reverse KL runs with a known λ (the λ-spectrum) among the
    ``finished`` runs (``Study.finished``: labelled)."""
    rows = plain(experiment_rows(distilled(finished), "spectrum"))
    if "rollout.policy" not in rows.columns or "objective.kind" not in rows.columns:
        return rows.iloc[0:0]
    rows = where(rows, "objective.kind", ["forward_kl", "reverse_kl"])
    return rows[rows[LAMBDA].notna()]


def has(df: pd.DataFrame, *metrics: str) -> bool:
    """Whether every metric column exists and has at least one finite value."""
    return all(
        m in df.columns and pd.to_numeric(df[m], errors="coerce").notna().any() for m in metrics
    )


def n_values(df: pd.DataFrame, column: str) -> int:
    """Number of distinct non-missing values of ``column`` (0 when absent)."""
    return int(df[column].dropna().nunique()) if column in df.columns else 0
