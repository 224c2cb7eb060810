"""A teacher instruction in training: the teacher scores on-policy rollouts with its own prompt,
and its shared rollouts are keyed by the instruction."""

from __future__ import annotations

from tests.train.test_distill import tiny_cfg

from distillscope.rollout.cache import key_digest
from distillscope.teacher.scorer import TeacherScorer, _rollout_key
from distillscope.train.loop import distill

SPANISH = "Reason in Spanish."
CHAT = {"task.name": "countdown3", "task.prompt_format": "chat"}
SHARED = {"rollout.policy": "teacher", "rollout.cache_teacher_rollouts": True}


def test_the_rollout_cache_key_includes_the_instruction(tiny_pair):
    base = tiny_cfg(tiny_pair, **SHARED, **CHAT)
    told = tiny_cfg(tiny_pair, **SHARED, **CHAT, **{"task.teacher_instruction": SPANISH})
    other = tiny_cfg(tiny_pair, **SHARED, **CHAT, **{"task.teacher_instruction": "Be brief."})
    keys = {key_digest(_rollout_key(cfg, 0, "prompts")) for cfg in (base, told, other)}
    assert len(keys) == 3
    assert _rollout_key(told, 0, "prompts")["instruction"] == SPANISH
    # without an instruction the key is the one written before the field existed
    assert "instruction" not in _rollout_key(base, 0, "prompts")


def test_on_policy_the_teacher_scores_with_its_instructed_prompt(
    padded_qwen_pair, tmp_path, monkeypatch
):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(padded_qwen_pair[1])
    seen = []
    score = TeacherScorer.score

    def texts(sequence):
        ids_B_S, mask_B_S, _ = sequence
        return [
            tokenizer.decode(ids[mask.bool()]) for ids, mask in zip(ids_B_S, mask_B_S, strict=True)
        ]

    def spy(self, micro):
        r = micro.rollouts
        seen.append((texts(r.sequence("teacher")), texts(r.sequence("student"))))
        return score(self, micro)

    monkeypatch.setattr(TeacherScorer, "score", spy)
    over = {
        **CHAT,
        "task.teacher_instruction": SPANISH,
        "rollout.policy": "student",
        "rollout.prompts_per_step": 2,
        "optim.steps": 1,
        "optim.warmup_steps": 0,
        "task.max_new_tokens": 4,
    }
    distill(tiny_cfg(padded_qwen_pair, **over), tmp_path)
    assert seen, "the teacher scored nothing"
    for teacher_texts, student_texts in seen:
        assert all(SPANISH in t for t in teacher_texts)
        assert not any(SPANISH in s for s in student_texts)
