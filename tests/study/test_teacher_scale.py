"""A `teacher_scale`-like study end to end: two teachers × unregulated and hard-clip OPD with
≥ 2 rollouts per prompt. Each step logs the informativeness I, each run records I and its
teacher's size, and the scorecard judges claims 18 and 22 (not "not implemented")."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from distillscope.scorecard import score_claims
from distillscope.scorecard.runner import NOT_IMPLEMENTED
from distillscope.store import read_metrics
from distillscope.study.run_study import run_study
from distillscope.study.spec import StudySpec
from distillscope.testbed.tokenizer import build_tokenizer

VERDICTS = {"supported", "contradicted", "inconclusive"}


def _second_teacher(path):
    """A random testbed-shaped teacher of another size than the tiny pair's (hidden 24)."""
    tok = build_tokenizer()
    torch.manual_seed(3)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=24,
        intermediate_size=48,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    LlamaForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def teacher_scale_spec(teachers, student, steps, seeds, items=4, tokens=6) -> StudySpec:
    return StudySpec.model_validate(
        {
            "name": "teacher-scale-smoke",
            "base": {
                "model": {"student": str(student)},
                "task": {"max_new_tokens": tokens},
                "rollout": {"policy": "student", "prompts_per_step": 4, "rollouts_per_prompt": 2},
                "objective": {
                    "kind": "opd",
                    "student_temperature": 1.0,
                    "teacher_temperature": 1.0,
                },
                "optim": {"steps": steps, "warmup_steps": 1, "lr": 1e-3},
                "checkpoint_every": 0,
                "eval": {
                    "items": items,
                    "coverage_items": 0,
                    "skill_items": 2,
                    "harder_task": None,
                },
            },
            "experiments": [
                {
                    "name": "teacher_scale",
                    "axes": {
                        "model.teacher": [str(t) for t in teachers],
                        "objective.regulation": ["none", "hard_clip"],
                        "seed": list(seeds),
                    },
                }
            ],
        }
    )


def _check(study_dir, df: pd.DataFrame, n_runs: int) -> None:
    runs = df[df["experiment"] == "teacher_scale"]
    assert len(runs) == n_runs and set(df["status"]) == {"done"}
    for run_id in runs["run_id"]:
        rows = read_metrics(study_dir / "runs" / run_id)
        assert all("opd/informativeness_groups" in r for r in rows)  # 4 prompts × 2 rollouts
    sizes = runs.groupby("model.teacher")["model/teacher_params"].unique()
    assert all(len(v) == 1 for v in sizes) and sizes.map(lambda v: v[0]).nunique() == 2
    assert "eval/informativeness" in df.columns
    results = {r.id: r for r in score_claims(df, study_dir, strict=True, claims=[18, 22])}
    for claim in (18, 22):
        assert results[claim].verdict != NOT_IMPLEMENTED, (claim, results[claim].evidence)


def test_two_teacher_opd_study_logs_i_and_reaches_claims_18_and_22(tiny_pair, tmp_path):
    teacher, student = tiny_pair
    other = _second_teacher(tmp_path / "teacher-b")
    spec = teacher_scale_spec((teacher, other), student, steps=2, seeds=(42,))
    df = pd.read_parquet(run_study(spec, tmp_path / "study"))
    _check(tmp_path / "study", df, n_runs=4)


@pytest.mark.slow
def test_shipped_teachers_study_end_to_end(tmp_path):
    """The shipped testbed:teacher and testbed:teacher-small, 3 steps, two seeds."""
    spec = teacher_scale_spec(
        ("testbed:teacher", "testbed:teacher-small"),
        "testbed:student",
        steps=3,
        seeds=(42, 43),
        items=8,
        tokens=24,
    )
    df = pd.read_parquet(run_study(spec, tmp_path / "study"))
    _check(tmp_path / "study", df, n_runs=8)
    i = df[df["experiment"] == "teacher_scale"]["eval/informativeness"]
    assert i.dropna().between(-1.0, 1.0).all()
