"""Guards of evidence integrity (scorecard/evidence.py) on small planted tables: which rows
are the baseline and which are RLVR runs, what one claim reads and counts once, what the
evidence line says about the rows set aside, and what a missing metric is called."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from distillscope.results.aggregate import is_baseline, is_rlvr
from distillscope.scorecard.evidence import (
    Evidence,
    config_key,
    finite,
    missing_metric,
    seeds_of,
    task_column,
)

ACC = "eval/accuracy"


def _run(rid: str, experiment: str = "main", seed: int = 1, **kw) -> dict:
    base = {"status": "done", "rollout.policy": "student", "optim.lr": 1e-4, ACC: 0.5}
    return {**base, "run_id": rid, "experiment": experiment, "seed": seed, **kw}


def _table() -> pd.DataFrame:
    return pd.DataFrame(
        [
            _run("m1"),
            _run("m2", seed=2),
            _run("baseline-1", "baseline"),
            _run("baseline-1", "baseline"),  # the baseline written twice: counted once
            _run("baseline-2", "baseline", 2, status="failed"),
            _run("baseline-x", "main", 3),  # a main run whose id merely starts with it
            _run("r1", seed=1, parent_run="m1", **{"optim.lr": 1e-6}),  # an RLVR run of main
            _run("r2", seed=2, parent_run="", **{"optim.lr": 1e-6}),  # empty parent: not RLVR
        ]
    )


def test_baseline_and_rlvr_rows_are_told_apart():
    df = _table()
    assert is_baseline(df).tolist() == [False, False, True, True, True, False, False, False]
    assert is_rlvr(df).tolist() == [False] * 6 + [True, False]
    gapped = df.set_axis(range(10, 18))  # a filtered table's index has gaps
    for cut, mask in (
        ("experiment", is_baseline),
        ("run_id", is_baseline),  # no id: no baseline
        ("parent_run", is_rlvr),
    ):
        m = mask(gapped.drop(columns=[cut]))
        assert m.index.equals(gapped.index) and m.tolist() == [False] * 8, cut
    assert Evidence(df.drop(columns=["experiment"])).baseline().empty
    ev = Evidence(df)
    assert ev.baseline()["run_id"].tolist() == ["baseline-1"]  # finished, once
    assert ev.for_claim(["main"]).baseline()["run_id"].tolist() == ["baseline-1"]
    assert ev.finished()["run_id"].tolist() == [r for r in df["run_id"] if r != "baseline-2"]


def test_a_claim_reads_distilled_or_rlvr_runs_of_its_experiments_only():
    view = Evidence(_table()).for_claim(["main"])
    assert view.rows("main")["run_id"].tolist() == ["m1", "m2", "baseline-x", "r2"]
    assert view.rows("main", rlvr=True)["run_id"].tolist() == ["r1"]
    assert "_lr" in view.rows("main").columns  # labelled for the reader
    assert view.dropped == [] and view.note() == ""
    with pytest.raises(ValueError, match=r"reads \['lr_sweep'\] but declares \['main'\]"):
        view.rows("main", "lr_sweep")


def test_duplicates_are_listed_once_however_often_the_rows_are_read():
    df = pd.concat([_table(), _table().iloc[[0, 1]]], ignore_index=True)
    ev = Evidence(df)
    view = ev.for_claim(["main"])
    view.rows("main")
    view.rows("main")  # the cache hands the same rows back
    assert view.dropped == ["m1 (main)", "m2 (main)"]
    assert view.note() == "2 duplicate row(s) counted once: m1 (main), m2 (main)"
    other = ev.for_claim(["main"])  # another claim of the same scoring: its own list
    assert other.dropped == [] and other.rows("main").shape == view.rows("main").shape
    assert other.dropped == ["m1 (main)", "m2 (main)"]


@pytest.mark.parametrize(("copies", "more"), [(6, ""), (7, " …")])
def test_the_note_lists_up_to_six_duplicates(copies, more):
    rows = [_run(f"a{i}", seed=i) for i in range(copies)]
    rows += [_run(f"b{i}", seed=i) for i in range(copies)]
    view = Evidence(pd.DataFrame(rows)).for_claim(["main"])
    view.rows("main")
    shown = ", ".join(f"b{i} (main)" for i in range(6))
    assert view.note() == f"{copies} duplicate row(s) counted once: {shown}{more}"


def test_a_duplicate_without_a_run_id_is_named_by_its_experiment():
    df = pd.DataFrame([_run("a"), _run("b")]).drop(columns=["run_id"])
    view = Evidence(df).for_claim(["main"])
    assert len(view.rows("main")) == 1 and view.dropped == ["? (main)"]


def test_the_note_shows_six_duplicates_and_the_rows_left_out():
    rows = [_run(f"a{i}", seed=i) for i in range(8)] + [_run(f"b{i}", seed=i) for i in range(8)]
    view = Evidence(pd.DataFrame(rows)).for_claim(["main"])
    assert len(view.rows("main")) == 8
    shown = ", ".join(f"b{i} (main)" for i in range(6))
    view.leave_out("")
    view.leave_out("2 runs without a task left out")
    view.leave_out("2 runs without a task left out")
    assert view.left_out == ["2 runs without a task left out"]
    assert view.note() == (
        f"2 runs without a task left out. 8 duplicate row(s) counted once: {shown} …"
    )


def test_a_config_is_every_axis_but_the_experiment_and_labels():
    df = pd.DataFrame(
        {
            "experiment": ["main", "lr_sweep", "main"],
            "lr_label": ["low", "high", "low"],
            "optim.lr": [1e-4, 1e-4, 3e-4],
            "seed": [1, 1, 1],
            ACC: [0.5, 0.6, 0.7],
        }
    )
    key = config_key(df)
    assert key.tolist() == ["0.0001|1", "0.0001|1", "0.0003|1"]
    assert config_key(df[[ACC]]).tolist() == ["", "", ""]


def test_the_task_column_is_the_dataset_when_it_has_values():
    both = pd.DataFrame({"task.name": ["t"], "task.dataset": ["file:a"]})
    assert task_column(both) == "task.dataset"
    assert task_column(both.assign(**{"task.dataset": math.nan})) == "task.name"
    assert task_column(both[["task.dataset"]]) == "task.dataset"
    assert task_column(both[["task.name"]]) == "task.name"
    assert task_column(both.drop(columns=["task.name", "task.dataset"])) is None


def test_a_missing_metric_names_where_and_which_runs():
    rows = pd.DataFrame({"run_id": list("abcdef"), ACC: [0.5, None, None, None, None, None]})
    assert missing_metric(rows.iloc[0:0], ACC, "main") == "runs of main"
    assert missing_metric(rows[["run_id"]], ACC, "main") == f"{ACC} of main"
    assert missing_metric(rows.iloc[1:], ACC, "main") == f"{ACC} of main"
    assert missing_metric(rows.iloc[:1], ACC, "main") == ""
    assert missing_metric(rows, ACC, "main") == f"{ACC} of main in 5 run(s) (b, c, d, e)"
    text = rows.astype({ACC: object}).assign(**{ACC: [0.5, "n/a", 0.4, 0.4, 0.4, 0.4]})
    assert missing_metric(text, ACC, "main") == f"{ACC} of main in 1 run(s) (b)"
    assert missing_metric(text.drop(columns=["run_id"]), ACC, "main") == (
        f"{ACC} of main in 1 run(s) ()"
    )


def test_seeds_are_counted_and_numbers_checked():
    assert seeds_of(pd.DataFrame({"seed": [1, 1, 2, None]})) == 2
    assert seeds_of(pd.DataFrame({"x": [1]})) == 0
    assert finite(1) and finite(2.5) and not finite(math.nan) and not finite(math.inf)
    assert not finite("1.0") and not finite(None)
