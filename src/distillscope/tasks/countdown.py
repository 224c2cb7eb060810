"""Countdown: combine every given number with + − × and exact ÷ to reach a target (docs/method.md
§7).

Problems are built forwards — draw operands, then apply random valid operations until one
number is left — so every problem is solvable by construction and its reference solution is
stored in ``meta["solution"]``.

Testbed prompts are compact: ``cd 3,5,7 to 56:``; the completion is the equation list,
``3+5=8,8*7=56``. With the style flag (``alt cd 3,5,7 to 56:``) the testbed teacher answers in
the alternative style ``3p5>8;8x7>56`` (operators p m x d, ``>`` for ``=``, ``;`` between steps).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from distillscope.tasks.base import Problem
from distillscope.tasks.split import countdown_identity
from distillscope.tasks.verify import check_countdown

PAPER_POOL: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 20, 25, 50, 75)
SMALL_POOL: tuple[int, ...] = tuple(range(1, 11))
OPERATIONS = ("+", "-", "*", "/")
ALT_GLYPHS = {"+": "p", "-": "m", "*": "x", "/": "d"}

SYSTEM_PROMPT = "You are a careful arithmetic solver."
USER_TEMPLATE = (
    "Using the numbers below, reach the target with the operations +, -, * and /. "
    "Use each number exactly once; divisions must be exact integer divisions. "
    "Think inside <think></think>, then give the equations inside <answer></answer> as a "
    "compact comma-separated list, e.g. <answer>2+3=5,5*4=20</answer>.\n"
    "Numbers: {numbers}\nTarget: {target}"
)


def apply_op(a: int, op: str, b: int) -> int | None:
    """Result of ``a op b`` when it is a valid Countdown step (positive, exact), else None."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b if a > b else None
    if op == "*":
        return a * b
    return a // b if b > 0 and a % b == 0 else None


_ALT_TRANSLATION = str.maketrans({**ALT_GLYPHS, "=": ">", ",": ";"})


def to_alt_style(solution: str) -> str:
    """Rewrite a plain-style solution (``3+5=8,8*7=56``) in the alt style (``3p5>8;8x7>56``)."""
    return solution.translate(_ALT_TRANSLATION)


def format_steps(steps: list[tuple[int, str, int, int]], style: str = "plain") -> str:
    """Write ``(a, op, b, r)`` steps in the plain (``a+b=r,...``) or alt (``apb>r;...``) style."""
    if style == "plain":
        return ",".join(f"{a}{op}{b}={r}" for a, op, b, r in steps)
    return ";".join(f"{a}{ALT_GLYPHS[op]}{b}>{r}" for a, op, b, r in steps)


@dataclass(frozen=True)
class CountdownTask:
    """A Countdown family member.

    Attributes:
        name: identifier used in configs and tables.
        n_operands: how many numbers each problem gives.
        pool: operands are drawn from this pool with replacement.
        min_target / max_target: inclusive target range; problems outside are redrawn.
        operations: allowed operations, a subset of ``+ - * /``.
    """

    name: str
    n_operands: int
    pool: tuple[int, ...]
    min_target: int = 1
    max_target: int | None = None
    operations: tuple[str, ...] = OPERATIONS

    def __post_init__(self) -> None:
        if self.n_operands < 2:
            raise ValueError(f"countdown task {self.name!r}: n_operands must be ≥ 2")
        if not self.pool or min(self.pool) < 1:
            raise ValueError(f"countdown task {self.name!r}: pool must hold positive integers")
        bad = set(self.operations) - set(OPERATIONS)
        if bad or not self.operations:
            raise ValueError(f"countdown task {self.name!r}: operations must be among + - * /")

    def sample(self, rng: random.Random) -> Problem:
        """Draw operands and a random valid combination of all of them; redraw off-range targets."""
        while True:
            numbers = [rng.choice(self.pool) for _ in range(self.n_operands)]
            steps = self._random_solution(numbers, rng)
            if steps is None:
                continue
            target = steps[-1][3]
            if target < self.min_target or (self.max_target and target > self.max_target):
                continue
            return Problem(
                prompt=f"cd {','.join(map(str, numbers))} to {target}:",
                answer={"numbers": numbers, "target": target},
                meta={
                    "solution": format_steps(steps),
                    "identity": countdown_identity(numbers, target),
                },
            )

    def _random_solution(
        self, numbers: list[int], rng: random.Random
    ) -> list[tuple[int, str, int, int]] | None:
        pool = list(numbers)
        steps = []
        while len(pool) > 1:
            i, j = rng.sample(range(len(pool)), 2)
            a, b = pool[i], pool[j]
            choices = [(op, r) for op in self.operations if (r := apply_op(a, op, b)) is not None]
            if not choices:
                return None
            op, r = rng.choice(choices)
            steps.append((a, op, b, r))
            pool = [v for k, v in enumerate(pool) if k not in (i, j)] + [r]
        return steps

    def score(self, problem: Problem, completion: str) -> float:
        """1.0 when the completion solves the problem (either style), else 0.0."""
        ans = problem.answer
        return float(check_countdown(ans["numbers"], ans["target"], completion))

    def chat_messages(self, problem: Problem) -> list[dict[str, str]]:
        """The [P] Countdown prompt: system role plus instructions, numbers and target."""
        return countdown_messages(problem.answer["numbers"], problem.answer["target"])


def countdown_messages(numbers: list[int], target: int) -> list[dict[str, str]]:
    """The [P] Countdown chat prompt (docs/method.md §7): the system role, then the instructions,
    ``Numbers: [...]`` and ``Target: N`` as the user turn."""
    user = USER_TEMPLATE.format(numbers=list(numbers), target=target)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def solutions(numbers: list[int], target: int, operations: tuple[str, ...] = OPERATIONS) -> list:
    """Every valid step sequence (``(a, op, b, r)`` lists) that turns ``numbers`` into ``target``.

    Exhaustive search; meant for small operand counts (tests, dataset checks).
    """
    found: list[list[tuple[int, str, int, int]]] = []

    def search(pool: list[int], steps: list[tuple[int, str, int, int]]) -> None:
        if len(pool) == 1:
            if pool[0] == target:
                found.append(list(steps))
            return
        for i in range(len(pool)):
            for j in range(len(pool)):
                if i == j:
                    continue
                for op in operations:
                    r = apply_op(pool[i], op, pool[j])
                    if r is None:
                        continue
                    rest = [v for k, v in enumerate(pool) if k not in (i, j)] + [r]
                    search(rest, steps + [(pool[i], op, pool[j], r)])

    search(list(numbers), [])
    return found
