"""Dataset tasks: problems read from a dataset's rows, by a run config's ``task`` section
(docs/tasks.md, "Dataset tasks").

Six names. ``mcq`` and ``math`` read any rows in the file schemas (:mod:`~distillscope.tasks.files`)
from ``task.file`` (as always) or ``task.dataset``; four more carry a default dataset and field
mapping, each overridable (``task.dataset``, ``task.fields``, or ``task.file`` for a local copy),
and render the prompts of docs/method.md §7 through the model's chat template:

==============  ===============================  ==========================================
name            default dataset (every split)    columns the defaults read → schema
==============  ===============================  ==========================================
medreason       UCSC-VLAA/MedReason              question, options (one text), answer (the
                                                 option's text) → multiple choice
sciknoweval     hicai-zju/SciKnowEval            question, choices ({text, label}),
                                                 answerKey → multiple choice
numina-math     AI-MO/NuminaMath-1.5             problem, answer → boxed math
countdown-hub   Jiayi-Pan/Countdown-Tasks-3to4   nums → numbers, target → Countdown
==============  ===============================  ==========================================

The defaults follow the datasets' published cards and viewers; none of the four could be
downloaded where this was written, so the adapters (:mod:`~distillscope.tasks.adapters`) are
tested on rows written in those schemas, not on the published files. NuminaMath-1.5 is the
release whose rows carry the final answer in a column (NuminaMath-CoT's only in its solution);
its rows without one (``proof``, ``notfound``) are skipped. MedReason rows without lettered
options or whose answer names no single option, and SciKnowEval rows without choices or answer
key (its open-ended tasks), are skipped too; a source left without any row is an error.

``task.fields`` maps schema fields to the dataset's columns (``{question: Question}``); a column
not mapped keeps its name. Columns outside the schema land in ``Problem.meta["extra"]`` (for the
four hub tasks only those listed in :class:`DatasetTask` ``keep``, so that long reasoning
columns are not held in memory). A required field missing from the rows is one line naming the
dataset, the field and the columns present.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from distillscope.safeyaml import clip, quote
from distillscope.tasks.adapters import (
    CountdownRowsTask,
    countdown_problem,
    medreason_row,
    numina_row,
    sciknoweval_row,
)
from distillscope.tasks.base import Problem, Task
from distillscope.tasks.files import (
    FILE_TASKS,
    BoxedMathTask,
    MultipleChoiceTask,
    _math_problem,
    _mcq_problem,
    load_file_task,
    read_rows,
)
from distillscope.tasks.hub import DatasetSpec, open_dataset

Row = dict[str, Any]


@dataclass(frozen=True)
class Schema:
    """The fields a kind of task reads from a row, and how it builds problems and the task."""

    required: tuple[str, ...]
    optional: tuple[str, ...]
    build: Callable[[Row, str, int], Problem]
    make: Callable[[str, tuple[Problem, ...]], Task]

    @property
    def fields(self) -> tuple[str, ...]:
        """Every field ``task.fields`` may map: the required ones, then the optional ones."""
        return self.required + self.optional


SCHEMAS = {
    "mcq": Schema(
        ("question", "options", "answer"), ("id", "split"), _mcq_problem, MultipleChoiceTask
    ),
    "math": Schema(("problem", "answer"), ("id", "split"), _math_problem, BoxedMathTask),
    "countdown": Schema(("numbers", "target"), ("split",), countdown_problem, CountdownRowsTask),
}


@dataclass(frozen=True)
class DatasetTask:
    """A named dataset task (module docstring).

    Attributes:
        name: the ``task.name`` it is used by.
        schema: a key of :data:`SCHEMAS`.
        dataset: the default dataset; None when the task needs ``task.file`` or ``task.dataset``.
        fields: the default mapping, schema field → column (fields not listed keep their name).
        adapt: published row → schema row, None for a row the task skips (``adapters``).
        skips: which rows ``adapt`` skips, for the message when none is left.
        keep: columns outside the schema kept in ``Problem.meta["extra"]``; None keeps all.
    """

    name: str
    schema: str
    dataset: DatasetSpec | None = None
    fields: Mapping[str, str] = field(default_factory=dict)
    adapt: Callable[[Row, str], Row | None] | None = None
    skips: str = ""
    keep: tuple[str, ...] | None = None

    @property
    def needs_chat(self) -> bool:
        """Whether its prompts are written for a chat model (every hub task's are)."""
        return self.dataset is not None


DATASET_TASKS: dict[str, DatasetTask] = {
    t.name: t
    for t in (
        DatasetTask("mcq", "mcq"),
        DatasetTask("math", "math"),
        DatasetTask(
            "medreason",
            "mcq",
            DatasetSpec("UCSC-VLAA/MedReason"),
            adapt=medreason_row,
            skips="rows without lettered options or whose answer names no single option",
            keep=("dataset_name", "id_in_dataset"),
        ),
        DatasetTask(
            "sciknoweval",
            "mcq",
            DatasetSpec("hicai-zju/SciKnowEval"),
            {"options": "choices", "answer": "answerKey"},
            sciknoweval_row,
            "rows without choices or answer key",
            ("domain", "type", "details"),
        ),
        DatasetTask(
            "numina-math",
            "math",
            DatasetSpec("AI-MO/NuminaMath-1.5"),
            adapt=numina_row,
            skips="rows whose answer is empty, proof or notfound",
            keep=("source", "problem_type", "question_type"),
        ),
        DatasetTask(
            "countdown-hub",
            "countdown",
            DatasetSpec("Jiayi-Pan/Countdown-Tasks-3to4"),
            {"numbers": "nums"},
            keep=(),
        ),
    )
}
#: The dataset tasks with a default hub dataset (they need ``task.prompt_format: chat``).
HUB_TASKS = tuple(name for name, t in DATASET_TASKS.items() if t.needs_chat)


def check_fields(name: str, fields: Mapping[str, str] | None) -> None:
    """Refuse a ``task.fields`` key that is not a field of ``name``'s schema (one line)."""
    allowed = SCHEMAS[DATASET_TASKS[name].schema].fields
    for key in fields or {}:
        if key not in allowed:
            raise ValueError(
                f"task.fields: {quote(key, 60)} is not a field of task.name={name} "
                f"(fields: {', '.join(allowed)})"
            )


def load_dataset_task(
    name: str,
    *,
    file: str | os.PathLike | None = None,
    dataset: DatasetSpec | None = None,
    fields: Mapping[str, str] | None = None,
) -> Task:
    """The dataset task ``name`` over the rows of ``file``, ``dataset`` or its default dataset.

    ``fields`` updates the task's default mapping (schema field → column). Raises a one-line
    ValueError for a bad mapping, an unreadable dataset, a missing field or a bad row.
    """
    entry = DATASET_TASKS[name]
    schema = SCHEMAS[entry.schema]
    check_fields(name, fields)
    if file is not None and dataset is not None:
        raise ValueError(f"task.name={name} reads task.file or task.dataset, not both; keep one")
    if file is not None and not fields and name in FILE_TASKS:
        return load_file_task(name, file)  # the file tasks as always
    mapping = {f: f for f in schema.required} | dict(entry.fields) | dict(fields or {})
    if file is not None:
        label, rows = str(file), _checked_file_rows(file, mapping, schema, fields)
    else:
        spec = dataset or entry.dataset
        if spec is None:
            raise ValueError(
                f"task.name={name} needs task.file (a JSONL or Parquet file) or task.dataset"
            )
        label, rows = spec.label, _dataset_rows(spec, mapping, schema, fields, entry.keep)
    problems, skipped = [], 0
    for index, (where, raw) in enumerate(rows):
        row = _schema_row(raw, mapping, schema, entry.keep)
        if entry.adapt is not None:
            row = entry.adapt(row, where)
            if row is None:
                skipped += 1
                continue
        problems.append(schema.build(row, where, index))
    if not problems:
        why = f"all {skipped} skipped: {entry.skips}" if skipped else "it holds none"
        raise ValueError(f"{label}: no usable rows ({why}); check task.dataset and task.fields")
    return schema.make(name, tuple(problems))


def _schema_row(raw: Row, mapping: dict[str, str], schema: Schema, keep: tuple | None) -> Row:
    """``raw`` with mapped columns renamed to their fields; other columns per ``keep``."""
    row = {f: raw[col] for f, col in mapping.items() if col in raw}
    row.update({f: raw[f] for f in schema.optional if f not in mapping and f in raw})
    used = set(mapping.values()) | set(row)
    row.update({k: v for k, v in raw.items() if k not in used and (keep is None or k in keep)})
    return row


def _check_columns(
    label: str, columns: list[str], mapping: dict[str, str], schema: Schema, fields: Mapping | None
) -> None:
    """Every required field, and every field ``task.fields`` maps, names a column present."""
    given = dict(fields or {})
    shown = clip(", ".join(columns), 200) or "none"
    for f in [*schema.required, *(k for k in given if k not in schema.required)]:
        column = mapping[f]
        if column in columns:
            continue
        if f in given:
            raise ValueError(
                f"{label}: task.fields.{f}={quote(column, 60)} is not a field (fields: {shown})"
            )
        raise ValueError(
            f"{label}: no field {quote(column, 60)} (fields: {shown}); map it with task.fields.{f}"
        )


def _checked_file_rows(
    file: str | os.PathLike, mapping: dict[str, str], schema: Schema, fields: Mapping | None
) -> Iterator[tuple[str, Row]]:
    """The rows of a JSONL/Parquet file; the first row's columns are checked against the
    mapping (later rows are checked field by field as they are built)."""
    first = True
    for where, row in read_rows(file):
        if first:
            _check_columns(str(file), list(row), mapping, schema, fields)
            first = False
        yield where, row


def _dataset_rows(
    spec: DatasetSpec,
    mapping: dict[str, str],
    schema: Schema,
    fields: Mapping | None,
    keep: tuple[str, ...] | None,
) -> Iterator[tuple[str, Row]]:
    opened = open_dataset(spec)
    columns = opened.columns
    _check_columns(spec.label, columns, mapping, schema, fields)
    split_column = mapping.get("split", "split")
    label_splits = len(opened.parts) > 1 and split_column not in columns
    read = None
    if keep is not None:
        wanted = {*mapping.values(), *schema.optional, *keep}
        read = [c for c in columns if c in wanted]
    return opened.rows(read, label_splits)
