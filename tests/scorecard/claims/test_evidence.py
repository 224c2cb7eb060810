"""Evidence integrity: declared experiments only, no fallback, duplicates counted once, tasks
identified by dataset."""

from __future__ import annotations

import pandas as pd
import pytest

from distillscope.scorecard.evidence import Evidence, config_key, task_column


def _rows() -> pd.DataFrame:
    base = {"status": "done", "rollout.policy": "student", "optim.lr": 1e-4, "eval/accuracy": 0.5}
    return pd.DataFrame(
        [
            {**base, "run_id": "a", "experiment": "main", "seed": 1},
            {**base, "run_id": "b", "experiment": "main", "seed": 2},
            {**base, "run_id": "a", "experiment": "main", "seed": 3},  # same run id
            {**base, "run_id": "c", "experiment": "main", "seed": 2},  # same resolved config
            {**base, "run_id": "d", "experiment": "lr_sweep", "seed": 1},
            {**base, "run_id": "e", "experiment": "main", "seed": 4, "status": "failed"},
        ]
    )


def test_duplicates_count_once_and_are_listed():
    view = Evidence(_rows()).for_claim(["main"])
    assert view.rows("main")["run_id"].tolist() == ["a", "b"]
    assert view.dropped == ["a (main)", "c (main)"]
    assert view.note().startswith("2 duplicate row(s) counted once")


def test_undeclared_experiments_raise_and_absent_ones_are_empty():
    view = Evidence(_rows()).for_claim(["main", "spectrum"])
    with pytest.raises(ValueError, match="declares"):
        view.rows("lr_sweep")
    assert view.rows("spectrum").empty  # no fallback to other rows
    assert Evidence(_rows().drop(columns=["experiment"])).for_claim(["main"]).rows("main").empty


def test_the_same_config_in_two_declared_experiments_counts_once():
    view = Evidence(_rows()).for_claim(["main", "lr_sweep"])
    assert view.rows("main", "lr_sweep")["run_id"].tolist() == ["a", "b"]  # d is a's config


def test_tasks_are_datasets_when_the_table_names_them():
    df = pd.DataFrame({"task.name": ["t", "t"], "task.dataset": ["file:a", "file:b"]})
    assert task_column(df) == "task.dataset"
    assert task_column(df.assign(**{"task.dataset": None})) == "task.name"
    assert config_key(df).nunique() == 2
