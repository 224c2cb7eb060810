"""A finished run leaves ``samples.jsonl`` (what the student wrote) and a loadable ``student/``."""

import json

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from distillscope.config import load_run_config
from distillscope.study.run_one import run_one


def tiny_cfg(tiny_pair, *items: str):
    teacher, student = tiny_pair
    common = [f"model.teacher={teacher}", f"model.student={student}", "rollout.prompts_per_step=2"]
    return load_run_config(None, [*common, *items])


def test_run_writes_samples_and_a_loadable_student(tiny_pair, tmp_path):
    cfg = tiny_cfg(
        tiny_pair,
        "optim.steps=2",
        "task.max_new_tokens=6",
        "eval.items=5",
        "eval.coverage_items=3",
        "eval.coverage_samples=2",
        "eval.skill_items=3",
        "eval.samples_per_block=2",
    )
    blocks_seen = []
    trained = run_one(cfg, tmp_path, on_eval=blocks_seen.append)
    assert trained
    assert [b.split(":")[0] for b in blocks_seen] == [
        "loading the student",
        "accuracy",
        "coverage",
        "harder",
        "harder_coverage",
        "skills",
    ]

    rows = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    by_block: dict[str, list] = {}
    for r in rows:
        assert set(r) == {"block", "item", "sample", "prompt", "completion", "score"}
        by_block.setdefault(r["block"], []).append((r["item"], r["sample"]))
    assert by_block["accuracy"] == [(0, 0), (1, 0)]  # the first 2 items, 1 sample each
    assert by_block["coverage"] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert {b for b in by_block if b.startswith("skill/")}  # forgetting suite samples too
    assert all(isinstance(r["prompt"], str) and r["prompt"] for r in rows)

    # RUN/student is the trained student, loadable without distillscope
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "student")
    tok = AutoTokenizer.from_pretrained(tmp_path / "student")
    ids = tok("12+3=", return_tensors="pt").input_ids
    weights = load_file(tmp_path / "checkpoint" / "model.safetensors")
    for name, value in loaded.state_dict().items():
        if name in weights:
            torch.testing.assert_close(value, weights[name])
    assert loaded(input_ids=ids).logits.shape[-1] >= len(tok)


def test_samples_per_block_zero_writes_an_empty_file(tiny_pair, tmp_path):
    from distillscope.eval.evaluate import evaluate
    from distillscope.train.loop import distill

    cfg = tiny_cfg(
        tiny_pair,
        "optim.steps=1",
        "task.max_new_tokens=4",
        "eval.items=2",
        "eval.coverage_items=0",
        "eval.skill_items=0",
        "eval.harder_task=null",
        "eval.samples_per_block=0",
    )
    evaluate(cfg, tmp_path, distill(cfg, tmp_path))
    assert (tmp_path / "samples.jsonl").read_text() == ""
