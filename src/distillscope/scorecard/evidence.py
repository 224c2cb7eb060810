"""The evidence a claim may read: its declared experiments' finished runs, each counted once.

    ev = Evidence(results_df)            # one table, shared by every claim
    view = ev.for_claim(claim)           # what one claim may read
    rows = view.rows("main")             # finished runs of `main`, duplicates dropped

Evidence integrity (docs/method.md §9): a claim reads only the experiments it declares — asking
for another raises (a bug in the claim, reported as "error"), and an experiment the study does
not have is simply empty (no fallback to other rows, ever). Rows with the same run id, or the
same resolved config (every axis but the experiment's name and derived labels, seed
included) within what one claim reads, count once: the first in table order stays, the others
are listed (``dropped``). A task is identified by its dataset: ``task.dataset`` when the table
has it (name + file or hub id + split), else ``task.name`` (older tables).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from distillscope.labels import is_label_column
from distillscope.results.aggregate import (
    SEED,
    axis_columns,
    done,
    hashable_axes,
    is_baseline,
    is_rlvr,
    row_keys,
    with_labels,
)

TASK_DATASET, TASK_NAME = "task.dataset", "task.name"


def task_column(rows: pd.DataFrame) -> str | None:
    """The column that identifies a run's task: ``task.dataset`` when present with values,
    else ``task.name``; None when neither is."""
    if TASK_DATASET in rows.columns and rows[TASK_DATASET].notna().any():
        return TASK_DATASET
    return TASK_NAME if TASK_NAME in rows.columns else None


def config_key(rows: pd.DataFrame) -> pd.Series:
    """One string per row: its resolved config (axes, seed included; not the experiment's name
    nor derived label columns)."""
    cols = [c for c in axis_columns(rows) if c != "experiment" and not is_label_column(c)]
    return pd.Series(row_keys(rows, cols), index=rows.index, dtype=object)


@dataclass(eq=False)
class Evidence:
    """One results table, shared by every claim of one scoring (``for_claim`` for a view)."""

    df: pd.DataFrame
    items: Any = None  # the runs' per-item outcomes, a ``results.items.ItemTable`` (None: seeds)
    _cache: dict[Any, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.df = hashable_axes(self.df)

    def item_matrix(self, rows: pd.DataFrame, metric: str) -> np.ndarray | None:
        """Per row of ``rows``, its per-item values of ``metric`` (``ItemTable.matrix``); None
        without per-item outcomes of it."""
        return None if self.items is None else self.items.matrix(rows, metric)

    def for_claim(self, experiments: Iterable[str]) -> ClaimEvidence:
        """What a claim that declares ``experiments`` may read."""
        return ClaimEvidence(self, tuple(experiments))

    def finished(self) -> pd.DataFrame:
        """Finished runs (status done), baseline rows included."""
        if "finished" not in self._cache:
            self._cache["finished"] = done(self.df)
        return self._cache["finished"]

    def baseline(self) -> pd.DataFrame:
        """The finished untrained-student rows, one per distinct run id."""
        rows = self.finished()
        rows = rows[is_baseline(rows)]
        if "run_id" in rows.columns:
            rows = rows[~rows["run_id"].map(str).duplicated()]
        return rows


@dataclass(eq=False)
class ClaimEvidence:
    """The rows one claim may read: only its declared experiments, each run counted once."""

    ev: Evidence
    experiments: tuple[str, ...]
    dropped: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # sentences: rows a rule set aside

    def rows(self, *names: str, rlvr: bool = False) -> pd.DataFrame:
        """Finished, labelled runs of the declared experiments ``names`` (RLVR runs only when
        ``rlvr``), duplicates counted once (``dropped`` lists them). Empty when the study has
        none; a name the claim did not declare raises."""
        undeclared = [n for n in names if n not in self.experiments]
        if undeclared:
            raise ValueError(f"the claim reads {undeclared} but declares {list(self.experiments)}")
        key = ("rows", names, rlvr)
        if key not in self.ev._cache:
            self.ev._cache[key] = self._rows(names, rlvr)
        rows, dropped = self.ev._cache[key]
        self.dropped += [d for d in dropped if d not in self.dropped]
        return rows

    def _rows(self, names: tuple[str, ...], rlvr: bool) -> tuple[pd.DataFrame, list[str]]:
        rows = self.ev.finished()
        if "experiment" not in rows.columns:
            return rows.iloc[0:0], []
        rows = rows[rows["experiment"].map(str).isin(names) & ~is_baseline(rows)]
        rows = rows[is_rlvr(rows) == rlvr]
        dup = pd.Series(False, index=rows.index)
        if "run_id" in rows.columns:
            dup |= rows["run_id"].map(str).duplicated()
        dup |= config_key(rows).duplicated()
        dropped = [
            f"{r.get('run_id', '?')} ({r.get('experiment', '?')})" for _, r in rows[dup].iterrows()
        ]
        return with_labels(rows[~dup]), dropped

    def baseline(self, metric: str | None = None) -> pd.DataFrame:
        """The untrained student's finished rows (the reference of "the students learned").

        With ``metric``: the rows that measured it, when some did. A study evaluates the
        untrained student once per seed and evaluation setting, and a metric only one setting
        produces (pass@32 where eval.coverage_samples ≥ 32, for the `opd` runs) is read from
        those rows, not found missing in the others."""
        rows = self.ev.baseline()
        if metric is None or metric not in rows.columns:
            return rows
        measured = rows[pd.to_numeric(rows[metric], errors="coerce").notna()]
        return measured if len(measured) else rows

    def leave_out(self, sentence: str) -> None:
        """Record ``sentence`` (rows the claim's rule set aside, and why) for the evidence."""
        if sentence and sentence not in self.left_out:
            self.left_out.append(sentence)

    def note(self) -> str:
        """The duplicates this claim counted once and the rows it left out, for its evidence
        ("" when none)."""
        notes = list(self.left_out)
        if self.dropped:
            shown = ", ".join(self.dropped[:6]) + (" …" if len(self.dropped) > 6 else "")
            notes.append(f"{len(self.dropped)} duplicate row(s) counted once: {shown}")
        return ". ".join(notes)


def missing_metric(rows: pd.DataFrame, metric: str, where: str) -> str:
    """ "" when ``rows`` measured ``metric`` in every row, else what is missing, in words."""
    if rows.empty:
        return f"runs of {where}"
    if metric not in rows.columns:
        return f"{metric} of {where}"
    bad = pd.to_numeric(rows[metric], errors="coerce").isna()
    if bad.all():
        return f"{metric} of {where}"
    if bad.any():
        ids = rows.loc[bad, "run_id"].map(str).tolist() if "run_id" in rows else []
        return f"{metric} of {where} in {int(bad.sum())} run(s) ({', '.join(ids[:4])})"
    return ""


def seeds_of(rows: pd.DataFrame) -> int:
    """Number of distinct seeds among ``rows``."""
    return int(rows[SEED].dropna().nunique()) if SEED in rows.columns else 0


def finite(value: float) -> bool:
    """Whether ``value`` is a finite number."""
    return isinstance(value, (int, float)) and math.isfinite(value)
