"""The split's edges: the fraction's bounds, the split seed reaching every draw, and exactly when
a draw gives up (a scripted task whose identities are known)."""

from __future__ import annotations

import random

import pytest

from distillscope.tasks import Problem, split
from distillscope.tasks.catalogue import COUNTDOWN_3_TB
from distillscope.tasks.split import (
    draw_training,
    held_out_problems,
    is_held_out,
    problem_identity,
    training_problems_from,
)

#: Row identities and their side at the default fraction and seed (tests/tasks/test_split_golden).
TRAINING_IDS, HELD_IDS = ("id:3", "id:4", "id:5"), ("id:1", "id:2")


class Scripted:
    """A task that draws the identities of ``script`` in order, then repeats the last."""

    name = "scripted"

    def __init__(self, script: list[str]):
        self.script, self.drawn = list(script), 0

    def sample(self, rng: random.Random) -> Problem:
        ident = self.script[min(self.drawn, len(self.script) - 1)]
        self.drawn += 1
        return Problem(prompt=ident, answer=None, meta={"identity": ident})


def test_ids_of_the_script_are_on_their_sides():
    assert not any(is_held_out(i) for i in TRAINING_IDS) and all(is_held_out(i) for i in HELD_IDS)


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5])
def test_a_fraction_outside_the_open_unit_interval_is_refused(fraction):
    with pytest.raises(ValueError, match=r"eval fraction must be in \(0, 1\)"):
        is_held_out("id:1", fraction)


def test_the_split_seed_reaches_every_draw():
    # under another split seed the partition differs, and every draw follows that partition
    ids = [problem_identity(p) for p in training_problems_from(COUNTDOWN_3_TB, 42, 400, seed=7)]
    assert not any(is_held_out(i, seed=7) for i in ids)
    assert any(is_held_out(i) for i in ids)  # some are held out under the default seed
    rng = random.Random(3)
    drawn = [problem_identity(draw_training(COUNTDOWN_3_TB, rng, seed=7)) for _ in range(400)]
    assert not any(is_held_out(i, seed=7) for i in drawn) and any(is_held_out(i) for i in drawn)
    held = [problem_identity(p) for p in held_out_problems(COUNTDOWN_3_TB, 43, 50, seed=7)]
    assert all(is_held_out(i, seed=7) for i in held) and not all(is_held_out(i) for i in held)


def test_a_draw_gives_up_after_exactly_max_misses_repeats(monkeypatch):
    monkeypatch.setattr(split, "_MAX_MISSES", 5)
    a, b = TRAINING_IDS[:2]
    # one accepted, 5 repeats (misses), then a new one: within the limit
    ok = split._distinct(Scripted([a] * 6 + [b]), 0, 2, False, 0.2, 0)
    assert [problem_identity(p) for p in ok] == [a, b]
    with pytest.raises(ValueError, match="only 1 distinct training problems found, 2 asked"):
        split._distinct(Scripted([a] * 7 + [b]), 0, 2, False, 0.2, 0)
    # misses before the first item count from zero too (held-out items on the training side)
    first = split._distinct(Scripted([HELD_IDS[0]] * 5 + [a]), 0, 1, False, 0.2, 0)
    assert [problem_identity(p) for p in first] == [a]
    with pytest.raises(ValueError, match="only 0 distinct training problems found, 1 asked"):
        split._distinct(Scripted([HELD_IDS[0]] * 6 + [a]), 0, 1, False, 0.2, 0)
    # the count restarts after each accepted item: 5 misses before each of three items pass
    ok = split._distinct(Scripted([a] * 6 + [b] * 6 + [TRAINING_IDS[2]]), 0, 3, False, 0.2, 0)
    assert len(ok) == 3


def test_a_held_out_draw_that_gives_up_says_held_out(monkeypatch):
    monkeypatch.setattr(split, "_MAX_MISSES", 3)
    with pytest.raises(ValueError, match="task 'scripted': only 1 distinct held-out problems"):
        held_out_problems(Scripted([HELD_IDS[0]] * 10), 0, 2)


def test_a_training_draw_with_nothing_left_names_the_task(monkeypatch):
    monkeypatch.setattr(split, "_MAX_MISSES", 50)
    task = Scripted(list(HELD_IDS))
    with pytest.raises(
        ValueError, match="task 'scripted': no training problem left outside the held-out split"
    ):
        draw_training(task, random.Random(0))
    assert task.drawn == 50
