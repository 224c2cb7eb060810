"""Training pools and evaluation sets are the two sides of one split, for every task preset."""

import json

import pytest

from distillscope.tasks import evaluation_problems, file_split, load_file_task, training_problems
from distillscope.tasks.catalogue import TASKS
from distillscope.tasks.split import overlap, problem_identity

COUNTDOWN = sorted(n for n in TASKS if "countdown" in n)


def test_every_countdown_preset_is_registered():
    assert COUNTDOWN == [
        "countdown3",
        "countdown4",
        "countdown4e",
        "tb-countdown3",
        "tb-countdown3-hard",
        "tb-countdown4",
        "tb-countdown4e",
    ]


@pytest.mark.parametrize("name", COUNTDOWN)
def test_evaluation_items_are_distinct_and_never_in_any_countdown_training_pool(name):
    evals = evaluation_problems(TASKS[name], 43, 200)
    assert len({problem_identity(p) for p in evals}) == 200
    # the Countdown identity is shared: no preset's training pool holds another's eval item
    for other in COUNTDOWN:
        assert overlap(evals, training_problems(TASKS[other])) == 0, other


def test_training_pool_is_the_seeded_5000_draws():
    pool = training_problems(TASKS["tb-countdown3"])
    assert len(pool) == 5000
    assert pool == training_problems(TASKS["tb-countdown3"])  # deterministic


def write_mcq(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return load_file_task("mcq", path)


def mcq_row(i, **extra):
    return {"question": f"Question number {i}?", "options": ["yes", "no"], "answer": "A", **extra}


def test_file_task_without_split_column_hashes_identities(tmp_path):
    rows = [mcq_row(i) for i in range(200)]
    rows += [mcq_row(i) for i in range(0, 200, 10)]  # 20 duplicated rows (same text)
    rows += [mcq_row(1000 + i, id=f"q{i % 30}") for i in range(60)]  # ids shared by two rows
    task = write_mcq(tmp_path / "t.jsonl", rows)
    train, evals = file_split(task, 0.2)
    assert len(train) + len(evals) < len(rows)  # eval keeps one row per identity
    assert overlap(evals, train) == 0
    assert len({problem_identity(p) for p in evals}) == len(evals)
    assert 0.1 < len(evals) / 230 < 0.3  # 200 texts + 30 ids, about a fifth held out
    assert training_problems(task) == train
    assert evaluation_problems(task, 0, 10) == evals[:10]  # file order, any seed
    bigger = file_split(task, 0.5)[1]
    assert {problem_identity(p) for p in evals} <= {problem_identity(p) for p in bigger}


def test_file_task_split_column_decides_and_duplicates_never_straddle(tmp_path):
    labels = ["train", "eval", "test", "validation", "Train"]
    rows = [mcq_row(i, split=labels[i % 5]) for i in range(50)]
    rows.append(mcq_row(0, split="test"))  # row 0 is "train" above: the identity goes to eval
    task = write_mcq(tmp_path / "t.jsonl", rows)
    train, evals = file_split(task, 0.2)
    assert len(evals) == 31 and len(train) == 19  # 30 eval labels + row 0; 20 train − row 0
    assert overlap(evals, train) == 0
    assert problem_identity(evals[0]) == problem_identity(task.problems()[0])


def test_parquet_split_column(tmp_path):
    import pandas as pd

    rows = [mcq_row(i, split="train" if i % 2 else "test") for i in range(10)]
    pd.DataFrame(rows).to_parquet(tmp_path / "t.parquet")
    train, evals = file_split(load_file_task("mcq", tmp_path / "t.parquet"), 0.2)
    assert len(train) == len(evals) == 5 and overlap(evals, train) == 0


@pytest.mark.parametrize(
    "labels,message",
    [
        (["train"] * 4, "its split column leaves no held-out rows of 4"),
        (["test"] * 4, "its split column leaves no training rows of 4"),
        (["train", "dev", "test", "train"], "line 2: field 'split' must be one of train, eval"),
        (["train", None, "test", "train"], "line 2: field 'split' must be one of"),
    ],
)
def test_bad_split_column_is_one_line_naming_the_file(tmp_path, labels, message):
    rows = [mcq_row(i, split=s) if s else mcq_row(i) for i, s in enumerate(labels)]
    task = write_mcq(tmp_path / "t.jsonl", rows)
    with pytest.raises(ValueError, match=message) as err:
        file_split(task, 0.2)
    assert str(tmp_path / "t.jsonl") in str(err.value) and "\n" not in str(err.value)


def test_too_few_held_out_rows_for_the_evaluation(tmp_path):
    rows = [mcq_row(i, split="train" if i % 4 else "eval") for i in range(12)]
    task = write_mcq(tmp_path / "t.jsonl", rows)
    assert len(evaluation_problems(task, 0, 3)) == 3
    with pytest.raises(ValueError, match=r"t.jsonl: only 3 held-out rows, evaluation needs 200"):
        evaluation_problems(task, 0, 200)


def test_one_row_file_leaves_a_side_empty(tmp_path):
    task = write_mcq(tmp_path / "t.jsonl", [mcq_row(0)])
    with pytest.raises(ValueError, match=r"t.jsonl: task.eval_fraction=0.2 leaves no"):
        training_problems(task)
