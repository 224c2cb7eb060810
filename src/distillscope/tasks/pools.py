"""Which problems a run sees: task lookup by config name, and seeded problem pools."""

from __future__ import annotations

from pathlib import Path

from distillscope.tasks.base import Problem, Task, make_split
from distillscope.tasks.files import load_file_task
from distillscope.tasks.registry import get_task

#: Size of the seeded training split ([P]: 5,000 Countdown-3 candidates, seed 42).
TRAIN_SPLIT_SIZE = 5_000
TRAIN_SPLIT_SEED = 42


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
