"""Harder Countdown variants: a Countdown task restricted to problems of a given structure.

The testbed's harder variant ``tb-countdown3-hard`` (docs/tasks.md, docs/testbed.md) keeps the
main task's three operands and target bound but asks for what the main task rarely does:

- one operand is a two-digit number (exactly one operand above 10, the others from 1..10), a
  mix of one- and two-digit numbers the student never combined before distillation, and
- only one first step leads to the target (:func:`first_steps`): the search has one way in,
  where most Countdown-3 problems have several.

Problems are drawn from a base :class:`~distillscope.tasks.countdown.CountdownTask` and redrawn
until they have that structure, so they keep the base task's prompt, verifier, reference
solution and canonical identity (the held-out split of :mod:`distillscope.tasks.split` applies
unchanged).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from distillscope.tasks.base import Problem
from distillscope.tasks.countdown import OPERATIONS, CountdownTask, solutions

_COMMUTATIVE = ("+", "*")


@lru_cache(maxsize=65_536)
def _first_steps(numbers: tuple[int, ...], target: int, operations: tuple[str, ...]) -> frozenset:
    found = set()
    for steps in solutions(list(numbers), target, operations):
        a, op, b, _ = steps[0]
        found.add((min(a, b), op, max(a, b)) if op in _COMMUTATIVE else (a, op, b))
    return frozenset(found)


def first_steps(
    numbers: list[int], target: int, operations: tuple[str, ...] = OPERATIONS
) -> frozenset[tuple[int, str, int]]:
    """The distinct first equations ``(a, op, b)`` of all solutions (``a+b`` and ``b+a`` are one).

    Exhaustive search (:func:`~distillscope.tasks.countdown.solutions`); meant for 3–4 operands.
    """
    return _first_steps(tuple(sorted(numbers)), target, tuple(operations))


@dataclass(frozen=True)
class StructuredCountdownTask:
    """A Countdown task restricted to problems with ``large_count`` operands above
    ``large_above`` and at most ``max_first_steps`` distinct first steps.

    Attributes:
        name: identifier used in configs and tables.
        base: the task problems are drawn from (its pool, operand count and target range).
        large_above / large_count: exactly ``large_count`` operands must exceed ``large_above``.
        max_first_steps: at most this many distinct first steps (:func:`first_steps`) solve it.
    """

    name: str
    base: CountdownTask
    large_above: int
    large_count: int
    max_first_steps: int

    def __post_init__(self) -> None:
        if not 0 <= self.large_count <= self.base.n_operands:
            raise ValueError(f"task {self.name!r}: large_count must be in 0..n_operands")
        if self.max_first_steps < 1:
            raise ValueError(f"task {self.name!r}: max_first_steps must be ≥ 1")

    def admits(self, numbers: list[int], target: int) -> bool:
        """True when ``numbers`` → ``target`` has the structure this task asks for."""
        if sum(x > self.large_above for x in numbers) != self.large_count:
            return False
        return len(first_steps(numbers, target, self.base.operations)) <= self.max_first_steps

    def sample(self, rng: random.Random) -> Problem:
        """Draw from ``base`` until a problem has the required structure."""
        while True:
            problem = self.base.sample(rng)
            if self.admits(problem.answer["numbers"], problem.answer["target"]):
                return problem

    def score(self, problem: Problem, completion: str) -> float:
        """1.0 when the completion solves the problem (either style), else 0.0."""
        return self.base.score(problem, completion)

    def chat_messages(self, problem: Problem) -> list[dict[str, str]]:
        """The [P] Countdown prompt of the base task."""
        return self.base.chat_messages(problem)
