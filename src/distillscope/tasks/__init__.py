"""Tasks: what the models are asked and how their answers are scored (see ``base.Task``).

Built-in tasks (Countdown, the testbed skill suite) are looked up by name with
:func:`get_task`; datasets on local disk load with :class:`MultipleChoiceTask` /
:class:`BoxedMathTask` ``.from_file(path)`` or :func:`load_file_task`, and datasets of the Hub or
saved by ``datasets`` with :func:`load_dataset_task` (``medreason``, ``sciknoweval``,
``numina-math``, ``countdown-hub``, or ``mcq``/``math`` with a :class:`DatasetSpec`).
:func:`resolve_task` takes a run config's ``task`` section and returns whichever it names.
"""

from __future__ import annotations

from distillscope.tasks.base import STYLE_FLAG, Problem, Task, make_split, styled
from distillscope.tasks.catalogue import get_task
from distillscope.tasks.countdown import CountdownTask
from distillscope.tasks.files import (
    FILE_TASKS,
    BoxedMathTask,
    MultipleChoiceTask,
    load_file_task,
)
from distillscope.tasks.hub import DatasetSpec
from distillscope.tasks.hub_tasks import HUB_TASKS, load_dataset_task
from distillscope.tasks.pools import (
    evaluation_problems,
    file_split,
    resolve_task,
    training_problems,
)
from distillscope.tasks.skills import SkillTask, skill_suite
from distillscope.tasks.verify import check_countdown

__all__ = [
    "FILE_TASKS",
    "HUB_TASKS",
    "STYLE_FLAG",
    "BoxedMathTask",
    "CountdownTask",
    "DatasetSpec",
    "MultipleChoiceTask",
    "Problem",
    "SkillTask",
    "Task",
    "check_countdown",
    "evaluation_problems",
    "file_split",
    "get_task",
    "load_dataset_task",
    "load_file_task",
    "make_split",
    "resolve_task",
    "skill_suite",
    "styled",
    "training_problems",
]
