"""Seed-blocked fits and matched contrasts by stratum: what most claims' parts estimate.

Every estimate here is one ``Estimate`` per stratum (``estimate``); a part's ``estimate``
function is usually a one-line call of these."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from distillscope.labels import is_label_column
from distillscope.results.aggregate import cell_columns, row_keys
from distillscope.results.matching import cell_key, match_columns
from distillscope.scorecard.estimate import Blocks, Estimate, not_tested
from distillscope.scorecard.evidence import (
    ClaimEvidence,
    missing_metric,
    task_column,
)


def cell_by(rows: pd.DataFrame) -> list[str]:
    """The columns that make a cell of ``rows``: every axis but the seed, the experiment's name
    and derived label columns."""
    return [c for c in cell_columns(rows) if c != "experiment" and not is_label_column(c)]


def blocks(view: ClaimEvidence, key: str, rows: pd.DataFrame, metric: str) -> Blocks | str:
    """The seed-blocked fit of ``metric`` over ``rows`` (cached per key and metric), or what is
    missing (a string) when a run lacks the metric."""
    cache = view.ev._cache
    k = ("blocks", key, metric)
    if k not in cache:
        lack = missing_metric(rows, metric, key)
        cache[k] = lack or Blocks(rows, metric, cell_by(rows), view.ev.item_matrix(rows, metric))
    return cache[k]


def stratum_name(cells: pd.DataFrame, i: int, columns: Sequence[str]) -> str:
    """A reader's name of stratum ``columns`` of cell ``i`` (``forward KL, 1e-04 (low)``)."""
    if not columns:
        return "pooled"
    return cell_key(cells.iloc[i], list(columns))


def matched_weights(
    b: Blocks, axis: str, a_value: object, b_value: object, strata: Sequence[str] = ()
) -> dict[str, np.ndarray]:
    """Per stratum of ``strata`` ("pooled" when empty), the weights of ``a_value`` −
    ``b_value`` along ``axis`` averaged over the matched cells (cells that agree on every other
    cell column); a stratum without a matched pair is absent."""
    cells = b.labelled
    others = [c for c in match_columns(cells, axis) if c in b.by]
    keys = row_keys(cells, others)
    side = cells[axis].map(str).to_numpy()
    groups: dict[str, list[tuple[int, int]]] = {}
    for k in dict.fromkeys(keys):
        ia = np.flatnonzero((keys == k) & (side == str(a_value)))
        ib = np.flatnonzero((keys == k) & (side == str(b_value)))
        if len(ia) == 1 and len(ib) == 1:
            stratum = stratum_name(cells, int(ia[0]), strata)
            groups.setdefault(stratum, []).append((int(ia[0]), int(ib[0])))
    out = {}
    for stratum, pairs in groups.items():
        w = np.zeros(len(cells))
        for ia, ib in pairs:
            w[ia] += 1.0 / len(pairs)
            w[ib] -= 1.0 / len(pairs)
        out[stratum] = w
    return out


def matched(
    b: Blocks, axis: str, a_value: object, b_value: object, strata: Sequence[str], name: str
) -> list[Estimate]:
    """``a_value`` − ``b_value`` along ``axis`` over matched cells, one seed-blocked estimate
    per stratum of ``strata`` (``matched_weights``; one pooled estimate, labelled ``name``,
    when empty)."""
    ws = matched_weights(b, axis, a_value, b_value, strata)
    if not ws:
        return [not_tested(name, f"matched cells of {axis} = {a_value} and {b_value}")]
    return [b.contrast(w, stratum if strata else name) for stratum, w in ws.items()]


def tasks_of(b: Blocks) -> str | None:
    """The task column of a fit's cells (``task.dataset``, else ``task.name``)."""
    return task_column(b.cells)
