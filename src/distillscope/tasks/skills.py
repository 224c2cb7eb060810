"""The testbed's skill suite: what the student knows before distillation (its forgetting benchmark).

Five exact-match skills with compact prompts; the completion is the bare answer.

| skill | prompt | completion |
|---|---|---|
| add  | ``add 23,58:``       | ``81`` |
| sub  | ``sub 58,23:``       | ``35`` |
| mul  | ``mul 7,12:``        | ``84`` |
| sort | ``sort 5,2,9,1:``    | ``1,2,5,9`` |
| rev  | ``rev abcde:``       | ``edcba`` |
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass

from distillscope.tasks.base import Problem


def _add(rng: random.Random) -> tuple[str, str]:
    a, b = rng.randint(0, 99), rng.randint(0, 99)
    return f"add {a},{b}:", str(a + b)


def _sub(rng: random.Random) -> tuple[str, str]:
    a, b = sorted((rng.randint(0, 99), rng.randint(0, 99)), reverse=True)
    return f"sub {a},{b}:", str(a - b)


def _mul(rng: random.Random) -> tuple[str, str]:
    a, b = rng.randint(1, 9), rng.randint(1, 20)
    return f"mul {a},{b}:", str(a * b)


def _sort(rng: random.Random) -> tuple[str, str]:
    xs = [rng.randint(0, 9) for _ in range(rng.randint(3, 6))]
    return f"sort {','.join(map(str, xs))}:", ",".join(map(str, sorted(xs)))


def _rev(rng: random.Random) -> tuple[str, str]:
    word = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 7)))
    return f"rev {word}:", word[::-1]


SKILLS: dict[str, Callable[[random.Random], tuple[str, str]]] = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "sort": _sort,
    "rev": _rev,
}

_CHAT_INSTRUCTIONS = {
    "add": "Add the two numbers.",
    "sub": "Subtract the second number from the first.",
    "mul": "Multiply the two numbers.",
    "sort": "Sort the digits in ascending order, comma-separated.",
    "rev": "Write the word backwards.",
}


@dataclass(frozen=True)
class SkillTask:
    """One skill of the suite; exact match of the stripped completion against the answer."""

    skill: str

    def __post_init__(self) -> None:
        if self.skill not in SKILLS:
            raise ValueError(f"unknown skill {self.skill!r}; choose one of {sorted(SKILLS)}")

    @property
    def name(self) -> str:
        return f"skill-{self.skill}"

    def sample(self, rng: random.Random) -> Problem:
        prompt, answer = SKILLS[self.skill](rng)
        return Problem(prompt=prompt, answer=answer, meta={"solution": answer})

    def score(self, problem: Problem, completion: str) -> float:
        return float(completion.strip() == problem.answer)

    def chat_messages(self, problem: Problem) -> list[dict[str, str]]:
        body = problem.prompt.split(" ", 1)[1].rstrip(":")
        user = f"{_CHAT_INSTRUCTIONS[self.skill]} Answer with the result only.\n{body}"
        return [{"role": "user", "content": user}]


def skill_suite() -> list[SkillTask]:
    """All skills of the testbed's forgetting benchmark, in a fixed order."""
    return [SkillTask(s) for s in SKILLS]
