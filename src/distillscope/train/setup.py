"""What a training run needs before its first step: the model pair and the policy (its inputs
are checked first by :mod:`.checks`)."""

from __future__ import annotations

from distillscope.config import RolloutConfig, RunConfig
from distillscope.models import ModelPair, load_pair, resolve_model_path
from distillscope.rollout import (
    InterleavePolicy,
    MixturePolicy,
    RolloutPolicy,
    SpectrumPolicy,
    StudentPolicy,
    TeacherPolicy,
)


def load_models(cfg: RunConfig) -> ModelPair:
    """Teacher and student of the run (tokenizers checked to match, teacher frozen)."""
    m = cfg.model
    return load_pair(
        resolve_model_path(m.teacher),
        resolve_model_path(m.student),
        dtype=m.dtype,
        teacher_dtype=m.teacher_dtype,
        device=m.device,
        teacher_device=m.teacher_device or m.device,
        allow_pickle=m.allow_pickle,
        trust_remote_code=m.trust_remote_code,
    )


def make_policy(cfg: RolloutConfig) -> RolloutPolicy:
    """The rollout policy a config names, with its temperatures (docs/method.md §3)."""
    student = StudentPolicy(temperature=cfg.student_temperature, top_p=cfg.top_p)
    teacher = TeacherPolicy(temperature=cfg.teacher_temperature, top_p=cfg.top_p)
    if cfg.policy == "student":
        return student
    if cfg.policy == "teacher":
        return teacher
    if cfg.policy == "spectrum":
        # [P] samples the spectrum with both models at temperature 1.0 (docs/method.md §10).
        return SpectrumPolicy(
            lam=cfg.lam,
            student_temperature=cfg.student_temperature,
            teacher_temperature=cfg.student_temperature,
            top_p=cfg.top_p,
        )
    if cfg.policy == "mix":
        return MixturePolicy(p_student=cfg.p_student, student=student, teacher=teacher)
    return InterleavePolicy(top_k=cfg.top_k, student=student, teacher=teacher)
