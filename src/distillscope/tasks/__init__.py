"""Tasks: what the models are asked and how their answers are scored (see ``base.Task``).

Built-in tasks (Countdown, the testbed skill suite) are looked up by name with
:func:`get_task`; datasets on local disk load with :class:`MultipleChoiceTask` /
:class:`BoxedMathTask` ``.from_file(path)`` or :func:`load_file_task`.
"""

from __future__ import annotations

from distillscope.tasks.base import STYLE_FLAG, Problem, Task, make_split, styled
from distillscope.tasks.countdown import CountdownTask
from distillscope.tasks.files import (
    FILE_TASKS,
    BoxedMathTask,
    MultipleChoiceTask,
    load_file_task,
)
from distillscope.tasks.pools import (
    evaluation_problems,
    file_split,
    resolve_task,
    training_problems,
)
from distillscope.tasks.registry import get_task
from distillscope.tasks.skills import SkillTask, skill_suite
from distillscope.tasks.verify import check_countdown

__all__ = [
    "FILE_TASKS",
    "STYLE_FLAG",
    "BoxedMathTask",
    "CountdownTask",
    "MultipleChoiceTask",
    "Problem",
    "SkillTask",
    "Task",
    "check_countdown",
    "evaluation_problems",
    "file_split",
    "get_task",
    "load_file_task",
    "make_split",
    "resolve_task",
    "skill_suite",
    "styled",
    "training_problems",
]
