"""End to end on dataset tasks: two training steps of a tiny random-weight chat Llama pair on a
local Countdown dataset in its hub schema and on a multiple-choice dataset with a field mapping,
then the evaluation of the held-out rows."""

from __future__ import annotations

import json
import math

import pytest

from distillscope.config import load_run_config
from distillscope.store import read_metrics, read_status
from distillscope.study.run_one import run_one
from distillscope.tasks import resolve_task
from distillscope.tasks.pools import file_split
from distillscope.train.loop import distill

datasets = pytest.importorskip("datasets")
pytestmark = pytest.mark.slow  # two tiny runs and an evaluation: ~1 min on 2 shared cores


@pytest.fixture(autouse=True)
def hf_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


def chat_cfg(pair, *extra: str):
    teacher, student = pair
    return load_run_config(
        None,
        [
            f"model.teacher={teacher}",
            f"model.student={student}",
            "optim.steps=2",
            "optim.warmup_steps=1",
            "optim.lr=1e-3",
            "rollout.prompts_per_step=2",
            "task.max_new_tokens=6",
            "task.prompt_format=chat",
            "checkpoint_every=0",
            "eval.items=3",
            "eval.coverage_items=2",
            "eval.coverage_samples=2",
            "eval.skill_items=0",
            "eval.harder_task=null",
            "eval.samples_per_block=0",
            *extra,
        ],
    )


def mcq_dataset(root):
    """A saved DatasetDict with its own train and test splits and columns to map."""

    def rows(prefix, n):
        return [
            {
                "Question": f"{prefix} item {i}: is {i} even?",
                "Choices": ["yes", "no"],
                "Correct": i % 2,
            }
            for i in range(n)
        ]

    parts = {s: datasets.Dataset.from_list(rows(s, n)) for s, n in (("train", 24), ("test", 6))}
    datasets.DatasetDict(parts).save_to_disk(str(root))
    return root


MCQ_FIELDS = [
    "task.fields.question=Question",
    "task.fields.options=Choices",
    "task.fields.answer=Correct",
]


def test_countdown_hub_file_trains_and_evaluates(chat_llama_pair, tmp_path):
    rows = [{"nums": [1 + i % 9, 2 + i % 5, 4], "target": 7 + i} for i in range(40)]
    data = tmp_path / "countdown.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = chat_cfg(chat_llama_pair, "task.name=countdown-hub", f"task.file={data}")
    metrics = run_one(cfg, tmp_path / "run")
    assert read_status(tmp_path / "run")["status"] == "done"
    assert [r["step"] for r in read_metrics(tmp_path / "run")] == [0, 1]
    assert metrics["split/eval_items"] == 3 and metrics["split/overlap"] == 0
    assert 0.0 <= metrics["eval/accuracy"] <= 1.0


def test_mcq_dataset_with_a_field_mapping_trains_on_its_train_split(chat_llama_pair, tmp_path):
    data = mcq_dataset(tmp_path / "saved")
    cfg = chat_cfg(chat_llama_pair, "task.name=mcq", f"task.dataset.path={data}", *MCQ_FIELDS)
    train, held_out = file_split(resolve_task(cfg.task), cfg.task.eval_fraction)
    assert {p.prompt.split()[0] for p in train} == {"train"} and len(held_out) == 6
    distill(cfg, tmp_path / "run")
    rows = read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == [0, 1]
    assert all(math.isfinite(r["train/loss"]) for r in rows)


def test_mcq_dataset_run_evaluates_its_test_split(chat_llama_pair, tmp_path):
    data = mcq_dataset(tmp_path / "saved")
    cfg = chat_cfg(chat_llama_pair, "task.name=mcq", f"task.dataset.path={data}", *MCQ_FIELDS)
    metrics = run_one(cfg, tmp_path / "run")
    assert metrics["split/eval_items"] == 3 and metrics["split/overlap"] == 0
