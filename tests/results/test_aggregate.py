"""Seed aggregation and labels of the report: numbers checked against hand computation."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from distillscope.results import aggregate
from distillscope.results.aggregate import (
    cell_columns,
    fmt_mean_sem,
    lr_text,
    objective_label,
    rollout_label,
    trained,
    trained_mask,
    with_labels,
)


def _table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run_id": [f"r{i}" for i in range(7)],
            "experiment": ["main"] * 7,
            "status": ["done", "done", "done", "failed", "done", "done", "diverged"],
            "reason": ["", "", "", "OOM", "", "", "NaN loss"],
            "rollout.policy": ["student"] * 4 + ["teacher"] * 3,
            "optim.lr": [1e-5] * 7,
            "optim.grad_clip": [1.0] * 4 + [math.nan] * 3,
            "seed": [42, 43, 44, 45, 42, 43, 44],
            "eval/accuracy": [0.70, 0.72, 0.77, 0.99, 0.50, math.nan, 0.0],
        }
    )


def test_cells_exclude_seed_and_metrics():
    assert cell_columns(_table()) == ["experiment", "rollout.policy", "optim.lr", "optim.grad_clip"]


def test_mean_sem_n_by_hand():
    agg = aggregate(_table(), ["eval/accuracy"], ["rollout.policy"]).set_index("rollout.policy")
    on = agg.loc["student"]
    # Only the three finished runs: 0.70, 0.72, 0.77 (the failed 0.99 is ignored).
    mean = (0.70 + 0.72 + 0.77) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in (0.70, 0.72, 0.77)) / 2)
    assert on["n"] == 3
    assert on["eval/accuracy:mean"] == pytest.approx(mean)
    assert on["eval/accuracy:sem"] == pytest.approx(sd / math.sqrt(3))
    assert on["eval/accuracy:n"] == 3
    off = agg.loc["teacher"]
    # Two finished teacher runs, one of them unmeasured (NaN): n = 2, measured = 1, no SEM.
    assert off["n"] == 2
    assert off["eval/accuracy:n"] == 1
    assert off["eval/accuracy:mean"] == pytest.approx(0.50)
    assert math.isnan(off["eval/accuracy:sem"])


def test_missing_axis_value_is_its_own_cell():
    agg = aggregate(_table(), ["eval/accuracy"])  # default: every axis but seed
    assert len(agg) == 2
    assert agg["optim.grad_clip"].isna().sum() == 1  # clipping off stays a cell of its own


def test_absent_metric_skipped_and_empty_input():
    agg = aggregate(_table(), ["eval/nope"], ["rollout.policy"])
    assert list(agg.columns) == ["rollout.policy", "n"]
    empty = aggregate(_table().iloc[0:0], ["eval/accuracy"], ["rollout.policy"])
    assert empty.empty and "eval/accuracy:sem" in empty.columns


def test_labels():
    assert rollout_label("student") == "OnPD"
    assert rollout_label("teacher") == "OffPD"
    assert rollout_label("spectrum", 0.5) == "λ=+0.5"
    assert objective_label("reverse_kl") == "reverse KL"
    assert objective_label("opd", "log_compress") == "OPD (log compression)"
    assert objective_label("forward_kl", None, 64) == "forward KL (top-64 teacher)"
    assert objective_label("forward_kl", None, 0) == "forward KL"
    assert objective_label("forward_kl", None, float("nan")) == "forward KL"
    assert lr_text(5e-5, "high") == "5e-05 (high)"
    lab = with_labels(_table())
    assert set(lab["_rollout"]) == {"OnPD", "OffPD"}
    assert set(lab["_lam"]) == {1.0, -1.0}


def test_fmt_mean_sem():
    assert fmt_mean_sem(0.7234, 0.0123, 100.0) == "72.3 ± 1.2"
    assert fmt_mean_sem(0.7234, math.nan, 100.0) == "72.3"
    assert fmt_mean_sem(math.nan, math.nan) == "—"


def test_trained_rows_are_the_finished_students_by_position():
    """``trained``: done and not the untrained baseline, in order; a table without a status
    column counts every row as finished; rows are picked by position, so a repeated index label
    does not carry one row's status to another."""
    df = _table()
    base = {**df.iloc[0].to_dict(), "run_id": "baseline-1", "experiment": "baseline"}
    df = pd.concat([df, pd.DataFrame([base])], ignore_index=True)
    assert list(trained(df)["run_id"]) == ["r0", "r1", "r2", "r4", "r5"]
    assert list(trained(df.drop(columns="status"))["run_id"]) == [f"r{i}" for i in range(7)]
    repeated = df.set_axis([0] * len(df))  # one label for every row
    assert trained_mask(repeated).tolist() == trained_mask(df).tolist()
