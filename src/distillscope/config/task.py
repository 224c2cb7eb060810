"""``task``: what the student is trained on — a testbed task by name, or a dataset task's rows
from a local file or the Hub (docs/tasks.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from distillscope.config.section import Float, Int, _Section
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
        "testbed",
        description="compact testbed prompts or the models' chat template (other tasks than "
        "the testbed's: chat when the student's tokenizer has one)",
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
        given = [k for k in ("file", "dataset", "fields") if getattr(self, k) is not None]
        if given and task is None:
            from distillscope.tasks.catalogue import TASKS, unknown_task

            if self.name not in TASKS:  # the name is the mistake, not the rows
                raise ValueError(f"task.name: {unknown_task(self.name)}")
        for key in given:
            if task is None:
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

    def identity(self) -> str:
        """The dataset a run trains and is evaluated on, as one string (the results table's
        ``task.dataset``): the task name for a testbed task, else the name, the file or hub id
        (``/subset``), the split expression and the revision, e.g. ``mcq:data/med.jsonl`` or
        ``medreason:UCSC-VLAA/MedReason:test@v1``. Two files of one kind are two identities."""
        from distillscope.tasks.hub_tasks import DATASET_TASKS

        task = DATASET_TASKS.get(self.name)
        if task is None:
            return self.name
        if self.file is not None:
            return f"{self.name}:{self.file}"
        source = self.dataset or task.dataset
        if source is None:  # mcq or math without rows: refused when the task loads
            return self.name
        text = f"{self.name}:{source.path}" + (f"/{source.name}" if source.name else "")
        text += f":{source.split}" if source.split else ""
        return text + (f"@{source.revision}" if source.revision else "")


#: Name prefixes of the testbed's tasks (distillscope.tasks.catalogue): the tasks the shipped
#: testbed models, the testbed's harder variant and its skill suite were built for.
TESTBED_TASK_PREFIXES = ("tb-", "skill-")


def is_testbed_task(name: str) -> bool:
    """Whether ``task.name`` is one of the testbed's tasks (``tb-countdown3``, ``skill-add``)."""
    return name.startswith(TESTBED_TASK_PREFIXES)


def has_chat_template(model_dir: Path) -> bool | None:
    """Whether the tokenizer in ``model_dir`` carries a chat template (``chat_template`` in
    ``tokenizer_config.json``, or a ``chat_template.jinja``/``.json`` beside it); None when the
    directory holds no tokenizer config to read. Read as JSON: the config layer loads no
    tokenizer (and no torch)."""
    if any((model_dir / f"chat_template.{ext}").is_file() for ext in ("jinja", "json")):
        return True
    path = model_dir / "tokenizer_config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return bool(config.get("chat_template")) if isinstance(config, dict) else None


def _given(section: Any) -> dict[str, Any]:
    """A section of raw config data as a dict of the fields given (absent or None: none)."""
    if isinstance(section, BaseModel):
        return section.model_dump(exclude_unset=True)
    return dict(section) if isinstance(section, dict) else {}


def real_run_defaults(data: Any) -> Any:
    """Raw ``RunConfig`` data with the defaults of a run on a task that is not the testbed's.

    The testbed's defaults stay for testbed tasks. For any other task, unless named:
    ``task.prompt_format`` is ``chat`` when the student's tokenizer has a chat template
    (``testbed`` for the shipped testbed student, which has none; any other tokenizer without
    one is refused in one line naming the field), and ``eval.harder_task`` and
    ``eval.skill_items`` are off (null, 0) — the testbed's Countdown variant and arithmetic
    skills measure nothing about a real task, so a run never reports them under its label."""
    if not isinstance(data, dict):
        return data
    task, evaluation = _given(data.get("task")), _given(data.get("eval"))
    name = task.get("name", TaskConfig.model_fields["name"].default)
    if not isinstance(name, str) or is_testbed_task(name):
        return data
    out = dict(data)
    if "prompt_format" not in task:
        out["task"] = {**task, "prompt_format": _default_prompt_format(data, name)}
    out["eval"] = {"harder_task": None, "skill_items": 0, **evaluation}
    return out


def _default_prompt_format(data: dict[str, Any], task_name: str) -> str:
    """``chat`` for a student whose tokenizer has a chat template, ``testbed`` for the testbed's
    student; ValueError (one line) for another student without one."""
    student = _given(data.get("model")).get("student", "testbed:student")
    if not isinstance(student, str) or student.startswith("testbed:"):
        return "testbed"
    template = has_chat_template(Path(student).expanduser())
    if template is False:
        raise ValueError(
            f"task.name={clip(task_name, 60)} is not a testbed task and the tokenizer of "
            f"model.student={clip(student, 80)} has no chat template: set task.prompt_format "
            "(chat, after adding a template; testbed, the bare question without one)"
        )
    return "chat"  # a template, or no tokenizer here to read (preflight names a missing model)
