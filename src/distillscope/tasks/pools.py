"""Which problems a run sees: task lookup by config name, and the two sides of the split.

Every training source (the run's problem pool, hence the teacher-rollout cache, which only
ever rolls out prompts drawn from it) reads :func:`training_problems`; every evaluation set
reads :func:`evaluation_problems`. Both sides come from one partition of problem identities
(:mod:`distillscope.tasks.split`, docs/method.md §7), so no evaluation item is ever trained on.

Dataset tasks (the file tasks ``mcq``/``math`` and the hub tasks of
:mod:`~distillscope.tasks.hub_tasks`) split their rows once:

- when rows carry a ``split`` column, it decides: ``train`` is training; ``eval``, ``test`` and
  ``validation`` are held out (any other value, or a row without it, is an error);
- otherwise a stable hash of each row's identity (Countdown rows: the sorted operands and the
  target; others: ``id``, else the normalised text) puts a share ``task.eval_fraction`` of
  identities in the held-out side.

Rows sharing an identity never straddle the split: with a ``split`` column an identity that
any row labels held-out is held out everywhere (its training copies are dropped). Held-out
rows are evaluated in file order, once per identity.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distillscope.tasks.base import Problem, Task
from distillscope.tasks.catalogue import get_task
from distillscope.tasks.hub import DatasetSpec
from distillscope.tasks.hub_tasks import DATASET_TASKS, load_dataset_task
from distillscope.tasks.split import (
    EVAL_FRACTION,
    SPLIT_SEED,
    held_out_problems,
    is_held_out,
    problem_identity,
    training_problems_from,
)

#: Size of the seeded training pool ([P]: 5,000 Countdown-3 candidates, seed 42).
TRAIN_SPLIT_SIZE = 5_000
TRAIN_SPLIT_SEED = 42
#: Values of a file's ``split`` column, by side.
TRAIN_LABELS = ("train",)
EVAL_LABELS = ("eval", "test", "validation")


def resolve_task(task: str | Any, path: Path | None = None) -> Task:
    """The task a run config's ``task`` section names, or the task called ``task``.

    ``task`` is the section (``cfg.task``: its ``name``, ``file``, ``dataset`` and ``fields``
    are read) or a name, with ``path`` standing for ``task.file``. A dataset task (``mcq``,
    ``math``, ``medreason``, …; :mod:`~distillscope.tasks.hub_tasks`) is read from its rows;
    any other name is a registered task, and ``path`` is not read.
    """
    if isinstance(task, str):
        name, file, dataset, fields = task, path, None, None
    else:
        name, file, dataset, fields = task.name, task.file, task.dataset, task.fields
    if name not in DATASET_TASKS:
        return get_task(name)
    spec = None
    if dataset is not None:
        spec = DatasetSpec(dataset.path, dataset.name, dataset.split, dataset.revision)
    return load_dataset_task(name, file=file, dataset=spec, fields=fields)


def training_problems(task: Task, fraction: float = EVAL_FRACTION) -> list[Problem]:
    """The run's training pool: a file task's training rows, or 5,000 seeded draws from a
    generated task's training partition (repeats allowed, as the task draws them)."""
    if _rows(task) is not None:
        return file_split(task, fraction)[0]
    return training_problems_from(task, TRAIN_SPLIT_SEED, TRAIN_SPLIT_SIZE)


def evaluation_problems(
    task: Task, seed: int, n: int, fraction: float = EVAL_FRACTION
) -> list[Problem]:
    """``n`` distinct held-out problems: a file task's first ``n`` held-out rows, or ``n``
    problems of a generated task's held-out partition drawn with ``random.Random(seed)``."""
    if _rows(task) is None:
        return held_out_problems(task, seed, n)
    held_out = file_split(task, fraction)[1]
    if len(held_out) < n:
        raise ValueError(
            f"{_file_of(task)}: only {len(held_out)} held-out rows, evaluation needs {n}; "
            "lower eval.items / eval.coverage_items, raise task.eval_fraction or add eval rows"
        )
    return held_out[:n]


def file_split(task: Task, fraction: float) -> tuple[list[Problem], list[Problem]]:
    """``(training rows, distinct held-out rows)`` of a file task, in file order (module doc)."""
    rows = _rows(task) or []
    labels = [p.meta.get("extra", {}).get("split") for p in rows]
    if any(label is not None for label in labels):
        pairs = zip(rows, labels, strict=True)
        held = {problem_identity(p) for p, label in pairs if _is_eval(p, label)}
        how = "its split column"
    else:
        ids = {problem_identity(p) for p in rows}
        held = {i for i in ids if is_held_out(i, fraction, SPLIT_SEED)}
        how = f"task.eval_fraction={fraction}"
    train = [p for p in rows if problem_identity(p) not in held]
    seen: set[str] = set()
    evals = []
    for p in rows:
        ident = problem_identity(p)
        if ident in held and ident not in seen:
            seen.add(ident)
            evals.append(p)
    for side, got in (("training", train), ("held-out", evals)):
        if not got:
            raise ValueError(f"{_file_of(task)}: {how} leaves no {side} rows of {len(rows)}")
    return train, evals


def _rows(task: Task) -> list[Problem] | None:
    problems = getattr(task, "problems", None)
    return list(problems()) if problems is not None else None


def _is_eval(problem: Problem, label: object) -> bool:
    text = str(label).strip().lower() if isinstance(label, str) else None
    if text in TRAIN_LABELS:
        return False
    if text in EVAL_LABELS:
        return True
    raise ValueError(
        f"{problem.meta.get('source', '?')}: field 'split' must be one of "
        f"{', '.join(TRAIN_LABELS + EVAL_LABELS)} when the file has a split column, got {label!r}"
    )


def _file_of(task: Task) -> str:
    """The task file's path, from its first row's ``source`` (``<path> line N``)."""
    rows = _rows(task) or []
    source = str(rows[0].meta.get("source", task.name)) if rows else task.name
    return source.rsplit(" ", 2)[0] if source != task.name else source
