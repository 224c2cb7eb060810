"""Which teacher each prompt of a run with several teachers reads (``model.teachers``, routed by
``model.route``; docs/teachers.md), and each teacher's own one-teacher config.

Torch-free, so that a run checks its routes before any model loads (:func:`check_routes`, part of
the teacher's check, :func:`~distillscope.teacher.checks.check_teacher`):

- ``by: column`` — a task-file column names each row's teacher; every row of the file is
  checked, and a row naming no teacher of ``model.teachers`` is one line naming the file, the
  row and the value;
- ``by: task`` — every prompt reads the teacher named like the run's task (``task.name``): a
  study with a ``task.name`` axis gives each task its own teacher;
- ``by: mixture`` — each prompt draws its teacher with probability w_i / Σ w from a uniform
  u = sha256(seed, prompt) / 2⁶⁴: the same prompt reads the same teacher at every step and in
  every run of one seed, whatever else the run varies.

Every prompt's rollouts of one prompt group share its teacher, since they share the prompt.
"""

from __future__ import annotations

from pathlib import Path

from distillscope.config import ConfigError, RunConfig, run_config_from_dict, served_url
from distillscope.tasks.base import Problem, Task
from distillscope.teacher.manifest import MANIFEST, read_manifest


def teacher_names(cfg: RunConfig) -> list[str]:
    """The names of ``model.teachers`` in the order written ([] for a one-teacher run)."""
    return list(cfg.model.teachers or {})


def teacher_config(cfg: RunConfig, name: str) -> RunConfig:
    """Teacher ``name``'s one-teacher config: ``model.teacher`` its directory or URL — or, for a
    teacher-cache directory (it holds ``manifest.json``), the teacher the cache was built from
    and ``model.teacher_cache`` the directory — and every other field ``cfg``'s. It is
    validated as a one-teacher run is (a served teacher scores student-written rollouts only,
    at temperature 1, …); an error is one line starting ``model.teachers.<name>``."""
    spec = cfg.model.teachers[name]
    data = cfg.model_dump(mode="json")
    model = data["model"]
    model.update(teacher=spec, teachers=None, route=None)
    if (Path(spec) / MANIFEST).is_file():
        manifest = read_manifest(Path(spec))  # teacher_dir: resolved (older: as typed)
        built = manifest.get("teacher_dir") or manifest["identity"].get("model.teacher", spec)
        model.update(teacher=built, teacher_cache=spec)
    # the settings of the other kind of teacher do not apply to this one
    drop = ("teacher_dtype", "teacher_device") if served_url(spec) else ("teacher_server",)
    for field in drop:
        model.pop(field)
    return run_config_from_dict(data, f"model.teachers.{name}")


def teacher_configs(cfg: RunConfig) -> list[RunConfig]:
    """Each teacher's one-teacher config (:func:`teacher_config`); ``[cfg]`` for one teacher."""
    names = teacher_names(cfg)
    return [teacher_config(cfg, name) for name in names] if names else [cfg]


def primary_config(cfg: RunConfig) -> RunConfig:
    """The config whose teacher the run's model pair holds: ``cfg`` itself, or with several
    teachers the first one's (:func:`teacher_config`)."""
    names = teacher_names(cfg)
    return teacher_config(cfg, names[0]) if names else cfg


def check_routes(cfg: RunConfig, task: Task) -> None:
    """ConfigError in one line, before any model loads, unless every prompt of ``task`` has a
    teacher: a task route's teacher named like the task, every row of a column route's task
    file naming a teacher. A run of several teachers that write rollouts samples on the
    built-in sampler only. (Each teacher's own inputs:
    :func:`~distillscope.teacher.checks.check_teacher`, via :func:`teacher_configs`.)"""
    names = teacher_names(cfg)
    if not names:
        return
    route, listed = cfg.model.route, ", ".join(names)
    if cfg.rollout.engine != "builtin" and cfg.rollout.policy != "student":
        raise ConfigError(
            f"model.teachers: rollout.policy={cfg.rollout.policy} samples with each prompt's "
            "teacher on the built-in sampler; set rollout.engine=builtin"
        )
    if route.by == "task" and cfg.task.name not in names:
        raise ConfigError(
            f"model.route.by=task: no teacher named task.name={cfg.task.name} in "
            f"model.teachers ({listed})"
        )
    if route.by != "column":
        return
    rows = getattr(task, "problems", None)
    if rows is None:
        raise ConfigError(
            f"model.route.by=column reads a task file's column; task.name={task.name} has no rows"
        )
    for problem in rows():
        where = problem.meta.get("source", task.name)
        extra = problem.meta.get("extra", {})
        if route.column not in extra:
            raise ConfigError(f"{where}: no column {route.column!r} (model.route.column)")
        if str(extra[route.column]) not in names:
            raise ConfigError(
                f"{where}: column {route.column!r} names teacher "
                f"{str(extra[route.column])[:40]!r}, not one of model.teachers ({listed})"
            )


def routes(cfg: RunConfig, problems: list[Problem]) -> list[str]:
    """The teacher name of each problem (module doc); [] for a one-teacher run."""
    route = cfg.model.route
    if route is None:
        return []
    return [route.teacher_of(p, cfg.task.name, cfg.seed) for p in problems]
