"""Disjoint held-out splits: a problem's canonical identity decides, once, which side it is on.

Two independent random draws of a small problem space overlap (39.5% of 200 testbed
Countdown-3 items did), so "held out" cannot mean "drawn with another seed". Instead every
problem has a canonical *identity* (docs/method.md §7):

- Countdown: the sorted operand multiset and the target (``countdown:1,3,5>15``), whatever the
  operand order in the prompt and whichever Countdown task drew it, so a Countdown-4E evaluation
  item is also kept out of Countdown-4 training;
- file tasks: the row's ``id`` when it has one, else its normalised text;
- anything else: the normalised prompt.

A stable hash of ``(split_seed, identity)`` puts a fixed fraction of identities in the held-out
partition. Evaluation draws only held-out problems; every training source (training pools,
teacher-rollout caches, the testbed's pretraining and sharpening data) draws only the rest, so
the two can never share an item, at any pool size or seed.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterable

from distillscope.tasks.base import STYLE_FLAG, Problem, Task

#: Share of each task's problem identities reserved for evaluation.
EVAL_FRACTION = 0.2
#: Seed of the partition of built-in tasks (the testbed's weights were built with it).
SPLIT_SEED = 0
#: Draws without a new held-out (or training) identity before a split gives up.
_MAX_MISSES = 200_000

_SPACE = re.compile(r"\s+")


def problem_identity(problem: Problem) -> str:
    """The canonical identity of ``problem`` (see the module docstring)."""
    given = problem.meta.get("identity")
    if given is not None:
        return str(given)
    row_id = problem.meta.get("id")  # a file task's row id (built-in tasks have none)
    if row_id is not None:
        return f"id:{row_id}"
    text = problem.prompt.removeprefix(STYLE_FLAG)
    return "text:" + _SPACE.sub(" ", text).strip().lower()


def countdown_identity(numbers: Iterable[int], target: int) -> str:
    """``countdown:<sorted operands>><target>``: the same for every order of the operands."""
    return f"countdown:{','.join(map(str, sorted(numbers)))}>{target}"


def is_held_out(identity: str, fraction: float = EVAL_FRACTION, seed: int = SPLIT_SEED) -> bool:
    """True when ``identity`` belongs to the evaluation partition (a stable SHA-256 bucket)."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"eval fraction must be in (0, 1), got {fraction}")
    digest = hashlib.sha256(f"{seed}:{identity}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def draw_training(
    task: Task, rng: random.Random, fraction: float = EVAL_FRACTION, seed: int = SPLIT_SEED
) -> Problem:
    """One problem from ``task``'s training partition (held-out identities are redrawn)."""
    for _ in range(_MAX_MISSES):
        problem = task.sample(rng)
        if not is_held_out(problem_identity(problem), fraction, seed):
            return problem
    raise ValueError(f"task {task.name!r}: no training problem left outside the held-out split")


def _distinct(
    task: Task, rng_seed: int, n: int, held_out: bool, fraction: float, seed: int
) -> list[Problem]:
    rng = random.Random(rng_seed)
    seen: set[str] = set()
    out: list[Problem] = []
    misses = 0
    while len(out) < n:
        problem = task.sample(rng)
        ident = problem_identity(problem)
        if ident in seen or is_held_out(ident, fraction, seed) != held_out:
            misses += 1
            if misses > _MAX_MISSES:
                side = "held-out" if held_out else "training"
                raise ValueError(
                    f"task {task.name!r}: only {len(out)} distinct {side} problems found, "
                    f"{n} asked for; lower the number of items"
                )
            continue
        misses = 0
        seen.add(ident)
        out.append(problem)
    return out


def held_out_problems(
    task: Task,
    rng_seed: int,
    n: int,
    fraction: float = EVAL_FRACTION,
    seed: int = SPLIT_SEED,
) -> list[Problem]:
    """``n`` distinct held-out problems, in the order a ``random.Random(rng_seed)`` draws them."""
    return _distinct(task, rng_seed, n, True, fraction, seed)


def training_problems_from(
    task: Task,
    rng_seed: int,
    n: int,
    fraction: float = EVAL_FRACTION,
    seed: int = SPLIT_SEED,
) -> list[Problem]:
    """``n`` training-partition problems drawn with ``random.Random(rng_seed)`` (repeats allowed,
    as the task's own distribution has them)."""
    rng = random.Random(rng_seed)
    return [draw_training(task, rng, fraction, seed) for _ in range(n)]


def overlap(eval_problems: Iterable[Problem], train_problems: Iterable[Problem]) -> int:
    """How many evaluation problems share an identity with a training problem (must be 0)."""
    train_ids = {problem_identity(p) for p in train_problems}
    return sum(problem_identity(p) in train_ids for p in eval_problems)
