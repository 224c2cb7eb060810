"""Dataset tasks from hub schemas, read from local datasets the tests write: each hub task's
schema and adapter, the field mapping, the split, scoring, and the one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distillscope.config import ConfigError, evaluation_key, load_run_config
from distillscope.tasks import file_split, resolve_task
from distillscope.tasks.countdown import CountdownTask
from distillscope.tasks.files import MCQ_INSTRUCTION, MultipleChoiceTask
from distillscope.tasks.hub import DatasetSpec
from distillscope.tasks.hub_tasks import DATASET_TASKS, HUB_TASKS, load_dataset_task
from distillscope.tasks.split import overlap, problem_identity

datasets = pytest.importorskip("datasets")


@pytest.fixture(autouse=True)
def hf_cache(tmp_path, monkeypatch):
    """``datasets`` caches what it reads under the test's directory, not the user's cache."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def medreason_rows(n: int) -> list[dict]:
    """Rows in MedReason's published schema: options as one text, the answer as option text."""
    rows = []
    for i in range(n):
        options = [f"drug {i}", f"dose {i}", f"organ {i}", f"nerve {i}"]
        rows.append(
            {
                "dataset_name": "medmcqa",
                "id_in_dataset": i,
                "question": f"Which one is the answer to case {i}?",
                "options": "Answer Choices:\n"
                + "\n".join(f"{L}. {o}" for L, o in zip("ABCD", options, strict=True)),
                "answer": f"{options[i % 4]}. Explanation: it fits case {i}.",
                "reasoning": "Finding reasoning paths: " + "x" * 200,
            }
        )
    return rows


def sciknoweval_rows(n: int) -> list[dict]:
    """Rows in SciKnowEval's schema: choices {text, label}, answerKey, open-ended rows mixed in."""
    rows = []
    for i in range(n):
        rows.append(
            {
                "question": f"Which element has property {i}?",
                "choices": {"text": ["H", "He", "Li", "Be"], "label": ["A", "B", "C", "D"]},
                "answerKey": "ABCD"[i % 4],
                "answer": "",
                "type": "mcq-4-choices",
                "domain": "Chemistry",
                "details": {"level": "L1", "task": "t", "subtask": "s"},
            }
        )
    rows.append(  # an open-ended task: not multiple choice, skipped
        {
            "question": "Describe the reaction.",
            "choices": {"text": [], "label": []},
            "answerKey": "",
            "answer": "It releases heat.",
            "type": "open-ended-qa",
            "domain": "Chemistry",
            "details": {"level": "L3", "task": "t", "subtask": "s"},
        }
    )
    return rows


def numina_rows(n: int) -> list[dict]:
    rows = [
        {
            "problem": f"Compute {i} + 1/2.",
            "solution": f"Adding gives \\boxed{{{i}.5}}.",
            "answer": f"{i} + \\frac{{1}}{{2}}",
            "problem_type": "Algebra",
            "question_type": "math-word-problem",
            "source": "olympiads",
            "synthetic": False,
        }
        for i in range(n)
    ]
    rows[0] = {**rows[0], "answer": "proof", "question_type": "proof"}
    rows[1] = {**rows[1], "answer": "notfound"}
    return rows


def countdown_rows(n: int) -> list[dict]:
    return [{"nums": [1 + i % 9, 2 + i % 7, 3], "target": 10 + i} for i in range(n)]


# ---------------------------------------------------------------------------------------------
# Each hub schema, from each kind of local dataset


def test_medreason_letters_the_options_and_finds_the_answer(tmp_path):
    rows = medreason_rows(12)
    rows.append({**rows[0], "question": "Free text?", "options": "", "answer": "Rest."})
    rows.append({**rows[1], "question": "Unmatched?", "answer": "None of these."})
    path = write_jsonl(tmp_path / "medreason.jsonl", rows)
    task = load_dataset_task("medreason", dataset=DatasetSpec(str(path)))
    problems = task.problems()
    assert isinstance(task, MultipleChoiceTask) and task.name == "medreason"
    assert len(problems) == 12  # the free-text and the unmatched rows are skipped
    assert [p.answer for p in problems[:4]] == ["A", "B", "C", "D"]
    assert problems[2].prompt == (
        "Which one is the answer to case 2?\nA. drug 2\nB. dose 2\nC. organ 2\nD. nerve 2"
    )
    assert problems[0].meta["extra"] == {"dataset_name": "medmcqa", "id_in_dataset": 0}
    assert "reasoning" not in problems[0].meta["extra"]  # long columns are not held
    assert task.chat_messages(problems[2])[0]["content"].startswith(MCQ_INSTRUCTION)


def test_sciknoweval_reads_labelled_choices_from_parquet(tmp_path):
    path = tmp_path / "ske.parquet"
    datasets.Dataset.from_list(sciknoweval_rows(8)).to_parquet(str(path))
    task = load_dataset_task("sciknoweval", dataset=DatasetSpec(str(path)))
    problems = task.problems()
    assert len(problems) == 8  # the open-ended row is skipped
    assert [p.answer for p in problems[:4]] == ["A", "B", "C", "D"]
    assert problems[0].prompt.endswith("A. H\nB. He\nC. Li\nD. Be")
    assert problems[0].meta["extra"]["domain"] == "Chemistry"


def test_numina_math_skips_rows_without_a_final_answer(tmp_path):
    datasets.Dataset.from_list(numina_rows(6)).save_to_disk(str(tmp_path / "numina"))
    task = load_dataset_task("numina-math", dataset=DatasetSpec(str(tmp_path / "numina")))
    problems = task.problems()
    assert [p.prompt for p in problems] == [f"Compute {i} + 1/2." for i in range(2, 6)]
    assert problems[0].answer == "2 + \\frac{1}{2}"
    assert "solution" not in problems[0].meta["extra"]
    assert task.score(problems[0], "so \\boxed{2.5}") == 1.0


def test_countdown_hub_rows_have_the_countdown_identity_and_prompt(tmp_path):
    path = write_jsonl(tmp_path / "cd.jsonl", [{"nums": [7, 3, 5], "target": 56}])
    task = load_dataset_task("countdown-hub", file=path)
    (problem,) = task.problems()
    assert problem.answer == {"numbers": [7, 3, 5], "target": 56}
    assert problem_identity(problem) == "countdown:3,5,7>56"  # as the generated task's
    generated = CountdownTask("g", 3, (3, 5, 7)).chat_messages(problem)
    assert task.chat_messages(problem) == generated
    assert generated[0] == {"role": "system", "content": "You are a careful arithmetic solver."}
    assert generated[1]["content"].endswith("Numbers: [7, 3, 5]\nTarget: 56")


def test_field_mapping_reads_a_data_directory_with_train_and_test_files(tmp_path):
    """``task.fields`` renames columns; a dataset's own train/test splits become the split."""

    def rows(prefix, n):
        return [
            {"Question": f"{prefix} question {i}?", "Choices": ["yes", "no"], "Correct": i % 2}
            for i in range(n)
        ]

    write_jsonl(tmp_path / "data" / "train.jsonl", rows("train", 30))
    write_jsonl(tmp_path / "data" / "test.jsonl", rows("test", 10))
    fields = {"question": "Question", "options": "Choices", "answer": "Correct"}
    task = load_dataset_task("mcq", dataset=DatasetSpec(str(tmp_path / "data")), fields=fields)
    train, held_out = file_split(task, 0.2)
    assert {p.prompt.split()[0] for p in train} == {"train"}
    assert {p.prompt.split()[0] for p in held_out} == {"test"} and len(held_out) == 10
    assert held_out[1].answer == "B"


def test_a_saved_dataset_dict_keeps_its_splits_and_a_split_expression_pools_them(tmp_path):
    def part(prefix, n):
        return datasets.Dataset.from_list(countdown_rows(n)).map(
            lambda r, i: {"target": r["target"] + (0 if prefix == "train" else 1000)},
            with_indices=True,
        )

    datasets.DatasetDict({"train": part("train", 40), "test": part("test", 12)}).save_to_disk(
        str(tmp_path / "saved")
    )
    task = load_dataset_task("countdown-hub", dataset=DatasetSpec(str(tmp_path / "saved")))
    train, held_out = file_split(task, 0.2)
    assert all(p.answer["target"] < 1000 for p in train) and len(held_out) == 12
    pooled = load_dataset_task(
        "countdown-hub", dataset=DatasetSpec(str(tmp_path / "saved"), split="train+test")
    )
    assert len(pooled.problems()) == 52
    assert "split" not in pooled.problems()[0].meta["extra"]  # one set: the hash split


# ---------------------------------------------------------------------------------------------
# The split: held-out rows never train


@pytest.mark.parametrize("name", HUB_TASKS)
def test_held_out_rows_are_disjoint_from_training(tmp_path, name):
    rows = {
        "medreason": medreason_rows(60),
        "sciknoweval": sciknoweval_rows(60),
        "numina-math": numina_rows(60),
        "countdown-hub": countdown_rows(60),
    }[name]
    rows = rows + rows[:10]  # duplicates of the first rows
    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    task = load_dataset_task(name, file=path)
    train, held_out = file_split(task, 0.3)
    assert train and held_out and overlap(held_out, train) == 0
    assert len({problem_identity(p) for p in held_out}) == len(held_out)


def test_an_identity_in_both_splits_is_held_out_everywhere(tmp_path):
    shared = {"nums": [2, 3, 4], "target": 24}
    write_jsonl(
        tmp_path / "d" / "train.jsonl", [*countdown_rows(20), {**shared, "nums": [4, 3, 2]}]
    )
    write_jsonl(tmp_path / "d" / "test.jsonl", [shared])
    task = load_dataset_task("countdown-hub", dataset=DatasetSpec(str(tmp_path / "d")))
    train, held_out = file_split(task, 0.2)
    assert "countdown:2,3,4>24" not in {problem_identity(p) for p in train}
    assert [problem_identity(p) for p in held_out] == ["countdown:2,3,4>24"]


# ---------------------------------------------------------------------------------------------
# Scoring: right, wrong, malformed


def _first(name, rows, tmp_path):
    task = load_dataset_task(name, file=write_jsonl(tmp_path / f"{name}.jsonl", rows))
    return task, task.problems()[0]


@pytest.mark.parametrize("name", ["medreason", "sciknoweval"])
def test_multiple_choice_scoring(tmp_path, name):
    rows = medreason_rows(3) if name == "medreason" else sciknoweval_rows(3)
    task, problem = _first(name, rows, tmp_path)
    assert problem.answer == "A"
    assert task.score(problem, "<think>it is the first</think><answer>A</answer>") == 1.0
    assert task.score(problem, "<answer> (a) </answer>") == 1.0
    assert task.score(problem, "<answer>B</answer>") == 0.0
    for malformed in ["A", "<answer>A, B</answer>", "<answer>A.</answer>", "<answer>", ""]:
        assert task.score(problem, malformed) == 0.0


def test_math_scoring(tmp_path):
    task, problem = _first("numina-math", numina_rows(3)[2:], tmp_path)
    assert task.score(problem, "\\boxed{\\frac{5}{2}}") == 1.0  # 2 + 1/2
    assert task.score(problem, "\\boxed{3}") == 0.0
    for malformed in ["2.5", "\\boxed{2.5", "\\boxed{}", ""]:
        assert task.score(problem, malformed) == 0.0


def test_countdown_hub_scoring(tmp_path):
    task, problem = _first("countdown-hub", [{"nums": [7, 3, 5], "target": 56}], tmp_path)
    assert task.score(problem, "<think>3+5</think><answer>3+5=8,8*7=56</answer>") == 1.0
    assert task.score(problem, "<answer>3+5=8,8*7=57</answer>") == 0.0
    assert task.score(problem, "<answer>7*8=56</answer>") == 0.0  # 8 was never available
    for malformed in ["", "<answer>3+5=</answer>", "<answer>" + "1+" * 5000 + "</answer>"]:
        assert task.score(problem, malformed) == 0.0


# ---------------------------------------------------------------------------------------------
# One-line errors


def test_schema_mismatch_names_the_dataset_the_field_and_the_columns(tmp_path):
    rows = [{"prompt": "Q?", "choices": ["a", "b"], "answerKey": "A"}]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "ske"))
    spec = DatasetSpec(str(tmp_path / "ske"))
    with pytest.raises(ValueError) as err:
        load_dataset_task("sciknoweval", dataset=spec)
    assert str(err.value) == (
        f"dataset {tmp_path / 'ske'}: no field 'question' (fields: prompt, choices, answerKey); "
        "map it with task.fields.question"
    )
    with pytest.raises(ValueError, match=r"task.fields.question='Q' is not a field \(fields: "):
        load_dataset_task("sciknoweval", dataset=spec, fields={"question": "Q"})
    task = load_dataset_task("sciknoweval", dataset=spec, fields={"question": "prompt"})
    assert task.problems()[0].prompt == "Q?\nA. a\nB. b"


def test_a_file_in_the_hub_schema_is_checked_by_its_first_row(tmp_path):
    path = write_jsonl(tmp_path / "cd.jsonl", [{"numbers": [1, 2], "target": 3}])
    with pytest.raises(ValueError, match=r"cd.jsonl: no field 'nums' \(fields: numbers, target\)"):
        load_dataset_task("countdown-hub", file=path)
    assert len(load_dataset_task("countdown-hub", file=path, fields={"numbers": "numbers"}).items)


def test_bad_rows_and_bad_mappings_are_one_line(tmp_path):
    path = write_jsonl(tmp_path / "cd.jsonl", [{"nums": [1, "2"], "target": 3}])
    with pytest.raises(ValueError, match=r"cd.jsonl line 1: field 'numbers' must be a list of"):
        load_dataset_task("countdown-hub", file=path)
    with pytest.raises(ValueError, match=r"task.fields: 'solution' is not a field of task.name="):
        load_dataset_task("numina-math", file=path, fields={"solution": "s"})
    only_proofs = write_jsonl(tmp_path / "p.jsonl", numina_rows(2))
    with pytest.raises(ValueError, match=r"no usable rows \(all 2 skipped: rows whose answer"):
        load_dataset_task("numina-math", file=only_proofs)
    with pytest.raises(ValueError, match="no such file or directory, and not a hub id"):
        load_dataset_task("mcq", dataset=DatasetSpec(str(tmp_path / "gone")))
    with pytest.raises(ValueError, match="no split 'dev' \\(splits: train\\)"):
        datasets.DatasetDict({"train": datasets.Dataset.from_list(countdown_rows(3))}).save_to_disk(
            str(tmp_path / "dd")
        )
        load_dataset_task("countdown-hub", dataset=DatasetSpec(str(tmp_path / "dd"), split="dev"))


def test_offline_miss_is_one_line_and_writes_nothing(tmp_path):
    """HF_DATASETS_OFFLINE=1 and a hub id not cached: `train` stops before anything is written."""
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    env.pop("HF_DATASETS_CACHE", None)
    out = tmp_path / "run"
    args = ["task.name=countdown-hub", "task.prompt_format=chat", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "distillscope.cli", "train", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    message = (done.stdout + done.stderr).strip()
    assert done.returncode == 2, message
    assert len(message.splitlines()) == 1, message
    assert "dataset Jiayi-Pan/Countdown-Tasks-3to4: not in the Hugging Face cache" in message
    assert "HF_DATASETS_OFFLINE=1" in message
    assert not out.exists()
    hf = tmp_path / "hf"
    assert not hf.exists() or not any(p.is_file() for p in hf.rglob("*"))


# ---------------------------------------------------------------------------------------------
# The config: task.dataset, task.fields and their guards


def test_config_reads_the_dataset_section_and_resolve_task_uses_it(tmp_path):
    write_jsonl(tmp_path / "data" / "train.jsonl", countdown_rows(30))
    cfg = load_run_config(
        None,
        [
            "task.name=countdown-hub",
            "task.prompt_format=chat",
            f"task.dataset.path={tmp_path / 'data'}",
            "task.dataset.split=train",
            "task.eval_fraction=0.3",
        ],
    )
    assert cfg.task.dataset.split == "train" and cfg.task.fields is None
    task = resolve_task(cfg.task)
    assert len(task.problems()) == 30
    short = load_run_config(
        None, ["task.name=medreason", "task.prompt_format=chat", "task.dataset=o/n"]
    )
    assert short.task.dataset.path == "o/n" and short.task.dataset.split is None


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["task.name=medreason"], "task.name=medreason needs task.prompt_format=chat"),
        (["task.name=tb-countdown3", "task.dataset=o/n"], "task.dataset is read only by dataset"),
        (["task.fields.question=Q"], "task.fields is read only by dataset tasks"),
        (["task.name=mcq", "task.file=a.jsonl", "task.dataset=o/n"], "task.file or task.dataset"),
        (
            ["task.name=sciknoweval", "task.prompt_format=chat", "task.fields.prompt=Q"],
            "task.fields: 'prompt' is not a field of task.name=sciknoweval (fields: question, "
            "options, answer, id, split)",
        ),
    ],
)
def test_config_guards_are_one_line(overrides, message):
    with pytest.raises(ConfigError) as err:
        load_run_config(None, overrides)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_every_dataset_task_is_a_task_name_the_config_accepts():
    assert set(HUB_TASKS) == {"medreason", "sciknoweval", "numina-math", "countdown-hub"}
    assert {"mcq", "math"} <= set(DATASET_TASKS)
    for name in HUB_TASKS:
        cfg = load_run_config(None, [f"task.name={name}", "task.prompt_format=chat"])
        assert cfg.task.eval_fraction == 0.2


def test_evaluation_keys_of_earlier_runs_stay_valid():
    """Null task.dataset / task.fields leave a run's evaluation key (the study's cache of the
    untrained student's scores) as it was before the fields existed."""
    key = json.loads(evaluation_key(load_run_config(None, [])))
    assert "dataset" not in key["task"] and "fields" not in key["task"]
    chat = ["task.name=countdown-hub", "task.prompt_format=chat"]
    set_ = json.loads(evaluation_key(load_run_config(None, [*chat, "task.dataset=a/b"])))
    assert set_["task"]["dataset"]["path"] == "a/b"


def test_datasets_is_imported_only_when_a_dataset_is_opened():
    code = (
        "import sys\n"
        "from distillscope.config import load_run_config\n"
        "from distillscope.tasks import resolve_task\n"
        "load_run_config(None, ['task.name=medreason', 'task.prompt_format=chat'])\n"
        "resolve_task('tb-countdown3')\n"
        "assert 'datasets' not in sys.modules, 'datasets was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
