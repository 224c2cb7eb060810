"""What a training run needs before its first step: checked inputs, the model pair, the policy."""

from __future__ import annotations

from pathlib import Path

from distillscope.config import RolloutConfig, RunConfig
from distillscope.models import ModelPair, check_model_dir, load_pair, resolve_model_path
from distillscope.rollout import (
    InterleavePolicy,
    MixturePolicy,
    RolloutPolicy,
    SpectrumPolicy,
    StudentPolicy,
    TeacherPolicy,
)
from distillscope.tasks import Task, resolve_task


def preflight(cfg: RunConfig) -> Task:
    """Check every path a run reads before any model loads; returns the resolved task.

    Raises a one-line ``ValueError`` naming the path: a missing or incomplete model directory
    (``ModelLoadError``), a missing task file, or the first bad row of a task file.
    """
    m = cfg.model
    for spec in (m.teacher, m.student):
        check_model_dir(resolve_model_path(spec), m.allow_pickle)
    if cfg.task.file is not None and not Path(cfg.task.file).is_file():
        raise FileNotFoundError(f"task.file {cfg.task.file} does not exist")
    task = resolve_task(cfg.task.name, cfg.task.file)
    if cfg.eval.harder_task:
        resolve_task(cfg.eval.harder_task)
    return task


def preflight_all(configs: list[RunConfig]) -> None:
    """``preflight`` once per distinct set of inputs (a study checks every run before its first)."""
    seen = set()
    for cfg in configs:
        m, t = cfg.model, cfg.task
        key = (m.teacher, m.student, m.allow_pickle, t.name, str(t.file), cfg.eval.harder_task)
        if key not in seen:
            seen.add(key)
            preflight(cfg)


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
