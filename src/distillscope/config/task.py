"""``task``: what the student is trained on — a testbed task by name, or a dataset task's rows
from a local file or the Hub (docs/tasks.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from distillscope.config.base import Float, Int, _Section
from distillscope.safeyaml import clip


class DatasetConfig(_Section):
    """Where a dataset task's rows come from (docs/tasks.md, "Dataset tasks")."""

    path: str = Field(
        description="hub id (org/name), a save_to_disk or data-file directory, a JSONL/Parquet file"
    )
    name: str | None = Field(
        None, description="the dataset's configuration (subset); null = default"
    )
    split: str | None = Field(
        None, description="split expression (train, test[:500], train+test); null = every split"
    )
    revision: str | None = Field(None, description="hub commit, tag or branch; null = latest")


class TaskConfig(_Section):
    name: str = Field("tb-countdown3", description="training task (see distillscope.tasks)")
    file: Path | None = Field(
        None, description="dataset tasks: a local JSONL/Parquet file of rows (mcq, math, …)"
    )
    dataset: DatasetConfig | None = Field(
        None,
        description="dataset tasks: {path, name, split, revision} of the rows; null = task.file "
        "or the task's default dataset",
    )
    fields: dict[str, str] | None = Field(
        None, description="dataset tasks: schema field → dataset column; null = the defaults"
    )
    prompt_format: Literal["testbed", "chat"] = Field(
        "testbed", description="compact testbed prompts or the models' chat template"
    )
    teacher_style_flag: bool = Field(
        False, description="teacher reads the style-flagged prompt, student the plain one"
    )
    teacher_instruction: str | None = Field(
        None,
        description="chat format: text only the teacher reads, added to its system message "
        "(e.g. Reason in Spanish.); null = none",
    )
    max_new_tokens: Int = Field(40, ge=1, description="completion length limit (tokens)")
    eval_fraction: Float = Field(
        0.2, gt=0, lt=1, description="dataset tasks without a split column: share held out"
    )

    @field_validator("dataset", mode="before")
    @classmethod
    def _dataset_path(cls, value: Any) -> Any:
        return {"path": value} if isinstance(value, str) else value  # task.dataset=org/name

    @model_validator(mode="after")
    def _fixed_split(self) -> TaskConfig:
        from distillscope.tasks.hub_tasks import DATASET_TASKS

        if self.eval_fraction != 0.2 and self.name not in DATASET_TASKS:
            raise ValueError(
                f"task.eval_fraction={self.eval_fraction} applies to dataset tasks "
                f"({', '.join(DATASET_TASKS)}); {clip(self.name, 60)} uses the fixed split its "
                "testbed was built on: remove it"
            )
        return self

    @model_validator(mode="after")
    def _rows_only_for_dataset_tasks(self) -> TaskConfig:
        from distillscope.tasks.hub_tasks import DATASET_TASKS, check_fields

        task = DATASET_TASKS.get(self.name)
        for key in ("file", "dataset", "fields"):
            if getattr(self, key) is not None and task is None:
                raise ValueError(
                    f"task.{key} is read only by dataset tasks ({', '.join(DATASET_TASKS)}), not "
                    f"by task.name={clip(self.name, 60)}; remove task.{key}"
                )
        if task is None:
            return self
        if self.file is not None and self.dataset is not None:
            raise ValueError(f"task.name={self.name} reads task.file or task.dataset; keep one")
        if task.needs_chat and self.prompt_format != "chat":
            raise ValueError(
                f"task.name={self.name} needs task.prompt_format=chat: its prompts are written "
                "for a chat model's template, which testbed models do not read"
            )
        check_fields(self.name, self.fields)
        return self

    @model_validator(mode="after")
    def _instruction_in_chat(self) -> TaskConfig:
        if self.teacher_instruction is None:
            return self
        if not self.teacher_instruction.strip():
            raise ValueError("task.teacher_instruction is empty; write the text or use null")
        if self.prompt_format != "chat":
            raise ValueError(
                "task.teacher_instruction needs task.prompt_format=chat (testbed models read the "
                "glyph flag: use task.teacher_style_flag)"
            )
        return self
