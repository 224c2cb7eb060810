"""Named tasks: the presets of docs/method.md §7, their testbed-sized variants, and the skill
suite."""

from __future__ import annotations

from distillscope.safeyaml import quote
from distillscope.tasks.base import Task
from distillscope.tasks.countdown import PAPER_POOL, SMALL_POOL, CountdownTask
from distillscope.tasks.hard import StructuredCountdownTask
from distillscope.tasks.skills import SKILLS, SkillTask

# docs/method.md §7 exactly.
COUNTDOWN_3 = CountdownTask("countdown3", 3, PAPER_POOL)
COUNTDOWN_4 = CountdownTask("countdown4", 4, PAPER_POOL, max_target=10_000)
COUNTDOWN_4E = CountdownTask("countdown4e", 4, SMALL_POOL)

# Testbed-sized variants: operands 1..10 and targets ≤ 100, so that a model of a few million
# parameters trained on two CPU cores can solve them (see docs/testbed.md).
TB_MAX_TARGET = 100
COUNTDOWN_3_TB = CountdownTask("tb-countdown3", 3, SMALL_POOL, max_target=TB_MAX_TARGET)
COUNTDOWN_4_TB = CountdownTask("tb-countdown4", 4, SMALL_POOL, max_target=TB_MAX_TARGET)
COUNTDOWN_4E_TB = CountdownTask("tb-countdown4e", 4, SMALL_POOL, max_target=TB_MAX_TARGET)

# The testbed's harder variant (evaluation only; docs/testbed.md "Harder variant"): Countdown-3
# with exactly one two-digit operand (11..20, the others from 1..10) and a single first step
# that reaches the target. tb-countdown4e sits at the floor for every distilled testbed student
# (pass@10 0–2%), this one within reach (BENCHMARKS.md "Harder variant").
COUNTDOWN_3_HARD_TB = StructuredCountdownTask(
    "tb-countdown3-hard",
    CountdownTask("tb-countdown3-hard-base", 3, tuple(range(1, 21)), max_target=TB_MAX_TARGET),
    large_above=10,
    large_count=1,
    max_first_steps=1,
)

TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        COUNTDOWN_3,
        COUNTDOWN_4,
        COUNTDOWN_4E,
        COUNTDOWN_3_TB,
        COUNTDOWN_4_TB,
        COUNTDOWN_4E_TB,
        COUNTDOWN_3_HARD_TB,
    )
}
TASKS.update({f"skill-{s}": SkillTask(s) for s in SKILLS})


def get_task(name: str) -> Task:
    """Look a task up by name; the error lists every task name, the dataset tasks' included
    (:mod:`distillscope.tasks.hub_tasks`, read from a file or dataset by ``task.name``)."""
    try:
        return TASKS[name]
    except KeyError:
        raise ValueError(unknown_task(name)) from None


def unknown_task(name: str) -> str:
    """The line naming an unknown task: the closest name, then every task name, the dataset
    tasks' included (:mod:`distillscope.tasks.hub_tasks`, read from a file or dataset)."""
    import difflib

    from distillscope.tasks.hub_tasks import DATASET_TASKS  # it imports this module's kin

    close = difflib.get_close_matches(str(name), [*TASKS, *DATASET_TASKS], n=1, cutoff=0.5)
    hint = f" (did you mean {quote(close[0], 60)}?)" if close else ""
    return (
        f"unknown task {quote(name, 60)}{hint}; choose one of {', '.join(sorted(TASKS))}, or a "
        f"dataset task ({', '.join(DATASET_TASKS)}; docs/tasks.md)"
    )
