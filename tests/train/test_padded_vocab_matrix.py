"""Every rollout policy × every objective kind trains on a padded Qwen2-like pair and an
unpadded Llama pair with chat prompts (docs/method.md §1: one vocabulary V = len(tokenizer)).

The Qwen2 pair pads its logits past the tokenizer (teacher 3,072, tied student 3,008, for
3,000 tokens), so any policy that draws, scores or mixes unsliced logits either crashes or
samples an id ≥ V; the Llama pair's teacher renders a chat template of its own.
"""

from __future__ import annotations

import importlib
import math

import pytest

from distillscope.config import load_run_config
from distillscope.objectives import OBJECTIVES
from distillscope.objectives.registry import CROSS_TOKENIZER_KINDS
from distillscope.store import read_metrics
from distillscope.train.loop import distill

pytestmark = pytest.mark.slow  # 74 two-step runs: ~25 s of CPU on one thread

# the training loop's module (``distill`` is its function)
distill_module = importlib.import_module("distillscope.train.loop")
V = 3000  # len(tokenizer) of both pairs (tests/conftest.py)
POLICIES = {
    "student": {"rollout.policy": "student"},
    "teacher": {"rollout.policy": "teacher"},
    "spectrum0.5": {"rollout.policy": "spectrum", "rollout.lam": 0.5},
    "spectrum1.5": {"rollout.policy": "spectrum", "rollout.lam": 1.5},
    "mix": {"rollout.policy": "mix", "rollout.p_student": 0.5},
    "interleave": {"rollout.policy": "interleave", "rollout.top_k": 3},
}
# Sample-based KL estimators by who wrote the rows: KL(S‖T) estimators on student-written rows,
# forward-KL estimators on teacher-written rows, none on rows both models wrote.
KL_KEYS = {
    "student": {"kl/k1", "kl/k2", "kl/k3"},
    "teacher": {"kl/forward_k1", "kl/forward_k2", "kl/forward_k3"},
    "spectrum0.5": set(),
    "spectrum1.5": set(),
    "interleave": set(),
}
# A cross-tokenizer kind trains on the student's rollouts here: it refuses mixed writers, and
# the teacher's re-tokenised rollouts are tests/teacher/test_cross_tokenizer_run.py's.
CASES = [
    (policy, kind)
    for policy in POLICIES
    for kind, entry in OBJECTIVES.items()
    if policy == "student" or not (entry.needs_student_rollouts or kind in CROSS_TOKENIZER_KINDS)
]


def matrix_cfg(pair, policy: str, kind: str, *extra: str):
    teacher, student = pair
    items = [
        f"model.teacher={teacher}",
        f"model.student={student}",
        "optim.steps=2",
        "optim.lr=1e-3",
        "rollout.prompts_per_step=2",
        "task.max_new_tokens=6",
        "task.prompt_format=chat",
        f"objective.kind={kind}",
    ] + [f"{k}={v}" for k, v in POLICIES[policy].items()]
    return load_run_config(None, [*items, *extra])


@pytest.fixture
def sampled_ids(monkeypatch) -> list:
    """Every completion the training loop samples, recorded as it happens."""
    seen = []
    original = distill_module.sample_rollouts

    def recording(*args, **kwargs):
        rollouts = original(*args, **kwargs)
        seen.append(rollouts)
        return rollouts

    monkeypatch.setattr(distill_module, "sample_rollouts", recording)
    return seen


@pytest.mark.parametrize("pair_name", ["padded_qwen_pair", "chat_llama_pair"])
@pytest.mark.parametrize("policy,kind", CASES)
def test_policy_objective_trains_on_one_vocabulary(
    request, tmp_path, sampled_ids, pair_name, policy, kind
):
    pair = request.getfixturevalue(pair_name)
    distill(matrix_cfg(pair, policy, kind), tmp_path)
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [0, 1]
    for row in rows:
        assert math.isfinite(row["train/loss"])
        if policy in KL_KEYS:
            assert KL_KEYS[policy] <= row.keys()
        else:  # mix: each row is one model's, so the step has one family or both
            assert {"kl/k1", "kl/forward_k1"} & row.keys()
        assert {"rollout/student_token_prob", "rollout/teacher_token_prob"} <= row.keys()
    assert len(sampled_ids) == 2
    for r in sampled_ids:
        assert int(r.completion_B_T.max()) < V


@pytest.mark.parametrize("pair_name", ["padded_qwen_pair", "chat_llama_pair"])
@pytest.mark.parametrize("path", ["plain", "fused"])
@pytest.mark.parametrize("policy", ["student", "teacher"])
def test_a_top_k_teacher_trains_on_one_vocabulary(request, tmp_path, pair_name, path, policy):
    """The top-k teacher folds over the tokenizer's V only (padded logit columns never chosen),
    on both paths, and an off-policy run reads back its cached fold bit for bit."""
    pair = request.getfixturevalue(pair_name)
    cfg = matrix_cfg(
        pair,
        policy,
        "forward_kl",
        "objective.teacher_topk=16",
        f"objective.path={path}",
        "rollout.cache_teacher_rollouts=true",
    )
    cache = tmp_path / "cache"
    distill(cfg, tmp_path / "a", rollout_cache=cache)
    distill(cfg, tmp_path / "b", rollout_cache=cache)
    a, b = read_metrics(tmp_path / "a"), read_metrics(tmp_path / "b")
    for row_a, row_b in zip(a, b, strict=True):
        assert math.isfinite(row_a["train/loss"]) and 0 < row_a["objective/teacher_topk_mass"] <= 1
        assert row_b["train/loss"] == row_a["train/loss"]
    if policy == "teacher":
        assert all(r["time/teacher_saved"] > 0 for r in b)
