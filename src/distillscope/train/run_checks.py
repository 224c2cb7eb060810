"""A run's inputs checked before any model loads — without torch, so that a study can check
every run in the process that plans it.

:func:`preflight` is one run's check (the loop's, the cache builder's): :func:`check_extras`
(the optional extras it needs), then :func:`check_inputs` (the tasks, then the teacher side:
:func:`~distillscope.teacher.checks.check_teacher`). :func:`preflight_all` checks many runs,
each distinct set of inputs once; ``study.preflight.preflight_runs`` composes it with the pair
and evaluation checks into the one preflight every command calls.
"""

from __future__ import annotations

from pathlib import Path

from distillscope.config import RunConfig
from distillscope.tasks import Task, resolve_task
from distillscope.tasks.language import require_lingua
from distillscope.teacher.checks import check_teacher, check_teacher_caches


def preflight(cfg: RunConfig) -> Task:
    """Check every path a run reads before any model loads; returns the resolved task.

    Raises a one-line ``ValueError`` naming the path or field: a missing optional extra
    (:func:`check_extras`), a missing task file, the first bad row of a task file, or a dataset
    task's dataset that cannot be read (not cached under ``HF_DATASETS_OFFLINE=1``, a field the
    rows lack); then the teacher side (:func:`~distillscope.teacher.checks.check_teacher`): with
    several teachers every prompt's route, a missing or incomplete model directory
    (``ModelLoadError``), a served teacher that cannot be reached (``ServerError``), a teacher
    cache that does not fit the run.
    """
    check_extras(cfg)
    return check_inputs(cfg)


def check_inputs(cfg: RunConfig) -> Task:
    """The tasks and the teacher side of ``cfg`` (each teacher's model or server, its routes, a
    cached one's cache); returns the resolved task."""
    task = check_tasks(cfg)
    check_teacher(cfg, task)
    return task


def check_tasks(cfg: RunConfig) -> Task:
    """The task file there and every task of ``cfg`` (its own, the harder one, RLVR's) resolved:
    what training and every evaluation read; returns the run's task."""
    if cfg.task.file is not None and not Path(cfg.task.file).is_file():
        raise FileNotFoundError(f"task.file {cfg.task.file} does not exist")
    task = resolve_task(cfg.task)
    if cfg.eval.harder_task:
        resolve_task(cfg.eval.harder_task)
    if cfg.rlvr is not None:
        resolve_task(cfg.rlvr.task)
    return task


def evaluation_extras(cfg: RunConfig) -> None:
    """What ``cfg``'s evaluation needs installed: lingua to count answers in a language, the
    forgetting harness and its include_path."""
    if cfg.eval.style_language is not None:
        require_lingua()  # the language identifier's optional extra
    if cfg.eval.forgetting is not None:
        cfg.eval.forgetting.preflight()  # the harness installed, its include_path there


def check_extras(cfg: RunConfig) -> None:
    """Refuse a missing extra of the evaluation (:func:`evaluation_extras`), a LoRA student
    without peft and a tracker whose package is missing."""
    evaluation_extras(cfg)
    if cfg.model.lora is not None:
        cfg.model.lora.preflight()
    if cfg.log is not None:
        cfg.log.preflight()


def preflight_all(configs: list[RunConfig]) -> None:
    """:func:`preflight` of every run: the extras of each (before the first run's inputs), the
    inputs once per distinct set of them, and each other run's teacher caches (a cache must
    cover each run's seed and steps): a study checks every run before its first."""
    for cfg in configs:
        check_extras(cfg)
    seen = set()
    for cfg in configs:
        m, t = cfg.model, cfg.task
        rlvr_task = cfg.rlvr.task if cfg.rlvr is not None else None
        rows = t.model_dump_json(include={"name", "file", "dataset", "fields"})
        teachers = (m.teacher, str(m.teachers), str(m.route))
        key = (*teachers, m.student, m.allow_pickle, rows, cfg.eval.harder_task, rlvr_task)
        if key not in seen:
            seen.add(key)
            check_inputs(cfg)  # its caches among them
        else:
            check_teacher_caches(cfg)
