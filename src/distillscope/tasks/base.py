"""The task interface: problems, their prompts, and the scores of completions.

A task draws problems from a seeded ``random.Random`` and scores completions. Verifiers parse
text; they never evaluate it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

#: Prefix that asks a testbed model to answer in the alternative style (see ``countdown``).
STYLE_FLAG = "alt "


@dataclass(frozen=True)
class Problem:
    """One problem of a task.

    ``prompt`` is the compact prompt the testbed models read (e.g. ``cd 3,5,7 to 56:``);
    ``answer`` is what the verifier needs; ``meta`` holds extra facts (a reference solution,
    the source row of a file-backed task, ...).
    """

    prompt: str
    answer: Any
    meta: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Task(Protocol):
    """What every task provides.

    - ``name``: a short identifier used in configs and result tables.
    - ``sample(rng)``: draw one problem; every random draw comes from ``rng``.
    - ``score(problem, completion)``: reward in [0, 1]; malformed text scores 0, never raises.
    - ``chat_messages(problem)``: the system + user messages for chat models.
    """

    name: str

    def sample(self, rng: random.Random) -> Problem: ...

    def score(self, problem: Problem, completion: str) -> float: ...

    def chat_messages(self, problem: Problem) -> list[dict[str, str]]: ...


def make_split(task: Task, seed: int, n: int) -> list[Problem]:
    """Draw ``n`` problems from ``task`` with ``random.Random(seed)``.

    Python's Mersenne Twister and its integer draws are stable across platforms and versions,
    so the same seed gives the same problems on any machine.
    """
    rng = random.Random(seed)
    return [task.sample(rng) for _ in range(n)]


def styled(prompt: str) -> str:
    """The same prompt with the alternative-style flag the testbed teacher understands."""
    return STYLE_FLAG + prompt
