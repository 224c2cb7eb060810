"""Guards of the pools: task lookup, the fraction and seed passed through, the split labels."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from distillscope.tasks import evaluation_problems, file_split, load_file_task, training_problems
from distillscope.tasks.base import Problem
from distillscope.tasks.catalogue import TASKS, get_task
from distillscope.tasks.pools import resolve_task
from distillscope.tasks.split import held_out_problems, problem_identity


def _mcq(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return load_file_task("mcq", path)


def _row(i, **extra):
    return {"question": f"Question number {i}?", "options": ["yes", "no"], "answer": "A", **extra}


@pytest.mark.parametrize("name", ["mcq", "math"])
def test_file_task_names_need_a_file(name):
    with pytest.raises(ValueError, match=rf"task.name={name} needs task.file"):
        resolve_task(name)


def test_resolve_task_reads_files_and_the_registry(tmp_path):
    path = tmp_path / "t.jsonl"
    _mcq(path, [_row(i) for i in range(3)])
    task = resolve_task("mcq", path)
    assert len(task.problems()) == 3
    assert resolve_task("tb-countdown3") is get_task("tb-countdown3")
    assert resolve_task("tb-countdown3", path) is get_task("tb-countdown3")  # path ignored


def test_file_task_fraction_reaches_both_sides(tmp_path):
    task = _mcq(tmp_path / "t.jsonl", [_row(i) for i in range(200)])
    train_half, eval_half = file_split(task, 0.5)
    assert training_problems(task, 0.5) == train_half
    assert evaluation_problems(task, 0, len(eval_half), 0.5) == eval_half
    assert len(eval_half) > len(file_split(task, 0.2)[1])  # 0.5 is not the default 0.2


def test_evaluation_may_take_every_held_out_row(tmp_path):
    task = _mcq(
        tmp_path / "t.jsonl", [_row(i, split="train" if i % 2 else "eval") for i in range(8)]
    )
    assert len(evaluation_problems(task, 0, 4)) == 4
    with pytest.raises(ValueError, match="only 4 held-out rows, evaluation needs 5"):
        evaluation_problems(task, 0, 5)


def test_generated_task_evaluation_is_the_seeded_held_out_draw():
    task = TASKS["tb-countdown3"]
    assert evaluation_problems(task, 7, 20) == held_out_problems(task, 7, 20)
    assert evaluation_problems(task, 7, 20) != evaluation_problems(task, 8, 20)


@pytest.mark.parametrize("label", ["TEST", " eval ", "Validation"])
def test_split_labels_are_read_case_and_space_insensitively(tmp_path, label):
    rows = [_row(0, split=label), _row(1, split=" TraIN ")]
    train, evals = file_split(_mcq(tmp_path / "t.jsonl", rows), 0.2)
    assert [p.meta["index"] for p in evals] == [0] and [p.meta["index"] for p in train] == [1]


@pytest.mark.parametrize("label", [1, True, ["test"]])
def test_a_non_string_split_label_is_refused_with_its_value(tmp_path, label):
    task = _mcq(tmp_path / "t.jsonl", [_row(0, split="train"), _row(1, split=label)])
    with pytest.raises(ValueError, match=r"line 2: field 'split' must be one of") as err:
        file_split(task, 0.2)
    assert str(err.value).endswith(f"got {label!r}")
    assert "train, eval, test, validation" in str(err.value)


def test_held_out_side_keeps_the_first_row_of_each_identity(tmp_path):
    rows = [
        _row(0, id="a", split="train"),
        _row(1, id="a", split="test"),
        _row(2, id="b", split="train"),
    ]
    rows += [_row(3, id="a", split="eval"), _row(4, id="c", split="test")]
    train, evals = file_split(_mcq(tmp_path / "t.jsonl", rows), 0.2)
    assert [p.meta["index"] for p in evals] == [0, 4]  # identity "a" held out, its first row
    assert [p.meta["index"] for p in train] == [2]


def test_hashed_split_message_names_the_fraction(tmp_path):
    task = _mcq(tmp_path / "t.jsonl", [_row(0)])  # one identity: one side is always empty
    pattern = r"t.jsonl: task.eval_fraction=0.3 leaves no (training|held-out) rows of 1$"
    with pytest.raises(ValueError, match=pattern):
        file_split(task, 0.3)


@dataclass
class _Rows:
    """A task of in-memory rows (no file): errors name the task instead."""

    name: str
    rows: list[Problem] = field(default_factory=list)

    def problems(self) -> list[Problem]:
        return self.rows


def test_rows_without_a_source_are_named_by_the_task():
    rows = [Problem(f"p{i}", "A", {"extra": {"split": "train"}}) for i in range(3)]
    with pytest.raises(
        ValueError, match=r"^memory-task: its split column leaves no held-out rows of 3$"
    ):
        file_split(_Rows("memory-task", rows), 0.2)
    rows = [Problem("p", "A", {"extra": {"split": "test"}, "source": "/data/x.jsonl line 1"})]
    with pytest.raises(ValueError, match=r"^/data/x.jsonl: its split column leaves no training"):
        file_split(_Rows("memory-task", rows), 0.2)
    assert problem_identity(rows[0])  # identity of a row without id: its text


def test_in_memory_rows_without_extra_or_source():
    rows = [Problem(f"question {i}", "A") for i in range(60)]  # no meta at all: hashed split
    train, evals = file_split(_Rows("mem", rows), 0.5)
    assert train and evals and len(train) + len(evals) == 60
    labelled = [Problem("q0", "A", {"extra": {"split": "train"}})]
    labelled.append(Problem("q1", "A", {"extra": {"split": "dev"}}))
    with pytest.raises(ValueError, match=r"^\?: field 'split' must be one of"):
        file_split(_Rows("mem", labelled), 0.2)


def test_an_empty_task_is_named_by_the_task():
    with pytest.raises(
        ValueError, match=r"^empty: task.eval_fraction=0.2 leaves no training rows of 0$"
    ):
        file_split(_Rows("empty", []), 0.2)


def test_a_task_name_with_spaces_is_not_cut():
    rows = [Problem("p", "A", {"extra": {"split": "train"}})]
    with pytest.raises(ValueError, match=r"^my task v2: its split column leaves no held-out"):
        file_split(_Rows("my task v2", rows), 0.2)


def test_a_file_path_with_spaces_is_named_whole(tmp_path):
    path = tmp_path / "my data" / "t.jsonl"
    path.parent.mkdir()
    task = _mcq(path, [_row(0, split="train"), _row(1, split="test")])
    with pytest.raises(ValueError, match="only 1 held-out rows") as err:
        evaluation_problems(task, 0, 2)
    assert str(err.value).startswith(f"{path}: only 1 held-out rows, evaluation needs 2; ")
    hint = "lower eval.items / eval.coverage_items, raise task.eval_fraction or add eval rows"
    assert str(err.value).endswith(hint)
