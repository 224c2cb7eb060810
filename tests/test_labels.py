"""Reader-facing names and the label-column convention of labelled study axes."""

from __future__ import annotations

from distillscope.labels import (
    OBJECTIVE_NAMES,
    is_label_column,
    label_column,
    labelled_axes,
)
from distillscope.objectives import OBJECTIVES


def test_every_objective_kind_has_exactly_one_reader_name():
    assert set(OBJECTIVE_NAMES) == set(OBJECTIVES)
    assert len(set(OBJECTIVE_NAMES.values())) == len(OBJECTIVE_NAMES)


def test_label_column_of_any_axis():
    assert label_column("optim.lr") == "lr_label"
    assert label_column("rollout.temperature") == "temperature_label"
    assert is_label_column("lr_label") and not is_label_column("_label")
    assert not is_label_column("optim.lr")


def test_labelled_axes_pairs_each_label_column_with_its_axis():
    cols = ["run_id", "optim.lr", "lr_label", "rollout.lam", "lam_label", "eval/accuracy"]
    assert labelled_axes(cols) == {"optim.lr": "lr_label", "rollout.lam": "lam_label"}


def test_a_label_column_without_one_unambiguous_axis_labels_nothing():
    assert labelled_axes(["lr_label"]) == {}
    both = ["rollout.temperature", "eval.temperature", "temperature_label"]
    assert labelled_axes(both) == {}
    assert labelled_axes(["eval/lr", "lr_label"]) == {}  # metrics are not axes
