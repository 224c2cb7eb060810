"""The testbed's harder variant tb-countdown3-hard: its definition, draws and held-out items."""

import random

import pytest

from distillscope.tasks import evaluation_problems, get_task
from distillscope.tasks.catalogue import COUNTDOWN_3_HARD_TB, COUNTDOWN_3_TB, TB_MAX_TARGET
from distillscope.tasks.countdown import CountdownTask
from distillscope.tasks.hard import StructuredCountdownTask, first_steps
from distillscope.tasks.split import countdown_identity, is_held_out, problem_identity
from distillscope.tasks.verify import check_countdown


def test_first_steps_counts_distinct_first_equations():
    # (8+12)*5 is the only way to 100; 72 has three ways in (2*3, 2*12, 3*12)
    assert first_steps([5, 8, 12], 100) == {(8, "+", 12)}
    assert first_steps([12, 5, 8], 100) == {(8, "+", 12)}  # operand order does not matter
    assert first_steps([2, 3, 12], 72) == {(2, "*", 3), (2, "*", 12), (3, "*", 12)}
    assert first_steps([2, 3, 12], 99) == frozenset()  # unreachable


def test_the_registered_harder_variant_is_countdown3_with_one_two_digit_operand():
    task = get_task("tb-countdown3-hard")
    assert task is COUNTDOWN_3_HARD_TB
    assert task.base.n_operands == 3 and task.base.pool == tuple(range(1, 21))
    assert task.base.max_target == TB_MAX_TARGET
    assert (task.large_above, task.large_count, task.max_first_steps) == (10, 1, 1)


def test_draws_have_the_structure_and_a_verified_reference_solution():
    rng = random.Random(0)
    for _ in range(300):
        p = COUNTDOWN_3_HARD_TB.sample(rng)
        numbers, target = p.answer["numbers"], p.answer["target"]
        assert len(numbers) == 3 and 1 <= target <= TB_MAX_TARGET
        assert sorted(x > 10 for x in numbers) == [False, False, True]
        assert max(numbers) <= 20
        assert len(first_steps(numbers, target)) == 1
        assert p.prompt == f"cd {','.join(map(str, numbers))} to {target}:"
        assert check_countdown(numbers, target, p.meta["solution"])
        assert COUNTDOWN_3_HARD_TB.score(p, p.meta["solution"]) == 1.0
        assert problem_identity(p) == countdown_identity(numbers, target)


def test_draws_are_seeded():
    a = [COUNTDOWN_3_HARD_TB.sample(random.Random(5)).prompt for _ in range(3)]
    assert a == [COUNTDOWN_3_HARD_TB.sample(random.Random(5)).prompt for _ in range(3)]


def test_evaluation_items_are_held_out_distinct_and_disjoint_from_countdown3():
    items = evaluation_problems(COUNTDOWN_3_HARD_TB, 43, 200)  # the presets' eval_seed
    ids = [problem_identity(p) for p in items]
    assert len(set(ids)) == 200 and all(is_held_out(i) for i in ids)
    # no tb-countdown3 problem (all operands ≤ 10) has this structure, held out or not
    rng = random.Random(1)
    for _ in range(500):
        p = COUNTDOWN_3_TB.sample(rng)
        assert not COUNTDOWN_3_HARD_TB.admits(p.answer["numbers"], p.answer["target"])


def test_bad_structures_are_refused():
    base = CountdownTask("b", 3, tuple(range(1, 21)))
    with pytest.raises(ValueError, match="large_count"):
        StructuredCountdownTask("x", base, 10, 4, 1)
    with pytest.raises(ValueError, match="max_first_steps"):
        StructuredCountdownTask("x", base, 10, 1, 0)
