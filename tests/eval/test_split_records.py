"""eval.json records each evaluated block's size and its overlap with the training pool (0); the
teacher-rollout cache only ever rolls out training-partition prompts."""

import json
import sys

import pytest

from distillscope.config import load_run_config
from distillscope.eval import evaluate as evaluate_mod
from distillscope.eval.evaluate import SplitOverlapError, evaluate
from distillscope.store import read_eval, read_status
from distillscope.study.run_one import run_one
from distillscope.tasks import evaluation_problems, resolve_task
from distillscope.tasks.split import is_held_out, problem_identity
from distillscope.train.loop import distill


def tiny_cfg(tiny_pair, *over):
    teacher, student = tiny_pair
    items = [
        f"model.teacher={teacher}",
        f"model.student={student}",
        "optim.steps=3",
        "optim.warmup_steps=1",
        "rollout.prompts_per_step=8",
        "task.max_new_tokens=6",
        "checkpoint_every=0",
        "eval.items=5",
        "eval.coverage_items=3",
        "eval.coverage_samples=2",
        "eval.skill_items=0",
        *over,
    ]
    return load_run_config(None, items)


def test_teacher_rollout_cache_sees_only_training_prompts(tiny_pair, tmp_path, monkeypatch):
    distill_mod = sys.modules["distillscope.train.loop"]
    seen = []
    select = distill_mod.select_problems

    def recording(pool, *args):
        chosen = select(pool, *args)
        seen.extend(chosen)
        return chosen

    monkeypatch.setattr(distill_mod, "select_problems", recording)
    cfg = tiny_cfg(tiny_pair, "rollout.policy=teacher", "rollout.cache_teacher_rollouts=true")
    distill(cfg, tmp_path / "run", rollout_cache=tmp_path / "cache")
    assert any((tmp_path / "cache").iterdir())  # the cache was written from these prompts
    assert len(seen) == 24
    assert not any(is_held_out(problem_identity(p)) for p in seen)
    evals = evaluation_problems(resolve_task("tb-countdown3"), 43, 5)
    assert not {problem_identity(p) for p in evals} & {problem_identity(p) for p in seen}


def test_file_task_run_records_its_split(tiny_pair, tmp_path):
    rows = [{"problem": f"{i}+{i}", "answer": str(2 * i), "id": i} for i in range(40)]
    rows += [{"problem": f"{i}+{i}", "answer": str(2 * i), "id": i} for i in range(10)]  # dups
    data = tmp_path / "sums.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = tiny_cfg(
        tiny_pair,
        "task.name=math",
        "task.prompt_format=testbed",  # the tiny student has no chat template
        f"task.file={data}",
        "task.eval_fraction=0.3",
        "eval.harder_task=null",
        "optim.steps=1",
    )
    metrics = run_one(cfg, tmp_path / "run")
    assert metrics["split/eval_items"] == 5 and metrics["split/overlap"] == 0
    assert "split/harder/eval_items" not in metrics


def test_nonzero_overlap_fails_the_evaluation_loudly(tiny_pair, tmp_path, monkeypatch):
    cfg = tiny_cfg(tiny_pair, "eval.harder_task=null")
    leaked = lambda task, fraction: evaluation_problems(task, 43, 2)  # noqa: E731
    monkeypatch.setattr(evaluate_mod, "training_problems", leaked)
    with pytest.raises(SplitOverlapError, match="2 of 5 evaluation items of tb-countdown3 are in"):
        evaluate(cfg, tmp_path, untrained=True)
    assert read_eval(tmp_path) == {}
    assert read_status(tmp_path)["status"] == "pending"
