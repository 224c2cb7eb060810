"""What a run needs before its first step: models, task, training problems, rollout policy."""

from __future__ import annotations

from pathlib import Path

from distillscope.config import RolloutConfig, RunConfig
from distillscope.models import ModelPair, load_pair
from distillscope.rollout import (
    InterleavePolicy,
    MixturePolicy,
    RolloutPolicy,
    SpectrumPolicy,
    StudentPolicy,
    TeacherPolicy,
)
from distillscope.tasks import Problem, Task, get_task, load_file_task, make_split
from distillscope.testbed import resolve_model_path

#: Size of the seeded training split ([P]: 5,000 Countdown-3 candidates, seed 42).
TRAIN_SPLIT_SIZE = 5_000
TRAIN_SPLIT_SEED = 42


def load_models(cfg: RunConfig) -> ModelPair:
    """Teacher and student of the run (tokenizers checked to match, teacher frozen)."""
    m = cfg.model
    return load_pair(
        resolve_model_path(m.teacher),
        resolve_model_path(m.student),
        dtype=m.dtype,
        teacher_dtype=m.teacher_dtype,
        device=m.device,
        allow_pickle=m.allow_pickle,
        trust_remote_code=m.trust_remote_code,
    )


def resolve_task(name: str, path: Path | None = None) -> Task:
    """A registered task by name, or a file-backed task (``mcq``/``math``) read from ``path``."""
    if name in ("mcq", "math"):
        if path is None:
            raise ValueError(f"task.name={name} needs task.file (a JSONL or Parquet file)")
        return load_file_task(name, path)
    return get_task(name)


def problem_pool(task: Task, seed: int, size: int) -> list[Problem]:
    """All problems of a file-backed task, else a seeded split of a generated one."""
    problems = getattr(task, "problems", None)
    return list(problems()) if problems is not None else make_split(task, seed, size)


def training_problems(task: Task) -> list[Problem]:
    """The training split: every row of a file task, or the seeded generated split."""
    return problem_pool(task, TRAIN_SPLIT_SEED, TRAIN_SPLIT_SIZE)


def make_policy(cfg: RolloutConfig) -> RolloutPolicy:
    """The rollout policy a config names, with its temperatures (METHOD §3)."""
    student = StudentPolicy(temperature=cfg.student_temperature, top_p=cfg.top_p)
    teacher = TeacherPolicy(temperature=cfg.teacher_temperature, top_p=cfg.top_p)
    if cfg.policy == "student":
        return student
    if cfg.policy == "teacher":
        return teacher
    if cfg.policy == "spectrum":
        # [P] samples the spectrum with both models at temperature 1.0 (METHOD §10).
        return SpectrumPolicy(
            lam=cfg.lam,
            student_temperature=cfg.student_temperature,
            teacher_temperature=cfg.student_temperature,
            top_p=cfg.top_p,
        )
    if cfg.policy == "mix":
        return MixturePolicy(p_student=cfg.p_student, student=student, teacher=teacher)
    return InterleavePolicy(top_k=cfg.top_k, student=student, teacher=teacher)
